/*
 * run.c -- SQL functions that start, wait for, cancel, resume and watch
 * model-selection runs executed with model hopper parallelism.
 *
 *   mop_grid_search(dataset, space, epochs, workers, seed, deterministic,
 *                   scheduler, wait)
 *   mop_random_search(dataset, space, trials, epochs, ...)
 *   mop_resume(run_id, workers, wait)
 *   mop_wait(run_id), mop_cancel(run_id), mop_progress() (the view mop.progress)
 *
 * The caller's side of a run (see run.h for the whole picture): everything
 * that can be checked is checked here, in the caller's transaction, so bad
 * input fails at once with a clear error and nothing is started: the
 * dataset, every expanded configuration (with the field it names), the
 * worker count.  Then a dynamic shared memory segment carries the request
 * to a coordinator background worker, which commits the run on its own.  In
 * the blocking form the caller waits on its latch, printing a NOTICE as
 * epochs complete; a query cancel (pg_cancel_backend, statement_timeout)
 * asks the coordinator to cancel the run, waits until the workers have
 * stopped (within a minibatch), and re-throws.  The ranked result comes
 * from mop.models, which the caller sees as soon as the workers commit
 * (READ COMMITTED takes a new snapshot per query).
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "mop.h"
#include "run.h"
#include "search/mop_hyperband.h"
#include "search/mop_pbt.h"
#include "search/mop_sched.h"
#include "space.h"

PG_FUNCTION_INFO_V1(mop_grid_search);
PG_FUNCTION_INFO_V1(mop_random_search);
PG_FUNCTION_INFO_V1(mop_resume);
PG_FUNCTION_INFO_V1(mop_replay);
PG_FUNCTION_INFO_V1(mop_hyperband);
PG_FUNCTION_INFO_V1(mop_hyperband_plan_sql);
PG_FUNCTION_INFO_V1(mop_asha);
PG_FUNCTION_INFO_V1(mop_pbt_sql);
PG_FUNCTION_INFO_V1(mop_tpe_sql);
PG_FUNCTION_INFO_V1(mop_wait);
PG_FUNCTION_INFO_V1(mop_cancel);
PG_FUNCTION_INFO_V1(mop_progress);
PG_FUNCTION_INFO_V1(mop_progress_v2);
PG_FUNCTION_INFO_V1(mop_run_progress);

/*
 * Everything a run is started with: filled by each SQL entry point,
 * carried to the coordinator in the run's shared segment.
 */
typedef struct RunRequest
{
	const char *kind;			/* grid, random, resume, replay, hyperband, ... */
	const char *dataset;
	Jsonb	   *space;			/* NULL: none */
	List	   *configs;		/* Jsonb configurations */
	int			epochs;
	int			workers;
	int			seed;
	bool		deterministic;
	mop_pick	pick;
	bool		wait;
	int64		resume_run_id;
	int64		replay_run_id;
	int64		warm_start;
	bool		median_stop;
	MopAlgo		algo;
	int			max_resource;	/* Hyperband, ASHA */
	int			eta;
	int			min_resource;	/* ASHA */
	int			pbt_interval;
	double		pbt_quantile;
	double		pbt_resample;
	int			tpe_startup;
	double		tpe_gamma;
} RunRequest;

/* Ranked results of a run. */
#define RESULT_SQL \
	"SELECT m.run_id, m.id, (pg_catalog.row_number() OVER (ORDER BY " \
	"  (m.status OPERATOR(pg_catalog.=) ANY ('{done,training,stopped}'::text[])) DESC, " \
	"  CASE WHEN m.higher_is_better THEN OPERATOR(pg_catalog.-) m.best_valid_metric " \
	"       ELSE m.best_valid_metric END ASC NULLS LAST, m.id))::int AS rank, " \
	"  m.status, m.metric, m.best_valid_metric, m.best_valid_loss, m.best_epoch, " \
	"  m.epochs_done, m.config " \
	"FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY 3"

/* Parse the scheduler option. */
static mop_pick
parse_pick(const char *s)
{
	int			pick = mop_pick_parse(s);

	if (pick >= 0)
		return (mop_pick) pick;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for \"scheduler\": \"%s\"", s),
			 errhint("Use 'random' (Cerebro's randomized scheduler), 'longest' (longest remaining work first), 'convergence' (Hermes: the models converging fastest towards the lowest loss first) or 'fifo' (each model to the end, in the order given).")));
	pg_unreachable();
}

/* The early_stopping argument (argument argno): NULL/'none' or 'median'. */
static bool
parse_early_stopping(FunctionCallInfo fcinfo, int argno)
{
	char	   *s;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return false;
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(s, "none") == 0)
		return false;
	if (strcmp(s, "median") == 0)
		return true;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for \"early_stopping\": \"%s\"", s),
			 errhint("Use 'median' (the median stopping rule) or 'none'.")));
	pg_unreachable();
}

/* The warm_start argument: a run id visible to the caller, or 0. */
static int64
warm_start_arg(FunctionCallInfo fcinfo, int argno)
{
	int64		id;
	Oid			t = INT8OID;
	Datum		v;
	bool		found;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return 0;
	id = PG_GETARG_INT64(argno);
	v = Int64GetDatum(id);
	SPI_connect();
	SPI_execute_with_args("SELECT 1 FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1",
						  1, &t, &v, NULL, false, 1);
	found = SPI_processed == 1;
	SPI_finish();
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("invalid value for \"warm_start\": run %lld does not exist", (long long) id),
				 errhint("Runs are listed in mop.runs (each role sees its own).")));
	return id;
}

/* Optional boolean argument argno (false when absent or NULL). */
static bool
opt_bool(FunctionCallInfo fcinfo, int argno)
{
	return PG_NARGS() > argno && !PG_ARGISNULL(argno) && PG_GETARG_BOOL(argno);
}

/* The scheduler of argument argno, or mop.scheduler when it is NULL. */
static mop_pick
pick_arg(FunctionCallInfo fcinfo, int argno)
{
	if (argno >= 0 && argno < PG_NARGS() && !PG_ARGISNULL(argno))
		return parse_pick(text_to_cstring(PG_GETARG_TEXT_PP(argno)));
	return (mop_pick) mop_scheduler;
}

/* Workers to use: requested (or mop.workers), capped; ERROR if impossible. */
static int
choose_workers(bool isnull, int requested, int partitions)
{
	int			w = isnull ? mop_workers : requested;
	int			cap = max_worker_processes - 1;	/* one for the coordinator */

	if (!isnull && (requested < 1 || requested > MOP_MAX_WORKERS))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"workers\": %d", requested),
				 errhint("Use 1 to %d workers.", MOP_MAX_WORKERS)));
	if (cap < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("max_worker_processes (%d) leaves no room for mop's workers",
						max_worker_processes),
				 errhint("A run needs one coordinator and at least one worker; raise max_worker_processes.")));
	if (w > partitions)
		ereport(NOTICE,
				(errmsg("the run uses %d worker%s, not %d%s: its dataset has %d partition%s",
						partitions, partitions == 1 ? "" : "s", w, isnull ? " (mop.workers)" : "",
						partitions, partitions == 1 ? "" : "s"),
				 errdetail("Each worker trains on its own partitions; a worker without one would idle."),
				 errhint("mop_prepare(..., partitions => %d) packs the data for %d workers.",
						 w, w)));
	w = Min(w, partitions);
	if (w > cap)
		ereport(NOTICE,
				(errmsg("the run uses %d worker%s, not %d: max_worker_processes is %d",
						cap, cap == 1 ? "" : "s", w, max_worker_processes),
				 errdetail("One background worker slot goes to the run's coordinator."),
				 errhint("Raise max_worker_processes (a restart) for more workers.")));
	w = Min(w, cap);
	return Max(w, 1);
}

