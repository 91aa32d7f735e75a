/*
 * worker.c -- a training worker of a model-selection run.
 *
 * A background worker connected to the run's database as the role that
 * started the run (never as a superuser on someone else's behalf), so it
 * reads exactly what that role may read.  It owns the partitions p with
 * p % workers == its index and loops: wait for a task in its slot, run it,
 * report, until told to exit.  A task is one sub-epoch of one model through
 * the narrow waist, in one transaction:
 *
 *   load the model's checkpoint (mop.models.state; no lock yet),
 *   SELECT mop.train_agg(state, x, y ORDER BY buffer_no) over its partition,
 *   lock the dataset's, the run's and the model's rows (lockorder.h),
 *   store the new checkpoint and the mop.hops row,
 *   and, if the sub-epoch completes the model's epoch, evaluate it on the
 *   validation split and record the epoch in mop.epochs.
 *
 * The commit makes the sub-epoch durable: a crash or a cancel loses at most
 * the sub-epochs in flight.  An ERROR in a task marks only that model failed
 * (with the message) and the worker goes on with the next task; a model
 * whose loss becomes NaN/Inf is marked diverged and keeps its last finite
 * checkpoint.  SIGTERM (cancel) stops a task at the next minibatch: the
 * transaction aborts and nothing of the sub-epoch is written.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "lockorder.h"
#include "mop.h"
#include "run.h"

volatile int64 *mop_progress_rows = NULL;

#define LOAD_SQL \
	"SELECT m.state, m.dataset_id, m.status, " \
	"(SELECT pg_catalog.sum(b.rows) FROM mop.buffers b WHERE b.dataset_id OPERATOR(pg_catalog.=) m.dataset_id " \
	" AND b.split OPERATOR(pg_catalog.=) 'train' AND b.partition OPERATOR(pg_catalog.=) $2)::bigint " \
	"FROM mop.models m WHERE m.id OPERATOR(pg_catalog.=) $1"

#define HOP_SQL \
	"INSERT INTO mop.hops (run_id, model_id, epoch, partition, worker, started_at, " \
	"finished_at, rows, loss, metric) VALUES ($1, $2, $3, $4, $5, $6, " \
	"pg_catalog.clock_timestamp(), $7, $8, $9)"

#define SAVE_SQL \
	"UPDATE mop.models SET state = $2, updated_at = pg_catalog.clock_timestamp() " \
	"WHERE id OPERATOR(pg_catalog.=) $1"

#define DIVERGED_SQL \
	"UPDATE mop.models SET status = 'diverged', error = $2, " \
	"updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1"

#define FAILED_SQL \
	"UPDATE mop.models SET status = 'failed', error = $2, " \
	"updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1 " \
	"AND status OPERATOR(pg_catalog.=) 'training'"

/*
 * Record an epoch: training means from this epoch's hops, validation from
 * the evaluation, and the model's best-so-far in its metric's direction.
 */
#define EPOCH_SQL \
	"WITH h AS (SELECT pg_catalog.sum(loss OPERATOR(pg_catalog.*) rows) " \
	"  OPERATOR(pg_catalog./) pg_catalog.sum(rows) AS tl, " \
	"  pg_catalog.sum(metric OPERATOR(pg_catalog.*) rows) OPERATOR(pg_catalog./) pg_catalog.sum(rows) AS tm, " \
	"  pg_catalog.sum(rows) AS tr, " \
	"  pg_catalog.sum(EXTRACT(epoch FROM finished_at OPERATOR(pg_catalog.-) started_at)) AS secs " \
	"  FROM mop.hops WHERE model_id OPERATOR(pg_catalog.=) $1 AND epoch OPERATOR(pg_catalog.=) $2), " \
	"e AS (INSERT INTO mop.epochs (model_id, epoch, train_loss, train_metric, valid_loss, " \
	"  valid_metric, train_rows, valid_rows, seconds) " \
	"  SELECT $1, $2, h.tl, h.tm, $3, $4, h.tr, $5, h.secs FROM h) " \
	"UPDATE mop.models m SET epochs_done = $2, " \
	"  best_epoch = CASE WHEN $4 IS NOT NULL AND (m.best_valid_metric IS NULL OR " \
	"    (m.higher_is_better AND $4 OPERATOR(pg_catalog.>) m.best_valid_metric) OR " \
	"    (NOT m.higher_is_better AND $4 OPERATOR(pg_catalog.<) m.best_valid_metric)) " \
	"    THEN $2 ELSE m.best_epoch END, " \
	"  best_valid_loss = CASE WHEN $4 IS NOT NULL AND (m.best_valid_metric IS NULL OR " \
	"    (m.higher_is_better AND $4 OPERATOR(pg_catalog.>) m.best_valid_metric) OR " \
	"    (NOT m.higher_is_better AND $4 OPERATOR(pg_catalog.<) m.best_valid_metric)) " \
	"    THEN $3 ELSE m.best_valid_loss END, " \
	"  best_valid_metric = CASE WHEN $4 IS NOT NULL AND (m.best_valid_metric IS NULL OR " \
	"    (m.higher_is_better AND $4 OPERATOR(pg_catalog.>) m.best_valid_metric) OR " \
	"    (NOT m.higher_is_better AND $4 OPERATOR(pg_catalog.<) m.best_valid_metric)) " \
	"    THEN $4 ELSE m.best_valid_metric END, " \
	"  status = CASE WHEN $6 THEN 'done' ELSE m.status END, " \
	"  updated_at = pg_catalog.clock_timestamp() " \
	"WHERE m.id OPERATOR(pg_catalog.=) $1"

