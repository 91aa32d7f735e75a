/*
 * parity.c -- the GPU engine against its CPU reference, without PostgreSQL.
 *
 * As llm.c checks its CUDA kernels against its C reference, every test
 * here runs the same model from the same state on the CPU engine (src/nn,
 * linked in) and on the GPU (gpu/mop_gpu.so, opened as mop.so opens it)
 * and compares the results with a tolerance scaled by their magnitude:
 *
 *   forward and backward of every layer type, activation and loss
 *   (outputs, loss and metric sums, every parameter gradient);
 *   optimizer steps of every optimizer and regularizer;
 *   a whole sub-epoch over two buffers in shuffled order (batches across
 *   buffer boundaries, a partial last batch) with dropout;
 *   evaluation; and a hop CPU -> GPU -> CPU through the model blob that
 *   keeps learning;
 *   learning-rate schedules (the rate of the model's epoch, also when one
 *   mirror trains two epochs through the same CUDA graphs), class-weighted
 *   losses (cross-entropy and binary cross-entropy), batchnorm after dense
 *   and conv2d layers (forward, backward, the running statistics after
 *   training, evaluation with them) and whole-set metrics (precision,
 *   recall, f1, auc, r2, log_loss) in training and evaluation, alone, in
 *   gangs and across a hop;
 * plus the GPU's own guarantees: the same bits on a second run, invalid
 * labels and over-budget allocations refused, memory returned, divergence
 * reported where the CPU reports it.
 *
 * Output: "ok gpu ..." / "not ok gpu ..." lines; without a usable GPU one
 * "skip gpu ..." line and exit status 77.
 *
 *   test/gpu/parity [path/to/mop_gpu.so]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"
#include "loader.h"

static mop_gpu_api G;
static int	n_ok,
			n_bad;
static char msg[512];

static void
report(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
report(int ok, const char *fmt, ...)
{
	va_list		ap;

	printf(ok ? "ok gpu parity: " : "not ok gpu parity: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		n_ok++;
	else
		n_bad++;
}

/* max |a - b| / max |ref|: the error relative to the array's magnitude */
static double
rel_err(const float *ref, const float *b, int64_t n)
{
	double		mx = 0,
				e = 0;

	for (int64_t i = 0; i < n; i++)
	{
		double		d = fabs((double) ref[i] - (double) b[i]);

		if (!(d == d))
			return INFINITY;
		if (d > e)
			e = d;
		if (fabs(ref[i]) > mx)
			mx = fabs(ref[i]);
	}
	return mx > 0 ? e / mx : e;
}

static uint64_t lcg = 12345;

static float
frand(void)
{
	lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float) ((lcg >> 40) * (1.0 / 16777216.0));
}

/* random rows for a model: x ~ U(-1, 1), labels valid for its loss */
static void
make_rows(const nn_model *m, int64_t n, float **x, float **y)
{
	int64_t		in = m->plan.in_dim,
				yd = m->plan.y_dim,
				od = m->plan.out_dim;

	*x = malloc(sizeof(float) * n * in);
	*y = malloc(sizeof(float) * n * yd);
	for (int64_t i = 0; i < n * in; i++)
		(*x)[i] = 2.0f * frand() - 1.0f;
	for (int64_t r = 0; r < n; r++)
		for (int64_t j = 0; j < yd; j++)
		{
			float		v;

			if (m->spec.loss == NN_LOSS_SOFTMAX_CE)
				v = (float) (int) (frand() * od);
			else if (m->spec.loss == NN_LOSS_SIGMOID_BCE)
				v = frand() < 0.5f ? 0.0f : 1.0f;
			else
				v = 2.0f * frand() - 1.0f;
			(*y)[r * yd + j] = v;
		}
}

/* ---- model zoo ------------------------------------------------------- */

typedef struct zoo_entry
{
	const char *name;
	nn_spec		spec;
} zoo_entry;

static nn_layer_spec
dense(int units, int act)
{
	nn_layer_spec l;

	memset(&l, 0, sizeof(l));
	l.type = NN_LAYER_DENSE;
	l.units = units;
	l.activation = act;
	l.use_bias = 1;
	return l;
}

static nn_layer_spec
conv(int filters, int k, int stride, int pad, int act)
{
	nn_layer_spec l;

	memset(&l, 0, sizeof(l));
	l.type = NN_LAYER_CONV2D;
	l.filters = filters;
	l.kernel_h = l.kernel_w = k;
	l.stride_h = l.stride_w = stride;
	l.padding = pad;
	l.activation = act;
	l.use_bias = 1;
	return l;
}

static nn_layer_spec
simple(int type)
{
	nn_layer_spec l;

	memset(&l, 0, sizeof(l));
	l.type = type;
	return l;
}

static nn_layer_spec
pool(int k, int stride, int pad)
{
	nn_layer_spec l = simple(NN_LAYER_MAXPOOL2D);

	l.kernel_h = l.kernel_w = k;
	l.stride_h = l.stride_w = stride;
	l.padding = pad;
	return l;
}

static nn_layer_spec
act_layer(int act)
{
	nn_layer_spec l = simple(NN_LAYER_ACTIVATION);

	l.activation = act;
	return l;
}

static nn_layer_spec
dropout(float rate)
{
	nn_layer_spec l = simple(NN_LAYER_DROPOUT);

	l.rate = rate;
	return l;
}

static nn_layer_spec
batchnorm(float momentum, float eps)
{
	nn_layer_spec l = simple(NN_LAYER_BATCHNORM);

	l.momentum = momentum;
	l.eps = eps;
	return l;
}

static nn_spec
base_spec(int h, int w, int c, int batch)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_h = h;
	s.in_w = w;
	s.in_c = c;
	s.batch_size = batch;
	s.seed = 7;
	return s;
}

#define ADD(S, L) ((S).layers[(S).n_layers++] = (L))

static int
build_zoo(zoo_entry *z)
{
	int			n = 0;
	int			acts[] = {NN_ACT_RELU, NN_ACT_LEAKY_RELU, NN_ACT_TANH, NN_ACT_SIGMOID, NN_ACT_GELU};
	const char *act_names[] = {"relu", "leaky_relu", "tanh", "sigmoid", "gelu"};

	/* dense with each activation, softmax cross-entropy */
	for (int a = 0; a < 5; a++)
	{
		nn_spec		s = base_spec(1, 1, 37, 32);

		ADD(s, dense(29, acts[a]));
		ADD(s, dense(11, NN_ACT_SOFTMAX));
		z[n].spec = s;
		z[n++].name = act_names[a];
	}
	{
		/* hidden softmax (not fused), MSE with top dense without bias */
		nn_spec		s = base_spec(1, 1, 20, 16);
		nn_layer_spec d = dense(7, NN_ACT_NONE);

		ADD(s, dense(12, NN_ACT_NONE));
		ADD(s, act_layer(NN_ACT_SOFTMAX));
		d.use_bias = 0;
		ADD(s, d);
		s.loss = NN_LOSS_MSE;
		s.metric = NN_METRIC_MAE;
		z[n].spec = s;
		z[n++].name = "hidden softmax + mse/mae";
	}
	{
		nn_spec		s = base_spec(1, 1, 16, 24);

		ADD(s, dense(32, NN_ACT_TANH));
		ADD(s, dense(5, NN_ACT_SIGMOID));
		s.loss = NN_LOSS_SIGMOID_BCE;
		z[n].spec = s;
		z[n++].name = "sigmoid bce (fused)";
	}
	{
		nn_spec		s = base_spec(1, 1, 40, 32);

		ADD(s, dense(30, NN_ACT_RELU));
		ADD(s, dense(12, NN_ACT_NONE));
		s.metric = NN_METRIC_TOPK;
		s.top_k = 3;
		z[n].spec = s;
		z[n++].name = "top-3 accuracy";
	}
	{
		/* LeNet-like: same conv, pool, valid conv with stride, flatten */
		nn_spec		s = base_spec(12, 12, 3, 16);

		ADD(s, conv(8, 3, 1, NN_PAD_SAME, NN_ACT_RELU));
		ADD(s, pool(2, 2, NN_PAD_VALID));
		ADD(s, conv(6, 3, 2, NN_PAD_VALID, NN_ACT_GELU));
		ADD(s, simple(NN_LAYER_FLATTEN));
		ADD(s, dense(10, NN_ACT_NONE));
		z[n].spec = s;
		z[n++].name = "conv same + pool + conv stride 2 valid";
	}
	{
		/* overlapping pooling with padding, 5x5 conv, leaky relu */
		nn_spec		s = base_spec(11, 9, 2, 8);

		ADD(s, conv(4, 5, 1, NN_PAD_SAME, NN_ACT_LEAKY_RELU));
		ADD(s, pool(3, 2, NN_PAD_SAME));
		ADD(s, simple(NN_LAYER_FLATTEN));
		ADD(s, dense(6, NN_ACT_NONE));
		z[n].spec = s;
		z[n++].name = "conv 5x5 + overlapping padded pool";
	}
	{
		nn_spec		s = base_spec(1, 1, 30, 32);

		ADD(s, dense(40, NN_ACT_RELU));
		ADD(s, dropout(0.3f));
		ADD(s, dense(8, NN_ACT_NONE));
		z[n].spec = s;
		z[n++].name = "dropout";
	}
	{
		/* batchnorm over the features of a dense layer, then its activation */
		nn_spec		s = base_spec(1, 1, 21, 32);

		ADD(s, dense(19, NN_ACT_NONE));
		ADD(s, batchnorm(0.1f, 1e-5f));
		ADD(s, act_layer(NN_ACT_RELU));
		ADD(s, dense(7, NN_ACT_NONE));
		z[n].spec = s;
		z[n++].name = "dense + batchnorm";
	}
	{
		/* batchnorm over the channels of a convolution (every pixel of the batch) */
		nn_spec		s = base_spec(10, 10, 3, 16);

		ADD(s, conv(6, 3, 1, NN_PAD_SAME, NN_ACT_NONE));
		ADD(s, batchnorm(0.3f, 1e-3f));
		ADD(s, act_layer(NN_ACT_TANH));
		ADD(s, pool(2, 2, NN_PAD_VALID));
		ADD(s, simple(NN_LAYER_FLATTEN));
		ADD(s, dense(5, NN_ACT_NONE));
		z[n].spec = s;
		z[n++].name = "conv + batchnorm";
	}
	return n;
}

