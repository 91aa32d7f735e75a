/*
 * test_sim_segments.c -- the simulator over segments (mop_sim_run_segments):
 * MOP's invariants when segments fail, come back and join; deterministic
 * visiting orders that do not depend on outages; a partition lost for good
 * reported as a deadlock; the lower bound.  And the placed scheduler's
 * choice of partition, which the outages exercise.
 */
#include "harness.h"
#include "../../src/search/mop_sched.h"
#include "../../src/search/mop_sim.h"

/* A configuration: S segments of `per` workers, P partitions, n models. */
static mop_sim_segments
config(int S, int per, int P, int replicas, int n, int32_t *epochs, double *cost,
	   uint64_t seed, int deterministic, mop_pick pick)
{
	mop_sim_segments c = {0};

	for (int i = 0; i < n; i++)
	{
		epochs[i] = 1 + (int) ((seed + i * 5) % 3);
		cost[i] = 1.0 + (double) ((i * 37 + seed) % 11);
	}
	c.n_segments = S;
	c.workers_per_segment = per;
	c.n_partitions = P;
	c.replicas = replicas;
	c.local_segment = 0;
	c.state_bytes = 1e6;
	c.bandwidth = 1e7;			/* 0.1 s per hop */
	c.latency = 0.05;
	c.n_models = n;
	c.epochs = epochs;
	c.cost = cost;
	c.seed = seed;
	c.deterministic = deterministic;
	c.pick = pick;
	c.keep_hops = 1;
	return c;
}

/* Is segment g down at some time in (a, b)? */
static int
down_during(const mop_sim_segments *c, int g, double a, double b)
{
	for (int j = 0; j < c->n_outages; j++)
	{
		const mop_sim_outage *o = &c->outages[j];
		double		up = o->up < 0 ? INFINITY : o->up;

		if (o->segment == g && a < up && o->down < b)
			return 1;
	}
	return 0;
}

/*
 * MOP's invariants on a finished run over segments: each model visits each
 * partition exactly once per epoch, on a worker whose segment holds a copy
 * and is up for the whole sub-epoch; a model is on one worker at a time and
 * a worker trains one model at a time; epoch e+1 starts after epoch e; a
 * sub-epoch lasts its training plus the network cost off the local segment.
 */
static void
check_segments(const mop_sim_segments *c, const mop_sim_seg_result *r)
{
	int			P = c->n_partitions,
				S = c->n_segments;
	int64_t		expect = 0;
	int		   *seen;
	double		net = c->state_bytes / c->bandwidth + c->latency;

	for (int i = 0; i < c->n_models; i++)
		expect += (int64_t) c->epochs[i] * P;
	CHECKF(r->n_hops == expect, "%lld hops, expected %lld", (long long) r->n_hops,
		   (long long) expect);
	CHECK(!r->deadlock && r->unreachable == -1);
	CHECK(r->makespan >= r->lower_bound - 1e-9);
	seen = calloc((size_t) c->n_models * 8 * P, sizeof(int));
	for (int64_t a = 0; a < r->n_hops; a++)
	{
		const mop_sim_hop *h = &r->hops[a];
		int			g = h->worker / c->workers_per_segment;
		double		want = c->cost[h->model] + (g == c->local_segment ? 0 : net);

		CHECK(h->epoch < 8);
		seen[((size_t) h->model * 8 + h->epoch) * P + h->partition]++;
		CHECKF((g - h->partition % S + S) % S < c->replicas,
			   "segment %d holds no copy of partition %d", g, h->partition);
		CHECKF(!down_during(c, g, h->start, h->finish),
			   "sub-epoch on segment %d while it was down (%g..%g)", g, h->start, h->finish);
		CHECK(close_enough(h->finish - h->start, want, 1e-12));
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
			if (k->model == h->model && k->epoch < h->epoch && k->finish > h->start)
				CHECKF(0, "model %d epoch %d started before epoch %d ended", h->model,
					   h->epoch, k->epoch);
		}
	}
	for (int i = 0; i < c->n_models; i++)
		for (int e = 0; e < c->epochs[i]; e++)
			for (int p = 0; p < P; p++)
				CHECKF(seen[((size_t) i * 8 + e) * P + p] == 1,
					   "model %d epoch %d partition %d visited %d times", i, e, p,
					   seen[((size_t) i * 8 + e) * P + p]);
out:
	free(seen);
}

