/*
 * test_asha.c -- ASHA's promotion rule on scripted scores: an exact
 * sequential trace, late promotion of a paused trial, NaN never promoted,
 * rung layout, decision records.
 */
#include "harness.h"
#include "../../src/search/mop_asha.h"

static void
trace_add(char *buf, size_t len, const mop_action *a)
{
	size_t		n = strlen(buf);

	if (a->kind == MOP_ACT_NEW)
		snprintf(buf + n, len - n, "N%d@%d ", a->trial, a->resource);
	else if (a->kind == MOP_ACT_CONTINUE)
		snprintf(buf + n, len - n, "C%d@%d ", a->trial, a->resource);
	else
		snprintf(buf + n, len - n, "%c%d ", a->d.why == MOP_WHY_FINISHED ? 'D' :
				 a->d.why == MOP_WHY_FAILED ? 'F' : 'S', a->trial);
}

static const double script9[9] = {0.5, 0.9, 0.1, NAN, 0.95, 0.3, 0.7, 0.2, 0.8};

TEST(asha_trace_sequential)
{
	mop_asha   *a = mop_asha_new(1, 9, 3, 9);
	char		trace[1024] = "";
	mop_action	act;
	mop_poll	p;
	int			steps = 0;
	int32_t		best,
				best_r;
	double		best_s;
	static const char *expect =
		"N0@1 N1@1 N2@1 C1@3 N3@1 F3 N4@1 C4@3 N5@1 N6@1 N7@1 N8@1 C8@3 C4@9 D4 "
		"S1 S8 S6 S0 S5 S7 S2 ";

	CHECK(mop_asha_n_rungs(a) == 3);
	CHECK(mop_asha_rung_resource(a, 0) == 1 && mop_asha_rung_resource(a, 1) == 3 &&
		  mop_asha_rung_resource(a, 2) == 9 && mop_asha_rung_resource(a, 3) == -1);
	while ((p = mop_asha_next(a, &act)) == MOP_POLL_ACTION && steps++ < 100)
	{
		trace_add(trace, sizeof(trace), &act);
		if (act.kind != MOP_ACT_STOP)
			CHECK(mop_asha_report(a, act.trial, act.resource, script9[act.trial]) == 0);
	}
	CHECK(p == MOP_POLL_DONE);
	CHECKF(strcmp(trace, expect) == 0, "trace\n  %s\nexpected\n  %s", trace, expect);
	CHECK(mop_asha_best(a, &best, &best_s, &best_r) == 0);
	CHECK(best == 4 && best_s == 0.95 && best_r == 9);
	mop_asha_free(a);
}

