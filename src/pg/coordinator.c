/*
 * coordinator.c -- the coordinator of a model-selection run.
 *
 * A background worker started by the caller of mop_grid_search (and
 * friends) and connected as the caller's role.  It is the "launcher that
 * commits on its own": the caller's transaction cannot commit while the
 * call runs, and workers see only committed rows, so the coordinator
 * creates the run and its models in its own transaction and commits them
 * before any worker starts.  Then it starts the training workers and runs
 * the MOP scheduler (src/search/sched.c) over their slots in shared memory:
 * whenever a worker is idle it gets a model that is not busy and has not yet
 * visited that worker's partition in the current epoch.  Checkpoints travel
 * through mop.models.state, committed by the worker after every sub-epoch,
 * so a hop moves the full model state (weights, optimizer moments, RNG) and
 * a crash loses at most the sub-epochs in flight.
 *
 * Failures are contained: a task's ERROR fails only its model; a worker
 * that dies is restarted (a few times) and its task re-run; an ERROR in the
 * coordinator itself marks the run failed with its message in a fresh
 * transaction, so the failure is recorded even though the failing
 * transaction rolled back.  Cancellation (from the blocking caller, or
 * mop_cancel from any session) terminates the workers -- each stops within
 * one minibatch, its transaction rolls back -- and marks the run cancelled;
 * mop_resume continues it from the committed checkpoints.
 *
 * This file holds the scheduling loop and the workers' lifecycle; the
 * run's catalog reads and writes, resuming, and the search drivers have
 * files of their own (coordinator.h lists them).
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "coordinator.h"
#include "subepoch.h"

#define MAX_RESTARTS 3

MopCoord	coord;

/*
 * Where a worker's slot stands (mop_set_workers takes workers out of a run
 * and puts them back): serving the run; finishing its task before it
 * exits; told to exit; gone, its slot free for a new process.
 */
typedef enum WorkerLife
{
	W_ACTIVE = 0,
	W_RETIRING,
	W_EXITING,
	W_RETIRED
} WorkerLife;

/* Per-worker bookkeeping kept by the coordinator. */
typedef struct WorkerInfo
{
	BackgroundWorkerHandle *handle;
	WorkerLife	life;
	bool		busy;
	mop_task	task;
	int			restarts;
	/* the slot's heartbeat and when it was last seen changing (worker_hung) */
	TimestampTz progress_at;	/* 0: not watched yet */
	uint64		heartbeat;
	bool		given_up;		/* its process was given up (worker_hung) */
} WorkerInfo;

static WorkerInfo workers[MOP_MAX_WORKERS];

/* the run's hand-over area (handover.h), NULL unless mop.checkpoint_every > 1 */
static dsa_area *handover = NULL;

/* sub-epochs committed (not handed over) by this start of the run: reclaim.c's pace */
static int64 commits_done = 0;

/*
 * Model i's state handed over last is superseded (out: the chunk its
 * latest sub-epoch handed over, or InvalidDsaPointer: it committed, or it
 * stopped): free the old chunk.
 */
void
coord_model_handed(int32 i, dsa_pointer out)
{
	CoordModel *m = &coord.models[i];

	if (DsaPointerIsValid(m->handed) && m->handed != out)
		mop_handover_free(handover, m->handed);
	/* stopped while its last task ran: what that task handed over is no use */
	if (m->drop_handed && DsaPointerIsValid(out))
	{
		mop_handover_free(handover, out);
		out = InvalidDsaPointer;
	}
	m->drop_handed = false;
	m->handed = out;
	m->n_handed = DsaPointerIsValid(out) ? m->n_handed + 1 : 0;
}

/*
 * Add a model to the scheduler.  Under convergence-aware priorities a model
 * not started yet has the priority of what it may reach after its first
 * epoch, optimistically the best first epoch so far (top priority while
 * there is none); once started it has the top priority until its first
 * evaluation, Hermes' minimum quantum (assign()).  See
 * src/search/mop_hermes.h.
 */
int32
coord_add_model(mop_sched *s, int32 epochs)
{
	int32		i = mop_sched_add_model(s, epochs);

	if (i >= 0 && coord.run->opts.scheduler == MOP_PICK_PRIORITY)
		mop_sched_set_priority(s, i, mop_hermes_history_fresh(&coord.hermes));
	return i;
}

static bool start_worker(int i);

/*
 * Start worker i mid-run (a segment joined, mop_set_workers), in a slot
 * never used or whose process was retired; false if it could not be
 * started.
 */
bool
coord_start_worker(int i)
{
	if (i < 0 || i >= MOP_MAX_WORKERS || (i < coord.n_workers && workers[i].life != W_RETIRED))
		return false;
	workers[i].busy = false;
	workers[i].restarts = 0;
	if (!start_worker(i))
	{
		workers[i].life = W_RETIRED;
		coord_count_workers();
		return false;
	}
	coord.n_workers = Max(coord.n_workers, i + 1);
	SpinLockAcquire(&coord.run->mutex);
	coord.run->workers_started = coord.n_workers;
	SpinLockRelease(&coord.run->mutex);
	coord_count_workers();
	return true;
}

/* Does worker w serve the run (started, and not being taken out)? */
bool
coord_worker_active(int w)
{
	return w >= 0 && w < coord.n_workers && workers[w].life == W_ACTIVE;
}

