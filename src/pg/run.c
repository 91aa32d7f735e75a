/*
 * run.c -- the session's side of a model-selection run: start its
 * coordinator, wait for it, cancel it when the wait is interrupted.
 *
 * Everything that can be checked is checked before this (run_args.c), in
 * the caller's transaction, so bad input fails at once with a clear error
 * and nothing is started.  Then a dynamic shared memory segment carries the
 * request to a coordinator background worker, which commits the run on its
 * own (see run.h for the whole picture).  In the blocking form the caller
 * waits on its latch, printing a NOTICE as epochs complete; a query cancel
 * (pg_cancel_backend, statement_timeout) asks the coordinator to cancel the
 * run, waits until the workers have stopped (within a minibatch), and
 * re-throws.  The ranked result comes from mop.models, which the caller
 * sees as soon as the workers commit (READ COMMITTED takes a new snapshot
 * per query).
 *
 * Every field of the run's segment that its coordinator or workers write is
 * read here under the segment's spinlock.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
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
#include "storage/shm_toc.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "runreq.h"

/* Ranked results of a run: mop.leaderboard's ranking, the one definition. */
#define RESULT_SQL \
	"SELECT l.run_id, l.model_id, l.rank::int, l.status, l.metric, l.best_valid_metric, " \
	"  l.best_valid_loss, l.best_epoch, l.epochs_done, l.config " \
	"FROM mop.leaderboard l WHERE l.run_id OPERATOR(pg_catalog.=) $1 ORDER BY l.rank"

/*
 * The same for a database whose catalog is still 0.1 (before its ALTER
 * EXTENSION mop UPDATE; detected by mop.models.best_state, which 0.2 adds):
 * there ordinary roles may not read mop.leaderboard, and it ranked by the
 * metric alone, so this is 0.1's own ranking.
 */
#define RESULT_SQL_01 \
	"SELECT m.run_id, m.id, (pg_catalog.row_number() OVER (ORDER BY " \
	"  (m.status OPERATOR(pg_catalog.=) ANY ('{done,training,stopped}'::text[])) DESC, " \
	"  CASE WHEN m.higher_is_better THEN OPERATOR(pg_catalog.-) m.best_valid_metric " \
	"       ELSE m.best_valid_metric END ASC NULLS LAST, m.id))::int AS rank, " \
	"  m.status, m.metric, m.best_valid_metric, m.best_valid_loss, m.best_epoch, " \
	"  m.epochs_done, m.config " \
	"FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY 3"


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

/* Copy a C string into a new entry of the run segment's table of contents. */
static void
toc_put_string(shm_toc *toc, uint64 key, const char *str)
{
	Size		len = strlen(str) + 1;
	char	   *p = shm_toc_allocate(toc, len);

	memcpy(p, str, len);
	shm_toc_insert(toc, key, p);
}

