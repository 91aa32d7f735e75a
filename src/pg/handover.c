/*
 * handover.c -- models handed from worker to worker in shared memory
 * (interface and what it is for: handover.h).
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "handover.h"
#include "mop.h"

#define HANDOVER_MAGIC UINT64CONST(0x4D4F50484F564552)	/* "MOPHOVER" */

typedef struct Chunk
{
	uint64		magic;
	int64		model_id;
	int32		n_hops;
	MopHandoverHop hops[MOP_MAX_CHECKPOINT_EVERY];
	Size		state_size;		/* VARSIZE of the state that follows */
} Chunk;

#define CHUNK_STATE(c) ((char *) (c) + MAXALIGN(sizeof(Chunk)))

static dsa_area *area_attached = NULL;
static dsa_handle handle_attached = DSM_HANDLE_INVALID;

#define HANDOVER_TRANCHE_NAME "mop_handover"

dsa_handle
mop_handover_create(int *tranche)
{
	dsa_area   *area;
	MemoryContext old;

	*tranche = LWLockNewTrancheId();
	LWLockRegisterTranche(*tranche, HANDOVER_TRANCHE_NAME);
	/* the area's bookkeeping lives as long as the process */
	old = MemoryContextSwitchTo(TopMemoryContext);
	area = dsa_create(*tranche);
	MemoryContextSwitchTo(old);
	/* the segments stay mapped for the process's life, whatever resource owner */
	dsa_pin_mapping(area);
	dsa_set_size_limit(area, MOP_HANDOVER_LIMIT);
	area_attached = area;
	handle_attached = dsa_get_handle(area);
	return handle_attached;
}

dsa_area *
mop_handover_area(dsa_handle handle, int tranche)
{
	if (handle == DSM_HANDLE_INVALID)
		return NULL;
	if (area_attached == NULL)
	{
		MemoryContext old;

		/* so that waits on the area's lock show under its name here too */
		LWLockRegisterTranche(tranche, HANDOVER_TRANCHE_NAME);
		old = MemoryContextSwitchTo(TopMemoryContext);

		area_attached = dsa_attach(handle);
		MemoryContextSwitchTo(old);
		dsa_pin_mapping(area_attached);
		handle_attached = handle;
	}
	else if (handle_attached != handle)
		elog(ERROR, "mop: a process of one run asked for another run's hand-over area");
	return area_attached;
}

int
mop_handover_read(dsa_area *area, dsa_pointer p, int64 model_id, bytea **state,
				  MopHandoverHop *hops)
{
	Chunk	   *c = (Chunk *) dsa_get_address(area, p);

	if (c == NULL || c->magic != HANDOVER_MAGIC || c->model_id != model_id ||
		c->n_hops < 1 || c->n_hops > MOP_MAX_CHECKPOINT_EVERY ||
		c->state_size < VARHDRSZ || c->state_size > MaxAllocHugeSize)
		elog(ERROR, "mop: the state handed over for model %lld is not that model's",
			 (long long) model_id);
	*state = (bytea *) palloc_extended(c->state_size, MCXT_ALLOC_HUGE);
	memcpy(*state, CHUNK_STATE(c), c->state_size);
	if (VARSIZE(*state) != c->state_size)
		elog(ERROR, "mop: the state handed over for model %lld is truncated",
			 (long long) model_id);
	memcpy(hops, c->hops, sizeof(MopHandoverHop) * c->n_hops);
	return c->n_hops;
}

/*
 * A new segment of the area can fail with an ERROR when the system's
 * shared memory is exhausted (a small /dev/shm): that only means "no room"
 * (mop_dsa_allocate_or_none).
 */
dsa_pointer
mop_handover_write(dsa_area *area, int64 model_id, bytea *state,
				   const MopHandoverHop *hops, int n_hops)
{
	static bool told = false;
	Size		size = MAXALIGN(sizeof(Chunk)) + VARSIZE_ANY(state);
	dsa_pointer p;
	char	   *why = NULL;

	Assert(!VARATT_IS_EXTENDED(state));
	if (n_hops < 1 || n_hops > MOP_MAX_CHECKPOINT_EVERY)
		return InvalidDsaPointer;
	p = mop_dsa_allocate_or_none(area, size, &why);
	if (why != NULL && !told)
	{
		ereport(LOG,
				(errmsg("mop: no shared memory to hand a model over; its sub-epochs commit instead"),
				 errdetail("%s", why)));
		told = true;
	}
	if (!DsaPointerIsValid(p) && !told)
	{
		ereport(LOG,
				(errmsg("mop: no room in the run's hand-over area (%zu MB) for a model's state; its sub-epochs commit instead",
						MOP_HANDOVER_LIMIT / (1024 * 1024))));
		told = true;
	}
	if (DsaPointerIsValid(p))
	{
		Chunk	   *c = (Chunk *) dsa_get_address(area, p);

		memset(c, 0, sizeof(Chunk));
		c->magic = HANDOVER_MAGIC;
		c->model_id = model_id;
		c->n_hops = n_hops;
		memcpy(c->hops, hops, sizeof(MopHandoverHop) * n_hops);
		c->state_size = VARSIZE(state);
		memcpy(CHUNK_STATE(c), state, VARSIZE(state));
	}
	return p;
}

void
mop_handover_free(dsa_area *area, dsa_pointer p)
{
	if (area != NULL && DsaPointerIsValid(p))
		dsa_free(area, p);
}
