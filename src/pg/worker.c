/*
 * worker.c -- a training worker of a model-selection run.
 *
 * A background worker connected to the run's database as the role that
 * started the run (never as a superuser on someone else's behalf), so it
 * reads exactly what that role may read.  It owns the partitions p with
 * p % workers == its index and loops: wait for a task in its slot, run it,
 * report, until told to exit.  A task is one sub-epoch of one model
 * (mop_subepoch, subepoch.h: checkpoint, narrow waist, hop row, new
 * checkpoint, validation at the end of an epoch), run in a transaction of
 * its own, its progress going to the worker's slot for mop.progress and
 * for the coordinator's mop.task_timeout: every minibatch trained, every
 * slice of validation rows evaluated and every step (training, validating,
 * committing) advances the slot's heartbeat.
 *
 * The commit makes the sub-epoch durable: a crash or a cancel loses at most
 * the sub-epochs in flight.  An ERROR in a task marks only that model failed
 * (with the message) and the worker goes on with the next task; a model
 * whose loss becomes NaN/Inf is marked diverged and keeps its last finite
 * checkpoint.  SIGTERM (cancel) stops a task at the next minibatch: the
 * transaction aborts and nothing of the sub-epoch is written.  So does a
 * coordinator that has gone, or has given this worker's slot to another
 * process (mop.task_timeout): the progress callback checks once per
 * minibatch trained or slice evaluated and at every step, and once more
 * before the commit.
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

#include "mop.h"
#include "run.h"
#include "segment.h"
#include "subepoch.h"

#define FAILED_SQL \
	"UPDATE mop.models SET status = 'failed', error = $2, " \
	"updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1 " \
	"AND status OPERATOR(pg_catalog.=) 'training'"

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
 * Called once per minibatch while a task trains (the progress callback)
 * and before a task commits: a worker whose coordinator is gone, or that
 * was replaced, stops within a minibatch instead of training for nobody.
 */
static void
check_coordinator(void)
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
						my_index, (long long) mop_run_id_of(run))));
	}
	if (coordinator_exited())
	{
		coordinator_gone = true;
		ereport(ERROR,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("the coordinator of run %lld exited; the worker stops",
						(long long) mop_run_id_of(run))));
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
	int64		run_id = mop_run_id_of(run);

	if (run_id == 0)
		return;
	v[0] = Int64GetDatum(run_id);
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

/* A task's progress, shown by mop.progress and watched by the coordinator. */
typedef struct TaskProgress
{
	MopSlot    *slot;
	TimestampTz started;
} TaskProgress;

/*
 * Record progress in this process's slot and advance its heartbeat: step
 * (-1: unchanged), the training rows when training starts (rows_total >= 0)
 * and rows more rows trained.  Then stop if this process was replaced or
 * its coordinator is gone.  A replaced process writes nothing: the slot is
 * its replacement's.
 */
static void
record_progress(TaskProgress *p, int step, int64 rows_total, int64 rows)
{
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&run->mutex);
	if (!slot_moved_on())
	{
		if (step >= 0)
			p->slot->step = step;
		if (rows_total >= 0)
		{
			p->slot->rows_total = rows_total;
			p->slot->rows_done = 0;
			p->slot->started_at = p->started;
		}
		p->slot->rows_done += rows;
		p->slot->heartbeat++;
		p->slot->progress_at = now;
	}
	SpinLockRelease(&run->mutex);
	check_coordinator();
}

/* Progress callback: the sub-epoch starts training on rows_total rows. */
static void
progress_start(void *arg, int64 rows_total)
{
	record_progress(arg, MOP_STEP_TRAINING, rows_total, 0);
}

/* Progress callback, once per minibatch: rows more rows trained. */
static void
progress_rows(void *arg, int64 rows)
{
	record_progress(arg, -1, -1, rows);
}