static MopRunShared *run;
static int	my_index;
static uint32 my_generation;	/* the slot's generation this process was started for */
static bool coordinator_gone = false;
static bool replaced = false;	/* the coordinator gave this process up (mop.task_timeout) */

/* Has the coordinator given this process's slot to another process? (spinlock held) */
static bool
slot_moved_on(void)
{
	return run->slots[my_index].generation != my_generation;
}

/* Has the run's coordinator exited without ending the run (terminated, crashed)? */
static bool
coordinator_exited(void)
{
	bool		gone;

	SpinLockAcquire(&run->mutex);
	gone = run->phase == MOP_PHASE_DONE && run->coordinator_latch == NULL &&
		strcmp(run->status, "failed") == 0;
	SpinLockRelease(&run->mutex);
	return gone;
}

/*
 * Called once per minibatch while a task trains (through
 * mop_progress_rows' users): a worker whose coordinator is gone stops
 * within a minibatch instead of training for nobody.
 */
void
mop_worker_check_coordinator(void)
{
	bool		moved;

	if (run == NULL)
		return;
	SpinLockAcquire(&run->mutex);
	moved = slot_moved_on();
	SpinLockRelease(&run->mutex);
	if (moved)
	{
		replaced = true;
		ereport(ERROR,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("mop worker %d of run %lld was replaced after making no progress; it stops without committing",
						my_index, (long long) run->run_id)));
	}
	if (coordinator_exited())
	{
		coordinator_gone = true;
		ereport(ERROR,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("the coordinator of run %lld exited; the worker stops",
						(long long) run->run_id)));
	}
}

/*
 * The coordinator is gone (terminated, or it failed hard) and could not
 * record how the run ended: record it, so the run does not stay
 * 'running' with nothing behind it.  Models still training become
 * 'cancelled'; mop_resume continues them.
 */
static void
record_orphaned_run(void)
{
	Oid			t[2] = {INT8OID, INT8OID};
	Datum		v[2];

	if (run->run_id == 0)
		return;
	v[0] = Int64GetDatum(run->run_id);
	/* only while the row is still this run's segment's (not resumed since) */
	v[1] = Int64GetDatum((int64) DatumGetUInt32(MyBgworkerEntry->bgw_main_arg));
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_execute_with_args("UPDATE mop.runs SET status = 'failed', "
						  "error = 'the run''s coordinator exited', shm_handle = NULL, "
						  "finished_at = pg_catalog.clock_timestamp() "
						  "WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'running' "
						  "AND shm_handle OPERATOR(pg_catalog.=) $2",
						  2, t, v, NULL, false, 0);
	if (SPI_processed == 1)
		SPI_execute_with_args(MOP_CANCEL_MODELS_SQL, 1, t, v, NULL, false, 0);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* Mean as a Datum; *null set when not finite. */
static Datum
mean_datum(double sum, int64 rows, char *null)
{
	double		v = rows > 0 ? sum / (double) rows : NAN;

	*null = isfinite(v) ? ' ' : 'n';
	return Float8GetDatum(isfinite(v) ? v : 0.0);
}

/* SPI_execute_with_args or ERROR. */
static void
exec_sql(const char *sql, int nargs, Oid *types, Datum *vals, const char *nulls,
		 int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, vals, nulls, false, 0);

	if (rc != expect)
		elog(ERROR, "mop worker: query failed (%s): %s", SPI_result_code_string(rc), sql);
}

