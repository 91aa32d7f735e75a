/*
 * prng.c -- the glue's own deterministic pseudo-random generator.
 *
 * mop_prepare's shuffle and the per-buffer reshuffle of training must be
 * reproducible from a seed and independent of PostgreSQL's random(), so the
 * glue uses SplitMix64 (src/common/splitmix64.h) with a state of its own.
 */
#include "postgres.h"

#include "mop.h"
#include "common/splitmix64.h"

/* Seed the generator. */
void
mop_prng_seed(MopRng *r, uint64 seed)
{
	r->s = seed ^ UINT64CONST(0x6a09e667f3bcc909);
}

/* Next 64 random bits. */
uint64
mop_prng_next(MopRng *r)
{
	return mop_splitmix64_next(&r->s);
}

/* Uniform integer in [0, n) without modulo bias (n > 0). */
uint64
mop_prng_below(MopRng *r, uint64 n)
{
	uint64		limit = UINT64_MAX - (UINT64_MAX % n);
	uint64		v;

	do
		v = mop_prng_next(r);
	while (v >= limit);
	return v % n;
}

/* Fisher-Yates shuffle of idx[0..n). */
void
mop_shuffle_index(int64 *idx, int64 n, MopRng *r)
{
	for (int64 i = n - 1; i > 0; i--)
	{
		int64		j = (int64) mop_prng_below(r, (uint64) i + 1);
		int64		t = idx[i];

		idx[i] = idx[j];
		idx[j] = t;
	}
}
