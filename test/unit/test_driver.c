/*
 * test_driver.c -- the search drivers behind mop_driver.h: Hyperband and
 * ASHA answer exactly as their cores do (actions, results, which trials
 * await a result, the planned budget, ASHA's cap on trials with work), and
 * TPE's glue proposes within its limits: one trial in flight per worker,
 * or in a deterministic run synchronous batches, each proposed once every
 * result of the batches before it is in; replaying lifts the timing limits.
 */
#include "harness.h"
#include "../../src/search/mop_asha.h"
#include "../../src/search/mop_driver.h"
#include "../../src/search/mop_hyperband.h"

static const mop_param x01[1] = {{"x", MOP_PARAM_FLOAT, 0.0, 1.0, 0, -1, 0}};

static int
same_action(const mop_action *a, const mop_action *b)
{
	return a->kind == b->kind && a->trial == b->trial && a->bracket == b->bracket &&
		a->resource == b->resource && a->d.why == b->d.why &&
		strcmp(a->d.reason, b->d.reason) == 0;
}

TEST(driver_hyperband_follows_its_core)
{
	mop_driver *d = mop_hb_driver_new(9, 3);
	mop_hb	   *hb = mop_hb_new(9, 3, 0);
	int			steps = 0;

	CHECK(d != NULL && hb != NULL);
	CHECK(mop_driver_adaptive(d));
	CHECK(d->budget == mop_hyperband_cost(9, 3, 1));
	CHECK(mop_hb_driver_new(9, 1) == NULL);
	for (;;)
	{
		mop_action	a,
					b;
		mop_poll	pa = d->ops->next_action(d, &a),
					pb = mop_hb_next(hb, &b);

		CHECK(pa == pb);
		if (pa != MOP_POLL_ACTION || ++steps > 1000)
		{
			/* nothing to do now: report every running trial, then ask again */
			int			any = 0;

			for (int32_t t = 0; t < mop_hb_n_trials(hb); t++)
			{
				mop_hb_trial_info info;

				CHECK(mop_hb_trial(hb, t, &info) == 0);
				CHECK(d->ops->awaits_result(d, t) == (info.state == MOP_TRIAL_RUNNING));
				if (info.state == MOP_TRIAL_RUNNING)
				{
					double		score = (double) ((t * 7) % 5);

					CHECK(d->ops->report_result(d, t, info.target, score) == MOP_SEARCH_OK);
					mop_hb_report(hb, t, info.target, score);
					CHECK(!d->ops->awaits_result(d, t));
					any = 1;
				}
			}
			if (!any)
				break;
			continue;
		}
		CHECK(same_action(&a, &b));
	}
	CHECK(steps > 10);
	/* an unknown trial's result is ignored, as the core ignores a repeated one */
	CHECK(d->ops->report_result(d, 999, 1, 0.5) == MOP_SEARCH_OK);
	mop_driver_free(d);
	mop_hb_free(hb);
}

/*
 * max_trials on Hyperband: only the plan's first brackets run.  R 9, eta 3:
 * brackets of 9, 5 and 3 configurations; the first two start 14 and train
 * 9*1 + 3*2 + 1*6 + 5*3 + 1*6 = 42 epochs (all three: 69).
 */