/* ---- helpers --------------------------------------------------------- */

/* class weights and epoch count every model made by cpu_model gets (n_cw 0: none) */
static float cw_all[16];
static int	n_cw;
static int64_t epochs_all;

static nn_model *
cpu_model(const nn_spec *s)
{
	nn_model   *m;
	nn_error	err;

	if (nn_model_create(s, &m, &err) != NN_OK ||
		(n_cw > 0 && nn_model_set_class_weights(m, cw_all, n_cw, &err) != NN_OK))
	{
		fprintf(stderr, "model: %s\n", err.msg);
		exit(1);
	}
	nn_model_set_epochs(m, epochs_all);
	return m;
}

static nn_model *
clone(const nn_model *m)
{
	nn_model   *c;
	nn_error	err;

	if (nn_model_clone(m, &c, &err) != NN_OK)
	{
		fprintf(stderr, "clone: %s\n", err.msg);
		exit(1);
	}
	return c;
}

static int	no_graphs;			/* open mirrors that launch kernel by kernel */
static int	whole_feeds;		/* feed each buffer in one call (else batch - 1 rows a call) */

static mop_gpu_model *
open_gpu(nn_model *m)
{
	mop_gpu_options o = {0, 0, no_graphs};
	mop_gpu_model *g;

	if (G.model_open(m, &o, &g, msg, sizeof(msg)) != MOP_GPU_OK)
	{
		report(0, "open: %s", msg);
		return NULL;
	}
	return g;
}

static mop_gpu_data *
upload(const nn_model *m, const float *x, const float *y, int64_t n)
{
	mop_gpu_data *d;

	if (G.data_upload(0, x, y, n, m->plan.in_dim, m->plan.y_dim, &d, msg, sizeof(msg)) !=
		MOP_GPU_OK)
	{
		report(0, "upload: %s", msg);
		return NULL;
	}
	return d;
}

/* ---- tests ----------------------------------------------------------- */

/* forward + loss + backward of one batch */
static void
test_gradients(const zoo_entry *z)
{
	nn_model   *c = cpu_model(&z->spec),
			   *h = clone(c);
	int			nb = z->spec.batch_size - 3;	/* a partial batch */
	float	   *x,
			   *y,
			   *zg,
			   *gg;
	double		cl,
				cm,
				gl,
				gm;
	nn_error	err;
	mop_gpu_model *g;
	mop_gpu_data *d;
	const float *zc;
	double		ez,
				eg;

	make_rows(c, nb, &x, &y);
	zg = malloc(sizeof(float) * nb * c->plan.out_dim);
	gg = malloc(sizeof(float) * c->plan.n_params);
	if (nn_gradients(c, x, y, nb, &cl, &cm, &err) != NN_OK)
	{
		report(0, "%s: cpu gradients: %s", z->name, err.msg);
		return;
	}
	/* the CPU's output of that forward pass: recompute without touching the generator */
	{
		nn_model   *c2 = clone(h);

		zc = nn_forward(c2, x, nb, 1);
		ez = 0;
		if ((g = open_gpu(h)) && (d = upload(h, x, y, nb)))
		{
			if (G.gradients(g, d, 0, nb, zg, gg, &gl, &gm, msg, sizeof(msg)) != MOP_GPU_OK)
				report(0, "%s: gpu gradients: %s", z->name, msg);
			else
			{
				ez = rel_err(zc, zg, (int64_t) nb * c->plan.out_dim);
				eg = rel_err(c->grads, gg, c->plan.n_params);
				report(ez < 1e-5 && eg < 1e-4 && fabs(cl - gl) <= 1e-5 * fabs(cl) + 1e-6 &&
					   fabs(cm - gm) <= 1e-9 + 1e-5 * fabs(cm),
					   "%s: forward (err %.1e), loss %.6f/%.6f, metric %.4f/%.4f, %lld gradients (err %.1e)",
					   z->name, ez, cl, gl, cm, gm, (long long) c->plan.n_params, eg);
			}
			G.data_free(d);
		}
		G.model_close(g);
		nn_model_free(c2);
	}
	free(x);
	free(y);
	free(zg);
	free(gg);
	nn_model_free(c);
	nn_model_free(h);
}

/*
 * Training metrics of the CPU and the GPU (per row) close enough?  Sums of
 * per-row values and whole-set values of continuous outputs (auc, r2,
 * log_loss) agree to rounding; counts over argmax decisions (accuracy,
 * precision, recall, f1) may flip a row whose outputs tie to rounding.
 */
static int
metric_close(int metric, double a, double b)
{
	switch (metric)
	{
		case NN_METRIC_AUC:
		case NN_METRIC_R2:
		case NN_METRIC_LOG_LOSS:
		case NN_METRIC_MSE:
		case NN_METRIC_MAE:
			return fabs(a - b) <= 1e-3 * fabs(a) + 1e-5;
		default:
			return fabs(a - b) <= 0.02;
	}
}

/* a sub-epoch of several optimizer steps over two buffers in shuffled order */
static void
test_train(const char *name, const nn_spec *spec, int steps_rows_a, int rows_b, double tol)
{
	nn_model   *c = cpu_model(spec),
			   *h = clone(c);
	float	   *xa,
			   *ya,
			   *xb,
			   *yb,
			   *sx,
			   *sy;
	int64_t    *pa,
			   *pb;
	nn_result	rc,
				rg;
	nn_error	err;
	mop_gpu_model *g;
	mop_gpu_data *da,
			   *db;
	int64_t		in = c->plan.in_dim,
				yd = c->plan.y_dim;
	int			rcode;

	make_rows(c, steps_rows_a, &xa, &ya);
	make_rows(c, rows_b, &xb, &yb);
	pa = malloc(sizeof(int64_t) * steps_rows_a);
	pb = malloc(sizeof(int64_t) * rows_b);
	for (int i = 0; i < steps_rows_a; i++)
		pa[i] = (i * 7 + 3) % steps_rows_a;
	for (int i = 0; i < rows_b; i++)
		pb[i] = rows_b - 1 - i;
	/* CPU: feed the permuted rows, as the aggregate does */
	sx = malloc(sizeof(float) * (steps_rows_a + rows_b) * in);
	sy = malloc(sizeof(float) * (steps_rows_a + rows_b) * yd);
	for (int i = 0; i < steps_rows_a; i++)
	{
		memcpy(sx + i * in, xa + pa[i] * in, sizeof(float) * in);
		memcpy(sy + i * yd, ya + pa[i] * yd, sizeof(float) * yd);
	}
	for (int i = 0; i < rows_b; i++)
	{
		memcpy(sx + (steps_rows_a + i) * in, xb + pb[i] * in, sizeof(float) * in);
		memcpy(sy + (steps_rows_a + i) * yd, yb + pb[i] * yd, sizeof(float) * yd);
	}
	if (nn_train_begin(c, 0, &err) != NN_OK ||
		nn_train_feed(c, sx, sy, steps_rows_a, &err) != NN_OK ||
		nn_train_feed(c, sx + steps_rows_a * in, sy + steps_rows_a * yd, rows_b, &err) != NN_OK ||
		nn_train_end(c, &rc, &err) != NN_OK)
	{
		report(0, "%s: cpu training: %s", name, err.msg);
		return;
	}
	g = open_gpu(h);
	da = upload(h, xa, ya, steps_rows_a);
	db = upload(h, xb, yb, rows_b);
	if (!g || !da || !db)
		return;
	rcode = G.train_begin(g, msg, sizeof(msg));
	if (!rcode)
		rcode = G.train_order(g, 0, da, pa, msg, sizeof(msg));
	/* feed a in slices of batch - 1 rows (the aggregate feeds a batch at a time) */
	for (int off = 0, sl = whole_feeds ? steps_rows_a : spec->batch_size > 1 ? spec->batch_size - 1 : 1;
		 !rcode && off < steps_rows_a; off += sl)
		rcode = G.train_feed(g, da, off, steps_rows_a - off < sl ? steps_rows_a - off : sl, msg,
							 sizeof(msg));
	if (!rcode)
		rcode = G.train_order(g, 0, db, pb, msg, sizeof(msg));
	if (!rcode)
		rcode = G.train_feed(g, db, 0, rows_b, msg, sizeof(msg));
	if (!rcode)
		rcode = G.train_end(g, &rg, msg, sizeof(msg));
	if (!rcode)
		rcode = G.model_sync(g, msg, sizeof(msg));
	if (rcode)
		report(0, "%s: gpu training: %s", name, msg);
	else
	{
		double		ew = rel_err(c->params, h->params, c->plan.n_params);
		double		eo = c->plan.n_opt ? rel_err(c->opt, h->opt, c->plan.n_opt) : 0;
		double		eb = c->plan.n_bufs ? rel_err(c->bufs, h->bufs, c->plan.n_bufs) : 0;
		int			counters = c->steps == h->steps && c->rows_trained == h->rows_trained &&
			c->sub_epochs == h->sub_epochs && rc.rows == rg.rows && rc.steps == rg.steps &&
			memcmp(c->rng, h->rng, sizeof(c->rng)) == 0;
		int			metric_ok = metric_close(spec->metric, rc.metric_sum / rc.rows,
											 rg.metric_sum / (rg.rows ? rg.rows : 1));

		report(ew < tol && eo < tol * 10 && eb < tol && counters && metric_ok &&
			   fabs(rc.loss_sum - rg.loss_sum) <= tol * fabs(rc.loss_sum) + 1e-6,
			   "%s: %lld steps over %d + %d rows: weights err %.1e, optimizer state err %.1e, running statistics err %.1e, loss %.5f/%.5f, %s %.5f/%.5f, counters and generator %s",
			   name, (long long) c->steps, steps_rows_a, rows_b, ew, eo, eb, rc.loss_sum,
			   rg.loss_sum, nn_metric_name(spec->metric), rc.metric_sum / rc.rows,
			   rg.metric_sum / (rg.rows ? rg.rows : 1), counters ? "equal" : "DIFFER");
	}
	G.data_free(da);
	G.data_free(db);
	G.model_close(g);
	free(xa);
	free(ya);
	free(xb);
	free(yb);
	free(sx);
	free(sy);
	free(pa);
	free(pb);
	nn_model_free(c);
	nn_model_free(h);
}

