/*
 * explain_text.c -- mop_explain_text(dataset, space, epochs, max_workers):
 * the plan of a grid search in text, as EXPLAIN writes one, from the
 * costs and the simulation of explain.c.
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "guc.h"
#include "mop.h"
#include "run.h"
#include "run_options.h"
#include "runreq.h"
#include "space.h"
#include "search/mop_hyperband.h"
#include "search/mop_plan.h"

#include "explain_internal.h"

PG_FUNCTION_INFO_V1(mop_explain_text);

/* configurations listed one by one; with more, the most expensive ones */
#define EXPLAIN_TEXT_CONFIGS 10

static const ConfigCost *sort_costs;

/* by total time, most expensive first; then in the grid's order */
static int
cmp_by_cost(const void *a, const void *b)
{
	int			i = *(const int *) a,
				j = *(const int *) b;
	double		ci = sort_costs[i].epoch_s,
				cj = sort_costs[j].epoch_s;

	if (ci != cj)
		return ci > cj ? -1 : 1;
	return i - j;
}

static int
cmp_int(const void *a, const void *b)
{
	return *(const int *) a - *(const int *) b;
}

/* a byte count as EXPLAIN writes memory: kB, rounded up */
static int64
kbytes(size_t bytes)
{
	return (int64) ((bytes + 1023) / 1024);
}

static void
put_line(ReturnSetInfo *rsinfo, const char *line)
{
	Datum		v = CStringGetTextDatum(line);
	bool		isnull = false;

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &v, &isnull);
}

static void
put_linef(ReturnSetInfo *rsinfo, const char *fmt,...) pg_attribute_printf(2, 3);

static void
put_linef(ReturnSetInfo *rsinfo, const char *fmt,...)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	put_line(rsinfo, buf.data);
	pfree(buf.data);
}

/*
 * mop_explain_text(dataset text, space jsonb, epochs int, max_workers int)
 * -> the plan of a grid search as lines of text, as EXPLAIN writes one.
 */
