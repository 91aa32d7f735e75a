/*
 * nn.h -- mop's training engine: a small, exact, reproducible neural-network
 * trainer in plain C.
 *
 * This is the narrow waist of mop.  Every sub-epoch of every model, whichever
 * executor runs it (a PostgreSQL backend, a background worker, a benchmark, a
 * GPU parity test), goes through the functions declared here.  The header
 * includes no PostgreSQL headers and the library never prints, never exits
 * and never touches global random state: every function returns an
 * nn_status and, on failure, fills an nn_error with a one-line message.
 *
 * Conventions
 *   - Features are float32, row-major.  A row is a vector of in_c values
 *     (in_h == in_w == 1) or an image stored H x W x C (NHWC).
 *   - Labels are float32 too, y_dim values per row (nn_model_y_dim):
 *       softmax cross-entropy: 1 value, the class index 0..classes-1;
 *       sigmoid binary cross-entropy: out_dim values, each 0 or 1;
 *       mean squared error: out_dim target values.
 *   - Dense weights are stored [in, out], conv2d weights [kh, kw, c_in, f]
 *     (HWIO); biases [out].  nn_model_tensor() exposes them as plain arrays
 *     so weights can be exported to and imported from other frameworks.
 *   - Reported losses are data losses (the mean loss per row times rows);
 *     L2 penalties are applied to the gradient of kernels (not biases) but
 *     are not added to the reported loss.
 *   - All memory a model needs (weights, gradients, optimizer state, the
 *     activations of one minibatch) is allocated when it is created;
 *     nn_spec_memory() tells how much before anything is allocated.  The
 *     per-minibatch loop allocates nothing.  The one exception is shuffled
 *     training: an index array of 8 bytes per row, grown when a buffer
 *     larger than any before is fed (per buffer size, never per batch).
 */
#ifndef MOP_NN_H
#define MOP_NN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes; NN_OK is zero, everything else is a failure. */
typedef enum nn_status
{
	NN_OK = 0,
	NN_ERR_INVALID = 1,			/* bad argument or model specification */
	NN_ERR_SHAPE = 2,			/* shapes do not fit together */
	NN_ERR_NOMEM = 3,			/* allocation failed */
	NN_ERR_BLAS = 4,			/* BLAS library could not be loaded */
	NN_ERR_TRUNCATED = 5,		/* blob shorter than its header says */
	NN_ERR_MAGIC = 6,			/* not a mop model blob */
	NN_ERR_VERSION = 7,			/* blob from a newer (or unknown) format */
	NN_ERR_CHECKSUM = 8,		/* blob content does not match its checksum */
	NN_ERR_CORRUPT = 9,			/* blob decodes to something impossible */
	NN_DIVERGED = 10,			/* NaN or Inf in loss or weights */
	NN_ERR_STATE = 11			/* call out of order (e.g. feed before begin) */
} nn_status;

#define NN_ERRMSG_LEN 256

/* Error detail filled by any failing call (callers may pass NULL). */
typedef struct nn_error
{
	nn_status	status;
	char		msg[NN_ERRMSG_LEN];
} nn_error;

/* Human-readable name of a status code ("diverged", "checksum mismatch"...). */
const char *nn_status_name(nn_status s);

typedef enum nn_layer_type
{
	NN_LAYER_DENSE = 1,
	NN_LAYER_CONV2D = 2,
	NN_LAYER_MAXPOOL2D = 3,
	NN_LAYER_FLATTEN = 4,
	NN_LAYER_DROPOUT = 5,
	NN_LAYER_ACTIVATION = 6,
	NN_LAYER_BATCHNORM = 7		/* see nn_layer_spec.momentum / eps */
} nn_layer_type;

typedef enum nn_act
{
	NN_ACT_NONE = 0,
	NN_ACT_RELU = 1,
	NN_ACT_LEAKY_RELU = 2,		/* slope for x < 0 in nn_layer_spec.alpha */
	NN_ACT_TANH = 3,
	NN_ACT_SIGMOID = 4,
	NN_ACT_GELU = 5,			/* exact (erf) form, as PyTorch's default */
	NN_ACT_SOFTMAX = 6			/* over the last axis */
} nn_act;

