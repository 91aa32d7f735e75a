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
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "budget.h"
#include "kernels.h"
#include "mop_gpu.h"

/* Largest im2col buffer of a mirror, in floats (64 MB); bigger convolutions go in chunks. */
#define GPU_COL_CAP_FLOATS (INT64_C(1) << 24)

/* Entries of the step table (see gk_step); the host waits when it is full. */
#define STEP_CAP 4096

/* Full-batch steps replayed by one launch of the long graph. */
#define GRAPH_STEPS 8

/* cuBLAS workspace of a mirror (set explicitly, so a step can be captured as a graph). */
#define BLAS_WS_BYTES (UINT64_C(8) << 20)

static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static mop_gpu_ledger ledger;

/*
 * What a mirror needs besides device memory -- a stream, a cuBLAS handle,
 * small pinned host buffers -- is costly to create and, worse, to destroy
 * (freeing pinned memory waits for the whole device, stalling every other
 * model sharing the GPU).  So a closed mirror's shell goes to a free list
 * and the next mirror on that device takes it.  Its device memory is
 * allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync),
 * which waits for nothing either.
 */
typedef struct shell
{
	int			device;
	cudaStream_t stream;
	cublasHandle_t blas;
	gk_status  *st_host;		/* MOP_GPU_GANG_MAX */
	double	   *acc_host;		/* 4 * MOP_GPU_GANG_MAX */
	gk_step    *steptab_host;	/* STEP_CAP */
	struct shell *next;
} shell;

#define SHELLS_KEPT 64

static pthread_mutex_t shell_lock = PTHREAD_MUTEX_INITIALIZER;
static shell *free_shells;
static int	n_free_shells;

struct mop_gpu_data
{
	int			device;
	int64_t		n;
	int32_t		in_dim,
				y_dim;
	float	   *x,
			   *y;
	uint64_t	bytes;
	int			checked_loss;	/* labels checked for this loss / width */
	int			checked_out;
};

/* What a gang holds for each of its models. */
typedef struct gang_member
{
	nn_model   *host;
	/* the order of the buffer being fed (mop_gpu_train_order) */
	const mop_gpu_data *order_of;
	int64_t    *perm;			/* stream-ordered device memory, perm_cap entries */
	int64_t		perm_cap;
	/* stream state, as nn_model's */
	int64_t		steps0;			/* host->steps when the stream began */
	int64_t		rows0;
	int64_t		acc_rows,
				acc_steps;
	int			diverged0;		/* had diverged when the stream began */
} gang_member;

struct mop_gpu_model
{
	nn_model   *host;			/* the first member: plan and spec of all */
	int			n;				/* members */
	gang_member mem[MOP_GPU_GANG_MAX];
	shell	   *sh;
	int			device;
	cudaStream_t stream;
	cublasHandle_t blas;
	uint64_t	bytes;
	void	   *base;			/* the one device allocation */

	float	   *params,
			   *grads,
			   *opt,
			   *acts,			/* n * plan->ws_acts floats, at n times the CPU's offsets */
			   *grad0,
			   *grad1,
			   *col,
			   *xb,
			   *yb,
			   *ones,
			   *coef;
	double	   *rowloss,
			   *rowmetric,
			   *acc,			/* training sums of the stream, 4 per member */
			   *eacc;			/* evaluation / gradient sums, 4 per member */
	gk_optim   *hp;				/* hyperparameters, one per member */
	int			clips;			/* some member clips its gradients */
	gk_status  *st;				/* one per member */
	gk_step    *steptab;		/* STEP_CAP entries: STEP_CAP / n steps */
	int		   *stepidx;		/* the step running now */
	void	   *blasws;
	int64_t		ones_len;
	int32_t		chunk[NN_MAX_ILAYERS];	/* conv: images per member per im2col chunk */

	float	   *mask_host;		/* pinned: dropout masks of one layer, all members */
	int64_t		mask_cap;		/* floats per member */
	gk_status  *st_host;		/* pinned: the statuses, read back */
	double	   *acc_host;		/* pinned: four sums per member */
	gk_step    *steptab_host;	/* pinned: the table being uploaded */
	int64_t		tab_cap;		/* steps the table holds */
	int64_t		tab_launched;	/* steps launched since the last wait */
	int64_t		ready;			/* complete steps after those, not launched yet */
	int			pregathered;	/* rows of the step being gathered are staged already */

	/*
	 * Full-batch training steps captured as CUDA graphs, one step (exec1)
	 * and GRAPH_STEPS steps (execn): -1 not usable (dropout draws on the
	 * host, or switched off), 0 not captured yet, 1 ready.
	 */
	int			graph_state;
	cudaGraphExec_t exec1;
	cudaGraphExec_t execn;

	const float *lin[NN_MAX_ILAYERS];

	/* stream state */
	int			streaming;
	int64_t		fill;			/* rows per member of the step being gathered */
};

/* ---- errors ---------------------------------------------------------- */

static int
fail(char *msg, size_t msglen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int
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

static int
cuda_fail(char *msg, size_t msglen, const char *what, cudaError_t e)
{
	int			code = (e == cudaErrorMemoryAllocation) ? MOP_GPU_ENOMEM : MOP_GPU_ECUDA;

	(void) cudaGetLastError();
	return fail(msg, msglen, code, "%s: %s (%s)", what, cudaGetErrorString(e),
				cudaGetErrorName(e));
}

#define CU(call, what) \
	do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return cuda_fail(msg, msglen, what, e_); } while (0)

/* ---- memory ---------------------------------------------------------- */

