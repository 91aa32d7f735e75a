/*
 * explain.c -- what a grid search would cost, before it runs.
 *
 * mop_explain(dataset, space, epochs) gives one row per configuration of
 * the grid: its memory (from nn_spec_memory: nothing is allocated for it)
 * and its speed, from a profile: a throwaway model trains a few minibatches
 * on the dataset's first training buffer, and evaluates them, on this
 * backend (one BLAS thread, as a run's worker on a server whose cores its
 * workers fill; mop.threads_per_worker's count when set).  Configurations with the
 * same model, optimizer and batch size share one profile, kept in
 * mop.profiles for the dataset, this library and this BLAS, so a second
 * plan of the dataset measures nothing.  From the rows per second and the
 * hop cost model (src/search/mop_plan.h, its constants the mop.plan_*
 * settings) follow a sub-epoch's, an epoch's and the configuration's time.
 *
 * mop_explain_workers(dataset, space, epochs, max_workers) runs the MOP
 * scheduler's simulator (src/search/plan.c over sim.c) over those epoch
 * times for 1..max_workers workers: the predicted makespan, its lower
 * bound, the speedup and efficiency, and the knee (the most workers still
 * at least 80 % efficient).
 *
 * In explain_text.c, mop_explain_text(dataset, space, epochs,
 * max_workers) says both in text, as EXPLAIN does, from one profile: the
 * totals, the configurations, the makespan for 1..max_workers workers with
 * the knee marked, and warnings (a configuration over
 * mop.max_model_memory, fewer partitions than the workers a run would use,
 * one configuration that alone bounds the makespan).
 *
 * In explain_adaptive.c, mop_explain_hyperband, mop_explain_asha and
 * mop_explain_trials plan the searches whose configurations are drawn as
 * they run (Hyperband, ASHA; random search, TPE and PBT): their epochs at
 * the mean epoch of configurations drawn from the space.
 *
 * mop_plan_auto_workers_for() is what workers => 'auto' asks of the
 * search functions (searches.c): the same plan, its knee capped.
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

PG_FUNCTION_INFO_V1(mop_explain);
PG_FUNCTION_INFO_V1(mop_explain_workers);

/* profile at least this long (seconds), at most this many repetitions */
#define PROFILE_SECONDS 0.05
#define PROFILE_REPEATS 50
/* rows of the first buffer a profile trains on: a few minibatches */
#define PROFILE_BATCHES 8


/* the hop cost model: the mop.plan_* settings, in seconds */
void
mop_xp_plan_costs(mop_plan_costs *k)
{
	k->hop_s = mop_plan_hop_ms / 1000.0;
	k->state_s_per_mb = mop_plan_state_ms_per_mb / 1000.0;
	k->epoch_s = mop_plan_epoch_ms / 1000.0;
	k->run_s = mop_plan_run_ms / 1000.0;
	k->segment_s_per_mb = mop_plan_segment_ms_per_mb / 1000.0;
}

/*
 * The share of a run's sub-epochs that train on segments (other servers):
 * a run has a worker per segment holding partitions, so the segments
 * other than 'local' among those of mop.dataset_segments; 0 for a dataset
 * kept on this server.
 */
double
mop_xp_remote_share(const MopDataset *ds)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1] = {Int64GetDatum(ds->id)};
	double		share = 0;

	if (!mop_catalog_has_table("dataset_segments"))
		return 0;				/* a catalog not yet updated: no segments */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT pg_catalog.count(DISTINCT segment) "
							  "  FILTER (WHERE segment OPERATOR(pg_catalog.<>) 'local'), "
							  "  pg_catalog.count(DISTINCT segment) "
							  "  FROM mop.dataset_segments WHERE dataset_id OPERATOR(pg_catalog.=) $1",
							  1, types, args, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;
		int64		remote = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)),
					all = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

		share = all > 0 ? (double) remote / (double) all : 0;
	}
	SPI_finish();
	return share;
}

