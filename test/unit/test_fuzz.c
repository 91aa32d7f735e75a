/*
 * test_fuzz.c -- the engine-level fuzzer: mutated model blobs and packed
 * buffers through every engine function that reads one.
 *
 * fuzz_blobs: valid blobs of four models (conv + pooling + dropout with
 * Adam and class weights, an MLP with binary cross-entropy and Nesterov SGD, a regression
 * network with RMSprop and every activation, an AdamW model with top-k
 * accuracy and 'same' convolutions) are mutated by test/fuzz/fuzz_mut.h
 * (bit flips, boundary bytes and field values, NaN/Inf floats, truncations,
 * extensions, swapped fields and layers, spliced ranges, header fields;
 * usually resealed and often repaired so the decoder accepts a mutated
 * architecture) and each goes through nn_blob_spec and
 * nn_model_deserialize.  Every failure must be a decode error with a
 * message; every accepted blob must re-serialize to the same bytes, and
 * its model must predict, evaluate, train (shuffled or not, in minibatch
 * slices as the SQL aggregates feed it), re-serialize and decode again,
 * clone, average, take its own hyperparameters and list its tensors.  As
 * mop_model_from_blob does with mop.max_model_memory, a blob whose spec
 * needs more than 64 MB is refused before it is built.
 *
 * fuzz_buffers: valid packed buffers (x, y) of the same models are mutated
 * (special floats, out-of-range, negative and fractional labels,
 * truncations and extensions by bytes, part rows and whole rows, bit flips)
 * and checked with nn_buffer_rows (the glue's geometry check); what it
 * accepts is evaluated, trained and predicted on.
 *
 * Each case is bounded in time (a hang fails the run); a crash prints the
 * case.  The buffers are allocated with their exact sizes, so that under
 * AddressSanitizer (make -C test/unit fuzz-san) an over-read is reported.
 *
 * Environment:
 *   MOP_FUZZ_SEED   seed of the pass (default 1; "random": from the clock);
 *                   always printed
 *   MOP_FUZZ_ITERS  cases per fuzz test (default 20000 blobs and 10000
 *                   buffer pairs: about two seconds)
 *   MOP_FUZZ_CASE   run only this case (to replay a failure)
 *   MOP_FUZZ_VERBOSE=1  print every case
 *
 * The long run (a few minutes, 100000 cases each):
 *   make -C test/unit test_nn && \
 *     MOP_FUZZ_ITERS=100000 MOP_FUZZ_SEED=random test/unit/test_nn fuzz_
 * and the same under AddressSanitizer and UBSan:
 *   make -C test/unit fuzz-san MOP_FUZZ_ITERS=20000 MOP_FUZZ_SEED=random
 */
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"
/* repaired payloads up to 1 MB: every case allocates this much scratch */
#define FZ_REPAIR_MAX (1u << 20)
#include "../fuzz/fuzz_mut.h"

#if defined(__SANITIZE_ADDRESS__)
#define FZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ASAN 1
#endif
#endif
#ifdef FZ_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#define FZ_MODELS 4
#define FZ_CASE_SECONDS 30
#define FZ_MODEL_MEMORY (64u << 20)
#define FZ_MAX_ROWS 64
#define FZ_MAX_FLOATS (1 << 18)

/* the case being run, for crash and hang reports */
static char fz_current[640];

static void
fz_report(void)
{
	if (fz_current[0])
	{
		ssize_t		w = write(2, fz_current, strlen(fz_current));

		w += write(2, "\n", 1);
		(void) w;
	}
}

