/*
 * guc.h -- the mop.* settings (all defined in guc.c).
 *
 * Each variable holds the setting's current value in this backend.  A run's
 * background workers do not read the settings of their own sessions: the
 * starting session's values travel in the run's shared segment (run.h).
 */
#ifndef MOP_GUC_H
#define MOP_GUC_H

/* mop.device: where training runs */
typedef enum MopDevice
{
	MOP_DEVICE_CPU = 0,
	MOP_DEVICE_GPU,
	MOP_DEVICE_AUTO
} MopDevice;

extern int	mop_blas_threads;		/* mop.blas_threads, 0: mop.threads_per_worker decides */
extern int	mop_threads_per_worker;	/* mop.threads_per_worker, 0: automatic */
extern int	mop_buffer_cache_mb;	/* mop.buffer_cache_mb */
extern int	mop_shared_buffer_cache_mb;	/* mop.shared_buffer_cache_mb */
extern int	mop_max_model_memory_mb;	/* mop.max_model_memory, MB, 0: no limit */
extern int	mop_workers;			/* mop.workers */
extern int	mop_task_timeout_ms;	/* mop.task_timeout, 0: never */
extern int	mop_checkpoint_every;	/* mop.checkpoint_every */
extern int	mop_scheduler;			/* mop.scheduler, a mop_pick */
extern int	mop_device;				/* mop.device, a MopDevice */
extern int	mop_gpu_memory_mb;		/* mop.gpu_memory, MB, 0: no limit */
extern bool mop_gpu_tf32;			/* mop.gpu_tf32 */
extern bool mop_gpu_unverified;	/* mop.gpu_unverified */
extern bool mop_auto_resume;		/* mop.auto_resume */
extern bool mop_prewarm_buffer_cache;	/* mop.prewarm_buffer_cache */
extern int	mop_heartbeat_ms;		/* mop.heartbeat, 0: none (set on segments' connections) */
extern int	mop_segment_timeout_ms; /* mop.segment_timeout */
extern int	mop_segment_wait_ms;	/* mop.segment_wait */
extern int	mop_workers_per_segment;	/* mop.workers_per_segment */
extern double mop_plan_hop_ms;		/* mop.plan_hop_cost, ms */
extern double mop_plan_state_ms_per_mb;	/* mop.plan_state_cost, ms per MB */
extern double mop_plan_epoch_ms;	/* mop.plan_epoch_cost, ms */
extern double mop_plan_run_ms;		/* mop.plan_run_cost, ms */
extern double mop_plan_segment_ms_per_mb;	/* mop.plan_segment_cost, ms per MB */

extern void mop_define_gucs(void);
extern const char *mop_device_name(int device);

#endif							/* MOP_GUC_H */
