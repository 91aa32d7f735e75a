/*
 * test_plan.c -- the planner's arithmetic on synthetic profiles: a
 * configuration's sub-epoch, epoch and the hop cost model, a run's own
 * cost, the simulated makespan for 1..N workers with its knee, and the
 * workers workers => 'auto' chooses.
 */
#include "harness.h"
#include "../../src/search/mop_asha.h"
#include "../../src/search/mop_plan.h"

#define MiB (1024.0 * 1024.0)

static const mop_plan_costs costs = {0.002, 0.010, 0.001, 0.050, 0};

TEST(plan_config_cost)
{
	mop_plan_profile p = {1000.0, 2000.0, 2 * MiB};
	mop_plan_cost c;

	/* 4000 training rows in 4 partitions, 1000 validation rows */
	mop_plan_config_cost(&costs, &p, 4, 0, 4000, 1000, &c);
	CHECKF(close_enough(c.train_s, 1.0, 1e-12), "train %g", c.train_s);
	/* 2 ms + 2 MiB at 10 ms per MiB */
	CHECKF(close_enough(c.hop_s, 0.022, 1e-12), "hop %g", c.hop_s);
	CHECK(close_enough(c.sub_epoch_s, 1.022, 1e-12));
	CHECK(close_enough(c.valid_s, 0.5, 1e-12));
	/* 4 sub-epochs, validation, the epoch's row and half a checkpoint */
	CHECKF(close_enough(c.epoch_s, 4 * 1.022 + 0.5 + 0.001 + 0.010, 1e-12), "epoch %g", c.epoch_s);
}

TEST(plan_config_cost_on_segments)
{
	mop_plan_costs k = costs;
	mop_plan_profile p = {1000.0, 2000.0, 2 * MiB};
	mop_plan_cost local,
				half,
				all,
				over;

	/* 4 ms per MiB there and back: 8 ms for 2 MiB on every remote hop */
	k.segment_s_per_mb = 0.004;
	mop_plan_config_cost(&k, &p, 4, 0, 4000, 1000, &local);
	mop_plan_config_cost(&k, &p, 4, 0.5, 4000, 1000, &half);
	mop_plan_config_cost(&k, &p, 4, 1, 4000, 1000, &all);
	mop_plan_config_cost(&k, &p, 4, 7, 4000, 1000, &over);
	CHECK(close_enough(local.hop_s, 0.022, 1e-12));
	CHECKF(close_enough(half.hop_s, 0.026, 1e-12), "half %g", half.hop_s);
	CHECKF(close_enough(all.hop_s, 0.030, 1e-12), "all %g", all.hop_s);
	CHECK(close_enough(over.hop_s, all.hop_s, 1e-12));
	/* every sub-epoch of the epoch pays it; validation and the epoch's end do not */
	CHECK(close_enough(all.epoch_s - local.epoch_s, 4 * 0.008, 1e-12));
	CHECK(close_enough(all.train_s, local.train_s, 1e-12));
}

TEST(plan_config_cost_without_hops)
{
	mop_plan_costs zero = {0, 0, 0, 0, 0};
	mop_plan_profile p = {500.0, 1000.0, 64 * MiB};
	mop_plan_cost c;

	/* no hop cost: the profile alone, as before the cost model */
	mop_plan_config_cost(&zero, &p, 3, 0, 3000, 600, &c);
	CHECK(c.hop_s == 0);
	CHECK(close_enough(c.epoch_s, 3000 / 500.0 + 600 / 1000.0, 1e-12));
	CHECK(close_enough(c.sub_epoch_s, 2.0, 1e-12));
}

TEST(plan_config_cost_unprofiled)
{
	mop_plan_profile p = {0, 0, 1 * MiB};
	mop_plan_cost c;

	mop_plan_config_cost(&costs, &p, 2, 0, 1000, 100, &c);
	CHECK(c.train_s == 0 && c.hop_s == 0 && c.sub_epoch_s == 0 && c.epoch_s == 0);
	p.train_rows_s = 100;
	mop_plan_config_cost(&costs, &p, 0, 0, 1000, 100, &c);
	CHECK(c.epoch_s == 0);
}

