/*
 * test_sched.c -- the MOP scheduler core: invariants of the schedules it
 * produces under simulated timing, determinism, dynamic budgets, restore.
 */
#include <math.h>

#include "harness.h"
#include "../../src/search/mop_sched.h"
#include "../../src/search/mop_sim.h"

/* Check MOP's invariants on a simulated schedule. */
static void
check_invariants(const mop_sim_result *r, int W, int P, int n, const int32_t *epochs)
{
	int64_t		expect = 0;
	int		   *seen = calloc((size_t) n * 64 * P, sizeof(int));

	for (int i = 0; i < n; i++)
		expect += (int64_t) epochs[i] * P;
	CHECKF(r->n_hops == expect, "%lld hops, expected %lld", (long long) r->n_hops,
		   (long long) expect);
	CHECK(!r->deadlock);
	for (int64_t a = 0; a < r->n_hops; a++)
	{
		const mop_sim_hop *h = &r->hops[a];

		/* each (model, epoch, partition) exactly once; the worker owns it */
		CHECK(h->epoch < 64);
		seen[((size_t) h->model * 64 + h->epoch) * P + h->partition]++;
		CHECK(h->partition % W == h->worker);
		for (int64_t b = a + 1; b < r->n_hops; b++)
		{
			const mop_sim_hop *k = &r->hops[b];
			int			overlap = h->start < k->finish && k->start < h->finish;

			if (overlap && (k->model == h->model || k->worker == h->worker))
			{
				CHECKF(0, "overlap: model %d/%d worker %d/%d", h->model, k->model,
					   h->worker, k->worker);
				goto out;
			}
			/* a model's epoch e+1 starts after its epoch e is over */
			if (k->model == h->model && k->epoch < h->epoch && k->finish > h->start)
				CHECKF(0, "model %d epoch %d started before epoch %d ended", h->model,
					   h->epoch, k->epoch);
		}
	}
	for (int i = 0; i < n; i++)
		for (int e = 0; e < epochs[i]; e++)
			for (int p = 0; p < P; p++)
				CHECKF(seen[((size_t) i * 64 + e) * P + p] == 1,
					   "model %d epoch %d partition %d visited %d times", i, e, p,
					   seen[((size_t) i * 64 + e) * P + p]);
out:
	free(seen);
}

static void
run_case(int W, int P, int n, int deterministic, mop_pick pick, uint64_t seed)
{
	int32_t		epochs[40];
	double		cost[40],
				pf[16];
	mop_sim_result r;

	for (int i = 0; i < n; i++)
	{
		epochs[i] = 1 + (int) ((seed + i * 7) % 3);
		cost[i] = 1.0 + (double) ((i * 37 + seed) % 11);
	}
	for (int p = 0; p < P; p++)
		pf[p] = 1.0 + 0.1 * (p % 3);
	CHECK(mop_sim_run(W, P, n, epochs, cost, pf, NULL, seed, deterministic, pick, 1, &r) == 0);
	check_invariants(&r, W, P, n, epochs);
	CHECK(r.makespan >= r.lower_bound - 1e-9);
	free(r.hops);
}

TEST(sched_invariants_random)
{
	run_case(4, 4, 10, 0, MOP_PICK_RANDOM, 1);
	run_case(3, 7, 12, 0, MOP_PICK_RANDOM, 2);
	run_case(1, 1, 5, 0, MOP_PICK_RANDOM, 3);
	run_case(8, 8, 3, 0, MOP_PICK_RANDOM, 4);	/* fewer models than workers */
}

TEST(sched_invariants_longest_and_priority)
{
	run_case(4, 4, 16, 0, MOP_PICK_LONGEST, 5);
	run_case(2, 6, 9, 0, MOP_PICK_PRIORITY, 6);
	run_case(3, 6, 9, 0, MOP_PICK_FIFO, 9);
}

TEST(sched_invariants_deterministic)
{
	run_case(4, 4, 16, 1, MOP_PICK_RANDOM, 7);
	run_case(3, 5, 7, 1, MOP_PICK_LONGEST, 8);
}

/* Per-model partition sequences of a simulated run. */
static void
sequences(int W, int P, int n, const double *cost, uint64_t seed, int32_t *seq)
{
	int32_t		epochs[8];
	mop_sim_result r;
	int			pos[8] = {0};

	for (int i = 0; i < n; i++)
		epochs[i] = 2;
	mop_sim_run(W, P, n, epochs, cost, NULL, NULL, seed, 1, MOP_PICK_RANDOM, 1, &r);
	/* hops are recorded in completion order; per model that is visit order */
	for (int64_t h = 0; h < r.n_hops; h++)
	{
		int			m = r.hops[h].model;

		seq[m * 2 * P + pos[m]++] = r.hops[h].partition;
	}
	free(r.hops);
}

