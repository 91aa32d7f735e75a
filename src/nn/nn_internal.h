/*
 * nn_internal.h -- data structures shared by the engine's source files.
 *
 * The user's layer list (nn_spec.layers) is compiled into a plan: a flat
 * list of internal layers in which fused activations become layers of their
 * own, every shape is known, every parameter tensor has an offset into one
 * contiguous parameter array, and every activation buffer has an offset into
 * one contiguous workspace.  A model is a plan plus the memory it describes.
 * Nothing here is visible to users of nn.h.
 */
#ifndef MOP_NN_INTERNAL_H
#define MOP_NN_INTERNAL_H

#include "nn.h"

#define NN_MAX_ILAYERS (2 * NN_MAX_LAYERS + 1)
#define NN_MAX_TENSORS (4 * NN_MAX_LAYERS)	/* batchnorm: 2 parameters, 2 buffers */

/* One layer of the compiled plan. */
/*
 * A progress counter plus d (>= 0), stopping at NN_MAX_COUNTER: a blob may
 * carry any count up to that limit, and training it never overflows (the
 * CPU engine and its GPU backend count alike).
 */
static inline int64_t
nn_counter_add(int64_t c, int64_t d)
{
	return c > NN_MAX_COUNTER - d ? NN_MAX_COUNTER : c + d;
}

typedef struct nn_ilayer
{
	int32_t		type;			/* nn_layer_type */
	int32_t		src;			/* index of the user layer it came from */
	int32_t		act;			/* activation layers: nn_act */
	float		alpha;			/* leaky relu slope */
	float		rate;			/* dropout rate */
	int32_t		fused;			/* final softmax/sigmoid folded into the loss */

	int32_t		ih, iw, ic;		/* input shape */
	int32_t		oh, ow, oc;		/* output shape */
	int32_t		kh, kw, sh, sw;	/* conv / pool window and stride */
	int32_t		pt, pl;			/* top / left padding */
	int32_t		use_bias;

	int64_t		w_off, w_size;	/* kernel offset/size in params (size 0: none) */
	int64_t		b_off, b_size;	/* bias offset/size in params */
	int64_t		s_off;			/* batchnorm: running mean, then var, in bufs */
	float		momentum, eps;	/* batchnorm */

	int64_t		in_size;		/* ih*iw*ic */
	int64_t		out_size;		/* oh*ow*oc */
	int64_t		out_off;		/* activation buffer offset (floats), -1: aliases input */
	int32_t		chunk;			/* conv: images per im2col chunk */
	int64_t		aux_off;		/* dropout mask (floats), pool argmax (int32), batchnorm
								 * batch mean and 1/std (2 x oc floats); -1 none */
} nn_ilayer;

/* A parameter tensor, for export/import and per-tensor optimizer rules. */
typedef struct nn_itensor
{
	char		name[32];
	int32_t		layer;			/* user layer index */
	int32_t		is_kernel;		/* L2 / weight decay apply to kernels only */
	int32_t		is_buffer;		/* running statistic: off is into bufs, not params */
	int32_t		ndim;
	int32_t		shape[4];
	int64_t		off;
	int64_t		size;
} nn_itensor;

/* The compiled form of a spec. */
typedef struct nn_plan
{
	int32_t		n;
	nn_ilayer	l[NN_MAX_ILAYERS];
	int32_t		n_tensors;
	nn_itensor	t[NN_MAX_TENSORS];

	int32_t		in_dim, out_dim, y_dim;
	int64_t		n_params;
	int64_t		n_opt;			/* optimizer state floats */
	int64_t		n_bufs;			/* batchnorm running statistics floats */
	int32_t		batch;

	/* workspace layout, in floats, for one batch */
	int64_t		ws_acts;		/* activation and aux buffers */
	int64_t		ws_grad;		/* size of each of the two gradient buffers */
	int64_t		ws_col;			/* im2col buffer */
	int64_t		ws_stage_x, ws_stage_y;	/* minibatch staging */
	int64_t		ws_total;
} nn_plan;

/* What a metric over a whole set needs from every row (metrics.c). */
typedef struct nn_metric_acc
{
	int32_t		on;				/* the metric is a whole-set one */
	int32_t		nan;			/* an output was not finite: the metric is NaN */
	int32_t		metric;
	int32_t		loss;
	int32_t		out_dim;
	int64_t		rows;
	double	   *counts;			/* precision, recall, f1: tp, fp, fn per class */
	double	   *moments;		/* r2: mean, sum of squares, sse per output */
	float	   *score;			/* auc: probabilities, rows x (classes or 1) */
	int32_t    *label;			/* auc: each row's class */
	int64_t		n_scores;
	int64_t		cap;			/* rows the score and label arrays hold */
} nn_metric_acc;