TEST(plan_defaults)
{
	mop_plan_costs k;

	mop_plan_default_costs(&k);
	CHECK(close_enough(k.hop_s, MOP_PLAN_HOP_MS / 1000.0, 1e-12));
	CHECK(close_enough(k.state_s_per_mb, MOP_PLAN_STATE_MS_PER_MB / 1000.0, 1e-12));
	CHECK(close_enough(k.epoch_s, MOP_PLAN_EPOCH_MS / 1000.0, 1e-12));
	CHECK(close_enough(k.run_s, MOP_PLAN_RUN_MS / 1000.0, 1e-12));
	CHECK(close_enough(k.segment_s_per_mb, MOP_PLAN_SEGMENT_MS_PER_MB / 1000.0, 1e-12));
	CHECK(k.hop_s > 0 && k.state_s_per_mb > 0);
}

TEST(plan_run_overhead)
{
	double		bytes[3] = {1 * MiB, 2 * MiB, 0};

	/* the fixed cost, and each first checkpoint written once (half) */
	CHECK(close_enough(mop_plan_run_overhead(&costs, 3, bytes), 0.050 + 0.005 * 3, 1e-12));
	CHECK(close_enough(mop_plan_run_overhead(&costs, 0, bytes), 0.050, 1e-12));
}

TEST(plan_workers_even)
{
	int32_t		ep[4] = {1, 1, 1, 1};
	double		es[4] = {2, 2, 2, 2},
				mk[5],
				lb[5];
	int			knee = 0;

	/* 4 equal models over 2 partitions: 2 workers halve it, more idle */
	CHECK(mop_plan_workers(2, 4, ep, es, 0, 0.5, MOP_PICK_RANDOM, 4, mk, lb, &knee) == 0);
	CHECKF(close_enough(mk[1], 8.5, 1e-9), "1 worker %g", mk[1]);
	CHECKF(close_enough(mk[2], 4.5, 1e-9), "2 workers %g", mk[2]);
	CHECK(close_enough(mk[3], mk[2], 1e-9) && close_enough(mk[4], mk[2], 1e-9));
	CHECKF(knee == 2, "knee %d", knee);
	for (int w = 1; w <= 4; w++)
		CHECKF(mk[w] >= lb[w] - 1e-9, "%d workers: %g under its bound %g", w, mk[w], lb[w]);
}

TEST(plan_workers_one_long_model)
{
	int32_t		ep[3] = {1, 1, 1};
	double		es[3] = {10, 1, 1},
				mk[3],
				lb[3];
	int			knee = 0;

	/* the long model bounds 2 workers: 12 s against 10 s is 60 % efficient */
	CHECK(mop_plan_workers(2, 3, ep, es, 0, 0, MOP_PICK_LONGEST, 2, mk, lb, &knee) == 0);
	CHECK(close_enough(mk[1], 12, 1e-9));
	CHECK(mk[2] >= 10 - 1e-9);
	CHECKF(knee == 1, "knee %d", knee);
}

TEST(plan_workers_run_cost_moves_the_knee)
{
	int32_t		ep[4] = {1, 1, 1, 1};
	double		es[4] = {0.1, 0.1, 0.1, 0.1},
				mk[3],
				lb[3];
	int			knee = 0;

	/* short runs: the run's own second (not parallel) makes 2 workers not worth it */
	CHECK(mop_plan_workers(2, 4, ep, es, 0, 0, MOP_PICK_RANDOM, 2, mk, lb, &knee) == 0);
	CHECK(knee == 2);
	CHECK(mop_plan_workers(2, 4, ep, es, 0, 1.0, MOP_PICK_RANDOM, 2, mk, lb, &knee) == 0);
	CHECKF(knee == 1, "knee %d (%g against %g)", knee, mk[1], mk[2]);
	CHECK(close_enough(mk[1], 1.4, 1e-9) && close_enough(mk[2], 1.2, 1e-9));
}

