/*
 * handover.h -- models handed from worker to worker in shared memory
 * (mop.checkpoint_every above 1).
 *
 * By default every sub-epoch commits the model's state to mop.models, and
 * the next worker reads it back: a crash loses nothing committed, and each
 * hop pays for writing and reading the state through TOAST and the
 * commit's WAL flush.  With mop.checkpoint_every = N, a run's worker may
 * instead leave the trained state, and the sub-epoch's would-be mop.hops
 * row, in the run's hand-over area (a DSA area the coordinator creates),
 * and the model's next worker takes it from there.  The N-th sub-epoch in
 * a row, and every epoch's last, commits as always: the state, and the
 * mop.hops rows of every sub-epoch handed over since the last commit, in
 * one transaction.  So the catalog is always a state a run can resume
 * from, and a crash costs each model at most N-1 sub-epochs of training,
 * which run again.
 *
 * PBT runs and replays commit every sub-epoch: an exploit copies a
 * parent's latest committed checkpoint at any point of the parent's epoch,
 * and a replay checks it copies the same one.
 *
 * A handed-over state lives in one chunk of the area: the header below,
 * then the state (a bytea).  The coordinator owns every chunk a finished
 * task reported, passes it with the model's next task, and frees it once
 * a task that took it has committed (or the model stopped); a worker whose
 * task fails after handing over frees its chunk itself.  When the run ends
 * (done, cancelled, out of time, interrupted) the coordinator commits the
 * chunks left (mop_subepoch_commit_handed); a run that fails drops them.  A chunk that
 * cannot be allocated (the area's limit, shared memory exhausted) is no
 * error: the sub-epoch commits instead.
 */
#ifndef MOP_HANDOVER_H
#define MOP_HANDOVER_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "utils/dsa.h"

/* mop.checkpoint_every's upper bound, and so the sub-epochs a chunk records */
#define MOP_MAX_CHECKPOINT_EVERY 64

/* the area's size limit: beyond it sub-epochs commit as usual */
#define MOP_HANDOVER_LIMIT ((size_t) 1024 * 1024 * 1024)

/* A sub-epoch handed over, not yet in mop.hops. */
typedef struct MopHandoverHop
{
	int32		epoch;
	int32		partition;
	int32		worker;
	TimestampTz started_at;
	TimestampTz finished_at;
	int64		rows;
	double		loss;
	double		metric;
	bool		loss_null;
	bool		metric_null;
} MopHandoverHop;

/*
 * Create the run's area (coordinator); its handle and its lock's tranche
 * (*tranche) for the workers.
 */
extern dsa_handle mop_handover_create(int *tranche);

/*
 * The area of handle (attached on first use, its lock's wait events named
 * after tranche), or NULL if none.
 */
extern dsa_area *mop_handover_area(dsa_handle handle, int tranche);

/*
 * Copy chunk p of model model_id out of the area: the state (palloc'd),
 * and into hops (room for MOP_MAX_CHECKPOINT_EVERY) the sub-epochs it
 * records; returns how many.  ERROR if the chunk is not the model's.
 */
extern int	mop_handover_read(dsa_area *area, dsa_pointer p, int64 model_id,
							  bytea **state, MopHandoverHop *hops);

/*
 * A new chunk holding state and hops[0 .. n_hops - 1] of model model_id,
 * or InvalidDsaPointer if the area has no room (nothing is raised).
 */
extern dsa_pointer mop_handover_write(dsa_area *area, int64 model_id, bytea *state,
									  const MopHandoverHop *hops, int n_hops);

extern void mop_handover_free(dsa_area *area, dsa_pointer p);

#endif							/* MOP_HANDOVER_H */