typedef enum nn_padding
{
	NN_PAD_VALID = 0,
	NN_PAD_SAME = 1				/* TensorFlow's "same": out = ceil(in / stride) */
} nn_padding;

/* One layer as the user declared it. Unused fields are ignored. */
typedef struct nn_layer_spec
{
	int32_t		type;			/* nn_layer_type */
	int32_t		units;			/* dense: output width */
	int32_t		filters;		/* conv2d: output channels */
	int32_t		kernel_h;		/* conv2d, maxpool2d */
	int32_t		kernel_w;
	int32_t		stride_h;		/* conv2d, maxpool2d; 0 = default (1; pool: kernel) */
	int32_t		stride_w;
	int32_t		padding;		/* nn_padding */
	int32_t		activation;		/* dense/conv2d: fused activation; activation layer: which */
	int32_t		use_bias;		/* dense/conv2d: 1 = with bias */
	float		rate;			/* dropout: probability of dropping a unit */
	float		alpha;			/* leaky relu slope (default 0.01 when 0) */
	float		momentum;		/* batchnorm: running-statistics momentum, [0, 1] */
	float		eps;			/* batchnorm: added to the variance, > 0 */
} nn_layer_spec;

/*
 * Batch normalisation (NN_LAYER_BATCHNORM), as PyTorch's BatchNorm1d and
 * BatchNorm2d: each channel (the last axis: the features of a vector, the
 * channels of an NHWC image) is normalised over the minibatch (vectors)
 * or over the minibatch and every pixel (images), then scaled by gamma
 * and shifted by beta, two learnable tensors of one value per channel
 * (initially 1 and 0; like biases they get neither L2 nor weight decay).
 * Training normalises with the batch's mean and biased variance and
 * updates the running statistics:
 *   running_mean = (1 - momentum) * running_mean + momentum * mean
 *   running_var  = (1 - momentum) * running_var  + momentum * var * n / (n - 1)
 * (the unbiased variance; n values per channel; a batch of one value per
 * channel leaves them as they are, where PyTorch refuses it).  Evaluation
 * and prediction normalise with the running statistics (initially 0 and
 * 1).  The running statistics are no parameters (the optimizer never
 * touches them, nn_model_param_count leaves them out) but are part of the
 * model's state: blob, clone and average carry them, nn_model_tensor lists
 * them (nn_tensor.buffer = 1).  A batchnorm layer must follow a dense or
 * conv2d layer (somewhere before it).
 */

typedef enum nn_loss
{
	NN_LOSS_SOFTMAX_CE = 1,		/* multi-class; expects logits, softmax fused */
	NN_LOSS_SIGMOID_BCE = 2,	/* binary / multi-label; sigmoid fused */
	NN_LOSS_MSE = 3				/* regression */
} nn_loss;

typedef enum nn_optimizer
{
	NN_OPT_SGD = 1,				/* with momentum and optional Nesterov */
	NN_OPT_ADAM = 2,
	NN_OPT_ADAMW = 3,			/* Adam with decoupled weight decay */
	NN_OPT_RMSPROP = 4
} nn_optimizer;

typedef enum nn_metric
{
	NN_METRIC_ACCURACY = 1,		/* higher is better */
	NN_METRIC_TOPK = 2,			/* top-k accuracy, higher is better */
	NN_METRIC_MSE = 3,			/* lower is better */
	NN_METRIC_MAE = 4,			/* lower is better */
	NN_METRIC_LOG_LOSS = 5,		/* mean cross-entropy without l2; lower is better */
	NN_METRIC_R2 = 6,			/* coefficient of determination; higher is better */
	NN_METRIC_PRECISION = 7,	/* binary, or macro over classes; higher is better */
	NN_METRIC_RECALL = 8,		/* binary, or macro over classes; higher is better */
	NN_METRIC_F1 = 9,			/* binary, or macro over classes; higher is better */
	NN_METRIC_AUC = 10			/* ROC AUC: binary, or macro one-vs-rest; higher is better */
} nn_metric;

