/*
 * asha.c -- asynchronous successive halving, promotion form.  See mop_asha.h.
 *
 * Each rung keeps the list of results reported at it (trial id and score);
 * a trial has been promoted out of rung k exactly when its current rung is
 * above k, so no flags are needed.  mop_asha_next ranks a rung's results each
 * time it looks for a promotion: O(m log m) for a rung of m results, which is
 * nothing next to training one epoch.  Stops (failed, finished, and the final
 * sweep of paused trials) go through a FIFO that next() drains first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mop_asha.h"

#define ASHA_MAX_RUNGS 34

typedef struct asha_rung
{
	int32_t		resource;
	int32_t    *ids;
	double	   *score;
	int32_t		n,
				cap;
} asha_rung;

typedef struct asha_trial
{
	int32_t		rung;			/* rung it is training towards, or sits at */
	mop_trial_state state;
	double		score;			/* latest result */
} asha_trial;

struct mop_asha
{
	int32_t		eta,
				max_trials,
				n_rungs;
	asha_rung	rung[ASHA_MAX_RUNGS];
	asha_trial *t;
	int32_t		n_trials,
				cap_trials,
				running;
	int			swept;
	mop_actq	q;
	int32_t    *tmp_ids;		/* ranking scratch */
	double	   *tmp_score;
	int32_t		tmp_cap;
};

/* New ASHA. */
mop_asha *
mop_asha_new(int32_t r_min, int32_t R, int32_t eta, int32_t max_trials)
{
	mop_asha   *a;
	int64_t		r = r_min;

	if (r_min < 1 || R < r_min || eta < 2 || max_trials < 0)
		return NULL;
	if (!(a = calloc(1, sizeof(*a))))
		return NULL;
	a->eta = eta;
	a->max_trials = max_trials;
	while (r < R)
	{
		a->rung[a->n_rungs++].resource = (int32_t) r;
		r *= eta;
	}
	a->rung[a->n_rungs++].resource = R;
	return a;
}

void
mop_asha_free(mop_asha *a)
{
	if (!a)
		return;
	for (int32_t k = 0; k < a->n_rungs; k++)
	{
		free(a->rung[k].ids);
		free(a->rung[k].score);
	}
	free(a->t);
	free(a->tmp_ids);
	free(a->tmp_score);
	mop_actq_free(&a->q);
	free(a);
}

int32_t
mop_asha_n_rungs(const mop_asha *a)
{
	return a->n_rungs;
}

int32_t
mop_asha_rung_resource(const mop_asha *a, int32_t k)
{
	return k >= 0 && k < a->n_rungs ? a->rung[k].resource : -1;
}

int32_t
mop_asha_n_trials(const mop_asha *a)
{
	return a->n_trials;
}

/* Rank rung k's results into the scratch arrays; returns its size, or -1. */
static int32_t
rank_rung(mop_asha *a, int32_t k)
{
	asha_rung  *g = &a->rung[k];

	if (g->n == 0)
		return 0;
	if (g->n > a->tmp_cap)
	{
		int32_t    *ni = realloc(a->tmp_ids, sizeof(int32_t) * g->cap);
		double	   *ns;

		if (!ni)
			return -1;
		a->tmp_ids = ni;
		if (!(ns = realloc(a->tmp_score, sizeof(double) * g->cap)))
			return -1;
		a->tmp_score = ns;
		a->tmp_cap = g->cap;
	}
	memcpy(a->tmp_ids, g->ids, sizeof(int32_t) * g->n);
	memcpy(a->tmp_score, g->score, sizeof(double) * g->n);
	mop_rank_sort(a->tmp_ids, a->tmp_score, g->n);
	return g->n;
}

