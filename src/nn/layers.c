/*
 * layers.c -- forward and backward passes of every layer and activation.
 *
 * Layouts: activations are [rows, features] row-major; images are NHWC, so a
 * convolution is one GEMM of the im2col matrix [rows * oh * ow, kh * kw * c]
 * with the HWIO kernel [kh * kw * c, filters], and its output is already NHWC.
 * Dense and conv GEMMs go to BLAS; everything else is plain loops written so
 * the compiler can vectorise them.  No function here allocates: every buffer
 * is a slice of the model's workspace, planned in spec.c.
 */
#include <math.h>
#include <string.h>

#include "nn_internal.h"

/* y = act(x) elementwise (softmax: per row of width). */
void
nn_act_forward(int act, float alpha, const float *x, float *y, int64_t n,
			   int64_t width)
{
	int64_t		total = n * width;

	switch (act)
	{
		case NN_ACT_RELU:
			for (int64_t i = 0; i < total; i++)
				y[i] = x[i] > 0.0f ? x[i] : 0.0f;
			break;
		case NN_ACT_LEAKY_RELU:
			for (int64_t i = 0; i < total; i++)
				y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
			break;
		case NN_ACT_TANH:
			for (int64_t i = 0; i < total; i++)
				y[i] = tanhf(x[i]);
			break;
		case NN_ACT_SIGMOID:
			for (int64_t i = 0; i < total; i++)
				y[i] = 1.0f / (1.0f + expf(-x[i]));
			break;
		case NN_ACT_GELU:
			for (int64_t i = 0; i < total; i++)
				y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float) M_SQRT1_2));
			break;
		case NN_ACT_SOFTMAX:
			for (int64_t r = 0; r < n; r++)
			{
				const float *xr = x + r * width;
				float	   *yr = y + r * width;
				float		mx = xr[0],
							sum = 0.0f;

				for (int64_t j = 1; j < width; j++)
					mx = xr[j] > mx ? xr[j] : mx;
				for (int64_t j = 0; j < width; j++)
				{
					yr[j] = expf(xr[j] - mx);
					sum += yr[j];
				}
				for (int64_t j = 0; j < width; j++)
					yr[j] /= sum;
			}
			break;
		default:
			if (x != y)
				memcpy(y, x, (size_t) total * sizeof(float));
			break;
	}
}

/* dx = dy * act'(x), using the saved input x and output y. */
void
nn_act_backward(int act, float alpha, const float *x, const float *y,
				const float *dy, float *dx, int64_t n, int64_t width)
{
	int64_t		total = n * width;

	switch (act)
	{
		case NN_ACT_RELU:
			/* load dy unconditionally so the loop vectorises */
			for (int64_t i = 0; i < total; i++)
			{
				float		g = dy[i];

				dx[i] = x[i] > 0.0f ? g : 0.0f;
			}
			break;
		case NN_ACT_LEAKY_RELU:
			for (int64_t i = 0; i < total; i++)
			{
				float		g = dy[i];

				dx[i] = x[i] > 0.0f ? g : alpha * g;
			}
			break;
		case NN_ACT_TANH:
			for (int64_t i = 0; i < total; i++)
				dx[i] = dy[i] * (1.0f - y[i] * y[i]);
			break;
		case NN_ACT_SIGMOID:
			for (int64_t i = 0; i < total; i++)
				dx[i] = dy[i] * y[i] * (1.0f - y[i]);
			break;
		case NN_ACT_GELU:
			for (int64_t i = 0; i < total; i++)
			{
				float		cdf = 0.5f * (1.0f + erff(x[i] * (float) M_SQRT1_2));
				float		pdf = expf(-0.5f * x[i] * x[i]) * 0.3989422804014327f;

				dx[i] = dy[i] * (cdf + x[i] * pdf);
			}
			break;
		case NN_ACT_SOFTMAX:
			for (int64_t r = 0; r < n; r++)
			{
				const float *yr = y + r * width;
				const float *dyr = dy + r * width;
				float	   *dxr = dx + r * width;
				float		dot = 0.0f;

				for (int64_t j = 0; j < width; j++)
					dot += dyr[j] * yr[j];
				for (int64_t j = 0; j < width; j++)
					dxr[j] = yr[j] * (dyr[j] - dot);
			}
			break;
		default:
			if (dx != dy)
				memcpy(dx, dy, (size_t) total * sizeof(float));
			break;
	}
}

/* Sum the rows of g [rows, width] into out [width] (overwrites out). */
static void
sum_rows(const float *g, int64_t rows, int64_t width, float *out)
{
	memset(out, 0, (size_t) width * sizeof(float));
	for (int64_t r = 0; r < rows; r++)
	{
		const float *gr = g + r * width;

		for (int64_t j = 0; j < width; j++)
			out[j] += gr[j];
	}
}

