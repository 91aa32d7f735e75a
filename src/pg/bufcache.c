/*
 * bufcache.c -- a backend-local cache of detoasted training buffers.
 *
 * mop.buffers stores x and y uncompressed out of line (TOAST, 2 kB chunks).
 * Reading a 6 MB buffer means thousands of index lookups; done every epoch
 * this costs a noticeable fraction of training time.  A training backend
 * (mop_train, and later each MOP worker, which owns its partitions) reads the
 * same buffers epoch after epoch, so it keeps them in memory.
 *
 * The key is the TOAST pointer (toast relation, value OID) plus the value's
 * size.  TOAST values are immutable: a rewritten buffer gets a new value
 * OID.  But an OID can go to a new value once the old one is gone (after
 * the OID counter wraps), and VACUUM FULL moves values, so an entry also
 * records the tuple holding its value's first chunk, and each transaction's
 * first use checks it (one index probe); an entry that fails is read
 * again.  The cache fills up to mop.buffer_cache_mb and then stops
 * admitting: epochs scan buffers cyclically, and for a cyclic
 * scan larger than the cache "keep what you have" beats LRU, which would
 * evict every buffer just before it is needed again.  Values stored inline
 * (small buffers) are simply detoasted.  mop.buffer_cache_reset() empties it.
 *
 * With mop preloaded, a buffer missing here is looked up in the server's
 * cache first (shared_bufcache.c): one found or loaded there is used in
 * place, remembered here only until the transaction ends (the server's
 * cache may evict it after that), and costs this cache nothing.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/xact.h"
#include "fmgr.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "mop.h"

PG_FUNCTION_INFO_V1(mop_buffer_cache_reset);

/* GUC mop.buffer_cache_mb */

typedef struct BufKey
{
	Oid			toastrelid;
	Oid			valueid;
	int32		extsize;
} BufKey;

typedef struct BufEntry
{
	BufKey		key;
	Size		len;
	char	   *data;			/* VARDATA of the detoasted value, in cxt, or
								 * the server's cache's bytes */
	MemoryContext cxt;			/* the value's own context (under cache_cxt) */
	bool		shared;			/* in the server's cache: until the transaction ends */
	TransactionId xmin;			/* the tuple holding the value's first chunk, */
	ItemPointerData tid;		/* ... for a value cached here */
	uint64		checked;		/* the transaction (xact_count) that last checked it */
} BufEntry;

static HTAB *cache = NULL;
static bool xact_hooked = false;
static MemoryContext cache_cxt = NULL;
static Size cache_bytes = 0;
static int	n_shared = 0;		/* entries that point into the server's cache */
static uint64 xact_count = 1;	/* transactions ended in this process, plus one */

/*
 * At a transaction's end, forget the buffers of the server's cache (which
 * lets go of them then: shared_bufcache.c): held only while a statement
 * may use them, they can be evicted for others between transactions.
 */
static void
forget_shared(XactEvent event, void *arg)
{
	HASH_SEQ_STATUS seq;
	BufEntry   *e;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	xact_count++;
	if (n_shared == 0 || cache == NULL)
		return;
	hash_seq_init(&seq, cache);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->shared)
			hash_search(cache, &e->key, HASH_REMOVE, NULL);
	}
	n_shared = 0;
}

/* The key of TOAST value tp. */
static void
buf_key(const struct varatt_external *tp, BufKey *key)
{
	memset(key, 0, sizeof(*key));
	key->toastrelid = tp->va_toastrelid;
	key->valueid = tp->va_valueid;
	key->extsize = VARATT_EXTERNAL_GET_EXTSIZE(*tp);
}

