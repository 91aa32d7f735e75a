/*
 * fuzz_mut.h -- the mutation engine shared by mop's fuzzers: the engine-level
 * fuzzer (test/unit/test_fuzz.c, thousands of cases a second) and the
 * generator of cases for the SQL-level fuzzer (test/fuzz/fuzz_gen.c, used by
 * test/sh/fuzz.sh).  Header-only; links against the engine (src/nn), whose
 * blob checksum and plan it uses to reseal and to repair mutated blobs so
 * that mutations reach past the checksum and the parameter-count checks.
 *
 * Model blobs (layout in src/nn/serialize.c) are mutated structure-aware:
 * the header, every spec field (ints, floats, the seed), the counters, the
 * RNG state, the class weights, the stored counts and the weights are known
 * by offset; a
 * mutation is one to four of
 *   bit flips, bytes set to 0x00/0xFF/0x7F/0x80/0x01/0xFE, int32 fields set
 *   to boundary values (0, -1, 1, 2^16, 2^31-1, -2^31, ...), float fields
 *   set to NaN/Inf/-0/1e38/denormals, int64 fields (counters, counts,
 *   header lengths) set to 0/-1/2^62/2^63-1/-2^63, truncations, extensions,
 *   two spec fields swapped (e.g. in_h and in_c, units and filters), two
 *   layer records swapped, a layer record duplicated or removed, a range
 *   spliced from another blob, header fields (version, header size, payload
 *   length, checksum) overwritten;
 * then, usually, the blob is resealed (length and checksum recomputed) and,
 * often, repaired: if its spec still decodes, the stored parameter counts
 * and the weight payload are resized to what that spec needs, so the
 * decoder accepts a model with a mutated architecture and the caller can
 * drive it through training, evaluation and prediction.
 *
 * Packed buffers (x: rows x features float32, y: one float32 per row, as
 * mop_prepare writes them) are mutated with special floats (NaN, Inf, huge,
 * negative and fractional labels), truncations and extensions by whole and
 * partial rows and by 1..3 bytes, and bit flips.
 *
 * Every case is drawn from its own generator seeded by (seed, case number),
 * so one case can be replayed alone.
 */
#ifndef MOP_FUZZ_MUT_H
#define MOP_FUZZ_MUT_H

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

/* the engine's checksum (src/nn/serialize.c; not in the public header) */
uint64_t	nn_blob_checksum(const void *data, size_t n);

/* blob layout, as in src/nn/serialize.c */
#define FZ_HDR 32
#define FZ_SPEC_HEAD 16			/* in_h, in_w, in_c, n_layers */
#define FZ_LAYER 56			/* 14 fields (version 4 on) */
#define FZ_SPEC_TAIL 96			/* loss .. seed, then the lr schedule (version 2) */
#define FZ_COUNTERS 36
#define FZ_RNG 32
#define FZ_CW_COUNT 4			/* the class weights' count (version 3), then the weights */
#define FZ_COUNTS 16

/* a blob may grow by this much through mutations (callers allocate it) */
#define FZ_SLACK 4096

/* Repair only blobs whose repaired payload stays below this many bytes. */
#ifndef FZ_REPAIR_MAX
#define FZ_REPAIR_MAX (8u << 20)
#endif

typedef struct fz_rng
{
	uint64_t	s;
} fz_rng;