static void
fz_on_signal(int sig)
{
	static const char hang[] = "fuzz: case ran longer than its time limit (hang)\n";
	ssize_t		w;

	if (sig == SIGALRM)
	{
		w = write(2, hang, sizeof(hang) - 1);
		(void) w;
		fz_report();
		_exit(3);
	}
	fz_report();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
fz_install_handlers(void)
{
	static int	done;

	if (done)
		return;
	done = 1;
	signal(SIGALRM, fz_on_signal);
#ifdef FZ_ASAN
	__sanitizer_set_death_callback(fz_report);
#else
	signal(SIGSEGV, fz_on_signal);
	signal(SIGBUS, fz_on_signal);
	signal(SIGFPE, fz_on_signal);
	signal(SIGILL, fz_on_signal);
	signal(SIGABRT, fz_on_signal);
#endif
}

/* Pass settings from the environment. */
typedef struct fz_opts
{
	uint64_t	seed;
	long		iters;
	long		only;			/* -1: all cases */
	int			verbose;
}			fz_opts;

static fz_opts
fz_options(long default_iters)
{
	fz_opts		o;
	const char *s = getenv("MOP_FUZZ_SEED");
	const char *n = getenv("MOP_FUZZ_ITERS");
	const char *c = getenv("MOP_FUZZ_CASE");
	const char *v = getenv("MOP_FUZZ_VERBOSE");

	if (s && strcmp(s, "random") == 0)
		o.seed = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32);
	else
		o.seed = s ? strtoull(s, NULL, 10) : 1;
	o.iters = n ? atol(n) : default_iters;
	o.only = c ? atol(c) : -1;
	o.verbose = v && atoi(v) > 0;
	return o;
}

static double
fz_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The seed models, trained one sub-epoch so the optimizer state is live. */
static nn_model *
fz_seed_model(int k)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	nn_layer_spec *l;
	int			n = 24;
	float	   *x,
			   *y;

	nn_spec_init(&s);
	s.seed = 100 + k;
	s.batch_size = 8;
	switch (k)
	{
		case 0:
			s.in_h = 6;
			s.in_w = 6;
			s.in_c = 1;
			add_conv(&s, 3, 3, 1, NN_PAD_VALID, NN_ACT_RELU);
			l = add_layer(&s, NN_LAYER_BATCHNORM);	/* running statistics in the blob */
			l->momentum = 0.1f;
			l->eps = 1e-5f;
			add_pool(&s, 2, 2, NN_PAD_VALID);
			add_layer(&s, NN_LAYER_FLATTEN);
			add_layer(&s, NN_LAYER_DROPOUT)->rate = 0.25f;
			add_dense(&s, 3, NN_ACT_NONE);
			break;
		case 1:
			s.in_c = 5;
			s.loss = NN_LOSS_SIGMOID_BCE;
			s.optimizer = NN_OPT_SGD;
			s.momentum = 0.9f;
			s.nesterov = 1;
			s.l2 = 1e-4f;
			add_dense(&s, 6, NN_ACT_TANH);
			l = add_layer(&s, NN_LAYER_BATCHNORM);
			l->momentum = 0.5f;
			l->eps = 1e-3f;
			add_dense(&s, 2, NN_ACT_SIGMOID);
			break;
		case 2:
			s.in_c = 4;
			s.loss = NN_LOSS_MSE;
			s.metric = NN_METRIC_MAE;
			s.optimizer = NN_OPT_RMSPROP;
			s.momentum = 0.5f;
			s.clip_norm = 1.0f;
			add_dense(&s, 5, NN_ACT_GELU);
			l = add_layer(&s, NN_LAYER_ACTIVATION);
			l->activation = NN_ACT_LEAKY_RELU;
			l->alpha = 0.2f;
			add_dense(&s, 4, NN_ACT_SIGMOID);
			add_layer(&s, NN_LAYER_DROPOUT)->rate = 0.1f;
			add_dense(&s, 1, NN_ACT_NONE);
			break;
		default:
			s.in_h = 5;
			s.in_w = 4;
			s.in_c = 2;
			s.optimizer = NN_OPT_ADAMW;
			s.weight_decay = 0.01f;
			s.metric = NN_METRIC_TOPK;
			s.top_k = 2;
			s.init = NN_INIT_GLOROT;
			add_conv(&s, 2, 3, 2, NN_PAD_SAME, NN_ACT_NONE);
			add_act(&s, NN_ACT_RELU);
			add_pool(&s, 2, 1, NN_PAD_SAME);
			add_layer(&s, NN_LAYER_FLATTEN);
			add_dense(&s, 4, NN_ACT_SOFTMAX);
			break;
	}
	if (nn_model_create(&s, &m, &err) != NN_OK)
	{
		fprintf(stderr, "  seed model %d: %s\n", k, err.msg);
		return NULL;
	}
	if (k == 0)
	{
		static const float cw[3] = {0.5f, 2.0f, 1.25f};

		if (nn_model_set_class_weights(m, cw, 3, &err) != NN_OK)
		{
			fprintf(stderr, "  seed model %d: %s\n", k, err.msg);
			nn_model_free(m);
			return NULL;
		}
	}
	x = malloc(sizeof(float) * n * nn_model_in_dim(m));
	y = malloc(sizeof(float) * n * nn_model_y_dim(m));
	fill_uniform(x, (int64_t) n * nn_model_in_dim(m), s.seed, -1, 1);
	for (int i = 0; i < n * nn_model_y_dim(m); i++)
		y[i] = s.loss == NN_LOSS_SOFTMAX_CE ? (float) (i % nn_model_out_dim(m)) :
			s.loss == NN_LOSS_SIGMOID_BCE ? (float) (i % 2) : x[i % n] * 0.5f;
	nn_train(m, x, y, n, 1, NULL, &err);
	free(x);
	free(y);
	return m;
}

