/*
 * pbt.c -- population based training decisions.  See mop_pbt.h.
 *
 * State: each member's current hyperparameters, initial hyperparameters,
 * latest score and age; the history of every exploit.  Ranking reuses the
 * shared total order (mop_rank_sort), and every random draw comes from the
 * population's splitmix64 stream in a fixed order (members in rank order,
 * parameters in index order), so decisions depend only on the seed and on
 * the sequence of calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mop_pbt.h"

struct mop_pbt
{
	mop_param	space[MOP_PBT_MAX_PARAMS];
	int32_t		np,
				n;
	mop_pbt_opts o;
	mop_rng		rng;
	double	   *values;			/* [n][np] */
	double	   *init;			/* [n][np] */
	double	   *score;			/* [n] */
	uint8_t    *has_score;		/* [n] */
	int32_t    *age;			/* [n] */
	mop_pbt_decision *hist;
	int32_t		n_hist,
				cap_hist;
	int32_t    *ids;			/* ranking scratch [n] */
	double	   *sc;
};

/* New population. */
mop_pbt *
mop_pbt_new(const mop_param *space, int32_t n_params, int32_t n_members,
			const mop_pbt_opts *opts, uint64_t seed)
{
	mop_pbt    *p;

	if (n_params < 1 || n_params > MOP_PBT_MAX_PARAMS || n_members < 2 ||
		mop_params_check(space, n_params, NULL, 0) != 0)
		return NULL;
	if (opts && (!(opts->quantile > 0 && opts->quantile <= 0.5) ||
				 !(opts->resample_p >= 0 && opts->resample_p <= 1) ||
				 !(opts->down > 0) || !(opts->up > 0)))
		return NULL;
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	memcpy(p->space, space, sizeof(mop_param) * n_params);
	p->np = n_params;
	p->n = n_members;
	if (opts)
		p->o = *opts;
	else
	{
		p->o.quantile = 0.25;
		p->o.resample_p = 0.25;
		p->o.down = 0.8;
		p->o.up = 1.2;
	}
	mop_rng_seed(&p->rng, seed);
	p->values = malloc(sizeof(double) * n_members * n_params);
	p->init = malloc(sizeof(double) * n_members * n_params);
	p->score = malloc(sizeof(double) * n_members);
	p->has_score = calloc(n_members, 1);
	p->age = calloc(n_members, sizeof(int32_t));
	p->ids = malloc(sizeof(int32_t) * n_members);
	p->sc = malloc(sizeof(double) * n_members);
	if (!p->values || !p->init || !p->score || !p->has_score || !p->age || !p->ids || !p->sc)
	{
		mop_pbt_free(p);
		return NULL;
	}
	for (int32_t m = 0; m < n_members; m++)
	{
		mop_params_sample(p->space, n_params, &p->rng, &p->values[m * n_params]);
		p->score[m] = NAN;
	}
	memcpy(p->init, p->values, sizeof(double) * n_members * n_params);
	return p;
}

void
mop_pbt_free(mop_pbt *p)
{
	if (!p)
		return;
	free(p->values);
	free(p->init);
	free(p->score);
	free(p->has_score);
	free(p->age);
	free(p->hist);
	free(p->ids);
	free(p->sc);
	free(p);
}

const double *
mop_pbt_values(const mop_pbt *p, int32_t member)
{
	return member >= 0 && member < p->n ? &p->values[member * p->np] : NULL;
}

int32_t
mop_pbt_age(const mop_pbt *p, int32_t member)
{
	return member >= 0 && member < p->n ? p->age[member] : MOP_SEARCH_EINVAL;
}

/* Set a member's starting hyperparameters (only before it has trained). */
int
mop_pbt_set(mop_pbt *p, int32_t member, const double *values)
{
	double	   *v;

	if (member < 0 || member >= p->n || !values)
		return MOP_SEARCH_EINVAL;
	if (p->age[member] != 0)
		return MOP_SEARCH_ESTATE;
	v = &p->values[member * p->np];
	for (int32_t i = 0; i < p->np; i++)
		v[i] = mop_param_active(p->space, values, i) ? mop_param_clip(&p->space[i], values[i]) : NAN;
	for (int32_t i = 0; i < p->np; i++)
		if (mop_param_active(p->space, v, i) && isnan(v[i]))
			return MOP_SEARCH_EINVAL;
	memcpy(&p->init[member * p->np], v, sizeof(double) * p->np);
	return MOP_SEARCH_OK;
}

/* nq for n ranked members: ceil(n q), at most floor(n / 2). */
static int32_t
quantile_count(const mop_pbt *p, int32_t n)
{
	int32_t		nq = (int32_t) ceil(n * p->o.quantile - 1e-12);

	if (nq > n / 2)
		nq = n / 2;
	return nq;
}

/* Rank the members that have a score into p->ids / p->sc; returns how many. */
static int32_t
rank_members(mop_pbt *p)
{
	int32_t		k = 0;

	for (int32_t m = 0; m < p->n; m++)
		if (p->has_score[m])
		{
			p->ids[k] = m;
			p->sc[k++] = p->score[m];
		}
	mop_rank_sort(p->ids, p->sc, k);
	return k;
}