/* Progress callback, once per slice of validation rows evaluated. */
static void
progress_evaluated(void *arg, int64 rows)
{
	record_progress(arg, -1, -1, 0);
}

/* Progress callback: the sub-epoch moves on to validating or committing. */
static void
progress_step(void *arg, MopTaskStep step)
{
	record_progress(arg, step, -1, 0);
}

/* Where a sub-epoch hands its state over (subepoch.h, handover.h). */
typedef struct HandOver
{
	dsa_area   *area;
	int64		model_id;
} HandOver;

/*
 * The chunk the current task handed its state over in (InvalidDsaPointer:
 * none): reported to the coordinator, which owns it from then on, or freed
 * here if the task fails after all.
 */
static dsa_pointer task_handed = InvalidDsaPointer;

/* Free the chunk of task_handed, if any (never twice, even if this is cut short). */
static void
free_handed_state(void)
{
	dsa_pointer p = task_handed;

	if (!DsaPointerIsValid(p))
		return;
	task_handed = InvalidDsaPointer;
	mop_handover_free(mop_handover_area(run->handover, run->handover_tranche), p);
}

/*
 * At exit, also a FATAL one (a terminated worker) between handing a state
 * over and reporting it: that chunk is nobody's.  (Before the run's
 * segments are detached.)
 */
static void
free_handed_at_exit(int code, Datum arg)
{
	if (run != NULL)
		free_handed_state();
}

static bool
hand_over_state(void *arg, bytea *state, const MopHandoverHop *hops, int n_hops)
{
	HandOver   *ho = arg;

	task_handed = mop_handover_write(ho->area, ho->model_id, state, hops, n_hops);
	return DsaPointerIsValid(task_handed);
}

/*
 * Run the task in slot, in one transaction; returns the outcome (a state
 * handed over: task_handed).
 */
