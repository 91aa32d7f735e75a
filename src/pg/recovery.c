/*
 * recovery.c -- runs heal themselves after a crash or restart.
 *
 * A run lives in background workers; when the server crashes or restarts
 * they are gone, and its row still says 'running'.  mop_mark_interrupted
 * (orphans.c) turns such runs into 'interrupted' whenever one of mop's run
 * functions or its progress view is used.  With mop in
 * shared_preload_libraries, this file also resumes them without a human,
 * as pg_cron's launcher starts its jobs:
 *
 *   the launcher   a background worker started with the server (and again
 *                  after every crash restart, since it lives until shutdown):
 *                  once recovery has finished it starts one recovery worker
 *                  per database that accepts connections, one at a time,
 *                  then sleeps until the server stops, waking every five
 *                  minutes to write the list of the server's buffer
 *                  cache's entries (prewarm.c), and once more at shutdown;
 *   a recovery     connects to its database as the bootstrap superuser, does
 *   worker         nothing if mop is not installed there, marks the runs
 *                  that lost their processes 'interrupted', and, with
 *                  mop.auto_resume on, resumes each of them (one after the
 *                  other) through a resume worker;
 *   a prewarm      started by the launcher once every recovery worker has
 *   worker         ended, one per database the server's buffer cache's
 *                  list names (mop.prewarm_buffer_cache): loads the cache
 *                  with the buffers of its mop.buffers it held before the
 *                  restart (prewarm.c);
 *   a resume       connects as the run's owner -- never as a superuser on a
 *   worker         user's behalf -- and calls mop_resume(run, wait => false)
 *                  as that role would, so the run goes on with the owner's
 *                  rights and row-level security.  A role that can no longer
 *                  log in leaves its run 'interrupted' (the server log says
 *                  why), for its owner or a superuser to resume or cancel.
 *
 * Every SQL text here is schema-qualified and the workers pin search_path,
 * as the run's own workers do.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "handover.h"
#include "mop.h"
#include "run.h"

PGDLLEXPORT void mop_launcher_main(Datum arg);
PGDLLEXPORT void mop_recovery_main(Datum arg);
PGDLLEXPORT void mop_resume_worker_main(Datum arg);
PGDLLEXPORT void mop_mark_worker_main(Datum arg);
PGDLLEXPORT void mop_prewarm_main(Datum arg);

/* how often the launcher writes the server's cache's list when it changed */
#define PREWARM_LIST_EVERY_MS	(300 * 1000L)

/* What a resume worker needs: where, as whom, which run. */
typedef struct ResumeArgs
{
	Oid			database;
	Oid			role;
	int64		run_id;
} ResumeArgs;

/* Register the launcher (only while preloading). */
void
mop_recovery_register_launcher(void)
{
	BackgroundWorker bgw;

	if (!process_shared_preload_libraries_in_progress)
		return;
	mop_bgworker_init(&bgw, "mop_launcher_main", "mop launcher");
	bgw.bgw_restart_time = 10;	/* and after each crash restart */
	RegisterBackgroundWorker(&bgw);
}

/*
 * In a recovery, resume or mark worker: take SIGTERM, connect to database
 * db (as role, or the bootstrap superuser for InvalidOid) with search_path
 * pinned, and show appname in pg_stat_activity.
 */
static void
worker_connect(Oid db, Oid role, const char *appname)
{
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(db, role, 0);
	mop_pin_search_path();
	pgstat_report_appname(appname);
}

/* Start a dynamic worker and wait until it has exited; false if it could not start. */
static bool
run_worker_to_end(BackgroundWorker *bgw)
{
	BackgroundWorkerHandle *h;
	pid_t		pid;

	bgw->bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(bgw, &h))
		return false;
	if (WaitForBackgroundWorkerStartup(h, &pid) != BGWH_STARTED)
		return false;
	(void) WaitForBackgroundWorkerShutdown(h);
	return true;
}

/* Run a worker of function in database db to its end; false if it could not start. */
static bool
run_database_worker(const char *function, const char *type, Oid db)
{
	BackgroundWorker bgw;

	mop_bgworker_init(&bgw, function, type);
	bgw.bgw_main_arg = ObjectIdGetDatum(db);
	return run_worker_to_end(&bgw);
}

/*
 * The launcher: one recovery worker per database, then sleep until
 * shutdown (so that a crash restart, which kills every worker, starts it
 * again and it looks again).
 */