/* Fill each of rows rows of out [rows, width] with bias. */
static void
fill_rows(float *out, int64_t rows, int64_t width, const float *bias)
{
	for (int64_t r = 0; r < rows; r++)
		memcpy(out + r * width, bias, (size_t) width * sizeof(float));
}

/* im2col for NHWC input: col [nb * oh * ow, kh * kw * ic]. */
static void
im2col(const nn_ilayer *L, const float *in, float *col, int nb)
{
	int64_t		K = (int64_t) L->kh * L->kw * L->ic;
	int			ic = L->ic;

	for (int n = 0; n < nb; n++)
	{
		const float *img = in + (int64_t) n * L->in_size;

		for (int oy = 0; oy < L->oh; oy++)
			for (int ox = 0; ox < L->ow; ox++)
			{
				float	   *row = col + (((int64_t) n * L->oh + oy) * L->ow + ox) * K;

				for (int ky = 0; ky < L->kh; ky++)
				{
					int			iy = oy * L->sh - L->pt + ky;

					for (int kx = 0; kx < L->kw; kx++)
					{
						int			ix = ox * L->sw - L->pl + kx;
						float	   *dst = row + ((int64_t) ky * L->kw + kx) * ic;

						if (iy < 0 || iy >= L->ih || ix < 0 || ix >= L->iw)
							memset(dst, 0, (size_t) ic * sizeof(float));
						else if (ic == 1)
							dst[0] = img[(int64_t) iy * L->iw + ix];
						else
							memcpy(dst, img + ((int64_t) iy * L->iw + ix) * ic,
								   (size_t) ic * sizeof(float));
					}
				}
			}
	}
}

/* col2im: accumulate col [nb * oh * ow, kh * kw * ic] into din (zeroed here). */
static void
col2im(const nn_ilayer *L, const float *col, float *din, int nb)
{
	int64_t		K = (int64_t) L->kh * L->kw * L->ic;
	int			ic = L->ic;

	memset(din, 0, (size_t) nb * L->in_size * sizeof(float));
	for (int n = 0; n < nb; n++)
	{
		float	   *img = din + (int64_t) n * L->in_size;

		for (int oy = 0; oy < L->oh; oy++)
			for (int ox = 0; ox < L->ow; ox++)
			{
				const float *row = col + (((int64_t) n * L->oh + oy) * L->ow + ox) * K;

				for (int ky = 0; ky < L->kh; ky++)
				{
					int			iy = oy * L->sh - L->pt + ky;

					if (iy < 0 || iy >= L->ih)
						continue;
					for (int kx = 0; kx < L->kw; kx++)
					{
						int			ix = ox * L->sw - L->pl + kx;
						const float *src = row + ((int64_t) ky * L->kw + kx) * ic;
						float	   *dst;

						if (ix < 0 || ix >= L->iw)
							continue;
						dst = img + ((int64_t) iy * L->iw + ix) * ic;
						for (int c = 0; c < ic; c++)
							dst[c] += src[c];
					}
				}
			}
	}
}

/* Max pooling forward; argmax holds the winning input offset within a row. */
static void
maxpool_forward(const nn_ilayer *L, const float *in, float *out, int32_t *argmax,
				int nb)
{
	int			c_n = L->ic;

	for (int n = 0; n < nb; n++)
	{
		const float *img = in + (int64_t) n * L->in_size;

		for (int oy = 0; oy < L->oh; oy++)
			for (int ox = 0; ox < L->ow; ox++)
			{
				int64_t		o = (((int64_t) n * L->oh + oy) * L->ow + ox) * c_n;
				float	   *best = out + o;
				int32_t    *arg = argmax + o;

				for (int c = 0; c < c_n; c++)
				{
					best[c] = -INFINITY;
					arg[c] = -1;
				}
				for (int ky = 0; ky < L->kh; ky++)
				{
					int			iy = oy * L->sh - L->pt + ky;

					if (iy < 0 || iy >= L->ih)
						continue;
					for (int kx = 0; kx < L->kw; kx++)
					{
						int			ix = ox * L->sw - L->pl + kx;
						int32_t		pos;
						const float *src;

						if (ix < 0 || ix >= L->iw)
							continue;
						pos = (iy * L->iw + ix) * c_n;
						src = img + pos;
						/* branch-free select (vectorises); NaN wins as in PyTorch */
						for (int c = 0; c < c_n; c++)
						{
							float		v = src[c],
										b = best[c];
							int			take = (v > b) | (v != v);

							best[c] = take ? v : b;
							arg[c] = take ? pos + c : arg[c];
						}
					}
				}
			}
	}
}

