/*
 * test_batchnorm.c -- batch normalisation beyond its gradients (those are
 * in test_grad.c): the running statistics a training step leaves (momentum,
 * unbiased variance; per feature after a dense layer, per channel over
 * rows and pixels after a convolution), evaluation with them, the tensors
 * listed, the optimizer leaving them alone, the state in the blob (round
 * trip, clone, average, resume equal to an uninterrupted run, damage
 * refused), a version 3 blob (before batch normalisation) that loads and
 * trains on exactly as the engine that wrote it did, and spec validation.
 */
#include "harness.h"
#include "util.h"

#ifndef DATA_DIR
#define DATA_DIR "test/unit/data"
#endif

#define HDR 32

/*
 * in_c inputs -> dense in_c (identity, no bias) -> batchnorm -> dense
 * in_c (identity, no bias), cross-entropy: the batchnorm layer sees the
 * input as it is and its output is the logits.
 */
static nn_model *
identity_bn_model(int in_c, float momentum, float eps, int batch)
{
	nn_spec		s;
	nn_layer_spec *l;
	nn_model   *m;
	nn_error	err;

	nn_spec_init(&s);
	s.in_c = in_c;
	s.batch_size = batch;
	s.optimizer = NN_OPT_SGD;
	s.lr = 0.1f;
	add_dense(&s, in_c, NN_ACT_NONE);
	s.layers[0].use_bias = 0;
	l = add_layer(&s, NN_LAYER_BATCHNORM);
	l->momentum = momentum;
	l->eps = eps;
	add_dense(&s, in_c, NN_ACT_NONE);
	s.layers[2].use_bias = 0;
	if (nn_model_create(&s, &m, &err) != NN_OK)
	{
		CHECKF(0, "create: %s", err.msg);
		return NULL;
	}
	for (int t = 0; t < m->plan.n_tensors; t++)
		if (m->plan.t[t].is_kernel)
			for (int i = 0; i < in_c; i++)
				for (int j = 0; j < in_c; j++)
					m->params[m->plan.t[t].off + i * in_c + j] = i == j ? 1.0f : 0.0f;
	return m;
}

/* A small trainable model with batchnorm after a convolution and after a dense layer. */
static void
bn_spec(nn_spec *s, int opt)
{
	nn_layer_spec *l;

	nn_spec_init(s);
	s->in_h = 4;
	s->in_w = 4;
	s->in_c = 2;
	s->batch_size = 5;
	s->optimizer = opt;
	s->lr = 0.01f;
	s->momentum = opt == NN_OPT_SGD ? 0.9f : 0.0f;
	s->seed = 17;
	add_conv(s, 3, 3, 1, NN_PAD_SAME, NN_ACT_NONE);
	l = add_layer(s, NN_LAYER_BATCHNORM);
	l->momentum = 0.1f;
	l->eps = 1e-5f;
	add_act(s, NN_ACT_RELU);
	add_layer(s, NN_LAYER_FLATTEN);
	add_dense(s, 6, NN_ACT_NONE);
	l = add_layer(s, NN_LAYER_BATCHNORM);
	l->momentum = 0.25f;
	l->eps = 1e-3f;
	add_act(s, NN_ACT_RELU);
	add_dense(s, 3, NN_ACT_NONE);
}

static void
bn_data(float *x, float *y, int n, int in_dim)
{
	fill_uniform(x, (int64_t) n * in_dim, 5, -1.0f, 2.0f);
	for (int i = 0; i < n; i++)
		y[i] = (float) (i % 3);
}

