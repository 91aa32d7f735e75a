/*
 * prewarm.c -- the server's buffer cache loaded again after a restart, as
 * pg_prewarm's autoprewarm does for shared buffers.
 *
 * The server's cache (shared_bufcache.c) lives in shared memory and is
 * empty after every start, so the first process to train on a dataset pays
 * for reading it out of TOAST.  With mop.prewarm_buffer_cache on (the
 * default), mop's launcher writes the list of the cache's entries -- the
 * database, TOAST relation, value OID and size of each, most recently used
 * first -- to mop_buffer_cache.list in the data directory at shutdown and
 * every five minutes when the entries changed (so that a crash leaves a
 * recent list; a shutdown that comes before the prewarm below has ended
 * keeps the list it was loading).  After the next start, once every
 * database's recovery worker has resumed its interrupted runs, a prewarm
 * worker in each database the list names loads the buffers of its
 * mop.buffers that the list names, the most recently used that fit in the
 * room the cache has then.
 *
 * The list only says what to read: a value that is gone is skipped, and
 * each entry records and checks the tuple of its value's first chunk as
 * any load does, so an entry whose OID now names another value is never
 * used for it.  Only values of mop.buffers' own TOAST relation are read.
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "access/detoast.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/snapmgr.h"

#include "mop.h"

#define LIST_FILE		"mop_buffer_cache.list"
#define LIST_TMP		"mop_buffer_cache.list.tmp"
#define LIST_HEADER		"mop buffer cache list 1"

/* most recently used first */
static int
item_cmp(const void *a, const void *b)
{
	const MopCacheItem *x = a,
			   *y = b;

	return x->last_used < y->last_used ? 1 : (x->last_used > y->last_used ? -1 : 0);
}

/*
 * Write the list of the cache's entries (the launcher: at shutdown, with
 * force, and every few minutes when they changed).  Failures are logged:
 * the list is only a hint.
 */
void
mop_prewarm_dump(bool force)
{
	static int64 written = -1;
	int			max = mop_shared_cache_max_entries();
	MopCacheItem *items;
	int64		signature;
	int			n;
	FILE	   *f;

	items = palloc(sizeof(MopCacheItem) * max);
	n = mop_shared_cache_list(items, max, &signature);
	if (n < 0 || (!force && signature == written))
	{
		pfree(items);
		return;
	}
	qsort(items, n, sizeof(MopCacheItem), item_cmp);
	f = AllocateFile(LIST_TMP, PG_BINARY_W);
	if (f == NULL)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("mop could not write \"%s\": %m", LIST_TMP)));
		pfree(items);
		return;
	}
	fprintf(f, "%s\n", LIST_HEADER);
	for (int i = 0; i < n; i++)
		fprintf(f, "%u %u %u %d\n", items[i].dbid, items[i].toastrelid, items[i].valueid,
				items[i].extsize);
	pfree(items);
	if (ferror(f) | (FreeFile(f) != 0))
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("mop could not write \"%s\": %m", LIST_TMP)));
		unlink(LIST_TMP);
		return;
	}
	if (durable_rename(LIST_TMP, LIST_FILE, LOG) == 0)
		written = signature;
}

typedef struct LoadStep
{
	MopCacheItem item;
	bool		loaded;
	bool		refused;
} LoadStep;

/* (in a subtransaction: a value that is gone is an error here, not the caller's) */
static void
load_step(void *arg)
{
	LoadStep   *s = (LoadStep *) arg;
	struct varatt_external tp;
	Size		len;
	bool		busy;

	/* the pointer of an uncompressed value of that size */
	tp.va_rawsize = s->item.extsize + VARHDRSZ;
	tp.va_extinfo = (uint32) s->item.extsize;
	tp.va_valueid = s->item.valueid;
	tp.va_toastrelid = s->item.toastrelid;
	s->loaded = mop_shared_cache_fetch(&tp, &len, &busy, NULL, NULL) != NULL;
	/* busy: someone is loading it; otherwise the cache has no room (or is off) */
	s->refused = !s->loaded && !busy;
}

/*
 * The list's entries (most recently used first; at most max), of database
 * db when valid, else of every database; -1 without a list.  A damaged line
 * ends the list: what came before it is still good.
 */
static int
read_list(Oid db, MopCacheItem *items, int max)
{
	FILE	   *f;
	char		line[128];
	int			n = 0;

	f = AllocateFile(LIST_FILE, PG_BINARY_R);
	if (f == NULL)
		return -1;
	if (fgets(line, sizeof(line), f) != NULL && strncmp(line, LIST_HEADER, strlen(LIST_HEADER)) == 0)
	{
		while (n < max && fgets(line, sizeof(line), f) != NULL)
		{
			MopCacheItem it;

			memset(&it, 0, sizeof(it));
			if (sscanf(line, "%u %u %u %d", &it.dbid, &it.toastrelid, &it.valueid, &it.extsize) != 4)
				break;
			/* (a size the pointer of an uncompressed value cannot carry is no entry of the cache) */
			if (it.extsize <= 0 || (uint32) it.extsize > VARLENA_EXTSIZE_MASK)
				continue;
			if (!OidIsValid(db) || it.dbid == db)
				items[n++] = it;
		}
	}
	FreeFile(f);
	return n;
}

/* The databases the list names (the launcher: where to start a prewarm worker). */
List *
mop_prewarm_databases(void)
{
	int			max = mop_shared_cache_max_entries();
	MopCacheItem *items = palloc(sizeof(MopCacheItem) * max);
	int			n = read_list(InvalidOid, items, max);
	List	   *dbs = NIL;

	for (int i = 0; i < n; i++)
		dbs = list_append_unique_oid(dbs, items[i].dbid);
	pfree(items);
	return dbs;
}

/*
 * Load the buffers of this database's mop.buffers (TOAST relation
 * toastrelid) that the list names, as many of the most recently used as
 * the cache has room for without evicting anything (a resumed run's or a
 * session's entries, loaded since the start, stay); the least recent of
 * them first, so that the most recent end up the last to be evicted (a
 * prewarm worker, outside a transaction: one transaction per buffer, so
 * each is let go of at once).  How many were loaded.
 */
int
mop_prewarm_load(Oid toastrelid)
{
	int			max = mop_shared_cache_max_entries();
	MopCacheItem *items;
	int			n,
				take = 0,
				loaded = 0;
	Size		room = mop_shared_cache_room(),
				sum = 0;

	if (!mop_prewarm_buffer_cache || !OidIsValid(toastrelid) || room == 0)
		return 0;
	items = palloc(sizeof(MopCacheItem) * max);
	n = read_list(MyDatabaseId, items, max);
	for (int i = 0; i < n; i++)
	{
		if (items[i].toastrelid != toastrelid || sum + (Size) items[i].extsize > room)
			continue;
		sum += items[i].extsize;
		items[take++] = items[i];
	}

	for (int i = take - 1; i >= 0; i--)
	{
		LoadStep	s;
		char	   *why = NULL;

		CHECK_FOR_INTERRUPTS();
		memset(&s, 0, sizeof(s));
		s.item = items[i];
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		if (!mop_try_in_subxact(load_step, &s, &why))
			ereport(DEBUG1,
					(errmsg_internal("mop: buffer (TOAST value %u) not loaded again: %s",
									 s.item.valueid, why ? why : "")));
		PopActiveSnapshot();
		CommitTransactionCommand();
		if (s.loaded)
			loaded++;
		else if (s.refused)
			break;				/* full after all (others loaded meanwhile) */
	}
	pfree(items);
	return loaded;
}
