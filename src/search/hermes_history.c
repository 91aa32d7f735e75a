/*
 * hermes_history.c -- the per-model history behind convergence-aware
 * priorities: what mop_hermes_priority needs, kept as models train and are
 * evaluated.  See mop_hermes.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mop_hermes.h"
#include "mop_search.h"

void
mop_hermes_history_init(mop_hermes_history *h)
{
	memset(h, 0, sizeof(*h));
	h->best_first = INFINITY;
}

void
mop_hermes_history_free(mop_hermes_history *h)
{
	free(h->m);
	mop_hermes_history_init(h);
}

/* The track of `model`, created (zeroed) if new; NULL when out of memory. */
static mop_hermes_track *
track(mop_hermes_history *h, int32_t model)
{
	if (model >= h->n)
	{
		int32_t		n = model + 1 > 2 * h->n ? model + 1 : 2 * h->n;
		mop_hermes_track *m = realloc(h->m, sizeof(*m) * (size_t) n);

		if (m == NULL)
			return NULL;
		memset(m + h->n, 0, sizeof(*m) * (size_t) (n - h->n));
		h->m = m;
		h->n = n;
	}
	return &h->m[model];
}

int
mop_hermes_history_trained(mop_hermes_history *h, int32_t model, double seconds)
{
	mop_hermes_track *t;

	if (model < 0)
		return MOP_SEARCH_EINVAL;
	if ((t = track(h, model)) == NULL)
		return MOP_SEARCH_ENOMEM;
	t->trained += seconds;
	return MOP_SEARCH_OK;
}

int32_t
mop_hermes_history_evals(const mop_hermes_history *h, int32_t model)
{
	return model >= 0 && model < h->n ? h->m[model].n_evals : 0;
}

double
mop_hermes_history_fresh(const mop_hermes_history *h)
{
	return mop_hermes_fresh_priority(h->best_first, NULL);
}

int
mop_hermes_history_evaluated(mop_hermes_history *h, mop_sched *s, int32_t model, double loss)
{
	mop_hermes_track *t;
	mop_hermes_opts o;

	if (model < 0)
		return MOP_SEARCH_EINVAL;
	if ((t = track(h, model)) == NULL)
		return MOP_SEARCH_ENOMEM;
	if (t->n_evals == MOP_HERMES_HISTORY)
	{
		/* the oldest evaluation makes room */
		memmove(t->loss, t->loss + 1, sizeof(double) * (MOP_HERMES_HISTORY - 1));
		memmove(t->seconds, t->seconds + 1, sizeof(double) * (MOP_HERMES_HISTORY - 1));
		t->n_evals--;
	}
	t->loss[t->n_evals] = isfinite(loss) ? loss : NAN;
	t->seconds[t->n_evals] = t->trained;
	t->n_evals++;
	h->seconds += t->trained - t->trained_at_eval;
	h->epochs++;
	t->trained_at_eval = t->trained;
	mop_hermes_default_opts(&o);
	o.horizon = h->seconds / (double) h->epochs;
	mop_hermes_apply(s, model, t->loss, t->seconds, t->n_evals, &o);

	/* a better first epoch: re-rank the models without results */
	if (mop_sched_epochs_done(s, model) == 1 && isfinite(loss) && loss < h->best_first)
	{
		int32_t		n = mop_sched_n_models(s);

		h->best_first = loss;
		for (int32_t i = 0; i < n; i++)
			if (mop_hermes_history_evals(h, i) == 0 && !mop_sched_started(s, i))
				mop_sched_set_priority(s, i, mop_hermes_history_fresh(h));
	}
	return MOP_SEARCH_OK;
}
