/*
 * bare_engine.c -- extension benchmark: the training engine (src/nn) on its own,
 * with no PostgreSQL, on exactly the arrays mop trains on, doing exactly what
 * one epoch of mop_train does, so that mop_train's epoch time can be compared
 * with it (in-database overhead).
 *
 * Input (written by mop_export_buffers.py from mop.buffers / mop.init_model):
 *   DIR/blob.bin      the initial model state (mop.init_model(dataset, config))
 *   DIR/train.idx     one line per training buffer: "partition rows", in
 *                     (partition, buffer_no) order
 *   DIR/train_x.bin, DIR/train_y.bin, DIR/valid_x.bin, DIR/valid_y.bin
 *                     float32 rows, concatenated in that order
 *
 * Per epoch, per partition p = 0..P-1 (like mop.train_agg): nn_train_begin
 * (no engine shuffle), every buffer's rows permuted with the same SplitMix64
 * Fisher-Yates as src/pg/prng.c and the same seed derivation as
 * src/pg/train_agg.c, gathered into a scratch array and fed in slices of one
 * minibatch; nn_train_end.  Then the validation split is evaluated in slices
 * of 1024 rows (like mop.eval_agg).  The result is bit-identical to mop_train
 * (the printed losses let one check this), without SPI, detoasting,
 * (de)serialization or catalog writes.
 *
 * Prints per epoch: RESULT epoch=E train_s=.. eval_s=.. seconds=.. train_loss=.. valid_acc=..
 * Usage: bare_engine DIR EPOCHS
 */
#include "nn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *
slurp(const char *dir, const char *name, size_t *len)
{
	char		path[4096];
	FILE	   *f;
	void	   *buf;
	long		n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f)
	{
		perror(path);
		exit(2);
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? n : 1);
	if (fread(buf, 1, n, f) != (size_t) n)
	{
		perror(path);
		exit(2);
	}
	fclose(f);
	*len = n;
	return buf;
}

/* src/pg/prng.c, verbatim in behaviour */
typedef struct
{
	uint64_t	s;
} Rng;
static void
rng_seed(Rng *r, uint64_t seed)
{
	r->s = seed ^ UINT64_C(0x6a09e667f3bcc909);
}
static uint64_t
rng_next(Rng *r)
{
	uint64_t	z = (r->s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}
static uint64_t
rng_below(Rng *r, uint64_t n)
{
	uint64_t	limit = UINT64_MAX - (UINT64_MAX % n);
	uint64_t	v;

	do
		v = rng_next(r);
	while (v >= limit);
	return v % n;
}
static void
shuffle_index(int64_t *idx, int64_t n, Rng *r)
{
	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		j = (int64_t) rng_below(r, (uint64_t) i + 1);
		int64_t		t = idx[i];

		idx[i] = idx[j];
		idx[j] = t;
	}
}

static void
check(nn_status st, nn_error *err, const char *what)
{
	if (st != NN_OK)
	{
		fprintf(stderr, "%s: %s (%s)\n", what, err->msg, nn_status_name(st));
		exit(1);
	}
}