/* Perturb the parent's values into x (explore); how[] says what was done. */
static void
explore(mop_pbt *p, const double *parent, double *x, uint8_t *how)
{
	for (int32_t i = 0; i < p->np; i++)
	{
		const mop_param *q = &p->space[i];
		double		v = parent[i];

		how[i] = MOP_PBT_KEPT;
		if (!mop_param_active(p->space, x, i))
		{
			x[i] = NAN;
			continue;
		}
		if (isnan(v) || mop_rng_uniform(&p->rng) < p->o.resample_p)
		{
			x[i] = mop_param_sample(q, &p->rng);
			how[i] = MOP_PBT_RESAMPLED;
			continue;
		}
		if (mop_rng_below(&p->rng, 2) == 0)
		{
			x[i] = mop_param_clip(q, q->kind == MOP_PARAM_CHOICE ? v - 1 : v * p->o.down);
			how[i] = MOP_PBT_DOWN;
		}
		else
		{
			x[i] = mop_param_clip(q, q->kind == MOP_PARAM_CHOICE ? v + 1 : v * p->o.up);
			how[i] = MOP_PBT_UP;
		}
		if (x[i] == v)
			how[i] = MOP_PBT_KEPT;
	}
}

/* Member at rank position pos (0-based) exploits a top member; 1 if it did. */
static int
exploit(mop_pbt *p, int32_t pos, int32_t n_ranked, int32_t nq, mop_pbt_decision *out)
{
	int32_t		member = p->ids[pos],
				n_cand = 0,
				parent;
	mop_pbt_decision d;
	double	   *v = &p->values[member * p->np];

	for (int32_t j = 0; j < nq; j++)
		if (!isnan(p->sc[j]))
			n_cand++;
	if (n_cand == 0)
		return 0;
	/* finite scores come first in rank order: candidates are ids[0 .. n_cand-1] */
	parent = p->ids[mop_rng_below(&p->rng, (uint64_t) n_cand)];
	memset(&d, 0, sizeof(d));
	d.seq = p->n_hist;
	d.member = member;
	d.parent = parent;
	d.age = p->age[parent];
	d.rank = pos + 1;
	d.n_ranked = n_ranked;
	d.n_quantile = nq;
	d.score = p->score[member];
	d.parent_score = p->score[parent];
	memcpy(d.old_values, v, sizeof(double) * p->np);
	explore(p, &p->values[parent * p->np], d.values, d.how);
	snprintf(d.reason, sizeof(d.reason),
			 "rank %d of %d (score %.6g) in the bottom %d: copies member %d "
			 "(score %.6g, age %d) and explores",
			 d.rank, n_ranked, d.score, nq, parent, d.parent_score, d.age);
	if (p->n_hist == p->cap_hist)
	{
		int32_t		cap = p->cap_hist ? 2 * p->cap_hist : 32;
		mop_pbt_decision *h = realloc(p->hist, sizeof(mop_pbt_decision) * cap);

		if (!h)
			return MOP_SEARCH_ENOMEM;
		p->hist = h;
		p->cap_hist = cap;
	}
	p->hist[p->n_hist++] = d;
	memcpy(v, d.values, sizeof(double) * p->np);
	p->age[member] = p->age[parent];
	if (out)
		*out = d;
	return 1;
}

/* Synchronous interval for the whole population. */
int32_t
mop_pbt_step(mop_pbt *p, const double *scores, mop_pbt_decision *out, int32_t cap)
{
	int32_t		n_ranked,
				nq,
				made = 0;

	if (!scores || cap < 0 || (cap > 0 && !out))
		return MOP_SEARCH_EINVAL;
	for (int32_t m = 0; m < p->n; m++)
	{
		p->age[m]++;
		p->score[m] = scores[m];
		p->has_score[m] = 1;
	}
	n_ranked = rank_members(p);
	nq = quantile_count(p, n_ranked);
	for (int32_t pos = n_ranked - nq; pos < n_ranked; pos++)
	{
		int			rc = exploit(p, pos, n_ranked, nq, made < cap ? &out[made] : NULL);

		if (rc < 0)
			return rc;
		made += rc;
	}
	return made;
}

/* Asynchronous: one member finished an interval. */
int
mop_pbt_ready(mop_pbt *p, int32_t member, double score, mop_pbt_decision *out)
{
	int32_t		n_ranked,
				nq;

	if (member < 0 || member >= p->n)
		return MOP_SEARCH_EINVAL;
	p->age[member]++;
	p->score[member] = score;
	p->has_score[member] = 1;
	n_ranked = rank_members(p);
	nq = quantile_count(p, n_ranked);
	for (int32_t pos = n_ranked - nq; pos < n_ranked; pos++)
		if (p->ids[pos] == member)
			return exploit(p, pos, n_ranked, nq, out);
	return 0;
}

const mop_pbt_decision *
mop_pbt_history(const mop_pbt *p, int32_t *n)
{
	if (n)
		*n = p->n_hist;
	return p->hist;
}

/* Schedule of a member's current weights, oldest segment first. */
int32_t
mop_pbt_schedule(const mop_pbt *p, int32_t member, mop_pbt_segment *out, int32_t cap)
{
	mop_pbt_segment *rev;
	int32_t		k = 0,
				cur = member,
				limit = p->n_hist;

	if (member < 0 || member >= p->n || cap < 0 || (cap > 0 && !out))
		return MOP_SEARCH_EINVAL;
	if (!(rev = malloc(sizeof(mop_pbt_segment) * (p->n_hist + 1))))
		return MOP_SEARCH_ENOMEM;
	for (;;)
	{
		int32_t		r = limit - 1;

		while (r >= 0 && p->hist[r].member != cur)
			r--;
		memset(&rev[k], 0, sizeof(rev[k]));
		rev[k].member = cur;
		if (r < 0)
		{
			rev[k].from = 0;
			memcpy(rev[k++].values, &p->init[cur * p->np], sizeof(double) * p->np);
			break;
		}
		rev[k].from = p->hist[r].age;
		memcpy(rev[k++].values, p->hist[r].values, sizeof(double) * p->np);
		cur = p->hist[r].parent;
		limit = r;
	}
	for (int32_t j = 0; j < k && j < cap; j++)
		out[j] = rev[k - 1 - j];
	free(rev);
	return k;
}