/* Max pooling backward: route each output gradient to its argmax. */
static void
maxpool_backward(const nn_ilayer *L, const float *dout, const int32_t *argmax,
				 float *din, int nb)
{
	memset(din, 0, (size_t) nb * L->in_size * sizeof(float));
	for (int n = 0; n < nb; n++)
	{
		const float *d = dout + (int64_t) n * L->out_size;
		const int32_t *a = argmax + (int64_t) n * L->out_size;
		float	   *img = din + (int64_t) n * L->in_size;

		for (int64_t j = 0; j < L->out_size; j++)
			if (a[j] >= 0)
				img[a[j]] += d[j];
	}
}

/*
 * Batch normalisation forward over nb rows: each of the oc channels (the
 * last axis) over its nb * oh * ow values.  Training normalises with the
 * batch's statistics, saves its mean and 1/std in the aux buffer for the
 * backward pass and updates the running statistics; evaluation normalises
 * with the running statistics.  Sums are taken per channel, in double, in
 * row order, so the result does not depend on anything but the inputs.
 */
static void
batchnorm_forward(nn_model *m, const nn_ilayer *L, const float *in, float *out,
				  int nb, int training)
{
	int			C = L->oc;
	int64_t		n = (int64_t) nb * L->oh * L->ow;
	const float *gamma = m->params + L->w_off;
	const float *beta = m->params + L->b_off;
	float	   *rmean = m->bufs + L->s_off,
			   *rvar = rmean + C;
	float	   *mean = m->ws + L->aux_off,
			   *istd = mean + C;

	for (int c = 0; c < C; c++)
	{
		double		mu,
					var;

		if (training)
		{
			double		s = 0.0,
						ss = 0.0;

			for (int64_t r = 0; r < n; r++)
				s += in[r * C + c];
			mu = s / (double) n;
			for (int64_t r = 0; r < n; r++)
			{
				double		d = in[r * C + c] - mu;

				ss += d * d;
			}
			var = ss / (double) n;
			/* one value per channel has no unbiased variance: keep the statistics */
			if (n > 1)
			{
				double		mom = L->momentum;

				rmean[c] = (float) ((1.0 - mom) * rmean[c] + mom * mu);
				rvar[c] = (float) ((1.0 - mom) * rvar[c] + mom * (ss / (double) (n - 1)));
			}
		}
		else
		{
			mu = rmean[c];
			var = rvar[c];
		}
		mean[c] = (float) mu;
		istd[c] = (float) (1.0 / sqrt(var + (double) L->eps));
	}
	for (int64_t r = 0; r < n; r++)
	{
		const float *x = in + r * C;
		float	   *y = out + r * C;

		for (int c = 0; c < C; c++)
			y[c] = (x[c] - mean[c]) * istd[c] * gamma[c] + beta[c];
	}
}

/*
 * Batch normalisation backward (training mode): with xhat = (x - mean) /
 * std and N values per channel, dbeta = sum dy, dgamma = sum dy * xhat,
 * dx = gamma / std / N * (N dy - dbeta - xhat dgamma).
 */
static void
batchnorm_backward(nn_model *m, const nn_ilayer *L, const float *in,
				   const float *dout, float *din, int nb)
{
	int			C = L->oc;
	int64_t		n = (int64_t) nb * L->oh * L->ow;
	const float *gamma = m->params + L->w_off;
	float	   *dgamma = m->grads + L->w_off,
			   *dbeta = m->grads + L->b_off;
	const float *mean = m->ws + L->aux_off,
			   *istd = mean + C;

	for (int c = 0; c < C; c++)
	{
		double		sb = 0.0,
					sg = 0.0;

		for (int64_t r = 0; r < n; r++)
		{
			double		g = dout[r * C + c];

			sb += g;
			sg += g * (((double) in[r * C + c] - mean[c]) * istd[c]);
		}
		dgamma[c] = (float) sg;
		dbeta[c] = (float) sb;
		if (din)
		{
			double		k = (double) gamma[c] * istd[c] / (double) n;

			for (int64_t r = 0; r < n; r++)
			{
				double		xhat = ((double) in[r * C + c] - mean[c]) * istd[c];

				din[r * C + c] = (float) (k * ((double) n * dout[r * C + c] - sb - xhat * sg));
			}
		}
	}
}

