/*
 * sim.c -- event-driven simulation of the MOP scheduler (see sim.h).
 */
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
