/*
 * test_class_weight.c -- class weights of the training loss at the model's
 * level: which models take them and which weights are refused, the weights
 * in the blob (round trip, clone, damage refused, a version 2 blob loading
 * with none), a resumed weighted model training as an uninterrupted one,
 * and the training loss a stream reports (the weighted mean) against the
 * unweighted loss of an evaluation.  The weighted losses' values and
 * gradients are checked in test_grad.c.
 */
#include "harness.h"
#include "util.h"

#ifndef DATA_DIR
#define DATA_DIR "test/unit/data"
#endif

#define HDR 32

/* A 4-input dense network: out units, with loss. */
static nn_model *
cw_model(int out, int loss, uint64_t seed)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;

	nn_spec_init(&s);
	s.in_c = 4;
	s.batch_size = 5;
	s.seed = seed;
	s.optimizer = NN_OPT_SGD;
	s.lr = 0.1f;
	s.momentum = 0.9f;
	s.loss = loss;
	if (loss == NN_LOSS_MSE)
		s.metric = NN_METRIC_MSE;
	add_dense(&s, 6, NN_ACT_TANH);
	add_dense(&s, out, NN_ACT_NONE);
	if (nn_model_create(&s, &m, &err) != NN_OK)
	{
		fprintf(stderr, "  create: %s\n", err.msg);
		return NULL;
	}
	return m;
}

/* n rows of 4 features, labels of an imbalanced 3-class (or 0/1) target. */
static void
cw_rows(float *x, float *y, int n, int classes, uint64_t seed)
{
	fill_uniform(x, (int64_t) n * 4, seed, -1, 1);
	for (int i = 0; i < n; i++)
		y[i] = (float) (i % 7 == 0 ? classes - 1 : i % (classes - 1));
}

static unsigned char *
cw_blob(nn_model *m, size_t *len)
{
	size_t		cap = nn_model_blob_size(m);
	unsigned char *b = malloc(cap);
	nn_error	err;

	if (nn_model_serialize(m, b, cap, len, &err) != NN_OK)
	{
		free(b);
		return NULL;
	}
	CHECK(*len == cap);
	return b;
}

static void
reseal(unsigned char *b, size_t len)
{
	uint64_t	plen = len - HDR,
				sum = nn_blob_checksum(b + HDR, plen);

	memcpy(b + 16, &plen, 8);
	memcpy(b + 24, &sum, 8);
}

TEST(class_weight_which_models_and_values)
{
	nn_model   *ce = cw_model(3, NN_LOSS_SOFTMAX_CE, 1),
			   *bce = cw_model(1, NN_LOSS_SIGMOID_BCE, 2),
			   *multi = cw_model(2, NN_LOSS_SIGMOID_BCE, 3),
			   *mse = cw_model(1, NN_LOSS_MSE, 4);
	float		good[3] = {0.5f, 2.0f, 1.0f},
				bad[3] = {0.5f, 2.0f, 1.0f};
	const float *w = NULL;
	nn_error	err;
	float		x[20],
				y[5] = {0, 1, 2, 0, 1};

	if (!ce || !bce || !multi || !mse)
	{
		CHECK(0);
		return;
	}
	CHECK(nn_model_n_classes(ce) == 3);
	CHECK(nn_model_n_classes(bce) == 2);
	CHECK(nn_model_n_classes(multi) == 0);
	CHECK(nn_model_n_classes(mse) == 0);
	CHECK(nn_model_class_weights(ce, &w) == 0 && w == NULL);

	/* the count must be the model's classes */
	CHECK(nn_model_set_class_weights(ce, good, 2, &err) == NN_ERR_INVALID);
	CHECK(nn_model_set_class_weights(bce, good, 3, &err) == NN_ERR_INVALID);
	CHECK(nn_model_set_class_weights(multi, good, 2, &err) == NN_ERR_INVALID);
	CHECK(nn_model_set_class_weights(mse, good, 1, &err) == NN_ERR_INVALID);
	CHECK(strstr(err.msg, "cross-entropy") != NULL);
	/* each weight finite and > 0 */
	bad[1] = 0.0f;
	CHECK(nn_model_set_class_weights(ce, bad, 3, &err) == NN_ERR_INVALID);
	bad[1] = -1.0f;
	CHECK(nn_model_set_class_weights(ce, bad, 3, &err) == NN_ERR_INVALID);
	bad[1] = NAN;
	CHECK(nn_model_set_class_weights(ce, bad, 3, &err) == NN_ERR_INVALID);
	bad[1] = INFINITY;
	CHECK(nn_model_set_class_weights(ce, bad, 3, &err) == NN_ERR_INVALID);
	CHECK(strstr(err.msg, "class weight 1") != NULL);
	CHECK(nn_model_class_weights(ce, NULL) == 0);

	CHECK_OK(nn_model_set_class_weights(ce, good, 3, &err));
	CHECK(nn_model_class_weights(ce, &w) == 3 && w && w[0] == 0.5f && w[1] == 2.0f);
	CHECK_OK(nn_model_set_class_weights(bce, good, 2, &err));

	/* not while a stream is open */
	fill_uniform(x, 20, 5, -1, 1);
	CHECK_OK(nn_train_begin(ce, 0, &err));
	CHECK_OK(nn_train_feed(ce, x, y, 2, &err));
	CHECK(nn_model_set_class_weights(ce, NULL, 0, &err) == NN_ERR_STATE);
	CHECK_OK(nn_train_end(ce, NULL, &err));

	/* binary cross-entropy with weights takes labels 0 and 1 only */
	y[0] = 0.5f;
	CHECK(nn_train(bce, x, y, 1, 0, NULL, &err) == NN_ERR_INVALID);
	y[0] = 1.0f;
	CHECK_OK(nn_train(bce, x, y, 1, 0, NULL, &err));

	/* removed */
	CHECK_OK(nn_model_set_class_weights(ce, NULL, 0, &err));
	CHECK(nn_model_class_weights(ce, &w) == 0 && w == NULL);
	nn_model_free(ce);
	nn_model_free(bce);
	nn_model_free(multi);
	nn_model_free(mse);
}

