/*
 * sim_segments.c -- scale benchmark of the MOP scheduler over segments, by
 * simulation (mop_sim_run_segments): 1,000 configurations on 64 segments of
 * one worker each, 64 partitions with 2 copies each (partition p on
 * segments p and p + 1), a network cost per hop, and three scenarios:
 *   none       every segment up from start to end;
 *   fail       3 of the 64 segments (5%) fail for good at random times;
 *   fail+back  the same 3 failures, each segment back 10% of the run later;
 *   join       3 segments down from the start, joining at random times.
 * Reports, for the pick policies random and longest, asynchronous and
 * deterministic: makespan against lower_bound of mop_sim.h (the worker-time
 * the outages take away and which segments hold which partitions, known in
 * advance) -- target: within 10% --, and against bound_from_outages (what
 * no schedule could beat from the state this one was in at each outage);
 * the time aborted tasks had run, how many, the network time as a share of
 * the work, whether the run deadlocked, and the simulation's CPU time.
 *
 * Workload (the project's generator, src/common/splitmix64.h, seed 2026):
 * a model's sub-epoch takes exp(N(ln 3, 0.6)) seconds of training
 * (lognormal, median 3 s, 90% between 1.1 and 8.0 s), the same on every
 * partition; epochs uniform in 1..10.  Network: a 5 MB model state shipped
 * to the segment and back (10 MB) over 1 Gbit/s plus 0.2 ms of latency,
 * 0.0802 s per hop; segment 0 is the coordinator's own (no network).
 * Failure and join times are uniform in [10%, 90%] of the failure-free
 * lower bound; the segments are drawn at random, distinct.
 *
 *   gcc -O2 -Isrc/search test/bench/sim_segments.c src/search/sched.c src/search/sim.c -lm
 *   ./a.out [configurations [segments [seed]]]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mop_sched.h"
#include "mop_sim.h"
#include "../../src/common/splitmix64.h"

static double
unif(uint64_t *s)
{
	return (double) (mop_splitmix64_next(s) >> 11) / 9007199254740992.0;
}

/* standard normal, Box-Muller */
static double
normal(uint64_t *s)
{
	double		u = unif(s),
				v = unif(s);

	return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

int
main(int argc, char **argv)
{
	int			n = argc > 1 ? atoi(argv[1]) : 1000;
	int			S = argc > 2 ? atoi(argv[2]) : 64;
	uint64_t	rs = argc > 3 ? strtoull(argv[3], NULL, 10) : 2026;
	enum {N_FAIL = 3};
	int32_t    *epochs = malloc(sizeof(int32_t) * n);
	double	   *cost = malloc(sizeof(double) * n);
	int			fail_seg[N_FAIL];
	double		fail_at[N_FAIL],
				lb0;
	double		cmin = INFINITY,
				cmax = 0;
	mop_sim_outage out[N_FAIL];
	mop_sim_segments cfg = {0};
	mop_sim_seg_result r;
	static const char *scen[] = {"none", "fail", "fail+back", "join"};
	static const struct {mop_pick pick; int det;} runs[] = {
		{MOP_PICK_RANDOM, 0}, {MOP_PICK_LONGEST, 0},
		{MOP_PICK_RANDOM, 1}, {MOP_PICK_LONGEST, 1},
	};

	if (!epochs || !cost || n < 1 || S < 2 * N_FAIL)
		return 1;
	for (int i = 0; i < n; i++)
	{
		cost[i] = exp(log(3.0) + 0.6 * normal(&rs));
		epochs[i] = 1 + (int) (mop_splitmix64_next(&rs) % 10);
		cmin = fmin(cmin, cost[i]);
		cmax = fmax(cmax, cost[i]);
	}
	cfg.n_segments = S;
	cfg.workers_per_segment = 1;
	cfg.n_partitions = S;
	cfg.replicas = 2;
	cfg.local_segment = 0;
	cfg.state_bytes = 2 * 5e6;
	cfg.bandwidth = 1e9 / 8;
	cfg.latency = 0.2e-3;
	cfg.n_models = n;
	cfg.epochs = epochs;
	cfg.cost = cost;
	cfg.seed = 7;

	/* the failure-free bound (mop_sim.h's), to place the outages mid-run */
	{
		double		total = 0,
					chain = 0,
					net = cfg.state_bytes / cfg.bandwidth + cfg.latency;

		for (int i = 0; i < n; i++)
		{
			double		w = epochs[i] * (S * cost[i] + (S - cfg.replicas) * net);

			total += w;
			chain = fmax(chain, w);
		}
		lb0 = fmax(total / S, chain);
	}
	for (int f = 0; f < N_FAIL; f++)
	{
		int			g,
					dup;

		do
		{
			g = 1 + (int) (mop_splitmix64_next(&rs) % (S - 1));	/* not the coordinator's */
			dup = 0;
			for (int j = 0; j < f; j++)
				dup |= fail_seg[j] == g;
		} while (dup);
		fail_seg[f] = g;
		fail_at[f] = (0.1 + 0.8 * unif(&rs)) * lb0;
	}

	printf("MOP over segments, simulated: %d configurations, %d segments x 1 worker, %d partitions x 2 copies\n",
		   n, S, S);
	printf("sub-epoch training %.2f..%.2f s (lognormal, median 3 s), epochs 1..10; network %.4f s per hop (segment 0 local)\n",
		   cmin, cmax, cfg.state_bytes / cfg.bandwidth + cfg.latency);
	printf("outages at (failure-free bound %.0f s):", lb0);
	for (int f = 0; f < N_FAIL; f++)
		printf(" segment %d at %.0f s%s", fail_seg[f], fail_at[f], f < N_FAIL - 1 ? "," : "\n");
	printf("%-10s %-8s %-13s %10s %10s %7s %10s %7s %8s %5s %6s %5s %6s\n", "scenario", "policy",
		   "mode", "makespan", "bound", "ratio", "from outg", "ratio", "wasted s", "abort", "net %",
		   "dlock", "secs");
	for (int sc = 0; sc < 4; sc++)
		for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++)
		{
			clock_t		t0 = clock();

			for (int f = 0; f < N_FAIL; f++)
			{
				out[f].segment = fail_seg[f];
				out[f].down = sc == 3 ? 0 : fail_at[f];
				out[f].up = sc == 1 ? -1 : sc == 2 ? fail_at[f] + 0.1 * lb0 : fail_at[f];
			}
			cfg.n_outages = sc == 0 ? 0 : N_FAIL;
			cfg.outages = out;
			cfg.pick = runs[k].pick;
			cfg.deterministic = runs[k].det;
			if (mop_sim_run_segments(&cfg, &r) != 0)
			{
				fprintf(stderr, "simulation failed\n");
				return 1;
			}
			printf("%-10s %-8s %-13s %10.1f %10.1f %7.4f %10.1f %7.4f %8.1f %5lld %6.2f %5s %6.2f\n",
				   scen[sc], mop_pick_name(runs[k].pick),
				   runs[k].det ? "deterministic" : "asynchronous", r.makespan, r.lower_bound,
				   r.makespan / r.lower_bound, r.bound_from_outages,
				   r.bound_from_outages > 0 ? r.makespan / r.bound_from_outages : 0, r.wasted_work,
				   (long long) r.n_aborted, 100.0 * r.network_time / r.total_work,
				   r.deadlock ? "yes" : "no", (double) (clock() - t0) / CLOCKS_PER_SEC);
			fflush(stdout);
		}
	free(epochs);
	free(cost);
	return 0;
}
