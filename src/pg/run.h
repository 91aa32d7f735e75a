/*
 * run.h -- shared state of a model-selection run executed by background
 * workers (model hopper parallelism).
 *
 * Processes of a run:
 *   the caller     validates the request, creates the run's dynamic shared
 *                  memory segment (this struct), starts the coordinator, and
 *                  (blocking form) waits, printing progress;
 *   the coordinator a background worker connected as the caller's role: it
 *                  commits the run and its models in its own transactions
 *                  (so workers can see them), starts the training workers,
 *                  and runs the MOP scheduler (src/search/sched.c), handing
 *                  one task at a time to each worker through its slot;
 *   the workers    background workers, also connected as the caller's role,
 *                  one per group of partitions; each task is one sub-epoch
 *                  through the narrow waist (mop.train_agg) and commits the
 *                  model's checkpoint with its mop.hops row.
 * Processes wake each other with SetLatch.  The segment's handle is stored
 * in mop.runs.shm_handle so that other sessions (mop_cancel, mop_wait,
 * mop.progress) can attach to it; the table of contents' magic and the run
 * id guard against a recycled handle.
 *
 * The segment is a shm_toc (storage/shm_toc.h) with magic MOP_RUN_MAGIC;
 * every process finds its parts by key (mop_run_shared, shm_toc_lookup):
 *
 *   MOP_KEY_RUN      MopRunShared, the run's fixed part;
 *   MOP_KEY_KIND     the kind of search (runreq.h), a C string;
 *   MOP_KEY_DATASET  the dataset's name, a C string;
 *   MOP_KEY_SPACE    the search space as JSON text ("null" if none);
 *   MOP_KEY_CONFIGS  MopRunConfigs: the configurations as JSON text;
 *   MOP_KEY_NAME     the run's name, a C string ("" if none);
 *   MOP_KEY_TAGS     the run's tags as JSON text ("" if none).
 *
 * The caller writes all of it before the coordinator starts; after that
 * only MopRunShared changes.  Locking of MopRunShared:
 *   - the request (database, user, resume_run_id, n_workers,
 *     task_timeout_ms, n_configs) and the other keys' entries are fixed once
 *     the segment is shared, and are read without the lock;
 *   - every other field, and the slots, are read and written under mutex by
 *     every process, except that the coordinator, the only writer of the
 *     run's state and progress (and of opts, when it resumes a run), reads
 *     its own writes without it.
 */
#ifndef MOP_RUN_H
#define MOP_RUN_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/shm_toc.h"
#include "storage/spin.h"
#include "utils/dsa.h"

#include "run_options.h"

#define MOP_RUN_MAGIC 0x4D4F5052	/* "MOPR": the segment's shm_toc magic */

/* Keys of the run segment's table of contents (see above). */
#define MOP_KEY_RUN			UINT64CONST(0x4D4F500000000001)
#define MOP_KEY_KIND		UINT64CONST(0x4D4F500000000002)
#define MOP_KEY_DATASET		UINT64CONST(0x4D4F500000000003)
#define MOP_KEY_SPACE		UINT64CONST(0x4D4F500000000004)
#define MOP_KEY_CONFIGS		UINT64CONST(0x4D4F500000000005)
#define MOP_KEY_NAME		UINT64CONST(0x4D4F500000000006)
#define MOP_KEY_TAGS		UINT64CONST(0x4D4F500000000007)
#define MOP_MAX_WORKERS 64

typedef enum MopRunPhase
{
	MOP_PHASE_STARTING = 0,		/* coordinator not yet running */
	MOP_PHASE_RUNNING,			/* run row committed, training */
	MOP_PHASE_DONE,				/* finished: see status */
} MopRunPhase;

typedef enum MopSlotState
{
	MOP_SLOT_STARTING = 0,		/* worker process not attached yet */
	MOP_SLOT_IDLE,				/* waiting for a task */
	MOP_SLOT_ASSIGNED,			/* task written by the coordinator */
	MOP_SLOT_DONE,				/* task finished: result fields valid */
	MOP_SLOT_EXIT,				/* asked to exit */
	MOP_SLOT_GONE				/* worker has exited */
} MopSlotState;

typedef enum MopTaskOutcome
{
	MOP_TASK_OK = 0,
	MOP_TASK_DIVERGED,			/* model marked diverged, keeps last checkpoint */
	MOP_TASK_FAILED,			/* error in the task: model marked failed */
	MOP_TASK_SEGMENT_DOWN		/* the worker's segment failed: nothing written,
								 * the sub-epoch is to run elsewhere */
} MopTaskOutcome;

/* A segment of a run over a placed dataset (segment.h). */
typedef struct MopRunSegment
{
	char		name[NAMEDATALEN];	/* 'local' or a foreign server's name */
	int64		remote_dataset_id;	/* the dataset's copy there (0: local) */
	bool		down;			/* the coordinator found it down (until a probe
								 * finds it up) */
} MopRunSegment;