TEST(class_weight_blob_round_trip_and_damage)
{
	nn_model   *m = cw_model(3, NN_LOSS_SOFTMAX_CE, 7),
			   *d = NULL,
			   *c = NULL;
	float		cw[3] = {0.75f, 3.5f, 1.25f};
	const float *w;
	nn_error	err;
	size_t		len0,
				len;
	unsigned char *b0,
			   *b,
			   *again;
	size_t		at;

	if (!m)
	{
		CHECK(0);
		return;
	}
	b0 = cw_blob(m, &len0);
	CHECK_OK(nn_model_set_class_weights(m, cw, 3, &err));
	b = cw_blob(m, &len);
	CHECK(b0 && b && len == len0 + 3 * sizeof(float));

	CHECK_OK(nn_model_deserialize(b, len, &d, &err));
	CHECK(d && nn_model_class_weights(d, &w) == 3 && memcmp(w, cw, sizeof(cw)) == 0);
	if (d)
	{
		size_t		len2;

		again = cw_blob(d, &len2);
		CHECK(again && len2 == len && memcmp(again, b, len) == 0);
		free(again);
	}
	CHECK_OK(nn_model_clone(m, &c, &err));
	CHECK(c && nn_model_class_weights(c, &w) == 3 && memcmp(w, cw, sizeof(cw)) == 0);
	nn_model_free(d);
	d = NULL;
	CHECK_OK(nn_model_deserialize(b0, len0, &d, &err));
	CHECK(d && nn_model_class_weights(d, NULL) == 0);
	nn_model_free(d);

	/*
	 * Damage behind a valid checksum.  The count of the weights is followed
	 * by the 3 weights, the stored parameter and optimizer counts (16
	 * bytes), then the parameters and the optimizer state, then the count
	 * of running statistics (8 bytes; none here).
	 */
	at = len - (size_t) (m->plan.n_params + m->plan.n_opt) * sizeof(float) - 8 - 16 -
		3 * sizeof(float) - 4;
	{
		int32_t		n;

		memcpy(&n, b + at, 4);
		CHECK(n == 3);
	}
	{
		unsigned char *bad = malloc(len);
		float		v;
		int32_t		n;
		char	   *msg = err.msg;

		/* a zero, a negative, a NaN weight */
		const float vals[3] = {0.0f, -2.0f, NAN};

		for (int k = 0; k < 3; k++)
		{
			memcpy(bad, b, len);
			v = vals[k];
			memcpy(bad + at + 4 + 4, &v, 4);
			reseal(bad, len);
			CHECK(nn_model_deserialize(bad, len, &d, &err) == NN_ERR_CORRUPT);
			CHECK(strstr(msg, "class weight 1") != NULL);
		}
		/* a count other than the model's classes */
		memcpy(bad, b, len);
		n = 2;
		memcpy(bad + at, &n, 4);
		reseal(bad, len);
		CHECK(nn_model_deserialize(bad, len, &d, &err) == NN_ERR_CORRUPT);
		n = 1 << 30;
		memcpy(bad + at, &n, 4);
		reseal(bad, len);
		CHECK(nn_model_deserialize(bad, len, &d, &err) == NN_ERR_CORRUPT);
		n = -1;
		memcpy(bad + at, &n, 4);
		reseal(bad, len);
		CHECK(nn_model_deserialize(bad, len, &d, &err) == NN_ERR_CORRUPT);
		/* truncated inside the weights */
		memcpy(bad, b, len);
		reseal(bad, at + 8);
		CHECK(nn_model_deserialize(bad, at + 8, &d, &err) == NN_ERR_CORRUPT);
		free(bad);
	}
	nn_model_free(c);
	nn_model_free(m);
	free(b0);
	free(b);
}

