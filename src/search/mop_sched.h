/*
 * mop_sched.h -- the model hopper (MOP) scheduler core, pure C.
 *
 * The data is split into P partitions, owned by W workers (partition p
 * belongs to worker p % W).  A task is "train model m on partition p for one
 * sub-epoch".  The scheduler hands tasks to idle workers so that:
 *   - a model is on at most one worker at a time, a worker trains one model;
 *   - in each epoch, a model visits every partition exactly once;
 *   - a model's next epoch starts only after its current epoch is complete.
 * Workers report completions; the caller (a PostgreSQL coordinator, a
 * simulator, a test) decides what a task costs and when it finishes.
 *
 * Pick policies for an idle worker, among eligible models (not busy, epoch
 * budget left, worker's partition not yet visited this epoch):
 *   MOP_PICK_RANDOM   Cerebro's randomized scheduler: uniform at random;
 *   MOP_PICK_LONGEST  the model with the most estimated remaining work first
 *                     (ties at random) -- the classic LPT rule, which keeps
 *                     long models from being left for the end; a model's
 *                     sub-epoch cost is estimated from its profile (a cost
 *                     hint) until its own sub-epochs are observed;
 *   MOP_PICK_PRIORITY the highest caller-set priority first (Hermes-style
 *                     convergence-aware scheduling sets these); among equal
 *                     priorities a model already started first, then the
 *                     unstarted one with the most sub-epochs left;
 *   MOP_PICK_FIFO     the earliest-added model first: each model is trained
 *                     to the end before later ones get a worker, except to
 *                     keep workers busy (the FIFO baseline of Hermes).
 * Deterministic mode fixes, from the seed alone, the order in which each
 * model visits the partitions in each epoch; a model is only given the
 * partition that is next in its order.  Its result then depends on nothing
 * but the seed, whatever the timing.
 *
 * Models may be added, stopped, or given more epochs at any time (search
 * algorithms do this); restoring from recorded hops resumes a run.
 */
#ifndef MOP_SCHED_H
#define MOP_SCHED_H

#include <stdint.h>

typedef enum mop_pick
{
	MOP_PICK_RANDOM = 0,
	MOP_PICK_LONGEST = 1,
	MOP_PICK_PRIORITY = 2,
	MOP_PICK_FIFO = 3
} mop_pick;

/* The SQL name of a pick policy ("random", "longest", "convergence", "fifo"). */
const char *mop_pick_name(mop_pick pick);

/* The policy of a SQL name; -1 if unknown. */
int			mop_pick_parse(const char *name);

typedef struct mop_task
{
	int32_t		model;
	int32_t		partition;
	int32_t		epoch;			/* 0-based epoch this sub-epoch belongs to */
	int32_t		last_of_epoch;	/* 1: completing it completes the epoch */
} mop_task;

typedef enum mop_next
{
	MOP_ASSIGNED = 0,			/* *task filled */
	MOP_WAIT = 1,				/* nothing now; ask again after a completion */
	MOP_DONE = 2				/* nothing will ever be left for this worker */
} mop_next;

typedef struct mop_sched mop_sched;

/* New scheduler; NULL on bad arguments or out of memory. */
mop_sched  *mop_sched_new(int n_workers, int n_partitions, uint64_t seed,
						  int deterministic, mop_pick pick);
void		mop_sched_free(mop_sched *s);

/*
 * Placed data (segments, replicas): a scheduler whose worker w holds a copy
 * of partition p where holds[w * n_partitions + p] is non-zero, instead of
 * p % W.  Every partition must be held (else NULL); several workers may
 * hold one partition (copies on distinct servers, or several workers of
 * one server), there may be more workers than partitions, and a worker may
 * hold nothing yet (a spare for a server that joins later).  A model is still on one worker at a time
 * and visits each partition once per epoch, from whichever copy; in
 * deterministic mode it still visits them in the seed's order, so its
 * result does not depend on where the partitions are.  In asynchronous
 * mode, a worker that holds several partitions the picked model has yet to
 * visit gives it the one with the most work waiting per up copy (the
 * estimated work of the models yet to visit it this epoch, over the up
 * workers that hold it; ties at random): the partitions that lost a copy
 * when a segment failed are not left for the end.
 */
mop_sched  *mop_sched_new_placed(int n_workers, int n_partitions, const uint8_t *holds,
								 uint64_t seed, int deterministic, mop_pick pick);

/*
 * Worker w gains (on) or loses a copy of partition p: a server joins or
 * leaves, or is given other partitions, while the run goes on.  A task the
 * worker runs on it finishes as usual; from then on the worker is given
 * only what it holds.  Returns -1 on a scheduler that is not placed.
 */
int			mop_sched_set_holds(mop_sched *s, int32_t worker, int32_t partition, int on);