/*
 * The fields every request shares: what, on which dataset, which
 * configurations for how many epochs, and the workers (argument workers_arg,
 * NULL: mop.workers) and wait (argument wait_arg, NULL: true) arguments.
 */
static void
request_init(RunRequest *req, FunctionCallInfo fcinfo, const char *kind,
			 const char *dataset, Jsonb *space, List *configs, int epochs,
			 int partitions, int workers_arg, int wait_arg)
{
	memset(req, 0, sizeof(*req));
	req->kind = kind;
	req->dataset = dataset;
	req->space = space;
	req->configs = configs;
	req->epochs = epochs;
	req->workers = choose_workers(PG_ARGISNULL(workers_arg),
								  PG_ARGISNULL(workers_arg) ? 0 : PG_GETARG_INT32(workers_arg),
								  partitions);
	req->wait = PG_ARGISNULL(wait_arg) ? true : PG_GETARG_BOOL(wait_arg);
}

/*
 * A run's coordinator and workers are background workers that connect as
 * the calling role, and PostgreSQL lets a process connect only as a role
 * that may log in: refuse here, with the reason, instead of letting the
 * coordinator fail at its start.
 */
static void
check_role_can_connect(void)
{
	Oid			role = GetUserId();
	HeapTuple	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	bool		canlogin;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for role %u", role);
	canlogin = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
	ReleaseSysCache(tup);
	if (!canlogin)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" cannot start a mop run because it cannot log in",
						GetUserNameFromId(role, false)),
				 errdetail("A run's coordinator and workers are background workers that connect as the role that starts the run."),
				 errhint("Give the role LOGIN (ALTER ROLE ... LOGIN), or start the run as a role that has it.")));
}

/* Create the run segment with the payload and start the coordinator. */
static dsm_segment *
launch(const RunRequest *req, BackgroundWorkerHandle **handle)
{
	const char *space = req->space ?
		JsonbToCString(NULL, &req->space->root, VARSIZE(req->space)) : "null";
	List	   *configs = NIL;
	Size		payload = strlen(req->kind) + strlen(req->dataset) + strlen(space) + 3;
	ListCell   *lc;
	dsm_segment *seg;
	MopRunShared *run;
	char	   *p;
	BackgroundWorker bgw;
	pid_t		pid;

	check_role_can_connect();
	foreach(lc, req->configs)
	{
		Jsonb	   *j = (Jsonb *) lfirst(lc);
		char	   *text = JsonbToCString(NULL, &j->root, VARSIZE(j));

		configs = lappend(configs, text);
		payload += strlen(text) + 1;
	}
	seg = dsm_create(offsetof(MopRunShared, payload) + payload, 0);
	run = dsm_segment_address(seg);
	memset(run, 0, offsetof(MopRunShared, payload));
	run->magic = MOP_RUN_MAGIC;
	SpinLockInit(&run->mutex);
	run->database = MyDatabaseId;
	run->user = GetUserId();
	run->caller_latch = MyLatch;
	run->resume_run_id = req->resume_run_id;
	run->replay_run_id = req->replay_run_id;
	run->n_workers = req->workers;
	run->epochs = req->epochs;
	run->seed = req->seed;
	run->deterministic = req->deterministic;
	run->pick = req->pick;
	run->blas_threads = mop_blas_threads;
	run->task_timeout_ms = mop_task_timeout_ms;
	run->gpu = mop_gpu_resolved;
	run->gpu_memory_mb = mop_gpu_memory_mb;
	run->gpu_tf32 = mop_gpu_tf32;
	run->n_models = list_length(configs);
	run->n_configs = list_length(configs);
	run->median_stop = req->median_stop;
	run->warm_start_run_id = req->warm_start;
	run->algo = req->algo;
	run->max_resource = req->max_resource;
	run->eta = req->eta;
	run->min_resource = req->min_resource;
	run->pbt_interval = req->pbt_interval;
	run->pbt_quantile = req->pbt_quantile;
	run->pbt_resample = req->pbt_resample;
	run->tpe_startup = req->tpe_startup;
	run->tpe_gamma = req->tpe_gamma;
	run->best_metric = NAN;
	run->payload_len = payload;
	p = run->payload;
	strcpy(p, req->kind);
	p += strlen(req->kind) + 1;
	strcpy(p, req->dataset);
	p += strlen(req->dataset) + 1;
	strcpy(p, space);
	p += strlen(space) + 1;
	foreach(lc, configs)
	{
		strcpy(p, (char *) lfirst(lc));
		p += strlen((char *) lfirst(lc)) + 1;
	}

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "mop");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "mop_coordinator_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "mop coordinator");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "mop coordinator");
	bgw.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
	bgw.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&bgw, handle))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start the coordinator of a mop run"),
				 errdetail("No background worker slot is free."),
				 errhint("Raise max_worker_processes (now %d); a run needs a coordinator and one process per worker.",
						 max_worker_processes)));
	if (WaitForBackgroundWorkerStartup(*handle, &pid) != BGWH_STARTED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("the coordinator of a mop run did not start"),
				 errhint("See the server log.")));
	return seg;
}

