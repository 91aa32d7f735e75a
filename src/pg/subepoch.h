/*
 * subepoch.h -- one sub-epoch of one model: the unit of work of every
 * executor.
 *
 * A sub-epoch trains one model once over one partition of its dataset's
 * training split.  mop_subepoch() does everything that means, inside the
 * caller's transaction and SPI connection, and commits nothing: the
 * caller's commit makes it durable, the caller's abort undoes all of it.
 *
 * Reads
 *   - the model's checkpoint, status and dataset (mop.models, no lock), or
 *     the state the caller carries (MopSubepochCarry);
 *   - the partition's training buffers, through the narrow waist: one
 *     SELECT of mop.train_agg (MOP_TRAIN_SQL), whatever device it trains on;
 *   - at the end of an epoch, the validation buffers (mop.eval_agg),
 *     evaluating the new state before any row is locked.
 * Writes
 *   - the dataset's and the run's rows are locked FOR KEY SHARE and the
 *     model's FOR UPDATE only once training and validation are done
 *     (lockorder.h), and the model's status is read again: a model that
 *     stopped training meanwhile gets nothing written;
 *   - the sub-epoch's mop.hops row (its mean loss and metric);
 *   - the new checkpoint (mop.models.state), the one it replaces kept as
 *     best_state if that was the best (subepoch.c, KEEP_BEST);
 *   - at the end of an epoch (task->last_of_epoch), instead: the
 *     mop.epochs row, the new checkpoint, and the model's epochs_done and
 *     best validation so far, in its metric's direction (a better epoch's
 *     state is the latest, best_state NULL); after the model's last epoch
 *     (task->final_epoch) its status 'done';
 *   - a model whose loss becomes NaN or infinite is marked 'diverged' with
 *     a message naming the epoch and partition and keeps its last finite
 *     checkpoint: the sub-epoch's state is not stored.
 * Returns
 *   the outcome, and in *result the sub-epoch's training sums and, when it
 *   validated, the validation means.  ERRORs (no checkpoint, no training
 *   buffers, a model or run deleted, a cancel, a failing progress callback)
 *   propagate: the caller decides what a failed sub-epoch means.
 *
 * A caller that trains a whole model in one transaction (mop_train) passes
 * a MopSubepochCarry: the state then goes from one sub-epoch to the next in
 * memory rather than through mop.models, so that one transaction stores
 * one final state, not one dead TOAST value per sub-epoch.  With a carry:
 *   - the state is read from and left in the carry, and written to
 *     mop.models only with the model's last sub-epoch;
 *   - no row is locked and the status is not read again: the caller's
 *     transaction created the run and the model, nobody else sees them;
 *   - a partition without training buffers is skipped (no hop row) instead
 *     of being an ERROR;
 *   - a diverged sub-epoch writes no hop row, and the model keeps the state
 *     of its last whole epoch (carry->kept), which its message says;
 *   - the epoch's training means and seconds come from the carry's sums
 *     (exact, over the whole epoch) instead of from its mop.hops rows.
 *
 * Progress goes to task->progress, if any: start() once the checkpoint is
 * read, with the partition's training rows (0 with a carry, which does not
 * read them), then rows() from inside the aggregate after each minibatch;
 * at the end of an epoch step(MOP_STEP_VALIDATING) and evaluated() from
 * inside mop.eval_agg after each slice of validation rows; and
 * step(MOP_STEP_COMMITTING) before the row locks are taken.  Any of them
 * may ERROR to stop the sub-epoch.
 *
 * A task with a segment trains on that segment (segment_train.c): the
 * same narrow waist over the segment's copy of the partition, the state
 * sent and received; everything else -- checkpoint, validation, every
 * catalog write -- happens here as for a local partition.
 *
 * Any executor that can run SQL on the catalog (a backend, a background
 * worker, a GPU host) runs sub-epochs through this function; the device is the aggregate's business (mop.device, or the
 * worker's GPU), not this unit's.
 */
#ifndef MOP_SUBEPOCH_H
#define MOP_SUBEPOCH_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "handover.h"
#include "mop.h"

