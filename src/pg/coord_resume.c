/*
 * coord_resume.c -- resuming a run (mop_resume, the automatic resume after
 * a restart) and replaying a recorded one (mop_replay).
 *
 * Nothing of an interrupted run survives but its catalog rows, so its
 * coordinator is rebuilt from them: the run's settings from mop.runs, each
 * model's progress from its committed mop.hops, and an adaptive search's
 * driver by feeding it the decisions and results recorded in mop.decisions
 * in order (a driver's state depends only on the calls made to it).
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "coordinator.h"
#include "lockorder.h"

/*
 * Load an existing run for resumption (its options: mop_run_options_parse,
 * under the run's row lock); fills the scheduler state later.
 */
void
coord_load_run(void)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	bool		isnull;
	char	   *status;

	coord.run_id = coord.run->resume_run_id;
	coord_begin_tx();
	v[0] = Int64GetDatum(coord.run->resume_run_id);
	/* lock order (lockorder.h): the dataset's row before the run's */
	(void) mop_lock_dataset_of_run(coord.run->resume_run_id);
	coord_exec_sql("SELECT r.status, d.partitions, r.epochs, r.seed, r.options, r.shm_handle "
			 "FROM mop.runs r JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) r.dataset_id "
			 "WHERE r.id OPERATOR(pg_catalog.=) $1 FOR UPDATE OF r",
			 1, t, v, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run %lld does not exist", (long long) coord.run->resume_run_id)));
	status = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	{
		/*
		 * Under the row lock: a run another coordinator owns now (two
		 * sessions resuming it at once, or one racing the automatic resume)
		 * is not taken over -- two coordinators would train every model
		 * twice.
		 */
		Datum		h = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull);

		if (!isnull && strcmp(status, "running") == 0 &&
			DatumGetInt64(h) != (int64) dsm_segment_handle(coord.seg) &&
			mop_run_is_live(coord.run->resume_run_id, DatumGetInt64(h)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("run %lld is being resumed by another session", (long long) coord.run->resume_run_id),
					 errhint("Wait for it with mop_wait(%lld).", (long long) coord.run->resume_run_id)));
	}
	if (strcmp(status, "done") == 0 && coord.run->n_configs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has already finished", (long long) coord.run->resume_run_id)));
	coord.n_partitions = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	td = SPI_tuptable->tupdesc;
		Datum		o = SPI_getbinval(tup, td, 5, &isnull);
		MopRunOptions recorded;

		/* what the run was started with; a key it lacks: its default */
		mop_run_options_parse(isnull ? NULL : DatumGetJsonbP(o), &recorded);
		recorded.epochs = DatumGetInt32(SPI_getbinval(tup, td, 3, &isnull));
		recorded.seed = DatumGetInt32(SPI_getbinval(tup, td, 4, &isnull));
		/* how it trains now is the resuming session's (run.c) */
		recorded.gpu = coord.run->opts.gpu;
		recorded.gpu_memory_mb = coord.run->opts.gpu_memory_mb;
		recorded.gpu_tf32 = coord.run->opts.gpu_tf32;
		recorded.gpu_unverified = coord.run->opts.gpu_unverified;
		recorded.blas_threads = coord.run->opts.blas_threads;
		recorded.checkpoint_every = coord.run->opts.checkpoint_every;
		/*
		 * A resumed run starts neither its median rule nor its warm start
		 * again: the rule's history and the starting checkpoints belong to
		 * the first start.
		 */
		recorded.median_stop = false;
		recorded.warm_start = 0;
		SpinLockAcquire(&coord.run->mutex);
		coord.run->opts = recorded;
		SpinLockRelease(&coord.run->mutex);
		coord.tpe_batch = recorded.tpe_batch;
	}
	coord.time_used_ms = 0;
	if (mop_catalog_has_run_names())
	{
		/* what its time budget has counted so far */
		coord_exec_sql("SELECT pg_catalog.date_part('epoch', r.time_used) OPERATOR(pg_catalog.*) 1000 "
					   "FROM mop.runs r WHERE r.id OPERATOR(pg_catalog.=) $1", 1, t, v, SPI_OK_SELECT);
		if (SPI_processed == 1)
		{
			Datum		ms = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			if (!isnull)
				coord.time_used_ms = (int64) DatumGetFloat8(ms);
		}
	}
	coord_set_status(-1, "running", NULL);
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		coord.ds = mop_dataset_lookup(mop_run_string(coord.seg, MOP_KEY_DATASET), false);
		MemoryContextSwitchTo(old);
	}
	if (coord.run->n_configs > 0 && coord.run->opts.kind == MOP_KIND_FIXED)
	{
		/* configurations added to the run: new models, trained from scratch */
		coord.models = MemoryContextAllocZero(TopMemoryContext,
											  sizeof(CoordModel) * coord.run->n_configs);
		for (int i = 0; i < coord.run->n_configs; i++)
			coord_insert_model(coord.run->resume_run_id, i, coord.run->opts.epochs);
		coord.n_models = 0;			/* restore_models reloads them all */
	}
	coord_commit_tx();
	SpinLockAcquire(&coord.run->mutex);
	coord.run->run_id = coord.run->resume_run_id;
	SpinLockRelease(&coord.run->mutex);
}

