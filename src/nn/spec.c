/*
 * spec.c -- model specifications: defaults, validation and compilation into
 * a plan (internal layers, shapes, parameter and workspace layout).
 *
 * Validation is where a hostile or mistaken spec is stopped, whether it came
 * from a user's JSON or from a blob on disk: every dimension is bounded before
 * it is multiplied, so no size computed here can overflow, and the totals are
 * capped (NN_MAX_PARAMS, NN_MAX_WORKSPACE) so nothing can ask for absurd
 * memory.  The plan computed here is the single source of truth for sizes:
 * nn_spec_memory, nn_model_create and the blob decoder all use it.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_internal.h"

int64_t		nn_col_chunk_floats = INT64_C(1) << 20;	/* 4 MB */

/* Fill spec with defaults. */
void
nn_spec_init(nn_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->in_h = spec->in_w = spec->in_c = 1;
	spec->loss = NN_LOSS_SOFTMAX_CE;
	spec->metric = NN_METRIC_ACCURACY;
	spec->top_k = 5;
	spec->optimizer = NN_OPT_ADAM;
	spec->lr = 1e-3f;
	spec->beta1 = 0.9f;
	spec->beta2 = 0.999f;
	spec->eps = 1e-8f;
	spec->rho = 0.99f;
	spec->batch_size = 32;
	spec->init = NN_INIT_AUTO;
}

static const char *const layer_names[] = {
	"?", "dense", "conv2d", "maxpool2d", "flatten", "dropout", "activation", "batchnorm"
};

/* Printable name of a user layer type. */
static const char *
layer_name(int32_t type)
{
	return (type >= 1 && type <= 7) ? layer_names[type] : "unknown";
}

/* Name of a metric. */
const char *
nn_metric_name(nn_metric metric)
{
	switch (metric)
	{
		case NN_METRIC_ACCURACY:
			return "accuracy";
		case NN_METRIC_TOPK:
			return "top_k_accuracy";
		case NN_METRIC_MSE:
			return "mse";
		case NN_METRIC_MAE:
			return "mae";
		case NN_METRIC_LOG_LOSS:
			return "log_loss";
		case NN_METRIC_R2:
			return "r2";
		case NN_METRIC_PRECISION:
			return "precision";
		case NN_METRIC_RECALL:
			return "recall";
		case NN_METRIC_F1:
			return "f1";
		case NN_METRIC_AUC:
			return "auc";
	}
	return "unknown";
}

/* 1 when a larger value of the metric is better, 0 when smaller is. */
int
nn_metric_higher_is_better(nn_metric metric)
{
	return !(metric == NN_METRIC_MSE || metric == NN_METRIC_MAE || metric == NN_METRIC_LOG_LOSS);
}

/* Floats of optimizer state for n_params parameters. */
int64_t
nn_opt_state_floats(const nn_spec *spec, int64_t n_params)
{
	switch (spec->optimizer)
	{
		case NN_OPT_SGD:
			return spec->momentum > 0 ? n_params : 0;
		case NN_OPT_ADAM:
		case NN_OPT_ADAMW:
			return 2 * n_params;
		case NN_OPT_RMSPROP:
			return (spec->momentum > 0 ? 2 : 1) * n_params;
	}
	return 0;
}

/* Is v a finite float within [lo, hi]? */
static int
in_range(float v, double lo, double hi)
{
	return isfinite(v) && v >= lo && v <= hi;
}

