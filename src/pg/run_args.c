/*
 * run_args.c -- the arguments of the search functions, mop_resume and
 * mop_replay: each is checked in the caller's transaction, so that bad
 * input fails at once with an error naming the argument and nothing is
 * started, and the checked values fill the run's RunRequest.
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "runreq.h"
#include "search/mop_hyperband.h"
#include "search/mop_pbt.h"

/* Whether the function has argument argno (-1: none) and it is not NULL. */
static bool
arg_given(FunctionCallInfo fcinfo, int argno)
{
	return argno >= 0 && argno < PG_NARGS() && !PG_ARGISNULL(argno);
}

/* Integer argument argno, or dflt when it is absent or NULL. */
int32
mop_arg_int32(FunctionCallInfo fcinfo, int argno, int32 dflt)
{
	return arg_given(fcinfo, argno) ? PG_GETARG_INT32(argno) : dflt;
}

/* float8 argument argno, or dflt when it is absent or NULL. */
float8
mop_arg_float8(FunctionCallInfo fcinfo, int argno, float8 dflt)
{
	return arg_given(fcinfo, argno) ? PG_GETARG_FLOAT8(argno) : dflt;
}

/* Parse the scheduler option. */
static mop_pick
parse_pick(const char *s)
{
	int			pick = mop_pick_parse(s);

	if (pick >= 0)
		return (mop_pick) pick;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for \"scheduler\": \"%s\"", s),
			 errhint("Use 'random' (Cerebro's randomized scheduler), 'longest' (longest remaining work first), 'convergence' (Hermes: the models converging fastest towards the lowest loss first) or 'fifo' (each model to the end, in the order given).")));
	pg_unreachable();
}

/* The early_stopping argument (argument argno): NULL/'none' or 'median'. */
static bool
arg_early_stopping(FunctionCallInfo fcinfo, int argno)
{
	char	   *s;

	if (!arg_given(fcinfo, argno))
		return false;
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(s, "none") == 0)
		return false;
	if (strcmp(s, "median") == 0)
		return true;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for \"early_stopping\": \"%s\"", s),
			 errhint("Use 'median' (the median stopping rule) or 'none'.")));
	pg_unreachable();
}

/* The warm_start argument: a run id visible to the caller, or 0. */
static int64
arg_warm_start(FunctionCallInfo fcinfo, int argno, const MopDataset *ds)
{
	int64		id;
	Oid			t = INT8OID;
	Datum		v;
	bool		found,
				isnull;
	int64		dataset_id = 0;

	if (!arg_given(fcinfo, argno))
		return 0;
	id = PG_GETARG_INT64(argno);
	v = Int64GetDatum(id);
	SPI_connect();
	SPI_execute_with_args("SELECT dataset_id FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1",
						  1, &t, &v, NULL, false, 1);
	found = SPI_processed == 1;
	if (found)
		dataset_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("invalid value for \"warm_start\": run %lld does not exist", (long long) id),
				 errhint("Runs are listed in mop.runs (each role sees its own).")));
	/* a checkpoint of another dataset may fit by width and still mean nothing */
	if (dataset_id != ds->id)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"warm_start\": run %lld trained on another dataset than \"%s\"",
						(long long) id, ds->name),
				 errhint("Warm starts continue models of the same dataset.")));
	return id;
}

/* The scheduler of argument argno, or mop.scheduler when it is NULL. */
static mop_pick
arg_pick(FunctionCallInfo fcinfo, int argno)
{
	if (arg_given(fcinfo, argno))
		return parse_pick(text_to_cstring(PG_GETARG_TEXT_PP(argno)));
	return (mop_pick) mop_scheduler;
}

/*
 * The workers argument: an integer of any width, or text (also an untyped
 * literal) holding 'auto' (*is_auto) or an integer.  The argument is
 * declared "any" so that both workers => 2 and workers => 'auto' are
 * accepted.
 */