TEST(batchnorm_running_statistics_dense)
{
	nn_model   *m = identity_bn_model(2, 0.1f, 1e-5f, 4);
	float		x[8] = {1, 10, 2, 20, 3, 30, 6, 40};
	float		y[4] = {0, 1, 0, 1};
	const float *rm,
			   *rv;
	double		ls,
				ms;
	nn_error	err;
	const float *z;

	if (!m)
		return;
	rm = m->bufs;
	rv = m->bufs + 2;
	CHECK(m->plan.n_bufs == 4 && rm[0] == 0 && rm[1] == 0 && rv[0] == 1 && rv[1] == 1);
	CHECK_OK(nn_gradients(m, x, y, 4, &ls, &ms, &err));
	/* means 3 and 25, unbiased variances 14/3 and 500/3 */
	CHECK(fabs(rm[0] - 0.1 * 3) < 1e-6 && fabs(rm[1] - 0.1 * 25) < 1e-6);
	CHECK(fabs(rv[0] - (0.9 + 0.1 * 14.0 / 3)) < 1e-6);
	CHECK(fabs(rv[1] - (0.9 + 0.1 * 500.0 / 3)) < 1e-5);
	/* the training output: per feature mean 0, biased variance 1 (gamma 1, beta 0) */
	z = nn_forward(m, x, 4, 1);
	for (int c = 0; c < 2; c++)
	{
		double		s = 0,
					ss = 0;

		for (int r = 0; r < 4; r++)
			s += z[r * 2 + c];
		for (int r = 0; r < 4; r++)
			ss += (z[r * 2 + c] - s / 4) * (z[r * 2 + c] - s / 4);
		CHECK(fabs(s / 4) < 1e-6 && fabs(ss / 4 - 1) < 1e-4);
	}
	/* evaluation normalises with the running statistics, and leaves them */
	{
		float		rm0 = rm[0],
					rv1 = rv[1];

		z = nn_forward(m, x, 4, 0);
		for (int r = 0; r < 4; r++)
			for (int c = 0; c < 2; c++)
				CHECK(fabs(z[r * 2 + c] - (x[r * 2 + c] - rm[c]) / sqrt(rv[c] + 1e-5)) < 1e-5);
		CHECK(rm[0] == rm0 && rv[1] == rv1);
	}
	/* a batch of one row: nothing to estimate a variance from, statistics kept */
	{
		float		before[4];

		memcpy(before, m->bufs, sizeof(before));
		CHECK_OK(nn_gradients(m, x, y, 1, &ls, &ms, &err));
		CHECK(memcmp(before, m->bufs, sizeof(before)) == 0);
	}
	nn_model_free(m);
}

TEST(batchnorm_running_statistics_conv)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	float		x[2 * 2 * 2 * 2],
				y[2] = {0, 1};
	double		ls,
				ms,
				mean[2] = {0, 0},
				var[2] = {0, 0};

	/* 1x1 convolution, identity: the batchnorm sees 2 channels of 2 images of 2x2 */
	nn_spec_init(&s);
	s.in_h = s.in_w = s.in_c = 2;
	s.batch_size = 2;
	add_conv(&s, 2, 1, 1, NN_PAD_VALID, NN_ACT_NONE);
	s.layers[0].use_bias = 0;
	add_layer(&s, NN_LAYER_BATCHNORM)->eps = 1e-5f;
	s.layers[1].momentum = 0.5f;
	add_layer(&s, NN_LAYER_FLATTEN);
	add_dense(&s, 2, NN_ACT_NONE);
	CHECK_OK(nn_model_create(&s, &m, &err));
	m->params[0] = 1;
	m->params[1] = 0;
	m->params[2] = 0;
	m->params[3] = 1;
	fill_uniform(x, 16, 3, -2.0f, 3.0f);
	for (int i = 0; i < 8; i++)
		for (int c = 0; c < 2; c++)
			mean[c] += x[i * 2 + c] / 8.0;
	for (int i = 0; i < 8; i++)
		for (int c = 0; c < 2; c++)
			var[c] += (x[i * 2 + c] - mean[c]) * (x[i * 2 + c] - mean[c]) / 7.0;
	CHECK_OK(nn_gradients(m, x, y, 2, &ls, &ms, &err));
	for (int c = 0; c < 2; c++)
	{
		CHECK(fabs(m->bufs[c] - 0.5 * mean[c]) < 1e-6);
		CHECK(fabs(m->bufs[2 + c] - (0.5 + 0.5 * var[c])) < 1e-6);
	}
	nn_model_free(m);
}

