/*
 * coord_hints.c -- what a model's sub-epoch is expected to cost, from the
 * planner's profiles, for the longest-first scheduler.
 *
 * The longest-first policy (MOP_PICK_LONGEST) starts the model with the
 * most work left.  What a sub-epoch of a model costs is only observed once
 * it has trained one; before that, each model's cost is its profile's
 * (explain.c: a few minibatches on the dataset's first buffer, cached in
 * mop.profiles, so a second run of the dataset measures nothing), for the
 * threads each of the run's workers gets.  The scheduler calibrates these
 * hints against the sub-epochs it observes (mop_sched_set_cost_hint).
 *
 * The profiles are taken in a subtransaction of the coordinator's own:
 * a model that cannot be profiled gets no hint (and fails, if it must, when
 * it trains), never the run.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "coordinator.h"
#include "explain_internal.h"

/* hints[i]: model i's expected sub-epoch in seconds (0: none); TopMemoryContext */
static double *hints = NULL;
static int	n_known = 0;		/* models whose hint was looked for */
static int	cap = 0;
/* the scheduler the hints were given to, and how many */
static const mop_sched *given_to = NULL;
static int	n_given = 0;

/* The configurations of models from..to-1 (mop.models.config), in order. */
static List *
model_configs(int from, int to)
{
	Datum	   *ids = palloc(sizeof(Datum) * (to - from));
	Oid			t[1] = {INT8ARRAYOID};
	Datum		v[1];
	List	   *configs = NIL;

	for (int i = from; i < to; i++)
		ids[i - from] = Int64GetDatum(coord.models[i].id);
	v[0] = PointerGetDatum(construct_array(ids, to - from, INT8OID, sizeof(int64), true,
										   TYPALIGN_DOUBLE));
	if (SPI_execute_with_args("SELECT m.config FROM pg_catalog.unnest($1) WITH ORDINALITY u(id, k) "
							  "JOIN mop.models m ON m.id OPERATOR(pg_catalog.=) u.id ORDER BY u.k",
							  1, t, v, NULL, true, 0) != SPI_OK_SELECT ||
		SPI_processed != (uint64) (to - from))
		elog(ERROR, "mop run %lld: could not read the configurations of models %d to %d",
			 (long long) coord.run->run_id, from, to - 1);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);

		if (isnull)
			elog(ERROR, "mop run %lld: model %d has no configuration",
				 (long long) coord.run->run_id, from + (int) r);
		configs = lappend(configs, DatumGetJsonbPCopy(d));
	}
	return configs;
}

/* Look up the hints of models from..to-1 (in a transaction). */
static void
profile_models(int from, int to)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "mop cost hints",
											  ALLOCSET_DEFAULT_SIZES),
				old = MemoryContextSwitchTo(cxt);
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		List	   *configs = model_configs(from, to);
		ConfigCost *c;
		double		remote = mop_xp_remote_share(coord.ds);
		int			n;

		n = mop_xp_cost_configs(coord.ds, configs, Max(coord.run->opts.epochs, 1), 0, &c);
		for (int i = 0; i < n; i++)
		{
			double		sub = 0;

			(void) mop_xp_epoch_at(coord.ds, &c[i], coord.n_workers, remote, &sub);
			hints[from + i] = sub > 0 ? sub : 0;
		}
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		elog(DEBUG1, "mop run %lld: cost hints for models %d to %d (%d profiles measured, %d cached)",
			 (long long) coord.run->run_id, from, to - 1, mop_xp_cost_measured, mop_xp_cost_cached);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ereport(LOG,
				(errmsg("mop run %lld: models %d to %d could not be profiled for the longest-first scheduler: %s",
						(long long) coord.run->run_id, from, to - 1, ed->message),
				 errdetail("They are ranked by the sub-epochs observed instead.")));
		for (int i = from; i < to; i++)
			hints[i] = 0;
	}
	PG_END_TRY();
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
 * none yet (longest-first only): those of new models are looked up first,
 * in a transaction of their own.  A rebuilt scheduler gets them all again.
 */
void
coord_cost_hints(mop_sched *s)
{
	int			n = mop_sched_n_models(s);

	if (coord.run->opts.scheduler != MOP_PICK_LONGEST || n > coord.n_models)
		return;
	if (s != given_to)
		coord_cost_hints_forget();
	given_to = s;
	if (n_given >= n)
		return;
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
		profile_models(n_known, n);
		coord_commit_tx();
		n_known = n;
	}
	for (int i = n_given; i < n; i++)
		if (hints[i] > 0)
			mop_sched_set_cost_hint(s, i, hints[i]);
	n_given = n;
}
