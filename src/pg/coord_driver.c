/*
 * coord_driver.c -- the coordinator's side of the driver interface
 * (src/search/mop_driver.h): creating the run's search driver and its
 * early-stopping rule, asking the driver for actions and carrying them out,
 * telling it results (recorded first, so that a resumed run can replay
 * them), and the median stopping rule, whose stops write to the catalog.
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "coordinator.h"
#include "search/mop_median.h"

static mop_driver *median_rule_new(void);
static bool patience_stops(mop_sched *s, int32 model, int32 epochs, double score,
						   bool target_done);

/* The run's search space (TPE, PBT), in TopMemoryContext. */
static MopSpaceDesc *
run_space(void)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	MopSpaceDesc *space;

	space = mop_space_describe(DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																  CStringGetDatum(mop_run_string(coord.seg, MOP_KEY_SPACE)))));
	MemoryContextSwitchTo(old);
	return space;
}

/* Create the run's driver and rule from its settings (coord.n_workers known). */
void
coord_drivers_create(void)
{
	MopRunShared *run = coord.run;

	if (coord.tpe_batch <= 0)
		coord.tpe_batch = coord.n_workers;
	switch ((MopRunKind) run->opts.kind)
	{
		case MOP_KIND_FIXED:
			break;
		case MOP_KIND_HYPERBAND:
			if ((coord.driver = mop_hb_driver_new_brackets(run->opts.max_resource, run->opts.eta,
														   run->opts.hb_brackets)) == NULL)
				elog(ERROR, "could not create the Hyperband driver (R %d, eta %d)",
					 run->opts.max_resource, run->opts.eta);
			break;
		case MOP_KIND_ASHA:
			if ((coord.driver = mop_asha_driver_new(run->opts.min_resource, run->opts.max_resource,
													run->opts.eta, run->n_configs)) == NULL)
				elog(ERROR, "could not create the ASHA driver (r_min %d, R %d, eta %d)",
					 run->opts.min_resource, run->opts.max_resource, run->opts.eta);
			break;
		case MOP_KIND_PBT:
			coord.space = run_space();
			coord.driver = coord_pbt_driver_new();
			break;
		case MOP_KIND_TPE:
			{
				mop_tpe_opts o;

				coord.space = run_space();
				coord.proposed = MemoryContextAllocZero(TopMemoryContext,
														sizeof(Jsonb *) * Max(run->n_configs, 1));
				mop_tpe_default_opts(&o);
				o.n_startup = run->opts.tpe_startup;
				o.gamma = run->opts.tpe_gamma;
				if ((coord.driver = mop_tpe_driver_new(coord.space->params, coord.space->n_params,
													   &o, (uint64) run->opts.seed, run->n_configs,
													   run->opts.epochs, run->opts.deterministic,
													   coord.tpe_batch)) == NULL)
					elog(ERROR, "could not create the TPE sampler");
				break;
			}
	}
	if (coord.driver)
		coord.driver->n_workers = coord.n_workers;
	if (run->opts.median_stop)
		coord.rule = median_rule_new();
}

void
coord_drivers_free(void)
{
	mop_driver_free(coord.driver);
	mop_driver_free(coord.rule);
	coord.driver = coord.rule = NULL;
}

/* Does an adaptive driver decide which models train? */
bool
coord_adaptive(void)
{
	return mop_driver_adaptive(coord.driver);
}

/* A validation metric as a driver score: higher is better, NaN: failed. */
double
coord_score(double metric)
{
	if (!isfinite(metric))
		return NAN;
	return coord.run->higher_is_better ? metric : -metric;
}

/* Ask the run's driver for its next action. */
mop_poll
coord_driver_next(mop_action *a)
{
	mop_driver *d = coord.driver;
	mop_poll	p = d->ops->next_action(d, a);

	if (p == MOP_POLL_DONE && d->error != 0)
		elog(ERROR, "the search driver could not propose a configuration (%d)", d->error);
	if (p == MOP_POLL_ACTION && a->kind == MOP_ACT_NEW && d->ops->proposal)
	{
		/* the configuration it proposed, for the model's row */
		const double *x = d->ops->proposal(d, a->trial);
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		coord.proposed[a->trial] = mop_space_config(coord.space, x);
		MemoryContextSwitchTo(old);
	}
	return p;
}

/* May the driver be asked for an action now (see mop_asha_driver_new)? */
bool
coord_driver_may_start(const mop_sched *s)
{
	mop_driver *d = coord.driver;

	return d->ops->may_start == NULL || d->ops->may_start(d, mop_sched_active(s));
}

/* Tell the driver a result, as it was or will be recorded. */
void
coord_driver_tell(int32 trial, int32 resource, double score)
{
	int			rc = coord.driver->ops->report_result(coord.driver, trial, resource, score);

	if (rc < 0)
		elog(ERROR, "run %lld: the search driver refused a result of model %d (%d)",
			 (long long) coord.run->run_id, trial, rc);
}