/* a configuration's checkpoint: what every hop reads and writes */
double
mop_xp_state_bytes(const ConfigCost *c)
{
	return (double) (c->mem.params + c->mem.optimizer + c->mem.buffers);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The dataset's first training buffer (x, y), detoasted into the current context. */
static void
first_buffer(const MopDataset *ds, bytea **x, bytea **y)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(ds->id);
	bool		isnull;
	MemoryContext cxt = CurrentMemoryContext,
				spi;

	SPI_connect();
	if (SPI_execute_with_args("SELECT b.x, b.y FROM mop.buffers b "
							  "WHERE b.dataset_id OPERATOR(pg_catalog.=) $1 "
							  "AND b.split OPERATOR(pg_catalog.=) 'train' "
							  "ORDER BY b.partition, b.buffer_no LIMIT 1",
							  1, &t, &v, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("dataset \"%s\" has no training buffers", ds->name)));
	/* the copies outlive SPI's context */
	spi = MemoryContextSwitchTo(cxt);
	*x = DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*y = DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	MemoryContextSwitchTo(spi);
	SPI_finish();
}

/*
 * Training and evaluation speed of spec on the buffer: repeat a few
 * minibatches on a throwaway model until PROFILE_SECONDS have passed.
 */
/*
 * The BLAS threads a profile is measured with: one, as a worker of a run
 * whose workers fill the cores, unless mop.threads_per_worker (or its older
 * name) sets a count.  With the automatic count, a run with fewer workers
 * than cores gives each more threads: a second profile at all the cores
 * (auto_threads_n) tells the plan how much faster that trains.
 */
int
mop_xp_profile_threads(void)
{
	return (mop_blas_threads > 0 || mop_threads_per_worker > 0) ? mop_threads_for(0) : 1;
}

/* the cores, for the second profile: 0 when the count is set, or one core */
static int
auto_threads_n(void)
{
	int			cores = mop_cores_available();

	if (mop_blas_threads > 0 || mop_threads_per_worker > 0 || cores < 2)
		return 0;
	return Min(cores, 64);
}

/* whether a plan's worker counts train at different threads (the automatic count) */
bool
mop_xp_threads_vary(void)
{
	return auto_threads_n() > 0;
}

/* the threads each of `workers` local workers trains with */
int
mop_xp_threads_for_workers(int workers)
{
	if (auto_threads_n() == 0)
		return mop_xp_profile_threads();
	return mop_plan_threads_per_worker(mop_cores_available(), workers);
}

/* Profile spec at `threads` BLAS threads: its speeds into c. */
static void
profile(const nn_spec *spec, bytea *x, bytea *y, int threads, ConfigCost *c)
{
	ModelHandle *h = mop_model_handle(CurrentMemoryContext);
	nn_error	err;
	nn_status	st;
	int64		rows;
	double		t0,
				spent;
	int			reps;
	nn_result	res;

	mop_blas_set(threads);
	if ((st = nn_model_create(spec, &h->model, &err)) != NN_OK)
		mop_nn_error(st, &err, "could not create the model to profile");
	if ((st = nn_buffer_rows(h->model, VARSIZE_ANY_EXHDR(x), VARSIZE_ANY_EXHDR(y), &rows, &err)) != NN_OK)
		mop_nn_error(st, &err, "the dataset's first buffer does not fit the model");
	rows = Min(rows, (int64) spec->batch_size * PROFILE_BATCHES);
	if (rows < 1)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("the dataset's first training buffer is empty")));

	/* training: one warm-up pass, then timed passes */
	for (reps = -1, spent = 0, t0 = 0; reps < PROFILE_REPEATS && spent < PROFILE_SECONDS; reps++)
	{
		CHECK_FOR_INTERRUPTS();
		if (reps == 0)
			t0 = now_s();
		st = nn_train(h->model, (const float *) VARDATA_ANY(x), (const float *) VARDATA_ANY(y),
					  rows, 0, &res, &err);
		if (st == NN_DIVERGED)
			break;				/* the speed so far is what counts */
		if (st != NN_OK)
			mop_nn_error(st, &err, "profiling failed");
		if (reps >= 0)
			spent = now_s() - t0;
	}
	reps = Max(reps, 1);
	spent = Max(spent, 1e-9);
	c->train_rows_s = (double) rows * reps / spent;
	c->step_ms = 1000.0 * spent / (reps * ceil((double) rows / spec->batch_size));

	/* evaluation: forward only */
	for (reps = 0, spent = 0, t0 = now_s(); reps < PROFILE_REPEATS && spent < PROFILE_SECONDS; reps++)
	{
		CHECK_FOR_INTERRUPTS();
		memset(&res, 0, sizeof(res));
		st = nn_evaluate(h->model, (const float *) VARDATA_ANY(x), (const float *) VARDATA_ANY(y),
						 rows, &res, &err);
		if (st != NN_OK && st != NN_DIVERGED)
			mop_nn_error(st, &err, "profiling failed");
		spent = now_s() - t0;
	}
	c->eval_rows_s = (double) rows * Max(reps, 1) / Max(spent, 1e-9);
	mop_model_release(h);
}