TEST(asha_promotes_late_and_records)
{
	mop_asha   *a = mop_asha_new(2, 8, 2, 0);	/* rungs 2, 4, 8; unlimited trials */
	mop_action	act;
	mop_trial_state st;
	int32_t		rung;

	/* two workers: trials 0 and 1 start; 0 reports first, poorly */
	CHECK(mop_asha_next(a, &act) == MOP_POLL_ACTION && act.trial == 0 && act.resource == 2);
	CHECK(mop_asha_next(a, &act) == MOP_POLL_ACTION && act.trial == 1);
	CHECK(mop_asha_report(a, 0, 2, 0.1) == 0);
	/* rung 0 has one result, floor(1/2) = 0: nothing to promote, start trial 2 */
	CHECK(mop_asha_next(a, &act) == MOP_POLL_ACTION && act.kind == MOP_ACT_NEW && act.trial == 2);
	CHECK(mop_asha_report(a, 1, 1, 0.9) == 1);	/* intermediate, ignored */
	CHECK(mop_asha_report(a, 1, 2, 0.9) == 0);
	/* rung 0 = {0: 0.1, 1: 0.9}: top 1 is trial 1 */
	CHECK(mop_asha_next(a, &act) == MOP_POLL_ACTION);
	CHECK(act.kind == MOP_ACT_CONTINUE && act.trial == 1 && act.resource == 4);
	CHECK(act.d.why == MOP_WHY_PROMOTE && act.d.rung == 0 && act.d.rank == 1);
	CHECK(act.d.rung_size == 2 && act.d.keep == 1 && act.d.cutoff == 0.9);
	CHECK(act.d.from_resource == 2 && act.d.to_resource == 4);
	CHECK(strstr(act.d.reason, "floor(2/2)") != NULL);
	/* trial 2 reports 0.05; then 3 and 4 start and report worse */
	CHECK(mop_asha_report(a, 2, 2, 0.05) == 0);
	CHECK(mop_asha_next(a, &act) == MOP_POLL_ACTION && act.kind == MOP_ACT_NEW && act.trial == 3);
	CHECK(mop_asha_report(a, 3, 2, 0.0) == 0);
	/* rung 0 = {0.9, 0.1, 0.05, 0.0}: top 2 are 1 (promoted) and 0 -- paused 0 is promoted late */
	CHECK(mop_asha_next(a, &act) == MOP_POLL_ACTION);
	CHECK(act.kind == MOP_ACT_CONTINUE && act.trial == 0 && act.d.rank == 2 && act.d.keep == 2);
	CHECK(mop_asha_trial(a, 0, &st, &rung, NULL) == 0 && st == MOP_TRIAL_RUNNING && rung == 1);
	CHECK(mop_asha_trial(a, 2, &st, &rung, NULL) == 0 && st == MOP_TRIAL_PAUSED && rung == 0);
	CHECK(mop_asha_trial(a, 7, &st, &rung, NULL) == MOP_SEARCH_ESTATE);
	mop_asha_free(a);
}

TEST(asha_nan_never_promotes)
{
	mop_asha   *a = mop_asha_new(1, 4, 2, 6);	/* rungs 1, 2, 4 */
	mop_action	act;
	mop_poll	p;
	int			n_cont = 0,
				n_fail = 0,
				steps = 0;

	/* every trial NaN but trial 5, which comes last */
	while ((p = mop_asha_next(a, &act)) == MOP_POLL_ACTION && steps++ < 100)
	{
		if (act.kind == MOP_ACT_CONTINUE)
		{
			n_cont++;
			CHECK(act.trial == 5);
		}
		if (act.kind == MOP_ACT_STOP && act.d.why == MOP_WHY_FAILED)
		{
			n_fail++;
			CHECK(act.trial != 5);
		}
		if (act.kind != MOP_ACT_STOP)
			mop_asha_report(a, act.trial, act.resource, act.trial == 5 ? 1.0 : NAN);
	}
	CHECK(p == MOP_POLL_DONE);
	/* rung 0 has 6 results, top 3, only trial 5 finite: promoted to 2; rung 1 of 1: none */
	CHECK(n_cont == 1);
	CHECK(n_fail == 5);
	mop_asha_free(a);
}

TEST(asha_rungs_and_arguments)
{
	mop_asha   *a = mop_asha_new(1, 10, 3, 1);	/* rungs 1, 3, 9 and top 10 */

	CHECK(mop_asha_n_rungs(a) == 4 && mop_asha_rung_resource(a, 3) == 10 &&
		  mop_asha_rung_resource(a, 2) == 9);
	mop_asha_free(a);
	a = mop_asha_new(5, 5, 3, 1);	/* a single rung: random search to R */
	CHECK(mop_asha_n_rungs(a) == 1 && mop_asha_rung_resource(a, 0) == 5);
	mop_asha_free(a);
	CHECK(mop_asha_new(0, 5, 3, 1) == NULL);
	CHECK(mop_asha_new(6, 5, 3, 1) == NULL);
	CHECK(mop_asha_new(1, 5, 1, 1) == NULL);
	CHECK(mop_asha_new(1, 5, 2, -1) == NULL);
	a = mop_asha_new(1, INT32_MAX, 2, 0);
	CHECK(mop_asha_n_rungs(a) == 32);
	mop_asha_free(a);
}