/* One worker's mailbox. */
typedef struct MopSlot
{
	MopSlotState state;
	uint32		generation;		/* bumped for each process started in the slot */
	pid_t		pid;
	Latch	   *latch;			/* the worker's latch */
	/* task, written by the coordinator */
	int32		model_index;	/* scheduler's model index */
	int64		model_id;
	int32		partition;
	int32		epoch;			/* 1-based epoch of this sub-epoch */
	bool		last_of_epoch;	/* validate after training */
	bool		final_epoch;	/* last epoch of the model's budget */
	int32		segment;		/* the worker's segment (index into the run's
								 * segments), -1: none, the dataset is local */
	bool		retired;		/* taken out of the run (mop_set_workers): not
								 * shown by mop.progress */
	dsa_pointer state_in;		/* the model's state handed over (handover.h), or
								 * InvalidDsaPointer: mop.models holds it */
	bool		may_hand_over;	/* the sub-epoch may hand its state over */
	/* progress, written by the worker in every step of its task */
	int32		step;			/* MopTaskStep (mop.h): loading, training, ... */
	int64		rows_done;
	int64		rows_total;
	TimestampTz started_at;
	uint64		heartbeat;		/* advanced with every minibatch trained, every
								 * slice of validation rows evaluated and every
								 * step: what mop.task_timeout watches */
	TimestampTz progress_at;	/* when it last advanced (or the task started) */
	/* result, written by the worker */
	MopTaskOutcome outcome;
	double		seconds;
	double		valid_metric;	/* NaN if not validated */
	double		valid_loss;		/* NaN if not validated */
	dsa_pointer state_out;		/* the state handed over, or InvalidDsaPointer:
								 * the sub-epoch committed */
	char		error[256];
} MopSlot;

/* The run's fixed part (MOP_KEY_RUN). */
typedef struct MopRunShared
{
	slock_t		mutex;
	Oid			database;
	Oid			user;
	Latch	   *caller_latch;	/* NULL once the caller stops waiting */
	Latch	   *coordinator_latch;
	pid_t		coordinator_pid;

	/* request */
	int64		run_id;			/* 0 until the coordinator has created it */
	int64		resume_run_id;	/* non-zero: resume this run */
	int32		n_workers;		/* requested (capped) */
	int32		task_timeout_ms;	/* mop.task_timeout of the starting session; 0 = off */
	int32		segment_timeout_ms; /* mop.segment_timeout of the starting session */
	int32		segment_wait_ms;	/* mop.segment_wait of the starting session */
	int32		workers_per_segment;	/* mop.workers_per_segment of the starting session */
	dsa_handle	handover;		/* the hand-over area (handover.h), created by the
								 * coordinator when opts.checkpoint_every > 1 */
	int32		handover_tranche;	/* its lock's tranche */
	MopRunOptions opts;			/* what the run is (run_options.h); blas_threads and
								 * the device are the starting or resuming session's */
	int32		n_configs;		/* configurations (MOP_KEY_CONFIGS) */

	/* state */
	MopRunPhase phase;
	bool		cancel_requested;
	int32		workers_target;	/* mop_set_workers' last request (0: none):
								 * local workers, or workers per segment */
	int32		workers_active; /* workers serving the run now (not retired) */
	int32		workers_started;
	char		status[16];		/* final status: done, failed, cancelled */
	char		error[512];
	int			error_code;		/* its SQLSTATE (0: none recorded) */
	char		error_hint[256];	/* and its hint, if any */
	char		note[256];		/* a 'done' run's note (its time budget spent), or "" */

	/* progress */
	int32		n_models;
	int64		hops_total;
	int64		hops_done;
	int32		models_done;
	int32		epochs_done_min;
	double		best_metric;	/* NaN until known */
	bool		higher_is_better;
	TimestampTz started_at;

	MopSlot		slots[MOP_MAX_WORKERS];
	int32		n_segments;		/* 0: the dataset is not placed on segments */
	MopRunSegment segments[MOP_MAX_WORKERS];
} MopRunShared;

/* The run's configurations (MOP_KEY_CONFIGS), in the order given. */
typedef struct MopRunConfigs
{
	int32		n_configs;
	Size		offsets[FLEXIBLE_ARRAY_MEMBER];	/* of configuration i's JSON text,
												 * from the struct's start */
} MopRunConfigs;

#define MOP_RUN_CONFIG(c, i) ((const char *) (c) + (c)->offsets[(i)])

/* run.c: a run segment's parts, and its shared fields read under its lock */
extern MopRunShared *mop_run_shared(dsm_segment *seg);
extern const char *mop_run_string(dsm_segment *seg, uint64 key);
extern const MopRunConfigs *mop_run_configs(dsm_segment *seg);
extern int64 mop_run_id_of(MopRunShared *run);
extern void mop_run_options_of(MopRunShared *run, MopRunOptions *opts);

/* coordinator.c / worker.c entry points (bgw_function_name) */
extern PGDLLEXPORT void mop_coordinator_main(Datum arg);
extern PGDLLEXPORT void mop_worker_main(Datum arg);

/* mop.c: a background worker of mop's, to be registered */
struct BackgroundWorker;
extern void mop_bgworker_init(struct BackgroundWorker *bgw, const char *function,
							  const char *type);

/* run.c: the (id, shm_handle) rows of the last SPI query */
extern int	mop_run_handles(MemoryContext cxt, int64 **ids, int64 **handles, bool **has);

/* orphans.c: runs whose processes are gone become 'interrupted' (returns their ids) */
extern List *mop_mark_interrupted(void);
extern List *mop_mark_interrupted_except(int64 except);

/* recovery.c: after a restart a preloaded mop resumes interrupted runs */
extern bool mop_mark_in_worker(Oid database, Oid role, int64 except);
extern void mop_recovery_register_launcher(void);

/*
 * The models of run $1 still training when the run stops early (cancelled,
 * failed, or its coordinator gone) become 'cancelled'; mop_resume trains
 * them again.
 */
/* The models of run $1 still training when it is interrupted. */
#define MOP_INTERRUPT_MODELS_SQL \
	"UPDATE mop.models SET status = 'interrupted', updated_at = pg_catalog.clock_timestamp() " \
	"WHERE run_id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'training'"

#define MOP_CANCEL_MODELS_SQL \
	"UPDATE mop.models SET status = 'cancelled', updated_at = pg_catalog.clock_timestamp() " \
	"WHERE run_id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'training'"

#endif							/* MOP_RUN_H */
