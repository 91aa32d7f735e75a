/*
 * util.c -- error reporting and counted allocation for the engine.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

/* Name of a status code, for messages. */
const char *
nn_status_name(nn_status s)
{
	switch (s)
	{
		case NN_OK:
			return "ok";
		case NN_ERR_INVALID:
			return "invalid argument";
		case NN_ERR_SHAPE:
			return "shape mismatch";
		case NN_ERR_NOMEM:
			return "out of memory";
		case NN_ERR_BLAS:
			return "BLAS unavailable";
		case NN_ERR_TRUNCATED:
			return "truncated blob";
		case NN_ERR_MAGIC:
			return "not a mop model";
		case NN_ERR_VERSION:
			return "unsupported format version";
		case NN_ERR_CHECKSUM:
			return "checksum mismatch";
		case NN_ERR_CORRUPT:
			return "corrupt blob";
		case NN_DIVERGED:
			return "diverged";
		case NN_ERR_STATE:
			return "call out of order";
	}
	return "unknown status";
}

/* Record a failure in err (if given) and return its status. */
nn_status
nn_fail(nn_error *err, nn_status s, const char *fmt,...)
{
	if (err)
	{
		va_list		ap;

		err->status = s;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return s;
}

/* Zeroed, 64-byte aligned allocation charged to model m; NULL on failure. */
void *
nn_model_alloc(nn_model *m, size_t bytes)
{
	void	   *p = NULL;

	if (bytes == 0)
		bytes = 1;
	if (posix_memalign(&p, 64, bytes) != 0)
		return NULL;
	memset(p, 0, bytes);
	if (m)
		m->allocs++;
	return p;
}
