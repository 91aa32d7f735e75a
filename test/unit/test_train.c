/*
 * test_train.c -- training behaviour: determinism, stream semantics,
 * learning on real data, divergence, memory accounting, spec validation,
 * and the tensor export/import used to cross-check against PyTorch.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#ifndef DATA_DIR
#define DATA_DIR "test/unit/data"
#endif

/* The MLP used by several tests: in -> 16 relu -> dropout -> classes. */
static void
mlp_spec(nn_spec *s, int in, int classes, uint64_t seed)
{
	nn_spec_init(s);
	s->in_c = in;
	s->batch_size = 16;
	s->seed = seed;
	add_dense(s, 16, NN_ACT_RELU);
	add_layer(s, NN_LAYER_DROPOUT)->rate = 0.1f;
	add_dense(s, classes, NN_ACT_NONE);
}

/* Split digits into train (5 of 6 rows) and held-out (every 6th row). */
static int
split_digits(const float *x, const float *y, int n, float *xtr, float *ytr,
			 float *xte, float *yte)
{
	int			ntr = 0,
				nte = 0;

	for (int i = 0; i < n; i++)
	{
		if (i % 6 == 0)
		{
			memcpy(xte + nte * 64, x + i * 64, 64 * sizeof(float));
			yte[nte++] = y[i];
		}
		else
		{
			memcpy(xtr + ntr * 64, x + i * 64, 64 * sizeof(float));
			ytr[ntr++] = y[i];
		}
	}
	return ntr;
}

/* Synthetic 3-class data: class = argmax of three fixed projections. */
static void
toy_data(float *x, float *y, int n, int in, uint64_t seed)
{
	fill_uniform(x, (int64_t) n * in, seed, -1, 1);
	for (int i = 0; i < n; i++)
	{
		float		a = 0,
					b = 0,
					c = 0;

		for (int j = 0; j < in; j++)
		{
			a += x[i * in + j] * (j % 3 == 0);
			b += x[i * in + j] * (j % 3 == 1);
			c += x[i * in + j] * (j % 3 == 2);
		}
		y[i] = (float) (a > b ? (a > c ? 0 : 2) : (b > c ? 1 : 2));
	}
}

TEST(same_seed_same_bits)
{
	nn_spec		s;
	nn_model   *a,
			   *b,
			   *c;
	nn_error	err;
	float		x[100 * 6],
				y[100];
	nn_result	r;

	mlp_spec(&s, 6, 3, 77);
	toy_data(x, y, 100, 6, 1);
	CHECK_OK(nn_model_create(&s, &a, &err));
	CHECK_OK(nn_model_create(&s, &b, &err));
	s.seed = 78;
	CHECK_OK(nn_model_create(&s, &c, &err));
	CHECK(memcmp(a->params, b->params, sizeof(float) * a->plan.n_params) == 0);
	CHECK(memcmp(a->params, c->params, sizeof(float) * a->plan.n_params) != 0);
	for (int e = 0; e < 3; e++)
	{
		CHECK_OK(nn_train(a, x, y, 100, 1, &r, &err));
		CHECK_OK(nn_train(b, x, y, 100, 1, &r, &err));
	}
	CHECK(memcmp(a->params, b->params, sizeof(float) * a->plan.n_params) == 0);
	CHECK(memcmp(a->opt, b->opt, sizeof(float) * a->plan.n_opt) == 0);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
}

TEST(init_limits)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	float		he = sqrtf(6.0f / 6),
				gl = sqrtf(6.0f / (16 + 3));
	int			he_ok = 1,
				gl_ok = 1;
	float		mx0 = 0,
				mx2 = 0;

	mlp_spec(&s, 6, 3, 1);
	CHECK_OK(nn_model_create(&s, &m, &err));
	/* dense0 precedes relu: He; dense2 is the linear head: Glorot; biases zero */
	for (int i = 0; i < 6 * 16; i++)
	{
		he_ok &= fabsf(m->params[i]) <= he;
		mx0 = fmaxf(mx0, fabsf(m->params[i]));
	}
	for (int i = 0; i < 16 * 3; i++)
	{
		gl_ok &= fabsf(m->params[6 * 16 + 16 + i]) <= gl;
		mx2 = fmaxf(mx2, fabsf(m->params[6 * 16 + 16 + i]));
	}
	CHECK(he_ok && gl_ok);
	CHECK(mx0 > 0.8f * he && mx2 > 0.8f * gl);	/* and they use their range */
	for (int i = 0; i < 16; i++)
		CHECK(m->params[6 * 16 + i] == 0.0f);
	nn_model_free(m);
}

