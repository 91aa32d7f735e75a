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
			const double *part_factor, const double *hint, uint64_t seed, int deterministic,
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
		if (hint)
			mop_sched_set_cost_hint(s, i, hint[i]);
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

/* time order; at one instant comebacks first, then the list's order */
static int
event_cmp(const void *a, const void *b)
{
	const seg_event *x = a,
			   *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	if (x->up != y->up)
		return y->up - x->up;
	return x->order - y->order;
}

/*
 * The earliest T >= t0 by which the workers of segments g0 .. g0 + len - 1
 * (mod S), n_up of them up at t0, could have done `work` in the time they
 * are up (events sorted, later than t0 or applied at t0; outages of a
 * segment do not overlap); INFINITY if they never can.  Also sets
 * *t_first, the first time one of them is up.
 */
static double
arc_bound(int S, int per, const seg_event *ev, int n_ev, double t0, int n_up,
		  int g0, int len, double work, double *t_first)
{
	int			k = 0;
	double		t = t0,
				left = work;

	*t_first = INFINITY;
	for (;;)
	{
		double		next,
					cap;

		/* apply every event at time t */
		for (; k < n_ev && ev[k].time <= t; k++)
			if ((ev[k].segment - g0 + S) % S < len)
				n_up += ev[k].up ? 1 : -1;
		if (n_up > 0 && *t_first == INFINITY)
			*t_first = t;
		cap = (double) n_up * per;
		next = k < n_ev ? ev[k].time : INFINITY;
		if (left <= 0)
			return t;
		if (cap > 0 && t + left / cap <= next)
			return t + left / cap;
		if (next == INFINITY)
			return INFINITY;	/* no worker up for good: never */
		left -= cap * (next - t);
		t = next;
	}
}

/*
 * The capacity and placement bounds (mop_sim.h) of the work class_w[c]
 * left in each class of partitions at time t0, when the segments seg_down
 * says are down (events: those after t0, or at t0 not yet applied).  Sets
 * *capacity and *t_first (the whole ring's), returns the placement bound.
 * upc: scratch of 2S + 1 ints.
 */
static double
bounds_from(int S, int per, int replicas, const seg_event *ev, int n_ev, double t0,
			const uint8_t *seg_down, const double *class_w, int *upc,
			double *capacity, double *t_first)
{
	double		total = 0,
				worst = 0,
				t;

	upc[0] = 0;
	for (int g = 0; g < 2 * S; g++)
		upc[g + 1] = upc[g] + !seg_down[g % S];
	for (int g = 0; g < S; g++)
		total += class_w[g];
	*capacity = arc_bound(S, per, ev, n_ev, t0, upc[S], 0, S, total, t_first);
	/* classes a .. a + L - 1 are held by segments a .. a + L + replicas - 2 only */
	if (S <= MOP_SIM_ARC_MAX)
		for (int a = 0; a < S; a++)
		{
			double		work = 0;

			for (int L = 1; L + replicas - 1 < S; L++)
			{
				int			len = L + replicas - 1;
				double		T;

				work += class_w[(a + L - 1) % S];
				T = arc_bound(S, per, ev, n_ev, t0, upc[a + len] - upc[a], a, len, work, &t);
				if (T > worst)
					worst = T;
			}
		}
	return worst;
}

/* The cheapest a sub-epoch of model i on partition p can be (mop_sim.h). */
static inline double
cheapest(const mop_sim_segments *c, double net, int i, int p)
{
	int			local = c->local_segment >= 0 &&
		(c->local_segment - p % c->n_segments + c->n_segments) % c->n_segments < c->replicas;

	return c->cost[i] * (c->part_factor ? c->part_factor[p] : 1.0) + (local ? 0 : net);
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
	double	   *class_work = NULL,
			   *class_left = NULL,
			   *class_rem = NULL;
	int		   *upc = NULL,
				changed = 0;
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
		/* outages of one segment do not overlap */
		for (int i = 0; i < j; i++)
		{
			const mop_sim_outage *q = &c->outages[i];

			if (q->segment == o->segment &&
				(o->up < 0 || q->down < o->up) && (q->up < 0 || o->down < q->up))
				return -1;
		}
	}

	holds = calloc((size_t) W * P, 1);
	seg_down = calloc(S, 1);
	class_work = calloc(S, sizeof(double));
	class_left = calloc(S, sizeof(double));
	class_rem = calloc(S, sizeof(double));
	upc = calloc(2 * (size_t) S + 1, sizeof(int));
	ev = malloc(sizeof(seg_event) * (2 * (size_t) c->n_outages + 1));
	task = calloc(W, sizeof(mop_task));
	start = calloc(W, sizeof(double));
	finish = calloc(W, sizeof(double));
	net_of = calloc(W, sizeof(double));
	busy = calloc(W, sizeof(int));
	if (!holds || !seg_down || !class_work || !class_left || !class_rem || !upc || !ev ||
		!task || !start || !finish || !net_of || !busy)
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

	/*
	 * The work, at its cheapest, per model and per class of partitions (the
	 * partitions p with one p % S, which have their copies on the same
	 * segments), and the lower bound.
	 */
	for (int i = 0; i < c->n_models; i++)
	{
		double		work = 0;

		if (mop_sched_add_model(s, c->epochs[i]) != i)
			goto fail;
		for (int p = 0; p < P; p++)
		{
			double		one = cheapest(c, net, i, p);

			work += one;
			class_work[p % S] += one * c->epochs[i];
		}
		work *= c->epochs[i];
		res->total_work += work;
		if (work > longest)
			longest = work;
		cap += (int64_t) c->epochs[i] * P;
	}
	res->bound_placement = bounds_from(S, per, c->replicas, ev, n_ev, 0, seg_down, class_work,
									   upc, &res->bound_capacity, &t_first);
	res->bound_chain = c->n_models > 0 ? t_first + longest : 0;
	res->lower_bound = res->bound_capacity;
	if (res->bound_chain > res->lower_bound)
		res->lower_bound = res->bound_chain;
	if (res->bound_placement > res->lower_bound)
		res->lower_bound = res->bound_placement;
	memcpy(class_left, class_work, sizeof(double) * S);
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
			changed = 1;
		}
		/* what no schedule could beat from here */
		if (changed && !mop_sched_finished(s))
		{
			double		capb,
						placeb,
						t;

			for (int g = 0; g < S; g++)
				class_rem[g] = class_left[g];
			for (int w = 0; w < W; w++)
				if (busy[w])
				{
					double		least = cheapest(c, net, task[w].model, task[w].partition);

					class_rem[task[w].partition % S] -= fmin(now - start[w], least);
				}
			placeb = bounds_from(S, per, c->replicas, ev + k, n_ev - k, now, seg_down,
								 class_rem, upc, &capb, &t);
			res->bound_from_outages = fmax(res->bound_from_outages, fmax(capb, placeb));
			changed = 0;
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
		class_left[task[first].partition % S] -=
			cheapest(c, net, task[first].model, task[first].partition);
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
	free(class_work);
	free(class_left);
	free(class_rem);
	free(upc);
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
	free(class_work);
	free(class_left);
	free(class_rem);
	free(upc);
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
