/*
 * run_options.h -- what describes a model-selection run: one struct, one
 * table of defaults, one function writing it to mop.runs.options and one
 * reading it back.
 *
 * A search function fills a MopRunOptions (starting from
 * mop_run_option_defaults), the run's segment carries it to the
 * coordinator, which records it once when it creates the run
 * (mop_run_options_jsonb); resuming, replaying and recovering read it back
 * with mop_run_options_parse, which gives a key the run did not record (a
 * run recorded by an older version, or an option its kind has not) its
 * default from the same table.
 *
 * Names: a run's kind is the search method (mop.runs.kind: grid, random,
 * hyperband, asha, pbt, tpe, replay); MopRunKind says which driver, if any,
 * decides what trains, and is recorded under the options key "algorithm"
 * (a catalog name, kept).  Epochs are 1-based wherever a user or the
 * catalog sees them.
 */
#ifndef MOP_RUN_OPTIONS_H
#define MOP_RUN_OPTIONS_H

#include "postgres.h"

#include "utils/jsonb.h"

/* A run's kind, as far as the coordinator cares: which driver, if any. */
typedef enum MopRunKind
{
	MOP_KIND_FIXED = 0,			/* grid, random, replay: every model trains all epochs */
	MOP_KIND_HYPERBAND = 1,		/* a driver decides what trains next: Hyperband */
	MOP_KIND_ASHA = 2,			/* ... asynchronous successive halving */
	MOP_KIND_PBT = 3,			/* population based training (all members from the start) */
	MOP_KIND_TPE = 4			/* TPE proposes each new configuration from the results so far */
} MopRunKind;

/*
 * Everything a run is started with.  epochs and seed are columns of
 * mop.runs; every other field is a key of mop.runs.options (named in its
 * comment).  Plain values only: the struct is copied into the run's shared
 * segment.
 */
typedef struct MopRunOptions
{
	/* columns */
	int32		epochs;			/* epochs (adaptive runs: max_resource) */
	int32		seed;
	/* every run */
	bool		deterministic;	/* "deterministic" */
	int32		scheduler;		/* "scheduler": a mop_pick */
	bool		gpu;			/* "device": gpu or cpu (mop.device resolved) */
	int32		gpu_memory_mb;	/* "gpu_memory_mb" (GPU runs) */
	bool		gpu_tf32;		/* "gpu_tf32" (GPU runs) */
	bool		gpu_unverified;	/* "gpu_unverified" (GPU runs) */
	int32		blas_threads;	/* "blas_threads" */
	int32		checkpoint_every;	/* "checkpoint_every" (recorded when above 1):
									 * mop.checkpoint_every of the starting or
									 * resuming session */
	char		blas[128];		/* "blas": the BLAS build and kernels the starting session loaded (only recorded) */
	int64		replay_of;		/* "replay_of": the run a replay follows (0: none) */
	bool		median_stop;	/* "early_stopping": 'median' (absent: none) */
	int64		warm_start;		/* "warm_start": start models from this run's checkpoints (0: none) */
	/* the driver */
	MopRunKind	kind;			/* "algorithm" (absent: MOP_KIND_FIXED) */
	int32		trials;			/* "max_trials" (ASHA), "trials" (TPE), "population" (PBT) */
	int32		max_resource;	/* "max_resource": Hyperband, ASHA: R, in epochs */
	int32		eta;			/* "eta" */
	int32		min_resource;	/* "min_resource": ASHA's r_min */
	int32		pbt_interval;	/* "interval": PBT, epochs between exploit/explore steps */
	double		pbt_quantile;	/* "quantile" */
	double		pbt_resample;	/* "resample" */
	int32		tpe_startup;	/* "n_startup": TPE, random trials before the model kicks in */
	double		tpe_gamma;		/* "gamma" */
	int32		tpe_batch;		/* "batch": deterministic TPE, trials per batch (0: one per worker) */
	int32		hb_brackets;	/* "brackets": Hyperband, the plan's first brackets only
								 * (max_trials; 0: all) */
	/* budgets */
	int64		time_budget_ms; /* "time_budget_ms": training time of the run over all
								 * its starts (0: none) */
} MopRunOptions;

/*
 * The ranges the search functions accept for their arguments, and that a
 * run's options read back from mop.runs.options must keep (its owner may
 * write them): one place for both.
 */
#define MOP_MAX_EPOCHS		100000	/* epochs, max_resource, interval */
#define MOP_MAX_TRIALS		100000	/* configurations of a run */
#define MOP_MIN_POPULATION	2
#define MOP_MAX_POPULATION	10000
#define MOP_MIN_ETA			2
#define MOP_MAX_ETA			1000

/*
 * The defaults: of a search function's argument given as NULL, and of a key
 * a recorded run lacks.  The SQL DEFAULTs of the search functions must agree
 * (test/sql/options.sql checks them).
 */
extern const MopRunOptions mop_run_option_defaults;

extern int32 mop_run_default_trials(MopRunKind kind);
extern const char *mop_run_kind_name(MopRunKind kind);
extern Jsonb *mop_run_options_jsonb(const MopRunOptions *o);
extern void mop_run_options_parse(Jsonb *options, MopRunOptions *o);

#endif							/* MOP_RUN_OPTIONS_H */