typedef enum nn_init
{
	NN_INIT_AUTO = 0,			/* He before relu-like activations, Glorot otherwise */
	NN_INIT_HE = 1,				/* uniform, limit sqrt(6 / fan_in) */
	NN_INIT_GLOROT = 2			/* uniform, limit sqrt(6 / (fan_in + fan_out)) */
} nn_init;

#define NN_MAX_LAYERS 64

/*
 * Learning-rate schedules, by epoch.  The epoch index is the model's count
 * of completed epochs (nn_counters.epochs, carried in its blob), so the
 * rate of an epoch is a pure function of the spec and that index and a
 * resumed, moved or copied model continues the schedule exactly.  With
 * lr_warmup = W > 0, epochs 0..W-1 ramp linearly as PyTorch's
 * LinearLR(start_factor=1/W, end_factor=1, total_iters=W): lr * (1/W +
 * (1 - 1/W) * e / W); from epoch W on the schedule runs at index e - W
 * (PyTorch's SequentialLR with milestones=[W]).  The schedules:
 *   none:        lr
 *   step:        lr * gamma^floor(i / step_size)      (StepLR)
 *   exponential: lr * gamma^i                         (ExponentialLR)
 *   cosine:      min + (lr - min) * (1 + cos(pi * i / epochs)) / 2
 *                (CosineAnnealingLR(T_max=epochs, eta_min=min), its closed
 *                form, which past epochs rises again as PyTorch's does)
 */
typedef enum nn_lr_schedule
{
	NN_SCHED_NONE = 0,
	NN_SCHED_STEP = 1,
	NN_SCHED_EXPONENTIAL = 2,
	NN_SCHED_COSINE = 3
} nn_lr_schedule;

#define NN_MAX_SCHED_EPOCHS 1000000	/* step_size, warmup and cosine epochs */

/*
 * A complete model specification: architecture, loss, metric, optimizer and
 * its hyperparameters, batch size and seed.  Plain data, fixed size; fill it
 * with nn_spec_init() defaults then set what you need.
 */
typedef struct nn_spec
{
	int32_t		in_h;			/* input height (1 for vectors) */
	int32_t		in_w;			/* input width (1 for vectors) */
	int32_t		in_c;			/* input channels, or vector length */
	int32_t		n_layers;
	nn_layer_spec layers[NN_MAX_LAYERS];

	int32_t		loss;			/* nn_loss */
	int32_t		metric;			/* nn_metric */
	int32_t		top_k;			/* for NN_METRIC_TOPK */

	int32_t		optimizer;		/* nn_optimizer */
	float		lr;				/* learning rate, > 0 */
	float		momentum;		/* SGD / RMSprop momentum, 0 = none */
	int32_t		nesterov;		/* SGD: 1 = Nesterov momentum */
	float		beta1;			/* Adam/AdamW, default 0.9 */
	float		beta2;			/* Adam/AdamW, default 0.999 */
	float		eps;			/* Adam/AdamW/RMSprop, default 1e-8 */
	float		rho;			/* RMSprop smoothing, default 0.99 */
	float		l2;				/* coupled L2: grad += l2 * w (kernels only) */
	float		weight_decay;	/* AdamW decoupled decay (kernels only) */
	float		clip_norm;		/* global gradient-norm clip, 0 = off */

	int32_t		batch_size;		/* rows per minibatch, > 0 */
	int32_t		init;			/* nn_init */
	uint64_t	seed;			/* weights, dropout and shuffle all derive from it */

	/* learning-rate schedule (nn_lr_schedule; all zero: constant lr) */
	int32_t		lr_schedule;	/* nn_lr_schedule */
	int32_t		lr_step_size;	/* step: epochs per decay, >= 1 */
	float		lr_gamma;		/* step, exponential: factor, > 0 */
	float		lr_min;			/* cosine: final rate, >= 0 */
	int32_t		lr_epochs;		/* cosine: epochs to anneal over (T_max), >= 1 */
	int32_t		lr_warmup;		/* linear warmup epochs before the schedule, 0 = none */
} nn_spec;

