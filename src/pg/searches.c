/*
 * searches.c -- the search functions: each checks its arguments, expands or
 * draws the configurations (every one validated against the dataset), and
 * starts the run (run.c).
 *
 *   mop_grid_search(dataset, space, epochs, workers, seed, deterministic,
 *                   scheduler, wait, early_stopping, warm_start, device,
 *                   metric, time_budget, max_trials, name, tags)
 *   mop_random_search(dataset, space, trials, epochs, ...)
 *   mop_hyperband(...), mop_asha(...), mop_pbt(...), mop_tpe(...)
 *   (each ends with device, metric, time_budget, max_trials -- ASHA has
 *   its own -- name and tags)
 *   mop_hyperband_plan(max_resource, eta): Hyperband's plan, nothing trained
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "runreq.h"
#include "search/mop_hyperband.h"
#include "search/mop_pbt.h"

PG_FUNCTION_INFO_V1(mop_hyperband_plan_sql);

/* Where each search function takes the arguments all searches share. */
static const MopSearchArgs grid_args = {
	.workers = 3, .wait = 7, .scheduler = 6, .deterministic = 5,
	.early_stopping = 8, .warm_start = 9,
	.time_budget = 12, .name = 14, .tags = 15
};
static const MopSearchArgs random_args = {
	.workers = 4, .wait = 8, .scheduler = 7, .deterministic = 6,
	.early_stopping = 9, .warm_start = 10,
	.time_budget = 13, .name = 15, .tags = 16
};
static const MopSearchArgs hyperband_args = {
	.workers = 4, .wait = 7, .scheduler = 6, .deterministic = 8,
	.early_stopping = -1, .warm_start = -1,
	.time_budget = 11, .name = 13, .tags = 14
};
static const MopSearchArgs asha_args = {
	.workers = 6, .wait = 9, .scheduler = 8, .deterministic = -1,
	.early_stopping = -1, .warm_start = -1,
	.time_budget = 12, .name = 13, .tags = 14
};
static const MopSearchArgs pbt_args = {
	.workers = 7, .wait = 9, .scheduler = -1, .deterministic = 10,
	.early_stopping = -1, .warm_start = -1,
	.time_budget = 13, .name = 15, .tags = 16
};
static const MopSearchArgs tpe_args = {
	.workers = 6, .wait = 8, .scheduler = -1, .deterministic = 9,
	.early_stopping = 10, .warm_start = -1,
	.time_budget = 13, .name = 15, .tags = 16
};

/* Where each search function takes max_trials => (ASHA: its own, argument 5). */
#define GRID_MAX_TRIALS		13
#define RANDOM_MAX_TRIALS	14
#define HYPERBAND_MAX_TRIALS 12
#define PBT_MAX_TRIALS		14
#define TPE_MAX_TRIALS		14

/*
 * mop_grid_search(dataset text, space jsonb, epochs int, workers int,
 *                 seed int, deterministic bool, scheduler text, wait bool)
 */
static Datum
mop_grid_search_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			epochs;
	int			seed = mop_arg_int32(fcinfo, 4, mop_run_option_defaults.seed);
	int32		max_trials = mop_arg_max_trials(fcinfo, GRID_MAX_TRIALS);
	MopDataset *ds;
	List	   *configs;
	RunRequest	req;

	mop_search_args(fcinfo, 2, &dataset, &space, &epochs);
	ds = mop_dataset_lookup(dataset, false);
	/* max_trials: the first N of the grid, in the order it expands */
	configs = mop_cap_configs(mop_space_grid(space), max_trials,
							  "configurations of the grid");
	mop_search_request(&req, fcinfo, "grid", &grid_args, ds, space, configs,
					   epochs, seed);
	return mop_run_search(fcinfo, &req);
}

/*
 * mop_random_search(dataset text, space jsonb, trials int, epochs int,
 *                   workers int, seed int, deterministic bool,
 *                   scheduler text, wait bool)
 */
static Datum
mop_random_search_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			epochs;
	int			trials = mop_arg_int32(fcinfo, 2, 0);
	int			seed = mop_arg_int32(fcinfo, 5, mop_run_option_defaults.seed);
	int32		max_trials = mop_arg_max_trials(fcinfo, RANDOM_MAX_TRIALS);
	MopDataset *ds;
	List	   *configs;
	RunRequest	req;

	mop_search_args(fcinfo, 3, &dataset, &space, &epochs);
	if (trials < 1 || trials > MOP_MAX_TRIALS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"trials\": %d", trials),
				 errhint("Ask for 1 to 100000 trials.")));
	ds = mop_dataset_lookup(dataset, false);
	/* max_trials: the first N draws (the same as trials => N would draw) */
	configs = mop_cap_configs(mop_space_random(space, trials, (uint64) seed), max_trials,
							  "configurations drawn");
	mop_search_request(&req, fcinfo, "random", &random_args, ds, space, configs,
					   epochs, seed);
	return mop_run_search(fcinfo, &req);
}

