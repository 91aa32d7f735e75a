/*
 * model.c -- model lifecycle and the training, evaluation and prediction
 * loops.
 *
 * Training is a stream (begin / feed / end) so that a caller holding data in
 * many buffers -- a PostgreSQL aggregate sees one buffer per row -- trains
 * exactly as if the rows were one array: minibatches are gathered across
 * buffer boundaries in a staging area and only the final partial batch of the
 * stream is short.  One step is forward, loss, backward, optimizer; all of
 * its memory is the model's workspace, sized for one batch when the model is
 * created, so the step allocates nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

/*
 * Initialise kernels uniformly (He or Glorot), biases to zero; batchnorm's
 * gamma to one, beta to zero, its running mean to zero and its running
 * variance to one (draws no random numbers).
 */
static void
init_weights(nn_model *m)
{
	uint64_t	rng[4];
	const nn_plan *p = &m->plan;

	nn_rng_seed(rng, m->spec.seed, 1);
	for (int i = 0; i < p->n; i++)
	{
		const nn_ilayer *L = &p->l[i];
		double		fan_in,
					fan_out,
					limit;
		int			he;

		if (L->type == NN_LAYER_BATCHNORM)
		{
			for (int64_t j = 0; j < L->w_size; j++)
			{
				m->params[L->w_off + j] = 1.0f;
				m->bufs[L->s_off + L->oc + j] = 1.0f;
			}
			continue;
		}
		if (L->w_off < 0)
			continue;
		if (L->type == NN_LAYER_DENSE)
		{
			fan_in = (double) L->in_size;
			fan_out = L->oc;
		}
		else
		{
			fan_in = (double) L->kh * L->kw * L->ic;
			fan_out = (double) L->kh * L->kw * L->oc;
		}
		if (m->spec.init == NN_INIT_AUTO)
		{
			const nn_ilayer *next = i + 1 < p->n ? &p->l[i + 1] : NULL;

			he = next && next->type == NN_LAYER_ACTIVATION &&
				(next->act == NN_ACT_RELU || next->act == NN_ACT_LEAKY_RELU ||
				 next->act == NN_ACT_GELU);
		}
		else
			he = m->spec.init == NN_INIT_HE;
		limit = he ? sqrt(6.0 / fan_in) : sqrt(6.0 / (fan_in + fan_out));
		for (int64_t j = 0; j < L->w_size; j++)
		{
			double		u = (double) (nn_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);

			m->params[L->w_off + j] = (float) ((2.0 * u - 1.0) * limit);
		}
	}
}

/* Point the workspace slices at their places in m->ws. */
static void
layout_workspace(nn_model *m)
{
	const nn_plan *p = &m->plan;

	m->grad0 = m->ws + p->ws_acts;
	m->grad1 = m->grad0 + p->ws_grad;
	m->col = m->grad1 + p->ws_grad;
	m->xb = m->col + p->ws_col;
	m->yb = m->xb + p->ws_stage_x;
}

/* Allocate a model's arrays for an already-built plan; no initialisation. */
static nn_status
model_alloc(const nn_spec *spec, const nn_plan *plan, nn_model **out, nn_error *err)
{
	nn_model   *m;
	nn_status	s;

	*out = NULL;
	if ((s = nn_blas_ensure(err)) != NN_OK)
		return s;
	m = nn_model_alloc(NULL, sizeof(nn_model));
	if (!m)
		return nn_fail(err, NN_ERR_NOMEM, "out of memory allocating a model");
	m->allocs = 1;
	m->spec = *spec;
	m->plan = *plan;
	m->params = nn_model_alloc(m, (size_t) plan->n_params * sizeof(float));
	m->grads = nn_model_alloc(m, (size_t) plan->n_params * sizeof(float));
	m->opt = nn_model_alloc(m, (size_t) plan->n_opt * sizeof(float));
	m->ws = nn_model_alloc(m, (size_t) plan->ws_total * sizeof(float));
	/* running statistics only where there are batchnorm layers */
	if (plan->n_bufs > 0)
		m->bufs = nn_model_alloc(m, (size_t) plan->n_bufs * sizeof(float));
	if (!m->params || !m->grads || !m->opt || !m->ws || (plan->n_bufs > 0 && !m->bufs))
	{
		nn_model_free(m);
		return nn_fail(err, NN_ERR_NOMEM,
					   "out of memory allocating a model of %lld parameters",
					   (long long) plan->n_params);
	}
	layout_workspace(m);
	if ((s = nn_metric_acc_init(&m->tacc, spec, plan->out_dim, err)) != NN_OK ||
		(s = nn_metric_acc_init(&m->eacc, spec, plan->out_dim, err)) != NN_OK)
	{
		nn_model_free(m);
		return s;
	}
	*out = m;
	return NN_OK;
}