typedef struct fz_seeds
{
	nn_model   *m[FZ_MODELS];
	unsigned char *blob[FZ_MODELS];
	size_t		len[FZ_MODELS];
}			fz_seeds;

static int
fz_make_seeds(fz_seeds *S)
{
	memset(S, 0, sizeof(*S));
	for (int k = 0; k < FZ_MODELS; k++)
	{
		nn_error	err;

		if (!(S->m[k] = fz_seed_model(k)))
			return 0;
		S->len[k] = nn_model_blob_size(S->m[k]);
		S->blob[k] = malloc(S->len[k]);
		if (nn_model_serialize(S->m[k], S->blob[k], S->len[k], &S->len[k], &err) != NN_OK)
			return 0;
	}
	return 1;
}

static void
fz_free_seeds(fz_seeds *S)
{
	for (int k = 0; k < FZ_MODELS; k++)
	{
		nn_model_free(S->m[k]);
		free(S->blob[k]);
	}
}

/* Valid labels for rows of model m (class indices, 0/1 or values). */
static void
fz_labels(fz_rng *r, const nn_model *m, float *y, int64_t n)
{
	const nn_spec *s = nn_model_spec(m);
	int			od = nn_model_out_dim(m);

	for (int64_t i = 0; i < n * nn_model_y_dim(m); i++)
		y[i] = s->loss == NN_LOSS_SOFTMAX_CE ? (float) fz_below(r, od) :
			s->loss == NN_LOSS_SIGMOID_BCE ? (float) fz_below(r, 2) :
			(float) ((double) fz_below(r, 2001) / 1000.0 - 1.0);
}

static int
fz_decode_status_ok(nn_status s)
{
	return s == NN_ERR_TRUNCATED || s == NN_ERR_MAGIC || s == NN_ERR_VERSION ||
		s == NN_ERR_CHECKSUM || s == NN_ERR_CORRUPT;
}

