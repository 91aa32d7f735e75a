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
 *    does.  The run's coordinator does, between scheduling rounds, after
 *    every max(1, models / 4) finished sub-epochs, and once more when the
 *    run's workers have stopped.  Each VACUUM reads only the pages written
 *    since the last one (the rest are all-visible) and the TOAST index, so
 *    its cost follows the states written, however often it runs.  It
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

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "mop.h"

/* the coordinator's bookkeeping (one run per process) */
static int64 last_hops = 0;			/* sub-epochs done at the last VACUUM */

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
		elog(LOG, "mop: could not vacuum mop.models: %s",
			 ed->message ? ed->message : "unknown error");
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * The coordinator, between scheduling rounds (outside a transaction):
 * VACUUM mop.models if the run has finished max(1, n_models / 4)
 * sub-epochs since the last time, so that at most about a quarter of the
 * run's states (or one) is written between two VACUUMs.  force: now,
 * whatever the count (the run's end, after its workers have stopped).
 */
void
mop_reclaim_checkpoints(int64 hops_done, int n_models, bool force)
{
	TimestampTz t0;

	if (!force)
	{
		int64		every = Max(1, n_models / 4);

		if (hops_done - last_hops < every)
			return;
	}
	t0 = GetCurrentTimestamp();
	vacuum_models();
	last_hops = hops_done;
	elog(DEBUG1, "mop: vacuumed mop.models after %lld sub-epochs in %.1f ms",
		 (long long) hops_done, (double) (GetCurrentTimestamp() - t0) / 1000.0);
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
