/*
 * guc.c -- the mop.* settings, defined once from _PG_init.
 *
 * Where each is used:
 *   mop.threads_per_worker, mop.blas_threads,
 *   mop.max_model_memory                     mop.c (engine models); run.c
 *                                            resolves a run's threads
 *   mop.buffer_cache_mb                      bufcache.c, gpu_train.c
 *   mop.shared_buffer_cache_mb               shared_bufcache.c
 *   mop.workers, mop.task_timeout,
 *   mop.checkpoint_every, mop.scheduler      the search functions (a run
 *                                            records them when it starts;
 *                                            mop.checkpoint_every:
 *                                            handover.c, subepoch.c)
 *   mop.device, mop.gpu_memory, mop.gpu_tf32,
 *   mop.gpu_unverified                       gpu.c, gpu_train.c
 *   mop.auto_resume                          recovery.c
 *   mop.prewarm_buffer_cache                 shared_bufcache.c, recovery.c
 *   mop.plan_hop_cost, mop.plan_state_cost,
 *   mop.plan_epoch_cost, mop.plan_run_cost,
 *   mop.plan_segment_cost                    explain.c (the planner's cost
 *                                            model; defaults in
 *                                            src/search/mop_plan.h)
 *
 * mop.device and mop.scheduler are enums: an invalid value is refused with
 * PostgreSQL's usual 22023 "invalid value for parameter" error, whose hint
 * lists the valid values.
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "guc.h"
#include "handover.h"
#include "run.h"
#include "search/mop_plan.h"
#include "search/mop_sched.h"

int			mop_blas_threads = 0;
int			mop_threads_per_worker = 0;
int			mop_buffer_cache_mb = 256;
int			mop_shared_buffer_cache_mb = 256;
int			mop_max_model_memory_mb = 2048;
int			mop_workers = 2;
int			mop_task_timeout_ms = 300000;
int			mop_checkpoint_every = 1;
int			mop_scheduler = MOP_PICK_RANDOM;
int			mop_device = MOP_DEVICE_CPU;
int			mop_gpu_memory_mb = 0;
bool		mop_gpu_tf32 = false;
bool		mop_gpu_unverified = false;
int			mop_heartbeat_ms = 0;
int			mop_segment_timeout_ms = 30000;
int			mop_segment_wait_ms = 300000;
int			mop_workers_per_segment = 1;
bool		mop_auto_resume = true;
bool		mop_prewarm_buffer_cache = true;
double		mop_plan_hop_ms = MOP_PLAN_HOP_MS;
double		mop_plan_state_ms_per_mb = MOP_PLAN_STATE_MS_PER_MB;
double		mop_plan_epoch_ms = MOP_PLAN_EPOCH_MS;
double		mop_plan_run_ms = MOP_PLAN_RUN_MS;
double		mop_plan_segment_ms_per_mb = MOP_PLAN_SEGMENT_MS_PER_MB;

/* the spellings are the SQL names of mop_pick_name() */
static const struct config_enum_entry scheduler_options[] = {
	{"random", MOP_PICK_RANDOM, false},
	{"longest", MOP_PICK_LONGEST, false},
	{"convergence", MOP_PICK_PRIORITY, false},
	{"fifo", MOP_PICK_FIFO, false},
	{NULL, 0, false}
};

static const struct config_enum_entry device_options[] = {
	{"cpu", MOP_DEVICE_CPU, false},
	{"gpu", MOP_DEVICE_GPU, false},
	{"auto", MOP_DEVICE_AUTO, false},
	{NULL, 0, false}
};

/* The name of a mop.device value: cpu, gpu or auto. */
const char *
mop_device_name(int device)
{
	for (const struct config_enum_entry *e = device_options; e->name; e++)
		if (e->val == device)
			return e->name;
	return "cpu";
}