Datum
mop_explain_text(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MopDataset *ds;
	Jsonb	   *space;
	int			epochs,
				n,
				max_w,
				wanted,
				fitting = 0,
				longest = -1,
				shown,
				measured = 0,
				cached = 0;
	ConfigCost *c;
	WorkerPlan	p;
	int		   *order;
	double		work = 0,
				rest_work = 0,
				remote;
	size_t		model_max = 0,
				working_max = 0;
	MemoryContext opcxt,
				old;

	mop_xp_explain_args(fcinfo, &ds, &space, &epochs);
	max_w = mop_xp_explain_max_workers(fcinfo, 3, ds);
	/* the workers a run would use: max_workers, or mop.workers */
	wanted = PG_ARGISNULL(3) ? mop_workers : max_w;
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_explain_text", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(opcxt);
	n = mop_xp_cost_grid(ds, space, epochs, &c);
	mop_xp_simulate_workers(ds, c, n, epochs, max_w, false, &p);

	order = palloc(sizeof(int) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		order[i] = i;
		work += c[i].epoch_s * epochs;
		model_max = Max(model_max, c[i].mem.params + c[i].mem.optimizer);
		/* a worker trains one model at a time */
		if (c[i].fits)
		{
			fitting++;
			working_max = Max(working_max, c[i].mem.total);
		}
		if (c[i].epoch_s > 0 && (longest < 0 || c[i].epoch_s > c[longest].epoch_s))
			longest = i;
	}
	measured = mop_xp_cost_measured;
	cached = mop_xp_cost_cached;

	put_linef(rsinfo, "Grid Search on %s  (configurations=%d epochs=%d partitions=%d)",
			  ds->name, n, epochs, ds->partitions);
	put_linef(rsinfo, "  Total Work: %.3f s", work);
	put_linef(rsinfo, "  Model Memory Max: " INT64_FORMAT "kB", kbytes(model_max));
	put_linef(rsinfo, "  Working Memory Peak per Worker: " INT64_FORMAT "kB", kbytes(working_max));
	put_linef(rsinfo, "  Hop Cost: %.3f ms + %.3f ms per MB of model state  (mop.plan_hop_cost, mop.plan_state_cost)",
			  mop_plan_hop_ms, mop_plan_state_ms_per_mb);
	remote = mop_xp_remote_share(ds);
	if (remote > 0)
		put_linef(rsinfo, "  Segment Cost: %.3f ms per MB of model state on %.0f%% of the hops  (mop.plan_segment_cost)",
				  mop_plan_segment_ms_per_mb, 100 * remote);
	put_linef(rsinfo, "  Profiles: %d measured, %d from mop.profiles", measured, cached);

	/* the configurations, in the grid's order; with many, the most expensive */
	shown = Min(n, EXPLAIN_TEXT_CONFIGS);
	if (n > shown)
	{
		sort_costs = c;
		qsort(order, n, sizeof(int), cmp_by_cost);
		for (int k = shown; k < n; k++)
			rest_work += c[order[k]].epoch_s * epochs;
		qsort(order, shown, sizeof(int), cmp_int);
	}
	for (int k = 0; k < shown; k++)
	{
		const ConfigCost *ci = &c[order[k]];
		char	   *json = JsonbToCString(NULL, &ci->config->root, VARSIZE(ci->config));

		if (ci->epoch_s > 0)
			put_linef(rsinfo, "  ->  Configuration %d  (total=%.3f s epoch=%.3f s sub-epoch=%.3f s hop=%.3f ms step=%.3f ms)",
					  order[k] + 1, ci->epoch_s * epochs, ci->epoch_s, ci->sub_epoch_s,
					  ci->hop_s * 1000, ci->step_ms);
		else
			put_linef(rsinfo, "  ->  Configuration %d  (not profiled: over mop.max_model_memory)",
					  order[k] + 1);
		put_linef(rsinfo, "        Memory: model=" INT64_FORMAT "kB working=" INT64_FORMAT "kB",
				  kbytes(ci->mem.params + ci->mem.optimizer), kbytes(ci->mem.total));
		put_linef(rsinfo, "        Config: %s", json);
	}
	if (n > shown)
		put_linef(rsinfo, "  ->  %d more configurations  (total=%.3f s)", n - shown, rest_work);

	/* the makespan */
	if (p.simulated > 0)
	{
		put_linef(rsinfo, "  Predicted Makespan:  (run start and first checkpoints: %.3f s)", p.overhead);
		for (int w = 1; w <= max_w; w++)
			put_linef(rsinfo, "    %d worker%s: %.3f s  (speedup=%.2fx efficiency=%.0f%%)%s",
					  w, w == 1 ? "" : "s", p.makespan[w], p.makespan[1] / p.makespan[w],
					  100.0 * p.efficiency[w],
					  w == p.knee ? "  <- knee" : "");
	}

	/* warnings */
	for (int i = 0; i < n; i++)
		if (!c[i].fits)
			put_linef(rsinfo, "Warning: configuration %d needs " INT64_FORMAT "kB, over mop.max_model_memory (%dMB): a run refuses it",
					  i + 1, kbytes(c[i].mem.total), mop_max_model_memory_mb);
	if (ds->partitions < Min(wanted, fitting))
		put_linef(rsinfo, "Warning: the dataset has %d partition%s, fewer than the %d workers a run would use (%s): a worker owns a partition, so %d would idle",
				  ds->partitions, ds->partitions == 1 ? "" : "s", Min(wanted, fitting),
				  PG_ARGISNULL(3) ? "mop.workers" : "max_workers",
				  Min(wanted, fitting) - ds->partitions);
	/*
	 * the longest configuration bounds the makespan at the most workers that
	 * can train, and takes at least twice the others' mean: more workers do
	 * not help, splitting it (or fewer epochs for it) would
	 */
	if (longest >= 0 && p.simulated > 1 && Min(max_w, ds->partitions) > 1 &&
		c[longest].epoch_s * epochs >= work / Min(max_w, ds->partitions) &&
		c[longest].epoch_s * epochs >= 2.0 * (work - c[longest].epoch_s * epochs) / (p.simulated - 1))
		put_linef(rsinfo, "Warning: configuration %d alone bounds the makespan: it takes %.3f s of the %.3f s of work, so %d workers finish no sooner than it does",
				  longest + 1, c[longest].epoch_s * epochs, work, Min(max_w, ds->partitions));

	MemoryContextSwitchTo(old);
	MemoryContextDelete(opcxt);
	return (Datum) 0;
}
