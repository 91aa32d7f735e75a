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
 * Member takes the latest committed checkpoint of parent -- weights and the
 * whole optimizer state -- with the hyperparameters of config, inside the
 * caller's transaction.  Sets the epochs the parent had completed and the
 * sub-epochs its checkpoint had trained (its committed mop.hops, read in
 * the same snapshot as the checkpoint).
 */
static void
copy_checkpoint(int32 member, int32 parent, Jsonb *config, int32 *parent_epochs,
				int32 *parent_subepochs)
{
	Oid			t[3];
	Datum		v[3];
	bool		isnull;
	ModelHandle *h;
	nn_spec		spec;
	nn_error	err;
	nn_status	st;

	t[0] = INT8OID;
	v[0] = Int64GetDatum(coord.models[parent].id);
	coord_exec_sql("SELECT m.state, m.epochs_done, "
				   "(SELECT pg_catalog.count(*) FROM mop.hops h "
				   " WHERE h.model_id OPERATOR(pg_catalog.=) m.id)::int "
				   "FROM mop.models m WHERE m.id OPERATOR(pg_catalog.=) $1",
				   1, t, v, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "PBT parent model %lld is gone", (long long) coord.models[parent].id);
	h = mop_model_from_blob(DatumGetByteaPCopy(SPI_getbinval(SPI_tuptable->vals[0],
															 SPI_tuptable->tupdesc, 1, &isnull)),
							CurrentMemoryContext);
	*parent_epochs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	*parent_subepochs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	mop_config_to_spec(config, coord.ds, coord.run->opts.epochs, &spec);
	if ((st = nn_model_set_hyper(h->model, &spec, &err)) != NN_OK)
		mop_nn_error(st, &err, "could not apply the explored hyperparameters");
	t[0] = INT8OID;
	v[0] = Int64GetDatum(coord.models[member].id);
	t[1] = BYTEAOID;
	v[1] = PointerGetDatum(mop_model_to_blob(h->model));
	t[2] = JSONBOID;
	v[2] = JsonbPGetDatum(config);
	mop_model_release(h);
	/*
	 * The member's best checkpoint was of weights it no longer has, trained
	 * with a configuration it no longer has: its best starts afresh from the
	 * copied checkpoint's next validation (a 0.1 catalog keeps no best
	 * checkpoint).
	 */
	coord_exec_sql(mop_catalog_is_02() ?
				   "UPDATE mop.models SET state = $2, config = $3, best_state = NULL, "
				   "best_valid_metric = NULL, best_valid_loss = NULL, best_epoch = NULL, "
				   "updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1" :
				   "UPDATE mop.models SET state = $2, config = $3, "
				   "updated_at = pg_catalog.clock_timestamp() WHERE id OPERATOR(pg_catalog.=) $1",
				   3, t, v, SPI_OK_UPDATE);
	/* a state handed over is not the member's any more (mop.checkpoint_every) */
	coord_model_handed(member, InvalidDsaPointer);
}

/*
 * PBT exploit and explore: member takes the latest committed checkpoint of
 * its parent with the explored hyperparameters; recorded in mop.decisions
 * with its lineage and the parent checkpoint's sub-epochs (where mop_replay
 * copies it again).
 */