/* Add a parameter tensor to the plan. */
static nn_status
add_tensor(nn_plan *p, int32_t layer, const char *kind, int is_kernel,
		   int ndim, const int32_t *shape, int64_t size, int64_t *off,
		   const char *lname, nn_error *err)
{
	nn_itensor *t;

	if (p->n_tensors >= NN_MAX_TENSORS)
		return nn_fail(err, NN_ERR_INVALID, "too many parameter tensors");
	if (size > NN_MAX_PARAMS || p->n_params + size > NN_MAX_PARAMS)
		return nn_fail(err, NN_ERR_INVALID,
					   "layer %d (%s) makes the model larger than %lld parameters",
					   layer, lname, (long long) NN_MAX_PARAMS);
	t = &p->t[p->n_tensors++];
	snprintf(t->name, sizeof(t->name), "%s%d.%s", lname, layer, kind);
	t->layer = layer;
	t->is_kernel = is_kernel;
	t->ndim = ndim;
	for (int i = 0; i < 4; i++)
		t->shape[i] = i < ndim ? shape[i] : 0;
	t->off = p->n_params;
	t->size = size;
	*off = p->n_params;
	p->n_params += size;
	return NN_OK;
}

/* Add a running-statistics tensor (batchnorm) of size floats to the plan. */
static nn_status
add_buffer(nn_plan *p, int32_t layer, const char *kind, int64_t size,
		   const char *lname, nn_error *err)
{
	nn_itensor *t;

	if (p->n_tensors >= NN_MAX_TENSORS)
		return nn_fail(err, NN_ERR_INVALID, "too many parameter tensors");
	t = &p->t[p->n_tensors++];
	snprintf(t->name, sizeof(t->name), "%s%d.%s", lname, layer, kind);
	t->layer = layer;
	t->is_buffer = 1;
	t->ndim = 1;
	t->shape[0] = (int32_t) size;
	t->off = p->n_bufs;
	t->size = size;
	p->n_bufs += size;
	return NN_OK;
}

/* Append an internal layer; returns it zeroed with its input shape set. */
static nn_ilayer *
push_layer(nn_plan *p, int type, int src, int h, int w, int c)
{
	nn_ilayer  *L;

	if (p->n >= NN_MAX_ILAYERS)
		return NULL;
	L = &p->l[p->n++];
	memset(L, 0, sizeof(*L));
	L->type = type;
	L->src = src;
	L->ih = L->oh = h;
	L->iw = L->ow = w;
	L->ic = L->oc = c;
	L->w_off = L->b_off = -1;
	L->out_off = L->aux_off = -1;
	return L;
}

/* Output size and top/left padding of one spatial axis. */
static int
conv_axis(int in, int k, int s, int padding, int *out, int *pad)
{
	if (padding == NN_PAD_SAME)
	{
		int			total;

		*out = (in + s - 1) / s;
		total = (*out - 1) * s + k - in;
		*pad = total > 0 ? total / 2 : 0;
		return 1;
	}
	if (k > in)
		return 0;
	*out = (in - k) / s + 1;
	*pad = 0;
	return 1;
}

/* Check the optimizer, loss and metric settings of a spec. */
/* The learning-rate schedule's fields, as nn_lr_schedule describes them. */
static nn_status
validate_schedule(const nn_spec *spec, nn_error *err)
{
	if (spec->lr_schedule < NN_SCHED_NONE || spec->lr_schedule > NN_SCHED_COSINE)
		return nn_fail(err, NN_ERR_INVALID, "unknown learning-rate schedule %d", spec->lr_schedule);
	if (spec->lr_warmup < 0 || spec->lr_warmup > NN_MAX_SCHED_EPOCHS)
		return nn_fail(err, NN_ERR_INVALID, "warmup of %d epochs must be in 0..%d",
					   spec->lr_warmup, NN_MAX_SCHED_EPOCHS);
	if (spec->lr_schedule == NN_SCHED_STEP &&
		(spec->lr_step_size < 1 || spec->lr_step_size > NN_MAX_SCHED_EPOCHS))
		return nn_fail(err, NN_ERR_INVALID, "step_size %d must be in 1..%d",
					   spec->lr_step_size, NN_MAX_SCHED_EPOCHS);
	if ((spec->lr_schedule == NN_SCHED_STEP || spec->lr_schedule == NN_SCHED_EXPONENTIAL) &&
		(!in_range(spec->lr_gamma, 0, 1e6) || spec->lr_gamma <= 0))
		return nn_fail(err, NN_ERR_INVALID, "schedule gamma %g must be > 0 and finite",
					   (double) spec->lr_gamma);
	if (spec->lr_schedule == NN_SCHED_COSINE)
	{
		if (spec->lr_epochs < 1 || spec->lr_epochs > NN_MAX_SCHED_EPOCHS)
			return nn_fail(err, NN_ERR_INVALID, "cosine schedule over %d epochs must be over 1..%d",
						   spec->lr_epochs, NN_MAX_SCHED_EPOCHS);
		if (!in_range(spec->lr_min, 0, 1e6))
			return nn_fail(err, NN_ERR_INVALID, "cosine min_lr %g must be >= 0 and finite",
						   (double) spec->lr_min);
	}
	return NN_OK;
}