TEST(batchnorm_tensors_and_optimizer)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;
	nn_tensor	t;
	float		x[20 * 32],
				y[20];
	const char *names[] = {"conv2d0.kernel", "conv2d0.bias", "batchnorm1.gamma", "batchnorm1.beta",
		"batchnorm1.running_mean", "batchnorm1.running_var", "dense4.kernel", "dense4.bias",
		"batchnorm5.gamma", "batchnorm5.beta", "batchnorm5.running_mean",
	"batchnorm5.running_var", "dense7.kernel", "dense7.bias"};

	bn_spec(&s, NN_OPT_ADAMW);
	s.weight_decay = 0.5f;
	CHECK_OK(nn_model_create(&s, &m, &err));
	CHECK(nn_model_n_tensors(m) == 14);
	for (int i = 0; i < 14 && i < nn_model_n_tensors(m); i++)
	{
		CHECK_OK(nn_model_tensor(m, i, &t, &err));
		CHECKF(strcmp(t.name, names[i]) == 0, "tensor %d is %s", i, t.name);
		CHECK(t.buffer == (strstr(t.name, "running") != NULL));
	}
	/* parameters: 54 + 3 + 3 + 3 + 48 * 6 + 6 + 6 + 6 + 18 + 3; no running statistics */
	CHECK(nn_model_param_count(m) == 54 + 3 + 6 + 288 + 6 + 12 + 18 + 3);
	CHECK(m->plan.n_bufs == 2 * 3 + 2 * 6);
	CHECK(m->plan.n_opt == 2 * nn_model_param_count(m));
	/* initial values */
	CHECK_OK(nn_model_tensor(m, 2, &t, &err));
	CHECK(t.data[0] == 1.0f && t.data[2] == 1.0f);
	CHECK_OK(nn_model_tensor(m, 5, &t, &err));
	CHECK(t.data[0] == 1.0f && t.data[2] == 1.0f);
	/* training moves the running statistics */
	bn_data(x, y, 20, 32);
	CHECK_OK(nn_train(m, x, y, 20, 0, NULL, &err));
	CHECK_OK(nn_model_tensor(m, 4, &t, &err));
	CHECK(t.data[0] != 0.0f);	/* running mean moved */
	{
		nn_model   *c;

		CHECK_OK(nn_model_clone(m, &c, &err));
		CHECK(memcmp(m->bufs, c->bufs, sizeof(float) * m->plan.n_bufs) == 0);
		nn_model_free(c);
	}
	nn_model_free(m);
}

