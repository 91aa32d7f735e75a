/*
 * resume.c -- mop_resume and mop_replay: a new run segment for an existing
 * run.
 *
 *   mop_resume(run_id, workers, wait, add, device)   continue a run that was
 *       cancelled, failed or interrupted (each model from its last
 *       checkpoint), or train more configurations in it (add);
 *   mop_replay(run_id, workers, wait, device)   train the configurations of
 *       a finished run again in the recorded order.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "runreq.h"

/* ERROR if run run_id still has processes (its segment says it is not done). */
static void
refuse_live_run(int64 run_id, bool has_handle, int64 handle)
{
	dsm_segment *seg;
	bool		live;

	if (!has_handle || (seg = mop_run_attach(run_id, handle)) == NULL)
		return;
	live = mop_run_phase(mop_run_shared(seg)) != MOP_PHASE_DONE;
	dsm_detach(seg);
	if (live)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld is still running", (long long) run_id),
				 errhint("Wait for it with mop_wait(%lld) or stop it with mop_cancel(%lld).",
						 (long long) run_id, (long long) run_id)));
}

/*
 * An adaptive run's kind (*kind, NULL for grid, random and replay runs) and
 * search space (*space, NULL if none), and the configurations its driver
 * draws from, drawn again from the space and seed the run recorded; NIL when
 * it has no driver or no space.  The space is allocated in cxt.
 */
static List *
adaptive_configs(int64 run_id, MemoryContext cxt, const char **kind, Jsonb **space)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(run_id);
	bool		isnull;
	MopRunOptions o;
	List	   *configs = NIL;

	*kind = NULL;
	*space = NULL;
	o = mop_run_option_defaults;
	SPI_connect();
	SPI_execute_with_args("SELECT options, space, seed FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1",
						  1, &t, &v, NULL, false, 1);
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	td = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(cxt);
		Datum		d;

		d = SPI_getbinval(tup, td, 1, &isnull);
		mop_run_options_parse(isnull ? NULL : DatumGetJsonbP(d), &o);
		d = SPI_getbinval(tup, td, 2, &isnull);
		*space = isnull ? NULL : DatumGetJsonbPCopy(d);
		d = SPI_getbinval(tup, td, 3, &isnull);
		o.seed = isnull ? 0 : DatumGetInt32(d);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	*kind = mop_run_kind_name(o.kind);
	if (*kind && *space)
	{
		int32		trials = o.trials;

		if (o.kind == MOP_KIND_HYPERBAND)
			trials += mop_hyperband_trials(o.max_resource, o.eta, o.hb_brackets);
		configs = mop_space_random(*space, trials, (uint64) o.seed);
	}
	return configs;
}

/*
 * Configurations added to a run are ranked with its models: they must be
 * measured by the same metric.
 */
static void
check_added_metric(int64 run_id, List *added, const MopDataset *ds)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(run_id);
	char	   *metric = NULL;
	bool		isnull;
	int			i = 0;
	ListCell   *lc;

	SPI_connect();
	if (SPI_execute_with_args("SELECT DISTINCT m.metric FROM mop.models m "
							  "WHERE m.run_id OPERATOR(pg_catalog.=) $1",
							  1, &t, &v, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the models of run %lld", (long long) run_id);
	if (SPI_processed == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			metric = MemoryContextStrdup(CurTransactionContext, TextDatumGetCString(d));
	}
	SPI_finish();
	if (metric == NULL)
		return;
	foreach(lc, added)
	{
		nn_spec		spec;
		const char *m;

		i++;
		mop_config_to_spec((Jsonb *) lfirst(lc), ds, 1, &spec);
		m = nn_metric_name(spec.metric);
		if (strcmp(m, metric) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("configuration %d of add => is measured by %s, the models of run %lld by %s",
							i, m, (long long) run_id, metric),
					 errhint("Models of one run are ranked together: give the added configurations \"metric\": \"%s\".",
							 metric)));
	}
}

/* mop_resume(run_id bigint, workers int, wait bool, add jsonb): continue a run. */
static Datum
mop_resume_body(PG_FUNCTION_ARGS)
{
	int64		run_id = PG_GETARG_INT64(0);
	bool		adding = PG_NARGS() > 3 && !PG_ARGISNULL(3);
	char	   *status,
			   *dataset;
	const char *kind;
	int			partitions;
	int64		handle;
	bool		has_handle;
	Jsonb	   *space;
	List	   *added;
	RunRequest	req;

	(void) mop_mark_interrupted_except(run_id);
	mop_run_row(run_id, &status, &dataset, &partitions, &handle, &has_handle);
	refuse_live_run(run_id, has_handle, handle);
	if (strcmp(status, "done") == 0 && !adding)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has already finished", (long long) run_id),
				 errhint("Pass add => a search space to train more configurations in it.")));
	/* adaptive runs: regenerate the configurations the driver draws from */
	added = adaptive_configs(run_id, fcinfo->flinfo->fn_mcxt, &kind, &space);
	if (kind && adding)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("configurations cannot be added to a %s run", kind),
				 errhint("add => extends grid and random runs; a %s run decides its configurations itself.",
						 kind)));
	if (!(kind && space))
	{
		space = NULL;
		if (adding)
		{
			/* add configurations to the run (a finished one too) */
			MopDataset *ds = mop_dataset_lookup(dataset, false);

			added = mop_space_grid(PG_GETARG_JSONB_P(3));
			/* any epoch count validates: the run's own is applied when a model is created */
			mop_validate_configs(added, ds, 1);
			check_added_metric(run_id, added, ds);
		}
	}
	mop_request_init(&req, fcinfo, "resume", dataset, space, added,
					 0, partitions, 1, 2);
	req.resume_run_id = run_id;
	return mop_run_search(fcinfo, &req);
}

