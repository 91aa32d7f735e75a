/*
 * reclaim.c -- keeping a run's checkpoints from filling the disk.
 *
 * Every sub-epoch of a run commits the model's whole state (weights and
 * optimizer state, megabytes) as mop.models.state.  PostgreSQL never
 * overwrites a value: the UPDATE writes the new state as a new TOAST value
 * and the old one stays, dead, until VACUUM removes it; autovacuum looks at
 * a table about once a minute and is throttled, while a run can supersede
 * gigabytes a minute.  Two things are needed so that the dead states are
 * reclaimed while the run goes on:
 *
 * 1. Someone runs VACUUM on mop.models (and its TOAST table) during the
 *    run.  VACUUM cannot run inside a transaction or a function, but a
 *    background worker can run it between its transactions, as autovacuum
 *    does.  The run's coordinator does, between scheduling rounds, whenever
 *    the run has superseded a quarter of its states' bytes (and at least
 *    2 MB) since the last time, and once more when the run's workers have
 *    stopped.  Each VACUUM reads only the pages written
 *    since the last one (the rest are all-visible) and the TOAST index, so
 *    its cost follows the states written, however often it runs -- as
 *    long as it can remove them.  While something holds the horizon back
 *    (point 2), the dead states stay, their pages are read again by every
 *    VACUUM, and frequent VACUUMs would cost ever more: when a VACUUM
 *    leaves more dead TOAST chunks than a superseded state per model, the
 *    interval doubles (up to MAX_BACKOFF times), and it comes back to
 *    normal after a VACUUM that could remove them.  It
 *    does not truncate the table (that needs a lock every worker's read
 *    conflicts with): freed pages are reused by the next states, so the
 *    table's size stays at its high-water mark, about the run's live states
 *    plus a few superseded ones.  It skips the table if another VACUUM
 *    (another run's, autovacuum) holds it: that one does the job.  Only the
 *    table's owner may vacuum it, so the VACUUM runs as the owner of
 *    mop.models, in a security-restricted operation; it runs no code but
 *    VACUUM's own (the table has no triggers or expression indexes).
 *
 * 2. Nothing may hold back the horizon VACUUM removes dead rows behind.
 *    A dead state can be removed once no snapshot that could see it is left.
 *    The workers' snapshots live one sub-epoch.  But the session that waits
 *    for a run (mop_grid_search and friends with wait => true, mop_wait)
 *    sits in its statement for the whole run, and the statement's snapshot
 *    would hold every state the run supersedes.  mop never reads through
 *    that snapshot again (its results come from fresh snapshots), so while
 *    it waits the session withdraws its snapshot's xmin from the horizon
 *    (mop_wait_release_xmin).  What that costs, and what still holds the
 *    horizon back (a transaction id of the waiting session, other
 *    sessions' long transactions), is documented in docs/runs.md.
 */
#include "postgres.h"

#include <math.h>

#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "pgstat.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "mop.h"

/* superseded bytes worth a VACUUM, however few states they are */
#define MIN_RECLAIM_BYTES (2.0 * 1024 * 1024)

/* the interval grows at most this many times while VACUUM frees nothing */
#define MAX_BACKOFF 256

/* the coordinator's bookkeeping (one run per process) */
static int64 last_commits = 0;	/* sub-epochs committed at the last VACUUM */
static double state_bytes = -1;		/* mean size of the run's states, -1: unknown */
static int	backoff = 1;			/* the interval's multiplier */
static int64 dead_left = -1;		/* dead TOAST chunks the last VACUUM left */
static Oid	toast_relid = InvalidOid;	/* mop.models' TOAST table, once seen */

/*
 * VACUUM mop.models (with its TOAST table) now, as its owner, without
 * truncating and skipping it if another VACUUM holds it.  Must be called
 * outside a transaction, in a process that may (a background worker).
 * An error is logged, never thrown: reclaiming space must not fail a run.
 */
static void
vacuum_models(void)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext, "mop vacuum",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext save_portal = PortalContext;
	MemoryContext old = MemoryContextSwitchTo(cxt);
	Oid			save_userid;
	int			save_sec;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	PG_TRY();
	{
		Oid			nsp,
					relid = InvalidOid,
					owner = InvalidOid;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		nsp = get_namespace_oid("mop", true);
		if (OidIsValid(nsp))
			relid = get_relname_relid("models", nsp);
		if (OidIsValid(relid))
		{
			HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));

			if (HeapTupleIsValid(tup))
			{
				owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
				toast_relid = ((Form_pg_class) GETSTRUCT(tup))->reltoastrelid;
				ReleaseSysCache(tup);
			}
		}
		if (OidIsValid(owner))
		{
			VacuumStmt *stmt = makeNode(VacuumStmt);
			ParseState *pstate = make_parsestate(NULL);

			stmt->options = list_make2(makeDefElem("truncate", (Node *) makeString("false"), -1),
									   makeDefElem("skip_locked", (Node *) makeString("true"), -1));
			/* by OID, no RangeVar: a skipped table is skipped silently */
			stmt->rels = list_make1(makeVacuumRelation(NULL, relid, NIL));
			stmt->is_vacuumcmd = true;
			/*
			 * Unthrottled, whatever vacuum_cost_delay the role or database
			 * sets: the coordinator schedules nothing while it vacuums, and
			 * the pages it reads were just written (in shared buffers).
			 */
			SetConfigOption("vacuum_cost_delay", "0", PGC_SUSET, PGC_S_OVERRIDE);
			SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE |
								   SECURITY_RESTRICTED_OPERATION);
			PortalContext = cxt;	/* VACUUM keeps its cross-transaction memory there */
			ExecVacuum(pstate, stmt, true);
			PortalContext = save_portal;
			SetUserIdAndSecContext(save_userid, save_sec);
		}
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		PortalContext = save_portal;
		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		SetUserIdAndSecContext(save_userid, save_sec);
		ereport(LOG,
				(errcode(ed->sqlerrcode),
				 errmsg("mop could not vacuum mop.models: %s",
						ed->message ? ed->message : "unknown error"),
				 errdetail("The checkpoints the run superseded stay until a later VACUUM; the run goes on.")));
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * The dead tuples of mop.models' TOAST table that the last VACUUM could
 * not remove (its report to the statistics), -1 when unknown.
 */
