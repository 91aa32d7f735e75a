/*
 * coordinator.c -- the coordinator of a model-selection run.
 *
 * A background worker started by the caller of mop_grid_search (and
 * friends) and connected as the caller's role.  It is the "launcher that
 * commits on its own": the caller's transaction cannot commit while the
 * call runs, and workers see only committed rows, so the coordinator
 * creates the run and its models in its own transaction and commits them
 * before any worker starts.  Then it starts the training workers and runs
 * the MOP scheduler (src/search/sched.c) over their slots in shared memory:
 * whenever a worker is idle it gets a model that is not busy and has not yet
 * visited that worker's partition in the current epoch.  Checkpoints travel
 * through mop.models.state, committed by the worker after every sub-epoch,
 * so a hop moves the full model state (weights, optimizer moments, RNG) and
 * a crash loses at most the sub-epochs in flight.
 *
 * Failures are contained: a task's ERROR fails only its model; a worker
 * that dies is restarted (a few times) and its task re-run; an ERROR in the
 * coordinator itself marks the run failed with its message in a fresh
 * transaction, so the failure is recorded even though the failing
 * transaction rolled back.  Cancellation (from the blocking caller, or
 * mop_cancel from any session) terminates the workers -- each stops within
 * one minibatch, its transaction rolls back -- and marks the run cancelled;
 * mop_resume continues it from the committed checkpoints.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "lockorder.h"
#include "mop.h"
#include "run.h"
#include "search/mop_asha.h"
#include "search/mop_hyperband.h"
#include "search/mop_median.h"
#include "search/mop_pbt.h"
#include "search/mop_tpe.h"
#include "search/mop_hermes.h"
#include "space.h"
#include "search/mop_sched.h"

#define MAX_RESTARTS 3

static MopRunShared *run;
static dsm_segment *run_seg;

/* Per-worker bookkeeping kept by the coordinator. */
typedef struct WorkerInfo
{
	BackgroundWorkerHandle *handle;
	bool		busy;
	mop_task	task;
	int			restarts;
} WorkerInfo;

/* Per-model bookkeeping. */
typedef struct ModelInfo
{
	int64		id;
	int32		target;			/* epochs */
} ModelInfo;

static WorkerInfo workers[MOP_MAX_WORKERS];
static int	n_workers;
static ModelInfo *models;
static int	n_models;
static MopDataset *run_ds;		/* the run's dataset (TopMemoryContext) */
static mop_hb *hb;				/* Hyperband driver (driver mode), or NULL */
static mop_asha *asha;			/* ASHA driver (driver mode), or NULL */
static mop_median *median;		/* median stopping rule, or NULL */
static mop_pbt *pbt;			/* PBT population, or NULL */
static MopSpaceDesc *pbt_space;	/* its space (also TPE's) */
static mop_tpe *tpe;			/* TPE, or NULL */
static int32 *tpe_ids;			/* TPE observation id of each trial */
static Jsonb **tpe_configs;		/* configuration TPE proposed for each trial */
static int32 tpe_running;		/* trials proposed and not yet told */
static bool *tpe_told;			/* has TPE been told trial i's score? */
static int32 tpe_told_prefix;	/* trials 0 .. tpe_told_prefix - 1 are all told */
static bool *tpe_done;			/* has trial i's score arrived? */
static double *tpe_score;		/* ... that score */
static bool replaying;			/* replaying recorded driver calls (resume) */
static int32 tpe_batch;			/* deterministic TPE: trials per synchronous batch */
static bool *pbt_waiting;		/* deterministic PBT: member is at the generation barrier */
static double *pbt_scores;		/* ... with this score */
static mop_hermes_history hermes;	/* convergence-aware priorities' history */

#define DRIVER (hb != NULL || asha != NULL || tpe != NULL)

static mop_poll driver_next(mop_action *a);
static double driver_score(double vm);

/*
 * Convergence-aware priority of a model not started yet: what it may reach
 * after its first epoch, optimistically the best first epoch so far (top
 * priority while there is none).  Once started, a model has the top
 * priority until its first evaluation, Hermes' minimum quantum (assign()).
 * See src/search/mop_hermes.h.
 */
static double
fresh_priority(void)
{
	return mop_hermes_history_fresh(&hermes);
}

/* Add a model to the scheduler (with fresh_priority() when it applies). */
static int32
add_model(mop_sched *s, int32 epochs)
{
	int32		i = mop_sched_add_model(s, epochs);

	if (i >= 0 && run->pick == MOP_PICK_PRIORITY)
		mop_sched_set_priority(s, i, fresh_priority());
	return i;
}
static void driver_report(int32 trial, int32 resource, double score);
static void record_report(int32 trial, int32 resource, double score, const char *reason);
static void tpe_report(int32 trial, double score);
static int	n_partitions;
static int64 resumed_hops;	/* sub-epochs already done when resuming */

/* SPI statement or ERROR. */
static void
exec_sql(const char *sql, int nargs, Oid *types, Datum *vals, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, vals, NULL, false, 0);

	if (rc != expect)
		elog(ERROR, "mop coordinator: query failed (%s): %s", SPI_result_code_string(rc), sql);
}

static void
begin_tx(void)
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
	if (run->run_id != 0 && run_ds != NULL)
	{
		(void) mop_lock_dataset_row(run_ds->id);
		(void) mop_lock_run_row(run->run_id);
	}
}

static void
commit_tx(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* The n-th NUL-separated string of the payload. */
static const char *
payload_str(int n)
{
	const char *p = run->payload;

	for (int i = 0; i < n; i++)
		p += strlen(p) + 1;
	return p;
}

/*
 * Insert model i (configuration i of the payload) with a fresh checkpoint,
 * to be trained to `target` epochs; inside the caller's transaction.
 */
static void
insert_model(int64 run_id, int i, int32 target)
{
	Jsonb	   *config = (tpe && tpe_configs[i]) ? tpe_configs[i] :
		DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(payload_str(3 + i))));
	nn_spec		spec;
	ModelHandle *h;
	nn_error	err;
	nn_status	st;
	Oid			t[6];
	Datum		v[6];
	bool		isnull;

	if (i >= run->n_configs)
		elog(ERROR, "mop run %lld: trial %d has no configuration", (long long) run_id, i);
	mop_config_to_spec(config, run_ds, &spec);
	mop_blas_ensure();
	h = mop_model_handle(CurrentMemoryContext);
	if ((st = nn_model_create(&spec, &h->model, &err)) != NN_OK)
		mop_nn_error(st, &err, "could not create model");
	t[0] = INT8OID;
	v[0] = Int64GetDatum(run_id);
	t[1] = INT8OID;
	v[1] = Int64GetDatum(run_ds->id);
	t[2] = JSONBOID;
	v[2] = JsonbPGetDatum(config);
	t[3] = BYTEAOID;
	v[3] = PointerGetDatum(mop_model_to_blob(h->model));
	if (run->warm_start_run_id)
	{
		/* warm start: the latest checkpoint of the same configuration */
		Oid			wt[2] = {INT8OID, JSONBOID};
		Datum		wv[2] = {Int64GetDatum(run->warm_start_run_id), JsonbPGetDatum(config)};

		exec_sql("SELECT state FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $1 "
				 "AND config OPERATOR(pg_catalog.=) $2 AND state IS NOT NULL "
				 "AND status OPERATOR(pg_catalog.<>) ALL ('{diverged,failed}'::text[]) "
				 "ORDER BY epochs_done DESC, id LIMIT 1", 2, wt, wv, SPI_OK_SELECT);
		if (SPI_processed == 1)
			v[3] = PointerGetDatum(DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0],
																	SPI_tuptable->tupdesc, 1,
																	&isnull)));
	}
	t[4] = TEXTOID;
	v[4] = CStringGetTextDatum(nn_metric_name(spec.metric));
	t[5] = BOOLOID;
	v[5] = BoolGetDatum(nn_metric_higher_is_better(spec.metric));
	mop_model_release(h);
	exec_sql("INSERT INTO mop.models (run_id, dataset_id, config, status, state, metric, "
			 "higher_is_better) VALUES ($1, $2, $3, 'training', $4, $5, $6) RETURNING id",
			 6, t, v, SPI_OK_INSERT_RETURNING);
	models[i].id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
	models[i].target = target;
	if (i == 0)
		run->higher_is_better = nn_metric_higher_is_better(spec.metric);
	n_models = Max(n_models, i + 1);
}

