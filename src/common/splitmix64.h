/*
 * splitmix64.h -- mop's one pseudo-random primitive: SplitMix64 (Steele,
 * Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
 *
 * Every generator in mop is built on these two functions: the engine's
 * xoshiro256** is seeded through them (src/nn/rng.c), the glue's shuffles
 * use them directly (src/pg/prng.c), and the search cores draw from them
 * (src/search/mop_search.h, src/search/sched.c).  Each of those seeds its
 * state from the user's seed with a constant of its own, so that the same
 * seed gives independent streams to, say, the data shuffle and the weight
 * initialisation; changing any of those constants changes every result
 * that a seed reproduces.
 *
 * Plain C99, header only, no dependencies: the engine, the search cores,
 * the glue and the CUDA backend all include it.
 */
#ifndef MOP_SPLITMIX64_H
#define MOP_SPLITMIX64_H

#include <stdint.h>

#define MOP_SPLITMIX64_GAMMA UINT64_C(0x9E3779B97F4A7C15)

/* The output SplitMix64 gives from state x: a well-mixed 64-bit hash of x. */
static inline uint64_t
mop_splitmix64_hash(uint64_t x)
{
	uint64_t	z = x + MOP_SPLITMIX64_GAMMA;

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* Next 64 random bits of the generator whose state is *state. */
static inline uint64_t
mop_splitmix64_next(uint64_t *state)
{
	uint64_t	x = *state;

	*state = x + MOP_SPLITMIX64_GAMMA;
	return mop_splitmix64_hash(x);
}

#endif							/* MOP_SPLITMIX64_H */
