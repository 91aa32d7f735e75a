/*
 * coord_catalog.c -- the catalog reads and writes of a run's coordinator:
 * its transactions, creating the run and its models, the decisions it
 * records in mop.decisions, and the statuses of the run and its models.
 *
 * Every statement runs through SPI in a transaction of the coordinator's
 * own (coord_begin_tx, coord_commit_tx), which takes the dataset's row and
 * then the run's, as lockorder.h requires.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "coordinator.h"
#include "lockorder.h"
#include "subepoch.h"

/* SPI statement or ERROR. */
void
coord_exec_sql(const char *sql, int nargs, Oid *types, Datum *vals, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, vals, NULL, false, 0);

	if (rc != expect)
		elog(ERROR, "mop coordinator: query failed (%s): %s", SPI_result_code_string(rc), sql);
}

void
coord_begin_tx(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	/*
	 * Lock order (lockorder.h): the dataset's row, then the run's, before
	 * any model or decision (a new model's insert needs the dataset's row,
	 * a decision's the run's).  Rows already gone are not an error here.
	 */
	if (coord.run->run_id != 0 && coord.ds != NULL)
	{
		(void) mop_lock_dataset_row(coord.ds->id);
		(void) mop_lock_run_row(coord.run->run_id);
	}
}

void
coord_commit_tx(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* Configuration i of the run's segment (MOP_KEY_CONFIGS), as JSON text. */
const char *
coord_config(int i)
{
	const MopRunConfigs *c = mop_run_configs(coord.seg);

	Assert(i >= 0 && i < c->n_configs);
	return MOP_RUN_CONFIG(c, i);
}

/*
 * Insert model i (configuration i of the run's segment) with a fresh checkpoint,
 * to be trained to `target` epochs; inside the caller's transaction.
 */
void
coord_insert_model(int64 run_id, int i, int32 target)
{
	Jsonb	   *config;
	nn_spec		spec;
	Oid			t[6];
	Datum		v[6];
	bool		isnull;

	if (i >= coord.run->n_configs)
		elog(ERROR, "mop run %lld: trial %d has no configuration", (long long) run_id, i);
	config = (coord.proposed && coord.proposed[i]) ? coord.proposed[i] :
		DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(coord_config(i))));
	t[0] = INT8OID;
	v[0] = Int64GetDatum(run_id);
	t[1] = INT8OID;
	v[1] = Int64GetDatum(coord.ds->id);
	t[2] = JSONBOID;
	v[2] = JsonbPGetDatum(config);
	t[3] = BYTEAOID;
	v[3] = PointerGetDatum(mop_model_initial_state(config, coord.ds, coord.run->opts.epochs, &spec));
	if (coord.run->opts.warm_start)
	{
		/* warm start: the latest checkpoint of the same configuration */
		Oid			wt[3] = {INT8OID, JSONBOID, INT8OID};
		Datum		wv[3] = {Int64GetDatum(coord.run->opts.warm_start), JsonbPGetDatum(config),
		Int64GetDatum(coord.ds->id)};

		coord_exec_sql("SELECT state FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $1 "
				 "AND config OPERATOR(pg_catalog.=) $2 AND dataset_id OPERATOR(pg_catalog.=) $3 "
				 "AND state IS NOT NULL "
				 "AND status OPERATOR(pg_catalog.<>) ALL ('{diverged,failed}'::text[]) "
				 "ORDER BY epochs_done DESC, id LIMIT 1", 3, wt, wv, SPI_OK_SELECT);
		if (SPI_processed == 1)
			v[3] = PointerGetDatum(DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0],
																	SPI_tuptable->tupdesc, 1,
																	&isnull)));
	}
	t[4] = TEXTOID;
	v[4] = CStringGetTextDatum(nn_metric_name(spec.metric));
	t[5] = BOOLOID;
	v[5] = BoolGetDatum(nn_metric_higher_is_better(spec.metric));
	coord_exec_sql("INSERT INTO mop.models (run_id, dataset_id, config, status, state, metric, "
			 "higher_is_better) VALUES ($1, $2, $3, 'training', $4, $5, $6) RETURNING id",
			 6, t, v, SPI_OK_INSERT_RETURNING);
	coord.models[i].id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
	coord.models[i].target = target;
	if (i == 0)
	{
		SpinLockAcquire(&coord.run->mutex);
		coord.run->higher_is_better = nn_metric_higher_is_better(spec.metric);
		SpinLockRelease(&coord.run->mutex);
	}
	coord.n_models = Max(coord.n_models, i + 1);
}