TEST(stream_batches_cross_buffers)
{
	/* one buffer of 50 rows == feeds of 7, 20, 23 rows, without shuffling */
	nn_spec		s;
	nn_model   *a,
			   *b;
	nn_error	err;
	float		x[50 * 6],
				y[50];
	nn_result	ra,
				rb;

	mlp_spec(&s, 6, 3, 5);
	s.layers[1].rate = 0;
	toy_data(x, y, 50, 6, 2);
	CHECK_OK(nn_model_create(&s, &a, &err));
	CHECK_OK(nn_model_create(&s, &b, &err));
	CHECK_OK(nn_train(a, x, y, 50, 0, &ra, &err));
	CHECK_OK(nn_train_begin(b, 0, &err));
	CHECK_OK(nn_train_feed(b, x, y, 7, &err));
	CHECK_OK(nn_train_feed(b, x + 7 * 6, y + 7, 20, &err));
	CHECK_OK(nn_train_feed(b, x + 27 * 6, y + 27, 23, &err));
	CHECK_OK(nn_train_end(b, &rb, &err));
	CHECK(memcmp(a->params, b->params, sizeof(float) * a->plan.n_params) == 0);
	CHECK(ra.rows == 50 && rb.rows == 50 && ra.steps == 4 && rb.steps == 4);
	CHECK(ra.loss_sum == rb.loss_sum);
	nn_model_free(a);
	nn_model_free(b);
}

TEST(stream_call_order_enforced)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	float		x[6] = {0},
				y[1] = {0};

	mlp_spec(&s, 6, 3, 5);
	CHECK_OK(nn_model_create(&s, &m, &err));
	CHECK(nn_train_feed(m, x, y, 1, &err) == NN_ERR_STATE);
	CHECK(nn_train_end(m, NULL, &err) == NN_ERR_STATE);
	y[0] = 3;					/* class 3 of 3 */
	CHECK(nn_train(m, x, y, 1, 0, NULL, &err) == NN_ERR_INVALID);
	CHECK(strstr(err.msg, "label") != NULL);
	nn_model_free(m);
}

TEST(learns_digits_mlp)
{
	float	   *x,
			   *y;
	int			n = load_digits(DATA_DIR "/digits.u8", &x, &y);
	static float xtr[1797 * 64],
				ytr[1797],
				xte[300 * 64],
				yte[300];
	int			ntr;
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	nn_result	r,
				ev = {0};

	CHECKF(n == 1797, "could not read " DATA_DIR "/digits.u8");
	if (n != 1797)
		return;
	ntr = split_digits(x, y, n, xtr, ytr, xte, yte);
	nn_spec_init(&s);
	s.in_c = 64;
	s.batch_size = 32;
	s.lr = 3e-3f;
	s.seed = 1;
	add_dense(&s, 64, NN_ACT_RELU);
	add_dense(&s, 10, NN_ACT_SOFTMAX);
	CHECK_OK(nn_model_create(&s, &m, &err));
	for (int e = 0; e < 20; e++)
		CHECK_OK(nn_train(m, xtr, ytr, ntr, 1, &r, &err));
	CHECK_OK(nn_evaluate(m, xte, yte, n - ntr, &ev, &err));
	printf("     digits MLP: train loss %.4f, held-out accuracy %.4f\n",
		   r.loss_sum / r.rows, ev.metric_sum / ev.rows);
	CHECKF(ev.metric_sum / ev.rows >= 0.95, "held-out accuracy %.4f < 0.95",
		   ev.metric_sum / ev.rows);
	nn_model_free(m);
	free(x);
	free(y);
}

