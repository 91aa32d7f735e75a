/*
 * train.c -- mop_train(): train one model sequentially over all partitions.
 *
 * This is the sequential-SGD baseline that model hopper parallelism must
 * match.  For each epoch the model visits partitions 0..P-1 in order, each
 * visit being one call of the aggregate mop.train_agg through SPI (the same
 * narrow waist every other executor uses), then is evaluated on the
 * validation split with mop.eval_agg.  Each sub-epoch is recorded in
 * mop.hops (worker 0 = the calling backend), each epoch in mop.epochs, and
 * the model row in mop.models carries the latest checkpoint.  A mop.runs row
 * of kind 'train' groups them.
 *
 * Everything happens in the caller's transaction: a cancelled or failed
 * mop_train leaves nothing behind.  A model whose loss becomes NaN or Inf is
 * not an error: it is marked 'diverged', keeps its last finite checkpoint,
 * and training stops.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mop.h"

PG_FUNCTION_INFO_V1(mop_train);

/* SPI_prepare or die. */
static SPIPlanPtr
prepare_plan(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	p = SPI_prepare(sql, nargs, types);

	if (p == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	return p;
}

/* Execute plan expecting rc; returns the first column of row 0 if any. */
static Datum
exec_plan(SPIPlanPtr plan, Datum *args, const char *nulls, int expect)
{
	int			rc = SPI_execute_plan(plan, args, nulls, false, 0);
	bool		isnull;

	if (rc != expect)
		elog(ERROR, "mop_train: unexpected SPI result %s", SPI_result_code_string(rc));
	if (SPI_processed > 0 && SPI_tuptable != NULL)
		return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return (Datum) 0;
}

/* Insert a row and return its bigint id. */
static int64
insert_returning_id(const char *sql, int nargs, Oid *types, Datum *args, const char *nulls)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, args, nulls, false, 1);
	bool		isnull;

	if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "mop_train: insert failed: %s", SPI_result_code_string(rc));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* Float8 datum, or SQL NULL when the value is not finite or rows is 0. */
static Datum
mean_or_null(double sum, int64 rows, char *isnull)
{
	double		v = rows > 0 ? sum / (double) rows : NAN;

	*isnull = isfinite(v) ? ' ' : 'n';
	return Float8GetDatum(isfinite(v) ? v : 0.0);
}