static int
arg_workers(FunctionCallInfo fcinfo, int argno, bool *is_auto)
{
	Oid			t = get_fn_expr_argtype(fcinfo->flinfo, argno);
	Datum		d = PG_GETARG_DATUM(argno);
	int64		v;
	char	   *s,
			   *end;

	*is_auto = false;
	switch (t)
	{
		case InvalidOid:		/* called without an expression: as int */
		case INT4OID:
			return DatumGetInt32(d);
		case INT2OID:
			return DatumGetInt16(d);
		case INT8OID:
			v = DatumGetInt64(d);
			if (v < INT_MIN || v > INT_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for \"workers\": " INT64_FORMAT, v),
						 errhint("Use 1 to %d workers, or 'auto'.", MOP_MAX_WORKERS)));
			return (int) v;
		case UNKNOWNOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			s = t == UNKNOWNOID ? DatumGetCString(d) : TextDatumGetCString(d);
			while (*s == ' ')
				s++;
			if (pg_strncasecmp(s, "auto", 4) == 0 && strspn(s + 4, " ") == strlen(s + 4))
			{
				*is_auto = true;
				return 0;
			}
			errno = 0;
			v = strtol(s, &end, 10);
			if (end == s || strspn(end, " ") != strlen(end) || errno != 0 ||
				v < INT_MIN || v > INT_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for \"workers\": \"%s\"", s),
						 errhint("Use 1 to %d workers, or 'auto'.", MOP_MAX_WORKERS)));
			return (int) v;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("\"workers\" must be an integer or 'auto', not type %s",
							format_type_be(t)),
					 errhint("Use 1 to %d workers, or 'auto'.", MOP_MAX_WORKERS)));
	}
	return 0;					/* not reached */
}

/* Workers to use: requested (or mop.workers), capped; ERROR if impossible. */
static int
choose_workers(bool isnull, int requested, int partitions)
{
	int			w = isnull ? mop_workers : requested;
	int			cap = max_worker_processes - 1;	/* one for the coordinator */

	if (!isnull && (requested < 1 || requested > MOP_MAX_WORKERS))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"workers\": %d", requested),
				 errhint("Use 1 to %d workers, or 'auto'.", MOP_MAX_WORKERS)));
	if (cap < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("max_worker_processes (%d) leaves no room for mop's workers",
						max_worker_processes),
				 errhint("A run needs one coordinator and at least one worker; raise max_worker_processes.")));
	if (w > partitions)
		ereport(NOTICE,
				(errmsg("the run uses %d worker%s, not %d%s: its dataset has %d partition%s",
						partitions, partitions == 1 ? "" : "s", w, isnull ? " (mop.workers)" : "",
						partitions, partitions == 1 ? "" : "s"),
				 errdetail("Each worker trains on its own partitions; a worker without one would idle."),
				 errhint("mop_prepare(..., partitions => %d) packs the data for %d workers.",
						 w, w)));
	w = Min(w, partitions);
	if (w > cap)
		ereport(NOTICE,
				(errmsg("the run uses %d worker%s, not %d: max_worker_processes is %d",
						cap, cap == 1 ? "" : "s", w, max_worker_processes),
				 errdetail("One background worker slot goes to the run's coordinator."),
				 errhint("Raise max_worker_processes (a restart) for more workers.")));
	w = Min(w, cap);
	return Max(w, 1);
}

/* On how many segments the dataset of this name is placed (0: all here). */
int64
mop_dataset_segment_count(const char *dataset)
{
	Oid			t[1] = {TEXTOID};
	Datum		v[1];
	int64		n = 0;
	bool		isnull;

	if (dataset == NULL || !mop_catalog_is_02())
		return 0;
	v[0] = CStringGetTextDatum(dataset);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT pg_catalog.count(DISTINCT s.segment) FROM mop.dataset_segments s "
							  "JOIN mop.datasets d ON d.id OPERATOR(pg_catalog.=) s.dataset_id "
							  "WHERE d.name OPERATOR(pg_catalog.=) $1",
							  1, t, v, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
		n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return n;
}

/*
 * A dataset placed on segments has mop.workers_per_segment workers per
 * segment, whatever the workers argument says: say so rather than change
 * what was asked for in silence.  Returns whether it is placed.
 */
static bool
notice_placed_workers(const char *dataset)
{
	int64		n = mop_dataset_segment_count(dataset);

	if (n > 0)
		ereport(NOTICE,
				(errmsg("dataset \"%s\" is placed on %lld segments: the run has mop.workers_per_segment (%d) workers on each, not the workers argument",
						dataset, (long long) n, mop_workers_per_segment),
				 errhint("SET mop.workers_per_segment to change how many models each segment trains at once.")));
	return n > 0;
}

/*
 * The fields every request shares: what, on which dataset, which
 * configurations for how many epochs, and the workers (argument workers_arg,
 * NULL: mop.workers) and wait (argument wait_arg, NULL: true) arguments.
 */