TEST(learns_digits_cnn)
{
	float	   *x,
			   *y;
	int			n = load_digits(DATA_DIR "/digits.u8", &x, &y);
	static float xtr[1797 * 64],
				ytr[1797],
				xte[300 * 64],
				yte[300];
	int			ntr;
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	nn_result	r,
				ev = {0};

	if (n != 1797)
	{
		CHECK(0);
		return;
	}
	ntr = split_digits(x, y, n, xtr, ytr, xte, yte);
	nn_spec_init(&s);
	s.in_h = 8;
	s.in_w = 8;
	s.in_c = 1;
	s.batch_size = 32;
	s.lr = 3e-3f;
	s.seed = 2;
	add_conv(&s, 8, 3, 1, NN_PAD_SAME, NN_ACT_RELU);
	add_pool(&s, 2, 2, NN_PAD_VALID);
	add_conv(&s, 16, 3, 1, NN_PAD_VALID, NN_ACT_RELU);
	add_layer(&s, NN_LAYER_FLATTEN);
	add_dense(&s, 10, NN_ACT_NONE);
	CHECK_OK(nn_model_create(&s, &m, &err));
	for (int e = 0; e < 12; e++)
		CHECK_OK(nn_train(m, xtr, ytr, ntr, 1, &r, &err));
	CHECK_OK(nn_evaluate(m, xte, yte, n - ntr, &ev, &err));
	printf("     digits CNN: train loss %.4f, held-out accuracy %.4f\n",
		   r.loss_sum / r.rows, ev.metric_sum / ev.rows);
	CHECKF(ev.metric_sum / ev.rows >= 0.95, "held-out accuracy %.4f < 0.95",
		   ev.metric_sum / ev.rows);
	nn_model_free(m);
	free(x);
	free(y);
}

TEST(learns_regression)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	float		x[400 * 3],
				y[400];
	nn_result	r,
				first;

	fill_uniform(x, 400 * 3, 8, -1, 1);
	for (int i = 0; i < 400; i++)
		y[i] = 2 * x[i * 3] - x[i * 3 + 1] + 0.5f * x[i * 3 + 2] * x[i * 3 + 2] + 1;
	nn_spec_init(&s);
	s.in_c = 3;
	s.loss = NN_LOSS_MSE;
	s.metric = NN_METRIC_MAE;
	s.lr = 1e-2f;
	add_dense(&s, 16, NN_ACT_TANH);
	add_dense(&s, 1, NN_ACT_NONE);
	CHECK_OK(nn_model_create(&s, &m, &err));
	CHECK_OK(nn_train(m, x, y, 400, 1, &first, &err));
	for (int e = 0; e < 60; e++)
		CHECK_OK(nn_train(m, x, y, 400, 1, &r, &err));
	CHECKF(r.loss_sum / r.rows < 0.01 && r.loss_sum < first.loss_sum / 20,
		   "mse %.4f after 60 epochs (first %.4f)", r.loss_sum / r.rows,
		   first.loss_sum / first.rows);
	nn_model_free(m);
}

TEST(binary_classification)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	float		x[300 * 2],
				y[300],
				p[300];
	nn_result	ev = {0},
				r;
	int			agree = 1;

	fill_uniform(x, 600, 9, -1, 1);
	for (int i = 0; i < 300; i++)
		y[i] = x[2 * i] * x[2 * i] + x[2 * i + 1] * x[2 * i + 1] < 0.5f;
	nn_spec_init(&s);
	s.in_c = 2;
	s.loss = NN_LOSS_SIGMOID_BCE;
	s.lr = 1e-2f;
	add_dense(&s, 16, NN_ACT_RELU);
	add_dense(&s, 1, NN_ACT_SIGMOID);
	CHECK_OK(nn_model_create(&s, &m, &err));
	for (int e = 0; e < 80; e++)
		CHECK_OK(nn_train(m, x, y, 300, 1, &r, &err));
	CHECK_OK(nn_evaluate(m, x, y, 300, &ev, &err));
	CHECKF(ev.metric_sum / ev.rows > 0.9, "accuracy %.3f", ev.metric_sum / ev.rows);
	CHECK_OK(nn_predict(m, x, 300, p, &err));
	{
		double		correct = 0;

		for (int i = 0; i < 300; i++)
		{
			agree &= p[i] >= 0 && p[i] <= 1;
			correct += (p[i] > 0.5f) == (y[i] > 0.5f);
		}
		CHECK(agree && correct == ev.metric_sum);
	}
	nn_model_free(m);
}