/* Drive an accepted model through every engine entry point. */
static void
fz_exercise(fz_rng *r, nn_model *m, const char *what)
{
	const nn_spec *spec = nn_model_spec(m);
	nn_spec		copy = *spec;
	int64_t		in = nn_model_in_dim(m),
				yd = nn_model_y_dim(m),
				od = nn_model_out_dim(m),
				B = spec->batch_size,
				n = (int64_t) fz_below(r, 3 * (uint64_t) B + 2),
				rows;
	float	   *x,
			   *y,
			   *out;
	nn_error	err = {0};
	nn_result	res;
	nn_status	s;
	nn_model   *c = NULL;
	int64_t		tsum = 0;

	CHECKF(in >= 1 && od >= 1 && yd >= 1 && B >= 1, "%s: dims %lld %lld %lld", what,
		   (long long) in, (long long) od, (long long) yd);
	if (n > FZ_MAX_ROWS)
		n = FZ_MAX_ROWS;
	while (n > 1 && (n * in > FZ_MAX_FLOATS || n * od > FZ_MAX_FLOATS))
		n /= 2;
	x = malloc(sizeof(float) * (size_t) (n * in + 1));
	y = malloc(sizeof(float) * (size_t) (n * yd + 1));
	out = malloc(sizeof(float) * (size_t) (n * od + 1));
	for (int64_t i = 0; i < n * in; i++)
		x[i] = (float) ((double) fz_below(r, 2001) / 1000.0 - 1.0);
	if (n > 0 && fz_below(r, 8) == 0)
		x[fz_below(r, (uint64_t) (n * in))] = fz_float(r);
	fz_labels(r, m, y, n);

	CHECKF(nn_buffer_rows(m, (size_t) (n * in * 4), (size_t) (n * yd * 4), &rows, &err) == NN_OK &&
		   rows == n, "%s: nn_buffer_rows: %s", what, err.msg);
	s = nn_predict(m, x, n, out, &err);
	CHECKF(s == NN_OK, "%s: predict: %s", what, err.msg);
	memset(&res, 0, sizeof(res));
	s = nn_evaluate(m, x, y, n, &res, &err);
	CHECKF(s == NN_OK, "%s: evaluate: %s", what, err.msg);
	if (n > 0)
	{
		/* a bad label is refused, whatever the model */
		float		keep = y[0];

		y[0] = spec->loss == NN_LOSS_MSE ? NAN : -1.0f;
		s = nn_evaluate(m, x, y, n, &res, &err);
		CHECKF(s == NN_ERR_INVALID, "%s: bad label: %s", what, nn_status_name(s));
		y[0] = keep;
	}

	/* training in minibatch slices, as mop.train_agg feeds it */
	s = nn_train_begin(m, (int) fz_below(r, 2), &err);
	CHECKF(s == NN_OK || s == NN_DIVERGED, "%s: train_begin: %s", what, err.msg);
	if (s == NN_OK)
	{
		for (int64_t off = 0; off < n && s == NN_OK; off += B)
		{
			int64_t		cnt = n - off < B ? n - off : B;

			s = nn_train_feed(m, x + off * in, y + off * yd, cnt, &err);
		}
		CHECKF(s == NN_OK || s == NN_DIVERGED, "%s: train_feed: %s", what, err.msg);
		s = nn_train_end(m, &res, &err);
		CHECKF(s == NN_OK || s == NN_DIVERGED, "%s: train_end: %s", what, err.msg);
	}
	s = nn_train(m, x, y, n, 1, &res, &err);
	CHECKF(s == NN_OK || s == NN_DIVERGED, "%s: train: %s", what, err.msg);

	/* its state goes back to a blob that decodes */
	{
		size_t		cap = nn_model_blob_size(m),
					len = 0;
		unsigned char *b = malloc(cap);
		nn_model   *d = NULL;

		s = nn_model_serialize(m, b, cap, &len, &err);
		CHECKF(s == NN_OK && len == cap, "%s: serialize: %s", what, err.msg);
		if (s == NN_OK)
		{
			s = nn_model_deserialize(b, len, &d, &err);
			CHECKF(s == NN_OK, "%s: trained blob does not decode: %s", what, err.msg);
		}
		nn_model_free(d);
		free(b);
	}

	s = nn_model_clone(m, &c, &err);
	CHECKF(s == NN_OK, "%s: clone: %s", what, err.msg);
	if (c)
	{
		nn_model   *both[2] = {m, c};

		s = nn_model_average(m, both, 2, &err);
		CHECKF(s == NN_OK, "%s: average: %s", what, err.msg);
		nn_model_free(c);
	}
	s = nn_model_set_hyper(m, &copy, &err);
	CHECKF(s == NN_OK, "%s: set_hyper: %s", what, err.msg);
	for (int32_t i = 0; i < nn_model_n_tensors(m); i++)
	{
		nn_tensor	t;

		/* parameters; batchnorm running statistics are listed but are none */
		if (nn_model_tensor(m, i, &t, &err) == NN_OK && !t.buffer)
			tsum += t.size;
	}
	CHECKF(tsum == nn_model_param_count(m), "%s: tensors hold %lld of %lld parameters", what,
		   (long long) tsum, (long long) nn_model_param_count(m));
	free(x);
	free(y);
	free(out);
}

