/*
 * test_hyperband.c -- the Hyperband plan (integer formulas, the paper's
 * Table 1 for R = 81, eta = 3) and the successive-halving driver: an exact
 * trace on scripted scores, concurrent brackets under simulated workers,
 * NaN handling and decision records.
 */
#include "harness.h"
#include "../../src/search/mop_hyperband.h"

/* Compare the plan of (R, eta) with rows {bracket, round, configs, resource}. */
static void
check_plan(int32_t R, int32_t eta, const int32_t (*rows)[4], int32_t n)
{
	mop_hb_round out[64];
	int32_t		got = mop_hyperband_plan(R, eta, out, 64);

	CHECKF(got == n, "(%d,%d): %d rows, expected %d", R, eta, got, n);
	for (int32_t k = 0; k < n && k < got; k++)
		CHECKF(out[k].bracket == rows[k][0] && out[k].round == rows[k][1] &&
			   out[k].configs == rows[k][2] && out[k].resource == rows[k][3],
			   "(%d,%d) row %d: got s=%d i=%d %dx%d, expected s=%d i=%d %dx%d",
			   R, eta, k, out[k].bracket, out[k].round, out[k].configs, out[k].resource,
			   rows[k][0], rows[k][1], rows[k][2], rows[k][3]);
}

TEST(hb_plan_81_3_matches_paper)
{
	static const int32_t rows[][4] = {
		{4, 0, 81, 1}, {4, 1, 27, 3}, {4, 2, 9, 9}, {4, 3, 3, 27}, {4, 4, 1, 81},
		{3, 0, 34, 3}, {3, 1, 11, 9}, {3, 2, 3, 27}, {3, 3, 1, 81},
		{2, 0, 15, 9}, {2, 1, 5, 27}, {2, 2, 1, 81},
		{1, 0, 8, 27}, {1, 1, 2, 81},
		{0, 0, 5, 81}};

	CHECK(mop_hyperband_smax(81, 3) == 4);
	check_plan(81, 3, rows, 15);
}

TEST(hb_plan_other_R_eta)
{
	static const int32_t r27[][4] = {
		{3, 0, 27, 1}, {3, 1, 9, 3}, {3, 2, 3, 9}, {3, 3, 1, 27},
		{2, 0, 12, 3}, {2, 1, 4, 9}, {2, 2, 1, 27},
		{1, 0, 6, 9}, {1, 1, 2, 27},
		{0, 0, 4, 27}};
	static const int32_t r9[][4] = {
		{2, 0, 9, 1}, {2, 1, 3, 3}, {2, 2, 1, 9},
		{1, 0, 5, 3}, {1, 1, 1, 9},
		{0, 0, 3, 9}};
	/* R not a power of eta: r_i = floor(100 / 3^(s-i)) */
	static const int32_t r100[][4] = {
		{4, 0, 81, 1}, {4, 1, 27, 3}, {4, 2, 9, 11}, {4, 3, 3, 33}, {4, 4, 1, 100},
		{3, 0, 34, 3}, {3, 1, 11, 11}, {3, 2, 3, 33}, {3, 3, 1, 100},
		{2, 0, 15, 11}, {2, 1, 5, 33}, {2, 2, 1, 100},
		{1, 0, 8, 33}, {1, 1, 2, 100},
		{0, 0, 5, 100}};
	static const int32_t r16[][4] = {
		{4, 0, 16, 1}, {4, 1, 8, 2}, {4, 2, 4, 4}, {4, 3, 2, 8}, {4, 4, 1, 16},
		{3, 0, 10, 2}, {3, 1, 5, 4}, {3, 2, 2, 8}, {3, 3, 1, 16},
		{2, 0, 7, 4}, {2, 1, 3, 8}, {2, 2, 1, 16},
		{1, 0, 5, 8}, {1, 1, 2, 16},
		{0, 0, 5, 16}};
	static const int32_t r1[][4] = {{0, 0, 1, 1}};
	/* just below a power: s_max = 3, not 4 */
	static const int32_t r80[][4] = {
		{3, 0, 27, 2}, {3, 1, 9, 8}, {3, 2, 3, 26}, {3, 3, 1, 80},
		{2, 0, 12, 8}, {2, 1, 4, 26}, {2, 2, 1, 80},
		{1, 0, 6, 26}, {1, 1, 2, 80},
		{0, 0, 4, 80}};

	check_plan(27, 3, r27, 10);
	check_plan(9, 3, r9, 6);
	check_plan(100, 3, r100, 15);
	check_plan(16, 2, r16, 15);
	check_plan(1, 3, r1, 1);
	check_plan(80, 3, r80, 10);
	CHECK(mop_hyperband_smax(80, 3) == 3);
	CHECK(mop_hyperband_smax(243, 3) == 5);
	CHECK(mop_hyperband_smax(242, 3) == 4);
	CHECK(mop_hyperband_smax(2, 3) == 0);
	CHECK(mop_hyperband_smax(1024, 2) == 10);
	CHECK(mop_hyperband_smax(1023, 2) == 9);
}