/* mop_train(dataset text, config jsonb, epochs int) returns bigint model id */
static Datum
mop_train_body(PG_FUNCTION_ARGS)
{
	char	   *dsname;
	Jsonb	   *config;
	int32		epochs;
	MopDataset *ds;
	nn_spec		spec;
	ModelHandle *h;
	nn_error	err;
	nn_status	st;
	bytea	   *state;
	bytea	   *saved = NULL;	/* the state after the last epoch, not yet stored */
	bool		higher;
	const char *metric;
	int64		run_id,
				model_id;
	MemoryContext opcxt,
				oldcxt;
	SPIPlanPtr	train_plan,
				eval_plan,
				hop_plan,
				epoch_plan,
				model_plan;
	double		best = NAN;
	bool		diverged = false;
	int			diverged_partition = -1;
	int			epochs_done = 0;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dataset, config and epochs of mop_train must not be null")));
	(void) mop_device_check();
	dsname = text_to_cstring(PG_GETARG_TEXT_PP(0));
	config = PG_GETARG_JSONB_P(1);
	epochs = PG_GETARG_INT32(2);
	if (epochs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"epochs\": must be >= 1")));

	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_train",
								  ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(opcxt);

	ds = mop_dataset_lookup(dsname, false);
	mop_config_to_spec(config, ds, &spec);
	mop_blas_ensure();
	h = mop_model_handle(opcxt);
	st = nn_model_create(&spec, &h->model, &err);
	if (st != NN_OK)
		mop_nn_error(st, &err, "could not create model");
	state = mop_model_to_blob(h->model);
	mop_model_release(h);
	metric = nn_metric_name(spec.metric);
	higher = nn_metric_higher_is_better(spec.metric) != 0;

	SPI_connect();
	{
		Oid			t[3] = {INT8OID, JSONBOID, INT4OID};
		Datum		a[3] = {Int64GetDatum(ds->id), JsonbPGetDatum(config), Int32GetDatum(epochs)};

		run_id = insert_returning_id("INSERT INTO mop.runs (kind, dataset_id, space, epochs, workers, status) "
									 "VALUES ('train', $1, $2, $3, 1, 'running') RETURNING id",
									 3, t, a, NULL);
	}
	{
		Oid			t[6] = {INT8OID, INT8OID, JSONBOID, BYTEAOID, TEXTOID, BOOLOID};
		Datum		a[6] = {Int64GetDatum(run_id), Int64GetDatum(ds->id), JsonbPGetDatum(config),
		PointerGetDatum(state), CStringGetTextDatum(metric), BoolGetDatum(higher)};

		model_id = insert_returning_id("INSERT INTO mop.models (run_id, dataset_id, config, status, "
									   "epochs_done, state, metric, higher_is_better) "
									   "VALUES ($1, $2, $3, 'training', 0, $4, $5, $6) RETURNING id",
									   6, t, a, NULL);
	}
	{
		Oid			tt[3] = {BYTEAOID, INT8OID, INT4OID};
		Oid			te[2] = {BYTEAOID, INT8OID};
		Oid			th[10] = {INT8OID, INT8OID, INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID,
		TIMESTAMPTZOID, INT8OID, FLOAT8OID, FLOAT8OID};
		Oid			tp[9] = {INT8OID, INT4OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID,
		INT8OID, INT8OID, FLOAT8OID};
		Oid			tm[7] = {INT8OID, INT4OID, BYTEAOID, FLOAT8OID, FLOAT8OID, INT4OID, TEXTOID};

		train_plan = prepare_plan(MOP_TRAIN_SQL, 3, tt);
		eval_plan = prepare_plan(MOP_EVAL_SQL, 2, te);
		hop_plan = prepare_plan("INSERT INTO mop.hops (run_id, model_id, epoch, partition, worker, "
								"started_at, finished_at, rows, loss, metric) "
								"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", 10, th);
		epoch_plan = prepare_plan("INSERT INTO mop.epochs (model_id, epoch, train_loss, train_metric, "
								  "valid_loss, valid_metric, train_rows, valid_rows, seconds) "
								  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)", 9, tp);
		model_plan = prepare_plan("UPDATE mop.models SET epochs_done = $2, "
								  "state = COALESCE($3, state), "
								  "best_valid_metric = COALESCE($4, best_valid_metric), "
								  "best_valid_loss = COALESCE($5, best_valid_loss), "
								  "best_epoch = COALESCE($6, best_epoch), status = $7, "
								  "updated_at = pg_catalog.clock_timestamp() "
								  "WHERE id OPERATOR(pg_catalog.=) $1", 7, tm);
	}

	for (int epoch = 1; epoch <= epochs && !diverged; epoch++)
	{
		TimestampTz t0 = GetCurrentTimestamp();
		double		tl = 0,
					tm = 0,
					vl = 0,
					vm = 0;
		int64		trows = 0,
					vrows = 0;
		Datum		ea[9];
		char		en[9];
		Datum		ma[7];
		char		mn[7];
		bool		improved = false;
		double		vmetric = NAN,
					vloss = NAN;

		for (int p = 0; p < ds->partitions; p++)
		{
			TimestampTz h0 = GetCurrentTimestamp();
			Datum		args[3] = {PointerGetDatum(state), Int64GetDatum(ds->id), Int32GetDatum(p)};
			HeapTuple	tup;
			TupleDesc	td;
			bool		isnull;
			char	   *status;
			double		ls,
						ms;
			int64		rows;

			CHECK_FOR_INTERRUPTS();
			(void) exec_plan(train_plan, args, NULL, SPI_OK_SELECT);
			tup = SPI_tuptable->vals[0];
			td = SPI_tuptable->tupdesc;
			(void) SPI_getbinval(tup, td, 1, &isnull);
			if (isnull)
				continue;		/* an empty partition */
			ls = DatumGetFloat8(SPI_getbinval(tup, td, 2, &isnull));
			ms = DatumGetFloat8(SPI_getbinval(tup, td, 3, &isnull));
			rows = DatumGetInt64(SPI_getbinval(tup, td, 4, &isnull));
			status = TextDatumGetCString(SPI_getbinval(tup, td, 5, &isnull));
			if (strcmp(status, "diverged") == 0 || !isfinite(ls))
			{
				diverged = true;
				diverged_partition = p;
				SPI_freetuptable(SPI_tuptable);
				ereport(NOTICE,
						(errmsg("model " INT64_FORMAT " diverged in epoch %d, partition %d",
								model_id, epoch, p)));
				break;
			}
			{
				Datum		nstate = SPI_getbinval(tup, td, 1, &isnull);
				MemoryContext spi = MemoryContextSwitchTo(opcxt);
				bytea	   *copy = DatumGetByteaPCopy(nstate);

				MemoryContextSwitchTo(spi);
				if (state != saved)
					pfree(state);
				state = copy;
			}
			SPI_freetuptable(SPI_tuptable);
			tl += ls;
			tm += ms;
			trows += rows;
			{
				Datum		ha[10];
				char		hn[10];

				memset(hn, ' ', sizeof(hn));
				ha[0] = Int64GetDatum(run_id);
				ha[1] = Int64GetDatum(model_id);
				ha[2] = Int32GetDatum(epoch);
				ha[3] = Int32GetDatum(p);
				ha[4] = Int32GetDatum(0);
				ha[5] = TimestampTzGetDatum(h0);
				ha[6] = TimestampTzGetDatum(GetCurrentTimestamp());
				ha[7] = Int64GetDatum(rows);
				ha[8] = mean_or_null(ls, rows, &hn[8]);
				ha[9] = mean_or_null(ms, rows, &hn[9]);
				(void) exec_plan(hop_plan, ha, hn, SPI_OK_INSERT);
			}
		}
		if (diverged)
			break;

		/* validation */
		if (ds->valid_rows > 0)
		{
			Datum		args[2] = {PointerGetDatum(state), Int64GetDatum(ds->id)};
			HeapTuple	tup;
			TupleDesc	td;
			bool		isnull;

			(void) exec_plan(eval_plan, args, NULL, SPI_OK_SELECT);
			tup = SPI_tuptable->vals[0];
			td = SPI_tuptable->tupdesc;
			vl = DatumGetFloat8(SPI_getbinval(tup, td, 1, &isnull));
			if (!isnull)
			{
				vm = DatumGetFloat8(SPI_getbinval(tup, td, 2, &isnull));
				vrows = DatumGetInt64(SPI_getbinval(tup, td, 3, &isnull));
			}
			SPI_freetuptable(SPI_tuptable);
			if (vrows > 0)
			{
				vloss = vl / (double) vrows;
				vmetric = vm / (double) vrows;
			}
		}
		epochs_done = epoch;
		if (isfinite(vmetric) &&
			(isnan(best) || (higher ? vmetric > best : vmetric < best)))
		{
			best = vmetric;
			improved = true;
		}

		memset(en, ' ', sizeof(en));
		ea[0] = Int64GetDatum(model_id);
		ea[1] = Int32GetDatum(epoch);
		ea[2] = mean_or_null(tl, trows, &en[2]);
		ea[3] = mean_or_null(tm, trows, &en[3]);
		ea[4] = mean_or_null(vl, vrows, &en[4]);
		ea[5] = mean_or_null(vm, vrows, &en[5]);
		ea[6] = Int64GetDatum(trows);
		ea[7] = Int64GetDatum(vrows);
		ea[8] = Float8GetDatum((double) (GetCurrentTimestamp() - t0) / 1e6);
		(void) exec_plan(epoch_plan, ea, en, SPI_OK_INSERT);

		/*
		 * The state is stored once, after the last epoch (or the last finite
		 * one): everything here is one transaction, so no one could ever see
		 * an earlier one, and each would be a new TOAST value left dead.
		 */
		memset(mn, ' ', sizeof(mn));
		ma[0] = Int64GetDatum(model_id);
		ma[1] = Int32GetDatum(epoch);
		ma[2] = PointerGetDatum(state);
		if (epoch < epochs)
		{
			mn[2] = 'n';
			if (saved != NULL && saved != state)
				pfree(saved);
			saved = state;
		}
		ma[3] = Float8GetDatum(vmetric);
		ma[4] = Float8GetDatum(vloss);
		ma[5] = Int32GetDatum(epoch);
		if (!improved)
			mn[3] = mn[4] = mn[5] = 'n';
		ma[6] = CStringGetTextDatum(epoch == epochs ? "done" : "training");
		(void) exec_plan(model_plan, ma, mn, SPI_OK_UPDATE);

		ereport(NOTICE,
				(errmsg("model " INT64_FORMAT " epoch %d/%d: train loss %.4f %s %.4f, valid loss %.4f %s %.4f (%.1f s)",
						model_id, epoch, epochs,
						trows ? tl / trows : NAN, metric, trows ? tm / trows : NAN,
						vloss, metric, vmetric,
						(double) (GetCurrentTimestamp() - t0) / 1e6)));
	}

	if (diverged)
	{
		Oid			t[4] = {INT8OID, INT4OID, TEXTOID, BYTEAOID};
		Datum		a[4] = {Int64GetDatum(model_id), Int32GetDatum(epochs_done),
		CStringGetTextDatum(psprintf("loss became NaN or infinite in epoch %d, partition %d; the last finite checkpoint is kept",
									 epochs_done + 1, diverged_partition)),
		PointerGetDatum(saved)};
		char		n[4] = {' ', ' ', ' ', saved ? ' ' : 'n'};

		/* the last finite checkpoint: the state after the last whole epoch */
		if (SPI_execute_with_args("UPDATE mop.models SET status = 'diverged', epochs_done = $2, "
								  "error = $3, state = COALESCE($4, state), "
								  "updated_at = pg_catalog.clock_timestamp() "
								  "WHERE id OPERATOR(pg_catalog.=) $1", 4, t, a, n, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "mop_train: could not mark the model diverged");
	}
	{
		Oid			t[1] = {INT8OID};
		Datum		a[1] = {Int64GetDatum(run_id)};

		if (SPI_execute_with_args("UPDATE mop.runs SET status = 'done', "
								  "finished_at = pg_catalog.clock_timestamp() "
								  "WHERE id OPERATOR(pg_catalog.=) $1", 1, t, a, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "mop_train: could not finish the run");
	}
	SPI_finish();
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(opcxt);
	PG_RETURN_INT64(model_id);
}

/* ---- device => (the last argument of each) ------------------------------ */

Datum
mop_train(PG_FUNCTION_ARGS)
{
	return mop_with_device(fcinfo, 3, mop_train_body);
}
