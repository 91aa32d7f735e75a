/*
 * test_grad.c -- finite-difference gradient checks for every layer,
 * activation and loss.
 *
 * Each case builds a small network around the piece under test, computes
 * analytic gradients with nn_gradients() and compares every parameter's
 * gradient with a central difference of the loss (evaluated in training
 * mode with the RNG restored, so dropout masks are identical).  Gradients of
 * the first layer's parameters flow through every later layer's input
 * gradient, so input gradients are checked too.  The class-weighted losses
 * are checked the same way, and their values against hand computations.
 * Batch normalisation is checked in training mode (batch statistics), after
 * a dense layer, after a convolution (per channel over rows and pixels)
 * and after a flatten.
 */
#include "harness.h"
#include "util.h"

/* Mean batch loss at the current weights, in training mode, RNG restored. */
static double
loss_at(nn_model *m, const float *x, const float *y, int nb, const uint64_t rng[4])
{
	double		ls = 0,
				ms = 0;
	const float *z;

	memcpy(m->rng, rng, sizeof(m->rng));
	z = nn_forward(m, x, nb, 1);
	nn_loss_eval(&m->spec, m->class_w, m->plan.out_dim, z, y, nb, NULL, &ls, &ms);
	return ls / nb;
}

/*
 * Compare analytic and numeric gradients for every parameter of spec, with
 * the ncw class weights cw (none: NULL, 0); weighted binary cross-entropy
 * gets labels 0 and 1, a third of them 1.
 */
static void
grad_check_weighted(nn_spec *spec, const float *cw, int ncw, int nb, uint64_t seed,
					const char *what)
{
	nn_model   *m;
	nn_error	err;
	int64_t		in_dim,
				y_dim,
				P;
	float	   *x,
			   *y,
			   *g;
	uint64_t	rng[4];
	double		ls,
				ms,
				worst = 0;
	int			bad = 0,
				kinks = 0;

	spec->seed = seed;
	if (nn_model_create(spec, &m, &err) != NN_OK)
	{
		CHECKF(0, "%s: create failed: %s", what, err.msg);
		return;
	}
	if (ncw > 0 && nn_model_set_class_weights(m, cw, ncw, &err) != NN_OK)
	{
		CHECKF(0, "%s: class weights refused: %s", what, err.msg);
		nn_model_free(m);
		return;
	}
	in_dim = m->plan.in_dim;
	y_dim = m->plan.y_dim;
	P = m->plan.n_params;
	x = malloc(sizeof(float) * nb * in_dim);
	y = malloc(sizeof(float) * nb * y_dim);
	g = malloc(sizeof(float) * P);
	fill_uniform(x, nb * in_dim, seed + 1, -1.0f, 1.0f);
	fill_uniform(y, nb * y_dim, seed + 2, 0.0f, 1.0f);
	if (spec->loss == NN_LOSS_SOFTMAX_CE)
		for (int i = 0; i < nb; i++)
			y[i] = (float) (i % m->plan.out_dim);
	if (spec->loss == NN_LOSS_SIGMOID_BCE && ncw > 0)
		for (int i = 0; i < nb * y_dim; i++)
			y[i] = (i % 3 == 0) ? 1.0f : 0.0f;
	/* biases start at zero; make them non-trivial */
	for (int t = 0; t < m->plan.n_tensors; t++)
		if (!m->plan.t[t].is_kernel && !m->plan.t[t].is_buffer)
			fill_uniform(m->params + m->plan.t[t].off, m->plan.t[t].size, seed + 3 + t,
						 -0.2f, 0.2f);

	memcpy(rng, m->rng, sizeof(rng));
	CHECK_OK(nn_gradients(m, x, y, nb, &ls, &ms, &err));
	memcpy(g, m->grads, sizeof(float) * P);

	for (int64_t i = 0; i < P; i++)
	{
		float		w0 = m->params[i];
		double		num[2],
					diff;

		/* central differences at two step sizes; if they disagree the loss
		 * is not smooth here (a relu or max-pool kink): skip, but count */
		for (int k = 0; k < 2; k++)
		{
			float		h = (k ? 5e-4f : 1e-3f) * fmaxf(1.0f, fabsf(w0));
			float		wp = w0 + h,
						wm = w0 - h;
			double		lp,
						lm;

			m->params[i] = wp;
			lp = loss_at(m, x, y, nb, rng);
			m->params[i] = wm;
			lm = loss_at(m, x, y, nb, rng);
			m->params[i] = w0;
			num[k] = (lp - lm) / ((double) wp - (double) wm);
		}
		if (fabs(num[0] - num[1]) > 0.05 * fmax(fmax(fabs(num[0]), fabs(num[1])), 1e-2))
		{
			kinks++;
			continue;
		}
		diff = fabs(num[0] - g[i]) / fmax(fmax(fabs(num[0]), fabs(g[i])), 1e-2);
		if (diff > worst)
			worst = diff;
		if (diff > 5e-2)
		{
			if (bad < 5)
				fprintf(stderr, "  %s: param %lld analytic %.6g numeric %.6g\n",
						what, (long long) i, (double) g[i], num[0]);
			bad++;
		}
	}
	CHECKF(kinks * 10 <= P, "%s: %d of %lld parameters at non-smooth points", what,
		   kinks, (long long) P);
	CHECKF(bad == 0, "%s: %d of %lld gradients off (worst rel %.3g)", what, bad,
		   (long long) P, worst);
	nn_model_free(m);
	free(x);
	free(y);
	free(g);
}