/* cudaMalloc through the ledger. */
static int
dev_alloc(void **p, uint64_t bytes, const char *what, char *msg, size_t msglen)
{
	cudaError_t e;
	int			r;

	*p = NULL;
	pthread_mutex_lock(&ledger_lock);
	r = mop_gpu_ledger_reserve(&ledger, bytes, what, msg, msglen);
	pthread_mutex_unlock(&ledger_lock);
	if (r != 0)
		return MOP_GPU_ENOMEM;
	e = cudaMalloc(p, bytes ? bytes : 1);
	if (e != cudaSuccess)
	{
		char		need[32];

		pthread_mutex_lock(&ledger_lock);
		mop_gpu_ledger_release(&ledger, bytes);
		pthread_mutex_unlock(&ledger_lock);
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
	pthread_mutex_lock(&ledger_lock);
	mop_gpu_ledger_release(&ledger, bytes);
	pthread_mutex_unlock(&ledger_lock);
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
	uint64_t	params, grads, opt, acts, grad, col, xb, yb, ones, rows, steps, total;
	int64_t		col_floats, ones_len;
} mirror_layout;

static void
layout_of(const nn_plan *p, int n, mirror_layout *lo)
{
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
	lo->acts = al(n * p->ws_acts * 4);
	lo->grad = al(n * p->ws_grad * 4);
	lo->col = al(colmax * 4);
	lo->xb = al((int64_t) n * p->in_dim * p->batch * 4);
	lo->yb = al((int64_t) n * p->y_dim * p->batch * 4);
	lo->ones = al(onesmax * 4);
	lo->rows = al((int64_t) n * p->batch * 8);
	lo->steps = al(STEP_CAP * sizeof(gk_step));
	lo->total = lo->params + lo->grads + lo->opt + lo->acts + 2 * lo->grad + lo->col +
		lo->xb + lo->yb + lo->ones + 2 * lo->rows + al(n * 4) + 2 * al(n * 32) +
		al(n * sizeof(gk_optim)) + al(n * sizeof(gk_status)) + lo->steps + al(4) + BLAS_WS_BYTES;
}

extern "C" uint64_t
mop_gpu_model_bytes(const nn_model *host)
{
	mirror_layout lo;

	layout_of(&host->plan, 1, &lo);
	return lo.total;
}

extern "C" uint64_t
mop_gpu_gang_bytes(const nn_model *host, int32_t n)
{
	mirror_layout lo;

	layout_of(&host->plan, n < 1 ? 1 : n, &lo);
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
			pthread_mutex_lock(&ledger_lock);
			mop_gpu_ledger_release(&ledger, (uint64_t) g->mem[k].perm_cap * 8);
			pthread_mutex_unlock(&ledger_lock);
		}
	if (g->base)
	{
		cudaFreeAsync(g->base, g->stream);
		pthread_mutex_lock(&ledger_lock);
		mop_gpu_ledger_release(&ledger, g->bytes);
		pthread_mutex_unlock(&ledger_lock);
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
			L->out_off != M->out_off || L->aux_off != M->aux_off)
			return fail(why, whylen, -1, "layer %d differs", i + 1);
	}
	for (int k = 0; k < p->n_tensors; k++)
		if (p->t[k].off != q->t[k].off || p->t[k].size != q->t[k].size ||
			p->t[k].is_kernel != q->t[k].is_kernel)
			return fail(why, whylen, -1, "the parameter tensors differ");
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

/* One member's hyperparameters as the kernels read them (nn_optim_step's). */
static gk_optim
member_hp(const nn_spec *s)
{
	gk_optim	o;

	memset(&o, 0, sizeof(o));
	o.lr = s->lr;
	o.momentum = s->momentum;
	o.nesterov = s->nesterov;
	o.beta1 = s->beta1;
	o.beta2 = s->beta2;
	o.eps = s->eps;
	o.rho = s->rho;
	o.l2 = s->l2;
	o.kernel_decay = s->optimizer == NN_OPT_ADAMW ? 1.0f - s->lr * s->weight_decay : 1.0f;
	o.clip = s->clip_norm > 0 ? s->clip_norm : 0.0f;
	return o;
}

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
	layout_of(p, n, &lo);
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
	pthread_mutex_lock(&ledger_lock);
	r = mop_gpu_ledger_reserve(&ledger, lo.total, n > 1 ? "the gang of models" : "the model",
							   msg, msglen);
	pthread_mutex_unlock(&ledger_lock);
	if (r != 0)
	{
		mop_gpu_model_close(g);
		return MOP_GPU_ENOMEM;
	}
	if (cudaMallocAsync(&g->base, lo.total, g->stream) != cudaSuccess)
	{
		cudaError_t e = cudaGetLastError();
		char		need[32];

		pthread_mutex_lock(&ledger_lock);
		mop_gpu_ledger_release(&ledger, lo.total);
		pthread_mutex_unlock(&ledger_lock);
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
	g->graph_state = (g->mask_cap > 0 || opt->no_graphs) ? -1 : 0;
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
		}
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(g->stream);
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
	}
	CU(cudaStreamSynchronize(g->stream), "downloading the model");
	return MOP_GPU_OK;
}

/* ---- forward and backward -------------------------------------------- */

/*
 * Row-major C = alpha op(A) op(B) + beta C, as nn_gemm (blas.c), on cuBLAS,
 * for every member of the gang: member k's matrices are sa, sb and sc
 * floats after member k - 1's.  A gang of one makes the plain call.
 */