static int64
toast_dead_tuples(void)
{
	int64		dead = -1;

	if (!OidIsValid(toast_relid))
		return -1;
	PG_TRY();
	{
		PgStat_StatTabEntry *e;

		StartTransactionCommand();
		pgstat_clear_snapshot();
		e = pgstat_fetch_stat_tabentry(toast_relid);
		if (e != NULL)
			dead = (int64) e->n_dead_tuples;
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		FlushErrorState();
		AbortCurrentTransaction();
		dead = -1;
	}
	PG_END_TRY();
	return dead;
}

/*
 * After a VACUUM: when it left more dead chunks than a superseded state per
 * model and more than the one before (something holds the horizon back),
 * the interval doubles; once a VACUUM removes them, it is back to normal.
 */
static void
adjust_backoff(int n_models)
{
	int64		dead = toast_dead_tuples();
	double		chunks = state_bytes > 0 ? state_bytes / TOAST_MAX_CHUNK_SIZE : 1;

	if (dead < 0)
		return;
	if (dead > (double) Max(n_models, 1) * chunks && dead > dead_left && dead_left >= 0)
	{
		if (backoff < MAX_BACKOFF)
			backoff *= 2;
		if (backoff == 2)
			ereport(LOG,
					(errmsg("mop: VACUUM could not remove the checkpoints this run superseded (%lld dead TOAST chunks left); it runs less often until it can",
							(long long) dead),
					 errhint("A transaction that stays open holds them: see pg_stat_activity's backend_xmin and backend_xid.")));
	}
	else if (dead <= (double) Max(n_models, 1) * chunks)
		backoff = 1;
	dead_left = dead;
}

/*
 * The mean size of the run's stored states (-1 when unknown), measured in
 * a transaction of its own: pg_column_size reads the TOAST pointer only.
 * The states of a model all have one size, so this changes only when a
 * run adds models (adaptive searches).
 */
static void
measure_states(int64 run_id)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(run_id);
	MemoryContext old = CurrentMemoryContext;

	state_bytes = -1;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (SPI_execute_with_args("SELECT pg_catalog.avg(pg_catalog.pg_column_size(m.state))::float8 "
								  "FROM mop.models m WHERE m.run_id OPERATOR(pg_catalog.=) $1",
								  1, &t, &v, NULL, true, 1) == SPI_OK_SELECT &&
			SPI_processed == 1)
		{
			bool		isnull;
			Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			if (!isnull)
				state_bytes = DatumGetFloat8(d);
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
}

/*
 * The coordinator, between scheduling rounds (outside a transaction):
 * VACUUM mop.models when the run has superseded, since the last VACUUM,
 * about a quarter of its states' bytes and at least MIN_RECLAIM_BYTES --
 * max(1, n_models / 4, MIN_RECLAIM_BYTES / state size) sub-epochs -- so
 * that storage stays within a small multiple of the live states, while
 * small models (whose states are small, or inline in the table, where page
 * pruning reclaims them) do not pay a VACUUM per sub-epoch.  commits: the
 * sub-epochs committed so far (those handed over supersede nothing);
 * force: now (the run's end, after its workers have stopped).
 */
void
mop_reclaim_checkpoints(int64 run_id, int64 commits, int n_models, bool force)
{
	TimestampTz t0;

	if (!force)
	{
		int64		every = Max(1, n_models / 4);

		if (commits == last_commits)
			return;
		if (state_bytes < 0)
			measure_states(run_id);
		if (state_bytes > 0)
			every = Max(every, (int64) ceil(MIN_RECLAIM_BYTES / state_bytes));
		if (commits - last_commits < every * backoff)
			return;
	}
	t0 = GetCurrentTimestamp();
	vacuum_models();
	last_commits = commits;
	elog(DEBUG1, "mop: vacuumed mop.models after %lld sub-epochs in %.1f ms",
		 (long long) commits, (double) (GetCurrentTimestamp() - t0) / 1000.0);
	if (!force)
	{
		measure_states(run_id);
		adjust_backoff(n_models);
	}
}

/*
 * A session that waits for a run (inside its statement, for as long as the
 * run trains) withdraws its snapshot's xmin from the horizon behind which
 * VACUUM may remove dead rows, so that the checkpoints the run supersedes
 * can be reclaimed while it runs.  Called in every round of the waiting
 * loops.
 *
 * The statement's snapshot stays registered; only its protection ends.
 * mop reads nothing through it after the wait (it reads the run's results
 * through fresh snapshots), and the catalog snapshot is dropped so that
 * catalog reads are fresh too.  What is given up is documented for users:
 * if the same statement (or an earlier cursor of the transaction) read a
 * table after the call, rows that other sessions changed and VACUUM
 * cleaned up meanwhile could be missing from what it sees.  A session
 * whose transaction has a transaction id (it wrote something before the
 * call) keeps everything: that id holds the horizon in any case, and it
 * must never be hidden.
 */
void
mop_wait_release_xmin(void)
{
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return;
	if (!TransactionIdIsValid(MyProc->xmin))
		return;
	InvalidateCatalogSnapshot();
	/* as SnapshotResetXmin does when the last snapshot goes */
	MyProc->xmin = InvalidTransactionId;
}
