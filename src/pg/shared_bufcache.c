/*
 * shared_bufcache.c -- the server's cache of detoasted training buffers,
 * shared by every backend and worker (with mop in shared_preload_libraries).
 *
 * Each backend keeps the buffers it trains on (bufcache.c); without this
 * cache a backend's first epoch reads every buffer out of TOAST (~95,000
 * 2 kB chunks for 188 MB), and N backends training on one dataset hold N
 * copies.  With it, the first process to read a buffer copies it into a
 * dynamic shared memory area of the server, and later ones -- a new
 * connection's mop_train, a run's workers, the next night's search -- use
 * those bytes in place.
 *
 * Entries are keyed by database, TOAST relation, value OID and size, like
 * the backend's cache.  A TOAST value never changes, but its OID can be
 * given to a new value once the old one is gone (after the OID counter
 * wraps), and a table rewrite moves it: an entry also records the tuple
 * that holds the value's first chunk (its TID and inserting transaction),
 * and each transaction's first use of an entry checks that the value
 * still starts there; an entry that does not is dropped.  A process pins
 * the entries it uses until its transaction ends (bufcache.c forgets its
 * pointers then; its pointers stay valid that long); when the area is
 * full, unpinned entries go, least recently used first, and a buffer that
 * still finds no room is kept in the backend's own cache instead.  An
 * entry being loaded is invisible to others, who read the buffer for the
 * moment without keeping it.
 *
 * mop.shared_buffer_cache_mb sizes the area (0: off).  The area's memory
 * is taken as entries are added and stays with the server until it
 * restarts (PostgreSQL's DSA keeps the segments of large allocations):
 * entries evicted, or dropped because the setting was lowered, leave room
 * that later entries reuse.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/toast_internals.h"
#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/dsa.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mop.h"

PG_FUNCTION_INFO_V1(mop_shared_buffer_cache);

#define SBC_MAX_ENTRIES 4096
#define SBC_TRANCHE "mop_buffer_cache"
/* room the area may take beyond the entries' bytes (its bookkeeping, free pages) */
#define SBC_SLACK(limit) ((limit) / 8 + 8 * 1024 * 1024)

typedef struct SbcEntry
{
	Oid			dbid;
	Oid			toastrelid;
	Oid			valueid;
	int32		extsize;
	bool		used;			/* slot holds an entry */
	bool		ready;			/* its bytes are loaded */
	int32		pins;			/* processes holding it */
	uint32		generation;		/* bumped whenever the slot changes hands */
	uint64		last_used;
	Size		len;			/* payload bytes */
	dsa_pointer data;			/* the payload */
	TransactionId chunk_xmin;	/* the tuple holding the value's first chunk */
	ItemPointerData chunk_tid;
} SbcEntry;

typedef struct SbcShared
{
	LWLock	   *lock;			/* protects everything here */
	int			tranche;		/* the area's lock tranche */
	dsa_handle	area;			/* DSM_HANDLE_INVALID until first used */
	int			size_mb;		/* the setting, as last published (below) */
	uint64		clock;
	Size		bytes;			/* payload bytes of entries (loaded or loading) */
	int64		hits;
	int64		loads;
	int64		refused;
	int64		evicted;
	int64		stale;
	SbcEntry	entries[SBC_MAX_ENTRIES];
} SbcShared;

/* A pin this process holds. */
typedef struct SbcPin
{
	int			slot;
	uint32		generation;
} SbcPin;

static SbcShared *sbc = NULL;
static dsa_area *sbc_area = NULL;
static SbcPin *my_pins = NULL;
static int	n_my_pins = 0;
static int	max_my_pins = 0;
static bool exit_hooked = false;
static TimestampTz attach_failed_at = 0;	/* the last attach that failed */
static LocalTransactionId shrunk_in = InvalidLocalTransactionId;	/* the last shrink's */
static bool told_no_memory = false;

/* the slot this process is loading, for its exit to give back */
static int	loading_slot = -1;
static uint32 loading_generation = 0;
static dsa_pointer loading_data = InvalidDsaPointer;

