/*
 * engine.cu -- mop's training engine on a GPU: a model's device mirror,
 * device-resident rows, and the training and evaluation streams.
 *
 * This file is the GPU twin of src/nn/model.c and src/nn/optim.c: each
 * function names the CPU function it mirrors.  The host nn_model stays the
 * authority for everything but the numbers in flight (spec, plan, counters
 * and the random generator live there and advance exactly as on the CPU),
 * so a model that trained here serializes to the same blob format and goes
 * on learning on a CPU worker, and the other way round.
 *
 * Memory.  A mirror takes one device allocation, sized from the plan up
 * front (mop_gpu_model_bytes): parameters, gradients, optimizer state, the
 * activations and gradient buffers of one batch at the CPU's offsets, an
 * im2col buffer, the minibatch staging area and a few scalars.  Rows are a
 * second kind of allocation (mop_gpu_data), uploaded once and kept by the
 * caller.  Every allocation goes through the process's ledger (budget.c)
 * first, so a budget is enforced before the device is touched.
 *
 * Synchronisation.  A training step queues its kernels on the mirror's own
 * stream and does not wait: loss sums and the divergence flag stay on the
 * device; the kernels stop updating once a step has diverged, and the host
 * learns of it at its next wait.  The host waits when it first sees a
 * buffer (to check its labels), every 4096 steps (the step table below),
 * at the end of a stream, and once per step only for dropout, whose masks
 * come from the model's own generator on the host so that the random
 * stream is the CPU's.  So feeding a buffer one minibatch at a time, as
 * the aggregate does to check for interrupts, costs no waits.
 *
 * Launches.  Small models are bound by the cost of launching kernels, not
 * by the GPU: a step of the Fashion-MNIST MLP is some thirty kernels of a
 * few microseconds each.  So full-batch steps are captured once per mirror
 * as CUDA graphs (gather the minibatch into the staging buffers, forward,
 * loss, backward, optimizer), one step and GRAPH_STEPS steps long, and
 * replayed.  Everything that changes from step to step -- where its rows
 * are (up to GK_SEGS pieces of buffers), its number, Adam's bias
 * corrections -- is written on the host into a table on the device that
 * the kernels read (gk_step), appended to as rows are fed.  Models with
 * dropout launch kernel by kernel, since their masks are drawn on the
 * host.
 *
 * Several mirrors may live in one process and be driven from several
 * threads at once (one mirror per thread): each has its own stream and
 * cuBLAS handle, so their kernels run concurrently on one GPU.
 *
 * Gangs.  One mirror may hold several models of one shape (same layers,
 * batch size, loss and optimizer; learning rates and the other
 * hyperparameters free), trained together on the same rows, each in its
 * own order, as HFTA fuses models: every layer runs once for the whole
 * gang -- dense and convolution GEMMs as strided batched GEMMs over the
 * members, everything else over the members' rows side by side -- so a
 * step of K small models costs about the launches of one.  Member k's
 * parameters, gradients, optimizer state and activations are the single
 * model's, K times over: parameters at k * n_params, optimizer state at
 * k * n_opt, and a layer's activations of a step at rows [k * nb, (k + 1)
 * * nb) of its buffer (nb: the step's rows per member).  A model alone is a
 * gang of one, and goes through exactly the same code.
 *
 * Files.  This one places models on the device: the memory ledger, rows
 * on the device, mirrors (opening, closing, downloading) and gangs.
 * engine_step.cu queues a training step -- forward, backward, optimizer,
 * the CUDA graphs and the step table -- and engine_train.cu drives the
 * training stream, evaluation and gradients; engine_internal.h holds the
 * structures they share.
 */
#include "engine_internal.h"

/* Largest im2col buffer of a mirror, in floats (64 MB); bigger convolutions go in chunks. */
#define GPU_COL_CAP_FLOATS (INT64_C(1) << 24)

/* cuBLAS workspace of a mirror (set explicitly, so a step can be captured as a graph). */
#define BLAS_WS_BYTES (UINT64_C(8) << 20)

static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static mop_gpu_ledger ledger;

/* mop_gpu_ledger_reserve() on the process's ledger (0: reserved). */
int
ledger_reserve(uint64_t bytes, const char *what, char *msg, size_t msglen)
{
	int			r;

	pthread_mutex_lock(&ledger_lock);
	r = mop_gpu_ledger_reserve(&ledger, bytes, what, msg, msglen);
	pthread_mutex_unlock(&ledger_lock);
	return r;
}