/*
 * mop_replay(run_id bigint, workers int, wait bool): train the configurations
 * of a finished run again, each model visiting the partitions in exactly the
 * order recorded in mop.hops (a PBT member from its starting configuration,
 * making its recorded exploits again where they were made:
 * coord_pbt_replay_exploits); the new models are bit-identical to the old.
 */
static Datum
mop_replay_body(PG_FUNCTION_ARGS)
{
	int64		run_id = PG_GETARG_INT64(0);
	char	   *status,
			   *dataset;
	int			partitions;
	int64		handle;
	bool		has_handle;
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(run_id);
	List	   *configs = NIL;
	Jsonb	   *space = NULL;
	int			epochs = 0;
	MemoryContext cxt = CurrentMemoryContext;
	MopRunOptions recorded;
	RunRequest	req;

	mop_run_row(run_id, &status, &dataset, &partitions, &handle, &has_handle);
	if (strcmp(status, "done") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld is %s; only a finished run can be replayed", (long long) run_id, status),
				 errhint("Finish it first with mop_resume(%lld).", (long long) run_id)));
	SPI_connect();
	/*
	 * A PBT run's exploits are made again from the points where they were
	 * made: an asynchronous run's parent may have been between two epochs,
	 * and a run recorded without that point cannot be followed.
	 */
	if (SPI_execute_with_args("SELECT options FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1",
							  1, &t, &v, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the options of run %lld", (long long) run_id);
	{
		bool		isnull;
		Datum		o = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		mop_run_options_parse(isnull ? NULL : DatumGetJsonbP(o), &recorded);
	}
	/* a deterministic run's parents waited at the barrier: nothing to check */
	if (!recorded.deterministic &&
		SPI_execute_with_args(mop_catalog_is_02() ?
							  "SELECT 1 FROM mop.decisions d "
							  "WHERE d.run_id OPERATOR(pg_catalog.=) $1 AND d.action OPERATOR(pg_catalog.=) 'exploit' "
							  "AND d.parent_subepochs IS NULL LIMIT 1" :
							  /* a 0.1 catalog records no parent_subepochs */
							  "SELECT 1 FROM mop.decisions d "
							  "WHERE d.run_id OPERATOR(pg_catalog.=) $1 AND d.action OPERATOR(pg_catalog.=) 'exploit' "
							  "LIMIT 1",
							  1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the decisions of run %lld", (long long) run_id);
	if (!recorded.deterministic && SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("run %lld cannot be replayed bit for bit", (long long) run_id),
				 errdetail("Its PBT exploits were recorded without the sub-epochs of the parent checkpoints they copied (mop.decisions.parent_subepochs)."),
				 errhint("PBT runs with deterministic => true, and runs that recorded parent_subepochs, can be replayed.")));
	/* each model from its starting configuration (a PBT member's 'new' decision) */
	if (SPI_execute_with_args("SELECT COALESCE((SELECT d.hyperparameters FROM mop.decisions d "
							  " WHERE d.model_id OPERATOR(pg_catalog.=) m.id AND d.action OPERATOR(pg_catalog.=) 'new' "
							  " AND d.hyperparameters IS NOT NULL ORDER BY d.id LIMIT 1), m.config), "
							  "r.epochs, r.space FROM mop.models m "
							  "JOIN mop.runs r ON r.id OPERATOR(pg_catalog.=) m.run_id "
							  "WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY m.id",
							  1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the models of run %lld", (long long) run_id);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(cxt);

		configs = lappend(configs, DatumGetJsonbPCopy(SPI_getbinval(SPI_tuptable->vals[i],
																	SPI_tuptable->tupdesc, 1, &isnull)));
		epochs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		if (i == 0)
		{
			Datum		sp = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull);

			if (!isnull)
				space = DatumGetJsonbPCopy(sp);
		}
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	if (configs == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has no models to replay", (long long) run_id)));
	mop_request_init(&req, fcinfo, "replay", dataset, space, configs,
					 Max(epochs, 1), partitions, 1, 2);
	req.opts.replay_of = run_id;
	return mop_run_search(fcinfo, &req);
}

/* The SQL-callable functions; the last argument of each is device => . */
MOP_SEARCH_ENTRY(mop_resume, 4, mop_resume_body);

/*
 * mop_resume(name text, ...): the same for the caller's run of that name
 * (the name becomes the run's id, argument 0).
 */
static Datum
mop_resume_by_name_body(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the run's name must not be null")));
	fcinfo->args[0].value =
		Int64GetDatum(mop_run_id_by_name_or_error(text_to_cstring(PG_GETARG_TEXT_PP(0))));
	return mop_resume_body(fcinfo);
}

MOP_SEARCH_ENTRY(mop_resume_by_name, 4, mop_resume_by_name_body);
MOP_SEARCH_ENTRY(mop_replay, 3, mop_replay_body);