/* Create the run and its models (new run), committed. */
void
coord_create_run(void)
{
	const char *kind = mop_run_string(coord.seg, MOP_KEY_KIND);
	const char *dsname = mop_run_string(coord.seg, MOP_KEY_DATASET);
	const char *space = mop_run_string(coord.seg, MOP_KEY_SPACE);
	MopDataset *ds;
	Oid			t[8];
	Datum		v[8];
	bool		isnull;
	int64		run_id;
	MopRunOptions opts = coord.run->opts;

	coord_begin_tx();
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		ds = coord.ds = mop_dataset_lookup(dsname, true);
		MemoryContextSwitchTo(old);
	}
	if (ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dataset \"%s\" is not visible to the run's workers", dsname),
				 errhint("Background workers see only committed data: commit mop_prepare() before starting a search.")));
	/* lock order (lockorder.h): the dataset's row first; a drop may have won */
	if (!mop_lock_dataset_row(ds->id))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dataset \"%s\" was dropped before the run could start", dsname)));
	coord.n_partitions = ds->partitions;
	/* deterministic TPE proposes a batch of trials per worker that can run */
	if (opts.kind == MOP_KIND_TPE && opts.deterministic)
		opts.tpe_batch = Min(coord.run->n_workers, coord.n_partitions);
	t[0] = TEXTOID;
	v[0] = CStringGetTextDatum(kind);
	t[1] = INT8OID;
	v[1] = Int64GetDatum(ds->id);
	t[2] = JSONBOID;
	v[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(space));
	t[3] = INT4OID;
	v[3] = Int32GetDatum(coord.run->opts.epochs);
	t[4] = INT4OID;
	v[4] = Int32GetDatum(coord.run->n_workers);
	t[5] = INT4OID;
	v[5] = Int32GetDatum(coord.run->opts.seed);
	t[6] = INT8OID;
	v[6] = Int64GetDatum((int64) dsm_segment_handle(coord.seg));
	t[7] = JSONBOID;
	v[7] = JsonbPGetDatum(mop_run_options_jsonb(&opts));
	coord_exec_sql("INSERT INTO mop.runs (kind, dataset_id, space, epochs, workers, seed, status, "
			 "shm_handle, options) VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8) RETURNING id",
			 8, t, v, SPI_OK_INSERT_RETURNING);
	run_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	coord.run_id = run_id;
	{
		/* its name and tags (checked by the search function; a name taken since fails here) */
		const char *name = mop_run_string(coord.seg, MOP_KEY_NAME);
		const char *tags = mop_run_string(coord.seg, MOP_KEY_TAGS);

		if ((name[0] != '\0' || tags[0] != '\0') && mop_catalog_has_run_names())
		{
			Oid			nt[3] = {INT8OID, TEXTOID, JSONBOID};
			Datum		nv[3];
			char		nn[3] = {' ', name[0] ? ' ' : 'n', tags[0] ? ' ' : 'n'};

			nv[0] = Int64GetDatum(run_id);
			nv[1] = name[0] ? CStringGetTextDatum(name) : (Datum) 0;
			nv[2] = tags[0] ? DirectFunctionCall1(jsonb_in, CStringGetDatum(tags)) : (Datum) 0;
			if (SPI_execute_with_args("UPDATE mop.runs SET name = $2, tags = $3 "
									  "WHERE id OPERATOR(pg_catalog.=) $1",
									  3, nt, nv, nn, false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "could not name run %lld", (long long) run_id);
		}
	}

	coord.models = MemoryContextAllocZero(TopMemoryContext,
										  sizeof(CoordModel) * Max(coord.run->n_configs, 1));
	coord.n_models = 0;
	if (coord.run->opts.kind == MOP_KIND_FIXED || coord.run->opts.kind == MOP_KIND_PBT)
		for (int i = 0; i < coord.run->n_configs; i++)
			coord_insert_model(run_id, i, coord.run->opts.epochs);
	if (coord.run->opts.kind == MOP_KIND_PBT)
	{
		/* a PBT member's starting configuration opens its lineage */
		for (int i = 0; i < coord.n_models; i++)
		{
			mop_decision d;

			mop_decision_init(&d, MOP_WHY_START, i);
			d.from_resource = 0;
			strlcpy(d.reason, "PBT member drawn from the space", sizeof(d.reason));
			coord_record_decision("new", "start", i, &d, 0, -1,
								  DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																	 CStringGetDatum(coord_config(i)))));
		}
	}
	coord_commit_tx();
	SpinLockAcquire(&coord.run->mutex);
	coord.run->run_id = run_id;
	SpinLockRelease(&coord.run->mutex);
}