/*
 * mop_hyperband_plan(max_resource int, eta int) returns the plan of Li et
 * al.: (bracket, round, configs, resource) with resource in epochs.
 */
Datum
mop_hyperband_plan_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			R = PG_GETARG_INT32(0);
	int			eta = PG_GETARG_INT32(1);
	int32		n;
	mop_hb_round *rows;

	mop_check_hyperband_args(R, eta);
	InitMaterializedSRF(fcinfo, 0);
	n = mop_hyperband_plan(R, eta, NULL, 0);
	if (n < 0)
		elog(ERROR, "could not compute the Hyperband plan (R %d, eta %d)", R, eta);
	rows = palloc(sizeof(mop_hb_round) * Max(n, 1));
	mop_hyperband_plan(R, eta, rows, n);
	for (int i = 0; i < n; i++)
	{
		Datum		v[4];
		bool		nulls[4] = {0};

		v[0] = Int32GetDatum(rows[i].bracket);
		v[1] = Int32GetDatum(rows[i].round);
		v[2] = Int32GetDatum(rows[i].configs);
		v[3] = Int32GetDatum(rows[i].resource);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}

/*
 * mop_hyperband(dataset text, space jsonb, max_resource int, eta int,
 *               workers int, seed int, scheduler text, wait bool)
 * Hyperband on MOP: every bracket's successive halving runs on the
 * workers; promoted models resume from their checkpoints.  The
 * configurations of all brackets are drawn from the space up front (and
 * validated); the driver starts them as the plan needs them.
 */
static Datum
mop_hyperband_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			R = mop_arg_int32(fcinfo, 2, 0);
	int			eta = mop_arg_int32(fcinfo, 3, mop_run_option_defaults.eta);
	int			seed = mop_arg_int32(fcinfo, 5, mop_run_option_defaults.seed);
	int32		max_trials = mop_arg_max_trials(fcinfo, HYPERBAND_MAX_TRIALS);
	int32		trials;
	int			brackets = 0;
	MopDataset *ds;
	List	   *configs;
	RunRequest	req;
	int			epochs_unused;

	mop_check_hyperband_args(R, eta);
	mop_search_args(fcinfo, 2, &dataset, &space, &epochs_unused);
	trials = mop_hyperband_trials(R, eta, 0);
	if (max_trials > 0 && trials > max_trials)
	{
		/* max_trials: the plan's first brackets (s_max first) whose configurations fit */
		int			n_brackets = mop_hyperband_smax(R, eta) + 1;

		while (brackets < n_brackets && mop_hyperband_trials(R, eta, brackets + 1) <= max_trials)
			brackets++;
		if (brackets == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"max_trials\": %d", max_trials),
					 errdetail("Hyperband's first bracket alone starts %d configurations (max_resource %d, eta %d); max_trials keeps whole brackets.",
							   mop_hyperband_trials(R, eta, 1), R, eta),
					 errhint("Ask for at least %d, or lower max_resource; mop_hyperband_plan shows the brackets.",
							 mop_hyperband_trials(R, eta, 1))));
		ereport(NOTICE,
				(errmsg("Hyperband runs the first %d of its %d brackets: %d configurations, not %d (max_trials %d)",
						brackets, n_brackets, mop_hyperband_trials(R, eta, brackets), trials,
						max_trials),
				 errhint("mop_hyperband_plan(%d, %d) shows the brackets.", R, eta)));
		trials = mop_hyperband_trials(R, eta, brackets);
	}
	if (trials > MOP_MAX_TRIALS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("Hyperband with max_resource %d and eta %d needs %d configurations, more than 100000",
						R, eta, trials)));
	ds = mop_dataset_lookup(dataset, false);
	configs = mop_space_random(space, trials, (uint64) seed);
	mop_search_request(&req, fcinfo, "hyperband", &hyperband_args, ds, space, configs,
					   R, seed);
	req.opts.kind = MOP_KIND_HYPERBAND;
	req.opts.max_resource = R;
	req.opts.eta = eta;
	req.opts.min_resource = 1;
	req.opts.trials = trials;
	req.opts.hb_brackets = brackets;
	return mop_run_search(fcinfo, &req);
}

/*
 * mop_asha(dataset text, space jsonb, max_resource int, eta int,
 *          min_resource int, max_trials int, workers int, seed int,
 *          scheduler text, wait bool)
 * Asynchronous successive halving on MOP: no barriers; a worker with
 * nothing to do gets the best not-yet-promoted model of the highest rung
 * that has one (it resumes from its checkpoint), or else a new
 * configuration, up to max_trials.
 */