TEST(driver_hyperband_first_brackets_only)
{
	mop_driver *d = mop_hb_driver_new_brackets(9, 3, 2);
	mop_driver *all = mop_hb_driver_new_brackets(9, 3, 0);
	mop_hb	   *hb = mop_hb_new(9, 3, 0);
	mop_action	a;
	int32_t		started = 0,
				running[64],
				target[64];
	int			n_running = 0,
				steps = 0;

	CHECK(d != NULL && all != NULL && hb != NULL);
	CHECK(all->budget == mop_hyperband_cost(9, 3, 1) && all->budget == 69);
	CHECK(d->budget == 42);
	CHECK(mop_hb_driver_new_brackets(9, 3, 4) == NULL);
	CHECK(mop_hb_limit_brackets(hb, 0) == MOP_SEARCH_EINVAL);
	CHECK(mop_hb_limit_brackets(hb, 4) == MOP_SEARCH_EINVAL);
	CHECK(mop_hb_next(hb, &a) == MOP_POLL_ACTION);
	CHECK(mop_hb_limit_brackets(hb, 1) == MOP_SEARCH_ESTATE);	/* begun */
	for (;;)
	{
		mop_poll	p = d->ops->next_action(d, &a);

		CHECK(++steps < 1000);
		if (p == MOP_POLL_ACTION)
		{
			CHECK(a.bracket >= 1);	/* bracket 0 (s = 0) never starts */
			if (a.kind == MOP_ACT_NEW)
				CHECK(a.trial == started++);
			if (a.kind != MOP_ACT_STOP)
			{
				CHECK(n_running < 64);
				target[n_running] = a.resource;
				running[n_running++] = a.trial;
			}
			continue;
		}
		if (p == MOP_POLL_DONE)
			break;
		CHECK(n_running > 0);	/* waits only for results it was promised */
		for (int i = 0; i < n_running; i++)
		{
			CHECK(d->ops->awaits_result(d, running[i]));
			CHECK(d->ops->report_result(d, running[i], target[i], (double) running[i]) == MOP_SEARCH_OK);
		}
		n_running = 0;
	}
	CHECK(started == 14);
	mop_driver_free(d);
	mop_driver_free(all);
	mop_hb_free(hb);
}

TEST(driver_asha_caps_trials_with_work)
{
	mop_driver *d = mop_asha_driver_new(1, 9, 3, 20);
	mop_asha   *core = mop_asha_new(1, 9, 3, 20);
	mop_action	a,
				b;

	CHECK(d != NULL && core != NULL);
	CHECK(d->budget == 20);
	d->n_workers = 2;
	CHECK(d->ops->may_start(d, 3));
	CHECK(!d->ops->may_start(d, 4));
	d->n_workers = 3;
	CHECK(d->ops->may_start(d, 4));
	for (int i = 0; i < 3; i++)
	{
		CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION);
		CHECK(mop_asha_next(core, &b) == MOP_POLL_ACTION);
		CHECK(same_action(&a, &b) && a.kind == MOP_ACT_NEW && a.trial == i);
		CHECK(d->ops->awaits_result(d, i));
	}
	CHECK(d->ops->report_result(d, 1, 1, 0.9) == MOP_SEARCH_OK);
	mop_asha_report(core, 1, 1, 0.9);
	CHECK(!d->ops->awaits_result(d, 1));
	CHECK(d->ops->awaits_result(d, 0));
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION);
	CHECK(mop_asha_next(core, &b) == MOP_POLL_ACTION);
	CHECK(same_action(&a, &b));
	mop_driver_free(d);
	mop_asha_free(core);
}

TEST(driver_tpe_one_trial_per_worker)
{
	mop_tpe_opts o;
	mop_driver *d;
	mop_action	a;

	mop_tpe_default_opts(&o);
	o.n_startup = 2;
	d = mop_tpe_driver_new(x01, 1, &o, 7, 4, 5, 0, 0);
	CHECK(d != NULL && mop_driver_adaptive(d));
	CHECK(d->budget == 0);
	d->n_workers = 2;
	CHECK(d->ops->proposal(d, 0) == NULL);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION);
	CHECK(a.kind == MOP_ACT_NEW && a.trial == 0 && a.resource == 5 && a.d.to_resource == 5);
	CHECK(strcmp(a.d.reason, "random startup proposal after 0 completed trials") == 0);
	CHECK(d->ops->proposal(d, 0) != NULL);
	CHECK(d->ops->proposal(d, 0)[0] >= 0.0 && d->ops->proposal(d, 0)[0] <= 1.0);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION && a.trial == 1);
	/* two in flight for two workers: wait */
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_WAIT);
	/* a replay is not held back */
	d->replaying = 1;
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION && a.trial == 2);
	d->replaying = 0;
	CHECK(d->ops->report_result(d, 0, 5, 0.5) == MOP_SEARCH_OK);
	CHECK(d->ops->report_result(d, 0, 5, 0.5) == MOP_SEARCH_ESTATE);	/* twice */
	CHECK(d->ops->report_result(d, 3, 5, 0.5) == MOP_SEARCH_ESTATE);	/* not proposed */
	CHECK(d->ops->report_result(d, 1, 5, 0.7) == MOP_SEARCH_OK);
	CHECK(!d->ops->awaits_result(d, 1) && d->ops->awaits_result(d, 2));
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION && a.trial == 3);
	CHECK(strcmp(a.d.reason, "TPE proposal (best l/g of the candidates) after 2 completed trials") == 0);
	/* the budget is spent: wait for the last results, then done */
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_WAIT);
	CHECK(d->ops->report_result(d, 2, 5, NAN) == MOP_SEARCH_OK);
	CHECK(d->ops->report_result(d, 3, 5, 0.1) == MOP_SEARCH_OK);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_DONE && d->error == 0);
	mop_driver_free(d);
}

