/*
 * sim.c -- event-driven simulation of the MOP scheduler (see mop_sim.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mop_sim.h"

/* Run the simulation. */
int
mop_sim_run(int W, int P, int n_models, const int32_t *epochs, const double *cost,
			const double *part_factor, uint64_t seed, int deterministic,
			mop_pick pick, int keep_hops, mop_sim_result *res)
{
	mop_sched  *s = mop_sched_new(W, P, seed, deterministic, pick);
	mop_task   *task = calloc(W, sizeof(mop_task));
	double	   *finish = calloc(W, sizeof(double)),
			   *start = calloc(W, sizeof(double));
	int		   *busy = calloc(W, sizeof(int));
	int64_t		cap = 0;
	double		now = 0,
				longest = 0;

	memset(res, 0, sizeof(*res));
	if (!s || !task || !finish || !start || !busy)
		goto fail;
	for (int i = 0; i < n_models; i++)
	{
		double		work = 0;

		if (mop_sched_add_model(s, epochs[i]) != i)
			goto fail;
		for (int p = 0; p < P; p++)
			work += cost[i] * (part_factor ? part_factor[p] : 1.0);
		work *= epochs[i];
		res->total_work += work;
		if (work > longest)
			longest = work;
	}
	if (keep_hops)
	{
		for (int i = 0; i < n_models; i++)
			cap += (int64_t) epochs[i] * P;
		res->hops = malloc(sizeof(mop_sim_hop) * (cap ? cap : 1));
		if (!res->hops)
			goto fail;
	}
	res->lower_bound = res->total_work / W > longest ? res->total_work / W : longest;

	for (;;)
	{
		int			running = 0,
					first = -1;

		for (int w = 0; w < W; w++)
		{
			if (!busy[w] && mop_sched_next(s, w, &task[w]) == MOP_ASSIGNED)
			{
				busy[w] = 1;
				start[w] = now;
				finish[w] = now + cost[task[w].model] *
					(part_factor ? part_factor[task[w].partition] : 1.0);
			}
			if (busy[w])
			{
				running++;
				if (first < 0 || finish[w] < finish[first])
					first = w;
			}
		}
		if (!running)
		{
			res->deadlock = !mop_sched_finished(s);
			break;
		}
		now = finish[first];
		busy[first] = 0;
		mop_sched_complete(s, &task[first], finish[first] - start[first]);
		if (keep_hops && res->n_hops < cap)
		{
			mop_sim_hop *h = &res->hops[res->n_hops];

			h->model = task[first].model;
			h->partition = task[first].partition;
			h->epoch = task[first].epoch;
			h->worker = first;
			h->start = start[first];
			h->finish = finish[first];
		}
		res->n_hops++;
	}
	res->makespan = now;
	mop_sched_free(s);
	free(task);
	free(finish);
	free(start);
	free(busy);
	return 0;

fail:
	mop_sched_free(s);
	free(task);
	free(finish);
	free(start);
	free(busy);
	return -1;
}


/* ---- segments: copies, network cost, outages ---- */

typedef struct seg_event
{
	double		time;
	int32_t		segment;
	int32_t		up;				/* 1: the segment comes back (or joins) */
	int32_t		order;			/* place in the list, for ties */
} seg_event;

static int
event_cmp(const void *a, const void *b)
{
	const seg_event *x = a,
			   *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->order - y->order;
}

/*
 * The lower bound's T_cap: the earliest T by which the workers up in
 * [0, T] could have done `work` (events sorted; INFINITY if never).  Also
 * sets *t_first, the first time any segment is up (INFINITY if none ever).
 */