/* Create the run and its models (new run), committed. */
static void
create_run(void)
{
	const char *kind = payload_str(0);
	const char *dsname = payload_str(1);
	const char *space = payload_str(2);
	MopDataset *ds;
	Oid			t[8];
	Datum		v[8];
	bool		isnull;
	int64		run_id;
	char		opts[512];

	begin_tx();
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		ds = run_ds = mop_dataset_lookup(dsname, true);
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
	n_partitions = ds->partitions;
	snprintf(opts, sizeof(opts),
			 "{\"deterministic\": %s, \"scheduler\": \"%s\", \"device\": \"%s\"%s, \"blas_threads\": %d%s%s%s%s}",
			 run->deterministic ? "true" : "false",
			 mop_pick_name(run->pick),
			 run->gpu ? "gpu" : "cpu",
			 run->gpu ? psprintf(", \"gpu_memory_mb\": %d, \"gpu_tf32\": %s", run->gpu_memory_mb,
								 run->gpu_tf32 ? "true" : "false") : "",
			 run->blas_threads,
			 run->replay_run_id ? ", \"replay_of\": " : "",
			 run->replay_run_id ? psprintf(INT64_FORMAT, run->replay_run_id) : "",
			 run->algo == MOP_ALGO_HYPERBAND ?
			 psprintf(", \"algorithm\": \"hyperband\", \"max_resource\": %d, \"eta\": %d",
					  run->max_resource, run->eta) :
			 run->algo == MOP_ALGO_ASHA ?
			 psprintf(", \"algorithm\": \"asha\", \"max_resource\": %d, \"eta\": %d, "
					  "\"min_resource\": %d, \"max_trials\": %d",
					  run->max_resource, run->eta, run->min_resource, run->n_configs) :
			 run->algo == MOP_ALGO_TPE ?
			 psprintf(", \"algorithm\": \"tpe\", \"trials\": %d, \"n_startup\": %d, \"gamma\": %s%s",
					  run->n_configs, run->tpe_startup, float8out_internal(run->tpe_gamma),
					  run->deterministic ?
					  psprintf(", \"batch\": %d", Min(run->n_workers, n_partitions)) : "") :
			 run->algo == MOP_ALGO_PBT ?
			 psprintf(", \"algorithm\": \"pbt\", \"population\": %d, \"interval\": %d, "
					  "\"quantile\": %s, \"resample\": %s", run->n_configs, run->pbt_interval,
					  float8out_internal(run->pbt_quantile), float8out_internal(run->pbt_resample)) : "",
			 psprintf("%s%s", run->median_stop ? ", \"early_stopping\": \"median\"" : "",
					  run->warm_start_run_id ?
					  psprintf(", \"warm_start\": " INT64_FORMAT, run->warm_start_run_id) : ""));
	t[0] = TEXTOID;
	v[0] = CStringGetTextDatum(kind);
	t[1] = INT8OID;
	v[1] = Int64GetDatum(ds->id);
	t[2] = JSONBOID;
	v[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(space));
	t[3] = INT4OID;
	v[3] = Int32GetDatum(run->epochs);
	t[4] = INT4OID;
	v[4] = Int32GetDatum(run->n_workers);
	t[5] = INT4OID;
	v[5] = Int32GetDatum(run->seed);
	t[6] = INT8OID;
	v[6] = Int64GetDatum((int64) dsm_segment_handle(run_seg));
	t[7] = JSONBOID;
	v[7] = DirectFunctionCall1(jsonb_in, CStringGetDatum(opts));
	exec_sql("INSERT INTO mop.runs (kind, dataset_id, space, epochs, workers, seed, status, "
			 "shm_handle, options) VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8) RETURNING id",
			 8, t, v, SPI_OK_INSERT_RETURNING);
	run_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

	models = MemoryContextAllocZero(TopMemoryContext, sizeof(ModelInfo) * Max(run->n_configs, 1));
	n_models = 0;
	if (run->algo == MOP_ALGO_FIXED || run->algo == MOP_ALGO_PBT)
		for (int i = 0; i < run->n_configs; i++)
			insert_model(run_id, i, run->epochs);
	if (run->algo == MOP_ALGO_PBT)
	{
		/* a PBT member's starting configuration opens its lineage */
		Oid			pt[1] = {INT8OID};
		Datum		pv[1] = {Int64GetDatum(run_id)};

		exec_sql("INSERT INTO mop.decisions (run_id, model_id, action, why, reason, "
				 "from_resource, to_resource, hyperparameters) "
				 "SELECT run_id, id, 'new', 'start', 'PBT member drawn from the space', 0, "
				 "epochs_done, config FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $1 ORDER BY id",
				 1, pt, pv, SPI_OK_INSERT);
	}
	commit_tx();
	SpinLockAcquire(&run->mutex);
	run->run_id = run_id;
	SpinLockRelease(&run->mutex);
}

/* Load an existing run for resumption; fills the scheduler state later. */
static void
load_run(void)
{
	Oid			t[3] = {INT8OID, INT8OID, TEXTOID};
	Datum		v[3];
	bool		isnull;
	char	   *status;

	begin_tx();
	v[0] = Int64GetDatum(run->resume_run_id);
	/* lock order (lockorder.h): the dataset's row before the run's */
	(void) mop_lock_dataset_of_run(run->resume_run_id);
	exec_sql("SELECT r.status, d.partitions, r.epochs, r.seed, "
			 "COALESCE((r.options OPERATOR(pg_catalog.->>) 'deterministic')::boolean, false), "
			 "COALESCE(r.options OPERATOR(pg_catalog.->>) 'scheduler', 'random'), "
			 "COALESCE((r.options OPERATOR(pg_catalog.->>) 'replay_of')::bigint, 0), "
			 "COALESCE(r.options OPERATOR(pg_catalog.->>) 'algorithm', ''), COALESCE((r.options OPERATOR(pg_catalog.->>) 'max_resource')::int, 0), "
			 "COALESCE((r.options OPERATOR(pg_catalog.->>) 'eta')::int, 0), COALESCE((r.options OPERATOR(pg_catalog.->>) 'min_resource')::int, 1), "
			 "COALESCE((r.options OPERATOR(pg_catalog.->>) 'n_startup')::int, 10), COALESCE((r.options OPERATOR(pg_catalog.->>) 'gamma')::float8, 0.1), "
			 "COALESCE((r.options OPERATOR(pg_catalog.->>) 'interval')::int, 1), COALESCE((r.options OPERATOR(pg_catalog.->>) 'quantile')::float8, 0.25), "
			 "COALESCE((r.options OPERATOR(pg_catalog.->>) 'resample')::float8, 0.25), "
			 "COALESCE((r.options OPERATOR(pg_catalog.->>) 'batch')::int, 0) "
			 ", r.shm_handle "
			 "FROM mop.runs r JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) r.dataset_id "
			 "WHERE r.id OPERATOR(pg_catalog.=) $1 FOR UPDATE OF r",
			 1, t, v, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run %lld does not exist", (long long) run->resume_run_id)));
	status = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	{
		/*
		 * Under the row lock: a run another coordinator owns now (two
		 * sessions resuming it at once, or one racing the automatic resume)
		 * is not taken over -- two coordinators would train every model
		 * twice.
		 */
		Datum		h = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 18, &isnull);

		if (!isnull && strcmp(status, "running") == 0 &&
			DatumGetInt64(h) != (int64) dsm_segment_handle(run_seg) &&
			mop_run_is_live(run->resume_run_id, DatumGetInt64(h)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("run %lld is being resumed by another session", (long long) run->resume_run_id),
					 errhint("Wait for it with mop_wait(%lld).", (long long) run->resume_run_id)));
	}
	if (strcmp(status, "done") == 0 && run->n_configs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has already finished", (long long) run->resume_run_id)));
	n_partitions = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	run->epochs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	run->seed = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	run->deterministic = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
	{
		char	   *pick = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 6, &isnull));

		int			p = mop_pick_parse(pick);

		run->pick = p >= 0 ? (mop_pick) p : MOP_PICK_RANDOM;
	}
	/* a resumed replay keeps following the recorded schedule */
	run->replay_run_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 7, &isnull));
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	td = SPI_tuptable->tupdesc;
		char	   *algo = TextDatumGetCString(SPI_getbinval(tup, td, 8, &isnull));

		run->max_resource = DatumGetInt32(SPI_getbinval(tup, td, 9, &isnull));
		run->eta = DatumGetInt32(SPI_getbinval(tup, td, 10, &isnull));
		run->min_resource = DatumGetInt32(SPI_getbinval(tup, td, 11, &isnull));
		run->tpe_startup = DatumGetInt32(SPI_getbinval(tup, td, 12, &isnull));
		run->tpe_gamma = DatumGetFloat8(SPI_getbinval(tup, td, 13, &isnull));
		run->pbt_interval = DatumGetInt32(SPI_getbinval(tup, td, 14, &isnull));
		run->pbt_quantile = DatumGetFloat8(SPI_getbinval(tup, td, 15, &isnull));
		run->pbt_resample = DatumGetFloat8(SPI_getbinval(tup, td, 16, &isnull));
		tpe_batch = DatumGetInt32(SPI_getbinval(tup, td, 17, &isnull));
		if (strcmp(algo, "hyperband") == 0)
			run->algo = MOP_ALGO_HYPERBAND;
		else if (strcmp(algo, "asha") == 0)
			run->algo = MOP_ALGO_ASHA;
		else if (strcmp(algo, "tpe") == 0)
			run->algo = MOP_ALGO_TPE;
		else if (strcmp(algo, "pbt") == 0)
			run->algo = MOP_ALGO_PBT;
		else if (algo[0] != '\0')
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("resuming a %s run is not supported", algo)));
	}
	v[1] = Int64GetDatum((int64) dsm_segment_handle(run_seg));
	/* a resumed run trains where the resuming session said: record it */
	v[2] = CStringGetTextDatum(run->gpu ? "gpu" : "cpu");
	/* models a cancel, failure or restart stopped mid-way train again */
	exec_sql("UPDATE mop.models SET status = 'training' WHERE run_id OPERATOR(pg_catalog.=) $1 "
			 "AND status OPERATOR(pg_catalog.=) ANY ('{cancelled,interrupted}'::pg_catalog.text[])",
			 1, t, v, SPI_OK_UPDATE);
	exec_sql("UPDATE mop.runs SET status = 'running', error = NULL, finished_at = NULL, "
			 "shm_handle = $2, options = pg_catalog.jsonb_set(options, '{device}', "
			 "pg_catalog.to_jsonb($3)) WHERE id OPERATOR(pg_catalog.=) $1", 3, t, v, SPI_OK_UPDATE);
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		run_ds = mop_dataset_lookup(payload_str(1), false);
		MemoryContextSwitchTo(old);
	}
	if (run->n_configs > 0 && run->algo == MOP_ALGO_FIXED)
	{
		/* configurations added to the run: new models, trained from scratch */
		models = MemoryContextAllocZero(TopMemoryContext, sizeof(ModelInfo) * run->n_configs);
		for (int i = 0; i < run->n_configs; i++)
			insert_model(run->resume_run_id, i, run->epochs);
		n_models = 0;			/* restore_models reloads them all */
	}
	commit_tx();
	SpinLockAcquire(&run->mutex);
	run->run_id = run->resume_run_id;
	SpinLockRelease(&run->mutex);
}

