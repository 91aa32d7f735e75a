/*
 * test_pbt.c -- PBT decisions: who exploits whom (bottom and top quantiles,
 * NaN never a parent), the exploration rules (x0.8 / x1.2, resampling,
 * choice neighbours, integer rounding, conditional parameters), seeded
 * determinism, asynchronous readiness, lineage and the schedule read-back.
 * Also the shared search-space validation (mop_params.h).
 */
#include "harness.h"
#include "../../src/search/mop_pbt.h"

static const mop_param space3[3] = {
	{"lr", MOP_PARAM_LOGFLOAT, 1e-4, 1.0, 0, -1, 0},
	{"batch", MOP_PARAM_INT, 16, 256, 0, -1, 0},
	{"dropout", MOP_PARAM_FLOAT, 0.0, 0.9, 0, -1, 0},
};

TEST(pbt_sync_bottom_exploits_top)
{
	mop_pbt    *p = mop_pbt_new(space3, 3, 8, NULL, 7);
	double		scores[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	mop_pbt_decision d[8];
	double		before[8][3];

	for (int m = 0; m < 8; m++)
		memcpy(before[m], mop_pbt_values(p, m), sizeof(before[m]));
	/* nq = ceil(8 * 0.25) = 2: members 1 then 0 exploit members 7 or 6 */
	CHECK(mop_pbt_step(p, scores, d, 8) == 2);
	CHECK(d[0].member == 1 && d[0].rank == 7 && d[1].member == 0 && d[1].rank == 8);
	for (int k = 0; k < 2; k++)
	{
		const double *par;

		CHECK(d[k].parent == 7 || d[k].parent == 6);
		CHECK(d[k].n_ranked == 8 && d[k].n_quantile == 2 && d[k].age == 1);
		CHECK(d[k].parent_score == d[k].parent);
		CHECK(memcmp(d[k].old_values, before[d[k].member], sizeof(double) * 3) == 0);
		CHECK(memcmp(d[k].values, mop_pbt_values(p, d[k].member), sizeof(double) * 3) == 0);
		par = before[d[k].parent];
		for (int i = 0; i < 3; i++)
		{
			double		v = d[k].values[i];

			CHECK(v >= space3[i].lo && v <= space3[i].hi);
			if (d[k].how[i] == MOP_PBT_KEPT)
				CHECK(v == par[i]);
			if (d[k].how[i] == MOP_PBT_DOWN)
				CHECK(v == mop_param_clip(&space3[i], par[i] * 0.8));
			if (d[k].how[i] == MOP_PBT_UP)
				CHECK(v == mop_param_clip(&space3[i], par[i] * 1.2));
		}
		CHECK(d[k].values[1] == floor(d[k].values[1]));	/* an integer stays one */
		CHECK(strstr(d[k].reason, "copies member") != NULL);
	}
	/* the others are untouched */
	for (int m = 2; m < 8; m++)
		CHECK(memcmp(before[m], mop_pbt_values(p, m), sizeof(double) * 3) == 0);
	mop_pbt_free(p);
}

TEST(pbt_nan_never_parent_and_always_bottom)
{
	mop_pbt_opts o = {0.5, 0.25, 0.8, 1.2};
	mop_pbt    *p = mop_pbt_new(space3, 3, 6, &o, 3);
	double		scores[6] = {NAN, 5, NAN, 4, NAN, 1};
	mop_pbt_decision d[6];
	int32_t		n;

	/* nq = 3: the NaN members 0, 2, 4 are the bottom three; parents are 1, 3, 5 */
	for (int step = 0; step < 20; step++)
	{
		n = mop_pbt_step(p, scores, d, 6);
		CHECK(n == 3);
		for (int k = 0; k < n; k++)
		{
			CHECK(d[k].member % 2 == 0);
			CHECK(d[k].parent % 2 == 1);
			CHECK(isnan(d[k].score));
		}
	}
	/* all NaN: nobody to copy from */
	{
		double		all_nan[6] = {NAN, NAN, NAN, NAN, NAN, NAN};

		CHECK(mop_pbt_step(p, all_nan, d, 6) == 0);
	}
	mop_pbt_history(p, &n);
	CHECK(n == 60);
	mop_pbt_free(p);
}

TEST(pbt_explore_rules)
{
	mop_pbt_opts never = {0.25, 0.0, 0.8, 1.2},
				always = {0.25, 1.0, 0.8, 1.2};
	static const mop_param cs[3] = {
		{"opt", MOP_PARAM_CHOICE, 0, 0, 2, -1, 0},	/* 0 sgd, 1 adam */
		{"momentum", MOP_PARAM_FLOAT, 0.0, 0.99, 0, 0, 1},	/* sgd only */
		{"width", MOP_PARAM_CHOICE, 0, 0, 5, -1, 0},
	};
	double		scores[4] = {0, 1, 2, 3};
	mop_pbt_decision d[4];
	mop_pbt    *p = mop_pbt_new(space3, 3, 4, &never, 11);
	int			saw_act = 0,
				saw_inact = 0;

	/* no resampling: every value is the parent's x0.8 or x1.2 */
	for (int step = 0; step < 10; step++)
	{
		CHECK(mop_pbt_step(p, scores, d, 4) == 1);
		for (int i = 0; i < 3; i++)
			CHECK(d[0].how[i] != MOP_PBT_RESAMPLED);
	}
	mop_pbt_free(p);
	/* always resampling */
	p = mop_pbt_new(space3, 3, 4, &always, 11);
	CHECK(mop_pbt_step(p, scores, d, 4) == 1);
	for (int i = 0; i < 3; i++)
		CHECK(d[0].how[i] == MOP_PBT_RESAMPLED);
	mop_pbt_free(p);
	/* choices move to a neighbour; momentum is NaN exactly when opt is adam */
	p = mop_pbt_new(cs, 3, 4, &never, 5);
	for (int step = 0; step < 30; step++)
	{
		CHECK(mop_pbt_step(p, scores, d, 4) == 1);
		for (int m = 0; m < 4; m++)
		{
			const double *v = mop_pbt_values(p, m);

			CHECK((v[0] == 0) == !isnan(v[1]));
			saw_act |= v[0] == 0;
			saw_inact |= v[0] == 1;
		}
		CHECK(fabs(d[0].values[2] - mop_pbt_values(p, d[0].parent)[2]) <= 1.0);
		if (d[0].how[2] == MOP_PBT_UP)
			CHECK(d[0].values[2] == mop_pbt_values(p, d[0].parent)[2] + 1);
	}
	CHECK(saw_act && saw_inact);
	mop_pbt_free(p);
}

/* Run a fixed scenario and return a hash of its decisions. */
static uint64_t
scenario(uint64_t seed)
{
	mop_pbt    *p = mop_pbt_new(space3, 3, 10, NULL, seed);
	uint64_t	h = 0;
	int32_t		n;
	const mop_pbt_decision *hist;

	for (int step = 0; step < 15; step++)
	{
		double		scores[10];

		for (int m = 0; m < 10; m++)
			scores[m] = mop_pbt_values(p, m)[2] - fabs(log10(mop_pbt_values(p, m)[0]) + 2);
		mop_pbt_step(p, scores, NULL, 0);
	}
	hist = mop_pbt_history(p, &n);
	for (int32_t k = 0; k < n; k++)
	{
		uint64_t	bits;

		memcpy(&bits, &hist[k].values[0], sizeof(bits));
		h = mop_rng_mix(h ^ bits ^ ((uint64_t) hist[k].parent << 32) ^ hist[k].member);
	}
	mop_pbt_free(p);
	return h;
}

TEST(pbt_seeded_deterministic)
{
	CHECK(scenario(42) == scenario(42));
	CHECK(scenario(42) != scenario(43));
}

TEST(pbt_async_ready)
{
	mop_pbt    *p = mop_pbt_new(space3, 3, 4, NULL, 1);
	mop_pbt_decision d;

	/* alone: nothing to compare with */
	CHECK(mop_pbt_ready(p, 0, 0.1, &d) == 0);
	/* two ranked: nq = 1; member 1 is better, so it continues */
	CHECK(mop_pbt_ready(p, 1, 0.9, &d) == 0);
	/* member 0 again, still the worse of two: copies member 1 */
	CHECK(mop_pbt_ready(p, 0, 0.2, &d) == 1);
	CHECK(d.member == 0 && d.parent == 1 && d.n_ranked == 2 && d.n_quantile == 1);
	CHECK(d.age == 1 && mop_pbt_age(p, 0) == 1);
	/* four ranked, nq = 1: member 3 at the bottom copies the best, member 1 */
	CHECK(mop_pbt_ready(p, 2, 0.5, &d) == 0);
	CHECK(mop_pbt_ready(p, 3, 0.05, &d) == 1 && d.parent == 1 && d.rank == 4);
	CHECK(mop_pbt_ready(p, 9, 0.05, &d) == MOP_SEARCH_EINVAL);
	mop_pbt_free(p);
}

TEST(pbt_lineage_schedule)
{
	mop_pbt    *p = mop_pbt_new(space3, 3, 4, NULL, 9);
	double		s1[4] = {0, 1, 2, 3},
				s2[4] = {5, 1, 2, 3};
	mop_pbt_decision d[4];
	mop_pbt_segment seg[8];
	double		init3[3];

	memcpy(init3, mop_pbt_values(p, 3), sizeof(init3));
	CHECK(mop_pbt_step(p, s1, d, 4) == 1 && d[0].member == 0 && d[0].parent == 3);
	CHECK(mop_pbt_step(p, s2, d, 4) == 1 && d[0].member == 1 && d[0].parent == 0);
	CHECK(d[0].age == 2 && mop_pbt_age(p, 1) == 2);
	/* member 1's weights: member 3's first interval, member 0's second, its own since */
	CHECK(mop_pbt_schedule(p, 1, seg, 8) == 3);
	CHECK(seg[0].member == 3 && seg[0].from == 0 && memcmp(seg[0].values, init3, sizeof(init3)) == 0);
	CHECK(seg[1].member == 0 && seg[1].from == 1);
	CHECK(memcmp(seg[1].values, mop_pbt_history(p, NULL)[0].values, sizeof(double) * 3) == 0);
	CHECK(seg[2].member == 1 && seg[2].from == 2);
	CHECK(memcmp(seg[2].values, mop_pbt_values(p, 1), sizeof(double) * 3) == 0);
	/* a member that never exploited: one segment */
	CHECK(mop_pbt_schedule(p, 2, seg, 8) == 1 && seg[0].member == 2 && seg[0].from == 0);
	CHECK(mop_pbt_schedule(p, 1, NULL, 0) == 3);
	/* set only before training */
	CHECK(mop_pbt_set(p, 2, init3) == MOP_SEARCH_ESTATE);
	mop_pbt_free(p);
}

TEST(params_check_names_the_parameter)
{
	char		err[200];
	mop_param	bad[2] = {
		{"lr", MOP_PARAM_LOGFLOAT, 0.0, 1.0, 0, -1, 0},
		{"x", MOP_PARAM_FLOAT, 0, 1, 0, -1, 0},
	};
	mop_param	cond[2] = {
		{"momentum", MOP_PARAM_FLOAT, 0, 1, 0, 1, 1},
		{"opt", MOP_PARAM_CHOICE, 0, 0, 2, -1, 0},
	};
	mop_param	ints[1] = {{"layers", MOP_PARAM_INT, 1.5, 4, 0, -1, 0}};
	mop_param	dup[2] = {
		{"a", MOP_PARAM_FLOAT, 0, 1, 0, -1, 0},
		{"a", MOP_PARAM_FLOAT, 0, 1, 0, -1, 0},
	};

	CHECK(mop_params_check(space3, 3, err, sizeof(err)) == 0);
	CHECK(mop_params_check(bad, 2, err, sizeof(err)) == MOP_SEARCH_EINVAL);
	CHECK(strstr(err, "\"lr\"") && strstr(err, "log"));
	CHECK(mop_params_check(cond, 2, err, sizeof(err)) == MOP_SEARCH_EINVAL);
	CHECK(strstr(err, "\"momentum\"") && strstr(err, "earlier"));
	CHECK(mop_params_check(ints, 1, err, sizeof(err)) == MOP_SEARCH_EINVAL);
	CHECK(strstr(err, "\"layers\""));
	CHECK(mop_params_check(dup, 2, err, sizeof(err)) == MOP_SEARCH_EINVAL);
	CHECK(strstr(err, "twice"));
	CHECK(mop_params_check(space3, 0, NULL, 0) == MOP_SEARCH_EINVAL);
	CHECK(mop_pbt_new(bad, 2, 4, NULL, 1) == NULL);
	CHECK(mop_pbt_new(space3, 3, 1, NULL, 1) == NULL);
	{
		mop_pbt_opts o = {0.7, 0.25, 0.8, 1.2};

		CHECK(mop_pbt_new(space3, 3, 4, &o, 1) == NULL);
	}
}

TEST(params_prior_sampling)
{
	mop_rng		r;
	double		x[3];
	int			lo_half = 0;

	mop_rng_seed(&r, 1);
	for (int k = 0; k < 2000; k++)
	{
		mop_params_sample(space3, 3, &r, x);
		CHECK(x[0] >= 1e-4 && x[0] <= 1.0);
		CHECK(x[1] >= 16 && x[1] <= 256 && x[1] == floor(x[1]));
		CHECK(x[2] >= 0 && x[2] <= 0.9);
		lo_half += x[0] < 1e-2;		/* log-uniform: half below the geometric middle */
	}
	CHECK(lo_half > 900 && lo_half < 1100);
}