/* train one model 2 epochs; another 1, blob round trip, 1 more: bit-identical */
TEST(batchnorm_blob_resume_is_exact)
{
	nn_spec		s;
	nn_model   *a,
			   *b,
			   *c;
	nn_error	err;
	float		x[23 * 32],
				y[23];
	unsigned char *blob;
	size_t		len;

	bn_spec(&s, NN_OPT_SGD);
	bn_data(x, y, 23, 32);
	CHECK_OK(nn_model_create(&s, &a, &err));
	CHECK_OK(nn_model_create(&s, &b, &err));
	CHECK_OK(nn_train(a, x, y, 23, 1, NULL, &err));
	CHECK_OK(nn_train(a, x, y, 23, 1, NULL, &err));
	CHECK_OK(nn_train(b, x, y, 23, 1, NULL, &err));
	len = nn_model_blob_size(b);
	blob = malloc(len);
	CHECK_OK(nn_model_serialize(b, blob, len, &len, &err));
	CHECK_OK(nn_model_deserialize(blob, len, &c, &err));
	CHECK(memcmp(b->bufs, c->bufs, sizeof(float) * b->plan.n_bufs) == 0);
	CHECK(memcmp(b->params, c->params, sizeof(float) * b->plan.n_params) == 0);
	CHECK(c->spec.layers[1].momentum == 0.1f && c->spec.layers[5].eps == 1e-3f);
	CHECK_OK(nn_train(c, x, y, 23, 1, NULL, &err));
	CHECK(memcmp(a->bufs, c->bufs, sizeof(float) * a->plan.n_bufs) == 0);
	CHECK(memcmp(a->params, c->params, sizeof(float) * a->plan.n_params) == 0);
	CHECK(memcmp(a->opt, c->opt, sizeof(float) * a->plan.n_opt) == 0);
	/* predictions use the running statistics: the same from the restored model */
	{
		float		pa[23 * 3],
					pc[23 * 3];

		CHECK_OK(nn_predict(a, x, 23, pa, &err));
		CHECK_OK(nn_predict(c, x, 23, pc, &err));
		CHECK(memcmp(pa, pc, sizeof(pa)) == 0);
	}

	/* damage: a wrong running-statistics count, a truncated blob */
	{
		unsigned char *bad = malloc(len);
		int64_t		nb;
		size_t		at = len - (size_t) b->plan.n_bufs * sizeof(float) - 8;
		uint64_t	sum;
		nn_model   *d;

		memcpy(bad, blob, len);
		memcpy(&nb, bad + at, 8);
		CHECK(nb == b->plan.n_bufs);
		nb++;
		memcpy(bad + at, &nb, 8);
		sum = nn_blob_checksum(bad + HDR, len - HDR);
		memcpy(bad + 24, &sum, 8);
		CHECK(nn_model_deserialize(bad, len, &d, &err) == NN_ERR_CORRUPT);
		CHECK(strstr(err.msg, "running statistics") != NULL);
		/* the blob without its running statistics */
		{
			uint64_t	plen = at - HDR;

			memcpy(bad, blob, at);
			memcpy(bad + 16, &plen, 8);
			sum = nn_blob_checksum(bad + HDR, plen);
			memcpy(bad + 24, &sum, 8);
			CHECK(nn_model_deserialize(bad, at, &d, &err) == NN_ERR_CORRUPT);
		}
		/* the same blob claiming format version 3 (no batchnorm then) */
		{
			uint32_t	v = 3;

			memcpy(bad, blob, len);
			memcpy(bad + 8, &v, 4);
			CHECK(nn_model_deserialize(bad, len, &d, &err) == NN_ERR_CORRUPT);
		}
		free(bad);
	}
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
	free(blob);
}

TEST(batchnorm_average_and_determinism)
{
	nn_spec		s;
	nn_model   *a,
			   *b,
			   *avg;
	nn_error	err;
	float		x[20 * 32],
				y[20];

	bn_spec(&s, NN_OPT_ADAM);
	bn_data(x, y, 20, 32);
	CHECK_OK(nn_model_create(&s, &a, &err));
	CHECK_OK(nn_model_create(&s, &b, &err));
	/* same seed, same data: bit-identical, running statistics included */
	CHECK_OK(nn_train(a, x, y, 20, 1, NULL, &err));
	CHECK_OK(nn_train(b, x, y, 20, 1, NULL, &err));
	CHECK(memcmp(a->bufs, b->bufs, sizeof(float) * a->plan.n_bufs) == 0);
	CHECK(memcmp(a->params, b->params, sizeof(float) * a->plan.n_params) == 0);
	/* b on other rows: averaging means the running statistics too */
	CHECK_OK(nn_train(b, x + 10 * 32, y + 10, 10, 0, NULL, &err));
	CHECK_OK(nn_model_clone(a, &avg, &err));
	{
		nn_model   *both[2] = {a, b};

		CHECK_OK(nn_model_average(avg, both, 2, &err));
	}
	for (int64_t i = 0; i < a->plan.n_bufs; i++)
		CHECK(avg->bufs[i] == (float) (((double) a->bufs[i] + b->bufs[i]) / 2));
	CHECK(memcmp(a->bufs, b->bufs, sizeof(float) * a->plan.n_bufs) != 0);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(avg);
}