/* Create the (empty) cache. */
static void
cache_init(void)
{
	HASHCTL		ctl;

	cache_cxt = AllocSetContextCreate(TopMemoryContext, "mop buffer cache",
									  ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(BufKey);
	ctl.entrysize = sizeof(BufEntry);
	ctl.hcxt = cache_cxt;
	cache = hash_create("mop buffer cache", 1024, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	cache_bytes = 0;
	if (!xact_hooked)
	{
		RegisterXactCallback(forget_shared, NULL);
		xact_hooked = true;
	}
}

/* Drop every cached buffer (and this process's hold on the server's). */
void
mop_buffer_cache_clear(void)
{
	if (cache_cxt)
		MemoryContextDelete(cache_cxt);
	cache_cxt = NULL;
	cache = NULL;
	cache_bytes = 0;
	n_shared = 0;
	mop_shared_cache_release();
}

/*
 * The bytes of bytea datum d and their length.  The pointer is 4-byte
 * aligned and stays valid at least until the current memory context is
 * reset or the transaction ends, whichever comes first (values cached here
 * live until mop.buffer_cache_reset(), the server's cache's until the
 * transaction ends).
 */
const char *
mop_buffer_fetch(Datum d, Size *len)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);
	struct varatt_external tp;
	BufKey		key;
	BufEntry   *e;
	bool		found;
	bytea	   *b;

	if (!VARATT_IS_EXTERNAL_ONDISK(v) || mop_buffer_cache_mb <= 0)
	{
		b = DatumGetByteaP(d);
		*len = VARSIZE(b) - VARHDRSZ;
		return VARDATA(b);
	}
	VARATT_EXTERNAL_GET_POINTER(tp, v);
	buf_key(&tp, &key);
	if (cache == NULL)
		cache_init();
	e = hash_search(cache, &key, HASH_FIND, NULL);
	if (e != NULL && !e->shared && e->checked != xact_count)
	{
		TransactionId xmin;
		ItemPointerData tid;

		/*
		 * Once per transaction: is it still that value?  Its OID may have
		 * gone to a new value of the same size (after the OID counter
		 * wrapped), or a rewrite moved it.
		 */
		if (mop_toast_identity(&tp, &xmin, &tid) && TransactionIdEquals(xmin, e->xmin) &&
			ItemPointerEquals(&tid, &e->tid))
			e->checked = xact_count;
		else
		{
			ereport(DEBUG1,
					(errmsg_internal("mop: cached buffer (TOAST value %u) no longer matches its stored value; read again",
									 tp.va_valueid)));
			MemoryContextDelete(e->cxt);
			cache_bytes -= e->len;
			hash_search(cache, &key, HASH_REMOVE, NULL);
			e = NULL;
		}
	}
	if (e != NULL)
	{
		*len = e->len;
		return e->data;
	}

	/* the server's cache (shared_bufcache.c), which holds it in place */
	{
		bool		busy;
		TransactionId xmin;
		ItemPointerData tid;
		const char *shared = mop_shared_cache_fetch(&tp, len, &busy, &xmin, &tid);

		if (shared != NULL)
		{
			e = hash_search(cache, &key, HASH_ENTER, &found);
			e->len = *len;
			e->data = (char *) shared;
			e->shared = true;
			e->cxt = NULL;
			e->xmin = xmin;
			e->tid = tid;
			e->checked = xact_count;
			n_shared++;
			return shared;
		}
		if (busy)
		{
			/* being loaded by another process: read it, keep nothing */
			b = DatumGetByteaP(d);
			*len = VARSIZE(b) - VARHDRSZ;
			return VARDATA(b);
		}
	}

	/*
	 * Admission by the detoasted size: a value stored compressed (anyone who
	 * may write mop.buffers can store one) is far larger in memory than on
	 * disk.
	 */
	if (cache_bytes + (Size) (tp.va_rawsize - VARHDRSZ) > (Size) mop_buffer_cache_mb * 1024 * 1024)
	{
		/* full: no admission */
		b = DatumGetByteaP(d);
		*len = VARSIZE(b) - VARHDRSZ;
		return VARDATA(b);
	}

	/*
	 * Detoast straight into the value's own memory (no second copy), in a
	 * context that belongs to the current one until the entry is made: a
	 * read cut short (a cancel, a lock timeout, a damaged value) leaves
	 * nothing behind in the cache.
	 */
	{
		MemoryContext vcxt = AllocSetContextCreate(CurrentMemoryContext, "mop cached buffer",
												   ALLOCSET_SMALL_SIZES);
		MemoryContext old = MemoryContextSwitchTo(vcxt);
		TransactionId xmin = InvalidTransactionId;
		ItemPointerData tid;
		bool		identified;

		b = DatumGetByteaP(d);
		MemoryContextSwitchTo(old);
		ItemPointerSetInvalid(&tid);
		identified = mop_toast_identity(&tp, &xmin, &tid);
		e = hash_search(cache, &key, HASH_ENTER, &found);
		/* nothing below can fail */
		MemoryContextSetParent(vcxt, cache_cxt);
		*len = VARSIZE(b) - VARHDRSZ;
		e->len = *len;
		e->data = VARDATA(b);	/* 4-byte aligned, as floats need */
		e->cxt = vcxt;
		e->shared = false;
		e->xmin = xmin;
		e->tid = tid;
		/* (no first chunk cannot be: checked, and read again, next time) */
		e->checked = identified ? xact_count : 0;
		cache_bytes += *len;
		return e->data;
	}
}

/*
 * The identity of a buffer stored out of line: its TOAST value and the
 * tuple of that value's first chunk, so that a value that got the OID of
 * an older one (after the OID counter wrapped) or was moved by a rewrite
 * (VACUUM FULL) has another identity.  False for values stored inline,
 * which have none, and for a value whose first chunk is not found.  The
 * GPU's resident rows are keyed by it.  A buffer fetched in this
 * transaction (mop_buffer_fetch) was checked then: no second probe.
 */
bool
mop_buffer_identity(Datum d, MopBufId *id)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(d);
	struct varatt_external tp;
	BufKey		key;
	BufEntry   *e;

	if (!VARATT_IS_EXTERNAL_ONDISK(v))
		return false;
	VARATT_EXTERNAL_GET_POINTER(tp, v);
	memset(id, 0, sizeof(*id));
	id->toastrelid = tp.va_toastrelid;
	id->valueid = tp.va_valueid;
	id->extsize = VARATT_EXTERNAL_GET_EXTSIZE(tp);
	buf_key(&tp, &key);
	if (cache != NULL && (e = hash_search(cache, &key, HASH_FIND, NULL)) != NULL &&
		e->checked == xact_count)
	{
		id->chunk_xmin = e->xmin;
		id->chunk_tid = e->tid;
		return true;
	}
	return mop_toast_identity(&tp, &id->chunk_xmin, &id->chunk_tid);
}

/* mop.buffer_cache_reset() -> bigint: host bytes released (GPU rows are freed too) */
Datum
mop_buffer_cache_reset(PG_FUNCTION_ARGS)
{
	int64		bytes = (int64) cache_bytes;

	mop_buffer_cache_clear();
	mop_gpu_cache_clear();
	PG_RETURN_INT64(bytes);
}