/* Create a model with fresh weights. */
nn_status
nn_model_create(const nn_spec *spec, nn_model **out, nn_error *err)
{
	nn_status	s;

	*out = NULL;
	if (!spec)
		return nn_fail(err, NN_ERR_INVALID, "no model specification given");
	if ((s = nn_model_alloc_for_blob(spec, out, err)) != NN_OK)
		return s;
	init_weights(*out);
	nn_rng_seed((*out)->rng, spec->seed, 2);
	return NN_OK;
}

/* Allocate a model for spec with uninitialised state (create, decode). */
nn_status
nn_model_alloc_for_blob(const nn_spec *spec, nn_model **out, nn_error *err)
{
	nn_plan    *plan = malloc(sizeof(nn_plan));
	nn_status	s;

	*out = NULL;
	if (!plan)
		return nn_fail(err, NN_ERR_NOMEM, "out of memory");
	s = nn_plan_build(spec, plan, err);
	if (s == NN_OK)
		s = model_alloc(spec, plan, out, err);
	free(plan);
	return s;
}

/* Free a model. */
void
nn_model_free(nn_model *m)
{
	if (!m)
		return;
	free(m->params);
	free(m->grads);
	free(m->opt);
	free(m->ws);
	free(m->bufs);
	free(m->perm);
	free(m->class_w);
	nn_metric_acc_free(&m->tacc);
	nn_metric_acc_free(&m->eacc);
	free(m);
}

/* Deep copy of a model's state. */
nn_status
nn_model_clone(const nn_model *src, nn_model **out, nn_error *err)
{
	nn_model   *m;
	nn_status	s = model_alloc(&src->spec, &src->plan, &m, err);

	*out = NULL;
	if (s != NN_OK)
		return s;
	memcpy(m->params, src->params, (size_t) src->plan.n_params * sizeof(float));
	memcpy(m->opt, src->opt, (size_t) src->plan.n_opt * sizeof(float));
	if (src->plan.n_bufs > 0)
		memcpy(m->bufs, src->bufs, (size_t) src->plan.n_bufs * sizeof(float));
	memcpy(m->rng, src->rng, sizeof(m->rng));
	m->steps = src->steps;
	m->rows_trained = src->rows_trained;
	m->epochs = src->epochs;
	m->sub_epochs = src->sub_epochs;
	m->diverged = src->diverged;
	if (src->class_w &&
		(s = nn_model_set_class_weights(m, src->class_w, src->n_class_w, err)) != NN_OK)
	{
		nn_model_free(m);
		return s;
	}
	*out = m;
	return NN_OK;
}

/*
 * dst := elementwise mean of src[0..n-1] (weights, batchnorm running
 * statistics and optimizer state).
 */
