/*
 * mop_hermes.h -- convergence-aware priorities (Hermes-style scheduling),
 * pure C, to feed mop_sched_set_priority under MOP_PICK_PRIORITY.
 *
 * Workers should prefer the models whose validation loss is falling fastest
 * per unit of training time.  For a model with validation losses
 * loss[0..n-1] (one per evaluation: after every epoch, or every sub-epoch
 * the caller evaluates) and the cumulative training seconds seconds[0..n-1]
 * at those points:
 *
 *     k        = min(window, n - 1)
 *     priority = (loss[n-1-k] - loss[n-1]) / (seconds[n-1] - seconds[n-1-k])
 *
 * the loss decrease per second over the last k evaluations (with relative,
 * divided by |loss[n-1-k]|: the fraction of the loss removed per second,
 * comparable across models of different loss scales).  A model whose loss
 * rises gets a negative priority; a NaN or infinite latest loss gets
 * -infinity (it diverged: it should be stopped, never preferred).
 *
 * New models get a minimum quantum: until a model has min_evals evaluations
 * (at least 2 are needed for a slope) and min_seconds of training, its
 * priority is new_priority, above every slope, so it is scheduled early and
 * gives feedback quickly.  Because MOP schedules one sub-epoch at a time, a
 * model whose priority drops is preempted at the next sub-epoch boundary.
 */
#ifndef MOP_HERMES_H
#define MOP_HERMES_H

#include <stdint.h>

#include "mop_sched.h"

typedef struct mop_hermes_opts
{
	int32_t		window;			/* evaluations in the slope; default 3 */
	int32_t		min_evals;		/* default 2 */
	double		min_seconds;	/* default 0 */
	double		new_priority;	/* default 1e30 */
	int			relative;		/* default 0 */
} mop_hermes_opts;

void		mop_hermes_default_opts(mop_hermes_opts *o);

/* A model's priority from its history (opts NULL: defaults); see above. */
double		mop_hermes_priority(const double *loss, const double *seconds, int32_t n,
								const mop_hermes_opts *opts);

/* The same, set as `model`'s priority in a MOP scheduler. */
void		mop_hermes_apply(mop_sched *s, int32_t model, const double *loss,
							 const double *seconds, int32_t n, const mop_hermes_opts *opts);

#endif							/* MOP_HERMES_H */