/* Forward one layer over nb rows of in into out. */
void
nn_layer_forward(nn_model *m, const nn_ilayer *L, const float *in, float *out,
				 int nb, int training)
{
	const float *W = L->w_off >= 0 ? m->params + L->w_off : NULL;
	const float *b = L->b_off >= 0 ? m->params + L->b_off : NULL;

	switch (L->type)
	{
		case NN_LAYER_DENSE:
			if (b)
				fill_rows(out, nb, L->oc, b);
			nn_gemm(0, 0, nb, L->oc, (int) L->in_size, 1.0f, in, (int) L->in_size,
					W, L->oc, b ? 1.0f : 0.0f, out, L->oc);
			break;

		case NN_LAYER_CONV2D:
			{
				int			K = L->kh * L->kw * L->ic;
				int64_t		img_rows = (int64_t) L->oh * L->ow;

				if (b)
					fill_rows(out, nb * img_rows, L->oc, b);
				for (int n0 = 0; n0 < nb; n0 += L->chunk)
				{
					int			cn = nb - n0 < L->chunk ? nb - n0 : L->chunk;

					im2col(L, in + (int64_t) n0 * L->in_size, m->col, cn);
					nn_gemm(0, 0, (int) (cn * img_rows), L->oc, K, 1.0f, m->col, K, W, L->oc,
							b ? 1.0f : 0.0f, out + n0 * img_rows * L->oc, L->oc);
				}
				break;
			}

		case NN_LAYER_MAXPOOL2D:
			maxpool_forward(L, in, out, (int32_t *) (m->ws + L->aux_off), nb);
			break;

		case NN_LAYER_DROPOUT:
			{
				int64_t		total = (int64_t) nb * L->out_size;

				if (training && L->rate > 0)
				{
					float	   *mask = m->ws + L->aux_off;
					float		keep = 1.0f / (1.0f - L->rate);

					for (int64_t i = 0; i < total; i++)
					{
						mask[i] = nn_rng_uniform(m->rng) >= L->rate ? keep : 0.0f;
						out[i] = in[i] * mask[i];
					}
				}
				else
					memcpy(out, in, (size_t) total * sizeof(float));
				break;
			}

		case NN_LAYER_ACTIVATION:
			nn_act_forward(L->act, L->alpha, in, out, nb, L->out_size);
			break;

		case NN_LAYER_BATCHNORM:
			batchnorm_forward(m, L, in, out, nb, training);
			break;

		default:
			break;
	}
}

/*
 * Backward one layer: given dout, write parameter gradients into m->grads and
 * (if din is not NULL) the gradient with respect to the input into din.
 */
void
nn_layer_backward(nn_model *m, const nn_ilayer *L, const float *in,
				  const float *out, const float *dout, float *din, int nb)
{
	const float *W = L->w_off >= 0 ? m->params + L->w_off : NULL;
	float	   *dW = L->w_off >= 0 ? m->grads + L->w_off : NULL;
	float	   *db = L->b_off >= 0 ? m->grads + L->b_off : NULL;

	switch (L->type)
	{
		case NN_LAYER_DENSE:
			{
				int			K = (int) L->in_size;

				nn_gemm(1, 0, K, L->oc, nb, 1.0f, in, K, dout, L->oc, 0.0f, dW, L->oc);
				if (db)
					sum_rows(dout, nb, L->oc, db);
				if (din)
					nn_gemm(0, 1, nb, K, L->oc, 1.0f, dout, L->oc, W, L->oc, 0.0f, din, K);
				break;
			}

		case NN_LAYER_CONV2D:
			{
				int			K = L->kh * L->kw * L->ic;
				int64_t		img_rows = (int64_t) L->oh * L->ow;

				if (db)
					sum_rows(dout, nb * img_rows, L->oc, db);
				for (int n0 = 0; n0 < nb; n0 += L->chunk)
				{
					int			cn = nb - n0 < L->chunk ? nb - n0 : L->chunk;
					int			rows = (int) (cn * img_rows);
					const float *dchunk = dout + n0 * img_rows * L->oc;

					/* dW accumulates over chunks */
					im2col(L, in + (int64_t) n0 * L->in_size, m->col, cn);
					nn_gemm(1, 0, K, L->oc, rows, 1.0f, m->col, K, dchunk, L->oc,
							n0 == 0 ? 0.0f : 1.0f, dW, L->oc);
					if (din)
					{
						nn_gemm(0, 1, rows, K, L->oc, 1.0f, dchunk, L->oc, W, L->oc, 0.0f, m->col, K);
						col2im(L, m->col, din + (int64_t) n0 * L->in_size, cn);
					}
				}
				break;
			}

		case NN_LAYER_MAXPOOL2D:
			if (din)
				maxpool_backward(L, dout, (const int32_t *) (m->ws + L->aux_off), din, nb);
			break;

		case NN_LAYER_DROPOUT:
			if (din)
			{
				int64_t		total = (int64_t) nb * L->out_size;
				const float *mask = m->ws + L->aux_off;

				if (L->rate > 0)
					for (int64_t i = 0; i < total; i++)
						din[i] = dout[i] * mask[i];
				else
					memcpy(din, dout, (size_t) total * sizeof(float));
			}
			break;

		case NN_LAYER_ACTIVATION:
			if (din)
				nn_act_backward(L->act, L->alpha, in, out, dout, din, nb, L->out_size);
			break;

		case NN_LAYER_BATCHNORM:
			batchnorm_backward(m, L, in, dout, din, nb);
			break;

		default:
			break;
	}
}
