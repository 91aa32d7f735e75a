/*
 * mop.c -- module entry point, GUCs, and the helpers every other file of the
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

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "mop.h"
#include "run.h"

PG_MODULE_MAGIC;

int			mop_blas_threads = 1;

static int	blas_threads_set = 0;	/* thread count last given to the engine */

void		_PG_init(void);

/* Define the mop.* GUCs. */
void
_PG_init(void)
{
	DefineCustomIntVariable("mop.blas_threads",
							"Threads used by BLAS in each backend that trains.",
							"Keep 1 when several mop workers share the cores.",
							&mop_blas_threads,
							1, 1, 256,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mop.buffer_cache_mb",
							"Memory for detoasted training buffers kept across epochs in each backend.",
							"0 disables the cache.",
							&mop_buffer_cache_mb,
							256, 0, INT_MAX / 1024,
							PGC_USERSET, GUC_UNIT_MB,
							NULL, NULL, NULL);
	mop_run_define_gucs();
	mop_gpu_define_gucs();
	MarkGUCPrefixReserved("mop");
}

/* Load BLAS (first call) and apply mop.blas_threads if it changed. */
void
mop_blas_ensure(void)
{
	nn_error	err;
	nn_status	st;

	if (blas_threads_set == mop_blas_threads)
		return;
	st = nn_blas_init(mop_blas_threads, &err);
	if (st != NN_OK)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not initialise BLAS: %s", err.msg),
				 errhint("Install OpenBLAS (Debian package libopenblas0).")));
	blas_threads_set = mop_blas_threads;
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

/* Deserialize a model blob into a handle owned by cxt. */
ModelHandle *
mop_model_from_blob(bytea *blob, MemoryContext cxt)
{
	ModelHandle *h;
	nn_error	err;
	nn_status	st;

	mop_blas_ensure();
	h = mop_model_handle(cxt);
	st = nn_model_deserialize(VARDATA_ANY(blob), VARSIZE_ANY_EXHDR(blob),
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
