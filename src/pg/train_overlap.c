/*
 * train_overlap.c -- training one buffer on a helper thread while the
 * backend reads the next one out of TOAST.
 *
 * The first epoch of a backend (and every epoch of a dataset larger than
 * mop.buffer_cache_mb) detoasts each training buffer before training on it:
 * thousands of TOAST chunk fetches per buffer, work only the backend can do
 * (PostgreSQL is not thread-safe).  The engine (src/nn) is plain C and
 * touches nothing of PostgreSQL, so the training of buffer k can run on a
 * helper thread while the backend fetches buffer k+1: train_agg copies each
 * buffer's rows in their shuffled order into a scratch of its own first, so
 * the helper reads only that scratch and the model.  The order of the
 * minibatches is unchanged, so the result is bit-identical to training in
 * the backend.
 *
 * The helper calls nothing of PostgreSQL, holds every signal blocked (they
 * go to the backend), and stops between minibatches when asked.  The
 * backend waits for it in slices of WAIT_SLICE_MS, checking for interrupts
 * (once per minibatch or so, as the synchronous loop does) and passing the
 * rows trained on to the progress callback.  It is stopped and joined
 * before anything it uses can go away: when the aggregate's memory context
 * is reset or deleted (an ERROR anywhere, the transaction's abort), and
 * before the backend exits (a FATAL between two buffers).
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "mop.h"

#define WAIT_SLICE_MS 5

struct MopOverlap
{
	/* the job: written by the backend before the thread starts */
	nn_model   *m;
	const float *x;
	const float *y;
	int64		n;
	int64		batch;

	/* what the helper reports */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool		finished;		/* under mu */
	int64		rows_done;		/* __atomic */
	int			stop;			/* __atomic: the backend asks the helper to stop */
	nn_status	status;			/* after finished */
	nn_error	err;
	bool		diverged;

	/* the backend's side */
	pthread_t	thread;
	bool		running;		/* started, not joined */
	int64		rows_reported;
	MemoryContextCallback cb;
};

/* The job the backend runs now, stopped if the backend exits. */
static MopOverlap *current = NULL;
static bool exit_hook = false;

static void *
helper_main(void *arg)
{
	MopOverlap *o = arg;
	nn_status	st = NN_OK;

	for (int64 off = 0; off < o->n; off += o->batch)
	{
		int64		cnt = Min(o->batch, o->n - off);

		if (__atomic_load_n(&o->stop, __ATOMIC_ACQUIRE))
			break;
		st = nn_train_feed(o->m, o->x + off * nn_model_in_dim(o->m), o->y + off, cnt, &o->err);
		if (st == NN_DIVERGED)
		{
			o->diverged = true;
			st = NN_OK;
			break;
		}
		if (st != NN_OK)
			break;
		__atomic_add_fetch(&o->rows_done, cnt, __ATOMIC_RELEASE);
	}
	pthread_mutex_lock(&o->mu);
	o->status = st;
	o->finished = true;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

/* Stop the helper at its next minibatch and join it; never ERRORs. */
static void
stop_and_join(MopOverlap *o)
{
	if (!o->running)
		return;
	__atomic_store_n(&o->stop, 1, __ATOMIC_RELEASE);
	pthread_join(o->thread, NULL);
	o->running = false;
	if (current == o)
		current = NULL;
}

static void
overlap_reset_callback(void *arg)
{
	stop_and_join((MopOverlap *) arg);
}

static void
overlap_exit_callback(int code, Datum arg)
{
	if (current != NULL)
		stop_and_join(current);
}

/* A helper for one aggregate, living (and joined) with cxt. */
MopOverlap *
mop_overlap_create(MemoryContext cxt)
{
	MopOverlap *o = MemoryContextAllocZero(cxt, sizeof(MopOverlap));

	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	o->cb.func = overlap_reset_callback;
	o->cb.arg = o;
	MemoryContextRegisterResetCallback(cxt, &o->cb);
	if (!exit_hook)
	{
		on_proc_exit(overlap_exit_callback, (Datum) 0);
		exit_hook = true;
	}
	return o;
}

bool
mop_overlap_running(const MopOverlap *o)
{
	return o != NULL && o->running;
}

/*
 * Train m on the n rows of x and y (which must stay untouched until
 * mop_overlap_wait returns) on the helper thread.  false: no thread could
 * be started (the caller trains in the backend instead).
 */
bool
mop_overlap_start(MopOverlap *o, nn_model *m, const float *x, const float *y, int64 n)
{
	sigset_t	all,
				old;
	int			rc;

	Assert(!o->running);
	o->m = m;
	o->x = x;
	o->y = y;
	o->n = n;
	o->batch = nn_model_spec(m)->batch_size;
	o->finished = false;
	o->rows_done = 0;
	o->rows_reported = 0;
	o->stop = 0;
	o->status = NN_OK;
	o->diverged = false;
	/* the thread starts with every signal blocked: they are the backend's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&o->thread, NULL, helper_main, o);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return false;
	o->running = true;
	current = o;
	return true;
}

/* Pass the rows the helper trained since the last report on. */
static void
report_rows(MopOverlap *o)
{
	int64		done = __atomic_load_n(&o->rows_done, __ATOMIC_ACQUIRE);

	if (done > o->rows_reported)
	{
		int64		delta = done - o->rows_reported;

		o->rows_reported = done;
		mop_progress_trained(delta);
	}
}

/*
 * Wait for the running job (if any), checking for interrupts and reporting
 * progress meanwhile (either may ERROR: the reset callback then stops the
 * helper); returns whether the model diverged, and ERRORs as the
 * synchronous loop would if the engine failed.
 */
bool
mop_overlap_wait(MopOverlap *o)
{
	bool		diverged;
	nn_status	st;
	nn_error	err;

	if (o == NULL || !o->running)
		return false;
	for (;;)
	{
		struct timespec until;
		bool		finished;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += WAIT_SLICE_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L)
		{
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&o->mu);
		if (!o->finished)
			pthread_cond_timedwait(&o->cv, &o->mu, &until);
		finished = o->finished;
		pthread_mutex_unlock(&o->mu);
		if (finished)
			break;
		report_rows(o);
		CHECK_FOR_INTERRUPTS();
	}
	pthread_join(o->thread, NULL);
	o->running = false;
	if (current == o)
		current = NULL;
	diverged = o->diverged;
	st = o->status;
	err = o->err;
	report_rows(o);
	if (st != NN_OK)
		mop_nn_error(st, &err, "training failed");
	return diverged;
}