/* Add the run's models to the scheduler, restoring progress from hops. */
static void
restore_models(mop_sched *s)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	bool		isnull;

	resumed_hops = 0;
	begin_tx();
	v[0] = Int64GetDatum(run->run_id);
	exec_sql("SELECT m.id, m.epochs_done, m.status, m.higher_is_better, "
			 "(SELECT pg_catalog.array_agg(h.partition) FROM mop.hops h "
			 " WHERE h.model_id OPERATOR(pg_catalog.=) m.id "
			 " AND h.epoch OPERATOR(pg_catalog.=) (m.epochs_done OPERATOR(pg_catalog.+) 1)) "
			 "FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY m.id",
			 1, t, v, SPI_OK_SELECT);
	n_models = (int) SPI_processed;
	models = MemoryContextAllocZero(TopMemoryContext, sizeof(ModelInfo) * Max(n_models, 1));
	for (int i = 0; i < n_models; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	td = SPI_tuptable->tupdesc;
		int32		done = DatumGetInt32(SPI_getbinval(tup, td, 2, &isnull));
		char	   *status = TextDatumGetCString(SPI_getbinval(tup, td, 3, &isnull));
		bool		no_visits;
		Datum		arr = SPI_getbinval(tup, td, 5, &no_visits);
		int32		idx;

		models[i].id = DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
		models[i].target = strcmp(status, "training") == 0 ? run->epochs : done;
		idx = add_model(s, models[i].target);
		if (i == 0)
			run->higher_is_better = DatumGetBool(SPI_getbinval(tup, td, 4, &isnull));
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
		resumed_hops += (int64) done * n_partitions + mop_sched_visited(s, idx);
	}
	commit_tx();
	run->n_models = n_models;
}

/*
 * Replay: give every model the visiting sequence its counterpart (same
 * position in id order) followed in the recorded run.
 */
static void
load_sequences(mop_sched *s)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	bool		isnull;

	begin_tx();
	v[0] = Int64GetDatum(run->replay_run_id);
	exec_sql("SELECT (SELECT pg_catalog.array_agg(h.partition ORDER BY h.epoch, h.started_at, h.id) "
			 "FROM mop.hops h WHERE h.model_id OPERATOR(pg_catalog.=) m.id) "
			 "FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1 ORDER BY m.id",
			 1, t, v, SPI_OK_SELECT);
	if ((int) SPI_processed != n_models)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has %d models, its replay %d",
						(long long) run->replay_run_id, (int) SPI_processed, n_models)));
	for (int i = 0; i < n_models; i++)
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
							(long long) run->replay_run_id)));
	}
	commit_tx();
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
 */
static void
replay_driver(mop_sched *s)
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

	begin_tx();
	v[0] = Int64GetDatum(run->run_id);
	exec_sql("SELECT m.id, m.epochs_done, m.status, "
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
	if (n_existing > run->n_configs)
		elog(ERROR, "run %lld has more models than configurations", (long long) run->run_id);

	exec_sql("SELECT d.action, m.idx, d.score, d.from_resource, d.to_resource, d.why "
			 "FROM mop.decisions d JOIN (SELECT id, pg_catalog.row_number() OVER (ORDER BY id) "
			 "OPERATOR(pg_catalog.-) 1 AS idx FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $1) m "
			 "ON m.id OPERATOR(pg_catalog.=) d.model_id "
			 "WHERE d.run_id OPERATOR(pg_catalog.=) $1 ORDER BY d.id",
			 1, t, v, SPI_OK_SELECT);
	n_models = 0;
	replaying = true;
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	td = SPI_tuptable->tupdesc;
		char	   *action = TextDatumGetCString(SPI_getbinval(tup, td, 1, &isnull));
		int32		trial = (int32) DatumGetInt64(SPI_getbinval(tup, td, 2, &isnull));
		mop_action	a;

		if (strcmp(action, "stop") == 0 &&
			strcmp(TextDatumGetCString(SPI_getbinval(tup, td, 6, &isnull)), "median_stop") == 0)
		{
			/* the median rule's stop, not the driver's: its result follows as a report */
			if (trial >= n_models)
				elog(ERROR, "run %lld: stop of a model that does not exist", (long long) run->run_id);
			mop_sched_stop(s, trial);
			continue;
		}
		if (strcmp(action, "report") == 0)
		{
			Datum		sc = SPI_getbinval(tup, td, 3, &isnull);
			double		score = isnull ? NAN : DatumGetFloat8(sc);
			int32		resource = DatumGetInt32(SPI_getbinval(tup, td, 4, &isnull));

			if (hb)
				mop_hb_report(hb, trial, resource, score);
			else if (asha)
				mop_asha_report(asha, trial, resource, score);
			else
				tpe_report(trial, score);
			continue;
		}
		if (driver_next(&a) != MOP_POLL_ACTION || a.trial != trial ||
			strcmp(mop_act_name(a.kind), action) != 0 ||
			(tpe && a.kind == MOP_ACT_NEW && trial < n_existing &&
			 !same_config(tpe_configs[trial], configs[trial])))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the recorded decisions of run %lld do not replay (at decision %d: %s of model %d)",
							(long long) run->run_id, (int) r + 1, action, trial)));
		switch (a.kind)
		{
			case MOP_ACT_NEW:
				if (trial >= n_existing)
					elog(ERROR, "run %lld: decision for a model that does not exist", (long long) run->run_id);
				models[trial].id = ids[trial];
				models[trial].target = a.resource;
				add_model(s, a.resource);
				n_models = trial + 1;
				break;
			case MOP_ACT_CONTINUE:
				models[trial].target = a.resource;
				mop_sched_set_epochs(s, trial, a.resource);
				break;
			case MOP_ACT_STOP:
				mop_sched_stop(s, trial);
				break;
		}
	}
	replaying = false;
	commit_tx();

	/* progress of each model, and results committed but never reported */
	for (int i = 0; i < n_models; i++)
	{
		bool		running;

		begin_tx();
		v[0] = Int64GetDatum(ids[i]);
		exec_sql("SELECT pg_catalog.array_agg(h.partition) FROM mop.hops h, mop.models m "
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
		commit_tx();
		if (hb)
		{
			mop_hb_trial_info info;

			running = mop_hb_trial(hb, i, &info) == 0 && info.state == MOP_TRIAL_RUNNING;
		}
		else if (tpe)
			running = !tpe_done[i];
		else
		{
			mop_trial_state st;
			int32		rung;
			double		sc;

			running = mop_asha_trial(asha, i, &st, &rung, &sc) == 0 && st == MOP_TRIAL_RUNNING;
		}
		if (!running)
			continue;
		if (strcmp(status[i], "diverged") == 0 || strcmp(status[i], "failed") == 0)
		{
			mop_sched_stop(s, i);
			driver_report(i, models[i].target, NAN);
		}
		else if (tpe && strcmp(status[i], "stopped") == 0)
		{
			/* stopped by the median rule; its result was not recorded yet */
			mop_sched_stop(s, i);
			driver_report(i, done[i], driver_score(last_metric[i]));
		}
		else if (done[i] >= models[i].target)
			driver_report(i, models[i].target, driver_score(last_metric[i]));
	}
}

/*
 * Resume a PBT run: feed the recorded interval results ('report' rows) in
 * order into a fresh population built from the same seed; PBT's decisions
 * depend only on the seed and that sequence, so it makes the same exploits,
 * each checked against its recorded 'exploit' row, and then stands where
 * the interrupted run stood (members' values, ages, lineage).  A
 * deterministic run's reports come in generations (one transaction each,
 * all at the same epochs): each is ranked at once, as pbt_barrier did, and
 * members that had reached the next barrier when the run stopped wait there
 * again with the score of their last epoch.
 */