static void
test_optimizers(void)
{
	struct
	{
		const char *name;
		int			opt;
		float		lr,
					mom;
		int			nesterov;
		float		l2,
					wd,
					clip;
	}			o[] = {
		{"sgd", NN_OPT_SGD, 0.05f, 0, 0, 0, 0, 0},
		{"sgd momentum + l2", NN_OPT_SGD, 0.05f, 0.9f, 0, 1e-3f, 0, 0},
		{"sgd nesterov + clip", NN_OPT_SGD, 0.05f, 0.9f, 1, 0, 0, 0.5f},
		{"adam", NN_OPT_ADAM, 1e-3f, 0, 0, 0, 0, 0},
		{"adam + l2 + clip", NN_OPT_ADAM, 1e-3f, 0, 0, 1e-2f, 0, 0.1f},
		{"adamw", NN_OPT_ADAMW, 1e-3f, 0, 0, 0, 0.05f, 0},
		{"rmsprop", NN_OPT_RMSPROP, 1e-3f, 0, 0, 0, 0, 0},
		{"rmsprop momentum", NN_OPT_RMSPROP, 1e-3f, 0.5f, 0, 0, 0, 0},
	};

	for (size_t i = 0; i < sizeof(o) / sizeof(o[0]); i++)
	{
		nn_spec		s = base_spec(1, 1, 24, 16);
		char		name[96];

		ADD(s, dense(20, NN_ACT_RELU));
		ADD(s, dense(6, NN_ACT_NONE));
		s.optimizer = o[i].opt;
		s.lr = o[i].lr;
		s.momentum = o[i].mom;
		s.nesterov = o[i].nesterov;
		s.l2 = o[i].l2;
		s.weight_decay = o[i].wd;
		s.clip_norm = o[i].clip;
		snprintf(name, sizeof(name), "optimizer %s", o[i].name);
		test_train(name, &s, 80, 37, 1e-4);
	}
}

/*
 * Twelve buffers of 5 rows each in shuffled order, batch 32: a batch is
 * gathered from up to eight pieces, more than a step's table entry holds.
 */
static void
test_many_buffers(void)
{
	nn_spec		s = base_spec(1, 1, 9, 32);
	nn_model   *c,
			   *h;
	float	   *x,
			   *y;
	int64_t		perm[5] = {3, 0, 4, 1, 2};
	float		sx[60 * 9],
				sy[60];
	mop_gpu_data *d[12];
	mop_gpu_model *g;
	nn_result	rc,
				rg;
	nn_error	err;
	int			code = 0;

	ADD(s, dense(7, NN_ACT_RELU));
	ADD(s, dense(4, NN_ACT_NONE));
	c = cpu_model(&s);
	h = clone(c);
	make_rows(c, 60, &x, &y);
	for (int b = 0; b < 12; b++)
		for (int i = 0; i < 5; i++)
		{
			memcpy(sx + (b * 5 + i) * 9, x + (b * 5 + perm[i]) * 9, sizeof(float) * 9);
			sy[b * 5 + i] = y[b * 5 + perm[i]];
		}
	nn_train(c, sx, sy, 60, 0, &rc, &err);
	if (!(g = open_gpu(h)))
		return;
	for (int b = 0; b < 12; b++)
		if (!(d[b] = upload(h, x + b * 45, y + b * 5, 5)))
			return;
	code = G.train_begin(g, msg, sizeof(msg));
	for (int b = 0; b < 12 && !code; b++)
	{
		code = G.train_order(g, 0, d[b], perm, msg, sizeof(msg));
		if (!code)
			code = G.train_feed(g, d[b], 0, 5, msg, sizeof(msg));
	}
	if (!code)
		code = G.train_end(g, &rg, msg, sizeof(msg));
	if (!code)
		code = G.model_sync(g, msg, sizeof(msg));
	report(!code && rel_err(c->params, h->params, c->plan.n_params) < 1e-4 &&
		   c->steps == h->steps && rc.rows == rg.rows,
		   "batches gathered from up to 8 buffers (5 rows each): weights err %.1e over %lld steps %s",
		   rel_err(c->params, h->params, c->plan.n_params), (long long) h->steps, code ? msg : "");
	for (int b = 0; b < 12; b++)
		G.data_free(d[b]);
	G.model_close(g);
	free(x);
	free(y);
	nn_model_free(c);
	nn_model_free(h);
}

/*
 * Two models training on one buffer at once, interleaved, each in its own
 * order (as two groups of one aggregate query): neither sees the other's.
 */
static void
test_shared_buffer(void)
{
	nn_spec		s = base_spec(1, 1, 12, 16);
	nn_model   *c[2],
			   *h[2];
	mop_gpu_model *g[2];
	mop_gpu_data *d;
	float	   *x,
			   *y,
			   *sx,
			   *sy;
	int64_t		n = 3 * 16 + 5,
				perm[2][53];
	nn_result	r;
	nn_error	err;
	int			code = 0;
	double		e[2];

	ADD(s, dense(10, NN_ACT_TANH));
	ADD(s, dense(5, NN_ACT_NONE));
	c[0] = cpu_model(&s);
	s.seed = 8;
	c[1] = cpu_model(&s);
	make_rows(c[0], n, &x, &y);
	sx = malloc(sizeof(float) * n * 12);
	sy = malloc(sizeof(float) * n);
	for (int k = 0; k < 2; k++)
	{
		for (int64_t i = 0; i < n; i++)
			perm[k][i] = k ? (i * 11 + 5) % n : n - 1 - i;
		for (int64_t i = 0; i < n; i++)
		{
			memcpy(sx + i * 12, x + perm[k][i] * 12, sizeof(float) * 12);
			sy[i] = y[perm[k][i]];
		}
		h[k] = clone(c[k]);
		nn_train(c[k], sx, sy, n, 0, &r, &err);
		if (!(g[k] = open_gpu(h[k])))
			return;
	}
	if (!(d = upload(h[0], x, y, n)))
		return;
	for (int k = 0; k < 2 && !code; k++)
	{
		code = G.train_begin(g[k], msg, sizeof(msg));
		if (!code)
			code = G.train_order(g[k], 0, d, perm[k], msg, sizeof(msg));
	}
	/* model 0 takes 19 rows (a batch and a part), model 1 all, model 0 the rest */
	if (!code)
		code = G.train_feed(g[0], d, 0, 19, msg, sizeof(msg));
	if (!code)
		code = G.train_feed(g[1], d, 0, n, msg, sizeof(msg));
	if (!code)
		code = G.train_feed(g[0], d, 19, n - 19, msg, sizeof(msg));
	for (int k = 0; k < 2 && !code; k++)
	{
		code = G.train_end(g[k], &r, msg, sizeof(msg));
		if (!code)
			code = G.model_sync(g[k], msg, sizeof(msg));
		e[k] = rel_err(c[k]->params, h[k]->params, c[k]->plan.n_params);
	}
	report(!code && e[0] < 1e-4 && e[1] < 1e-4,
		   "two models interleaved on one buffer, each in its own order: weights err %.1e and %.1e %s",
		   code ? 1.0 : e[0], code ? 1.0 : e[1], code ? msg : "");
	for (int k = 0; k < 2; k++)
	{
		G.model_close(g[k]);
		nn_model_free(c[k]);
		nn_model_free(h[k]);
	}
	G.data_free(d);
	free(x);
	free(y);
	free(sx);
	free(sy);
}

/* ---- gangs: several models of one shape in one mirror ---------------- */

#define GANG 3

/* member k of a gang: spec with its own seed, learning rate and regularisation */
static nn_spec
member_spec(const nn_spec *base, int k)
{
	nn_spec		s = *base;

	s.seed = base->seed + 11 * k;
	s.lr = base->lr * (k == 1 ? 0.5f : k == 2 ? 2.0f : 1.0f);
	if (k == 2)
	{
		s.l2 = 1e-3f;
		s.clip_norm = 0.5f;
	}
	if (k == 1 && s.optimizer == NN_OPT_ADAM)
		s.beta1 = 0.8f;
	return s;
}

static mop_gpu_model *
open_gang(nn_model **h, int n)
{
	mop_gpu_options o = {0, 0, no_graphs};
	mop_gpu_model *g;

	if (G.gang_open(h, n, &o, &g, msg, sizeof(msg)) != MOP_GPU_OK)
	{
		report(0, "gang open: %s", msg);
		return NULL;
	}
	return g;
}

/* row i of buffer b visited i-th by member k */
static int64_t
member_row(int k, int64_t i, int64_t n, int b)
{
	return b == 0 ? (i * (7 + 2 * k) + 3 + k) % n : (k % 2 ? i : n - 1 - i);
}

/*
 * A gang of GANG models trained together for one sub-epoch over two
 * buffers, each member in its own order, against each model trained alone
 * on the CPU: every member's weights, optimizer state, counters, generator
 * and loss.
 */