TEST(sched_deterministic_ignores_timing)
{
	double		c1[6] = {1, 2, 3, 4, 5, 6},
				c2[6] = {6, 1, 5, 2, 4, 3};
	int32_t		s1[6 * 2 * 4],
				s2[6 * 2 * 4],
				s3[6 * 2 * 4];

	sequences(4, 4, 6, c1, 42, s1);
	sequences(4, 4, 6, c2, 42, s2);
	sequences(4, 4, 6, c1, 43, s3);
	CHECK(memcmp(s1, s2, sizeof(s1)) == 0);	/* same seed, other timing: same orders */
	CHECK(memcmp(s1, s3, sizeof(s1)) != 0);	/* another seed: other orders */
}

TEST(sched_never_double_books)
{
	mop_sched  *s = mop_sched_new(2, 2, 1, 0, MOP_PICK_RANDOM);
	mop_task	a,
				b;

	mop_sched_add_model(s, 1);
	CHECK(mop_sched_next(s, 0, &a) == MOP_ASSIGNED);
	CHECK(a.model == 0 && a.partition == 0 && a.epoch == 0 && !a.last_of_epoch);
	CHECK(mop_sched_next(s, 1, &b) == MOP_WAIT);	/* the only model is busy */
	CHECK(mop_sched_complete(s, &a, 1.0) == 0);
	CHECK(mop_sched_next(s, 0, &b) == MOP_WAIT);	/* partition 0 already visited */
	CHECK(mop_sched_next(s, 1, &b) == MOP_ASSIGNED && b.partition == 1 && b.last_of_epoch);
	CHECK(mop_sched_complete(s, &b, 1.0) == 1);	/* epoch complete */
	CHECK(mop_sched_epochs_done(s, 0) == 1);
	CHECK(mop_sched_finished(s));
	CHECK(mop_sched_next(s, 0, &b) == MOP_DONE);
	/* more budget: work again */
	mop_sched_set_epochs(s, 0, 2);
	CHECK(!mop_sched_finished(s));
	CHECK(mop_sched_next(s, 1, &b) == MOP_ASSIGNED && b.epoch == 1);
	/* an aborted task frees the model without counting the visit */
	mop_sched_abort(s, &b);
	CHECK(mop_sched_visited(s, 0) == 0 && !mop_sched_busy(s, 0));
	mop_sched_stop(s, 0);
	CHECK(mop_sched_next(s, 1, &b) == MOP_DONE);
	mop_sched_free(s);
	CHECK(mop_sched_new(3, 2, 0, 0, MOP_PICK_RANDOM) == NULL);	/* W > P */
}

/*
 * A sub-epoch given up while its process may still commit it runs again
 * before any other sub-epoch of its model, on a worker holding its
 * partition; any completion releases the model.
 */
TEST(sched_only_runs_the_given_up_subepoch_first)
{
	mop_sched  *s = mop_sched_new(2, 4, 7, 0, MOP_PICK_RANDOM);
	mop_task	a,
				b;

	mop_sched_add_model(s, 2);
	CHECK(mop_sched_next(s, 0, &a) == MOP_ASSIGNED);
	CHECK(a.partition == 0 || a.partition == 2);
	mop_sched_abort(s, &a);
	mop_sched_only(s, 0, a.partition);
	/* worker 1 holds partitions 1 and 3: nothing of this model for it */
	CHECK(mop_sched_next(s, 1, &b) == MOP_WAIT);
	CHECK(mop_sched_next(s, 0, &b) == MOP_ASSIGNED && b.partition == a.partition && b.epoch == 0);
	CHECK(mop_sched_complete(s, &b, 1.0) == 0);
	/* released: the model's other partitions again */
	CHECK(mop_sched_next(s, 1, &b) == MOP_ASSIGNED && (b.partition == 1 || b.partition == 3));
	mop_sched_abort(s, &b);
	/* -1 and partitions out of range release it too */
	mop_sched_only(s, 0, b.partition);
	mop_sched_only(s, 0, 9);
	CHECK(mop_sched_next(s, 0, &a) == MOP_ASSIGNED && a.partition != b.partition);
	mop_sched_abort(s, &a);
	mop_sched_only(s, 0, 3);
	mop_sched_only(s, 0, -1);
	CHECK(mop_sched_next(s, 0, &a) == MOP_ASSIGNED);
	mop_sched_free(s);
}