void
mop_request_init(RunRequest *req, FunctionCallInfo fcinfo, const char *kind,
			 const char *dataset, Jsonb *space, List *configs, int epochs,
			 int partitions, int workers_arg, int wait_arg)
{
	bool		given,
				is_auto = false;
	int			w = 0;

	memset(req, 0, sizeof(*req));
	req->opts = mop_run_option_defaults;
	req->kind = kind;
	req->dataset = dataset;
	req->space = space;
	req->configs = configs;
	req->opts.epochs = epochs;
	given = arg_given(fcinfo, workers_arg);
	if (given)
		w = arg_workers(fcinfo, workers_arg, &is_auto);
	if (is_auto)
	{
		/* over segments the argument is not used: no plan for it */
		if (notice_placed_workers(dataset))
			w = mop_workers;
		else
			w = mop_explain_auto_workers(dataset, configs, epochs, partitions,
										 max_worker_processes - 1);
		req->workers = choose_workers(false, w, partitions);
	}
	else
	{
		req->workers = choose_workers(!given, w, partitions);
		if (given)
			notice_placed_workers(dataset);
	}
	req->wait = !arg_given(fcinfo, wait_arg) || PG_GETARG_BOOL(wait_arg);
}

/*
 * Validate every configuration against the dataset for a run of epochs
 * epochs; errors name it.
 */
void
mop_validate_configs(List *configs, MopDataset *ds, int32 epochs)
{
	ListCell   *lc;
	int			i = 0;

	foreach(lc, configs)
	{
		nn_spec		spec;
		nn_error	err;
		nn_status	st;
		Jsonb	   *cfg = (Jsonb *) lfirst(lc);

		i++;
		mop_config_to_spec(cfg, ds, epochs, &spec);
		if ((st = nn_spec_validate(&spec, &err)) != NN_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("configuration %d of the search space is invalid: %s", i, err.msg),
					 errdetail("configuration: %s", JsonbToCString(NULL, &cfg->root, VARSIZE(cfg)))));
	}
}

/* Arguments common to the search functions. */
void
mop_search_args(FunctionCallInfo fcinfo, int first, char **dataset, Jsonb **space,
			int *epochs)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dataset and space must not be null")));
	*dataset = text_to_cstring(PG_GETARG_TEXT_PP(0));
	*space = PG_GETARG_JSONB_P(1);
	*epochs = mop_arg_int32(fcinfo, first, mop_run_option_defaults.epochs);
	if (*epochs < 1 || *epochs > MOP_MAX_EPOCHS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"epochs\": %d", *epochs),
				 errhint("Train at least 1 epoch.")));
}

/* Validate Hyperband's R and eta, naming the bad one. */
void
mop_check_hyperband_args(int R, int eta)
{
	if (R < 1 || R > MOP_MAX_EPOCHS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"max_resource\": %d", R),
				 errhint("The maximum resource is a number of epochs, 1 to 100000.")));
	if (eta < MOP_MIN_ETA || eta > MOP_MAX_ETA)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"eta\": %d", eta),
				 errhint("The reduction factor eta must be at least 2 (3 is usual).")));
}

/* A described space PBT or TPE can search: 1..32 parameters, valid. */
void
mop_check_numeric_space(MopSpaceDesc *desc, const char *what)
{
	char		err[256];

	if (desc->n_params < 1 || desc->n_params > MOP_PBT_MAX_PARAMS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s needs 1 to %d hyperparameters to search, the space has %d",
						what, MOP_PBT_MAX_PARAMS, desc->n_params),
				 errhint("Give a list or a distribution for at least one hyperparameter, e.g. \"learning_rate\": {\"loguniform\": [1e-4, 1e-1]}.")));
	if (mop_params_check(desc->params, desc->n_params, err, sizeof(err)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search space: %s", err)));
}

/*
 * The configurations Hyperband with max_resource R and reduction factor eta
 * needs: those of the first round of every bracket (of the first `brackets`
 * brackets, s_max first; 0: all).
 */
int32
mop_hyperband_trials(int R, int eta, int brackets)
{
	int32		n = mop_hyperband_plan(R, eta, NULL, 0);
	int32		trials = 0;
	int			seen = 0;
	mop_hb_round *rows = palloc(sizeof(mop_hb_round) * Max(n, 1));

	mop_hyperband_plan(R, eta, rows, n);
	for (int i = 0; i < n; i++)
		if (rows[i].round == 0 && (brackets <= 0 || seen++ < brackets))
			trials += rows[i].configs;
	pfree(rows);
	return trials;
}

/*
 * The max_trials => argument (argument argno): 0 when absent or NULL (no
 * cap), else at least 1.
 */
int32
mop_arg_max_trials(FunctionCallInfo fcinfo, int argno)
{
	int32		n;

	if (!arg_given(fcinfo, argno))
		return 0;
	n = PG_GETARG_INT32(argno);
	if (n < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"max_trials\": %d", n),
				 errhint("max_trials caps the configurations a run tries: give 1 or more, or NULL for no cap.")));
	return n;
}