static Datum
mop_asha_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			R = mop_arg_int32(fcinfo, 2, 0);
	int			eta = mop_arg_int32(fcinfo, 3, mop_run_option_defaults.eta);
	int			r_min = mop_arg_int32(fcinfo, 4, mop_run_option_defaults.min_resource);
	int			trials = mop_arg_int32(fcinfo, 5, mop_run_default_trials(MOP_KIND_ASHA));
	int			seed = mop_arg_int32(fcinfo, 7, mop_run_option_defaults.seed);
	MopDataset *ds;
	List	   *configs;
	RunRequest	req;
	int			epochs_unused;

	mop_check_hyperband_args(R, eta);
	if (r_min < 1 || r_min > R)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"min_resource\": %d", r_min),
				 errhint("The first rung trains 1 to max_resource (%d) epochs.", R)));
	if (trials < 1 || trials > MOP_MAX_TRIALS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"max_trials\": %d", trials),
				 errhint("Ask for 1 to 100000 configurations.")));
	mop_search_args(fcinfo, 2, &dataset, &space, &epochs_unused);
	ds = mop_dataset_lookup(dataset, false);
	configs = mop_space_random(space, trials, (uint64) seed);
	mop_search_request(&req, fcinfo, "asha", &asha_args, ds, space, configs,
					   R, seed);
	req.opts.kind = MOP_KIND_ASHA;
	req.opts.max_resource = R;
	req.opts.eta = eta;
	req.opts.min_resource = r_min;
	req.opts.trials = trials;
	return mop_run_search(fcinfo, &req);
}

/*
 * mop_pbt(dataset text, space jsonb, population int, epochs int,
 *         interval int, quantile float8, resample float8, workers int,
 *         seed int, wait bool)
 * Population based training on MOP: every member trains asynchronously;
 * each time one completes `interval` epochs it is ranked against the
 * others' latest scores, and a member of the bottom quantile copies the
 * checkpoint (weights and optimizer state) of a random top-quantile member
 * and explores (x0.8 / x1.2, or resampling with probability `resample`).
 * Lineage is recorded in mop.decisions (parent_model_id, hyperparameters).
 */
static Datum
mop_pbt_sql_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			population = mop_arg_int32(fcinfo, 2, mop_run_default_trials(MOP_KIND_PBT));
	int			epochs;
	int			interval = mop_arg_int32(fcinfo, 4, mop_run_option_defaults.pbt_interval);
	double		quantile = mop_arg_float8(fcinfo, 5, mop_run_option_defaults.pbt_quantile);
	double		resample = mop_arg_float8(fcinfo, 6, mop_run_option_defaults.pbt_resample);
	int			seed = mop_arg_int32(fcinfo, 8, mop_run_option_defaults.seed);
	int32		max_trials = mop_arg_max_trials(fcinfo, PBT_MAX_TRIALS);
	MopSpaceDesc *desc;
	MopDataset *ds;
	mop_pbt_opts o;
	mop_pbt    *p;
	List	   *configs = NIL;
	RunRequest	req;

	mop_search_args(fcinfo, 3, &dataset, &space, &epochs);
	if (population < MOP_MIN_POPULATION || population > MOP_MAX_POPULATION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"population\": %d", population),
				 errhint("A population has 2 to 10000 members.")));
	if (max_trials > 0 && max_trials < population)
	{
		/* max_trials: a smaller population (its members are all the configurations tried) */
		if (max_trials < MOP_MIN_POPULATION)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"max_trials\": %d", max_trials),
					 errdetail("PBT's configurations are its population's members, and a population has at least 2."),
					 errhint("Ask for at least 2.")));
		ereport(NOTICE,
				(errmsg("the population has %d members, not %d (max_trials)", max_trials, population)));
		population = max_trials;
	}
	if (interval < 1 || interval > epochs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"interval\": %d", interval),
				 errhint("Exploit and explore every 1 to %d epochs.", epochs)));
	if (!(quantile > 0 && quantile <= 0.5))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"quantile\": %g", quantile),
				 errhint("The quantile is in (0, 0.5].")));
	if (!(resample >= 0 && resample <= 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"resample\": %g", resample),
				 errhint("The resampling probability is in [0, 1].")));
	desc = mop_space_describe(space);
	for (int i = 0; i < desc->n_keys; i++)
		if (strcmp(desc->keys[i], "model") == 0 && desc->param_of_key[i] >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid search space parameter \"model\": PBT copies weights between members, so they share one architecture"),
					 errhint("Give one architecture and lists or distributions for the hyperparameters.")));
	for (int i = 0; i < desc->n_keys; i++)
		if (desc->nested[i] && desc->param_of_key[i] >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid search space parameter \"%s\": PBT cannot search a layer's fields",
							desc->keys[i]),
					 errdetail("PBT copies weights between members, so every member keeps the architecture it starts with, every layer field included."),
					 errhint("Give the layer a fixed value, or search it with mop_random_search, mop_tpe, mop_hyperband or mop_asha.")));
	mop_check_numeric_space(desc, "PBT");
	o.quantile = quantile;
	o.resample_p = resample;
	o.down = 0.8;
	o.up = 1.2;
	/* the coordinator rebuilds the same population from the same seed */
	p = mop_pbt_new(desc->params, desc->n_params, population, &o, (uint64) seed);
	if (p == NULL)
		elog(ERROR, "could not create the PBT population");
	for (int m = 0; m < population; m++)
		configs = lappend(configs, mop_space_config(desc, mop_pbt_values(p, m)));
	mop_pbt_free(p);
	ds = mop_dataset_lookup(dataset, false);
	mop_search_request(&req, fcinfo, "pbt", &pbt_args, ds, space, configs,
					   epochs, seed);
	req.opts.kind = MOP_KIND_PBT;
	req.opts.trials = population;
	req.opts.pbt_interval = interval;
	req.opts.pbt_quantile = quantile;
	req.opts.pbt_resample = resample;
	return mop_run_search(fcinfo, &req);
}

