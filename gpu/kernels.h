/*
 * kernels.h -- launchers of the CUDA kernels of mop's GPU engine.
 *
 * Every kernel computes what one function of the CPU engine (src/nn)
 * computes, and its comment in kernels.cu names that function: the CPU
 * code is the reference each kernel is tested against (test/gpu/parity.c).
 * All launchers are asynchronous on the given stream and allocate nothing.
 */
#ifndef MOP_GPU_KERNELS_H
#define MOP_GPU_KERNELS_H

#include <cuda_runtime.h>

extern "C"
{
#include "nn_internal.h"
}

/*
 * One member's optimizer hyperparameters (constant while a mirror is open;
 * the kind is the gang's).  clip: clip_norm (0: none).  The learning rate
 * is not here: a schedule changes it by epoch, so each step carries its
 * own (gk_step).
 */
typedef struct gk_optim
{
	float		momentum, beta1, beta2, eps, rho, l2, clip;
	int			nesterov;
} gk_optim;

/* One parameter tensor of the plan (nn_itensor) and where its state lives. */
typedef struct gk_tensor
{
	int64_t		off, size;		/* within one member's parameters */
	int64_t		n_params, n_opt;	/* one member's parameter and optimizer-state floats */
	int			is_kernel;		/* gets L2 and AdamW's decay */
	int			s1, s2;			/* the optimizer's first / second state slot is used */
} gk_tensor;

/*
 * Where a step's minibatch comes from: n rows of a buffer on the device,
 * starting at row off of its order (perm, or the stored order), copied to
 * rows dst.. of the staging buffers.
 */
typedef struct gk_seg
{
	const float *x;
	const float *y;
	const int64_t *perm;
	int64_t		off;
	int32_t		n;
	int32_t		dst;
} gk_seg;

#define GK_SEGS 4

/*
 * What changes from one training step to the next, written on the host:
 * the optimizer's scalars as nn_optim_step computes them, and where the
 * minibatch comes from.  The kernels read the entry of the current step
 * from a table on the device (tab[*idx]; a kernel at the end of each step
 * advances idx), so that steps can be captured once as a CUDA graph and
 * replayed with other rows and other step numbers.  A gang of members
 * models has one entry per member and step: member k's is
 * tab[*idx * members + k].
 */
typedef struct gk_step
{
	long long	t;				/* the step's number (steps + 1) */
	float		lr;				/* the rate of the model's epoch (nn_lr_at) */
	float		kernel_decay;	/* AdamW: 1 - lr * weight_decay (1 otherwise) */
	float		step_size;		/* Adam: lr / (1 - beta1^t) */
	float		bc2_sqrt;		/* Adam: sqrt(1 - beta2^t) */
	int32_t		nseg;			/* segments to gather (rows staged otherwise stay) */
	int32_t		pad;
	gk_seg		seg[GK_SEGS];
} gk_step;

/* Divergence flag codes kept on the device (0: fine). */
#define GK_BAD_LOSS_NAN 1
#define GK_BAD_LOSS_INF 2
#define GK_BAD_WEIGHTS 3

/* status words the kernels share: flag, the step it was raised at */
typedef struct gk_status
{
	int			flag;
	int			pad;
	long long	step;
	unsigned long long bad_label_row;	/* first invalid label, ~0 if none */
} gk_status;

void		gk_fill(float *x, int64_t n, float v, cudaStream_t s);
void		gk_fill_rows(float *out, int members, int64_t rows, int64_t width,
						 const float *bias, int64_t bias_stride, cudaStream_t s);
void		gk_gather_rows(float *dst, const float *src, const int64_t *perm, int64_t off,
						   int64_t n, int64_t width, cudaStream_t s);
void		gk_gather_step(const gk_step *tab, const int *idx, int members, float *xb,
						   float *yb, int64_t batch, int64_t in_dim, int64_t y_dim,
						   cudaStream_t s);
void		gk_act_forward(int act, float alpha, const float *x, float *y, int64_t n,
						   int64_t width, cudaStream_t s);
