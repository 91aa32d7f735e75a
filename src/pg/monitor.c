/*
 * monitor.c -- watching runs from any session: mop_wait, mop_cancel,
 * mop_set_workers and the C side of the progress views (mop.progress,
 * mop.run_progress).
 *
 * Each attaches to a live run's shared segment through the handle in
 * mop.runs (the magic and run id guard against a recycled handle) and
 * reads the fields the run's processes write under its spinlock.  Runs
 * that lost their processes are marked 'interrupted' first (orphans.c), so
 * the first of these after a restart tells the truth.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "runreq.h"

PG_FUNCTION_INFO_V1(mop_wait);
PG_FUNCTION_INFO_V1(mop_cancel);
PG_FUNCTION_INFO_V1(mop_wait_by_name);
PG_FUNCTION_INFO_V1(mop_cancel_by_name);
PG_FUNCTION_INFO_V1(mop_progress);
PG_FUNCTION_INFO_V1(mop_progress_v2);
PG_FUNCTION_INFO_V1(mop_run_progress);
PG_FUNCTION_INFO_V1(mop_set_workers);

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
	mop_run_row(run_id, &status, &dataset, &partitions, &handle, &has_handle);
	if (has_handle)
		seg = mop_run_attach(run_id, handle);
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
		MopRunShared *run = mop_run_shared(seg);
		MopRunOutcome o;

		if (cancel)
			mop_run_request_cancel(run);
		/* mop_wait reports progress as a blocking search does */
		mop_run_wait_done(run, !cancel, 100L);
		mop_run_outcome(run, &o);
		dsm_detach(seg);
		return cstring_to_text(o.status);
	}
}

/*
 * The live runs (id, handle) the caller may see, read with the statement's
 * snapshot (read_only) or a new one.
 */
