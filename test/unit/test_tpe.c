/*
 * test_tpe.c -- TPE: the good/bad split on known data, candidate ranking
 * on a 1-D toy where the good region is known, choices, conditional
 * parameters, batches with the constant liar, determinism, and convergence
 * on a toy quadratic against random search with the same budget and seeds.
 */
#include "harness.h"
#include "../../src/search/mop_tpe.h"

TEST(tpe_split_known_data)
{
	double		s[10] = {5, 1, NAN, 3, 9, 7, 2, 8, 4, 6};
	double		ties[6] = {1, 2, 2, 2, 0, NAN};
	double		nans[4] = {NAN, 1, NAN, NAN};
	int32_t		order[10];

	/* ceil(0.25 * 10) = 3: scores 9, 8, 7 are good */
	CHECK(mop_tpe_split(s, 10, 0.25, 25, order) == 3);
	CHECK(order[0] == 4 && order[1] == 7 && order[2] == 5);
	CHECK(order[3] == 9 && order[8] == 1 && order[9] == 2);	/* NaN last */
	/* the cap, and Optuna's gamma 0.1: ceil(1.0) = 1, ceil(0.1 * 30) = 3 exactly */
	CHECK(mop_tpe_split(s, 10, 0.25, 2, order) == 2);
	CHECK(mop_tpe_split(s, 10, 0.1, 25, order) == 1);
	{
		double		s30[30];
		int32_t		o30[30];

		for (int i = 0; i < 30; i++)
			s30[i] = i;
		CHECK(mop_tpe_split(s30, 30, 0.1, 25, o30) == 3);
		CHECK(o30[0] == 29 && o30[2] == 27);
	}
	/* ties by index; NaN never good */
	CHECK(mop_tpe_split(ties, 6, 0.5, 25, order) == 3);
	CHECK(order[0] == 1 && order[1] == 2 && order[2] == 3 && order[5] == 5);
	CHECK(mop_tpe_split(nans, 4, 1.0, 25, order) == 1 && order[0] == 1);
	CHECK(mop_tpe_split(s, 10, 0.0, 25, order) == MOP_SEARCH_EINVAL);
}

static const mop_param one_d[1] = {{"x", MOP_PARAM_FLOAT, 0.0, 1.0, 0, -1, 0}};

TEST(tpe_ranks_candidates_toward_good_region)
{
	mop_tpe_opts o;
	mop_tpe    *t;
	double		cand[5] = {0.3, 0.05, 0.5, 0.8, 0.95},
				r[5],
				x;
	int			near = 0;

	mop_tpe_default_opts(&o);
	o.gamma = 0.25;
	t = mop_tpe_new(one_d, 1, &o, 1);
	/* 40 observations on a grid; score peaks at x = 0.3 */
	for (int i = 0; i < 40; i++)
	{
		double		v = (i + 0.5) / 40;

		CHECK(mop_tpe_add(t, &v, -fabs(v - 0.3)) == i);
	}
	CHECK(mop_tpe_log_ratio(t, 0, cand, 5, r) == 0);
	for (int j = 1; j < 5; j++)
		CHECKF(r[0] > r[j], "log l/g at 0.3 = %g, at %g = %g", r[0], cand[j], r[j]);
	/* proposals land in the good region */
	for (int k = 0; k < 20; k++)
	{
		int32_t		id = mop_tpe_ask(t, &x);

		CHECK(id == 40 + k);
		near += fabs(x - 0.3) < 0.15;
		CHECK(mop_tpe_tell(t, id, -fabs(x - 0.3)) == 0);
	}
	CHECKF(near >= 17, "%d of 20 proposals near 0.3", near);
	CHECK(mop_tpe_tell(t, 45, 1.0) == MOP_SEARCH_ESTATE);
	CHECK(mop_tpe_tell(t, 999, 1.0) == MOP_SEARCH_EINVAL);
	mop_tpe_free(t);
}

