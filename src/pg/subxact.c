/*
 * subxact.c -- a step that may fail for want of a resource, run in a
 * subtransaction so that its failure is an answer ("no room") instead of
 * the caller's error.
 *
 * Used where shared memory is taken on the way (a new segment of a dynamic
 * shared memory area fails with an ERROR when /dev/shm is exhausted) and
 * the caller has a way on without it.  A cancel, a shutdown or anything
 * worse than an ERROR is re-thrown: it is not a missing resource.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "mop.h"

bool
mop_try_in_subxact(void (*step) (void *arg), void *arg, char **why)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	if (why)
		*why = NULL;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		step(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
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
		if (ed->elevel > ERROR || ed->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			ed->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN || ProcDiePending || QueryCancelPending)
			ReThrowError(ed);
		if (why)
			*why = pstrdup(ed->message ? ed->message : "unknown error");
		FreeErrorData(ed);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

typedef struct DsaAlloc
{
	dsa_area   *area;
	Size		size;
	dsa_pointer p;
} DsaAlloc;

static void
dsa_alloc_step(void *arg)
{
	DsaAlloc   *a = (DsaAlloc *) arg;

	a->p = dsa_allocate_extended(a->area, a->size, DSA_ALLOC_HUGE | DSA_ALLOC_NO_OOM);
}

/*
 * size bytes of area, or InvalidDsaPointer when there are none: the
 * area's limit (*why NULL) or the system's shared memory (*why says what
 * failed).
 */
dsa_pointer
mop_dsa_allocate_or_none(dsa_area *area, Size size, char **why)
{
	DsaAlloc	a = {area, size, InvalidDsaPointer};

	if (!mop_try_in_subxact(dsa_alloc_step, &a, why))
		return InvalidDsaPointer;
	return a.p;
}
