/*
 * engine_internal.h -- what the files of mop's GPU engine share.
 *
 * engine.cu places models on the device (memory, rows, mirrors and gangs),
 * engine_step.cu queues a training step (forward, backward, optimizer,
 * CUDA graphs and the step table), and engine_train.cu drives the training
 * and evaluation streams.  engine.cu's header comment describes the design.
 * Nothing here is part of the library's interface (mop_gpu.h); every name
 * is hidden from the shared object's dynamic symbols.
 */
#ifndef MOP_GPU_ENGINE_INTERNAL_H
#define MOP_GPU_ENGINE_INTERNAL_H

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
#include "step_scalars.h"

#define ENGINE_INTERNAL __attribute__((visibility("hidden")))

/* Entries of the step table (see gk_step); the host waits when it is full. */
#define STEP_CAP 4096

/* Full-batch steps replayed by one launch of the long graph. */
#define GRAPH_STEPS 8

/* A mirror's stream, cuBLAS handle and pinned buffers, kept across mirrors (engine.cu). */
typedef struct shell shell;

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
	int			checked_strict;	/* ... also as class weights want them */
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
			   *bufs,			/* batchnorm running statistics, n_bufs per member */
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

	/*
	 * Class weights: ncls per member (cw.cw), whether each member weighs
	 * (cw.on) and its batch's sum of row weights (cw.wsum); weighs: some
	 * member does (else the loss kernels get no weights at all).
	 */
	gk_cw		cw;
	int			weighs;

	/*
	 * A metric over the whole set (precision, recall, f1, auc, r2): the
	 * outputs and labels of every training step and evaluated batch are
	 * copied back and added to the host model's own gatherer (metrics.c),
	 * one wait per step.  out_host holds one step of every member.
	 */
	int			whole_set;
	float	   *out_host;
	float	   *y_host;
	int			tacc_stop[MOP_GPU_GANG_MAX];	/* member's training rows are all in */
	int			tacc_failed;	/* a gatherer ran out of memory */
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

/* engine.cu: errors, written into msg (msglen bytes); return code */
ENGINE_INTERNAL int fail(char *msg, size_t msglen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
ENGINE_INTERNAL int cuda_fail(char *msg, size_t msglen, const char *what, cudaError_t e);

/* engine.cu: the process's ledger of device memory (budget.c), locked */
ENGINE_INTERNAL int ledger_reserve(uint64_t bytes, const char *what, char *msg, size_t msglen);
ENGINE_INTERNAL void ledger_release(uint64_t bytes);

/* engine.cu: the members' class weights to the device (waits) */
ENGINE_INTERNAL cudaError_t upload_class_weights(mop_gpu_model *g);

/* Return cuda_fail()'s code unless call succeeds (msg and msglen in scope). */
#define CU(call, what) \
	do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return cuda_fail(msg, msglen, what, e_); } while (0)

/* engine_step.cu: a training step (each function's comment says more) */
ENGINE_INTERNAL const float *forward(mop_gpu_model *g, const float *x, int nb, int training);
ENGINE_INTERNAL void backward(mop_gpu_model *g, const float *x, int nb);
ENGINE_INTERNAL const float *step_body(mop_gpu_model *g, int nb);
ENGINE_INTERNAL gk_step *cur_entry(mop_gpu_model *g);
ENGINE_INTERNAL const int64_t *member_perm(const mop_gpu_model *g, int k, const float *x);
ENGINE_INTERNAL void complete_step(mop_gpu_model *g, gk_step *e, int nb);
ENGINE_INTERNAL void upload_entries(mop_gpu_model *g, int64_t k);
ENGINE_INTERNAL void launch_ready(mop_gpu_model *g);
ENGINE_INTERNAL void pregather(mop_gpu_model *g, gk_step *e);
ENGINE_INTERNAL const gk_cw *class_weights(const mop_gpu_model *g);
ENGINE_INTERNAL int harvest_step(mop_gpu_model *g, const gk_step *e, const float *z, int nb,
								 char *msg, size_t msglen);

#endif							/* MOP_GPU_ENGINE_INTERNAL_H */
