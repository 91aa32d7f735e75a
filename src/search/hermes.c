/*
 * hermes.c -- convergence-aware priorities.  See mop_hermes.h.
 *
 * A pure function of a model's recent history: no state, no randomness.
 * The window rate is a two-point difference rather than a least-squares
 * fit on purpose: it is what "loss decrease per second over the last k
 * epochs" means, it is exact on scripted histories, and noise is already
 * damped by the window.
 */
#include <math.h>

#include "mop_hermes.h"

void
mop_hermes_default_opts(mop_hermes_opts *o)
{
	o->rule = MOP_HERMES_PROJECTED;
	o->window = 3;
	o->min_evals = 1;
	o->min_seconds = 0.0;
	o->new_priority = MOP_HERMES_NEW_PRIORITY;
	o->horizon = 0.0;
	o->relative = 0;
}

/* Loss decrease per second over the last window evaluations. */
double
mop_hermes_rate(const double *loss, const double *seconds, int32_t n,
				int32_t window, int relative)
{
	int32_t		k = window < 1 ? 1 : window;
	double		dl,
				dt;

	if (n < 2)
		return 0.0;
	if (k > n - 1)
		k = n - 1;
	dl = loss[n - 1 - k] - loss[n - 1];
	dt = seconds[n - 1] - seconds[n - 1 - k];
	if (!isfinite(dl))
		return NAN;
	if (!(dt > 0))
		return 0.0;
	if (relative)
	{
		double		base = fabs(loss[n - 1 - k]);

		dl = base > 0 ? dl / base : 0.0;
	}
	return dl / dt;
}

/* A model's priority: its rate, or minus its projected loss. */
double
mop_hermes_priority(const double *loss, const double *seconds, int32_t n,
					const mop_hermes_opts *opts)
{
	mop_hermes_opts o;
	int32_t		min_evals;
	double		rate;

	if (opts)
		o = *opts;
	else
		mop_hermes_default_opts(&o);
	min_evals = o.min_evals < 1 ? 1 : o.min_evals;
	if (o.rule == MOP_HERMES_RATE && min_evals < 2)
		min_evals = 2;			/* a rate needs two points */
	if (n >= 1 && !isfinite(loss[n - 1]))
		return -INFINITY;
	if (n < min_evals || seconds[n - 1] < o.min_seconds)
		return o.new_priority;
	rate = mop_hermes_rate(loss, seconds, n, o.window,
						   o.rule == MOP_HERMES_RATE && o.relative);
	if (isnan(rate))
		return -INFINITY;
	if (o.rule == MOP_HERMES_RATE)
		return rate;
	return -(loss[n - 1] - rate * (o.horizon > 0 ? o.horizon : 0.0));
}

/* Priority of a configuration not started yet; see mop_hermes.h. */
double
mop_hermes_fresh_priority(double best_first_loss, const mop_hermes_opts *opts)
{
	if (isfinite(best_first_loss))
		return -best_first_loss;
	return opts ? opts->new_priority : MOP_HERMES_NEW_PRIORITY;
}

/* Compute and set a model's priority in the scheduler. */
void
mop_hermes_apply(mop_sched *s, int32_t model, const double *loss, const double *seconds,
				 int32_t n, const mop_hermes_opts *opts)
{
	mop_sched_set_priority(s, model, mop_hermes_priority(loss, seconds, n, opts));
}