/* Wait until the coordinator has committed the run (or failed). */
static int64
wait_started(MopRunShared *run, BackgroundWorkerHandle *handle)
{
	for (;;)
	{
		MopRunPhase phase;
		int64		run_id;
		pid_t		pid;

		SpinLockAcquire(&run->mutex);
		phase = run->phase;
		run_id = run->run_id;
		SpinLockRelease(&run->mutex);
		if (phase == MOP_PHASE_DONE && strcmp(run->status, "failed") == 0 &&
			run->run_id == 0)
			ereport(ERROR,
					(errcode(run->error_code ? run->error_code : ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("%s", run->error),
					 errdetail("The run's coordinator stopped before the run started."),
					 run->error_hint[0] ? errhint("%s", run->error_hint) : 0));
		if (phase != MOP_PHASE_STARTING && run_id != 0)
			return run_id;
		if (phase == MOP_PHASE_DONE)
			return run_id;
		if (GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED && run->phase == MOP_PHASE_STARTING)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("the coordinator of the mop run exited before starting: %s",
							run->error[0] ? run->error : "see the server log")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 200L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Flag the run for cancellation and wake its coordinator. */
static void
request_cancel(MopRunShared *run)
{
	Latch	   *latch;

	SpinLockAcquire(&run->mutex);
	run->cancel_requested = true;
	latch = run->coordinator_latch;
	SpinLockRelease(&run->mutex);
	if (latch)
		SetLatch(latch);
}

/* Ask the run to cancel and wait (bounded, not interruptible) for it. */
static void
cancel_and_wait(MopRunShared *run, int max_seconds)
{
	request_cancel(run);
	for (int i = 0; i < max_seconds * 100 && run->phase != MOP_PHASE_DONE; i++)
		pg_usleep(10000L);
}

/* Format seconds as "1h02m", "3m05s" or "12s". */
static char *
fmt_duration(double s)
{
	if (!isfinite(s) || s < 0)
		return pstrdup("?");
	if (s >= 3600)
		return psprintf("%dh%02dm", (int) (s / 3600), ((int) s % 3600) / 60);
	if (s >= 60)
		return psprintf("%dm%02ds", (int) (s / 60), (int) s % 60);
	return psprintf("%ds", (int) s);
}

/*
 * A NOTICE with the run's progress, at most every 5 seconds and only when a
 * sub-epoch finished since the last one (the blocking searches' and
 * mop_wait's progress lines).
 */
static void
progress_notice(MopRunShared *run, int64 *last_hops, TimestampTz *last_notice)
{
	int64		hops,
				total;
	int32		mdone,
				nmodels;
	double		best;
	TimestampTz started,
				now = GetCurrentTimestamp();

	SpinLockAcquire(&run->mutex);
	hops = run->hops_done;
	total = run->hops_total;
	mdone = run->models_done;
	nmodels = run->n_models;
	best = run->best_metric;
	started = run->started_at;
	SpinLockRelease(&run->mutex);
	if (hops != *last_hops && hops > 0 && TimestampDifferenceExceeds(*last_notice, now, 5000))
	{
		double		elapsed = (double) (now - started) / 1e6;
		double		eta = elapsed * (double) (total - hops) / (double) hops;

		ereport(NOTICE,
				(errmsg("run %lld: %lld of %lld sub-epochs, %d of %d models finished, best validation metric %s, elapsed %s, eta %s",
						(long long) run->run_id, (long long) hops, (long long) total,
						mdone, nmodels,
						isnan(best) ? "n/a" : psprintf("%.4f", best),
						fmt_duration(elapsed), fmt_duration(eta))));
		*last_hops = hops;
		*last_notice = now;
	}
}

/* Block until the run is done, with NOTICE progress; cancel on interrupt. */
static void
wait_done(MopRunShared *run, bool notices)
{
	int64		last_hops = -1;
	TimestampTz last_notice = 0;

	PG_TRY();
	{
		for (;;)
		{
			MopRunPhase phase;

			SpinLockAcquire(&run->mutex);
			phase = run->phase;
			SpinLockRelease(&run->mutex);
			if (phase == MOP_PHASE_DONE)
				break;
			if (notices)
				progress_notice(run, &last_hops, &last_notice);
			/* the run's superseded checkpoints must not wait for this statement */
			mop_wait_release_xmin();
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1000L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		/* cancel or error while waiting: stop the run's workers first */
		cancel_and_wait(run, 60);
		SpinLockAcquire(&run->mutex);
		run->caller_latch = NULL;
		SpinLockRelease(&run->mutex);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* Return the ranked models of run_id as the function's result set. */
static void
return_results(FunctionCallInfo fcinfo, int64 run_id)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(run_id);
	MemoryContext old;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	/* read-write mode: a fresh snapshot that sees what the workers committed */
	if (SPI_execute_with_args(RESULT_SQL, 1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the results of run %lld", (long long) run_id);
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		vals[10];
		bool		nulls[10];

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, vals, nulls);
		/* copy pass-by-reference values out of SPI memory */
		for (int c = 0; c < 10; c++)
			if (!nulls[c])
				vals[c] = datumCopy(vals[c],
									TupleDescAttr(SPI_tuptable->tupdesc, c)->attbyval,
									TupleDescAttr(SPI_tuptable->tupdesc, c)->attlen);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, vals, nulls);
	}
	if (SPI_processed == 0)
	{
		/* a run whose models start later (adaptive, wait => false): its id */
		Datum		vals[10] = {Int64GetDatum(run_id)};
		bool		nulls[10] = {false, true, true, true, true, true, true, true, true, true};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, vals, nulls);
	}
	MemoryContextSwitchTo(old);
	SPI_finish();
}

/* Common tail of the search functions: launch, optionally wait, return. */
static Datum
run_search(FunctionCallInfo fcinfo, const RunRequest *req)
{
	dsm_segment *seg;
	MopRunShared *run;
	BackgroundWorkerHandle *handle;
	int64		run_id;
	bool		wait = req->wait;

	if (wait && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("a blocking mop run needs the READ COMMITTED isolation level"),
				 errdetail("The run's results are committed by background workers, which a REPEATABLE READ or SERIALIZABLE snapshot cannot see."),
				 errhint("Run it at READ COMMITTED, or pass wait => false and read mop.models later.")));
	(void) mop_device_check();	/* 'gpu' fails here, before anything starts */
	(void) mop_mark_interrupted_except(req->resume_run_id);
	seg = launch(req, &handle);
	run = dsm_segment_address(seg);
	run_id = wait_started(run, handle);
	if (wait)
	{
		wait_done(run, true);
		if (strcmp(run->status, "failed") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("mop run %lld failed: %s", (long long) run_id, run->error),
					 errhint("Models and checkpoints committed so far are kept; mop_resume(%lld) continues the run.",
							 (long long) run_id)));
		if (strcmp(run->status, "cancelled") == 0)
			ereport(NOTICE,
					(errmsg("mop run %lld was cancelled", (long long) run_id),
					 errhint("mop_resume(%lld) continues it.", (long long) run_id)));
	}
	SpinLockAcquire(&run->mutex);
	run->caller_latch = NULL;
	SpinLockRelease(&run->mutex);
	dsm_detach(seg);
	return_results(fcinfo, run_id);
	return (Datum) 0;
}

/* Validate every configuration against the dataset; errors name it. */
static void
validate_configs(List *configs, MopDataset *ds)
{
	ListCell   *lc;
	int			i = 0;

	foreach(lc, configs)
	{
		nn_spec		spec;
		nn_error	err;
		nn_status	st;
		Jsonb	   *cfg = (Jsonb *) lfirst(lc);

		i++;
		mop_config_to_spec(cfg, ds, &spec);
		if ((st = nn_spec_validate(&spec, &err)) != NN_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("configuration %d of the search space is invalid: %s", i, err.msg),
					 errdetail("configuration: %s", JsonbToCString(NULL, &cfg->root, VARSIZE(cfg)))));
	}
}

/* Arguments common to the search functions. */
static void
common_args(FunctionCallInfo fcinfo, int first, char **dataset, Jsonb **space,
			int *epochs)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dataset and space must not be null")));
	*dataset = text_to_cstring(PG_GETARG_TEXT_PP(0));
	*space = PG_GETARG_JSONB_P(1);
	*epochs = PG_ARGISNULL(first) ? 10 : PG_GETARG_INT32(first);
	if (*epochs < 1 || *epochs > 100000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"epochs\": %d", *epochs),
				 errhint("Train at least 1 epoch.")));
}

/*
 * mop_grid_search(dataset text, space jsonb, epochs int, workers int,
 *                 seed int, deterministic bool, scheduler text, wait bool)
 */
static Datum
mop_grid_search_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			epochs;
	MopDataset *ds;
	List	   *configs;

	common_args(fcinfo, 2, &dataset, &space, &epochs);
	ds = mop_dataset_lookup(dataset, false);
	configs = mop_space_grid(space);
	validate_configs(configs, ds);
	{
		RunRequest	req;

		request_init(&req, fcinfo, "grid", dataset, space, configs,
					 epochs, ds->partitions, 3, 7);
		req.seed = PG_ARGISNULL(4) ? 0 : PG_GETARG_INT32(4);
		req.deterministic = opt_bool(fcinfo, 5);
		req.pick = pick_arg(fcinfo, 6);
		req.median_stop = parse_early_stopping(fcinfo, 8);
		req.warm_start = warm_start_arg(fcinfo, 9);
		return run_search(fcinfo, &req);
	}
}

/*
 * mop_random_search(dataset text, space jsonb, trials int, epochs int,
 *                   workers int, seed int, deterministic bool,
 *                   scheduler text, wait bool)
 */