int
main(int argc, char **argv)
{
	const char *dir;
	int			epochs;
	size_t		blen,
				xl,
				yl,
				vxl,
				vyl;
	void	   *blob;
	float	   *tx,
			   *ty,
			   *vx,
			   *vy;
	int			nbuf = 0,
				cap = 1024;
	int		   *bpart = malloc(sizeof(int) * cap);
	int64_t    *brows = malloc(sizeof(int64_t) * cap);
	int64_t    *boff = malloc(sizeof(int64_t) * cap);
	int64_t		total = 0,
				maxrows = 0,
				nvalid;
	int			nparts = 0;
	nn_model   *m;
	nn_error	err;
	int64_t		in_dim,
				bs;
	float	   *sx,
			   *sy;
	int64_t    *perm;
	char		path[4096];
	FILE	   *f;

	if (argc < 3)
	{
		fprintf(stderr, "usage: bare_engine DIR EPOCHS\n");
		return 2;
	}
	dir = argv[1];
	epochs = atoi(argv[2]);
	check(nn_blas_init(1, &err), &err, "nn_blas_init");
	blob = slurp(dir, "blob.bin", &blen);
	tx = slurp(dir, "train_x.bin", &xl);
	ty = slurp(dir, "train_y.bin", &yl);
	vx = slurp(dir, "valid_x.bin", &vxl);
	vy = slurp(dir, "valid_y.bin", &vyl);
	snprintf(path, sizeof(path), "%s/train.idx", dir);
	f = fopen(path, "r");
	if (!f)
	{
		perror(path);
		return 2;
	}
	{
		int			p;
		long long	r;

		while (fscanf(f, "%d %lld", &p, &r) == 2)
		{
			bpart[nbuf] = p;
			brows[nbuf] = r;
			boff[nbuf] = total;
			total += r;
			if (r > maxrows)
				maxrows = r;
			if (p + 1 > nparts)
				nparts = p + 1;
			nbuf++;
		}
	}
	fclose(f);
	check(nn_model_deserialize(blob, blen, &m, &err), &err, "deserialize");
	in_dim = nn_model_in_dim(m);
	bs = nn_model_spec(m)->batch_size;
	nvalid = (int64_t) (vyl / sizeof(float));
	if ((int64_t) (xl / sizeof(float)) != total * in_dim || (int64_t) (yl / sizeof(float)) != total)
	{
		fprintf(stderr, "size mismatch\n");
		return 2;
	}
	sx = malloc(sizeof(float) * maxrows * in_dim);
	sy = malloc(sizeof(float) * maxrows);
	perm = malloc(sizeof(int64_t) * maxrows);
	printf("INFO blas=%s buffers=%d partitions=%d train_rows=%lld valid_rows=%lld in_dim=%lld batch=%lld params=%lld\n",
		   nn_blas_info(), nbuf, nparts, (long long) total, (long long) nvalid,
		   (long long) in_dim, (long long) bs, (long long) nn_model_param_count(m));

	for (int e = 1; e <= epochs; e++)
	{
		double		t0 = now(),
					t1,
					t2;
		double		loss = 0;
		int64_t		rows = 0;
		nn_result	vres;

		for (int p = 0; p < nparts; p++)
		{
			nn_counters c;
			uint64_t	base;
			int64_t		nb = 0;
			nn_result	res;

			nn_model_counters(m, &c);
			check(nn_train_begin(m, 0, &err), &err, "train_begin");
			base = nn_model_spec(m)->seed * UINT64_C(0x9e3779b97f4a7c15) ^
				((uint64_t) c.sub_epochs * UINT64_C(0xc2b2ae3d27d4eb4f));
			for (int b = 0; b < nbuf; b++)
			{
				const float *xs = tx + boff[b] * in_dim,
						   *ys = ty + boff[b];
				int64_t		n = brows[b];
				Rng			rng;

				if (bpart[b] != p)
					continue;
				for (int64_t i = 0; i < n; i++)
					perm[i] = i;
				rng_seed(&rng, base ^ ((uint64_t) nb * UINT64_C(0x165667b19e3779f9)));
				shuffle_index(perm, n, &rng);
				for (int64_t i = 0; i < n; i++)
				{
					memcpy(sx + i * in_dim, xs + perm[i] * in_dim, sizeof(float) * in_dim);
					sy[i] = ys[perm[i]];
				}
				for (int64_t off = 0; off < n; off += bs)
				{
					int64_t		cnt = n - off < bs ? n - off : bs;

					check(nn_train_feed(m, sx + off * in_dim, sy + off, cnt, &err), &err, "train_feed");
				}
				nb++;
			}
			memset(&res, 0, sizeof(res));
			check(nn_train_end(m, &res, &err), &err, "train_end");
			loss += res.loss_sum;
			rows += res.rows;
		}
		t1 = now();
		memset(&vres, 0, sizeof(vres));
		for (int64_t off = 0; off < nvalid; off += 1024)
		{
			int64_t		cnt = nvalid - off < 1024 ? nvalid - off : 1024;

			check(nn_evaluate(m, vx + off * in_dim, vy + off, cnt, &vres, &err), &err, "evaluate");
		}
		t2 = now();
		printf("RESULT epoch=%d train_s=%.4f eval_s=%.4f seconds=%.4f train_loss=%.9g valid_acc=%.6f\n",
			   e, t1 - t0, t2 - t1, t2 - t0, loss / (double) rows,
			   vres.metric_sum / (double) vres.rows);
		fflush(stdout);
	}
	nn_model_free(m);
	return 0;
}
