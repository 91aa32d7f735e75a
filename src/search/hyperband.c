/*
 * hyperband.c -- the Hyperband plan and its successive-halving driver.  See
 * mop_hyperband.h for the formulas and the resource unit.
 *
 * Everything in the plan is integer arithmetic: eta^s never exceeds R (an
 * int32), so every product below fits an int64, and n is computed as an
 * exact integer ceiling.  The driver keeps, per bracket, its rows of the plan
 * and the trials of its current round; per trial, its bracket, round, target
 * and latest result.  A round is decided when all of its trials have reported
 * (and, for round 0, all n_0 have been started): the decisions go into a FIFO
 * of actions, handed out in rank order by mop_hb_next before anything else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mop_hyperband.h"

#define HB_MAX_ROUNDS 32		/* s_max <= 30 for R < 2^31 */

typedef struct hb_bracket
{
	int32_t		s;
	int32_t		n[HB_MAX_ROUNDS];	/* configs per round */
	int32_t		r[HB_MAX_ROUNDS];	/* resource per round */
	int32_t		round;			/* current round */
	int32_t		started;		/* trials begun in round 0 */
	int32_t    *members;		/* trial ids of the current round */
	int32_t		n_members,
				cap;
	int32_t		reported;		/* members with a result this round */
	int			begun,
				done;
} hb_bracket;

typedef struct hb_trial
{
	int32_t		bracket;		/* index into hb->b */
	int32_t		round;
	int32_t		target;
	int32_t		resource;
	mop_trial_state state;
	double		score;
} hb_trial;

struct mop_hb
{
	int32_t		R,
				eta,
				s_max,
				max_brackets;
	int32_t		n_brackets;		/* s_max + 1; b[k] is bracket s = s_max - k */
	hb_bracket *b;
	hb_trial   *t;
	int32_t		n_trials,
				cap_trials;
	mop_actq	q;
};

/* s_max: the largest s with eta^s <= R. */
int32_t
mop_hyperband_smax(int32_t R, int32_t eta)
{
	int64_t		p = 1;
	int32_t		s = 0;

	if (R < 1 || eta < 2)
		return MOP_SEARCH_EINVAL;
	while (p <= R / eta)		/* p * eta <= R, without overflow */
	{
		p *= eta;
		s++;
	}
	return s;
}

/* eta^k, k small enough that it is <= R. */
static int64_t
ipow(int32_t eta, int32_t k)
{
	int64_t		p = 1;

	while (k-- > 0)
		p *= eta;
	return p;
}

/* Rows of bracket s: n_i and r_i for i = 0..s. */
static void
bracket_rows(int32_t R, int32_t eta, int32_t s_max, int32_t s, int32_t *n, int32_t *r)
{
	int64_t		es = ipow(eta, s);
	int64_t		n0 = ((int64_t) (s_max + 1) * es + s) / (s + 1);	/* ceil */

	for (int32_t i = 0; i <= s; i++)
	{
		int64_t		ei = ipow(eta, i);
		int64_t		rr = R / ipow(eta, s - i);

		n[i] = (int32_t) (n0 / ei);
		r[i] = (int32_t) (rr < 1 ? 1 : rr);
	}
}

/* The plan rows; returns the total number of rows. */
int32_t
mop_hyperband_plan(int32_t R, int32_t eta, mop_hb_round *out, int32_t cap)
{
	int32_t		s_max = mop_hyperband_smax(R, eta),
				k = 0;

	if (s_max < 0)
		return s_max;
	if (cap < 0 || (cap > 0 && !out))
		return MOP_SEARCH_EINVAL;
	for (int32_t s = s_max; s >= 0; s--)
	{
		int32_t		n[HB_MAX_ROUNDS],
					r[HB_MAX_ROUNDS];

		bracket_rows(R, eta, s_max, s, n, r);
		for (int32_t i = 0; i <= s; i++, k++)
			if (k < cap)
			{
				out[k].bracket = s;
				out[k].round = i;
				out[k].configs = n[i];
				out[k].resource = r[i];
			}
	}
	return k;
}