static Datum
mop_random_search_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			epochs;
	int			trials = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
	int			seed = PG_ARGISNULL(5) ? 0 : PG_GETARG_INT32(5);
	MopDataset *ds;
	List	   *configs;

	common_args(fcinfo, 3, &dataset, &space, &epochs);
	if (trials < 1 || trials > 100000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"trials\": %d", trials),
				 errhint("Ask for 1 to 100000 trials.")));
	ds = mop_dataset_lookup(dataset, false);
	configs = mop_space_random(space, trials, (uint64) seed);
	validate_configs(configs, ds);
	{
		RunRequest	req;

		request_init(&req, fcinfo, "random", dataset, space, configs,
					 epochs, ds->partitions, 4, 8);
		req.seed = seed;
		req.deterministic = opt_bool(fcinfo, 6);
		req.pick = pick_arg(fcinfo, 7);
		req.median_stop = parse_early_stopping(fcinfo, 9);
		req.warm_start = warm_start_arg(fcinfo, 10);
		return run_search(fcinfo, &req);
	}
}

/* The run's row: status, dataset name, partitions, shm handle; ERROR if absent. */
static void
run_row(int64 run_id, char **status, char **dataset, int *partitions, int64 *handle,
		bool *has_handle)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(run_id);
	bool		isnull;
	MemoryContext cxt = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute_with_args("SELECT r.status, d.name, d.partitions, r.shm_handle "
							  "FROM mop.runs r JOIN mop.datasets d "
							  "ON d.id OPERATOR(pg_catalog.=) r.dataset_id "
							  "WHERE r.id OPERATOR(pg_catalog.=) $1",
							  1, &t, &v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.runs");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run %lld does not exist", (long long) run_id),
				 errhint("Runs are listed in mop.runs (each role sees its own).")));
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	td = SPI_tuptable->tupdesc;

		*status = TextDatumGetCString(SPI_getbinval(tup, td, 1, &isnull));
		*dataset = TextDatumGetCString(SPI_getbinval(tup, td, 2, &isnull));
		*partitions = DatumGetInt32(SPI_getbinval(tup, td, 3, &isnull));
		*handle = DatumGetInt64(SPI_getbinval(tup, td, 4, &isnull));
		*has_handle = !isnull;
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
}

/* Attach to a live run's segment, or NULL if it is not running. */
static dsm_segment *
attach_run(int64 run_id, int64 handle)
{
	dsm_segment *seg = dsm_attach((dsm_handle) handle);
	MopRunShared *run;

	if (seg == NULL)
		return NULL;
	run = dsm_segment_address(seg);
	if (dsm_segment_map_length(seg) < offsetof(MopRunShared, payload) ||
		run->magic != MOP_RUN_MAGIC || run->run_id != run_id)
	{
		dsm_detach(seg);
		return NULL;
	}
	return seg;
}

/*
 * Runs that say 'running' but have no process behind them (the server
 * crashed or restarted under them: their shared segment is gone) become
 * 'interrupted', and their models that were training too; mop_resume
 * continues them.  Called at the start of mop's run functions and by the
 * progress view, so the first of them after a restart tells the truth, and
 * by the startup recovery of a preloaded mop, which then resumes them.
 * Sees what the caller may see (row-level security).  Returns the run ids
 * it marked (in CurrentMemoryContext).  Does nothing in a read-only
 * transaction.
 */

/* The NOTICE a run marked 'interrupted' gets. */
static void
interrupted_notice(int64 run_id)
{
	ereport(NOTICE,
			(errmsg("mop run %lld was interrupted by a server restart", (long long) run_id),
			 errdetail("Its committed checkpoints are kept; no process trains it any more."),
			 errhint("mop_resume(%lld) continues it.", (long long) run_id)));
}

/*
 * Runs the caller may see that say 'running' with no process behind them
 * (their shared segment is gone), run `except` aside: for each, its id and
 * the stale handle (-1: none), as int64[2].
 */