void
mop_launcher_main(Datum arg)
{
	List	   *dbs = NIL;
	ListCell   *lc;
	bool		prewarm_ended;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	/* no database: the launcher holds none (it must not stop DROP DATABASE) */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("mop launcher");

	/* the databases that accept connections, from the shared catalog (as autovacuum lists them) */
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	{
		Relation	rel = table_open(DatabaseRelationId, AccessShareLock);
		TableScanDesc scan = table_beginscan_catalog(rel, 0, NULL);
		HeapTuple	tup;

		while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
		{
			Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

			if (db->datallowconn && !db->datistemplate)
			{
				MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

				dbs = lappend_oid(dbs, db->oid);
				MemoryContextSwitchTo(old);
			}
		}
		table_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	CommitTransactionCommand();

	foreach(lc, dbs)
	{
		if (ShutdownRequestPending)
			break;
		if (!run_database_worker("mop_recovery_main", "mop recovery", lfirst_oid(lc)))
			ereport(LOG,
					(errmsg("mop launcher could not start a recovery worker for database %u",
							lfirst_oid(lc)),
					 errhint("Raise max_worker_processes; interrupted runs there are marked at their next use and wait for mop_resume.")));
	}

	/*
	 * Then the server's buffer cache, in each database its list names, once
	 * every interrupted run is on its way again
	 */
	if (mop_prewarm_buffer_cache && !ShutdownRequestPending)
	{
		List	   *listed = mop_prewarm_databases();

		foreach(lc, dbs)
		{
			if (ShutdownRequestPending)
				break;
			if (!list_member_oid(listed, lfirst_oid(lc)))
				continue;
			if (!run_database_worker("mop_prewarm_main", "mop prewarm", lfirst_oid(lc)))
				ereport(LOG,
						(errmsg("mop launcher could not start a worker to load the server's buffer cache for database %u",
								lfirst_oid(lc))));
		}
	}
	/* a shutdown before the prewarm ended keeps the list it was loading */
	prewarm_ended = !ShutdownRequestPending;

	while (!ShutdownRequestPending)
	{
		int			rc;

		/* (a reload while the recovery workers ran has its latch reset already) */
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* for a run's workers, which do not read the file again */
			mop_shared_cache_publish();
		}
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   PREWARM_LIST_EVERY_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		/*
		 * Absorb procsignal barriers: DROP DATABASE (and the tablespace
		 * commands) wait until every process has; SIGTERM only sets a flag
		 * here, so this never exits.
		 */
		CHECK_FOR_INTERRUPTS();
		/* the server's cache's list, for the next start (prewarm.c) */
		if ((rc & WL_TIMEOUT) && mop_prewarm_buffer_cache)
			mop_prewarm_dump(false);
	}
	if (mop_prewarm_buffer_cache && prewarm_ended)
		mop_prewarm_dump(true);
	proc_exit(0);
}

/*
 * A recovery worker: in its database, mark interrupted runs and resume them
 * (mop.auto_resume), each as its owner, one after the other.
 */
void
mop_recovery_main(Datum arg)
{
	Oid			db = DatumGetObjectId(arg);
	List	   *marked = NIL;
	List	   *owners = NIL;
	ListCell   *lc,
			   *lo;

	worker_connect(db, InvalidOid, "mop recovery");

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'mop'",
					true, 0) == SPI_OK_SELECT && SPI_processed == 1)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		marked = mop_mark_interrupted();
		MemoryContextSwitchTo(old);
		foreach(lc, marked)
		{
			Oid			t = INT8OID;
			Datum		v = Int64GetDatum(*(int64 *) lfirst(lc));
			Oid			role = InvalidOid;

			if (SPI_execute_with_args("SELECT a.oid FROM mop.runs r JOIN pg_catalog.pg_authid a "
									  "ON a.rolname OPERATOR(pg_catalog.=) r.owner "
									  "WHERE r.id OPERATOR(pg_catalog.=) $1",
									  1, &t, &v, NULL, true, 1) == SPI_OK_SELECT && SPI_processed == 1)
			{
				bool		isnull;

				role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 1, &isnull));
			}
			old = MemoryContextSwitchTo(TopMemoryContext);
			owners = lappend_oid(owners, role);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);

	if (marked != NIL)
		ereport(LOG,
				(errmsg("mop found %d interrupted run(s) in database %u%s", list_length(marked), db,
						mop_auto_resume ? "; resuming them" : "; mop.auto_resume is off")));
	if (!mop_auto_resume)
		marked = NIL;
	forboth(lc, marked, lo, owners)
	{
		BackgroundWorker bgw;
		ResumeArgs	ra;

		ra.database = db;
		ra.role = lfirst_oid(lo);
		ra.run_id = *(int64 *) lfirst(lc);
		if (!OidIsValid(ra.role))
		{
			ereport(LOG,
					(errmsg("mop run %lld was not resumed: its owner no longer exists",
							(long long) ra.run_id)));
			continue;
		}
		mop_bgworker_init(&bgw, "mop_resume_worker_main", "mop resume");
		snprintf(bgw.bgw_name, BGW_MAXLEN, "mop resume %lld", (long long) ra.run_id);
		StaticAssertStmt(sizeof(ResumeArgs) <= BGW_EXTRALEN, "resume arguments too large");
		memcpy(bgw.bgw_extra, &ra, sizeof(ra));
		if (!run_worker_to_end(&bgw))
			ereport(LOG,
					(errmsg("mop run %lld was not resumed: no background worker slot",
							(long long) ra.run_id),
					 errhint("Raise max_worker_processes, or call mop_resume(%lld).",
							 (long long) ra.run_id)));
	}
	proc_exit(0);
}