static double
capacity_bound(int S, int per, const seg_event *ev, int n_ev, double work,
			   uint8_t *down, double *t_first)
{
	int			k = 0,
				n_up = S;
	double		t = 0,
				left = work,
				T = INFINITY;

	*t_first = INFINITY;
	memset(down, 0, S);
	for (;;)
	{
		double		next;
		double		cap;

		/* apply every event at time t */
		while (k < n_ev && ev[k].time <= t)
		{
			int			g = ev[k].segment;

			if (ev[k].up && down[g])
				n_up++;
			else if (!ev[k].up && !down[g])
				n_up--;
			down[g] = !ev[k].up;
			k++;
		}
		if (n_up > 0 && *t_first == INFINITY)
			*t_first = t;
		cap = (double) n_up * per;
		next = k < n_ev ? ev[k].time : INFINITY;
		if (left <= 0)
		{
			T = t;
			break;
		}
		if (cap > 0 && t + left / cap <= next)
		{
			T = t + left / cap;
			break;
		}
		if (next == INFINITY)
			break;				/* no worker up for good: never */
		left -= cap * (next - t);
		t = next;
	}
	memset(down, 0, S);
	return T;
}

/* Simulate a run over segments (mop_sim.h). */
int
mop_sim_run_segments(const mop_sim_segments *c, mop_sim_seg_result *res)
{
	int			S,
				per,
				W,
				P,
				n_ev = 0,
				k = 0;
	uint8_t    *holds = NULL,
			   *seg_down = NULL;
	seg_event  *ev = NULL;
	mop_sched  *s = NULL;
	mop_task   *task = NULL;
	double	   *start = NULL,
			   *finish = NULL,
			   *net_of = NULL;
	int		   *busy = NULL;
	double		net,
				longest = 0,
				t_first,
				now = 0;
	int64_t		cap = 0;

	if (!res)
		return -1;
	memset(res, 0, sizeof(*res));
	res->unreachable = -1;
	if (!c || c->n_segments < 1 || c->workers_per_segment < 1 || c->n_partitions < 1 ||
		c->replicas < 1 || c->replicas > c->n_segments || c->n_models < 0 ||
		c->n_outages < 0 || (c->n_models > 0 && (!c->epochs || !c->cost)) ||
		(c->n_outages > 0 && !c->outages) || c->local_segment >= c->n_segments ||
		(int64_t) c->n_segments * c->workers_per_segment > 1 << 16)
		return -1;
	S = c->n_segments;
	per = c->workers_per_segment;
	W = S * per;
	P = c->n_partitions;
	net = (c->bandwidth > 0 ? c->state_bytes / c->bandwidth : 0) + c->latency;
	if (net < 0 || !isfinite(net))
		return -1;
	for (int j = 0; j < c->n_outages; j++)
	{
		const mop_sim_outage *o = &c->outages[j];

		if (o->segment < 0 || o->segment >= S || !(o->down >= 0) ||
			(o->up >= 0 && o->up <= o->down) || isnan(o->up))
			return -1;
	}

	holds = calloc((size_t) W * P, 1);
	seg_down = calloc(S, 1);
	ev = malloc(sizeof(seg_event) * (2 * (size_t) c->n_outages + 1));
	task = calloc(W, sizeof(mop_task));
	start = calloc(W, sizeof(double));
	finish = calloc(W, sizeof(double));
	net_of = calloc(W, sizeof(double));
	busy = calloc(W, sizeof(int));
	if (!holds || !seg_down || !ev || !task || !start || !finish || !net_of || !busy)
		goto fail;
	for (int p = 0; p < P; p++)
		for (int r = 0; r < c->replicas; r++)
		{
			int			g = (p + r) % S;

			for (int j = 0; j < per; j++)
				holds[((size_t) g * per + j) * P + p] = 1;
		}
	for (int w = 0; w < W; w++)
		net_of[w] = w / per == c->local_segment ? 0 : net;
	if (!(s = mop_sched_new_placed(W, P, holds, c->seed, c->deterministic, c->pick)))
		goto fail;

	/* the events, in time order */
	for (int j = 0; j < c->n_outages; j++)
	{
		const mop_sim_outage *o = &c->outages[j];

		ev[n_ev++] = (seg_event) {o->down, o->segment, 0, 2 * j};
		if (o->up >= 0)
			ev[n_ev++] = (seg_event) {o->up, o->segment, 1, 2 * j + 1};
	}
	qsort(ev, n_ev, sizeof(seg_event), event_cmp);

	/* the work, at its cheapest, and the lower bound */
	for (int i = 0; i < c->n_models; i++)
	{
		double		work = 0;

		if (mop_sched_add_model(s, c->epochs[i]) != i)
			goto fail;
		for (int p = 0; p < P; p++)
		{
			int			local = c->local_segment >= 0 &&
				(c->local_segment - p % S + S) % S < c->replicas;

			work += c->cost[i] * (c->part_factor ? c->part_factor[p] : 1.0) +
				(local ? 0 : net);
		}
		work *= c->epochs[i];
		res->total_work += work;
		if (work > longest)
			longest = work;
		cap += (int64_t) c->epochs[i] * P;
	}
	res->lower_bound = capacity_bound(S, per, ev, n_ev, res->total_work, seg_down,
										&t_first);
	if (c->n_models > 0 && t_first + longest > res->lower_bound)
		res->lower_bound = t_first + longest;
	if (c->keep_hops && !(res->hops = malloc(sizeof(mop_sim_hop) * (cap ? cap : 1))))
		goto fail;

	for (;;)
	{
		int			running = 0,
					first = -1;

		/* the events due now: segments going down or coming back */
		while (k < n_ev && ev[k].time <= now)
		{
			int			g = ev[k].segment;

			for (int w = g * per; w < (g + 1) * per; w++)
			{
				if (!ev[k].up && busy[w])
				{
					mop_sched_abort(s, &task[w]);
					busy[w] = 0;
					res->wasted_work += now - start[w];
					res->n_aborted++;
				}
				mop_sched_set_worker_down(s, w, !ev[k].up);
			}
			seg_down[g] = !ev[k].up;
			k++;
		}
		for (int w = 0; w < W; w++)
		{
			if (!busy[w] && !seg_down[w / per] &&
				mop_sched_next(s, w, &task[w]) == MOP_ASSIGNED)
			{
				busy[w] = 1;
				start[w] = now;
				finish[w] = now + c->cost[task[w].model] *
					(c->part_factor ? c->part_factor[task[w].partition] : 1.0) + net_of[w];
			}
			if (busy[w])
			{
				running++;
				if (first < 0 || finish[w] < finish[first])
					first = w;
			}
		}
		if (!running)
		{
			int			j = k;

			if (mop_sched_finished(s))
				break;
			/* nothing can run until a segment comes back: skip to it */
			while (j < n_ev && !ev[j].up)
				j++;
			if (j == n_ev)
			{
				res->deadlock = 1;
				res->unreachable = mop_sched_unreachable(s);
				break;
			}
			now = ev[j].time;
			continue;
		}
		/* a segment failing before the first task ends (a task ending at that instant ends) */
		if (k < n_ev && ev[k].time < finish[first])
		{
			now = ev[k].time;
			continue;
		}
		now = finish[first];
		busy[first] = 0;
		/* the coordinator measures a sub-epoch's wall time, network included */
		mop_sched_complete(s, &task[first], finish[first] - start[first]);
		res->network_time += net_of[first];
		res->makespan = now;
		if (c->keep_hops && res->n_hops < cap)
		{
			mop_sim_hop *h = &res->hops[res->n_hops];

			h->model = task[first].model;
			h->partition = task[first].partition;
			h->epoch = task[first].epoch;
			h->worker = first;
			h->start = start[first];
			h->finish = finish[first];
		}
		res->n_hops++;
	}
	mop_sched_free(s);
	free(holds);
	free(seg_down);
	free(ev);
	free(task);
	free(start);
	free(finish);
	free(net_of);
	free(busy);
	return 0;

fail:
	mop_sched_free(s);
	free(holds);
	free(seg_down);
	free(ev);
	free(task);
	free(start);
	free(finish);
	free(net_of);
	free(busy);
	free(res->hops);
	res->hops = NULL;
	return -1;
}