/* mop_gpu_ledger_release() on the process's ledger. */
void
ledger_release(uint64_t bytes)
{
	pthread_mutex_lock(&ledger_lock);
	mop_gpu_ledger_release(&ledger, bytes);
	pthread_mutex_unlock(&ledger_lock);
}

/*
 * What a mirror needs besides device memory -- a stream, a cuBLAS handle,
 * small pinned host buffers -- is costly to create and, worse, to destroy
 * (freeing pinned memory waits for the whole device, stalling every other
 * model sharing the GPU).  So a closed mirror's shell goes to a free list
 * and the next mirror on that device takes it.  Its device memory is
 * allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync),
 * which waits for nothing either.
 */
struct shell
{
	int			device;
	cudaStream_t stream;
	cublasHandle_t blas;
	gk_status  *st_host;		/* MOP_GPU_GANG_MAX */
	double	   *acc_host;		/* 4 * MOP_GPU_GANG_MAX */
	gk_step    *steptab_host;	/* STEP_CAP */
	struct shell *next;
};

#define SHELLS_KEPT 64

static pthread_mutex_t shell_lock = PTHREAD_MUTEX_INITIALIZER;
static shell *free_shells;
static int	n_free_shells;

/* ---- errors ---------------------------------------------------------- */

int
fail(char *msg, size_t msglen, int code, const char *fmt, ...)
{
	if (msg && msglen > 0)
	{
		va_list		ap;

		va_start(ap, fmt);
		vsnprintf(msg, msglen, fmt, ap);
		va_end(ap);
	}
	return code;
}

int
cuda_fail(char *msg, size_t msglen, const char *what, cudaError_t e)
{
	int			code = (e == cudaErrorMemoryAllocation) ? MOP_GPU_ENOMEM : MOP_GPU_ECUDA;

	(void) cudaGetLastError();
	return fail(msg, msglen, code, "%s: %s (%s)", what, cudaGetErrorString(e),
				cudaGetErrorName(e));
}

/* ---- memory ---------------------------------------------------------- */

/* cudaMalloc through the ledger. */
static int
dev_alloc(void **p, uint64_t bytes, const char *what, char *msg, size_t msglen)
{
	cudaError_t e;
	int			r;

	*p = NULL;
	r = ledger_reserve(bytes, what, msg, msglen);
	if (r != 0)
		return MOP_GPU_ENOMEM;
	e = cudaMalloc(p, bytes ? bytes : 1);
	if (e != cudaSuccess)
	{
		char		need[32];

		ledger_release(bytes);
		(void) cudaGetLastError();
		*p = NULL;
		mop_gpu_format_bytes(bytes, need, sizeof(need));
		return fail(msg, msglen, e == cudaErrorMemoryAllocation ? MOP_GPU_ENOMEM : MOP_GPU_ECUDA,
					"%s needs %s of GPU memory: %s", what, need, cudaGetErrorString(e));
	}
	return MOP_GPU_OK;
}

static void
dev_free(void *p, uint64_t bytes)
{
	if (!p)
		return;
	cudaFree(p);
	ledger_release(bytes);
}

extern "C" void
mop_gpu_set_budget(uint64_t bytes)
{
	pthread_mutex_lock(&ledger_lock);
	ledger.budget = bytes;
	pthread_mutex_unlock(&ledger_lock);
}

extern "C" void
mop_gpu_memory_info(mop_gpu_memory *out)
{
	pthread_mutex_lock(&ledger_lock);
	out->in_use = ledger.in_use;
	out->peak = ledger.peak;
	out->budget = ledger.budget;
	out->allocations = ledger.allocations;
	pthread_mutex_unlock(&ledger_lock);
}

extern "C" void
mop_gpu_engine_layout(mop_gpu_layout *out)
{
	out->model_size = (uint32_t) sizeof(nn_model);
	out->plan_size = (uint32_t) sizeof(nn_plan);
	out->spec_size = (uint32_t) sizeof(nn_spec);
	out->result_size = (uint32_t) sizeof(nn_result);
}