TEST(plan_workers_edges)
{
	int32_t		ep[1] = {1};
	double		es[1] = {1},
				mk[3],
				lb[3];
	int			knee = 0;

	CHECK(mop_plan_workers(0, 1, ep, es, 0, 0, MOP_PICK_RANDOM, 2, mk, lb, &knee) == -1);
	CHECK(mop_plan_workers(2, 1, ep, es, 0, 0, MOP_PICK_RANDOM, 0, mk, lb, &knee) == -1);
	/* nothing profiled: no makespan, knee 1 */
	knee = 0;
	CHECK(mop_plan_workers(2, 0, ep, es, 0, 0, MOP_PICK_RANDOM, 2, mk, lb, &knee) == 0);
	CHECK(knee == 1 && mk[1] == 0 && mk[2] == 0);
}

TEST(plan_auto_workers)
{
	mop_plan_auto_limit why;

	/* (knee, cores, partitions, configurations, processes) */
	CHECK(mop_plan_auto_workers(4, 2, 8, 16, 7, &why) == 2 && why == MOP_AUTO_CORES);
	CHECK(mop_plan_auto_workers(2, 8, 8, 16, 7, &why) == 2 && why == MOP_AUTO_KNEE);
	/* at a tie, the cap (what the user can change) */
	CHECK(mop_plan_auto_workers(2, 2, 8, 16, 7, &why) == 2 && why == MOP_AUTO_CORES);
	CHECK(mop_plan_auto_workers(4, 8, 4, 16, 7, &why) == 4 && why == MOP_AUTO_PARTITIONS);
	CHECK(mop_plan_auto_workers(4, 8, 3, 16, 7, &why) == 3 && why == MOP_AUTO_PARTITIONS);
	CHECK(mop_plan_auto_workers(4, 8, 8, 3, 7, &why) == 3 && why == MOP_AUTO_CONFIGS);
	CHECK(mop_plan_auto_workers(4, 8, 8, 0, 7, &why) == 4 && why == MOP_AUTO_KNEE);
	CHECK(mop_plan_auto_workers(4, 8, 8, 16, 2, &why) == 2 && why == MOP_AUTO_PROCESSES);
	/* the smallest cap wins, whatever its place */
	CHECK(mop_plan_auto_workers(8, 3, 5, 16, 4, &why) == 3 && why == MOP_AUTO_CORES);
	/* never under one */
	CHECK(mop_plan_auto_workers(4, 8, 8, 16, 0, &why) == 1 && why == MOP_AUTO_PROCESSES);
	CHECK(mop_plan_auto_workers(1, 0, 0, 0, 7, &why) == 1 && why == MOP_AUTO_KNEE);
}

TEST(plan_asha_rungs)
{
	mop_plan_rung r[8];

	/* r_min 1, R 9, eta 3, 20 trials: rungs 1, 3, 9 */
	CHECK(mop_plan_asha(1, 9, 3, 20, NULL, 0) == 3);
	CHECK(mop_plan_asha(1, 9, 3, 20, r, 8) == 3);
	CHECK(r[0].rung == 0 && r[0].resource == 1 && r[0].configs == 20 && r[0].epochs == 20);
	CHECK(r[0].configs_max == 20 && r[0].epochs_max == 20);
	/* floor(20/3) = 6 resume for 2 more epochs; at most 20 - 2 = 18 */
	CHECKF(r[1].resource == 3 && r[1].configs == 6 && r[1].epochs == 12, "%d %d %lld",
		   r[1].resource, r[1].configs, (long long) r[1].epochs);
	CHECK(r[1].configs_max == 18 && r[1].epochs_max == 36);
	CHECK(r[2].resource == 9 && r[2].configs == 2 && r[2].epochs == 12);
	CHECK(r[2].configs_max == 16 && r[2].epochs_max == 96);
	/* R not a power of eta: the top rung is R itself */
	CHECK(mop_plan_asha(2, 10, 2, 5, r, 8) == 4);
	CHECK(r[0].resource == 2 && r[1].resource == 4 && r[2].resource == 8 && r[3].resource == 10);
	CHECK(r[1].configs == 2 && r[2].configs == 1 && r[3].configs == 0);
	CHECK(r[1].configs_max == 4 && r[2].configs_max == 3 && r[3].configs_max == 2);
	CHECK(r[3].epochs_max == 4 && r[3].epochs == 0);
	/* one rung: min_resource = max_resource */
	CHECK(mop_plan_asha(4, 4, 3, 7, r, 8) == 1 && r[0].epochs == 28 && r[0].epochs_max == 28);
	/* cap: the rows written, the count returned */
	CHECK(mop_plan_asha(1, 9, 3, 20, r, 1) == 3 && r[0].configs == 20);
	CHECK(mop_plan_asha(0, 9, 3, 20, r, 8) == -1);
	CHECK(mop_plan_asha(1, 9, 1, 20, r, 8) == -1);
	CHECK(mop_plan_asha(10, 9, 3, 20, r, 8) == -1);
	CHECK(mop_plan_asha(1, 9, 3, 0, r, 8) == -1);
}