/* splitmix64: tiny, and good enough to pick mutations */
static inline uint64_t
fz_next(fz_rng *r)
{
	uint64_t	z = (r->s += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static inline uint64_t
fz_below(fz_rng *r, uint64_t n)
{
	return n ? fz_next(r) % n : 0;
}

/* The generator of case i of a pass seeded with seed. */
static inline void
fz_seed_case(fz_rng *r, uint64_t seed, uint64_t i)
{
	r->s = seed * UINT64_C(0x2545F4914F6CDD1D) ^ (i + 1) * UINT64_C(0x9E3779B97F4A7C15);
	(void) fz_next(r);
}

/* Append a formatted note to a case description. */
static inline void
fz_note(char *desc, size_t dlen, const char *fmt,...)
{
	size_t		used = strlen(desc);
	va_list		ap;

	if (used + 2 >= dlen)
		return;
	if (used)
	{
		desc[used++] = ';';
		desc[used] = '\0';
	}
	va_start(ap, fmt);
	vsnprintf(desc + used, dlen - used, fmt, ap);
	va_end(ap);
}

static const int32_t fz_int32s[] = {
	0, 1, -1, 2, 3, 4, 5, 6, 7, 8, 16, 64, 255, 1024, 1025, 4096, 65535, 65536,
	65537, 1 << 20, 1 << 24, (1 << 24) + 1, 1 << 28, 1 << 30, INT32_MAX,
	INT32_MIN, INT32_MIN + 1, -2, -65536
};
static const int64_t fz_int64s[] = {
	0, 1, -1, 2, 32, 1 << 20, INT64_C(1) << 31, INT64_C(1) << 32,
	INT64_C(1) << 53, INT64_C(1) << 62, INT64_MAX, INT64_MAX - 1, INT64_MIN,
	INT64_MIN + 1, -2
};

/* An interesting float: NaN, infinities, extremes, denormals, near-boundaries. */
static inline float
fz_float(fz_rng *r)
{
	static const float v[] = {
		0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 0.999999f, 1.0000001f, 1e-8f,
		1e-45f, 1e-38f, 1e6f, 1e30f, 1e38f, -1e38f, FLT_MAX, -FLT_MAX,
		65536.0f, 2147483648.0f, 3.5f, 1e-3f
	};
	uint64_t	k = fz_below(r, 24);

	if (k == 21)
		return NAN;
	if (k == 22)
		return INFINITY;
	if (k == 23)
		return -INFINITY;
	return v[k];
}

static inline int32_t
fz_int32(fz_rng *r, int32_t old)
{
	uint64_t	k = fz_below(r, 4);

	/* wrapping arithmetic: the mutator itself must stay defined */
	if (k == 0)
		return (int32_t) ((uint32_t) old + (uint32_t) fz_below(r, 7) - 3u);	/* a small nudge */
	if (k == 1)
		return (int32_t) ((uint32_t) old * 2u);
	return fz_int32s[fz_below(r, sizeof(fz_int32s) / sizeof(fz_int32s[0]))];
}

/* Read/write little-endian fields of b. */
static inline int32_t
fz_get32(const unsigned char *b, size_t off)
{
	int32_t		v;

	memcpy(&v, b + off, 4);
	return v;
}
static inline void
fz_put32(unsigned char *b, size_t off, int32_t v)
{
	memcpy(b + off, &v, 4);
}
static inline void
fz_putf(unsigned char *b, size_t off, float v)
{
	memcpy(b + off, &v, 4);
}
static inline void
fz_put64(unsigned char *b, size_t off, int64_t v)
{
	memcpy(b + off, &v, 8);
}

/* Where the parts of a blob are (from its stored layer count, if sane). */
typedef struct fz_layout
{
	int			n_layers;		/* 0: unknown (blob too short or count insane) */
	size_t		spec_end;		/* first byte after the spec */
	size_t		counters;		/* offsets of the parts after the spec */
	size_t		rng;
	size_t		cw;				/* the class weights' count (version 3 on) */
	int32_t		n_cw;			/* how many follow it (0 if none or insane) */
	size_t		counts;
	size_t		floats;
} fz_layout;

static inline fz_layout
fz_layout_of(const unsigned char *b, size_t len)
{
	fz_layout	L;
	int32_t		n = len >= FZ_HDR + FZ_SPEC_HEAD ? fz_get32(b, FZ_HDR + 12) : 0;

	memset(&L, 0, sizeof(L));
	if (n < 1 || n > NN_MAX_LAYERS)
		return L;
	L.n_layers = n;
	L.spec_end = FZ_HDR + FZ_SPEC_HEAD + (size_t) n * FZ_LAYER + FZ_SPEC_TAIL;
	L.counters = L.spec_end;
	L.rng = L.counters + FZ_COUNTERS;
	L.cw = L.rng + FZ_RNG;
	L.counts = L.cw;
	if (fz_get32(b, 8) >= 3)
	{
		/* a count that does not fit the blob is read as none */
		int32_t		n = len >= L.cw + FZ_CW_COUNT ? fz_get32(b, L.cw) : 0;

		L.n_cw = n > 0 && n <= 65536 && L.cw + FZ_CW_COUNT + 4 * (size_t) n <= len ? n : 0;
		L.counts = L.cw + FZ_CW_COUNT + 4 * (size_t) L.n_cw;
	}
	L.floats = L.counts + FZ_COUNTS;
	return L;
}

/* Kinds of the spec's fields. */
enum
{
	FZ_I32, FZ_F32, FZ_I64
};

/* Pick a random field of the spec or counters: its offset and kind. */
static inline size_t
fz_pick_field(fz_rng *r, const fz_layout *L, int *kind)
{
	/* float fields of a layer record and of the spec's tail */
	static const int tail_f32[] = {16, 20, 28, 32, 36, 40, 44, 48, 52};
	uint64_t	k = fz_below(r, 10);

	if (k < 2)
	{
		*kind = FZ_I32;			/* input shape and layer count */
		return FZ_HDR + 4 * fz_below(r, 4);
	}
	if (k < 6)
	{
		size_t		rec = FZ_HDR + FZ_SPEC_HEAD + FZ_LAYER * fz_below(r, L->n_layers);
		size_t		f = fz_below(r, 14);

		*kind = f >= 10 ? FZ_F32 : FZ_I32;
		return rec + 4 * f;
	}
	if (k < 8)
	{
		size_t		tail = FZ_HDR + FZ_SPEC_HEAD + FZ_LAYER * (size_t) L->n_layers;
		size_t		f = fz_below(r, 23);

		if (f == 16)
		{
			*kind = FZ_I64;		/* the seed */
			return tail + 64;
		}
		if (f > 16)
		{
			/* the schedule: type, step_size, gamma, min_lr, epochs, warmup */
			*kind = (f == 19 || f == 20) ? FZ_F32 : FZ_I32;
			return tail + 72 + 4 * (f - 17);
		}
		*kind = FZ_I32;
		for (size_t j = 0; j < sizeof(tail_f32) / sizeof(tail_f32[0]); j++)
			if (tail_f32[j] == (int) (4 * f))
				*kind = FZ_F32;
		return tail + 4 * f;
	}
	if (k < 9)
	{
		if (L->counts > L->cw && fz_below(r, 3) == 0)
		{
			/* the class weights: their count or one of them */
			uint64_t	f = fz_below(r, (uint64_t) L->n_cw + 1);

			*kind = f == 0 ? FZ_I32 : FZ_F32;
			return L->cw + 4 * f;
		}
		*kind = FZ_I64;			/* counters: steps, rows, epochs, sub-epochs */
		return L->counters + 8 * fz_below(r, 4);
	}
	*kind = FZ_I32;				/* diverged flag */
	return L->counters + 32;
}

/* Recompute the header's payload length and checksum (an attacker can). */
static inline void
fz_reseal(unsigned char *b, size_t len)
{
	uint64_t	plen,
				sum;

	if (len < FZ_HDR)
		return;
	plen = len - FZ_HDR;
	sum = nn_blob_checksum(b + FZ_HDR, plen);
	memcpy(b + 16, &plen, 8);
	memcpy(b + 24, &sum, 8);
}

/*
 * Repair: if the (resealed) blob's spec decodes, resize its weight payload
 * and stored counts to what that spec needs, keeping what weights there
 * are and filling the rest with small values.  Returns the new length, or
 * len unchanged when the spec does not decode or the result would be large.
 */
static inline size_t
fz_repair(fz_rng *r, unsigned char *b, size_t len, size_t cap, char *desc, size_t dlen)
{
	nn_spec		spec;
	nn_memory	mem;
	fz_layout	L = fz_layout_of(b, len);
	int64_t		np,
				no,
				nb;
	size_t		need;

	fz_reseal(b, len);
	if (L.n_layers == 0 || nn_blob_spec(b, len, &spec, NULL) != NN_OK ||
		nn_spec_memory(&spec, &mem, NULL) != NN_OK)
		return len;
	np = (int64_t) (mem.params / sizeof(float));
	no = (int64_t) (mem.optimizer / sizeof(float));
	nb = (int64_t) (mem.buffers / sizeof(float));
	/* the weights and optimizer state, then the running statistics' count and values */
	need = L.floats + (size_t) (np + no) * sizeof(float) + 8 + (size_t) nb * sizeof(float);
	if (need > cap || need > FZ_REPAIR_MAX)
		return len;
	for (size_t off = len; off < need; off += 4)
	{
		float		v = (float) ((double) fz_below(r, 2001) / 10000.0 - 0.1);

		if (off + 4 <= need)
			fz_putf(b, off, v);
	}
	fz_put64(b, L.counts, np);
	fz_put64(b, L.counts + 8, no);
	fz_put64(b, L.floats + (size_t) (np + no) * sizeof(float), nb);
	fz_reseal(b, need);
	fz_note(desc, dlen, "repaired to %lld+%lld floats", (long long) np, (long long) no);
	return need;
}

/*
 * Mutate blob b (len bytes, buffer of cap >= len + FZ_SLACK) in place;
 * other is a second valid blob to splice from (may be NULL).  Returns the
 * new length; desc receives a one-line description of what was done.
 */
static inline size_t
fz_mutate_blob(fz_rng *r, unsigned char *b, size_t len, size_t cap,
			   const unsigned char *other, size_t olen, char *desc, size_t dlen)
{
	int			nmut = 1 + (int) fz_below(r, 4);
	int			header_touched = 0;

	desc[0] = '\0';
	for (int m = 0; m < nmut; m++)
	{
		fz_layout	L = fz_layout_of(b, len);
		uint64_t	op = fz_below(r, 100);

		if (L.n_layers == 0 || len < L.floats)
			op = op < 50 ? 0 : 60;	/* no structure left: bytes and lengths only */

		if (op < 8)
		{
			/* a bit flip anywhere (mostly in the structured part) */
			size_t		pos = (L.n_layers && fz_below(r, 2)) ? FZ_HDR + fz_below(r, L.floats - FZ_HDR)
			: fz_below(r, len ? len : 1);

			if (len == 0)
				continue;
			b[pos] ^= (unsigned char) (1u << fz_below(r, 8));
			fz_note(desc, dlen, "flip@%zu", pos);
			header_touched |= pos < FZ_HDR;
		}
		else if (op < 14)
		{
			static const unsigned char vals[] = {0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE};
			size_t		pos = FZ_HDR + fz_below(r, L.floats - FZ_HDR);
			unsigned char v = vals[fz_below(r, sizeof(vals))];

			b[pos] = v;
			fz_note(desc, dlen, "byte@%zu=%02x", pos, v);
		}
		else if (op < 40)
		{
			/* a spec or counter field set to a boundary value */
			int			kind;
			size_t		off = fz_pick_field(r, &L, &kind);

			if (kind == FZ_I32)
			{
				int32_t		v = fz_int32(r, fz_get32(b, off));

				fz_put32(b, off, v);
				fz_note(desc, dlen, "i32@%zu=%d", off, v);
			}
			else if (kind == FZ_F32)
			{
				float		v = fz_float(r);

				fz_putf(b, off, v);
				fz_note(desc, dlen, "f32@%zu=%g", off, (double) v);
			}
			else
			{
				int64_t		v = fz_int64s[fz_below(r, sizeof(fz_int64s) / sizeof(fz_int64s[0]))];

				fz_put64(b, off, v);
				fz_note(desc, dlen, "i64@%zu=%lld", off, (long long) v);
			}
		}
		else if (op < 46)
		{
			/* the stored parameter / optimizer counts */
			size_t		off = L.counts + 8 * fz_below(r, 2);
			int64_t		v = fz_int64s[fz_below(r, sizeof(fz_int64s) / sizeof(fz_int64s[0]))];

			fz_put64(b, off, v);
			fz_note(desc, dlen, "count@%zu=%lld", off, (long long) v);
		}
		else if (op < 52)
		{
			/* two int32 fields of the spec swapped (shapes, units/filters, ...) */
			int			k1,
						k2;
			size_t		a = fz_pick_field(r, &L, &k1),
						c = fz_pick_field(r, &L, &k2);
			int32_t		va,
						vc;

			if (k1 == FZ_I64 || k2 == FZ_I64)
				continue;
			va = fz_get32(b, a);
			vc = fz_get32(b, c);
			fz_put32(b, a, vc);
			fz_put32(b, c, va);
			fz_note(desc, dlen, "swap@%zu,%zu", a, c);
		}
		else if (op < 56)
		{
			/* two layer records swapped */
			size_t		i = fz_below(r, L.n_layers),
						j = fz_below(r, L.n_layers);
			unsigned char tmp[FZ_LAYER];
			size_t		base = FZ_HDR + FZ_SPEC_HEAD;

			memcpy(tmp, b + base + i * FZ_LAYER, FZ_LAYER);
			memmove(b + base + i * FZ_LAYER, b + base + j * FZ_LAYER, FZ_LAYER);
			memcpy(b + base + j * FZ_LAYER, tmp, FZ_LAYER);
			fz_note(desc, dlen, "swap-layers %zu,%zu", i, j);
		}
		else if (op < 60)
		{
			/* a layer record duplicated or removed (the count follows) */
			size_t		base = FZ_HDR + FZ_SPEC_HEAD;
			size_t		i = fz_below(r, L.n_layers);
			size_t		at = base + i * FZ_LAYER;

			if (fz_below(r, 2) && len + FZ_LAYER <= cap && L.n_layers < NN_MAX_LAYERS)
			{
				memmove(b + at + FZ_LAYER, b + at, len - at);
				len += FZ_LAYER;
				fz_put32(b, FZ_HDR + 12, L.n_layers + 1);
				fz_note(desc, dlen, "dup-layer %zu", i);
			}
			else if (L.n_layers > 1)
			{
				memmove(b + at, b + at + FZ_LAYER, len - at - FZ_LAYER);
				len -= FZ_LAYER;
				fz_put32(b, FZ_HDR + 12, L.n_layers - 1);
				fz_note(desc, dlen, "drop-layer %zu", i);
			}
		}
		else if (op < 68)
		{
			/* truncation */
			size_t		cut;
			uint64_t	k = fz_below(r, 4);

			if (len == 0)
				continue;
			cut = k == 0 ? fz_below(r, FZ_HDR + 1) :
				k == 1 ? len - 1 - fz_below(r, len < 8 ? len : 8) : fz_below(r, len);
			len = cut;
			fz_note(desc, dlen, "truncate to %zu", len);
		}
		else if (op < 74)
		{
			/* extension: zeros, random bytes or the tail again */
			size_t		add = 1 + fz_below(r, 64);
			uint64_t	k = fz_below(r, 3);

			if (len + add > cap)
				continue;
			for (size_t i = 0; i < add; i++)
				b[len + i] = k == 0 ? 0 : k == 1 ? (unsigned char) fz_next(r) : (len > i ? b[len - 1 - i] : 0);
			len += add;
			fz_note(desc, dlen, "extend by %zu", add);
		}
		else if (op < 80)
		{
			/* a range of weights or optimizer values set to one special float */
			size_t		nf = (len - L.floats) / 4;
			size_t		start,
						run;
			float		v = fz_float(r);

			if (nf == 0)
				continue;
			start = fz_below(r, nf);
			run = 1 + fz_below(r, nf - start);
			for (size_t i = 0; i < run; i++)
				fz_putf(b, L.floats + 4 * (start + i), v);
			fz_note(desc, dlen, "floats[%zu..+%zu]=%g", start, run, (double) v);
		}
		else if (op < 85)
		{
			/* the RNG state (all zero is a degenerate xoshiro state) */
			if (fz_below(r, 2))
				memset(b + L.rng, 0, FZ_RNG);
			else
				for (int i = 0; i < FZ_RNG; i++)
					b[L.rng + i] = (unsigned char) fz_next(r);
			fz_note(desc, dlen, "rng");
		}
		else if (op < 91)
		{
			/* splice a range from the other blob at the same offset */
			size_t		lim = len < olen ? len : olen,
						start,
						run;

			if (!other || lim <= FZ_HDR)
				continue;
			start = FZ_HDR + fz_below(r, lim - FZ_HDR);
			run = 1 + fz_below(r, lim - start);
			memcpy(b + start, other + start, run);
			fz_note(desc, dlen, "splice@%zu+%zu", start, run);
		}
		else
		{
			/* a header field: version, header size, payload length, checksum */
			uint64_t	f = fz_below(r, 4);

			if (len < FZ_HDR)
				continue;
			if (f < 2)
			{
				int32_t		v = fz_int32s[fz_below(r, sizeof(fz_int32s) / sizeof(fz_int32s[0]))];

				fz_put32(b, 8 + 4 * f, v);
				fz_note(desc, dlen, "%s=%d", f ? "hsize" : "version", v);
			}
			else
			{
				int64_t		v = fz_int64s[fz_below(r, sizeof(fz_int64s) / sizeof(fz_int64s[0]))];

				fz_put64(b, 16 + 8 * (f - 2), v);
				fz_note(desc, dlen, "%s=%lld", f == 2 ? "plen" : "checksum", (long long) v);
			}
			header_touched = 1;
		}
	}
	/* most cases are resealed (and many repaired) to get past the checksum */
	if (!header_touched && fz_below(r, 10) < 9)
	{
		if (fz_below(r, 2))
			len = fz_repair(r, b, len, cap, desc, dlen);
		else
			fz_reseal(b, len);
	}
	else
		fz_note(desc, dlen, "unsealed");
	return len;
}

/*
 * Mutate a packed buffer of float32 values (len bytes, cap >= len +
 * FZ_SLACK), rows of row_floats values each; labels says it is a label
 * buffer (labels get out-of-range, negative and fractional values too).
 * Returns the new length.
 */
static inline size_t
fz_mutate_floats(fz_rng *r, unsigned char *b, size_t len, size_t cap,
				 int row_floats, int labels, char *desc, size_t dlen)
{
	int			nmut = 1 + (int) fz_below(r, 3);
	size_t		row = (size_t) row_floats * 4;

	for (int m = 0; m < nmut; m++)
	{
		uint64_t	op = fz_below(r, 100);
		size_t		nf = len / 4;

		if (op < 40 && nf > 0)
		{
			/* special values: a single one or a run */
			size_t		i = fz_below(r, nf),
						run = fz_below(r, 4) ? 1 : 1 + fz_below(r, nf - i);
			float		v = fz_float(r);

			if (labels && fz_below(r, 2))
			{
				static const float lv[] = {-1.0f, 0.5f, 3.0f, 10.0f, 255.0f, 65536.0f, 1e9f, -0.0f, 2.5f};

				v = lv[fz_below(r, sizeof(lv) / sizeof(lv[0]))];
			}
			for (size_t k = 0; k < run; k++)
				fz_putf(b, 4 * (i + k), v);
			fz_note(desc, dlen, "v[%zu..+%zu]=%g", i, run, (double) v);
		}
		else if (op < 50 && len > 0)
		{
			size_t		pos = fz_below(r, len);

			b[pos] ^= (unsigned char) (1u << fz_below(r, 8));
			fz_note(desc, dlen, "flip@%zu", pos);
		}
		else if (op < 70)
		{
			/* truncation: by 1..3 bytes, by a part of a row, by whole rows, to 0 */
			uint64_t	k = fz_below(r, 4);
			size_t		cut = k == 0 ? 1 + fz_below(r, 3) :
			k == 1 ? 4 * (1 + fz_below(r, row_floats)) :
			k == 2 ? row * (1 + fz_below(r, 3)) : len;

			len = cut > len ? 0 : len - cut;
			fz_note(desc, dlen, "truncate to %zu", len);
		}
		else if (op < 90)
		{
			/* extension: by 1..3 bytes, a part of a row, whole rows */
			uint64_t	k = fz_below(r, 3);
			size_t		add = k == 0 ? 1 + fz_below(r, 3) :
			k == 1 ? 4 * (1 + fz_below(r, row_floats)) : row * (1 + fz_below(r, 3));

			if (len + add > cap)
				continue;
			for (size_t i = 0; i < add; i++)
				b[len + i] = (unsigned char) (i < len ? b[i] : 0);
			len += add;
			fz_note(desc, dlen, "extend by %zu", add);
		}
		else
		{
			static const unsigned char vals[] = {0x00, 0xFF, 0x7F, 0x80};

			if (len == 0)
				continue;
			b[fz_below(r, len)] = vals[fz_below(r, 4)];
			fz_note(desc, dlen, "byte");
		}
	}
	return len;
}

#endif							/* MOP_FUZZ_MUT_H */