static void
gemm(mop_gpu_model *g, int ta, int tb, int m, int n, int k, float alpha, const float *a,
	 int lda, int64_t sa, const float *b, int ldb, int64_t sb, float beta, float *c, int ldc,
	 int64_t sc)
{
	/* row-major C = A B is column-major C^T = B^T A^T */
	if (g->n == 1)
		cublasSgemm(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
					n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
	else if (k >= 2048 && k > 8 * (m + n))
	{
		/*
		 * A long reduction onto a small result (a convolution's weight
		 * gradient sums over every pixel of the batch): cuBLAS splits the
		 * reduction across the GPU for one GEMM but not in a batch, where
		 * each member's would run on a handful of blocks.  One call each.
		 */
		for (int j = 0; j < g->n; j++)
			cublasSgemm(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
						n, m, k, &alpha, b + j * sb, ldb, a + j * sa, lda, &beta, c + j * sc, ldc);
	}
	else
		cublasSgemmStridedBatched(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
								  ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, sb,
								  a, lda, sa, &beta, c, ldc, sc, g->n);
}

/*
 * sum_rows (layers.c): out[width] = sum over rows of x[rows, width], via a
 * GEMV with ones; member k's x is sx floats further and its out so.
 */
static void
sum_rows(mop_gpu_model *g, const float *x, int64_t rows, int64_t width, int64_t sx, float *out,
		 int64_t so)
{
	const float one = 1.0f,
				zero = 0.0f;

	if (g->n == 1)
		cublasSgemv(g->blas, CUBLAS_OP_N, (int) width, (int) rows, &one, x, (int) width,
					g->ones, 1, &zero, out, 1);
	else
		cublasSgemvStridedBatched(g->blas, CUBLAS_OP_N, (int) width, (int) rows, &one, x,
								  (int) width, sx, g->ones, 1, 0, &zero, out, 1, so, g->n);
}

/*
 * Draw one dropout layer's masks, per members nb * out_size floats, each
 * from its own model's generator on the host, and upload them (see the
 * header).
 */
static void
dropout_mask(mop_gpu_model *g, const nn_ilayer *L, float *mask_dev, int64_t per)
{
	float		keep = 1.0f / (1.0f - L->rate);

	/* the pinned buffer may still be feeding the last copy */
	cudaStreamSynchronize(g->stream);
	for (int k = 0; k < g->n; k++)
	{
		nn_model   *m = g->mem[k].host;
		float	   *mk = g->mask_host + k * per;

		for (int64_t i = 0; i < per; i++)
			mk[i] = nn_rng_uniform(m->rng) >= L->rate ? keep : 0.0f;
	}
	cudaMemcpyAsync(mask_dev, g->mask_host, (size_t) (per * g->n) * 4, cudaMemcpyHostToDevice,
					g->stream);
}

/* nn_layer_forward (layers.c), nb rows per member */
static void
layer_forward(mop_gpu_model *g, int li, const nn_ilayer *L, const float *in, float *out,
			  int nb, int training)
{
	int64_t		P = g->host->plan.n_params;
	const float *W = L->w_off >= 0 ? g->params + L->w_off : NULL;
	const float *b = L->b_off >= 0 ? g->params + L->b_off : NULL;
	int64_t		rows = (int64_t) g->n * nb;	/* every member's rows */
	cudaStream_t s = g->stream;

	switch (L->type)
	{
		case NN_LAYER_DENSE:
			{
				int			K = (int) L->in_size;

				if (b)
					gk_fill_rows(out, g->n, nb, L->oc, b, P, s);
				gemm(g, 0, 0, nb, L->oc, K, 1.0f, in, K, (int64_t) nb * K, W, L->oc, P,
					 b ? 1.0f : 0.0f, out, L->oc, (int64_t) nb * L->oc);
				break;
			}
		case NN_LAYER_CONV2D:
			{
				int			K = L->kh * L->kw * L->ic;
				int64_t		img_rows = (int64_t) L->oh * L->ow;
				int			chunk = g->chunk[li];

				if (b)
					gk_fill_rows(out, g->n, nb * img_rows, L->oc, b, P, s);
				for (int n0 = 0; n0 < nb; n0 += chunk)
				{
					int			cn = nb - n0 < chunk ? nb - n0 : chunk;

					gk_im2col(L, in + (int64_t) n0 * L->in_size, g->col, g->n, cn, nb, s);
					gemm(g, 0, 0, (int) (cn * img_rows), L->oc, K, 1.0f, g->col, K,
						 cn * img_rows * K, W, L->oc, P, b ? 1.0f : 0.0f,
						 out + n0 * img_rows * L->oc, L->oc, nb * img_rows * L->oc);
				}
				break;
			}
		case NN_LAYER_MAXPOOL2D:
			gk_maxpool_forward(L, in, out, (int32_t *) (g->acts + g->n * L->aux_off), (int) rows,
							   s);
			break;
		case NN_LAYER_DROPOUT:
			{
				int64_t		total = rows * L->out_size;

				if (training && L->rate > 0)
				{
					float	   *mask = g->acts + g->n * L->aux_off;

					dropout_mask(g, L, mask, (int64_t) nb * L->out_size);
					gk_mul(in, mask, out, total, s);
				}
				else
					cudaMemcpyAsync(out, in, (size_t) total * 4, cudaMemcpyDeviceToDevice, s);
				break;
			}
		case NN_LAYER_ACTIVATION:
			gk_act_forward(L->act, L->alpha, in, out, rows, L->out_size, s);
			break;
		default:
			break;
	}
}

/* nn_layer_backward (layers.c), nb rows per member */
static void
layer_backward(mop_gpu_model *g, int li, const nn_ilayer *L, const float *in,
			   const float *out, const float *dout, float *din, int nb)
{
	int64_t		P = g->host->plan.n_params;
	const float *W = L->w_off >= 0 ? g->params + L->w_off : NULL;
	float	   *dW = L->w_off >= 0 ? g->grads + L->w_off : NULL;
	float	   *db = L->b_off >= 0 ? g->grads + L->b_off : NULL;
	int64_t		rows = (int64_t) g->n * nb;
	cudaStream_t s = g->stream;

	switch (L->type)
	{
		case NN_LAYER_DENSE:
			{
				int			K = (int) L->in_size;

				gemm(g, 1, 0, K, L->oc, nb, 1.0f, in, K, (int64_t) nb * K, dout, L->oc,
					 (int64_t) nb * L->oc, 0.0f, dW, L->oc, P);
				if (db)
					sum_rows(g, dout, nb, L->oc, (int64_t) nb * L->oc, db, P);
				if (din)
					gemm(g, 0, 1, nb, K, L->oc, 1.0f, dout, L->oc, (int64_t) nb * L->oc, W,
						 L->oc, P, 0.0f, din, K, (int64_t) nb * K);
				break;
			}
		case NN_LAYER_CONV2D:
			{
				int			K = L->kh * L->kw * L->ic;
				int64_t		img_rows = (int64_t) L->oh * L->ow;
				int64_t		sd = nb * img_rows * L->oc;	/* one member's dout */
				int			chunk = g->chunk[li];

				if (db)
					sum_rows(g, dout, nb * img_rows, L->oc, sd, db, P);
				for (int n0 = 0; n0 < nb; n0 += chunk)
				{
					int			cn = nb - n0 < chunk ? nb - n0 : chunk;
					int			crows = (int) (cn * img_rows);
					const float *dchunk = dout + n0 * img_rows * L->oc;

					gk_im2col(L, in + (int64_t) n0 * L->in_size, g->col, g->n, cn, nb, s);
					gemm(g, 1, 0, K, L->oc, crows, 1.0f, g->col, K, (int64_t) crows * K, dchunk,
						 L->oc, sd, n0 == 0 ? 0.0f : 1.0f, dW, L->oc, P);
					if (din)
					{
						gemm(g, 0, 1, crows, K, L->oc, 1.0f, dchunk, L->oc, sd, W, L->oc, P,
							 0.0f, g->col, K, (int64_t) crows * K);
						gk_col2im(L, g->col, din + (int64_t) n0 * L->in_size, g->n, cn, nb, s);
					}
				}
				break;
			}
		case NN_LAYER_MAXPOOL2D:
			if (din)
				gk_maxpool_backward(L, dout, (const int32_t *) (g->acts + g->n * L->aux_off), din,
									(int) rows, s);
			break;
		case NN_LAYER_DROPOUT:
			if (din)
			{
				int64_t		total = rows * L->out_size;

				if (L->rate > 0)
					gk_mul(dout, g->acts + g->n * L->aux_off, din, total, s);
				else
					cudaMemcpyAsync(din, dout, (size_t) total * 4, cudaMemcpyDeviceToDevice, s);
			}
			break;
		case NN_LAYER_ACTIVATION:
			if (din)
				gk_act_backward(L->act, L->alpha, in, out, dout, din, rows, L->out_size, s);
			break;
		default:
			break;
	}
}

/* nn_forward (model.c): returns the network output (logits) [n * nb, out_dim] */
static const float *
forward(mop_gpu_model *g, const float *x, int nb, int training)
{
	const nn_plan *p = &g->host->plan;
	const float *cur = x;

	for (int i = 0; i < p->n; i++)
	{
		const nn_ilayer *L = &p->l[i];
		float	   *out;

		g->lin[i] = cur;
		if (L->fused || L->type == NN_LAYER_FLATTEN)
			continue;
		out = g->acts + g->n * L->out_off;
		layer_forward(g, i, L, cur, out, nb, training);
		cur = out;
	}
	return cur;
}

/* backward (model.c); dz is in grad0 */
static void
backward(mop_gpu_model *g, const float *x, int nb)
{
	const nn_plan *p = &g->host->plan;
	float	   *dcur = g->grad0,
			   *dnext = g->grad1;

	for (int i = p->n - 1; i >= 0; i--)
	{
		const nn_ilayer *L = &p->l[i];
		const float *in = g->lin[i];
		float	   *din;

		if (L->fused || L->type == NN_LAYER_FLATTEN)
			continue;
		din = (in == x) ? NULL : dnext;
		layer_backward(g, i, L, in, g->acts + g->n * L->out_off, dcur, din, nb);
		if (!din)
			break;
		dnext = dcur;
		dcur = din;
	}
}

/* nn_optim_step (optim.c): the step's scalars come from the step table */
static void
optim_step(mop_gpu_model *g)
{
	const nn_spec *s = &g->host->spec;
	const nn_plan *p = &g->host->plan;
	int64_t		P = p->n_params;
	const float *coef = NULL;

	if (g->clips)
	{
		gk_clip_coef(g->grads, P, g->n, g->hp, g->coef, g->stream);
		coef = g->coef;
	}
	for (int k = 0; k < p->n_tensors; k++)
	{
		const nn_itensor *T = &p->t[k];
		gk_tensor	t;

		t.off = T->off;
		t.size = T->size;
		t.n_params = P;
		t.n_opt = p->n_opt;
		t.is_kernel = T->is_kernel;
		t.s1 = t.s2 = 0;
		switch (s->optimizer)
		{
			case NN_OPT_SGD:
				t.s1 = s->momentum > 0;
				break;
			case NN_OPT_ADAM:
			case NN_OPT_ADAMW:
				t.s1 = t.s2 = 1;
				break;
			case NN_OPT_RMSPROP:
				t.s1 = 1;
				t.s2 = s->momentum > 0;
				break;
		}
		gk_optim_tensor(s->optimizer, g->hp, &t, g->params, g->grads, g->opt, coef, g->st,
						g->steptab, g->stepidx, g->n, g->stream);
	}
}

/* The kernels of one training step (train_step, model.c); nothing waits. */
static void
step_kernels(mop_gpu_model *g, const float *x, const float *y, int nb)
{
	nn_model   *m = g->host;
	const nn_plan *p = &m->plan;
	const float *z = forward(g, x, nb, 1);

	gk_loss_rows(m->spec.loss, m->spec.metric, m->spec.top_k, p->out_dim, z, y, g->n, nb,
				 g->grad0, g->rowloss, g->rowmetric, g->stream);
	gk_loss_reduce(g->rowloss, g->rowmetric, g->n, nb, g->acc, g->st, g->steptab, g->stepidx, 1,
				   g->stream);
	backward(g, x, nb);
	optim_step(g);
	gk_commit_sums(g->acc, g->st, g->n, g->stream);
	gk_step_advance(g->stepidx, g->stream);
}

/*
 * Rows staged for a full batch (members batch rows apart) close up to nb
 * rows apart, member after member, for a gang's short last step (grad1 is
 * free before the step's backward pass).
 */
static void
close_up(mop_gpu_model *g, float *buf, int64_t width, int nb)
{
	int64_t		B = g->host->plan.batch;
	size_t		row = (size_t) width * 4;

	cudaMemcpy2DAsync(g->grad1, nb * row, buf, B * row, nb * row, g->n,
					  cudaMemcpyDeviceToDevice, g->stream);
	cudaMemcpyAsync(buf, g->grad1, g->n * nb * row, cudaMemcpyDeviceToDevice, g->stream);
}

/*
 * One step as the step table describes it: gather its rows (members nb
 * rows apart), then train on nb rows per member.
 */
static void
step_body(mop_gpu_model *g, int nb)
{
	const nn_plan *p = &g->host->plan;

	if (g->n > 1 && nb < p->batch && g->pregathered)
	{
		close_up(g, g->xb, p->in_dim, nb);
		close_up(g, g->yb, p->y_dim, nb);
		g->pregathered = 0;
	}
	gk_gather_step(g->steptab, g->stepidx, g->n, g->xb, g->yb, nb, p->in_dim, p->y_dim,
				   g->stream);
	step_kernels(g, g->xb, g->yb, nb);
}

/* Capture nsteps full-batch steps as a graph into *exec; 0 if it worked. */
static int
capture_steps(mop_gpu_model *g, int nsteps, cudaGraphExec_t *exec)
{
	cudaGraph_t graph = NULL;
	cudaError_t e;

	if (cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return -1;
	}
	for (int k = 0; k < nsteps; k++)
		step_body(g, g->host->plan.batch);
	e = cudaStreamEndCapture(g->stream, &graph);
	if (e == cudaSuccess && graph)
		e = cudaGraphInstantiate(exec, graph, 0);
	if (graph)
		cudaGraphDestroy(graph);
	if (e != cudaSuccess)
	{
		(void) cudaGetLastError();
		return -1;
	}
	return 0;
}

/* The first member's entry of the step being gathered now (the others follow it). */
static gk_step *
cur_entry(mop_gpu_model *g)
{
	return &g->steptab_host[(g->tab_launched + g->ready) * g->n];
}

/* Member k's order of the rows of the buffer whose x is x (NULL: stored order). */
static const int64_t *
member_perm(const mop_gpu_model *g, int k, const float *x)
{
	const gang_member *mb = &g->mem[k];

	return mb->order_of && mb->order_of->x == x ? mb->perm : NULL;
}

/*
 * The step whose first entry is e is complete with nb rows per member:
 * give each member its entry (the first one's rows in the member's own
 * order) with its step number and the optimizer's scalars for it, as
 * nn_optim_step computes them, and count it as train_step (model.c) does.
 * A member known to have diverged counts nothing (its kernels skip it).
 */
static void
complete_step(mop_gpu_model *g, gk_step *e, int nb)
{
	for (int k = 0; k < g->n; k++)
	{
		gang_member *mb = &g->mem[k];
		nn_model   *m = mb->host;
		const nn_spec *s = &m->spec;
		gk_step    *ek = e + k;
		long long	t = (long long) m->steps + 1;

		if (k > 0)
		{
			ek->nseg = e->nseg;
			for (int j = 0; j < e->nseg; j++)
			{
				ek->seg[j] = e->seg[j];
				ek->seg[j].perm = member_perm(g, k, e->seg[j].x);
			}
		}
		ek->t = t;
		ek->step_size = 0.0f;
		ek->bc2_sqrt = 1.0f;
		if (s->optimizer == NN_OPT_ADAM || s->optimizer == NN_OPT_ADAMW)
		{
			double		bc1 = 1.0 - pow((double) s->beta1, (double) t);
			double		bc2 = 1.0 - pow((double) s->beta2, (double) t);

			ek->step_size = (float) ((double) s->lr / bc1);
			ek->bc2_sqrt = (float) sqrt(bc2);
		}
		if (m->diverged)
			continue;
		m->steps = nn_counter_add(m->steps, 1);
		m->rows_trained = nn_counter_add(m->rows_trained, nb);
		mb->acc_rows += nb;
		mb->acc_steps++;
	}
	g->ready++;
}

/* Upload the entries of the next k complete steps (they never change again). */
static void
upload_entries(mop_gpu_model *g, int64_t k)
{
	cudaMemcpyAsync(g->steptab + g->tab_launched * g->n,
					g->steptab_host + g->tab_launched * g->n,
					(size_t) (k * g->n) * sizeof(gk_step), cudaMemcpyHostToDevice, g->stream);
}

/*
 * Queue every complete full-batch step: GRAPH_STEPS at a time as one long
 * graph, the rest one graph each (or kernel by kernel without graphs).
 */
static void
launch_ready(mop_gpu_model *g)
{
	int			B = g->host->plan.batch;

	while (g->ready > 0)
	{
		int64_t		k = (g->ready >= GRAPH_STEPS && g->graph_state >= 0) ? GRAPH_STEPS : 1;

		upload_entries(g, k);
		if (g->graph_state == 0)
		{
			if (capture_steps(g, 1, &g->exec1) != 0)
				g->graph_state = -1;
			else if (capture_steps(g, GRAPH_STEPS, &g->execn) != 0)
			{
				cudaGraphExecDestroy(g->exec1);
				g->graph_state = -1;
			}
			else
				g->graph_state = 1;
		}
		if (g->graph_state == 1)
			cudaGraphLaunch(k == GRAPH_STEPS ? g->execn : g->exec1, g->stream);
		else
			for (int64_t j = 0; j < k; j++)
				step_body(g, B);
		g->tab_launched += k;
		g->ready -= k;
	}
}

/*
 * Rows of the step being gathered that its segments cannot describe (more
 * than GK_SEGS pieces): copy the pieces so far into the staging buffers now
 * (members a full batch apart), after every earlier step has been queued,
 * and start the list over.
 */
static void
pregather(mop_gpu_model *g, gk_step *e)
{
	const nn_plan *p = &g->host->plan;
	int64_t		B = p->batch;

	launch_ready(g);
	for (int k = 0; k < g->n; k++)
	{
		float	   *xk = g->xb + k * B * p->in_dim;
		float	   *yk = g->yb + k * B * p->y_dim;

		for (int j = 0; j < e->nseg; j++)
		{
			const gk_seg *sg = &e->seg[j];
			const int64_t *perm = member_perm(g, k, sg->x);

			gk_gather_rows(xk + (int64_t) sg->dst * p->in_dim, sg->x, perm, sg->off, sg->n,
						   p->in_dim, g->stream);
			gk_gather_rows(yk + (int64_t) sg->dst * p->y_dim, sg->y, perm, sg->off, sg->n,
						   p->y_dim, g->stream);
		}
	}
	e->nseg = 0;
	g->pregathered = 1;
}

/* ---- status checks --------------------------------------------------- */

/* Wait for the stream and read the members' status words. */
static int
read_status(mop_gpu_model *g, char *msg, size_t msglen)
{
	CU(cudaMemcpyAsync(g->st_host, g->st, g->n * sizeof(gk_status), cudaMemcpyDeviceToHost,
					   g->stream), "reading the training status");
	CU(cudaStreamSynchronize(g->stream), "training on the GPU");
	return MOP_GPU_OK;
}

/*
 * After a wait: for each member whose step diverged, put its host counters
 * where the CPU would have stopped (before the failing step) and say so as
 * nn_optim_step and nn_gradients do.  Returns MOP_GPU_EDIVERGED if any
 * member diverged (msg names the first; a gang names its member).
 */
static int
check_diverged(mop_gpu_model *g, char *msg, size_t msglen)
{
	int			r = MOP_GPU_OK;

	for (int k = 0; k < g->n; k++)
	{
		gang_member *mb = &g->mem[k];
		nn_model   *m = mb->host;
		const gk_status *st = &g->st_host[k];
		int64_t		done;
		char		who[32] = "";

		if (!st->flag || mb->diverged0)
			continue;			/* fine, or diverged before this stream */
		m->diverged = 1;
		done = st->step - 1 - mb->steps0;	/* steps of this stream that completed */
		if (done < 0)
			done = 0;
		if (m->steps > mb->steps0 + done)
		{
			/*
			 * The steps after the failing one never happened on the CPU.
			 * Every step before it was a full batch (only a stream's last
			 * step is partial, and a later one failed or this is it).
			 */
			m->steps = mb->steps0 + done;
			m->rows_trained = mb->rows0 + done * m->plan.batch;
			mb->acc_steps = done;
			mb->acc_rows = done * m->plan.batch;
		}
		if (r != MOP_GPU_OK)
			continue;
		if (g->n > 1)
			snprintf(who, sizeof(who), "model %d of the gang: ", k + 1);
		if (st->flag == GK_BAD_WEIGHTS)
			r = fail(msg, msglen, MOP_GPU_EDIVERGED, "%sweights became NaN or infinite at step %lld",
					 who, st->step);
		else
			r = fail(msg, msglen, MOP_GPU_EDIVERGED, "%sloss became %s at step %lld", who,
					 st->flag == GK_BAD_LOSS_NAN ? "NaN" : "infinite", st->step);
	}
	return r;
}

/* Have all members diverged?  (A gang trains on while one of them can.) */
static int
all_diverged(const mop_gpu_model *g)
{
	for (int k = 0; k < g->n; k++)
		if (!g->mem[k].host->diverged)
			return 0;
	return 1;
}

/*
 * Wait for the stream, report divergence, and start the step table over
 * (the kernels read entry 0 next).  Every complete step has been launched;
 * the step being gathered moves to entry 0.  A member's divergence is not
 * an error here while other members train on.
 */
static int
table_reset(mop_gpu_model *g, char *msg, size_t msglen)
{
	int			r;

	launch_ready(g);
	if ((r = read_status(g, msg, msglen)) != MOP_GPU_OK)
		return r;
	if ((r = check_diverged(g, msg, msglen)) != MOP_GPU_OK && all_diverged(g))
		return r;
	if (g->fill > 0 && g->tab_launched > 0)
		memcpy(g->steptab_host, g->steptab_host + g->tab_launched * g->n,
			   g->n * sizeof(gk_step));
	g->tab_launched = 0;
	CU(cudaMemsetAsync(g->stepidx, 0, sizeof(int), g->stream), "resetting the step table");
	return MOP_GPU_OK;
}

/* Labels of d valid for this model's loss? (the checks of nn_loss_eval) */
static int
check_labels(mop_gpu_model *g, mop_gpu_data *d, char *msg, size_t msglen)
{
	nn_model   *m = g->host;
	unsigned long long none = ~0ULL;
	int			r;

	if (d->checked_loss == m->spec.loss && d->checked_out == m->plan.out_dim)
		return MOP_GPU_OK;
	if (d->in_dim != m->plan.in_dim || d->y_dim != m->plan.y_dim)
		return fail(msg, msglen, MOP_GPU_EINVAL,
					"rows of %d features and %d label values do not fit a model of %d inputs and %d label values",
					d->in_dim, d->y_dim, m->plan.in_dim, m->plan.y_dim);
	CU(cudaMemcpyAsync(&g->st->bad_label_row, &none, sizeof(none), cudaMemcpyHostToDevice,
					   g->stream), "checking labels");
	if (d->n > 0)
		gk_check_labels(m->spec.loss, m->plan.out_dim, d->y, d->n, g->st, g->stream);
	if ((r = read_status(g, msg, msglen)) != MOP_GPU_OK)
		return r;
	if (g->st_host->bad_label_row != none)
	{
		int64_t		row = (int64_t) g->st_host->bad_label_row;
		float		v = 0;

		cudaMemcpy(&v, d->y + row * d->y_dim, sizeof(float), cudaMemcpyDeviceToHost);
		return fail(msg, msglen, MOP_GPU_EINVAL, "invalid label %g in row %lld", (double) v,
					(long long) row);
	}
	d->checked_loss = m->spec.loss;
	d->checked_out = m->plan.out_dim;
	return MOP_GPU_OK;
}

/* ---- training stream ------------------------------------------------- */

/*
 * nn_train_begin (model.c), for every member.  A member that diverged
 * earlier keeps its flag raised on the device, so the kernels leave it
 * alone while the others train; if all have, this fails as on the CPU.
 */
extern "C" int
mop_gpu_train_begin(mop_gpu_model *g, char *msg, size_t msglen)
{
	if (all_diverged(g))
		return fail(msg, msglen, MOP_GPU_EDIVERGED, "model has diverged and cannot train further");
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	memset(g->st_host, 0, g->n * sizeof(gk_status));
	for (int k = 0; k < g->n; k++)
	{
		gang_member *mb = &g->mem[k];

		if (mb->host->diverged)
		{
			g->st_host[k].flag = GK_BAD_WEIGHTS;
			g->st_host[k].step = mb->host->steps;
		}
		mb->diverged0 = mb->host->diverged;
		mb->steps0 = mb->host->steps;
		mb->rows0 = mb->host->rows_trained;
		mb->acc_rows = mb->acc_steps = 0;
	}
	CU(cudaMemcpyAsync(g->st, g->st_host, g->n * sizeof(gk_status), cudaMemcpyHostToDevice,
					   g->stream), "starting a stream");
	CU(cudaMemsetAsync(g->acc, 0, g->n * 4 * sizeof(double), g->stream), "starting a stream");
	CU(cudaMemsetAsync(g->stepidx, 0, sizeof(int), g->stream), "starting a stream");
	/* the statuses come from pinned memory that a later read overwrites */
	CU(cudaStreamSynchronize(g->stream), "starting a stream");
	g->tab_launched = 0;
	g->ready = 0;
	g->streaming = 1;
	g->fill = 0;
	g->pregathered = 0;
	return MOP_GPU_OK;
}

/* nn_train_feed (model.c), without the engine's own shuffle: rows in each member's order of d */
extern "C" int
mop_gpu_train_feed(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n, char *msg,
				   size_t msglen)
{
	nn_model   *m = g->host;
	int64_t		B = m->plan.batch;
	const int64_t *perm = member_perm(g, 0, d->x);
	int64_t		i = 0;
	int			r;

	if (!g->streaming)
		return fail(msg, msglen, MOP_GPU_EINVAL, "feed called without begin");
	if (all_diverged(g))
		return fail(msg, msglen, MOP_GPU_EDIVERGED, "model has diverged and cannot train further");
	if (off < 0 || n < 0 || off > d->n || n > d->n - off)
		return fail(msg, msglen, MOP_GPU_EINVAL, "rows %lld..%lld are outside a buffer of %lld rows",
					(long long) off, (long long) (off + n), (long long) d->n);
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	if ((r = check_labels(g, d, msg, msglen)) != MOP_GPU_OK)
		return r;
	while (i < n)
	{
		gk_step    *e;
		gk_seg	   *last;
		int64_t		k = B - g->fill < n - i ? B - g->fill : n - i;

		/* room for the step being gathered, or wait and start the table over */
		if (g->tab_launched + g->ready + 1 > g->tab_cap &&
			(r = table_reset(g, msg, msglen)) != MOP_GPU_OK)
			return r;
		e = cur_entry(g);
		if (g->fill == 0)
		{
			e->nseg = 0;
			g->pregathered = 0;
		}
		last = e->nseg > 0 ? &e->seg[e->nseg - 1] : NULL;
		if (last && last->x == d->x && last->perm == perm && last->off + last->n == off + i &&
			last->dst + last->n == g->fill)
			last->n += (int32_t) k;		/* the next rows of the same piece */
		else
		{
			if (e->nseg == GK_SEGS)
				pregather(g, e = cur_entry(g));
			e->seg[e->nseg].x = d->x;
			e->seg[e->nseg].y = d->y;
			e->seg[e->nseg].perm = perm;
			e->seg[e->nseg].off = off + i;
			e->seg[e->nseg].n = (int32_t) k;
			e->seg[e->nseg].dst = (int32_t) g->fill;
			e->nseg++;
		}
		g->fill += k;
		i += k;
		if (g->fill == B)
		{
			complete_step(g, e, (int) B);
			g->fill = 0;
			if (g->ready >= GRAPH_STEPS)
				launch_ready(g);
		}
	}
	launch_ready(g);
	/* no wait here: divergence surfaces at the next wait (the end at the latest) */
	return MOP_GPU_OK;
}

/*
 * Rows of d are fed to member `member` in the order perm from now on
 * (NULL: the stored order).  The order is the member's, so models sharing
 * a buffer each keep their own; rows of the step being gathered that came
 * through the previous orders are copied first.  Nothing waits.
 */
extern "C" int
mop_gpu_train_order(mop_gpu_model *g, int32_t member, const mop_gpu_data *d,
					const int64_t *perm, char *msg, size_t msglen)
{
	gang_member *mb;
	int			r;

	if (!g->streaming)
		return fail(msg, msglen, MOP_GPU_EINVAL, "order given without begin");
	if (member < 0 || member >= g->n)
		return fail(msg, msglen, MOP_GPU_EINVAL, "no model %d in a gang of %d", member + 1, g->n);
	mb = &g->mem[member];
	for (int64_t i = 0; perm && i < d->n; i++)
		if (perm[i] < 0 || perm[i] >= d->n)
			return fail(msg, msglen, MOP_GPU_EINVAL, "row order entry %lld is %lld, not in 0..%lld",
						(long long) i, (long long) perm[i], (long long) d->n - 1);
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	/* queued and pending steps read the old order before it changes */
	launch_ready(g);
	if (g->fill > 0)
		pregather(g, cur_entry(g));
	mb->order_of = NULL;
	if (!perm)
		return MOP_GPU_OK;
	if (d->n > mb->perm_cap)
	{
		int64_t		cap = d->n;

		pthread_mutex_lock(&ledger_lock);
		r = mop_gpu_ledger_reserve(&ledger, (uint64_t) cap * 8, "a row order", msg, msglen);
		pthread_mutex_unlock(&ledger_lock);
		if (r != 0)
			return MOP_GPU_ENOMEM;
		if (mb->perm)
		{
			cudaFreeAsync(mb->perm, g->stream);
			pthread_mutex_lock(&ledger_lock);
			mop_gpu_ledger_release(&ledger, (uint64_t) mb->perm_cap * 8);
			pthread_mutex_unlock(&ledger_lock);
			mb->perm = NULL;
			mb->perm_cap = 0;
		}
		if (cudaMallocAsync((void **) &mb->perm, (size_t) cap * 8, g->stream) != cudaSuccess)
		{
			cudaError_t e = cudaGetLastError();

			pthread_mutex_lock(&ledger_lock);
			mop_gpu_ledger_release(&ledger, (uint64_t) cap * 8);
			pthread_mutex_unlock(&ledger_lock);
			mb->perm = NULL;
			return cuda_fail(msg, msglen, "allocating a row order", e);
		}
		mb->perm_cap = cap;
	}
	/* stream-ordered: steps queued before read the old order */
	CU(cudaMemcpyAsync(mb->perm, perm, (size_t) d->n * 8, cudaMemcpyHostToDevice, g->stream),
	   "uploading a row order");
	mb->order_of = d;
	return MOP_GPU_OK;
}

/*
 * Queue every step whose rows are known (copying those of the step being
 * gathered) and wait for the GPU: afterwards no queued work reads any
 * buffer of rows, so the caller may free them.
 */
extern "C" int
mop_gpu_train_quiesce(mop_gpu_model *g, char *msg, size_t msglen)
{
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	launch_ready(g);
	if (g->fill > 0)
		pregather(g, cur_entry(g));
	CU(cudaStreamSynchronize(g->stream), "waiting for the GPU");
	return MOP_GPU_OK;
}

/*
 * nn_train_end (model.c), for every member: res[k] gets member k's sums.
 * Returns MOP_GPU_EDIVERGED if any member diverged during the stream (its
 * host model says so); the others' sub-epochs count.
 */
extern "C" int
mop_gpu_train_end(mop_gpu_model *g, nn_result *res, char *msg, size_t msglen)
{
	int			r = MOP_GPU_OK;
	long long	partial_t[MOP_GPU_GANG_MAX];

	if (!g->streaming)
		return fail(msg, msglen, MOP_GPU_EINVAL, "end called without begin");
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	if (g->fill > 0 && !all_diverged(g) && g->tab_launched + 1 > g->tab_cap)
		r = table_reset(g, msg, msglen);
	if (r != MOP_GPU_OK && r != MOP_GPU_EDIVERGED)
	{
		g->streaming = 0;
		g->fill = 0;
		return r;
	}
	for (int k = 0; k < g->n; k++)
		partial_t[k] = 0;
	if (g->fill > 0 && !all_diverged(g))
	{
		/* the last, partial batch: its own launch, on fill rows per member */
		gk_step    *e = cur_entry(g);

		complete_step(g, e, (int) g->fill);
		for (int k = 0; k < g->n; k++)
			partial_t[k] = e[k].t;
		upload_entries(g, 1);
		step_body(g, (int) g->fill);
		g->tab_launched++;
		g->ready--;
	}
	g->fill = 0;
	g->streaming = 0;
	CU(cudaMemcpyAsync(g->acc_host, g->acc, g->n * 4 * sizeof(double), cudaMemcpyDeviceToHost,
					   g->stream), "reading the training sums");
	if ((r = read_status(g, msg, msglen)) != MOP_GPU_OK)
		return r;
	r = check_diverged(g, msg, msglen);
	for (int k = 0; k < g->n; k++)
	{
		gang_member *mb = &g->mem[k];
		const gk_status *st = &g->st_host[k];

		/*
		 * As nn_train_end: the sub-epoch counts unless its last, partial
		 * step is the one that diverged (or the model had diverged before).
		 */
		if (!mb->diverged0 && (!mb->host->diverged || st->step != partial_t[k]))
			mb->host->sub_epochs = nn_counter_add(mb->host->sub_epochs, 1);
		if (res)
		{
			res[k].loss_sum = g->acc_host[4 * k];
			res[k].metric_sum = g->acc_host[4 * k + 1];
			res[k].rows = mb->acc_rows;
			res[k].steps = mb->acc_steps;
		}
	}
	if (r == MOP_GPU_OK && all_diverged(g))
		r = fail(msg, msglen, MOP_GPU_EDIVERGED, "model has diverged");
	return r;
}

/*
 * nn_evaluate (model.c) of every member over rows [off, off + n) of d in
 * stored order: res[k] += member k's sums.
 */
extern "C" int
mop_gpu_evaluate(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n, nn_result *res,
				 char *msg, size_t msglen)
{
	nn_model   *m = g->host;
	const nn_plan *p = &m->plan;
	int64_t		B = p->batch;
	int			r;

	if (off < 0 || n < 0 || off > d->n || n > d->n - off)
		return fail(msg, msglen, MOP_GPU_EINVAL, "rows %lld..%lld are outside a buffer of %lld rows",
					(long long) off, (long long) (off + n), (long long) d->n);
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	if ((r = check_labels(g, d, msg, msglen)) != MOP_GPU_OK)
		return r;
	CU(cudaMemsetAsync(g->eacc, 0, g->n * 4 * sizeof(double), g->stream), "evaluating");
	for (int64_t i = 0; i < n; i += B)
	{
		int			nb = (int) (n - i < B ? n - i : B);
		const float *x = d->x + (off + i) * d->in_dim;
		const float *y = d->y + (off + i) * d->y_dim;
		const float *z;

		if (g->n > 1)
		{
			/* every member sees the same rows: one copy each, side by side */
			for (int k = 0; k < g->n; k++)
			{
				gk_gather_rows(g->xb + (int64_t) k * nb * p->in_dim, d->x, NULL, off + i, nb,
							   p->in_dim, g->stream);
				gk_gather_rows(g->yb + (int64_t) k * nb * p->y_dim, d->y, NULL, off + i, nb,
							   p->y_dim, g->stream);
			}
			x = g->xb;
			y = g->yb;
		}
		z = forward(g, x, nb, 0);
		gk_loss_rows(m->spec.loss, m->spec.metric, m->spec.top_k, p->out_dim, z, y, g->n, nb,
					 NULL, g->rowloss, g->rowmetric, g->stream);
		gk_loss_reduce(g->rowloss, g->rowmetric, g->n, nb, g->eacc, g->st, g->steptab,
					   g->stepidx, 0, g->stream);
	}
	for (int k = 0; k < g->n; k++)
		CU(cudaMemcpyAsync(g->acc_host + 2 * k, g->eacc + 4 * k, 2 * sizeof(double),
						   cudaMemcpyDeviceToHost, g->stream), "reading the evaluation sums");
	CU(cudaStreamSynchronize(g->stream), "evaluating on the GPU");
	for (int k = 0; k < g->n; k++)
	{
		res[k].loss_sum += g->acc_host[2 * k];
		res[k].metric_sum += g->acc_host[2 * k + 1];
		res[k].rows += n;
	}
	return MOP_GPU_OK;
}

/* nn_gradients (model.c): the parity hook (see mop_gpu.h); a model alone */
extern "C" int
mop_gpu_gradients(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n, float *z,
				  float *grads, double *ls, double *ms, char *msg, size_t msglen)
{
	nn_model   *m = g->host;
	const float *x,
			   *zd;
	int			r;

	if (g->n != 1)
		return fail(msg, msglen, MOP_GPU_EINVAL, "gradients are computed for a model alone");
	if (n < 1 || n > m->plan.batch || off < 0 || off > d->n - n)
		return fail(msg, msglen, MOP_GPU_EINVAL, "gradients take 1..%d rows inside the buffer",
					m->plan.batch);
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	if ((r = check_labels(g, d, msg, msglen)) != MOP_GPU_OK)
		return r;
	x = d->x + off * d->in_dim;
	CU(cudaMemsetAsync(g->eacc, 0, 2 * sizeof(double), g->stream), "gradients");
	zd = forward(g, x, (int) n, 1);
	gk_loss_rows(m->spec.loss, m->spec.metric, m->spec.top_k, m->plan.out_dim, zd,
				 d->y + off * d->y_dim, 1, (int) n, g->grad0, g->rowloss, g->rowmetric,
				 g->stream);
	gk_loss_reduce(g->rowloss, g->rowmetric, 1, (int) n, g->eacc, g->st, g->steptab, g->stepidx,
				   0, g->stream);
	if (z)
		CU(cudaMemcpyAsync(z, zd, (size_t) n * m->plan.out_dim * 4, cudaMemcpyDeviceToHost,
						   g->stream), "reading outputs");
	backward(g, x, (int) n);
	if (grads)
		CU(cudaMemcpyAsync(grads, g->grads, (size_t) m->plan.n_params * 4,
						   cudaMemcpyDeviceToHost, g->stream), "reading gradients");
	CU(cudaMemcpyAsync(g->acc_host, g->eacc, 2 * sizeof(double), cudaMemcpyDeviceToHost,
					   g->stream), "reading sums");
	CU(cudaStreamSynchronize(g->stream), "gradients on the GPU");
	*ls = g->acc_host[0];
	*ms = g->acc_host[1];
	return MOP_GPU_OK;
}