/* Learning rate of 0-based epoch e: warmup, then the schedule at e - warmup. */
double
nn_lr_at(const nn_spec *spec, int64_t e)
{
	double		base = spec->lr;
	int64_t		w = spec->lr_warmup;

	if (e < 0)
		e = 0;
	if (w > 0 && e < w)
		return base * (1.0 / (double) w + (1.0 - 1.0 / (double) w) * (double) e / (double) w);
	e -= w;
	switch (spec->lr_schedule)
	{
		case NN_SCHED_STEP:
			return base * pow((double) spec->lr_gamma, (double) (e / spec->lr_step_size));
		case NN_SCHED_EXPONENTIAL:
			return base * pow((double) spec->lr_gamma, (double) e);
		case NN_SCHED_COSINE:
			return (double) spec->lr_min + (base - (double) spec->lr_min) *
				(1.0 + cos(M_PI * (double) e / (double) spec->lr_epochs)) / 2.0;
		default:
			return base;
	}
}

static nn_status
validate_training(const nn_spec *spec, nn_error *err)
{
	nn_status	st;

	if (spec->optimizer < NN_OPT_SGD || spec->optimizer > NN_OPT_RMSPROP)
		return nn_fail(err, NN_ERR_INVALID, "unknown optimizer %d", spec->optimizer);
	if (!in_range(spec->lr, 0, 1e6) || spec->lr <= 0)
		return nn_fail(err, NN_ERR_INVALID, "learning rate %g must be > 0 and finite",
					   (double) spec->lr);
	if ((st = validate_schedule(spec, err)) != NN_OK)
		return st;
	if (!in_range(spec->momentum, 0, 1) || spec->momentum >= 1)
		return nn_fail(err, NN_ERR_INVALID, "momentum %g must be in [0, 1)",
					   (double) spec->momentum);
	if (spec->nesterov && (spec->optimizer != NN_OPT_SGD || spec->momentum <= 0))
		return nn_fail(err, NN_ERR_INVALID, "nesterov needs the sgd optimizer with momentum > 0");
	if (!in_range(spec->beta1, 0, 1) || spec->beta1 >= 1)
		return nn_fail(err, NN_ERR_INVALID, "beta1 %g must be in [0, 1)", (double) spec->beta1);
	if (!in_range(spec->beta2, 0, 1) || spec->beta2 >= 1)
		return nn_fail(err, NN_ERR_INVALID, "beta2 %g must be in [0, 1)", (double) spec->beta2);
	if (!in_range(spec->eps, 0, 1) || spec->eps <= 0)
		return nn_fail(err, NN_ERR_INVALID, "epsilon %g must be in (0, 1]", (double) spec->eps);
	if (!in_range(spec->rho, 0, 1) || spec->rho >= 1)
		return nn_fail(err, NN_ERR_INVALID, "rho %g must be in [0, 1)", (double) spec->rho);
	if (!in_range(spec->l2, 0, 1e3))
		return nn_fail(err, NN_ERR_INVALID, "l2 %g must be >= 0 and finite", (double) spec->l2);
	if (!in_range(spec->weight_decay, 0, 1e3))
		return nn_fail(err, NN_ERR_INVALID, "weight decay %g must be >= 0 and finite",
					   (double) spec->weight_decay);
	if (spec->weight_decay > 0 && spec->optimizer != NN_OPT_ADAMW)
		return nn_fail(err, NN_ERR_INVALID,
					   "weight decay is the decoupled decay of adamw; use l2 with other optimizers");
	if (!in_range(spec->clip_norm, 0, 1e30))
		return nn_fail(err, NN_ERR_INVALID, "clip norm %g must be >= 0 and finite",
					   (double) spec->clip_norm);
	if (spec->batch_size < 1 || spec->batch_size > NN_MAX_BATCH)
		return nn_fail(err, NN_ERR_INVALID, "batch size %d must be in 1..%d",
					   spec->batch_size, NN_MAX_BATCH);
	if (spec->init < NN_INIT_AUTO || spec->init > NN_INIT_GLOROT)
		return nn_fail(err, NN_ERR_INVALID, "unknown initializer %d", spec->init);
	if (spec->loss < NN_LOSS_SOFTMAX_CE || spec->loss > NN_LOSS_MSE)
		return nn_fail(err, NN_ERR_INVALID, "unknown loss %d", spec->loss);
	switch (spec->metric)
	{
		case NN_METRIC_ACCURACY:
			if (spec->loss == NN_LOSS_MSE)
				return nn_fail(err, NN_ERR_INVALID,
							   "metric accuracy needs a classification loss, not mse");
			break;
		case NN_METRIC_TOPK:
			if (spec->loss != NN_LOSS_SOFTMAX_CE)
				return nn_fail(err, NN_ERR_INVALID,
							   "metric top_k_accuracy needs the softmax cross-entropy loss");
			break;
		case NN_METRIC_MSE:
		case NN_METRIC_MAE:
		case NN_METRIC_R2:
			if (spec->loss != NN_LOSS_MSE)
				return nn_fail(err, NN_ERR_INVALID,
							   "metric %s needs the mse loss", nn_metric_name(spec->metric));
			break;
		case NN_METRIC_LOG_LOSS:
		case NN_METRIC_PRECISION:
		case NN_METRIC_RECALL:
		case NN_METRIC_F1:
		case NN_METRIC_AUC:
			if (spec->loss == NN_LOSS_MSE)
				return nn_fail(err, NN_ERR_INVALID,
							   "metric %s needs a classification loss, not mse",
							   nn_metric_name(spec->metric));
			break;
		default:
			return nn_fail(err, NN_ERR_INVALID, "unknown metric %d", spec->metric);
	}
	return NN_OK;
}