TEST(asha_simulated_workers_deterministic)
{
	char		t1[8192],
				t2[8192];

	/* the same call sequence twice gives the same trace; every trial ends stopped */
	for (int rep = 0; rep < 2; rep++)
	{
		mop_asha   *a = mop_asha_new(1, 27, 3, 40);
		char	   *t = rep ? t2 : t1;
		int32_t		run[3],
					run_r[3];
		int			n_run = 0,
					guard = 0;
		uint64_t	h = 99;
		mop_action	act;

		t[0] = 0;
		for (;;)
		{
			mop_poll	p = MOP_POLL_WAIT;

			while (n_run < 3 && (p = mop_asha_next(a, &act)) == MOP_POLL_ACTION)
			{
				trace_add(t, 8192, &act);
				if (act.kind != MOP_ACT_STOP)
				{
					run[n_run] = act.trial;
					run_r[n_run++] = act.resource;
				}
			}
			if (n_run == 0 || guard++ > 10000)
			{
				CHECK(p == MOP_POLL_DONE);
				break;
			}
			h = h * 6364136223846793005ULL + 1442695040888963407ULL;
			{
				int			j = (int) ((h >> 33) % n_run);

				mop_asha_report(a, run[j], run_r[j],
								(double) ((run[j] * 2654435761u) % 97) + 0.01 * run_r[j]);
				run[j] = run[--n_run];
				run_r[j] = run_r[n_run];
			}
		}
		for (int32_t i = 0; i < mop_asha_n_trials(a); i++)
		{
			mop_trial_state st;

			mop_asha_trial(a, i, &st, NULL, NULL);
			CHECK(st == MOP_TRIAL_STOPPED || st == MOP_TRIAL_FINISHED);
		}
		CHECK(mop_asha_n_trials(a) == 40);
		mop_asha_free(a);
	}
	CHECK(strcmp(t1, t2) == 0);
	CHECK(strstr(t1, "@27") != NULL);	/* someone reached the top rung */
}

TEST(asha_resume_by_replay)
{
	/* interrupted after 30 calls; a fresh ASHA fed the same calls agrees from there on */
	mop_asha   *a = mop_asha_new(1, 9, 3, 30),
			   *b = mop_asha_new(1, 9, 3, 30);
	int32_t		lt[64],
				lr[64];
	double		ls[64];
	int			lrep[64],
				n_log = 0;
	int32_t		run[2],
				run_r[2];
	int			n_run = 0;
	mop_action	x,
				y;

	while (n_log < 30)
	{
		if (n_run < 2 && mop_asha_next(a, &x) == MOP_POLL_ACTION)
		{
			lrep[n_log] = 0;
			lt[n_log] = x.trial;
			lr[n_log++] = x.resource;
			if (x.kind != MOP_ACT_STOP)
			{
				run[n_run] = x.trial;
				run_r[n_run++] = x.resource;
			}
			continue;
		}
		lrep[n_log] = 1;
		lt[n_log] = run[0];
		lr[n_log] = run_r[0];
		ls[n_log] = (double) ((run[0] * 7919) % 101);
		mop_asha_report(a, run[0], run_r[0], ls[n_log++]);
		run[0] = run[1];
		run_r[0] = run_r[1];
		n_run--;
	}
	for (int k = 0; k < n_log; k++)
		if (lrep[k])
			CHECK(mop_asha_report(b, lt[k], lr[k], ls[k]) == 0);
		else
			CHECK(mop_asha_next(b, &y) == MOP_POLL_ACTION && y.trial == lt[k] &&
				  y.resource == lr[k]);
	for (int k = 0; k < 200; k++)
	{
		mop_poll	pa = mop_asha_next(a, &x),
					pb = mop_asha_next(b, &y);

		CHECK(pa == pb);
		if (pa != MOP_POLL_ACTION)
			break;
		CHECK(x.kind == y.kind && x.trial == y.trial && x.resource == y.resource);
		if (x.kind != MOP_ACT_STOP)
		{
			mop_asha_report(a, x.trial, x.resource, (double) (x.trial % 13));
			mop_asha_report(b, y.trial, y.resource, (double) (y.trial % 13));
		}
	}
	mop_asha_free(a);
	mop_asha_free(b);
}
