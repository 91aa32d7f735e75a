/*
 * coord_hints.c -- what a model's sub-epoch is expected to cost, from the
 * planner's profiles, for the longest-first scheduler.
 *
 * The longest-first policy (MOP_PICK_LONGEST) starts the model with the
 * most work left.  What a sub-epoch of a model costs is only observed once
 * it has trained one; before that, each model's cost is its profile's
 * (explain.c: a few minibatches on the dataset's first buffer, cached in
 * mop.profiles), at the threads each of the run's workers gets.  The
 * scheduler calibrates these hints against the sub-epochs it observes
 * (mop_sched_set_cost_hint).
 *
 * When: before the run's first sub-epoch the coordinator measures what
 * mop.profiles does not hold, at most HINT_MAX_MEASURED networks (about
 * 0.1-0.3 s each; the workers wait for it).  Once workers train, it only
 * reads mop.profiles: a profile measured beside them would be slowed by
 * them, slow them, and be kept for later plans.  Models that have started
 * or have no work left need none.  A run on the GPU gets none: the CPU's
 * profile does not rank GPU costs.
 *
 * Each model is looked up in a subtransaction of its own: a model that
 * cannot be profiled (its row gone, its buffer unfit) gets no hint and
 * fails, if it must, when it trains; never the run.  A cancel or a
 * shutdown is not caught.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "coordinator.h"
#include "explain_internal.h"

/* networks measured before the first sub-epoch, at most */
#define HINT_MAX_MEASURED AUTO_MAX_PROFILES

/* hints[i]: model i's expected sub-epoch in seconds (0: none); TopMemoryContext */
static double *hints = NULL;
static int	n_known = 0;		/* models whose hint was looked for */
static int	cap = 0;
static int	n_measured = 0;		/* networks measured by this run */
static bool measuring_over = false; /* workers train: read mop.profiles only */
/* the scheduler the hints were given to, and how many */
static const mop_sched *given_to = NULL;
static int	n_given = 0;

/*
 * The configurations of models from..to-1 (mop.models.config), in order;
 * NULL for one whose row is not visible.
 */
static Jsonb **
model_configs(int from, int to)
{
	Datum	   *ids = palloc(sizeof(Datum) * (to - from));
	Jsonb	  **configs = palloc0(sizeof(Jsonb *) * (to - from));
	Oid			t[1] = {INT8ARRAYOID};
	Datum		v[1];

	for (int i = from; i < to; i++)
		ids[i - from] = Int64GetDatum(coord.models[i].id);
	v[0] = PointerGetDatum(construct_array(ids, to - from, INT8OID, sizeof(int64), true,
										   TYPALIGN_DOUBLE));
	if (SPI_execute_with_args("SELECT u.k, m.config FROM pg_catalog.unnest($1) WITH ORDINALITY u(id, k) "
							  "JOIN mop.models m ON m.id OPERATOR(pg_catalog.=) u.id",
							  1, t, v, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mop run %lld: could not read the configurations of its models",
			 (long long) coord.run->run_id);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		n1,
					n2;
		int64		k = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &n1));
		Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &n2);

		if (!n1 && !n2 && k >= 1 && k <= to - from)
			configs[k - 1] = DatumGetJsonbPCopy(d);
	}
	return configs;
}

/*
 * Model i's expected sub-epoch (0: none), in a subtransaction; measures
 * (and keeps) a missing profile when measure.  remote: the share of hops
 * on segments (mop_xp_remote_share).
 */
typedef struct HintStep
{
	Jsonb	   *config;
	bool		measure;
	double		remote;
	double		sub;			/* out */
} HintStep;

static void
hint_step(void *arg)
{
	HintStep   *h = (HintStep *) arg;
	ConfigCost *c;

	if (mop_xp_cost_configs(coord.ds, list_make1(h->config), Max(coord.run->opts.epochs, 1), 0,
							h->measure ? XP_PROFILE_KEEP : XP_PROFILE_CACHED, &c) == 1)
		(void) mop_xp_epoch_at(coord.ds, &c[0], coord.n_workers, h->remote, &h->sub);
	n_measured += mop_xp_cost_measured;
}

static double
model_hint(int i, Jsonb *config, bool measure, double remote)
{
	HintStep	h = {config, measure, remote, 0};
	char	   *why;

	/* (a cancel, a shutdown: not this model's fault, re-thrown) */
	if (!mop_try_in_subxact(hint_step, &h, &why))
	{
		ereport(LOG,
				(errmsg("mop run %lld: model %lld could not be profiled for the longest-first scheduler: %s",
						(long long) coord.run->run_id, (long long) coord.models[i].id, why),
				 errdetail("It is ranked by the sub-epochs observed instead.")));
		h.sub = 0;
	}
	return h.sub > 0 && isfinite(h.sub) ? h.sub : 0;
}

/* Look up the hints of models from..to-1 that have not started and have work left. */
static void
profile_models(const mop_sched *s, int from, int to)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "mop cost hints",
											  ALLOCSET_DEFAULT_SIZES),
				old = MemoryContextSwitchTo(cxt);
	Jsonb	  **configs = model_configs(from, to);
	double		remote = mop_xp_remote_share(coord.ds);

	for (int i = from; i < to; i++)
	{
		hints[i] = 0;
		if (configs[i - from] == NULL || mop_sched_started(s, i) || mop_sched_remaining(s, i) == 0)
			continue;
		CHECK_FOR_INTERRUPTS();
		hints[i] = model_hint(i, configs[i - from],
							  !measuring_over && n_measured < HINT_MAX_MEASURED, remote);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/* A new scheduler: it is given every hint again. */
void
coord_cost_hints_forget(void)
{
	given_to = NULL;
	n_given = 0;
}

/*
 * Give the scheduler the profiled cost of every model it has that has
 * none yet (longest-first only, on the CPU): those of new models are
 * looked up first, in a transaction of their own.  A rebuilt scheduler
 * gets them all again.
 */
void
coord_cost_hints(mop_sched *s)
{
	int			n = mop_sched_n_models(s);

	if (coord.run->opts.scheduler != MOP_PICK_LONGEST || coord.run->opts.gpu ||
		n > coord.n_models)
		return;
	if (s != given_to)
		coord_cost_hints_forget();
	given_to = s;
	if (n_given < n)
	{
		if (n > cap)
		{
			int			newcap = Max(n, Max(2 * cap, 16));

			hints = hints ? repalloc(hints, sizeof(double) * newcap) :
				MemoryContextAlloc(TopMemoryContext, sizeof(double) * newcap);
			cap = newcap;
		}
		if (n_known < n)
		{
			coord_begin_tx();
			profile_models(s, n_known, n);
			coord_commit_tx();
			n_known = n;
		}
		for (int i = n_given; i < n; i++)
			if (hints[i] > 0)
				mop_sched_set_cost_hint(s, i, hints[i]);
		n_given = n;
	}
	/* the first models are assigned now: from here on, workers train */
	if (n > 0)
		measuring_over = true;
}
