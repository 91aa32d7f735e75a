/*
 * run_options.c -- a run's options: their defaults, and mop.runs.options
 * written and read back (see run_options.h).
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "handover.h"
#include "run.h"
#include "run_options.h"
#include "search/mop_sched.h"

/*
 * Every default of a run's options.  The search functions' SQL DEFAULTs
 * (sql/mop--*.sql) must say the same: epochs 10, seed 0, deterministic
 * false, eta 3, min_resource 1, max_trials 20, population 8, interval 1,
 * quantile 0.25, resample 0.25, n_startup 10, gamma 0.1 (test/sql/options.sql
 * compares them).  scheduler: the search functions take NULL as
 * mop.scheduler, whose default this is too (guc.c).
 */
const MopRunOptions mop_run_option_defaults = {
	.epochs = 10,
	.seed = 0,
	.deterministic = false,
	.scheduler = MOP_PICK_RANDOM,
	.gpu = false,
	.gpu_memory_mb = 0,
	.gpu_tf32 = false,
	.gpu_unverified = false,
	.blas_threads = 0,
	.checkpoint_every = 1,
	.replay_of = 0,
	.median_stop = false,
	.warm_start = 0,
	.kind = MOP_KIND_FIXED,
	.trials = 0,				/* per kind: mop_run_default_trials */
	.max_resource = 0,
	.eta = 3,
	.min_resource = 1,
	.pbt_interval = 1,
	.pbt_quantile = 0.25,
	.pbt_resample = 0.25,
	.tpe_startup = 10,
	.tpe_gamma = 0.1,
	.tpe_batch = 0,
	.hb_brackets = 0,
	.time_budget_ms = 0,
};

/* The names of the kinds with a driver, as recorded ("algorithm"). */
static const char *const kind_names[] = {
	[MOP_KIND_FIXED] = NULL,
	[MOP_KIND_HYPERBAND] = "hyperband",
	[MOP_KIND_ASHA] = "asha",
	[MOP_KIND_PBT] = "pbt",
	[MOP_KIND_TPE] = "tpe",
};

/*
 * The default number of configurations of a kind: ASHA's max_trials and
 * PBT's population; TPE's trials has none, Hyperband's follow from its plan.
 */
int32
mop_run_default_trials(MopRunKind kind)
{
	switch (kind)
	{
		case MOP_KIND_ASHA:
			return 20;
		case MOP_KIND_PBT:
			return 8;
		default:
			return mop_run_option_defaults.trials;
	}
}

/* The recorded name of a kind with a driver; NULL for MOP_KIND_FIXED. */
const char *
mop_run_kind_name(MopRunKind kind)
{
	if ((int) kind < 0 || (int) kind >= (int) lengthof(kind_names))
		return NULL;
	return kind_names[kind];
}

/*
 * The run's options as mop.runs.options: the options of every run, then
 * those of its kind; optional ones only when set.
 */