/*
 * Validate the window (kernel or pool) of user layer i and push its internal
 * layer with window, stride, padding and output shape set; *out is NULL when
 * the plan is full.  size_word / fit_word name the window in messages.
 */
static nn_status
plan_window(const nn_layer_spec *ls, int i, const char *nm, const char *size_word,
			const char *fit_word, int sh, int sw, int type, nn_plan *p,
			int h, int w, int c, nn_ilayer **out, nn_error *err)
{
	int			oh,
				ow,
				pt,
				pl;
	nn_ilayer  *L;

	*out = NULL;
	if (ls->kernel_h < 1 || ls->kernel_w < 1 || ls->kernel_h > 1024 || ls->kernel_w > 1024)
		return nn_fail(err, NN_ERR_INVALID, "layer %d (%s): %s %dx%d must be in 1..1024",
					   i, nm, size_word, ls->kernel_h, ls->kernel_w);
	if (sh < 1 || sw < 1 || sh > 1024 || sw > 1024)
		return nn_fail(err, NN_ERR_INVALID, "layer %d (%s): stride %dx%d must be in 1..1024",
					   i, nm, sh, sw);
	if (ls->padding != NN_PAD_VALID && ls->padding != NN_PAD_SAME)
		return nn_fail(err, NN_ERR_INVALID, "layer %d (%s): unknown padding %d", i, nm, ls->padding);
	if (!conv_axis(h, ls->kernel_h, sh, ls->padding, &oh, &pt) ||
		!conv_axis(w, ls->kernel_w, sw, ls->padding, &ow, &pl))
		return nn_fail(err, NN_ERR_SHAPE,
					   "layer %d (%s): %s %dx%d does not fit input %dx%d with valid padding",
					   i, nm, fit_word, ls->kernel_h, ls->kernel_w, h, w);
	if (!(L = push_layer(p, type, i, h, w, c)))
		return NN_OK;
	L->kh = ls->kernel_h;
	L->kw = ls->kernel_w;
	L->sh = sh;
	L->sw = sw;
	L->pt = pt;
	L->pl = pl;
	L->oh = oh;
	L->ow = ow;
	*out = L;
	return NN_OK;
}

