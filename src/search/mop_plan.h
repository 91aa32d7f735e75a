/*
 * mop_plan.h -- the planner's arithmetic, pure C: from a configuration's
 * profile (training and evaluation speed, the bytes of its state) and the
 * cost model of a hop, what a sub-epoch, an epoch and a run cost; the
 * scheduler's simulator over them for 1..N workers, with the knee; and the
 * workers that workers => 'auto' chooses.  explain.c feeds it profiles
 * measured on the server; the unit tests feed it synthetic ones.
 *
 * The cost model.  Besides its training, every sub-epoch (hop) pays
 *   hop      a fixed cost: the hop's row, the commit and its WAL flush,
 *            the coordinator handing the next task out;
 *   state    a cost per byte of the model's state (weights and optimizer
 *            moments): the checkpoint is read, deserialised, serialised and
 *            written again (TOAST chunks, WAL) on every hop.
 * Every epoch of a model also pays its validation (the validation split at
 * the profiled evaluation speed), a fixed cost (the epoch's row, the
 * validation query) and the write of its best checkpoint (half the state
 * cost: written, not read).  Every run pays a fixed cost (starting the
 * coordinator and the workers, the run's rows) and the first checkpoint of
 * each model (half the state cost each, written by the coordinator one
 * after the other, before any worker trains).
 *
 * A hop on a segment (another server holding the partition) also moves
 * the state there and back: the segment cost per byte of state, from the
 * loopback rate measured in docs/benchmarks.md ("Segments": 11.2 ms for a
 * 2.82 MB state there and back), charged to the share of the hops that
 * train on other servers.
 *
 * The defaults below were measured with test/bench/hop_cost.sql on the
 * 2-vCPU machine of docs/benchmarks.md ("The planner against the run");
 * a server measures its own with that script and sets mop.plan_hop_cost,
 * mop.plan_state_cost, mop.plan_epoch_cost and mop.plan_run_cost.  This is
 * the one place they are written down.
 */
#ifndef MOP_PLAN_H
#define MOP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "mop_sched.h"

#define MOP_PLAN_HOP_MS			2.5		/* per sub-epoch */
#define MOP_PLAN_STATE_MS_PER_MB 9.0	/* per MiB of state, per sub-epoch */
#define MOP_PLAN_EPOCH_MS		1.0		/* per epoch of a model */
#define MOP_PLAN_RUN_MS			60.0	/* per run */
#define MOP_PLAN_SEGMENT_MS_PER_MB 4.2	/* per MiB of state, per hop on a segment */

/* the knee: the most workers still at least this efficient */
#define MOP_PLAN_KNEE_EFFICIENCY 0.8

typedef struct mop_plan_costs
{
	double		hop_s;			/* fixed, per sub-epoch */
	double		state_s_per_mb; /* per MiB (2^20 bytes) of state, per sub-epoch */
	double		epoch_s;		/* fixed, per epoch */
	double		run_s;			/* fixed, per run */
	double		segment_s_per_mb;	/* per MiB of state, a hop on a segment */
} mop_plan_costs;

/* the defaults above, in seconds */
void		mop_plan_default_costs(mop_plan_costs *k);

/* what the planner knows of one configuration */
typedef struct mop_plan_profile
{
	double		train_rows_s;	/* training rows per second; <= 0: not profiled */
	double		eval_rows_s;	/* evaluation rows per second */
	double		state_bytes;	/* the checkpoint: weights and optimizer state */
} mop_plan_profile;

/* what it predicts for it (all 0 when it was not profiled) */
typedef struct mop_plan_cost
{
	double		train_s;		/* one partition's training rows */
	double		hop_s;			/* the hop around them: fixed + state (+ segment) */
	double		sub_epoch_s;	/* train_s + hop_s */
	double		valid_s;		/* the validation split */
	double		epoch_s;		/* P sub-epochs, validation, the epoch's end */
} mop_plan_cost;

/*
 * The cost of a configuration over a dataset of P partitions, train_rows
 * training rows (spread evenly) and valid_rows validation rows; remote:
 * the share (0..1) of its sub-epochs that train on segments (other
 * servers), each of which adds the state's round trip.
 */
void		mop_plan_config_cost(const mop_plan_costs *k, const mop_plan_profile *p,
								 int P, double remote, double train_rows, double valid_rows,
								 mop_plan_cost *out);

/*
 * What a run pays besides its sub-epochs: the fixed cost and the first
 * checkpoint of each of its n models (state_bytes[i]).
 */
double		mop_plan_run_overhead(const mop_plan_costs *k, int n, const double *state_bytes);