static void
test_gang_train(const char *name, const nn_spec *base, int64_t na, int64_t nbr, double tol)
{
	nn_model   *c[GANG],
			   *h[GANG],
			   *alone[GANG];	/* each member trained alone on the GPU */
	int64_t    *perm[GANG][2];
	float	   *x[2],
			   *y[2];
	int64_t		nr[2] = {na, nbr};
	nn_result	rc[GANG],
				rg[GANG];
	mop_gpu_model *g;
	mop_gpu_data *d[2];
	int			code = 0,
				good = 1;
	double		worst = 0;

	/* rows: na with 7 coprime to it (member 0's order is a permutation) */
	for (int k = 0; k < GANG; k++)
	{
		nn_spec		s = member_spec(base, k);

		c[k] = cpu_model(&s);
		h[k] = clone(c[k]);
	}
	for (int k = 0; k < GANG; k++)
		alone[k] = clone(c[k]);
	make_rows(c[0], na, &x[0], &y[0]);
	make_rows(c[0], nbr, &x[1], &y[1]);
	for (int k = 0; k < GANG; k++)
	{
		int64_t		in = c[k]->plan.in_dim,
					yd = c[k]->plan.y_dim;
		float	   *sx = malloc(sizeof(float) * (na + nbr) * in),
				   *sy = malloc(sizeof(float) * (na + nbr) * yd);
		nn_error	err;
		int64_t		at = 0;

		for (int b = 0; b < 2; b++)
		{
			perm[k][b] = malloc(sizeof(int64_t) * nr[b]);
			for (int64_t i = 0; i < nr[b]; i++)
			{
				perm[k][b][i] = member_row(k, i, nr[b], b);
				memcpy(sx + at * in, x[b] + perm[k][b][i] * in, sizeof(float) * in);
				memcpy(sy + at * yd, y[b] + perm[k][b][i] * yd, sizeof(float) * yd);
				at++;
			}
		}
		if (nn_train_begin(c[k], 0, &err) != NN_OK ||
			nn_train_feed(c[k], sx, sy, na, &err) != NN_OK ||
			nn_train_feed(c[k], sx + na * in, sy + na * yd, nbr, &err) != NN_OK ||
			nn_train_end(c[k], &rc[k], &err) != NN_OK)
		{
			report(0, "%s: cpu training of member %d: %s", name, k + 1, err.msg);
			return;
		}
		free(sx);
		free(sy);
	}
	if (!(g = open_gang(h, GANG)))
		return;
	d[0] = upload(h[0], x[0], y[0], na);
	d[1] = upload(h[0], x[1], y[1], nbr);
	if (!d[0] || !d[1])
		return;
	code = G.train_begin(g, msg, sizeof(msg));
	for (int b = 0; b < 2 && !code; b++)
	{
		int64_t		sl = whole_feeds ? nr[b] : base->batch_size > 1 ? base->batch_size - 1 : 1;

		for (int k = 0; k < GANG && !code; k++)
			code = G.train_order(g, k, d[b], perm[k][b], msg, sizeof(msg));
		for (int64_t off = 0; off < nr[b] && !code; off += sl)
			code = G.train_feed(g, d[b], off, nr[b] - off < sl ? nr[b] - off : sl, msg,
								sizeof(msg));
	}
	if (!code)
		code = G.train_end(g, rg, msg, sizeof(msg));
	if (!code)
		code = G.model_sync(g, msg, sizeof(msg));
	G.model_close(g);
	/* every member again, alone on the GPU: the gang must not change its numbers */
	for (int k = 0; k < GANG && !code; k++)
	{
		nn_result	ra;

		if (!(g = open_gpu(alone[k])))
		{
			code = 1;
			break;
		}
		code = G.train_begin(g, msg, sizeof(msg));
		for (int b = 0; b < 2 && !code; b++)
		{
			int64_t		sl = whole_feeds ? nr[b] : base->batch_size > 1 ? base->batch_size - 1 : 1;

			code = G.train_order(g, 0, d[b], perm[k][b], msg, sizeof(msg));
			for (int64_t off = 0; off < nr[b] && !code; off += sl)
				code = G.train_feed(g, d[b], off, nr[b] - off < sl ? nr[b] - off : sl, msg,
									sizeof(msg));
		}
		if (!code)
			code = G.train_end(g, &ra, msg, sizeof(msg));
		if (!code)
			code = G.model_sync(g, msg, sizeof(msg));
		G.model_close(g);
	}
	for (int k = 0; k < GANG && !code; k++)
	{
		double		ew = rel_err(c[k]->params, h[k]->params, c[k]->plan.n_params);
		double		eo = c[k]->plan.n_opt ? rel_err(c[k]->opt, h[k]->opt, c[k]->plan.n_opt) : 0;
		double		eb = c[k]->plan.n_bufs ? rel_err(c[k]->bufs, h[k]->bufs, c[k]->plan.n_bufs) : 0;

		good &= ew < tol && eo < tol * 10 && eb < tol &&
			metric_close(base->metric, rc[k].metric_sum / rc[k].rows,
						 rg[k].metric_sum / (rg[k].rows ? rg[k].rows : 1)) &&
			c[k]->steps == h[k]->steps && c[k]->rows_trained == h[k]->rows_trained &&
			c[k]->sub_epochs == h[k]->sub_epochs && rc[k].rows == rg[k].rows &&
			rc[k].steps == rg[k].steps && memcmp(c[k]->rng, h[k]->rng, sizeof(c[k]->rng)) == 0 &&
			fabs(rc[k].loss_sum - rg[k].loss_sum) <= tol * fabs(rc[k].loss_sum) + 1e-6;
		worst = ew > worst ? ew : worst;
		worst = eo / 10 > worst ? eo / 10 : worst;
	}
	{
		double		ea = 0,
					ec[GANG];

		for (int k = 0; k < GANG && !code; k++)
		{
			double		e = rel_err(alone[k]->params, h[k]->params, h[k]->plan.n_params);

			ea = e > ea ? e : ea;
			ec[k] = rel_err(c[k]->params, h[k]->params, h[k]->plan.n_params);
		}
		report(!code && good && ea < tol,
			   "gang of %d, %s: %lld steps each over %lld + %lld rows: every member as trained alone on the GPU (worst weights err %.1e) and on the CPU (worst weights/state err %.1e; weights %.1e %.1e %.1e) %s",
			   GANG, name, (long long) h[0]->steps, (long long) na, (long long) nbr, ea, worst,
			   code ? 0 : ec[0], code ? 0 : ec[1], code ? 0 : ec[2], code ? msg : "");
	}
	for (int k = 0; k < GANG; k++)
		nn_model_free(alone[k]);
	for (int b = 0; b < 2; b++)
	{
		G.data_free(d[b]);
		free(x[b]);
		free(y[b]);
	}
	for (int k = 0; k < GANG; k++)
	{
		free(perm[k][0]);
		free(perm[k][1]);
		nn_model_free(c[k]);
		nn_model_free(h[k]);
	}
}

/*
 * A gang fed twelve 5-row buffers, batch 32: its steps are gathered from
 * more pieces than an entry holds (rows staged early) and its last step is
 * short; each member keeps its own order of every buffer.
 */
static void
test_gang_many_buffers(void)
{
	nn_spec		s = base_spec(1, 1, 9, 32);
	nn_model   *c[2],
			   *h[2];
	float	   *x,
			   *y;
	int64_t		perm[2][5] = {{3, 0, 4, 1, 2}, {1, 4, 2, 0, 3}};
	float		sx[60 * 9],
				sy[60];
	mop_gpu_data *d[12];
	mop_gpu_model *g;
	nn_result	rc,
				rg[2];
	nn_error	err;
	int			code = 0;
	double		e[2] = {1, 1};

	ADD(s, dense(7, NN_ACT_RELU));
	ADD(s, dense(4, NN_ACT_NONE));
	for (int k = 0; k < 2; k++)
	{
		nn_spec		sk = member_spec(&s, k);

		c[k] = cpu_model(&sk);
		h[k] = clone(c[k]);
	}
	make_rows(c[0], 60, &x, &y);
	for (int k = 0; k < 2; k++)
	{
		for (int b = 0; b < 12; b++)
			for (int i = 0; i < 5; i++)
			{
				memcpy(sx + (b * 5 + i) * 9, x + (b * 5 + perm[k][i]) * 9, sizeof(float) * 9);
				sy[b * 5 + i] = y[b * 5 + perm[k][i]];
			}
		nn_train(c[k], sx, sy, 60, 0, &rc, &err);
	}
	if (!(g = open_gang(h, 2)))
		return;
	for (int b = 0; b < 12; b++)
		if (!(d[b] = upload(h[0], x + b * 45, y + b * 5, 5)))
			return;
	code = G.train_begin(g, msg, sizeof(msg));
	for (int b = 0; b < 12 && !code; b++)
	{
		for (int k = 0; k < 2 && !code; k++)
			code = G.train_order(g, k, d[b], perm[k], msg, sizeof(msg));
		if (!code)
			code = G.train_feed(g, d[b], 0, 5, msg, sizeof(msg));
	}
	if (!code)
		code = G.train_end(g, rg, msg, sizeof(msg));
	if (!code)
		code = G.model_sync(g, msg, sizeof(msg));
	for (int k = 0; k < 2 && !code; k++)
		e[k] = rel_err(c[k]->params, h[k]->params, c[k]->plan.n_params);
	report(!code && e[0] < 1e-4 && e[1] < 1e-4 && c[1]->steps == h[1]->steps &&
		   rg[1].rows == 60,
		   "gang of 2 fed 12 buffers of 5 rows (batches from up to 8 pieces, a short last step): weights err %.1e, %.1e %s",
		   e[0], e[1], code ? msg : "");
	for (int b = 0; b < 12; b++)
		G.data_free(d[b]);
	G.model_close(g);
	free(x);
	free(y);
	for (int k = 0; k < 2; k++)
	{
		nn_model_free(c[k]);
		nn_model_free(h[k]);
	}
}

/*
 * Gangs: who may share one (the reason when not), evaluation per member,
 * and a member that diverges while the others train on.
 */