static void
replay_pbt(mop_sched *s)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	bool		isnull;
	int			n;
	char	  **action;
	int32	   *member,
			   *parent,
			   *epochs;
	double	   *score;
	int32		gen_epochs = 0;
	mop_pbt_decision *out = palloc(sizeof(mop_pbt_decision) * Max(n_models, 1));

	begin_tx();
	v[0] = Int64GetDatum(run->run_id);
	exec_sql("WITH m AS (SELECT id, pg_catalog.row_number() OVER (ORDER BY id) OPERATOR(pg_catalog.-) 1 AS idx "
			 "FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $1) "
			 "SELECT d.action, m.idx, d.score, pm.idx, d.from_resource FROM mop.decisions d "
			 "JOIN m ON m.id OPERATOR(pg_catalog.=) d.model_id "
			 "LEFT JOIN m pm ON pm.id OPERATOR(pg_catalog.=) d.parent_model_id "
			 "WHERE d.run_id OPERATOR(pg_catalog.=) $1 "
			 "AND d.action OPERATOR(pg_catalog.=) ANY ('{report,exploit}'::text[]) ORDER BY d.id",
			 1, t, v, SPI_OK_SELECT);
	n = (int) SPI_processed;
	action = palloc(sizeof(char *) * Max(n, 1));
	member = palloc(sizeof(int32) * Max(n, 1));
	parent = palloc(sizeof(int32) * Max(n, 1));
	epochs = palloc(sizeof(int32) * Max(n, 1));
	score = palloc(sizeof(double) * Max(n, 1));
	for (int r = 0; r < n; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	td = SPI_tuptable->tupdesc;
		Datum		d;

		action[r] = TextDatumGetCString(SPI_getbinval(tup, td, 1, &isnull));
		member[r] = (int32) DatumGetInt64(SPI_getbinval(tup, td, 2, &isnull));
		d = SPI_getbinval(tup, td, 3, &isnull);
		score[r] = isnull ? NAN : DatumGetFloat8(d);
		d = SPI_getbinval(tup, td, 4, &isnull);
		parent[r] = isnull ? -1 : (int32) DatumGetInt64(d);
		d = SPI_getbinval(tup, td, 5, &isnull);
		epochs[r] = isnull ? -1 : DatumGetInt32(d);
		if (member[r] < 0 || member[r] >= n_models)
			goto corrupt;
	}
	commit_tx();

	for (int r = 0; r < n;)
	{
		int32		n_out;
		int			next;

		if (strcmp(action[r], "report") != 0)
			goto corrupt;
		if (run->deterministic)
		{
			/* a generation: its reports, then its exploits */
			for (int32 m = 0; m < n_models; m++)
			{
				pbt_scores[m] = NAN;
				pbt_waiting[m] = false;
			}
			for (next = r; next < n && strcmp(action[next], "report") == 0 &&
				 epochs[next] == epochs[r]; next++)
			{
				pbt_scores[member[next]] = score[next];
				pbt_waiting[member[next]] = true;
			}
			gen_epochs = epochs[r];
			n_out = mop_pbt_step(pbt, pbt_scores, out, n_models);
			if (n_out < 0)
				goto corrupt;
			for (int32 i = 0; i < n_out; i++)
			{
				if (!pbt_waiting[out[i].member])
					continue;	/* a stopped member: never applied */
				if (next >= n || strcmp(action[next], "exploit") != 0 ||
					member[next] != out[i].member || parent[next] != out[i].parent)
					goto corrupt;
				next++;
			}
		}
		else
		{
			int			rc = mop_pbt_ready(pbt, member[r], score[r], out);

			next = r + 1;
			if (rc < 0)
				goto corrupt;
			if (rc == 1)
			{
				if (next >= n || strcmp(action[next], "exploit") != 0 ||
					member[next] != out->member || parent[next] != out->parent)
					goto corrupt;
				next++;
			}
		}
		r = next;
	}

	/* deterministic: members that had reached the next barrier wait there again */
	if (run->deterministic)
	{
		begin_tx();
		for (int32 m = 0; m < n_models; m++)
			pbt_waiting[m] = false;
		for (int32 m = 0; m < n_models; m++)
		{
			int32		done = mop_sched_epochs_done(s, m);

			if (mop_sched_remaining(s, m) == 0 || done == gen_epochs ||
				done % run->pbt_interval != 0)
				continue;
			if (done != gen_epochs + run->pbt_interval)
				goto corrupt;
			v[0] = Int64GetDatum(models[m].id);
			exec_sql("SELECT e.valid_metric FROM mop.epochs e, mop.models m "
					 "WHERE m.id OPERATOR(pg_catalog.=) $1 AND e.model_id OPERATOR(pg_catalog.=) m.id "
					 "AND e.epoch OPERATOR(pg_catalog.=) m.epochs_done", 1, t, v, SPI_OK_SELECT);
			{
				Datum		d = SPI_processed == 1 ?
					SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull) : (Datum) 0;

				pbt_scores[m] = SPI_processed == 1 && !isnull ? driver_score(DatumGetFloat8(d)) : NAN;
			}
			pbt_waiting[m] = true;
			mop_sched_set_epochs(s, m, done);
		}
		commit_tx();
	}
	pfree(out);
	return;

corrupt:
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("the recorded decisions of run %lld do not replay", (long long) run->run_id),
			 errdetail("Its PBT results and exploits in mop.decisions do not follow from its seed.")));
}

/* Start worker i; returns false if it could not be started. */
static bool
start_worker(int i)
{
	BackgroundWorker w;
	pid_t		pid;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "mop");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "mop_worker_main");
	snprintf(w.bgw_name, BGW_MAXLEN, "mop worker %d of run %lld", i, (long long) run->run_id);
	snprintf(w.bgw_type, BGW_MAXLEN, "mop worker");
	w.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(run_seg));
	w.bgw_notify_pid = MyProcPid;
	memcpy(w.bgw_extra, &i, sizeof(int));
	SpinLockAcquire(&run->mutex);
	run->slots[i].state = MOP_SLOT_STARTING;
	run->slots[i].latch = NULL;
	run->slots[i].generation++;	/* a process of an earlier generation writes nothing here */
	SpinLockRelease(&run->mutex);
	if (!RegisterDynamicBackgroundWorker(&w, &workers[i].handle))
		return false;
	if (WaitForBackgroundWorkerStartup(workers[i].handle, &pid) != BGWH_STARTED)
		return false;
	return true;
}

/* Ask every worker to exit (terminate: SIGTERM, stopping mid-task) and wait. */
static void
stop_workers(bool terminate)
{
	for (int i = 0; i < n_workers; i++)
	{
		Latch	   *latch;

		SpinLockAcquire(&run->mutex);
		if (run->slots[i].state != MOP_SLOT_GONE)
			run->slots[i].state = MOP_SLOT_EXIT;
		latch = run->slots[i].latch;
		SpinLockRelease(&run->mutex);
		if (terminate && workers[i].handle)
			TerminateBackgroundWorker(workers[i].handle);
		else if (latch)
			SetLatch(latch);
	}
	for (int i = 0; i < n_workers; i++)
		if (workers[i].handle)
			WaitForBackgroundWorkerShutdown(workers[i].handle);
}

/* Was the hop of task t committed (worker died after commit)? */
static bool
hop_committed(const mop_task *t)
{
	Oid			ty[3] = {INT8OID, INT4OID, INT4OID};
	Datum		v[3];
	bool		found;

	begin_tx();
	v[0] = Int64GetDatum(models[t->model].id);
	v[1] = Int32GetDatum(t->epoch + 1);
	v[2] = Int32GetDatum(t->partition);
	exec_sql("SELECT 1 FROM mop.hops WHERE model_id OPERATOR(pg_catalog.=) $1 "
			 "AND epoch OPERATOR(pg_catalog.=) $2 AND partition OPERATOR(pg_catalog.=) $3",
			 3, ty, v, SPI_OK_SELECT);
	found = SPI_processed > 0;
	commit_tx();
	return found;
}

static void record_decision(const mop_action *a);

/* Stop model i now (median rule): scheduler, catalog and decision record. */
static void
stop_model(mop_sched *s, int32 i, const mop_decision *d)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	mop_action	a;

	mop_sched_stop(s, i);
	begin_tx();
	v[0] = Int64GetDatum(models[i].id);
	exec_sql("UPDATE mop.models SET status = 'stopped', "
			 "updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1 "
			 "AND status OPERATOR(pg_catalog.=) ANY ('{done,training}'::text[])",
			 1, t, v, SPI_OK_UPDATE);
	memset(&a, 0, sizeof(a));
	a.kind = MOP_ACT_STOP;
	a.trial = i;
	a.bracket = -1;
	a.resource = -1;
	a.d = *d;
	record_decision(&a);
	commit_tx();
	SpinLockAcquire(&run->mutex);
	run->models_done++;
	SpinLockRelease(&run->mutex);
	/* TPE learns from a stopped trial too: its best score before the stop */
	if (tpe)
		driver_report(i, d->from_resource, d->score);
}

/*
 * PBT exploit and explore: member takes the latest committed checkpoint of
 * its parent -- weights and the whole optimizer state -- with the explored
 * hyperparameters; recorded in mop.decisions with its lineage.
 */