/*
 * The first max_trials configurations of configs (0: all), with a NOTICE
 * when that leaves some out: what names them (e.g. "configurations of the
 * grid").
 */
List *
mop_cap_configs(List *configs, int32 max_trials, const char *what)
{
	int			n = list_length(configs);

	if (max_trials <= 0 || n <= max_trials)
		return configs;
	ereport(NOTICE,
			(errmsg("the run tries the first %d of the %d %s (max_trials)",
					max_trials, n, what),
			 errdetail("The others are not trained.")));
	return list_truncate(configs, max_trials);
}

/* Interval argument argno as milliseconds, at least 1; ERROR unless positive. */
static int64
arg_time_budget(FunctionCallInfo fcinfo, int argno)
{
	Interval   *iv;
	double		usec;

	if (!arg_given(fcinfo, argno))
		return 0;
	iv = PG_GETARG_INTERVAL_P(argno);
	/* a month counts 30 days, as interval comparison counts it */
	usec = (double) iv->time + ((double) iv->month * DAYS_PER_MONTH + iv->day) * USECS_PER_DAY;
	if (!(usec > 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"time_budget\": %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(iv)))),
				 errhint("Give a positive interval, e.g. '30 minutes', or NULL for no budget.")));
	if (usec / 1000.0 > (double) PG_INT64_MAX / 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"time_budget\": too long"),
				 errhint("Give NULL for no budget.")));
	return Max((int64) ceil(usec / 1000.0), 1);
}

/*
 * The caller's run named name (runs are named uniquely per role); 0 if
 * there is none.  A superuser, who sees every role's runs, gets the own
 * run before another role's; two other roles' runs of that name are
 * ambiguous.
 */
int64
mop_run_id_by_name(const char *name)
{
	Oid			t = TEXTOID;
	Datum		v = CStringGetTextDatum(name);
	int64		id = 0;
	uint64		n;
	bool		isnull;

	if (!mop_catalog_has_run_names())
		return 0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT r.id, r.owner OPERATOR(pg_catalog.=) CURRENT_USER FROM mop.runs r "
							  "WHERE r.name OPERATOR(pg_catalog.=) $1 "
							  "ORDER BY 2 DESC, r.id LIMIT 2",
							  1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.runs");
	n = SPI_processed;
	if (n >= 1)
	{
		bool		own = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		if (!own && n == 2)
			id = -1;
	}
	SPI_finish();
	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_AMBIGUOUS_PARAMETER),
				 errmsg("several roles have a run named \"%s\"", name),
				 errhint("Give the run's id (mop.runs.id) instead.")));
	return id;
}

/* The caller's run named name; ERROR if there is none. */
int64
mop_run_id_by_name_or_error(const char *name)
{
	int64		id = mop_run_id_by_name(name);

	if (id == 0 && name[0] != '\0' && strspn(name, "0123456789") == strlen(name))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run \"%s\" does not exist", name),
				 errdetail("A quoted argument is a run's name, and names are never all digits."),
				 errhint("To give the run's id, write it without quotes: %s.", name)));
	if (id == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run \"%s\" does not exist", name),
				 errhint("Runs are listed in mop.runs with their names (each role sees its own).")));
	return id;
}