/* Compile one user layer into plan entries; *h,*w,*c is the running shape. */
/* Long because it is one switch over the layer types, each case a few checks and the shapes it produces. */
static nn_status
plan_layer(const nn_spec *spec, int i, nn_plan *p, int *h, int *w, int *c,
		   nn_error *err)
{
	const nn_layer_spec *ls = &spec->layers[i];
	const char *nm = layer_name(ls->type);
	int64_t		in_size = (int64_t) *h * *w * *c;
	nn_ilayer  *L;
	int32_t		shape[4];
	int			act = NN_ACT_NONE;
	nn_status	s;

	switch (ls->type)
	{
		case NN_LAYER_DENSE:
			if (ls->units < 1 || ls->units > NN_MAX_DIM)
				return nn_fail(err, NN_ERR_INVALID, "layer %d (dense): units %d must be in 1..%d",
							   i, ls->units, NN_MAX_DIM);
			if (!(L = push_layer(p, NN_LAYER_DENSE, i, 1, 1, (int) in_size)))
				break;
			L->ih = *h;
			L->iw = *w;
			L->ic = *c;
			L->oh = L->ow = 1;
			L->oc = ls->units;
			L->use_bias = ls->use_bias;
			shape[0] = (int32_t) in_size;
			shape[1] = ls->units;
			if ((s = add_tensor(p, i, "kernel", 1, 2, shape, in_size * ls->units,
						   &L->w_off, nm, err)) != NN_OK)
				return s;
			L->w_size = in_size * ls->units;
			if (ls->use_bias)
			{
				if ((s = add_tensor(p, i, "bias", 0, 1, &shape[1], ls->units, &L->b_off, nm, err)) != NN_OK)
					return s;
				L->b_size = ls->units;
			}
			act = ls->activation;
			break;

		case NN_LAYER_CONV2D:
			{
				int			sh = ls->stride_h ? ls->stride_h : 1;
				int			sw = ls->stride_w ? ls->stride_w : 1;

				if (ls->filters < 1 || ls->filters > NN_MAX_DIM)
					return nn_fail(err, NN_ERR_INVALID, "layer %d (conv2d): filters %d must be in 1..%d",
								   i, ls->filters, NN_MAX_DIM);
				if ((s = plan_window(ls, i, nm, "kernel", "kernel", sh, sw, NN_LAYER_CONV2D,
									 p, *h, *w, *c, &L, err)) != NN_OK)
					return s;
				if (!L)
					break;
				L->oc = ls->filters;
				L->use_bias = ls->use_bias;
				shape[0] = L->kh;
				shape[1] = L->kw;
				shape[2] = *c;
				shape[3] = ls->filters;
				L->w_size = (int64_t) L->kh * L->kw * *c * ls->filters;
				if ((s = add_tensor(p, i, "kernel", 1, 4, shape, L->w_size, &L->w_off, nm, err)) != NN_OK)
					return s;
				if (ls->use_bias)
				{
					if ((s = add_tensor(p, i, "bias", 0, 1, &shape[3], ls->filters, &L->b_off, nm, err)) != NN_OK)
						return s;
					L->b_size = ls->filters;
				}
				act = ls->activation;
				break;
			}

		case NN_LAYER_MAXPOOL2D:
			{
				int			sh = ls->stride_h ? ls->stride_h : ls->kernel_h;
				int			sw = ls->stride_w ? ls->stride_w : ls->kernel_w;

				if ((s = plan_window(ls, i, nm, "pool size", "pool", sh, sw, NN_LAYER_MAXPOOL2D,
									 p, *h, *w, *c, &L, err)) != NN_OK)
					return s;
				break;
			}

		case NN_LAYER_FLATTEN:
			if (!(L = push_layer(p, NN_LAYER_FLATTEN, i, *h, *w, *c)))
				break;
			L->oh = L->ow = 1;
			L->oc = (int32_t) in_size;
			break;

		case NN_LAYER_DROPOUT:
			if (!in_range(ls->rate, 0, 1) || ls->rate >= 1)
				return nn_fail(err, NN_ERR_INVALID, "layer %d (dropout): rate %g must be in [0, 1)",
							   i, (double) ls->rate);
			if (!(L = push_layer(p, NN_LAYER_DROPOUT, i, *h, *w, *c)))
				break;
			L->rate = ls->rate;
			break;

		case NN_LAYER_BATCHNORM:
			{
				int			after = 0;

				for (int j = 0; j < i; j++)
					after |= spec->layers[j].type == NN_LAYER_DENSE ||
						spec->layers[j].type == NN_LAYER_CONV2D;
				if (!after)
					return nn_fail(err, NN_ERR_INVALID,
								   "layer %d (batchnorm): must follow a dense or conv2d layer", i);
				if (!in_range(ls->momentum, 0, 1))
					return nn_fail(err, NN_ERR_INVALID, "layer %d (batchnorm): momentum %g must be in [0, 1]",
								   i, (double) ls->momentum);
				if (!in_range(ls->eps, 0, 1) || ls->eps <= 0)
					return nn_fail(err, NN_ERR_INVALID, "layer %d (batchnorm): eps %g must be in (0, 1]",
								   i, (double) ls->eps);
				if (!(L = push_layer(p, NN_LAYER_BATCHNORM, i, *h, *w, *c)))
					break;
				L->momentum = ls->momentum;
				L->eps = ls->eps;
				shape[0] = *c;
				if ((s = add_tensor(p, i, "gamma", 0, 1, shape, *c, &L->w_off, nm, err)) != NN_OK ||
					(s = add_tensor(p, i, "beta", 0, 1, shape, *c, &L->b_off, nm, err)) != NN_OK)
					return s;
				L->w_size = L->b_size = *c;
				L->s_off = p->n_bufs;
				if ((s = add_buffer(p, i, "running_mean", *c, nm, err)) != NN_OK ||
					(s = add_buffer(p, i, "running_var", *c, nm, err)) != NN_OK)
					return s;
				break;
			}

		case NN_LAYER_ACTIVATION:
			if (ls->activation == NN_ACT_NONE)
				return nn_fail(err, NN_ERR_INVALID, "layer %d (activation): no activation given", i);
			act = ls->activation;
			L = NULL;
			break;

		default:
			return nn_fail(err, NN_ERR_INVALID, "layer %d: unknown layer type %d", i, ls->type);
	}
	if (p->n >= NN_MAX_ILAYERS)
		return nn_fail(err, NN_ERR_INVALID, "too many layers");

	/* the running shape follows the last layer pushed */
	if (ls->type != NN_LAYER_ACTIVATION)
	{
		L = &p->l[p->n - 1];
		*h = L->oh;
		*w = L->ow;
		*c = L->oc;
		if ((int64_t) *h * *w * *c > (INT64_C(1) << 28))
			return nn_fail(err, NN_ERR_SHAPE, "layer %d (%s): output of %d x %d x %d is too large",
						   i, nm, *h, *w, *c);
	}
	if (act != NN_ACT_NONE)
	{
		if (act < NN_ACT_RELU || act > NN_ACT_SOFTMAX)
			return nn_fail(err, NN_ERR_INVALID, "layer %d (%s): unknown activation %d", i, nm, act);
		if (!(L = push_layer(p, NN_LAYER_ACTIVATION, i, *h, *w, *c)))
			return nn_fail(err, NN_ERR_INVALID, "too many layers");
		L->act = act;
		L->alpha = ls->alpha > 0 ? ls->alpha : 0.01f;
		if (!in_range(L->alpha, 0, 1e3))
			return nn_fail(err, NN_ERR_INVALID, "layer %d (%s): leaky relu slope %g out of range",
						   i, nm, (double) ls->alpha);
	}
	return NN_OK;
}