TEST(fuzz_blobs)
{
	fz_opts		o = fz_options(20000);
	fz_seeds	S;
	long		accepted = 0,
				too_large = 0,
				by_status[16] = {0};
	double		t0 = fz_now();

	fz_install_handlers();
	CHECK(fz_make_seeds(&S));
	printf("  fuzz_blobs: seed %llu, %ld cases (MOP_FUZZ_SEED, MOP_FUZZ_ITERS)\n",
		   (unsigned long long) o.seed, o.iters);
	fflush(stdout);
	for (long i = 0; i < o.iters; i++)
	{
		fz_rng		r;
		int			k;
		size_t		len,
					cap;
		unsigned char *work,
				   *blob;
		char		desc[400];
		nn_spec		spec;
		nn_memory	mem;
		nn_model   *m = NULL;
		nn_error	err = {0},
					err2 = {0};
		nn_status	s1,
					s2;
		int			big = 0;

		if (o.only >= 0 && i != o.only)
			continue;
		fz_seed_case(&r, o.seed, (uint64_t) i);
		k = (int) fz_below(&r, FZ_MODELS);
		cap = S.len[k] + FZ_SLACK + FZ_REPAIR_MAX;
		work = malloc(cap);
		memcpy(work, S.blob[k], S.len[k]);
		len = fz_mutate_blob(&r, work, S.len[k], cap, S.blob[(k + 1) % FZ_MODELS],
							 S.len[(k + 1) % FZ_MODELS], desc, sizeof(desc));
		snprintf(fz_current, sizeof(fz_current),
				 "fuzz_blobs case %ld (replay: MOP_FUZZ_SEED=%llu MOP_FUZZ_CASE=%ld): model %d, %zu bytes: %s",
				 i, (unsigned long long) o.seed, i, k, len, desc);
		if (o.verbose)
			printf("  %s\n", fz_current);
		/* exactly len bytes, so any read past the end is out of bounds */
		blob = malloc(len ? len : 1);
		memcpy(blob, work, len);
		free(work);
		alarm(FZ_CASE_SECONDS);

		s1 = nn_blob_spec(blob, len, &spec, &err);
		CHECKF(s1 == NN_OK || fz_decode_status_ok(s1), "%s -> spec %s", fz_current, nn_status_name(s1));
		CHECKF(s1 == NN_OK || err.msg[0], "%s: no message", fz_current);
		if (s1 == NN_OK && nn_spec_memory(&spec, &mem, NULL) == NN_OK && mem.total > FZ_MODEL_MEMORY)
			big = 1;
		if (big)
			too_large++;
		else
		{
			s2 = nn_model_deserialize(blob, len, &m, &err2);
			by_status[s2 & 15]++;
			CHECKF(s2 == NN_OK || fz_decode_status_ok(s2), "%s -> %s: %s", fz_current,
				   nn_status_name(s2), err2.msg);
			CHECKF(s2 == NN_OK || err2.msg[0], "%s: no message", fz_current);
			CHECKF((s2 == NN_OK) == (m != NULL), "%s: model and status disagree", fz_current);
			CHECKF(s2 != NN_OK || s1 == NN_OK, "%s: model decodes, spec does not: %s", fz_current, err.msg);
			if (s2 == NN_OK && m)
			{
				size_t		blen = nn_model_blob_size(m);
				unsigned char *again = malloc(blen);
				size_t		alen = 0;

				accepted++;
				/* only canonical blobs are accepted: they re-serialize to the same bytes */
				CHECKF(nn_model_serialize(m, again, blen, &alen, NULL) == NN_OK && alen == len &&
					   memcmp(again, blob, len) == 0, "%s: accepted blob does not round-trip", fz_current);
				free(again);
				fz_exercise(&r, m, fz_current);
			}
			nn_model_free(m);
		}
		alarm(0);
		free(blob);
		if (harness_failures > 20)
			break;
	}
	fz_current[0] = '\0';
	printf("  fuzz_blobs: %ld accepted and exercised, %ld refused as larger than 64 MB, "
		   "%ld truncated, %ld bad magic, %ld bad version, %ld checksum, %ld corrupt; %.1f s\n",
		   accepted, too_large, by_status[NN_ERR_TRUNCATED], by_status[NN_ERR_MAGIC],
		   by_status[NN_ERR_VERSION], by_status[NN_ERR_CHECKSUM], by_status[NN_ERR_CORRUPT],
		   fz_now() - t0);
	/* the mutations must reach the deep checks and past them */
	if (o.only < 0 && o.iters >= 1000)
		CHECK(accepted > o.iters / 20 && by_status[NN_ERR_CORRUPT] > o.iters / 10);
	fz_free_seeds(&S);
}