/*
 * A version 3 blob (written by the engine before batch normalisation: dense
 * 4 -> 6 relu -> 3, class weights 1, 2, 0.5, Adam, two epochs of 10 rows
 * in batches of 4) loads, and one more epoch gives exactly the weights that
 * engine computed (blob_v3_next.f32).
 */
TEST(blob_version_3_still_loads)
{
	FILE	   *f = fopen(DATA_DIR "/blob_v3.bin", "rb");
	unsigned char buf[4096];
	float		want[64],
				x[40],
				y[10];
	size_t		len,
				nw;
	uint32_t	v;
	nn_model   *m;
	nn_error	err;
	nn_counters c;
	nn_tensor	t;
	size_t		at = 0;
	int			same = 1;

	CHECK(f != NULL);
	if (!f)
		return;
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	f = fopen(DATA_DIR "/blob_v3_next.f32", "rb");
	CHECK(f != NULL);
	if (!f)
		return;
	nw = fread(want, sizeof(float), 64, f);
	fclose(f);
	memcpy(&v, buf + 8, 4);
	CHECK(v == 3);
	CHECK_OK(nn_model_deserialize(buf, len, &m, &err));
	if (!m)
		return;
	nn_model_counters(m, &c);
	CHECK(c.epochs == 2 && c.steps == 6 && c.rows_trained == 20);
	CHECK(nn_model_class_weights(m, NULL) == 3 && m->plan.n_bufs == 0);
	CHECK(nw == (size_t) m->plan.n_params);
	for (int i = 0; i < 40; i++)
		x[i] = (float) ((i * 37) % 17) / 17.0f - 0.5f;
	for (int i = 0; i < 10; i++)
		y[i] = (float) (i % 3);
	CHECK_OK(nn_train(m, x, y, 10, 0, NULL, &err));
	for (int i = 0; i < nn_model_n_tensors(m); i++)
	{
		nn_model_tensor(m, i, &t, &err);
		same &= at + t.size <= nw && memcmp(t.data, want + at, sizeof(float) * t.size) == 0;
		at += t.size;
	}
	CHECK(same && at == nw);
	nn_model_free(m);
}

TEST(batchnorm_spec_validation)
{
	nn_spec		s;
	nn_error	err;
	nn_layer_spec *l;

	/* first layer */
	nn_spec_init(&s);
	s.in_c = 4;
	l = add_layer(&s, NN_LAYER_BATCHNORM);
	l->momentum = 0.1f;
	l->eps = 1e-5f;
	add_dense(&s, 3, NN_ACT_NONE);
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
	CHECK(strstr(err.msg, "layer 0 (batchnorm): must follow a dense or conv2d layer") != NULL);

	/* after a dense layer: fine; then bad eps and momentum */
	nn_spec_init(&s);
	s.in_c = 4;
	add_dense(&s, 5, NN_ACT_RELU);
	l = add_layer(&s, NN_LAYER_BATCHNORM);
	l->momentum = 0.1f;
	l->eps = 1e-5f;
	add_dense(&s, 3, NN_ACT_NONE);
	CHECK_OK(nn_spec_validate(&s, &err));
	s.layers[1].momentum = 0.0f;	/* running statistics frozen: allowed */
	CHECK_OK(nn_spec_validate(&s, &err));
	s.layers[1].momentum = 1.0f;	/* the last batch only: allowed */
	CHECK_OK(nn_spec_validate(&s, &err));
	s.layers[1].momentum = 1.5f;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID && strstr(err.msg, "momentum") != NULL);
	s.layers[1].momentum = NAN;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
	s.layers[1].momentum = 0.1f;
	s.layers[1].eps = 0.0f;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID && strstr(err.msg, "eps") != NULL);
	s.layers[1].eps = -1e-5f;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
	s.layers[1].eps = INFINITY;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
}
