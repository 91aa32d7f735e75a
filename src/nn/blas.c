/*
 * blas.c -- lazy OpenBLAS binding.
 *
 * The engine needs one BLAS routine, sgemm.  OpenBLAS starts its thread pool
 * in a library constructor, so linking it into the extension would start
 * threads in whichever process loads mop first -- with
 * shared_preload_libraries that is the postmaster, and forked backends would
 * inherit a pool whose threads do not exist.  So the engine opens OpenBLAS
 * with dlopen on first use, in the process that trains, after setting
 * OPENBLAS_NUM_THREADS to the requested thread count.  One thread is the
 * default: mop's parallelism comes from workers, one model per core.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn_internal.h"

typedef void (*sgemm_fn) (int order, int ta, int tb, int m, int n, int k,
						  float alpha, const float *a, int lda,
						  const float *b, int ldb, float beta,
						  float *c, int ldc);

static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static void *blas_handle;
static sgemm_fn blas_sgemm;
static void (*blas_set_threads) (int);
static char *(*blas_get_config) (void);
static int	blas_threads = 1;
static char blas_desc[200] = "BLAS not loaded";

/* Open OpenBLAS if not yet open; caller holds blas_lock. */
static nn_status
blas_open(int threads, nn_error *err)
{
	static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
	char		buf[16];

	if (blas_handle)
		return NN_OK;
	snprintf(buf, sizeof(buf), "%d", threads);
	setenv("OPENBLAS_NUM_THREADS", buf, 1);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !blas_handle; i++)
		blas_handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!blas_handle)
		return nn_fail(err, NN_ERR_BLAS, "could not load OpenBLAS (libopenblas.so.0): %s",
					   dlerror());
	blas_sgemm = (sgemm_fn) dlsym(blas_handle, "cblas_sgemm");
	blas_set_threads = (void (*) (int)) dlsym(blas_handle, "openblas_set_num_threads");
	blas_get_config = (char *(*) (void)) dlsym(blas_handle, "openblas_get_config");
	if (!blas_sgemm)
	{
		dlclose(blas_handle);
		blas_handle = NULL;
		return nn_fail(err, NN_ERR_BLAS, "OpenBLAS has no cblas_sgemm");
	}
	return NN_OK;
}

/* Load OpenBLAS (if needed) and set its thread count. */
nn_status
nn_blas_init(int threads, nn_error *err)
{
	nn_status	s;
	sigset_t	all,
				old;

	if (threads < 1 || threads > 1024)
		return nn_fail(err, NN_ERR_INVALID, "BLAS thread count %d is out of range 1..1024",
					   threads);
	pthread_mutex_lock(&blas_lock);
	/*
	 * OpenBLAS starts its pool threads while it loads and when its thread
	 * count grows; they inherit this thread's signal mask.  Started with
	 * every signal blocked, they never take the process's signals, whose
	 * handlers (PostgreSQL's) expect to run in the thread that owns them.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	s = blas_open(threads, err);
	if (s == NN_OK && blas_set_threads)
		blas_set_threads(threads);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (s == NN_OK)
	{
		blas_threads = threads;
		snprintf(blas_desc, sizeof(blas_desc), "%s (%d thread%s)",
				 blas_get_config ? blas_get_config() : "OpenBLAS",
				 threads, threads == 1 ? "" : "s");
	}
	pthread_mutex_unlock(&blas_lock);
	return s;
}

/* Make sure sgemm is callable, loading with the current thread count. */
nn_status
nn_blas_ensure(nn_error *err)
{
	if (blas_sgemm)
		return NN_OK;
	return nn_blas_init(blas_threads, err);
}

/* The loaded BLAS's own description of its build (the kernels it picked for this CPU). */
const char *
nn_blas_config(void)
{
	const char *c;

	if (!blas_handle)
		return "BLAS not loaded";
	c = blas_get_config ? blas_get_config() : NULL;
	return c ? c : "OpenBLAS";
}

/* Description of the loaded BLAS and its thread count. */
const char *
nn_blas_info(void)
{
	return blas_desc;
}

/* Row-major C = alpha * op(A) * op(B) + beta * C. */
void
nn_gemm(int trans_a, int trans_b, int m, int n, int k,
		float alpha, const float *a, int lda,
		const float *b, int ldb, float beta, float *c, int ldc)
{
	blas_sgemm(101, trans_a ? 112 : 111, trans_b ? 112 : 111, m, n, k,
			   alpha, a, lda, b, ldb, beta, c, ldc);
}
