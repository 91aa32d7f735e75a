/*
 * mop.c -- module entry point and the helpers every other file of the
 * glue uses to hold engine models safely.
 *
 * Engine models are malloc'd by src/nn.  A ModelHandle lives in a PostgreSQL
 * memory context and registers a reset callback on it, so whichever way the
 * context goes away (normal end, ERROR, cancel) the model is freed.  BLAS is
 * initialised lazily in the backend that trains, never in _PG_init, so that
 * loading the library (e.g. via shared_preload_libraries in the postmaster)
 * starts no BLAS thread pool.
 */
#include "postgres.h"

#include <sched.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "mop.h"
#include "run.h"

PG_MODULE_MAGIC;

static int	blas_threads_set = 0;	/* thread count last given to the engine */

void		_PG_init(void);

/*
 * Define the mop.* settings and, when preloaded, register the launcher and
 * ask for the server's buffer cache.
 */
void
_PG_init(void)
{
	mop_define_gucs();
	mop_recovery_register_launcher();
	mop_shared_cache_request();
}

/*
 * A background worker of mop's, not started yet: entry point function of
 * mop.so, type (and name) type, connects to a database once recovery has
 * finished, never restarted.  The caller changes what differs.
 */
void
mop_bgworker_init(BackgroundWorker *bgw, const char *function, const char *type)
{
	memset(bgw, 0, sizeof(*bgw));
	bgw->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw->bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw->bgw_library_name, BGW_MAXLEN, "mop");
	snprintf(bgw->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(bgw->bgw_name, BGW_MAXLEN, "%s", type);
	snprintf(bgw->bgw_type, BGW_MAXLEN, "%s", type);
}

/*
 * In a background worker, right after connecting: resolve every name in
 * pg_catalog (and temporary objects last), whatever search_path the
 * database or role sets.  The worker runs SQL on behalf of the role that
 * started the run, possibly a superuser, in a database whose owner could
 * otherwise put an operator or function of their own in front of
 * pg_catalog's.
 */
void
mop_pin_search_path(void)
{
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * In a process of mop's that moves model states around (a run's worker):
 * keep the memory of freed large allocations.  PostgreSQL
 * allocates every chunk above 8 kB with malloc, and glibc gives one above
 * its mmap threshold (and the top of the heap above its trim threshold)
 * back to the kernel when it is freed; a sub-epoch allocates and frees
 * several copies of the state, each then paid for again in page faults and
 * zeroed pages (a third of a 2.8 MB state's hand-off, measured).  A state up
 * to 32 MB is kept in the heap, and up to 256 MB of free heap is kept for
 * the next sub-epoch; larger ones are mapped and unmapped as before.
 */
void
mop_keep_heap_memory(void)
{
#ifdef __GLIBC__
	(void) mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
	(void) mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
#endif
}

/* The cores this process may run on (its CPU affinity, else the online CPUs). */
int
mop_cores_available(void)
{
	cpu_set_t	set;
	long		n;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int) Min(n, 1024) : 1;
}

/*
 * The BLAS threads of one training process: mop.blas_threads if above 0
 * (its older name), else mop.threads_per_worker if above 0, else the cores
 * shared out: among local_workers processes (a run's workers on this
 * server), or, in one of mop's connections from a coordinator (a
 * segment's session, which asks for heartbeats), among the
 * mop.workers_per_segment that coordinator sets there; a single call
 * (mop_train, a prediction) gets them all.  At most 64, OpenBLAS's own
 * limit.
 */
int
mop_threads_for(int local_workers)
{
	int			share;

	if (mop_blas_threads > 0)
		return mop_blas_threads;
	if (mop_threads_per_worker > 0)
		return mop_threads_per_worker;
	if (local_workers > 0)
		share = local_workers;
	else if (mop_heartbeat_ms > 0)
		share = Max(mop_workers_per_segment, 1);
	else
		share = 1;
	return Max(1, Min(mop_cores_available() / share, 64));
}

/* Load BLAS (first call) and give it `threads` threads if it has others. */
void
mop_blas_set(int threads)
{
	nn_error	err;
	nn_status	st;

	if (blas_threads_set == threads)
		return;
	st = nn_blas_init(threads, &err);
	if (st != NN_OK)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not initialise BLAS: %s", err.msg),
				 errhint("Install OpenBLAS (Debian package libopenblas0).")));
	blas_threads_set = threads;
}

/* Load BLAS (first call) and apply this process's thread count if it changed. */
void
mop_blas_ensure(void)
{
	mop_blas_set(mop_threads_for(0));
}

