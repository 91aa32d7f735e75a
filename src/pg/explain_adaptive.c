/*
 * explain_adaptive.c -- the plans of the searches whose configurations are
 * drawn as they run: mop_explain_hyperband (Hyperband's brackets),
 * mop_explain_asha (ASHA's rungs, expected and at most) and
 * mop_explain_trials (random search, TPE, PBT's population), each at the
 * mean epoch of configurations drawn from the space, profiled as
 * mop_explain profiles them (explain.c).
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

PG_FUNCTION_INFO_V1(mop_explain_hyperband);
PG_FUNCTION_INFO_V1(mop_explain_asha);
PG_FUNCTION_INFO_V1(mop_explain_trials);

/*
 * The mean epoch (seconds, as mop_explain's epoch_s) of AUTO_MAX_PROFILES
 * configurations drawn from the space (seed 0), profiled as mop_explain
 * profiles them; *state (when not NULL): their mean checkpoint in bytes;
 * mean_w (when max_w > 0): the mean epoch with w = 1..max_w workers, at
 * mean_w[w - 1] (the threads each gets, mop_xp_epoch_at).  0 when none
 * could be profiled.
 */
double
mop_xp_space_mean_epoch(const MopDataset *ds, Jsonb *space, int epochs, int max_w,
						double *mean_w, double *state)
{
	ConfigCost *c;
	int			n,
				profiled = 0;
	double		mean = 0,
				bytes = 0,
				remote = max_w > 0 ? mop_xp_remote_share(ds) : 0;

	n = mop_xp_cost_configs(ds, mop_space_random(space, AUTO_MAX_PROFILES, 0), epochs, AUTO_MAX_PROFILES, XP_PROFILE_KEEP, &c);
	for (int w = 1; w <= max_w; w++)
		mean_w[w - 1] = 0;
	for (int i = 0; i < n; i++)
		if (c[i].epoch_s > 0)
		{
			mean += c[i].epoch_s;
			bytes += mop_xp_state_bytes(&c[i]);
			for (int w = 1; w <= max_w; w++)
				mean_w[w - 1] += mop_xp_epoch_at(ds, &c[i], w, remote, NULL);
			profiled++;
		}
	if (state)
		*state = profiled > 0 ? bytes / profiled : 0;
	for (int w = 1; w <= max_w && profiled > 0; w++)
		mean_w[w - 1] /= profiled;
	return profiled > 0 ? mean / profiled : 0;
}

/*
 * mop_explain_hyperband(dataset text, space jsonb, max_resource int, eta
 * int) -> mop_hyperband_plan's rows with the epochs each round trains (its
 * configurations times the epochs added since the round before: promoted
 * models resume) and their seconds on one worker, at the mean epoch of
 * AUTO_MAX_PROFILES configurations drawn from the space (profiled as
 * mop_explain profiles; seed 0).
 */