/*
 * The run simulated by the scheduler (mop_sim_run, pick policy `pick`)
 * for w = 1..max_w workers over P partitions (a worker owns partitions:
 * min(w, P) of them train): n models, epochs[i] epochs, an epoch of model
 * i taking epoch_s[(w - 1) * stride + i] seconds with w workers (spread
 * evenly over its sub-epochs; stride 0: the same for every w, else each
 * worker count has its own, as when a worker's threads depend on how many
 * workers share the cores), plus `overhead` once.  The scheduler is told
 * each model's cost before it starts (a run's profile).  makespan[w] and
 * bound[w] (arrays of max_w + 1; [0] unused): the predicted time and its
 * lower bound.  *knee: the most workers whose efficiency (makespan[1] /
 * makespan[w] / w) is at least MOP_PLAN_KNEE_EFFICIENCY (1 when n is 0).
 * Returns 0, or -1 when the simulation failed (bad arguments, out of
 * memory, a deadlock).
 */
int			mop_plan_workers(int P, int n, const int32_t *epochs, const double *epoch_s,
							 size_t stride, double overhead, mop_pick pick, int max_w,
							 double *makespan, double *bound, int *knee);

/*
 * The BLAS threads each of `workers` workers gets when the count is
 * automatic: the cores shared out, at least 1, at most 64
 * (mop.threads_per_worker = 0).
 */
int			mop_plan_threads_per_worker(int cores, int workers);

/*
 * A speed (rows per second) at t threads, from the speed measured at one
 * thread (rate_1) and at n threads (rate_n): Amdahl's law through both
 * (the parallel share f from the two, clamped to 0..1; exact at 1 and n).
 * rate_n <= 0 or n <= 1: rate_1 at every t.
 */
double		mop_plan_rate_at_threads(double rate_1, double rate_n, int n, int t);

/* what bounded workers => 'auto' */
typedef enum mop_plan_auto_limit
{
	MOP_AUTO_KNEE = 0,			/* the plan's knee */
	MOP_AUTO_PARTITIONS,		/* the dataset's partitions */
	MOP_AUTO_PROCESSES,			/* max_worker_processes */
	MOP_AUTO_CORES,				/* the server's CPU cores */
	MOP_AUTO_CONFIGS			/* the configurations */
} mop_plan_auto_limit;

/*
 * The workers workers => 'auto' chooses: the knee, capped by the
 * partitions, the worker processes free for workers, the cores and the
 * configurations (a cap <= 0 is none, except the processes); never under
 * 1.  *limit says which bound it: the first cap in that order that is at
 * most the knee, else the knee.
 */
int			mop_plan_auto_workers(int knee, int cores, int partitions, int configs,
								  int processes, mop_plan_auto_limit *limit);

/*
 * ASHA's rungs in epochs (mop_asha.h): rung k trains a configuration to
 * r_k = r_min eta^k epochs for every such value below R, the top rung to R.
 * max_trials configurations start at rung 0.  Rung k + 1 gets
 *   configs      floor(n_k / eta) of rung k's n_k: what every rung promotes
 *                when all of rung 0 has reported before any promotion, and
 *                the fewest ASHA promotes (once nothing runs, every
 *                configuration of the top floor(n_k / eta) of the rung has
 *                been promoted);
 *   configs_max  n_k - (eta - 1) (at least 0): the most.  A promotion takes
 *                a configuration of the top floor(n / eta) of the n results
 *                its rung has then; the j-th worst of the rung's final
 *                results is in the top floor(n / eta) of the results it sees
 *                only when j >= eta, so the eta - 1 worst are never
 *                promoted, and results that arrive each better than all
 *                before it promote all the others.
 * epochs (epochs_max): configs (configs_max) times the epochs the rung adds
 * (r_k - r_{k-1}: a promoted model resumes from its checkpoint).
 */
typedef struct mop_plan_rung
{
	int32_t		rung;			/* k, from 0 */
	int32_t		resource;		/* r_k, epochs */
	int32_t		configs;		/* trained to r_k when each rung promotes 1/eta */
	int32_t		configs_max;	/* at most */
	int64_t		epochs;			/* configs x (r_k - r_{k-1}) */
	int64_t		epochs_max;		/* configs_max x (r_k - r_{k-1}) */
} mop_plan_rung;

/*
 * ASHA's rungs for (r_min, R, eta, max_trials): writes at most cap rows to
 * out (NULL when cap is 0) and returns the number of rungs, so that a
 * first call with cap 0 sizes the array; -1 on bad arguments (r_min < 1,
 * R < r_min, eta < 2, max_trials < 1).
 */
int32_t		mop_plan_asha(int32_t r_min, int32_t R, int32_t eta, int32_t max_trials,
						  mop_plan_rung *out, int32_t cap);

/*
 * n trials of the same epochs (a search whose configurations are not known
 * before it runs: random search, TPE, PBT's population, at the mean epoch
 * of its space) for w = 1..max_w workers, as mop_plan_workers, an epoch
 * taking epoch_s[w - 1] seconds with w workers; overhead: the run's fixed
 * cost and n first checkpoints of state_bytes each.  Returns as
 * mop_plan_workers.
 */
int			mop_plan_trials(const mop_plan_costs *k, int P, int n, int32_t epochs, const double *epoch_s,
							double state_bytes, mop_pick pick, int max_w,
							double *makespan, double *bound, int *knee);

#endif							/* MOP_PLAN_H */
