/*
 * runreq.h -- the session's side of a model-selection run (see run.h for
 * the whole picture), shared by the files that implement it:
 *
 *   searches.c   the search functions (mop_grid_search, ..., mop_tpe);
 *   resume.c     mop_resume and mop_replay;
 *   run_args.c   checking their arguments and filling a RunRequest;
 *   run.c        starting the run's coordinator, waiting for the run,
 *                cancelling it when the wait is interrupted;
 *   monitor.c    mop_wait, mop_cancel and the progress views;
 *   orphans.c    runs whose processes are gone become 'interrupted'.
 */
#ifndef MOP_RUNREQ_H
#define MOP_RUNREQ_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "storage/dsm.h"
#include "utils/jsonb.h"

#include "mop.h"
#include "run.h"
#include "search/mop_sched.h"
#include "space.h"

/*
 * Everything a run is started with: filled by each SQL entry point,
 * carried to the coordinator in the run's shared segment.
 */
typedef struct RunRequest
{
	const char *kind;			/* mop.runs.kind: grid, random, hyperband, ...,
								 * replay; or resume */
	const char *dataset;
	Jsonb	   *space;			/* NULL: none */
	List	   *configs;		/* Jsonb configurations */
	int			workers;
	bool		wait;
	int64		resume_run_id;
	const char *name;			/* mop.runs.name (NULL: none) */
	Jsonb	   *tags;			/* mop.runs.tags (NULL: none) */
	MopRunOptions opts;			/* the run's options (defaults: mop_run_option_defaults) */
} RunRequest;

/*
 * Which argument of a search function is each of those the searches share
 * (-1: it has none).  When the argument is absent or NULL: workers
 * mop.workers, wait true, scheduler mop.scheduler, deterministic false,
 * early_stopping none, warm_start none, time_budget none, name and tags
 * none.  (max_trials is read by each search function itself: it changes the
 * configurations drawn.)
 */
typedef struct MopSearchArgs
{
	int			workers;
	int			wait;
	int			scheduler;
	int			deterministic;
	int			early_stopping;
	int			warm_start;
	int			time_budget;
	int			name;
	int			tags;
} MopSearchArgs;

/* What a run's segment says about its start and end (mop_run_outcome). */
typedef struct MopRunOutcome
{
	MopRunPhase phase;
	int64		run_id;			/* 0 until the coordinator has created the run */
	char		status[16];		/* final status: done, failed, cancelled */
	char		error[512];
	int			error_code;		/* its SQLSTATE (0: none recorded) */
	char		error_hint[256];
	char		note[256];		/* a 'done' run's note, or "" */
} MopRunOutcome;

/* A run's progress (mop_run_read_progress). */
typedef struct MopRunProgress
{
	MopRunPhase phase;
	int64		run_id;
	int64		hops_done;		/* sub-epochs done */
	int64		hops_total;		/* of those planned so far */
	int32		models_done;
	int32		n_models;
	double		best_metric;	/* NaN until known */
	TimestampTz started_at;
	int32		busy_workers;	/* workers with a task */
} MopRunProgress;

/*
 * A search function taking a device => argument (argument argno) and a
 * metric => argument after it: its SQL-callable entry point sets the
 * configurations' metric (mop_search_metric_arg) and runs body with
 * mop.device set to the device argument (mop_with_device).
 */
#define MOP_SEARCH_ENTRY(name, argno, body) \
	PG_FUNCTION_INFO_V1(name); \
	Datum \
	name(PG_FUNCTION_ARGS) \
	{ \
		mop_search_metric_arg(fcinfo, (argno) + 1); \
		return mop_with_device(fcinfo, argno, body); \
	} \
	extern int	no_such_variable

extern void mop_search_metric_arg(FunctionCallInfo fcinfo, int argno);

/* run_args.c: arguments of the search functions */
extern void mop_search_args(FunctionCallInfo fcinfo, int first, char **dataset,
							Jsonb **space, int *epochs);
/* workers => 'auto': the plan's choice (explain.c) */
extern int	mop_explain_auto_workers(const char *dataset, List *configs, int epochs,
									 int partitions, int processes);
extern int32 mop_arg_int32(FunctionCallInfo fcinfo, int argno, int32 dflt);
extern float8 mop_arg_float8(FunctionCallInfo fcinfo, int argno, float8 dflt);
extern void mop_request_init(RunRequest *req, FunctionCallInfo fcinfo,
							 const char *kind, const char *dataset, Jsonb *space,
							 List *configs, int epochs, int partitions,
							 int workers_arg, int wait_arg);
extern void mop_validate_configs(List *configs, MopDataset *ds, int32 epochs);
extern void mop_search_request(RunRequest *req, FunctionCallInfo fcinfo,
							   const char *kind, const MopSearchArgs *args,
							   MopDataset *ds, Jsonb *space, List *configs,
							   int epochs, int seed);
extern void mop_check_hyperband_args(int R, int eta);
extern int32 mop_hyperband_trials(int R, int eta, int brackets);
extern int32 mop_arg_max_trials(FunctionCallInfo fcinfo, int argno);
extern List *mop_cap_configs(List *configs, int32 max_trials, const char *what);
extern int64 mop_dataset_segment_count(const char *dataset);
extern int64 mop_run_id_by_name(const char *name);
extern int64 mop_run_id_by_name_or_error(const char *name);
extern void mop_check_numeric_space(MopSpaceDesc *desc, const char *what);

/* run.c: start a run, wait for it, read its shared state */
extern Datum mop_run_search(FunctionCallInfo fcinfo, const RunRequest *req);
extern void mop_run_row(int64 run_id, char **status, char **dataset,
						int *partitions, int64 *handle, bool *has_handle);
extern dsm_segment *mop_run_attach(int64 run_id, int64 handle);
extern MopRunPhase mop_run_phase(MopRunShared *run);
extern void mop_run_outcome(MopRunShared *run, MopRunOutcome *out);
extern void mop_run_request_cancel(MopRunShared *run);
extern void mop_run_wait_done(MopRunShared *run, bool notices, long poll_ms);
extern void mop_run_read_progress(MopRunShared *run, MopRunProgress *p);
extern void mop_run_progress_notice(MopRunShared *run, int64 *last_hops,
									TimestampTz *last_notice);

#endif							/* MOP_RUNREQ_H */