/* ASHA driven on one worker: the epochs it trains with these scores */
static int64_t
asha_epochs(int32_t r_min, int32_t R, int32_t eta, int32_t trials, int order, uint64_t seed)
{
	mop_asha   *a = mop_asha_new(r_min, R, eta, trials);
	mop_action	act;
	int32_t		at[64] = {0};
	int64_t		epochs = 0;
	int			steps = 0;

	while (mop_asha_next(a, &act) == MOP_POLL_ACTION && steps++ < 10000)
	{
		double		score;

		if (act.kind == MOP_ACT_STOP)
			continue;
		epochs += act.resource - at[act.trial];
		at[act.trial] = act.resource;
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		/* order 1: each trial better than all before it; 0: at random */
		score = order ? act.trial : (double) (seed >> 11) / 9007199254740992.0;
		mop_asha_report(a, act.trial, act.resource, score);
	}
	mop_asha_free(a);
	return epochs;
}

TEST(plan_asha_bounds_hold)
{
	struct
	{
		int32_t		r_min,
					R,
					eta,
					trials;
	}			c[] = {{1, 9, 3, 20}, {1, 27, 3, 40}, {2, 16, 2, 17}, {1, 10, 4, 30}};

	for (int i = 0; i < (int) (sizeof(c) / sizeof(c[0])); i++)
	{
		mop_plan_rung r[16];
		int32_t		n = mop_plan_asha(c[i].r_min, c[i].R, c[i].eta, c[i].trials, r, 16);
		int64_t		lo = 0,
					hi = 0,
					best_first;

		for (int k = 0; k < n; k++)
		{
			lo += r[k].epochs;
			hi += r[k].epochs_max;
		}
		for (uint64_t s = 1; s <= 20; s++)
		{
			int64_t		e = asha_epochs(c[i].r_min, c[i].R, c[i].eta, c[i].trials, 0, s);

			CHECKF(e >= lo && e <= hi, "case %d seed %d: %lld epochs outside %lld..%lld",
				   i, (int) s, (long long) e, (long long) lo, (long long) hi);
		}
		/* each result better than those before: the upper bound is reached */
		best_first = asha_epochs(c[i].r_min, c[i].R, c[i].eta, c[i].trials, 1, 0);
		CHECKF(best_first == hi, "case %d: %lld epochs, bound %lld", i, (long long) best_first, (long long) hi);
	}
}

