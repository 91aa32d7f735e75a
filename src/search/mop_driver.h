/*
 * mop_driver.h -- the interface through which a run's executor (the
 * PostgreSQL coordinator, a test) drives a search algorithm, pure C.
 *
 * A driver is a small struct of function pointers, implemented once per
 * algorithm; an operation an algorithm does not need is NULL.  Two kinds:
 *
 *   adaptive drivers (Hyperband, ASHA, TPE) decide which trials start,
 *   continue and stop: the executor asks next_action whenever a worker
 *   would idle, carries the action out, and tells report_result the score
 *   of each trial that reached its target (after recording it: replaying
 *   the recorded actions and results in order into a fresh driver rebuilds
 *   its state, see `replaying`);
 *
 *   rules and populations (median stopping, PBT) watch the trials the run
 *   trains anyway: epoch_done after each epoch, task_failed when a trial
 *   fails; replay rebuilds their state when a run is resumed.
 *
 * The adaptive drivers live in src/search (driver.c, driver_tpe.c); rules
 * whose decisions write to the catalog are implemented by the executor.
 */
#ifndef MOP_DRIVER_H
#define MOP_DRIVER_H

#include <stdint.h>

#include "mop_sched.h"
#include "mop_search.h"
#include "mop_tpe.h"

typedef struct mop_driver mop_driver;

typedef struct mop_driver_ops
{
	/* adaptive: the next action for an idle worker */
	mop_poll	(*next_action) (mop_driver *d, mop_action *a);
	/* adaptive: may next_action be asked now, with `active` trials holding work? (NULL: yes) */
	int			(*may_start) (const mop_driver *d, int32_t active);
	/* adaptive: trial reached `resource` with `score` (NaN: failed); 0 or an error */
	int			(*report_result) (mop_driver *d, int32_t trial, int32_t resource, double score);
	/* adaptive: does trial still wait for its result?  1 or 0 */
	int			(*awaits_result) (const mop_driver *d, int32_t trial);
	/* the values of the configuration proposed for trial (NULL: the executor's own configuration) */
	const double *(*proposal) (const mop_driver *d, int32_t trial);
	/* trial finished an epoch (its last when target_done) with `score` */
	void		(*epoch_done) (mop_driver *d, mop_sched *s, int32_t trial, int32_t epochs,
							   double score, int target_done);
	/* trial's task failed or diverged: it stops */
	void		(*task_failed) (mop_driver *d, mop_sched *s, int32_t trial);
	/* resume: rebuild the state of the interrupted run (NULL: it follows from the replayed calls) */
	void		(*replay) (mop_driver *d, mop_sched *s);
	void		(*free) (mop_driver *d);
} mop_driver_ops;

/* What every driver has; an implementation embeds it first. */
struct mop_driver
{
	const mop_driver_ops *ops;
	const char *report_reason;	/* adaptive: why a result is recorded, in words */
	int64_t		budget;			/* epochs the whole search trains (0: every trial its epochs) */
	int32_t		n_workers;		/* workers serving the run (the executor keeps it current) */
	int			replaying;		/* set while recorded calls are fed back: no timing limits */
	int			error;			/* the core's error behind a MOP_POLL_DONE (0: none) */
};

/* Is d an adaptive driver (it decides which trials train)? */
static inline int
mop_driver_adaptive(const mop_driver *d)
{
	return d != NULL && d->ops->next_action != NULL;
}

/* Free a driver (NULL: nothing). */
void		mop_driver_free(mop_driver *d);

/* Hyperband of (R, eta) (mop_hyperband.h); NULL on bad arguments. */
mop_driver *mop_hb_driver_new(int32_t R, int32_t eta);

/*
 * The same, running only the plan's first `brackets` brackets (0: all; a
 * run's max_trials), its budget theirs.
 */
mop_driver *mop_hb_driver_new_brackets(int32_t R, int32_t eta, int32_t brackets);

/*
 * ASHA (mop_asha.h).  At most two trials per worker have work left: on MOP
 * a worker is often briefly without a task (the trials in flight have
 * visited its partition or are busy), and ASHA would answer each such
 * moment with a new configuration; two per worker are enough for a worker
 * to find one, few enough that results (and promotions) come before every
 * trial is started.
 */
mop_driver *mop_asha_driver_new(int32_t r_min, int32_t R, int32_t eta, int32_t max_trials);

/*
 * TPE (mop_tpe.h) over max_trials trials of `epochs` each.  A new proposal
 * whenever a worker would idle, up to the budget, with at most one trial in
 * flight per worker: on MOP a worker idles whenever the trials in flight
 * have visited its partition, and without the cap every proposal would be
 * made before any result is known.  Deterministic: proposals in
 * synchronous batches of `batch` trials (see driver_tpe.c).
 */
mop_driver *mop_tpe_driver_new(const mop_param *space, int32_t n_params,
							   const mop_tpe_opts *opts, uint64_t seed, int32_t max_trials,
							   int32_t epochs, int deterministic, int32_t batch);

#endif							/* MOP_DRIVER_H */