TEST(fuzz_buffers)
{
	fz_opts		o = fz_options(10000);
	fz_seeds	S;
	long		shape = 0,
				invalid = 0,
				diverged = 0,
				trained = 0;
	double		t0 = fz_now();
	const int	rows0 = 20;

	fz_install_handlers();
	CHECK(fz_make_seeds(&S));
	printf("  fuzz_buffers: seed %llu, %ld cases (MOP_FUZZ_SEED, MOP_FUZZ_ITERS)\n",
		   (unsigned long long) o.seed, o.iters);
	fflush(stdout);
	for (long i = 0; i < o.iters; i++)
	{
		fz_rng		r;
		int			k;
		nn_model   *m = NULL;
		int64_t		in,
					yd,
					n;
		size_t		xlen,
					ylen,
					xcap,
					ycap;
		unsigned char *xw,
				   *yw;
		float	   *x,
				   *y,
				   *out;
		char		desc[400] = "";
		nn_error	err = {0};
		nn_status	s;
		nn_result	res;

		if (o.only >= 0 && i != o.only)
			continue;
		fz_seed_case(&r, o.seed, (uint64_t) i);
		k = (int) fz_below(&r, FZ_MODELS);
		if (nn_model_deserialize(S.blob[k], S.len[k], &m, &err) != NN_OK)
		{
			CHECKF(0, "seed blob %d: %s", k, err.msg);
			break;
		}
		in = nn_model_in_dim(m);
		yd = nn_model_y_dim(m);
		xlen = (size_t) (rows0 * in * 4);
		ylen = (size_t) (rows0 * yd * 4);
		xcap = xlen + FZ_SLACK + (size_t) in * 16;
		ycap = ylen + FZ_SLACK + (size_t) yd * 16;
		xw = malloc(xcap);
		yw = malloc(ycap);
		for (size_t j = 0; j < xlen / 4; j++)
			((float *) xw)[j] = (float) ((double) fz_below(&r, 2001) / 1000.0 - 1.0);
		fz_labels(&r, m, (float *) yw, rows0);
		switch (fz_below(&r, 3))
		{
			case 0:
				xlen = fz_mutate_floats(&r, xw, xlen, xcap, (int) in, 0, desc, sizeof(desc));
				break;
			case 1:
				ylen = fz_mutate_floats(&r, yw, ylen, ycap, (int) yd, 1, desc, sizeof(desc));
				break;
			default:
				xlen = fz_mutate_floats(&r, xw, xlen, xcap, (int) in, 0, desc, sizeof(desc));
				ylen = fz_mutate_floats(&r, yw, ylen, ycap, (int) yd, 1, desc, sizeof(desc));
				break;
		}
		snprintf(fz_current, sizeof(fz_current),
				 "fuzz_buffers case %ld (replay: MOP_FUZZ_SEED=%llu MOP_FUZZ_CASE=%ld): model %d, x %zu bytes, y %zu bytes: %s",
				 i, (unsigned long long) o.seed, i, k, xlen, ylen, desc);
		if (o.verbose)
			printf("  %s\n", fz_current);
		x = malloc(xlen ? xlen : 1);
		y = malloc(ylen ? ylen : 1);
		memcpy(x, xw, xlen);
		memcpy(y, yw, ylen);
		free(xw);
		free(yw);
		alarm(FZ_CASE_SECONDS);

		s = nn_buffer_rows(m, xlen, ylen, &n, &err);
		CHECKF(s == NN_OK || (s == NN_ERR_SHAPE && err.msg[0]), "%s -> %s", fz_current, nn_status_name(s));
		if (s != NN_OK)
			shape++;
		else
		{
			int64_t		B = nn_model_spec(m)->batch_size;

			out = malloc(sizeof(float) * (size_t) (n * nn_model_out_dim(m) + 1));
			s = nn_predict(m, x, n, out, &err);
			CHECKF(s == NN_OK, "%s: predict: %s", fz_current, err.msg);
			free(out);
			memset(&res, 0, sizeof(res));
			s = nn_evaluate(m, x, y, n, &res, &err);
			CHECKF(s == NN_OK || s == NN_ERR_INVALID, "%s: evaluate: %s", fz_current, err.msg);
			s = nn_train_begin(m, (int) fz_below(&r, 2), &err);
			for (int64_t off = 0; off < n && s == NN_OK; off += B)
				s = nn_train_feed(m, x + off * in, y + off * yd, n - off < B ? n - off : B, &err);
			if (s == NN_OK)
				s = nn_train_end(m, &res, &err);
			CHECKF(s == NN_OK || s == NN_ERR_INVALID || s == NN_DIVERGED, "%s: train: %s",
				   fz_current, err.msg);
			CHECKF(s != NN_ERR_INVALID || strstr(err.msg, "label"), "%s: %s", fz_current, err.msg);
			invalid += s == NN_ERR_INVALID;
			diverged += s == NN_DIVERGED;
			trained += s == NN_OK;
		}
		alarm(0);
		nn_model_free(m);
		free(x);
		free(y);
		if (harness_failures > 20)
			break;
	}
	fz_current[0] = '\0';
	printf("  fuzz_buffers: %ld refused by shape, %ld by label, %ld diverged, %ld trained; %.1f s\n",
		   shape, invalid, diverged, trained, fz_now() - t0);
	if (o.only < 0 && o.iters >= 1000)
		CHECK(shape > 0 && invalid > 0 && trained > 0);
	fz_free_seeds(&S);
}