TEST(simseg_invariants_no_outage)
{
	int32_t		epochs[12];
	double		cost[12];
	mop_sim_seg_result r;

	for (int det = 0; det <= 1; det++)
		for (int pick = MOP_PICK_RANDOM; pick <= MOP_PICK_FIFO; pick++)
		{
			mop_sim_segments c = config(4, 2, 6, 2, 12, epochs, cost, 3 + pick, det, pick);

			CHECK(mop_sim_run_segments(&c, &r) == 0);
			check_segments(&c, &r);
			CHECK(r.n_aborted == 0 && r.wasted_work == 0);
			CHECK(r.network_time > 0);
			free(r.hops);
		}
}

TEST(simseg_invariants_under_failures)
{
	int32_t		epochs[12];
	double		cost[12];
	mop_sim_seg_result r;
	/* one failing for good, one failing and back, one joining late */
	mop_sim_outage out[3] = {{1, 7.5, -1}, {2, 3.0, 20.0}, {3, 0, 11.0}};

	for (int det = 0; det <= 1; det++)
		for (int pick = MOP_PICK_RANDOM; pick <= MOP_PICK_FIFO; pick++)
			for (uint64_t seed = 1; seed <= 3; seed++)
			{
				mop_sim_segments c = config(5, 2, 7, 2, 12, epochs, cost, seed, det, pick);

				c.n_outages = 3;
				c.outages = out;
				CHECK(mop_sim_run_segments(&c, &r) == 0);
				check_segments(&c, &r);
				/* 12 models keep all 10 workers busy: each failure aborts both of its tasks */
				CHECKF(r.n_aborted == 4, "%lld aborted", (long long) r.n_aborted);
				CHECK(r.wasted_work > 0);
				free(r.hops);
			}
}

/* Per-model visiting sequences of a run (completion order is visit order per model). */
static void
visit_orders(const mop_sim_seg_result *r, int n, int E, int P, int32_t *seq)
{
	int			pos[16] = {0};

	for (int64_t h = 0; h < r->n_hops; h++)
	{
		int			m = r->hops[h].model;

		if (pos[m] < E * P)
			seq[m * E * P + pos[m]++] = r->hops[h].partition;
	}
}

TEST(simseg_deterministic_orders)
{
	enum {N = 9, E = 2, P = 6};
	int32_t		epochs[N],
				plain[N * E * P],
				none[N * E * P],
				failed[N * E * P],
				joined[N * E * P];
	double		cost[N];
	mop_sim_result pr;
	mop_sim_seg_result r,
				r2;
	mop_sim_outage fail[2] = {{1, 4.0, -1}, {3, 9.0, 30.0}},
				join[1] = {{2, 0, 15.0}};
	mop_sim_segments c = config(6, 1, P, 2, N, epochs, cost, 21, 1, MOP_PICK_LONGEST);

	for (int i = 0; i < N; i++)
		epochs[i] = E;
	/* the plain simulator, one worker per partition on one server */
	CHECK(mop_sim_run(P, P, N, epochs, cost, NULL, NULL, 21, 1, MOP_PICK_LONGEST, 1, &pr) == 0);
	for (int64_t h = 0, pos[N] = {0}; h < pr.n_hops; h++)
		plain[pr.hops[h].model * E * P + pos[pr.hops[h].model]++] = pr.hops[h].partition;
	free(pr.hops);
	/* segments, no outage */
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	check_segments(&c, &r);
	visit_orders(&r, N, E, P, none);
	/* the same run again: the same schedule, hop for hop */
	CHECK(mop_sim_run_segments(&c, &r2) == 0);
	CHECK(r.n_hops == r2.n_hops && memcmp(r.hops, r2.hops, sizeof(mop_sim_hop) * r.n_hops) == 0);
	free(r.hops);
	free(r2.hops);
	/* failures */
	c.n_outages = 2;
	c.outages = fail;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	check_segments(&c, &r);
	CHECK(r.n_aborted > 0);
	visit_orders(&r, N, E, P, failed);
	CHECK(mop_sim_run_segments(&c, &r2) == 0);
	CHECK(r.n_hops == r2.n_hops && memcmp(r.hops, r2.hops, sizeof(mop_sim_hop) * r.n_hops) == 0);
	free(r.hops);
	free(r2.hops);
	/* a join */
	c.n_outages = 1;
	c.outages = join;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	check_segments(&c, &r);
	visit_orders(&r, N, E, P, joined);
	free(r.hops);

	CHECK(memcmp(plain, none, sizeof(none)) == 0);
	CHECK(memcmp(none, failed, sizeof(none)) == 0);
	CHECK(memcmp(none, joined, sizeof(none)) == 0);
}

