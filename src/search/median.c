/*
 * median.c -- the median stopping rule.  See mop_median.h.
 *
 * Per trial: prefix sums of its scores (so any running average is O(1)), its
 * best score, and whether it is active, stopped or completed.  Trial ids are
 * the caller's, used as indices into a growing array; ids never seen have no
 * steps and are never references.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mop_median.h"

#define MT_ACTIVE		0
#define MT_STOPPED		1
#define MT_COMPLETED	2

typedef struct med_trial
{
	double	   *prefix;			/* prefix[s] = sum of scores of steps 1..s */
	int32_t		n,
				cap;
	double		best;
	int			has_nan;
	int			state;
} med_trial;

struct mop_median
{
	int32_t		grace,
				min_trials;
	int			only_completed;
	mop_median_mode mode;
	med_trial  *t;
	int32_t		n_t;
	double	   *tmp;
	int32_t		tmp_cap;
};

/* New rule. */
mop_median *
mop_median_new(int32_t grace_steps, int32_t min_trials, int only_completed,
			   mop_median_mode mode)
{
	mop_median *m;

	if (grace_steps < 0 || min_trials < 1 || (mode != MOP_MEDIAN_BEST && mode != MOP_MEDIAN_MEAN))
		return NULL;
	if (!(m = calloc(1, sizeof(*m))))
		return NULL;
	m->grace = grace_steps;
	m->min_trials = min_trials;
	m->only_completed = only_completed;
	m->mode = mode;
	return m;
}

void
mop_median_free(mop_median *m)
{
	if (!m)
		return;
	for (int32_t i = 0; i < m->n_t; i++)
		free(m->t[i].prefix);
	free(m->t);
	free(m->tmp);
	free(m);
}

/* The slot of trial id, growing the array; NULL on bad id or no memory. */
static med_trial *
slot(mop_median *m, int32_t id)
{
	if (id < 0)
		return NULL;
	if (id >= m->n_t)
	{
		int32_t		n = id + 1 > 2 * m->n_t ? id + 1 : 2 * m->n_t;
		med_trial  *t = realloc(m->t, sizeof(med_trial) * n);

		if (!t)
			return NULL;
		memset(t + m->n_t, 0, sizeof(med_trial) * (n - m->n_t));
		m->t = t;
		m->n_t = n;
	}
	return &m->t[id];
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/* Median of the references' running averages at step; NaN if too few. */
double
mop_median_value(const mop_median *cm, int32_t step, int32_t except, int32_t *n_refs)
{
	mop_median *m = (mop_median *) cm;	/* scratch only */
	int32_t		k = 0;

	if (n_refs)
		*n_refs = 0;
	if (step < 1)
		return NAN;
	if (m->tmp_cap < m->n_t)
	{
		double	   *t = realloc(m->tmp, sizeof(double) * m->n_t);

		if (!t)
			return NAN;
		m->tmp = t;
		m->tmp_cap = m->n_t;
	}
	for (int32_t j = 0; j < m->n_t; j++)
	{
		med_trial  *r = &m->t[j];
		int32_t		upto;

		if (j == except || r->has_nan || r->n < 1)
			continue;
		if (!(r->state == MT_COMPLETED || (!m->only_completed && r->n >= step)))
			continue;
		upto = r->n < step ? r->n : step;
		m->tmp[k++] = r->prefix[upto] / upto;
	}
	if (n_refs)
		*n_refs = k;
	if (k < m->min_trials || k == 0)
		return NAN;
	qsort(m->tmp, k, sizeof(double), cmp_double);
	return k % 2 ? m->tmp[k / 2] : 0.5 * (m->tmp[k / 2 - 1] + m->tmp[k / 2]);
}

/* A trial's score at its next step; 1: stop it, 0: continue. */
int
mop_median_report(mop_median *m, int32_t trial, int32_t step, double score,
				  mop_decision *why)
{
	med_trial  *t = slot(m, trial);
	double		val,
				med;
	int32_t		refs;
	mop_decision d;

	if (!t)
		return trial < 0 ? MOP_SEARCH_EINVAL : MOP_SEARCH_ENOMEM;
	if (t->state != MT_ACTIVE)
		return MOP_SEARCH_ESTATE;
	if (step != t->n + 1)
		return MOP_SEARCH_EINVAL;
	mop_decision_init(&d, MOP_WHY_MEDIAN, trial);
	d.from_resource = step;
	if (isnan(score))
	{
		t->has_nan = 1;
		t->state = MT_STOPPED;
		if (why)
		{
			d.why = MOP_WHY_FAILED;
			snprintf(d.reason, sizeof(d.reason), "score NaN at step %d: failed", step);
			*why = d;
		}
		return 1;
	}
	if (t->n + 1 >= t->cap)
	{
		int32_t		cap = t->cap ? 2 * t->cap : 16;
		double	   *p = realloc(t->prefix, sizeof(double) * cap);

		if (!p)
			return MOP_SEARCH_ENOMEM;
		if (!t->cap)
			p[0] = 0.0;
		t->prefix = p;
		t->cap = cap;
	}
	t->prefix[step] = t->prefix[step - 1] + score;
	t->n = step;
	if (step == 1 || score > t->best)
		t->best = score;
	if (step < m->grace)
		return 0;
	val = m->mode == MOP_MEDIAN_BEST ? t->best : t->prefix[step] / step;
	med = mop_median_value(m, step, trial, &refs);
	if (isnan(med) || !(val < med))
		return 0;
	t->state = MT_STOPPED;
	if (why)
	{
		d.score = val;
		d.cutoff = med;
		d.rung_size = refs;
		snprintf(d.reason, sizeof(d.reason),
				 "step %d: %s %.6g below the median %.6g of %d trials' running averages",
				 step, m->mode == MOP_MEDIAN_BEST ? "best score" : "running average", val,
				 med, refs);
		*why = d;
	}
	return 1;
}

/* The trial trained its whole budget. */
int
mop_median_complete(mop_median *m, int32_t trial)
{
	med_trial  *t = slot(m, trial);

	if (!t)
		return trial < 0 ? MOP_SEARCH_EINVAL : MOP_SEARCH_ENOMEM;
	if (t->state != MT_ACTIVE)
		return MOP_SEARCH_ESTATE;
	t->state = MT_COMPLETED;
	return 0;
}