static List *
find_orphans(int64 except)
{
	List	   *orphans = NIL;
	MemoryContext outer = CurrentMemoryContext;
	int64	   *ids,
			   *handles;
	bool	   *has;
	int			n;

	SPI_connect();
	/* mop_train's own run row lives and dies with its caller's transaction */
	if (SPI_execute("SELECT id, shm_handle FROM mop.runs WHERE status OPERATOR(pg_catalog.=) 'running' "
					"AND kind OPERATOR(pg_catalog.<>) 'train' ORDER BY id", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.runs");
	n = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(n, 1));
	handles = palloc(sizeof(int64) * Max(n, 1));
	has = palloc(sizeof(bool) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		handles[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		has[i] = !isnull;
	}
	for (int i = 0; i < n; i++)
	{
		dsm_segment *seg;

		if (ids[i] == except)
			continue;
		seg = has[i] ? attach_run(ids[i], handles[i]) : NULL;
		if (seg != NULL)
		{
			dsm_detach(seg);
			continue;			/* alive */
		}
		{
			MemoryContext old = MemoryContextSwitchTo(outer);
			int64	   *o = palloc(sizeof(int64) * 2);

			o[0] = ids[i];
			o[1] = has[i] ? handles[i] : -1;
			orphans = lappend(orphans, o);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	return orphans;
}

/* Mark the orphans (find_orphans) 'interrupted' in this transaction; their ids. */
static List *
mark_orphans_here(int64 except)
{
	List	   *marked = NIL;
	List	   *orphans = find_orphans(except);
	ListCell   *lc;
	MemoryContext outer = CurrentMemoryContext;

	if (orphans == NIL)
		return NIL;
	SPI_connect();
	foreach(lc, orphans)
	{
		int64	   *o = (int64 *) lfirst(lc);
		Oid			t[2] = {INT8OID, INT8OID};
		Datum		v[2] = {Int64GetDatum(o[0]), Int64GetDatum(o[1])};
		char		nulls[2] = {' ', o[1] < 0 ? 'n' : ' '};

		/*
		 * A row someone else holds (a transaction of the caller that a mark
		 * worker would wait for, a resume in progress) is left to them.
		 */
		if (SPI_execute_with_args("SELECT 1 FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1 "
								  "AND status OPERATOR(pg_catalog.=) 'running' "
								  "AND shm_handle IS NOT DISTINCT FROM $2 FOR UPDATE SKIP LOCKED",
								  2, t, v, nulls, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not lock mop.runs");
		if (SPI_processed != 1)
			continue;
		/* still orphaned: not resumed (a new handle) or finished meanwhile */
		if (SPI_execute_with_args("UPDATE mop.runs SET status = 'interrupted', shm_handle = NULL, "
								  "error = 'the server restarted or crashed while the run was training' "
								  "WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'running' "
								  "AND shm_handle IS NOT DISTINCT FROM $2",
								  2, t, v, nulls, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update mop.runs");
		if (SPI_processed != 1)
			continue;
		SPI_execute_with_args("UPDATE mop.models SET status = 'interrupted', "
							  "updated_at = pg_catalog.clock_timestamp() "
							  "WHERE run_id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'training'",
							  1, t, v, NULL, false, 0);
		{
			MemoryContext old = MemoryContextSwitchTo(outer);

			marked = lappend(marked, lfirst(lc));
			MemoryContextSwitchTo(old);
		}
		interrupted_notice(*(int64 *) lfirst(lc));
	}
	SPI_finish();
	return marked;
}

List *
mop_mark_interrupted(void)
{
	return mop_mark_interrupted_except(0);
}

/*
 * The same, leaving run `except` alone: the run that mop_resume is about to
 * hand to a coordinator.  Marked here, its row would stay locked by the
 * caller's open transaction, and the coordinator, which must update that
 * row before the caller's wait for it can end, would wait for the caller
 * forever (a cycle through a latch, which the deadlock detector cannot
 * see).  The coordinator sets the run 'running' itself.
 */
List *
mop_mark_interrupted_except(int64 except)
{
	List	   *marked = NIL;
	List	   *orphans;
	ListCell   *lc;
	MemoryContext outer = CurrentMemoryContext;

	if (XactReadOnly || RecoveryInProgress())
		return NIL;
	orphans = find_orphans(except);
	if (orphans == NIL)
		return NIL;

	/*
	 * Marked in this transaction, their rows would stay locked until it
	 * ends -- for the whole of a blocking search or mop_wait, while someone
	 * else's mop_resume or mop_cancel of them waits.  So a worker marks them
	 * in a transaction of its own, as this role; this statement sees its
	 * commit (READ COMMITTED).  What it could not mark is marked here.
	 */
	if (!IsBackgroundWorker && !IsolationUsesXactSnapshot() &&
		mop_mark_in_worker(MyDatabaseId, GetUserId(), except))
	{
		SPI_connect();
		foreach(lc, orphans)
		{
			Oid			t = INT8OID;
			Datum		v = Int64GetDatum(*(int64 *) lfirst(lc));

			/* (not read-only: a fresh snapshot, which sees the worker's commit) */
			if (SPI_execute_with_args("SELECT 1 FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1 "
									  "AND status OPERATOR(pg_catalog.=) 'interrupted'",
									  1, &t, &v, NULL, false, 1) == SPI_OK_SELECT && SPI_processed == 1)
			{
				MemoryContext old = MemoryContextSwitchTo(outer);

				marked = lappend(marked, lfirst(lc));
				MemoryContextSwitchTo(old);
				interrupted_notice(*(int64 *) lfirst(lc));
			}
		}
		SPI_finish();
	}
	return list_concat(marked, mark_orphans_here(except));
}

/* mop_resume(run_id bigint, workers int, wait bool): continue a run. */
static Datum
mop_resume_body(PG_FUNCTION_ARGS)
{
	int64		run_id = PG_GETARG_INT64(0);
	char	   *status,
			   *dataset;
	int			partitions;
	int64		handle;
	bool		has_handle;
	dsm_segment *seg;
	bool		isnull_dummy;
	List	   *added = NIL;

	(void) mop_mark_interrupted_except(run_id);
	run_row(run_id, &status, &dataset, &partitions, &handle, &has_handle);
	if (has_handle && (seg = attach_run(run_id, handle)) != NULL)
	{
		bool		live = ((MopRunShared *) dsm_segment_address(seg))->phase != MOP_PHASE_DONE;

		dsm_detach(seg);
		if (live)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("run %lld is still running", (long long) run_id),
					 errhint("Wait for it with mop_wait(%lld) or stop it with mop_cancel(%lld).",
							 (long long) run_id, (long long) run_id)));
	}
	if (strcmp(status, "done") == 0 && (PG_NARGS() <= 3 || PG_ARGISNULL(3)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has already finished", (long long) run_id),
				 errhint("Pass add => a search space to train more configurations in it.")));
	{
		/* adaptive runs: regenerate the configurations the driver draws from */
		Oid			t = INT8OID;
		Datum		v = Int64GetDatum(run_id);
		char	   *algo = NULL;
		Jsonb	   *space = NULL;
		int			R = 0,
					eta = 0,
					trials = 0,
					seed = 0;

		SPI_connect();
		SPI_execute_with_args("SELECT options OPERATOR(pg_catalog.->>) 'algorithm', space, (options OPERATOR(pg_catalog.->>) 'max_resource')::int, "
							  "(options OPERATOR(pg_catalog.->>) 'eta')::int, COALESCE((options OPERATOR(pg_catalog.->>) 'max_trials')::int, "
							  "(options OPERATOR(pg_catalog.->>) 'trials')::int, (options OPERATOR(pg_catalog.->>) 'population')::int), seed "
							  "FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1",
							  1, &t, &v, NULL, false, 1);
		if (SPI_processed == 1)
		{
			HeapTuple	tup = SPI_tuptable->vals[0];
			TupleDesc	td = SPI_tuptable->tupdesc;
			MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
			Datum		d;

			d = SPI_getbinval(tup, td, 1, &isnull_dummy);
			algo = isnull_dummy ? NULL : TextDatumGetCString(d);
			d = SPI_getbinval(tup, td, 2, &isnull_dummy);
			space = isnull_dummy ? NULL : DatumGetJsonbPCopy(d);
			d = SPI_getbinval(tup, td, 3, &isnull_dummy);
			R = isnull_dummy ? 0 : DatumGetInt32(d);
			d = SPI_getbinval(tup, td, 4, &isnull_dummy);
			eta = isnull_dummy ? 0 : DatumGetInt32(d);
			d = SPI_getbinval(tup, td, 5, &isnull_dummy);
			trials = isnull_dummy ? 0 : DatumGetInt32(d);
			d = SPI_getbinval(tup, td, 6, &isnull_dummy);
			seed = isnull_dummy ? 0 : DatumGetInt32(d);
			MemoryContextSwitchTo(old);
		}
		SPI_finish();
		if (algo && PG_NARGS() > 3 && !PG_ARGISNULL(3))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("configurations cannot be added to a %s run", algo),
					 errhint("add => extends grid and random runs; a %s run decides its configurations itself.",
							 algo)));
		if (algo && space)
		{
			if (strcmp(algo, "hyperband") == 0)
			{
				int32		n = mop_hyperband_plan(R, eta, NULL, 0);
				mop_hb_round *rows = palloc(sizeof(mop_hb_round) * Max(n, 1));

				mop_hyperband_plan(R, eta, rows, n);
				for (int i = 0; i < n; i++)
					if (rows[i].round == 0)
						trials += rows[i].configs;
			}
			added = mop_space_random(space, trials, (uint64) seed);
			{
				RunRequest	req;

				request_init(&req, fcinfo, "resume", dataset, space, added,
							 0, partitions, 1, 2);
				req.resume_run_id = run_id;
				return run_search(fcinfo, &req);
			}
		}
	}
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
	{
		/* add configurations to the run (a finished one too) */
		MopDataset *ds = mop_dataset_lookup(dataset, false);

		added = mop_space_grid(PG_GETARG_JSONB_P(3));
		validate_configs(added, ds);
	}
	{
		RunRequest	req;

		request_init(&req, fcinfo, "resume", dataset, NULL, added,
					 0, partitions, 1, 2);
		req.resume_run_id = run_id;
		return run_search(fcinfo, &req);
	}
}

/*
 * mop_replay(run_id bigint, workers int, wait bool): train the configurations
 * of a finished run again, each model visiting the partitions in exactly the
 * order recorded in mop.hops; the new models are bit-identical to the old.
 */
static Datum
mop_replay_body(PG_FUNCTION_ARGS)
{
	int64		run_id = PG_GETARG_INT64(0);
	char	   *status,
			   *dataset;
	int			partitions;
	int64		handle;
	bool		has_handle;
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(run_id);
	List	   *configs = NIL;
	Jsonb	   *space = NULL;
	int			epochs = 0;
	MemoryContext cxt = CurrentMemoryContext;

	run_row(run_id, &status, &dataset, &partitions, &handle, &has_handle);
	if (strcmp(status, "done") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld is %s; only a finished run can be replayed", (long long) run_id, status),
				 errhint("Finish it first with mop_resume(%lld).", (long long) run_id)));
	SPI_connect();
	if (SPI_execute_with_args("SELECT m.config, r.epochs, r.space FROM mop.models m "
							  "JOIN mop.runs r ON r.id OPERATOR(pg_catalog.=) m.run_id "
							  "WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY m.id",
							  1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the models of run %lld", (long long) run_id);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(cxt);

		configs = lappend(configs, DatumGetJsonbPCopy(SPI_getbinval(SPI_tuptable->vals[i],
																	SPI_tuptable->tupdesc, 1, &isnull)));
		epochs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		if (i == 0)
		{
			Datum		sp = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull);

			if (!isnull)
				space = DatumGetJsonbPCopy(sp);
		}
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	if (configs == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has no models to replay", (long long) run_id)));
	{
		RunRequest	req;

		request_init(&req, fcinfo, "replay", dataset, space, configs,
					 Max(epochs, 1), partitions, 1, 2);
		req.replay_run_id = run_id;
		return run_search(fcinfo, &req);
	}
}

/* Final status of a run: wait on its segment if it is live. */
static text *
wait_or_cancel(int64 run_id, bool cancel)
{
	char	   *status,
			   *dataset;
	int			partitions;
	int64		handle;
	bool		has_handle;
	dsm_segment *seg = NULL;

	(void) mop_mark_interrupted();
	run_row(run_id, &status, &dataset, &partitions, &handle, &has_handle);
	if (has_handle)
		seg = attach_run(run_id, handle);
	if (seg == NULL)
	{
		if (cancel && strcmp(status, "running") == 0)
		{
			/* orphaned by a crash: no process runs it any more */
			Oid			t = INT8OID;
			Datum		v = Int64GetDatum(run_id);

			SPI_connect();
			SPI_execute_with_args("UPDATE mop.runs SET status = 'cancelled', shm_handle = NULL, "
								  "finished_at = pg_catalog.clock_timestamp() "
								  "WHERE id OPERATOR(pg_catalog.=) $1", 1, &t, &v, NULL, false, 0);
			SPI_execute_with_args(MOP_CANCEL_MODELS_SQL, 1, &t, &v, NULL, false, 0);
			SPI_finish();
			return cstring_to_text("cancelled");
		}
		if (cancel)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("run %lld is not running (status %s)", (long long) run_id, status)));
		return cstring_to_text(status);
	}
	{
		MopRunShared *run = dsm_segment_address(seg);
		text	   *result;

		int64		last_hops = -1;
		TimestampTz last_notice = 0;

		if (cancel)
			request_cancel(run);
		while (run->phase != MOP_PHASE_DONE)
		{
			/* mop_wait reports progress as a blocking search does */
			if (!cancel)
				progress_notice(run, &last_hops, &last_notice);
			mop_wait_release_xmin();
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 100L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		result = cstring_to_text(run->status);
		dsm_detach(seg);
		return result;
	}
}

/* mop_wait(run_id bigint) returns text: block until the run ends. */
Datum
mop_wait(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(wait_or_cancel(PG_GETARG_INT64(0), false));
}

/* mop_cancel(run_id bigint) returns text: stop a run, keep its checkpoints. */
Datum
mop_cancel(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(wait_or_cancel(PG_GETARG_INT64(0), true));
}

/*
 * mop.progress_rows(): one row per worker of each live run of the current
 * role: run, worker, pid, model, epoch, partition, rows done of total.
 */
Datum
mop_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64	   *ids,
			   *handles;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	(void) mop_mark_interrupted();
	SPI_connect();
	if (SPI_execute("SELECT id, shm_handle FROM mop.runs WHERE status OPERATOR(pg_catalog.=) 'running' "
					"AND shm_handle IS NOT NULL ORDER BY id", false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.runs");
	n = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(n, 1));
	handles = palloc(sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		handles[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
	}
	SPI_finish();
	for (int i = 0; i < n; i++)
	{
		dsm_segment *seg = attach_run(ids[i], handles[i]);
		MopRunShared *run;

		if (seg == NULL)
			continue;
		run = dsm_segment_address(seg);
		for (int w = 0; w < run->workers_started && w < MOP_MAX_WORKERS; w++)
		{
			MopSlot		s;
			Datum		v[9];
			bool		nulls[9] = {0};

			SpinLockAcquire(&run->mutex);
			s = run->slots[w];
			SpinLockRelease(&run->mutex);
			v[0] = Int64GetDatum(ids[i]);
			v[1] = Int32GetDatum(w);
			v[2] = Int32GetDatum(s.pid);
			if (s.state == MOP_SLOT_ASSIGNED)
			{
				v[3] = Int64GetDatum(s.model_id);
				v[4] = Int32GetDatum(s.epoch);
				v[5] = Int32GetDatum(s.partition);
				v[6] = Int64GetDatum(s.rows_done);
				v[7] = Int64GetDatum(s.rows_total);
				v[8] = TimestampTzGetDatum(s.started_at);
			}
			else
				for (int c = 3; c < 9; c++)
					nulls[c] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		}
		dsm_detach(seg);
	}
	return (Datum) 0;
}

/*
 * What a worker's slot is doing, in words: starting, idle, loading (a task,
 * its rows not counted yet), training, finishing (validating and
 * committing: its rows are all trained), reporting (done, the coordinator
 * has not taken the result yet), exiting.
 */
static const char *
slot_state_name(const MopSlot *s)
{
	switch (s->state)
	{
		case MOP_SLOT_STARTING:
			return "starting";
		case MOP_SLOT_IDLE:
			return "idle";
		case MOP_SLOT_ASSIGNED:
			if (s->rows_total <= 0)
				return "loading";
			return s->rows_done < s->rows_total ? "training" : "finishing";
		case MOP_SLOT_DONE:
			return "reporting";
		default:
			return "exiting";
	}
}

/* An interval of us microseconds. */
static Interval *
usecs_interval(int64 us)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = us;
	return iv;
}

/* The live runs (id, handle) the caller may see. */
static int
live_runs(int64 **ids, int64 **handles)
{
	int			n;

	SPI_connect();
	if (SPI_execute("SELECT id, shm_handle FROM mop.runs WHERE status OPERATOR(pg_catalog.=) 'running' "
					"AND shm_handle IS NOT NULL ORDER BY id", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.runs");
	n = (int) SPI_processed;
	*ids = MemoryContextAlloc(TopTransactionContext, sizeof(int64) * Max(n, 1));
	*handles = MemoryContextAlloc(TopTransactionContext, sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		(*ids)[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		(*handles)[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
	}
	SPI_finish();
	return n;
}

/*
 * mop.progress_rows() of 0.2: as mop_progress, with the worker's state in
 * words; a busy worker's task is shown whatever its state, and its row
 * counts only once they are known (never 0 of 0).
 */
Datum
mop_progress_v2(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64	   *ids,
			   *handles;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	(void) mop_mark_interrupted();
	n = live_runs(&ids, &handles);
	for (int i = 0; i < n; i++)
	{
		dsm_segment *seg = attach_run(ids[i], handles[i]);
		MopRunShared *run;

		if (seg == NULL)
			continue;
		run = dsm_segment_address(seg);
		for (int w = 0; w < run->workers_started && w < MOP_MAX_WORKERS; w++)
		{
			MopSlot		s;
			Datum		v[10];
			bool		nulls[10] = {0};
			bool		busy;

			SpinLockAcquire(&run->mutex);
			s = run->slots[w];
			SpinLockRelease(&run->mutex);
			busy = s.state == MOP_SLOT_ASSIGNED || s.state == MOP_SLOT_DONE;
			v[0] = Int64GetDatum(ids[i]);
			v[1] = Int32GetDatum(w);
			v[2] = Int32GetDatum(s.pid);
			nulls[2] = s.pid == 0;
			v[3] = CStringGetTextDatum(slot_state_name(&s));
			v[4] = Int64GetDatum(s.model_id);
			v[5] = Int32GetDatum(s.epoch);
			v[6] = Int32GetDatum(s.partition);
			v[7] = Int64GetDatum(s.rows_done);
			v[8] = Int64GetDatum(s.rows_total);
			v[9] = TimestampTzGetDatum(s.started_at);
			for (int c = 4; c < 10; c++)
				nulls[c] = !busy;
			if (busy && s.rows_total <= 0)
				nulls[7] = nulls[8] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
		}
		dsm_detach(seg);
	}
	return (Datum) 0;
}

/*
 * mop.run_progress_rows(): one row per running run the caller may see:
 * sub-epochs done of those planned so far, models finished of those
 * started, the best validation metric so far, elapsed time, an estimate of
 * the time left (elapsed x remaining / done: sub-epochs of a run take about
 * equally long), and how many of its workers are busy.
 */
Datum
mop_run_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64	   *ids,
			   *handles;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	(void) mop_mark_interrupted();
	n = live_runs(&ids, &handles);
	for (int i = 0; i < n; i++)
	{
		dsm_segment *seg = attach_run(ids[i], handles[i]);
		MopRunShared *run;
		Datum		v[10];
		bool		nulls[10] = {0};
		int64		done,
					total;
		int32		mdone,
					nmodels,
					started,
					busy = 0;
		double		best;
		TimestampTz t0,
					now = GetCurrentTimestamp();
		MopRunPhase phase;

		if (seg == NULL)
			continue;
		run = dsm_segment_address(seg);
		SpinLockAcquire(&run->mutex);
		phase = run->phase;
		done = run->hops_done;
		total = run->hops_total;
		mdone = run->models_done;
		nmodels = run->n_models;
		best = run->best_metric;
		t0 = run->started_at;
		started = Min(run->workers_started, MOP_MAX_WORKERS);
		for (int w = 0; w < started; w++)
			busy += run->slots[w].state == MOP_SLOT_ASSIGNED || run->slots[w].state == MOP_SLOT_DONE;
		SpinLockRelease(&run->mutex);
		dsm_detach(seg);
		v[0] = Int64GetDatum(ids[i]);
		v[1] = CStringGetTextDatum(phase == MOP_PHASE_STARTING ? "starting" :
								   phase == MOP_PHASE_RUNNING ? "training" : "finishing");
		v[2] = Int64GetDatum(done);
		v[3] = Int64GetDatum(total);
		v[4] = Int32GetDatum(mdone);
		v[5] = Int32GetDatum(nmodels);
		v[6] = Float8GetDatum(best);
		nulls[6] = isnan(best);
		v[7] = IntervalPGetDatum(usecs_interval(now - t0));
		nulls[7] = t0 == 0;
		if (done > 0 && total >= done && t0 != 0)
			v[8] = IntervalPGetDatum(usecs_interval((int64) ((double) (now - t0) *
															 (double) (total - done) / (double) done)));
		else
			nulls[8] = true;
		v[9] = Int32GetDatum(busy);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}

/* Validate Hyperband's R and eta, naming the bad one. */
static void
check_hyperband_args(int R, int eta)
{
	if (R < 1 || R > 100000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"max_resource\": %d", R),
				 errhint("The maximum resource is a number of epochs, 1 to 100000.")));
	if (eta < 2 || eta > 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"eta\": %d", eta),
				 errhint("The reduction factor eta must be at least 2 (3 is usual).")));
}

/*
 * mop_hyperband_plan(max_resource int, eta int) returns the plan of Li et
 * al.: (bracket, round, configs, resource) with resource in epochs.
 */
Datum
mop_hyperband_plan_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			R = PG_GETARG_INT32(0);
	int			eta = PG_GETARG_INT32(1);
	int32		n;
	mop_hb_round *rows;

	check_hyperband_args(R, eta);
	InitMaterializedSRF(fcinfo, 0);
	n = mop_hyperband_plan(R, eta, NULL, 0);
	if (n < 0)
		elog(ERROR, "could not compute the Hyperband plan (R %d, eta %d)", R, eta);
	rows = palloc(sizeof(mop_hb_round) * Max(n, 1));
	mop_hyperband_plan(R, eta, rows, n);
	for (int i = 0; i < n; i++)
	{
		Datum		v[4];
		bool		nulls[4] = {0};

		v[0] = Int32GetDatum(rows[i].bracket);
		v[1] = Int32GetDatum(rows[i].round);
		v[2] = Int32GetDatum(rows[i].configs);
		v[3] = Int32GetDatum(rows[i].resource);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}

/*
 * mop_hyperband(dataset text, space jsonb, max_resource int, eta int,
 *               workers int, seed int, scheduler text, wait bool)
 * Hyperband on MOP: every bracket's successive halving runs on the
 * workers; promoted models resume from their checkpoints.  The
 * configurations of all brackets are drawn from the space up front (and
 * validated); the driver starts them as the plan needs them.
 */
static Datum
mop_hyperband_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			R = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
	int			eta = PG_ARGISNULL(3) ? 3 : PG_GETARG_INT32(3);
	int			seed = PG_ARGISNULL(5) ? 0 : PG_GETARG_INT32(5);
	int32		n,
				trials = 0;
	mop_hb_round *rows;
	MopDataset *ds;
	List	   *configs;
	int			epochs_unused;

	check_hyperband_args(R, eta);
	common_args(fcinfo, 2, &dataset, &space, &epochs_unused);
	n = mop_hyperband_plan(R, eta, NULL, 0);
	rows = palloc(sizeof(mop_hb_round) * Max(n, 1));
	mop_hyperband_plan(R, eta, rows, n);
	for (int i = 0; i < n; i++)
		if (rows[i].round == 0)
			trials += rows[i].configs;
	if (trials > 100000)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("Hyperband with max_resource %d and eta %d needs %d configurations, more than 100000",
						R, eta, trials)));
	ds = mop_dataset_lookup(dataset, false);
	configs = mop_space_random(space, trials, (uint64) seed);
	validate_configs(configs, ds);
	{
		RunRequest	req;

		request_init(&req, fcinfo, "hyperband", dataset, space, configs,
					 R, ds->partitions, 4, 7);
		req.seed = seed;
		req.pick = pick_arg(fcinfo, 6);
		req.deterministic = opt_bool(fcinfo, 8);
		req.algo = MOP_ALGO_HYPERBAND;
		req.max_resource = R;
		req.eta = eta;
		req.min_resource = 1;
		return run_search(fcinfo, &req);
	}
}

/*
 * mop_asha(dataset text, space jsonb, max_resource int, eta int,
 *          min_resource int, max_trials int, workers int, seed int,
 *          scheduler text, wait bool)
 * Asynchronous successive halving on MOP: no barriers; a worker with
 * nothing to do gets the best not-yet-promoted model of the highest rung
 * that has one (it resumes from its checkpoint), or else a new
 * configuration, up to max_trials.
 */
static Datum
mop_asha_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			R = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
	int			eta = PG_ARGISNULL(3) ? 3 : PG_GETARG_INT32(3);
	int			r_min = PG_ARGISNULL(4) ? 1 : PG_GETARG_INT32(4);
	int			trials = PG_ARGISNULL(5) ? 20 : PG_GETARG_INT32(5);
	int			seed = PG_ARGISNULL(7) ? 0 : PG_GETARG_INT32(7);
	MopDataset *ds;
	List	   *configs;
	int			epochs_unused;

	check_hyperband_args(R, eta);
	if (r_min < 1 || r_min > R)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"min_resource\": %d", r_min),
				 errhint("The first rung trains 1 to max_resource (%d) epochs.", R)));
	if (trials < 1 || trials > 100000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"max_trials\": %d", trials),
				 errhint("Ask for 1 to 100000 configurations.")));
	common_args(fcinfo, 2, &dataset, &space, &epochs_unused);
	ds = mop_dataset_lookup(dataset, false);
	configs = mop_space_random(space, trials, (uint64) seed);
	validate_configs(configs, ds);
	{
		RunRequest	req;

		request_init(&req, fcinfo, "asha", dataset, space, configs,
					 R, ds->partitions, 6, 9);
		req.seed = seed;
		req.pick = pick_arg(fcinfo, 8);
		req.algo = MOP_ALGO_ASHA;
		req.max_resource = R;
		req.eta = eta;
		req.min_resource = r_min;
		return run_search(fcinfo, &req);
	}
}