/* Total epochs of the plan, with or without resuming promoted models. */
int64_t
mop_hyperband_cost(int32_t R, int32_t eta, int resume)
{
	int32_t		s_max = mop_hyperband_smax(R, eta);
	int64_t		total = 0;

	if (s_max < 0)
		return s_max;
	for (int32_t s = s_max; s >= 0; s--)
	{
		int32_t		n[HB_MAX_ROUNDS],
					r[HB_MAX_ROUNDS];

		bracket_rows(R, eta, s_max, s, n, r);
		for (int32_t i = 0; i <= s; i++)
			total += (int64_t) n[i] * (resume && i > 0 ? r[i] - r[i - 1] : r[i]);
	}
	return total;
}

/* New driver. */
mop_hb *
mop_hb_new(int32_t R, int32_t eta, int32_t max_brackets)
{
	mop_hb	   *hb;
	int32_t		s_max = mop_hyperband_smax(R, eta);

	if (s_max < 0 || max_brackets < 0)
		return NULL;
	if (!(hb = calloc(1, sizeof(*hb))))
		return NULL;
	hb->R = R;
	hb->eta = eta;
	hb->s_max = s_max;
	hb->max_brackets = max_brackets;
	hb->n_brackets = s_max + 1;
	if (!(hb->b = calloc(hb->n_brackets, sizeof(hb_bracket))))
	{
		free(hb);
		return NULL;
	}
	for (int32_t k = 0; k < hb->n_brackets; k++)
	{
		hb->b[k].s = s_max - k;
		bracket_rows(R, eta, s_max, s_max - k, hb->b[k].n, hb->b[k].r);
	}
	return hb;
}

/* See mop_hyperband.h. */
int
mop_hb_limit_brackets(mop_hb *hb, int32_t n)
{
	if (hb == NULL || n < 1 || n > hb->s_max + 1)
		return MOP_SEARCH_EINVAL;
	for (int32_t k = 0; k < hb->n_brackets; k++)
		if (hb->b[k].begun)
			return MOP_SEARCH_ESTATE;
	/* the brackets left out were never begun: nothing of theirs to free */
	hb->n_brackets = n;
	return MOP_SEARCH_OK;
}

void
mop_hb_free(mop_hb *hb)
{
	if (!hb)
		return;
	for (int32_t k = 0; k < hb->n_brackets; k++)
		free(hb->b[k].members);
	free(hb->b);
	free(hb->t);
	mop_actq_free(&hb->q);
	free(hb);
}

/* Append a trial id to a bracket's current round. */
static int
add_member(hb_bracket *b, int32_t id)
{
	if (b->n_members == b->cap)
	{
		int32_t		cap = b->cap ? 2 * b->cap : 16;
		int32_t    *m = realloc(b->members, sizeof(int32_t) * cap);

		if (!m)
			return MOP_SEARCH_ENOMEM;
		b->members = m;
		b->cap = cap;
	}
	b->members[b->n_members++] = id;
	return MOP_SEARCH_OK;
}

/* Begin a new trial in round 0 of bracket k; fills *a. */
static int
start_trial(mop_hb *hb, int32_t k, mop_action *a)
{
	hb_bracket *b = &hb->b[k];
	hb_trial   *t;
	int32_t		id = hb->n_trials;

	if (hb->n_trials == hb->cap_trials)
	{
		int32_t		cap = hb->cap_trials ? 2 * hb->cap_trials : 64;
		hb_trial   *nt = realloc(hb->t, sizeof(hb_trial) * cap);

		if (!nt)
			return MOP_SEARCH_ENOMEM;
		hb->t = nt;
		hb->cap_trials = cap;
	}
	if (add_member(b, id) < 0)
		return MOP_SEARCH_ENOMEM;
	t = &hb->t[hb->n_trials++];
	t->bracket = k;
	t->round = 0;
	t->target = b->r[0];
	t->resource = 0;
	t->state = MOP_TRIAL_RUNNING;
	t->score = NAN;
	b->started++;
	b->begun = 1;

	a->kind = MOP_ACT_NEW;
	a->trial = id;
	a->bracket = b->s;
	a->resource = b->r[0];
	mop_decision_init(&a->d, MOP_WHY_START, id);
	a->d.bracket = b->s;
	a->d.rung = 0;
	a->d.rung_size = b->n[0];
	a->d.from_resource = 0;
	a->d.to_resource = b->r[0];
	snprintf(a->d.reason, sizeof(a->d.reason),
			 "new configuration %d of %d in bracket %d, trained to %d",
			 b->started, b->n[0], b->s, b->r[0]);
	return MOP_SEARCH_OK;
}