/* Asynchronous mode is reproducible from its seed too, outages included. */
TEST(simseg_asynchronous_reproducible)
{
	int32_t		epochs[10];
	double		cost[10];
	mop_sim_seg_result r,
				r2;
	mop_sim_outage out[2] = {{1, 6.0, -1}, {2, 0, 9.0}};
	mop_sim_segments c = config(4, 2, 8, 2, 10, epochs, cost, 5, 0, MOP_PICK_RANDOM);

	c.n_outages = 2;
	c.outages = out;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	CHECK(mop_sim_run_segments(&c, &r2) == 0);
	check_segments(&c, &r);
	CHECK(r.n_hops == r2.n_hops && memcmp(r.hops, r2.hops, sizeof(mop_sim_hop) * r.n_hops) == 0);
	CHECK(r.makespan == r2.makespan && r.wasted_work == r2.wasted_work);
	free(r.hops);
	free(r2.hops);
}

TEST(simseg_lost_partition_deadlocks)
{
	int32_t		epochs[6];
	double		cost[6];
	mop_sim_seg_result r;
	mop_sim_outage out[1] = {{2, 5.0, -1}};

	for (int det = 0; det <= 1; det++)
	{
		/* one copy: partition 2 (and 6) only on segment 2, which never comes back */
		mop_sim_segments c = config(4, 1, 8, 1, 6, epochs, cost, 9, det, MOP_PICK_RANDOM);

		c.n_outages = 1;
		c.outages = out;
		CHECK(mop_sim_run_segments(&c, &r) == 0);
		CHECK(r.deadlock == 1);
		CHECKF(r.unreachable == 2 || r.unreachable == 6, "unreachable %d", r.unreachable);
		CHECK(r.n_hops < 6 * 8 * 3);
		for (int64_t h = 0; h < r.n_hops; h++)
			CHECK(r.hops[h].worker != 2 || r.hops[h].finish <= 5.0);
		free(r.hops);

		/* two copies: the run finishes */
		c = config(4, 1, 8, 2, 6, epochs, cost, 9, det, MOP_PICK_RANDOM);
		c.n_outages = 1;
		c.outages = out;
		CHECK(mop_sim_run_segments(&c, &r) == 0);
		check_segments(&c, &r);
		free(r.hops);

		/* one copy, but the segment comes back: the run waits for it and finishes */
		out[0].up = 40.0;
		c = config(4, 1, 8, 1, 6, epochs, cost, 9, det, MOP_PICK_RANDOM);
		c.n_outages = 1;
		c.outages = out;
		CHECK(mop_sim_run_segments(&c, &r) == 0);
		check_segments(&c, &r);
		free(r.hops);
		out[0].up = -1;
	}
	/* every segment down for good from the start: nothing runs, no hang */
	{
		mop_sim_outage all[2] = {{0, 0, -1}, {1, 0, -1}};
		mop_sim_segments c = config(2, 1, 2, 2, 3, epochs, cost, 1, 0, MOP_PICK_RANDOM);

		c.n_outages = 2;
		c.outages = all;
		CHECK(mop_sim_run_segments(&c, &r) == 0);
		CHECK(r.deadlock == 1 && r.n_hops == 0 && r.makespan == 0);
		CHECK(r.unreachable >= 0);
		CHECK(isinf(r.lower_bound));
		free(r.hops);
	}
}