Jsonb *
mop_run_options_jsonb(const MopRunOptions *o)
{
	StringInfoData s;
	const char *kind = mop_run_kind_name(o->kind);

	initStringInfo(&s);
	appendStringInfo(&s, "{\"deterministic\": %s, \"scheduler\": \"%s\", \"device\": \"%s\"",
					 o->deterministic ? "true" : "false",
					 mop_pick_name((mop_pick) o->scheduler), o->gpu ? "gpu" : "cpu");
	if (o->gpu)
		appendStringInfo(&s, ", \"gpu_memory_mb\": %d, \"gpu_tf32\": %s, \"gpu_unverified\": %s",
						 o->gpu_memory_mb, o->gpu_tf32 ? "true" : "false",
						 o->gpu_unverified ? "true" : "false");
	appendStringInfo(&s, ", \"blas_threads\": %d", o->blas_threads);
	if (o->checkpoint_every > 1)
		appendStringInfo(&s, ", \"checkpoint_every\": %d", o->checkpoint_every);
	if (o->blas[0] != '\0')
	{
		appendStringInfoString(&s, ", \"blas\": ");
		escape_json(&s, o->blas);
	}
	if (o->replay_of)
		appendStringInfo(&s, ", \"replay_of\": " INT64_FORMAT, o->replay_of);
	if (kind)
		appendStringInfo(&s, ", \"algorithm\": \"%s\"", kind);
	switch (o->kind)
	{
		case MOP_KIND_FIXED:
			break;
		case MOP_KIND_HYPERBAND:
			appendStringInfo(&s, ", \"max_resource\": %d, \"eta\": %d", o->max_resource, o->eta);
			if (o->hb_brackets > 0)
				appendStringInfo(&s, ", \"brackets\": %d", o->hb_brackets);
			break;
		case MOP_KIND_ASHA:
			appendStringInfo(&s, ", \"max_resource\": %d, \"eta\": %d, \"min_resource\": %d, "
							 "\"max_trials\": %d", o->max_resource, o->eta, o->min_resource, o->trials);
			break;
		case MOP_KIND_TPE:
			appendStringInfo(&s, ", \"trials\": %d, \"n_startup\": %d, \"gamma\": %s",
							 o->trials, o->tpe_startup, float8out_internal(o->tpe_gamma));
			if (o->tpe_batch > 0)
				appendStringInfo(&s, ", \"batch\": %d", o->tpe_batch);
			break;
		case MOP_KIND_PBT:
			appendStringInfo(&s, ", \"population\": %d, \"interval\": %d, \"quantile\": %s, "
							 "\"resample\": %s", o->trials, o->pbt_interval,
							 float8out_internal(o->pbt_quantile), float8out_internal(o->pbt_resample));
			break;
	}
	if (o->median_stop)
		appendStringInfoString(&s, ", \"early_stopping\": \"median\"");
	if (o->warm_start)
		appendStringInfo(&s, ", \"warm_start\": " INT64_FORMAT, o->warm_start);
	if (o->time_budget_ms > 0)
		appendStringInfo(&s, ", \"time_budget_ms\": " INT64_FORMAT, o->time_budget_ms);
	appendStringInfoChar(&s, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
}

/*
 * The text of options key `key`, as ->> gives it; NULL when the key is
 * absent or JSON null.
 */
static char *
option_text(Jsonb *options, const char *key)
{
	JsonbValue	v;

	if (options == NULL || !JB_ROOT_IS_OBJECT(options) ||
		getKeyJsonValueFromContainer(&options->root, key, strlen(key), &v) == NULL)
		return NULL;
	switch (v.type)
	{
		case jbvNull:
			return NULL;
		case jbvString:
			return pnstrdup(v.val.string.val, v.val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
		case jbvBool:
			return pstrdup(v.val.boolean ? "true" : "false");
		default:
			return JsonbToCString(NULL, v.val.binary.data, v.val.binary.len);
	}
}

static void
bad_option(const char *key, const char *text)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("invalid run option \"%s\": \"%s\"", key, text)));
}

static void
read_int32(Jsonb *options, const char *key, int32 *field)
{
	char	   *t = option_text(options, key);

	if (t)
		*field = pg_strtoint32(t);
}

static void
read_int64(Jsonb *options, const char *key, int64 *field)
{
	char	   *t = option_text(options, key);

	if (t)
		*field = pg_strtoint64(t);
}

static void
read_float8(Jsonb *options, const char *key, double *field)
{
	char	   *t = option_text(options, key);

	if (t)
		*field = float8in_internal(t, NULL, "double precision", t);
}

static void
read_bool(Jsonb *options, const char *key, bool *field)
{
	char	   *t = option_text(options, key);

	if (t && !parse_bool(t, field))
		bad_option(key, t);
}

/*
 * Read a run's recorded options (mop.runs.options; NULL: none recorded)
 * into *o: every key the run recorded, the default of every other
 * (mop_run_option_defaults) -- a run recorded by an older version lacks
 * some.  epochs and seed are the run's columns: the caller sets them.
 * ERROR if the run names an algorithm this version does not know.
 */
/*
 * mop.runs.options is a column its owner may write: what was read back must
 * be in the ranges the search functions accept before the coordinator
 * divides by it or sizes an array with it.
 */
static void option_out_of_range(const char *key, double v) pg_attribute_noreturn();

static void
option_out_of_range(const char *key, double v)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("the run's option \"%s\" is out of range: %g", key, v),
			 errdetail("mop.runs.options was changed after the run was started."),
			 errhint("Set it back to a value the search function accepts, or start a new run.")));
}