/* Decide a finished round of bracket k: queue promotions and stops. */
static int
decide_round(mop_hb *hb, int32_t k)
{
	hb_bracket *b = &hb->b[k];
	int32_t		n = b->n_members,
				i = b->round,
				last = (i == b->s),
				finite = 0,
				keep;
	int32_t    *ids = malloc(sizeof(int32_t) * (n ? n : 1));
	double	   *sc = malloc(sizeof(double) * (n ? n : 1));
	double		cutoff = NAN;
	int			rc = MOP_SEARCH_OK;

	if (!ids || !sc)
	{
		free(ids);
		free(sc);
		return MOP_SEARCH_ENOMEM;
	}
	for (int32_t j = 0; j < n; j++)
	{
		ids[j] = b->members[j];
		sc[j] = hb->t[ids[j]].score;
		finite += !isnan(sc[j]);
	}
	mop_rank_sort(ids, sc, n);
	keep = last ? 0 : (b->n[i + 1] < finite ? b->n[i + 1] : finite);
	if (keep > 0)
		cutoff = sc[keep - 1];

	b->n_members = 0;
	b->reported = 0;
	for (int32_t j = 0; j < n && rc == MOP_SEARCH_OK; j++)
	{
		hb_trial   *t = &hb->t[ids[j]];
		mop_action	a;
		mop_decision *d = &a.d;
		int			failed = isnan(sc[j]);

		a.trial = ids[j];
		a.bracket = b->s;
		mop_decision_init(d, MOP_WHY_CUT, ids[j]);
		d->bracket = b->s;
		d->rung = i;
		d->rank = j + 1;
		d->rung_size = n;
		d->keep = keep;
		d->score = sc[j];
		d->cutoff = cutoff;
		d->from_resource = b->r[i];
		if (j < keep)
		{
			a.kind = MOP_ACT_CONTINUE;
			a.resource = b->r[i + 1];
			d->why = MOP_WHY_PROMOTE;
			d->to_resource = b->r[i + 1];
			t->round = i + 1;
			t->target = b->r[i + 1];
			t->state = MOP_TRIAL_RUNNING;
			snprintf(d->reason, sizeof(d->reason),
					 "rank %d of %d in bracket %d round %d (score %.6g, top %d kept, cutoff %.6g): "
					 "promoted from %d to %d",
					 j + 1, n, b->s, i, sc[j], keep, cutoff, b->r[i], b->r[i + 1]);
			rc = add_member(b, ids[j]);
		}
		else
		{
			a.kind = MOP_ACT_STOP;
			a.resource = b->r[i];
			if (failed)
			{
				d->why = MOP_WHY_FAILED;
				t->state = MOP_TRIAL_FAILED;
				snprintf(d->reason, sizeof(d->reason),
						 "score NaN in bracket %d round %d: failed, never promoted",
						 b->s, i);
			}
			else if (last)
			{
				d->why = MOP_WHY_FINISHED;
				t->state = MOP_TRIAL_FINISHED;
				snprintf(d->reason, sizeof(d->reason),
						 "rank %d of %d in bracket %d, last round (score %.6g): finished at %d",
						 j + 1, n, b->s, sc[j], b->r[i]);
			}
			else
			{
				t->state = MOP_TRIAL_STOPPED;
				snprintf(d->reason, sizeof(d->reason),
						 "rank %d of %d in bracket %d round %d (score %.6g, top %d kept, cutoff %.6g): "
						 "stopped at %d",
						 j + 1, n, b->s, i, sc[j], keep, cutoff, b->r[i]);
			}
		}
		if (rc == MOP_SEARCH_OK)
			rc = mop_actq_push(&hb->q, &a);
	}
	free(ids);
	free(sc);
	if (keep == 0)
		b->done = 1;
	else
		b->round = i + 1;
	return rc;
}

