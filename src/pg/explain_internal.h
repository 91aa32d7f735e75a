/*
 * explain_internal.h -- what the planner's files share: a configuration's
 * cost, the simulated plan for 1..N workers, and the costing functions of
 * explain.c that explain_adaptive.c and explain_text.c build on.
 */
#ifndef MOP_EXPLAIN_INTERNAL_H
#define MOP_EXPLAIN_INTERNAL_H

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#include "mop.h"
#include "search/mop_plan.h"

/* workers => 'auto' profiles at most this many networks (the rest: their mean) */
#define AUTO_MAX_PROFILES 16

typedef struct ConfigCost
{
	Jsonb	   *config;
	nn_memory	mem;
	bool		fits;			/* within mop.max_model_memory */
	bool		cached;			/* its profile came from mop.profiles */
	double		train_rows_s;	/* rows per second, training (profile threads) */
	double		eval_rows_s;	/* rows per second, forward only */
	double		step_ms;		/* one training minibatch */
	int			threads_n;		/* with the automatic thread count: the cores */
	double		train_rows_s_n; /* ... and the speeds at threads_n (0: none) */
	double		eval_rows_s_n;
	double		hop_s;			/* a sub-epoch's cost besides training */
	double		sub_epoch_s;	/* one partition's training rows, and the hop */
	double		epoch_s;		/* all partitions, validation, the epoch's end */
} ConfigCost;

/* what the simulator predicts for 1..max_w workers (arrays of max_w + 1) */
typedef struct WorkerPlan
{
	int			max_w;
	int			knee;
	int			simulated;		/* configurations simulated (profiled ones) */
	double		overhead;		/* the run's own cost, in every makespan */
	double	   *makespan;
	double	   *bound;
	double	   *efficiency;		/* at one thread per worker with the automatic
								 * count: how well w workers are kept busy */
} WorkerPlan;

/* profiles the last mop_xp_cost_grid() (or _configs) measured, and found in mop.profiles */
extern int	mop_xp_cost_measured,
			mop_xp_cost_cached;

extern void mop_xp_plan_costs(mop_plan_costs *k);
extern double mop_xp_remote_share(const MopDataset *ds);
extern double mop_xp_state_bytes(const ConfigCost *c);
/* what mop_xp_cost_configs does with a profile mop.profiles does not hold */
typedef enum XpProfileMode
{
	XP_PROFILE_KEEP,			/* measure it and keep it (not in a read-only
								 * transaction) */
	XP_PROFILE_DISCARD,			/* measure it, keep nothing */
	XP_PROFILE_CACHED			/* leave the configuration unprofiled */
} XpProfileMode;

extern int	mop_xp_cost_configs(const MopDataset *ds, List *configs, int epochs, int max_profiles,
								XpProfileMode mode, ConfigCost **out);
extern int	mop_xp_cost_grid(const MopDataset *ds, Jsonb *space, int epochs, ConfigCost **out);
extern void mop_xp_explain_args(FunctionCallInfo fcinfo, MopDataset **ds, Jsonb **space, int *epochs);
extern Datum mop_xp_nullable_float(double v, bool *isnull);
extern int	mop_xp_explain_max_workers(FunctionCallInfo fcinfo, int argno, const MopDataset *ds);
extern int	mop_xp_profile_threads(void);
extern bool mop_xp_threads_vary(void);
extern int	mop_xp_threads_for_workers(int workers);
extern double mop_xp_epoch_at(const MopDataset *ds, const ConfigCost *c, int workers, double remote,
							   double *sub_epoch_s);
extern void mop_xp_simulate_workers(const MopDataset *ds, const ConfigCost *c, int n, int epochs,
									int max_w, bool fill_unprofiled, WorkerPlan *p);
extern double mop_xp_space_mean_epoch(const MopDataset *ds, Jsonb *space, int epochs, int max_w,
									  double *mean_w, double *state);

#endif							/* MOP_EXPLAIN_INTERNAL_H */