static void
exploit_in_tx(const mop_pbt_decision *d, int32 epochs)
{
	Jsonb	   *config = mop_space_config(coord.space, d->values);
	int32		parent_epochs,
				parent_subepochs;
	mop_decision dec;

	copy_checkpoint(d->member, d->parent, config, &parent_epochs, &parent_subepochs);
	/* its patience starts afresh with its new weights (reloaded after the exploit) */
	coord.models[d->member].patience_known = false;
	mop_decision_init(&dec, MOP_WHY_EXPLOIT, d->member);
	strlcpy(dec.reason, d->reason, sizeof(dec.reason));
	dec.rank = d->rank;
	dec.rung_size = d->n_ranked;
	dec.score = d->score;
	dec.cutoff = d->parent_score;
	dec.from_resource = epochs;
	coord_record_exploit(d->member, &dec, d->parent, parent_epochs, parent_subepochs, config);
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
		if (coord.run->opts.deterministic)
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
	if (coord.run->opts.deterministic)
	{
		coord_begin_tx();
		for (int32 m = 0; m < coord.n_models; m++)
			p->waiting[m] = false;
		for (int32 m = 0; m < coord.n_models; m++)
		{
			int32		done = mop_sched_epochs_done(s, m);

			if (mop_sched_remaining(s, m) == 0 || done == gen_epochs ||
				done % coord.run->opts.pbt_interval != 0)
				continue;
			if (done != gen_epochs + coord.run->opts.pbt_interval)
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


/*
 * Replaying a PBT run (mop_replay): every member follows its recorded
 * sub-epochs (coord_load_sequences), and each recorded exploit is made
 * again when both its member and its parent have trained exactly the
 * sub-epochs they had when it was made -- the member holds there, and so
 * does the parent, so that its checkpoint is the one that was copied.  The
 * exploits are made in their recorded order (one after another, as the run
 * made them: a parent may have exploited at the same point just before), so
 * every hold can be reached.  Each is recorded in the replay's mop.decisions
 * too, with the starting configurations, so the replay has the same lineage
 * and a resumed replay knows how many it has made.
 */
typedef struct ReplayExploit
{
	int32		member,
				parent;
	int64		member_at,		/* sub-epochs each had trained when it was made */
				parent_at;
	Jsonb	   *config;			/* the explored configuration */
	mop_decision d;				/* its numbers, recorded again */
} ReplayExploit;

static ReplayExploit *replay_x;
static int	replay_n,
			replay_next;

static void not_replayable(int e, const char *detail) pg_attribute_noreturn();

/* ERROR: exploit e (0-based) of the replayed run cannot be made again, because detail. */
static void
not_replayable(int e, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("the recorded exploits of run %lld do not replay",
					(long long) coord.run->opts.replay_of),
			 errdetail_internal("Exploit %d of %d: %s.", e + 1, replay_n, detail),
			 errhint("A replay follows the run's mop.hops and mop.decisions as the run recorded them.")));
}

/* Hold each model at the point of its next exploit, as member or parent. */
static void
replay_hold(mop_sched *s)
{
	for (int32 m = 0; m < coord.n_models; m++)
	{
		int64		at = -1;

		for (int e = replay_next; e < replay_n && at < 0; e++)
			if (replay_x[e].member == m)
				at = replay_x[e].member_at;
			else if (replay_x[e].parent == m)
				at = replay_x[e].parent_at;
		mop_sched_hold(s, m, at);
	}
}

/*
 * Load the recorded exploits of the run being replayed (none: not a PBT
 * run), skip those this replay has made already (a resumed replay), record
 * the members' starting configurations once, and hold the models.
 */
void
coord_pbt_replay_load(mop_sched *s)
{
	Oid			t[2] = {INT8OID, INT8OID};
	Datum		v[2];
	bool		isnull;
	int			fired;
	MopRunOptions recorded;

	if (replay_x)
		pfree(replay_x);
	replay_x = NULL;
	replay_n = replay_next = 0;
	v[0] = Int64GetDatum(coord.run->opts.replay_of);
	v[1] = Int64GetDatum(coord.run->run_id);
	coord_begin_tx();
	/* (a 0.1 catalog has no parent_subepochs: only deterministic runs replay there) */
	coord_exec_sql(psprintf("WITH m AS (SELECT id, pg_catalog.row_number() OVER (ORDER BY id) OPERATOR(pg_catalog.-) 1 AS idx "
							"FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $1) "
							"SELECT m.idx, pm.idx, d.from_resource, d.to_resource, %s, "
							"d.hyperparameters, d.reason, d.rank, d.rung_size, d.score, d.cutoff, "
							"r.options "
							"FROM mop.decisions d JOIN m ON m.id OPERATOR(pg_catalog.=) d.model_id "
							"JOIN m pm ON pm.id OPERATOR(pg_catalog.=) d.parent_model_id "
							"JOIN mop.runs r ON r.id OPERATOR(pg_catalog.=) d.run_id "
							"WHERE d.run_id OPERATOR(pg_catalog.=) $1 "
							"AND d.action OPERATOR(pg_catalog.=) 'exploit' ORDER BY d.id",
							mop_catalog_is_02() ? "d.parent_subepochs" : "NULL::int"),
				   1, t, v, SPI_OK_SELECT);
	replay_n = (int) SPI_processed;
	replay_x = MemoryContextAllocZero(TopMemoryContext, sizeof(ReplayExploit) * Max(replay_n, 1));
	if (replay_n > 0)
	{
		/* the options of the run being replayed (every row has its run's) */
		Datum		o = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 12, &isnull);

		mop_run_options_parse(isnull ? NULL : DatumGetJsonbP(o), &recorded);
	}
	for (int e = 0; e < replay_n; e++)
	{
		HeapTuple	tup = SPI_tuptable->vals[e];
		TupleDesc	td = SPI_tuptable->tupdesc;
		ReplayExploit *x = &replay_x[e];
		Datum		d;

		x->member = (int32) DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
		x->parent = (int32) DatumGetInt64(SPI_getbinval(tup, td, 2, &isnull));
		if (x->member < 0 || x->member >= coord.n_models || x->parent < 0 || x->parent >= coord.n_models)
			not_replayable(e, "its member or parent is not a model of the run");
		mop_decision_init(&x->d, MOP_WHY_EXPLOIT, x->member);
		d = SPI_getbinval(tup, td, 3, &isnull);
		x->d.from_resource = isnull ? -1 : DatumGetInt32(d);
		x->member_at = (int64) Max(x->d.from_resource, 0) * coord.n_partitions;
		d = SPI_getbinval(tup, td, 5, &isnull);
		if (!isnull)
			x->parent_at = DatumGetInt32(d);
		else if (recorded.deterministic)
		{
			/* recorded without it: a deterministic run's parents wait at the barrier */
			d = SPI_getbinval(tup, td, 4, &isnull);
			x->parent_at = isnull ? -1 : (int64) DatumGetInt32(d) * coord.n_partitions;
		}
		else
			x->parent_at = -1;
		if (x->d.from_resource < 0 || x->parent_at < 0)
			not_replayable(e, "the sub-epochs of its member or of its parent's checkpoint were not recorded");
		d = SPI_getbinval(tup, td, 6, &isnull);
		if (isnull)
			not_replayable(e, "its configuration was not recorded");
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			x->config = DatumGetJsonbPCopy(d);
			MemoryContextSwitchTo(old);
		}
		strlcpy(x->d.reason, TextDatumGetCString(SPI_getbinval(tup, td, 7, &isnull)), sizeof(x->d.reason));
		d = SPI_getbinval(tup, td, 8, &isnull);
		x->d.rank = isnull ? -1 : DatumGetInt32(d);
		d = SPI_getbinval(tup, td, 9, &isnull);
		x->d.rung_size = isnull ? -1 : DatumGetInt32(d);
		d = SPI_getbinval(tup, td, 10, &isnull);
		x->d.score = isnull ? NAN : DatumGetFloat8(d);
		d = SPI_getbinval(tup, td, 11, &isnull);
		x->d.cutoff = isnull ? NAN : DatumGetFloat8(d);
	}
	if (replay_n > 0)
	{
		coord_exec_sql("SELECT pg_catalog.count(*)::int FROM mop.decisions "
					   "WHERE run_id OPERATOR(pg_catalog.=) $1 AND action OPERATOR(pg_catalog.=) 'exploit'",
					   1, &t[1], &v[1], SPI_OK_SELECT);
		fired = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		if (fired > replay_n)
			not_replayable(replay_n - 1, "the replay has made more exploits than the run recorded");
		replay_next = fired;
		/* the members' starting configurations open the replay's lineage, once */
		coord_exec_sql("WITH o AS (SELECT id, pg_catalog.row_number() OVER (ORDER BY id) AS rn "
					   "FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $1), "
					   "n AS (SELECT id, pg_catalog.row_number() OVER (ORDER BY id) AS rn "
					   "FROM mop.models WHERE run_id OPERATOR(pg_catalog.=) $2) "
					   "INSERT INTO mop.decisions (run_id, model_id, action, why, reason, from_resource, "
					   "to_resource, hyperparameters) "
					   "SELECT $2, n.id, d.action, d.why, d.reason, d.from_resource, d.to_resource, d.hyperparameters "
					   "FROM mop.decisions d JOIN o ON o.id OPERATOR(pg_catalog.=) d.model_id "
					   "JOIN n ON n.rn OPERATOR(pg_catalog.=) o.rn "
					   "WHERE d.run_id OPERATOR(pg_catalog.=) $1 AND d.action OPERATOR(pg_catalog.=) 'new' "
					   "AND d.hyperparameters IS NOT NULL "
					   "AND NOT EXISTS (SELECT 1 FROM mop.decisions x WHERE x.run_id OPERATOR(pg_catalog.=) $2 "
					   "AND x.action OPERATOR(pg_catalog.=) 'new') ORDER BY d.id",
					   2, t, v, SPI_OK_INSERT);
	}
	coord_commit_tx();
	replay_hold(s);
}