/* Define every mop.* setting (called from _PG_init; touches no GPU). */
void
mop_define_gucs(void)
{
	DefineCustomIntVariable("mop.threads_per_worker",
							"Threads each training process uses for its matrix products (BLAS); 0 = automatic.",
							"0: the cores divided among the run's workers on this server (mop_train and other single calls: all of them).",
							&mop_threads_per_worker,
							0, 0, 256,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.blas_threads",
							"Older name of mop.threads_per_worker: above 0 it wins over it.",
							"0 (the default): mop.threads_per_worker decides.",
							&mop_blas_threads,
							0, 0, 256,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.buffer_cache_mb",
							"Memory for detoasted training buffers kept across epochs in each backend.",
							"0 disables the cache.",
							&mop_buffer_cache_mb,
							256, 0, INT_MAX / 1024,
							PGC_USERSET, GUC_UNIT_MB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.shared_buffer_cache_mb",
							"Memory for the server's cache of detoasted training buffers, shared by every backend and worker.",
							"Takes effect with mop in shared_preload_libraries; 0 disables it.",
							&mop_shared_buffer_cache_mb,
							256, 0, INT_MAX / 1024,
							PGC_SIGHUP, GUC_UNIT_MB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.max_model_memory",
							"Memory one model may need (weights, gradients, optimizer state, one batch's activations).",
							"Checked before a model is created or read from its state; 0 = no limit.",
							&mop_max_model_memory_mb,
							2048, 0, INT_MAX / 2,
							PGC_USERSET, GUC_UNIT_MB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.workers",
							"Default number of training workers of a model-selection run.",
							"Capped by the dataset's partitions and by max_worker_processes.",
							&mop_workers,
							2, 1, MOP_MAX_WORKERS,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.task_timeout",
							"A training worker with no progress for this long is replaced and its sub-epoch run again; 0 = never.",
							"Progress is a minibatch trained, a slice of validation rows evaluated or a step of the task begun; taken from the session that starts (or resumes) the run.",
							&mop_task_timeout_ms,
							300000, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.checkpoint_every",
							"A model's state is committed every this many sub-epochs, and at the end of every epoch; 1 = every sub-epoch.",
							"Between commits a run's local workers hand the model over in shared memory; a crash loses at most this many sub-epochs less one of each model, which train again.  Taken from the session that starts (or resumes) the run.",
							&mop_checkpoint_every,
							1, 1, MOP_MAX_CHECKPOINT_EVERY,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("mop.scheduler",
							 "Default scheduler of model-selection runs: random, longest, convergence or fifo.",
							 "Used by every search function whose scheduler argument is not given.",
							 &mop_scheduler,
							 MOP_PICK_RANDOM, scheduler_options,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("mop.device",
							 "Where mop trains: cpu, gpu, or auto (a GPU if one is usable, else the CPU).",
							 "Checked when mop_train or a search starts; a run's workers keep the choice.",
							 &mop_device,
							 MOP_DEVICE_CPU, device_options,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("mop.gpu_memory",
							"GPU memory each training process may hold (models and resident rows); 0 = no limit.",
							"Set it so that the workers sharing one GPU fit in its memory.",
							&mop_gpu_memory_mb,
							0, 0, INT_MAX / 2,
							PGC_USERSET, GUC_UNIT_MB,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("mop.gpu_tf32",
							 "Let cuBLAS use TF32 tensor cores on the GPU (faster, no longer bit-comparable with the CPU).",
							 NULL,
							 &mop_gpu_tf32,
							 false,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("mop.gpu_unverified",
							 "Train on the GPU what its kernels do but no GPU has checked against the CPU yet.",
							 "Learning-rate schedules, class weights, batchnorm layers and whole-set metrics; off: refused on the GPU (0A000).",
							 &mop_gpu_unverified,
							 false,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("mop.prewarm_buffer_cache",
							 "After a restart, load the server's buffer cache again with the buffers it held.",
							 "mop's launcher writes the list to mop_buffer_cache.list in the data directory at shutdown and every five minutes; needs mop in shared_preload_libraries.",
							 &mop_prewarm_buffer_cache,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("mop.auto_resume",
							 "Resume interrupted runs after a crash or restart (mop must be in shared_preload_libraries).",
							 "Off: runs found interrupted are only marked so; mop_resume continues them.",
							 &mop_auto_resume,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("mop.heartbeat",
							"While mop.train_agg trains, send the client a NOTICE \"mop heartbeat <rows>\" at most this often; 0 = never.",
							"Set by a run's coordinator on its connections to segments, which it watches for progress.",
							&mop_heartbeat_ms,
							0, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.segment_timeout",
							"A segment that sends no progress for this long during a sub-epoch is marked down and its sub-epoch run elsewhere; 0 = never.",
							"Taken from the session that starts (or resumes) the run.",
							&mop_segment_timeout_ms,
							30000, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.segment_wait",
							"How long a run waits for a down segment that holds the only copy of a partition before it ends interrupted.",
							"Taken from the session that starts (or resumes) the run; mop_resume continues an interrupted run.",
							&mop_segment_wait_ms,
							300000, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.workers_per_segment",
							"Training workers per segment in a run over a dataset placed on segments.",
							"A run over segments has this many workers for each segment holding its dataset (local included).",
							&mop_workers_per_segment,
							1, 1, MOP_MAX_WORKERS,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomRealVariable("mop.plan_hop_cost",
							 "The planner's fixed cost of a sub-epoch besides its training (the hop's row, the commit, the hand-off).",
							 "Measure a server's own with test/bench/hop_cost.sql.",
							 &mop_plan_hop_ms,
							 MOP_PLAN_HOP_MS, 0, 1e6,
							 PGC_USERSET, GUC_UNIT_MS,
							 NULL, NULL, NULL);
	DefineCustomRealVariable("mop.plan_state_cost",
							 "The planner's cost of a sub-epoch's checkpoint, in milliseconds per MB of model state (read and written on every hop).",
							 "Measure a server's own with test/bench/hop_cost.sql.",
							 &mop_plan_state_ms_per_mb,
							 MOP_PLAN_STATE_MS_PER_MB, 0, 1e6,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomRealVariable("mop.plan_epoch_cost",
							 "The planner's fixed cost of a model's epoch besides its sub-epochs and validation (the epoch's row).",
							 NULL,
							 &mop_plan_epoch_ms,
							 MOP_PLAN_EPOCH_MS, 0, 1e6,
							 PGC_USERSET, GUC_UNIT_MS,
							 NULL, NULL, NULL);
	DefineCustomRealVariable("mop.plan_run_cost",
							 "The planner's fixed cost of a run (starting its coordinator and workers, its rows).",
							 NULL,
							 &mop_plan_run_ms,
							 MOP_PLAN_RUN_MS, 0, 1e9,
							 PGC_USERSET, GUC_UNIT_MS,
							 NULL, NULL, NULL);
	DefineCustomRealVariable("mop.plan_segment_cost",
							 "The planner's cost of a sub-epoch on a segment (another server), in milliseconds per MB of model state (the state there and back).",
							 "Twice the state over the network's rate to the segments.",
							 &mop_plan_segment_ms_per_mb,
							 MOP_PLAN_SEGMENT_MS_PER_MB, 0, 1e6,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("mop");
}
