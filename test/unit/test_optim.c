/*
 * test_optim.c -- each optimizer's step against values computed by hand.
 *
 * The model is a single dense unit (one kernel weight w, one bias b); the
 * tests set the gradients directly and call nn_optim_step(), so nothing but
 * the update rule is under test.  Expected values are worked out in the
 * comments from the textbook (PyTorch) formulas.
 */
#include "harness.h"
#include "util.h"

/* A 1-in, 1-out linear model with w = 1, b = 0.2. */
static nn_model *
unit_model(int opt, float lr)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;

	nn_spec_init(&s);
	s.loss = NN_LOSS_MSE;
	s.metric = NN_METRIC_MSE;
	s.optimizer = opt;
	s.lr = lr;
	add_dense(&s, 1, NN_ACT_NONE);
	if (nn_model_create(&s, &m, &err) != NN_OK)
		return NULL;
	m->params[0] = 1.0f;
	m->params[1] = 0.2f;
	return m;
}

/* Set gradients (gw, gb) and take one step. */
static void
step(nn_model *m, float gw, float gb)
{
	nn_error	err;

	m->grads[0] = gw;
	m->grads[1] = gb;
	CHECK(nn_optim_step(m, &err) == NN_OK);
	m->steps++;
}

/* Rebuild the optimizer part of m's spec (state sizes may change). */
static void
retune(nn_model *m, void (*fn) (nn_spec *))
{
	nn_spec		s = m->spec;
	nn_error	err;

	fn(&s);
	CHECK(nn_model_set_hyper(m, &s, &err) == NN_OK);
}

TEST(sgd_plain_and_l2)
{
	nn_model   *m = unit_model(NN_OPT_SGD, 0.1f);

	/* w = 1 - 0.1 * 0.5 = 0.95; b = 0.2 - 0.1 * 0.3 = 0.17 */
	step(m, 0.5f, 0.3f);
	CHECK(close_enough(m->params[0], 0.95, 1e-6));
	CHECK(close_enough(m->params[1], 0.17, 1e-6));
	nn_model_free(m);

	/* l2 0.01 on the kernel only: g = 0.5 + 0.01 * 1 = 0.51 -> w = 0.949; b as before */
	m = unit_model(NN_OPT_SGD, 0.1f);
	m->spec.l2 = 0.01f;
	step(m, 0.5f, 0.3f);
	CHECK(close_enough(m->params[0], 0.949, 1e-6));
	CHECK(close_enough(m->params[1], 0.17, 1e-6));
	nn_model_free(m);
}

static void
set_momentum(nn_spec *s)
{
	s->momentum = 0.9f;
}

static void
set_nesterov(nn_spec *s)
{
	s->momentum = 0.9f;
	s->nesterov = 1;
}

TEST(sgd_momentum)
{
	nn_model   *m = unit_model(NN_OPT_SGD, 0.1f);

	retune(m, set_momentum);
	/* buf = 0.5, w = 0.95; then buf = 0.9 * 0.5 + 0.5 = 0.95, w = 0.95 - 0.095 = 0.855 */
	step(m, 0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.95, 1e-6));
	step(m, 0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.855, 1e-6));
	nn_model_free(m);
}

TEST(sgd_nesterov)
{
	nn_model   *m = unit_model(NN_OPT_SGD, 0.1f);

	retune(m, set_nesterov);
	/* buf = 0.5, d = 0.5 + 0.45 = 0.95, w = 0.905; buf = 0.95, d = 1.355, w = 0.7695 */
	step(m, 0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.905, 1e-6));
	step(m, 0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.7695, 1e-6));
	nn_model_free(m);
}

TEST(adam_two_steps)
{
	nn_model   *m = unit_model(NN_OPT_ADAM, 0.1f);

	/*
	 * step 1, g = 0.5: m = 0.05, v = 0.00025, step size 0.1 / 0.1 = 1,
	 * denom = sqrt(0.00025 / 0.001) = 0.5, w = 1 - 0.05 / 0.5 = 0.9.
	 */
	step(m, 0.5f, 0.3f);
	CHECK(close_enough(m->params[0], 0.9, 1e-6));
	CHECK(close_enough(m->params[1], 0.1, 1e-6));	/* first Adam step moves by lr */
	CHECK(close_enough(m->opt[0], 0.05, 1e-6));
	CHECK(close_enough(m->opt[2], 0.00025, 1e-6));

	/*
	 * step 2, g = -0.5: m = 0.045 - 0.05 = -0.005, v = 0.00049975,
	 * bc1 = 0.19, bc2 = 0.001999, v / bc2 = 0.25 so denom = 0.5,
	 * w = 0.9 + (0.1 / 0.19) * 0.005 / 0.5 = 0.905263158.
	 */
	step(m, -0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.905263158, 1e-6));
	nn_model_free(m);
}

static void
set_wd(nn_spec *s)
{
	s->weight_decay = 0.1f;
}

TEST(adamw_decoupled_decay)
{
	nn_model   *m = unit_model(NN_OPT_ADAMW, 0.1f);

	retune(m, set_wd);
	/* w = 1 * (1 - 0.1 * 0.1) = 0.99, then the Adam step -0.1: 0.89; bias not decayed: 0.1 */
	step(m, 0.5f, 0.3f);
	CHECK(close_enough(m->params[0], 0.89, 1e-6));
	CHECK(close_enough(m->params[1], 0.1, 1e-6));
	nn_model_free(m);
}

TEST(rmsprop_plain)
{
	nn_model   *m = unit_model(NN_OPT_RMSPROP, 0.01f);

	/* sq = 0.0025, avg = 0.05, w = 1 - 0.01 * 0.5 / 0.05 = 0.9 */
	step(m, 0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.9, 1e-6));
	/* sq = 0.004975, avg = 0.0705337, w = 0.9 - 0.0708881 = 0.8291119 */
	step(m, 0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.8291119, 1e-6));
	nn_model_free(m);
}

TEST(rmsprop_momentum)
{
	nn_model   *m = unit_model(NN_OPT_RMSPROP, 0.01f);

	retune(m, set_momentum);
	/* buf = 0.5 / 0.05 = 10, w = 0.9; buf = 9 + 7.08881 = 16.08881, w = 0.7391119 */
	step(m, 0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.9, 1e-6));
	step(m, 0.5f, 0.0f);
	CHECK(close_enough(m->params[0], 0.7391119, 1e-5));
	nn_model_free(m);
}

static void
set_clip(nn_spec *s)
{
	s->clip_norm = 1.0f;
}

TEST(gradient_clipping)
{
	nn_model   *m = unit_model(NN_OPT_SGD, 1.0f);

	retune(m, set_clip);
	/* grads (3, 4) have norm 5; clipped to (0.6, 0.8): w = 0.4, b = -0.6 */
	step(m, 3.0f, 4.0f);
	CHECK(close_enough(m->params[0], 0.4, 1e-5));
	CHECK(close_enough(m->params[1], -0.6, 1e-5));
	/* below the threshold nothing changes: (0.3, 0.4) norm 0.5 */
	step(m, 0.3f, 0.4f);
	CHECK(close_enough(m->params[0], 0.1, 1e-5));
	nn_model_free(m);
}

TEST(optimizer_detects_nonfinite_weights)
{
	nn_model   *m = unit_model(NN_OPT_SGD, 1.0f);
	nn_error	err;

	m->grads[0] = INFINITY;
	m->grads[1] = 0;
	CHECK(nn_optim_step(m, &err) == NN_DIVERGED);
	CHECK(m->diverged == 1);
	nn_model_free(m);
}