static shmem_request_hook_type prev_shmem_request = NULL;
static shmem_startup_hook_type prev_shmem_startup = NULL;

static void
sbc_shmem_request(void)
{
	if (prev_shmem_request)
		prev_shmem_request();
	RequestAddinShmemSpace(MAXALIGN(sizeof(SbcShared)));
	RequestNamedLWLockTranche(SBC_TRANCHE, 1);
}

static void
sbc_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup)
		prev_shmem_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sbc = ShmemInitStruct("mop shared buffer cache", sizeof(SbcShared), &found);
	if (!found)
	{
		memset(sbc, 0, sizeof(SbcShared));
		sbc->lock = &(GetNamedLWLockTranche(SBC_TRANCHE))->lock;
		sbc->tranche = LWLockNewTrancheId();
		sbc->area = DSM_HANDLE_INVALID;
		sbc->size_mb = mop_shared_buffer_cache_mb;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* While preloading: ask for the cache's shared memory. */
void
mop_shared_cache_request(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request = shmem_request_hook;
	shmem_request_hook = sbc_shmem_request;
	prev_shmem_startup = shmem_startup_hook;
	shmem_startup_hook = sbc_shmem_startup;
}

static void sbc_free_slot(SbcEntry *e);
static bool sbc_evict_one(Size min_len);

/*
 * Drop this process's pins (at the end of its transaction, at exit, when
 * its own cache is emptied).
 */
void
mop_shared_cache_release(void)
{
	if (sbc == NULL || n_my_pins == 0)
		return;

	/*
	 * Only counts change here (this runs in commit and abort callbacks,
	 * where nothing may fail): each pin is dropped before it is undone, so
	 * a second call never undoes one twice.  Entries no longer held are
	 * freed by the next process that needs room or finds the cache over its
	 * size; stale ones are the first to go.
	 */
	LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
	while (n_my_pins > 0)
	{
		SbcPin		pin = my_pins[--n_my_pins];
		SbcEntry   *e = &sbc->entries[pin.slot];

		if (e->used && e->generation == pin.generation && e->pins > 0)
			e->pins--;
	}
	LWLockRelease(sbc->lock);
}

/* A transaction's pins end with it, however it ends. */
static void
sbc_at_xact_end(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		mop_shared_cache_release();
}

static void
sbc_at_exit(int code, Datum arg)
{
	/* an error path may exit holding the lock: never wait on ourselves */
	if (sbc != NULL && LWLockHeldByMe(sbc->lock))
		LWLockRelease(sbc->lock);
	/* a load cut short by a FATAL (a terminated worker): give its slot back */
	if (sbc != NULL && loading_slot >= 0 && sbc_area != NULL)
	{
		SbcEntry   *e = &sbc->entries[loading_slot];

		LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
		if (DsaPointerIsValid(loading_data))
			dsa_free(sbc_area, loading_data);
		if (e->used && e->generation == loading_generation)
			sbc_free_slot(e);
		LWLockRelease(sbc->lock);
		loading_slot = -1;
	}
	mop_shared_cache_release();
}

/*
 * The setting every process goes by, in bytes.  A run's workers (background
 * workers) never read the configuration file again; mop's launcher does,
 * and publishes the setting here after each reload, so a run under way
 * follows a change too.  A backend publishes a change it sees as well (the
 * launcher may be busy starting recovery workers), but not the value it
 * first sees: it may have started before a reload and not have read the
 * file again yet.
 */
static int	seen_size_mb = -1;

static Size
sbc_limit(void)
{
	if (!IsBackgroundWorker)
	{
		if (seen_size_mb < 0)
			seen_size_mb = mop_shared_buffer_cache_mb;
		else if (seen_size_mb != mop_shared_buffer_cache_mb)
		{
			seen_size_mb = mop_shared_buffer_cache_mb;
			sbc->size_mb = seen_size_mb;
		}
	}
	return (Size) sbc->size_mb * 1024 * 1024;
}

/* The launcher, after each reread of the configuration file: publish the setting. */
void
mop_shared_cache_publish(void)
{
	if (sbc != NULL)
		sbc->size_mb = mop_shared_buffer_cache_mb;
}

/* Remember a pin (room made first, so nothing can fail once it is taken). */
static void
sbc_reserve_pin(void)
{
	if (!exit_hooked)
	{
		before_shmem_exit(sbc_at_exit, (Datum) 0);
		RegisterXactCallback(sbc_at_xact_end, NULL);
		exit_hooked = true;
	}
	if (n_my_pins == max_my_pins)
	{
		int			n = Max(64, max_my_pins * 2);

		if (my_pins == NULL)
			my_pins = MemoryContextAlloc(TopMemoryContext, sizeof(SbcPin) * n);
		else
			my_pins = repalloc(my_pins, sizeof(SbcPin) * n);
		max_my_pins = n;
	}
}

/* (in a subtransaction, sbc->lock held) */
static void
sbc_attach_step(void *arg)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	dsa_area   *area;

	if (sbc->area == DSM_HANDLE_INVALID)
	{
		area = dsa_create(sbc->tranche);
		/* the area outlives every process attached to it */
		dsa_pin(area);
		sbc->area = dsa_get_handle(area);
	}
	else
		area = dsa_attach(sbc->area);
	dsa_pin_mapping(area);
	MemoryContextSwitchTo(old);
	sbc_area = area;
}