/*
 * What a profile is shared by: the spec without what does not change the
 * work (the learning rate and its schedule, regularisation, the seed).
 */
static nn_spec *
profile_key(const nn_spec *spec)
{
	nn_spec    *k = palloc0(sizeof(nn_spec));

	memcpy(k, spec, sizeof(nn_spec));
	k->lr = 0;
	k->l2 = 0;
	k->weight_decay = 0;
	k->seed = 0;
	k->lr_schedule = 0;
	k->lr_step_size = 0;
	k->lr_gamma = 0;
	k->lr_min = 0;
	k->lr_epochs = 0;
	k->lr_warmup = 0;
	return k;
}

/*
 * The profile cache, mop.profiles: one row per dataset, library version and
 * profile key.  The version names this library, the engine's state format
 * and the BLAS with its threads: a profile from another of them is not
 * used, and is replaced when this one measures.  Rows go with their
 * dataset (ON DELETE CASCADE: dropped, or dropped and prepared again);
 * row-level security shows a role the profiles of its own datasets only.
 */
static char *
profile_version(void)
{
	return psprintf("mop %s, state format %d, %s", MOP_LIB_VERSION, NN_BLOB_VERSION,
					nn_blas_info());
}

/*
 * the key's text: the hash of the spec that profile_key() left, and the
 * BLAS threads when more than one (a network has a row per thread count)
 */
static char *
profile_key_text(const nn_spec *key, int threads)
{
	uint64		h = (uint64) hash_bytes_extended((const unsigned char *) key, sizeof(nn_spec), 0);

	if (threads > 1)
		return psprintf("%016" INT64_MODIFIER "x@%d", h, threads);
	return psprintf("%016" INT64_MODIFIER "x", h);
}

#define PROFILE_GET_SQL \
	"SELECT step_ms, rows_per_s, eval_rows_per_s FROM mop.profiles " \
	"WHERE dataset_id OPERATOR(pg_catalog.=) $1 AND engine_version OPERATOR(pg_catalog.=) $2 " \
	"AND spec_key OPERATOR(pg_catalog.=) $3"

#define PROFILE_PUT_SQL \
	"INSERT INTO mop.profiles AS p (dataset_id, engine_version, spec_key, batch_size, step_ms, " \
	"rows_per_s, eval_rows_per_s, measured_at) " \
	"VALUES ($1, $2, $3, $4, $5, $6, $7, pg_catalog.clock_timestamp()) " \
	"ON CONFLICT (dataset_id, spec_key) DO UPDATE SET engine_version = excluded.engine_version, " \
	"batch_size = excluded.batch_size, step_ms = excluded.step_ms, rows_per_s = excluded.rows_per_s, " \
	"eval_rows_per_s = excluded.eval_rows_per_s, measured_at = excluded.measured_at"

/* A cached profile of key for the dataset into c; false if none. */
static bool
profile_get(const MopDataset *ds, const char *version, const char *key, ConfigCost *c)
{
	Oid			t[3] = {INT8OID, TEXTOID, TEXTOID};
	Datum		v[3];
	bool		found = false;

	if (!mop_catalog_has_table("profiles"))
		return false;			/* a catalog not yet updated keeps none */
	v[0] = Int64GetDatum(ds->id);
	v[1] = CStringGetTextDatum(version);
	v[2] = CStringGetTextDatum(key);
	SPI_connect();
	if (SPI_execute_with_args(PROFILE_GET_SQL, 3, t, v, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		n1,
					n2,
					n3;
		double		step = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &n1)),
					rows = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &n2)),
					eval = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &n3));

		/*
		 * a row its owner edited into nonsense (infinite, or a step of more
		 * than a day) is measured again rather than planned with
		 */
		if (!n1 && !n2 && !n3 && isfinite(step) && isfinite(rows) && isfinite(eval) &&
			step > 0 && step < 86400e3 && rows >= 1e-3 && eval >= 1e-3)
		{
			c->step_ms = step;
			c->train_rows_s = rows;
			c->eval_rows_s = eval;
			c->cached = true;
			found = true;
		}
	}
	SPI_finish();
	return found;
}