static void
test_gang_rules(void)
{
	nn_spec		s = base_spec(1, 1, 10, 8),
				s2;
	nn_model   *a,
			   *b,
			   *h[2],
			   *c[2];
	mop_gpu_model *g;
	mop_gpu_data *d;
	mop_gpu_options o = {0, 0, 0};
	float	   *x,
			   *y;
	nn_result	rc[2],
				rg[2];
	nn_error	err;
	nn_status	st1;
	int			rcode;
	char		why[256] = "";

	ADD(s, dense(6, NN_ACT_RELU));
	ADD(s, dense(4, NN_ACT_NONE));
	a = cpu_model(&s);
	s2 = s;
	s2.batch_size = 16;
	b = cpu_model(&s2);
	rcode = G.gang_check(a, b, why, sizeof(why));
	h[0] = a;
	h[1] = b;
	msg[0] = '\0';
	report(rcode == MOP_GPU_EINVAL && strstr(why, "batch sizes 8 and 16") &&
		   G.gang_open(h, 2, &o, &g, msg, sizeof(msg)) == MOP_GPU_EINVAL &&
		   strstr(msg, "model 2 cannot train in a gang with model 1"),
		   "models of other batch sizes do not share a gang: \"%s\"", msg);
	nn_model_free(b);
	s2 = s;
	s2.layers[0].units = 7;
	b = cpu_model(&s2);
	h[1] = b;
	report(G.gang_open(h, 2, &o, &g, msg, sizeof(msg)) == MOP_GPU_EINVAL &&
		   strstr(msg, "architectures differ"), "nor models of other architectures: \"%s\"", msg);
	nn_model_free(b);
	h[1] = a;
	report(G.gang_open(h, 2, &o, &g, msg, sizeof(msg)) == MOP_GPU_EINVAL,
		   "nor a model with itself: \"%s\"", msg);

	/* evaluation: each member's sums, as the CPU computes them alone */
	s2 = member_spec(&s, 1);
	b = cpu_model(&s2);
	h[1] = b;
	make_rows(a, 75, &x, &y);
	memset(rc, 0, sizeof(rc));
	memset(rg, 0, sizeof(rg));
	nn_evaluate(a, x, y, 75, &rc[0], &err);
	nn_evaluate(b, x, y, 75, &rc[1], &err);
	g = open_gang(h, 2);
	d = upload(a, x, y, 75);
	if (!g || !d)
		return;
	rcode = G.evaluate(g, d, 0, 75, rg, msg, sizeof(msg));
	report(!rcode && rg[0].rows == 75 && rg[1].rows == 75 &&
		   fabs(rc[0].loss_sum - rg[0].loss_sum) < 1e-5 * rc[0].loss_sum &&
		   fabs(rc[1].loss_sum - rg[1].loss_sum) < 1e-5 * rc[1].loss_sum &&
		   rc[0].metric_sum == rg[0].metric_sum && rc[1].metric_sum == rg[1].metric_sum,
		   "gang evaluation: losses %.5f/%.5f and %.5f/%.5f %s", rc[0].loss_sum,
		   rg[0].loss_sum, rc[1].loss_sum, rg[1].loss_sum, rcode ? msg : "");
	G.model_close(g);
	G.data_free(d);
	free(x);
	free(y);
	nn_model_free(a);
	nn_model_free(b);

	/* member 2 diverges (SGD at lr 1e6 on MSE); member 1 trains on as alone */
	s.optimizer = NN_OPT_SGD;
	s.loss = NN_LOSS_MSE;
	s.metric = NN_METRIC_MSE;
	s.lr = 0.01f;
	s2 = s;
	s2.lr = 1e6f;
	c[0] = cpu_model(&s);
	c[1] = cpu_model(&s2);
	h[0] = clone(c[0]);
	h[1] = clone(c[1]);
	make_rows(c[0], 64, &x, &y);
	nn_train(c[0], x, y, 64, 0, &rc[0], &err);
	st1 = nn_train(c[1], x, y, 64, 0, &rc[1], &err);
	g = open_gang(h, 2);
	d = upload(h[0], x, y, 64);
	if (!g || !d)
		return;
	rcode = G.train_begin(g, msg, sizeof(msg));
	if (!rcode)
		rcode = G.train_feed(g, d, 0, 64, msg, sizeof(msg));
	if (!rcode)
		rcode = G.train_end(g, rg, msg, sizeof(msg));
	G.model_sync(g, why, sizeof(why));
	report(st1 == NN_DIVERGED && rcode == MOP_GPU_EDIVERGED && strstr(msg, "model 2 of the gang") &&
		   h[1]->diverged && !h[0]->diverged && h[1]->steps == c[1]->steps &&
		   h[1]->rows_trained == c[1]->rows_trained && h[0]->steps == c[0]->steps &&
		   h[0]->sub_epochs == 1 && rel_err(c[0]->params, h[0]->params, c[0]->plan.n_params) < 1e-4,
		   "a member that diverges stops where the CPU stops (\"%s\", %lld steps) while the other trains on (weights err %.1e)",
		   msg, (long long) h[1]->steps, rel_err(c[0]->params, h[0]->params, c[0]->plan.n_params));
	/* the next sub-epoch trains the healthy member only */
	rcode = G.train_begin(g, msg, sizeof(msg));
	if (!rcode)
		rcode = G.train_feed(g, d, 0, 64, msg, sizeof(msg));
	if (!rcode || rcode == MOP_GPU_EDIVERGED)
		rcode = G.train_end(g, rg, msg, sizeof(msg));
	nn_train(c[0], x, y, 64, 0, &rc[0], &err);
	G.model_sync(g, why, sizeof(why));
	report(h[0]->steps == c[0]->steps && h[1]->steps == c[1]->steps && h[0]->sub_epochs == 2 &&
		   rg[1].rows == 0 && rel_err(c[0]->params, h[0]->params, c[0]->plan.n_params) < 1e-4,
		   "the next sub-epoch of that gang trains the healthy member only (%lld and %lld steps)",
		   (long long) h[0]->steps, (long long) h[1]->steps);
	G.model_close(g);
	G.data_free(d);
	free(x);
	free(y);
	for (int k = 0; k < 2; k++)
	{
		nn_model_free(c[k]);
		nn_model_free(h[k]);
	}
}

/* the CPU -> GPU -> CPU hop through the blob, against an all-CPU run */
static void
test_hop(void)
{
	nn_spec		s = base_spec(1, 1, 30, 32);
	nn_model   *ref,
			   *m,
			   *h;
	float	   *x,
			   *y;
	nn_result	r1,
				r2,
				r3,
				rr;
	nn_error	err;
	size_t		cap,
				len;
	void	   *blob;
	mop_gpu_model *g;
	mop_gpu_data *d;
	int			rc;
	int64_t		n = 600;

	ADD(s, dense(24, NN_ACT_RELU));
	ADD(s, dense(3, NN_ACT_NONE));
	s.lr = 3e-3f;
	ref = cpu_model(&s);
	m = clone(ref);
	make_rows(ref, n, &x, &y);
	/* labels a model can learn: the sign pattern of two inputs */
	for (int64_t r = 0; r < n; r++)
		y[r] = (float) ((x[r * 30] > 0) + (x[r * 30 + 1] > 0.5f));
	for (int e = 0; e < 3; e++)
		nn_train(ref, x, y, n, 0, &rr, &err);
	/* epoch 1 on the CPU, then through a blob to the GPU */
	nn_train(m, x, y, n, 0, &r1, &err);
	cap = nn_model_blob_size(m);
	blob = malloc(cap);
	nn_model_serialize(m, blob, cap, &len, &err);
	nn_model_free(m);
	nn_model_deserialize(blob, len, &h, &err);
	g = open_gpu(h);
	d = upload(h, x, y, n);
	if (!g || !d)
		return;
	rc = G.train_begin(g, msg, sizeof(msg));
	if (!rc)
		rc = G.train_feed(g, d, 0, n, msg, sizeof(msg));
	if (!rc)
		rc = G.train_end(g, &r2, msg, sizeof(msg));
	if (!rc)
		rc = G.model_sync(g, msg, sizeof(msg));
	G.model_close(g);
	G.data_free(d);
	if (rc)
	{
		report(0, "hop: gpu epoch: %s", msg);
		return;
	}
	/* back to the CPU through a blob */
	nn_model_serialize(h, blob, cap, &len, &err);
	nn_model_free(h);
	if (nn_model_deserialize(blob, len, &m, &err) != NN_OK)
	{
		report(0, "hop: blob written after the GPU epoch does not load: %s", err.msg);
		return;
	}
	nn_train(m, x, y, n, 0, &r3, &err);
	report(rel_err(ref->params, m->params, ref->plan.n_params) < 1e-3 &&
		   r2.loss_sum < r1.loss_sum && r3.loss_sum < r2.loss_sum && m->sub_epochs == 3 &&
		   m->steps == ref->steps,
		   "hop cpu -> gpu -> cpu keeps learning: loss per row %.4f -> %.4f -> %.4f (all-cpu %.4f), weights err vs all-cpu %.1e",
		   r1.loss_sum / n, r2.loss_sum / n, r3.loss_sum / n, rr.loss_sum / n,
		   rel_err(ref->params, m->params, ref->plan.n_params));
	free(blob);
	free(x);
	free(y);
	nn_model_free(m);
	nn_model_free(ref);
}

