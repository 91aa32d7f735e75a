/*
 * subxact.c -- a step whose failure the caller can live with, run in a
 * subtransaction so that its error is an answer (and a message) instead of
 * the caller's error.
 *
 * Used where shared memory is taken on the way (a new segment of a dynamic
 * shared memory area fails with an ERROR when /dev/shm is exhausted: the
 * hand-over area, the server's buffer cache), for a best-effort step (a
 * dataset's copy dropped on a segment that may be out of reach) and for a
 * scheduling hint (a model's profile).  A cancel, a shutdown or anything
 * worse than an ERROR is re-thrown: it is not the step's failure.
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