/* Report an engine failure as an ERROR with a fitting SQLSTATE. */
void
mop_nn_error(nn_status st, const nn_error *err, const char *what)
{
	int			code;
	const char *msg = (err && err->msg[0]) ? err->msg : nn_status_name(st);

	switch (st)
	{
		case NN_ERR_INVALID:
			code = ERRCODE_INVALID_PARAMETER_VALUE;
			break;
		case NN_ERR_SHAPE:
			code = ERRCODE_DATA_EXCEPTION;
			break;
		case NN_ERR_NOMEM:
			code = ERRCODE_OUT_OF_MEMORY;
			break;
		case NN_ERR_BLAS:
			code = ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
			break;
		case NN_ERR_TRUNCATED:
		case NN_ERR_MAGIC:
		case NN_ERR_VERSION:
		case NN_ERR_CHECKSUM:
		case NN_ERR_CORRUPT:
			code = ERRCODE_DATA_CORRUPTED;
			break;
		case NN_DIVERGED:
			code = ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;
			break;
		default:
			code = ERRCODE_INTERNAL_ERROR;
			break;
	}
	ereport(ERROR,
			(errcode(code),
			 errmsg("%s: %s", what, msg)));
	pg_unreachable();
}

/* Memory context callback: free the handle's model, if any. */
static void
model_handle_free(void *arg)
{
	ModelHandle *h = (ModelHandle *) arg;

	if (h->model)
		nn_model_free(h->model);
	h->model = NULL;
}

/* A handle in cxt whose model (set later) is freed with cxt. */
ModelHandle *
mop_model_handle(MemoryContext cxt)
{
	ModelHandle *h = MemoryContextAllocZero(cxt, sizeof(ModelHandle));

	h->cb.func = model_handle_free;
	h->cb.arg = h;
	MemoryContextRegisterResetCallback(cxt, &h->cb);
	return h;
}

/* Free the handle's model now (the callback then does nothing). */
void
mop_model_release(ModelHandle *h)
{
	model_handle_free(h);
}

/*
 * Refuse a model whose working memory (the engine knows it before
 * allocating anything) is over mop.max_model_memory: a clean 54000 error
 * naming the need and the limit instead of a backend growing by gigabytes.
 */
void
mop_check_model_memory(const nn_spec *spec)
{
	nn_memory	mem;
	nn_error	err;

	if (mop_max_model_memory_mb <= 0)
		return;
	if (nn_spec_memory(spec, &mem, &err) != NN_OK)
		return;					/* invalid specs are reported by whoever builds them */
	if (mem.total > (size_t) mop_max_model_memory_mb * 1024 * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model needs %zu MB of memory, more than mop.max_model_memory (%d MB)",
						(mem.total + (1 << 20) - 1) >> 20, mop_max_model_memory_mb),
				 errdetail("Weights %zu MB, gradients %zu MB, optimizer state %zu MB, activations of one batch %zu MB.",
						   mem.params >> 20, mem.grads >> 20, mem.optimizer >> 20,
						   mem.workspace >> 20),
				 errhint("Use smaller layers or a smaller batch_size, or raise mop.max_model_memory.")));
}

/* Deserialize a model blob into a handle owned by cxt. */
ModelHandle *
mop_model_from_blob(bytea *blob, MemoryContext cxt)
{
	ModelHandle *h;
	nn_error	err;
	nn_status	st;
	nn_spec		spec;

	/*
	 * the blob's spec says how much the model will take: check before
	 * building it (nn_blob_spec verifies the checksum, so the decoding need
	 * not compute it again)
	 */
	st = nn_blob_spec(VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob), &spec, &err);
	if (st != NN_OK)
		mop_nn_error(st, &err, "invalid model state");
	mop_check_model_memory(&spec);
	mop_blas_ensure();
	h = mop_model_handle(cxt);
	st = nn_model_deserialize_verified(VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob),
									   &h->model, &err);
	if (st != NN_OK)
		mop_nn_error(st, &err, "invalid model state");
	return h;
}

/* Serialize a model into a palloc'd bytea. */
bytea *
mop_model_to_blob(const nn_model *m)
{
	size_t		cap = nn_model_blob_size(m);
	size_t		len = 0;
	bytea	   *b;
	nn_error	err;
	nn_status	st;

	if (cap > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("model state of %zu bytes is too large for a bytea", cap)));
	b = palloc(cap + VARHDRSZ);
	st = nn_model_serialize(m, VARDATA(b), cap, &len, &err);
	if (st != NN_OK)
		mop_nn_error(st, &err, "could not serialize model");
	SET_VARSIZE(b, len + VARHDRSZ);
	return b;
}

/* Name of a target kind as stored in mop.datasets. */
const char *
mop_target_kind_name(MopTargetKind k)
{
	switch (k)
	{
		case MOP_TARGET_CLASS:
			return "class";
		case MOP_TARGET_BINARY:
			return "binary";
		case MOP_TARGET_REGRESSION:
			return "regression";
	}
	return "?";
}