TEST(hb_plan_errors_and_sizes)
{
	mop_hb_round out[4];

	CHECK(mop_hyperband_plan(0, 3, out, 4) == MOP_SEARCH_EINVAL);
	CHECK(mop_hyperband_plan(-5, 3, out, 4) == MOP_SEARCH_EINVAL);
	CHECK(mop_hyperband_plan(81, 1, out, 4) == MOP_SEARCH_EINVAL);
	CHECK(mop_hyperband_plan(81, 0, out, 4) == MOP_SEARCH_EINVAL);
	CHECK(mop_hyperband_plan(81, 3, NULL, 4) == MOP_SEARCH_EINVAL);
	CHECK(mop_hyperband_smax(0, 2) == MOP_SEARCH_EINVAL);
	CHECK(mop_hb_new(81, 1, 0) == NULL);
	/* sizing call, and a short buffer only gets cap rows */
	CHECK(mop_hyperband_plan(81, 3, NULL, 0) == 15);
	CHECK(mop_hyperband_plan(81, 3, out, 4) == 15);
	CHECK(out[3].bracket == 4 && out[3].round == 3 && out[3].configs == 3);
	/* the largest R: no overflow, n_0 = eta^s_max, r_s = R */
	{
		int32_t		n = mop_hyperband_plan(INT32_MAX, 2, NULL, 0);
		mop_hb_round *all = malloc(sizeof(mop_hb_round) * n);

		CHECK(n == 31 * 32 / 2);
		CHECK(mop_hyperband_plan(INT32_MAX, 2, all, n) == n);
		CHECK(all[0].bracket == 30 && all[0].configs == 1 << 30 && all[0].resource == 1);
		for (int32_t k = 0; k < n; k++)
		{
			CHECK(all[k].configs >= 1 && all[k].resource >= 1);
			if (all[k].round == all[k].bracket)
				CHECK(all[k].resource == INT32_MAX);
		}
		CHECK(all[n - 1].configs == 31);
		free(all);
	}
	/* epochs of the whole plan, paper's (81, 3) */
	CHECK(mop_hyperband_cost(81, 3, 1) == 1581);
	CHECK(mop_hyperband_cost(81, 3, 0) == 1902);
	CHECK(mop_hyperband_cost(1, 2, 1) == 1);
}

/* Scripted score: trial 4 best, then 3 and 5 (tie: 3 first), trial 2 NaN. */
static double
script(int32_t t, int32_t r)
{
	if (t == 2)
		return NAN;
	return -fabs((double) t - 4.0);
}

/* Append an action to a trace string. */
static void
trace_add(char *buf, size_t len, const mop_action *a)
{
	size_t		n = strlen(buf);

	if (a->kind == MOP_ACT_NEW)
		snprintf(buf + n, len - n, "N%db%d@%d ", a->trial, a->bracket, a->resource);
	else if (a->kind == MOP_ACT_CONTINUE)
		snprintf(buf + n, len - n, "C%d@%d ", a->trial, a->resource);
	else
		snprintf(buf + n, len - n, "%c%d ", a->d.why == MOP_WHY_FINISHED ? 'D' :
				 a->d.why == MOP_WHY_FAILED ? 'F' : 'S', a->trial);
}