TEST(sched_restore_resumes)
{
	mop_sched  *s = mop_sched_new(3, 3, 9, 0, MOP_PICK_RANDOM);
	int32_t		visited[2] = {2, 0};
	mop_task	t;
	int			got = 0;

	mop_sched_add_model(s, 3);
	mop_sched_restore(s, 0, 1, visited, 2);
	CHECK(mop_sched_epochs_done(s, 0) == 1 && mop_sched_visited(s, 0) == 2);
	/* only partition 1 is left in epoch 1 */
	for (int w = 0; w < 3; w++)
		if (mop_sched_next(s, w, &t) == MOP_ASSIGNED)
		{
			got++;
			CHECK(w == 1 && t.partition == 1 && t.epoch == 1 && t.last_of_epoch);
		}
	CHECK(got == 1);
	mop_sched_free(s);
}

TEST(sched_priority_policy_prefers_high)
{
	mop_sched  *s = mop_sched_new(1, 1, 3, 0, MOP_PICK_PRIORITY);
	mop_task	t;

	for (int i = 0; i < 5; i++)
		mop_sched_add_model(s, 1);
	mop_sched_set_priority(s, 3, 10.0);
	mop_sched_set_priority(s, 1, 5.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 3);
	mop_sched_complete(s, &t, 1);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 1);
	mop_sched_free(s);
}

/* Longest-first ranks unobserved models by their profiled cost (hint). */
TEST(sched_longest_uses_cost_hints)
{
	mop_sched  *s = mop_sched_new(1, 1, 3, 0, MOP_PICK_LONGEST);
	mop_task	t;

	for (int i = 0; i < 4; i++)
		mop_sched_add_model(s, 1);
	mop_sched_set_cost_hint(s, 0, 1.0);
	mop_sched_set_cost_hint(s, 1, 5.0);
	mop_sched_set_cost_hint(s, 2, 2.0);
	mop_sched_set_cost_hint(s, 3, 3.0);
	/* ignored: not a cost */
	mop_sched_set_cost_hint(s, 0, -1.0);
	mop_sched_set_cost_hint(s, 0, NAN);
	mop_sched_set_cost_hint(s, 9, 100.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 1);
	/* it took 10 (hint 5): the others are scaled alike, their order stays */
	mop_sched_complete(s, &t, 10.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 3);
	mop_sched_complete(s, &t, 6.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 2);
	mop_sched_complete(s, &t, 4.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 0);
	mop_sched_free(s);
}

/*
 * Calibration: a hinted model observed at 10 times its hint scales every
 * unobserved hint alike, so a model hinted at 2 (20 once scaled) goes
 * before an unhinted one observed at 15; unscaled it would not.
 */
TEST(sched_cost_hints_are_calibrated)
{
	mop_sched  *s = mop_sched_new(1, 2, 3, 0, MOP_PICK_LONGEST);
	mop_task	t0 = {0, 0, 0, 0},
				t2 = {2, 0, 0, 0},
				t;

	for (int i = 0; i < 3; i++)
		mop_sched_add_model(s, 1);
	mop_sched_set_cost_hint(s, 0, 1.0);
	mop_sched_set_cost_hint(s, 1, 2.0);
	/* models 0 and 2 trained one sub-epoch each: 10 s (hint 1) and 15 s */
	mop_sched_complete(s, &t0, 10.0);
	mop_sched_complete(s, &t2, 15.0);
	/* left: model 0 1 x 10, model 1 2 x 2 x 10 = 40, model 2 1 x 15 */
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED);
	CHECKF(t.model == 1, "picked model %d", t.model);
	mop_sched_free(s);
}

/*
 * A model without a hint among hinted ones: before anything is observed
 * it counts at the hints' mean, then at the mean observed cost.
 */
TEST(sched_cost_hints_mixed_with_unhinted)
{
	mop_sched  *s = mop_sched_new(1, 1, 3, 0, MOP_PICK_LONGEST);
	mop_task	t;

	for (int i = 0; i < 3; i++)
		mop_sched_add_model(s, 1);
	mop_sched_set_cost_hint(s, 0, 1.0);
	mop_sched_set_cost_hint(s, 1, 5.0);
	/* model 2 at the mean hint, 3: model 1 (5) first, then 2 (3), then 0 (1) */
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 1);
	mop_sched_complete(s, &t, 5.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 2);
	mop_sched_complete(s, &t, 1.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 0);
	mop_sched_free(s);
}

/*
 * One model ten times longer than ten others, 2 workers: with the profile
 * it starts at once and the run ends at the bound; without, the scheduler
 * only learns its cost once it has started it, and it often starts late.
 */
