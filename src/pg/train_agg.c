/*
 * train_agg.c -- the narrow waist: SQL aggregates that train and evaluate a
 * model over buffers (a first model state comes from mop.init_model(),
 * model_init.c).
 *
 *   SELECT mop.train_agg(m.state, b.x, b.y ORDER BY b.buffer_no)
 *     FROM mop.buffers b, mop.models m
 *    WHERE b.dataset_id = 1 AND b.split = 'train' AND b.partition = 0
 *      AND m.id = 7;
 *
 * returns a mop.train_result: the model state after one sub-epoch over those
 * buffers, with training loss and metric sums.  Any executor that can run
 * SQL (mop_train in a backend, a background worker, a remote server) trains
 * through this one function, so every path is the same code.
 *
 * The transition state is internal: on the first row the model blob is
 * deserialized into an nn_model that lives (via a ModelHandle) in the
 * aggregate's memory context and is freed with it, also on ERROR or cancel.
 * Each buffer is fed to the engine in slices of batch_size rows with
 * CHECK_FOR_INTERRUPTS() between slices, i.e. once per minibatch.
 *
 * Progress: whoever runs train_agg or eval_agg may install a MopProgress
 * for the duration of its query (mop_progress_install); train_agg reports
 * the rows it has trained to it after every minibatch, eval_agg the rows it
 * has evaluated after every slice, and the callback may raise an ERROR to
 * stop (a worker whose run is gone, or that was replaced, does).  The
 * aggregates know nothing else of their caller.
 *
 * On a GPU (mop.device, or the run's choice in a worker) the same
 * aggregates train and evaluate through gpu_train.c: the model is mirrored
 * in device memory for the aggregate, rows stay resident on the device
 * across sub-epochs, and the state returned is the same blob.
 *
 * Shuffling: mop_prepare shuffles the table once.  In addition the rows of
 * every buffer are visited in a fresh random order each sub-epoch, drawn
 * from the glue's generator seeded by (config seed, the model's count of
 * completed sub-epochs, buffer ordinal); the model blob carries that count,
 * so training stays bit-reproducible from any checkpoint.  The engine's own
 * per-feed shuffle is therefore off.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "mop.h"

PG_FUNCTION_INFO_V1(mop_train_agg_step);
PG_FUNCTION_INFO_V1(mop_train_agg_final);
PG_FUNCTION_INFO_V1(mop_eval_agg_step);
PG_FUNCTION_INFO_V1(mop_eval_agg_final);

/* Rows per nn_evaluate call between interrupt checks. */
#define EVAL_SLICE 1024

/* Transition state of train_agg and eval_agg. */
typedef struct MopAggState
{
	ModelHandle *h;
	bool		training;		/* train_agg vs eval_agg */
	bool		begun;			/* nn_train_begin done, nn_train_end not yet */
	bool		diverged;
	int64		buffers;		/* buffers seen so far */
	uint64		shuffle_base;	/* seed of the per-buffer shuffles */
	nn_result	res;			/* eval sums */
	float	   *sx;				/* scratch for permuted rows */
	float	   *sy;
	int64		scap;			/* rows the scratch holds */
	int64	   *perm;
	MopGpuAgg  *gpu;			/* non-NULL: this aggregate runs on a GPU */
} MopAggState;

/*
 * The heartbeat a training aggregate sends its client when mop.heartbeat
 * is set (a coordinator sets it on its connections to segments): a NOTICE
 * "mop heartbeat <rows trained so far>" at most every mop.heartbeat ms, which
 * the coordinator's side reads as progress and as a sign of life.
 */
static int64 heartbeat_rows = 0;
static TimestampTz heartbeat_at = 0;

static void
heartbeat(int64 rows)
{
	TimestampTz now;

	heartbeat_rows += rows;
	if (mop_heartbeat_ms <= 0)
		return;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(heartbeat_at, now, mop_heartbeat_ms))
		return;
	heartbeat_at = now;
	ereport(NOTICE,
			(errmsg_internal("mop heartbeat " INT64_FORMAT, heartbeat_rows)));
}

/* The progress callback installed by the caller of the aggregates (NULL: none). */
static const MopProgress *agg_progress = NULL;