static void
pbt_exploit_in_tx(const mop_pbt_decision *d, int32 epochs)
{
	Oid			t[4];
	Datum		v[4];
	bool		isnull;
	ModelHandle *h;
	Jsonb	   *config;
	nn_spec		spec;
	nn_error	err;
	nn_status	st;
	int32		parent_epochs;

	t[0] = INT8OID;
	v[0] = Int64GetDatum(models[d->parent].id);
	exec_sql("SELECT state, epochs_done FROM mop.models WHERE id OPERATOR(pg_catalog.=) $1",
			 1, t, v, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "PBT parent model %lld is gone", (long long) models[d->parent].id);
	h = mop_model_from_blob(DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 1, &isnull)),
							CurrentMemoryContext);
	parent_epochs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	config = mop_space_config(pbt_space, d->values);
	mop_config_to_spec(config, run_ds, &spec);
	if ((st = nn_model_set_hyper(h->model, &spec, &err)) != NN_OK)
		mop_nn_error(st, &err, "could not apply the explored hyperparameters");
	t[0] = INT8OID;
	v[0] = Int64GetDatum(models[d->member].id);
	t[1] = BYTEAOID;
	v[1] = PointerGetDatum(mop_model_to_blob(h->model));
	t[2] = JSONBOID;
	v[2] = JsonbPGetDatum(config);
	mop_model_release(h);
	exec_sql("UPDATE mop.models SET state = $2, config = $3, "
			 "updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1",
			 3, t, v, SPI_OK_UPDATE);
	{
		Oid			dt[11] = {INT8OID, INT8OID, TEXTOID, INT8OID, JSONBOID, INT4OID,
		INT4OID, FLOAT8OID, FLOAT8OID, INT4OID, INT4OID};
		Datum		dv[11];
		char		dn[11];

		memset(dn, ' ', sizeof(dn));
		dv[0] = Int64GetDatum(run->run_id);
		dv[1] = Int64GetDatum(models[d->member].id);
		dv[2] = CStringGetTextDatum(d->reason);
		dv[3] = Int64GetDatum(models[d->parent].id);
		dv[4] = JsonbPGetDatum(config);
		dv[5] = Int32GetDatum(d->rank);
		dv[6] = Int32GetDatum(d->n_ranked);
		dv[7] = Float8GetDatum(d->score);
		dn[7] = isfinite(d->score) ? ' ' : 'n';
		dv[8] = Float8GetDatum(d->parent_score);
		dn[8] = isfinite(d->parent_score) ? ' ' : 'n';
		dv[9] = Int32GetDatum(epochs);
		dv[10] = Int32GetDatum(parent_epochs);
		if (SPI_execute_with_args("INSERT INTO mop.decisions (run_id, model_id, action, why, reason, "
								  "parent_model_id, hyperparameters, rank, rung_size, score, cutoff, "
								  "from_resource, to_resource) VALUES ($1, $2, 'exploit', 'exploit', "
								  "$3, $4, $5, $6, $7, $8, $9, $10, $11)",
								  11, dt, dv, dn, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not record a PBT decision of run %lld", (long long) run->run_id);
	}
}

/*
 * Deterministic PBT: synchronous generations.  A member that finishes an
 * interval waits (its epoch budget is held at its current epochs) until no
 * member can train any more -- every other one is waiting too, or stopped;
 * then the whole population is ranked at once (mop_pbt_step), the results
 * and exploits are recorded in one transaction in member order, and the
 * waiting members are released.  The decisions then depend only on the seed
 * and the scores, which under deterministic training depend only on the
 * seed.
 */
static void
pbt_barrier(mop_sched *s)
{
	mop_pbt_decision *out;
	int32		n_exploit,
				epochs = -1;
	bool		any = false;

	for (int32 m = 0; m < n_models; m++)
		any |= pbt_waiting[m];
	if (!any || mop_sched_active(s) > 0)
		return;
	out = palloc(sizeof(mop_pbt_decision) * n_models);
	for (int32 m = 0; m < n_models; m++)
		if (!pbt_waiting[m])
			pbt_scores[m] = NAN;	/* stopped: ranks last */
	n_exploit = mop_pbt_step(pbt, pbt_scores, out, n_models);
	if (n_exploit < 0)
		elog(ERROR, "run %lld: PBT could not rank its population (%d)",
			 (long long) run->run_id, n_exploit);
	begin_tx();
	for (int32 m = 0; m < n_models; m++)
		if (pbt_waiting[m])
		{
			epochs = mop_sched_epochs_done(s, m);
			record_report(m, epochs, pbt_scores[m], "result at the end of a generation");
		}
	for (int32 i = 0; i < n_exploit; i++)
		if (pbt_waiting[out[i].member])
			pbt_exploit_in_tx(&out[i], epochs);
	commit_tx();
	for (int32 m = 0; m < n_models; m++)
		if (pbt_waiting[m])
		{
			pbt_waiting[m] = false;
			mop_sched_set_epochs(s, m, models[m].target);
		}
	pfree(out);
}

/*
 * PBT: member finished an interval with score.  Decide, and record the
 * result and any exploit in one transaction, so that a resumed run replays
 * exactly the decisions whose effects were committed.
 */
static void
pbt_interval_done(int32 member, int32 epochs, double score)
{
	mop_pbt_decision d;
	int			r = mop_pbt_ready(pbt, member, score, &d);

	if (r < 0)
		elog(ERROR, "run %lld: PBT refused a result of member %d (%d)",
			 (long long) run->run_id, member, r);
	begin_tx();
	record_report(member, epochs, score, "result at the end of an interval");
	if (r == 1)
		pbt_exploit_in_tx(&d, epochs);
	commit_tx();
}

/* A validation metric as a driver score: higher is better, NaN: failed. */
static double
driver_score(double vm)
{
	if (!isfinite(vm))
		return NAN;
	return run->higher_is_better ? vm : -vm;
}

/* Fold a finished task into the scheduler, the driver and the progress counters. */
static void
task_finished(mop_sched *s, int w, MopTaskOutcome outcome, double seconds, double vm,
			  double vl)
{
	mop_task   *t = &workers[w].task;

	workers[w].busy = false;
	if (outcome == MOP_TASK_OK)
	{
		bool		epoch_done = mop_sched_complete(s, t, seconds);
		bool		target_done = epoch_done &&
			mop_sched_epochs_done(s, t->model) >= models[t->model].target;

		/*
		 * Hermes: prefer the models whose loss falls fastest per second,
		 * weighed against where they stand (the loss expected after one
		 * more typical epoch; see src/search/mop_hermes.h for why the rate
		 * alone is not used).
		 */
		if (run->pick == MOP_PICK_PRIORITY &&
			(mop_hermes_history_trained(&hermes, t->model, seconds) != MOP_SEARCH_OK ||
			 (epoch_done &&
			  mop_hermes_history_evaluated(&hermes, s, t->model, vl) != MOP_SEARCH_OK)))
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));

		SpinLockAcquire(&run->mutex);
		run->hops_done++;
		if (epoch_done && isfinite(vm) &&
			(isnan(run->best_metric) ||
			 (run->higher_is_better ? vm > run->best_metric : vm < run->best_metric)))
			run->best_metric = vm;
		if (target_done && !DRIVER)
			run->models_done++;
		SpinLockRelease(&run->mutex);
		if (target_done && DRIVER)
			driver_report(t->model, models[t->model].target, driver_score(vm));
		if (epoch_done && pbt && !target_done)
		{
			int32		epochs = mop_sched_epochs_done(s, t->model);

			if (epochs % run->pbt_interval == 0)
			{
				if (run->deterministic)
				{
					/* wait at the generation barrier */
					pbt_waiting[t->model] = true;
					pbt_scores[t->model] = driver_score(vm);
					mop_sched_set_epochs(s, t->model, epochs);
					pbt_barrier(s);
				}
				else
					pbt_interval_done(t->model, epochs, driver_score(vm));
			}
		}
		if (epoch_done && median)
		{
			mop_decision d;
			int			epochs = mop_sched_epochs_done(s, t->model);

			int			stop = mop_median_report(median, t->model, epochs,
												 driver_score(vm), &d);

			if (target_done)
				mop_median_complete(median, t->model);
			else if (stop == 1)
			{
				d.from_resource = epochs;
				d.to_resource = -1;
				stop_model(s, t->model, &d);
			}
		}
	}
	else
	{
		/* diverged or failed: the model stops, the run goes on */
		mop_sched_abort(s, t);
		mop_sched_stop(s, t->model);
		SpinLockAcquire(&run->mutex);
		run->models_done++;
		SpinLockRelease(&run->mutex);
		if (DRIVER)
			driver_report(t->model, models[t->model].target, NAN);
		if (pbt && run->deterministic)
			pbt_barrier(s);			/* it may have been the last one awaited */
	}
}