/* Fill spec with defaults: no layers, CE loss, accuracy, Adam(1e-3), batch 32. */
void		nn_spec_init(nn_spec *spec);

/* Learning rate used in the 0-based epoch `epoch` (see nn_lr_schedule). */
double		nn_lr_at(const nn_spec *spec, int64_t epoch);

/* Check a spec completely (ranges, shapes, loss/metric fit); NN_OK if usable. */
nn_status	nn_spec_validate(const nn_spec *spec, nn_error *err);

/* Memory a model of this spec will own, in bytes, by purpose. */
typedef struct nn_memory
{
	size_t		params;			/* weights and biases */
	size_t		grads;			/* their gradients */
	size_t		optimizer;		/* moments, momentum buffers */
	size_t		workspace;		/* activations, im2col, staging for one batch */
	size_t		buffers;		/* batchnorm running statistics */
	size_t		total;			/* all of the above plus bookkeeping */
} nn_memory;

nn_status	nn_spec_memory(const nn_spec *spec, nn_memory *mem, nn_error *err);

/* Output width of the network for spec (classes for CE), or -1 if invalid. */
int32_t		nn_spec_out_dim(const nn_spec *spec);

/* Metric metadata: its name and whether a larger value is better. */
const char *nn_metric_name(nn_metric metric);
int			nn_metric_higher_is_better(nn_metric metric);

typedef struct nn_model nn_model;

/* Create a model with freshly initialised weights (from spec->seed). */
nn_status	nn_model_create(const nn_spec *spec, nn_model **out, nn_error *err);

/* Free a model (NULL is fine). */
void		nn_model_free(nn_model *m);

/*
 * Model averaging: set dst's weights, batchnorm running statistics and
 * optimizer state to the elementwise mean of those of the n models in src (same architecture and optimizer;
 * dst may be one of them).  Counters and RNG of dst are kept.  This is the
 * baseline MOP is compared with (each worker trains a copy, then average).
 */
nn_status	nn_model_average(nn_model *dst, nn_model *const *src, int n,
							 nn_error *err);

/* Deep copy: same weights, optimizer state, RNG and counters. */
nn_status	nn_model_clone(const nn_model *m, nn_model **out, nn_error *err);

const nn_spec *nn_model_spec(const nn_model *m);
int64_t		nn_model_param_count(const nn_model *m);
int32_t		nn_model_in_dim(const nn_model *m);	/* in_h * in_w * in_c */
int32_t		nn_model_out_dim(const nn_model *m);
int32_t		nn_model_y_dim(const nn_model *m);		/* label floats per row */

/*
 * Change hyperparameters that do not change the architecture (learning rate,
 * momentum, betas, eps, rho, l2, weight decay, clip, batch size ... for PBT's
 * explore step).  Optimizer state is kept.  A different optimizer type or
 * batch size is accepted; a different architecture is NN_ERR_INVALID.
 */
nn_status	nn_model_set_hyper(nn_model *m, const nn_spec *spec, nn_error *err);

/*
 * Class weights of the training loss, carried in the model and its blob.
 * With weights w (one per class, each finite and > 0) a minibatch's loss
 * is the weighted mean sum_r w[y_r] l_r / sum_r w[y_r], as PyTorch's
 * CrossEntropyLoss(weight=w) with its mean reduction, and its gradient
 * follows; nn_train_end's loss_sum adds each minibatch's weighted mean
 * times its rows.  They apply to softmax cross-entropy (one weight per
 * class) and to binary cross-entropy of one output (two weights: label 0,
 * label 1; labels must then be exactly 0 or 1).  Only training is
 * weighted: nn_evaluate's loss and every metric stay unweighted, as
 * Keras' class_weight weighs fit() and not its validation.
 *
 * nn_model_n_classes: how many weights the model takes (0: none can be
 * given: regression, multi-label binary cross-entropy).
 * nn_model_set_class_weights: set n weights (n must be that count), or
 * with n == 0 or w NULL remove them; not while a training stream is open.
 * nn_model_class_weights: their count (0: none) and, in *w, the array.
 */
int32_t		nn_model_n_classes(const nn_model *m);
nn_status	nn_model_set_class_weights(nn_model *m, const float *w, int32_t n,
									   nn_error *err);
