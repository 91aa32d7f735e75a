/*
 * mop_hermes.h -- convergence-aware priorities (Hermes-style scheduling),
 * pure C, to feed mop_sched_set_priority under MOP_PICK_PRIORITY.
 *
 * Workers should prefer the models whose validation loss is falling fastest
 * per unit of training time.  For a model with validation losses
 * loss[0..n-1] (one per evaluation: after every epoch, or every sub-epoch
 * the caller evaluates) and the cumulative training seconds seconds[0..n-1]
 * at those points, the convergence rate over the last k evaluations is
 *
 *     k    = min(window, n - 1)
 *     rate = (loss[n-1-k] - loss[n-1]) / (seconds[n-1] - seconds[n-1-k])
 *
 * the loss decrease per second (with relative, divided by |loss[n-1-k]|:
 * the fraction of the loss removed per second).  Two rules rank by it:
 *
 *   MOP_HERMES_RATE       priority = rate: Hermes' rule as published.
 *   MOP_HERMES_PROJECTED  priority = -(loss[n-1] - rate * horizon): minus
 *                         the loss the model is expected to reach after
 *                         `horizon` more seconds of training (one typical
 *                         epoch, say).  The default.
 *
 * The rate alone rewards being far from the optimum: a far-too-small
 * learning rate keeps removing loss slowly long after a good model has
 * converged, and wins the workers (measured: CHANGELOG.md, "Benchmark
 * history").  The projected loss keeps the rate -- of two models at the
 * same loss the one falling faster per second comes first, and a slow
 * model's rate counts for less over the same horizon -- but weighs it
 * against where the model stands, so the workers go to the models that will
 * be best soonest, which is what "time to a target accuracy" asks.  With
 * one evaluation the rate is taken as 0 (the level alone).  A model whose
 * loss rises is projected to rise further (a negative rate).
 *
 * A NaN or infinite loss in the window gives -infinity (it diverged: it
 * should be stopped, never preferred).  New models get a minimum quantum:
 * until a model has min_evals evaluations and min_seconds of training, its
 * priority is new_priority, above every other, so it is scheduled early and
 * gives feedback quickly.  Because MOP schedules one sub-epoch at a time, a
 * model whose priority drops is preempted at the next sub-epoch boundary.
 *
 * The quantum is for models already started.  A configuration not started
 * yet has nothing to show; giving it the top priority too makes the search
 * breadth-first (every configuration gets its first epoch before any model
 * gets a second), so a good model found early waits for all of them.  Its
 * priority is instead what it may be expected to reach after its first
 * epoch, optimistically the best first-epoch loss seen so far
 * (mop_hermes_fresh_priority): models projected to do better than that --
 * the leader, while its loss keeps falling -- keep training; the others
 * wait for the new configurations.  With the MOP scheduler's tie-breaks (a
 * started model first, then the unstarted one with the most epochs
 * granted), the leader wins a tie, and a good configuration with a large
 * budget goes deep at once.  The caller gives a model new_priority when it
 * starts, and re-ranks the unstarted ones when the best first epoch
 * improves.  Measured against the breadth-first order: CHANGELOG.md,
 * "Benchmark history".
 */
#ifndef MOP_HERMES_H
#define MOP_HERMES_H

#include <stdint.h>

#include "mop_sched.h"

/* The top priority: new models' minimum quantum (new_priority's default). */
#define MOP_HERMES_NEW_PRIORITY 1e30

typedef enum mop_hermes_rule
{
	MOP_HERMES_PROJECTED = 0,
	MOP_HERMES_RATE = 1
} mop_hermes_rule;

typedef struct mop_hermes_opts
{
	mop_hermes_rule rule;		/* default MOP_HERMES_PROJECTED */
	int32_t		window;			/* evaluations in the rate; default 3 */
	int32_t		min_evals;		/* default 1 (RATE: at least 2) */
	double		min_seconds;	/* default 0 */
	double		new_priority;	/* default MOP_HERMES_NEW_PRIORITY */
	double		horizon;		/* PROJECTED: seconds to project; default 0 */
	int			relative;		/* RATE: fraction of the loss; default 0 */
} mop_hermes_opts;

void		mop_hermes_default_opts(mop_hermes_opts *o);

/* Loss decrease per second over the last window evaluations (0 if n < 2). */
double		mop_hermes_rate(const double *loss, const double *seconds, int32_t n,
							int32_t window, int relative);

/* A model's priority from its history (opts NULL: defaults); see above. */
double		mop_hermes_priority(const double *loss, const double *seconds, int32_t n,
								const mop_hermes_opts *opts);

/*
 * Priority of a configuration not started yet: minus the best first-epoch
 * loss seen so far, or new_priority while there is none (not finite).
 */
double		mop_hermes_fresh_priority(double best_first_loss, const mop_hermes_opts *opts);

/* The same, set as `model`'s priority in a MOP scheduler. */
void		mop_hermes_apply(mop_sched *s, int32_t model, const double *loss,
							 const double *seconds, int32_t n, const mop_hermes_opts *opts);

/*
 * What the caller keeps per model to compute the priorities above: the
 * training seconds spent on each model, and its validation loss with the
 * seconds spent up to then after each evaluation (the last
 * MOP_HERMES_HISTORY of them); and over all models the mean seconds of an
 * evaluated epoch (the PROJECTED rule's horizon) and the best first-epoch
 * loss (mop_hermes_fresh_priority).  Models are numbered as in the
 * scheduler; the history grows as models appear.
 */
#define MOP_HERMES_HISTORY 64

typedef struct mop_hermes_track
{
	int32_t		n_evals;
	double		trained;		/* seconds of training so far */
	double		trained_at_eval;	/* trained at the last evaluation */
	double		loss[MOP_HERMES_HISTORY];
	double		seconds[MOP_HERMES_HISTORY];
} mop_hermes_track;

typedef struct mop_hermes_history
{
	mop_hermes_track *m;
	int32_t		n;				/* models tracked */
	double		seconds;		/* training seconds of evaluated epochs */
	int64_t		epochs;			/* epochs evaluated: their mean is the horizon */
	double		best_first;		/* best loss of a first evaluation (+inf: none) */
} mop_hermes_history;

void		mop_hermes_history_init(mop_hermes_history *h);
void		mop_hermes_history_free(mop_hermes_history *h);

/* Model `model` trained `seconds` more.  0, or MOP_SEARCH_ENOMEM / EINVAL. */
int			mop_hermes_history_trained(mop_hermes_history *h, int32_t model, double seconds);

/* Evaluations recorded for `model` (0 for a model never seen). */
int32_t		mop_hermes_history_evals(const mop_hermes_history *h, int32_t model);

/* The priority of a configuration not started yet (mop_hermes_fresh_priority). */
double		mop_hermes_history_fresh(const mop_hermes_history *h);

/*
 * Model `model` was evaluated with validation loss `loss` (not finite: it
 * diverged) after its epoch mop_sched_epochs_done(s, model): record it, set
 * the model's priority in s (PROJECTED, the horizon the mean evaluated
 * epoch), and when this is a better first epoch than any before, re-rank
 * the models of s not started yet.  0, or MOP_SEARCH_ENOMEM / EINVAL.
 */
int			mop_hermes_history_evaluated(mop_hermes_history *h, mop_sched *s,
										 int32_t model, double loss);

#endif							/* MOP_HERMES_H */
