/*
 * lockorder.c -- row locks in mop's documented order (see lockorder.h), and
 * the guards that keep a drop from pulling the catalog out from under a
 * run that trains:
 *
 *   mop_drop_dataset(dataset)      refuses (55006) while a run trains on it
 *   mop.guard_run_delete()         BEFORE DELETE row trigger on mop.runs:
 *                                  refuses to delete a run that trains
 *   mop.guard_drop_extension()     ddl_command_start event trigger on DROP
 *                                  EXTENSION mop (and DROP SCHEMA ... CASCADE
 *                                  of its schema): refuses while a run
 *                                  trains, then takes mop's relations
 *                                  without waiting while holding any
 *
 * A run "trains" when its row says 'running' and its shared segment (the
 * handle in mop.runs.shm_handle) can be attached: its coordinator or
 * workers are alive.  A run left 'running' by a crash has no segment and
 * may be deleted like any other.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "common/pg_prng.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "lockorder.h"
#include "run.h"
#include "segment.h"

PG_FUNCTION_INFO_V1(mop_drop_dataset);
PG_FUNCTION_INFO_V1(mop_guard_run_delete);
PG_FUNCTION_INFO_V1(mop_guard_drop_extension);

/* Most run ids an error message lists. */
#define MAX_LISTED 10

bool
mop_run_is_live(int64 run_id, int64 handle)
{
	dsm_segment *seg;
	MopRunShared *r;
	bool		live;
	bool		attached = false;

	if (handle == 0)
		return false;
	/* this backend may have it mapped already (it started or waits on it) */
	seg = dsm_find_mapping((dsm_handle) handle);
	if (seg == NULL)
	{
		seg = dsm_attach((dsm_handle) handle);
		if (seg == NULL)
			return false;
		attached = true;
	}
	/*
	 * The table of contents' magic and the run id guard against a recycled
	 * handle; a coordinator resuming the run sets run_id only once its claim
	 * has committed.
	 */
	r = mop_run_shared(seg);
	live = false;
	if (r != NULL)
	{
		SpinLockAcquire(&r->mutex);
		live = r->run_id == run_id || r->resume_run_id == run_id;
		SpinLockRelease(&r->mutex);
	}
	if (attached)
		dsm_detach(seg);
	return live;
}

/* Run a one-parameter locking SELECT (SPI connected); did it return a row? */
static bool
lock_row(const char *sql, int64 id)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(id);
	int			rc = SPI_execute_with_args(sql, 1, &t, &v, NULL, false, 0);

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "mop: could not lock a catalog row (%s): %s", SPI_result_code_string(rc), sql);
	return SPI_processed > 0;
}

bool
mop_lock_dataset_row(int64 dataset_id)
{
	return lock_row("SELECT 1 FROM mop.datasets WHERE id OPERATOR(pg_catalog.=) $1 FOR KEY SHARE",
					dataset_id);
}

bool
mop_lock_dataset_of_run(int64 run_id)
{
	return lock_row("SELECT 1 FROM mop.datasets d WHERE d.id OPERATOR(pg_catalog.=) "
					"(SELECT r.dataset_id FROM mop.runs r WHERE r.id OPERATOR(pg_catalog.=) $1) "
					"FOR KEY SHARE", run_id);
}

bool
mop_lock_run_row(int64 run_id)
{
	return lock_row("SELECT 1 FROM mop.runs WHERE id OPERATOR(pg_catalog.=) $1 FOR KEY SHARE",
					run_id);
}

/*
 * Runs that train now among those of dataset_id (0: all runs the caller
 * sees), read with the latest snapshot (so a REPEATABLE READ caller sees a
 * run started after its snapshot too).  Returns the first one's id (0 if
 * none), their number in *count and up to MAX_LISTED ids, comma-separated,
 * in *list (allocated in the caller's memory context).
 */