/* Next action for an idle worker. */
mop_poll
mop_hb_next(mop_hb *hb, mop_action *a)
{
	int32_t		active = 0;

	if (mop_actq_pop(&hb->q, a))
		return MOP_POLL_ACTION;
	/* a begun bracket that still has configurations to start */
	for (int32_t k = 0; k < hb->n_brackets; k++)
	{
		hb_bracket *b = &hb->b[k];

		if (!b->begun || b->done)
			continue;
		active++;
		if (b->round == 0 && b->started < b->n[0])
			return start_trial(hb, k, a) == MOP_SEARCH_OK ? MOP_POLL_ACTION : MOP_POLL_WAIT;
	}
	/* else begin the next bracket, if allowed */
	if (hb->max_brackets == 0 || active < hb->max_brackets)
		for (int32_t k = 0; k < hb->n_brackets; k++)
			if (!hb->b[k].begun)
				return start_trial(hb, k, a) == MOP_SEARCH_OK ? MOP_POLL_ACTION : MOP_POLL_WAIT;
	for (int32_t k = 0; k < hb->n_brackets; k++)
		if (!hb->b[k].begun || !hb->b[k].done)
			return MOP_POLL_WAIT;
	return MOP_POLL_DONE;
}

/* A result for a trial. */
int
mop_hb_report(mop_hb *hb, int32_t trial, int32_t resource, double score)
{
	hb_trial   *t;
	hb_bracket *b;

	if (trial < 0 || trial >= hb->n_trials)
		return MOP_SEARCH_ESTATE;
	t = &hb->t[trial];
	if (t->state != MOP_TRIAL_RUNNING)
		return 1;
	if (!isnan(score) && resource < t->target)
		return 1;
	b = &hb->b[t->bracket];
	t->score = score;
	t->resource = resource;
	t->state = MOP_TRIAL_PAUSED;
	b->reported++;
	if (b->reported == b->n_members && (b->round > 0 || b->started == b->n[0]))
	{
		int			rc = decide_round(hb, t->bracket);

		if (rc < 0)
			return rc;
	}
	return 0;
}

int32_t
mop_hb_n_trials(const mop_hb *hb)
{
	return hb->n_trials;
}

/* A trial's state; 0, or MOP_SEARCH_ESTATE for an unknown trial. */
int
mop_hb_trial(const mop_hb *hb, int32_t trial, mop_hb_trial_info *info)
{
	const hb_trial *t;

	if (trial < 0 || trial >= hb->n_trials)
		return MOP_SEARCH_ESTATE;
	t = &hb->t[trial];
	info->bracket = hb->b[t->bracket].s;
	info->round = t->round;
	info->target = t->target;
	info->resource = t->resource;
	info->state = t->state;
	info->score = t->score;
	return 0;
}

/* Best trial: largest resource reached, then rank order; never NaN. */
int
mop_hb_best(const mop_hb *hb, int32_t *trial, double *score, int32_t *resource)
{
	int32_t		best = -1;

	for (int32_t i = 0; i < hb->n_trials; i++)
	{
		const hb_trial *t = &hb->t[i];

		if (isnan(t->score) || t->resource == 0)
			continue;
		if (best < 0 || t->resource > hb->t[best].resource ||
			(t->resource == hb->t[best].resource &&
			 mop_rank_cmp(t->score, i, hb->t[best].score, best) < 0))
			best = i;
	}
	if (best < 0)
		return 1;
	if (trial)
		*trial = best;
	if (score)
		*score = hb->t[best].score;
	if (resource)
		*resource = hb->t[best].resource;
	return 0;
}