/* A slot for a new worker: one retired, else the next never used; -1 if none. */
int
coord_free_slot(void)
{
	for (int w = 0; w < coord.n_workers; w++)
		if (workers[w].life == W_RETIRED)
			return w;
	return coord.n_workers < MOP_MAX_WORKERS ? coord.n_workers : -1;
}

/* Publish how many workers serve the run, and tell the search driver. */
void
coord_count_workers(void)
{
	int			n = 0;

	for (int w = 0; w < coord.n_workers; w++)
		n += workers[w].life == W_ACTIVE;
	if (coord.driver)
		coord.driver->n_workers = Max(n, 1);
	SpinLockAcquire(&coord.run->mutex);
	coord.run->workers_active = n;
	SpinLockRelease(&coord.run->mutex);
}

/* Tell worker w, idle and being taken out of the run, to exit. */
static void
send_exit(int w)
{
	Latch	   *latch;

	workers[w].life = W_EXITING;
	SpinLockAcquire(&coord.run->mutex);
	if (coord.run->slots[w].state != MOP_SLOT_GONE)
		coord.run->slots[w].state = MOP_SLOT_EXIT;
	coord.run->slots[w].retired = true;
	latch = coord.run->slots[w].latch;
	SpinLockRelease(&coord.run->mutex);
	if (latch)
		SetLatch(latch);
}

/*
 * Take worker w out of the run (mop_set_workers): it gets no new task,
 * finishes the one it runs, and exits.  A worker being taken out whose
 * slot is wanted again before it was told to exit just stays (unretire).
 */
void
coord_retire_worker(int w)
{
	if (!coord_worker_active(w))
		return;
	workers[w].life = W_RETIRING;
	if (!workers[w].busy)
		send_exit(w);
	coord_count_workers();
}

/* Worker w, being taken out but still running its task, serves the run again. */
bool
coord_unretire_worker(int w)
{
	if (w < 0 || w >= coord.n_workers || workers[w].life != W_RETIRING)
		return false;
	workers[w].life = W_ACTIVE;
	coord_count_workers();
	return true;
}

/* Is worker w's slot taken (by a process serving the run, or one still leaving)? */
bool
coord_worker_leaving(int w)
{
	return w >= 0 && w < coord.n_workers &&
		(workers[w].life == W_RETIRING || workers[w].life == W_EXITING);
}

/* Start worker i; returns false if it could not be started. */
static bool
start_worker(int i)
{
	BackgroundWorker w;
	pid_t		pid;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "mop");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "mop_worker_main");
	snprintf(w.bgw_name, BGW_MAXLEN, "mop worker %d of run %lld", i, (long long) coord.run->run_id);
	snprintf(w.bgw_type, BGW_MAXLEN, "mop worker");
	w.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(coord.seg));
	w.bgw_notify_pid = MyProcPid;
	memcpy(w.bgw_extra, &i, sizeof(int));
	workers[i].life = W_ACTIVE;
	SpinLockAcquire(&coord.run->mutex);
	coord.run->slots[i].state = MOP_SLOT_STARTING;
	coord.run->slots[i].retired = false;
	coord.run->slots[i].latch = NULL;
	coord.run->slots[i].generation++;	/* a process of an earlier generation writes nothing here */
	SpinLockRelease(&coord.run->mutex);
	if (!RegisterDynamicBackgroundWorker(&w, &workers[i].handle))
		return false;
	if (WaitForBackgroundWorkerStartup(workers[i].handle, &pid) != BGWH_STARTED)
		return false;
	return true;
}

/* Ask every worker to exit (terminate: SIGTERM, stopping mid-task) and wait. */
static void
stop_workers(bool terminate)
{
	for (int i = 0; i < coord.n_workers; i++)
	{
		Latch	   *latch;

		SpinLockAcquire(&coord.run->mutex);
		if (coord.run->slots[i].state != MOP_SLOT_GONE)
			coord.run->slots[i].state = MOP_SLOT_EXIT;
		latch = coord.run->slots[i].latch;
		SpinLockRelease(&coord.run->mutex);
		if (terminate && workers[i].handle)
			TerminateBackgroundWorker(workers[i].handle);
		else if (latch)
			SetLatch(latch);
	}
	for (int i = 0; i < coord.n_workers; i++)
		if (workers[i].handle)
			WaitForBackgroundWorkerShutdown(workers[i].handle);
}

/*
 * Model i stopped (a search's decision, its patience): a state it had
 * handed over is of no use any more, unless a worker is training from it
 * now.  (Models stop at epochs' ends, which commit: then it holds none.)
 */
void
coord_model_stopped(int32 i)
{
	for (int w = 0; w < coord.n_workers; w++)
		if (workers[w].busy && workers[w].task.model == i)
		{
			/* what its task hands over is dropped when it reports */
			coord.models[i].drop_handed = true;
			return;
		}
	coord_model_handed(i, InvalidDsaPointer);
}

/*
 * The run ends (its workers have exited): commit the states handed over
 * by models in the middle of an epoch, with their sub-epochs, so that a
 * run cancelled, out of time or interrupted keeps that work.  First the
 * hand-overs that workers reported after the last round (a cancel ends the
 * run without folding them in).  One transaction per model; one that fails
 * (a lock timeout, no memory) is logged and loses only that model's
 * handed-over sub-epochs, as a crash would.
 */