/*
 * Attach to the area, creating it on the server's first use; false if the
 * system's shared memory has no room for it (logged once).
 */
static bool
sbc_attach(void)
{
	static bool told = false;
	char	   *why = NULL;

	if (sbc_area != NULL)
		return true;
	/* after a failure (no shared memory then), try again a minute later */
	if (attach_failed_at != 0 &&
		!TimestampDifferenceExceeds(attach_failed_at, GetCurrentTimestamp(), 60 * 1000))
		return false;
	LWLockRegisterTranche(sbc->tranche, SBC_TRANCHE);
	LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
	(void) mop_try_in_subxact(sbc_attach_step, NULL, &why);
	/* an error there released every lock with the subtransaction */
	if (LWLockHeldByMe(sbc->lock))
		LWLockRelease(sbc->lock);
	if (why != NULL && !told)
	{
		ereport(LOG,
				(errmsg("mop: no shared memory for the server's buffer cache; buffers are cached per process"),
				 errdetail("%s", why)));
		told = true;
	}
	attach_failed_at = sbc_area == NULL ? GetCurrentTimestamp() : 0;
	return sbc_area != NULL;
}

/* Free slot i's entry (lock held, no pins). */
static void
sbc_free_slot(SbcEntry *e)
{
	if (DsaPointerIsValid(e->data))
		dsa_free(sbc_area, e->data);
	sbc->bytes -= e->len;
	e->used = e->ready = false;
	e->data = InvalidDsaPointer;
	e->len = 0;
	e->generation++;
}

/*
 * Make room for len more bytes and find a free slot (lock held): evict
 * unpinned loaded entries, least recently used first.  -1 if there is no
 * room.
 */
static int
sbc_make_room(Size len, Size limit)
{
	for (;;)
	{
		int			free_slot = -1;

		for (int i = 0; i < SBC_MAX_ENTRIES && free_slot < 0; i++)
			if (!sbc->entries[i].used)
				free_slot = i;
		if (free_slot >= 0 && sbc->bytes + len <= limit)
			return free_slot;
		if (!sbc_evict_one(0))
			return -1;
	}
}

/*
 * The tuple that holds the first chunk of TOAST value tp: its TID and
 * inserting transaction, which no other value with the same OID shares.
 * false if there is none.
 */
bool
mop_toast_identity(const struct varatt_external *tp, TransactionId *xmin, ItemPointer tid)
{
	Relation	toastrel;
	Relation   *toastidxs;
	int			n_indexes;
	int			valid;
	ScanKeyData key[2];
	SnapshotData snapshot;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	toastrel = table_open(tp->va_toastrelid, AccessShareLock);
	valid = toast_open_indexes(toastrel, AccessShareLock, &toastidxs, &n_indexes);
	init_toast_snapshot(&snapshot);
	ScanKeyInit(&key[0], (AttrNumber) 1, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(tp->va_valueid));
	ScanKeyInit(&key[1], (AttrNumber) 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(0));
	scan = systable_beginscan_ordered(toastrel, toastidxs[valid], &snapshot, 2, key);
	tup = systable_getnext_ordered(scan, ForwardScanDirection);
	found = tup != NULL;
	if (found)
	{
		*xmin = HeapTupleHeaderGetRawXmin(tup->t_data);
		*tid = tup->t_self;
	}
	systable_endscan_ordered(scan);
	toast_close_indexes(toastidxs, n_indexes, AccessShareLock);
	table_close(toastrel, AccessShareLock);
	return found;
}