nn_status
nn_model_average(nn_model *dst, nn_model *const *src, int n, nn_error *err)
{
	int64_t		P = dst->plan.n_params,
				O = dst->plan.n_opt;

	if (n < 1)
		return nn_fail(err, NN_ERR_INVALID, "nothing to average");
	for (int k = 0; k < n; k++)
		if (src[k]->plan.n_params != P || src[k]->plan.n_opt != O ||
			src[k]->spec.in_h != dst->spec.in_h || src[k]->spec.in_w != dst->spec.in_w ||
			src[k]->spec.in_c != dst->spec.in_c || src[k]->spec.loss != dst->spec.loss ||
			src[k]->spec.optimizer != dst->spec.optimizer ||
			src[k]->spec.n_layers != dst->spec.n_layers ||
			memcmp(src[k]->spec.layers, dst->spec.layers,
				   sizeof(nn_layer_spec) * dst->spec.n_layers) != 0)
			return nn_fail(err, NN_ERR_SHAPE, "model %d of %d has another architecture or optimizer",
						   k + 1, n);
	/* models trained towards other objectives are not copies of one model */
	for (int k = 0; k < n; k++)
		if (src[k]->n_class_w != dst->n_class_w ||
			(dst->n_class_w > 0 &&
			 memcmp(src[k]->class_w, dst->class_w, sizeof(float) * dst->n_class_w) != 0))
			return nn_fail(err, NN_ERR_SHAPE, "model %d of %d has other class weights",
						   k + 1, n);
	for (int64_t i = 0; i < P; i++)
	{
		double		s = 0;

		for (int k = 0; k < n; k++)
			s += src[k]->params[i];
		dst->params[i] = (float) (s / n);
	}
	for (int64_t i = 0; i < O; i++)
	{
		double		s = 0;

		for (int k = 0; k < n; k++)
			s += src[k]->opt[i];
		dst->opt[i] = (float) (s / n);
	}
	/* same architecture: same running statistics (means of means and of variances) */
	for (int64_t i = 0; i < dst->plan.n_bufs; i++)
	{
		double		s = 0;

		for (int k = 0; k < n; k++)
			s += src[k]->bufs[i];
		dst->bufs[i] = (float) (s / n);
	}
	return NN_OK;
}

const nn_spec *
nn_model_spec(const nn_model *m)
{
	return &m->spec;
}

int64_t
nn_model_param_count(const nn_model *m)
{
	return m->plan.n_params;
}

int32_t
nn_model_in_dim(const nn_model *m)
{
	return m->plan.in_dim;
}

int32_t
nn_model_out_dim(const nn_model *m)
{
	return m->plan.out_dim;
}

int32_t
nn_model_y_dim(const nn_model *m)
{
	return m->plan.y_dim;
}

int64_t
nn_model_alloc_count(const nn_model *m)
{
	return m->allocs;
}

/*
 * Classes a class weight can be given for: the outputs of cross-entropy, the
 * two classes of binary cross-entropy with one output; 0 for the rest
 * (regression, multi-label binary cross-entropy).
 */
int32_t
nn_plan_n_classes(const nn_spec *spec, const nn_plan *plan)
{
	if (spec->loss == NN_LOSS_SOFTMAX_CE)
		return plan->out_dim;
	if (spec->loss == NN_LOSS_SIGMOID_BCE && plan->out_dim == 1)
		return 2;
	return 0;
}

int32_t
nn_model_n_classes(const nn_model *m)
{
	return nn_plan_n_classes(&m->spec, &m->plan);
}

/*
 * Check n class weights w for a model of `classes` classes; a failure is
 * reported with status bad (invalid argument, or a corrupt blob).
 */
nn_status
nn_class_weights_check(const float *w, int32_t n, int32_t classes, nn_status bad,
					   nn_error *err)
{
	if (classes == 0)
		return nn_fail(err, bad, "class weights need a cross-entropy loss over classes (or binary cross-entropy of one output)");
	if (n != classes)
		return nn_fail(err, bad, "%d class weights given for a model of %d classes", n, classes);
	for (int32_t i = 0; i < n; i++)
		if (!isfinite(w[i]) || !(w[i] > 0.0f))
			return nn_fail(err, bad, "class weight %d is %g, not a finite number > 0", i,
						   (double) w[i]);
	return NN_OK;
}