/*
 * mop_tpe(dataset text, space jsonb, trials int, epochs int, n_startup int,
 *         gamma float8, workers int, seed int, wait bool)
 * The Tree-structured Parzen Estimator (Bergstra et al. 2011) on MOP: a new
 * configuration is proposed whenever a worker would otherwise idle, from
 * the results of the trials completed so far (random for the first
 * n_startup; running trials count as "constant liars"), so all workers stay
 * busy; each trains `epochs` epochs and reports its best validation score.
 */
static Datum
mop_tpe_sql_body(PG_FUNCTION_ARGS)
{
	char	   *dataset;
	Jsonb	   *space;
	int			trials = mop_arg_int32(fcinfo, 2, 0);
	int			epochs;
	int			n_startup = mop_arg_int32(fcinfo, 4, mop_run_option_defaults.tpe_startup);
	double		gamma = mop_arg_float8(fcinfo, 5, mop_run_option_defaults.tpe_gamma);
	int			seed = mop_arg_int32(fcinfo, 7, mop_run_option_defaults.seed);
	int32		max_trials = mop_arg_max_trials(fcinfo, TPE_MAX_TRIALS);
	MopSpaceDesc *desc;
	MopDataset *ds;
	List	   *configs;
	RunRequest	req;

	mop_search_args(fcinfo, 3, &dataset, &space, &epochs);
	if (trials < 1 || trials > MOP_MAX_TRIALS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"trials\": %d", trials),
				 errhint("Ask for 1 to 100000 trials.")));
	if (max_trials > 0 && max_trials < trials)
	{
		ereport(NOTICE,
				(errmsg("TPE tries %d configurations, not %d (max_trials)", max_trials, trials)));
		trials = max_trials;
	}
	if (n_startup < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"n_startup\": %d", n_startup),
				 errhint("TPE needs at least one random trial to start from.")));
	if (!(gamma > 0 && gamma <= 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"gamma\": %g", gamma),
				 errhint("gamma, the fraction of good trials, is in (0, 1].")));
	desc = mop_space_describe(space);
	mop_check_numeric_space(desc, "TPE");
	/* configurations from the prior: every one must be valid for the dataset */
	ds = mop_dataset_lookup(dataset, false);
	configs = mop_space_random(space, trials, (uint64) seed);
	mop_search_request(&req, fcinfo, "tpe", &tpe_args, ds, space, configs,
					   epochs, seed);
	if (req.opts.median_stop && req.opts.deterministic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("early_stopping cannot be combined with deterministic => true"),
				 errdetail("The median rule compares a trial with the others' results so far, which depends on timing."),
				 errhint("Drop one of the two.")));
	req.opts.kind = MOP_KIND_TPE;
	req.opts.trials = trials;
	req.opts.tpe_startup = n_startup;
	req.opts.tpe_gamma = gamma;
	return mop_run_search(fcinfo, &req);
}

/* The SQL-callable functions; the last argument of each is device => . */
MOP_SEARCH_ENTRY(mop_grid_search, 10, mop_grid_search_body);
MOP_SEARCH_ENTRY(mop_random_search, 11, mop_random_search_body);
MOP_SEARCH_ENTRY(mop_hyperband, 9, mop_hyperband_body);
MOP_SEARCH_ENTRY(mop_asha, 10, mop_asha_body);
MOP_SEARCH_ENTRY(mop_pbt_sql, 11, mop_pbt_sql_body);
MOP_SEARCH_ENTRY(mop_tpe_sql, 11, mop_tpe_sql_body);
