/*
 * params.c -- validation, conditions and prior sampling for mop_param search
 * spaces (mop_params.h).
 *
 * Integers are sampled uniformly over the integers of [lo, hi] (LOGINT:
 * log-uniformly over [lo - 0.5, hi + 0.5], then rounded, so every integer
 * has the mass of its log-width); choices uniformly over their indices.
 * Sampling walks the parameters in order, so a condition is always decided
 * by the time the parameter it guards is reached (conditions may only refer
 * to earlier parameters; mop_params_check enforces it).
 */
#include <stdio.h>
#include <string.h>

#include "mop_params.h"

/* Validate a space. */
int
mop_params_check(const mop_param *p, int32_t n, char *err, size_t errlen)
{
	char		dummy[8];

	if (!err || errlen == 0)
	{
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = 0;
	if (n < 1 || n > MOP_PARAMS_MAX || !p)
	{
		snprintf(err, errlen, "a search space needs 1 to %d parameters, not %d",
				 MOP_PARAMS_MAX, n);
		return MOP_SEARCH_EINVAL;
	}
	for (int32_t i = 0; i < n; i++)
	{
		const mop_param *q = &p[i];
		const char *name = q->name ? q->name : "?";

		if (!q->name || !q->name[0])
		{
			snprintf(err, errlen, "parameter %d has no name", i);
			return MOP_SEARCH_EINVAL;
		}
		for (int32_t j = 0; j < i; j++)
			if (strcmp(p[j].name, q->name) == 0)
			{
				snprintf(err, errlen, "parameter \"%s\" appears twice", name);
				return MOP_SEARCH_EINVAL;
			}
		switch (q->kind)
		{
			case MOP_PARAM_FLOAT:
			case MOP_PARAM_LOGFLOAT:
			case MOP_PARAM_INT:
			case MOP_PARAM_LOGINT:
				if (!isfinite(q->lo) || !isfinite(q->hi) || q->lo > q->hi ||
					((q->kind == MOP_PARAM_FLOAT || q->kind == MOP_PARAM_LOGFLOAT) &&
					 q->lo == q->hi))
				{
					snprintf(err, errlen, "parameter \"%s\": bounds [%g, %g] are not a range",
							 name, q->lo, q->hi);
					return MOP_SEARCH_EINVAL;
				}
				if ((q->kind == MOP_PARAM_LOGFLOAT || q->kind == MOP_PARAM_LOGINT) && q->lo <= 0)
				{
					snprintf(err, errlen, "parameter \"%s\": a log scale needs a lower bound > 0, not %g",
							 name, q->lo);
					return MOP_SEARCH_EINVAL;
				}
				if ((q->kind == MOP_PARAM_INT || q->kind == MOP_PARAM_LOGINT) &&
					(q->lo != floor(q->lo) || q->hi != floor(q->hi) ||
					 fabs(q->lo) > 1e15 || fabs(q->hi) > 1e15))
				{
					snprintf(err, errlen, "parameter \"%s\": integer bounds [%g, %g] are not integers",
							 name, q->lo, q->hi);
					return MOP_SEARCH_EINVAL;
				}
				break;
			case MOP_PARAM_CHOICE:
				if (q->n_choices < 1)
				{
					snprintf(err, errlen, "parameter \"%s\": a choice needs at least one value", name);
					return MOP_SEARCH_EINVAL;
				}
				break;
			default:
				snprintf(err, errlen, "parameter \"%s\": unknown kind %d", name, (int) q->kind);
				return MOP_SEARCH_EINVAL;
		}
		if (q->cond_param >= 0)
		{
			if (q->cond_param >= i || p[q->cond_param].kind != MOP_PARAM_CHOICE)
			{
				snprintf(err, errlen,
						 "parameter \"%s\": its condition must name an earlier choice parameter", name);
				return MOP_SEARCH_EINVAL;
			}
			if (q->cond_mask == 0)
			{
				snprintf(err, errlen, "parameter \"%s\": its condition selects no choice of \"%s\"",
						 name, p[q->cond_param].name);
				return MOP_SEARCH_EINVAL;
			}
		}
		else if (q->cond_param != -1)
		{
			snprintf(err, errlen, "parameter \"%s\": bad condition index %d", name, q->cond_param);
			return MOP_SEARCH_EINVAL;
		}
	}
	return MOP_SEARCH_OK;
}

/* Is parameter i active in x? */
int
mop_param_active(const mop_param *p, const double *x, int32_t i)
{
	int32_t		c = p[i].cond_param;
	double		v;

	if (c < 0)
		return 1;
	if (!mop_param_active(p, x, c))
		return 0;
	v = x[c];
	if (isnan(v) || v < 0 || v >= 64)
		return 0;
	return (int) ((p[i].cond_mask >> (int) v) & 1);
}

/* Round and clip a value into the parameter's domain. */
double
mop_param_clip(const mop_param *p, double v)
{
	double		lo = p->lo,
				hi = p->hi;

	if (isnan(v))
		return v;
	if (p->kind == MOP_PARAM_CHOICE)
	{
		lo = 0;
		hi = p->n_choices - 1;
	}
	if (p->kind != MOP_PARAM_FLOAT && p->kind != MOP_PARAM_LOGFLOAT)
		v = floor(v + 0.5);
	return v < lo ? lo : (v > hi ? hi : v);
}

/* One value from the parameter's prior. */
double
mop_param_sample(const mop_param *p, mop_rng *r)
{
	double		u = mop_rng_uniform(r);

	switch (p->kind)
	{
		case MOP_PARAM_FLOAT:
			return mop_param_clip(p, p->lo + u * (p->hi - p->lo));
		case MOP_PARAM_LOGFLOAT:
			return mop_param_clip(p, exp(log(p->lo) + u * (log(p->hi) - log(p->lo))));
		case MOP_PARAM_INT:
			return p->lo + (double) mop_rng_below(r, (uint64_t) (p->hi - p->lo) + 1);
		case MOP_PARAM_LOGINT:
			{
				double		a = log(p->lo - 0.5 > 0 ? p->lo - 0.5 : p->lo * 0.5),
							b = log(p->hi + 0.5);

				return mop_param_clip(p, exp(a + u * (b - a)));
			}
		case MOP_PARAM_CHOICE:
			return (double) mop_rng_below(r, (uint64_t) p->n_choices);
	}
	return NAN;
}

/* A configuration from the prior. */
void
mop_params_sample(const mop_param *p, int32_t n, mop_rng *r, double *x)
{
	for (int32_t i = 0; i < n; i++)
		x[i] = mop_param_active(p, x, i) ? mop_param_sample(&p[i], r) : NAN;
}