/*
 * Evict the least recently used entry no one holds of at least min_len
 * bytes (lock held); false if there is none.
 */
static bool
sbc_evict_one(Size min_len)
{
	int			victim = -1;

	for (int i = 0; i < SBC_MAX_ENTRIES; i++)
	{
		SbcEntry   *e = &sbc->entries[i];

		if (e->used && e->ready && e->pins == 0 && e->len >= min_len &&
			(victim < 0 || e->last_used < sbc->entries[victim].last_used))
			victim = i;
	}
	if (victim < 0)
		return false;
	sbc_free_slot(&sbc->entries[victim]);
	sbc->evicted++;
	return true;
}

/* Evict unpinned entries until the bytes are within limit (lock held). */
static void
sbc_shrink(Size limit)
{
	while (sbc->bytes > limit && sbc_evict_one(0))
		;
}

/*
 * The bytes of the uncompressed TOAST value tp from the server's cache,
 * loaded there first if need be; NULL if the cache is off or has no room
 * (the caller reads the value itself), with *busy set when another process
 * is loading it (the caller should read it without keeping it: it will be
 * here next time).  The pointer stays valid until this process calls
 * mop_shared_cache_release() (at its transaction's end) or exits.  With
 * the bytes, *xmin and *tid (when not NULL) say the tuple of the value's
 * first chunk, just checked.
 */