/*
 * Regression cases of what the fuzzers found, each deterministic.
 */

/* Decode a sealed copy of blob with the int64 at off set to v. */
static nn_status
fz_decode_with64(const unsigned char *blob, size_t len, size_t off, int64_t v,
				 nn_model **m, nn_error *err)
{
	unsigned char *b = malloc(len);
	nn_status	s;

	memcpy(b, blob, len);
	fz_put64(b, off, v);
	fz_reseal(b, len);
	s = nn_model_deserialize(b, len, m, err);
	free(b);
	return s;
}

/*
 * Progress counters near INT64_MAX were accepted, and one more training
 * step overflowed them (undefined behaviour; the state written afterwards
 * had negative counters and no longer decoded).  Now a blob's counters are
 * at most NN_MAX_COUNTER and training stops counting there.
 */
TEST(blob_counters_bounded)
{
	fz_seeds	S;
	fz_layout	L;
	nn_model   *m = NULL;
	nn_error	err = {0};
	float		x[6 * 6 * 3],
				y[3] = {0, 1, 2};
	nn_counters c;

	CHECK(fz_make_seeds(&S));
	L = fz_layout_of(S.blob[0], S.len[0]);
	for (int f = 0; f < 4; f++)
	{
		CHECK(fz_decode_with64(S.blob[0], S.len[0], L.counters + 8 * f, INT64_MAX, &m, &err) == NN_ERR_CORRUPT);
		CHECK(strstr(err.msg, "counters") != NULL);
		CHECK(m == NULL);
		CHECK(fz_decode_with64(S.blob[0], S.len[0], L.counters + 8 * f, NN_MAX_COUNTER + 1, &m, &err) == NN_ERR_CORRUPT);
	}
	/* at the limit: accepted, trains, and its next state decodes */
	CHECK(fz_decode_with64(S.blob[0], S.len[0], L.counters, NN_MAX_COUNTER, &m, &err) == NN_OK);
	if (m)
	{
		size_t		cap = nn_model_blob_size(m),
					len;
		unsigned char *b = malloc(cap);
		nn_model   *d = NULL;

		fill_uniform(x, 6 * 6 * 3, 1, -1, 1);
		nn_model_set_epochs(m, INT64_MAX);
		CHECK(nn_train(m, x, y, 3, 0, NULL, &err) == NN_OK);
		nn_model_counters(m, &c);
		CHECK(c.steps == NN_MAX_COUNTER && c.epochs == NN_MAX_COUNTER);
		CHECK(nn_model_serialize(m, b, cap, &len, &err) == NN_OK);
		CHECK(nn_model_deserialize(b, len, &d, &err) == NN_OK);
		nn_model_free(d);
		nn_model_free(m);
		free(b);
	}
	fz_free_seeds(&S);
}