/*
 * A prewarm worker: the server's buffer cache loaded with the buffers of
 * this database's mop.buffers that it held before the restart (prewarm.c).
 */
void
mop_prewarm_main(Datum arg)
{
	Oid			db = DatumGetObjectId(arg);
	Oid			buffers_toast = InvalidOid;
	int			n;

	worker_connect(db, InvalidOid, "mop prewarm");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* the TOAST relation of mop's buffers, whatever installed them */
	if (SPI_execute("SELECT c.reltoastrelid FROM pg_catalog.pg_class c "
					"WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass('mop.buffers')",
					true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		bool		isnull;

		buffers_toast = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
													   SPI_tuptable->tupdesc, 1, &isnull));
		if (isnull)
			buffers_toast = InvalidOid;
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, "loading the server's buffer cache");
	n = mop_prewarm_load(buffers_toast);
	pgstat_report_activity(STATE_IDLE, NULL);
	if (n > 0)
		ereport(LOG,
				(errmsg("mop loaded %d buffer(s) of database %u into the server's buffer cache", n, db)));
	proc_exit(0);
}

/* A resume worker: mop_resume(run, wait => false) as the run's owner. */
void
mop_resume_worker_main(Datum arg)
{
	ResumeArgs	ra;
	Oid			t = INT8OID;
	Datum		v;
	char	   *schema = NULL;
	StringInfoData q;

	memcpy(&ra, MyBgworkerEntry->bgw_extra, sizeof(ra));
	worker_connect(ra.database, ra.role, "mop resume");

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute("SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n "
					"ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
					"WHERE e.extname OPERATOR(pg_catalog.=) 'mop'", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
		schema = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (schema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("mop is no longer installed in this database")));
	v = Int64GetDatum(ra.run_id);

	/*
	 * The run goes on committing as often as it did (mop.checkpoint_every,
	 * recorded in its options when above 1), not as this worker's session
	 * would: a run started to commit every sub-epoch keeps that guarantee.
	 * A value that is not one the setting takes is left alone (the
	 * coordinator reports it).
	 */
	if (SPI_execute_with_args("SELECT pg_catalog.set_config('mop.checkpoint_every', s.v, true) "
							  "FROM (SELECT COALESCE(r.options OPERATOR(pg_catalog.->>) "
							  "'checkpoint_every'::pg_catalog.text, '1') AS v "
							  "FROM mop.runs r WHERE r.id OPERATOR(pg_catalog.=) $1) s "
							  "WHERE CASE WHEN s.v OPERATOR(pg_catalog.~) '^[0-9]{1,2}$' "
							  "THEN s.v::pg_catalog.int4 OPERATOR(pg_catalog.<=) " CppAsString2(MOP_MAX_CHECKPOINT_EVERY)
							  " AND s.v::pg_catalog.int4 OPERATOR(pg_catalog.>=) 1 ELSE false END",
							  1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the options of mop run %lld", (long long) ra.run_id);
	initStringInfo(&q);
	appendStringInfo(&q, "SELECT pg_catalog.count(*) FROM %s.mop_resume($1, wait => false)",
					 quote_identifier(schema));
	pgstat_report_activity(STATE_RUNNING, q.data);
	if (SPI_execute_with_args(q.data, 1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mop_resume(%lld) failed", (long long) ra.run_id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	ereport(LOG,
			(errmsg("mop run %lld resumed after a restart", (long long) ra.run_id)));
	proc_exit(0);
}

/*
 * Mark the runs this role sees orphaned 'interrupted' in a worker's own
 * transaction (see mop_mark_interrupted_except) and wait for it; false if
 * no worker could run (no free slot, a role that cannot log in).
 */
bool
mop_mark_in_worker(Oid database, Oid role, int64 except)
{
	BackgroundWorker bgw;
	ResumeArgs	ra;

	mop_bgworker_init(&bgw, "mop_mark_worker_main", "mop mark");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "mop mark interrupted");
	ra.database = database;
	ra.role = role;
	ra.run_id = except;
	memcpy(bgw.bgw_extra, &ra, sizeof(ra));
	return run_worker_to_end(&bgw);
}

/* The worker of mop_mark_in_worker: the marking, as that role, committed at once. */
void
mop_mark_worker_main(Datum arg)
{
	ResumeArgs	ra;

	memcpy(&ra, MyBgworkerEntry->bgw_extra, sizeof(ra));
	worker_connect(ra.database, ra.role, "mop mark");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	(void) mop_mark_interrupted_except(ra.run_id);
	PopActiveSnapshot();
	CommitTransactionCommand();
	proc_exit(0);
}