static void
test_evaluate_and_determinism(void)
{
	nn_spec		s = base_spec(12, 12, 3, 16);
	nn_model   *c,
			   *h1,
			   *h2;
	float	   *x,
			   *y;
	nn_result	rc = {0},
				rg = {0},
				t1,
				t2;
	nn_error	err;
	mop_gpu_model *g;
	mop_gpu_data *d;
	int			rcode = 0;

	ADD(s, conv(8, 3, 1, NN_PAD_SAME, NN_ACT_RELU));
	ADD(s, pool(2, 2, NN_PAD_VALID));
	ADD(s, simple(NN_LAYER_FLATTEN));
	ADD(s, dense(10, NN_ACT_NONE));
	c = cpu_model(&s);
	h1 = clone(c);
	h2 = clone(c);
	make_rows(c, 200, &x, &y);
	nn_evaluate(c, x, y, 200, &rc, &err);
	g = open_gpu(h1);
	d = upload(h1, x, y, 200);
	if (!g || !d)
		return;
	rcode = G.evaluate(g, d, 0, 200, &rg, msg, sizeof(msg));
	report(!rcode && rg.rows == 200 && fabs(rc.loss_sum - rg.loss_sum) < 1e-5 * rc.loss_sum &&
		   rc.metric_sum == rg.metric_sum,
		   "evaluate: loss %.6f/%.6f, metric %.0f/%.0f over %lld rows %s", rc.loss_sum,
		   rg.loss_sum, rc.metric_sum, rg.metric_sum, (long long) rg.rows, rcode ? msg : "");
	/* the same training twice gives the same bits */
	for (int k = 0; k < 2 && !rcode; k++)
	{
		nn_model   *h = k ? h2 : h1;
		mop_gpu_model *gg;

		no_graphs = k;			/* the second run without graphs: the same bits */
		gg = k ? open_gpu(h2) : g;
		no_graphs = 0;

		rcode = G.train_begin(gg, msg, sizeof(msg));
		if (!rcode)
			rcode = G.train_feed(gg, d, 0, 200, msg, sizeof(msg));
		if (!rcode)
			rcode = G.train_end(gg, k ? &t2 : &t1, msg, sizeof(msg));
		if (!rcode)
			rcode = G.model_sync(gg, msg, sizeof(msg));
		if (k)
			G.model_close(gg);
		(void) h;
	}
	report(!rcode && memcmp(h1->params, h2->params, sizeof(float) * c->plan.n_params) == 0 &&
		   memcmp(h1->opt, h2->opt, sizeof(float) * c->plan.n_opt) == 0 &&
		   t1.loss_sum == t2.loss_sum,
		   "deterministic: one sub-epoch as graphs and kernel by kernel gives identical weights, optimizer state and loss %s",
		   rcode ? msg : "");
	G.model_close(g);
	G.data_free(d);
	free(x);
	free(y);
	nn_model_free(c);
	nn_model_free(h1);
	nn_model_free(h2);
}

/* ---- schedules, class weights, batchnorm, whole-set metrics ---------- */

/*
 * Evaluation after some training on the CPU (batchnorm's running
 * statistics moved, outputs spread): loss and metric over 150 rows on the
 * CPU and the GPU from the same state; a whole-set metric through the
 * model's own gatherer (nn_evaluate_metric), which the GPU library feeds.
 */
static void
test_eval(const char *name, const nn_spec *spec)
{
	nn_model   *c = cpu_model(spec),
			   *h;
	float	   *x,
			   *y;
	nn_result	rt,
				rc = {0},
				rg = {0};
	nn_error	err;
	mop_gpu_model *g;
	mop_gpu_data *d;
	int			rcode,
				whole = nn_metric_whole_set((nn_metric) spec->metric);
	double		mc,
				mg;

	make_rows(c, 150, &x, &y);
	nn_train(c, x, y, 150, 0, &rt, &err);
	h = clone(c);
	nn_evaluate_reset(c);
	nn_evaluate(c, x, y, 150, &rc, &err);
	if (!(g = open_gpu(h)) || !(d = upload(h, x, y, 150)))
		return;
	nn_evaluate_reset(h);
	/* two calls, as the aggregate evaluates buffer by buffer */
	rcode = G.evaluate(g, d, 0, 70, &rg, msg, sizeof(msg));
	if (!rcode)
		rcode = G.evaluate(g, d, 70, 80, &rg, msg, sizeof(msg));
	mc = whole ? nn_evaluate_metric(c) : rc.metric_sum / rc.rows;
	mg = whole ? nn_evaluate_metric(h) : rg.metric_sum / (rg.rows ? rg.rows : 1);
	report(!rcode && rg.rows == 150 && fabs(rc.loss_sum - rg.loss_sum) <= 1e-5 * fabs(rc.loss_sum) + 1e-6 &&
		   metric_close(spec->metric, mc, mg) && (mc == mc) == (mg == mg),
		   "evaluate %s: loss %.6f/%.6f, %s %.6f/%.6f over %lld rows %s", name, rc.loss_sum,
		   rg.loss_sum, nn_metric_name((nn_metric) spec->metric), mc, mg, (long long) rg.rows,
		   rcode ? msg : "");
	G.model_close(g);
	G.data_free(d);
	free(x);
	free(y);
	nn_model_free(c);
	nn_model_free(h);
}

static nn_spec
mlp_spec(int in, int hidden, int out, int batch)
{
	nn_spec		s = base_spec(1, 1, in, batch);

	ADD(s, dense(hidden, NN_ACT_RELU));
	ADD(s, dense(out, NN_ACT_NONE));
	return s;
}

/*
 * Learning-rate schedules: sub-epochs at several epochs of each schedule
 * (the rate of the model's epoch count, warmup included), alone, in
 * graphs of eight steps and in a gang whose members follow their own
 * schedules; then one mirror training two epochs with the epoch count
 * moved between them, as a worker's aggregate never does but a replayed
 * graph must honour: the second epoch steps at its own rate.
 */
static void
test_schedules(void)
{
	struct
	{
		const char *name;
		int			sched,
					warmup,
					opt;
	}			k[] = {
		{"step, warmup 2, sgd momentum", NN_SCHED_STEP, 2, NN_OPT_SGD},
		{"exponential, adam", NN_SCHED_EXPONENTIAL, 0, NN_OPT_ADAM},
		{"cosine, warmup 1, adamw", NN_SCHED_COSINE, 1, NN_OPT_ADAMW},
		{"warmup 3 alone, rmsprop", NN_SCHED_NONE, 3, NN_OPT_RMSPROP},
	};
	int64_t		epochs[] = {0, 1, 4, 9};

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
	{
		nn_spec		s = mlp_spec(14, 18, 5, 16);

		s.optimizer = k[i].opt;
		s.lr = k[i].opt == NN_OPT_SGD ? 0.05f : 3e-3f;
		s.momentum = k[i].opt == NN_OPT_SGD ? 0.9f : 0.0f;
		s.weight_decay = k[i].opt == NN_OPT_ADAMW ? 0.1f : 0.0f;
		s.lr_schedule = k[i].sched;
		s.lr_warmup = k[i].warmup;
		s.lr_step_size = 2;
		s.lr_gamma = 0.5f;
		s.lr_min = 1e-4f;
		s.lr_epochs = 6;
		for (size_t e = 0; e < sizeof(epochs) / sizeof(epochs[0]); e++)
		{
			char		name[160];

			epochs_all = epochs[e];
			snprintf(name, sizeof(name), "schedule %s at epoch %lld (lr %.3g)", k[i].name,
					 (long long) epochs[e], nn_lr_at(&s, epochs[e]));
			whole_feeds = e % 2;
			test_train(name, &s, 21 * s.batch_size + 3, 2 * s.batch_size + 5, 1e-3);
			whole_feeds = 0;
		}
		epochs_all = 5;
		{
			char		name[160];

			snprintf(name, sizeof(name), "schedule %s at epoch 5", k[i].name);
			test_gang_train(name, &s, 5 * s.batch_size + 3, 2 * s.batch_size + 5, 1e-3);
		}
		epochs_all = 0;
	}

	/* two epochs through one mirror: the graphs captured in the first replay the second at its rate */
	{
		nn_spec		s = mlp_spec(10, 12, 4, 8);
		nn_model   *c,
				   *h;
		float	   *x,
				   *y;
		nn_result	r;
		nn_error	err;
		mop_gpu_model *g;
		mop_gpu_data *d;
		int			rcode = 0;
		int64_t		n = 40 * 8 + 3;

		s.optimizer = NN_OPT_SGD;
		s.lr = 0.1f;
		s.lr_schedule = NN_SCHED_STEP;
		s.lr_step_size = 1;
		s.lr_gamma = 0.1f;
		c = cpu_model(&s);
		h = clone(c);
		make_rows(c, n, &x, &y);
		if (!(g = open_gpu(h)) || !(d = upload(h, x, y, n)))
			return;
		for (int e = 0; e < 2 && !rcode; e++)
		{
			nn_model_set_epochs(c, e);
			nn_model_set_epochs(h, e);
			nn_train(c, x, y, n, 0, &r, &err);
			rcode = G.train_begin(g, msg, sizeof(msg));
			if (!rcode)
				rcode = G.train_feed(g, d, 0, n, msg, sizeof(msg));
			if (!rcode)
				rcode = G.train_end(g, &r, msg, sizeof(msg));
		}
		if (!rcode)
			rcode = G.model_sync(g, msg, sizeof(msg));
		report(!rcode && rel_err(c->params, h->params, c->plan.n_params) < 1e-4 &&
			   c->steps == h->steps,
			   "one mirror, two epochs of a step schedule (lr 0.1 then 0.01) through the same graphs: weights err %.1e %s",
			   rcode ? 1.0 : rel_err(c->params, h->params, c->plan.n_params), rcode ? msg : "");
		G.model_close(g);
		G.data_free(d);
		free(x);
		free(y);
		nn_model_free(c);
		nn_model_free(h);
	}
}

/*
 * Class weights: the weighted mean loss and its gradient (one batch), a
 * sub-epoch, graphs of eight steps, a gang, for cross-entropy and for
 * binary cross-entropy of one output; evaluation stays unweighted; and a
 * soft binary label refused in weighted training (as the CPU refuses it)
 * but evaluated.
 */
