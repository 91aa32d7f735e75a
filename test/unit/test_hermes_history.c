/*
 * test_hermes_history.c -- the per-model history behind convergence-aware
 * priorities: evaluations with the seconds trained up to them, the
 * projection horizon (mean seconds of an evaluated epoch), the window of
 * the last MOP_HERMES_HISTORY evaluations, the best first epoch re-ranking
 * the configurations not started yet, and the order a MOP_PICK_PRIORITY
 * scheduler then follows.
 */
#include "harness.h"
#include "../../src/search/mop_hermes.h"
#include "../../src/search/mop_search.h"

/* Train model m through one whole epoch of a 1-partition scheduler. */
static void
train_epoch(mop_sched *s, mop_hermes_history *h, int32_t m, double seconds)
{
	mop_task	t;

	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED);
	CHECKF(t.model == m, "expected model %d, got %d", m, t.model);
	CHECK(mop_sched_complete(s, &t, seconds) == 1);
	CHECK(mop_hermes_history_trained(h, t.model, seconds) == MOP_SEARCH_OK);
}

TEST(hermes_history_records_evaluations)
{
	mop_hermes_history h;
	mop_sched  *s = mop_sched_new(1, 1, 3, 0, MOP_PICK_PRIORITY);
	double		loss[3] = {1.0, 0.8, 0.5};
	double		sec[3] = {2.0, 6.0, 8.0};
	mop_hermes_opts o;

	mop_hermes_history_init(&h);
	CHECK(mop_hermes_history_fresh(&h) == MOP_HERMES_NEW_PRIORITY);
	CHECK(mop_hermes_history_evals(&h, 7) == 0);
	CHECK(mop_hermes_history_trained(&h, -1, 1.0) == MOP_SEARCH_EINVAL);
	CHECK(mop_sched_add_model(s, 5) == 0);
	/* epochs of 2, 4 and 2 seconds */
	for (int e = 0; e < 3; e++)
	{
		train_epoch(s, &h, 0, e == 1 ? 4.0 : 2.0);
		CHECK(mop_hermes_history_evaluated(&h, s, 0, loss[e]) == MOP_SEARCH_OK);
	}
	CHECK(mop_hermes_history_evals(&h, 0) == 3);
	for (int e = 0; e < 3; e++)
	{
		CHECK(h.m[0].loss[e] == loss[e]);
		CHECK(h.m[0].seconds[e] == sec[e]);
	}
	CHECK(h.epochs == 3 && h.seconds == 8.0);
	/* the first epoch set the best first loss */
	CHECK(h.best_first == 1.0);
	CHECK(mop_hermes_history_fresh(&h) == -1.0);
	/* the priority set is the PROJECTED rule's with the mean epoch as horizon */
	mop_hermes_default_opts(&o);
	o.horizon = 8.0 / 3.0;
	CHECK(close_enough(mop_hermes_priority(loss, sec, 3, &o),
					   -(0.5 - (1.0 - 0.5) / (8.0 - 2.0) * (8.0 / 3.0)), 1e-12));
	mop_hermes_history_free(&h);
	CHECK(h.m == NULL && h.n == 0 && h.best_first == INFINITY);
	mop_sched_free(s);
}

TEST(hermes_history_keeps_a_window)
{
	mop_hermes_history h;
	mop_sched  *s = mop_sched_new(1, 1, 3, 0, MOP_PICK_PRIORITY);
	int			n = MOP_HERMES_HISTORY + 5;

	mop_hermes_history_init(&h);
	CHECK(mop_sched_add_model(s, n) == 0);
	for (int e = 0; e < n; e++)
	{
		train_epoch(s, &h, 0, 1.0);
		CHECK(mop_hermes_history_evaluated(&h, s, 0, e == 3 ? NAN : 100.0 - e) == MOP_SEARCH_OK);
	}
	/* only the last MOP_HERMES_HISTORY, oldest first */
	CHECK(mop_hermes_history_evals(&h, 0) == MOP_HERMES_HISTORY);
	CHECK(h.m[0].loss[0] == 100.0 - 5);
	CHECK(h.m[0].seconds[0] == 6.0);
	CHECK(h.m[0].loss[MOP_HERMES_HISTORY - 1] == 100.0 - (n - 1));
	CHECK(h.m[0].seconds[MOP_HERMES_HISTORY - 1] == (double) n);
	CHECK(h.epochs == n);
	mop_hermes_history_free(&h);

	/* a diverged evaluation is kept as NaN */
	mop_hermes_history_init(&h);
	CHECK(mop_hermes_history_evaluated(&h, s, 0, INFINITY) == MOP_SEARCH_OK);
	CHECK(isnan(h.m[0].loss[0]));
	mop_hermes_history_free(&h);
	mop_sched_free(s);
}

TEST(hermes_history_best_first_epoch_reranks_unstarted)
{
	mop_hermes_history h;
	mop_sched  *s = mop_sched_new(1, 1, 9, 0, MOP_PICK_PRIORITY);
	mop_task	t;

	mop_hermes_history_init(&h);
	/* model 0 with a budget of 4 epochs, then two configurations of 1 */
	CHECK(mop_sched_add_model(s, 4) == 0);
	CHECK(mop_sched_add_model(s, 1) == 1);
	CHECK(mop_sched_add_model(s, 1) == 2);
	for (int m = 0; m < 3; m++)
		mop_sched_set_priority(s, m, mop_hermes_history_fresh(&h));
	/* all tied: the largest budget starts */
	train_epoch(s, &h, 0, 1.0);
	CHECK(mop_hermes_history_evaluated(&h, s, 0, 0.5) == MOP_SEARCH_OK);
	CHECK(h.best_first == 0.5);
	/* a falling loss is not known yet (one point): model 0 stands at -0.5 and
	 * the unstarted ones were re-ranked to -0.5 too: the started one wins */
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 0);
	CHECK(mop_sched_complete(s, &t, 1.0) == 1);
	CHECK(mop_hermes_history_trained(&h, 0, 1.0) == MOP_SEARCH_OK);
	/* its loss rises: projected above 0.9, behind the fresh configurations */
	CHECK(mop_hermes_history_evaluated(&h, s, 0, 0.9) == MOP_SEARCH_OK);
	CHECK(h.best_first == 0.5);	/* only a first epoch counts */
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model != 0);
	CHECK(mop_sched_complete(s, &t, 1.0) == 1);
	CHECK(mop_hermes_history_trained(&h, t.model, 1.0) == MOP_SEARCH_OK);
	/* a better first epoch lowers the bar for the last unstarted one */
	CHECK(mop_hermes_history_evaluated(&h, s, t.model, 0.2) == MOP_SEARCH_OK);
	CHECK(h.best_first == 0.2);
	CHECK(mop_hermes_history_fresh(&h) == -0.2);
	/* model 0 (projected 0.9 + ...) is behind the unstarted one (-0.2) */
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model != 0);
	mop_hermes_history_free(&h);
	mop_sched_free(s);
}