TEST(sched_hints_reach_the_bound)
{
	int32_t		epochs[11];
	double		cost[11];
	int			later = 0;

	for (int i = 0; i < 11; i++)
	{
		epochs[i] = 1;
		cost[i] = i == 7 ? 10.0 : 1.0;
	}
	for (uint64_t seed = 1; seed <= 10; seed++)
	{
		mop_sim_result with,
					without;

		CHECK(mop_sim_run(2, 2, 11, epochs, cost, NULL, cost, seed, 0, MOP_PICK_LONGEST, 0, &with) == 0);
		CHECK(mop_sim_run(2, 2, 11, epochs, cost, NULL, NULL, seed, 0, MOP_PICK_LONGEST, 0, &without) == 0);
		CHECKF(fabs(with.makespan - with.lower_bound) < 1e-9, "seed %d: %g against bound %g",
			   (int) seed, with.makespan, with.lower_bound);
		CHECK(without.makespan >= with.makespan - 1e-9);
		later += without.makespan > with.makespan + 1e-9;
	}
	CHECKF(later >= 5, "without hints only %d of 10 runs were longer", later);
}

TEST(sched_priority_ties_started_then_most_work)
{
	mop_sched  *s = mop_sched_new(1, 1, 3, 0, MOP_PICK_PRIORITY);
	mop_task	t;

	CHECK(mop_sched_add_model(s, 1) == 0);
	CHECK(mop_sched_add_model(s, 3) == 1);
	CHECK(mop_sched_add_model(s, 2) == 2);
	CHECK(!mop_sched_started(s, 1));
	/* equal priorities: the unstarted model with the most work left */
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 1);
	CHECK(mop_sched_started(s, 1));
	mop_sched_complete(s, &t, 1);
	/* then the started one, though model 2 ... */
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 1);
	mop_sched_complete(s, &t, 1);
	/* ... a lower priority loses to the tie-break order's next: 2 (2 epochs) before 0 (1) */
	mop_sched_set_priority(s, 1, -1.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.model == 2);
	mop_sched_complete(s, &t, 1);
	mop_sched_free(s);
	/* the random policy ignores both tie-breaks: over seeds, every model comes first sometimes */
	{
		int			first[3] = {0};

		for (uint64_t seed = 1; seed <= 60; seed++)
		{
			mop_sched  *r = mop_sched_new(1, 1, seed, 0, MOP_PICK_RANDOM);

			mop_sched_add_model(r, 1);
			mop_sched_add_model(r, 3);
			mop_sched_add_model(r, 2);
			CHECK(mop_sched_next(r, 0, &t) == MOP_ASSIGNED);
			first[t.model]++;
			mop_sched_free(r);
		}
		CHECK(first[0] > 0 && first[1] > 0 && first[2] > 0);
	}
}

TEST(sched_fifo_trains_models_in_order)
{
	mop_sched  *s = mop_sched_new(2, 2, 3, 0, MOP_PICK_FIFO);
	mop_task	t0,
				t1;

	CHECK(s != NULL);
	for (int i = 0; i < 4; i++)
		mop_sched_add_model(s, 2);
	/* both workers take model 0 and 1 (model 0 cannot be on two workers) */
	CHECK(mop_sched_next(s, 0, &t0) == MOP_ASSIGNED && t0.model == 0);
	CHECK(mop_sched_next(s, 1, &t1) == MOP_ASSIGNED && t1.model == 1);
	mop_sched_complete(s, &t0, 1);
	mop_sched_complete(s, &t1, 1);
	/* swap partitions: model 0 again first, never model 2 while 0 has work */
	CHECK(mop_sched_next(s, 1, &t1) == MOP_ASSIGNED && t1.model == 0);
	CHECK(mop_sched_next(s, 0, &t0) == MOP_ASSIGNED && t0.model == 1);
	mop_sched_complete(s, &t0, 1);
	mop_sched_complete(s, &t1, 1);
	CHECK(mop_sched_next(s, 0, &t0) == MOP_ASSIGNED && t0.model == 0);
	CHECK(mop_sched_epochs_done(s, 0) == 1);
	mop_sched_free(s);
	/* names */
	CHECK(strcmp(mop_pick_name(MOP_PICK_FIFO), "fifo") == 0);
	CHECK(mop_pick_parse("convergence") == MOP_PICK_PRIORITY);
	CHECK(mop_pick_parse("fifo") == MOP_PICK_FIFO);
	CHECK(mop_pick_parse("FIFO") == -1 && mop_pick_parse(NULL) == -1);
	for (int p = MOP_PICK_RANDOM; p <= MOP_PICK_FIFO; p++)
		CHECK(mop_pick_parse(mop_pick_name((mop_pick) p)) == p);
}

