/*
 * train.c -- mop_train(): train one model sequentially over all partitions.
 *
 * This is the sequential-SGD baseline that model hopper parallelism must
 * match.  For each epoch the model visits partitions 0..P-1 in order, each
 * visit being one sub-epoch (mop_subepoch, subepoch.h: the same unit, and
 * so the same narrow waist mop.train_agg, that every other executor runs),
 * the last of them followed by the evaluation on the validation split.
 * Each sub-epoch is recorded in mop.hops (worker 0 = the calling backend),
 * each epoch in mop.epochs, and the model row in mop.models carries the
 * latest checkpoint.  A mop.runs row of kind 'train' groups them.
 *
 * Everything happens in the caller's transaction: a cancelled or failed
 * mop_train leaves nothing behind.  The state therefore goes from one
 * sub-epoch to the next in memory (a MopSubepochCarry) and is stored once,
 * after the last epoch: no one could ever see an earlier one, and each
 * would be a new TOAST value left dead.  A model whose loss becomes NaN or
 * Inf is not an error: it is marked 'diverged', keeps the state of its last
 * whole epoch, and training stops.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mop.h"
#include "subepoch.h"

PG_FUNCTION_INFO_V1(mop_train);

/* Insert a row and return its bigint id. */
static int64
insert_returning_id(const char *sql, int nargs, Oid *types, Datum *args)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, args, NULL, false, 1);
	bool		isnull;

	if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "mop_train: insert failed: %s", SPI_result_code_string(rc));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
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
	bytea	   *state;
	bool		higher;
	const char *metric;
	int64		run_id,
				model_id;
	MemoryContext opcxt,
				oldcxt;
	MopSubepochCarry carry;
	bool		diverged = false;
	MopPatience patience;
	MopPatienceState pstate;

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
	{
		/* the sequential baseline reads this server's buffers only */
		int32		p = mop_dataset_remote_partition(ds->id);

		if (p >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("mop_train cannot train on dataset \"%s\": its partition %d is only on segments", ds->name, p),
					 errdetail("mop_train trains on this server's training buffers only."),
					 errhint("Train it with a run (mop_grid_search with one configuration trains on its segments), or place it again with 'local' holding every partition.")));
	}
	state = mop_model_initial_state(config, ds, epochs, &spec);
	metric = nn_metric_name(spec.metric);
	higher = nn_metric_higher_is_better(spec.metric) != 0;
	mop_config_patience(config, &patience);
	mop_patience_init(&pstate);

	SPI_connect();
	{
		Oid			t[3] = {INT8OID, JSONBOID, INT4OID};
		Datum		a[3] = {Int64GetDatum(ds->id), JsonbPGetDatum(config), Int32GetDatum(epochs)};

		run_id = insert_returning_id("INSERT INTO mop.runs (kind, dataset_id, space, epochs, workers, status) "
									 "VALUES ('train', $1, $2, $3, 1, 'running') RETURNING id",
									 3, t, a);
	}
	{
		Oid			t[6] = {INT8OID, INT8OID, JSONBOID, BYTEAOID, TEXTOID, BOOLOID};
		Datum		a[6] = {Int64GetDatum(run_id), Int64GetDatum(ds->id), JsonbPGetDatum(config),
		PointerGetDatum(state), CStringGetTextDatum(metric), BoolGetDatum(higher)};

		model_id = insert_returning_id("INSERT INTO mop.models (run_id, dataset_id, config, status, "
									   "epochs_done, state, metric, higher_is_better) "
									   "VALUES ($1, $2, $3, 'training', 0, $4, $5, $6) RETURNING id",
									   6, t, a);
	}
	mop_subepoch_carry_init(&carry, ds->id, state, opcxt);

	for (int epoch = 1; epoch <= epochs && !diverged; epoch++)
	{
		MopSubepochResult res;

		mop_subepoch_carry_begin_epoch(&carry);
		for (int p = 0; p < ds->partitions; p++)
		{
			MopSubepochTask task;

			CHECK_FOR_INTERRUPTS();
			memset(&task, 0, sizeof(task));
			task.run_id = run_id;
			task.model_id = model_id;
			task.epoch = epoch;
			task.partition = p;
			task.worker = 0;
			task.last_of_epoch = p == ds->partitions - 1;
			task.final_epoch = epoch == epochs;
			task.carry = &carry;
			if (mop_subepoch(&task, &res) == MOP_SUBEPOCH_DIVERGED)
			{
				ereport(NOTICE,
						(errmsg("model " INT64_FORMAT " diverged in epoch %d, partition %d",
								model_id, epoch, p)));
				diverged = true;
				break;
			}
		}
		if (diverged)
			break;
		ereport(NOTICE,
				(errmsg("model " INT64_FORMAT " epoch %d/%d: train loss %.4f %s %.4f, valid loss %.4f %s %.4f (%.1f s)",
						model_id, epoch, epochs,
						carry.rows ? carry.loss_sum / carry.rows : NAN, metric,
						carry.rows ? carry.metric_sum / carry.rows : NAN,
						res.valid_loss, metric, res.valid_metric,
						(double) (GetCurrentTimestamp() - carry.epoch_started) / 1e6)));
		if (epoch < epochs &&
			mop_patience_epoch(&patience, &pstate, higher, epoch, res.valid_metric))
		{
			Oid			t[1] = {INT8OID};
			Datum		a[1] = {Int64GetDatum(model_id)};

			/* patience early stopping: the model is 'stopped' and keeps its best */
			mop_subepoch_carry_stop(&carry, model_id, epoch);
			if (SPI_execute_with_args("UPDATE mop.models SET status = 'stopped', "
									  "updated_at = pg_catalog.clock_timestamp() "
									  "WHERE id OPERATOR(pg_catalog.=) $1", 1, t, a, NULL, false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "mop_train: could not stop the model");
			ereport(NOTICE,
					(errmsg("model " INT64_FORMAT " stopped early after epoch %d/%d: no improvement of %s by more than %g for %d epochs (best epoch %d)",
							model_id, epoch, epochs, metric, patience.min_delta,
							patience.patience, pstate.best_epoch)));
			break;
		}
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