/*
 * Install p (NULL: none) as the progress callback of the training and
 * evaluation aggregates of this backend; returns the one it replaces, which
 * the caller puts back when its query is over, also on ERROR.
 */
const MopProgress *
mop_progress_install(const MopProgress *p)
{
	const MopProgress *prev = agg_progress;

	agg_progress = p;
	return prev;
}

/* rows more rows trained: tell the installed callback, if any (may ERROR). */
void
mop_progress_trained(int64 rows)
{
	if (agg_progress != NULL && agg_progress->rows != NULL)
		agg_progress->rows(agg_progress->arg, rows);
	heartbeat(rows);
}

/* rows more rows evaluated: tell the installed callback, if any (may ERROR). */
void
mop_progress_evaluated(int64 rows)
{
	if (agg_progress != NULL && agg_progress->evaluated != NULL)
		agg_progress->evaluated(agg_progress->arg, rows);
}

/*
 * Fetch the buffer pair of the current row (through the buffer cache) and
 * check it against the model; returns its row count.
 */
static int64
fetch_buffers(FunctionCallInfo fcinfo, nn_model *m, const float **x, const float **y)
{
	Size		xlen,
				ylen;
	int64		n;
	nn_error	err;

	if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("buffer x and y must not be null")));
	*x = (const float *) mop_buffer_fetch(PG_GETARG_DATUM(2), &xlen);
	*y = (const float *) mop_buffer_fetch(PG_GETARG_DATUM(3), &ylen);
	if (nn_buffer_rows(m, xlen, ylen, &n, &err) != NN_OK)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s", err.msg),
				 errdetail("The model reads rows of %d float32 features from x and %d float32 labels from y.",
						   (int) nn_model_in_dim(m), (int) nn_model_y_dim(m)),
				 errhint("The model was made for a dataset with a different input shape, or the buffer was altered; mop_prepare writes a dataset's buffers anew.")));
	if (((uintptr_t) *x) % sizeof(float) != 0 || ((uintptr_t) *y) % sizeof(float) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("misaligned buffer")));
	return n;
}

/* First row of a group: build the state and deserialize the model. */
static MopAggState *
agg_state_init(FunctionCallInfo fcinfo, bool training)
{
	MemoryContext aggcxt;
	MemoryContext old;
	MopAggState   *s;
	nn_error	err;
	nn_status	st;
	int			device;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s can only be called as an aggregate",
						training ? "mop.train_agg" : "mop.eval_agg")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model state must not be null")));
	device = mop_device_for_training();
	old = MemoryContextSwitchTo(aggcxt);
	s = palloc0(sizeof(MopAggState));
	s->training = training;
	s->h = mop_model_from_blob(PG_GETARG_BYTEA_PP(1), aggcxt);
	if (nn_model_y_dim(s->h->model) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("the model expects %d label values per row, mop buffers hold 1",
						nn_model_y_dim(s->h->model))));
	if (training)
	{
		nn_counters c;

		nn_model_counters(s->h->model, &c);
		if (c.diverged)
			s->diverged = true;
		else if (device >= 0)
		{
			s->gpu = mop_gpu_agg_open(s->h->model, device, true, aggcxt);
			s->begun = true;
		}
		else
		{
			st = nn_train_begin(s->h->model, 0, &err);
			if (st != NN_OK)
				mop_nn_error(st, &err, "could not start training");
			s->begun = true;
		}
		s->shuffle_base = nn_model_spec(s->h->model)->seed * UINT64CONST(0x9e3779b97f4a7c15) ^
			((uint64) c.sub_epochs * UINT64CONST(0xc2b2ae3d27d4eb4f));
	}
	else if (device >= 0)
		s->gpu = mop_gpu_agg_open(s->h->model, device, false, aggcxt);
	MemoryContextSwitchTo(old);
	return s;
}