TEST(sched_replays_a_sequence)
{
	mop_sched  *s = mop_sched_new(2, 4, 1, 0, MOP_PICK_RANDOM);
	int32_t		seq[6] = {3, 0, 2, 1, 1, 2};	/* epoch 1 complete, epoch 2 half */
	int32_t		got[6];
	int			n = 0;
	mop_task	t;

	mop_sched_add_model(s, 2);
	CHECK(mop_sched_set_sequence(s, 0, seq, 6) == 0);
	CHECK(mop_sched_set_sequence(s, 0, (int32_t[]) {7}, 1) == -1);	/* no partition 7 */
	while (!mop_sched_finished(s) && n < 6)
	{
		int			assigned = 0;

		for (int w = 0; w < 2; w++)
			if (mop_sched_next(s, w, &t) == MOP_ASSIGNED)
			{
				CHECK(t.partition % 2 == w);
				got[n++] = t.partition;
				mop_sched_complete(s, &t, 1.0);
				assigned = 1;
			}
		if (!assigned)
			break;
	}
	CHECK(n == 6 && memcmp(got, seq, sizeof(seq)) == 0);
	CHECK(mop_sched_finished(s));	/* the sequence ended: nothing left */
	mop_sched_free(s);
}

TEST(sched_hold_stops_a_model_mid_epoch)
{
	mop_sched  *s = mop_sched_new(1, 3, 1, 0, MOP_PICK_RANDOM);
	mop_task	t;
	int			n = 0;

	mop_sched_add_model(s, 2);
	mop_sched_hold(s, 0, 4);	/* one epoch and one partition of the next */
	while (mop_sched_next(s, 0, &t) == MOP_ASSIGNED)
	{
		mop_sched_complete(s, &t, 1.0);
		n++;
	}
	CHECK(n == 4 && mop_sched_position(s, 0) == 4);
	CHECK(mop_sched_epochs_done(s, 0) == 1 && mop_sched_visited(s, 0) == 1);
	CHECK(mop_sched_remaining(s, 0) == 0 && mop_sched_finished(s));
	mop_sched_hold(s, 0, -1);	/* released: the rest of its budget */
	CHECK(mop_sched_remaining(s, 0) == 2);
	while (mop_sched_next(s, 0, &t) == MOP_ASSIGNED)
		mop_sched_complete(s, &t, 1.0);
	CHECK(mop_sched_position(s, 0) == 6 && mop_sched_finished(s));
	mop_sched_free(s);
}

TEST(sched_active_counts_models_with_work)
{
	mop_sched  *s = mop_sched_new(1, 1, 1, 0, MOP_PICK_RANDOM);
	mop_task	t;

	mop_sched_add_model(s, 1);
	mop_sched_add_model(s, 1);
	mop_sched_add_model(s, 0);	/* no budget */
	CHECK(mop_sched_active(s) == 2);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED);
	mop_sched_stop(s, t.model);
	CHECK(mop_sched_active(s) == 2);	/* stopped but still busy */
	mop_sched_complete(s, &t, 1.0);
	CHECK(mop_sched_active(s) == 1);
	mop_sched_free(s);
}

/*
 * Placed data: drive a placed scheduler to the end, finishing a random busy
 * worker's task at each step; check that each worker is only given
 * partitions it holds and is up, each model visits each partition once per
 * epoch, and record each model's visiting sequence.  Worker `fail_w` goes
 * down after `fail_at` completions (its task aborted) and comes back after
 * `back_at` (-1: never).  Returns the number of completions.
 */
static int64_t
drive_placed(mop_sched *s, int W, int P, int n, int epochs, const uint8_t *hold,
			 uint64_t seed, int fail_w, int64_t fail_at, int64_t back_at, int32_t *seq)
{
	mop_task	task[64];
	int			busy[64] = {0};
	int			pos[16] = {0};
	int		   *seen = calloc((size_t) n * epochs * P, sizeof(int));
	int64_t		done = 0;
	uint64_t	r = seed;

	for (int i = 0; i < n; i++)
		mop_sched_add_model(s, epochs);
	for (;;)
	{
		int			nbusy = 0,
					k;

		for (int w = 0; w < W; w++)
			if (!busy[w] && mop_sched_next(s, w, &task[w]) == MOP_ASSIGNED)
			{
				CHECKF(hold[w * P + task[w].partition], "worker %d given partition %d it does not hold",
					   w, task[w].partition);
				CHECKF(!mop_sched_worker_down(s, w), "down worker %d given a task", w);
				for (int v = 0; v < W; v++)
					if (v != w && busy[v])
						CHECK(task[v].model != task[w].model);
				busy[w] = 1;
			}
		for (int w = 0; w < W; w++)
			nbusy += busy[w];
		if (nbusy == 0)
			break;
		r = r * 6364136223846793005ULL + 1442695040888963407ULL;
		k = (int) ((r >> 33) % nbusy);
		for (int w = 0; w < W; w++)
			if (busy[w] && k-- == 0)
			{
				busy[w] = 0;
				if (w == fail_w && done == fail_at)
				{
					/* the segment fails mid-task: nothing visited */
					mop_sched_abort(s, &task[w]);
					mop_sched_set_worker_down(s, w, 1);
					done++;
					break;
				}
				mop_sched_complete(s, &task[w], 1.0);
				seen[((size_t) task[w].model * epochs + task[w].epoch) * P + task[w].partition]++;
				if (seq)
					seq[task[w].model * epochs * P + pos[task[w].model]++] = task[w].partition;
				done++;
				break;
			}
		if (fail_w >= 0 && back_at >= 0 && done == back_at)
			mop_sched_set_worker_down(s, fail_w, 0);
	}
	for (int i = 0; i < n; i++)
		for (int e = 0; e < epochs; e++)
			for (int p = 0; p < P; p++)
				CHECKF(seen[((size_t) i * epochs + e) * P + p] == 1,
					   "model %d epoch %d partition %d visited %d times", i, e, p,
					   seen[((size_t) i * epochs + e) * P + p]);
	free(seen);
	return done;
}

