/*
 * coordinator.h -- what the files of a run's coordinator share (private to
 * them; run.h is the run's interface to other processes).
 *
 *   coordinator.c    the background worker: the scheduling loop and the
 *                    training workers' lifecycle;
 *   coord_catalog.c  the run's reads and writes of mop.runs, mop.models,
 *                    mop.hops and mop.decisions;
 *   coord_resume.c   resuming a run: load_run, restore_models, replaying
 *                    the recorded decisions of an adaptive search;
 *   coord_driver.c   the run's search driver and early-stopping rule
 *                    (src/search/mop_driver.h): creating them, carrying out
 *                    their actions, and the median stopping rule;
 *   coord_pbt.c      population based training as a driver, and the
 *                    exploits of a replayed PBT run;
 *   coord_segments.c a run over a dataset placed on segments: workers
 *                    bound to segments, segments going down and back.
 */
#ifndef MOP_COORDINATOR_H
#define MOP_COORDINATOR_H

#include "postgres.h"

#include "storage/dsm.h"
#include "utils/jsonb.h"

#include "mop.h"
#include "run.h"
#include "search/mop_driver.h"
#include "search/mop_hermes.h"
#include "search/mop_sched.h"
#include "handover.h"
#include "space.h"

/* A model of the run, by its index in the scheduler. */
typedef struct CoordModel
{
	int64		id;
	int32		target;			/* epochs it is to train */
	bool		stopped;		/* stopped by its patience rule */
	bool		patience_known; /* patience and its state loaded (coord_driver.c) */
	MopPatience patience;		/* its configuration's "early_stopping" */
	MopPatienceState patience_state;
	dsa_pointer handed;			/* its state handed over (handover.h), or
								 * InvalidDsaPointer: mop.models holds it */
	int32		n_handed;		/* sub-epochs handed over since it last committed */
	bool		drop_handed;	/* stopped while a task ran: drop what it hands over */
	bool		commit_next;	/* its next sub-epoch commits (settle_lost_task) */
} CoordModel;

/* The coordinator's state (one run per process). */
typedef struct MopCoord
{
	MopRunShared *run;			/* the run's shared segment */
	int64		run_id;			/* the run's id, once its row exists (run->run_id
								 * once committed) */
	dsm_segment *seg;
	MopDataset *ds;				/* the run's dataset (TopMemoryContext) */
	int			n_partitions;
	int			n_workers;		/* training workers started (or to start) */
	int			workers_per_segment;	/* a run over segments: workers each */
	CoordModel *models;			/* TopMemoryContext */
	int			n_models;
	int64		resumed_hops;	/* sub-epochs already done when resuming */
	int32		tpe_batch;		/* deterministic TPE: trials per batch (0: one per worker) */
	MopSpaceDesc *space;		/* the search space (TPE, PBT) */
	Jsonb	  **proposed;		/* configuration the driver proposed for each trial, or NULL */
	mop_driver *driver;			/* the search's driver, or NULL (grid, random, replay) */
	mop_driver *rule;			/* the early-stopping rule, or NULL */
	mop_hermes_history hermes;	/* convergence-aware priorities (MOP_PICK_PRIORITY) */
	int64		time_used_ms;	/* the run's training time before this start (mop.runs.time_used) */
	bool		budget_spent;	/* its time budget is spent: no new sub-epoch starts */
} MopCoord;

extern MopCoord coord;

/* coord_hints.c */
extern void coord_cost_hints(mop_sched *s);
extern void coord_cost_hints_forget(void);

/* coordinator.c */
extern int32 coord_add_model(mop_sched *s, int32 epochs);
extern void coord_model_handed(int32 i, dsa_pointer out);
extern void coord_model_stopped(int32 i);
extern bool coord_start_worker(int i);
extern bool coord_worker_active(int w);
extern bool coord_worker_leaving(int w);
extern int	coord_free_slot(void);
extern void coord_count_workers(void);
extern void coord_retire_worker(int w);
extern bool coord_unretire_worker(int w);

/* coord_catalog.c */
extern void coord_exec_sql(const char *sql, int nargs, Oid *types, Datum *vals, int expect);
extern void coord_begin_tx(void);
extern void coord_commit_tx(void);
extern const char *coord_config(int i);
extern void coord_insert_model(int64 run_id, int i, int32 target);
extern void coord_create_run(void);
extern bool coord_hop_committed(const mop_task *t, double *vm, double *vl);
extern const char *coord_final_status(char **error);
extern void coord_record_decision(const char *action, const char *why, int32 trial,
								  const mop_decision *d, int32 to_resource,
								  int32 parent, Jsonb *hyperparameters);
extern void coord_record_exploit(int32 trial, const mop_decision *d, int32 parent,
								 int32 parent_epochs, int32 parent_subepochs, Jsonb *config);
extern void coord_record_report(int32 trial, int32 resource, double score, const char *reason);
extern void coord_set_status(int32 trial, const char *status, const char *error);
extern void coord_record_time(double seconds, const char *note);
extern int	coord_budget_stop_models(void);

/* coord_resume.c */
extern void coord_load_run(void);
extern void coord_restore_models(mop_sched *s);
extern void coord_load_sequences(mop_sched *s);
extern void coord_replay_decisions(mop_sched *s);

/* coord_driver.c */
extern void coord_drivers_create(void);
extern void coord_drivers_free(void);
extern bool coord_adaptive(void);
extern double coord_score(double metric);
extern mop_poll coord_driver_next(mop_action *a);
extern bool coord_driver_may_start(const mop_sched *s);
extern void coord_driver_report(int32 trial, int32 resource, double score);
extern void coord_driver_tell(int32 trial, int32 resource, double score);
extern void coord_drivers_epoch_done(mop_sched *s, int32 model, double score, bool target_done);
extern void coord_drivers_task_failed(mop_sched *s, int32 model);
extern void coord_apply_action(mop_sched *s, const mop_action *a);
extern void coord_stop_model(mop_sched *s, int32 i, const mop_decision *d);

/* coord_segments.c */
extern bool coord_segments_load(void);
extern mop_sched *coord_segments_sched(void);
extern void coord_segments_check(mop_sched *s);
extern bool coord_segments_task_down(mop_sched *s, int w, const mop_task *t, const char *error);
extern void coord_segments_task_ok(int32 i);
extern bool coord_segments_tick(mop_sched *s, char **why);
extern void coord_segments_wait(long timeout_ms);
extern void coord_segments_set_workers(mop_sched *s, int per, bool record);
extern void coord_record_event(const char *segment, const char *event, int worker,
							   int64 model_id, int32 partition, const char *detail);

/* coord_pbt.c */
extern mop_driver *coord_pbt_driver_new(void);
extern void coord_pbt_replay_load(mop_sched *s);
extern void coord_pbt_replay_exploits(mop_sched *s);

#endif							/* MOP_COORDINATOR_H */