static MopTaskOutcome
run_task(MopSlot *slot, MopSlot *task, double *valid_metric, double *valid_loss)
{
	MopHandoverHop pending[MOP_MAX_CHECKPOINT_EVERY];
	HandOver	ho = {NULL, task->model_id};
	TaskProgress tp = {slot, GetCurrentTimestamp()};
	MopProgress progress = {progress_start, progress_rows, progress_evaluated, progress_step, &tp};
	MopSubepochTask se;
	MopSubepochResult res;
	MopSubepochOutcome outcome;

	memset(&se, 0, sizeof(se));
	se.run_id = mop_run_id_of(run);
	se.model_id = task->model_id;
	se.epoch = task->epoch;
	se.partition = task->partition;
	se.worker = my_index;
	se.last_of_epoch = task->last_of_epoch;
	se.final_epoch = task->final_epoch;
	se.progress = &progress;
	/* a run over segments: this worker trains on its segment's copy */
	if (run->n_segments > 0 && task->segment >= 0 && task->segment < run->n_segments &&
		!mop_segment_is_local(run->segments[task->segment].name))
	{
		se.segment = run->segments[task->segment].name;
		se.remote_dataset_id = run->segments[task->segment].remote_dataset_id;
		se.segment_timeout_ms = run->segment_timeout_ms;
	}
	mop_segment_failed = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "mop: training a sub-epoch");
	/* the model handed over by its last worker, and may this one hand it on */
	if (DsaPointerIsValid(task->state_in) || task->may_hand_over)
		ho.area = mop_handover_area(run->handover, run->handover_tranche);
	if (DsaPointerIsValid(task->state_in))
	{
		if (ho.area == NULL)
			elog(ERROR, "mop worker: a state was handed over without a hand-over area");
		se.n_pending = mop_handover_read(ho.area, task->state_in, task->model_id,
										 &se.state_in, pending);
		se.pending = pending;
	}
	if (task->may_hand_over && ho.area != NULL)
	{
		se.hand_over = hand_over_state;
		se.hand_over_arg = &ho;
	}
	outcome = mop_subepoch(&se, &res);
	SPI_finish();
	PopActiveSnapshot();

	/*
	 * A process given up meanwhile commits nothing.  Since the last step
	 * (committing) the sub-epoch holds its model's row FOR UPDATE and shows
	 * no progress: a process stopped here (SIGSTOP, a hung disk) is replaced
	 * after mop.task_timeout like one stopped in any other step, and its
	 * replacement, which trains and validates without a lock, waits for
	 * that row when it goes to commit.  Once continued, the old process
	 * meets the SIGTERM the coordinator sent it, or this check: it sees its
	 * slot moved on and rolls back, releasing the row, and the replacement
	 * commits.  (One stopped inside the commit itself, past this check,
	 * commits once continued; its replacement then finds the sub-epoch's
	 * hop under the row lock and writes nothing: MOP_SUBEPOCH_COMMITTED.)
	 * Should it stay stopped, the replacement shows no progress
	 * either and is given up in turn, and after a few replacements the
	 * coordinator fails the run (worker_died).  Recording that still
	 * updates the model's row, so the run shows 'failed' only once the
	 * stopped process lets the row go (continued, or terminated with
	 * SIGKILL); no worker trains meanwhile.
	 */
	if (outcome != MOP_SUBEPOCH_STOPPED)
		check_coordinator();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	*valid_metric = res.valid_metric;
	*valid_loss = res.valid_loss;
	switch (outcome)
	{
		case MOP_SUBEPOCH_OK:
			return MOP_TASK_OK;
		case MOP_SUBEPOCH_HANDED_OVER:
			return MOP_TASK_OK;
		case MOP_SUBEPOCH_COMMITTED:
			/* committed by a process given up: done, with its recorded validation */
			return MOP_TASK_OK;
		case MOP_SUBEPOCH_DIVERGED:
			return MOP_TASK_DIVERGED;
		case MOP_SUBEPOCH_STOPPED:
			break;
	}
	/* stopped meanwhile (e.g. failed in a previous attempt): nothing was written */
	return MOP_TASK_FAILED;
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
	if (SPI_execute_with_args(FAILED_SQL, 2, t, v, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "mop worker: could not mark model %lld failed", (long long) model_id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * Run the task copied from slot: its sub-epoch in a transaction, an ERROR
 * marking the model failed (unless this process was replaced or its
 * coordinator is gone), and the outcome handed back in the slot.
 */
static void
do_task(MopSlot *slot, MopSlot *task, MemoryContext task_cxt)
{
	MopTaskOutcome outcome;
	double		vm = NAN,
				vl = NAN;
	TimestampTz t0 = GetCurrentTimestamp();
	char		errbuf[256] = "";
	Latch	   *latch;
	MemoryContext old = MemoryContextSwitchTo(task_cxt);

	PG_TRY();
	{
		task_handed = InvalidDsaPointer;
		outcome = run_task(slot, task, &vm, &vl);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(task_cxt);
		ed = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		/* a state handed over before the error is nobody's: free it */
		free_handed_state();
		strlcpy(errbuf, ed->message ? ed->message : "unknown error", sizeof(errbuf));
		if (ed->detail && mop_segment_failed)
		{
			strlcat(errbuf, ": ", sizeof(errbuf));
			strlcat(errbuf, ed->detail, sizeof(errbuf));
		}
		outcome = mop_segment_failed ? MOP_TASK_SEGMENT_DOWN : MOP_TASK_FAILED;
		/* an error of the work on a segment: its SQLSTATE goes with the message */
		if (outcome == MOP_TASK_FAILED && task->segment >= 0 && task->segment < run->n_segments &&
			!mop_segment_is_local(run->segments[task->segment].name))
		{
			char		code[32];

			snprintf(code, sizeof(code), " (SQLSTATE %s)", unpack_sql_state(ed->sqlerrcode));
			if (strlen(errbuf) + strlen(code) >= sizeof(errbuf))
				errbuf[sizeof(errbuf) - strlen(code) - 1] = '\0';
			strlcat(errbuf, code, sizeof(errbuf));
		}
		if (!replaced)
		{
			SpinLockAcquire(&run->mutex);
			replaced = slot_moved_on();
			SpinLockRelease(&run->mutex);
		}
		if (coordinator_gone || replaced || outcome == MOP_TASK_SEGMENT_DOWN)
			elog(LOG, "mop worker %d: %s", my_index, errbuf);
		else
		{
			elog(LOG, "mop worker %d: model %lld failed: %s", my_index,
				 (long long) task->model_id, errbuf);
			mark_failed(task->model_id, errbuf);
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
		free_handed_state();
		proc_exit(0);
	}
	slot->outcome = outcome;
	slot->valid_metric = vm;
	slot->valid_loss = vl;
	slot->state_out = outcome == MOP_TASK_OK ? task_handed : InvalidDsaPointer;
	/* reported: the coordinator's from now on */
	if (outcome == MOP_TASK_OK)
		task_handed = InvalidDsaPointer;
	slot->seconds = (double) (GetCurrentTimestamp() - t0) / 1e6;
	strlcpy(slot->error, errbuf, sizeof(slot->error));
	/* an exit ordered meanwhile (the run ended or its coordinator went) stands */
	if (slot->state != MOP_SLOT_EXIT)
		slot->state = MOP_SLOT_DONE;
	latch = run->coordinator_latch;
	SpinLockRelease(&run->mutex);
	/* a state handed over by a task that did not end well is nobody's */
	free_handed_state();
	if (latch)
		SetLatch(latch);
}

/*
 * On exit (also FATAL): tell the coordinator this worker is gone.  A task
 * reported and not settled yet stays reported (its state handed over is
 * the coordinator's): the coordinator settles it, then finds this process
 * stopped and starts another.
 */
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
	if (slot->state != MOP_SLOT_DONE)
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
	MopRunOptions opts;
	Latch	   *coordinator;
	MemoryContext task_cxt;

	memcpy(&my_index, MyBgworkerEntry->bgw_extra, sizeof(int));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	mop_keep_heap_memory();

	CurrentResourceOwner = ResourceOwnerCreate(NULL, "mop worker");
	seg = dsm_attach(DatumGetUInt32(arg));
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mop worker could not attach to its run's shared memory")));
	dsm_pin_mapping(seg);
	run = mop_run_shared(seg);
	if (run == NULL || my_index < 0 || my_index >= MOP_MAX_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mop worker found a bad run segment")));
	slot = &run->slots[my_index];
	on_dsm_detach(seg, worker_detach, Int32GetDatum(my_index));
	before_shmem_exit(free_handed_at_exit, (Datum) 0);

	BackgroundWorkerInitializeConnectionByOid(run->database, run->user, 0);
	mop_pin_search_path();
	pgstat_report_appname("mop worker");
	mop_run_options_of(run, &opts);
	mop_blas_threads = opts.blas_threads;
	mop_workers_per_segment = run->workers_per_segment;	/* told to segments */
	mop_gpu_worker_init(opts.gpu, my_index);
	mop_gpu_memory_mb = opts.gpu_memory_mb;	/* the starting session's settings */
	mop_gpu_tf32 = opts.gpu_tf32;
	mop_gpu_unverified = opts.gpu_unverified;
	task_cxt = AllocSetContextCreate(TopMemoryContext, "mop task", ALLOCSET_DEFAULT_SIZES);

	SpinLockAcquire(&run->mutex);
	my_generation = slot->generation;
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	/* a run that ended while this worker was starting has told it to exit already */
	if (slot->state != MOP_SLOT_EXIT)
		slot->state = MOP_SLOT_IDLE;
	coordinator = run->coordinator_latch;
	SpinLockRelease(&run->mutex);
	if (coordinator)
		SetLatch(coordinator);

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
			do_task(slot, &task, task_cxt);
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
