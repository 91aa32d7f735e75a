/*
 * optim.c -- optimizer steps: SGD (momentum, Nesterov), Adam, AdamW, RMSprop.
 *
 * The update rules follow PyTorch's single-tensor implementations term for
 * term (see test/xcheck/), so a model trained here and one trained there from
 * the same weights on the same batches agree to float rounding.  Order of
 * operations within a step: clip the raw gradients by their global norm, add
 * the coupled L2 term (kernels only), update moments, update weights.  The
 * same loop that writes each weight also folds it into a NaN/Inf sentinel, so
 * divergence is detected without another pass over the parameters.
 */
#include <math.h>

#include "nn_internal.h"

/* Scale all gradients so their global L2 norm is at most clip. */
static void
clip_gradients(nn_model *m, float clip)
{
	double		ss = 0.0;
	float		coef;
	int64_t		n = m->plan.n_params;

	for (int64_t i = 0; i < n; i++)
		ss += (double) m->grads[i] * m->grads[i];
	coef = (float) (clip / (sqrt(ss) + 1e-6));
	if (coef < 1.0f)
		for (int64_t i = 0; i < n; i++)
			m->grads[i] *= coef;
}

/* SGD with optional momentum / Nesterov on one tensor; returns 1 if a weight is NaN/Inf. */
static int
sgd_tensor(const nn_spec *s, float lr, float *w, const float *g, float *buf,
		   int64_t n, float l2)
{
	int			bad = 0;
	float		mom = s->momentum;

	for (int64_t i = 0; i < n; i++)
	{
		float		d = g[i] + l2 * w[i];

		if (buf)
		{
			buf[i] = mom * buf[i] + d;
			d = s->nesterov ? d + mom * buf[i] : buf[i];
		}
		w[i] -= lr * d;
		bad |= (w[i] - w[i]) != 0.0f;
	}
	return bad;
}

/* Adam / AdamW on one tensor; returns 1 if a weight is NaN/Inf. */
static int
adam_tensor(const nn_spec *s, float *w, const float *g, float *mo, float *ve,
			int64_t n, float l2, float decay, float step_size, float bc2_sqrt)
{
	int			bad = 0;
	float						b1 = s->beta1,
				b2 = s->beta2,
				eps = s->eps;

	for (int64_t i = 0; i < n; i++)
	{
		float		d = g[i] + l2 * w[i];

		w[i] *= decay;
		mo[i] = b1 * mo[i] + (1.0f - b1) * d;
		ve[i] = b2 * ve[i] + (1.0f - b2) * d * d;
		w[i] -= step_size * (mo[i] / (sqrtf(ve[i]) / bc2_sqrt + eps));
		bad |= (w[i] - w[i]) != 0.0f;
	}
	return bad;
}

/* RMSprop (non-centred, optional momentum) on one tensor; returns 1 if a weight is NaN/Inf. */
static int
rmsprop_tensor(const nn_spec *s, float lr, float *w, const float *g, float *sq,
			   float *buf, int64_t n, float l2)
{
	int			bad = 0;
	float		rho = s->rho,
				eps = s->eps,
				mom = s->momentum;

	for (int64_t i = 0; i < n; i++)
	{
		float		d = g[i] + l2 * w[i];
		float		avg;

		sq[i] = rho * sq[i] + (1.0f - rho) * d * d;
		avg = sqrtf(sq[i]) + eps;
		if (buf)
		{
			buf[i] = mom * buf[i] + d / avg;
			w[i] -= lr * buf[i];
		}
		else
			w[i] -= lr * (d / avg);
		bad |= (w[i] - w[i]) != 0.0f;
	}
	return bad;
}

/* Apply one optimizer step to all parameters using m->grads. */
nn_status
nn_optim_step(nn_model *m, nn_error *err)
{
	const nn_spec *s = &m->spec;
	int64_t		P = m->plan.n_params;
	int64_t		t = m->steps + 1;
	/* the scheduled rate of the model's current epoch (s->lr without one) */
	float		lr = (float) nn_lr_at(s, m->epochs);
	int			bad = 0;
	float		step_size = 0.0f,
				bc2_sqrt = 1.0f;

	if (s->clip_norm > 0)
		clip_gradients(m, s->clip_norm);
	if (s->optimizer == NN_OPT_ADAM || s->optimizer == NN_OPT_ADAMW)
	{
		double		bc1 = 1.0 - pow((double) s->beta1, (double) t);
		double		bc2 = 1.0 - pow((double) s->beta2, (double) t);

		step_size = (float) ((double) lr / bc1);
		bc2_sqrt = (float) sqrt(bc2);
	}

	for (int k = 0; k < m->plan.n_tensors; k++)
	{
		const nn_itensor *T = &m->plan.t[k];
		float	   *w;
		const float *g;
		float		l2 = T->is_kernel ? s->l2 : 0.0f;

		if (T->is_buffer)
			continue;			/* batchnorm running statistics: not trained */
		w = m->params + T->off;
		g = m->grads + T->off;
		switch (s->optimizer)
		{
			case NN_OPT_SGD:
				bad |= sgd_tensor(s, lr, w, g, s->momentum > 0 ? m->opt + T->off : NULL,
									   T->size, l2);
				break;
			case NN_OPT_ADAM:
			case NN_OPT_ADAMW:
				{
					float		decay = 1.0f;

					if (s->optimizer == NN_OPT_ADAMW && T->is_kernel)
						decay = 1.0f - lr * s->weight_decay;
					bad |= adam_tensor(s, w, g, m->opt + T->off, m->opt + P + T->off,
											T->size, l2, decay, step_size, bc2_sqrt);
					break;
				}
			case NN_OPT_RMSPROP:
				bad |= rmsprop_tensor(s, lr, w, g, m->opt + T->off,
										   s->momentum > 0 ? m->opt + P + T->off : NULL,
										   T->size, l2);
				break;
		}
	}
	if (bad)
	{
		m->diverged = 1;
		return nn_fail(err, NN_DIVERGED, "weights became NaN or infinite at step %lld",
					   (long long) t);
	}
	return NN_OK;
}