TEST(predict_probabilities)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	float		x[37 * 6],
				y[37],
				p[37 * 3];
	nn_result	ev = {0};
	int			correct = 0;

	mlp_spec(&s, 6, 3, 3);
	toy_data(x, y, 37, 6, 3);
	CHECK_OK(nn_model_create(&s, &m, &err));
	CHECK_OK(nn_predict(m, x, 37, p, &err));
	for (int i = 0; i < 37; i++)
	{
		float		sum = p[i * 3] + p[i * 3 + 1] + p[i * 3 + 2];
		int			am = 0;

		CHECK(fabsf(sum - 1.0f) < 1e-5f);
		for (int j = 1; j < 3; j++)
			if (p[i * 3 + j] > p[i * 3 + am])
				am = j;
		correct += am == (int) y[i];
	}
	CHECK_OK(nn_evaluate(m, x, y, 37, &ev, &err));
	CHECK(ev.rows == 37 && (int) ev.metric_sum == correct);
	nn_model_free(m);
}

TEST(divergence_is_reported)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	float		x[64 * 6],
				y[64];
	nn_result	r;
	nn_status	st = NN_OK;
	nn_counters c;

	mlp_spec(&s, 6, 3, 4);
	s.optimizer = NN_OPT_SGD;
	s.lr = 1e6f;
	toy_data(x, y, 64, 6, 4);
	CHECK_OK(nn_model_create(&s, &m, &err));
	for (int e = 0; e < 10 && st == NN_OK; e++)
		st = nn_train(m, x, y, 64, 1, &r, &err);
	CHECK(st == NN_DIVERGED);
	nn_model_counters(m, &c);
	CHECK(c.diverged == 1);
	CHECK(nn_train(m, x, y, 64, 1, &r, &err) == NN_DIVERGED);
	nn_model_free(m);

	/* infinite inputs give an infinite loss: stopped before any update */
	mlp_spec(&s, 6, 3, 4);
	CHECK_OK(nn_model_create(&s, &m, &err));
	x[0] = INFINITY;
	CHECK(nn_train(m, x, y, 64, 0, &r, &err) == NN_DIVERGED);
	CHECK(strstr(err.msg, "step 1") != NULL);
	nn_model_free(m);
}

TEST(zero_allocations_per_minibatch)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	nn_memory	mem;
	static float x[1000 * 6],
				y[1000];
	nn_result	r;
	int64_t		before;

	mlp_spec(&s, 6, 3, 6);
	toy_data(x, y, 1000, 6, 6);
	CHECK_OK(nn_spec_memory(&s, &mem, &err));
	CHECK(mem.params == sizeof(float) * (6 * 16 + 16 + 16 * 3 + 3));
	CHECK(mem.grads == mem.params && mem.optimizer == 2 * mem.params);
	CHECK(mem.total >= mem.params + mem.grads + mem.optimizer + mem.workspace);
	CHECK_OK(nn_model_create(&s, &m, &err));
	before = nn_model_alloc_count(m);
	CHECK(before == 5);			/* model, params, grads, optimizer, workspace */
	for (int e = 0; e < 3; e++)
		CHECK_OK(nn_train(m, x, y, 1000, 0, &r, &err));
	CHECK(nn_model_alloc_count(m) == before);
	/* shuffling needs one index array per buffer size, never per batch */
	CHECK_OK(nn_train(m, x, y, 1000, 1, &r, &err));
	CHECK(nn_model_alloc_count(m) == before + 1);
	for (int e = 0; e < 3; e++)
		CHECK_OK(nn_train(m, x, y, 1000, 1, &r, &err));
	CHECK(nn_model_alloc_count(m) == before + 1);
	nn_model_free(m);
}

/* Expect spec validation to fail with status st and a message containing frag. */
static void
expect_invalid(const nn_spec *s, nn_status st, const char *frag)
{
	nn_error	err = {0};
	nn_status	got = nn_spec_validate(s, &err);
	nn_model   *m = NULL;

	CHECKF(got == st, "expected %s, got %s (%s)", nn_status_name(st),
		   nn_status_name(got), err.msg);
	CHECKF(strstr(err.msg, frag) != NULL, "message \"%s\" lacks \"%s\"", err.msg, frag);
	CHECK(nn_model_create(s, &m, &err) == st && m == NULL);
}

