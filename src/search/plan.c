/*
 * plan.c -- the planner's arithmetic (see mop_plan.h).
 */
#include <stdlib.h>

#include "mop_asha.h"
#include "mop_plan.h"
#include "mop_sim.h"

#define MB (1024.0 * 1024.0)

void
mop_plan_default_costs(mop_plan_costs *k)
{
	k->hop_s = MOP_PLAN_HOP_MS / 1000.0;
	k->state_s_per_mb = MOP_PLAN_STATE_MS_PER_MB / 1000.0;
	k->epoch_s = MOP_PLAN_EPOCH_MS / 1000.0;
	k->run_s = MOP_PLAN_RUN_MS / 1000.0;
	k->segment_s_per_mb = MOP_PLAN_SEGMENT_MS_PER_MB / 1000.0;
}

void
mop_plan_config_cost(const mop_plan_costs *k, const mop_plan_profile *p, int P,
					 double remote, double train_rows, double valid_rows, mop_plan_cost *out)
{
	double		state_s = k->state_s_per_mb * p->state_bytes / MB;
	double		trip_s = k->segment_s_per_mb * p->state_bytes / MB;

	out->train_s = out->hop_s = out->sub_epoch_s = out->valid_s = out->epoch_s = 0;
	if (!(p->train_rows_s > 0) || P < 1)
		return;
	out->train_s = train_rows / P / p->train_rows_s;
	if (!(remote > 0))
		remote = 0;
	else if (remote > 1)
		remote = 1;
	/* a hop on a segment: the state there and back */
	out->hop_s = k->hop_s + state_s + remote * trip_s;
	out->sub_epoch_s = out->train_s + out->hop_s;
	out->valid_s = p->eval_rows_s > 0 ? valid_rows / p->eval_rows_s : 0;
	/* the best checkpoint is written, not read: half the state's cost */
	out->epoch_s = P * out->sub_epoch_s + out->valid_s + k->epoch_s + state_s / 2;
}

double
mop_plan_run_overhead(const mop_plan_costs *k, int n, const double *state_bytes)
{
	double		s = k->run_s;

	/* each first checkpoint is written once, by the coordinator */
	for (int i = 0; i < n; i++)
		s += k->state_s_per_mb * state_bytes[i] / MB / 2;
	return s;
}

int
mop_plan_workers(int P, int n, const int32_t *epochs, const double *epoch_s, size_t stride,
				 double overhead, mop_pick pick, int max_w,
				 double *makespan, double *bound, int *knee)
{
	double	   *cost;

	*knee = 1;
	if (P < 1 || max_w < 1 || n < 0)
		return -1;
	for (int w = 0; w <= max_w; w++)
		makespan[w] = bound[w] = 0;
	if (n == 0)
		return 0;
	if (!(cost = malloc(sizeof(double) * n)))
		return -1;
	for (int w = 1; w <= max_w; w++)
	{
		mop_sim_result r;
		const double *es = epoch_s + (size_t) (w - 1) * stride;

		for (int i = 0; i < n; i++)
			cost[i] = es[i] / P;
		/*
		 * a worker owns a partition: more workers than partitions idle; the
		 * scheduler is told each model's cost up front, as a run is told
		 * its profile
		 */
		if (mop_sim_run(w < P ? w : P, P, n, epochs, cost, NULL, cost, 0, 0, pick, 0, &r) != 0 ||
			r.deadlock)
		{
			free(cost);
			return -1;
		}
		makespan[w] = r.makespan + overhead;
		bound[w] = r.lower_bound + overhead;
		if (makespan[w] > 0 && makespan[1] / makespan[w] / w >= MOP_PLAN_KNEE_EFFICIENCY)
			*knee = w;
	}
	free(cost);
	return 0;
}

int
mop_plan_threads_per_worker(int cores, int workers)
{
	int			t;

	if (cores < 1 || workers < 1)
		return 1;
	t = cores / workers;
	return t < 1 ? 1 : (t > 64 ? 64 : t);
}