/* The state a single-transaction caller carries from sub-epoch to sub-epoch. */
typedef struct MopSubepochCarry
{
	int64		dataset_id;
	MemoryContext cxt;			/* where the states live */
	bytea	   *state;			/* in: the state to train; out: the state after it */
	bytea	   *kept;			/* the state after the last whole epoch (NULL: the
								 * one mop.models holds) */
	bytea	   *best;			/* the state of the best epoch so far (NULL: none);
								 * written to mop.models once, with the last state */
	int32		best_epoch;
	/* the current epoch, reset by mop_subepoch_carry_begin_epoch */
	TimestampTz epoch_started;
	double		loss_sum;
	double		metric_sum;
	int64		rows;
} MopSubepochCarry;

/* One sub-epoch to run. */
typedef struct MopSubepochTask
{
	int64		run_id;			/* the mop.runs row the model belongs to */
	int64		model_id;		/* the mop.models row */
	int32		epoch;			/* 1-based epoch this sub-epoch belongs to */
	int32		partition;
	int32		worker;			/* recorded in mop.hops.worker */
	bool		last_of_epoch;	/* validate and record the epoch afterwards */
	bool		final_epoch;	/* the model's last epoch: 'done' with it */
	const MopProgress *progress;	/* NULL: no progress reported */
	MopSubepochCarry *carry;	/* NULL: the state is in mop.models */
	/* where the partition's copy is: NULL, this server; else a segment */
	const char *segment;		/* its name (segment.h) */
	int64		remote_dataset_id;	/* the dataset's copy there */
	int			segment_timeout_ms; /* silence after which it counts as down */
	/* models handed over in shared memory (handover.h); not with a carry */
	bytea	   *state_in;		/* the state to train, handed over (NULL: the
								 * one mop.models holds) */
	const MopHandoverHop *pending;	/* the sub-epochs handed over with it, to
									 * record in mop.hops when this one commits */
	int			n_pending;
	/*
	 * Not NULL: this sub-epoch, unless it ends an epoch (or diverges), may
	 * hand its state over instead of committing it: the function keeps the
	 * state and the sub-epochs it would commit (pending, then this one) and
	 * returns true, or returns false (no room) and the sub-epoch commits.
	 */
	bool		(*hand_over) (void *arg, bytea *state, const MopHandoverHop *hops, int n_hops);
	void	   *hand_over_arg;
} MopSubepochTask;

typedef enum MopSubepochOutcome
{
	MOP_SUBEPOCH_OK = 0,		/* trained and recorded */
	MOP_SUBEPOCH_DIVERGED,		/* the model is marked diverged */
	MOP_SUBEPOCH_COMMITTED,		/* another process committed this sub-epoch
								 * meanwhile (one given up while it committed):
								 * nothing written */
	MOP_SUBEPOCH_STOPPED,		/* the model is not training (any more): nothing
								 * written */
	MOP_SUBEPOCH_HANDED_OVER	/* trained; the state handed over, nothing
								 * written (task->hand_over) */
} MopSubepochOutcome;

typedef struct MopSubepochResult
{
	int64		rows;			/* rows trained (0: skipped, empty partition) */
	double		loss_sum;
	double		metric_sum;
	double		valid_loss;		/* means over the validation split; NaN unless */
	double		valid_metric;	/* validated on at least one row */
} MopSubepochResult;

extern MopSubepochOutcome mop_subepoch(const MopSubepochTask *task,
									   MopSubepochResult *result);

/* An epoch's validation as recorded in mop.epochs (NaN where none). */
extern void mop_subepoch_recorded_validation(int64 model_id, int32 epoch,
											 double *valid_loss, double *valid_metric);

/* Commit a state handed over when its run ends mid-epoch (the coordinator). */
extern bool mop_subepoch_commit_handed(int64 run_id, int64 model_id, bytea *state,
									   const MopHandoverHop *hops, int n_hops);

/* Start carrying state (allocated in cxt) for a model of dataset dataset_id. */
extern void mop_subepoch_carry_init(MopSubepochCarry *carry, int64 dataset_id,
									bytea *state, MemoryContext cxt);

/* A new epoch starts: its sums from zero, its clock from now. */
extern void mop_subepoch_carry_begin_epoch(MopSubepochCarry *carry);

/* Stop early after whole epoch `epoch`: store the state and the best checkpoint. */
extern void mop_subepoch_carry_stop(MopSubepochCarry *carry, int64 model_id, int32 epoch);

#endif							/* MOP_SUBEPOCH_H */