TEST(simseg_lower_bound)
{
	int32_t		epochs[4] = {1, 1, 1, 1};
	double		cost[4] = {1, 1, 1, 1};
	mop_sim_seg_result r;
	mop_sim_segments c = {0};
	mop_sim_outage out[1];

	/* 4 models x 2 partitions x 1 s on 2 segments: 8 s of work, 2 workers */
	c.n_segments = 2;
	c.workers_per_segment = 1;
	c.n_partitions = 2;
	c.replicas = 2;
	c.local_segment = -1;
	c.n_models = 4;
	c.epochs = epochs;
	c.cost = cost;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	CHECK(close_enough(r.total_work, 8, 1e-12) && close_enough(r.lower_bound, 4, 1e-12));
	CHECK(close_enough(r.makespan, 4, 1e-12));
	/* segment 1 down for good from the start: one worker for 8 s of work */
	out[0] = (mop_sim_outage) {1, 0, -1};
	c.n_outages = 1;
	c.outages = out;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	CHECK(close_enough(r.lower_bound, 8, 1e-12) && close_enough(r.makespan, 8, 1e-12));
	/*
	 * segment 1 joins at 2 s: 1 x 2 + 2 x (T - 2) = 8, T = 5; a greedy
	 * schedule may be a sub-epoch late (two models left for two workers,
	 * one of them with both partitions to do)
	 */
	out[0].up = 2;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	CHECK(close_enough(r.lower_bound, 5, 1e-12));
	CHECK(r.makespan >= 5 - 1e-12 && r.makespan <= 6 + 1e-12);
	/* both down until 3 s: the bound starts there */
	{
		mop_sim_outage two[2] = {{0, 0, 3}, {1, 0, 3}};

		c.n_outages = 2;
		c.outages = two;
		CHECK(mop_sim_run_segments(&c, &r) == 0);
		CHECK(close_enough(r.lower_bound, 7, 1e-12) && close_enough(r.makespan, 7, 1e-12));
		c.n_outages = 0;
	}
	/* network: 0.5 s a hop everywhere, 12 s of work */
	c.state_bytes = 4;
	c.bandwidth = 10;
	c.latency = 0.1;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	CHECK(close_enough(r.total_work, 12, 1e-12) && close_enough(r.lower_bound, 6, 1e-12));
	CHECK(close_enough(r.network_time, 4, 1e-12));
	/* segment 0 local and holding both partitions: the bound counts no network */
	c.local_segment = 0;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	CHECK(close_enough(r.total_work, 8, 1e-12) && close_enough(r.lower_bound, 4, 1e-12));
	CHECK(r.makespan >= r.lower_bound);
	/* a long model: the chain bounds it */
	epochs[0] = 6;
	c.local_segment = -1;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	CHECK(close_enough(r.lower_bound, 6 * 2 * 1.5, 1e-12));
	epochs[0] = 1;
}

TEST(simseg_rejects_bad_config)
{
	int32_t		epochs[2] = {1, 1};
	double		cost[2] = {1, 1};
	mop_sim_seg_result r;
	mop_sim_segments c = config(3, 1, 3, 2, 2, epochs, cost, 1, 0, MOP_PICK_RANDOM);
	mop_sim_outage bad[1] = {{0, 5, 4}};	/* back before it fails */

	c.keep_hops = 0;
	epochs[0] = epochs[1] = 1;
	CHECK(mop_sim_run_segments(&c, &r) == 0);
	CHECK(r.hops == NULL && r.n_hops == 2 * 3);
	c.replicas = 4;				/* more copies than segments */
	CHECK(mop_sim_run_segments(&c, &r) == -1);
	c.replicas = 2;
	c.n_outages = 1;
	c.outages = bad;
	CHECK(mop_sim_run_segments(&c, &r) == -1);
	bad[0] = (mop_sim_outage) {3, 1, -1};	/* no such segment */
	CHECK(mop_sim_run_segments(&c, &r) == -1);
	c.n_outages = 0;
	c.n_partitions = 2;			/* segment 2 holds nothing with 1 copy: an idle spare */
	c.replicas = 1;
	CHECK(mop_sim_run_segments(&c, &r) == 0 && !r.deadlock);
	CHECK(mop_sim_run_segments(NULL, &r) == -1);
}

/*
 * The scheduler with placed data, asynchronous: a worker holding two
 * partitions the model needs gives it the one with fewer up copies for the
 * same work waiting; with as many copies, either.
 */
TEST(sched_placed_scarce_copy_first)
{
	/* w0 holds 0 and 1, w1 holds 1, w2 holds 0 */
	uint8_t		hold[3 * 2] = {1, 1, 0, 1, 1, 0};
	int			seen[2] = {0, 0};

	for (uint64_t seed = 1; seed <= 40; seed++)
	{
		mop_sched  *s = mop_sched_new_placed(3, 2, hold, seed, 0, MOP_PICK_RANDOM);
		mop_task	t;

		for (int i = 0; i < 4; i++)
			mop_sched_add_model(s, 1);
		mop_sched_set_worker_down(s, 2, 1);		/* partition 0: one copy up */
		CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED && t.partition == 0);
		mop_sched_abort(s, &t);
		mop_sched_set_worker_down(s, 2, 0);		/* two copies each again */
		CHECK(mop_sched_next(s, 0, &t) == MOP_ASSIGNED);
		seen[t.partition]++;
		mop_sched_free(s);
	}
	CHECK(seen[0] > 0 && seen[1] > 0);
}