/* partition p on segments (p + r) % S, r < replicas; `per` workers per segment */
static void
placement(int S, int per, int P, int replicas, uint8_t *hold)
{
	int			W = S * per;

	memset(hold, 0, (size_t) W * P);
	for (int p = 0; p < P; p++)
		for (int r = 0; r < replicas; r++)
			for (int k = 0; k < per; k++)
				hold[(((p + r) % S) * per + k) * P + p] = 1;
}

TEST(sched_placed_invariants)
{
	uint8_t		hold[16 * 16];

	/* 3 segments x 2 workers, 6 partitions, 2 copies each: more workers than copies */
	for (int det = 0; det <= 1; det++)
		for (uint64_t seed = 1; seed <= 4; seed++)
		{
			mop_sched  *s;

			placement(3, 2, 6, 2, hold);
			s = mop_sched_new_placed(6, 6, hold, seed, det, MOP_PICK_RANDOM);
			CHECK(s != NULL);
			CHECK(drive_placed(s, 6, 6, 7, 3, hold, seed, -1, -1, -1, NULL) == 7 * 3 * 6);
			CHECK(mop_sched_finished(s));
			mop_sched_free(s);
		}
	/* more workers than partitions: 2 segments x 2 workers, 2 partitions on both */
	placement(2, 2, 2, 2, hold);
	{
		mop_sched  *s = mop_sched_new_placed(4, 2, hold, 5, 0, MOP_PICK_LONGEST);

		CHECK(s != NULL);
		CHECK(drive_placed(s, 4, 2, 5, 2, hold, 5, -1, -1, -1, NULL) == 5 * 2 * 2);
		mop_sched_free(s);
	}
}

TEST(sched_placed_rejects_bad_holders)
{
	uint8_t		hold[3 * 3] = {1, 1, 0, 0, 1, 0, 0, 0, 0};	/* partition 2: nobody */

	CHECK(mop_sched_new_placed(3, 3, hold, 1, 0, MOP_PICK_RANDOM) == NULL);
	hold[8] = 1;				/* worker 2 holds partition 2: fine */
	{
		mop_sched  *s = mop_sched_new_placed(3, 3, hold, 1, 0, MOP_PICK_RANDOM);

		CHECK(s != NULL);
		mop_sched_free(s);
	}
	memset(hold, 0, sizeof(hold));
	hold[0] = hold[4] = hold[3] = 1;	/* partition 2 held by nobody */
	CHECK(mop_sched_new_placed(3, 3, hold, 1, 0, MOP_PICK_RANDOM) == NULL);
	CHECK(mop_sched_new_placed(3, 3, NULL, 1, 0, MOP_PICK_RANDOM) == NULL);
}

/*
 * Deterministic mode: the visiting orders do not depend on where the
 * partitions are, on how many copies there are, or on a segment failing --
 * which is what makes a run over segments bit-identical to a local one.
 */