/* Column i (1-based) of row 0 of the last SPI result. */
static Datum
col(int i, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i, isnull);
}

/* Run the task in slot, in one transaction; returns the outcome. */
static MopTaskOutcome
run_task(MopSlot *slot, MopSlot *task, double *valid_metric, double *valid_loss)
{
	Datum		v[10];
	char		n[10];
	Oid			t[10];
	bool		isnull;
	bytea	   *state;
	int64		dataset_id,
				rows;
	double		loss_sum,
				metric_sum;
	char	   *status;
	TimestampTz started = GetCurrentTimestamp();
	MopTaskOutcome outcome = MOP_TASK_OK;
	MemoryContext cxt;

	*valid_metric = NAN;
	*valid_loss = NAN;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "mop: training a sub-epoch");
	cxt = CurrentMemoryContext;
	memset(n, ' ', sizeof(n));

	/* the model's checkpoint */
	t[0] = INT8OID;
	v[0] = Int64GetDatum(task->model_id);
	t[1] = INT4OID;
	v[1] = Int32GetDatum(task->partition);
	exec_sql(LOAD_SQL, 2, t, v, n, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model %lld is not visible to the worker", (long long) task->model_id)));
	{
		Datum		sd = col(1, &isnull);

		/* a NULL state (anyone who may write the row can set one) is no checkpoint */
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("model %lld has no checkpoint", (long long) task->model_id),
					 errhint("Its state in mop.models is NULL; the model cannot continue.")));
		state = DatumGetByteaPCopy(sd);
	}
	dataset_id = DatumGetInt64(col(2, &isnull));
	status = TextDatumGetCString(col(3, &isnull));
	rows = DatumGetInt64(col(4, &isnull));
	if (strcmp(status, "training") != 0)
	{
		/* stopped meanwhile (e.g. failed in a previous attempt): nothing to do */
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		return MOP_TASK_FAILED;
	}
	SpinLockAcquire(&run->mutex);
	slot->rows_total = isnull ? 0 : rows;
	slot->rows_done = 0;
	slot->started_at = started;
	SpinLockRelease(&run->mutex);

	/* one sub-epoch through the narrow waist */
	t[0] = BYTEAOID;
	v[0] = PointerGetDatum(state);
	t[1] = INT8OID;
	v[1] = Int64GetDatum(dataset_id);
	t[2] = INT4OID;
	v[2] = Int32GetDatum(task->partition);
	mop_progress_rows = &slot->rows_done;
	exec_sql(MOP_TRAIN_SQL, 3, t, v, n, SPI_OK_SELECT);
	mop_progress_rows = NULL;
	if (SPI_processed != 1)
		elog(ERROR, "mop worker: training query returned %d rows", (int) SPI_processed);
	{
		Datum		sd = col(1, &isnull);
		MemoryContext old = MemoryContextSwitchTo(cxt);

		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NO_DATA_FOUND),
					 errmsg("partition %d of the dataset has no training buffers",
							task->partition)));
		state = DatumGetByteaPCopy(sd);
		loss_sum = DatumGetFloat8(col(2, &isnull));
		metric_sum = DatumGetFloat8(col(3, &isnull));
		rows = DatumGetInt64(col(4, &isnull));
		status = TextDatumGetCString(col(5, &isnull));
		MemoryContextSwitchTo(old);
	}

	/*
	 * Lock order (lockorder.h): the dataset's row and the run's (FOR KEY
	 * SHARE, as the foreign keys of the writes below would take them, the
	 * model's second update of an epoch included), then the model's (FOR
	 * UPDATE), all only now that the training is done: a delete, which
	 * locks in the same order, waits for these writes at most, and nothing
	 * waits for a lock while holding one of a lower level.
	 */
	if (!mop_lock_dataset_of_run(run->run_id) || !mop_lock_run_row(run->run_id))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run %lld or its dataset does not exist any more", (long long) run->run_id)));
	t[0] = INT8OID;
	v[0] = Int64GetDatum(task->model_id);
	exec_sql("SELECT status FROM mop.models WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
			 1, t, v, n, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model %lld is not visible to the worker", (long long) task->model_id)));
	if (strcmp(TextDatumGetCString(col(1, &isnull)), "training") != 0)
	{
		/* stopped while this sub-epoch trained: it is not recorded */
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
		return MOP_TASK_FAILED;
	}

	/* the hop row, with this sub-epoch's mean loss and metric */
	t[0] = INT8OID;
	v[0] = Int64GetDatum(run->run_id);
	t[1] = INT8OID;
	v[1] = Int64GetDatum(task->model_id);
	t[2] = INT4OID;
	v[2] = Int32GetDatum(task->epoch);
	t[3] = INT4OID;
	v[3] = Int32GetDatum(task->partition);
	t[4] = INT4OID;
	v[4] = Int32GetDatum(my_index);
	t[5] = TIMESTAMPTZOID;
	v[5] = TimestampTzGetDatum(started);
	t[6] = INT8OID;
	v[6] = Int64GetDatum(rows);
	t[7] = FLOAT8OID;
	v[7] = mean_datum(loss_sum, rows, &n[7]);
	t[8] = FLOAT8OID;
	v[8] = mean_datum(metric_sum, rows, &n[8]);
	exec_sql(HOP_SQL, 9, t, v, n, SPI_OK_INSERT);
	memset(n, ' ', sizeof(n));

	if (strcmp(status, "diverged") == 0)
	{
		/* keep the last finite checkpoint; the model never wins */
		char		msg[128];

		snprintf(msg, sizeof(msg), "loss became NaN or infinite in epoch %d on partition %d",
				 task->epoch, task->partition);
		t[0] = INT8OID;
		v[0] = Int64GetDatum(task->model_id);
		t[1] = TEXTOID;
		v[1] = CStringGetTextDatum(msg);
		exec_sql(DIVERGED_SQL, 2, t, v, n, SPI_OK_UPDATE);
		outcome = MOP_TASK_DIVERGED;
	}
	else
	{
		t[0] = INT8OID;
		v[0] = Int64GetDatum(task->model_id);
		t[1] = BYTEAOID;
		v[1] = PointerGetDatum(state);
		exec_sql(SAVE_SQL, 2, t, v, n, SPI_OK_UPDATE);

		if (task->last_of_epoch)
		{
			double		vl,
						vm;
			int64		vr;

			t[0] = BYTEAOID;
			v[0] = PointerGetDatum(state);
			t[1] = INT8OID;
			v[1] = Int64GetDatum(dataset_id);
			exec_sql(MOP_EVAL_SQL, 2, t, v, n, SPI_OK_SELECT);
			col(1, &isnull);
			if (SPI_processed == 1 && !isnull)
			{
				vl = DatumGetFloat8(col(1, &isnull));
				vm = DatumGetFloat8(col(2, &isnull));
				vr = DatumGetInt64(col(3, &isnull));
			}
			else
			{
				vl = vm = 0;
				vr = 0;
			}
			t[0] = INT8OID;
			v[0] = Int64GetDatum(task->model_id);
			t[1] = INT4OID;
			v[1] = Int32GetDatum(task->epoch);
			t[2] = FLOAT8OID;
			v[2] = mean_datum(vl, vr, &n[2]);
			t[3] = FLOAT8OID;
			v[3] = mean_datum(vm, vr, &n[3]);
			t[4] = INT8OID;
			v[4] = Int64GetDatum(vr);
			t[5] = BOOLOID;
			v[5] = BoolGetDatum(task->final_epoch);
			exec_sql(EPOCH_SQL, 6, t, v, n, SPI_OK_UPDATE);
			if (vr > 0)
			{
				*valid_metric = vm / vr;
				*valid_loss = vl / vr;
			}
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	/* a process given up while it trained commits nothing */
	mop_worker_check_coordinator();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return outcome;
}

/* After an ERROR in a task: mark the model failed in a fresh transaction. */
static void
mark_failed(int64 model_id, const char *msg)
{
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2];

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	v[0] = Int64GetDatum(model_id);
	v[1] = CStringGetTextDatum(msg);
	exec_sql(FAILED_SQL, 2, t, v, NULL, SPI_OK_UPDATE);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* On exit (also FATAL): tell the coordinator this worker is gone. */
static void
worker_detach(dsm_segment *seg, Datum arg)
{
	MopSlot    *slot = &run->slots[DatumGetInt32(arg)];
	Latch	   *latch;

	SpinLockAcquire(&run->mutex);
	if (slot_moved_on())
	{
		/* replaced: the slot belongs to another process now */
		SpinLockRelease(&run->mutex);
		return;
	}
	slot->state = MOP_SLOT_GONE;
	slot->latch = NULL;
	latch = run->coordinator_latch;
	SpinLockRelease(&run->mutex);
	if (latch)
		SetLatch(latch);
}

/* Background worker entry point. */
void
mop_worker_main(Datum arg)
{
	dsm_segment *seg;
	MopSlot    *slot;
	MemoryContext task_cxt;

	memcpy(&my_index, MyBgworkerEntry->bgw_extra, sizeof(int));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "mop worker");
	seg = dsm_attach(DatumGetUInt32(arg));
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mop worker could not attach to its run's shared memory")));
	dsm_pin_mapping(seg);
	run = dsm_segment_address(seg);
	if (run->magic != MOP_RUN_MAGIC || my_index < 0 || my_index >= MOP_MAX_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mop worker found a bad run segment")));
	slot = &run->slots[my_index];
	on_dsm_detach(seg, worker_detach, Int32GetDatum(my_index));

	BackgroundWorkerInitializeConnectionByOid(run->database, run->user, 0);
	mop_pin_search_path();
	pgstat_report_appname("mop worker");
	mop_blas_threads = run->blas_threads;
	mop_gpu_worker_init(run->gpu, my_index);
	mop_gpu_memory_mb = run->gpu_memory_mb;	/* the starting session's settings */
	mop_gpu_tf32 = run->gpu_tf32;
	task_cxt = AllocSetContextCreate(TopMemoryContext, "mop task", ALLOCSET_DEFAULT_SIZES);

	SpinLockAcquire(&run->mutex);
	my_generation = slot->generation;
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	/* a run that ended while this worker was starting has told it to exit already */
	if (slot->state != MOP_SLOT_EXIT)
		slot->state = MOP_SLOT_IDLE;
	SpinLockRelease(&run->mutex);
	if (run->coordinator_latch)
		SetLatch(run->coordinator_latch);

	for (;;)
	{
		MopSlotState st;
		MopSlot		task;

		SpinLockAcquire(&run->mutex);
		st = slot->state;
		task = *slot;
		SpinLockRelease(&run->mutex);

		if (st == MOP_SLOT_EXIT || coordinator_exited())
			break;
		if (st == MOP_SLOT_ASSIGNED)
		{
			MopTaskOutcome outcome;
			double		vm = NAN,
						vl = NAN;
			TimestampTz t0 = GetCurrentTimestamp();
			char		errbuf[256] = "";
			MemoryContext old = MemoryContextSwitchTo(task_cxt);

			PG_TRY();
			{
				outcome = run_task(slot, &task, &vm, &vl);
			}
			PG_CATCH();
			{
				ErrorData  *ed;

				MemoryContextSwitchTo(task_cxt);
				ed = CopyErrorData();
				FlushErrorState();
				AbortCurrentTransaction();
				mop_progress_rows = NULL;
				strlcpy(errbuf, ed->message ? ed->message : "unknown error", sizeof(errbuf));
				outcome = MOP_TASK_FAILED;
				if (!replaced)
				{
					SpinLockAcquire(&run->mutex);
					replaced = slot_moved_on();
					SpinLockRelease(&run->mutex);
				}
				if (coordinator_gone || replaced)
					elog(LOG, "mop worker %d: %s", my_index, errbuf);
				else
				{
					elog(LOG, "mop worker %d: model %lld failed: %s", my_index,
						 (long long) task.model_id, errbuf);
					mark_failed(task.model_id, errbuf);
				}
			}
			PG_END_TRY();
			MemoryContextSwitchTo(old);
			MemoryContextReset(task_cxt);

			SpinLockAcquire(&run->mutex);
			if (slot_moved_on())
			{
				/* given up meanwhile: the slot is another process's now */
				SpinLockRelease(&run->mutex);
				proc_exit(0);
			}
			slot->outcome = outcome;
			slot->valid_metric = vm;
			slot->valid_loss = vl;
			slot->seconds = (double) (GetCurrentTimestamp() - t0) / 1e6;
			strlcpy(slot->error, errbuf, sizeof(slot->error));
			/* an exit ordered meanwhile (the run ended or its coordinator went) stands */
			if (slot->state != MOP_SLOT_EXIT)
				slot->state = MOP_SLOT_DONE;
			SpinLockRelease(&run->mutex);
			if (run->coordinator_latch)
				SetLatch(run->coordinator_latch);
			continue;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (coordinator_exited())
		record_orphaned_run();
	proc_exit(0);
}