/*
 * A scheduler that is not placed gets n_workers workers from now on
 * (mop_set_workers): partition p belongs to worker p % n_workers.  A task
 * a worker runs finishes as usual, whichever worker owns its partition
 * afterwards; workers at n_workers and above get nothing more
 * (mop_sched_next answers MOP_DONE).  Every model still visits each
 * partition once per epoch, and in deterministic mode in the seed's
 * order, so its result does not change.  Returns -1 on a placed
 * scheduler, n_workers outside 1..n_partitions, or out of memory.
 */
int			mop_sched_set_n_workers(mop_sched *s, int n_workers);

/*
 * A worker is down (its server failed) or up again: a down worker gets no
 * task (mop_sched_next answers MOP_WAIT), and the partitions only it holds
 * wait for it.  A task it was running is the caller's to abort.
 */
void		mop_sched_set_worker_down(mop_sched *s, int32_t worker, int down);
int			mop_sched_worker_down(const mop_sched *s, int32_t worker);

/*
 * A partition some model still has to visit that no up worker holds, or
 * -1: until a copy comes back, the run cannot finish.
 */
int32_t		mop_sched_unreachable(const mop_sched *s);

/* Add a model with an epoch budget; returns its index, or -1. */
int32_t		mop_sched_add_model(mop_sched *s, int32_t epochs);

int32_t		mop_sched_n_models(const mop_sched *s);

/* Set a model's epoch budget (more or fewer: promotions, early stops). */
void		mop_sched_set_epochs(mop_sched *s, int32_t model, int32_t epochs);

/* Stop a model: never scheduled again (a busy one finishes its task). */
void		mop_sched_stop(mop_sched *s, int32_t model);

/*
 * Fix a model's whole visiting sequence (partitions over all its epochs,
 * epoch after epoch) -- replaying a recorded run.  The model then visits
 * exactly these partitions in this order and stops when the sequence ends.
 */
int			mop_sched_set_sequence(mop_sched *s, int32_t model, const int32_t *seq,
								   int32_t len);

/*
 * Hold a model once it has trained `subepochs` sub-epochs in all (epochs
 * times partitions, plus the partitions of its unfinished epoch): it gets
 * no further task, and counts as having no work left, until the hold is
 * moved or released (-1) -- replaying a PBT exploit at the point where it
 * was made.
 */
void		mop_sched_hold(mop_sched *s, int32_t model, int64_t subepochs);

/*
 * The model's next task is this partition, for whichever worker holds it
 * (-1: any): a sub-epoch whose process was given up but may still commit
 * it runs again before any other sub-epoch of the model.  Released when a
 * task of the model completes.
 */
void		mop_sched_only(mop_sched *s, int32_t model, int32_t partition);

/* Sub-epochs a model has trained in all. */
int64_t		mop_sched_position(const mop_sched *s, int32_t model);

/*
 * What one sub-epoch of a model is expected to cost, from a profile
 * (MOP_PICK_LONGEST ranks by it until the model's first sub-epoch ends;
 * hints are calibrated against the sub-epochs of hinted models observed so
 * far, so only their ratios matter).  A cost <= 0 is ignored.
 */
void		mop_sched_set_cost_hint(mop_sched *s, int32_t model, double cost);

/* Set a model's priority (MOP_PICK_PRIORITY). */
void		mop_sched_set_priority(mop_sched *s, int32_t model, double priority);

/* Next task for an idle worker. */
mop_next	mop_sched_next(mop_sched *s, int32_t worker, mop_task *task);

/*
 * A task finished after `cost` units of time (used to estimate remaining
 * work).  Returns 1 if it completed the model's epoch.
 */
int			mop_sched_complete(mop_sched *s, const mop_task *task, double cost);

/* A task failed or was abandoned: the model is free again, nothing visited. */
void		mop_sched_abort(mop_sched *s, const mop_task *task);

/* Restore progress: epochs completed, and partitions visited in the next. */
void		mop_sched_restore(mop_sched *s, int32_t model, int32_t epochs_done,
							  const int32_t *visited, int32_t n_visited);

/* Progress of a model. */
int32_t		mop_sched_epochs_done(const mop_sched *s, int32_t model);
int32_t		mop_sched_visited(const mop_sched *s, int32_t model);	/* this epoch */
int			mop_sched_busy(const mop_sched *s, int32_t model);
int			mop_sched_started(const mop_sched *s, int32_t model);	/* ever given a task */

/* Models that still have work (budget left, not stopped) or are busy. */
int32_t		mop_sched_active(const mop_sched *s);

/* Sub-epochs model still has to train (0: stopped, or at its budget). */
int64_t		mop_sched_remaining(const mop_sched *s, int32_t model);

/* 1 when no model has work left and none is busy. */
int			mop_sched_finished(const mop_sched *s);

/* Partition order of a model in an epoch (deterministic mode's schedule). */
int32_t		mop_sched_order(const mop_sched *s, int32_t model, int32_t epoch,
							int32_t k);

#endif							/* MOP_SCHED_H */