/* Create the run segment (run.h) and start the coordinator. */
static dsm_segment *
launch(const RunRequest *req, BackgroundWorkerHandle **handle)
{
	const char *space = req->space ?
		JsonbToCString(NULL, &req->space->root, VARSIZE(req->space)) : "null";
	const char *name = req->name ? req->name : "";
	const char *tags = req->tags ?
		JsonbToCString(NULL, &req->tags->root, VARSIZE(req->tags)) : "";
	int			n_configs = list_length(req->configs);
	char	  **configs = palloc(sizeof(char *) * Max(n_configs, 1));
	Size		configs_size = add_size(offsetof(MopRunConfigs, offsets),
										mul_size(sizeof(Size), n_configs));
	shm_toc_estimator e;
	ListCell   *lc;
	dsm_segment *seg;
	shm_toc    *toc;
	MopRunShared *run;
	MopRunConfigs *c;
	Size		off;
	BackgroundWorker bgw;
	pid_t		pid;

	check_role_can_connect();
	foreach(lc, req->configs)
	{
		Jsonb	   *j = (Jsonb *) lfirst(lc);
		char	   *text = JsonbToCString(NULL, &j->root, VARSIZE(j));

		configs[foreach_current_index(lc)] = text;
		configs_size = add_size(configs_size, strlen(text) + 1);
	}
	shm_toc_initialize_estimator(&e);
	shm_toc_estimate_chunk(&e, sizeof(MopRunShared));
	shm_toc_estimate_chunk(&e, strlen(req->kind) + 1);
	shm_toc_estimate_chunk(&e, strlen(req->dataset) + 1);
	shm_toc_estimate_chunk(&e, strlen(space) + 1);
	shm_toc_estimate_chunk(&e, configs_size);
	shm_toc_estimate_chunk(&e, strlen(name) + 1);
	shm_toc_estimate_chunk(&e, strlen(tags) + 1);
	shm_toc_estimate_keys(&e, 7);
	seg = dsm_create(shm_toc_estimate(&e), 0);
	toc = shm_toc_create(MOP_RUN_MAGIC, dsm_segment_address(seg), shm_toc_estimate(&e));

	run = shm_toc_allocate(toc, sizeof(MopRunShared));
	memset(run, 0, sizeof(MopRunShared));
	SpinLockInit(&run->mutex);
	run->database = MyDatabaseId;
	run->user = GetUserId();
	run->caller_latch = MyLatch;
	run->resume_run_id = req->resume_run_id;
	run->n_workers = req->workers;
	run->opts = req->opts;
	/*
	 * how to train: the starting (or resuming) session's settings; the
	 * threads shared out among the workers this server runs (over segments,
	 * mop.workers_per_segment of them)
	 */
	run->opts.blas_threads = mop_threads_for(mop_dataset_segment_count(req->dataset) > 0 ?
											 mop_workers_per_segment : req->workers);
	/* which BLAS build and kernels (the CPU's path) this server trains with */
	mop_blas_ensure();
	strlcpy(run->opts.blas, nn_blas_config(), sizeof(run->opts.blas));
	run->opts.gpu = mop_gpu_resolved;
	run->opts.gpu_memory_mb = mop_gpu_memory_mb;
	run->opts.gpu_tf32 = mop_gpu_tf32;
	run->opts.gpu_unverified = mop_gpu_unverified;
	run->task_timeout_ms = mop_task_timeout_ms;
	run->opts.checkpoint_every = mop_checkpoint_every;
	run->handover = DSM_HANDLE_INVALID;
	run->segment_timeout_ms = mop_segment_timeout_ms;
	run->segment_wait_ms = mop_segment_wait_ms;
	run->workers_per_segment = mop_workers_per_segment;
	run->n_models = n_configs;
	run->n_configs = n_configs;
	run->best_metric = NAN;
	shm_toc_insert(toc, MOP_KEY_RUN, run);

	toc_put_string(toc, MOP_KEY_KIND, req->kind);
	toc_put_string(toc, MOP_KEY_DATASET, req->dataset);
	toc_put_string(toc, MOP_KEY_SPACE, space);
	toc_put_string(toc, MOP_KEY_NAME, name);
	toc_put_string(toc, MOP_KEY_TAGS, tags);

	c = shm_toc_allocate(toc, configs_size);
	c->n_configs = n_configs;
	off = offsetof(MopRunConfigs, offsets) + sizeof(Size) * n_configs;
	for (int i = 0; i < n_configs; i++)
	{
		Size		len = strlen(configs[i]) + 1;

		c->offsets[i] = off;
		memcpy((char *) c + off, configs[i], len);
		off += len;
	}
	Assert(off == configs_size);
	shm_toc_insert(toc, MOP_KEY_CONFIGS, c);

	mop_bgworker_init(&bgw, "mop_coordinator_main", "mop coordinator");
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

/* The run's phase, read under its spinlock. */
MopRunPhase
mop_run_phase(MopRunShared *run)
{
	MopRunPhase phase;

	SpinLockAcquire(&run->mutex);
	phase = run->phase;
	SpinLockRelease(&run->mutex);
	return phase;
}

/* What the run's segment says about its start and end, read under its spinlock. */
void
mop_run_outcome(MopRunShared *run, MopRunOutcome *out)
{
	SpinLockAcquire(&run->mutex);
	out->phase = run->phase;
	out->run_id = run->run_id;
	memcpy(out->status, run->status, sizeof(out->status));
	memcpy(out->error, run->error, sizeof(out->error));
	out->error_code = run->error_code;
	memcpy(out->error_hint, run->error_hint, sizeof(out->error_hint));
	memcpy(out->note, run->note, sizeof(out->note));
	SpinLockRelease(&run->mutex);
}

/* Wait until the coordinator has committed the run (or failed). */
static int64
wait_started(MopRunShared *run, BackgroundWorkerHandle *handle)
{
	for (;;)
	{
		MopRunOutcome o;
		pid_t		pid;

		mop_run_outcome(run, &o);
		if (o.phase == MOP_PHASE_DONE && strcmp(o.status, "failed") == 0 &&
			o.run_id == 0)
			ereport(ERROR,
					(errcode(o.error_code ? o.error_code : ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("%s", o.error),
					 errdetail("The run's coordinator stopped before the run started."),
					 o.error_hint[0] ? errhint("%s", o.error_hint) : 0));
		if (o.phase != MOP_PHASE_STARTING && o.run_id != 0)
			return o.run_id;
		if (o.phase == MOP_PHASE_DONE)
			return o.run_id;
		if (GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED)
		{
			/* read again: it may have got past its start just before it stopped */
			mop_run_outcome(run, &o);
			if (o.phase == MOP_PHASE_STARTING)
				ereport(ERROR,
						(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
						 errmsg("the coordinator of the mop run exited before starting: %s",
								o.error[0] ? o.error : "see the server log")));
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 200L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Flag the run for cancellation and wake its coordinator. */
void
mop_run_request_cancel(MopRunShared *run)
{
	Latch	   *latch;

	SpinLockAcquire(&run->mutex);
	run->cancel_requested = true;
	latch = run->coordinator_latch;
	SpinLockRelease(&run->mutex);
	if (latch)
		SetLatch(latch);
}

/*
 * Ask the run to cancel and wait for it, at most max_seconds and without
 * serving interrupts (this runs while an error or a cancel is being
 * handled).  The coordinator sets the caller's latch when the run is done.
 */
static void
cancel_and_wait(MopRunShared *run, int max_seconds)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   max_seconds * 1000);

	mop_run_request_cancel(run);
	while (mop_run_phase(run) != MOP_PHASE_DONE)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(left, 1000L), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
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

/* The run's progress, read under its spinlock. */
void
mop_run_read_progress(MopRunShared *run, MopRunProgress *p)
{
	int32		started;

	SpinLockAcquire(&run->mutex);
	p->phase = run->phase;
	p->run_id = run->run_id;
	p->hops_done = run->hops_done;
	p->hops_total = run->hops_total;
	p->models_done = run->models_done;
	p->n_models = run->n_models;
	p->best_metric = run->best_metric;
	p->started_at = run->started_at;
	started = Min(run->workers_started, MOP_MAX_WORKERS);
	p->busy_workers = 0;
	for (int w = 0; w < started; w++)
		p->busy_workers += run->slots[w].state == MOP_SLOT_ASSIGNED ||
			run->slots[w].state == MOP_SLOT_DONE;
	SpinLockRelease(&run->mutex);
}

/*
 * A NOTICE with the run's progress, at most every 5 seconds and only when a
 * sub-epoch finished since the last one (the blocking searches' and
 * mop_wait's progress lines).
 */
void
mop_run_progress_notice(MopRunShared *run, int64 *last_hops, TimestampTz *last_notice)
{
	MopRunProgress p;
	TimestampTz now = GetCurrentTimestamp();

	mop_run_read_progress(run, &p);
	if (p.hops_done != *last_hops && p.hops_done > 0 &&
		TimestampDifferenceExceeds(*last_notice, now, 5000))
	{
		double		elapsed = (double) (now - p.started_at) / 1e6;
		double		eta = elapsed * (double) (p.hops_total - p.hops_done) / (double) p.hops_done;

		ereport(NOTICE,
				(errmsg("run %lld: %lld of %lld sub-epochs, %d of %d models finished, best validation metric %s, elapsed %s, eta %s",
						(long long) p.run_id, (long long) p.hops_done, (long long) p.hops_total,
						p.models_done, p.n_models,
						isnan(p.best_metric) ? "n/a" : psprintf("%.4f", p.best_metric),
						fmt_duration(elapsed), fmt_duration(eta))));
		*last_hops = p.hops_done;
		*last_notice = now;
	}
}

/*
 * Wait on this process's latch until the run is done, looking every poll_ms
 * at the latest (a run's coordinator sets the latch of the session that
 * started it; other sessions poll), with a progress NOTICE now and then
 * when notices is set.
 */
void
mop_run_wait_done(MopRunShared *run, bool notices, long poll_ms)
{
	int64		last_hops = -1;
	TimestampTz last_notice = 0;

	while (mop_run_phase(run) != MOP_PHASE_DONE)
	{
		if (notices)
			mop_run_progress_notice(run, &last_hops, &last_notice);
		/* the run's superseded checkpoints must not wait for this statement */
		mop_wait_release_xmin();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 poll_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Block until the run is done, with NOTICE progress; cancel on interrupt. */
static void
wait_done(MopRunShared *run)
{
	PG_TRY();
	{
		mop_run_wait_done(run, true, 1000L);
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
	if (SPI_execute_with_args(mop_catalog_is_02() ? RESULT_SQL : RESULT_SQL_01,
							  1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
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
Datum
mop_run_search(FunctionCallInfo fcinfo, const RunRequest *req)
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
	run = mop_run_shared(seg);
	run_id = wait_started(run, handle);
	if (wait)
	{
		MopRunOutcome o;

		wait_done(run);
		mop_run_outcome(run, &o);
		if (strcmp(o.status, "failed") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
					 errmsg("mop run %lld failed: %s", (long long) run_id, o.error),
					 errhint("Models and checkpoints committed so far are kept; mop_resume(%lld) continues the run.",
							 (long long) run_id)));
		if (strcmp(o.status, "interrupted") == 0)
			ereport(WARNING,
					(errmsg("mop run %lld was interrupted: %s", (long long) run_id, o.error),
					 errhint("Models and checkpoints committed so far are kept; mop_resume(%lld) continues the run.",
							 (long long) run_id)));
		if (strcmp(o.status, "cancelled") == 0)
			ereport(NOTICE,
					(errmsg("mop run %lld was cancelled", (long long) run_id),
					 errhint("mop_resume(%lld) continues it.", (long long) run_id)));
		if (strcmp(o.status, "done") == 0 && o.note[0] != '\0')
			ereport(NOTICE,
					(errmsg("mop run %lld: %s", (long long) run_id, o.note),
					 errhint("mop.runs.note says so too; mop.decisions has a row for each model stopped.")));
	}
	SpinLockAcquire(&run->mutex);
	run->caller_latch = NULL;
	SpinLockRelease(&run->mutex);
	dsm_detach(seg);
	return_results(fcinfo, run_id);
	return (Datum) 0;
}

/* The run's row: status, dataset name, partitions, shm handle; ERROR if absent. */
void
mop_run_row(int64 run_id, char **status, char **dataset, int *partitions, int64 *handle,
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

/*
 * The fixed part of a run segment, found through its table of contents; NULL
 * if seg is not a run's (a recycled handle: another magic, or no such entry).
 */
MopRunShared *
mop_run_shared(dsm_segment *seg)
{
	Size		len = dsm_segment_map_length(seg);
	char	   *base = dsm_segment_address(seg);
	shm_toc    *toc;
	char	   *run;

	if (len < sizeof(MopRunShared))
		return NULL;
	toc = shm_toc_attach(MOP_RUN_MAGIC, base);
	if (toc == NULL)
		return NULL;
	run = shm_toc_lookup(toc, MOP_KEY_RUN, true);
	if (run == NULL || run < base || run + sizeof(MopRunShared) > base + len)
		return NULL;
	return (MopRunShared *) run;
}

/* A string entry (MOP_KEY_KIND, _DATASET, _SPACE, _NAME, _TAGS) of a run segment. */
const char *
mop_run_string(dsm_segment *seg, uint64 key)
{
	shm_toc    *toc = shm_toc_attach(MOP_RUN_MAGIC, dsm_segment_address(seg));

	Assert(key == MOP_KEY_KIND || key == MOP_KEY_DATASET || key == MOP_KEY_SPACE ||
		   key == MOP_KEY_NAME || key == MOP_KEY_TAGS);
	return shm_toc_lookup(toc, key, false);
}

/* The configurations of a run segment. */
const MopRunConfigs *
mop_run_configs(dsm_segment *seg)
{
	shm_toc    *toc = shm_toc_attach(MOP_RUN_MAGIC, dsm_segment_address(seg));

	return shm_toc_lookup(toc, MOP_KEY_CONFIGS, false);
}

/* The run's id (0 until its coordinator has committed it), read under its spinlock. */
int64
mop_run_id_of(MopRunShared *run)
{
	int64		id;

	SpinLockAcquire(&run->mutex);
	id = run->run_id;
	SpinLockRelease(&run->mutex);
	return id;
}

/* The run's options, copied under its spinlock (a resuming coordinator sets them). */
void
mop_run_options_of(MopRunShared *run, MopRunOptions *opts)
{
	SpinLockAcquire(&run->mutex);
	*opts = run->opts;
	SpinLockRelease(&run->mutex);
}

/* Attach to a live run's segment, or NULL if it is not running. */
dsm_segment *
mop_run_attach(int64 run_id, int64 handle)
{
	dsm_segment *seg = dsm_attach((dsm_handle) handle);
	MopRunShared *run;

	if (seg == NULL)
		return NULL;
	/* a table of contents with the run's magic says the spinlock is one */
	run = mop_run_shared(seg);
	if (run != NULL && mop_run_id_of(run) == run_id)
		return seg;
	dsm_detach(seg);
	return NULL;
}

/*
 * The rows (id, shm_handle) of the last SPI query, copied into cxt: run ids,
 * their segments' handles and (unless has is NULL) whether each handle is
 * set.  Returns the number of rows.
 */
int
mop_run_handles(MemoryContext cxt, int64 **ids, int64 **handles, bool **has)
{
	int			n = (int) SPI_processed;

	*ids = MemoryContextAlloc(cxt, sizeof(int64) * Max(n, 1));
	*handles = MemoryContextAlloc(cxt, sizeof(int64) * Max(n, 1));
	if (has)
		*has = MemoryContextAlloc(cxt, sizeof(bool) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		bool		isnull;

		(*ids)[i] = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		(*handles)[i] = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		if (has)
			(*has)[i] = !isnull;
	}
	return n;
}