/* A blob written by format version 2 (before class weights) loads with none. */
TEST(blob_version_2_still_loads)
{
	FILE	   *f = fopen(DATA_DIR "/blob_v2.bin", "rb");
	unsigned char buf[4096],
			   *again;
	size_t		len,
				len2;
	uint32_t	v;
	nn_model   *m,
			   *m2;
	nn_error	err;
	nn_counters c;
	float		cw[3] = {1.0f, 2.0f, 3.0f};

	CHECK(f != NULL);
	if (!f)
		return;
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	memcpy(&v, buf + 8, 4);
	CHECK(v == 2);
	CHECK_OK(nn_model_deserialize(buf, len, &m, &err));
	nn_model_counters(m, &c);
	CHECK(c.steps == 3 && c.epochs == 1 && c.rows_trained == 12);
	CHECK(nn_model_class_weights(m, NULL) == 0 && nn_model_n_classes(m) == 3);
	/*
	 * written again: a current blob, 4 bytes longer (no class weights), 8
	 * per layer (momentum, eps) and 8 (no running statistics)
	 */
	len2 = nn_model_blob_size(m);
	again = malloc(len2);
	CHECK_OK(nn_model_serialize(m, again, len2, &len2, &err));
	memcpy(&v, again + 8, 4);
	CHECK(v == NN_BLOB_VERSION && len2 == len + 4 + 8 * (size_t) m->spec.n_layers + 8);
	CHECK_OK(nn_model_deserialize(again, len2, &m2, &err));
	CHECK(memcmp(m->params, m2->params, sizeof(float) * m->plan.n_params) == 0);
	CHECK(memcmp(m->opt, m2->opt, sizeof(float) * m->plan.n_opt) == 0);
	/* and it takes weights from now on */
	CHECK_OK(nn_model_set_class_weights(m2, cw, 3, &err));
	nn_model_free(m);
	nn_model_free(m2);
	free(again);
}

/*
 * A weighted model that hops (blob out, blob in) between sub-epochs trains
 * bit-identically to one that never left memory, and differently from the
 * same model without weights.
 */