static int64
find_live_runs(int64 dataset_id, int *count, StringInfo list)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(dataset_id);
	SPIPlanPtr	plan;
	int64		first = 0;
	int64	   *ids;
	int64	   *handles;
	bool	   *has;
	int			n;

	*count = 0;
	SPI_connect();
	if (dataset_id != 0)
		plan = SPI_prepare("SELECT id, shm_handle FROM mop.runs WHERE dataset_id OPERATOR(pg_catalog.=) $1 "
						   "AND status OPERATOR(pg_catalog.=) 'running' ORDER BY id", 1, &t);
	else
		plan = SPI_prepare("SELECT id, shm_handle FROM mop.runs "
						   "WHERE status OPERATOR(pg_catalog.=) 'running' ORDER BY id", 0, NULL);
	if (plan == NULL ||
		SPI_execute_snapshot(plan, dataset_id != 0 ? &v : NULL, NULL, GetLatestSnapshot(),
							 InvalidSnapshot, false, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mop: could not read mop.runs");
	n = mop_run_handles(CurrentMemoryContext, &ids, &handles, &has);
	for (int i = 0; i < n; i++)
	{
		MemoryContext old;

		if (!has[i] || !mop_run_is_live(ids[i], handles[i]))
			continue;
		if (first == 0)
			first = ids[i];
		old = MemoryContextSwitchTo(cxt);
		if (*count < MAX_LISTED)
			appendStringInfo(list, "%s%lld", *count > 0 ? ", " : "", (long long) ids[i]);
		else if (*count == MAX_LISTED)
			appendStringInfoString(list, ", ...");
		MemoryContextSwitchTo(old);
		(*count)++;
	}
	SPI_finish();
	return first;
}

/* ERROR: the dataset is in use by a run that trains. */
static void
refuse_dataset(const char *name, int64 run_id, int count, const char *list)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("dataset \"%s\" is in use by run %lld", name, (long long) run_id),
			 count > 1 ?
			 errdetail("Runs %s are training on it; dropping it would delete their models while their workers train them.",
					   list) :
			 errdetail("The run is training on it; dropping it would delete the run's models while its workers train them."),
			 count > 1 ?
			 errhint("Cancel them with mop_cancel() (or wait for them to end) first.") :
			 errhint("Cancel the run with mop_cancel(%lld) (or wait for it to end) first.",
					 (long long) run_id)));
}

/*
 * mop_drop_dataset(dataset text) RETURNS boolean: delete a dataset with its
 * buffers, runs, models, epochs, hops and decisions; false if the caller
 * has no dataset of that name.  Refused while one of its runs trains.
 *
 * The runs are checked first, without a lock, so that the refusal is
 * immediate; then the dataset's row is locked FOR UPDATE, which waits for
 * the transactions that hold it FOR KEY SHARE (a run being created or
 * resumed on it, the write of a sub-epoch or of a coordinator's decision)
 * and keeps new runs out until this transaction ends, and the runs are
 * checked again, with the latest snapshot.  A run the caller cannot see
 * (another role's over this dataset) is caught by mop.guard_run_delete()
 * when the delete cascades to it.
 */