/* The ranges of the search functions' arguments, for the options a kind uses. */
static void
check_parsed(const MopRunOptions *o)
{
	if (o->gpu_memory_mb < 0)
		option_out_of_range("gpu_memory_mb", o->gpu_memory_mb);
	if (o->blas_threads < 0 || o->blas_threads > 1024)
		option_out_of_range("blas_threads", o->blas_threads);
	if (o->checkpoint_every < 1 || o->checkpoint_every > MOP_MAX_CHECKPOINT_EVERY)
		option_out_of_range("checkpoint_every", o->checkpoint_every);
	if (o->time_budget_ms < 0)
		option_out_of_range("time_budget_ms", (double) o->time_budget_ms);
	if (o->kind == MOP_KIND_FIXED)
		return;
	/* (Hyperband's trials follow from its max_resource and eta) */
	if (o->kind == MOP_KIND_PBT ?
		(o->trials < MOP_MIN_POPULATION || o->trials > MOP_MAX_POPULATION) :
		o->kind != MOP_KIND_HYPERBAND && (o->trials < 1 || o->trials > MOP_MAX_TRIALS))
		option_out_of_range(o->kind == MOP_KIND_PBT ? "population" :
							o->kind == MOP_KIND_ASHA ? "max_trials" : "trials", o->trials);
	if (o->kind == MOP_KIND_HYPERBAND || o->kind == MOP_KIND_ASHA)
	{
		if (o->max_resource < 1 || o->max_resource > MOP_MAX_EPOCHS)
			option_out_of_range("max_resource", o->max_resource);
		if (o->eta < MOP_MIN_ETA || o->eta > MOP_MAX_ETA)
			option_out_of_range("eta", o->eta);
		if (o->min_resource < 1 || o->min_resource > o->max_resource)
			option_out_of_range("min_resource", o->min_resource);
		if (o->hb_brackets < 0 || o->hb_brackets > 32)
			option_out_of_range("brackets", o->hb_brackets);
	}
	if (o->kind == MOP_KIND_PBT)
	{
		if (o->pbt_interval < 1 || o->pbt_interval > MOP_MAX_EPOCHS)
			option_out_of_range("interval", o->pbt_interval);
		if (!(o->pbt_quantile > 0 && o->pbt_quantile <= 0.5))
			option_out_of_range("quantile", o->pbt_quantile);
		if (!(o->pbt_resample >= 0 && o->pbt_resample <= 1))
			option_out_of_range("resample", o->pbt_resample);
	}
	if (o->kind == MOP_KIND_TPE)
	{
		if (o->tpe_startup < 1)
			option_out_of_range("n_startup", o->tpe_startup);
		if (!(o->tpe_gamma > 0 && o->tpe_gamma <= 1))
			option_out_of_range("gamma", o->tpe_gamma);
		if (o->tpe_batch < 0 || o->tpe_batch > MOP_MAX_WORKERS)
			option_out_of_range("batch", o->tpe_batch);
	}
}

void
mop_run_options_parse(Jsonb *options, MopRunOptions *o)
{
	char	   *t;

	*o = mop_run_option_defaults;
	read_bool(options, "deterministic", &o->deterministic);
	if ((t = option_text(options, "scheduler")) != NULL)
	{
		int			p = mop_pick_parse(t);

		/* an unknown scheduler falls back to the default */
		if (p >= 0)
			o->scheduler = p;
	}
	if ((t = option_text(options, "device")) != NULL)
		o->gpu = strcmp(t, "gpu") == 0;
	read_int32(options, "gpu_memory_mb", &o->gpu_memory_mb);
	read_bool(options, "gpu_tf32", &o->gpu_tf32);
	read_bool(options, "gpu_unverified", &o->gpu_unverified);
	read_int32(options, "blas_threads", &o->blas_threads);
	read_int32(options, "checkpoint_every", &o->checkpoint_every);
	read_int64(options, "replay_of", &o->replay_of);
	if ((t = option_text(options, "early_stopping")) != NULL)
		o->median_stop = strcmp(t, "median") == 0;
	read_int64(options, "warm_start", &o->warm_start);
	if ((t = option_text(options, "algorithm")) != NULL && t[0] != '\0')
	{
		int			k;

		for (k = 0; k < (int) lengthof(kind_names); k++)
			if (kind_names[k] && strcmp(kind_names[k], t) == 0)
				break;
		if (k == (int) lengthof(kind_names))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("resuming a %s run is not supported", t)));
		o->kind = (MopRunKind) k;
	}
	/* each kind records its number of configurations under its own name */
	o->trials = mop_run_default_trials(o->kind);
	read_int32(options, "population", &o->trials);
	read_int32(options, "trials", &o->trials);
	read_int32(options, "max_trials", &o->trials);
	read_int32(options, "max_resource", &o->max_resource);
	read_int32(options, "eta", &o->eta);
	read_int32(options, "min_resource", &o->min_resource);
	read_int32(options, "interval", &o->pbt_interval);
	read_float8(options, "quantile", &o->pbt_quantile);
	read_float8(options, "resample", &o->pbt_resample);
	read_int32(options, "n_startup", &o->tpe_startup);
	read_float8(options, "gamma", &o->tpe_gamma);
	read_int32(options, "batch", &o->tpe_batch);
	read_int32(options, "brackets", &o->hb_brackets);
	read_int64(options, "time_budget_ms", &o->time_budget_ms);
	check_parsed(o);
}