TEST(spec_validation)
{
	nn_spec		s;
	nn_error	err;

	mlp_spec(&s, 6, 3, 1);
	CHECK(nn_spec_validate(&s, &err) == NN_OK);
	s.lr = 0;
	expect_invalid(&s, NN_ERR_INVALID, "learning rate");
	s.lr = NAN;
	expect_invalid(&s, NN_ERR_INVALID, "learning rate");
	mlp_spec(&s, 6, 3, 1);
	s.layers[0].units = -4;
	expect_invalid(&s, NN_ERR_INVALID, "units");
	mlp_spec(&s, 6, 3, 1);
	s.layers[0].type = 99;
	expect_invalid(&s, NN_ERR_INVALID, "unknown layer type");
	mlp_spec(&s, 6, 3, 1);
	s.layers[1].rate = 1.0f;
	expect_invalid(&s, NN_ERR_INVALID, "rate");
	mlp_spec(&s, 6, 1, 1);
	expect_invalid(&s, NN_ERR_SHAPE, "at least 2 outputs");
	mlp_spec(&s, 6, 3, 1);
	s.batch_size = 0;
	expect_invalid(&s, NN_ERR_INVALID, "batch size");
	mlp_spec(&s, 6, 3, 1);
	s.metric = NN_METRIC_MSE;
	expect_invalid(&s, NN_ERR_INVALID, "mse loss");
	mlp_spec(&s, 6, 3, 1);
	s.nesterov = 1;
	expect_invalid(&s, NN_ERR_INVALID, "nesterov");
	mlp_spec(&s, 6, 3, 1);
	s.metric = NN_METRIC_TOPK;
	s.top_k = 4;
	expect_invalid(&s, NN_ERR_INVALID, "top_k");
	mlp_spec(&s, 6, 3, 1);
	s.layers[0].activation = 42;
	expect_invalid(&s, NN_ERR_INVALID, "activation");
	mlp_spec(&s, 6, 3, 1);
	s.n_layers = 0;
	expect_invalid(&s, NN_ERR_INVALID, "layers");
	mlp_spec(&s, 6, 3, 1);
	s.weight_decay = 0.1f;
	expect_invalid(&s, NN_ERR_INVALID, "adamw");

	/* conv kernel larger than the image with valid padding */
	nn_spec_init(&s);
	s.in_h = s.in_w = 4;
	add_conv(&s, 2, 5, 1, NN_PAD_VALID, NN_ACT_NONE);
	add_dense(&s, 2, NN_ACT_NONE);
	expect_invalid(&s, NN_ERR_SHAPE, "does not fit");
	/* a model too large to allocate */
	nn_spec_init(&s);
	s.in_c = 60000;
	add_dense(&s, 60000, NN_ACT_NONE);
	expect_invalid(&s, NN_ERR_INVALID, "parameters");
	/* negative input shape */
	nn_spec_init(&s);
	s.in_c = -1;
	add_dense(&s, 2, NN_ACT_NONE);
	expect_invalid(&s, NN_ERR_SHAPE, "input shape");
	CHECK(nn_spec_out_dim(&s) == -1);
}

TEST(metric_direction)
{
	CHECK(nn_metric_higher_is_better(NN_METRIC_ACCURACY) == 1);
	CHECK(nn_metric_higher_is_better(NN_METRIC_TOPK) == 1);
	CHECK(nn_metric_higher_is_better(NN_METRIC_MSE) == 0);
	CHECK(nn_metric_higher_is_better(NN_METRIC_MAE) == 0);
	CHECK(strcmp(nn_metric_name(NN_METRIC_TOPK), "top_k_accuracy") == 0);
}

TEST(tensor_export_import)
{
	nn_spec		s;
	nn_model   *a,
			   *b;
	nn_error	err;
	nn_tensor	t;
	float		x[10 * 6],
				y[10],
				pa[30],
				pb[30];

	mlp_spec(&s, 6, 3, 10);
	toy_data(x, y, 10, 6, 10);
	CHECK_OK(nn_model_create(&s, &a, &err));
	s.seed = 11;
	CHECK_OK(nn_model_create(&s, &b, &err));
	CHECK(nn_model_n_tensors(a) == 4);
	CHECK_OK(nn_model_tensor(a, 0, &t, &err));
	CHECK(strcmp(t.name, "dense0.kernel") == 0 && t.ndim == 2 && t.shape[0] == 6 &&
		  t.shape[1] == 16 && t.size == 96);
	CHECK_OK(nn_model_tensor(a, 3, &t, &err));
	CHECK(strcmp(t.name, "dense2.bias") == 0 && t.size == 3);
	CHECK(nn_model_tensor(a, 4, &t, &err) == NN_ERR_INVALID);
	/* copy a's tensors into b: predictions become identical */
	for (int i = 0; i < 4; i++)
	{
		nn_tensor	ta,
					tb;

		nn_model_tensor(a, i, &ta, &err);
		nn_model_tensor(b, i, &tb, &err);
		memcpy(tb.data, ta.data, sizeof(float) * ta.size);
	}
	nn_predict(a, x, 10, pa, &err);
	nn_predict(b, x, 10, pb, &err);
	CHECK(memcmp(pa, pb, sizeof(pa)) == 0);
	nn_model_free(a);
	nn_model_free(b);
}