Datum
mop_drop_dataset(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			t = TEXTOID;
	Datum		v = PG_GETARG_DATUM(0);
	Oid			it = INT8OID;
	Datum		iv;
	int64		dataset_id;
	int64		run_id;
	int			count;
	StringInfoData list;
	bool		isnull;
	bool		dropped;

	initStringInfo(&list);
	SPI_connect();
	if (SPI_execute_with_args("SELECT id FROM mop.datasets WHERE name OPERATOR(pg_catalog.=) $1",
							  1, &t, &v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mop: could not read mop.datasets");
	if (SPI_processed == 0)
	{
		SPI_finish();
		PG_RETURN_BOOL(false);
	}
	dataset_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	iv = Int64GetDatum(dataset_id);

	if ((run_id = find_live_runs(dataset_id, &count, &list)) != 0)
		refuse_dataset(name, run_id, count, list.data);
	if (SPI_execute_with_args("SELECT 1 FROM mop.datasets WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
							  1, &it, &iv, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mop: could not lock a row of mop.datasets");
	if (SPI_processed == 0)
	{
		/* dropped meanwhile by another transaction */
		SPI_finish();
		PG_RETURN_BOOL(false);
	}
	resetStringInfo(&list);
	if ((run_id = find_live_runs(dataset_id, &count, &list)) != 0)
		refuse_dataset(name, run_id, count, list.data);

	/* its copies on segments go too (a segment out of reach: a WARNING) */
	if (mop_catalog_is_02())
		mop_segment_drop_copies(dataset_id);
	if (SPI_execute_with_args("DELETE FROM mop.datasets WHERE id OPERATOR(pg_catalog.=) $1",
							  1, &it, &iv, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "mop: could not delete from mop.datasets");
	dropped = SPI_processed > 0;
	SPI_finish();
	PG_RETURN_BOOL(dropped);
}

/*
 * BEFORE DELETE row trigger on mop.runs: a run that trains keeps its rows.
 * The row is already locked when a BEFORE trigger fires, so this waits for
 * the sub-epochs in flight (a worker holds its run's row FOR KEY SHARE),
 * then sees the run's latest status.
 */
Datum
mop_guard_run_delete(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	HeapTuple	old;
	Datum		d;
	bool		isnull;
	int64		run_id;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(td->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_BY_DELETE(td->tg_event))
		elog(ERROR, "mop.guard_run_delete() must be a BEFORE DELETE row trigger");
	old = td->tg_trigtuple;
	desc = RelationGetDescr(td->tg_relation);

	d = heap_getattr(old, SPI_fnumber(desc, "status"), desc, &isnull);
	if (isnull || strcmp(TextDatumGetCString(d), "running") != 0)
		return PointerGetDatum(old);
	d = heap_getattr(old, SPI_fnumber(desc, "shm_handle"), desc, &isnull);
	if (isnull)
		return PointerGetDatum(old);
	run_id = DatumGetInt64(heap_getattr(old, SPI_fnumber(desc, "id"), desc, &isnull));
	if (mop_run_is_live(run_id, DatumGetInt64(d)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("run %lld is training and cannot be deleted", (long long) run_id),
				 errdetail("Deleting the run, or the dataset it trains on, would delete its models while its workers train them."),
				 errhint("Cancel it with mop_cancel(%lld) (or wait for it to end) first.",
						 (long long) run_id)));
	return PointerGetDatum(old);
}

/* ERROR: mop may not be dropped while runs train. */
static void
refuse_drop(int64 first, int count, const char *list, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("extension \"mop\" is in use by run %lld", (long long) first),
			 count > 1 ?
			 errdetail("Runs %s are training; %s would delete their models while their workers train them.",
					   list, what) :
			 errdetail("The run is training; %s would delete its models while its workers train them.",
					   what),
			 count > 1 ?
			 errhint("Cancel them with mop_cancel() (or wait for them to end) first.") :
			 errhint("Cancel the run with mop_cancel(%lld) (or wait for it to end) first.",
					 (long long) first)));
}

/*
 * Refuse if a run trains, reading mop.runs in a subtransaction that is
 * rolled back, so that this backend keeps no lock on mop.runs while it
 * waits for the others' locks.
 */
static void
refuse_if_training_unlocked(const char *what)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	StringInfoData list;
	int64		first = 0;
	int			count = 0;

	initStringInfo(&list);
	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		MemoryContextSwitchTo(cxt);
		first = find_live_runs(0, &count, &list);
	}
	PG_CATCH();
	{
		ErrorData  *ed;

		MemoryContextSwitchTo(cxt);
		ed = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ReThrowError(ed);
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	if (first != 0)
		refuse_drop(first, count, list.data, what);
}

/* The relations that are members of extension ext (tables, views, sequences...). */
static Oid *
extension_relations(Oid ext, int *n)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			t = OIDOID;
	Datum		v = ObjectIdGetDatum(ext);
	Oid		   *rels;

	SPI_connect();
	if (SPI_execute_with_args("SELECT d.objid FROM pg_catalog.pg_depend d "
							  "WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
							  "AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass "
							  "AND d.refobjid OPERATOR(pg_catalog.=) $1 "
							  "AND d.deptype OPERATOR(pg_catalog.=) 'e' ORDER BY d.objid",
							  1, &t, &v, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mop: could not read pg_depend");
	*n = (int) SPI_processed;
	rels = MemoryContextAlloc(cxt, sizeof(Oid) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		bool		isnull;

		rels[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	return rels;
}

/*
 * Take ACCESS EXCLUSIVE on every relation of the extension, as DROP is
 * about to, but never wait while holding one: try them all, and if one is
 * busy let go of the others, check that no run trains meanwhile, and try
 * again a little later.  A process of a run never waits for this backend
 * with locks of its own in hand, so there is no cycle (the lock order of
 * mop's processes cannot be imposed on table locks, which DROP takes in
 * dependency order).  lock_timeout applies to the whole wait.
 */
static void
lock_extension_relations(Oid ext, const char *what)
{
	int			n;
	Oid		   *rels = extension_relations(ext, &n);
	TimestampTz start = GetCurrentTimestamp();

	for (int attempt = 0;; attempt++)
	{
		int			got = 0;

		while (got < n && ConditionalLockRelationOid(rels[got], AccessExclusiveLock))
			got++;
		if (got == n)
			return;
		while (got > 0)
			UnlockRelationOid(rels[--got], AccessExclusiveLock);
		refuse_if_training_unlocked(what);
		if (LockTimeout > 0 &&
			TimestampDifferenceExceeds(start, GetCurrentTimestamp(), LockTimeout))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not lock the tables of extension \"mop\" within lock_timeout"),
					 errdetail("Other transactions are using them."),
					 errhint("Drop the extension when they have ended.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 5L + Min(attempt, 20) * 5L + (long) pg_prng_uint64_range(&pg_global_prng_state, 0, 9),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * ddl_command_start event trigger on DROP EXTENSION and DROP SCHEMA: when
 * the command drops mop (DROP EXTENSION mop, or DROP SCHEMA ... CASCADE of
 * the schema mop is installed in), refuse (55006) while a run trains;
 * otherwise lock mop's relations (see lock_extension_relations) and check
 * once more under the locks, then let the command go on.  A role that may
 * not drop the extension gets the command's own error.
 */
Datum
mop_guard_drop_extension(PG_FUNCTION_ARGS)
{
	EventTriggerData *trig;
	DropStmt   *stmt;
	Oid			ext;
	const char *what = NULL;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "mop.guard_drop_extension() must be an event trigger");
	trig = (EventTriggerData *) fcinfo->context;
	if (trig->parsetree == NULL || !IsA(trig->parsetree, DropStmt))
		PG_RETURN_VOID();
	stmt = (DropStmt *) trig->parsetree;
	ext = get_extension_oid("mop", true);
	if (!OidIsValid(ext))
		PG_RETURN_VOID();

	if (stmt->removeType == OBJECT_EXTENSION)
	{
		foreach(lc, stmt->objects)
			if (strcmp(strVal(lfirst(lc)), "mop") == 0)
				what = "dropping the extension";
		if (what && !pg_extension_ownercheck(ext, GetUserId()))
			PG_RETURN_VOID();
	}
	else if (stmt->removeType == OBJECT_SCHEMA && stmt->behavior == DROP_CASCADE)
	{
		Oid			nsp = InvalidOid;
		Oid			t = OIDOID;
		Datum		v = ObjectIdGetDatum(ext);
		bool		isnull;

		SPI_connect();
		if (SPI_execute_with_args("SELECT extnamespace FROM pg_catalog.pg_extension "
								  "WHERE oid OPERATOR(pg_catalog.=) $1",
								  1, &t, &v, NULL, true, 0) == SPI_OK_SELECT && SPI_processed == 1)
			nsp = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		SPI_finish();
		foreach(lc, stmt->objects)
			if (OidIsValid(nsp) && get_namespace_oid(strVal(lfirst(lc)), true) == nsp)
				what = "dropping the schema with the extension";
		if (what && !pg_namespace_ownercheck(nsp, GetUserId()))
			PG_RETURN_VOID();
	}
	if (what == NULL)
		PG_RETURN_VOID();

	refuse_if_training_unlocked(what);
	lock_extension_relations(ext, what);
	{
		StringInfoData list;
		int			count;
		int64		first;

		initStringInfo(&list);
		first = find_live_runs(0, &count, &list);
		if (first != 0)
			refuse_drop(first, count, list.data, what);
	}
	PG_RETURN_VOID();
}
