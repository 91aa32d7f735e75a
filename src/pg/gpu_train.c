/*
 * gpu_train.c -- the narrow waist on a GPU: what mop.train_agg and
 * mop.eval_agg do when this process trains on a GPU, and the rows kept in
 * device memory across sub-epochs.
 *
 * The aggregates stay the one place where a sub-epoch happens; on a GPU
 * they hand the model (deserialized on the host, as always) to the GPU
 * library, which mirrors it in device memory for the duration of the
 * aggregate, trains on rows that are already resident there, and writes
 * the weights and optimizer state back into the host model at the end, so
 * the state saved is the same blob format whichever device trained it.
 *
 * Rows on the device.  A worker owns its partitions and trains one model
 * after another on them, so every buffer it sees is uploaded once and kept
 * (keyed, like the host buffer cache, by its TOAST value, which never
 * changes) for as long as the process lives, up to mop.buffer_cache_mb;
 * past that, and for small buffers stored inline, rows are uploaded for
 * one aggregate and freed at its end.  Only model states move per
 * sub-epoch.  mop.buffer_cache_reset() empties both caches.
 *
 * Memory.  Every device allocation is accounted against mop.gpu_memory by
 * the library and refused with a 53200 error naming need and budget.  The
 * mirror and the aggregate's temporary rows are freed by a reset callback
 * of the aggregate's memory context: on success, ERROR and cancel alike;
 * the resident rows at process exit.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/ipc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "mop.h"

typedef struct GpuDataKey
{
	MopBufId	x;
	MopBufId	y;
	int32		device;
} GpuDataKey;

typedef struct GpuDataEntry
{
	GpuDataKey	key;
	mop_gpu_data *d;
	uint64		bytes;
} GpuDataEntry;

static HTAB *gcache = NULL;
static uint64 gcache_bytes = 0;
static bool gcache_exit_hook = false;

struct MopGpuAgg
{
	const mop_gpu_api *api;
	nn_model   *host;
	mop_gpu_model *g;
	int			device;
	bool		training;
	bool		begun;
	List	   *temps;			/* mop_gpu_data * uploaded for this aggregate only */
	uint64		temp_bytes;
	MemoryContext cxt;
	MemoryContextCallback cb;
};

/* Free every resident buffer (no mirror may be using them). */
void
mop_gpu_cache_clear(void)
{
	HASH_SEQ_STATUS hs;
	GpuDataEntry *e;

	if (gcache == NULL)
		return;
	hash_seq_init(&hs, gcache);
	while ((e = hash_seq_search(&hs)) != NULL)
		mop_gpu()->data_free(e->d);
	hash_destroy(gcache);
	gcache = NULL;
	gcache_bytes = 0;
}

static void
gcache_exit(int code, Datum arg)
{
	mop_gpu_cache_clear();
}

/* Free the mirror and the temporary rows (idempotent). */
static void
agg_close(MopGpuAgg *a)
{
	ListCell   *lc;

	if (a->g)
	{
		a->api->model_close(a->g);
		a->g = NULL;
	}
	foreach(lc, a->temps)
		a->api->data_free((mop_gpu_data *) lfirst(lc));
	a->temps = NIL;
	a->temp_bytes = 0;
}

/*
 * Rows uploaded for this aggregate only are freed once TEMP_ROWS_BYTES of
 * them have been fed (after the GPU has read them), so a partition larger
 * than the cache needs a bounded amount of device memory.
 */
#define TEMP_ROWS_BYTES (UINT64CONST(64) << 20)

static void
free_temps(MopGpuAgg *a)
{
	char		msg[512] = "";
	int			rc;
	ListCell   *lc;

	if (a->begun)
	{
		rc = a->api->train_quiesce(a->g, msg, sizeof(msg));
		if (rc != MOP_GPU_OK)
			mop_gpu_error(rc, msg, "waiting for the GPU");
	}
	foreach(lc, a->temps)
		a->api->data_free((mop_gpu_data *) lfirst(lc));
	list_free(a->temps);
	a->temps = NIL;
	a->temp_bytes = 0;
}

static void
agg_reset_cb(void *arg)
{
	agg_close((MopGpuAgg *) arg);
}

/* Set the process's budget from mop.gpu_memory (the library enforces it). */
static void
apply_budget(const mop_gpu_api *api)
{
	api->set_budget((uint64) mop_gpu_memory_mb * 1024 * 1024);
}