TEST(hb_trace_sequential_9_3)
{
	mop_hb	   *hb = mop_hb_new(9, 3, 0);
	char		trace[2048] = "";
	mop_action	a;
	mop_poll	p;
	int			steps = 0;
	int32_t		best,
				best_r;
	double		best_s;
	static const char *expect =
		"N0b2@1 N1b2@1 N2b2@1 N3b2@1 N4b2@1 N5b2@1 N6b2@1 N7b2@1 N8b2@1 "
		"C4@3 C3@3 C5@3 S6 S1 S7 S0 S8 F2 C4@9 S3 S5 D4 "
		"N9b1@3 N10b1@3 N11b1@3 N12b1@3 N13b1@3 C9@9 S10 S11 S12 S13 D9 "
		"N14b0@9 N15b0@9 N16b0@9 D14 D15 D16 ";

	/* one worker: every result is reported before the next question */
	while ((p = mop_hb_next(hb, &a)) == MOP_POLL_ACTION && steps++ < 200)
	{
		trace_add(trace, sizeof(trace), &a);
		if (a.kind != MOP_ACT_STOP)
			CHECK(mop_hb_report(hb, a.trial, a.resource, script(a.trial, a.resource)) == 0);
	}
	CHECK(p == MOP_POLL_DONE);
	CHECKF(strcmp(trace, expect) == 0, "trace\n  %s\nexpected\n  %s", trace, expect);
	CHECK(mop_hb_n_trials(hb) == 17);
	CHECK(mop_hb_best(hb, &best, &best_s, &best_r) == 0);
	CHECK(best == 4 && best_s == 0.0 && best_r == 9);
	mop_hb_free(hb);
}

TEST(hb_decision_records)
{
	mop_hb	   *hb = mop_hb_new(9, 3, 1);
	mop_action	a;
	mop_hb_trial_info ti;
	int			seen_promote = 0,
				seen_cut = 0,
				seen_fail = 0;

	for (int i = 0; i < 9; i++)
	{
		CHECK(mop_hb_next(hb, &a) == MOP_POLL_ACTION);
		CHECK(a.kind == MOP_ACT_NEW && a.trial == i && a.resource == 1 && a.bracket == 2);
		CHECK(a.d.why == MOP_WHY_START && a.d.rung == 0 && a.d.rung_size == 9);
	}
	/* round 0 is still waiting; max_brackets 1: no other bracket begins */
	CHECK(mop_hb_next(hb, &a) == MOP_POLL_WAIT);
	/* intermediate, unknown and repeated results */
	CHECK(mop_hb_report(hb, 99, 1, 1.0) == MOP_SEARCH_ESTATE);
	for (int i = 8; i >= 0; i--)	/* any arrival order gives the same decisions */
		CHECK(mop_hb_report(hb, i, 1, script(i, 1)) == 0);
	CHECK(mop_hb_report(hb, 0, 1, 5.0) == 1);
	CHECK(mop_hb_trial(hb, 4, &ti) == 0);
	CHECK(ti.state == MOP_TRIAL_RUNNING && ti.round == 1 && ti.target == 3);
	CHECK(mop_hb_report(hb, 4, 2, 0.5) == 1);	/* intermediate: ignored */
	while (mop_hb_next(hb, &a) == MOP_POLL_ACTION)
	{
		CHECK(a.d.bracket == 2 && a.d.rung == 0 && a.d.rung_size == 9 && a.d.keep == 3);
		CHECK(a.d.cutoff == -1.0);
		if (a.trial == 5)
		{
			seen_promote = 1;
			CHECK(a.kind == MOP_ACT_CONTINUE && a.d.why == MOP_WHY_PROMOTE);
			CHECK(a.d.rank == 3 && a.d.score == -1.0);
			CHECK(a.d.from_resource == 1 && a.d.to_resource == 3);
			CHECK(strstr(a.d.reason, "rank 3 of 9") != NULL);
		}
		if (a.trial == 6)
		{
			seen_cut = 1;
			CHECK(a.kind == MOP_ACT_STOP && a.d.why == MOP_WHY_CUT && a.d.rank == 4);
		}
		if (a.trial == 2)
		{
			seen_fail = 1;
			CHECK(a.kind == MOP_ACT_STOP && a.d.why == MOP_WHY_FAILED && a.d.rank == 9);
		}
	}
	CHECK(seen_promote && seen_cut && seen_fail);
	CHECK(mop_hb_trial(hb, 2, &ti) == 0 && ti.state == MOP_TRIAL_FAILED);
	CHECK(mop_hb_trial(hb, 6, &ti) == 0 && ti.state == MOP_TRIAL_STOPPED);
	CHECK(strcmp(mop_why_name(MOP_WHY_PROMOTE), "promote") == 0);
	mop_hb_free(hb);
}