static void
commit_handed(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile int n = 0;

	if (handover == NULL || coord.run->run_id == 0)
		return;
	for (int w = 0; w < coord.n_workers; w++)
	{
		dsa_pointer out;

		if (!workers[w].busy)
			continue;
		SpinLockAcquire(&coord.run->mutex);
		out = coord.run->slots[w].state_out;	/* (cleared when assigned) */
		SpinLockRelease(&coord.run->mutex);
		if (DsaPointerIsValid(out))
			coord_model_handed(workers[w].task.model, out);
	}
	for (int i = 0; i < coord.n_models; i++)
	{
		if (!DsaPointerIsValid(coord.models[i].handed))
			continue;
		PG_TRY();
		{
			MopHandoverHop hops[MOP_MAX_CHECKPOINT_EVERY];
			bytea	   *state;
			int			n_hops;

			coord_begin_tx();
			n_hops = mop_handover_read(handover, coord.models[i].handed, coord.models[i].id,
									   &state, hops);
			if (mop_subepoch_commit_handed(coord.run->run_id, coord.models[i].id, state, hops, n_hops))
				n++;
			coord_commit_tx();
		}
		PG_CATCH();
		{
			ErrorData  *ed;

			MemoryContextSwitchTo(cxt);
			ed = CopyErrorData();
			FlushErrorState();
			AbortCurrentTransaction();
			/* a shutdown stops the coordinator here too */
			if (ed->elevel > ERROR || ed->sqlerrcode == ERRCODE_QUERY_CANCELED ||
				ed->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN || ProcDiePending || QueryCancelPending)
				ReThrowError(ed);
			ereport(LOG,
					(errmsg("mop run %lld: could not commit the state model %lld had handed over: %s",
							(long long) coord.run->run_id, (long long) coord.models[i].id,
							ed->message)));
			FreeErrorData(ed);
		}
		PG_END_TRY();
		MemoryContextSwitchTo(cxt);
		coord_model_handed(i, InvalidDsaPointer);
	}
	if (n > 0)
		elog(LOG, "mop run %lld: committed the states %d models had handed over",
			 (long long) coord.run->run_id, n);
}

/* Fold a finished task into the scheduler, the driver and the progress counters. */
static void
task_finished(mop_sched *s, int w, MopTaskOutcome outcome, double seconds, double vm,
			  double vl, dsa_pointer handed_out)
{
	mop_task   *t = &workers[w].task;

	workers[w].busy = false;
	if (outcome == MOP_TASK_SEGMENT_DOWN)
	{
		/* nothing was written: the sub-epoch runs again, on another copy */
		char		error[256];

		SpinLockAcquire(&coord.run->mutex);
		strlcpy(error, coord.run->slots[w].error, sizeof(error));
		SpinLockRelease(&coord.run->mutex);
		if (!coord_segments_task_down(s, w, t, error))
			return;
		/* lost too many times in a row: the model fails (marked so there) */
		outcome = MOP_TASK_FAILED;
	}
	/* the model's state handed over, or committed: the chunk it came in is done */
	coord_model_handed(t->model, outcome == MOP_TASK_OK ? handed_out : InvalidDsaPointer);
	/* a sub-epoch given up before has run again (settle_lost_task) */
	coord.models[t->model].commit_next = false;
	if (outcome == MOP_TASK_OK)
	{
		bool		epoch_done = mop_sched_complete(s, t, seconds);
		bool		target_done = epoch_done &&
			mop_sched_epochs_done(s, t->model) >= coord.models[t->model].target;

		if (coord.run->n_segments > 0)
			coord_segments_task_ok(t->model);

		/*
		 * Hermes: prefer the models whose loss falls fastest per second,
		 * weighed against where they stand (the loss expected after one
		 * more typical epoch; see src/search/mop_hermes.h for why the rate
		 * alone is not used).
		 */
		if (coord.run->opts.scheduler == MOP_PICK_PRIORITY &&
			(mop_hermes_history_trained(&coord.hermes, t->model, seconds) != MOP_SEARCH_OK ||
			 (epoch_done &&
			  mop_hermes_history_evaluated(&coord.hermes, s, t->model, vl) != MOP_SEARCH_OK)))
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));

		if (!DsaPointerIsValid(handed_out))
			commits_done++;
		SpinLockAcquire(&coord.run->mutex);
		coord.run->hops_done++;
		if (epoch_done && isfinite(vm) &&
			(isnan(coord.run->best_metric) ||
			 (coord.run->higher_is_better ? vm > coord.run->best_metric : vm < coord.run->best_metric)))
			coord.run->best_metric = vm;
		if (target_done && !coord_adaptive())
			coord.run->models_done++;
		SpinLockRelease(&coord.run->mutex);
		if (epoch_done)
			coord_drivers_epoch_done(s, t->model, coord_score(vm), target_done);
	}
	else
	{
		/* diverged or failed: the model stops, the run goes on */
		mop_sched_abort(s, t);
		mop_sched_stop(s, t->model);
		SpinLockAcquire(&coord.run->mutex);
		coord.run->models_done++;
		SpinLockRelease(&coord.run->mutex);
		coord_drivers_task_failed(s, t->model);
	}
}