static void
test_class_weights(void)
{
	zoo_entry	ce,
				bce;

	ce.name = "class-weighted cross-entropy";
	ce.spec = mlp_spec(17, 15, 4, 32);
	bce.name = "class-weighted binary cross-entropy";
	bce.spec = base_spec(1, 1, 13, 24);
	ADD(bce.spec, dense(9, NN_ACT_TANH));
	ADD(bce.spec, dense(1, NN_ACT_NONE));
	bce.spec.loss = NN_LOSS_SIGMOID_BCE;

	for (int k = 0; k < 2; k++)
	{
		const zoo_entry *z = k ? &bce : &ce;
		char		name[160];

		if (k == 0)
		{
			float		w[4] = {0.5f, 2.0f, 1.0f, 3.5f};

			memcpy(cw_all, w, sizeof(w));
			n_cw = 4;
		}
		else
		{
			cw_all[0] = 1.0f;
			cw_all[1] = 4.0f;
			n_cw = 2;
		}
		test_gradients(z);
		snprintf(name, sizeof(name), "sub-epoch %s", z->name);
		test_train(name, &z->spec, 5 * z->spec.batch_size + 3, 2 * z->spec.batch_size + 5, 1e-3);
		whole_feeds = 1;
		snprintf(name, sizeof(name), "sub-epoch %s, whole buffers per call", z->name);
		test_train(name, &z->spec, 33 * z->spec.batch_size + 3, 9 * z->spec.batch_size + 5, 1e-3);
		whole_feeds = 0;
		test_gang_train(z->name, &z->spec, 5 * z->spec.batch_size + 3,
						2 * z->spec.batch_size + 5, 1e-3);
		snprintf(name, sizeof(name), "%s (unweighted, as on the CPU)", z->name);
		test_eval(name, &z->spec);
	}
	/* a soft label: weighted training refuses it, evaluation takes it */
	{
		nn_model   *h = cpu_model(&bce.spec);
		float	   *x,
				   *y;
		mop_gpu_model *g;
		mop_gpu_data *d;
		nn_result	r = {0};
		int			rt,
					re;

		make_rows(h, 20, &x, &y);
		y[13] = 0.5f;
		if (!(g = open_gpu(h)) || !(d = upload(h, x, y, 20)))
			return;
		re = G.evaluate(g, d, 0, 20, &r, msg, sizeof(msg));
		rt = G.train_begin(g, msg, sizeof(msg));
		if (!rt)
			rt = G.train_feed(g, d, 0, 20, msg, sizeof(msg));
		report(re == MOP_GPU_OK && rt == MOP_GPU_EINVAL && strstr(msg, "row 13") && h->steps == 0,
			   "a soft label is evaluated but refused in class-weighted training (%s)", msg);
		G.model_close(g);
		G.data_free(d);
		free(x);
		free(y);
		nn_model_free(h);
	}
	n_cw = 0;
	/* weights given between two streams of one mirror: the second weighs (graphs recaptured) */
	{
		nn_spec		s = mlp_spec(9, 10, 3, 8);
		nn_model   *c = cpu_model(&s),
				   *h = clone(c);
		float		w[3] = {3.0f, 0.5f, 1.0f};
		float	   *x,
				   *y;
		nn_result	r;
		nn_error	err;
		mop_gpu_model *g;
		mop_gpu_data *d;
		int			rcode = 0;
		int64_t		n = 20 * 8 + 5;

		make_rows(c, n, &x, &y);
		if (!(g = open_gpu(h)) || !(d = upload(h, x, y, n)))
			return;
		for (int e = 0; e < 2 && !rcode; e++)
		{
			if (e == 1)
			{
				nn_model_set_class_weights(c, w, 3, &err);
				nn_model_set_class_weights(h, w, 3, &err);
			}
			nn_train(c, x, y, n, 0, &r, &err);
			rcode = G.train_begin(g, msg, sizeof(msg));
			if (!rcode)
				rcode = G.train_feed(g, d, 0, n, msg, sizeof(msg));
			if (!rcode)
				rcode = G.train_end(g, &r, msg, sizeof(msg));
		}
		if (!rcode)
			rcode = G.model_sync(g, msg, sizeof(msg));
		report(!rcode && rel_err(c->params, h->params, c->plan.n_params) < 1e-4,
			   "class weights given between two sub-epochs of one mirror weigh the second: weights err %.1e %s",
			   rcode ? 1.0 : rel_err(c->params, h->params, c->plan.n_params), rcode ? msg : "");
		G.model_close(g);
		G.data_free(d);
		free(x);
		free(y);
		nn_model_free(c);
		nn_model_free(h);
	}
}

/*
 * Batchnorm beyond the zoo's: in evaluation mode (the running statistics
 * after training), a long sub-epoch through graphs, and a gang whose
 * members keep their own statistics (covered by the zoo loops), here with
 * a momentum of 1 (the statistics are the last batch's) and of 0 (never
 * move).
 */
static void
test_batchnorm(const zoo_entry *dense_bn, const zoo_entry *conv_bn)
{
	nn_spec		s = dense_bn->spec;

	test_eval("dense + batchnorm (running statistics)", &dense_bn->spec);
	test_eval("conv + batchnorm (running statistics)", &conv_bn->spec);
	s.layers[1].momentum = 1.0f;
	test_train("batchnorm momentum 1", &s, 5 * s.batch_size + 3, 2 * s.batch_size + 5, 1e-3);
	s.layers[1].momentum = 0.0f;
	test_train("batchnorm momentum 0", &s, 5 * s.batch_size + 3, 2 * s.batch_size + 5, 1e-3);
	/* a last batch of one row: one value per channel leaves the statistics alone */
	s.layers[1].momentum = 0.1f;
	test_train("batchnorm, a last batch of one row", &s, 5 * s.batch_size, 1, 1e-3);
}

/*
 * Whole-set metrics and log_loss: a sub-epoch's training metric (every
 * step's outputs gathered on the host) alone and in a gang, and evaluation.
 */
static void
test_whole_set_metrics(void)
{
	struct
	{
		const char *name;
		int			metric,
					loss,
					out;
	}			k[] = {
		{"precision", NN_METRIC_PRECISION, NN_LOSS_SOFTMAX_CE, 3},
		{"recall", NN_METRIC_RECALL, NN_LOSS_SOFTMAX_CE, 3},
		{"f1", NN_METRIC_F1, NN_LOSS_SOFTMAX_CE, 3},
		{"auc (3 classes)", NN_METRIC_AUC, NN_LOSS_SOFTMAX_CE, 3},
		{"auc (binary)", NN_METRIC_AUC, NN_LOSS_SIGMOID_BCE, 1},
		{"f1 (binary)", NN_METRIC_F1, NN_LOSS_SIGMOID_BCE, 1},
		{"r2", NN_METRIC_R2, NN_LOSS_MSE, 2},
		{"log_loss", NN_METRIC_LOG_LOSS, NN_LOSS_SOFTMAX_CE, 4},
		{"log_loss (binary)", NN_METRIC_LOG_LOSS, NN_LOSS_SIGMOID_BCE, 2},
	};

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
	{
		nn_spec		s = mlp_spec(11, 13, k[i].out, 16);
		char		name[160];

		s.loss = k[i].loss;
		s.metric = k[i].metric;
		snprintf(name, sizeof(name), "training metric %s", k[i].name);
		test_train(name, &s, 7 * s.batch_size + 3, 2 * s.batch_size + 5, 1e-3);
		test_gang_train(name, &s, 5 * s.batch_size + 3, 2 * s.batch_size + 5, 1e-3);
		test_eval(k[i].name, &s);
	}
}

/*
 * The CPU -> GPU -> CPU hop of a model with everything at once: batchnorm,
 * class weights, a cosine schedule with warmup (the epoch counter moved
 * before each epoch, as runs do) and f1, against an all-CPU run: weights,
 * running statistics and the training metric.
 */
static void
test_hop_features(void)
{
	nn_spec		s = base_spec(1, 1, 12, 16);
	nn_model   *ref,
			   *m,
			   *h;
	float	   *x,
			   *y;
	float		w[3] = {1.0f, 2.5f, 0.7f};
	nn_result	r[3],
				rr[3];
	nn_error	err;
	size_t		cap,
				len;
	void	   *blob;
	mop_gpu_model *g;
	mop_gpu_data *d;
	int			rc = 0;
	int64_t		n = 300;

	ADD(s, dense(20, NN_ACT_NONE));
	ADD(s, batchnorm(0.1f, 1e-5f));
	ADD(s, act_layer(NN_ACT_RELU));
	ADD(s, dense(3, NN_ACT_NONE));
	s.metric = NN_METRIC_F1;
	s.lr = 5e-3f;
	s.lr_schedule = NN_SCHED_COSINE;
	s.lr_warmup = 1;
	s.lr_min = 1e-4f;
	s.lr_epochs = 3;
	ref = cpu_model(&s);
	nn_model_set_class_weights(ref, w, 3, &err);
	m = clone(ref);
	make_rows(ref, n, &x, &y);
	for (int64_t i = 0; i < n; i++)
		y[i] = (float) ((x[i * 12] > 0) + (x[i * 12 + 1] > 0.3f));
	for (int e = 0; e < 3; e++)
	{
		nn_model_set_epochs(ref, e);
		nn_train(ref, x, y, n, 0, &rr[e], &err);
	}
	/* epoch 0 on the CPU, epoch 1 on the GPU, epoch 2 on the CPU, through blobs */
	nn_train(m, x, y, n, 0, &r[0], &err);
	cap = nn_model_blob_size(m);
	blob = malloc(cap);
	nn_model_serialize(m, blob, cap, &len, &err);
	nn_model_free(m);
	nn_model_deserialize(blob, len, &h, &err);
	nn_model_set_epochs(h, 1);
	if (!(g = open_gpu(h)) || !(d = upload(h, x, y, n)))
		return;
	rc = G.train_begin(g, msg, sizeof(msg));
	if (!rc)
		rc = G.train_feed(g, d, 0, n, msg, sizeof(msg));
	if (!rc)
		rc = G.train_end(g, &r[1], msg, sizeof(msg));
	if (!rc)
		rc = G.model_sync(g, msg, sizeof(msg));
	G.model_close(g);
	G.data_free(d);
	if (rc)
	{
		report(0, "hop with batchnorm, class weights and a schedule: gpu epoch: %s", msg);
		return;
	}
	nn_model_serialize(h, blob, cap, &len, &err);
	nn_model_free(h);
	if (nn_model_deserialize(blob, len, &m, &err) != NN_OK)
	{
		report(0, "hop with batchnorm, class weights and a schedule: blob does not load: %s", err.msg);
		return;
	}
	nn_model_set_epochs(m, 2);
	nn_train(m, x, y, n, 0, &r[2], &err);
	report(rel_err(ref->params, m->params, ref->plan.n_params) < 1e-3 &&
		   rel_err(ref->bufs, m->bufs, ref->plan.n_bufs) < 1e-3 &&
		   m->n_class_w == 3 && m->steps == ref->steps &&
		   fabs(r[1].loss_sum - rr[1].loss_sum) <= 1e-3 * fabs(rr[1].loss_sum) &&
		   metric_close(NN_METRIC_F1, r[1].metric_sum / n, rr[1].metric_sum / n),
		   "hop cpu -> gpu -> cpu with batchnorm, class weights, a cosine schedule and f1: weights err %.1e, running statistics err %.1e vs all-cpu; gpu epoch loss %.4f/%.4f, f1 %.4f/%.4f",
		   rel_err(ref->params, m->params, ref->plan.n_params),
		   rel_err(ref->bufs, m->bufs, ref->plan.n_bufs), r[1].loss_sum / n, rr[1].loss_sum / n,
		   r[1].metric_sum / n, rr[1].metric_sum / n);
	free(blob);
	free(x);
	free(y);
	nn_model_free(m);
	nn_model_free(ref);
}