/* Round up to 256 bytes, the alignment of every slice of a mirror. */
static uint64_t
al(uint64_t b)
{
	return (b + 255) & ~(uint64_t) 255;
}

/* Images per member per im2col chunk of conv layer L, and the col floats a gang of n needs. */
static int32_t
conv_chunk(const nn_ilayer *L, int B, int n, int64_t *col)
{
	int64_t		per_image = (int64_t) L->oh * L->ow * L->kh * L->kw * L->ic;
	int64_t		chunk = GPU_COL_CAP_FLOATS / (per_image * n);

	chunk = chunk < 1 ? 1 : (chunk > B ? B : chunk);
	*col = chunk * per_image * n;
	return (int32_t) chunk;
}

/* Slice sizes of a mirror of n members, in bytes; returns the total. */
typedef struct mirror_layout
{
	uint64_t	params, grads, opt, bufs, cw, acts, grad, col, xb, yb, ones, rows, steps, total;
	int64_t		col_floats, ones_len;
} mirror_layout;

static void
layout_of(const nn_model *host, int n, mirror_layout *lo)
{
	const nn_plan *p = &host->plan;
	int64_t		colmax = 0,
				onesmax = p->batch;

	for (int i = 0; i < p->n; i++)
	{
		const nn_ilayer *L = &p->l[i];

		if (L->type == NN_LAYER_CONV2D)
		{
			int64_t		col;

			conv_chunk(L, p->batch, n, &col);
			colmax = col > colmax ? col : colmax;
			if ((int64_t) p->batch * L->oh * L->ow > onesmax)
				onesmax = (int64_t) p->batch * L->oh * L->ow;
		}
	}
	lo->col_floats = colmax;
	lo->ones_len = onesmax;
	lo->params = al(n * p->n_params * 4);
	lo->grads = al(n * p->n_params * 4);
	lo->opt = al(n * p->n_opt * 4);
	lo->bufs = al(n * p->n_bufs * 4);
	/* class weights, whether each member weighs, each member's sum of weights */
	lo->cw = al((int64_t) n * nn_model_n_classes(host) * 4) + al(n * 4) + al(n * 8);
	lo->acts = al(n * p->ws_acts * 4);
	lo->grad = al(n * p->ws_grad * 4);
	lo->col = al(colmax * 4);
	lo->xb = al((int64_t) n * p->in_dim * p->batch * 4);
	lo->yb = al((int64_t) n * p->y_dim * p->batch * 4);
	lo->ones = al(onesmax * 4);
	lo->rows = al((int64_t) n * p->batch * 8);
	lo->steps = al(STEP_CAP * sizeof(gk_step));
	lo->total = lo->params + lo->grads + lo->opt + lo->bufs + lo->cw + lo->acts + 2 * lo->grad + lo->col +
		lo->xb + lo->yb + lo->ones + 2 * lo->rows + al(n * 4) + 2 * al(n * 32) +
		al(n * sizeof(gk_optim)) + al(n * sizeof(gk_status)) + lo->steps + al(4) + BLAS_WS_BYTES;
}

extern "C" uint64_t
mop_gpu_model_bytes(const nn_model *host)
{
	mirror_layout lo;

	layout_of(host, 1, &lo);
	return lo.total;
}

extern "C" uint64_t
mop_gpu_gang_bytes(const nn_model *host, int32_t n)
{
	mirror_layout lo;

	layout_of(host, n < 1 ? 1 : n, &lo);
	return lo.total;
}

/* ---- rows on the device ---------------------------------------------- */