/*
 * Keep a measured profile.  Not in a read-only transaction (a standby, or
 * SET transaction_read_only): the plan is made all the same.
 */
static void
profile_put(const MopDataset *ds, const char *version, const char *key, int batch_size,
			const ConfigCost *c)
{
	Oid			t[7] = {INT8OID, TEXTOID, TEXTOID, INT4OID, FLOAT8OID, FLOAT8OID, FLOAT8OID};
	Datum		v[7];

	if (XactReadOnly || !(c->train_rows_s > 0) || !(c->eval_rows_s > 0) ||
		!mop_catalog_has_table("profiles"))
		return;
	v[0] = Int64GetDatum(ds->id);
	v[1] = CStringGetTextDatum(version);
	v[2] = CStringGetTextDatum(key);
	v[3] = Int32GetDatum(batch_size);
	v[4] = Float8GetDatum(c->step_ms);
	v[5] = Float8GetDatum(c->train_rows_s);
	v[6] = Float8GetDatum(c->eval_rows_s);
	SPI_connect();
	if (SPI_execute_with_args(PROFILE_PUT_SQL, 7, t, v, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not store a profile in mop.profiles");
	SPI_finish();
}

/* profiles the last mop_xp_cost_grid() measured, and found in mop.profiles */
int			mop_xp_cost_measured,
			mop_xp_cost_cached;

/*
 * The speeds of the network key at `threads` BLAS threads into c: from
 * mop.profiles, else (unless mode is XP_PROFILE_CACHED) measured on the
 * dataset's first training buffer (fetched once, into *x and *y) and, with
 * XP_PROFILE_KEEP, kept.  Returns whether it was measured.
 */
static bool
profile_speeds(const MopDataset *ds, const nn_spec *spec, const nn_spec *key, int threads,
			   XpProfileMode mode, bytea **x, bytea **y, ConfigCost *c)
{
	char	   *version,
			   *text;

	/* the version names the BLAS with these threads */
	mop_blas_set(threads);
	version = profile_version();
	text = profile_key_text(key, threads);
	if (profile_get(ds, version, text, c) || mode == XP_PROFILE_CACHED)
		return false;
	if (*x == NULL)
		first_buffer(ds, x, y);
	profile(spec, *x, *y, threads, c);
	if (mode == XP_PROFILE_KEEP)
		profile_put(ds, version, text, spec->batch_size, c);
	return true;
}

/*
 * What an epoch (and a sub-epoch) of a profiled configuration costs when
 * `workers` local workers share the cores: with the automatic thread
 * count, each trains at the speed of its share of the cores (between the
 * two profiles, mop_plan_rate_at_threads); else at the profile's.  0 when
 * it was not profiled.  remote: mop_xp_remote_share(ds).
 */
double
mop_xp_epoch_at(const MopDataset *ds, const ConfigCost *c, int workers, double remote,
				double *sub_epoch_s)
{
	mop_plan_costs k;
	mop_plan_profile pp;
	mop_plan_cost pc;
	/* a run has a worker per partition at most */
	int			t = mop_xp_threads_for_workers(Max(Min(workers, ds->partitions), 1));

	if (sub_epoch_s)
		*sub_epoch_s = 0;
	if (!(c->train_rows_s > 0))
		return 0;
	mop_xp_plan_costs(&k);
	pp.train_rows_s = mop_plan_rate_at_threads(c->train_rows_s, c->train_rows_s_n, c->threads_n, t);
	pp.eval_rows_s = mop_plan_rate_at_threads(c->eval_rows_s, c->eval_rows_s_n, c->threads_n, t);
	pp.state_bytes = mop_xp_state_bytes(c);
	mop_plan_config_cost(&k, &pp, ds->partitions, remote, (double) ds->train_rows,
						 (double) ds->valid_rows, &pc);
	if (sub_epoch_s)
		*sub_epoch_s = pc.sub_epoch_s;
	return pc.epoch_s;
}

/*
 * Cost every configuration of the list; returns their number.  At most
 * max_profiles networks are profiled (0: all); configurations of the others
 * are left unprofiled (train_rows_s 0), and so are those whose profiles
 * are not in mop.profiles with XP_PROFILE_CACHED.  The costs (hop_s, sub_epoch_s,
 * epoch_s) are at the profile's threads; mop_xp_epoch_at() gives them for
 * a number of workers.
 */
int
mop_xp_cost_configs(const MopDataset *ds, List *configs, int epochs, int max_profiles,
					XpProfileMode mode, ConfigCost **out)
{
	int			n = list_length(configs);
	ConfigCost *c = palloc0(sizeof(ConfigCost) * Max(n, 1));
	nn_spec   **keys = palloc0(sizeof(nn_spec *) * Max(n, 1));
	bytea	   *x = NULL,
			   *y = NULL;
	int			i = 0,
				base_threads = mop_xp_profile_threads(),
				threads_n = auto_threads_n();
	ListCell   *lc;
	mop_plan_costs k;
	double		remote = mop_xp_remote_share(ds);

	mop_xp_plan_costs(&k);
	mop_xp_cost_measured = mop_xp_cost_cached = 0;
	foreach(lc, configs)
	{
		nn_spec		spec;
		nn_error	err;
		int			save = mop_max_model_memory_mb;
		int			same = -1;

		c[i].config = (Jsonb *) lfirst(lc);
		/* a configuration too big for mop.max_model_memory is reported, not refused */
		mop_max_model_memory_mb = 0;
		PG_TRY();
		{
			mop_config_to_spec(c[i].config, ds, epochs, &spec);
		}
		PG_FINALLY();
		{
			mop_max_model_memory_mb = save;
		}
		PG_END_TRY();
		if (nn_spec_memory(&spec, &c[i].mem, &err) != NN_OK)
			mop_nn_error(NN_ERR_INVALID, &err, "invalid configuration");
		c[i].fits = mop_max_model_memory_mb <= 0 ||
			c[i].mem.total <= (size_t) mop_max_model_memory_mb * 1024 * 1024;
		keys[i] = profile_key(&spec);
		for (int j = 0; j < i && same < 0; j++)
			if (memcmp(keys[j], keys[i], sizeof(nn_spec)) == 0 && c[j].train_rows_s > 0)
				same = j;
		if (same >= 0)
		{
			c[i].train_rows_s = c[same].train_rows_s;
			c[i].eval_rows_s = c[same].eval_rows_s;
			c[i].step_ms = c[same].step_ms;
			c[i].threads_n = c[same].threads_n;
			c[i].train_rows_s_n = c[same].train_rows_s_n;
			c[i].eval_rows_s_n = c[same].eval_rows_s_n;
			c[i].cached = c[same].cached;
		}
		else if (c[i].fits && (max_profiles <= 0 || mop_xp_cost_measured + mop_xp_cost_cached < max_profiles))
		{
			/* a network counts as measured when one of its profiles was */
			bool		measured = profile_speeds(ds, &spec, keys[i], base_threads, mode, &x, &y, &c[i]);

			if (threads_n > 0)
			{
				ConfigCost all = {0};

				measured |= profile_speeds(ds, &spec, keys[i], threads_n, mode, &x, &y, &all);
				c[i].threads_n = threads_n;
				c[i].train_rows_s_n = all.train_rows_s;
				c[i].eval_rows_s_n = all.eval_rows_s;
			}
			c[i].cached = !measured && c[i].train_rows_s > 0;
			if (measured)
				mop_xp_cost_measured++;
			else if (c[i].cached)
				mop_xp_cost_cached++;
		}
		if (c[i].train_rows_s > 0)
		{
			mop_plan_profile pp = {c[i].train_rows_s, c[i].eval_rows_s, mop_xp_state_bytes(&c[i])};
			mop_plan_cost pc;

			mop_plan_config_cost(&k, &pp, ds->partitions, remote, (double) ds->train_rows,
								 (double) ds->valid_rows, &pc);
			c[i].hop_s = pc.hop_s;
			c[i].sub_epoch_s = pc.sub_epoch_s;
			c[i].epoch_s = pc.epoch_s;
		}
		i++;
	}
	/* this backend's own BLAS threads again */
	mop_blas_ensure();
	*out = c;
	return n;
}

/* Cost every configuration of the grid space; returns their number. */
int
mop_xp_cost_grid(const MopDataset *ds, Jsonb *space, int epochs, ConfigCost **out)
{
	return mop_xp_cost_configs(ds, mop_space_grid(space), epochs, 0, XP_PROFILE_KEEP, out);
}

/* dataset, space, epochs: as the search functions read them */
void
mop_xp_explain_args(FunctionCallInfo fcinfo, MopDataset **ds, Jsonb **space, int *epochs)
{
	char	   *dataset;

	mop_search_args(fcinfo, 2, &dataset, space, epochs);
	*ds = mop_dataset_lookup(dataset, false);
}

Datum
mop_xp_nullable_float(double v, bool *isnull)
{
	*isnull = !(v > 0) || !isfinite(v);
	return Float8GetDatum(*isnull ? 0 : v);
}

/*
 * mop_explain(dataset text, space jsonb, epochs int) -> one row per
 * configuration of the grid.
 */
Datum
mop_explain(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MopDataset *ds;
	Jsonb	   *space;
	int			epochs,
				n;
	ConfigCost *c;
	MemoryContext opcxt,
				old;

	mop_xp_explain_args(fcinfo, &ds, &space, &epochs);
	InitMaterializedSRF(fcinfo, 0);
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_explain", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(opcxt);
	n = mop_xp_cost_grid(ds, space, epochs, &c);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < n; i++)
	{
		Datum		v[11];
		bool		nulls[11] = {0};

		v[0] = Int32GetDatum(i + 1);
		v[1] = JsonbPGetDatum(c[i].config);
		v[2] = Int64GetDatum((int64) (c[i].mem.params + c[i].mem.optimizer));
		v[3] = Int64GetDatum((int64) c[i].mem.total);
		v[4] = BoolGetDatum(c[i].fits);
		v[5] = mop_xp_nullable_float(c[i].step_ms, &nulls[5]);
		v[6] = mop_xp_nullable_float(c[i].train_rows_s, &nulls[6]);
		v[7] = mop_xp_nullable_float(c[i].hop_s, &nulls[7]);
		v[8] = mop_xp_nullable_float(c[i].sub_epoch_s, &nulls[8]);
		v[9] = mop_xp_nullable_float(c[i].epoch_s, &nulls[9]);
		v[10] = mop_xp_nullable_float(c[i].epoch_s * epochs, &nulls[10]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	MemoryContextDelete(opcxt);
	return (Datum) 0;
}


/*
 * max_workers: the argument, or the dataset's partitions capped by
 * max_worker_processes when it is null.
 */
int
mop_xp_explain_max_workers(FunctionCallInfo fcinfo, int argno, const MopDataset *ds)
{
	int			max_w;

	max_w = PG_ARGISNULL(argno) ? Max(Min(ds->partitions, max_worker_processes - 1), 1) :
		PG_GETARG_INT32(argno);
	if (max_w < 1 || max_w > MOP_MAX_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"max_workers\": %d", max_w),
				 errhint("Use 1 to %d workers.", MOP_MAX_WORKERS)));
	return max_w;
}

/*
 * Run the scheduler's simulator over the profiled configurations: their
 * epochs, and once the run's own cost (plan.c).  With the automatic thread
 * count each worker count has its own epoch times (mop_xp_epoch_at: the
 * threads its workers get): they give the makespans, while the efficiency
 * and the knee come from the same run at one thread per worker -- every
 * worker count fills the cores then, so what tells how many workers are
 * worth it is how well the scheduler keeps them busy, not how the cores
 * are split.  fill_unprofiled: a configuration that fits but was not
 * profiled counts at the mean of the profiled ones (workers => 'auto',
 * which profiles a few networks only); else it is left out.
 */
void
mop_xp_simulate_workers(const MopDataset *ds, const ConfigCost *c, int n, int epochs,
						int max_w, bool fill_unprofiled, WorkerPlan *p)
{
	int32	   *ep = palloc(sizeof(int32) * Max(n, 1));
	double	   *bytes = palloc(sizeof(double) * Max(n, 1)),
			   *cost,
			   *base,
			   *mk1,
			   *lb1;
	int		   *which = palloc(sizeof(int) * Max(n, 1));
	int			m = 0,
				profiled = 0,
				knee1;
	bool		per_w = mop_xp_threads_vary();
	mop_plan_costs k;
	double		remote = mop_xp_remote_share(ds),
				mean1 = 0;

	mop_xp_plan_costs(&k);
	for (int i = 0; i < n; i++)
		if (c[i].train_rows_s > 0)
		{
			profiled++;
			mean1 += c[i].epoch_s;
		}
	mean1 /= Max(profiled, 1);
	for (int i = 0; i < n; i++)
		if (c[i].train_rows_s > 0 || (fill_unprofiled && profiled > 0 && c[i].fits))
		{
			which[m] = i;
			ep[m] = epochs;
			bytes[m] = mop_xp_state_bytes(&c[i]);
			m++;
		}
	/* at the profile's threads (one with the automatic count) */
	base = palloc0(sizeof(double) * Max(m, 1));
	for (int j = 0; j < m; j++)
		base[j] = c[which[j]].train_rows_s > 0 ? c[which[j]].epoch_s : mean1;
	/* for each worker count, at its threads */
	cost = base;
	if (per_w)
	{
		cost = palloc0(sizeof(double) * Max(m, 1) * max_w);
		for (int w = 1; w <= max_w; w++)
		{
			double	   *row = cost + (Size) (w - 1) * Max(m, 1),
						mean = 0;

			for (int j = 0; j < m; j++)
				if (c[which[j]].train_rows_s > 0)
					mean += (row[j] = mop_xp_epoch_at(ds, &c[which[j]], w, remote, NULL));
			mean /= Max(profiled, 1);
			for (int j = 0; j < m; j++)
				if (!(c[which[j]].train_rows_s > 0))
					row[j] = mean;
		}
	}
	p->max_w = max_w;
	p->simulated = m;
	p->overhead = mop_plan_run_overhead(&k, m, bytes);
	p->makespan = palloc0(sizeof(double) * (max_w + 1));
	p->bound = palloc0(sizeof(double) * (max_w + 1));
	p->efficiency = palloc0(sizeof(double) * (max_w + 1));
	mk1 = palloc0(sizeof(double) * (max_w + 1));
	lb1 = palloc0(sizeof(double) * (max_w + 1));
	CHECK_FOR_INTERRUPTS();
	if (mop_plan_workers(Max(ds->partitions, 1), m, ep, cost, per_w ? Max(m, 1) : 0, p->overhead,
						 (mop_pick) mop_scheduler, max_w, p->makespan, p->bound, &p->knee) != 0 ||
		(per_w && mop_plan_workers(Max(ds->partitions, 1), m, ep, base, 0, p->overhead,
								   (mop_pick) mop_scheduler, max_w, mk1, lb1, &knee1) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("the scheduler's simulation failed")));
	if (per_w)
	{
		p->knee = knee1;
		for (int w = 1; w <= max_w; w++)
			p->efficiency[w] = mk1[w] > 0 ? mk1[1] / mk1[w] / w : 0;
	}
	else
		for (int w = 1; w <= max_w; w++)
			p->efficiency[w] = p->makespan[w] > 0 ? p->makespan[1] / p->makespan[w] / w : 0;
}

/*
 * mop_explain_workers(dataset text, space jsonb, epochs int, max_workers
 * int) -> the predicted makespan of the grid for 1..max_workers workers.
 */
Datum
mop_explain_workers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MopDataset *ds;
	Jsonb	   *space;
	int			epochs,
				n,
				max_w;
	ConfigCost *c;
	WorkerPlan	p;
	MemoryContext opcxt,
				old;

	mop_xp_explain_args(fcinfo, &ds, &space, &epochs);
	max_w = mop_xp_explain_max_workers(fcinfo, 3, ds);
	InitMaterializedSRF(fcinfo, 0);
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_explain_workers", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(opcxt);
	n = mop_xp_cost_grid(ds, space, epochs, &c);
	mop_xp_simulate_workers(ds, c, n, epochs, max_w, false, &p);
	MemoryContextSwitchTo(old);
	for (int w = 1; w <= max_w && p.simulated > 0; w++)
	{
		Datum		v[6];
		bool		nulls[6] = {0};

		v[0] = Int32GetDatum(w);
		v[1] = Float8GetDatum(p.makespan[w]);
		v[2] = Float8GetDatum(p.bound[w]);
		v[3] = Float8GetDatum(p.makespan[1] / p.makespan[w]);
		v[4] = Float8GetDatum(p.efficiency[w]);
		v[5] = BoolGetDatum(w == p.knee);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	MemoryContextDelete(opcxt);
	return (Datum) 0;
}


/*
 * workers => 'auto' of a search: the plan of its configurations (profiled
 * as mop_explain profiles them, the first AUTO_MAX_PROFILES networks; a
 * configuration of another gets their mean epoch), simulated for 1 up to
 * the partitions' workers; its knee capped by the partitions, the worker
 * processes (processes: those free for workers), the cores and the
 * configurations.  A NOTICE says what was chosen and why.
 */
int
mop_explain_auto_workers(const char *dataset, List *configs, int epochs, int partitions,
						 int processes)
{
	MemoryContext opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop auto workers",
												ALLOCSET_DEFAULT_SIZES),
				old = MemoryContextSwitchTo(opcxt);
	MopDataset *ds = mop_dataset_lookup(dataset, false);
	ConfigCost *c;
	WorkerPlan	p;
	int			n,
				cores = mop_cores_available(),
				max_w,
				w;
	mop_plan_auto_limit limit;
	char	   *why;

	/*
	 * Read mop.profiles, but keep nothing new unless the caller's
	 * transaction has written already: a write would give it a transaction
	 * id, and a blocking search waits in that transaction for the whole
	 * run, during which its id would keep VACUUM from reclaiming every
	 * checkpoint the run supersedes (reclaim.c).
	 */
	n = mop_xp_cost_configs(ds, configs, epochs, AUTO_MAX_PROFILES,
							TransactionIdIsValid(GetTopTransactionIdIfAny()) ?
							XP_PROFILE_KEEP : XP_PROFILE_DISCARD, &c);
	max_w = Max(Min(Min(partitions, MOP_MAX_WORKERS), Max(processes, 1)), 1);
	mop_xp_simulate_workers(ds, c, n, epochs, max_w, true, &p);
	w = mop_plan_auto_workers(p.simulated > 0 ? p.knee : max_w, cores, partitions, n,
							  processes, &limit);
	switch (limit)
	{
		case MOP_AUTO_PARTITIONS:
			why = psprintf("the dataset's %d partition%s (a worker owns a partition)",
						   partitions, partitions == 1 ? "" : "s");
			break;
		case MOP_AUTO_PROCESSES:
			why = psprintf("max_worker_processes (%d) leaves room for %d",
						   max_worker_processes, Max(processes, 1));
			break;
		case MOP_AUTO_CORES:
			why = psprintf("this server's %d CPU cores", cores);
			break;
		case MOP_AUTO_CONFIGS:
			why = psprintf("the run's %d configuration%s", n, n == 1 ? "" : "s");
			break;
		default:
			if (w < max_w && p.efficiency[w + 1] > 0)
				why = psprintf("the plan's knee: %d workers would be %.0f%% efficient",
							   w + 1, 100.0 * p.efficiency[w + 1]);
			else
				why = pstrdup("the plan's knee");
			break;
	}
	if (p.simulated > 0)
		ereport(NOTICE,
				(errmsg("workers => 'auto' chose %d worker%s: %s", w, w == 1 ? "" : "s", why),
				 errdetail("The plan predicts %.3f s with 1 worker and %.3f s with %d (mop_explain_workers).",
						   p.makespan[1], p.makespan[Min(w, max_w)], w)));
	else
		ereport(NOTICE,
				(errmsg("workers => 'auto' chose %d worker%s: %s", w, w == 1 ? "" : "s", why),
				 errdetail("No configuration could be profiled, so there is no plan.")));
	MemoryContextSwitchTo(old);
	MemoryContextDelete(opcxt);
	return w;
}