/* Record a driver decision in mop.decisions (inside a transaction). */
static void
record_decision(const mop_action *a)
{
	const mop_decision *d = &a->d;
	Oid			t[14] = {INT8OID, INT8OID, TEXTOID, TEXTOID, TEXTOID, INT4OID, INT4OID,
	INT4OID, INT4OID, INT4OID, FLOAT8OID, FLOAT8OID, INT4OID, INT4OID};
	Datum		v[14];
	char		n[14];
	int32		ints[5] = {d->bracket, d->rung, d->rank, d->rung_size, d->keep};

	memset(n, ' ', sizeof(n));
	v[0] = Int64GetDatum(run->run_id);
	v[1] = Int64GetDatum(models[a->trial].id);
	v[2] = CStringGetTextDatum(mop_act_name(a->kind));
	v[3] = CStringGetTextDatum(mop_why_name(d->why));
	v[4] = CStringGetTextDatum(d->reason);
	for (int i = 0; i < 5; i++)
	{
		v[5 + i] = Int32GetDatum(ints[i]);
		n[5 + i] = ints[i] < 0 ? 'n' : ' ';
	}
	v[10] = Float8GetDatum(d->score);
	n[10] = isfinite(d->score) ? ' ' : 'n';
	v[11] = Float8GetDatum(d->cutoff);
	n[11] = isfinite(d->cutoff) ? ' ' : 'n';
	v[12] = Int32GetDatum(d->from_resource);
	n[12] = d->from_resource < 0 ? 'n' : ' ';
	v[13] = Int32GetDatum(a->kind == MOP_ACT_STOP ? d->to_resource : a->resource);
	n[13] = (a->kind == MOP_ACT_STOP && d->to_resource < 0) ? 'n' : ' ';
	if (SPI_execute_with_args("INSERT INTO mop.decisions (run_id, model_id, action, why, reason, "
							  "bracket, rung, rank, rung_size, keep, score, cutoff, "
							  "from_resource, to_resource) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
							  14, t, v, n, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record a decision of run %lld", (long long) run->run_id);
}

/*
 * Carry out one driver action: start a new trial, raise the budget of a
 * promoted one (it resumes from its checkpoint), or stop one.  In its own
 * transaction, with the decision recorded.
 */
static void
apply_action(mop_sched *s, const mop_action *a)
{
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2];

	begin_tx();
	switch (a->kind)
	{
		case MOP_ACT_NEW:
			if (a->trial != n_models)
				elog(ERROR, "mop run %lld: driver started trial %d, expected %d",
					 (long long) run->run_id, a->trial, n_models);
			insert_model(run->run_id, a->trial, a->resource);
			if (add_model(s, a->resource) != a->trial)
				elog(ERROR, "mop run %lld: scheduler out of step with the driver",
					 (long long) run->run_id);
			SpinLockAcquire(&run->mutex);
			run->n_models = n_models;
			SpinLockRelease(&run->mutex);
			break;
		case MOP_ACT_CONTINUE:
			models[a->trial].target = a->resource;
			mop_sched_set_epochs(s, a->trial, a->resource);
			v[0] = Int64GetDatum(models[a->trial].id);
			v[1] = CStringGetTextDatum("training");
			exec_sql("UPDATE mop.models SET status = $2 WHERE id OPERATOR(pg_catalog.=) $1 "
					 "AND status OPERATOR(pg_catalog.=) ANY ('{done,training}'::text[])",
					 2, t, v, SPI_OK_UPDATE);
			break;
		case MOP_ACT_STOP:
			mop_sched_stop(s, a->trial);
			v[0] = Int64GetDatum(models[a->trial].id);
			v[1] = CStringGetTextDatum(a->d.why == MOP_WHY_FINISHED ? "done" : "stopped");
			exec_sql("UPDATE mop.models SET status = $2 WHERE id OPERATOR(pg_catalog.=) $1 "
					 "AND status OPERATOR(pg_catalog.=) ANY ('{done,training}'::text[])",
					 2, t, v, SPI_OK_UPDATE);
			SpinLockAcquire(&run->mutex);
			run->models_done++;
			SpinLockRelease(&run->mutex);
			break;
	}
	record_decision(a);
	commit_tx();
}

/* Tell TPE trial i's score. */
static void
tpe_tell(int32 i)
{
	if (mop_tpe_tell(tpe, tpe_ids[i], tpe_score[i]) != 0)
		elog(ERROR, "run %lld: TPE does not know trial %d", (long long) run->run_id, i);
	tpe_told[i] = true;
	while (tpe_told_prefix < n_models && tpe_told[tpe_told_prefix])
		tpe_told_prefix++;
}

/*
 * The score of TPE trial i arrived.  TPE is told at once, except in a
 * deterministic run: there the scores of a batch are held until the whole
 * batch is in and then told in trial order, so that no proposal of the
 * batch sees a result of its own batch (which one arrives first is timing).
 */
static void
tpe_report(int32 trial, double score)
{
	if (tpe_done[trial])
		elog(ERROR, "run %lld: TPE trial %d reported twice", (long long) run->run_id, trial);
	tpe_done[trial] = true;
	tpe_score[trial] = score;
	tpe_running--;
	if (!run->deterministic)
	{
		tpe_tell(trial);
		return;
	}
	for (;;)
	{
		int32		first = tpe_told_prefix,
					last = Min(first + Max(tpe_batch, 1), run->n_configs);

		if (first >= n_models)
			return;
		for (int32 i = first; i < last; i++)
			if (i >= n_models || !tpe_done[i])
				return;			/* the batch is not complete yet */
		for (int32 i = first; i < last; i++)
			tpe_tell(i);
	}
}

/*
 * Deterministic TPE proposes in synchronous batches of tpe_batch trials:
 * trial n is asked only once every trial of the earlier batches has been
 * told.  What TPE knows at each ask -- the complete trials and the pending
 * "constant liars" -- then depends only on the seed, never on timing.
 */
static bool
tpe_batch_ready(int32 n)
{
	return tpe_told_prefix >= (n / Max(tpe_batch, 1)) * Max(tpe_batch, 1);
}

/* Ask the run's driver for its next action. */
static mop_poll
driver_next(mop_action *a)
{
	if (hb)
		return mop_hb_next(hb, a);
	if (asha)
		return mop_asha_next(asha, a);
	/*
	 * TPE: a new proposal whenever a worker would idle, up to the budget,
	 * with at most one trial in flight per worker -- on MOP a worker idles
	 * whenever the models in flight have visited its partition, and without
	 * the cap every proposal would be made before any result is known.
	 */
	if (n_models < run->n_configs &&
		(replaying || (run->deterministic ? tpe_batch_ready(n_models) : tpe_running < n_workers)))
	{
		double		x[64];
		MemoryContext old;
		int32		n_obs = mop_tpe_n_complete(tpe);

		tpe_ids[n_models] = mop_tpe_ask(tpe, x);
		if (tpe_ids[n_models] < 0)
			elog(ERROR, "TPE could not propose a configuration (%d)", tpe_ids[n_models]);
		old = MemoryContextSwitchTo(TopMemoryContext);
		tpe_configs[n_models] = mop_space_config(pbt_space, x);
		MemoryContextSwitchTo(old);
		memset(a, 0, sizeof(*a));
		a->kind = MOP_ACT_NEW;
		a->trial = n_models;
		a->bracket = -1;
		a->resource = run->epochs;
		mop_decision_init(&a->d, MOP_WHY_START, n_models);
		a->d.from_resource = 0;
		a->d.to_resource = run->epochs;
		snprintf(a->d.reason, sizeof(a->d.reason), "%s after %d completed trials",
				 n_obs < run->tpe_startup ? "random startup proposal" : "TPE proposal (best l/g of the candidates)",
				 n_obs);
		tpe_running++;
		return MOP_POLL_ACTION;
	}
	return tpe_running > 0 ? MOP_POLL_WAIT : MOP_POLL_DONE;
}

/*
 * Record a result told to a driver or to PBT (a 'report' row of
 * mop.decisions), in the caller's transaction: replaying these rows in order
 * into a fresh driver rebuilds its state when the run is resumed.
 */
static void
record_report(int32 trial, int32 resource, double score, const char *reason)
{
	Oid			t[5] = {INT8OID, INT8OID, FLOAT8OID, INT4OID, TEXTOID};
	Datum		v[5];
	char		n[5] = {' ', ' ', isfinite(score) ? ' ' : 'n', ' ', ' '};

	v[0] = Int64GetDatum(run->run_id);
	v[1] = Int64GetDatum(models[trial].id);
	v[2] = Float8GetDatum(isfinite(score) ? score : 0.0);
	v[3] = Int32GetDatum(resource);
	v[4] = CStringGetTextDatum(reason);
	if (SPI_execute_with_args("INSERT INTO mop.decisions (run_id, model_id, action, why, reason, "
							  "score, from_resource) VALUES ($1, $2, 'report', 'report', $5, $3, $4)",
							  5, t, v, n, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record a result of run %lld", (long long) run->run_id);
}

/* Report a model's result at its target to the run's driver. */
static void
driver_report(int32 trial, int32 resource, double score)
{
	if (hb || asha || tpe)
	{
		/* recorded, so that a resumed run can replay the driver exactly */
		begin_tx();
		record_report(trial, resource, score, hb || asha ? "result at the rung" : "result of the trial");
		commit_tx();
	}
	if (hb)
		mop_hb_report(hb, trial, resource, score);
	else if (asha)
		mop_asha_report(asha, trial, resource, score);
	else if (tpe)
		tpe_report(trial, score);
}

/* Settle worker w's task after its process died, and start a new one. */
static void
worker_died(mop_sched *s, int w)
{
	if (workers[w].busy)
	{
		if (hop_committed(&workers[w].task))
			task_finished(s, w, MOP_TASK_OK, 0, NAN, NAN);
		else
		{
			mop_sched_abort(s, &workers[w].task);
			workers[w].busy = false;
		}
	}
	if (++workers[w].restarts > MAX_RESTARTS || !start_worker(w))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("mop worker %d of run %lld died and could not be restarted",
						w, (long long) run->run_id),
				 errhint("See the server log for its last error; mop_resume(%lld) continues the run.",
						 (long long) run->run_id)));
	elog(LOG, "mop run %lld: restarted worker %d", (long long) run->run_id, w);
}

/*
 * A worker whose task made no progress (no minibatch trained) for
 * mop.task_timeout -- stopped, hung in a system call -- is given up: told to
 * terminate, and its slot gets a new process (a new generation) that runs
 * the task again unless its sub-epoch committed.  The old process, should
 * it ever run again, sees that its slot has moved on and stops before
 * committing anything.
 */
static TimestampTz progress_at[MOP_MAX_WORKERS];
static int64 progress_rows[MOP_MAX_WORKERS];

static bool
worker_hung(int w, const MopSlot *copy)
{
	TimestampTz now = GetCurrentTimestamp();

	/* (only while it trains: validating and committing report no minibatches) */
	if (run->task_timeout_ms <= 0 || copy->state != MOP_SLOT_ASSIGNED || !workers[w].busy ||
		(copy->rows_total > 0 && copy->rows_done >= copy->rows_total))
	{
		progress_at[w] = now;
		progress_rows[w] = -1;
		return false;
	}
	if (copy->rows_done != progress_rows[w] || progress_at[w] == 0)
	{
		progress_rows[w] = copy->rows_done;
		progress_at[w] = now;
		return false;
	}
	if (!TimestampDifferenceExceeds(progress_at[w], now, run->task_timeout_ms))
		return false;
	ereport(LOG,
			(errmsg("mop run %lld: worker %d (pid %d) made no progress on model %lld for %d ms; replacing it",
					(long long) run->run_id, w, (int) copy->pid, (long long) copy->model_id,
					run->task_timeout_ms)));
	TerminateBackgroundWorker(workers[w].handle);
	progress_at[w] = 0;
	progress_rows[w] = -1;
	return true;
}

/* Hand a task to idle worker w if the scheduler has one. */
static bool
assign(mop_sched *s, int w, Latch *latch)
{
	mop_task	t;

	if (mop_sched_next(s, w, &t) != MOP_ASSIGNED)
		return false;
	/* convergence-aware: a started model's minimum quantum (fresh_priority) */
	if (run->pick == MOP_PICK_PRIORITY && mop_hermes_history_evals(&hermes, t.model) == 0)
		mop_sched_set_priority(s, t.model, MOP_HERMES_NEW_PRIORITY);
	workers[w].busy = true;
	workers[w].task = t;
	SpinLockAcquire(&run->mutex);
	run->slots[w].model_index = t.model;
	run->slots[w].model_id = models[t.model].id;
	run->slots[w].partition = t.partition;
	run->slots[w].epoch = t.epoch + 1;
	run->slots[w].last_of_epoch = t.last_of_epoch;
	run->slots[w].final_epoch = t.last_of_epoch && t.epoch + 1 >= models[t.model].target;
	run->slots[w].rows_done = 0;
	run->slots[w].rows_total = 0;
	run->slots[w].started_at = GetCurrentTimestamp();
	run->slots[w].state = MOP_SLOT_ASSIGNED;
	SpinLockRelease(&run->mutex);
	if (latch)
		SetLatch(latch);
	return true;
}

/*
 * May the driver be asked for an action now?  On MOP a worker is often
 * briefly without a task (the models in flight have visited its partition
 * or are busy), and ASHA would answer each such moment with a new
 * configuration.  So under ASHA at most two models per worker have work
 * left: enough for a worker to find one, few enough that results (and
 * promotions) come before every trial is started.
 */
static bool
driver_may_start(const mop_sched *s)
{
	return !asha || mop_sched_active(s) < 2 * n_workers;
}

/*
 * The scheduling loop; returns true if cancelled.  Each round: settle
 * finished tasks and dead workers, give idle workers work, and sleep until a
 * worker reports.  With a driver (Hyperband, ASHA), a worker that the
 * scheduler cannot serve asks the driver for actions -- start, promote,
 * stop -- until one gives it work or the driver has nothing more now: new
 * trials start only when a worker would otherwise be idle, as ASHA wants.
 */
static bool
schedule(mop_sched *s)
{
	mop_poll	driver = DRIVER ? MOP_POLL_WAIT : MOP_POLL_DONE;

	for (;;)
	{
		bool		cancel;

		CHECK_FOR_INTERRUPTS();
		for (int w = 0; w < n_workers; w++)
		{
			MopSlot		copy;
			pid_t		pid;

			SpinLockAcquire(&run->mutex);
			copy = run->slots[w];
			SpinLockRelease(&run->mutex);
			if (copy.state == MOP_SLOT_DONE)
			{
				task_finished(s, w, copy.outcome, copy.seconds, copy.valid_metric,
							  copy.valid_loss);
				SpinLockAcquire(&run->mutex);
				run->slots[w].state = MOP_SLOT_IDLE;
				SpinLockRelease(&run->mutex);
			}
			else if (copy.state == MOP_SLOT_GONE ||
					 (copy.state != MOP_SLOT_EXIT &&
					  GetBackgroundWorkerPid(workers[w].handle, &pid) == BGWH_STOPPED) ||
					 worker_hung(w, &copy))
				worker_died(s, w);
		}
		SpinLockAcquire(&run->mutex);
		cancel = run->cancel_requested;
		SpinLockRelease(&run->mutex);
		if (cancel)
			return true;
		for (int w = 0; w < n_workers; w++)
		{
			MopSlot		copy;

			SpinLockAcquire(&run->mutex);
			copy = run->slots[w];
			SpinLockRelease(&run->mutex);
			if (copy.state != MOP_SLOT_IDLE || workers[w].busy)
				continue;
			while (!assign(s, w, copy.latch) && DRIVER)
			{
				mop_action	a;

				if (!driver_may_start(s))
					break;

				driver = driver_next(&a);
				if (driver != MOP_POLL_ACTION)
					break;
				apply_action(s, &a);
			}
		}
		if (mop_sched_finished(s))
		{
			/* nothing runs: give the driver its last word (e.g. stop paused trials) */
			if (DRIVER)
			{
				mop_action	a;

				/* (this is also the path at startup, before workers are ready) */
				while (driver_may_start(s) &&
					   (driver = driver_next(&a)) == MOP_POLL_ACTION)
					apply_action(s, &a);
				if (!mop_sched_finished(s))
					continue;
			}
			if (driver == MOP_POLL_DONE)
				return false;
			elog(ERROR, "mop run %lld: the search driver waits for results no model can give",
				 (long long) run->run_id);
		}
		/* superseded checkpoints: VACUUM mop.models now and then (reclaim.c) */
		mop_reclaim_checkpoints(run->run_id, run->hops_done, n_models, false);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * The status a run ended with when nobody cancelled it: "done", unless no
 * model ended usable (done, stopped or diverged) and some failed -- then
 * "failed", with the first model's error, so that a run of failures does
 * not look like a success.
 */
static const char *
final_status(char **error)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(run->run_id);
	bool		isnull;
	int64		usable,
				failed;
	const char *result = "done";

	*error = NULL;
	if (run->run_id == 0)
		return result;
	begin_tx();
	exec_sql("SELECT pg_catalog.count(*) FILTER (WHERE m.status OPERATOR(pg_catalog.=) "
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
	commit_tx();
	return result;
}

/*
 * Record the run's final status in the catalog (own transaction); models
 * of a cancelled run that were still training say so.
 */
static void
record_status(const char *status, const char *error)
{
	Oid			t[3] = {INT8OID, TEXTOID, TEXTOID};
	Datum		v[3];
	char		nulls[3] = {' ', ' ', error ? ' ' : 'n'};

	if (run->run_id == 0)
		return;
	begin_tx();
	v[0] = Int64GetDatum(run->run_id);
	v[1] = CStringGetTextDatum(status);
	v[2] = error ? CStringGetTextDatum(error) : (Datum) 0;
	if (SPI_execute_with_args("UPDATE mop.runs SET status = $2, error = $3, "
							  "finished_at = pg_catalog.clock_timestamp(), shm_handle = NULL "
							  "WHERE id OPERATOR(pg_catalog.=) $1",
							  3, t, v, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the status of run %lld", (long long) run->run_id);
	if ((strcmp(status, "cancelled") == 0 || strcmp(status, "failed") == 0) &&
		SPI_execute_with_args(MOP_CANCEL_MODELS_SQL, 1, t, v, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record the status of the models of run %lld",
			 (long long) run->run_id);
	commit_tx();
}

/* Publish the final state to the shared segment and wake the caller. */
static void
publish_done(const char *status, const char *error)
{
	Latch	   *latch;

	SpinLockAcquire(&run->mutex);
	strlcpy(run->status, status, sizeof(run->status));
	if (error)
		strlcpy(run->error, error, sizeof(run->error));
	run->phase = MOP_PHASE_DONE;
	latch = run->caller_latch;
	SpinLockRelease(&run->mutex);
	if (latch)
		SetLatch(latch);
}

/* On exit, even by FATAL: never leave the caller or workers waiting. */
static void
coordinator_detach(dsm_segment *seg, Datum arg)
{
	Latch	   *latches[MOP_MAX_WORKERS + 1];
	int			n = 0;

	SpinLockAcquire(&run->mutex);
	if (run->phase != MOP_PHASE_DONE)
	{
		strlcpy(run->status, "failed", sizeof(run->status));
		if (run->error[0] == '\0')
			strlcpy(run->error, "the run's coordinator exited", sizeof(run->error));
		run->phase = MOP_PHASE_DONE;
	}
	run->coordinator_latch = NULL;
	for (int i = 0; i < MOP_MAX_WORKERS; i++)
		if (run->slots[i].latch)
		{
			run->slots[i].state = MOP_SLOT_EXIT;
			latches[n++] = run->slots[i].latch;
		}
	if (run->caller_latch)
		latches[n++] = run->caller_latch;
	SpinLockRelease(&run->mutex);
	for (int i = 0; i < n; i++)
		SetLatch(latches[i]);
}

/* Background worker entry point. */
void
mop_coordinator_main(Datum arg)
{
	mop_sched  *s = NULL;
	bool		cancelled;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "mop coordinator");
	run_seg = dsm_attach(DatumGetUInt32(arg));
	if (run_seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mop coordinator could not attach to its run's shared memory")));
	dsm_pin_mapping(run_seg);
	run = dsm_segment_address(run_seg);
	if (run->magic != MOP_RUN_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("mop coordinator found a bad run segment")));
	on_dsm_detach(run_seg, coordinator_detach, (Datum) 0);
	BackgroundWorkerInitializeConnectionByOid(run->database, run->user, 0);
	mop_pin_search_path();
	pgstat_report_appname("mop coordinator");
	mop_blas_threads = run->blas_threads;

	SpinLockAcquire(&run->mutex);
	run->coordinator_pid = MyProcPid;
	run->coordinator_latch = MyLatch;
	SpinLockRelease(&run->mutex);

	mop_hermes_history_init(&hermes);
	PG_TRY();
	{
		if (run->resume_run_id)
			load_run();
		else
			create_run();
		n_workers = Min(run->n_workers, n_partitions);
		if (tpe_batch <= 0)
			tpe_batch = n_workers;
		s = mop_sched_new(n_workers, n_partitions, (uint64) run->seed, run->deterministic,
						  (mop_pick) run->pick);
		if (s == NULL)
			elog(ERROR, "could not create the scheduler (%d workers, %d partitions)",
				 n_workers, n_partitions);
		if (run->algo == MOP_ALGO_HYPERBAND &&
			(hb = mop_hb_new(run->max_resource, run->eta, 0)) == NULL)
			elog(ERROR, "could not create the Hyperband driver (R %d, eta %d)",
				 run->max_resource, run->eta);
		if (run->median_stop &&
			(median = mop_median_new(2, 3, 0, MOP_MEDIAN_BEST)) == NULL)
			elog(ERROR, "could not create the median stopping rule");
		if (run->algo == MOP_ALGO_PBT)
		{
			mop_pbt_opts o = {run->pbt_quantile, run->pbt_resample, 0.8, 1.2};
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			pbt_space = mop_space_describe(DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																			  CStringGetDatum(payload_str(2)))));
			MemoryContextSwitchTo(old);
			if ((pbt = mop_pbt_new(pbt_space->params, pbt_space->n_params, run->n_configs,
								   &o, (uint64) run->seed)) == NULL)
				elog(ERROR, "could not create the PBT population");
			pbt_waiting = MemoryContextAllocZero(TopMemoryContext, sizeof(bool) * run->n_configs);
			pbt_scores = MemoryContextAllocZero(TopMemoryContext, sizeof(double) * run->n_configs);
		}
		if (run->algo == MOP_ALGO_TPE)
		{
			mop_tpe_opts o;
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			pbt_space = mop_space_describe(DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																			  CStringGetDatum(payload_str(2)))));
			tpe_ids = palloc0(sizeof(int32) * run->n_configs);
			tpe_told = palloc0(sizeof(bool) * run->n_configs);
			tpe_done = palloc0(sizeof(bool) * run->n_configs);
			tpe_score = palloc0(sizeof(double) * run->n_configs);
			tpe_configs = palloc0(sizeof(Jsonb *) * run->n_configs);
			MemoryContextSwitchTo(old);
			mop_tpe_default_opts(&o);
			o.n_startup = run->tpe_startup;
			o.gamma = run->tpe_gamma;
			if ((tpe = mop_tpe_new(pbt_space->params, pbt_space->n_params, &o,
								   (uint64) run->seed)) == NULL)
				elog(ERROR, "could not create the TPE sampler");
		}
		if (run->algo == MOP_ALGO_ASHA &&
			(asha = mop_asha_new(run->min_resource, run->max_resource, run->eta,
								 run->n_configs)) == NULL)
			elog(ERROR, "could not create the ASHA driver (r_min %d, R %d, eta %d)",
				 run->min_resource, run->max_resource, run->eta);
		if (run->resume_run_id && DRIVER)
		{
			models = MemoryContextAllocZero(TopMemoryContext,
											sizeof(ModelInfo) * Max(run->n_configs, 1));
			replay_driver(s);
		}
		else if (run->resume_run_id)
		{
			restore_models(s);
			if (pbt)
			{
				replay_pbt(s);
				if (run->deterministic)
					pbt_barrier(s);
			}
		}
		else
			for (int i = 0; i < n_models; i++)
				add_model(s, models[i].target);
		if (run->replay_run_id)
			load_sequences(s);

		SpinLockAcquire(&run->mutex);
		run->n_models = n_models;
		run->hops_total = hb ? mop_hyperband_cost(run->max_resource, run->eta, 1) * n_partitions :
			(int64) run->n_configs * (asha ? run->min_resource : run->epochs) * n_partitions;
		run->hops_done = resumed_hops;
		run->phase = MOP_PHASE_RUNNING;
		run->started_at = GetCurrentTimestamp();
		SpinLockRelease(&run->mutex);
		if (run->caller_latch)
			SetLatch(run->caller_latch);

		for (int i = 0; i < n_workers; i++)
			if (!start_worker(i))
			{
				if (i == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
							 errmsg("could not start any mop worker"),
							 errhint("Raise max_worker_processes (now %d); each run needs a coordinator and one worker per partition group.",
									 max_worker_processes)));
				/* fewer workers than asked: rebuild the scheduler for them */
				if (run->resume_run_id && DRIVER)
					ereport(ERROR,
							(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
							 errmsg("only %d of %d workers could be started to resume run %lld",
									i, n_workers, (long long) run->run_id),
							 errhint("Raise max_worker_processes or resume with fewer workers.")));
				n_workers = i;
				mop_sched_free(s);
				s = mop_sched_new(n_workers, n_partitions, (uint64) run->seed,
								  run->deterministic, (mop_pick) run->pick);
				if (run->resume_run_id)
					restore_models(s);
				else
					for (int k = 0; k < n_models; k++)
						add_model(s, models[k].target);
				if (run->replay_run_id)
					load_sequences(s);
				elog(LOG, "mop run %lld: only %d workers could be started",
					 (long long) run->run_id, n_workers);
				break;
			}
		run->workers_started = n_workers;

		cancelled = schedule(s);
		stop_workers(cancelled);
		mop_reclaim_checkpoints(run->run_id, run->hops_done, n_models, true);
		{
			char	   *error = NULL;
			const char *final = cancelled ? "cancelled" : final_status(&error);

			record_status(final, error);
			publish_done(final, error);
		}
	}
	PG_CATCH();
	{
		ErrorData  *ed;
		char		msg[512];

		MemoryContextSwitchTo(TopMemoryContext);
		ed = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		strlcpy(msg, ed->message ? ed->message : "unknown error", sizeof(msg));
		elog(LOG, "mop run %lld failed: %s", (long long) run->run_id, msg);
		stop_workers(true);
		SpinLockAcquire(&run->mutex);
		strlcpy(run->error, msg, sizeof(run->error));
		run->error_code = ed->sqlerrcode;
		strlcpy(run->error_hint, ed->hint ? ed->hint : "", sizeof(run->error_hint));
		SpinLockRelease(&run->mutex);
		PG_TRY();
		{
			record_status("failed", msg);
		}
		PG_CATCH();
		{
			FlushErrorState();
			AbortCurrentTransaction();
		}
		PG_END_TRY();
		publish_done("failed", msg);
	}
	PG_END_TRY();
	mop_sched_free(s);
	mop_hb_free(hb);
	mop_asha_free(asha);
	mop_median_free(median);
	mop_pbt_free(pbt);
	mop_tpe_free(tpe);
	mop_hermes_history_free(&hermes);
	proc_exit(0);
}