/* Report a model's result to the run's driver, recorded first. */
void
coord_driver_report(int32 trial, int32 resource, double score)
{
	/* recorded, so that a resumed run can replay the driver exactly */
	coord_begin_tx();
	coord_record_report(trial, resource, score, coord.driver->report_reason);
	coord_commit_tx();
	coord_driver_tell(trial, resource, score);
}

/*
 * Model `model` finished an epoch with `score` (its last: target_done).  An
 * adaptive driver hears the result at the model's target; the driver and
 * the rule watching epochs, every epoch.
 */
void
coord_drivers_epoch_done(mop_sched *s, int32 model, double score, bool target_done)
{
	mop_driver *d[2] = {coord.driver, coord.rule};

	if (patience_stops(s, model, mop_sched_epochs_done(s, model), score, target_done))
		return;
	if (target_done && coord_adaptive())
		coord_driver_report(model, coord.models[model].target, score);
	for (int k = 0; k < 2; k++)
		if (d[k] != NULL && d[k]->ops->epoch_done)
			d[k]->ops->epoch_done(d[k], s, model, mop_sched_epochs_done(s, model), score,
								  target_done);
}

/* Model `model`'s task failed or diverged: it has stopped. */
void
coord_drivers_task_failed(mop_sched *s, int32 model)
{
	mop_driver *d[2] = {coord.driver, coord.rule};

	if (coord_adaptive())
		coord_driver_report(model, coord.models[model].target, NAN);
	for (int k = 0; k < 2; k++)
		if (d[k] != NULL && d[k]->ops->task_failed)
			d[k]->ops->task_failed(d[k], s, model);
}

/*
 * Carry out one driver action: start a new trial, raise the budget of a
 * promoted one (it resumes from its checkpoint), or stop one.  In its own
 * transaction, with the decision recorded.
 */
void
coord_apply_action(mop_sched *s, const mop_action *a)
{
	coord_begin_tx();
	switch (a->kind)
	{
		case MOP_ACT_NEW:
			if (a->trial != coord.n_models)
				elog(ERROR, "mop run %lld: driver started trial %d, expected %d",
					 (long long) coord.run->run_id, a->trial, coord.n_models);
			coord_insert_model(coord.run->run_id, a->trial, a->resource);
			if (coord_add_model(s, a->resource) != a->trial)
				elog(ERROR, "mop run %lld: scheduler out of step with the driver",
					 (long long) coord.run->run_id);
			SpinLockAcquire(&coord.run->mutex);
			coord.run->n_models = coord.n_models;
			SpinLockRelease(&coord.run->mutex);
			break;
		case MOP_ACT_CONTINUE:
			coord.models[a->trial].drop_handed = false;
			coord.models[a->trial].target = a->resource;
			mop_sched_set_epochs(s, a->trial, a->resource);
			coord_set_status(a->trial, "training", NULL);
			break;
		case MOP_ACT_STOP:
			if (coord.models[a->trial].stopped)
				break;			/* its patience stopped it already (coord_stop_model) */
			mop_sched_stop(s, a->trial);
			coord_model_stopped(a->trial);
			coord_set_status(a->trial, a->d.why == MOP_WHY_FINISHED ? "done" : "stopped", NULL);
			SpinLockAcquire(&coord.run->mutex);
			coord.run->models_done++;
			SpinLockRelease(&coord.run->mutex);
			break;
	}
	coord_record_decision(mop_act_name(a->kind), mop_why_name(a->d.why), a->trial, &a->d,
						  a->kind == MOP_ACT_STOP ? a->d.to_resource : a->resource, -1, NULL);
	coord_commit_tx();
}

/* Stop model i now (early-stopping rule): scheduler, catalog and decision record. */
void
coord_stop_model(mop_sched *s, int32 i, const mop_decision *d)
{
	mop_sched_stop(s, i);
	coord_model_stopped(i);
	coord_begin_tx();
	coord_set_status(i, "stopped", NULL);
	coord_record_decision(mop_act_name(MOP_ACT_STOP), mop_why_name(d->why), i, d,
						  d->to_resource, -1, NULL);
	coord_commit_tx();
	SpinLockAcquire(&coord.run->mutex);
	coord.run->models_done++;
	SpinLockRelease(&coord.run->mutex);
	coord.models[i].stopped = true;
	/*
	 * An adaptive driver learns from a stopped trial too: TPE its best score
	 * before the stop; Hyperband and ASHA, which rank results at a rung,
	 * that it has none there (so that it is neither awaited nor promoted).
	 */
	if (coord_adaptive())
	{
		if (coord.run->opts.kind == MOP_KIND_HYPERBAND || coord.run->opts.kind == MOP_KIND_ASHA)
			coord_driver_report(i, coord.models[i].target, NAN);
		else
			coord_driver_report(i, d->from_resource, d->score);
	}
}