/* The name => argument: NULL, or a name no run of the caller's has. */
static const char *
arg_run_name(FunctionCallInfo fcinfo, int argno)
{
	char	   *name;
	const char *p;
	Oid			t = TEXTOID;
	Datum		v;
	int64		other = 0;
	bool		isnull;

	if (!arg_given(fcinfo, argno))
		return NULL;
	name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"name\": an empty name"),
				 errhint("Give the run a name with at least one character, or NULL for none.")));
	for (p = name; *p >= '0' && *p <= '9'; p++)
		;
	if (*p == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"name\": \"%s\" is a number", name),
				 errdetail("mop_resume, mop_wait and mop_cancel take a run's id or its name: a name made of digits would read as an id."),
				 errhint("Give a name with a character other than a digit, e.g. \"run-%s\".", name)));
	v = CStringGetTextDatum(name);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT r.id FROM mop.runs r WHERE r.name OPERATOR(pg_catalog.=) $1 "
							  "AND r.owner OPERATOR(pg_catalog.=) CURRENT_USER",
							  1, &t, &v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.runs");
	if (SPI_processed == 1)
		other = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	if (other != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("a run named \"%s\" already exists", name),
				 errdetail("Run %lld has that name; a role's runs have distinct names.", (long long) other),
				 errhint("Pick another name, or free this one: UPDATE mop.runs SET name = NULL WHERE id = %lld.",
						 (long long) other)));
	return name;
}

/* The tags => argument: NULL, or a JSON object. */
static Jsonb *
arg_run_tags(FunctionCallInfo fcinfo, int argno)
{
	Jsonb	   *tags;

	if (!arg_given(fcinfo, argno))
		return NULL;
	tags = PG_GETARG_JSONB_P(argno);
	if (!JB_ROOT_IS_OBJECT(tags) || JB_ROOT_IS_SCALAR(tags))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"tags\": %s is not a JSON object",
						JsonbToCString(NULL, &tags->root, VARSIZE(tags))),
				 errhint("Give an object, e.g. '{\"team\": \"vision\", \"ticket\": 42}'.")));
	return tags;
}

/*
 * A search's request: its configurations validated against the dataset
 * (an error names the first invalid one), the fields every request shares
 * (mop_request_init), the seed, and the arguments at the positions args
 * gives.
 */
void
mop_search_request(RunRequest *req, FunctionCallInfo fcinfo, const char *kind,
				   const MopSearchArgs *args, MopDataset *ds, Jsonb *space,
				   List *configs, int epochs, int seed)
{
	mop_validate_configs(configs, ds, epochs);
	mop_request_init(req, fcinfo, kind, ds->name, space, configs, epochs,
					 ds->partitions, args->workers, args->wait);
	req->opts.seed = seed;
	if (arg_given(fcinfo, args->deterministic))
		req->opts.deterministic = PG_GETARG_BOOL(args->deterministic);
	req->opts.scheduler = arg_pick(fcinfo, args->scheduler);
	req->opts.median_stop = arg_early_stopping(fcinfo, args->early_stopping);
	req->opts.warm_start = arg_warm_start(fcinfo, args->warm_start, ds);
	req->opts.time_budget_ms = arg_time_budget(fcinfo, args->time_budget);
	req->name = arg_run_name(fcinfo, args->name);
	req->tags = arg_run_tags(fcinfo, args->tags);
}

/*
 * A search function's metric => argument (argument argno; NULL: none): the
 * metric of every configuration, as if the space set "metric" (argument 1
 * becomes the space with it).  A space that sets another metric is an
 * error naming both.
 */
void
mop_search_metric_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *metric;
	Jsonb	   *space;
	JsonbValue *given;
	StringInfoData js;
	Datum		added;

	if (argno >= PG_NARGS() || PG_ARGISNULL(argno) || PG_ARGISNULL(1))
		return;
	metric = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	space = PG_GETARG_JSONB_P(1);
	if (!JB_ROOT_IS_OBJECT(space))
		return;					/* the space's own check says what is wrong */
	given = getKeyJsonValueFromContainer(&space->root, "metric", strlen("metric"), NULL);
	if (given != NULL &&
		!(given->type == jbvString && given->val.string.len == (int) strlen(metric) &&
		  memcmp(given->val.string.val, metric, given->val.string.len) == 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metric => \"%s\" and the space's \"metric\" differ", metric),
				 errhint("Give the metric once: as metric => or as the space's \"metric\" key.")));
	initStringInfo(&js);
	appendStringInfoString(&js, "{\"metric\": ");
	escape_json(&js, metric);
	appendStringInfoChar(&js, '}');
	added = DirectFunctionCall1(jsonb_in, CStringGetDatum(js.data));
	fcinfo->args[1].value = DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(space), added);
}
