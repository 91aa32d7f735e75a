/*
 * driver.c -- Hyperband and ASHA behind the driver interface (mop_driver.h):
 * thin glue over their cores (hyperband.c, asha.c).
 */
#include <stdlib.h>

#include "mop_asha.h"
#include "mop_driver.h"
#include "mop_hyperband.h"

void
mop_driver_free(mop_driver *d)
{
	if (d != NULL)
		d->ops->free(d);
}

/* ---- Hyperband ---- */

typedef struct hb_driver
{
	mop_driver	base;
	mop_hb	   *hb;
} hb_driver;

static mop_poll
hb_next(mop_driver *d, mop_action *a)
{
	return mop_hb_next(((hb_driver *) d)->hb, a);
}

/* (a result the core ignores, or one of an unknown trial, is no error here) */
static int
hb_report(mop_driver *d, int32_t trial, int32_t resource, double score)
{
	(void) mop_hb_report(((hb_driver *) d)->hb, trial, resource, score);
	return MOP_SEARCH_OK;
}

static int
hb_awaits(const mop_driver *d, int32_t trial)
{
	mop_hb_trial_info info;

	return mop_hb_trial(((const hb_driver *) d)->hb, trial, &info) == 0 &&
		info.state == MOP_TRIAL_RUNNING;
}

static void
hb_free(mop_driver *d)
{
	mop_hb_free(((hb_driver *) d)->hb);
	free(d);
}

static const mop_driver_ops hb_ops = {
	.next_action = hb_next,
	.report_result = hb_report,
	.awaits_result = hb_awaits,
	.free = hb_free,
};

mop_driver *
mop_hb_driver_new(int32_t R, int32_t eta)
{
	hb_driver  *d = calloc(1, sizeof(*d));

	if (d == NULL || (d->hb = mop_hb_new(R, eta, 0)) == NULL)
	{
		free(d);
		return NULL;
	}
	d->base.ops = &hb_ops;
	d->base.report_reason = "result at the rung";
	d->base.budget = mop_hyperband_cost(R, eta, 1);
	return &d->base;
}

mop_driver *
mop_hb_driver_new_brackets(int32_t R, int32_t eta, int32_t brackets)
{
	mop_driver *d = mop_hb_driver_new(R, eta);
	int32_t		n;
	mop_hb_round *rows;

	if (d == NULL || brackets == 0)
		return d;
	if (mop_hb_limit_brackets(((hb_driver *) d)->hb, brackets) != MOP_SEARCH_OK ||
		(n = mop_hyperband_plan(R, eta, NULL, 0)) < 0 ||
		(rows = malloc(sizeof(*rows) * (size_t) n)) == NULL)
	{
		mop_driver_free(d);
		return NULL;
	}
	/* the epochs of the brackets run (a promoted model resumes: r_i - r_{i-1} more) */
	mop_hyperband_plan(R, eta, rows, n);
	d->budget = 0;
	for (int32_t i = 0; i < n; i++)
		if (rows[i].bracket > rows[0].bracket - brackets)
			d->budget += (int64_t) rows[i].configs *
				(rows[i].round > 0 ? rows[i].resource - rows[i - 1].resource : rows[i].resource);
	free(rows);
	return d;
}

/* ---- ASHA ---- */

typedef struct asha_driver
{
	mop_driver	base;
	mop_asha   *asha;
} asha_driver;

static mop_poll
asha_next(mop_driver *d, mop_action *a)
{
	return mop_asha_next(((asha_driver *) d)->asha, a);
}

static int
asha_may_start(const mop_driver *d, int32_t active)
{
	return active < 2 * d->n_workers;
}

/* (a result the core ignores, or one of an unknown trial, is no error here) */
static int
asha_report(mop_driver *d, int32_t trial, int32_t resource, double score)
{
	(void) mop_asha_report(((asha_driver *) d)->asha, trial, resource, score);
	return MOP_SEARCH_OK;
}

static int
asha_awaits(const mop_driver *d, int32_t trial)
{
	mop_trial_state st;
	int32_t		rung;
	double		sc;

	return mop_asha_trial(((const asha_driver *) d)->asha, trial, &st, &rung, &sc) == 0 &&
		st == MOP_TRIAL_RUNNING;
}

static void
asha_free(mop_driver *d)
{
	mop_asha_free(((asha_driver *) d)->asha);
	free(d);
}

static const mop_driver_ops asha_ops = {
	.next_action = asha_next,
	.may_start = asha_may_start,
	.report_result = asha_report,
	.awaits_result = asha_awaits,
	.free = asha_free,
};

mop_driver *
mop_asha_driver_new(int32_t r_min, int32_t R, int32_t eta, int32_t max_trials)
{
	asha_driver *d = calloc(1, sizeof(*d));

	if (d == NULL || (d->asha = mop_asha_new(r_min, R, eta, max_trials)) == NULL)
	{
		free(d);
		return NULL;
	}
	d->base.ops = &asha_ops;
	d->base.report_reason = "result at the rung";
	d->base.budget = (int64_t) max_trials * r_min;
	return &d->base;
}