TEST(plan_trials)
{
	double		mk[3],
				lb[3];
	int			knee = 0;
	double		one[2] = {1.0, 1.0},
				threads[2] = {0.5, 1.0};

	/* 4 trials of 2 epochs at 1 s over 2 partitions; 50 ms a run, 1 MiB states */
	CHECK(mop_plan_trials(&costs, 2, 4, 2, one, MiB, MOP_PICK_RANDOM, 2, mk, lb, &knee) == 0);
	/* 8 s of epochs, the run's 50 ms and 4 first checkpoints of 5 ms */
	CHECKF(close_enough(mk[1], 8.07, 1e-9), "1 worker %g", mk[1]);
	/* 2 workers: half the epochs at best, the scheduler's random picks may idle one sub-epoch */
	CHECKF(mk[2] >= 4.07 - 1e-9 && mk[2] <= 4.57 + 1e-9 && lb[2] <= mk[2] + 1e-9, "2 workers %g", mk[2]);
	CHECK(knee == 2);
	CHECK(mop_plan_trials(&costs, 2, 4, 0, one, MiB, MOP_PICK_RANDOM, 2, mk, lb, &knee) == -1);
	CHECK(mop_plan_trials(&costs, 2, 0, 2, one, MiB, MOP_PICK_RANDOM, 2, mk, lb, &knee) == 0 && mk[1] == 0);
	/* one worker with both cores trains an epoch in 0.5 s, two with one each in 1 s */
	CHECK(mop_plan_trials(&costs, 2, 4, 2, threads, MiB, MOP_PICK_RANDOM, 2, mk, lb, &knee) == 0);
	CHECKF(close_enough(mk[1], 4.07, 1e-9), "1 worker, 2 threads %g", mk[1]);
	CHECKF(mk[2] >= 4.07 - 1e-9, "2 workers, 1 thread each %g", mk[2]);
	CHECKF(knee == 1, "knee %d: a second worker gains nothing", knee);
}

/* Each worker count its own epoch times (stride): w's row is used for w workers. */
TEST(plan_workers_per_worker_count)
{
	int32_t		ep[2] = {1, 1};
	/* w = 1: 2 s and 4 s an epoch (all cores); w = 2: 3 s and 6 s (half each) */
	double		es[4] = {2, 4, 3, 6},
				mk[3],
				lb[3];
	int			knee = 0;

	CHECK(mop_plan_workers(1, 2, ep, es, 2, 0, MOP_PICK_LONGEST, 2, mk, lb, &knee) == 0);
	CHECKF(close_enough(mk[1], 6, 1e-9), "1 worker %g", mk[1]);
	/* one partition: the second worker idles, and the models train at w = 2's speed */
	CHECKF(close_enough(mk[2], 9, 1e-9), "2 workers %g", mk[2]);
	CHECK(knee == 1);
}

TEST(plan_threads)
{
	/* the cores shared out, at least 1, at most 64 */
	CHECK(mop_plan_threads_per_worker(8, 1) == 8);
	CHECK(mop_plan_threads_per_worker(8, 3) == 2);
	CHECK(mop_plan_threads_per_worker(2, 4) == 1);
	CHECK(mop_plan_threads_per_worker(256, 1) == 64);
	CHECK(mop_plan_threads_per_worker(0, 1) == 1 && mop_plan_threads_per_worker(4, 0) == 1);
	/* exact at the two measurements */
	CHECK(close_enough(mop_plan_rate_at_threads(100, 300, 4, 1), 100, 1e-12));
	CHECK(close_enough(mop_plan_rate_at_threads(100, 300, 4, 4), 300, 1e-12));
	CHECK(close_enough(mop_plan_rate_at_threads(100, 300, 4, 8), 300, 1e-12));
	/* 1/100 at one thread, 1/300 at four: f = (1 - 1/3) / (3/4) = 8/9; at 2: 1/100 (1/9 + 4/9) */
	CHECKF(close_enough(mop_plan_rate_at_threads(100, 300, 4, 2), 180, 1e-9), "%g",
		   mop_plan_rate_at_threads(100, 300, 4, 2));
	/* no gain measured: the same at every count; slower with more: clamped to no gain */
	CHECK(close_enough(mop_plan_rate_at_threads(100, 100, 4, 2), 100, 1e-12));
	CHECK(close_enough(mop_plan_rate_at_threads(100, 80, 4, 2), 100, 1e-12));
	/* super-linear: clamped to a perfectly parallel share */
	CHECK(close_enough(mop_plan_rate_at_threads(100, 500, 4, 2), 200, 1e-9));
	/* nothing at n threads, or one core: the one-thread speed */
	CHECK(close_enough(mop_plan_rate_at_threads(100, 0, 4, 2), 100, 1e-12));
	CHECK(close_enough(mop_plan_rate_at_threads(100, 300, 1, 2), 100, 1e-12));
	CHECK(mop_plan_rate_at_threads(0, 300, 4, 2) == 0);
}