const char *
mop_shared_cache_fetch(const struct varatt_external *tp, Size *len, bool *busy,
					   TransactionId *chunk_xmin, ItemPointer chunk_tid)
{
	Size		size = VARATT_EXTERNAL_GET_EXTSIZE(*tp);
	Size		limit;
	SbcEntry   *e;
	int			slot = -1;
	uint32		generation;
	dsa_pointer p;
	volatile dsa_pointer loading = InvalidDsaPointer;
	TransactionId xmin = InvalidTransactionId;
	ItemPointerData tid;
	char	   *why = NULL;

	*busy = false;
	if (sbc == NULL || !IsUnderPostmaster)
		return NULL;
	limit = sbc_limit();
	/*
	 * Over the setting (lowered, or 0, while entries were held): evict the
	 * entries no one holds down to it (their memory stays in the area, for
	 * later entries).  An unlocked read is enough to decide to look.
	 */
	if (sbc->bytes > limit && MyProc->lxid != shrunk_in && sbc_attach())
	{
		/* once per transaction: what others hold stays until they let go */
		shrunk_in = MyProc->lxid;
		LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
		sbc_shrink(limit);
		LWLockRelease(sbc->lock);
	}
	if (limit == 0 || VARATT_EXTERNAL_IS_COMPRESSED(*tp) || size == 0 || size > limit ||
		!sbc_attach())
		return NULL;
	sbc_reserve_pin();

	/* 1. an entry that is there: pin it, check it, use it */
	LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SBC_MAX_ENTRIES; i++)
	{
		e = &sbc->entries[i];
		if (e->used && e->valueid == tp->va_valueid && e->toastrelid == tp->va_toastrelid &&
			e->dbid == MyDatabaseId && e->extsize == (int32) size)
		{
			slot = i;
			break;
		}
	}
	if (slot >= 0)
	{
		bool		same;

		e = &sbc->entries[slot];
		if (!e->ready)
		{
			/* another process is loading it */
			LWLockRelease(sbc->lock);
			*busy = true;
			return NULL;
		}
		e->pins++;
		e->last_used = ++sbc->clock;
		sbc->hits++;
		generation = e->generation;
		p = e->data;
		LWLockRelease(sbc->lock);
		my_pins[n_my_pins].slot = slot;
		my_pins[n_my_pins].generation = generation;
		n_my_pins++;
		same = mop_toast_identity(tp, &xmin, &tid) &&
			TransactionIdEquals(xmin, e->chunk_xmin) && ItemPointerEquals(&tid, &e->chunk_tid);
		if (same)
		{
			*len = size;
			if (chunk_xmin)
				*chunk_xmin = xmin;
			if (chunk_tid)
				*chunk_tid = tid;
			return VARDATA(dsa_get_address(sbc_area, p));
		}
		/* an older value that had the same OID, or one moved: drop the entry, load anew */
		n_my_pins--;
		LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
		if (e->generation == generation)
		{
			e->pins--;
			sbc->hits--;
			sbc->stale++;
			if (e->pins == 0)
				sbc_free_slot(e);
			else
			{
				/* found by nobody; the first to go once nobody holds it */
				e->valueid = InvalidOid;
				e->last_used = 0;
			}
		}
		LWLockRelease(sbc->lock);
		/* (not found again: this goes on to load it) */
		return mop_shared_cache_fetch(tp, len, busy, chunk_xmin, chunk_tid);
	}

	/* 2. not there: reserve a slot and the bytes, then load outside the lock */
	slot = sbc_make_room(size, limit);
	if (slot < 0)
	{
		sbc->refused++;
		LWLockRelease(sbc->lock);
		return NULL;
	}
	e = &sbc->entries[slot];
	e->dbid = MyDatabaseId;
	e->toastrelid = tp->va_toastrelid;
	e->valueid = tp->va_valueid;
	e->extsize = (int32) size;
	e->used = true;
	e->ready = false;
	e->pins = 1;
	e->len = size;
	e->data = InvalidDsaPointer;
	e->generation++;
	e->last_used = ++sbc->clock;
	generation = e->generation;
	sbc->bytes += size;
	/* a FATAL from here on (a terminated worker) is undone at exit */
	loading_slot = slot;
	loading_generation = generation;
	loading_data = InvalidDsaPointer;
	LWLockRelease(sbc->lock);

	PG_TRY();
	{
		dsa_set_size_limit(sbc_area, limit + SBC_SLACK(limit));
		for (;;)
		{
			bool		evicted;

			p = mop_dsa_allocate_or_none(sbc_area, VARHDRSZ + size, &why);
			if (DsaPointerIsValid(p) || why != NULL)
				break;

			/*
			 * Within the count but no contiguous room in the area (the
			 * pieces that entries of other sizes left): the least recently
			 * used entry no one holds that is at least as large goes (its
			 * pages are one run, enough for this), then try again; with
			 * none, this buffer is not kept.
			 */
			LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
			evicted = sbc_evict_one(size);
			LWLockRelease(sbc->lock);
			if (!evicted)
				break;
		}
		if (DsaPointerIsValid(p))
		{
			Relation	toastrel;
			struct varlena *v = dsa_get_address(sbc_area, p);

			/* the slot's data only once loaded: freed with the slot on error */
			loading = loading_data = p;
			SET_VARSIZE(v, VARHDRSZ + size);
			toastrel = table_open(tp->va_toastrelid, AccessShareLock);
			table_relation_fetch_toast_slice(toastrel, tp->va_valueid, (int32) size, 0,
											 (int32) size, v);
			table_close(toastrel, AccessShareLock);
			if (!mop_toast_identity(tp, &xmin, &tid))
				elog(ERROR, "missing chunk number 0 for toast value %u", tp->va_valueid);
		}
	}
	PG_CATCH();
	{
		/* not loaded (a cancel, a damaged value): give the slot back, then report */
		LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
		if (DsaPointerIsValid(loading))
			dsa_free(sbc_area, loading);
		if (e->generation == generation)
			sbc_free_slot(e);
		LWLockRelease(sbc->lock);
		loading_slot = -1;
		PG_RE_THROW();
	}
	PG_END_TRY();
	LWLockAcquire(sbc->lock, LW_EXCLUSIVE);
	Assert(e->generation == generation);
	loading_slot = -1;
	if (!DsaPointerIsValid(p))
	{
		sbc_free_slot(e);
		sbc->refused++;
		LWLockRelease(sbc->lock);
		if (why && !told_no_memory)
		{
			told_no_memory = true;
			ereport(LOG,
					(errmsg("mop: no shared memory for the server's buffer cache; buffers are cached per process"),
					 errdetail("%s", why)));
		}
		return NULL;
	}
	e->data = p;
	e->chunk_xmin = xmin;
	e->chunk_tid = tid;
	e->ready = true;
	sbc->loads++;
	LWLockRelease(sbc->lock);
	my_pins[n_my_pins].slot = slot;
	my_pins[n_my_pins].generation = generation;
	n_my_pins++;
	*len = size;
	if (chunk_xmin)
		*chunk_xmin = xmin;
	if (chunk_tid)
		*chunk_tid = tid;
	return VARDATA(dsa_get_address(sbc_area, p));
}