extern "C" int
mop_gpu_data_upload(int32_t device, const float *x, const float *y, int64_t n,
					int32_t in_dim, int32_t y_dim, mop_gpu_data **out, char *msg, size_t msglen)
{
	mop_gpu_data *d;
	uint64_t	xb,
				yb;
	void	   *base;
	int			r;

	*out = NULL;
	if (n < 0 || in_dim < 1 || y_dim < 1 || (n > 0 && (!x || !y)))
		return fail(msg, msglen, MOP_GPU_EINVAL, "invalid buffer of %lld rows of %d + %d floats",
					(long long) n, in_dim, y_dim);
	CU(cudaSetDevice(device), "cudaSetDevice");
	xb = al((uint64_t) n * in_dim * 4);
	yb = al((uint64_t) n * y_dim * 4);
	if (!(d = (mop_gpu_data *) calloc(1, sizeof(*d))))
		return fail(msg, msglen, MOP_GPU_ENOMEM, "out of host memory");
	d->bytes = xb + yb;
	if ((r = dev_alloc(&base, d->bytes, "a buffer of rows", msg, msglen)) != MOP_GPU_OK)
	{
		free(d);
		return r;
	}
	d->device = device;
	d->n = n;
	d->in_dim = in_dim;
	d->y_dim = y_dim;
	d->x = (float *) base;
	d->y = (float *) ((char *) base + xb);
	d->checked_loss = -1;
	if (n > 0 &&
		(cudaMemcpy(d->x, x, (size_t) n * in_dim * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
		 cudaMemcpy(d->y, y, (size_t) n * y_dim * 4, cudaMemcpyHostToDevice) != cudaSuccess))
	{
		cudaError_t e = cudaGetLastError();

		mop_gpu_data_free(d);
		return cuda_fail(msg, msglen, "uploading rows", e);
	}
	*out = d;
	return MOP_GPU_OK;
}

extern "C" int64_t
mop_gpu_data_rows(const mop_gpu_data *d)
{
	return d ? d->n : 0;
}

extern "C" void
mop_gpu_data_free(mop_gpu_data *d)
{
	if (!d)
		return;
	cudaSetDevice(d->device);
	dev_free(d->x, d->bytes);
	free(d);
}

/* ---- the mirror ------------------------------------------------------ */

static void
shell_destroy(shell *sh)
{
	cudaSetDevice(sh->device);
	if (sh->blas)
		cublasDestroy(sh->blas);
	if (sh->stream)
		cudaStreamDestroy(sh->stream);
	if (sh->st_host)
		cudaFreeHost(sh->st_host);
	if (sh->acc_host)
		cudaFreeHost(sh->acc_host);
	if (sh->steptab_host)
		cudaFreeHost(sh->steptab_host);
	(void) cudaGetLastError();
	free(sh);
}

/* A shell for device `device`: a kept one, or a new one (NULL on failure, msg set). */
static shell *
shell_get(int device, char *msg, size_t msglen)
{
	shell	   *sh,
			  **pp;
	cublasStatus_t bs;

	pthread_mutex_lock(&shell_lock);
	for (pp = &free_shells; *pp; pp = &(*pp)->next)
		if ((*pp)->device == device)
		{
			sh = *pp;
			*pp = sh->next;
			n_free_shells--;
			pthread_mutex_unlock(&shell_lock);
			sh->next = NULL;
			return sh;
		}
	pthread_mutex_unlock(&shell_lock);
	if (!(sh = (shell *) calloc(1, sizeof(*sh))))
	{
		fail(msg, msglen, MOP_GPU_ENOMEM, "out of host memory");
		return NULL;
	}
	sh->device = device;
	if (cudaStreamCreateWithFlags(&sh->stream, cudaStreamNonBlocking) != cudaSuccess ||
		cudaMallocHost((void **) &sh->st_host, MOP_GPU_GANG_MAX * sizeof(gk_status)) != cudaSuccess ||
		cudaMallocHost((void **) &sh->steptab_host, STEP_CAP * sizeof(gk_step)) != cudaSuccess ||
		cudaMallocHost((void **) &sh->acc_host, 4 * MOP_GPU_GANG_MAX * sizeof(double)) != cudaSuccess)
	{
		cudaError_t e = cudaGetLastError();

		shell_destroy(sh);
		cuda_fail(msg, msglen, "creating a stream", e);
		return NULL;
	}
	if ((bs = cublasCreate(&sh->blas)) != CUBLAS_STATUS_SUCCESS ||
		(bs = cublasSetStream(sh->blas, sh->stream)) != CUBLAS_STATUS_SUCCESS)
	{
		shell_destroy(sh);
		fail(msg, msglen, bs == CUBLAS_STATUS_ALLOC_FAILED ? MOP_GPU_ENOMEM : MOP_GPU_ECUDA,
			 "creating a cuBLAS handle: cuBLAS status %d", (int) bs);
		return NULL;
	}
	return sh;
}

/* Keep a shell whose stream is idle for the next mirror (or destroy it). */
static void
shell_put(shell *sh)
{
	pthread_mutex_lock(&shell_lock);
	if (n_free_shells < SHELLS_KEPT)
	{
		sh->next = free_shells;
		free_shells = sh;
		n_free_shells++;
		sh = NULL;
	}
	pthread_mutex_unlock(&shell_lock);
	if (sh)
		shell_destroy(sh);
}

extern "C" void
mop_gpu_model_close(mop_gpu_model *g)
{
	if (!g)
		return;
	cudaSetDevice(g->device);
	for (int k = 0; k < g->n; k++)
		if (g->mem[k].perm)
		{
			cudaFreeAsync(g->mem[k].perm, g->stream);
			ledger_release((uint64_t) g->mem[k].perm_cap * 8);
		}
	if (g->base)
	{
		cudaFreeAsync(g->base, g->stream);
		ledger_release(g->bytes);
	}
	if (g->sh)
	{
		/* the shell goes back only with an idle stream and no error pending */
		if (cudaStreamSynchronize(g->stream) == cudaSuccess)
			shell_put(g->sh);
		else
			shell_destroy(g->sh);
	}
	if (g->graph_state == 1)
	{
		cudaGraphExecDestroy(g->exec1);
		cudaGraphExecDestroy(g->execn);
	}
	if (g->mask_host)
		cudaFreeHost(g->mask_host);
	free(g->out_host);
	(void) cudaGetLastError();
	free(g);
}

static int
blas_fail(char *msg, size_t msglen, const char *what, cublasStatus_t s)
{
	return fail(msg, msglen, s == CUBLAS_STATUS_ALLOC_FAILED ? MOP_GPU_ENOMEM : MOP_GPU_ECUDA,
				"%s: cuBLAS status %d", what, (int) s);
}

/* Largest dropout layer of the plan, in floats per batch. */
static int64_t
dropout_cap(const nn_plan *p)
{
	int64_t		cap = 0;

	for (int i = 0; i < p->n; i++)
		if (p->l[i].type == NN_LAYER_DROPOUT && p->l[i].rate > 0 &&
			p->l[i].out_size * p->batch > cap)
			cap = p->l[i].out_size * p->batch;
	return cap;
}

/*
 * May a and b be members of one gang?  Same computation (every layer, its
 * shape, activation and dropout rate; batch size; loss, metric and
 * optimizer with the same state), so that one launch serves both.  0, or
 * -1 with what differs in why.
 */
static int
gang_mismatch(const nn_model *a, const nn_model *b, char *why, size_t whylen)
{
	const nn_plan *p = &a->plan,
			   *q = &b->plan;
	const nn_spec *s = &a->spec,
			   *t = &b->spec;

	if (p->batch != q->batch)
		return fail(why, whylen, -1, "batch sizes %d and %d differ", p->batch, q->batch);
	if (p->n != q->n || p->in_dim != q->in_dim || p->y_dim != q->y_dim ||
		p->out_dim != q->out_dim || p->n_params != q->n_params || p->n_tensors != q->n_tensors ||
		p->ws_acts != q->ws_acts || p->ws_grad != q->ws_grad)
		return fail(why, whylen, -1, "the architectures differ");
	for (int i = 0; i < p->n; i++)
	{
		const nn_ilayer *L = &p->l[i],
				   *M = &q->l[i];

		if (L->type != M->type || L->act != M->act || L->alpha != M->alpha ||
			L->rate != M->rate || L->fused != M->fused || L->ih != M->ih || L->iw != M->iw ||
			L->ic != M->ic || L->oh != M->oh || L->ow != M->ow || L->oc != M->oc ||
			L->kh != M->kh || L->kw != M->kw || L->sh != M->sh || L->sw != M->sw ||
			L->pt != M->pt || L->pl != M->pl || L->w_off != M->w_off || L->b_off != M->b_off ||
			L->out_off != M->out_off || L->aux_off != M->aux_off || L->s_off != M->s_off ||
			L->momentum != M->momentum || L->eps != M->eps)
			return fail(why, whylen, -1, "layer %d differs", i + 1);
	}
	for (int k = 0; k < p->n_tensors; k++)
		if (p->t[k].off != q->t[k].off || p->t[k].size != q->t[k].size ||
			p->t[k].is_kernel != q->t[k].is_kernel || p->t[k].is_buffer != q->t[k].is_buffer)
			return fail(why, whylen, -1, "the parameter tensors differ");
	if (p->n_bufs != q->n_bufs)
		return fail(why, whylen, -1, "the running statistics differ");
	if (s->loss != t->loss || s->metric != t->metric || s->top_k != t->top_k)
		return fail(why, whylen, -1, "the losses or metrics differ");
	if (s->optimizer != t->optimizer || p->n_opt != q->n_opt)
		return fail(why, whylen, -1, "the optimizers differ");
	return 0;
}

extern "C" int
mop_gpu_gang_check(const nn_model *a, const nn_model *b, char *why, size_t whylen)
{
	return gang_mismatch(a, b, why, whylen) == 0 ? MOP_GPU_OK : MOP_GPU_EINVAL;
}

/*
 * One member's hyperparameters as the kernels read them (nn_optim_step's;
 * the learning rate, which a schedule changes by epoch, comes with each
 * step: complete_step).
 */
static gk_optim
member_hp(const nn_spec *s)
{
	gk_optim	o;

	memset(&o, 0, sizeof(o));
	o.momentum = s->momentum;
	o.nesterov = s->nesterov;
	o.beta1 = s->beta1;
	o.beta2 = s->beta2;
	o.eps = s->eps;
	o.rho = s->rho;
	o.l2 = s->l2;
	o.clip = s->clip_norm > 0 ? s->clip_norm : 0.0f;
	return o;
}

/*
 * Copy every member's class weights (nn_model_class_weights) to the
 * device, where the loss kernels read them; they may change between
 * streams, never during one.  Waits (the host arrays are the models').
 */
cudaError_t
upload_class_weights(mop_gpu_model *g)
{
	int			on[MOP_GPU_GANG_MAX];
	int			before = g->weighs;
	cudaError_t e = cudaSuccess;

	g->weighs = 0;
	for (int k = 0; k < g->n; k++)
	{
		const float *w;
		int32_t		nw = nn_model_class_weights(g->mem[k].host, &w);

		on[k] = nw > 0 && nw == g->cw.ncls;
		g->weighs |= on[k];
		if (on[k] && e == cudaSuccess)
			e = cudaMemcpyAsync((float *) g->cw.cw + (int64_t) k * g->cw.ncls, w,
								(size_t) nw * 4, cudaMemcpyHostToDevice, g->stream);
	}
	if (e == cudaSuccess)
		e = cudaMemcpyAsync((int *) g->cw.on, on, g->n * sizeof(int), cudaMemcpyHostToDevice,
							g->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(g->stream);
	/* graphs captured with (or without) the weighting kernels are stale now */
	if (g->weighs != before && g->graph_state == 1)
	{
		cudaGraphExecDestroy(g->exec1);
		cudaGraphExecDestroy(g->execn);
		g->graph_state = 0;
	}
	return e;
}

/* Long because the mirror is carved out of one allocation in one order, and each failure closes what is open so far. */
extern "C" int
mop_gpu_gang_open(nn_model **hosts, int32_t n, const mop_gpu_options *opt,
				  mop_gpu_model **out, char *msg, size_t msglen)
{
	const nn_plan *p;
	mop_gpu_model *g;
	mirror_layout lo;
	gk_optim	hp[MOP_GPU_GANG_MAX];
	char	   *c;
	int			r;
	cublasStatus_t bs;

	*out = NULL;
	if (!hosts || !opt || n < 1)
		return fail(msg, msglen, MOP_GPU_EINVAL, "no model given");
	if (n > MOP_GPU_GANG_MAX)
		return fail(msg, msglen, MOP_GPU_EINVAL, "a gang holds at most %d models, not %d",
					MOP_GPU_GANG_MAX, n);
	for (int k = 0; k < n; k++)
	{
		char		why[128];

		if (!hosts[k])
			return fail(msg, msglen, MOP_GPU_EINVAL, "no model given");
		if (hosts[k]->streaming)
			return fail(msg, msglen, MOP_GPU_EINVAL, "the model is in a CPU training stream");
		for (int j = 0; j < k; j++)
			if (hosts[j] == hosts[k])
				return fail(msg, msglen, MOP_GPU_EINVAL, "model %d of the gang is model %d again",
							k + 1, j + 1);
		if (k > 0 && gang_mismatch(hosts[0], hosts[k], why, sizeof(why)) != 0)
			return fail(msg, msglen, MOP_GPU_EINVAL,
						"model %d cannot train in a gang with model 1: %s", k + 1, why);
		hp[k] = member_hp(&hosts[k]->spec);
	}
	p = &hosts[0]->plan;
	if ((int64_t) STEP_CAP / n < GRAPH_STEPS + 1)
		return fail(msg, msglen, MOP_GPU_EINVAL, "a gang of %d models is too large", n);
	CU(cudaSetDevice(opt->device), "cudaSetDevice");
	if (!(g = (mop_gpu_model *) calloc(1, sizeof(*g))))
		return fail(msg, msglen, MOP_GPU_ENOMEM, "out of host memory");
	g->host = hosts[0];
	g->n = n;
	for (int k = 0; k < n; k++)
		g->mem[k].host = hosts[k];
	g->device = opt->device;
	g->tab_cap = STEP_CAP / n;
	layout_of(hosts[0], n, &lo);
	if (!(g->sh = shell_get(opt->device, msg, msglen)))
	{
		free(g);
		return MOP_GPU_ECUDA;
	}
	g->stream = g->sh->stream;
	g->blas = g->sh->blas;
	g->st_host = g->sh->st_host;
	g->acc_host = g->sh->acc_host;
	g->steptab_host = g->sh->steptab_host;
	/* the budget first, then stream-ordered device memory */
	r = ledger_reserve(lo.total, n > 1 ? "the gang of models" : "the model",
					   msg, msglen);
	if (r != 0)
	{
		mop_gpu_model_close(g);
		return MOP_GPU_ENOMEM;
	}
	if (cudaMallocAsync(&g->base, lo.total, g->stream) != cudaSuccess)
	{
		cudaError_t e = cudaGetLastError();
		char		need[32];

		ledger_release(lo.total);
		g->base = NULL;
		mop_gpu_model_close(g);
		mop_gpu_format_bytes(lo.total, need, sizeof(need));
		return fail(msg, msglen, e == cudaErrorMemoryAllocation ? MOP_GPU_ENOMEM : MOP_GPU_ECUDA,
					"the model needs %s of GPU memory: %s", need, cudaGetErrorString(e));
	}
	g->bytes = lo.total;
	c = (char *) g->base;
#define TAKE(field, type, size) do { g->field = (type *) c; c += (size); } while (0)
	TAKE(params, float, lo.params);
	TAKE(grads, float, lo.grads);
	TAKE(opt, float, lo.opt);
	TAKE(bufs, float, lo.bufs);
	g->cw.ncls = nn_model_n_classes(hosts[0]);
	g->cw.cw = (const float *) c;
	c += al((int64_t) n * g->cw.ncls * 4);
	g->cw.on = (const int *) c;
	c += al(n * 4);
	g->cw.wsum = (double *) c;
	c += al(n * 8);
	TAKE(acts, float, lo.acts);
	TAKE(grad0, float, lo.grad);
	TAKE(grad1, float, lo.grad);
	TAKE(col, float, lo.col);
	TAKE(xb, float, lo.xb);
	TAKE(yb, float, lo.yb);
	TAKE(ones, float, lo.ones);
	TAKE(rowloss, double, lo.rows);
	TAKE(rowmetric, double, lo.rows);
	TAKE(coef, float, al(n * 4));
	TAKE(acc, double, al(n * 32));	/* two sums and the step's pending two */
	TAKE(eacc, double, al(n * 32));
	TAKE(hp, gk_optim, al(n * sizeof(gk_optim)));
	TAKE(st, gk_status, al(n * sizeof(gk_status)));
	TAKE(steptab, gk_step, lo.steps);
	TAKE(stepidx, int, al(4));
	TAKE(blasws, void, BLAS_WS_BYTES);
#undef TAKE
	g->ones_len = lo.ones_len;
	for (int i = 0; i < p->n; i++)
		if (p->l[i].type == NN_LAYER_CONV2D)
		{
			int64_t		col;

			g->chunk[i] = conv_chunk(&p->l[i], p->batch, n, &col);
		}
	for (int k = 0; k < n; k++)
		g->clips |= hp[k].clip > 0;

	g->mask_cap = dropout_cap(p);
	g->whole_set = hosts[0]->tacc.on;
	/* dropout draws on the host, whole-set metrics read every step: no graphs */
	g->graph_state = (g->mask_cap > 0 || g->whole_set || opt->no_graphs) ? -1 : 0;
	if (g->whole_set &&
		!(g->out_host = (float *) malloc((size_t) n * p->batch * (p->out_dim + p->y_dim) * 4)))
	{
		mop_gpu_model_close(g);
		return fail(msg, msglen, MOP_GPU_ENOMEM, "out of host memory");
	}
	if (g->out_host)
		g->y_host = g->out_host + (size_t) n * p->batch * p->out_dim;
	if (g->mask_cap > 0 &&
		cudaMallocHost((void **) &g->mask_host, (size_t) g->mask_cap * n * 4) != cudaSuccess)
	{
		cudaError_t e = cudaGetLastError();

		mop_gpu_model_close(g);
		return cuda_fail(msg, msglen, "allocating dropout masks", e);
	}
	if ((bs = cublasSetWorkspace(g->blas, g->blasws, BLAS_WS_BYTES)) != CUBLAS_STATUS_SUCCESS ||
		(bs = cublasSetMathMode(g->blas, opt->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH :
								CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
	{
		mop_gpu_model_close(g);
		return blas_fail(msg, msglen, "setting up cuBLAS", bs);
	}
	gk_fill(g->ones, g->ones_len, 1.0f, g->stream);
	cudaMemsetAsync(g->st, 0, n * sizeof(gk_status), g->stream);
	/* hp is on the stack: this copy must finish before returning (the sync below) */
	cudaMemcpyAsync(g->hp, hp, n * sizeof(gk_optim), cudaMemcpyHostToDevice, g->stream);
	{
		cudaError_t e = cudaSuccess;

		for (int k = 0; k < n && e == cudaSuccess; k++)
		{
			e = cudaMemcpyAsync(g->params + k * p->n_params, hosts[k]->params,
								(size_t) p->n_params * 4, cudaMemcpyHostToDevice, g->stream);
			if (e == cudaSuccess && p->n_opt > 0)
				e = cudaMemcpyAsync(g->opt + k * p->n_opt, hosts[k]->opt, (size_t) p->n_opt * 4,
									cudaMemcpyHostToDevice, g->stream);
			if (e == cudaSuccess && p->n_bufs > 0)
				e = cudaMemcpyAsync(g->bufs + k * p->n_bufs, hosts[k]->bufs,
									(size_t) p->n_bufs * 4, cudaMemcpyHostToDevice, g->stream);
		}
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(g->stream);
		if (e == cudaSuccess)
			e = upload_class_weights(g);
		if (e != cudaSuccess)
		{
			mop_gpu_model_close(g);
			return cuda_fail(msg, msglen, "uploading the model", e);
		}
	}
	*out = g;
	return MOP_GPU_OK;
}

extern "C" int
mop_gpu_model_open(nn_model *host, const mop_gpu_options *opt, mop_gpu_model **out,
				   char *msg, size_t msglen)
{
	return mop_gpu_gang_open(&host, 1, opt, out, msg, msglen);
}

extern "C" int
mop_gpu_model_sync(mop_gpu_model *g, char *msg, size_t msglen)
{
	const nn_plan *p = &g->host->plan;

	CU(cudaSetDevice(g->device), "cudaSetDevice");
	for (int k = 0; k < g->n; k++)
	{
		CU(cudaMemcpyAsync(g->mem[k].host->params, g->params + k * p->n_params,
						   (size_t) p->n_params * 4, cudaMemcpyDeviceToHost, g->stream),
		   "downloading the weights");
		if (p->n_opt > 0)
			CU(cudaMemcpyAsync(g->mem[k].host->opt, g->opt + k * p->n_opt,
							   (size_t) p->n_opt * 4, cudaMemcpyDeviceToHost, g->stream),
			   "downloading the optimizer state");
		if (p->n_bufs > 0)
			CU(cudaMemcpyAsync(g->mem[k].host->bufs, g->bufs + k * p->n_bufs,
							   (size_t) p->n_bufs * 4, cudaMemcpyDeviceToHost, g->stream),
			   "downloading the running statistics");
	}
	CU(cudaStreamSynchronize(g->stream), "downloading the model");
	return MOP_GPU_OK;
}