static void
grad_check(nn_spec *spec, int nb, uint64_t seed, const char *what)
{
	grad_check_weighted(spec, NULL, 0, nb, seed, what);
}

/* A dense net with the given hidden activation and CE loss. */
static void
dense_case(int act, const char *what)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_c = 5;
	s.batch_size = 4;
	add_dense(&s, 7, act);
	add_dense(&s, 3, NN_ACT_NONE);
	grad_check(&s, 4, 11 + act, what);
}

TEST(grad_dense_linear)
{
	dense_case(NN_ACT_NONE, "dense linear");
}

TEST(grad_relu)
{
	dense_case(NN_ACT_RELU, "relu");
}

TEST(grad_leaky_relu)
{
	dense_case(NN_ACT_LEAKY_RELU, "leaky relu");
}

TEST(grad_tanh)
{
	dense_case(NN_ACT_TANH, "tanh");
}

TEST(grad_sigmoid)
{
	dense_case(NN_ACT_SIGMOID, "sigmoid");
}

TEST(grad_gelu)
{
	dense_case(NN_ACT_GELU, "gelu");
}

TEST(grad_softmax_hidden)
{
	dense_case(NN_ACT_SOFTMAX, "softmax (hidden)");
}

TEST(grad_conv_valid_pool)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_h = 6;
	s.in_w = 5;
	s.in_c = 2;
	s.batch_size = 3;
	add_conv(&s, 3, 3, 1, NN_PAD_VALID, NN_ACT_TANH);
	add_pool(&s, 2, 2, NN_PAD_VALID);
	add_layer(&s, NN_LAYER_FLATTEN);
	add_dense(&s, 4, NN_ACT_NONE);
	grad_check(&s, 3, 21, "conv valid + maxpool valid");
}

TEST(grad_conv_same_strided)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_h = 7;
	s.in_w = 6;
	s.in_c = 3;
	s.batch_size = 2;
	add_conv(&s, 4, 3, 2, NN_PAD_SAME, NN_ACT_NONE);
	add_conv(&s, 2, 2, 1, NN_PAD_SAME, NN_ACT_SIGMOID);
	add_pool(&s, 3, 2, NN_PAD_SAME);
	add_layer(&s, NN_LAYER_FLATTEN);
	add_dense(&s, 3, NN_ACT_NONE);
	grad_check(&s, 2, 22, "conv same stride 2 + maxpool same");
}

TEST(grad_conv_no_bias_1x1)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_h = 4;
	s.in_w = 4;
	s.in_c = 3;
	s.batch_size = 2;
	add_conv(&s, 2, 1, 1, NN_PAD_VALID, NN_ACT_NONE);
	s.layers[0].use_bias = 0;
	add_layer(&s, NN_LAYER_FLATTEN);
	add_dense(&s, 2, NN_ACT_NONE);
	grad_check(&s, 2, 23, "1x1 conv without bias");
}