/*
 * The loaded entries of the cache (at most max), in no order, and a number
 * that changes whenever the set of entries may have (prewarm.c keeps the
 * list across restarts).  -1 when the cache is not there.
 */
int
mop_shared_cache_list(MopCacheItem *items, int max, int64 *signature)
{
	int			n = 0;

	if (sbc == NULL)
		return -1;
	LWLockAcquire(sbc->lock, LW_SHARED);
	*signature = sbc->loads + sbc->evicted + sbc->stale;
	for (int i = 0; i < SBC_MAX_ENTRIES && n < max; i++)
	{
		SbcEntry   *e = &sbc->entries[i];

		if (e->used && e->ready && OidIsValid(e->valueid))
		{
			items[n].dbid = e->dbid;
			items[n].toastrelid = e->toastrelid;
			items[n].valueid = e->valueid;
			items[n].extsize = e->extsize;
			items[n].last_used = e->last_used;
			n++;
		}
	}
	LWLockRelease(sbc->lock);
	return n;
}

/* Bytes the cache can take without evicting anything (0 when it is off or absent). */
Size
mop_shared_cache_room(void)
{
	Size		limit,
				bytes;

	if (sbc == NULL)
		return 0;
	limit = sbc_limit();
	bytes = sbc->bytes;
	return limit > bytes ? limit - bytes : 0;
}

/* The most entries the cache holds. */
int
mop_shared_cache_max_entries(void)
{
	return SBC_MAX_ENTRIES;
}

/*
 * mop.shared_buffer_cache() -> (size_mb, entries, bytes, pinned, hits,
 * loads, refused, evicted, stale): the server's cache; NULL values when
 * mop is not in shared_preload_libraries.
 */
Datum
mop_shared_buffer_cache(PG_FUNCTION_ARGS)
{
	TupleDesc	td;
	Datum		v[9];
	bool		n[9];
	int32		entries = 0,
				pinned = 0;

	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	td = BlessTupleDesc(td);
	memset(n, 0, sizeof(n));
	v[0] = Int32GetDatum(sbc != NULL ? (int32) (sbc_limit() / (1024 * 1024)) : mop_shared_buffer_cache_mb);
	if (sbc == NULL)
	{
		for (int i = 1; i < 9; i++)
			n[i] = true;
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, v, n)));
	}
	LWLockAcquire(sbc->lock, LW_SHARED);
	for (int i = 0; i < SBC_MAX_ENTRIES; i++)
	{
		if (sbc->entries[i].used)
		{
			entries++;
			if (sbc->entries[i].pins > 0)
				pinned++;
		}
	}
	v[1] = Int32GetDatum(entries);
	v[2] = Int64GetDatum((int64) sbc->bytes);
	v[3] = Int32GetDatum(pinned);
	v[4] = Int64GetDatum(sbc->hits);
	v[5] = Int64GetDatum(sbc->loads);
	v[6] = Int64GetDatum(sbc->refused);
	v[7] = Int64GetDatum(sbc->evicted);
	v[8] = Int64GetDatum(sbc->stale);
	LWLockRelease(sbc->lock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, v, n)));
}