TEST(driver_tpe_deterministic_batches)
{
	mop_tpe_opts o;
	mop_driver *d;
	mop_action	a;

	mop_tpe_default_opts(&o);
	o.n_startup = 1;
	d = mop_tpe_driver_new(x01, 1, &o, 7, 5, 3, 1, 2);
	CHECK(d != NULL);
	d->n_workers = 8;			/* no cap per worker: batches decide */
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION && a.trial == 0);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION && a.trial == 1);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_WAIT);
	/* the second result of the batch first: the next batch waits for the first */
	CHECK(d->ops->report_result(d, 1, 3, 0.9) == MOP_SEARCH_OK);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_WAIT);
	/* the batch complete: both told, in trial order; the next batch opens */
	CHECK(d->ops->report_result(d, 0, 3, 0.2) == MOP_SEARCH_OK);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION && a.trial == 2);
	CHECK(strcmp(a.d.reason, "TPE proposal (best l/g of the candidates) after 2 completed trials") == 0);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION && a.trial == 3);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_WAIT);
	CHECK(d->ops->report_result(d, 2, 3, 0.3) == MOP_SEARCH_OK);
	CHECK(d->ops->report_result(d, 3, 3, 0.4) == MOP_SEARCH_OK);
	/* the last batch has one trial (5 in all) */
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_ACTION && a.trial == 4);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_WAIT);
	CHECK(d->ops->report_result(d, 4, 3, 0.5) == MOP_SEARCH_OK);
	CHECK(d->ops->next_action(d, &a) == MOP_POLL_DONE);
	mop_driver_free(d);
}

TEST(driver_tpe_same_seed_same_proposals)
{
	mop_driver *d1 = mop_tpe_driver_new(x01, 1, NULL, 11, 6, 2, 1, 3);
	mop_driver *d2 = mop_tpe_driver_new(x01, 1, NULL, 11, 6, 2, 1, 3);
	mop_action	a;

	CHECK(d1 != NULL && d2 != NULL);
	d1->n_workers = d2->n_workers = 3;
	for (int i = 0; i < 3; i++)
	{
		CHECK(d1->ops->next_action(d1, &a) == MOP_POLL_ACTION);
		CHECK(d2->ops->next_action(d2, &a) == MOP_POLL_ACTION);
		CHECK(d1->ops->proposal(d1, i)[0] == d2->ops->proposal(d2, i)[0]);
	}
	/* results in another order: the same proposals next */
	for (int i = 0; i < 3; i++)
	{
		CHECK(d1->ops->report_result(d1, i, 2, 0.1 * i) == MOP_SEARCH_OK);
		CHECK(d2->ops->report_result(d2, 2 - i, 2, 0.1 * (2 - i)) == MOP_SEARCH_OK);
	}
	for (int i = 3; i < 6; i++)
	{
		CHECK(d1->ops->next_action(d1, &a) == MOP_POLL_ACTION && a.trial == i);
		CHECK(d2->ops->next_action(d2, &a) == MOP_POLL_ACTION && a.trial == i);
		CHECK(d1->ops->proposal(d1, i)[0] == d2->ops->proposal(d2, i)[0]);
	}
	mop_driver_free(d1);
	mop_driver_free(d2);
	mop_driver_free(NULL);
}