TEST(sched_placed_deterministic_same_orders)
{
	enum {N = 5, E = 2, P = 4};
	int32_t		local[N * E * P],
				placed[N * E * P],
				failed[N * E * P];
	uint8_t		hold[8 * P];
	mop_sched  *s;

	/* one worker per partition, as on one server */
	memset(hold, 0, sizeof(hold));
	for (int p = 0; p < P; p++)
		hold[p * P + p] = 1;
	s = mop_sched_new(P, P, 77, 1, MOP_PICK_RANDOM);
	drive_placed(s, P, P, N, E, hold, 3, -1, -1, -1, local);
	mop_sched_free(s);
	/* two segments of two workers, every partition on both */
	placement(2, 2, P, 2, hold);
	s = mop_sched_new_placed(4, P, hold, 77, 1, MOP_PICK_RANDOM);
	drive_placed(s, 4, P, N, E, hold, 11, -1, -1, -1, placed);
	mop_sched_free(s);
	CHECK(memcmp(local, placed, sizeof(local)) == 0);
	/* ... and with one worker failing for good after 5 sub-epochs */
	s = mop_sched_new_placed(4, P, hold, 77, 1, MOP_PICK_RANDOM);
	drive_placed(s, 4, P, N, E, hold, 19, 1, 5, -1, failed);
	CHECK(mop_sched_finished(s));
	mop_sched_free(s);
	CHECK(memcmp(local, failed, sizeof(local)) == 0);
}

TEST(sched_placed_worker_down)
{
	uint8_t		hold[2 * 2];
	mop_sched  *s;
	mop_task	t;

	/* one copy of each partition, on its own segment */
	placement(2, 1, 2, 1, hold);
	s = mop_sched_new_placed(2, 2, hold, 1, 0, MOP_PICK_RANDOM);
	mop_sched_add_model(s, 1);
	CHECK(mop_sched_unreachable(s) == -1);
	mop_sched_set_worker_down(s, 1, 1);
	CHECK(mop_sched_worker_down(s, 1));
	CHECK(mop_sched_unreachable(s) == 1);		/* partition 1's only copy is down */
	CHECK(mop_sched_next(s, 1, &t) == MOP_WAIT);
	CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.partition == 0);
	mop_sched_complete(s, &t, 1.0);
	CHECK(mop_sched_next(s, 0, &t) == MOP_WAIT);	/* partition 1 waits for its copy */
	CHECK(!mop_sched_finished(s));
	mop_sched_set_worker_down(s, 1, 0);			/* the segment is back */
	CHECK(mop_sched_unreachable(s) == -1);
	CHECK(mop_sched_next(s, 1, &t) == MOP_ASSIGNED && t.partition == 1 && t.last_of_epoch);
	mop_sched_complete(s, &t, 1.0);
	CHECK(mop_sched_finished(s));
	CHECK(mop_sched_unreachable(s) == -1);		/* nothing left to visit */
	mop_sched_free(s);
	/* with two copies, a failed segment costs nothing but its task */
	placement(2, 1, 2, 2, hold);
	s = mop_sched_new_placed(2, 2, hold, 1, 0, MOP_PICK_RANDOM);
	CHECK(drive_placed(s, 2, 2, 3, 2, hold, 8, 0, 2, -1, NULL) == 3 * 2 * 2 + 1);
	mop_sched_free(s);
}

/*
 * Elastic membership: a spare worker that holds nothing gets no task until
 * it is given copies (a server joining mid-run); a worker whose copies are
 * taken away (a server leaving) finishes its task and gets no more; the
 * invariants hold throughout.
 */
TEST(sched_placed_join_and_leave)
{
	enum {W = 3, P = 2};
	uint8_t		hold[W * P] = {1, 1, 0, 0, 0, 0};	/* worker 0 holds both; 1, 2 spares */
	mop_sched  *s = mop_sched_new_placed(W, P, hold, 4, 0, MOP_PICK_RANDOM);
	mop_task	t0,
				t1,
				t2;
	int			visits[2][P] = {{0}};

	CHECK(s != NULL);
	mop_sched_add_model(s, 2);
	mop_sched_add_model(s, 2);
	CHECK(mop_sched_next(s, 1, &t1) == MOP_WAIT);	/* a spare holds nothing */
	CHECK(mop_sched_next(s, 0, &t0) == MOP_ASSIGNED);
	/* worker 1 joins with partition 1, worker 2 with both */
	CHECK(mop_sched_set_holds(s, 1, 1, 1) == 0);
	CHECK(mop_sched_set_holds(s, 2, 0, 1) == 0 && mop_sched_set_holds(s, 2, 1, 1) == 0);
	CHECK(mop_sched_next(s, 2, &t2) == MOP_ASSIGNED);
	CHECK(t2.model != t0.model);
	mop_sched_complete(s, &t0, 1);
	visits[t0.model][t0.partition]++;
	/* worker 0 leaves: it loses both copies */
	CHECK(mop_sched_set_holds(s, 0, 0, 0) == 0 && mop_sched_set_holds(s, 0, 1, 0) == 0);
	CHECK(mop_sched_next(s, 0, &t0) == MOP_WAIT);
	mop_sched_complete(s, &t2, 1);
	visits[t2.model][t2.partition]++;
	for (int guard = 0; guard < 100 && !mop_sched_finished(s); guard++)
		for (int w = 1; w < W; w++)
		{
			mop_task	t;

			if (mop_sched_next(s, w, &t) == MOP_ASSIGNED)
			{
				if (w == 1)
					CHECK(t.partition == 1);
				mop_sched_complete(s, &t, 1);
				visits[t.model][t.partition]++;
			}
		}
	CHECK(mop_sched_finished(s));
	for (int m = 0; m < 2; m++)
		for (int p = 0; p < P; p++)
			CHECKF(visits[m][p] == 2, "model %d partition %d: %d visits in 2 epochs", m, p, visits[m][p]);
	CHECK(mop_sched_set_holds(s, 9, 0, 1) == -1);
	mop_sched_free(s);
	s = mop_sched_new(2, 2, 1, 0, MOP_PICK_RANDOM);
	CHECK(mop_sched_set_holds(s, 0, 0, 1) == -1);	/* not placed */
	mop_sched_free(s);
}