void		gk_act_backward(int act, float alpha, const float *x, const float *y,
							const float *dy, float *dx, int64_t n, int64_t width,
							cudaStream_t s);
/* per images of each of members, members stride images apart (see chunk_image) */
void		gk_im2col(const nn_ilayer *L, const float *in, float *col, int members, int per,
					  int stride, cudaStream_t s);
void		gk_col2im(const nn_ilayer *L, const float *col, float *din, int members, int per,
					  int stride, cudaStream_t s);
void		gk_maxpool_forward(const nn_ilayer *L, const float *in, float *out, int32_t *argmax,
							   int nb, cudaStream_t s);
void		gk_maxpool_backward(const nn_ilayer *L, const float *dout, const int32_t *argmax,
								float *din, int nb, cudaStream_t s);
void		gk_mul(const float *a, const float *b, float *out, int64_t n, cudaStream_t s);

/* batch normalisation (layers.c) */

/*
 * Where a batchnorm layer's numbers live for a gang: member k's gamma at
 * gamma + k * stride_p (beta likewise), its running mean and variance at
 * run + k * stride_b (variance oc floats after the mean), its saved batch
 * mean and 1/std at aux + k * 2 * oc (1/std oc floats after the mean).
 */
typedef struct gk_bn
{
	const float *gamma,
			   *beta;
	float	   *dgamma,
			   *dbeta;
	float	   *run;
	float	   *aux;
	int64_t		stride_p,
				stride_b;
	int32_t		oc;
	int64_t		per_row;		/* oh * ow: values per channel in one row */
	float		momentum,
				eps;
} gk_bn;

void		gk_bn_forward(const gk_bn *b, const float *in, float *out, int members, int nb,
						  int training, const gk_status *st, cudaStream_t s);
void		gk_bn_backward(const gk_bn *b, const float *in, const float *dout, float *din,
						   int members, int nb, cudaStream_t s);

/* loss.c */
/* strict: class weights are on (binary labels must be exactly 0 or 1) */
void		gk_check_labels(int loss, int out_dim, const float *y, int64_t n, int strict,
							gk_status *st, cudaStream_t s);

/*
 * Class weights of a gang's training loss: member k weighs with cw[k *
 * ncls ..] if on[k], else not at all; wsum[k] receives the sum of its
 * batch's row weights (nn_loss_eval's wsum).  A NULL gk_cw: nobody weighs.
 */
typedef struct gk_cw
{
	const float *cw;
	const int  *on;
	double	   *wsum;
	int32_t		ncls;
} gk_cw;

void		gk_class_wsum(int loss, const gk_cw *cw, const float *y, int members, int nb,
						  cudaStream_t s);

/*
 * Losses of a gang: members * nb rows, member k's at rows [k * nb, ...);
 * sums per member in acc[4 * k ..] and statuses st[k].  cw: class weights
 * (NULL: none); gk_class_wsum must have run on the same rows first.
 */
void		gk_loss_rows(int loss, int metric, int top_k, int out_dim, const float *z,
						 const float *y, int members, int nb, const gk_cw *cw, float *dz,
						 double *rowloss, double *rowmetric, cudaStream_t s);
void		gk_loss_reduce(const double *rowloss, const double *rowmetric, int members, int nb,
						   const gk_cw *cw, double *acc, gk_status *st, const gk_step *tab,
						   const int *idx, int check, cudaStream_t s);
void		gk_commit_sums(double *acc, const gk_status *st, int members, cudaStream_t s);
void		gk_step_advance(int *idx, cudaStream_t s);

/* optim.c */
/* o, coef, st: one per member (device memory); the step entry is tab[*idx * members + k] */
void		gk_clip_coef(const float *g, int64_t n, int members, const gk_optim *o, float *coef,
						 cudaStream_t s);
void		gk_optim_tensor(int kind, const gk_optim *o, const gk_tensor *t, float *params,
							const float *grads, float *opt, const float *coef, gk_status *st,
							const gk_step *tab, const int *idx, int members, cudaStream_t s);

#endif							/* MOP_GPU_KERNELS_H */