/*
 * Replaying a PBT run: make the next recorded exploits whose member and
 * parent both stand where they stood when it was made; ERROR if one can
 * never be made (a model went past its point, or nothing can train).
 */
void
coord_pbt_replay_exploits(mop_sched *s)
{
	while (replay_next < replay_n)
	{
		ReplayExploit *x = &replay_x[replay_next];
		int64		member_at = mop_sched_position(s, x->member),
					parent_at = mop_sched_position(s, x->parent);
		int32		parent_epochs,
					parent_subepochs;

		if (member_at > x->member_at || parent_at > x->parent_at)
			not_replayable(replay_next, psprintf("member %d or its parent %d (in id order) trained past the point where it was made",
											x->member + 1, x->parent + 1));
		if (member_at < x->member_at || parent_at < x->parent_at ||
			mop_sched_busy(s, x->member) || mop_sched_busy(s, x->parent))
			break;
		coord_begin_tx();
		copy_checkpoint(x->member, x->parent, x->config, &parent_epochs, &parent_subepochs);
		if (parent_subepochs != x->parent_at)
			not_replayable(replay_next, psprintf("the parent's checkpoint has %d committed sub-epochs, the recorded one " INT64_FORMAT,
											parent_subepochs, x->parent_at));
		coord_record_exploit(x->member, &x->d, x->parent, parent_epochs, parent_subepochs, x->config);
		coord_commit_tx();
		replay_next++;
		replay_hold(s);
	}
	if (replay_next < replay_n && mop_sched_active(s) == 0)
		not_replayable(replay_next, "its member or its parent cannot train to the point where it was made");
}

