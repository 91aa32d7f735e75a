/*
 * orphans.c -- runs whose processes are gone become 'interrupted'.
 *
 * A run lives in background workers and its shared segment; when the server
 * crashes or restarts they are gone and its row still says 'running'.  Its
 * row and the models it was training become 'interrupted', with a NOTICE
 * each, so that mop_resume continues it (recovery.c does so by itself when
 * mop is preloaded).
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "runreq.h"

/* The NOTICE a run marked 'interrupted' gets. */
static void
interrupted_notice(int64 run_id)
{
	ereport(NOTICE,
			(errmsg("mop run %lld was interrupted by a server restart", (long long) run_id),
			 errdetail("Its committed checkpoints are kept; no process trains it any more."),
			 errhint("mop_resume(%lld) continues it.", (long long) run_id)));
}

/*
 * Runs the caller may see that say 'running' with no process behind them
 * (their shared segment is gone), run `except` aside: for each, its id and
 * the stale handle (-1: none), as int64[2].
 */
static List *
find_orphans(int64 except)
{
	List	   *orphans = NIL;
	MemoryContext outer = CurrentMemoryContext;
	int64	   *ids,
			   *handles;
	bool	   *has;
	int			n;

	SPI_connect();
	/* mop_train's own run row lives and dies with its caller's transaction */
	if (SPI_execute("SELECT id, shm_handle FROM mop.runs WHERE status OPERATOR(pg_catalog.=) 'running' "
					"AND kind OPERATOR(pg_catalog.<>) 'train' ORDER BY id", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.runs");
	n = mop_run_handles(CurrentMemoryContext, &ids, &handles, &has);
	for (int i = 0; i < n; i++)
	{
		dsm_segment *seg;

		if (ids[i] == except)
			continue;
		seg = has[i] ? mop_run_attach(ids[i], handles[i]) : NULL;
		if (seg != NULL)
		{
			dsm_detach(seg);
			continue;			/* alive */
		}
		{
			MemoryContext old = MemoryContextSwitchTo(outer);
			int64	   *o = palloc(sizeof(int64) * 2);

			o[0] = ids[i];
			o[1] = has[i] ? handles[i] : -1;
			orphans = lappend(orphans, o);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	return orphans;
}

/* Mark the orphans (find_orphans) 'interrupted' in this transaction; their ids. */
static List *
mark_orphans_here(int64 except)
{
	List	   *marked = NIL;
	List	   *orphans = find_orphans(except);
	ListCell   *lc;
	MemoryContext outer = CurrentMemoryContext;

	if (orphans == NIL)
		return NIL;
	SPI_connect();
	foreach(lc, orphans)
	{
		int64	   *o = (int64 *) lfirst(lc);
		Oid			t[2] = {INT8OID, INT8OID};
		Datum		v[2] = {Int64GetDatum(o[0]), Int64GetDatum(o[1])};
		char		nulls[2] = {' ', o[1] < 0 ? 'n' : ' '};

		/*
		 * A row someone else holds (a transaction of the caller that a mark
		 * worker would wait for, a resume in progress) is left to them.
		 */
		if (SPI_execute_with_args("SELECT 1 FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1 "
								  "AND status OPERATOR(pg_catalog.=) 'running' "
								  "AND shm_handle IS NOT DISTINCT FROM $2 FOR UPDATE SKIP LOCKED",
								  2, t, v, nulls, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not lock mop.runs");
		if (SPI_processed != 1)
			continue;
		/* still orphaned: not resumed (a new handle) or finished meanwhile */
		if (SPI_execute_with_args("UPDATE mop.runs SET status = 'interrupted', shm_handle = NULL, "
								  "error = 'the server restarted or crashed while the run was training' "
								  "WHERE id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'running' "
								  "AND shm_handle IS NOT DISTINCT FROM $2",
								  2, t, v, nulls, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update mop.runs");
		if (SPI_processed != 1)
			continue;
		SPI_execute_with_args("UPDATE mop.models SET status = 'interrupted', "
							  "updated_at = pg_catalog.clock_timestamp() "
							  "WHERE run_id OPERATOR(pg_catalog.=) $1 AND status OPERATOR(pg_catalog.=) 'training'",
							  1, t, v, NULL, false, 0);
		{
			MemoryContext old = MemoryContextSwitchTo(outer);

			marked = lappend(marked, lfirst(lc));
			MemoryContextSwitchTo(old);
		}
		interrupted_notice(*(int64 *) lfirst(lc));
	}
	SPI_finish();
	return marked;
}

/*
 * Runs that say 'running' but have no process behind them (the server
 * crashed or restarted under them: their shared segment is gone) become
 * 'interrupted', and their models that were training too; mop_resume
 * continues them.  Called at the start of mop's run functions and by the
 * progress view, so the first of them after a restart tells the truth, and
 * by the startup recovery of a preloaded mop, which then resumes them.
 * Sees what the caller may see (row-level security).  Returns the run ids
 * it marked (in CurrentMemoryContext).  Does nothing in a read-only
 * transaction.
 */
List *
mop_mark_interrupted(void)
{
	return mop_mark_interrupted_except(0);
}

/*
 * The same, leaving run `except` alone: the run that mop_resume is about to
 * hand to a coordinator.  Marked here, its row would stay locked by the
 * caller's open transaction, and the coordinator, which must update that
 * row before the caller's wait for it can end, would wait for the caller
 * forever (a cycle through a latch, which the deadlock detector cannot
 * see).  The coordinator sets the run 'running' itself.
 */
List *
mop_mark_interrupted_except(int64 except)
{
	List	   *marked = NIL;
	List	   *orphans;
	ListCell   *lc;
	MemoryContext outer = CurrentMemoryContext;

	if (XactReadOnly || RecoveryInProgress())
		return NIL;
	orphans = find_orphans(except);
	if (orphans == NIL)
		return NIL;

	/*
	 * Marked in this transaction, their rows would stay locked until it
	 * ends -- for the whole of a blocking search or mop_wait, while someone
	 * else's mop_resume or mop_cancel of them waits.  So a worker marks them
	 * in a transaction of its own, as this role; this statement sees its
	 * commit (READ COMMITTED).  What it could not mark is marked here.
	 */
	if (!IsBackgroundWorker && !IsolationUsesXactSnapshot() &&
		mop_mark_in_worker(MyDatabaseId, GetUserId(), except))
	{
		SPI_connect();
		foreach(lc, orphans)
		{
			Oid			t = INT8OID;
			Datum		v = Int64GetDatum(*(int64 *) lfirst(lc));

			/* (not read-only: a fresh snapshot, which sees the worker's commit) */
			if (SPI_execute_with_args("SELECT 1 FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1 "
									  "AND status OPERATOR(pg_catalog.=) 'interrupted'",
									  1, &t, &v, NULL, false, 1) == SPI_OK_SELECT && SPI_processed == 1)
			{
				MemoryContext old = MemoryContextSwitchTo(outer);

				marked = lappend(marked, lfirst(lc));
				MemoryContextSwitchTo(old);
				interrupted_notice(*(int64 *) lfirst(lc));
			}
		}
		SPI_finish();
	}
	return list_concat(marked, mark_orphans_here(except));
}