/*
 * Settle the task of worker w, whose process died or was given up: done if
 * its sub-epoch committed, else back to the scheduler.  A process given up
 * (mop.task_timeout) may still be alive -- stopped, or hung in I/O -- and
 * commit that sub-epoch once it runs again (it was inside its commit, or
 * its hand-over had found no room and it went on to commit).  So its
 * model's next task is that same sub-epoch, and it commits rather than
 * being handed over: the model's row lock orders the two commits, and the
 * later one finds the sub-epoch committed and writes nothing
 * (subepoch.c).  Another of the model's sub-epochs, or a hand-over, which
 * takes no lock, could build on a state that the late commit contradicts
 * (the next commit would meet its mop.hops row, or overwrite its
 * checkpoint).  Once that sub-epoch has committed, the old process can
 * write nothing more, and the model goes on as usual.
 */
static void
settle_lost_task(mop_sched *s, int w)
{
	mop_task   *t = &workers[w].task;
	double		vm,
				vl;

	if (workers[w].busy)
	{
		if (coord_hop_committed(t, &vm, &vl))
			task_finished(s, w, MOP_TASK_OK, 0, vm, vl, InvalidDsaPointer);
		else
		{
			mop_sched_abort(s, t);
			workers[w].busy = false;
			if (workers[w].given_up)
			{
				mop_sched_only(s, t->model, t->partition);
				coord.models[t->model].commit_next = true;
			}
		}
	}
	workers[w].given_up = false;
}

/* Settle worker w's task after its process died, and start a new one. */
static void
worker_died(mop_sched *s, int w)
{
	settle_lost_task(s, w);
	if (++workers[w].restarts > MAX_RESTARTS || !start_worker(w))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("mop worker %d of run %lld died and could not be restarted",
						w, (long long) coord.run->run_id),
				 errhint("See the server log for its last error; mop_resume(%lld) continues the run.",
						 (long long) coord.run->run_id)));
	elog(LOG, "mop run %lld: restarted worker %d", (long long) coord.run->run_id, w);
}

/*
 * Worker w, taken out of the run, is gone: settle a task it still ran
 * (died or hung while finishing it), and its slot is free.
 */
static void
worker_left(mop_sched *s, int w)
{
	settle_lost_task(s, w);
	workers[w].life = W_RETIRED;
	SpinLockAcquire(&coord.run->mutex);
	coord.run->slots[w].retired = true;
	SpinLockRelease(&coord.run->mutex);
	coord_count_workers();
	elog(LOG, "mop run %lld: worker %d left the run", (long long) coord.run->run_id, w);
}

/*
 * mop_set_workers over local data: workers 0 .. n-1 serve the run, owning
 * the partitions p % n (n at most the partitions).  Those past n finish
 * their task and exit; the missing ones start, or a leaving one stays if
 * it has not exited yet.  Returns false while a slot it needs is still
 * held by a process leaving it (tried again in the next round).
 */
static bool
set_local_workers(mop_sched *s, int n, int *started)
{
	int			ready;

	n = Max(Min(n, coord.n_partitions), 1);
	for (int w = n; w < coord.n_workers; w++)
		coord_retire_worker(w);
	for (ready = 0; ready < n; ready++)
	{
		if (coord_worker_active(ready) || coord_unretire_worker(ready))
			continue;
		if (coord_worker_leaving(ready))
			break;				/* its process is still on its way out */
		if (!coord_start_worker(ready))
		{
			ereport(LOG,
					(errmsg("mop run %lld: only %d of the %d workers asked for could be started",
							(long long) coord.run->run_id, ready, n),
					 errhint("Raise max_worker_processes (now %d).", max_worker_processes)));
			n = ready;
			break;
		}
	}
	if (ready > 0 && mop_sched_set_n_workers(s, ready) != 0)
		elog(ERROR, "could not give the scheduler %d workers", ready);
	*started = ready;
	return ready >= n;
}

/*
 * Carry out the last mop_set_workers request (run->workers_target): over
 * local data, the number of workers; over segments, the workers of each
 * segment.  Recorded in mop.segment_events ('workers').
 */
static void
apply_workers_target(mop_sched *s)
{
	static int32 applied = 0;
	static bool pending = false;
	int32		target;
	int			before = 0,
				started = 0;
	bool		first;

	SpinLockAcquire(&coord.run->mutex);
	target = coord.run->workers_target;
	before = coord.run->workers_active;
	SpinLockRelease(&coord.run->mutex);
	if (target <= 0 || (target == applied && !pending))
		return;
	first = target != applied;
	applied = target;
	if (coord.run->n_segments > 0)
	{
		coord_segments_set_workers(s, target, first);
		pending = false;
		return;
	}
	pending = !set_local_workers(s, target, &started);
	if (first || !pending)
	{
		int			n = Max(Min(target, coord.n_partitions), 1);

		if (!pending && started < n)
			coord_record_event("local", "workers", -1, 0, -1,
							   psprintf("only %d of the %d workers asked for could be started (max_worker_processes is %d)",
										started, n, max_worker_processes));
		else if (first)
			coord_record_event("local", "workers", -1, 0, -1,
							   psprintf("%d workers (were %d), asked for %d", n, before, target));
	}
}

/*
 * A worker whose task made no progress for mop.task_timeout -- stopped, hung
 * in a system call -- is given up: told to terminate, and its slot gets a
 * new process (a new generation) that runs the task again unless its
 * sub-epoch committed.  Progress is the slot's heartbeat, which the worker
 * advances in every step of a task: each minibatch trained, each slice of
 * validation rows evaluated, and each step it moves on to (training,
 * validating, committing).  So a worker hung while it loads, trains,
 * validates or commits is replaced alike.  The old process, should it ever
 * run again, sees that its slot has moved on and stops before committing
 * anything, unless it was inside its commit (settle_lost_task).  A worker
 * stopped while it commits holds its model's row lock, for which its
 * replacement waits in turn (worker.c, run_task); that replacement is
 * given up too, and after MAX_RESTARTS the run fails (worker_died) rather
 * than training on; recording the failure waits for that row as well.
 */