/* Look for a promotion, highest rung first; 1 if *act was filled. */
static int
find_promotion(mop_asha *a, mop_action *act)
{
	for (int32_t k = a->n_rungs - 2; k >= 0; k--)
	{
		int32_t		m = a->rung[k].n,
					keep = m / a->eta;

		if (keep < 1 || rank_rung(a, k) < 0)
			continue;
		for (int32_t j = 0; j < keep; j++)
		{
			int32_t		id = a->tmp_ids[j];
			double		s = a->tmp_score[j];
			asha_trial *t = &a->t[id];
			mop_decision *d = &act->d;

			if (isnan(s))
				break;			/* NaN ranks last: nothing promotable below */
			if (t->rung > k || t->state != MOP_TRIAL_PAUSED)
				continue;
			t->rung = k + 1;
			t->state = MOP_TRIAL_RUNNING;
			a->running++;
			act->kind = MOP_ACT_CONTINUE;
			act->trial = id;
			act->bracket = -1;
			act->resource = a->rung[k + 1].resource;
			mop_decision_init(d, MOP_WHY_PROMOTE, id);
			d->rung = k;
			d->rank = j + 1;
			d->rung_size = m;
			d->keep = keep;
			d->score = s;
			d->cutoff = a->tmp_score[keep - 1];
			d->from_resource = a->rung[k].resource;
			d->to_resource = a->rung[k + 1].resource;
			snprintf(d->reason, sizeof(d->reason),
					 "rank %d of %d at rung %d (score %.6g, top %d = floor(%d/%d), cutoff %.6g): "
					 "promoted from %d to %d",
					 j + 1, m, k, s, keep, m, a->eta, d->cutoff, d->from_resource,
					 d->to_resource);
			return 1;
		}
	}
	return 0;
}

/* Start a new trial; 0 or MOP_SEARCH_ENOMEM. */
static int
new_trial(mop_asha *a, mop_action *act)
{
	asha_trial *t;
	int32_t		id = a->n_trials;

	if (a->n_trials == a->cap_trials)
	{
		int32_t		cap = a->cap_trials ? 2 * a->cap_trials : 64;
		asha_trial *nt = realloc(a->t, sizeof(asha_trial) * cap);

		if (!nt)
			return MOP_SEARCH_ENOMEM;
		a->t = nt;
		a->cap_trials = cap;
	}
	t = &a->t[a->n_trials++];
	t->rung = 0;
	t->state = MOP_TRIAL_RUNNING;
	t->score = NAN;
	a->running++;
	act->kind = MOP_ACT_NEW;
	act->trial = id;
	act->bracket = -1;
	act->resource = a->rung[0].resource;
	mop_decision_init(&act->d, MOP_WHY_START, id);
	act->d.rung = 0;
	act->d.from_resource = 0;
	act->d.to_resource = a->rung[0].resource;
	snprintf(act->d.reason, sizeof(act->d.reason),
			 "no promotable trial: new configuration %d, trained to %d", id + 1,
			 a->rung[0].resource);
	return MOP_SEARCH_OK;
}

/* The search is over: queue a STOP for every paused trial, top rungs first. */
static void
sweep(mop_asha *a)
{
	a->swept = 1;
	for (int32_t k = a->n_rungs - 1; k >= 0; k--)
	{
		int32_t		m = rank_rung(a, k);

		for (int32_t j = 0; j < m; j++)
		{
			int32_t		id = a->tmp_ids[j];
			asha_trial *t = &a->t[id];
			mop_action	act;

			if (t->state != MOP_TRIAL_PAUSED || t->rung != k)
				continue;
			t->state = MOP_TRIAL_STOPPED;
			act.kind = MOP_ACT_STOP;
			act.trial = id;
			act.bracket = -1;
			act.resource = a->rung[k].resource;
			mop_decision_init(&act.d, MOP_WHY_CUT, id);
			act.d.rung = k;
			act.d.rank = j + 1;
			act.d.rung_size = m;
			act.d.keep = m / a->eta;
			act.d.score = a->tmp_score[j];
			act.d.cutoff = act.d.keep > 0 ? a->tmp_score[act.d.keep - 1] : NAN;
			act.d.from_resource = a->rung[k].resource;
			snprintf(act.d.reason, sizeof(act.d.reason),
					 "search over: rank %d of %d at rung %d (score %.6g, top %d), never promoted; "
					 "stopped at %d",
					 j + 1, m, k, act.d.score, act.d.keep, a->rung[k].resource);
			mop_actq_push(&a->q, &act);
		}
	}
}