/* Set (or with n == 0, remove) the class weights of the training loss. */
nn_status
nn_model_set_class_weights(nn_model *m, const float *w, int32_t n, nn_error *err)
{
	nn_status	s;

	if (m->streaming)
		return nn_fail(err, NN_ERR_STATE, "cannot change class weights while training");
	if (n == 0 || w == NULL)
	{
		free(m->class_w);
		m->class_w = NULL;
		m->n_class_w = 0;
		return NN_OK;
	}
	if ((s = nn_class_weights_check(w, n, nn_model_n_classes(m), NN_ERR_INVALID, err)) != NN_OK)
		return s;
	if (m->n_class_w != n)
	{
		float	   *cw = nn_model_alloc(m, (size_t) n * sizeof(float));

		if (!cw)
			return nn_fail(err, NN_ERR_NOMEM, "out of memory setting %d class weights", n);
		free(m->class_w);
		m->class_w = cw;
		m->n_class_w = n;
	}
	memmove(m->class_w, w, (size_t) n * sizeof(float));
	return NN_OK;
}

int32_t
nn_model_class_weights(const nn_model *m, const float **w)
{
	if (w)
		*w = m->class_w;
	return m->n_class_w;
}

/* Copy out the progress counters. */
void
nn_model_counters(const nn_model *m, nn_counters *c)
{
	c->steps = m->steps;
	c->rows_trained = m->rows_trained;
	c->epochs = m->epochs;
	c->sub_epochs = m->sub_epochs;
	c->diverged = m->diverged;
}

void
nn_model_set_epochs(nn_model *m, int64_t epochs)
{
	m->epochs = epochs < 0 ? 0 : epochs > NN_MAX_COUNTER ? NN_MAX_COUNTER : epochs;
}

int32_t
nn_model_n_tensors(const nn_model *m)
{
	return m->plan.n_tensors;
}

/* Describe parameter tensor i (live data pointer). */
nn_status
nn_model_tensor(nn_model *m, int32_t i, nn_tensor *t, nn_error *err)
{
	const nn_itensor *T;

	if (i < 0 || i >= m->plan.n_tensors)
		return nn_fail(err, NN_ERR_INVALID, "tensor %d does not exist (model has %d)",
					   i, m->plan.n_tensors);
	T = &m->plan.t[i];
	t->name = T->name;
	t->layer = T->layer;
	t->ndim = T->ndim;
	memcpy(t->shape, T->shape, sizeof(t->shape));
	t->size = T->size;
	t->buffer = T->is_buffer;
	t->data = (T->is_buffer ? m->bufs : m->params) + T->off;
	return NN_OK;
}

/* Change non-architectural hyperparameters, keeping weights and state. */
nn_status
nn_model_set_hyper(nn_model *m, const nn_spec *spec, nn_error *err)
{
	nn_plan    *plan;
	nn_status	s;
	float	   *opt = NULL,
			   *ws = NULL;

	if (m->streaming)
		return nn_fail(err, NN_ERR_STATE, "cannot change hyperparameters while training");
	if (spec->in_h != m->spec.in_h || spec->in_w != m->spec.in_w ||
		spec->in_c != m->spec.in_c || spec->n_layers != m->spec.n_layers ||
		spec->loss != m->spec.loss ||
		memcmp(spec->layers, m->spec.layers, sizeof(nn_layer_spec) * spec->n_layers) != 0)
		return nn_fail(err, NN_ERR_INVALID,
					   "new hyperparameters change the architecture or loss");
	if (!(plan = malloc(sizeof(nn_plan))))
		return nn_fail(err, NN_ERR_NOMEM, "out of memory");
	if ((s = nn_plan_build(spec, plan, err)) != NN_OK)
	{
		free(plan);
		return s;
	}
	if (spec->optimizer != m->spec.optimizer || plan->n_opt != m->plan.n_opt)
	{
		opt = nn_model_alloc(m, (size_t) plan->n_opt * sizeof(float));
		if (!opt)
			goto nomem;
		/* same optimizer, momentum switched on/off: keep the first moment */
		if (spec->optimizer == m->spec.optimizer)
			memcpy(opt, m->opt, (size_t) (plan->n_opt < m->plan.n_opt ?
										   plan->n_opt : m->plan.n_opt) * sizeof(float));
	}
	if (plan->ws_total != m->plan.ws_total)
	{
		ws = nn_model_alloc(m, (size_t) plan->ws_total * sizeof(float));
		if (!ws)
			goto nomem;
	}
	if (opt)
	{
		free(m->opt);
		m->opt = opt;
	}
	if (ws)
	{
		free(m->ws);
		m->ws = ws;
	}
	m->spec = *spec;
	m->plan = *plan;
	layout_workspace(m);
	free(plan);
	return NN_OK;

nomem:
	free(opt);
	free(ws);
	free(plan);
	return nn_fail(err, NN_ERR_NOMEM, "out of memory changing hyperparameters");
}

