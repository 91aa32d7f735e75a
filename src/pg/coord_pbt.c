/*
 * coord_pbt.c -- population based training (src/search/pbt.c) as the
 * run's driver (src/search/mop_driver.h).
 *
 * Every member trains from the start; at the end of each interval of
 * epochs PBT ranks it and may have it exploit a better member (copy its
 * latest checkpoint) and explore (perturb or resample its
 * hyperparameters).  An exploit writes the member's new checkpoint and
 * configuration, so this driver lives with the catalog code.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "coordinator.h"
#include "search/mop_pbt.h"

typedef struct PbtDriver
{
	mop_driver	base;
	mop_pbt    *pbt;
	bool	   *waiting;		/* deterministic: member is at the generation barrier */
	double	   *scores;			/* ... with this score */
} PbtDriver;

/*
 * PBT exploit and explore: member takes the latest committed checkpoint of
 * its parent -- weights and the whole optimizer state -- with the explored
 * hyperparameters; recorded in mop.decisions with its lineage.
 */
static void
exploit_in_tx(const mop_pbt_decision *d, int32 epochs)
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
	v[0] = Int64GetDatum(coord.models[d->parent].id);
	coord_exec_sql("SELECT state, epochs_done FROM mop.models WHERE id OPERATOR(pg_catalog.=) $1",
			 1, t, v, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "PBT parent model %lld is gone", (long long) coord.models[d->parent].id);
	h = mop_model_from_blob(DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 1, &isnull)),
							CurrentMemoryContext);
	parent_epochs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	config = mop_space_config(coord.space, d->values);
	mop_config_to_spec(config, coord.ds, &spec);
	if ((st = nn_model_set_hyper(h->model, &spec, &err)) != NN_OK)
		mop_nn_error(st, &err, "could not apply the explored hyperparameters");
	t[0] = INT8OID;
	v[0] = Int64GetDatum(coord.models[d->member].id);
	t[1] = BYTEAOID;
	v[1] = PointerGetDatum(mop_model_to_blob(h->model));
	t[2] = JSONBOID;
	v[2] = JsonbPGetDatum(config);
	mop_model_release(h);
	coord_exec_sql("UPDATE mop.models SET state = $2, config = $3, "
			 "updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1",
			 3, t, v, SPI_OK_UPDATE);
	{
		mop_decision dec;

		mop_decision_init(&dec, MOP_WHY_EXPLOIT, d->member);
		strlcpy(dec.reason, d->reason, sizeof(dec.reason));
		dec.rank = d->rank;
		dec.rung_size = d->n_ranked;
		dec.score = d->score;
		dec.cutoff = d->parent_score;
		dec.from_resource = epochs;
		coord_record_decision("exploit", mop_why_name(MOP_WHY_EXPLOIT), d->member, &dec,
							  parent_epochs, d->parent, config);
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
barrier(PbtDriver *p, mop_sched *s)
{
	mop_pbt_decision *out;
	int32		n_exploit,
				epochs = -1;
	bool		any = false;

	for (int32 m = 0; m < coord.n_models; m++)
		any |= p->waiting[m];
	if (!any || mop_sched_active(s) > 0)
		return;
	out = palloc(sizeof(mop_pbt_decision) * coord.n_models);
	for (int32 m = 0; m < coord.n_models; m++)
		if (!p->waiting[m])
			p->scores[m] = NAN;	/* stopped: ranks last */
	n_exploit = mop_pbt_step(p->pbt, p->scores, out, coord.n_models);
	if (n_exploit < 0)
		elog(ERROR, "run %lld: PBT could not rank its population (%d)",
			 (long long) coord.run->run_id, n_exploit);
	coord_begin_tx();
	for (int32 m = 0; m < coord.n_models; m++)
		if (p->waiting[m])
		{
			epochs = mop_sched_epochs_done(s, m);
			coord_record_report(m, epochs, p->scores[m], "result at the end of a generation");
		}
	for (int32 i = 0; i < n_exploit; i++)
		if (p->waiting[out[i].member])
			exploit_in_tx(&out[i], epochs);
	coord_commit_tx();
	for (int32 m = 0; m < coord.n_models; m++)
		if (p->waiting[m])
		{
			p->waiting[m] = false;
			mop_sched_set_epochs(s, m, coord.models[m].target);
		}
	pfree(out);
}

/*
 * PBT: member finished an interval with score.  Decide, and record the
 * result and any exploit in one transaction, so that a resumed run replays
 * exactly the decisions whose effects were committed.
 */
static void
interval_done(PbtDriver *p, int32 member, int32 epochs, double score)
{
	mop_pbt_decision d;
	int			r = mop_pbt_ready(p->pbt, member, score, &d);

	if (r < 0)
		elog(ERROR, "run %lld: PBT refused a result of member %d (%d)",
			 (long long) coord.run->run_id, member, r);
	coord_begin_tx();
	coord_record_report(member, epochs, score, "result at the end of an interval");
	if (r == 1)
		exploit_in_tx(&d, epochs);
	coord_commit_tx();
}

/*
 * Resume a PBT run: feed the recorded interval results ('report' rows) in
 * order into a fresh population built from the same seed; PBT's decisions
 * depend only on the seed and that sequence, so it makes the same exploits,
 * each checked against its recorded 'exploit' row, and then stands where
 * the interrupted run stood (members' values, ages, lineage).  A
 * deterministic run's reports come in generations (one transaction each,
 * all at the same epochs): each is ranked at once, as barrier() does, and
 * members that had reached the next barrier when the run stopped wait there
 * again with the score of their last epoch.
 *
 * Long because both modes check every recorded exploit against the one
 * PBT makes again, in the order they were recorded, and a mismatch
 * anywhere is one error (the "corrupt" exit).
 */
static void
replay_reports(PbtDriver *p, mop_sched *s)
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
	mop_pbt_decision *out = palloc(sizeof(mop_pbt_decision) * Max(coord.n_models, 1));

	coord_begin_tx();
	v[0] = Int64GetDatum(coord.run->run_id);
	coord_exec_sql("WITH m AS (SELECT id, pg_catalog.row_number() OVER (ORDER BY id) OPERATOR(pg_catalog.-) 1 AS idx "
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
		if (member[r] < 0 || member[r] >= coord.n_models)
			goto corrupt;
	}
	coord_commit_tx();

	for (int r = 0; r < n;)
	{
		int32		n_out;
		int			next;

		if (strcmp(action[r], "report") != 0)
			goto corrupt;
		if (coord.run->deterministic)
		{
			/* a generation: its reports, then its exploits */
			for (int32 m = 0; m < coord.n_models; m++)
			{
				p->scores[m] = NAN;
				p->waiting[m] = false;
			}
			for (next = r; next < n && strcmp(action[next], "report") == 0 &&
				 epochs[next] == epochs[r]; next++)
			{
				p->scores[member[next]] = score[next];
				p->waiting[member[next]] = true;
			}
			gen_epochs = epochs[r];
			n_out = mop_pbt_step(p->pbt, p->scores, out, coord.n_models);
			if (n_out < 0)
				goto corrupt;
			for (int32 i = 0; i < n_out; i++)
			{
				if (!p->waiting[out[i].member])
					continue;	/* a stopped member: never applied */
				if (next >= n || strcmp(action[next], "exploit") != 0 ||
					member[next] != out[i].member || parent[next] != out[i].parent)
					goto corrupt;
				next++;
			}
		}
		else
		{
			int			rc = mop_pbt_ready(p->pbt, member[r], score[r], out);

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
	if (coord.run->deterministic)
	{
		coord_begin_tx();
		for (int32 m = 0; m < coord.n_models; m++)
			p->waiting[m] = false;
		for (int32 m = 0; m < coord.n_models; m++)
		{
			int32		done = mop_sched_epochs_done(s, m);

			if (mop_sched_remaining(s, m) == 0 || done == gen_epochs ||
				done % coord.run->pbt_interval != 0)
				continue;
			if (done != gen_epochs + coord.run->pbt_interval)
				goto corrupt;
			v[0] = Int64GetDatum(coord.models[m].id);
			coord_exec_sql("SELECT e.valid_metric FROM mop.epochs e, mop.models m "
					 "WHERE m.id OPERATOR(pg_catalog.=) $1 AND e.model_id OPERATOR(pg_catalog.=) m.id "
					 "AND e.epoch OPERATOR(pg_catalog.=) m.epochs_done", 1, t, v, SPI_OK_SELECT);
			{
				Datum		d = SPI_processed == 1 ?
					SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull) : (Datum) 0;

				p->scores[m] = SPI_processed == 1 && !isnull ? coord_score(DatumGetFloat8(d)) : NAN;
			}
			p->waiting[m] = true;
			mop_sched_set_epochs(s, m, done);
		}
		coord_commit_tx();
	}
	pfree(out);
	return;

corrupt:
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("the recorded decisions of run %lld do not replay", (long long) coord.run->run_id),
			 errdetail("Its PBT results and exploits in mop.decisions do not follow from its seed.")));
}