/* Add the run's models to the scheduler, restoring progress from hops. */
void
coord_restore_models(mop_sched *s)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	bool		isnull;

	coord.resumed_hops = 0;
	coord_begin_tx();
	v[0] = Int64GetDatum(coord.run->run_id);
	coord_exec_sql("SELECT m.id, m.epochs_done, m.status, m.higher_is_better, "
			 "(SELECT pg_catalog.array_agg(h.partition) FROM mop.hops h "
			 " WHERE h.model_id OPERATOR(pg_catalog.=) m.id "
			 " AND h.epoch OPERATOR(pg_catalog.=) (m.epochs_done OPERATOR(pg_catalog.+) 1)) "
			 "FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY m.id",
			 1, t, v, SPI_OK_SELECT);
	coord.n_models = (int) SPI_processed;
	coord.models = MemoryContextAllocZero(TopMemoryContext,
										  sizeof(CoordModel) * Max(coord.n_models, 1));
	for (int i = 0; i < coord.n_models; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	td = SPI_tuptable->tupdesc;
		int32		done = DatumGetInt32(SPI_getbinval(tup, td, 2, &isnull));
		char	   *status = TextDatumGetCString(SPI_getbinval(tup, td, 3, &isnull));
		bool		no_visits;
		Datum		arr = SPI_getbinval(tup, td, 5, &no_visits);
		int32		idx;

		coord.models[i].id = DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
		coord.models[i].target = strcmp(status, "training") == 0 ? coord.run->opts.epochs : done;
		idx = coord_add_model(s, coord.models[i].target);
		if (i == 0)
		{
			bool		hib = DatumGetBool(SPI_getbinval(tup, td, 4, &isnull));

			SpinLockAcquire(&coord.run->mutex);
			coord.run->higher_is_better = hib;
			SpinLockRelease(&coord.run->mutex);
		}
		if (!no_visits)
		{
			ArrayType  *a = DatumGetArrayTypeP(arr);
			int32	   *parts = (int32 *) ARR_DATA_PTR(a);
			int			n = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));

			mop_sched_restore(s, idx, done, parts, n);
		}
		else
			mop_sched_restore(s, idx, done, NULL, 0);
		if (strcmp(status, "training") != 0)
			mop_sched_stop(s, idx);
		coord.resumed_hops += (int64) done * coord.n_partitions + mop_sched_visited(s, idx);
	}
	coord_commit_tx();
	SpinLockAcquire(&coord.run->mutex);
	coord.run->n_models = coord.n_models;
	SpinLockRelease(&coord.run->mutex);
}

/*
 * Replay: give every model the visiting sequence its counterpart (same
 * position in id order) followed in the recorded run.
 */
void
coord_load_sequences(mop_sched *s)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	bool		isnull;

	coord_begin_tx();
	v[0] = Int64GetDatum(coord.run->opts.replay_of);
	coord_exec_sql("SELECT (SELECT pg_catalog.array_agg(h.partition ORDER BY h.epoch, h.started_at, h.id) "
			 "FROM mop.hops h WHERE h.model_id OPERATOR(pg_catalog.=) m.id) "
			 "FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY m.id",
			 1, t, v, SPI_OK_SELECT);
	if ((int) SPI_processed != coord.n_models)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has %d models, its replay %d",
						(long long) coord.run->opts.replay_of, (int) SPI_processed, coord.n_models)));
	for (int i = 0; i < coord.n_models; i++)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		ArrayType  *a;

		if (isnull)
		{
			mop_sched_set_sequence(s, i, NULL, 0);
			continue;
		}
		a = DatumGetArrayTypeP(d);
		if (mop_sched_set_sequence(s, i, (int32 *) ARR_DATA_PTR(a),
								   ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a))) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("recorded schedule of run %lld does not fit its dataset",
							(long long) coord.run->opts.replay_of)));
	}
	coord_commit_tx();
}