Datum
mop_explain_hyperband(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MopDataset *ds;
	Jsonb	   *space;
	char	   *dataset;
	int			R,
				eta = PG_ARGISNULL(3) ? 3 : PG_GETARG_INT32(3);
	int32		rows_n;
	mop_hb_round *rows;
	double		mean;
	MemoryContext opcxt,
				old;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("max_resource must not be null")));
	mop_check_hyperband_args(PG_GETARG_INT32(2), eta);
	mop_search_args(fcinfo, 2, &dataset, &space, &R);
	ds = mop_dataset_lookup(dataset, false);
	InitMaterializedSRF(fcinfo, 0);
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_explain_hyperband", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(opcxt);
	/* on one worker: with the automatic thread count, at all the cores */
	(void) mop_xp_space_mean_epoch(ds, space, R, 1, &mean, NULL);
	rows_n = mop_hyperband_plan(R, eta, NULL, 0);
	if (rows_n < 0)
		elog(ERROR, "could not compute the Hyperband plan (R %d, eta %d)", R, eta);
	rows = palloc(sizeof(mop_hb_round) * Max(rows_n, 1));
	mop_hyperband_plan(R, eta, rows, rows_n);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < rows_n; i++)
	{
		Datum		v[6];
		bool		nulls[6] = {0};
		int32		before = rows[i].round > 0 && i > 0 ? rows[i - 1].resource : 0;
		int64		epochs = (int64) rows[i].configs * (rows[i].resource - before);

		v[0] = Int32GetDatum(rows[i].bracket);
		v[1] = Int32GetDatum(rows[i].round);
		v[2] = Int32GetDatum(rows[i].configs);
		v[3] = Int32GetDatum(rows[i].resource);
		v[4] = Int64GetDatum(epochs);
		v[5] = mop_xp_nullable_float(mean * epochs, &nulls[5]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	MemoryContextDelete(opcxt);
	return (Datum) 0;
}

/*
 * mop_explain_asha(dataset text, space jsonb, max_resource int, eta int,
 * min_resource int, max_trials int) -> ASHA's rungs (mop_plan_asha): the
 * configurations each reaches and the epochs it adds, when every rung
 * promotes 1/eta and at most, with their seconds on one worker at the mean
 * epoch of the space (as mop_explain_hyperband).
 */
Datum
mop_explain_asha(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MopDataset *ds;
	Jsonb	   *space;
	char	   *dataset;
	int			R,
				eta = mop_arg_int32(fcinfo, 3, mop_run_option_defaults.eta),
				r_min = mop_arg_int32(fcinfo, 4, mop_run_option_defaults.min_resource),
				trials = mop_arg_int32(fcinfo, 5, mop_run_default_trials(MOP_KIND_ASHA));
	int32		rows_n;
	mop_plan_rung *rows;
	double		mean;
	MemoryContext opcxt,
				old;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("max_resource must not be null")));
	R = PG_GETARG_INT32(2);
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
				 errhint("Plan 1 to %d configurations.", MOP_MAX_TRIALS)));
	mop_search_args(fcinfo, 2, &dataset, &space, &R);
	ds = mop_dataset_lookup(dataset, false);
	InitMaterializedSRF(fcinfo, 0);
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_explain_asha", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(opcxt);
	/* on one worker: with the automatic thread count, at all the cores */
	(void) mop_xp_space_mean_epoch(ds, space, R, 1, &mean, NULL);
	rows_n = mop_plan_asha(r_min, R, eta, trials, NULL, 0);
	if (rows_n < 1)
		elog(ERROR, "could not compute ASHA's rungs (min_resource %d, R %d, eta %d)", r_min, R, eta);
	rows = palloc(sizeof(mop_plan_rung) * rows_n);
	mop_plan_asha(r_min, R, eta, trials, rows, rows_n);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < rows_n; i++)
	{
		Datum		v[8];
		bool		nulls[8] = {0};

		v[0] = Int32GetDatum(rows[i].rung);
		v[1] = Int32GetDatum(rows[i].resource);
		v[2] = Int32GetDatum(rows[i].configs);
		v[3] = Int64GetDatum(rows[i].epochs);
		v[4] = rows[i].epochs == 0 ? Float8GetDatum(0) : mop_xp_nullable_float(mean * rows[i].epochs, &nulls[4]);
		v[5] = Int32GetDatum(rows[i].configs_max);
		v[6] = Int64GetDatum(rows[i].epochs_max);
		v[7] = rows[i].epochs_max == 0 ? Float8GetDatum(0) : mop_xp_nullable_float(mean * rows[i].epochs_max, &nulls[7]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	MemoryContextDelete(opcxt);
	return (Datum) 0;
}

/*
 * mop_explain_trials(dataset text, space jsonb, trials int, epochs int,
 * max_workers int) -> as mop_explain_workers, for `trials` configurations
 * drawn as the search runs (random search, TPE, PBT's population), each
 * costed at the mean epoch of the space (mop_plan_trials).
 */
Datum
mop_explain_trials(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MopDataset *ds;
	Jsonb	   *space;
	char	   *dataset;
	int			trials,
				epochs,
				max_w,
				knee;
	double		mean,
				state,
			   *mean_w,
			   *efficiency,
			   *makespan,
			   *bound;
	mop_plan_costs k;
	MemoryContext opcxt,
				old;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("trials must not be null")));
	trials = PG_GETARG_INT32(2);
	if (trials < 1 || trials > MOP_MAX_TRIALS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"trials\": %d", trials),
				 errhint("Plan 1 to %d configurations.", MOP_MAX_TRIALS)));
	mop_search_args(fcinfo, 3, &dataset, &space, &epochs);
	ds = mop_dataset_lookup(dataset, false);
	max_w = mop_xp_explain_max_workers(fcinfo, 4, ds);
	InitMaterializedSRF(fcinfo, 0);
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_explain_trials", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(opcxt);
	mean_w = palloc0(sizeof(double) * max_w);
	mean = mop_xp_space_mean_epoch(ds, space, epochs, max_w, mean_w, &state);
	makespan = palloc0(sizeof(double) * (max_w + 1));
	bound = palloc0(sizeof(double) * (max_w + 1));
	mop_xp_plan_costs(&k);
	CHECK_FOR_INTERRUPTS();
	if (mean > 0 &&
		mop_plan_trials(&k, Max(ds->partitions, 1), trials, epochs, mean_w, state,
						(mop_pick) mop_scheduler, max_w, makespan, bound, &knee) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("the scheduler's simulation failed")));
	/* efficiency and knee at one thread per worker (mop_xp_simulate_workers) */
	efficiency = palloc0(sizeof(double) * (max_w + 1));
	for (int w = 1; w <= max_w; w++)
		efficiency[w] = makespan[w] > 0 ? makespan[1] / makespan[w] / w : 0;
	if (mean > 0 && mop_xp_threads_vary())
	{
		double	   *one = palloc(sizeof(double) * max_w),
				   *mk1 = palloc0(sizeof(double) * (max_w + 1)),
				   *lb1 = palloc0(sizeof(double) * (max_w + 1));

		for (int w = 1; w <= max_w; w++)
			one[w - 1] = mean;
		if (mop_plan_trials(&k, Max(ds->partitions, 1), trials, epochs, one, state,
							(mop_pick) mop_scheduler, max_w, mk1, lb1, &knee) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("the scheduler's simulation failed")));
		for (int w = 1; w <= max_w; w++)
			efficiency[w] = mk1[w] > 0 ? mk1[1] / mk1[w] / w : 0;
	}
	MemoryContextSwitchTo(old);
	for (int w = 1; w <= max_w && mean > 0; w++)
	{
		Datum		v[6];
		bool		nulls[6] = {0};

		v[0] = Int32GetDatum(w);
		v[1] = Float8GetDatum(makespan[w]);
		v[2] = Float8GetDatum(bound[w]);
		v[3] = Float8GetDatum(makespan[1] / makespan[w]);
		v[4] = Float8GetDatum(efficiency[w]);
		v[5] = BoolGetDatum(w == knee);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	MemoryContextDelete(opcxt);
	return (Datum) 0;
}