/* Forward nb rows of x; returns the network output (logits) [nb, out_dim]. */
const float *
nn_forward(nn_model *m, const float *x, int nb, int training)
{
	const float *cur = x;

	for (int i = 0; i < m->plan.n; i++)
	{
		const nn_ilayer *L = &m->plan.l[i];
		float	   *out;

		m->lin[i] = cur;
		if (L->fused || L->type == NN_LAYER_FLATTEN)
			continue;
		out = m->ws + L->out_off;
		nn_layer_forward(m, L, cur, out, nb, training);
		cur = out;
	}
	return cur;
}

/* Backward pass; dz (the loss gradient) is in m->grad0. */
static void
backward(nn_model *m, const float *x, int nb)
{
	float	   *dcur = m->grad0,
			   *dnext = m->grad1;

	for (int i = m->plan.n - 1; i >= 0; i--)
	{
		const nn_ilayer *L = &m->plan.l[i];
		const float *in = m->lin[i];
		float	   *din;

		if (L->fused || L->type == NN_LAYER_FLATTEN)
			continue;
		din = (in == x) ? NULL : dnext;
		nn_layer_backward(m, L, in, m->ws + L->out_off, dcur, din, nb);
		if (!din)
			break;
		dnext = dcur;
		dcur = din;
	}
}

/*
 * Forward, loss and backward on nb rows: parameter gradients land in
 * m->grads, the summed loss and metric in *ls / *ms.  No update.
 */
nn_status
nn_gradients(nn_model *m, const float *x, const float *y, int nb, double *ls,
			 double *ms, nn_error *err)
{
	const float *z = nn_forward(m, x, nb, 1);
	int64_t		bad;

	*ls = *ms = 0.0;
	bad = nn_loss_eval(&m->spec, m->class_w, m->plan.out_dim, z, y, nb, m->grad0, ls, ms);
	if (bad >= 0)
		return nn_fail(err, NN_ERR_INVALID,
					   "invalid label %g in training row %lld of the batch",
					   (double) y[bad * m->plan.y_dim], (long long) bad);
	if (m->streaming)
	{
		nn_status	s = nn_metric_acc_add(&m->tacc, z, y, nb, err);

		if (s != NN_OK)
			return s;
	}
	if (!isfinite(*ls))
	{
		m->diverged = 1;
		return nn_fail(err, NN_DIVERGED, "loss became %s at step %lld",
					   isnan(*ls) ? "NaN" : "infinite", (long long) m->steps + 1);
	}
	backward(m, x, nb);
	return NN_OK;
}

/* One optimizer step on nb rows. */
static nn_status
train_step(nn_model *m, const float *x, const float *y, int nb, nn_error *err)
{
	double		ls,
				ms;
	nn_status	s;

	if ((s = nn_gradients(m, x, y, nb, &ls, &ms, err)) != NN_OK)
		return s;
	if ((s = nn_optim_step(m, err)) != NN_OK)
		return s;
	m->steps = nn_counter_add(m->steps, 1);
	m->rows_trained = nn_counter_add(m->rows_trained, nb);
	m->acc.loss_sum += ls;
	m->acc.metric_sum += ms;
	m->acc.rows += nb;
	m->acc.steps++;
	return NN_OK;
}

