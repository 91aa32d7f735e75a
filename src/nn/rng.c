/*
 * rng.c -- the engine's private PRNG: xoshiro256** seeded through splitmix64.
 *
 * Every random choice the engine makes (initial weights, dropout masks,
 * shuffles) comes from a generator owned by one model, so the same seed gives
 * the same bits on every machine, and nothing depends on global state.
 */
#include "nn_internal.h"
#include "../common/splitmix64.h"


/* Seed a generator from (seed, stream): distinct streams are independent. */
void
nn_rng_seed(uint64_t s[4], uint64_t seed, uint64_t stream)
{
	uint64_t	x = seed ^ (stream * UINT64_C(0xD1B54A32D192ED03));

	for (int i = 0; i < 4; i++)
		s[i] = mop_splitmix64_next(&x);
	if ((s[0] | s[1] | s[2] | s[3]) == 0)
		s[0] = 1;
}

static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* Next 64 random bits. */
uint64_t
nn_rng_next(uint64_t s[4])
{
	uint64_t	result = rotl(s[1] * 5, 7) * 9;
	uint64_t	t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* Uniform float in [0, 1) with 24 random bits. */
float
nn_rng_uniform(uint64_t s[4])
{
	return (float) (nn_rng_next(s) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform integer in [0, bound) by multiply-shift (bound > 0). */
uint64_t
nn_rng_below(uint64_t s[4], uint64_t bound)
{
	return (uint64_t) (((unsigned __int128) nn_rng_next(s) * bound) >> 64);
}