int32_t		nn_model_class_weights(const nn_model *m, const float **w);

/* Progress counters carried in the model (and its blob). */
typedef struct nn_counters
{
	int64_t		steps;			/* optimizer steps taken */
	int64_t		rows_trained;	/* rows seen by training */
	int64_t		epochs;			/* completed epochs: the schedule's position;
								 * maintained by callers (nn_model_set_epochs,
								 * nn_blob_set_epochs) */
	int64_t		sub_epochs;		/* completed nn_train_end calls */
	int32_t		diverged;		/* 1 once NaN/Inf was seen */
} nn_counters;

void		nn_model_counters(const nn_model *m, nn_counters *c);
void		nn_model_set_epochs(nn_model *m, int64_t epochs);

/* Count of allocations this model has made since creation (for budgets). */
int64_t		nn_model_alloc_count(const nn_model *m);

/*
 * Parameter tensors as plain arrays, in layer order: for each layer with
 * parameters, its kernel then (if any) its bias; for a batchnorm layer its
 * gamma and beta, then its running mean and running variance (buffers:
 * state that is not trained, nn_tensor.buffer = 1), the order of Keras'
 * set_weights().  The data pointer is live: writing through it imports
 * weights.  Returns NN_ERR_INVALID past the end.
 */
typedef struct nn_tensor
{
	const char *name;			/* e.g. "dense0.kernel", "conv1.bias" */
	int32_t		layer;			/* index into spec->layers */
	int32_t		ndim;
	int32_t		shape[4];
	int64_t		size;			/* number of floats */
	float	   *data;
	int32_t		buffer;			/* 1: a running statistic, not a parameter */
} nn_tensor;

int32_t		nn_model_n_tensors(const nn_model *m);
nn_status	nn_model_tensor(nn_model *m, int32_t i, nn_tensor *t, nn_error *err);

/* Sums over rows; divide by rows for means. */
typedef struct nn_result
{
	double		loss_sum;		/* sum of per-row data losses */
	double		metric_sum;		/* sum of per-row metric values (1/0 for accuracy) */
	int64_t		rows;
	int64_t		steps;			/* optimizer steps taken (training only) */
} nn_result;

/*
 * Training is a stream: begin, feed one or more buffers of rows, end.  Rows
 * are gathered into minibatches of spec->batch_size across buffer boundaries;
 * with shuffle on, each fed buffer's rows are visited in a seeded random
 * order drawn from the model's own RNG.  end() trains the last partial batch.
 * NN_DIVERGED stops the stream: the model keeps its diverged weights and
 * refuses further training.
 */
nn_status	nn_train_begin(nn_model *m, int shuffle, nn_error *err);
nn_status	nn_train_feed(nn_model *m, const float *x, const float *y, int64_t n,
						  nn_error *err);
nn_status	nn_train_end(nn_model *m, nn_result *res, nn_error *err);

/* begin + feed + end over one buffer. */
nn_status	nn_train(nn_model *m, const float *x, const float *y, int64_t n,
					 int shuffle, nn_result *res, nn_error *err);

/*
 * Forward-only loss and metric over n rows, added into *res (no updates).
 * For a metric over the whole set (nn_metric_whole_set: precision, recall,
 * f1, r2, auc) nothing is added to res->metric_sum; the rows are gathered
 * in the model instead, from the last nn_evaluate_reset (or the model's
 * creation) on, and nn_evaluate_metric gives the metric over all of them.
 * Training streams do the same by themselves: nn_train_end's metric_sum is
 * the metric over the stream's rows times its rows.
 */
nn_status	nn_evaluate(nn_model *m, const float *x, const float *y, int64_t n,
						nn_result *res, nn_error *err);
int			nn_metric_whole_set(nn_metric metric);
void		nn_evaluate_reset(nn_model *m);
double		nn_evaluate_metric(const nn_model *m);	/* NaN when undefined */