/* Compile a spec into a plan; also validates it completely. */
nn_status
nn_plan_build(const nn_spec *spec, nn_plan *p, nn_error *err)
{
	int			h = spec->in_h,
				w = spec->in_w,
				c = spec->in_c;
	int64_t		acts = 0,
				gmax,
				colmax = 0;
	nn_status	s;
	int			B = spec->batch_size;

	memset(p, 0, sizeof(*p));
	if (h < 1 || w < 1 || c < 1 || h > NN_MAX_DIM || w > NN_MAX_DIM || c > NN_MAX_DIM ||
		(int64_t) h * w * c > (INT64_C(1) << 24))
		return nn_fail(err, NN_ERR_SHAPE, "input shape %d x %d x %d is out of range", h, w, c);
	if (spec->n_layers < 1 || spec->n_layers > NN_MAX_LAYERS)
		return nn_fail(err, NN_ERR_INVALID, "a model needs 1..%d layers, not %d",
					   NN_MAX_LAYERS, spec->n_layers);
	if ((s = validate_training(spec, err)) != NN_OK)
		return s;

	for (int i = 0; i < spec->n_layers; i++)
		if ((s = plan_layer(spec, i, p, &h, &w, &c, err)) != NN_OK)
			return s;
	if (p->n == 0)
		return nn_fail(err, NN_ERR_INVALID, "the model has no layers that compute anything");

	/* a final softmax (sigmoid) is folded into cross-entropy (BCE) */
	{
		nn_ilayer  *last = &p->l[p->n - 1];

		if (last->type == NN_LAYER_ACTIVATION &&
			((last->act == NN_ACT_SOFTMAX && spec->loss == NN_LOSS_SOFTMAX_CE) ||
			 (last->act == NN_ACT_SIGMOID && spec->loss == NN_LOSS_SIGMOID_BCE)))
			last->fused = 1;
	}

	p->in_dim = spec->in_h * spec->in_w * spec->in_c;
	p->out_dim = h * w * c;
	if (spec->loss == NN_LOSS_SOFTMAX_CE && p->out_dim < 2)
		return nn_fail(err, NN_ERR_SHAPE,
					   "cross-entropy needs at least 2 outputs (one per class), the model has %d",
					   p->out_dim);
	/* a whole-set metric of binary cross-entropy scores one output (metrics.c) */
	if (nn_metric_whole_set(spec->metric) && spec->loss == NN_LOSS_SIGMOID_BCE && p->out_dim != 1)
		return nn_fail(err, NN_ERR_INVALID, "metric %s needs one sigmoid output, the model has %d",
					   nn_metric_name(spec->metric), p->out_dim);
	if (spec->metric == NN_METRIC_TOPK && (spec->top_k < 1 || spec->top_k > p->out_dim))
		return nn_fail(err, NN_ERR_INVALID, "top_k %d must be in 1..%d", spec->top_k, p->out_dim);
	p->y_dim = spec->loss == NN_LOSS_SOFTMAX_CE ? 1 : p->out_dim;
	p->n_opt = nn_opt_state_floats(spec, p->n_params);
	p->batch = B;

	/* workspace: one output buffer per computing layer, aux buffers, grads */
	gmax = p->in_dim;
	for (int i = 0; i < p->n; i++)
	{
		nn_ilayer  *L = &p->l[i];

		L->in_size = (int64_t) L->ih * L->iw * L->ic;
		L->out_size = (int64_t) L->oh * L->ow * L->oc;
		if (L->out_size > gmax)
			gmax = L->out_size;
		if (L->type == NN_LAYER_FLATTEN || L->fused)
			continue;
		L->out_off = acts;
		acts += L->out_size * B;
		if (L->type == NN_LAYER_DROPOUT || L->type == NN_LAYER_MAXPOOL2D)
		{
			L->aux_off = acts;
			acts += L->out_size * B;
		}
		if (L->type == NN_LAYER_BATCHNORM)
		{
			L->aux_off = acts;
			acts += 2 * (int64_t) L->oc;
		}
		if (L->type == NN_LAYER_CONV2D)
		{
			int64_t		per_image = (int64_t) L->oh * L->ow * L->kh * L->kw * L->ic;
			int64_t		chunk = nn_col_chunk_floats / per_image;
			int64_t		col;

			chunk = chunk < 1 ? 1 : (chunk > B ? B : chunk);
			L->chunk = (int32_t) chunk;
			col = chunk * per_image;
			if (col > colmax)
				colmax = col;
		}
	}
	p->ws_acts = acts;
	p->ws_grad = gmax * B;
	p->ws_col = colmax;
	p->ws_stage_x = (int64_t) p->in_dim * B;
	p->ws_stage_y = (int64_t) p->y_dim * B;
	p->ws_total = p->ws_acts + 2 * p->ws_grad + p->ws_col + p->ws_stage_x + p->ws_stage_y;
	if (p->ws_total * 4 > NN_MAX_WORKSPACE)
		return nn_fail(err, NN_ERR_INVALID,
					   "one batch of %d rows needs %lld MB of activations, more than the %lld MB limit; use a smaller batch size",
					   B, (long long) (p->ws_total * 4 >> 20), (long long) (NN_MAX_WORKSPACE >> 20));
	return NN_OK;
}