/*
 * Was the hop of task t committed (worker died after commit)?  If so, and
 * it ended an epoch, *vm and *vl get the validation recorded with it (NaN
 * where none).
 */
bool
coord_hop_committed(const mop_task *t, double *vm, double *vl)
{
	Oid			ty[3] = {INT8OID, INT4OID, INT4OID};
	Datum		v[3];
	bool		found;

	*vm = NAN;
	*vl = NAN;

	coord_begin_tx();
	v[0] = Int64GetDatum(coord.models[t->model].id);
	v[1] = Int32GetDatum(t->epoch + 1);
	v[2] = Int32GetDatum(t->partition);
	coord_exec_sql("SELECT 1 FROM mop.hops WHERE model_id OPERATOR(pg_catalog.=) $1 "
			 "AND epoch OPERATOR(pg_catalog.=) $2 AND partition OPERATOR(pg_catalog.=) $3",
			 3, ty, v, SPI_OK_SELECT);
	found = SPI_processed > 0;
	if (found && t->last_of_epoch)
		mop_subepoch_recorded_validation(coord.models[t->model].id, t->epoch + 1, vl, vm);
	coord_commit_tx();
	return found;
}

/*
 * The status a run ended with when nobody cancelled it: "done", unless no
 * model ended usable (done, stopped or diverged) and some failed -- then
 * "failed", with the first model's error, so that a run of failures does
 * not look like a success.
 */
const char *
coord_final_status(char **error)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(coord.run->run_id);
	bool		isnull;
	int64		usable,
				failed;
	const char *result = "done";

	*error = NULL;
	if (coord.run->run_id == 0)
		return result;
	coord_begin_tx();
	coord_exec_sql("SELECT pg_catalog.count(*) FILTER (WHERE m.status OPERATOR(pg_catalog.=) "
			 "ANY ('{done,stopped,diverged}'::text[])), "
			 "pg_catalog.count(*) FILTER (WHERE m.status OPERATOR(pg_catalog.=) 'failed'), "
			 "(SELECT f.error FROM mop.models f WHERE f.run_id OPERATOR(pg_catalog.=) $1 "
			 " AND f.status OPERATOR(pg_catalog.=) 'failed' ORDER BY f.id LIMIT 1) "
			 "FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1",
			 1, &t, &v, SPI_OK_SELECT);
	usable = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	failed = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (usable == 0 && failed > 0)
	{
		Datum		e = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		*error = psprintf("every model failed; the first: %s",
						  isnull ? "no error recorded" : TextDatumGetCString(e));
		MemoryContextSwitchTo(old);
		result = "failed";
	}
	coord_commit_tx();
	return result;
}