/*
 * mop.average_states accepted a state whose input shape, loss or optimizer
 * differed from the others' as long as the layers and sizes agreed (a
 * mutated blob with Adam turned into AdamW, or 6x6 inputs into 7x7 ones
 * feeding the same pooled size): the moments were averaged across
 * optimizers and the result kept the first model's spec.  Now refused.
 */
TEST(average_refuses_other_shape_loss_optimizer)
{
	fz_seeds	S;
	nn_error	err = {0};

	CHECK(fz_make_seeds(&S));
	for (int v = 0; v < 3; v++)
	{
		nn_spec		s = *nn_model_spec(S.m[0]);
		nn_model   *o = NULL,
				   *both[2];

		if (v == 0)
			s.optimizer = NN_OPT_ADAMW;	/* same moments as Adam */
		else if (v == 1)
		{
			s.in_h = s.in_w = 7;	/* conv 3x3 valid + pool 2: 2x2 as from 6x6 */
		}
		else
		{
			s.loss = NN_LOSS_MSE;	/* same weights, another loss */
			s.metric = NN_METRIC_MSE;
		}
		CHECK_OK(nn_model_create(&s, &o, &err));
		if (!o)
			continue;
		CHECK(nn_model_param_count(o) == nn_model_param_count(S.m[0]));
		both[0] = S.m[0];
		both[1] = o;
		CHECK(nn_model_average(S.m[0], both, 2, &err) == NN_ERR_SHAPE);
		nn_model_free(o);
	}
	fz_free_seeds(&S);
}
