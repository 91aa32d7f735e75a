/*
 * actions.c -- pieces shared by the search-algorithm cores (mop_search.h):
 * the deterministic ranking every core uses, the FIFO of pending actions the
 * drivers hand out one at a time, and names for action and decision kinds.
 *
 * Ranking is the one place where ties could make a run depend on something
 * other than its seed and its inputs, so it is total: higher score first,
 * NaN after every number, equal scores (and NaN against NaN) by smaller
 * trial id.  The sort is an insertion sort on top of that order when n is
 * small and a merge sort otherwise; both are stable and allocation-light.
 */
#include <stdlib.h>
#include <string.h>

#include "mop_search.h"

/* Name of a decision kind, as recorded in catalogs. */
const char *
mop_why_name(mop_why why)
{
	switch (why)
	{
		case MOP_WHY_START:
			return "start";
		case MOP_WHY_PROMOTE:
			return "promote";
		case MOP_WHY_CUT:
			return "stop";
		case MOP_WHY_FAILED:
			return "failed";
		case MOP_WHY_FINISHED:
			return "finished";
		case MOP_WHY_MEDIAN:
			return "median_stop";
		case MOP_WHY_EXPLOIT:
			return "exploit";
		case MOP_WHY_PATIENCE:
			return "patience";
		case MOP_WHY_TIME_BUDGET:
			return "time_budget";
	}
	return "unknown";
}

/* Name of an action kind. */
const char *
mop_act_name(mop_act_kind kind)
{
	switch (kind)
	{
		case MOP_ACT_NEW:
			return "new";
		case MOP_ACT_CONTINUE:
			return "continue";
		case MOP_ACT_STOP:
			return "stop";
	}
	return "unknown";
}

/* Total rank order: higher score first, NaN last, then smaller id. */
int
mop_rank_cmp(double a, int32_t ia, double b, int32_t ib)
{
	int			na = isnan(a),
				nb = isnan(b);

	if (na != nb)
		return na ? 1 : -1;
	if (!na && a != b)
		return a > b ? -1 : 1;
	return ia < ib ? -1 : (ia > ib ? 1 : 0);
}

/* Sort ids (with their scores) into rank order. */
void
mop_rank_sort(int32_t *ids, double *score, int32_t n)
{
	int32_t		width;
	int32_t    *ti;
	double	   *ts;

	if (n < 2)
		return;
	if (n <= 32 || !(ti = malloc(sizeof(int32_t) * n)))
		goto insertion;
	if (!(ts = malloc(sizeof(double) * n)))
	{
		free(ti);
		goto insertion;
	}
	/* bottom-up merge sort */
	for (width = 1; width < n; width *= 2)
	{
		for (int32_t lo = 0; lo < n; lo += 2 * width)
		{
			int32_t		mid = lo + width < n ? lo + width : n,
						hi = lo + 2 * width < n ? lo + 2 * width : n,
						i = lo,
						j = mid,
						k = lo;

			while (i < mid || j < hi)
			{
				if (j >= hi || (i < mid && mop_rank_cmp(score[i], ids[i], score[j], ids[j]) <= 0))
				{
					ti[k] = ids[i];
					ts[k++] = score[i++];
				}
				else
				{
					ti[k] = ids[j];
					ts[k++] = score[j++];
				}
			}
		}
		memcpy(ids, ti, sizeof(int32_t) * n);
		memcpy(score, ts, sizeof(double) * n);
	}
	free(ti);
	free(ts);
	return;

insertion:
	for (int32_t i = 1; i < n; i++)
	{
		int32_t		id = ids[i],
					j = i;
		double		s = score[i];

		while (j > 0 && mop_rank_cmp(s, id, score[j - 1], ids[j - 1]) < 0)
		{
			ids[j] = ids[j - 1];
			score[j] = score[j - 1];
			j--;
		}
		ids[j] = id;
		score[j] = s;
	}
}

/* Append an action; 0 or MOP_SEARCH_ENOMEM. */
int
mop_actq_push(mop_actq *q, const mop_action *a)
{
	if (q->head > 0 && q->head == q->n)
		q->head = q->n = 0;
	if (q->n == q->cap)
	{
		int32_t		cap = q->cap ? 2 * q->cap : 16;
		mop_action *na = realloc(q->a, sizeof(mop_action) * cap);

		if (!na)
			return MOP_SEARCH_ENOMEM;
		q->a = na;
		q->cap = cap;
	}
	q->a[q->n++] = *a;
	return MOP_SEARCH_OK;
}

/* Take the oldest action; 1 if there was one. */
int
mop_actq_pop(mop_actq *q, mop_action *a)
{
	if (q->head >= q->n)
		return 0;
	*a = q->a[q->head++];
	if (q->head == q->n)
		q->head = q->n = 0;
	return 1;
}

void
mop_actq_free(mop_actq *q)
{
	free(q->a);
	q->a = NULL;
	q->head = q->n = q->cap = 0;
}

/* A decision with every optional field "not relevant". */
void
mop_decision_init(mop_decision *d, mop_why why, int32_t trial)
{
	memset(d, 0, sizeof(*d));
	d->why = why;
	d->trial = trial;
	d->bracket = -1;
	d->rung = -1;
	d->rank = -1;
	d->rung_size = -1;
	d->keep = -1;
	d->score = NAN;
	d->cutoff = NAN;
	d->from_resource = -1;
	d->to_resource = -1;
}
