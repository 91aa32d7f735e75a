/*
 * test_median.c -- the median stopping rule on scripted scores: grace
 * period, minimum number of reference trials, best versus running-average
 * modes, ties, NaN, running trials as references, argument errors.
 */
#include "harness.h"
#include "../../src/search/mop_median.h"

/* Three completed references: running averages per step
 * step 1: .5 .3 .9 -> median .5; step 2: .55 .35 .9 -> .55; step 3: .6 .4 .9 -> .6 */
static void
references(mop_median *m)
{
	static const double s[3][3] = {{0.5, 0.6, 0.7}, {0.3, 0.4, 0.5}, {0.9, 0.9, 0.9}};

	for (int j = 0; j < 3; j++)
	{
		for (int k = 0; k < 3; k++)
			CHECK(mop_median_report(m, j, k + 1, s[j][k], NULL) == 0);
		CHECK(mop_median_complete(m, j) == 0);
	}
}

TEST(median_best_mode_trace)
{
	mop_median *m = mop_median_new(2, 3, 1, MOP_MEDIAN_BEST);
	mop_decision d;
	int32_t		refs;

	references(m);
	CHECK(close_enough(mop_median_value(m, 1, -1, &refs), 0.5, 1e-12) && refs == 3);
	CHECK(close_enough(mop_median_value(m, 2, -1, NULL), 0.55, 1e-12));
	CHECK(close_enough(mop_median_value(m, 3, -1, NULL), 0.6, 1e-12));
	CHECK(close_enough(mop_median_value(m, 9, -1, NULL), 0.6, 1e-12));	/* past their end */
	/* trial 3: step 1 is within the grace period, step 2 is below */
	CHECK(mop_median_report(m, 3, 1, 0.1, &d) == 0);
	CHECK(mop_median_report(m, 3, 2, 0.5, &d) == 1);
	CHECK(d.why == MOP_WHY_MEDIAN && d.trial == 3 && d.from_resource == 2);
	CHECK(d.score == 0.5 && close_enough(d.cutoff, 0.55, 1e-12) && d.rung_size == 3);
	CHECK(strstr(d.reason, "median") != NULL);
	CHECK(mop_median_report(m, 3, 3, 0.9, &d) == MOP_SEARCH_ESTATE);
	/* trial 4: best .6 >= .55 at step 2; at step 3 best .6 equals the median: kept */
	CHECK(mop_median_report(m, 4, 1, 0.2, &d) == 0);
	CHECK(mop_median_report(m, 4, 2, 0.6, &d) == 0);
	CHECK(mop_median_report(m, 4, 3, 0.4, &d) == 0);
	/* out of sequence and bad ids */
	CHECK(mop_median_report(m, 4, 5, 0.4, &d) == MOP_SEARCH_EINVAL);
	CHECK(mop_median_report(m, -1, 1, 0.4, &d) == MOP_SEARCH_EINVAL);
	mop_median_free(m);
}

TEST(median_mean_mode_is_stricter)
{
	mop_median *m = mop_median_new(2, 3, 1, MOP_MEDIAN_MEAN);
	mop_decision d;

	references(m);
	/* the same trial 4: running average .4 < .55 at step 2 */
	CHECK(mop_median_report(m, 4, 1, 0.2, &d) == 0);
	CHECK(mop_median_report(m, 4, 2, 0.6, &d) == 1);
	CHECK(close_enough(d.score, 0.4, 1e-12) && strstr(d.reason, "running average"));
	mop_median_free(m);
}

TEST(median_needs_min_trials)
{
	mop_median *m = mop_median_new(1, 4, 1, MOP_MEDIAN_BEST);
	int32_t		refs;

	references(m);
	/* 3 references, 4 needed: never stops */
	CHECK(mop_median_report(m, 7, 1, -100.0, NULL) == 0);
	CHECK(isnan(mop_median_value(m, 1, 7, &refs)) && refs == 3);
	/* a fourth completes (its own average 0.0): now the rule applies */
	CHECK(mop_median_report(m, 5, 1, 0.0, NULL) == 0);
	CHECK(mop_median_complete(m, 5) == 0);
	CHECK(mop_median_complete(m, 5) == MOP_SEARCH_ESTATE);
	/* step 1 averages .5 .3 .9 .0: median of an even count (.3 + .5) / 2 */
	CHECK(close_enough(mop_median_value(m, 1, 7, NULL), 0.4, 1e-12));
	CHECK(mop_median_report(m, 7, 2, -100.0, NULL) == 1);
	mop_median_free(m);
}

TEST(median_nan_and_running_references)
{
	mop_median *m = mop_median_new(1, 2, 0, MOP_MEDIAN_BEST);
	mop_decision d;

	/* a NaN stops at once and never counts as a reference */
	CHECK(mop_median_report(m, 0, 1, NAN, &d) == 1 && d.why == MOP_WHY_FAILED);
	CHECK(mop_median_report(m, 0, 2, 1.0, &d) == MOP_SEARCH_ESTATE);
	/* only_completed = 0: running trials that reached the step are references */
	CHECK(mop_median_report(m, 1, 1, 0.8, &d) == 0);	/* 0 refs */
	CHECK(mop_median_report(m, 2, 1, 0.6, &d) == 0);	/* 1 ref */
	CHECK(mop_median_report(m, 3, 1, 0.1, &d) == 1);	/* refs .8 .6: median .7 */
	CHECK(close_enough(d.cutoff, 0.7, 1e-12) && d.rung_size == 2);
	/* a stopped (not NaN) trial still counts: at step 1 refs .8 .6 .1 */
	CHECK(close_enough(mop_median_value(m, 1, -1, NULL), 0.6, 1e-12));
	CHECK(mop_median_new(-1, 1, 1, MOP_MEDIAN_BEST) == NULL);
	CHECK(mop_median_new(0, 0, 1, MOP_MEDIAN_BEST) == NULL);
	mop_median_free(m);
}

TEST(median_many_steps)
{
	/* long histories grow the prefix arrays; a steadily worse trial is stopped */
	mop_median *m = mop_median_new(5, 2, 1, MOP_MEDIAN_BEST);
	int			stopped_at = -1;

	for (int j = 0; j < 3; j++)
	{
		for (int k = 1; k <= 100; k++)
			mop_median_report(m, j, k, 1.0 - 1.0 / (k + j), NULL);
		mop_median_complete(m, j);
	}
	for (int k = 1; k <= 100 && stopped_at < 0; k++)
		if (mop_median_report(m, 10, k, 0.5 - 1.0 / k, NULL) == 1)
			stopped_at = k;
	CHECK(stopped_at == 5);
	mop_median_free(m);
}
