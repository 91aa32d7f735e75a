/*
 * driver_tpe.c -- TPE behind the driver interface (mop_driver.h).
 *
 * TPE proposes each new trial from the results so far (tpe.c); this glue
 * decides when to ask it and when to tell it.  A new proposal is made
 * whenever a worker would idle, with at most one trial in flight per
 * worker.  A deterministic run proposes in synchronous batches of `batch`
 * trials: trial n is asked only once every trial of the earlier batches has
 * been told, and the scores of a batch are held until the whole batch is in
 * and then told in trial order, so that no proposal of a batch sees a
 * result of its own batch (which one arrives first is timing).  What TPE
 * knows at each ask -- the complete trials and the pending "constant
 * liars" -- then depends only on the seed, never on timing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mop_driver.h"

typedef struct tpe_driver
{
	mop_driver	base;
	mop_tpe    *tpe;
	int32_t		n_params;
	int32_t		max_trials;
	int32_t		epochs;			/* each trial trains this many */
	int32_t		n_startup;		/* random proposals before the model */
	int			deterministic;
	int32_t		batch;			/* deterministic: trials per batch */
	int32_t		n_trials;		/* proposed so far */
	int32_t		running;		/* proposed, score not in yet */
	int32_t		told_prefix;	/* trials 0 .. told_prefix - 1 are all told */
	int32_t    *ids;			/* TPE's observation id of each trial */
	uint8_t    *told;			/* has TPE been told trial i's score? */
	uint8_t    *done;			/* has trial i's score arrived? */
	double	   *score;			/* ... that score */
	double	   *values;			/* n_params values proposed for each trial */
} tpe_driver;

static int32_t
batch_size(const tpe_driver *t)
{
	return t->batch > 1 ? t->batch : 1;
}

/* May trial n be asked for (deterministic: its batch's turn has come)? */
static int
batch_ready(const tpe_driver *t, int32_t n)
{
	return t->told_prefix >= (n / batch_size(t)) * batch_size(t);
}

static mop_poll
tpe_next(mop_driver *d, mop_action *a)
{
	tpe_driver *t = (tpe_driver *) d;
	int32_t		n = t->n_trials;

	if (n < t->max_trials &&
		(d->replaying || (t->deterministic ? batch_ready(t, n) : t->running < d->n_workers)))
	{
		int32_t		n_obs = mop_tpe_n_complete(t->tpe);
		int32_t		id = mop_tpe_ask(t->tpe, t->values + (size_t) n * t->n_params);

		if (id < 0)
		{
			d->error = id;
			return MOP_POLL_DONE;
		}
		t->ids[n] = id;
		memset(a, 0, sizeof(*a));
		a->kind = MOP_ACT_NEW;
		a->trial = n;
		a->bracket = -1;
		a->resource = t->epochs;
		mop_decision_init(&a->d, MOP_WHY_START, n);
		a->d.from_resource = 0;
		a->d.to_resource = t->epochs;
		snprintf(a->d.reason, sizeof(a->d.reason), "%s after %d completed trials",
				 n_obs < t->n_startup ? "random startup proposal" :
				 "TPE proposal (best l/g of the candidates)", n_obs);
		t->n_trials++;
		t->running++;
		return MOP_POLL_ACTION;
	}
	return t->running > 0 ? MOP_POLL_WAIT : MOP_POLL_DONE;
}

/* Tell TPE trial i's score. */
static int
tell(tpe_driver *t, int32_t i)
{
	if (mop_tpe_tell(t->tpe, t->ids[i], t->score[i]) != 0)
		return MOP_SEARCH_ESTATE;
	t->told[i] = 1;
	while (t->told_prefix < t->n_trials && t->told[t->told_prefix])
		t->told_prefix++;
	return MOP_SEARCH_OK;
}

/* The score of trial `trial` arrived: tell TPE now, or when its batch is complete. */
static int
tpe_report(mop_driver *d, int32_t trial, int32_t resource, double score)
{
	tpe_driver *t = (tpe_driver *) d;

	if (trial < 0 || trial >= t->n_trials || t->done[trial])
		return MOP_SEARCH_ESTATE;	/* unknown, or reported twice */
	t->done[trial] = 1;
	t->score[trial] = score;
	t->running--;
	if (!t->deterministic)
		return tell(t, trial);
	for (;;)
	{
		int32_t		first = t->told_prefix,
					last = first + batch_size(t) < t->max_trials ?
			first + batch_size(t) : t->max_trials;

		if (first >= t->n_trials)
			return MOP_SEARCH_OK;
		for (int32_t i = first; i < last; i++)
			if (i >= t->n_trials || !t->done[i])
				return MOP_SEARCH_OK;	/* the batch is not complete yet */
		for (int32_t i = first; i < last; i++)
		{
			int			rc = tell(t, i);

			if (rc != MOP_SEARCH_OK)
				return rc;
		}
	}
}

static int
tpe_awaits(const mop_driver *d, int32_t trial)
{
	const tpe_driver *t = (const tpe_driver *) d;

	return trial >= 0 && trial < t->n_trials && !t->done[trial];
}

static const double *
tpe_proposal(const mop_driver *d, int32_t trial)
{
	const tpe_driver *t = (const tpe_driver *) d;

	if (trial < 0 || trial >= t->n_trials)
		return NULL;
	return t->values + (size_t) trial * t->n_params;
}

static void
tpe_free(mop_driver *d)
{
	tpe_driver *t = (tpe_driver *) d;

	mop_tpe_free(t->tpe);
	free(t->ids);
	free(t->told);
	free(t->done);
	free(t->score);
	free(t->values);
	free(t);
}

static const mop_driver_ops tpe_ops = {
	.next_action = tpe_next,
	.report_result = tpe_report,
	.awaits_result = tpe_awaits,
	.proposal = tpe_proposal,
	.free = tpe_free,
};

mop_driver *
mop_tpe_driver_new(const mop_param *space, int32_t n_params, const mop_tpe_opts *opts,
				   uint64_t seed, int32_t max_trials, int32_t epochs, int deterministic,
				   int32_t batch)
{
	tpe_driver *t;
	size_t		n = max_trials > 0 ? (size_t) max_trials : 1;

	if (max_trials < 0 || n_params < 0 || (t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	t->base.ops = &tpe_ops;
	t->base.report_reason = "result of the trial";
	t->n_params = n_params;
	t->max_trials = max_trials;
	t->epochs = epochs;
	t->n_startup = opts ? opts->n_startup : 10;
	t->deterministic = deterministic;
	t->batch = batch;
	t->tpe = mop_tpe_new(space, n_params, opts, seed);
	t->ids = calloc(n, sizeof(int32_t));
	t->told = calloc(n, 1);
	t->done = calloc(n, 1);
	t->score = calloc(n, sizeof(double));
	t->values = calloc(n * (size_t) (n_params > 0 ? n_params : 1), sizeof(double));
	if (t->tpe == NULL || t->ids == NULL || t->told == NULL || t->done == NULL ||
		t->score == NULL || t->values == NULL)
	{
		tpe_free(&t->base);
		return NULL;
	}
	return &t->base;
}