static bool
worker_hung(int w, const MopSlot *copy)
{
	TimestampTz now = GetCurrentTimestamp();

	if (coord.run->task_timeout_ms <= 0 || copy->state != MOP_SLOT_ASSIGNED || !workers[w].busy)
	{
		workers[w].progress_at = 0;
		return false;
	}
	if (workers[w].progress_at == 0 || copy->heartbeat != workers[w].heartbeat)
	{
		workers[w].heartbeat = copy->heartbeat;
		workers[w].progress_at = now;
		return false;
	}
	if (!TimestampDifferenceExceeds(workers[w].progress_at, now, coord.run->task_timeout_ms))
		return false;
	ereport(LOG,
			(errmsg("mop run %lld: worker %d (pid %d) made no progress on model %lld for %d ms; replacing it",
					(long long) coord.run->run_id, w, (int) copy->pid, (long long) copy->model_id,
					coord.run->task_timeout_ms),
			 errdetail("It was %s epoch %d on partition %d.", mop_task_step_name(copy->step),
					   copy->epoch, copy->partition)));
	TerminateBackgroundWorker(workers[w].handle);
	workers[w].given_up = true;
	workers[w].progress_at = 0;
	return true;
}

/* Hand a task to idle worker w if the scheduler has one. */
static bool
assign(mop_sched *s, int w, Latch *latch)
{
	mop_task	t;

	if (mop_sched_next(s, w, &t) != MOP_ASSIGNED)
		return false;
	/* convergence-aware: a started model's minimum quantum (fresh_priority) */
	if (coord.run->opts.scheduler == MOP_PICK_PRIORITY && mop_hermes_history_evals(&coord.hermes, t.model) == 0)
		mop_sched_set_priority(s, t.model, MOP_HERMES_NEW_PRIORITY);
	workers[w].busy = true;
	workers[w].task = t;
	workers[w].progress_at = 0;
	SpinLockAcquire(&coord.run->mutex);
	coord.run->slots[w].model_index = t.model;
	coord.run->slots[w].model_id = coord.models[t.model].id;
	coord.run->slots[w].partition = t.partition;
	coord.run->slots[w].epoch = t.epoch + 1;
	coord.run->slots[w].last_of_epoch = t.last_of_epoch;
	coord.run->slots[w].final_epoch = t.last_of_epoch && t.epoch + 1 >= coord.models[t.model].target;
	/* mop.checkpoint_every: hand over the N-1 sub-epochs between commits */
	coord.run->slots[w].state_in = coord.models[t.model].handed;
	coord.run->slots[w].may_hand_over = handover != NULL && !t.last_of_epoch &&
		coord.models[t.model].n_handed + 1 < coord.run->opts.checkpoint_every &&
		!coord.models[t.model].commit_next;
	coord.run->slots[w].state_out = InvalidDsaPointer;
	coord.run->slots[w].step = MOP_STEP_LOADING;
	coord.run->slots[w].rows_done = 0;
	coord.run->slots[w].rows_total = 0;
	coord.run->slots[w].started_at = GetCurrentTimestamp();
	coord.run->slots[w].progress_at = coord.run->slots[w].started_at;
	coord.run->slots[w].state = MOP_SLOT_ASSIGNED;
	SpinLockRelease(&coord.run->mutex);
	if (latch)
		SetLatch(latch);
	return true;
}

/* Why the run is to end 'interrupted' (a partition's copies all down), or NULL. */
static char *interrupted_why = NULL;

/* Microseconds this start of the run has trained (since its workers were started). */
static int64
this_start_us(void)
{
	TimestampTz started;

	SpinLockAcquire(&coord.run->mutex);
	started = coord.run->started_at;
	SpinLockRelease(&coord.run->mutex);
	if (started == 0)
		return 0;
	return Max(GetCurrentTimestamp() - started, 0);
}

/* The same in milliseconds. */
static int64
this_start_ms(void)
{
	return this_start_us() / 1000;
}

/*
 * Is the run's time budget spent?  It counts the run's training time over
 * all its starts: what mop.runs.time_used recorded before this start and
 * the time since this one began.
 */
static bool
budget_spent(void)
{
	int64		budget = coord.run->opts.time_budget_ms;

	if (coord.budget_spent)
		return true;
	if (budget <= 0 || coord.time_used_ms + this_start_ms() < budget)
		return false;
	coord.budget_spent = true;
	elog(LOG, "mop run %lld: its time budget (%lld ms) is spent; the sub-epochs in flight finish",
		 (long long) coord.run->run_id, (long long) budget);
	return true;
}

/* Has any worker a task? */
static bool
any_busy(void)
{
	for (int w = 0; w < coord.n_workers; w++)
		if (workers[w].busy)
			return true;
	return false;
}

/* Has a worker reported a finished task that this round has not settled? */
static bool
any_slot_done(void)
{
	bool		done = false;

	SpinLockAcquire(&coord.run->mutex);
	for (int w = 0; w < coord.n_workers && !done; w++)
		done = coord.run->slots[w].state == MOP_SLOT_DONE && workers[w].life != W_RETIRED;
	SpinLockRelease(&coord.run->mutex);
	return done;
}