TEST(grad_dropout)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_c = 6;
	s.batch_size = 5;
	add_dense(&s, 8, NN_ACT_TANH);
	add_layer(&s, NN_LAYER_DROPOUT)->rate = 0.4f;
	add_dense(&s, 3, NN_ACT_NONE);
	grad_check(&s, 5, 31, "dropout");
}

TEST(grad_batchnorm_dense)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_c = 5;
	s.batch_size = 6;
	add_dense(&s, 7, NN_ACT_NONE);
	add_layer(&s, NN_LAYER_BATCHNORM)->eps = 1e-5f;
	s.layers[1].momentum = 0.1f;
	add_act(&s, NN_ACT_TANH);
	add_dense(&s, 3, NN_ACT_NONE);
	grad_check(&s, 6, 41, "batchnorm after dense");
}

TEST(grad_batchnorm_conv)
{
	nn_spec		s;
	nn_layer_spec *bn;

	nn_spec_init(&s);
	s.in_h = 5;
	s.in_w = 4;
	s.in_c = 2;
	s.batch_size = 3;
	add_conv(&s, 3, 3, 1, NN_PAD_SAME, NN_ACT_NONE);
	bn = add_layer(&s, NN_LAYER_BATCHNORM);
	bn->momentum = 0.3f;
	bn->eps = 1e-3f;
	add_act(&s, NN_ACT_TANH);
	add_layer(&s, NN_LAYER_FLATTEN);
	add_dense(&s, 4, NN_ACT_NONE);
	bn = add_layer(&s, NN_LAYER_BATCHNORM);
	bn->momentum = 0.1f;
	bn->eps = 1e-5f;
	add_dense(&s, 3, NN_ACT_NONE);
	grad_check(&s, 3, 43, "batchnorm after conv2d and after flatten + dense");
}

TEST(grad_ce_fused_softmax)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_c = 4;
	s.batch_size = 6;
	add_dense(&s, 5, NN_ACT_SOFTMAX);	/* folded into the loss */
	grad_check(&s, 6, 41, "cross-entropy with final softmax");
}

TEST(grad_bce)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_c = 4;
	s.batch_size = 5;
	s.loss = NN_LOSS_SIGMOID_BCE;
	add_dense(&s, 6, NN_ACT_RELU);
	add_dense(&s, 3, NN_ACT_SIGMOID);	/* folded into the loss */
	grad_check(&s, 5, 42, "binary cross-entropy");
}

TEST(grad_mse)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_c = 4;
	s.batch_size = 5;
	s.loss = NN_LOSS_MSE;
	s.metric = NN_METRIC_MAE;
	add_dense(&s, 6, NN_ACT_GELU);
	add_dense(&s, 2, NN_ACT_NONE);
	grad_check(&s, 5, 43, "mean squared error");
}

TEST(grad_partial_batch)
{
	nn_spec		s;

	nn_spec_init(&s);
	s.in_c = 3;
	s.batch_size = 8;
	add_dense(&s, 4, NN_ACT_RELU);
	add_dense(&s, 3, NN_ACT_NONE);
	grad_check(&s, 3, 44, "batch smaller than batch_size");
}

TEST(grad_ce_class_weights)
{
	/* 7 rows over 3 classes (3, 2, 2 rows), weights far apart */
	nn_spec		s;
	float		cw[3] = {0.25f, 4.0f, 1.5f};

	nn_spec_init(&s);
	s.in_c = 5;
	s.batch_size = 7;
	add_dense(&s, 6, NN_ACT_TANH);
	add_dense(&s, 3, NN_ACT_NONE);
	grad_check_weighted(&s, cw, 3, 7, 45, "class-weighted cross-entropy");
}

TEST(grad_bce_class_weights)
{
	nn_spec		s;
	float		cw[2] = {0.4f, 3.0f};	/* label 0, label 1 */

	nn_spec_init(&s);
	s.in_c = 4;
	s.batch_size = 6;
	s.loss = NN_LOSS_SIGMOID_BCE;
	add_dense(&s, 5, NN_ACT_RELU);
	add_dense(&s, 1, NN_ACT_NONE);
	grad_check_weighted(&s, cw, 2, 6, 46, "class-weighted binary cross-entropy");
}