/*
 * Resizing a scheduler that is not placed (mop_set_workers): from 2 workers
 * to 4 and back to 1 mid-run, with tasks in flight across each change.
 * Each model still visits each partition once per epoch, a worker is given
 * only its own partitions (p % W of the moment), workers past W get
 * nothing, and in deterministic mode the models' orders do not change.
 */
static void
resize_case(int deterministic, int32_t *orders)
{
	enum {P = 4, N = 3, E = 3};
	mop_sched  *s = mop_sched_new(2, P, 11, deterministic, MOP_PICK_RANDOM);
	mop_task	busy[8];
	int			has[8] = {0},
				W = 2,
				done = 0,
				pos[N] = {0};
	int			visits[N][E][P] = {{{0}}};

	CHECK(s != NULL);
	for (int i = 0; i < N; i++)
		mop_sched_add_model(s, E);
	for (int round = 0; round < 200 && !mop_sched_finished(s); round++)
	{
		if (done == 4)
			CHECK(mop_sched_set_n_workers(s, (W = 4)) == 0);
		if (done == 12)
			CHECK(mop_sched_set_n_workers(s, (W = 1)) == 0);
		for (int w = 0; w < 4; w++)
		{
			mop_task	t;

			if (has[w])
				continue;
			if (w >= W)
			{
				CHECK(mop_sched_next(s, w, &t) == MOP_DONE);
				continue;
			}
			if (mop_sched_next(s, w, &t) == MOP_ASSIGNED)
			{
				CHECKF(t.partition % W == w, "worker %d of %d given partition %d", w, W, t.partition);
				busy[w] = t;
				has[w] = 1;
			}
		}
		/* finish the lowest busy worker's task: others stay in flight */
		for (int w = 0; w < 4; w++)
			if (has[w])
			{
				visits[busy[w].model][busy[w].epoch][busy[w].partition]++;
				orders[busy[w].model * E * P + pos[busy[w].model]++] = busy[w].partition;
				mop_sched_complete(s, &busy[w], 1);
				has[w] = 0;
				done++;
				break;
			}
	}
	CHECK(mop_sched_finished(s));
	for (int i = 0; i < N; i++)
		for (int e = 0; e < E; e++)
			for (int p = 0; p < P; p++)
				CHECKF(visits[i][e][p] == 1, "model %d epoch %d partition %d: %d visits",
					   i, e, p, visits[i][e][p]);
	CHECK(mop_sched_set_n_workers(s, 0) == -1);
	CHECK(mop_sched_set_n_workers(s, P + 1) == -1);
	mop_sched_free(s);
}

TEST(sched_set_n_workers)
{
	int32_t		a[3 * 3 * 4],
				b[3 * 3 * 4];
	uint8_t		hold[2] = {1, 1};
	mop_sched  *s;

	resize_case(0, a);
	resize_case(1, a);
	/* deterministic: the same orders as a run that keeps its 2 workers */
	{
		mop_sched  *k = mop_sched_new(2, 4, 11, 1, MOP_PICK_RANDOM);

		for (int i = 0; i < 3; i++)
			for (int e = 0; e < 3; e++)
				for (int j = 0; j < 4; j++)
					b[(i * 3 + e) * 4 + j] = mop_sched_order(k, i, e, j);
		mop_sched_free(k);
	}
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	s = mop_sched_new_placed(1, 2, hold, 1, 0, MOP_PICK_RANDOM);
	CHECK(mop_sched_set_n_workers(s, 1) == -1);	/* placed: mop_sched_set_holds */
	mop_sched_free(s);
}