/*
 * The scheduling loop; returns true if cancelled (or interrupted:
 * interrupted_why is set).  Each round: settle
 * finished tasks and dead workers, give idle workers work, and sleep until a
 * worker reports.  With an adaptive driver (Hyperband, ASHA, TPE), a worker that the
 * scheduler cannot serve asks the driver for actions -- start, promote,
 * stop -- until one gives it work or the driver has nothing more now: new
 * trials start only when a worker would otherwise be idle, as ASHA wants.
 */
static bool
schedule(mop_sched *s)
{
	mop_poll	driver = coord_adaptive() ? MOP_POLL_WAIT : MOP_POLL_DONE;

	for (;;)
	{
		bool		cancel;

		CHECK_FOR_INTERRUPTS();
		/* segments: try the down ones again; give up on a missing partition */
		if (coord.run->n_segments > 0 && !coord_segments_tick(s, &interrupted_why))
			return true;
		for (int w = 0; w < coord.n_workers; w++)
		{
			MopSlot		copy;
			pid_t		pid;

			SpinLockAcquire(&coord.run->mutex);
			copy = coord.run->slots[w];
			SpinLockRelease(&coord.run->mutex);
			if (workers[w].life == W_RETIRED)
				continue;
			if (copy.state == MOP_SLOT_DONE)
			{
				task_finished(s, w, copy.outcome, copy.seconds, copy.valid_metric,
							  copy.valid_loss, copy.state_out);
				SpinLockAcquire(&coord.run->mutex);
				coord.run->slots[w].state = MOP_SLOT_IDLE;
				SpinLockRelease(&coord.run->mutex);
				/* taken out of the run meanwhile: its task is done, it exits */
				if (workers[w].life == W_RETIRING)
					send_exit(w);
			}
			else if (copy.state == MOP_SLOT_GONE ||
					 (GetBackgroundWorkerPid(workers[w].handle, &pid) == BGWH_STOPPED &&
					  (copy.state != MOP_SLOT_EXIT || workers[w].life == W_EXITING)) ||
					 worker_hung(w, &copy))
			{
				if (workers[w].life == W_ACTIVE)
					worker_died(s, w);
				else
					worker_left(s, w);
			}
		}
		/* mop_set_workers: take workers out of the run or add some */
		apply_workers_target(s);
		SpinLockAcquire(&coord.run->mutex);
		cancel = coord.run->cancel_requested;
		SpinLockRelease(&coord.run->mutex);
		if (cancel)
			return true;
		/*
		 * time budget spent: no new sub-epoch, no new trial; those in flight
		 * finish and commit, then the run ends
		 */
		if (budget_spent())
		{
			if (!any_busy())
				return false;
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1000L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}
		/* a replayed PBT run: the exploits whose member and parent are at their point */
		if (coord.run->opts.replay_of)
			coord_pbt_replay_exploits(s);
		/* longest-first: the profiled cost of models not started yet */
		coord_cost_hints(s);
		for (int w = 0; w < coord.n_workers; w++)
		{
			MopSlot		copy;

			SpinLockAcquire(&coord.run->mutex);
			copy = coord.run->slots[w];
			SpinLockRelease(&coord.run->mutex);
			/* (no latch: its process has exited after its last report) */
			if (copy.state != MOP_SLOT_IDLE || copy.latch == NULL || workers[w].busy ||
				workers[w].life != W_ACTIVE)
				continue;
			while (!assign(s, w, copy.latch) && coord_adaptive())
			{
				mop_action	a;

				if (!coord_driver_may_start(s))
					break;

				driver = coord_driver_next(&a);
				if (driver != MOP_POLL_ACTION)
					break;
				coord_apply_action(s, &a);
				coord_cost_hints(s);
			}
		}
		if (mop_sched_finished(s))
		{
			/* nothing runs: give the driver its last word (e.g. stop paused trials) */
			if (coord_adaptive())
			{
				mop_action	a;

				/* (this is also the path at startup, before workers are ready) */
				while (coord_driver_may_start(s) &&
					   (driver = coord_driver_next(&a)) == MOP_POLL_ACTION)
					coord_apply_action(s, &a);
				if (!mop_sched_finished(s))
					continue;
			}
			if (driver == MOP_POLL_DONE)
				return false;
			elog(ERROR, "mop run %lld: the search driver waits for results no model can give",
				 (long long) coord.run->run_id);
		}
		/* superseded checkpoints: VACUUM mop.models now and then (reclaim.c) */
		mop_reclaim_checkpoints(coord.run->run_id, commits_done, coord.n_models, false);

		/*
		 * the latch, and the sockets of segments being tried
		 * (coord_segments.c) -- unless a worker finished meanwhile: what
		 * this round ran (a VACUUM waiting for a buffer's cleanup lock, a
		 * lock wait in one of its transactions) may have waited on this
		 * process's latch and reset it, taking the worker's wakeup with it
		 */
		if (!any_slot_done())
			coord_segments_wait(1000L);
	}
}

/* Publish the final state to the shared segment and wake the caller. */
static void
publish_done(const char *status, const char *error)
{
	Latch	   *latch;

	SpinLockAcquire(&coord.run->mutex);
	strlcpy(coord.run->status, status, sizeof(coord.run->status));
	if (error)
		strlcpy(coord.run->error, error, sizeof(coord.run->error));
	coord.run->phase = MOP_PHASE_DONE;
	latch = coord.run->caller_latch;
	SpinLockRelease(&coord.run->mutex);
	if (latch)
		SetLatch(latch);
}