static int
live_runs(bool read_only, int64 **ids, int64 **handles)
{
	int			n;

	SPI_connect();
	if (SPI_execute("SELECT id, shm_handle FROM mop.runs WHERE status OPERATOR(pg_catalog.=) 'running' "
					"AND shm_handle IS NOT NULL ORDER BY id", read_only, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.runs");
	n = mop_run_handles(TopTransactionContext, ids, handles, NULL);
	SPI_finish();
	return n;
}

/*
 * The workers a progress view shows of a run: those started so far, read
 * under the run's spinlock.
 */
static int
slots_started(MopRunShared *run)
{
	int			n;

	SpinLockAcquire(&run->mutex);
	n = Min(run->workers_started, MOP_MAX_WORKERS);
	SpinLockRelease(&run->mutex);
	return n;
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

/* mop_wait(name text) returns text: mop_wait of the caller's run of that name. */
Datum
mop_wait_by_name(PG_FUNCTION_ARGS)
{
	int64		id = mop_run_id_by_name_or_error(text_to_cstring(PG_GETARG_TEXT_PP(0)));

	PG_RETURN_TEXT_P(wait_or_cancel(id, false));
}

/* mop_cancel(name text) returns text: mop_cancel of the caller's run of that name. */
Datum
mop_cancel_by_name(PG_FUNCTION_ARGS)
{
	int64		id = mop_run_id_by_name_or_error(text_to_cstring(PG_GETARG_TEXT_PP(0)));

	PG_RETURN_TEXT_P(wait_or_cancel(id, true));
}

/*
 * A row of a progress view about live run run_id: about its worker w, whose
 * slot s was copied under the run's spinlock, or (w -1, s NULL) about the
 * run itself.
 */
typedef void (*ProgressRowFn) (ReturnSetInfo *rsinfo, int64 run_id,
							   MopRunShared *run, int w, const MopSlot *s);

/*
 * The rows of a progress view: for every live run the caller may see (read
 * with the statement's snapshot, or a new one unless read_only), one row
 * per started worker (per_worker) or one for the run.
 */
static Datum
progress_rows(FunctionCallInfo fcinfo, bool read_only, bool per_worker,
			  ProgressRowFn row)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64	   *ids,
			   *handles;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	(void) mop_mark_interrupted();
	n = live_runs(read_only, &ids, &handles);
	for (int i = 0; i < n; i++)
	{
		dsm_segment *seg = mop_run_attach(ids[i], handles[i]);
		MopRunShared *run;

		if (seg == NULL)
			continue;
		run = mop_run_shared(seg);
		if (!per_worker)
			row(rsinfo, ids[i], run, -1, NULL);
		for (int w = 0; per_worker && w < slots_started(run); w++)
		{
			MopSlot		s;

			SpinLockAcquire(&run->mutex);
			s = run->slots[w];
			SpinLockRelease(&run->mutex);
			/* a worker taken out of the run (mop_set_workers) */
			if (s.retired)
				continue;
			row(rsinfo, ids[i], run, w, &s);
		}
		dsm_detach(seg);
	}
	return (Datum) 0;
}

/* mop_progress's row: a worker's task while it is assigned one. */
static void
progress_row(ReturnSetInfo *rsinfo, int64 run_id, MopRunShared *run, int w,
			 const MopSlot *s)
{
	Datum		v[9];
	bool		nulls[9] = {0};

	v[0] = Int64GetDatum(run_id);
	v[1] = Int32GetDatum(w);
	v[2] = Int32GetDatum(s->pid);
	if (s->state == MOP_SLOT_ASSIGNED)
	{
		v[3] = Int64GetDatum(s->model_id);
		v[4] = Int32GetDatum(s->epoch);
		v[5] = Int32GetDatum(s->partition);
		v[6] = Int64GetDatum(s->rows_done);
		v[7] = Int64GetDatum(s->rows_total);
		v[8] = TimestampTzGetDatum(s->started_at);
	}
	else
		for (int c = 3; c < 9; c++)
			nulls[c] = true;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
}

/*
 * mop.progress_rows(): one row per worker of each live run of the current
 * role: run, worker, pid, model, epoch, partition, rows done of total.
 */
Datum
mop_progress(PG_FUNCTION_ARGS)
{
	return progress_rows(fcinfo, false, true, progress_row);
}

/*
 * What a worker's slot is doing, in words: starting, idle, the step of its
 * task (loading its checkpoint, training, validating at the end of an
 * epoch, committing), reporting (done, the coordinator has not taken the
 * result yet), exiting.
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
			return mop_task_step_name(s->step);
		case MOP_SLOT_DONE:
			return "reporting";
		default:
			return "exiting";
	}
}

/*
 * mop_progress_v2's row: a busy worker's task, its row counts once known,
 * and when it last made progress.  (A catalog that declares fewer columns,
 * as the upgrade script does before its section 14, gets the leading ones.)
 */
static void
progress_v2_row(ReturnSetInfo *rsinfo, int64 run_id, MopRunShared *run, int w,
				const MopSlot *s)
{
	Datum		v[13];
	bool		nulls[13] = {0};
	bool		busy = s->state == MOP_SLOT_ASSIGNED || s->state == MOP_SLOT_DONE;
	char		segment[NAMEDATALEN] = "";
	bool		down = false;

	SpinLockAcquire(&run->mutex);
	if (s->segment >= 0 && s->segment < run->n_segments)
	{
		strlcpy(segment, run->segments[s->segment].name, sizeof(segment));
		down = run->segments[s->segment].down;
	}
	SpinLockRelease(&run->mutex);

	v[0] = Int64GetDatum(run_id);
	v[1] = Int32GetDatum(w);
	v[2] = Int32GetDatum(s->pid);
	nulls[2] = s->pid == 0;
	v[3] = CStringGetTextDatum(slot_state_name(s));
	v[4] = Int64GetDatum(s->model_id);
	v[5] = Int32GetDatum(s->epoch);
	v[6] = Int32GetDatum(s->partition);
	v[7] = Int64GetDatum(s->rows_done);
	v[8] = Int64GetDatum(s->rows_total);
	v[9] = TimestampTzGetDatum(s->started_at);
	v[10] = TimestampTzGetDatum(s->progress_at);
	for (int c = 4; c < 11; c++)
		nulls[c] = !busy;
	/* a remote sub-epoch's rows come from the segment's heartbeats, its total is unknown */
	if (busy && s->rows_total <= 0)
		nulls[7] = nulls[8] = true;
	if (busy && s->rows_total <= 0 && segment[0] && strcmp(segment, "local") != 0)
		nulls[7] = false;
	/* the worker's segment, and whether the coordinator finds it up */
	v[11] = CStringGetTextDatum(segment);
	v[12] = CStringGetTextDatum(down ? "down" : "up");
	nulls[11] = nulls[12] = segment[0] == '\0';
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
}

/*
 * mop.progress_rows() of 0.2: as mop_progress, with the worker's state in
 * words; a busy worker's task is shown whatever its state, its row counts
 * only once they are known (never 0 of 0), and when it last made progress
 * (a minibatch trained or evaluated, a step; what mop.task_timeout
 * watches).
 */
Datum
mop_progress_v2(PG_FUNCTION_ARGS)
{
	return progress_rows(fcinfo, true, true, progress_v2_row);
}

/* An interval of us microseconds. */
static Interval *
usecs_interval(int64 us)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = us;
	return iv;
}

/* mop_run_progress's row: the run's progress and an estimate of the time left. */
static void
run_progress_row(ReturnSetInfo *rsinfo, int64 run_id, MopRunShared *run, int w,
				 const MopSlot *s)
{
	Datum		v[13];
	bool		nulls[13] = {0};
	MopRunProgress p;
	TimestampTz now = GetCurrentTimestamp();
	int32		active,
				target,
				n_segments;
	Datum	   *down;
	char		names[MOP_MAX_WORKERS][NAMEDATALEN];
	int			n_down = 0;

	mop_run_read_progress(run, &p);
	v[0] = Int64GetDatum(run_id);
	v[1] = CStringGetTextDatum(p.phase == MOP_PHASE_STARTING ? "starting" :
							   p.phase == MOP_PHASE_RUNNING ? "training" : "finishing");
	v[2] = Int64GetDatum(p.hops_done);
	v[3] = Int64GetDatum(p.hops_total);
	v[4] = Int32GetDatum(p.models_done);
	v[5] = Int32GetDatum(p.n_models);
	v[6] = Float8GetDatum(p.best_metric);
	nulls[6] = isnan(p.best_metric);
	v[7] = IntervalPGetDatum(usecs_interval(now - p.started_at));
	nulls[7] = p.started_at == 0;
	if (p.hops_done > 0 && p.hops_total >= p.hops_done && p.started_at != 0)
		v[8] = IntervalPGetDatum(usecs_interval((int64) ((double) (now - p.started_at) *
														 (double) (p.hops_total - p.hops_done) /
														 (double) p.hops_done)));
	else
		nulls[8] = true;
	v[9] = Int32GetDatum(p.busy_workers);
	/* the workers serving it, those mop_set_workers asked for, its segments down */
	down = palloc(sizeof(Datum) * MOP_MAX_WORKERS);
	SpinLockAcquire(&run->mutex);
	active = run->workers_active;
	target = run->workers_target;
	n_segments = Min(run->n_segments, MOP_MAX_WORKERS);
	for (int k = 0; k < n_segments; k++)
		if (run->segments[k].down)
			memcpy(names[n_down++], run->segments[k].name, NAMEDATALEN);
	SpinLockRelease(&run->mutex);
	for (int k = 0; k < n_down; k++)
		down[k] = PointerGetDatum(cstring_to_text_with_len(names[k], strnlen(names[k], NAMEDATALEN)));
	v[10] = Int32GetDatum(active);
	v[11] = Int32GetDatum(target);
	nulls[11] = target <= 0;
	v[12] = PointerGetDatum(construct_array(down, n_down, TEXTOID, -1, false, TYPALIGN_INT));
	nulls[12] = n_segments == 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
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
	return progress_rows(fcinfo, true, false, run_progress_row);
}

/*
 * mop_set_workers(run bigint, n int) returns int: the workers of a running
 * run from its next sub-epoch boundaries on -- over local data, n workers
 * (at most one per partition); over segments, n workers on each segment.
 * The coordinator carries it out within a second: a worker too many
 * finishes its sub-epoch and exits, a missing one starts; each model
 * still visits each partition once per epoch.  Only the run's owner (or a
 * role with its privileges) may; another role's run is one that does not
 * exist, as for mop_cancel.
 */
Datum
mop_set_workers(PG_FUNCTION_ARGS)
{
	int64		run_id = PG_GETARG_INT64(0);
	int32		n = PG_GETARG_INT32(1);
	char	   *status,
			   *dataset;
	int			partitions;
	int64		handle;
	bool		has_handle;
	dsm_segment *seg = NULL;
	MopRunShared *run;
	MopRunPhase phase;
	int			segments,
				cap;
	Oid			owner;
	Latch	   *latch;

	(void) mop_mark_interrupted();
	mop_run_row(run_id, &status, &dataset, &partitions, &handle, &has_handle);
	if (has_handle)
		seg = mop_run_attach(run_id, handle);
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld is not running (status %s)", (long long) run_id, status),
				 errhint("Workers can be set only while a run trains; mop_resume(%lld, workers => %d) continues a stopped run with that many.",
						 (long long) run_id, n)));
	run = mop_run_shared(seg);
	SpinLockAcquire(&run->mutex);
	phase = run->phase;
	segments = run->n_segments;
	owner = run->user;
	SpinLockRelease(&run->mutex);
	if (!has_privs_of_role(GetUserId(), owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to set the workers of run %lld", (long long) run_id),
				 errdetail("Only the run's owner, role \"%s\", or a role with its privileges may.",
						   GetUserNameFromId(owner, true) ? GetUserNameFromId(owner, true) : "?")));
	if (phase != MOP_PHASE_RUNNING)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld is %s", (long long) run_id,
						phase == MOP_PHASE_STARTING ? "still starting" : "finishing"),
				 phase == MOP_PHASE_STARTING ?
				 errhint("Try again once mop.run_progress shows it training.") : 0));
	/* one worker slot per worker beside the run's coordinator */
	if (segments > 0)
		cap = Min(MOP_MAX_WORKERS, max_worker_processes - 1) / segments;
	else
		cap = Min(Min(MOP_MAX_WORKERS, max_worker_processes - 1), partitions);
	cap = Max(cap, 1);
	if (n < 1 || n > cap)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workers must be between 1 and %d for run %lld, not %d", cap,
						(long long) run_id, n),
				 segments > 0 ?
				 errhint("The run trains on %d segments, each given that many workers: at most %d workers a run, and max_worker_processes (%d) less the coordinator.",
						 segments, MOP_MAX_WORKERS, max_worker_processes) :
				 errhint("At most one worker per partition (the dataset has %d), %d workers a run, and max_worker_processes (%d) less the coordinator.",
						 partitions, MOP_MAX_WORKERS, max_worker_processes)));
	SpinLockAcquire(&run->mutex);
	run->workers_target = n;
	latch = run->coordinator_latch;
	SpinLockRelease(&run->mutex);
	if (latch)
		SetLatch(latch);
	dsm_detach(seg);
	PG_RETURN_INT32(n);
}