/* Next action for an idle worker. */
mop_poll
mop_asha_next(mop_asha *a, mop_action *act)
{
	if (mop_actq_pop(&a->q, act))
		return MOP_POLL_ACTION;
	if (find_promotion(a, act))
		return MOP_POLL_ACTION;
	if (a->max_trials == 0 || a->n_trials < a->max_trials)
		return new_trial(a, act) == MOP_SEARCH_OK ? MOP_POLL_ACTION : MOP_POLL_WAIT;
	if (a->running > 0)
		return MOP_POLL_WAIT;
	if (!a->swept)
	{
		sweep(a);
		if (mop_actq_pop(&a->q, act))
			return MOP_POLL_ACTION;
	}
	return MOP_POLL_DONE;
}

/* A result for a trial. */
int
mop_asha_report(mop_asha *a, int32_t trial, int32_t resource, double score)
{
	asha_trial *t;
	asha_rung  *g;
	mop_action	act;
	int			failed = isnan(score),
				top;

	if (trial < 0 || trial >= a->n_trials)
		return MOP_SEARCH_ESTATE;
	t = &a->t[trial];
	if (t->state != MOP_TRIAL_RUNNING)
		return 1;
	g = &a->rung[t->rung];
	if (!failed && resource < g->resource)
		return 1;
	if (g->n == g->cap)
	{
		int32_t		cap = g->cap ? 2 * g->cap : 16;
		int32_t    *ni = realloc(g->ids, sizeof(int32_t) * cap);
		double	   *ns;

		if (!ni)
			return MOP_SEARCH_ENOMEM;
		g->ids = ni;
		if (!(ns = realloc(g->score, sizeof(double) * cap)))
			return MOP_SEARCH_ENOMEM;
		g->score = ns;
		g->cap = cap;
	}
	g->ids[g->n] = trial;
	g->score[g->n++] = score;
	t->score = score;
	a->running--;
	top = (t->rung == a->n_rungs - 1);
	if (!failed && !top)
	{
		t->state = MOP_TRIAL_PAUSED;
		return 0;
	}
	t->state = failed ? MOP_TRIAL_FAILED : MOP_TRIAL_FINISHED;
	act.kind = MOP_ACT_STOP;
	act.trial = trial;
	act.bracket = -1;
	act.resource = g->resource;
	mop_decision_init(&act.d, failed ? MOP_WHY_FAILED : MOP_WHY_FINISHED, trial);
	act.d.rung = t->rung;
	act.d.score = score;
	act.d.from_resource = failed ? resource : g->resource;
	if (failed)
		snprintf(act.d.reason, sizeof(act.d.reason),
				 "score NaN at %d (rung %d): failed, never promoted", resource, t->rung);
	else
		snprintf(act.d.reason, sizeof(act.d.reason),
				 "reached the top rung, %d (score %.6g): finished", g->resource, score);
	return mop_actq_push(&a->q, &act);
}

/* A trial's state. */
int
mop_asha_trial(const mop_asha *a, int32_t trial, mop_trial_state *state, int32_t *rung,
			   double *score)
{
	if (trial < 0 || trial >= a->n_trials)
		return MOP_SEARCH_ESTATE;
	if (state)
		*state = a->t[trial].state;
	if (rung)
		*rung = a->t[trial].rung;
	if (score)
		*score = a->t[trial].score;
	return 0;
}

/* Best trial: highest rung with a result, then rank order; never NaN. */
int
mop_asha_best(const mop_asha *a, int32_t *trial, double *score, int32_t *resource)
{
	for (int32_t k = a->n_rungs - 1; k >= 0; k--)
	{
		const asha_rung *g = &a->rung[k];
		int32_t		best = -1;
		double		bs = NAN;

		for (int32_t j = 0; j < g->n; j++)
			if (!isnan(g->score[j]) &&
				(best < 0 || mop_rank_cmp(g->score[j], g->ids[j], bs, best) < 0))
			{
				best = g->ids[j];
				bs = g->score[j];
			}
		if (best >= 0)
		{
			if (trial)
				*trial = best;
			if (score)
				*score = bs;
			if (resource)
				*resource = g->resource;
			return 0;
		}
	}
	return 1;
}