/* Start a training stream. */
nn_status
nn_train_begin(nn_model *m, int shuffle, nn_error *err)
{
	if (m->diverged)
		return nn_fail(err, NN_DIVERGED, "model has diverged and cannot train further");
	m->streaming = 1;
	m->shuffle = shuffle ? 1 : 0;
	m->fill = 0;
	memset(&m->acc, 0, sizeof(m->acc));
	nn_metric_acc_reset(&m->tacc);
	return NN_OK;
}

/* Feed n rows to the stream, stepping whenever a batch is full. */
nn_status
nn_train_feed(nn_model *m, const float *x, const float *y, int64_t n, nn_error *err)
{
	int64_t		B = m->plan.batch;
	int64_t		in_dim = m->plan.in_dim,
				y_dim = m->plan.y_dim;
	nn_status	s;
	int64_t		i = 0;

	if (!m->streaming)
		return nn_fail(err, NN_ERR_STATE, "nn_train_feed called without nn_train_begin");
	if (m->diverged)
		return nn_fail(err, NN_DIVERGED, "model has diverged and cannot train further");
	if (n < 0 || (n > 0 && (!x || !y)))
		return nn_fail(err, NN_ERR_INVALID, "invalid buffer of %lld rows", (long long) n);
	if (m->shuffle && n > 1)
	{
		if (n > m->perm_cap)
		{
			int64_t    *p = nn_model_alloc(m, (size_t) n * sizeof(int64_t));

			if (!p)
				return nn_fail(err, NN_ERR_NOMEM, "out of memory shuffling %lld rows",
							   (long long) n);
			free(m->perm);
			m->perm = p;
			m->perm_cap = n;
		}
		for (int64_t k = 0; k < n; k++)
			m->perm[k] = k;
		for (int64_t k = n - 1; k > 0; k--)
		{
			int64_t		j = (int64_t) nn_rng_below(m->rng, (uint64_t) k + 1);
			int64_t		t = m->perm[k];

			m->perm[k] = m->perm[j];
			m->perm[j] = t;
		}
	}
	while (i < n)
	{
		/* a whole batch in place: no copy needed */
		if (!(m->shuffle && n > 1) && m->fill == 0 && n - i >= B)
		{
			if ((s = train_step(m, x + i * in_dim, y + i * y_dim, (int) B, err)) != NN_OK)
				return s;
			i += B;
			continue;
		}
		{
			int64_t		r = (m->shuffle && n > 1) ? m->perm[i] : i;

			memcpy(m->xb + m->fill * in_dim, x + r * in_dim, (size_t) in_dim * sizeof(float));
			memcpy(m->yb + m->fill * y_dim, y + r * y_dim, (size_t) y_dim * sizeof(float));
			m->fill++;
			i++;
		}
		if (m->fill == B)
		{
			m->fill = 0;
			if ((s = train_step(m, m->xb, m->yb, (int) B, err)) != NN_OK)
				return s;
		}
	}
	return NN_OK;
}

/* Finish the stream: train the partial batch, return the sums. */
nn_status
nn_train_end(nn_model *m, nn_result *res, nn_error *err)
{
	nn_status	s = NN_OK;

	if (!m->streaming)
		return nn_fail(err, NN_ERR_STATE, "nn_train_end called without nn_train_begin");
	if (m->fill > 0 && !m->diverged)
		s = train_step(m, m->xb, m->yb, (int) m->fill, err);
	m->fill = 0;
	m->streaming = 0;
	if (s == NN_OK)
		m->sub_epochs = nn_counter_add(m->sub_epochs, 1);
	if (m->tacc.on)
		m->acc.metric_sum = nn_metric_acc_value(&m->tacc) * (double) m->acc.rows;
	if (res)
		*res = m->acc;
	return s;
}