TEST(hb_nan_never_promoted)
{
	mop_hb	   *hb = mop_hb_new(9, 3, 1);
	mop_action	a;
	int			n_cont = 0;

	/* bracket 2: only trials 0 and 1 are finite, 3 would be kept */
	for (int i = 0; i < 9; i++)
		CHECK(mop_hb_next(hb, &a) == MOP_POLL_ACTION);
	for (int i = 0; i < 9; i++)
		/* a NaN counts at once, even before the target resource */
		mop_hb_report(hb, i, i < 2 ? 1 : 0, i < 2 ? (double) i : NAN);
	while (mop_hb_next(hb, &a) == MOP_POLL_ACTION && a.d.bracket == 2 && a.d.rung == 0)
	{
		if (a.kind == MOP_ACT_CONTINUE)
		{
			n_cont++;
			CHECK(a.trial == 1 || a.trial == 0);
			CHECK(a.d.keep == 2);
		}
		else
			CHECK(a.trial >= 2 && a.d.why == MOP_WHY_FAILED);
	}
	CHECK(n_cont == 2);
	mop_hb_free(hb);
}

/* Simulate W workers on (R, eta): check the plan is carried out exactly. */
static void
simulate(int32_t R, int32_t eta, int W, int32_t max_brackets)
{
	mop_hb	   *hb = mop_hb_new(R, eta, max_brackets);
	int32_t		nrows = mop_hyperband_plan(R, eta, NULL, 0);
	mop_hb_round *plan = malloc(sizeof(mop_hb_round) * nrows);
	int32_t		count[32][32] = {{0}};	/* [s][round] trials trained */
	int32_t    *run = malloc(sizeof(int32_t) * W),
			   *run_r = malloc(sizeof(int32_t) * W),
			   *last_r = calloc(100000, sizeof(int32_t));
	int64_t		epochs = 0;
	int			n_run = 0,
				done = 0,
				guard = 0;
	uint64_t	h = 12345;

	mop_hyperband_plan(R, eta, plan, nrows);
	while (!done && guard++ < 1000000)
	{
		mop_action	a;
		mop_poll	p;

		/* fill idle workers */
		while (n_run < W && (p = mop_hb_next(hb, &a)) == MOP_POLL_ACTION)
		{
			if (a.kind == MOP_ACT_STOP)
				continue;
			CHECK(a.resource > last_r[a.trial]);
			epochs += a.resource - last_r[a.trial];
			last_r[a.trial] = a.resource;
			for (int32_t k = 0; k < nrows; k++)
				if (plan[k].bracket == a.bracket && plan[k].resource == a.resource)
					count[a.bracket][plan[k].round]++;
			run[n_run] = a.trial;
			run_r[n_run++] = a.resource;
		}
		if (n_run == 0)
		{
			p = mop_hb_next(hb, &a);
			CHECK(p == MOP_POLL_DONE);
			done = 1;
			break;
		}
		/* a pseudo-random running trial finishes; score from a hash */
		{
			int			j;
			double		score;

			h = h * 6364136223846793005ULL + 1442695040888963407ULL;
			j = (int) ((h >> 33) % n_run);
			score = (double) ((run[j] * 2654435761u) % 1000) + 0.001 * run_r[j];
			CHECK(mop_hb_report(hb, run[j], run_r[j], score) == 0);
			run[j] = run[--n_run];
			run_r[j] = run_r[n_run];
		}
	}
	CHECK(done);
	for (int32_t k = 0; k < nrows; k++)
		CHECKF(count[plan[k].bracket][plan[k].round] == plan[k].configs,
			   "(%d,%d) W=%d: bracket %d round %d trained %d, plan %d", R, eta, W,
			   plan[k].bracket, plan[k].round, count[plan[k].bracket][plan[k].round],
			   plan[k].configs);
	CHECK(epochs == mop_hyperband_cost(R, eta, 1));
	free(plan);
	free(run);
	free(run_r);
	free(last_r);
	mop_hb_free(hb);
}