/* A member finished an epoch: at the end of an interval, PBT decides. */
static void
pbt_epoch_done(mop_driver *d, mop_sched *s, int32_t trial, int32_t epochs, double score,
			   int target_done)
{
	PbtDriver  *p = (PbtDriver *) d;

	if (target_done || epochs % coord.run->pbt_interval != 0)
		return;
	if (coord.run->deterministic)
	{
		/* wait at the generation barrier */
		p->waiting[trial] = true;
		p->scores[trial] = score;
		mop_sched_set_epochs(s, trial, epochs);
		barrier(p, s);
	}
	else
		interval_done(p, trial, epochs, score);
}

/* A member failed: it may have been the last one the barrier awaited. */
static void
pbt_task_failed(mop_driver *d, mop_sched *s, int32_t trial)
{
	if (coord.run->deterministic)
		barrier((PbtDriver *) d, s);
}

static void
pbt_replay(mop_driver *d, mop_sched *s)
{
	replay_reports((PbtDriver *) d, s);
	if (coord.run->deterministic)
		barrier((PbtDriver *) d, s);
}

static void
pbt_free(mop_driver *d)
{
	mop_pbt_free(((PbtDriver *) d)->pbt);
	pfree(d);
}

static const mop_driver_ops pbt_ops = {
	.epoch_done = pbt_epoch_done,
	.task_failed = pbt_task_failed,
	.replay = pbt_replay,
	.free = pbt_free,
};

/* The run's population, over coord.space. */
mop_driver *
coord_pbt_driver_new(void)
{
	MopRunShared *run = coord.run;
	mop_pbt_opts o = {run->pbt_quantile, run->pbt_resample, 0.8, 1.2};
	PbtDriver  *p = MemoryContextAllocZero(TopMemoryContext, sizeof(PbtDriver));

	p->base.ops = &pbt_ops;
	if ((p->pbt = mop_pbt_new(coord.space->params, coord.space->n_params, run->n_configs,
							  &o, (uint64) run->seed)) == NULL)
		elog(ERROR, "could not create the PBT population");
	p->waiting = MemoryContextAllocZero(TopMemoryContext, sizeof(bool) * Max(run->n_configs, 1));
	p->scores = MemoryContextAllocZero(TopMemoryContext, sizeof(double) * Max(run->n_configs, 1));
	return &p->base;
}
