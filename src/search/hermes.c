/*
 * hermes.c -- convergence-aware priorities.  See mop_hermes.h.
 *
 * A pure function of a model's recent history: no state, no randomness.
 * The window slope is a two-point difference rather than a least-squares
 * fit on purpose: it is what "loss decrease per second over the last k
 * epochs" means, it is exact on scripted histories, and noise is already
 * damped by the window.
 */
#include <math.h>

#include "mop_hermes.h"

void
mop_hermes_default_opts(mop_hermes_opts *o)
{
	o->window = 3;
	o->min_evals = 2;
	o->min_seconds = 0.0;
	o->new_priority = 1e30;
	o->relative = 0;
}

/* Loss decrease per second over the last window evaluations. */
double
mop_hermes_priority(const double *loss, const double *seconds, int32_t n,
					const mop_hermes_opts *opts)
{
	mop_hermes_opts o;
	int32_t		k,
				min_evals;
	double		dl,
				dt;

	if (opts)
		o = *opts;
	else
		mop_hermes_default_opts(&o);
	min_evals = o.min_evals < 2 ? 2 : o.min_evals;
	if (n >= 1 && !isfinite(loss[n - 1]))
		return -INFINITY;
	if (n < min_evals || seconds[n - 1] < o.min_seconds)
		return o.new_priority;
	k = o.window < 1 ? 1 : o.window;
	if (k > n - 1)
		k = n - 1;
	dl = loss[n - 1 - k] - loss[n - 1];
	dt = seconds[n - 1] - seconds[n - 1 - k];
	if (!isfinite(dl))
		return -INFINITY;
	if (!(dt > 0))
		return 0.0;
	if (o.relative)
	{
		double		base = fabs(loss[n - 1 - k]);

		dl = base > 0 ? dl / base : 0.0;
	}
	return dl / dt;
}

/* Compute and set a model's priority in the scheduler. */
void
mop_hermes_apply(mop_sched *s, int32_t model, const double *loss, const double *seconds,
				 int32_t n, const mop_hermes_opts *opts)
{
	mop_sched_set_priority(s, model, mop_hermes_priority(loss, seconds, n, opts));
}