/* A described space PBT or TPE can search: 1..32 parameters, valid. */
static void
check_numeric_space(MopSpaceDesc *desc, const char *what)
{
	char		err[256];

	if (desc->n_params < 1 || desc->n_params > MOP_PBT_MAX_PARAMS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s needs 1 to %d hyperparameters to search, the space has %d",
						what, MOP_PBT_MAX_PARAMS, desc->n_params),
				 errhint("Give a list or a distribution for at least one hyperparameter, e.g. \"learning_rate\": {\"loguniform\": [1e-4, 1e-1]}.")));
	if (mop_params_check(desc->params, desc->n_params, err, sizeof(err)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space: %s", err)));
}

/*
 * mop_pbt(dataset text, space jsonb, population int, epochs int,
 *         interval int, quantile float8, resample float8, workers int,
 *         seed int, wait bool)
 * Population based training on MOP: every member trains asynchronously;
 * each time one completes `interval` epochs it is ranked against the
 * others' latest scores, and a member of the bottom quantile copies the
 * checkpoint (weights and optimizer state) of a random top-quantile member
 * and explores (x0.8 / x1.2, or resampling with probability `resample`).
 * Lineage is recorded in mop.decisions (parent_model_id, hyperparameters).
 */
static Datum
mop_pbt_sql_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			population = PG_ARGISNULL(2) ? 8 : PG_GETARG_INT32(2);
	int			epochs;
	int			interval = PG_ARGISNULL(4) ? 1 : PG_GETARG_INT32(4);
	double		quantile = PG_ARGISNULL(5) ? 0.25 : PG_GETARG_FLOAT8(5);
	double		resample = PG_ARGISNULL(6) ? 0.25 : PG_GETARG_FLOAT8(6);
	int			seed = PG_ARGISNULL(8) ? 0 : PG_GETARG_INT32(8);
	MopSpaceDesc *desc;
	MopDataset *ds;
	mop_pbt_opts o;
	mop_pbt    *p;
	List	   *configs = NIL;

	common_args(fcinfo, 3, &dataset, &space, &epochs);
	if (population < 2 || population > 10000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"population\": %d", population),
				 errhint("A population has 2 to 10000 members.")));
	if (interval < 1 || interval > epochs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"interval\": %d", interval),
				 errhint("Exploit and explore every 1 to %d epochs.", epochs)));
	if (!(quantile > 0 && quantile <= 0.5))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"quantile\": %g", quantile),
				 errhint("The quantile is in (0, 0.5].")));
	if (!(resample >= 0 && resample <= 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"resample\": %g", resample),
				 errhint("The resampling probability is in [0, 1].")));
	desc = mop_space_describe(space);
	for (int i = 0; i < desc->n_keys; i++)
		if (strcmp(desc->keys[i], "model") == 0 && desc->param_of_key[i] >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid search space parameter \"model\": PBT copies weights between members, so they share one architecture"),
					 errhint("Give one architecture and lists or distributions for the hyperparameters.")));
	check_numeric_space(desc, "PBT");
	o.quantile = quantile;
	o.resample_p = resample;
	o.down = 0.8;
	o.up = 1.2;
	/* the coordinator rebuilds the same population from the same seed */
	p = mop_pbt_new(desc->params, desc->n_params, population, &o, (uint64) seed);
	if (p == NULL)
		elog(ERROR, "could not create the PBT population");
	for (int m = 0; m < population; m++)
		configs = lappend(configs, mop_space_config(desc, mop_pbt_values(p, m)));
	mop_pbt_free(p);
	ds = mop_dataset_lookup(dataset, false);
	validate_configs(configs, ds);
	{
		RunRequest	req;

		request_init(&req, fcinfo, "pbt", dataset, space, configs,
					 epochs, ds->partitions, 7, 9);
		req.seed = seed;
		req.pick = pick_arg(fcinfo, -1);
		req.deterministic = opt_bool(fcinfo, 10);
		req.algo = MOP_ALGO_PBT;
		req.pbt_interval = interval;
		req.pbt_quantile = quantile;
		req.pbt_resample = resample;
		return run_search(fcinfo, &req);
	}
}