/* On exit, even by FATAL: never leave the caller or workers waiting. */
static void
coordinator_detach(dsm_segment *seg, Datum arg)
{
	Latch	   *latches[MOP_MAX_WORKERS + 1];
	int			n = 0;

	SpinLockAcquire(&coord.run->mutex);
	if (coord.run->phase != MOP_PHASE_DONE)
	{
		strlcpy(coord.run->status, "failed", sizeof(coord.run->status));
		if (coord.run->error[0] == '\0')
			strlcpy(coord.run->error, "the run's coordinator exited", sizeof(coord.run->error));
		coord.run->phase = MOP_PHASE_DONE;
	}
	coord.run->coordinator_latch = NULL;
	for (int i = 0; i < MOP_MAX_WORKERS; i++)
		if (coord.run->slots[i].latch)
		{
			coord.run->slots[i].state = MOP_SLOT_EXIT;
			latches[n++] = coord.run->slots[i].latch;
		}
	if (coord.run->caller_latch)
		latches[n++] = coord.run->caller_latch;
	SpinLockRelease(&coord.run->mutex);
	for (int i = 0; i < n; i++)
		SetLatch(latches[i]);
}

/* A scheduler for coord.n_workers workers. */
static mop_sched *
new_sched(void)
{
	mop_sched  *s = mop_sched_new(coord.n_workers, coord.n_partitions, (uint64) coord.run->opts.seed,
								  coord.run->opts.deterministic, (mop_pick) coord.run->opts.scheduler);

	if (s == NULL)
		elog(ERROR, "could not create the scheduler (%d workers, %d partitions)",
			 coord.n_workers, coord.n_partitions);
	coord_cost_hints_forget();
	return s;
}

/*
 * Give the scheduler the run's models: a new run's, or a resumed run's with
 * their progress (and the driver where it stood: replay is true the first
 * time only; a rebuilt scheduler keeps the driver as it is).
 */
static void
fill_sched(mop_sched *s, bool replay)
{
	if (coord.run->resume_run_id && coord_adaptive())
		coord_replay_decisions(s);
	else if (coord.run->resume_run_id)
	{
		coord_restore_models(s);
		if (replay && coord.driver && coord.driver->ops->replay)
			coord.driver->ops->replay(coord.driver, s);
	}
	else
		for (int i = 0; i < coord.n_models; i++)
			coord_add_model(s, coord.models[i].target);
	if (coord.run->opts.replay_of)
	{
		coord_load_sequences(s);
		coord_pbt_replay_load(s);
	}
}

/* Start the workers; with fewer than asked, the scheduler is rebuilt for them. */
static mop_sched *
start_workers(mop_sched *s)
{
	for (int i = 0; i < coord.n_workers; i++)
		if (!start_worker(i))
		{
			if (i > 0 && coord.run->n_segments > 0)
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("only %d of the %d workers of a run over %d segments could be started",
								i, coord.n_workers, coord.run->n_segments),
						 errhint("Raise max_worker_processes (now %d) or lower mop.workers_per_segment.",
								 max_worker_processes)));
			if (i == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("could not start any mop worker"),
						 errhint("Raise max_worker_processes (now %d); each run needs a coordinator and one worker per partition group.",
								 max_worker_processes)));
			if (coord.run->resume_run_id && coord_adaptive())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
						 errmsg("only %d of %d workers could be started to resume run %lld",
								i, coord.n_workers, (long long) coord.run->run_id),
						 errhint("Raise max_worker_processes or resume with fewer workers.")));
			coord.n_workers = i;
			if (coord.driver)
				coord.driver->n_workers = i;
			mop_sched_free(s);
			s = new_sched();
			fill_sched(s, false);
			elog(LOG, "mop run %lld: only %d workers could be started",
				 (long long) coord.run->run_id, coord.n_workers);
			break;
		}
	SpinLockAcquire(&coord.run->mutex);
	coord.run->workers_started = coord.n_workers;
	SpinLockRelease(&coord.run->mutex);
	coord_count_workers();
	return s;
}

/*
 * Record the run's final status in the catalog (own transaction), with the
 * time this start trained and the run's note (NULL: none).
 */
static void
record_status(const char *status, const char *error, const char *note)
{
	if (coord.run->run_id == 0)
		return;
	coord_begin_tx();
	coord_set_status(-1, status, error);
	coord_record_time((double) this_start_us() / 1e6, note);
	coord_commit_tx();
}

/*
 * The run's time budget was spent: stop the models that were still
 * training; returns the run's note.
 */
static char *
budget_note(void)
{
	int			stopped = coord_budget_stop_models();
	Interval	iv;
	char	   *budget;

	memset(&iv, 0, sizeof(iv));
	iv.time = coord.run->opts.time_budget_ms * 1000;
	budget = DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(&iv)));
	return psprintf("time budget %s spent: %d model%s stopped before %s last epoch",
					budget, stopped, stopped == 1 ? "" : "s", stopped == 1 ? "its" : "their");
}

/*
 * The coordinator failed with ed: stop the workers, and record the failure
 * in the shared segment and (if it still can) in the catalog.
 */