TEST(hb_concurrent_brackets_follow_plan)
{
	simulate(81, 3, 4, 0);
	simulate(81, 3, 7, 2);
	simulate(16, 2, 3, 0);
	simulate(100, 3, 1, 0);
	simulate(1, 3, 2, 0);
}

TEST(hb_brackets_run_concurrently)
{
	mop_hb	   *hb = mop_hb_new(9, 3, 0);
	mop_action	a;
	int			n = 0;

	/* nothing reported: every bracket's round 0 is handed out, then WAIT */
	while (mop_hb_next(hb, &a) == MOP_POLL_ACTION)
	{
		CHECK(a.kind == MOP_ACT_NEW);
		CHECK(a.bracket == (n < 9 ? 2 : n < 14 ? 1 : 0));
		n++;
	}
	CHECK(n == 9 + 5 + 3);
	CHECK(mop_hb_next(hb, &a) == MOP_POLL_WAIT);
	mop_hb_free(hb);
}

/* One logged call: a next() (kind -1 if it answered WAIT/DONE) or a report. */
typedef struct logged
{
	int			is_report;
	int32_t		trial,
				resource;
	double		score;
} logged;

TEST(hb_resume_by_replay)
{
	/*
	 * Two workers; the run is interrupted after 40 calls.  A fresh driver fed
	 * the logged calls answers the same actions, and from there on the two
	 * drivers agree on everything.
	 */
	mop_hb	   *a = mop_hb_new(27, 3, 0),
			   *b = mop_hb_new(27, 3, 0);
	logged		log[64];
	int32_t		run[2];
	int			n_run = 0,
				n_log = 0;
	mop_action	x,
				y;

	while (n_log < 40)
	{
		mop_poll	p;

		if (n_run < 2 && (p = mop_hb_next(a, &x)) == MOP_POLL_ACTION)
		{
			log[n_log++] = (logged) {0, x.trial, x.resource, 0};
			if (x.kind != MOP_ACT_STOP)
				run[n_run++] = x.trial;
			continue;
		}
		/* the older running trial finishes */
		{
			mop_hb_trial_info ti;
			double		s = (double) ((run[0] * 7919) % 101);

			mop_hb_trial(a, run[0], &ti);
			mop_hb_report(a, run[0], ti.target, s);
			log[n_log++] = (logged) {1, run[0], ti.target, s};
			run[0] = run[1];
			n_run--;
		}
	}
	/* replay into b */
	for (int k = 0; k < n_log; k++)
		if (log[k].is_report)
			CHECK(mop_hb_report(b, log[k].trial, log[k].resource, log[k].score) == 0);
		else
		{
			CHECK(mop_hb_next(b, &y) == MOP_POLL_ACTION);
			CHECK(y.trial == log[k].trial && y.resource == log[k].resource);
		}
	/* the trials running at the interruption are running in b too */
	for (int j = 0; j < n_run; j++)
	{
		mop_hb_trial_info ti;

		CHECK(mop_hb_trial(b, run[j], &ti) == 0 && ti.state == MOP_TRIAL_RUNNING);
	}
	/* both continue identically */
	for (int k = 0; k < 200; k++)
	{
		mop_poll	pa = mop_hb_next(a, &x),
					pb = mop_hb_next(b, &y);

		CHECK(pa == pb);
		if (pa != MOP_POLL_ACTION)
			break;
		CHECK(x.kind == y.kind && x.trial == y.trial && x.resource == y.resource);
		CHECK(strcmp(x.d.reason, y.d.reason) == 0);
		if (x.kind != MOP_ACT_STOP)
		{
			mop_hb_report(a, x.trial, x.resource, (double) (x.trial % 13));
			mop_hb_report(b, y.trial, y.resource, (double) (y.trial % 13));
		}
	}
	mop_hb_free(a);
	mop_hb_free(b);
}