TEST(tpe_choices_and_conditions)
{
	static const mop_param sp[3] = {
		{"opt", MOP_PARAM_CHOICE, 0, 0, 3, -1, 0},
		{"momentum", MOP_PARAM_FLOAT, 0.0, 0.99, 0, 0, 1},	/* choice 0 only */
		{"layers", MOP_PARAM_INT, 1, 8, 0, -1, 0},
	};
	mop_tpe    *t = mop_tpe_new(sp, 3, NULL, 5);
	double		x[3];
	int			two = 0;

	/* choice 2 with 6 layers is good; the rest bad */
	for (int k = 0; k < 60; k++)
	{
		int32_t		id = mop_tpe_ask(t, x);
		double		s = (x[0] == 2 ? 1.0 : 0.0) - 0.1 * fabs(x[2] - 6);

		CHECK(x[0] >= 0 && x[0] <= 2 && x[0] == floor(x[0]));
		CHECK((x[0] == 0) == !isnan(x[1]));
		CHECK(x[2] >= 1 && x[2] <= 8 && x[2] == floor(x[2]));
		if (k >= 30)
			two += x[0] == 2;
		mop_tpe_tell(t, id, s);
	}
	CHECKF(two >= 24, "choice 2 in %d of the last 30", two);
	mop_tpe_free(t);
}

TEST(tpe_batch_constant_liar_and_determinism)
{
	double		xa[8],
				xb[8];
	int32_t		ids[8];

	for (int rep = 0; rep < 2; rep++)
	{
		mop_tpe    *t = mop_tpe_new(one_d, 1, NULL, 77);
		double	   *xs = rep ? xb : xa;

		for (int i = 0; i < 20; i++)
		{
			double		v = (i + 0.5) / 20;

			mop_tpe_add(t, &v, -fabs(v - 0.7));
		}
		CHECK(mop_tpe_propose(t, 8, xs, ids) == 8);
		CHECK(ids[0] == 20 && ids[7] == 27);
		/* pending trials are lies in the bad group: no two proposals coincide */
		for (int a = 0; a < 8; a++)
			for (int b = a + 1; b < 8; b++)
				CHECK(xs[a] != xs[b]);
		CHECK(mop_tpe_n_complete(t) == 20);
		mop_tpe_free(t);
	}
	CHECK(memcmp(xa, xb, sizeof(xa)) == 0);
}

/* A toy quadratic on a 3-parameter space; higher is better, optimum 0. */
static double
quadratic(const double *x)
{
	double		a = x[0] - 0.37,
				b = log10(x[1]) + 2.5,
				c = (x[2] - 11) / 20;

	return -(a * a + 0.25 * b * b + c * c);
}

static const mop_param q3[3] = {
	{"a", MOP_PARAM_FLOAT, -2.0, 2.0, 0, -1, 0},
	{"lr", MOP_PARAM_LOGFLOAT, 1e-5, 1.0, 0, -1, 0},
	{"units", MOP_PARAM_INT, 1, 64, 0, -1, 0},
};

TEST(tpe_beats_random_search_on_quadratic)
{
	int			wins = 0;
	double		sum_tpe = 0,
				sum_rand = 0;

	for (uint64_t seed = 1; seed <= 5; seed++)
	{
		mop_tpe    *t = mop_tpe_new(q3, 3, NULL, seed);
		mop_rng		r;
		double		x[3],
					best_t = -INFINITY,
					best_r = -INFINITY;

		mop_rng_seed(&r, seed);
		for (int k = 0; k < 80; k++)
		{
			int32_t		id = mop_tpe_ask(t, x);
			double		s = quadratic(x);

			mop_tpe_tell(t, id, s);
			if (s > best_t)
				best_t = s;
			mop_params_sample(q3, 3, &r, x);
			s = quadratic(x);
			if (s > best_r)
				best_r = s;
		}
		wins += best_t > best_r;
		sum_tpe += best_t;
		sum_rand += best_r;
		mop_tpe_free(t);
	}
	CHECKF(wins >= 4 && sum_tpe > sum_rand, "TPE wins %d of 5; mean best %g vs random %g",
		   wins, sum_tpe / 5, sum_rand / 5);
}

TEST(tpe_failed_trials_and_arguments)
{
	mop_tpe_opts o;
	mop_tpe    *t;
	double		x;
	int			low = 0;

	mop_tpe_default_opts(&o);
	o.n_startup = 5;
	t = mop_tpe_new(one_d, 1, &o, 3);
	/* everything above 0.5 fails (NaN): NaN ranks bad, proposals avoid it */
	for (int k = 0; k < 60; k++)
	{
		int32_t		id = mop_tpe_ask(t, &x);

		mop_tpe_tell(t, id, x > 0.5 ? NAN : -fabs(x - 0.2));
		if (k >= 30)
			low += x <= 0.5;
	}
	CHECKF(low >= 25, "%d of the last 30 below 0.5", low);
	mop_tpe_free(t);
	o.gamma = 0;
	CHECK(mop_tpe_new(one_d, 1, &o, 3) == NULL);
	CHECK(mop_tpe_new(one_d, 0, NULL, 3) == NULL);
}