TEST(loss_values_class_weighted)
{
	/*
	 * Cross-entropy, two rows: logits (0, 0) of class 1 (loss ln 2) and
	 * (ln 3, 0) of class 0 (loss ln 4/3); weights w0 = 2, w1 = 0.5.  The
	 * weighted mean is (0.5 ln 2 + 2 ln 4/3) / 2.5; the sum reported is it
	 * times the 2 rows.  Gradients: row 0 (0.5 / 2.5) (0.5, 0.5 - 1) =
	 * (0.1, -0.1); row 1 (2 / 2.5) (0.75 - 1, 0.25) = (-0.2, 0.2).
	 */
	nn_spec		s;
	float		z[4] = {0, 0, (float) log(3.0), 0},
				y[2] = {1, 0},
				cw[2] = {2.0f, 0.5f},
				dz[4];
	double		ls = 0,
				ms = 0,
				want = (0.5 * log(2.0) + 2.0 * log(4.0 / 3.0)) / 2.5;

	nn_spec_init(&s);
	CHECK(nn_loss_eval(&s, cw, 2, z, y, 2, dz, &ls, &ms) == -1);
	CHECKF(close_enough(ls, 2.0 * want, 1e-6), "CE loss sum %.9g, want %.9g", ls, 2.0 * want);
	CHECK(close_enough(dz[0], 0.1, 1e-6) && close_enough(dz[1], -0.1, 1e-6));
	CHECK(close_enough(dz[2], -0.2, 1e-6) && close_enough(dz[3], 0.2, 1e-6));
	/* accuracy stays unweighted: row 0 predicts class 0 (a tie), row 1 class 0 */
	CHECK(ms == 1.0);

	/*
	 * Binary cross-entropy, one output: logit 0 of label 1 (loss ln 2) and
	 * logit ln 3 of label 0 (loss ln 4); weights w0 = 3, w1 = 1.  The
	 * weighted mean is (ln 2 + 3 ln 4) / 4 = 7/4 ln 2; gradients (1/4)
	 * (0.5 - 1) = -0.125 and (3/4) (0.75 - 0) = 0.5625.
	 */
	s.loss = NN_LOSS_SIGMOID_BCE;
	cw[0] = 3.0f;
	cw[1] = 1.0f;
	z[0] = 0;
	z[1] = (float) log(3.0);
	y[0] = 1;
	y[1] = 0;
	ls = ms = 0;
	CHECK(nn_loss_eval(&s, cw, 1, z, y, 2, dz, &ls, &ms) == -1);
	CHECKF(close_enough(ls, 2.0 * 1.75 * log(2.0), 1e-6), "BCE loss sum %.9g", ls);
	CHECK(close_enough(dz[0], -0.125, 1e-6) && close_enough(dz[1], 0.5625, 1e-6));
	/* unweighted, the same rows: the plain mean (ln 2 + ln 4) / 2 */
	ls = ms = 0;
	CHECK(nn_loss_eval(&s, NULL, 1, z, y, 2, dz, &ls, &ms) == -1);
	CHECK(close_enough(ls, 3.0 * log(2.0), 1e-6));
	/* a class weight needs a class: a soft label is refused, nothing added */
	y[1] = 0.5f;
	ls = ms = 0;
	CHECK(nn_loss_eval(&s, cw, 1, z, y, 2, dz, &ls, &ms) == 1);
	CHECK(ls == 0.0);
	CHECK(nn_loss_eval(&s, NULL, 1, z, y, 2, dz, &ls, &ms) == -1);
}