double
mop_plan_rate_at_threads(double rate_1, double rate_n, int n, int t)
{
	double		f;

	if (!(rate_1 > 0))
		return 0;
	if (t <= 1 || n <= 1 || !(rate_n > 0))
		return rate_1;
	if (t >= n)
		return rate_n;
	/* Amdahl's law through both measurements: the parallel share f */
	f = (1.0 - rate_1 / rate_n) / (1.0 - 1.0 / n);
	if (f < 0)
		f = 0;
	if (f > 1)
		f = 1;
	return rate_1 / ((1.0 - f) + f / t);
}

int
mop_plan_auto_workers(int knee, int cores, int partitions, int configs, int processes,
					  mop_plan_auto_limit *limit)
{
	/* the caps first: at a tie, the cap is what the user can change */
	struct
	{
		int			n;
		mop_plan_auto_limit why;
	}			caps[] = {
		{partitions, MOP_AUTO_PARTITIONS},
		{processes, MOP_AUTO_PROCESSES},
		{cores, MOP_AUTO_CORES},
		{configs, MOP_AUTO_CONFIGS},
	};
	int			w = knee;

	*limit = MOP_AUTO_KNEE;
	for (int i = 0; i < (int) (sizeof(caps) / sizeof(caps[0])); i++)
		if ((caps[i].n > 0 || caps[i].why == MOP_AUTO_PROCESSES) && caps[i].n <= w &&
			(caps[i].n < w || *limit == MOP_AUTO_KNEE))
		{
			w = caps[i].n;
			*limit = caps[i].why;
		}
	return w < 1 ? 1 : w;
}

int32_t
mop_plan_asha(int32_t r_min, int32_t R, int32_t eta, int32_t max_trials,
			  mop_plan_rung *out, int32_t cap)
{
	mop_asha   *a;
	int32_t		n_rungs;
	int64_t		n = max_trials,
				n_max = max_trials;
	int32_t		before = 0;

	if (max_trials < 1 || !(a = mop_asha_new(r_min, R, eta, max_trials)))
		return -1;
	/* the rungs as the search has them */
	n_rungs = mop_asha_n_rungs(a);
	for (int32_t k = 0; k < n_rungs && k < cap; k++)
	{
		int32_t		r = mop_asha_rung_resource(a, k);

		if (k > 0)
		{
			n /= eta;
			n_max = n_max > eta - 1 ? n_max - (eta - 1) : 0;
		}
		out[k].rung = k;
		out[k].resource = r;
		out[k].configs = (int32_t) n;
		out[k].configs_max = (int32_t) n_max;
		out[k].epochs = n * (r - before);
		out[k].epochs_max = n_max * (r - before);
		before = r;
	}
	mop_asha_free(a);
	return n_rungs;
}

int
mop_plan_trials(const mop_plan_costs *k, int P, int n, int32_t epochs, const double *epoch_s,
				double state_bytes, mop_pick pick, int max_w,
				double *makespan, double *bound, int *knee)
{
	int32_t    *ep;
	double	   *cost,
			   *bytes;
	int			rc;
	size_t		m = n > 0 ? (size_t) n : 1;

	if (n < 0 || epochs < 1 || max_w < 1)
		return -1;
	ep = malloc(sizeof(int32_t) * m);
	cost = malloc(sizeof(double) * m * max_w);
	bytes = malloc(sizeof(double) * m);
	if (!ep || !cost || !bytes)
	{
		free(ep);
		free(cost);
		free(bytes);
		return -1;
	}
	for (int i = 0; i < n; i++)
	{
		ep[i] = epochs;
		bytes[i] = state_bytes;
		for (int w = 1; w <= max_w; w++)
			cost[(size_t) (w - 1) * m + i] = epoch_s[w - 1];
	}
	rc = mop_plan_workers(P, n, ep, cost, m, mop_plan_run_overhead(k, n, bytes), pick, max_w,
						  makespan, bound, knee);
	free(ep);
	free(cost);
	free(bytes);
	return rc;
}