/*
 * Rows held by a pair of packed buffers for model m: x of xbytes bytes
 * (rows x in_dim float32, row-major) and y of ybytes bytes (rows x y_dim
 * float32), the layout mop_prepare writes.  NN_ERR_SHAPE unless both hold
 * whole rows and the same number of them; never reads the buffers.
 */
nn_status	nn_buffer_rows(const nn_model *m, size_t xbytes, size_t ybytes,
						   int64_t *rows, nn_error *err);

/*
 * Predict n rows into out[n * out_dim]: class probabilities for softmax CE,
 * per-output probabilities for sigmoid BCE, values for MSE.
 */
nn_status	nn_predict(nn_model *m, const float *x, int64_t n, float *out,
					   nn_error *err);

/*
 * Serialization.  A blob is self-contained: magic, format version, spec,
 * counters, RNG state, class weights, weights, full optimizer state and
 * batchnorm running statistics, with a checksum.
 * nn_model_blob_size() is exact; nn_model_serialize() writes into a buffer
 * of at least that many bytes (so callers can use their own allocator).
 * nn_model_deserialize() trusts nothing and returns a new model.
 */
size_t		nn_model_blob_size(const nn_model *m);
nn_status	nn_model_serialize(const nn_model *m, void *buf, size_t cap,
							   size_t *len, nn_error *err);
nn_status	nn_model_deserialize(const void *blob, size_t len, nn_model **out,
								 nn_error *err);

/*
 * As nn_model_deserialize, less the checksum: only for a blob whose bytes
 * nn_blob_spec() has just accepted (a pass over the whole blob saved; every
 * other check is made).
 */
nn_status	nn_model_deserialize_verified(const void *blob, size_t len,
										  nn_model **out, nn_error *err);

/* Read only the spec out of a blob (validated), without building a model. */
nn_status	nn_blob_spec(const void *blob, size_t len, nn_spec *spec,
						 nn_error *err);

/*
 * Set the completed-epoch counter inside a blob (in place, checksum
 * renewed) without decoding the model; the blob is checked as
 * nn_model_deserialize would check its header and spec.
 */
nn_status	nn_blob_set_epochs(void *blob, size_t len, int64_t epochs,
							   nn_error *err);

/*
 * The completed-epoch counter inside a blob, read without computing the
 * checksum (header and spec checked, reads bounded): to decide whether
 * nn_blob_set_epochs is needed at all.
 */
nn_status	nn_blob_epochs(const void *blob, size_t len, int64_t *epochs,
						   nn_error *err);

#define NN_BLOB_MAGIC "MOPMODEL"
/*
 * 2: the spec ends with the learning-rate schedule (version 1 blobs read as none)
 * 3: class weights follow the RNG state (older blobs read as none)
 * 4: every layer carries momentum and eps; the batchnorm running
 *    statistics follow the optimizer state (older blobs have no batchnorm)
 */
#define NN_BLOB_VERSION 4

/* Hard limits that keep a hostile blob or spec from allocating absurdly. */
#define NN_MAX_DIM 65536		/* any single dimension */
#define NN_MAX_PARAMS (INT64_C(1) << 28)	/* 256M floats = 1 GiB */
#define NN_MAX_BATCH 65536
#define NN_MAX_WORKSPACE (INT64_C(1) << 32)	/* 4 GiB of activations */
/* Progress counters (steps, rows, epochs, sub-epochs) stop at this value. */
#define NN_MAX_COUNTER (INT64_C(1) << 62)

/*
 * BLAS.  OpenBLAS is opened lazily with dlopen on first use, never at load
 * time, so that a process that merely loads mop (the postmaster, with
 * shared_preload_libraries) starts no BLAS thread pool.  nn_blas_init sets
 * the thread count (default 1) and may be called before any model exists;
 * later calls change the thread count.
 */
nn_status	nn_blas_init(int threads, nn_error *err);
const char *nn_blas_info(void);	/* e.g. "OpenBLAS 0.3.21 ... (1 thread)" */
const char *nn_blas_config(void);	/* the loaded BLAS's build and kernels, e.g. "OpenBLAS 0.3.21 ... Zen MAX_THREADS=64" */

#ifdef __cplusplus
}
#endif

#endif							/* MOP_NN_H */