/* Make sure the scratch holds n rows (in the aggregate context). */
static void
scratch_reserve(FunctionCallInfo fcinfo, MopAggState *s, int64 n, int64 in_dim)
{
	MemoryContext aggcxt;

	if (n <= s->scap)
		return;
	AggCheckCallContext(fcinfo, &aggcxt);
	if (s->perm)
	{
		if (s->sx)
		{
			pfree(s->sx);
			pfree(s->sy);
		}
		pfree(s->perm);
	}
	/* on a GPU the rows are permuted on the device: only the order is needed */
	s->sx = s->gpu ? NULL : MemoryContextAllocHuge(aggcxt, sizeof(float) * n * in_dim);
	s->sy = s->gpu ? NULL : MemoryContextAllocHuge(aggcxt, sizeof(float) * n);
	s->perm = MemoryContextAllocHuge(aggcxt, sizeof(int64) * n);
	s->scap = n;
}

/*
 * Train m on n rows in slices of one minibatch, checking for interrupts
 * between slices.  Sets *diverged (and stops) if the engine reports NaN/Inf.
 */
void
mop_train_rows(nn_model *m, const float *x, const float *y, int64 n,
			   bool *diverged)
{
	int64		in_dim = nn_model_in_dim(m);
	int64		bs = nn_model_spec(m)->batch_size;
	nn_error	err;

	for (int64 off = 0; off < n; off += bs)
	{
		int64		cnt = Min(bs, n - off);
		nn_status	st;

		CHECK_FOR_INTERRUPTS();
		st = nn_train_feed(m, x + off * in_dim, y + off, cnt, &err);
		if (st == NN_DIVERGED)
		{
			*diverged = true;
			return;
		}
		if (st != NN_OK)
			mop_nn_error(st, &err, "training failed");
		mop_progress_trained(cnt);
	}
}

/* train_agg transition: feed one buffer (rows shuffled) to the model. */
Datum
mop_train_agg_step(PG_FUNCTION_ARGS)
{
	MopAggState *s = PG_ARGISNULL(0) ? NULL : (MopAggState *) PG_GETARG_POINTER(0);
	const float *xs,
			   *ys;
	int64		n,
				in_dim;
	MopRng		rng;

	if (s == NULL)
	{
		s = agg_state_init(fcinfo, true);
		heartbeat_rows = 0;
		heartbeat_at = GetCurrentTimestamp();
	}
	if (s->diverged)
		PG_RETURN_POINTER(s);
	n = fetch_buffers(fcinfo, s->h->model, &xs, &ys);
	in_dim = nn_model_in_dim(s->h->model);
	if (n > 0)
	{
		scratch_reserve(fcinfo, s, n, in_dim);
		for (int64 i = 0; i < n; i++)
			s->perm[i] = i;
		mop_prng_seed(&rng, s->shuffle_base ^ ((uint64) s->buffers * UINT64CONST(0x165667b19e3779f9)));
		mop_shuffle_index(s->perm, n, &rng);
		if (s->gpu)
			/* its mop_progress_trained calls send the heartbeats */
			mop_gpu_agg_train(s->gpu, PG_GETARG_DATUM(2), PG_GETARG_DATUM(3), xs, ys, n, s->perm);
		else
		{
			for (int64 i = 0; i < n; i++)
			{
				memcpy(s->sx + i * in_dim, xs + s->perm[i] * in_dim, sizeof(float) * in_dim);
				s->sy[i] = ys[s->perm[i]];
			}
			mop_train_rows(s->h->model, s->sx, s->sy, n, &s->diverged);
		}
	}
	s->buffers++;
	PG_RETURN_POINTER(s);
}