/*
 * Model i's patience rule (its configuration's "early_stopping"), loaded on
 * its first epoch result in this process: the configuration, and the
 * validation metrics of the epochs before `epochs` (since its last PBT
 * exploit), so that a resumed run or a member that exploited goes on
 * where it stands.
 */
static void
patience_load(int32 i, int32 epochs)
{
	CoordModel *m = &coord.models[i];
	Oid			t[2] = {INT8OID, INT4OID};
	Datum		v[2] = {Int64GetDatum(m->id), Int32GetDatum(epochs)};
	bool		isnull;

	mop_patience_init(&m->patience_state);
	m->patience.patience = 0;
	coord_begin_tx();
	coord_exec_sql("SELECT m.config FROM mop.models m WHERE m.id OPERATOR(pg_catalog.=) $1",
				   1, t, v, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		Datum		c = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			mop_config_patience(DatumGetJsonbP(c), &m->patience);
	}
	if (m->patience.patience > 0)
	{
		coord_exec_sql("SELECT e.epoch, e.valid_metric FROM mop.epochs e "
					   "WHERE e.model_id OPERATOR(pg_catalog.=) $1 AND e.epoch OPERATOR(pg_catalog.<) $2 "
					   "AND e.epoch OPERATOR(pg_catalog.>) COALESCE((SELECT pg_catalog.max(d.from_resource) "
					   "  FROM mop.decisions d WHERE d.model_id OPERATOR(pg_catalog.=) $1 "
					   "  AND d.action OPERATOR(pg_catalog.=) 'exploit'), 0) "
					   "ORDER BY e.epoch",
					   2, t, v, SPI_OK_SELECT);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	td = SPI_tuptable->tupdesc;
			int32		e = DatumGetInt32(SPI_getbinval(tup, td, 1, &isnull));
			Datum		vm = SPI_getbinval(tup, td, 2, &isnull);

			(void) mop_patience_epoch(&m->patience, &m->patience_state, true, e,
									  coord_score(isnull ? NAN : DatumGetFloat8(vm)));
		}
	}
	coord_commit_tx();
	m->patience_known = true;
}

/*
 * Model `model` finished epoch `epochs` with `score`: does its patience
 * stop it?  Not after the epoch it was to train to (target_done: it is done,
 * or its driver decides).  If so it is stopped (coord_stop_model) with its
 * decision, and true is returned.
 */
static bool
patience_stops(mop_sched *s, int32 model, int32 epochs, double score, bool target_done)
{
	CoordModel *m = &coord.models[model];
	mop_decision dec;

	if (!m->patience_known)
		patience_load(model, epochs);
	if (!mop_patience_epoch(&m->patience, &m->patience_state, true, epochs, score) ||
		m->stopped || target_done)
		return false;
	mop_decision_init(&dec, MOP_WHY_PATIENCE, model);
	dec.score = m->patience_state.best;
	dec.from_resource = epochs;
	dec.to_resource = -1;
	snprintf(dec.reason, sizeof(dec.reason),
			 "patience: no improvement by more than %g for %d epochs (epoch %d, best epoch %d)",
			 m->patience.min_delta, m->patience.patience, epochs,
			 m->patience_state.best_epoch);
	coord_stop_model(s, model, &dec);
	/* a rule or population waiting for it (PBT's generation barrier) goes on */
	if (coord.driver && coord.driver->ops->task_failed)
		coord.driver->ops->task_failed(coord.driver, s, model);
	return true;
}

/* ---- the median stopping rule (mop_median.h) as a driver ---- */

typedef struct MedianRule
{
	mop_driver	base;
	mop_median *median;
} MedianRule;

static void
median_epoch_done(mop_driver *d, mop_sched *s, int32_t trial, int32_t epochs, double score,
				  int target_done)
{
	mop_median *median = ((MedianRule *) d)->median;
	mop_decision dec;
	int			stop = mop_median_report(median, trial, epochs, score, &dec);

	if (target_done)
		mop_median_complete(median, trial);
	else if (stop == 1)
	{
		dec.from_resource = epochs;
		dec.to_resource = -1;
		coord_stop_model(s, trial, &dec);
	}
}

static void
median_free(mop_driver *d)
{
	mop_median_free(((MedianRule *) d)->median);
	pfree(d);
}

static const mop_driver_ops median_ops = {
	.epoch_done = median_epoch_done,
	.free = median_free,
};

static mop_driver *
median_rule_new(void)
{
	MedianRule *r = MemoryContextAllocZero(TopMemoryContext, sizeof(MedianRule));

	r->base.ops = &median_ops;
	if ((r->median = mop_median_new(2, 3, 0, MOP_MEDIAN_BEST)) == NULL)
		elog(ERROR, "could not create the median stopping rule");
	return &r->base;
}