TEST(loss_values_known)
{
	/* CE of logits (0, 0) against class 1 is log 2; BCE of 0 is log 2; MSE of (1-3)^2 */
	nn_spec		s;
	float		z[2] = {0, 0},
				y1 = 1,
				dz[2];
	double		ls = 0,
				ms = 0;

	nn_spec_init(&s);
	CHECK(nn_loss_eval(&s, NULL, 2, z, &y1, 1, dz, &ls, &ms) == -1);
	CHECK(close_enough(ls, log(2.0), 1e-6));
	CHECK(close_enough(dz[0], 0.5, 1e-6) && close_enough(dz[1], -0.5, 1e-6));
	s.loss = NN_LOSS_SIGMOID_BCE;
	ls = ms = 0;
	CHECK(nn_loss_eval(&s, NULL, 1, z, &y1, 1, dz, &ls, &ms) == -1);
	CHECK(close_enough(ls, log(2.0), 1e-6) && close_enough(dz[0], -0.5, 1e-6));
	s.loss = NN_LOSS_MSE;
	s.metric = NN_METRIC_MAE;
	z[0] = 1;
	y1 = 3;
	ls = ms = 0;
	CHECK(nn_loss_eval(&s, NULL, 1, z, &y1, 1, dz, &ls, &ms) == -1);
	CHECK(close_enough(ls, 4.0, 1e-6) && close_enough(ms, 2.0, 1e-6));
	CHECK(close_enough(dz[0], -4.0, 1e-6));
	/* a class index out of range is reported, not used */
	s.loss = NN_LOSS_SOFTMAX_CE;
	s.metric = NN_METRIC_ACCURACY;
	y1 = 2;
	CHECK(nn_loss_eval(&s, NULL, 2, z, &y1, 1, dz, &ls, &ms) == 0);
}

TEST(topk_metric)
{
	nn_spec		s;
	float		z[4] = {0.1f, 0.9f, 0.5f, 0.2f},
				y;
	double		ls = 0,
				ms = 0;

	nn_spec_init(&s);
	s.metric = NN_METRIC_TOPK;
	s.top_k = 2;
	y = 2;						/* second best: in the top 2 */
	nn_loss_eval(&s, NULL, 4, z, &y, 1, NULL, &ls, &ms);
	CHECK(ms == 1.0);
	y = 3;						/* third best: not */
	ms = 0;
	nn_loss_eval(&s, NULL, 4, z, &y, 1, NULL, &ls, &ms);
	CHECK(ms == 0.0);
}

TEST(conv_chunking_matches_whole_batch)
{
	/* im2col in chunks of one image gives the same outputs and gradients */
	nn_spec		s;
	nn_model   *a,
			   *b;
	nn_error	err;
	float		x[5 * 6 * 6 * 2],
				y[5] = {0, 1, 2, 0, 1};
	double		la,
				lb,
				ma,
				mb;
	int64_t		saved = nn_col_chunk_floats;
	double		worst = 0;

	nn_spec_init(&s);
	s.in_h = s.in_w = 6;
	s.in_c = 2;
	s.batch_size = 5;
	add_conv(&s, 4, 3, 1, NN_PAD_SAME, NN_ACT_RELU);
	add_conv(&s, 3, 3, 2, NN_PAD_VALID, NN_ACT_NONE);
	add_layer(&s, NN_LAYER_FLATTEN);
	add_dense(&s, 3, NN_ACT_NONE);
	fill_uniform(x, sizeof(x) / sizeof(float), 5, -1, 1);
	CHECK_OK(nn_model_create(&s, &a, &err));
	nn_col_chunk_floats = 1;	/* one image per chunk */
	CHECK_OK(nn_model_create(&s, &b, &err));
	nn_col_chunk_floats = saved;
	CHECK(a->plan.l[0].chunk == 5 && b->plan.l[0].chunk == 1);
	CHECK(b->plan.ws_col < a->plan.ws_col);
	CHECK_OK(nn_gradients(a, x, y, 5, &la, &ma, &err));
	CHECK_OK(nn_gradients(b, x, y, 5, &lb, &mb, &err));
	CHECK(fabs(la - lb) < 1e-6 * fabs(la));
	for (int64_t i = 0; i < a->plan.n_params; i++)
		worst = fmax(worst, fabs(a->grads[i] - b->grads[i]) / fmax(fabs(a->grads[i]), 1e-3));
	CHECKF(worst < 1e-4, "worst relative gradient difference %.3g", worst);
	nn_model_free(a);
	nn_model_free(b);
}