/* Do two configurations hold the same values? */
static bool
same_config(Jsonb *a, Jsonb *b)
{
	return a && b && compareJsonbContainers(&a->root, &b->root) == 0;
}

/*
 * Resume an adaptive (Hyperband, ASHA, TPE) run: replay the recorded driver calls
 * -- every action in mop.decisions and every result ('report' rows), in
 * order -- into a fresh driver, which then stands exactly where the
 * interrupted one stood; rebuild the scheduler's models on the way; restore
 * each model's progress from mop.hops; and report results that were
 * committed but not yet told to the driver when the run stopped.
 *
 * Long because it is one pass that must stay in step: the models' rows, the
 * decisions in order, then each model's progress, each part depending on
 * the state the part before it left in the driver and the scheduler.
 */
void
coord_replay_decisions(mop_sched *s)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	bool		isnull;
	int			n_existing;
	int64	   *ids;
	int32	   *done;
	char	  **status;
	double	   *last_metric;
	Jsonb	  **configs;

	coord.models = MemoryContextAllocZero(TopMemoryContext,
										  sizeof(CoordModel) * Max(coord.run->n_configs, 1));
	coord_begin_tx();
	v[0] = Int64GetDatum(coord.run->run_id);
	coord_exec_sql("SELECT m.id, m.epochs_done, m.status, "
			 "(SELECT e.valid_metric FROM mop.epochs e WHERE e.model_id OPERATOR(pg_catalog.=) m.id "
			 " AND e.epoch OPERATOR(pg_catalog.=) m.epochs_done), m.config "
			 "FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY m.id",
			 1, t, v, SPI_OK_SELECT);
	n_existing = (int) SPI_processed;
	/* these outlive the transaction (SPI memory goes with it) */
	ids = MemoryContextAlloc(TopMemoryContext, sizeof(int64) * Max(n_existing, 1));
	done = MemoryContextAlloc(TopMemoryContext, sizeof(int32) * Max(n_existing, 1));
	status = MemoryContextAlloc(TopMemoryContext, sizeof(char *) * Max(n_existing, 1));
	last_metric = MemoryContextAlloc(TopMemoryContext, sizeof(double) * Max(n_existing, 1));
	configs = MemoryContextAlloc(TopMemoryContext, sizeof(Jsonb *) * Max(n_existing, 1));
	for (int i = 0; i < n_existing; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	td = SPI_tuptable->tupdesc;
		Datum		m;

		ids[i] = DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
		done[i] = DatumGetInt32(SPI_getbinval(tup, td, 2, &isnull));
		status[i] = MemoryContextStrdup(TopMemoryContext,
										TextDatumGetCString(SPI_getbinval(tup, td, 3, &isnull)));
		m = SPI_getbinval(tup, td, 4, &isnull);
		last_metric[i] = isnull ? NAN : DatumGetFloat8(m);
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			configs[i] = DatumGetJsonbPCopy(SPI_getbinval(tup, td, 5, &isnull));
			MemoryContextSwitchTo(old);
		}
	}
	if (n_existing > coord.run->n_configs)
		elog(ERROR, "run %lld has more models than configurations", (long long) coord.run->run_id);

	coord_exec_sql("SELECT d.action, m.idx, d.score, d.from_resource, d.to_resource, d.why "
			 "FROM mop.decisions d JOIN (SELECT id, pg_catalog.row_number() OVER (ORDER BY id) "
			 "OPERATOR(pg_catalog.-) 1 AS idx FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $1) m "
			 "ON m.id OPERATOR(pg_catalog.=) d.model_id "
			 "WHERE d.run_id OPERATOR(pg_catalog.=) $1 ORDER BY d.id",
			 1, t, v, SPI_OK_SELECT);
	coord.n_models = 0;
	coord.driver->replaying = true;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	td = SPI_tuptable->tupdesc;
		char	   *action = TextDatumGetCString(SPI_getbinval(tup, td, 1, &isnull));
		int32		trial = (int32) DatumGetInt64(SPI_getbinval(tup, td, 2, &isnull));
		mop_action	a;

		if (strcmp(action, "stop") == 0 &&
			(strcmp(TextDatumGetCString(SPI_getbinval(tup, td, 6, &isnull)), "median_stop") == 0 ||
			 strcmp(TextDatumGetCString(SPI_getbinval(tup, td, 6, &isnull)), "patience") == 0 ||
			 strcmp(TextDatumGetCString(SPI_getbinval(tup, td, 6, &isnull)), "time_budget") == 0))
		{
			/*
			 * a rule's stop, not the driver's: its result follows as a
			 * report (a time budget's stop has none: the run ended there)
			 */
			if (trial >= coord.n_models)
				elog(ERROR, "run %lld: stop of a model that does not exist", (long long) coord.run->run_id);
			mop_sched_stop(s, trial);
			coord.models[trial].stopped = true;
			continue;
		}
		if (strcmp(action, "report") == 0)
		{
			Datum		sc = SPI_getbinval(tup, td, 3, &isnull);
			double		score = isnull ? NAN : DatumGetFloat8(sc);
			int32		resource = DatumGetInt32(SPI_getbinval(tup, td, 4, &isnull));

			coord_driver_tell(trial, resource, score);
			continue;
		}
		if (coord_driver_next(&a) != MOP_POLL_ACTION || a.trial != trial ||
			strcmp(mop_act_name(a.kind), action) != 0 ||
			(a.kind == MOP_ACT_NEW && trial < n_existing && coord.proposed &&
			 coord.proposed[trial] && !same_config(coord.proposed[trial], configs[trial])))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the recorded decisions of run %lld do not replay (at decision %d: %s of model %d)",
							(long long) coord.run->run_id, (int) r + 1, action, trial)));
		switch (a.kind)
		{
			case MOP_ACT_NEW:
				if (trial >= n_existing)
					elog(ERROR, "run %lld: decision for a model that does not exist", (long long) coord.run->run_id);
				coord.models[trial].id = ids[trial];
				coord.models[trial].target = a.resource;
				coord_add_model(s, a.resource);
				coord.n_models = trial + 1;
				break;
			case MOP_ACT_CONTINUE:
				coord.models[trial].target = a.resource;
				mop_sched_set_epochs(s, trial, a.resource);
				break;
			case MOP_ACT_STOP:
				mop_sched_stop(s, trial);
				break;
		}
	}
	coord.driver->replaying = false;
	coord_commit_tx();

	/* progress of each model, and results committed but never reported */
	for (int i = 0; i < coord.n_models; i++)
	{
		coord_begin_tx();
		v[0] = Int64GetDatum(ids[i]);
		coord_exec_sql("SELECT pg_catalog.array_agg(h.partition) FROM mop.hops h, mop.models m "
				 "WHERE m.id OPERATOR(pg_catalog.=) $1 AND h.model_id OPERATOR(pg_catalog.=) m.id "
				 "AND h.epoch OPERATOR(pg_catalog.=) (m.epochs_done OPERATOR(pg_catalog.+) 1)",
				 1, t, v, SPI_OK_SELECT);
		{
			Datum		arr = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			if (!isnull)
			{
				ArrayType  *av = DatumGetArrayTypeP(arr);

				mop_sched_restore(s, i, done[i], (int32 *) ARR_DATA_PTR(av),
								  ArrayGetNItems(ARR_NDIM(av), ARR_DIMS(av)));
			}
			else
				mop_sched_restore(s, i, done[i], NULL, 0);
		}
		coord_commit_tx();
		if (!coord.driver->ops->awaits_result(coord.driver, i))
			continue;
		if (strcmp(status[i], "diverged") == 0 || strcmp(status[i], "failed") == 0)
		{
			mop_sched_stop(s, i);
			coord_driver_report(i, coord.models[i].target, NAN);
		}
		else if (coord.rule != NULL && strcmp(status[i], "stopped") == 0)
		{
			/* stopped by the early-stopping rule; its result was not recorded yet */
			mop_sched_stop(s, i);
			coord_driver_report(i, done[i], coord_score(last_metric[i]));
		}
		else if (done[i] >= coord.models[i].target)
			coord_driver_report(i, coord.models[i].target, coord_score(last_metric[i]));
	}
}