static void
run_failed(ErrorData *ed)
{
	char		msg[512];

	strlcpy(msg, ed->message ? ed->message : "unknown error", sizeof(msg));
	elog(LOG, "mop run %lld failed: %s", (long long) coord.run->run_id, msg);
	stop_workers(true);
	SpinLockAcquire(&coord.run->mutex);
	strlcpy(coord.run->error, msg, sizeof(coord.run->error));
	coord.run->error_code = ed->sqlerrcode;
	strlcpy(coord.run->error_hint, ed->hint ? ed->hint : "", sizeof(coord.run->error_hint));
	SpinLockRelease(&coord.run->mutex);
	PG_TRY();
	{
		record_status("failed", msg, NULL);
	}
	PG_CATCH();
	{
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	publish_done("failed", msg);
}

typedef struct HandoverCreate
{
	dsa_handle	handle;
	int			tranche;
} HandoverCreate;

/* (in a subtransaction: a failure to get shared memory is an answer) */
static void
handover_create_step(void *arg)
{
	HandoverCreate *hc = (HandoverCreate *) arg;

	hc->handle = mop_handover_create(&hc->tranche);
}

/* Background worker entry point. */
void
mop_coordinator_main(Datum arg)
{
	mop_sched  *volatile s = NULL;
	bool		cancelled;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "mop coordinator");
	coord.seg = dsm_attach(DatumGetUInt32(arg));
	if (coord.seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mop coordinator could not attach to its run's shared memory")));
	dsm_pin_mapping(coord.seg);
	coord.run = mop_run_shared(coord.seg);
	if (coord.run == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mop coordinator found a bad run segment")));
	on_dsm_detach(coord.seg, coordinator_detach, (Datum) 0);
	BackgroundWorkerInitializeConnectionByOid(coord.run->database, coord.run->user, 0);
	mop_pin_search_path();
	pgstat_report_appname("mop coordinator");
	mop_blas_threads = coord.run->opts.blas_threads;

	SpinLockAcquire(&coord.run->mutex);
	coord.run->coordinator_pid = MyProcPid;
	coord.run->coordinator_latch = MyLatch;
	SpinLockRelease(&coord.run->mutex);

	mop_hermes_history_init(&coord.hermes);
	PG_TRY();
	{
		Latch	   *caller;

		if (coord.run->resume_run_id)
			coord_load_run();
		else
			coord_create_run();
		if (coord_segments_load())
		{
			s = coord_segments_sched();
			coord_segments_check(s);
		}
		else
		{
			coord.n_workers = Min(coord.run->n_workers, coord.n_partitions);
			s = new_sched();
		}
		coord_drivers_create();
		fill_sched(s, true);

		SpinLockAcquire(&coord.run->mutex);
		coord.run->n_models = coord.n_models;
		coord.run->hops_total = (coord.driver && coord.driver->budget > 0 ? coord.driver->budget :
								 (int64) coord.run->n_configs * coord.run->opts.epochs) * coord.n_partitions;
		coord.run->hops_done = coord.resumed_hops;
		coord.run->phase = MOP_PHASE_RUNNING;
		coord.run->started_at = GetCurrentTimestamp();
		caller = coord.run->caller_latch;
		SpinLockRelease(&coord.run->mutex);
		if (caller)
			SetLatch(caller);

		/*
		 * PBT copies a parent's latest committed checkpoint at any point of
		 * the parent's epoch, and a replay checks it copies the same one:
		 * their sub-epochs all commit
		 */
		if (coord.run->opts.checkpoint_every > 1 && coord.run->opts.kind != MOP_KIND_PBT &&
			coord.run->opts.replay_of == 0)
		{
			HandoverCreate hc;
			char	   *why = NULL;

			/*
			 * No shared memory for it (/dev/shm full, no free segment
			 * slot): every sub-epoch commits, as with the setting at 1
			 */
			hc.handle = DSM_HANDLE_INVALID;
			StartTransactionCommand();
			if (!mop_try_in_subxact(handover_create_step, &hc, &why))
				ereport(LOG,
						(errmsg("mop run " INT64_FORMAT ": no shared memory to hand models over; every sub-epoch commits",
								coord.run->run_id),
						 errdetail("%s", why)));
			CommitTransactionCommand();
			if (hc.handle != DSM_HANDLE_INVALID)
			{
				handover = mop_handover_area(hc.handle, hc.tranche);
				SpinLockAcquire(&coord.run->mutex);
				coord.run->handover = hc.handle;
				coord.run->handover_tranche = hc.tranche;
				SpinLockRelease(&coord.run->mutex);
			}
		}
		s = start_workers(s);
		cancelled = schedule(s);
		stop_workers(cancelled);
		commit_handed();
		mop_reclaim_checkpoints(coord.run->run_id, commits_done, coord.n_models, true);
		{
			char	   *error = interrupted_why;
			char	   *note = NULL;
			const char *final;

			if (!interrupted_why && !cancelled && coord.budget_spent)
				note = budget_note();
			final = interrupted_why ? "interrupted" :
				cancelled ? "cancelled" : coord_final_status(&error);
			record_status(final, error, note);
			if (note && strcmp(final, "done") == 0)
			{
				SpinLockAcquire(&coord.run->mutex);
				strlcpy(coord.run->note, note, sizeof(coord.run->note));
				SpinLockRelease(&coord.run->mutex);
			}
			publish_done(final, error);
		}
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(TopMemoryContext);
		ed = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		run_failed(ed);
	}
	PG_END_TRY();
	mop_sched_free(s);
	coord_drivers_free();
	mop_hermes_history_free(&coord.hermes);
	proc_exit(0);
}