/* A member finished an epoch: at the end of an interval, PBT decides. */
static void
pbt_epoch_done(mop_driver *d, mop_sched *s, int32_t trial, int32_t epochs, double score,
			   int target_done)
{
	PbtDriver  *p = (PbtDriver *) d;

	if (target_done || epochs % coord.run->opts.pbt_interval != 0)
		return;
	if (coord.run->opts.deterministic)
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
	if (coord.run->opts.deterministic)
		barrier((PbtDriver *) d, s);
}

static void
pbt_replay(mop_driver *d, mop_sched *s)
{
	replay_reports((PbtDriver *) d, s);
	if (coord.run->opts.deterministic)
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
	mop_pbt_opts o = {run->opts.pbt_quantile, run->opts.pbt_resample, 0.8, 1.2};
	PbtDriver  *p = MemoryContextAllocZero(TopMemoryContext, sizeof(PbtDriver));

	p->base.ops = &pbt_ops;
	if ((p->pbt = mop_pbt_new(coord.space->params, coord.space->n_params, run->n_configs,
							  &o, (uint64) run->opts.seed)) == NULL)
		elog(ERROR, "could not create the PBT population");
	p->waiting = MemoryContextAllocZero(TopMemoryContext, sizeof(bool) * Max(run->n_configs, 1));
	p->scores = MemoryContextAllocZero(TopMemoryContext, sizeof(double) * Max(run->n_configs, 1));
	return &p->base;
}