/*
 * mop_tpe(dataset text, space jsonb, trials int, epochs int, n_startup int,
 *         gamma float8, workers int, seed int, wait bool)
 * The Tree-structured Parzen Estimator (Bergstra et al. 2011) on MOP: a new
 * configuration is proposed whenever a worker would otherwise idle, from
 * the results of the trials completed so far (random for the first
 * n_startup; running trials count as "constant liars"), so all workers stay
 * busy; each trains `epochs` epochs and reports its best validation score.
 */
static Datum
mop_tpe_sql_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			trials = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
	int			epochs;
	int			n_startup = PG_ARGISNULL(4) ? 10 : PG_GETARG_INT32(4);
	double		gamma = PG_ARGISNULL(5) ? 0.1 : PG_GETARG_FLOAT8(5);
	int			seed = PG_ARGISNULL(7) ? 0 : PG_GETARG_INT32(7);
	MopSpaceDesc *desc;
	MopDataset *ds;
	List	   *configs;

	common_args(fcinfo, 3, &dataset, &space, &epochs);
	if (trials < 1 || trials > 100000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"trials\": %d", trials),
				 errhint("Ask for 1 to 100000 trials.")));
	if (n_startup < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"n_startup\": %d", n_startup),
				 errhint("TPE needs at least one random trial to start from.")));
	if (!(gamma > 0 && gamma <= 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"gamma\": %g", gamma),
				 errhint("gamma, the fraction of good trials, is in (0, 1].")));
	desc = mop_space_describe(space);
	check_numeric_space(desc, "TPE");
	/* configurations from the prior: every one must be valid for the dataset */
	ds = mop_dataset_lookup(dataset, false);
	configs = mop_space_random(space, trials, (uint64) seed);
	validate_configs(configs, ds);
	{
		RunRequest	req;

		request_init(&req, fcinfo, "tpe", dataset, space, configs,
					 epochs, ds->partitions, 6, 8);
		req.seed = seed;
		req.pick = pick_arg(fcinfo, -1);
		req.deterministic = opt_bool(fcinfo, 9);
		req.median_stop = parse_early_stopping(fcinfo, 10);
		if (req.median_stop && req.deterministic)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("early_stopping cannot be combined with deterministic => true"),
					 errdetail("The median rule compares a trial with the others' results so far, which depends on timing."),
					 errhint("Drop one of the two.")));
		req.algo = MOP_ALGO_TPE;
		req.tpe_startup = n_startup;
		req.tpe_gamma = gamma;
		return run_search(fcinfo, &req);
	}
}

/* ---- device => (the last argument of each) ------------------------------ */

Datum
mop_grid_search(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 10, mop_grid_search_body);
}

Datum
mop_random_search(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 11, mop_random_search_body);
}

Datum
mop_resume(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 4, mop_resume_body);
}

Datum
mop_replay(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 3, mop_replay_body);
}

Datum
mop_hyperband(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 9, mop_hyperband_body);
}

Datum
mop_asha(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 10, mop_asha_body);
}

Datum
mop_pbt_sql(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 11, mop_pbt_sql_body);
}

Datum
mop_tpe_sql(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 11, mop_tpe_sql_body);
}