TEST(class_weight_resume_equals_uninterrupted)
{
	nn_model   *a = cw_model(3, NN_LOSS_SOFTMAX_CE, 21),
			   *b = cw_model(3, NN_LOSS_SOFTMAX_CE, 21),
			   *plain = cw_model(3, NN_LOSS_SOFTMAX_CE, 21),
			   *hopped = NULL;
	float		cw[3] = {0.5f, 1.0f, 6.0f},
				x[23 * 4],
				y[23];
	nn_error	err;
	nn_result	ra,
				rb;
	size_t		len;
	unsigned char *blob;

	if (!a || !b || !plain)
	{
		CHECK(0);
		return;
	}
	cw_rows(x, y, 23, 3, 22);
	CHECK_OK(nn_model_set_class_weights(a, cw, 3, &err));
	CHECK_OK(nn_model_set_class_weights(b, cw, 3, &err));
	CHECK_OK(nn_train(a, x, y, 23, 1, &ra, &err));
	CHECK_OK(nn_train(a, x, y, 23, 1, &ra, &err));
	CHECK_OK(nn_train(b, x, y, 23, 1, &rb, &err));
	blob = cw_blob(b, &len);
	CHECK_OK(nn_model_deserialize(blob, len, &hopped, &err));
	if (hopped)
	{
		CHECK_OK(nn_train(hopped, x, y, 23, 1, &rb, &err));
		CHECK(memcmp(a->params, hopped->params, sizeof(float) * a->plan.n_params) == 0);
		CHECK(memcmp(a->opt, hopped->opt, sizeof(float) * a->plan.n_opt) == 0);
		CHECK(ra.loss_sum == rb.loss_sum);
	}
	CHECK_OK(nn_train(plain, x, y, 23, 1, NULL, &err));
	CHECK_OK(nn_train(plain, x, y, 23, 1, NULL, &err));
	CHECK(memcmp(a->params, plain->params, sizeof(float) * a->plan.n_params) != 0);
	/* PBT's explore keeps them */
	{
		nn_spec		s = *nn_model_spec(a);

		s.lr = 0.05f;
		CHECK_OK(nn_model_set_hyper(a, &s, &err));
		CHECK(nn_model_class_weights(a, NULL) == 3);
	}
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(plain);
	nn_model_free(hopped);
	free(blob);
}

/*
 * The training loss a stream reports is each minibatch's weighted mean
 * times its rows; an evaluation of the same rows reports the plain mean.
 * One minibatch (the batch size), so the model's logits before its one
 * step give the expected values.
 */
TEST(class_weight_reported_training_loss)
{
	nn_model   *m = cw_model(3, NN_LOSS_SOFTMAX_CE, 31);
	float		cw[3] = {0.2f, 1.0f, 5.0f},
				x[5 * 4],
				y[5],
				p[5 * 3];
	double		wl = 0,
				ws = 0,
				pl = 0;
	nn_error	err;
	nn_result	tr,
				ev;

	if (!m)
	{
		CHECK(0);
		return;
	}
	cw_rows(x, y, 5, 3, 32);
	CHECK_OK(nn_model_set_class_weights(m, cw, 3, &err));
	CHECK_OK(nn_predict(m, x, 5, p, &err));
	for (int r = 0; r < 5; r++)
	{
		int			c = (int) y[r];
		double		l = -log((double) p[r * 3 + c]);

		wl += cw[c] * l;
		ws += cw[c];
		pl += l;
	}
	memset(&ev, 0, sizeof(ev));
	CHECK_OK(nn_evaluate(m, x, y, 5, &ev, &err));
	CHECKF(close_enough(ev.loss_sum / ev.rows, pl / 5, 1e-5), "evaluation %.9g, plain mean %.9g",
		   ev.loss_sum / ev.rows, pl / 5);
	CHECK_OK(nn_train(m, x, y, 5, 0, &tr, &err));
	CHECK(tr.rows == 5 && tr.steps == 1);
	CHECKF(close_enough(tr.loss_sum / tr.rows, wl / ws, 1e-5), "training %.9g, weighted mean %.9g",
		   tr.loss_sum / tr.rows, wl / ws);
	CHECK(!close_enough(wl / ws, pl / 5, 1e-3));
	nn_model_free(m);
}

/* Averaging is for copies of one model: other class weights are refused. */
TEST(class_weight_average_refuses_other_weights)
{
	nn_model   *a = cw_model(3, NN_LOSS_SOFTMAX_CE, 41),
			   *b = cw_model(3, NN_LOSS_SOFTMAX_CE, 42),
			   *both[2];
	float		cw[3] = {1.0f, 2.0f, 3.0f};
	nn_error	err;

	if (!a || !b)
	{
		CHECK(0);
		return;
	}
	both[0] = a;
	both[1] = b;
	CHECK_OK(nn_model_set_class_weights(a, cw, 3, &err));
	CHECK(nn_model_average(a, both, 2, &err) == NN_ERR_SHAPE);
	CHECK(strstr(err.msg, "class weights") != NULL);
	cw[2] = 4.0f;
	CHECK_OK(nn_model_set_class_weights(b, cw, 3, &err));
	CHECK(nn_model_average(a, both, 2, &err) == NN_ERR_SHAPE);
	cw[2] = 3.0f;
	CHECK_OK(nn_model_set_class_weights(b, cw, 3, &err));
	CHECK_OK(nn_model_average(a, both, 2, &err));
	nn_model_free(a);
	nn_model_free(b);
}
