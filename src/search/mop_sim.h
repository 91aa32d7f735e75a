/*
 * mop_sim.h -- discrete-event simulation of the MOP scheduler: W workers, a cost
 * per model per sub-epoch, no server.  Used by the unit tests (invariants,
 * determinism) and by the scale benchmark (makespan against its lower bound).
 */
#ifndef MOP_SIM_H
#define MOP_SIM_H

#include "mop_sched.h"

typedef struct mop_sim_hop
{
	int32_t		model,
				partition,
				epoch,
				worker;
	double		start,
				finish;
} mop_sim_hop;

typedef struct mop_sim_result
{
	double		makespan;
	double		total_work;
	double		lower_bound;	/* max(total work / W, longest model's work) */
	int64_t		n_hops;
	mop_sim_hop *hops;			/* malloc'd, n_hops entries (NULL if not kept) */
	int			deadlock;		/* 1 if work remained but nothing could run */
} mop_sim_result;

/*
 * Simulate n_models models with epochs[i] epochs and sub-epoch cost
 * cost[i] * (partition factor) on W workers and P partitions.  part_factor
 * may be NULL (all partitions equal).  Returns 0 on success.
 */
int			mop_sim_run(int W, int P, int n_models, const int32_t *epochs,
						const double *cost, const double *part_factor,
						uint64_t seed, int deterministic, mop_pick pick,
						int keep_hops, mop_sim_result *res);

#endif