/*
 * Record a decision in mop.decisions, inside the caller's transaction: the
 * one writer of that table (through coord_record_decision and
 * coord_record_exploit).  action and why as the table has them; d's
 * numbers, NULL where not relevant (negative counts and resources, scores
 * that are not finite); to_resource NULL when negative; parent the PBT
 * member whose checkpoint was copied (-1: none) and parent_subepochs the
 * sub-epochs of that checkpoint (-1: none); hyperparameters NULL unless the
 * decision set them.
 */
static void
record_decision(const char *action, const char *why, int32 trial,
				const mop_decision *d, int32 to_resource, int32 parent,
				int32 parent_subepochs, Jsonb *hyperparameters)
{
	Oid			t[17] = {INT8OID, INT8OID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID,
	INT4OID, INT4OID, INT4OID, FLOAT8OID, FLOAT8OID, INT4OID, INT4OID, INT8OID, JSONBOID, INT4OID};
	Datum		v[17];
	char		n[17];
	int32		ints[5] = {d->bracket, d->rung, d->rank, d->rung_size, d->keep};

	memset(n, ' ', sizeof(n));
	v[0] = Int64GetDatum(coord.run_id);
	v[1] = Int64GetDatum(coord.models[trial].id);
	v[2] = CStringGetTextDatum(action);
	v[3] = CStringGetTextDatum(why);
	v[4] = CStringGetTextDatum(d->reason);
	for (int i = 0; i < 5; i++)
	{
		v[5 + i] = Int32GetDatum(ints[i]);
		n[5 + i] = ints[i] < 0 ? 'n' : ' ';
	}
	v[10] = Float8GetDatum(isfinite(d->score) ? d->score : 0.0);
	n[10] = isfinite(d->score) ? ' ' : 'n';
	v[11] = Float8GetDatum(isfinite(d->cutoff) ? d->cutoff : 0.0);
	n[11] = isfinite(d->cutoff) ? ' ' : 'n';
	v[12] = Int32GetDatum(d->from_resource);
	n[12] = d->from_resource < 0 ? 'n' : ' ';
	v[13] = Int32GetDatum(to_resource);
	n[13] = to_resource < 0 ? 'n' : ' ';
	v[14] = Int64GetDatum(parent >= 0 ? coord.models[parent].id : 0);
	n[14] = parent >= 0 ? ' ' : 'n';
	v[15] = hyperparameters ? JsonbPGetDatum(hyperparameters) : (Datum) 0;
	n[15] = hyperparameters ? ' ' : 'n';
	v[16] = Int32GetDatum(parent_subepochs);
	n[16] = parent_subepochs < 0 ? 'n' : ' ';
	/* a 0.1 catalog has no parent_subepochs ($17 goes unused) */
	if (SPI_execute_with_args(mop_catalog_is_02() ?
							  "INSERT INTO mop.decisions (run_id, model_id, action, why, reason, "
							  "bracket, rung, rank, rung_size, keep, score, cutoff, "
							  "from_resource, to_resource, parent_model_id, hyperparameters, "
							  "parent_subepochs) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, "
							  "$14, $15, $16, $17)" :
							  "INSERT INTO mop.decisions (run_id, model_id, action, why, reason, "
							  "bracket, rung, rank, rung_size, keep, score, cutoff, "
							  "from_resource, to_resource, parent_model_id, hyperparameters) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, "
							  "$14, $15, $16)",
							  17, t, v, n, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record a decision of run %lld", (long long) coord.run_id);
}

void
coord_record_decision(const char *action, const char *why, int32 trial,
					  const mop_decision *d, int32 to_resource, int32 parent,
					  Jsonb *hyperparameters)
{
	record_decision(action, why, trial, d, to_resource, parent, -1, hyperparameters);
}

/*
 * Record a PBT exploit of member `trial`, inside the caller's transaction:
 * d's numbers, the parent's epochs (to_resource) and the sub-epochs of the
 * parent's checkpoint it copied (parent_subepochs: where mop_replay copies
 * it again), and the explored configuration.
 */
void
coord_record_exploit(int32 trial, const mop_decision *d, int32 parent, int32 parent_epochs,
					 int32 parent_subepochs, Jsonb *config)
{
	record_decision("exploit", mop_why_name(MOP_WHY_EXPLOIT), trial, d, parent_epochs, parent,
					parent_subepochs, config);
}

/*
 * Record a result told to a driver (a 'report' row of mop.decisions), in
 * the caller's transaction: replaying these rows in order into a fresh
 * driver rebuilds its state when the run is resumed.
 */
void
coord_record_report(int32 trial, int32 resource, double score, const char *reason)
{
	mop_decision d;

	mop_decision_init(&d, MOP_WHY_START, trial);	/* (only its numbers are used) */
	d.score = score;
	d.from_resource = resource;
	strlcpy(d.reason, reason, sizeof(d.reason));
	coord_record_decision("report", "report", trial, &d, -1, -1, NULL);
}

/*
 * The one writer of statuses, inside the caller's transaction.
 *
 * trial >= 0: model `trial` (while it is done or training) becomes
 * `status`: training again (promoted), done (finished) or stopped.
 *
 * trial < 0: the run.  'running': it is resumed by this coordinator, and
 * its models that a cancel, failure or restart stopped mid-way train again.
 * Any other status is final, with its error (or NULL); the models of a
 * cancelled or failed run that were still training become 'cancelled'.
 */
void
coord_set_status(int32 trial, const char *status, const char *error)
{
	Oid			t[3] = {INT8OID, TEXTOID, TEXTOID};
	Datum		v[3];
	char		nulls[3] = {' ', ' ', error ? ' ' : 'n'};

	v[1] = CStringGetTextDatum(status);
	v[2] = error ? CStringGetTextDatum(error) : (Datum) 0;
	if (trial >= 0)
	{
		v[0] = Int64GetDatum(coord.models[trial].id);
		coord_exec_sql("UPDATE mop.models SET status = $2, "
					   "updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1 "
					   "AND status OPERATOR(pg_catalog.=) ANY ('{done,training}'::text[])",
					   2, t, v, SPI_OK_UPDATE);
		return;
	}
	v[0] = Int64GetDatum(coord.run_id);
	if (strcmp(status, "running") == 0)
	{
		Oid			rt[4] = {INT8OID, INT8OID, TEXTOID, INT4OID};
		Datum		rv[4];

		rv[0] = v[0];
		rv[1] = Int64GetDatum((int64) dsm_segment_handle(coord.seg));
		/* a resumed run trains where the resuming session said: record it */
		rv[2] = CStringGetTextDatum(coord.run->opts.gpu ? "gpu" : "cpu");
		/* ... and how often it commits (mop.checkpoint_every, recorded above 1) */
		rv[3] = Int32GetDatum(coord.run->opts.checkpoint_every);
		coord_exec_sql("UPDATE mop.models SET status = 'training' WHERE run_id OPERATOR(pg_catalog.=) $1 "
					   "AND status OPERATOR(pg_catalog.=) ANY ('{cancelled,interrupted}'::pg_catalog.text[])",
					   1, rt, rv, SPI_OK_UPDATE);
		coord_exec_sql("UPDATE mop.runs SET status = 'running', error = NULL, finished_at = NULL, "
					   "shm_handle = $2, options = CASE WHEN $4 OPERATOR(pg_catalog.>) 1 "
					   "THEN pg_catalog.jsonb_set(pg_catalog.jsonb_set(options, '{device}', "
					   "pg_catalog.to_jsonb($3)), '{checkpoint_every}', pg_catalog.to_jsonb($4)) "
					   "ELSE (pg_catalog.jsonb_set(options, '{device}', pg_catalog.to_jsonb($3)) "
					   "OPERATOR(pg_catalog.-) 'checkpoint_every'::pg_catalog.text) END "
					   "WHERE id OPERATOR(pg_catalog.=) $1", 4, rt, rv, SPI_OK_UPDATE);
		if (mop_catalog_has_run_names())
			coord_exec_sql("UPDATE mop.runs SET note = NULL WHERE id OPERATOR(pg_catalog.=) $1",
						   1, rt, rv, SPI_OK_UPDATE);
		return;
	}
	if (SPI_execute_with_args("UPDATE mop.runs SET status = $2, error = $3, "
							  "finished_at = pg_catalog.clock_timestamp(), shm_handle = NULL "
							  "WHERE id OPERATOR(pg_catalog.=) $1",
							  3, t, v, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the status of run %lld", (long long) coord.run_id);
	if ((strcmp(status, "cancelled") == 0 || strcmp(status, "failed") == 0) &&
		SPI_execute_with_args(MOP_CANCEL_MODELS_SQL, 1, t, v, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the status of the models of run %lld",
			 (long long) coord.run_id);
	if (strcmp(status, "interrupted") == 0 &&
		SPI_execute_with_args(MOP_INTERRUPT_MODELS_SQL, 1, t, v, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the status of the models of run %lld",
			 (long long) coord.run_id);
}

/*
 * Add this start's training time to the run's time_used (what its
 * time_budget counts) and record its note (NULL: none), inside the caller's
 * transaction.  A catalog without these columns records nothing.
 */
void
coord_record_time(double seconds, const char *note)
{
	Oid			t[3] = {INT8OID, FLOAT8OID, TEXTOID};
	Datum		v[3];
	char		n[3] = {' ', ' ', note ? ' ' : 'n'};

	if (!mop_catalog_has_run_names())
		return;
	v[0] = Int64GetDatum(coord.run_id);
	v[1] = Float8GetDatum(Max(seconds, 0.0));
	v[2] = note ? CStringGetTextDatum(note) : (Datum) 0;
	if (SPI_execute_with_args("UPDATE mop.runs SET note = $3, time_used = "
							  "COALESCE(time_used, '0'::pg_catalog.interval) OPERATOR(pg_catalog.+) "
							  "pg_catalog.make_interval(secs => $2) "
							  "WHERE id OPERATOR(pg_catalog.=) $1",
							  3, t, v, n, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the time used by run %lld", (long long) coord.run_id);
}

/*
 * The run's time budget is spent and its workers have stopped: each model
 * still training is stopped where its last committed sub-epoch left it
 * (status 'stopped', a 'stop' decision with why 'time_budget'), in one
 * transaction.  Returns how many were stopped.
 */
int
coord_budget_stop_models(void)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(coord.run_id)};
	int			n,
				stopped = 0;
	int64	   *ids;
	int32	   *epochs;
	bool		isnull;

	coord_begin_tx();
	coord_exec_sql("SELECT m.id, m.epochs_done FROM mop.models m "
				   "WHERE m.run_id OPERATOR(pg_catalog.=) $1 AND m.status OPERATOR(pg_catalog.=) 'training' "
				   "ORDER BY m.id", 1, t, v, SPI_OK_SELECT);
	n = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(n, 1));
	epochs = palloc(sizeof(int32) * Max(n, 1));
	for (int r = 0; r < n; r++)
	{
		ids[r] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));
		epochs[r] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &isnull));
	}
	for (int r = 0; r < n; r++)
		for (int i = 0; i < coord.n_models; i++)
		{
			mop_decision d;

			if (coord.models[i].id != ids[r])
				continue;
			mop_decision_init(&d, MOP_WHY_TIME_BUDGET, i);
			d.from_resource = epochs[r];
			snprintf(d.reason, sizeof(d.reason),
					 "time budget spent: stopped after %d of %d epochs", epochs[r],
					 coord.models[i].target);
			coord_set_status(i, "stopped", NULL);
			coord_record_decision(mop_act_name(MOP_ACT_STOP), mop_why_name(MOP_WHY_TIME_BUDGET),
								  i, &d, -1, -1, NULL);
			stopped++;
			break;
		}
	coord_commit_tx();
	return stopped;
}