nn_status	nn_metric_acc_init(nn_metric_acc *a, const nn_spec *spec, int out_dim,
							   nn_error *err);
void		nn_metric_acc_reset(nn_metric_acc *a);
void		nn_metric_acc_free(nn_metric_acc *a);
nn_status	nn_metric_acc_add(nn_metric_acc *a, const float *z, const float *y, int nb,
							  nn_error *err);
double		nn_metric_acc_value(const nn_metric_acc *a);

struct nn_model
{
	nn_spec		spec;
	nn_plan		plan;

	float	   *params;
	float	   *grads;
	float	   *opt;			/* optimizer state, n_opt floats */
	float	   *bufs;			/* running statistics, n_bufs floats */
	float	   *ws;				/* workspace, ws_total floats */
	float	   *grad0, *grad1, *col, *xb, *yb;	/* pointers into ws */

	const float *lin[NN_MAX_ILAYERS];	/* each layer's input in the last forward */

	int64_t	   *perm;			/* shuffle order for the buffer being fed */
	int64_t		perm_cap;

	uint64_t	rng[4];			/* xoshiro256** state: dropout and shuffle */

	/* counters (serialized) */
	int64_t		steps;
	int64_t		rows_trained;
	int64_t		epochs;
	int64_t		sub_epochs;
	int32_t		diverged;

	/*
	 * Class weights of the training loss (serialized; NULL: none): one per
	 * class, nn_model_n_classes() of them, each finite and > 0.
	 */
	float	   *class_w;
	int32_t		n_class_w;

	/* stream state (not serialized: a blob is taken between streams) */
	int32_t		streaming;
	int32_t		shuffle;
	int64_t		fill;			/* rows staged in xb/yb */
	nn_result	acc;
	nn_metric_acc tacc;			/* whole-set metric of the training stream */
	nn_metric_acc eacc;			/* whole-set metric of evaluations */

	int64_t		allocs;
};

/*
 * Largest im2col chunk, in floats: convolutions unfold at most this much of
 * a batch at a time (at least one image), which bounds the workspace and
 * keeps the unfolded rows in cache.  A variable so tests can force chunking.
 */
extern int64_t nn_col_chunk_floats;

/* util.c */
nn_status	nn_fail(nn_error *err, nn_status s, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));
void	   *nn_model_alloc(nn_model *m, size_t bytes);	/* zeroed, counted */

/* rng.c */
void		nn_rng_seed(uint64_t s[4], uint64_t seed, uint64_t stream);
uint64_t	nn_rng_next(uint64_t s[4]);
float		nn_rng_uniform(uint64_t s[4]);	/* [0, 1) */
uint64_t	nn_rng_below(uint64_t s[4], uint64_t bound);	/* [0, bound) */

/* blas.c */
nn_status	nn_blas_ensure(nn_error *err);
void		nn_gemm(int trans_a, int trans_b, int m, int n, int k,
					float alpha, const float *a, int lda,
					const float *b, int ldb, float beta, float *c, int ldc);

/* spec.c */
nn_status	nn_plan_build(const nn_spec *spec, nn_plan *plan, nn_error *err);
int64_t		nn_opt_state_floats(const nn_spec *spec, int64_t n_params);

/* layers.c */
void		nn_layer_forward(nn_model *m, const nn_ilayer *L, const float *in,
							 float *out, int nb, int training);
void		nn_layer_backward(nn_model *m, const nn_ilayer *L, const float *in,
							  const float *out, const float *dout, float *din,
							  int nb);
void		nn_act_forward(int act, float alpha, const float *x, float *y,
						   int64_t n, int64_t width);
void		nn_act_backward(int act, float alpha, const float *x, const float *y,
							const float *dy, float *dx, int64_t n, int64_t width);

/* loss.c */
int64_t		nn_loss_eval(const nn_spec *spec, const float *cw, int out_dim,
						 const float *z, const float *y, int nb, float *dz,
						 double *loss_sum, double *metric_sum);
void		nn_link(int loss, const float *z, float *p, int nb, int out_dim);

/* serialize.c */
uint64_t	nn_blob_checksum(const void *data, size_t n);

/* optim.c */
nn_status	nn_optim_step(nn_model *m, nn_error *err);

/* model.c */
const float *nn_forward(nn_model *m, const float *x, int nb, int training);
nn_status	nn_gradients(nn_model *m, const float *x, const float *y, int nb,
						 double *ls, double *ms, nn_error *err);
nn_status	nn_model_alloc_for_blob(const nn_spec *spec, nn_model **out,
									nn_error *err);
int32_t		nn_plan_n_classes(const nn_spec *spec, const nn_plan *plan);
nn_status	nn_class_weights_check(const float *w, int32_t n, int32_t classes,
								   nn_status bad, nn_error *err);

#endif							/* MOP_NN_INTERNAL_H */