/* Train over one buffer. */
nn_status
nn_train(nn_model *m, const float *x, const float *y, int64_t n, int shuffle,
		 nn_result *res, nn_error *err)
{
	nn_status	s = nn_train_begin(m, shuffle, err);

	if (s != NN_OK)
		return s;
	s = nn_train_feed(m, x, y, n, err);
	if (s != NN_OK)
	{
		m->streaming = 0;
		m->fill = 0;
		if (res)
			*res = m->acc;
		return s;
	}
	return nn_train_end(m, res, err);
}

/* Loss and metric over n rows, without updating anything. */
nn_status
nn_evaluate(nn_model *m, const float *x, const float *y, int64_t n,
			nn_result *res, nn_error *err)
{
	int64_t		B = m->plan.batch;

	if (n < 0 || (n > 0 && (!x || !y)))
		return nn_fail(err, NN_ERR_INVALID, "invalid buffer of %lld rows", (long long) n);
	for (int64_t i = 0; i < n; i += B)
	{
		int			nb = (int) (n - i < B ? n - i : B);
		const float *yb = y + i * m->plan.y_dim;
		const float *z = nn_forward(m, x + i * m->plan.in_dim, nb, 0);
		/* unweighted: class weights weigh training only (nn.h) */
		int64_t		bad = nn_loss_eval(&m->spec, NULL, m->plan.out_dim, z, yb, nb, NULL,
									   &res->loss_sum, &res->metric_sum);

		if (bad >= 0)
			return nn_fail(err, NN_ERR_INVALID, "invalid label %g in row %lld",
						   (double) yb[bad * m->plan.y_dim], (long long) (i + bad));
		if (m->eacc.on)
		{
			nn_status	s = nn_metric_acc_add(&m->eacc, z, yb, nb, err);

			if (s != NN_OK)
				return s;
		}
		res->rows += nb;
	}
	return NN_OK;
}

/* Forget the rows gathered for a whole-set metric by nn_evaluate. */
void
nn_evaluate_reset(nn_model *m)
{
	nn_metric_acc_reset(&m->eacc);
}

/* The whole-set metric over the rows nn_evaluate saw since the last reset. */
double
nn_evaluate_metric(const nn_model *m)
{
	return nn_metric_acc_value(&m->eacc);
}

/* Predictions (probabilities or values) for n rows. */
nn_status
nn_predict(nn_model *m, const float *x, int64_t n, float *out, nn_error *err)
{
	int64_t		B = m->plan.batch;
	int			od = m->plan.out_dim;

	if (n < 0 || (n > 0 && (!x || !out)))
		return nn_fail(err, NN_ERR_INVALID, "invalid buffer of %lld rows", (long long) n);
	for (int64_t i = 0; i < n; i += B)
	{
		int			nb = (int) (n - i < B ? n - i : B);
		const float *z = nn_forward(m, x + i * m->plan.in_dim, nb, 0);

		nn_link(m->spec.loss, z, out + i * od, nb, od);
	}
	return NN_OK;
}

/* Rows in a pair of packed buffers, after checking that their sizes agree. */
nn_status
nn_buffer_rows(const nn_model *m, size_t xbytes, size_t ybytes, int64_t *rows,
			   nn_error *err)
{
	uint64_t	xrow = (uint64_t) m->plan.in_dim * sizeof(float);
	uint64_t	yrow = (uint64_t) m->plan.y_dim * sizeof(float);
	uint64_t	n;

	*rows = 0;
	if (ybytes % yrow != 0)
		return nn_fail(err, NN_ERR_SHAPE,
					   "label buffer of %zu bytes does not hold whole rows of %d floats",
					   ybytes, (int) m->plan.y_dim);
	n = ybytes / yrow;
	if (xbytes % xrow != 0 || xbytes / xrow != n)
		return nn_fail(err, NN_ERR_SHAPE,
					   "feature buffer of %zu bytes does not match %lld rows of %d features",
					   xbytes, (long long) n, (int) m->plan.in_dim);
	*rows = (int64_t) n;
	return NN_OK;
}