/* train_agg final: end the sub-epoch and return (state, sums, status). */
Datum
mop_train_agg_final(PG_FUNCTION_ARGS)
{
	MopAggState   *s = PG_ARGISNULL(0) ? NULL : (MopAggState *) PG_GETARG_POINTER(0);
	TupleDesc	td;
	Datum		values[6];
	bool		nulls[6] = {0};
	nn_result	res;
	nn_error	err;
	nn_status	st;

	if (s == NULL)
		PG_RETURN_NULL();
	if (s->h->model == NULL)
		elog(ERROR, "mop.train_agg: final function called twice");
	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "mop.train_agg must return a composite");
	memset(&res, 0, sizeof(res));
	if (s->gpu)
	{
		/* the weights come back into the host model, diverged or not */
		if (mop_gpu_agg_finish(s->gpu, &res))
			s->diverged = true;
		s->begun = false;
		s->gpu = NULL;
	}
	else if (s->begun)
	{
		/* close the stream, also after divergence (it trains nothing then) */
		st = nn_train_end(s->h->model, &res, &err);
		s->begun = false;
		if (st == NN_DIVERGED)
			s->diverged = true;
		else if (st != NN_OK && !s->diverged)
			mop_nn_error(st, &err, "training failed");
	}
	if (!s->diverged)
		values[0] = PointerGetDatum(mop_model_to_blob(s->h->model));
	else
	{
		/* a diverged model's state is returned if the engine can write it */
		size_t		cap = nn_model_blob_size(s->h->model);
		size_t		len = 0;
		bytea	   *b = palloc(cap + VARHDRSZ);

		if (nn_model_serialize(s->h->model, VARDATA(b), cap, &len, &err) == NN_OK)
		{
			SET_VARSIZE(b, len + VARHDRSZ);
			values[0] = PointerGetDatum(b);
		}
		else
			nulls[0] = true;
	}
	values[1] = Float8GetDatum(res.loss_sum);
	values[2] = Float8GetDatum(res.metric_sum);
	values[3] = Int64GetDatum(res.rows);
	values[4] = Int64GetDatum(res.steps);
	values[5] = CStringGetTextDatum(s->diverged ? "diverged" : "ok");
	mop_model_release(s->h);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(td), values, nulls)));
}

/* eval_agg transition: add one buffer's loss and metric sums. */
Datum
mop_eval_agg_step(PG_FUNCTION_ARGS)
{
	MopAggState *s = PG_ARGISNULL(0) ? NULL : (MopAggState *) PG_GETARG_POINTER(0);
	int64		n,
				in_dim;
	const float *xs,
			   *ys;
	nn_error	err;

	if (s == NULL)
		s = agg_state_init(fcinfo, false);
	n = fetch_buffers(fcinfo, s->h->model, &xs, &ys);
	in_dim = nn_model_in_dim(s->h->model);
	if (s->gpu)
	{
		mop_gpu_agg_eval(s->gpu, PG_GETARG_DATUM(2), PG_GETARG_DATUM(3), xs, ys, n, &s->res);
		s->buffers++;
		PG_RETURN_POINTER(s);
	}
	for (int64 off = 0; off < n; off += EVAL_SLICE)
	{
		int64		cnt = Min((int64) EVAL_SLICE, n - off);
		nn_status	st;

		CHECK_FOR_INTERRUPTS();
		st = nn_evaluate(s->h->model, xs + off * in_dim, ys + off, cnt, &s->res, &err);
		if (st != NN_OK && st != NN_DIVERGED)
			mop_nn_error(st, &err, "evaluation failed");
		mop_progress_evaluated(cnt);
	}
	s->buffers++;
	PG_RETURN_POINTER(s);
}

/* eval_agg final: (loss_sum, metric_sum, rows). */
Datum
mop_eval_agg_final(PG_FUNCTION_ARGS)
{
	MopAggState   *s = PG_ARGISNULL(0) ? NULL : (MopAggState *) PG_GETARG_POINTER(0);
	TupleDesc	td;
	Datum		values[3];
	bool		nulls[3] = {0};

	if (s == NULL)
		PG_RETURN_NULL();
	if (s->h->model == NULL)
		elog(ERROR, "mop.eval_agg: final function called twice");
	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "mop.eval_agg must return a composite");
	if (s->gpu)
	{
		(void) mop_gpu_agg_finish(s->gpu, NULL);
		s->gpu = NULL;
	}
	/* a metric over the whole set: its value times the rows, so sums divide */
	if (nn_metric_whole_set(nn_model_spec(s->h->model)->metric))
		s->res.metric_sum = nn_evaluate_metric(s->h->model) * (double) s->res.rows;
	values[0] = Float8GetDatum(s->res.loss_sum);
	values[1] = Float8GetDatum(s->res.metric_sum);
	values[2] = Int64GetDatum(s->res.rows);
	mop_model_release(s->h);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(td), values, nulls)));
}