TEST(set_hyper_keeps_state)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	float		x[64 * 6],
				y[64];
	nn_result	r;
	float		w0;

	mlp_spec(&s, 6, 3, 12);
	toy_data(x, y, 64, 6, 12);
	CHECK_OK(nn_model_create(&s, &m, &err));
	CHECK_OK(nn_train(m, x, y, 64, 1, &r, &err));
	w0 = m->params[0];
	s.lr = 5e-4f;
	s.batch_size = 8;
	CHECK_OK(nn_model_set_hyper(m, &s, &err));
	CHECK(m->params[0] == w0 && m->steps == 4 && m->spec.batch_size == 8);
	CHECK_OK(nn_train(m, x, y, 64, 1, &r, &err));
	CHECK(r.steps == 8);
	s.layers[0].units = 17;
	CHECK(nn_model_set_hyper(m, &s, &err) == NN_ERR_INVALID);
	nn_model_free(m);
}

TEST(blas_info_reports_threads)
{
	nn_error	err;

	CHECK_OK(nn_blas_init(1, &err));
	CHECK(strstr(nn_blas_info(), "1 thread") != NULL);
	CHECK(nn_blas_init(0, &err) == NN_ERR_INVALID);
}

/*
 * OpenBLAS's pool threads start with every signal blocked, so the
 * process's signals (a backend's SIGINT, SIGTERM, SIGALRM, SIGUSR1) always
 * reach the thread that handles them.
 */
TEST(blas_threads_block_signals)
{
	nn_error	err;
	DIR		   *d;
	struct dirent *de;
	int			pool = 0;
	const unsigned long want = (1UL << (SIGINT - 1)) | (1UL << (SIGTERM - 1)) |
		(1UL << (SIGALRM - 1)) | (1UL << (SIGUSR1 - 1));

	CHECK_OK(nn_blas_init(3, &err));
	CHECK((d = opendir("/proc/self/task")) != NULL);
	while (d && (de = readdir(d)) != NULL)
	{
		char		path[64],
					line[256];
		FILE	   *f;
		long		tid = atol(de->d_name);

		if (tid <= 0 || tid == (long) getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%ld/status", tid);
		if (!(f = fopen(path, "r")))
			continue;
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "SigBlk:", 7) == 0)
			{
				unsigned long blk = strtoul(line + 7, NULL, 16);

				CHECK((blk & want) == want);
				pool++;
			}
		fclose(f);
	}
	if (d)
		closedir(d);
	CHECK(pool >= 1);			/* Debian's OpenBLAS (pthread) starts a pool */
	CHECK_OK(nn_blas_init(1, &err));
}

TEST(model_average)
{
	nn_spec		s;
	nn_model   *a,
			   *b,
			   *c;
	nn_error	err;
	nn_model   *both[2];

	mlp_spec(&s, 6, 3, 20);
	CHECK_OK(nn_model_create(&s, &a, &err));
	s.seed = 21;
	CHECK_OK(nn_model_create(&s, &b, &err));
	CHECK_OK(nn_model_clone(a, &c, &err));
	both[0] = a;
	both[1] = b;
	CHECK_OK(nn_model_average(c, both, 2, &err));
	for (int i = 0; i < 10; i++)
		CHECK(fabsf(c->params[i] - 0.5f * (a->params[i] + b->params[i])) < 1e-6f);
	nn_model_free(b);
	s.layers[0].units = 17;
	CHECK_OK(nn_model_create(&s, &b, &err));
	both[1] = b;
	CHECK(nn_model_average(c, both, 2, &err) == NN_ERR_SHAPE);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
}