/* Validate a spec. */
nn_status
nn_spec_validate(const nn_spec *spec, nn_error *err)
{
	nn_plan		plan;

	return nn_plan_build(spec, &plan, err);
}

/* Memory a model of this spec will own. */
nn_status
nn_spec_memory(const nn_spec *spec, nn_memory *mem, nn_error *err)
{
	nn_plan		plan;
	nn_status	s = nn_plan_build(spec, &plan, err);

	memset(mem, 0, sizeof(*mem));
	if (s != NN_OK)
		return s;
	mem->params = (size_t) plan.n_params * sizeof(float);
	mem->grads = mem->params;
	mem->optimizer = (size_t) plan.n_opt * sizeof(float);
	mem->workspace = (size_t) plan.ws_total * sizeof(float);
	mem->buffers = (size_t) plan.n_bufs * sizeof(float);
	mem->total = mem->params + mem->grads + mem->optimizer + mem->workspace +
		mem->buffers + sizeof(nn_model);
	return NN_OK;
}

/* Output width for a spec, or -1 if the spec is invalid. */
int32_t
nn_spec_out_dim(const nn_spec *spec)
{
	nn_plan		plan;

	if (nn_plan_build(spec, &plan, NULL) != NN_OK)
		return -1;
	return plan.out_dim;
}