/* Refuse what the GPU kernels do but no GPU has verified yet (see below). */
static void
refuse_unverified(nn_model *m, bool training)
{
	nn_metric	metric = nn_model_spec(m)->metric;
	const char *hint = "Train with device => 'cpu', or SET mop.gpu_unverified = on to use the GPU kernels that have not yet been checked against the CPU on a GPU.";

	if (nn_metric_whole_set(metric) || metric == NN_METRIC_LOG_LOSS)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("metric %s is not yet verified on the GPU", nn_metric_name(metric)),
				 errdetail("accuracy, top_k_accuracy, mse and mae are."),
				 errhint("%s", hint)));
	if (training && (nn_model_spec(m)->lr_schedule != NN_SCHED_NONE ||
					 nn_model_spec(m)->lr_warmup > 0))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("learning-rate schedules are not yet verified on the GPU"),
				 errhint("%s", hint)));
	if (training && nn_model_class_weights(m, NULL) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("class weights are not yet verified on the GPU"),
				 errhint("%s", hint)));
	for (int i = 0; i < nn_model_spec(m)->n_layers; i++)
		if (nn_model_spec(m)->layers[i].type == NN_LAYER_BATCHNORM)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("batchnorm layers are not yet verified on the GPU"),
					 errdetail("Layer %d of the model is a batchnorm layer.", i),
					 errhint("%s", hint)));
}

/*
 * Mirror model m on GPU `device` for one aggregate whose memory context is
 * cxt; with training, start a training stream.
 */
MopGpuAgg *
mop_gpu_agg_open(nn_model *m, int device, bool training, MemoryContext cxt)
{
	MopGpuAgg  *a;
	mop_gpu_options o;
	char		msg[512] = "";
	int			rc;

	/*
	 * The library trains everything a model may use as the CPU does:
	 * learning-rate schedules (each step's rate from the model's epoch),
	 * class weights, batchnorm, and whole-set metrics (the library feeds the
	 * outputs to the host model's gatherer); the loader refuses a library
	 * older than that (GPU ABI 4).  Those four have not been checked
	 * against the CPU on a GPU yet (test/gpu/run.sh does), so they are
	 * refused unless mop.gpu_unverified asks for them.
	 */
	if (!mop_gpu_unverified)
		refuse_unverified(m, training);
	a = MemoryContextAllocZero(cxt, sizeof(MopGpuAgg));
	a->api = mop_gpu();
	a->host = m;
	a->device = device;
	a->training = training;
	a->cxt = cxt;
	a->cb.func = agg_reset_cb;
	a->cb.arg = a;
	MemoryContextRegisterResetCallback(cxt, &a->cb);
	apply_budget(a->api);
	memset(&o, 0, sizeof(o));
	o.device = device;
	o.tf32 = mop_gpu_tf32 ? 1 : 0;
	rc = a->api->model_open(m, &o, &a->g, msg, sizeof(msg));
	if (rc != MOP_GPU_OK)
		mop_gpu_error(rc, msg, "placing the model on the GPU");
	if (training)
	{
		rc = a->api->train_begin(a->g, msg, sizeof(msg));
		if (rc != MOP_GPU_OK)
			mop_gpu_error(rc, msg, "starting a sub-epoch");
		a->begun = true;
	}
	return a;
}

/*
 * The device copy of the buffer pair (xd, yd) whose host bytes are x, y:
 * resident if it was seen before, else uploaded (and kept, if it is a
 * TOAST value and the cache has room).
 */
