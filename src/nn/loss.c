/*
 * loss.c -- losses, their gradients with respect to the network's outputs,
 * per-row metrics, and the link functions used at prediction.
 *
 * Losses take raw outputs (logits): the softmax of cross-entropy and the
 * sigmoid of binary cross-entropy are fused in, which is both faster and
 * numerically safer than applying them as layers.  The batch loss is the mean
 * over rows (and over outputs for BCE and MSE), as in PyTorch, so gradients
 * are scaled by 1 / rows.
 *
 * With class weights w (cross-entropy, and binary cross-entropy of one
 * output) the batch loss is the weighted mean sum_r w[y_r] l_r / sum_r
 * w[y_r], as PyTorch's CrossEntropyLoss(weight=w) computes it with its
 * default mean reduction, so row r's gradient is scaled by w[y_r] / sum w
 * instead of 1 / rows.  The loss added to *loss_sum is that weighted mean
 * times the rows, so that callers who divide the sum by the rows (every
 * caller: the reported loss is "mean loss per row times rows") report each
 * minibatch's weighted mean.  Without weights the arithmetic is exactly
 * the unweighted one, bit for bit.
 */
#include <math.h>

#include "nn_internal.h"

/* Index of the largest value (first one on ties). */
static int
argmax(const float *z, int n)
{
	int			best = 0;

	for (int j = 1; j < n; j++)
		if (z[j] > z[best])
			best = j;
	return best;
}

/*
 * The class of row r's label y for class weights: the class index for
 * cross-entropy, 0 or 1 for binary cross-entropy of one output.
 */
static inline int
weight_class(const nn_spec *spec, const float *y, int r)
{
	return spec->loss == NN_LOSS_SOFTMAX_CE ? (int) y[r] : (y[r] > 0.5f ? 1 : 0);
}

/*
 * Loss of nb rows of outputs z [nb, out_dim] against labels y; adds the summed
 * loss and metric into *loss_sum / *metric_sum and, if dz is not NULL, writes
 * the gradient of the mean batch loss.  cw, if not NULL, holds one weight per
 * class (see the head comment; binary cross-entropy then has one output and
 * labels exactly 0 or 1).  Returns -1, or the first row whose label is
 * invalid (nothing is added then).
 */
/* Long because it is one switch over the losses, each with its label check, loss, metric and gradient in one pass over a row. */
int64_t
nn_loss_eval(const nn_spec *spec, const float *cw, int out_dim, const float *z,
			 const float *y, int nb, float *dz, double *loss_sum, double *metric_sum)
{
	double		lsum = 0.0,
				msum = 0.0,
				wsum = 0.0;
	float		inv_nb = 1.0f / (float) nb;

	/* labels first, so a bad one changes nothing */
	for (int r = 0; r < nb; r++)
	{
		if (spec->loss == NN_LOSS_SOFTMAX_CE)
		{
			float		l = y[r];

			if (!(l >= 0 && l < out_dim) || l != floorf(l))
				return r;
		}
		else
			for (int j = 0; j < out_dim; j++)
			{
				float		t = y[(int64_t) r * out_dim + j];

				if (!isfinite(t) || (spec->loss == NN_LOSS_SIGMOID_BCE && (t < 0 || t > 1)))
					return r;
				/* a class weight needs a class: no soft labels */
				if (cw && t != 0.0f && t != 1.0f)
					return r;
			}
		if (cw)
			wsum += (double) cw[weight_class(spec, y, r)];
	}

	for (int r = 0; r < nb; r++)
	{
		const float *zr = z + (int64_t) r * out_dim;
		float	   *dzr = dz ? dz + (int64_t) r * out_dim : NULL;
		/* the row's share of the batch loss: 1 / rows, or w[y_r] / sum w */
		double		w = cw ? (double) cw[weight_class(spec, y, r)] : 1.0;
		float		rs = cw ? (float) (w / wsum) : inv_nb;

		switch (spec->loss)
		{
			case NN_LOSS_SOFTMAX_CE:
				{
					int			label = (int) y[r];
					float		mx = zr[0],
								sum = 0.0f,
								lse;

					for (int j = 1; j < out_dim; j++)
						mx = zr[j] > mx ? zr[j] : mx;
					for (int j = 0; j < out_dim; j++)
						sum += expf(zr[j] - mx);
					lse = mx + logf(sum);
					lsum += w * (double) (lse - zr[label]);
					if (dzr)
					{
						for (int j = 0; j < out_dim; j++)
							dzr[j] = expf(zr[j] - lse) * rs;
						dzr[label] -= rs;
					}
					if (spec->metric == NN_METRIC_TOPK)
					{
						int			rank = 0;

						for (int j = 0; j < out_dim; j++)
							if (zr[j] > zr[label] || (zr[j] == zr[label] && j < label))
								rank++;
						msum += rank < spec->top_k ? 1.0 : 0.0;
					}
					else if (spec->metric == NN_METRIC_LOG_LOSS)
						msum += (double) (lse - zr[label]);
					else if (spec->metric == NN_METRIC_ACCURACY)
						msum += argmax(zr, out_dim) == label ? 1.0 : 0.0;
					break;
				}

			case NN_LOSS_SIGMOID_BCE:
				{
					const float *yr = y + (int64_t) r * out_dim;
					float		scale = rs / (float) out_dim;
					double		rl = 0.0,
								ra = 0.0;

					for (int j = 0; j < out_dim; j++)
					{
						float		x = zr[j];

						rl += (double) (fmaxf(x, 0.0f) - x * yr[j] + log1pf(expf(-fabsf(x))));
						ra += ((x > 0.0f) == (yr[j] > 0.5f)) ? 1.0 : 0.0;
						if (dzr)
							dzr[j] = (1.0f / (1.0f + expf(-x)) - yr[j]) * scale;
					}
					lsum += w * (rl / out_dim);
					if (spec->metric == NN_METRIC_LOG_LOSS)
						msum += rl / out_dim;
					else if (spec->metric == NN_METRIC_ACCURACY)
						msum += ra / out_dim;
					break;
				}

			case NN_LOSS_MSE:
				{
					const float *yr = y + (int64_t) r * out_dim;
					float		scale = 2.0f * inv_nb / (float) out_dim;
					double		se = 0.0,
								ae = 0.0;

					for (int j = 0; j < out_dim; j++)
					{
						float		d = zr[j] - yr[j];

						se += (double) d * d;
						ae += fabs((double) d);
						if (dzr)
							dzr[j] = d * scale;
					}
					lsum += se / out_dim;
					if (spec->metric == NN_METRIC_MAE)
						msum += ae / out_dim;
					else if (spec->metric == NN_METRIC_MSE)
						msum += se / out_dim;
					break;
				}
		}
	}
	/* the weighted mean, times the rows (see the head comment) */
	if (cw)
		lsum = lsum / wsum * (double) nb;
	*loss_sum += lsum;
	*metric_sum += msum;
	return -1;
}

/* Apply the loss's link function to outputs: softmax, sigmoid or identity. */
void
nn_link(int loss, const float *z, float *p, int nb, int out_dim)
{
	switch (loss)
	{
		case NN_LOSS_SOFTMAX_CE:
			nn_act_forward(NN_ACT_SOFTMAX, 0, z, p, nb, out_dim);
			break;
		case NN_LOSS_SIGMOID_BCE:
			nn_act_forward(NN_ACT_SIGMOID, 0, z, p, nb, out_dim);
			break;
		default:
			nn_act_forward(NN_ACT_NONE, 0, z, p, nb, out_dim);
			break;
	}
}