static void
test_errors(void)
{
	nn_spec		s = base_spec(1, 1, 10, 8);
	nn_model   *m;
	float	   *x,
			   *y;
	mop_gpu_model *g;
	mop_gpu_data *d;
	mop_gpu_memory mem;
	mop_gpu_options o = {0, 0, 0};
	uint64_t	need;
	int			rc;

	ADD(s, dense(4, NN_ACT_NONE));
	m = cpu_model(&s);
	make_rows(m, 20, &x, &y);
	y[13] = 4.0f;				/* class 4 of 4: invalid */
	g = open_gpu(m);
	d = upload(m, x, y, 20);
	if (!g || !d)
		return;
	rc = G.train_begin(g, msg, sizeof(msg));
	if (!rc)
		rc = G.train_feed(g, d, 0, 20, msg, sizeof(msg));
	report(rc == MOP_GPU_EINVAL && strstr(msg, "row 13") && m->steps == 0,
		   "an invalid label is refused before any step: %s", msg);
	G.model_close(g);
	G.data_free(d);

	/* the budget: a mirror that does not fit is refused before allocating */
	need = G.model_bytes(m);
	G.set_budget(need - 1);
	msg[0] = '\0';
	rc = G.model_open(m, &o, &g, msg, sizeof(msg));
	report(rc == MOP_GPU_ENOMEM && strstr(msg, "over the budget"),
		   "over the memory budget: %s", msg);
	G.set_budget(need + 4096);
	rc = G.model_open(m, &o, &g, msg, sizeof(msg));
	G.memory_info(&mem);
	report(rc == MOP_GPU_OK && mem.in_use == need, "a mirror of %llu bytes fits a budget of %llu",
		   (unsigned long long) need, (unsigned long long) need + 4096);
	G.model_close(g);
	G.set_budget(0);
	G.memory_info(&mem);
	report(mem.in_use == 0 && mem.allocations == 0, "every device allocation returned (%llu bytes, %lld allocations left)",
		   (unsigned long long) mem.in_use, (long long) mem.allocations);

	/* divergence: an absurd learning rate on SGD */
	{
		nn_spec		s2 = s;
		nn_model   *c,
				   *h;
		nn_result	rcpu,
					rgpu;
		nn_error	err;
		nn_status	st;

		s2.optimizer = NN_OPT_SGD;
		s2.lr = 1e6f;			/* the largest a spec accepts */
		s2.loss = NN_LOSS_MSE;
		s2.metric = NN_METRIC_MSE;
		c = cpu_model(&s2);
		h = clone(c);
		free(x);
		free(y);
		make_rows(c, 64, &x, &y);
		st = nn_train(c, x, y, 64, 0, &rcpu, &err);
		g = open_gpu(h);
		d = upload(h, x, y, 64);
		rc = G.train_begin(g, msg, sizeof(msg));
		if (!rc)
			rc = G.train_feed(g, d, 0, 64, msg, sizeof(msg));
		if (!rc)
			rc = G.train_end(g, &rgpu, msg, sizeof(msg));
		report(st == NN_DIVERGED && rc == MOP_GPU_EDIVERGED && h->diverged &&
			   h->steps == c->steps && h->rows_trained == c->rows_trained,
			   "divergence reported as on the CPU: cpu \"%s\" after %lld steps, gpu \"%s\" after %lld steps",
			   err.msg, (long long) c->steps, msg, (long long) h->steps);
		G.model_close(g);
		G.data_free(d);
		nn_model_free(c);
		nn_model_free(h);
	}
	free(x);
	free(y);
	nn_model_free(m);
}

int
main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "gpu/mop_gpu.so";
	void	   *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	zoo_entry	zoo[32];
	int			nz;
	int32_t		ndev = 0;
	nn_error	err;

	if (!lib)
	{
		printf("not ok gpu parity: cannot open %s: %s\n", path, dlerror());
		return 1;
	}
	if (mop_gpu_api_resolve(lib, &G, msg, sizeof(msg)) != 0)
	{
		printf("not ok gpu parity: %s: %s\n", path, msg);
		return 1;
	}
	if (G.device_count(&ndev, msg, sizeof(msg)) != MOP_GPU_OK || ndev < 1)
	{
		printf("skip gpu parity: no usable GPU (%s)\n", msg);
		return 77;
	}
	if (nn_blas_init(1, &err) != NN_OK)
	{
		printf("not ok gpu parity: the CPU reference needs OpenBLAS: %s\n", err.msg);
		return 1;
	}
	nz = build_zoo(zoo);
	for (int i = 0; i < nz; i++)
		test_gradients(&zoo[i]);
	test_optimizers();
	for (int i = 0; i < nz; i++)
	{
		char		name[128];

		snprintf(name, sizeof(name), "sub-epoch %s", zoo[i].name);
		test_train(name, &zoo[i].spec, 5 * zoo[i].spec.batch_size + 3,
				   2 * zoo[i].spec.batch_size + 5, 1e-3);
	}
	{
		/* more steps than the device's step table holds (4096): it starts over */
		nn_spec		s = base_spec(1, 1, 6, 2);

		ADD(s, dense(5, NN_ACT_TANH));
		ADD(s, dense(3, NN_ACT_NONE));
		test_train("sub-epoch of 4105 steps (step table starts over)", &s, 8003, 207, 1e-3);
	}
	/* whole buffers per call: steps replayed eight at a time */
	whole_feeds = 1;
	for (int i = 0; i < nz; i += 3)
	{
		char		name[128];

		snprintf(name, sizeof(name), "sub-epoch %s, whole buffers per call", zoo[i].name);
		test_train(name, &zoo[i].spec, 67 * zoo[i].spec.batch_size + 3,
				   9 * zoo[i].spec.batch_size + 5, 1e-3);
	}
	whole_feeds = 0;
	test_many_buffers();
	test_shared_buffer();
	/* the same sub-epochs launched kernel by kernel instead of as graphs */
	no_graphs = 1;
	for (int i = 0; i < nz; i += 4)
	{
		char		name[128];

		snprintf(name, sizeof(name), "sub-epoch %s, no graphs", zoo[i].name);
		test_train(name, &zoo[i].spec, 5 * zoo[i].spec.batch_size + 3,
				   2 * zoo[i].spec.batch_size + 5, 1e-3);
	}
	no_graphs = 0;
	/* gangs: every layer type, then whole buffers (graphs of 8 steps), then without graphs */
	for (int i = 0; i < nz; i++)
		test_gang_train(zoo[i].name, &zoo[i].spec, 5 * zoo[i].spec.batch_size + 3,
						2 * zoo[i].spec.batch_size + 5, 1e-3);
	/*
	 * Long runs as the single-model ones above (the same models): a ReLU
	 * network with max pooling drifts further from the CPU over many steps
	 * (a rounding difference can flip a pooling tie), alone or in a gang.
	 */
	whole_feeds = 1;
	for (int i = 0; i < nz; i += 3)
	{
		char		name[128];

		snprintf(name, sizeof(name), "%s, whole buffers per call", zoo[i].name);
		test_gang_train(name, &zoo[i].spec, 67 * zoo[i].spec.batch_size + 3,
						9 * zoo[i].spec.batch_size + 5, 1e-3);
	}
	whole_feeds = 0;
	no_graphs = 1;
	test_gang_train("conv, no graphs", &zoo[8].spec, 5 * zoo[8].spec.batch_size + 3,
					2 * zoo[8].spec.batch_size + 5, 1e-3);
	no_graphs = 0;
	{
		nn_spec		s = base_spec(1, 1, 6, 2);

		ADD(s, dense(5, NN_ACT_TANH));
		ADD(s, dense(3, NN_ACT_NONE));
		test_gang_train("4105 steps (the step table starts over)", &s, 8003, 207, 1e-3);
	}
	test_gang_many_buffers();
	test_gang_rules();
	test_evaluate_and_determinism();
	test_hop();
	test_schedules();
	test_class_weights();
	test_batchnorm(&zoo[nz - 2], &zoo[nz - 1]);
	test_whole_set_metrics();
	test_hop_features();
	test_errors();
	printf("%d passed, %d failed\n", n_ok, n_bad);
	return n_bad ? 1 : 0;
}