static mop_gpu_data *
device_rows(MopGpuAgg *a, Datum xd, Datum yd, const float *x, const float *y, int64 n)
{
	GpuDataKey	key;
	GpuDataEntry *e;
	bool		keep;
	mop_gpu_data *d;
	char		msg[512] = "";
	int			rc;
	int32		in_dim = nn_model_in_dim(a->host),
				y_dim = nn_model_y_dim(a->host);
	uint64		bytes = (uint64) n * (in_dim + y_dim + 2) * sizeof(float);

	memset(&key, 0, sizeof(key));
	keep = mop_buffer_cache_mb > 0 &&
		mop_buffer_identity(xd, &key.x) && mop_buffer_identity(yd, &key.y);
	key.device = a->device;
	if (keep && gcache != NULL &&
		(e = hash_search(gcache, &key, HASH_FIND, NULL)) != NULL &&
		a->api->data_rows(e->d) == n)
		return e->d;
	if (keep && gcache_bytes + bytes > (uint64) mop_buffer_cache_mb * 1024 * 1024)
		keep = false;			/* full: no admission, as the host cache */
	rc = a->api->data_upload(a->device, x, y, n, in_dim, y_dim, &d, msg, sizeof(msg));
	if (rc != MOP_GPU_OK)
		mop_gpu_error(rc, msg, "uploading rows to the GPU");
	if (!keep)
	{
		MemoryContext old = MemoryContextSwitchTo(a->cxt);

		a->temps = lappend(a->temps, d);
		a->temp_bytes += bytes;
		MemoryContextSwitchTo(old);
		return d;
	}
	if (gcache == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(GpuDataKey);
		ctl.entrysize = sizeof(GpuDataEntry);
		ctl.hcxt = TopMemoryContext;
		gcache = hash_create("mop GPU rows", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		if (!gcache_exit_hook)
		{
			on_proc_exit(gcache_exit, (Datum) 0);
			gcache_exit_hook = true;
		}
	}
	e = hash_search(gcache, &key, HASH_ENTER, NULL);
	e->d = d;
	e->bytes = bytes;
	gcache_bytes += bytes;
	return d;
}

/*
 * Minibatches queued per call of the library between interrupt checks:
 * queuing does not wait for the GPU (a few microseconds per minibatch), and
 * eight at a time lets the library replay them as one CUDA graph.
 */
#define FEED_BATCHES 8

/*
 * Train on one buffer of n rows in the order perm (as the CPU path feeds
 * them), checking for interrupts between calls.  Queuing work does not wait
 * for the GPU; a divergence is reported by mop_gpu_agg_finish.
 */
void
mop_gpu_agg_train(MopGpuAgg *a, Datum xd, Datum yd, const float *x, const float *y,
				  int64 n, const int64 *perm)
{
	mop_gpu_data *d = device_rows(a, xd, yd, x, y, n);
	int64		bs = nn_model_spec(a->host)->batch_size;
	char		msg[512] = "";
	int			rc;

	rc = a->api->train_order(a->g, 0, d, perm, msg, sizeof(msg));
	if (rc != MOP_GPU_OK)
		mop_gpu_error(rc, msg, "ordering rows");
	for (int64 off = 0; off < n; off += bs * FEED_BATCHES)
	{
		int64		cnt = Min(bs * FEED_BATCHES, n - off);

		CHECK_FOR_INTERRUPTS();
		rc = a->api->train_feed(a->g, d, off, cnt, msg, sizeof(msg));
		if (rc == MOP_GPU_EDIVERGED)
			return;
		if (rc != MOP_GPU_OK)
			mop_gpu_error(rc, msg, "training on the GPU");
		mop_progress_trained(cnt);
	}
	if (a->temp_bytes > TEMP_ROWS_BYTES)
		free_temps(a);
}

/* Add one buffer's loss and metric sums (stored order) into *res. */
void
mop_gpu_agg_eval(MopGpuAgg *a, Datum xd, Datum yd, const float *x, const float *y, int64 n,
				 nn_result *res)
{
	mop_gpu_data *d = device_rows(a, xd, yd, x, y, n);
	char		msg[512] = "";
	int			rc;

	CHECK_FOR_INTERRUPTS();
	rc = a->api->evaluate(a->g, d, 0, n, res, msg, sizeof(msg));
	if (rc != MOP_GPU_OK)
		mop_gpu_error(rc, msg, "evaluating on the GPU");
	if (a->temp_bytes > TEMP_ROWS_BYTES)
		free_temps(a);			/* evaluation has waited for the GPU already */
	mop_progress_evaluated(n);
}

/*
 * End the aggregate: close the training stream (sums into *res), write the
 * weights and optimizer state back into the host model, free the mirror.
 * Returns true if the model diverged (its state is still written back, as
 * the CPU engine keeps a diverged model's weights).
 */
bool
mop_gpu_agg_finish(MopGpuAgg *a, nn_result *res)
{
	char		msg[512] = "";
	bool		diverged = false;
	int			rc;

	if (a->begun)
	{
		rc = a->api->train_end(a->g, res, msg, sizeof(msg));
		a->begun = false;
		if (rc == MOP_GPU_EDIVERGED)
			diverged = true;
		else if (rc != MOP_GPU_OK)
			mop_gpu_error(rc, msg, "finishing a sub-epoch");
		rc = a->api->model_sync(a->g, msg, sizeof(msg));
		if (rc != MOP_GPU_OK)
			mop_gpu_error(rc, msg, "copying the model back");
	}
	agg_close(a);
	return diverged;
}
