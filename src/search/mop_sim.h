/*
 * mop_sim.h -- discrete-event simulation of the MOP scheduler, no server.
 * Used by the unit tests (invariants, determinism) and by the scale
 * benchmarks (makespan against a lower bound).  Two entry points:
 *
 *   mop_sim_run           W workers owning P partitions (p % W), a cost per
 *                         model per sub-epoch, no network, no failures;
 *   mop_sim_run_segments  servers ("segments") of several workers, each
 *                         partition copied on several segments, a network
 *                         cost per hop, segments failing, coming back and
 *                         joining.
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
 * may be NULL (all partitions equal).  hint may be NULL, or what the
 * scheduler is told each model's sub-epoch costs before it observes one
 * (mop_sched_set_cost_hint; a profile's estimate).  Returns 0 on success.
 */
int			mop_sim_run(int W, int P, int n_models, const int32_t *epochs,
						const double *cost, const double *part_factor,
						const double *hint, uint64_t seed, int deterministic, mop_pick pick,
						int keep_hops, mop_sim_result *res);

/*
 * Segments.  S segments of workers_per_segment workers each; worker w is on
 * segment w / workers_per_segment.  Partition p has `replicas` copies, on
 * segments (p + r) % S for r < replicas (distinct segments: replicas <= S),
 * and every worker of a segment can train on every copy the segment holds.
 * Each segment must hold a partition (P >= S, or enough replicas).
 *
 * A sub-epoch of model i on partition p run on segment g takes
 *   cost[i] * part_factor[p]  +  (g == local_segment ? 0 : net)
 *   net = state_bytes / bandwidth + latency
 * where net is what shipping the model's state to the segment and back costs
 * (state_bytes: the bytes moved per hop, the state there and back; latency:
 * the hop's round trips; bandwidth <= 0: no transfer time).  The network
 * time holds the worker and the model like the training does.
 *
 * Outages: segment `segment` goes down at time `down` and is back at `up`
 * (up < 0: never).  A segment that goes down aborts its workers' tasks in
 * flight (mop_sched_abort: the models are free again, nothing visited; the
 * time they ran is wasted) and its workers get nothing until it is back
 * (mop_sched_set_worker_down).  A segment joining the run at time t is one
 * that holds its copies from the start but is down until t: down = 0,
 * up = t.  Outages of one segment must not overlap; at one instant,
 * segments coming back apply first, then failures in the list's order, and
 * a task that ends at the instant its segment fails counts as done.
 *
 * The run ends when every model has done its epochs, or when nothing runs,
 * nothing can be started and no segment will come back: a deadlock, with
 * `unreachable` a partition some model still needs whose every copy is
 * down for good.
 *
 * Lower bound (lower_bound), for a finished run: the largest of three.
 * Every sub-epoch is counted at its cheapest: its training, plus the
 * network cost unless the local segment holds a copy of its partition;
 * total_work is the sum over all models, epochs and partitions.
 *   bound_capacity   the earliest T by which the workers that are up could
 *                    have done total_work: the smallest T with
 *                      integral over [0, T] of (workers up at t) dt >= total_work
 *                    (total_work / W when no segment is ever down);
 *   bound_placement  the same for each run of consecutive partitions (mod
 *                    S) a .. a + L - 1 and the only segments that hold them,
 *                    a .. a + L + replicas - 2: their work can be done there
 *                    and nowhere else, so a failed segment's neighbours must
 *                    take over its partitions (each partition p counts with
 *                    the partitions p + S, p + 2S, ... that share its
 *                    segments; computed for S <= MOP_SIM_ARC_MAX, else 0);
 *   bound_chain      the longest model's total (a model is on one worker at
 *                    a time), from the first time a segment is up.
 * A bound that cannot be met (no worker up for good) is infinite.  Work
 * lost to aborted tasks is not in the bound: it depends on the schedule,
 * and the ratio makespan / lower_bound counts it as overhead.
 *
 * These bounds know the outages in advance: a scheduler that did would
 * give a segment's partitions to its models before it fails.  One that
 * does not know cannot, and bound_from_outages tells how well it did from
 * where it stood: at each instant a segment fails, comes back or joins,
 * the capacity and placement bounds of the work not done yet (this run's
 * state then; a task in flight counts as done as far as it got), from that
 * instant on; the largest of these.  It is a lower bound on the makespan
 * of any schedule that is in this run's state at that instant, not of
 * every schedule (0 without outages).
 */
#define MOP_SIM_ARC_MAX 4096

typedef struct mop_sim_outage
{
	int32_t		segment;
	double		down;			/* time it goes down (0: down from the start) */
	double		up;				/* time it is back or joins; < 0: never */
} mop_sim_outage;

typedef struct mop_sim_segments
{
	int			n_segments;
	int			workers_per_segment;
	int			n_partitions;
	int			replicas;
	int			local_segment;	/* the segment with no network cost; -1: none */
	double		state_bytes;
	double		bandwidth;		/* bytes per second */
	double		latency;		/* seconds per hop */
	int			n_outages;
	const mop_sim_outage *outages;
	int			n_models;
	const int32_t *epochs;		/* [n_models] */
	const double *cost;			/* [n_models]: one sub-epoch's training time */
	const double *part_factor;	/* [n_partitions], or NULL: all 1 */
	uint64_t	seed;
	int			deterministic;
	mop_pick	pick;
	int			keep_hops;		/* record the completed sub-epochs in hops */
} mop_sim_segments;

typedef struct mop_sim_seg_result
{
	double		makespan;		/* time of the last completed sub-epoch */
	double		lower_bound;	/* the largest of the three below */
	double		bound_capacity;
	double		bound_placement;
	double		bound_chain;
	double		bound_from_outages;
	double		total_work;		/* training + least network time, the bounds' */
	double		network_time;	/* network time of the completed sub-epochs */
	double		wasted_work;	/* time aborted tasks had run, network included */
	int64_t		n_aborted;
	int64_t		n_hops;			/* completed sub-epochs */
	mop_sim_hop *hops;			/* malloc'd, in completion order (NULL if not kept) */
	int			deadlock;		/* 1: work remained that no segment up would ever hold */
	int32_t		unreachable;	/* on a deadlock, such a partition; else -1 */
} mop_sim_seg_result;

/* Simulate a run over segments; 0 on success, -1 on bad arguments or no memory. */
int			mop_sim_run_segments(const mop_sim_segments *cfg, mop_sim_seg_result *res);

#endif
