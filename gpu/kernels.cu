/*
 * kernels.cu -- the CUDA kernels of mop's GPU engine.
 *
 * Each kernel is written next to a comment naming the CPU function of
 * src/nn it must match; test/gpu/parity.c checks every one against that
 * reference.  The arithmetic follows the CPU code term for term (this file
 * is compiled with --fmad=false, as the engine is with -ffp-contract=off);
 * what still differs is summation order in GEMMs and reductions and the
 * last bits of expf/tanhf/erff, which the parity tests bound.
 *
 * Nothing here uses atomics on floating-point sums, so a kernel gives the
 * same bits every time: deterministic runs stay deterministic on a GPU.
 *
 * This file holds the fills and copies, activations, convolution and
 * pooling; kernels_train.cu the losses, metrics and optimizers.
 */
#include "kernels_internal.h"

/* ---- plain fills and copies ------------------------------------------ */

__global__ static void
k_fill(float *x, int64_t n, float v)
{
	GRID_STRIDE(i, n) x[i] = v;
}

void
gk_fill(float *x, int64_t n, float v, cudaStream_t s)
{
	k_fill<<<blocks_for(n), THREADS, 0, s>>>(x, n, v);
}

/*
 * CPU reference: fill_rows (layers.c), for each member of a gang: rows
 * [k * rows, (k + 1) * rows) take member k's bias (bias + k * bias_stride).
 */
__global__ static void
k_fill_rows(float *out, int64_t total, int64_t per_member, int64_t width, const float *bias,
			int64_t bias_stride)
{
	GRID_STRIDE(i, total)
		out[i] = bias[(per_member == total ? 0 : (i / per_member) * bias_stride) + i % width];
}

void
gk_fill_rows(float *out, int members, int64_t rows, int64_t width, const float *bias,
			 int64_t bias_stride, cudaStream_t s)
{
	int64_t		total = (int64_t) members * rows * width;

	k_fill_rows<<<blocks_for(total), THREADS, 0, s>>>(out, total, rows * width, width, bias,
													  bias_stride);
}

/* CPU reference: the staging copy of nn_train_feed (model.c), rows in perm order */
__global__ static void
k_gather_rows(float *dst, const float *src, const int64_t *perm, int64_t off,
			  int64_t n, int64_t width)
{
	GRID_STRIDE(i, n * width)
	{
		int64_t		r = i / width,
					j = i - r * width;
		int64_t		from = perm ? perm[off + r] : off + r;

		dst[i] = src[from * width + j];
	}
}

void
gk_gather_rows(float *dst, const float *src, const int64_t *perm, int64_t off, int64_t n,
			   int64_t width, cudaStream_t s)
{
	if (n > 0)
		k_gather_rows<<<blocks_for(n * width), THREADS, 0, s>>>(dst, src, perm, off, n, width);
}

/*
 * CPU reference: the staging copy of nn_train_feed (model.c), as the step
 * table describes it: the segments of the current step's minibatch are
 * copied into the staging buffers (thread i copies float i of x and float
 * i of y, where they exist).  Member k of a gang (blockIdx.y) reads its
 * own entry of the step and writes rows [k * batch, (k + 1) * batch).
 */
__global__ static void
k_gather_step(const gk_step *tab, const int *idx, int members, float *xb, float *yb,
			  int64_t batch, int64_t in_dim, int64_t y_dim)
{
	const gk_step *e = &tab[(int64_t) *idx * members + blockIdx.y];
	int64_t		total = batch * (in_dim > y_dim ? in_dim : y_dim);

	xb += (int64_t) blockIdx.y * batch * in_dim;
	yb += (int64_t) blockIdx.y * batch * y_dim;

	GRID_STRIDE(i, total)
	{
		for (int pass = 0; pass < 2; pass++)
		{
			int64_t		width = pass ? y_dim : in_dim;
			int64_t		r,
						j;

			if (i >= batch * width)
				continue;
			r = i / width;
			j = i - r * width;
			for (int k = 0; k < e->nseg; k++)
			{
				const gk_seg *sg = &e->seg[k];

				if (r >= sg->dst && r < sg->dst + sg->n)
				{
					int64_t		q = sg->off + (r - sg->dst);
					int64_t		from = sg->perm ? sg->perm[q] : q;

					if (pass)
						yb[i] = sg->y[from * width + j];
					else
						xb[i] = sg->x[from * width + j];
					break;
				}
			}
		}
	}
}

void
gk_gather_step(const gk_step *tab, const int *idx, int members, float *xb, float *yb,
			   int64_t batch, int64_t in_dim, int64_t y_dim, cudaStream_t s)
{
	int64_t		n = batch * (in_dim > y_dim ? in_dim : y_dim);
	dim3		grid(blocks_for(n), members);

	k_gather_step<<<grid, THREADS, 0, s>>>(tab, idx, members, xb, yb, batch, in_dim, y_dim);
}

/* CPU reference: the dropout layer of nn_layer_forward/backward (out = in * mask) */
__global__ static void
k_mul(const float *a, const float *b, float *out, int64_t n)
{
	GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}

void
gk_mul(const float *a, const float *b, float *out, int64_t n, cudaStream_t s)
{
	k_mul<<<blocks_for(n), THREADS, 0, s>>>(a, b, out, n);
}

/* ---- activations ----------------------------------------------------- */

/* CPU reference: nn_act_forward (layers.c), elementwise activations */
__global__ static void
k_act_forward(int act, float alpha, const float *x, float *y, int64_t total)
{
	GRID_STRIDE(i, total)
	{
		float		v = x[i];

		switch (act)
		{
			case NN_ACT_RELU:
				y[i] = v > 0.0f ? v : 0.0f;
				break;
			case NN_ACT_LEAKY_RELU:
				y[i] = v > 0.0f ? v : alpha * v;
				break;
			case NN_ACT_TANH:
				y[i] = tanhf(v);
				break;
			case NN_ACT_SIGMOID:
				y[i] = 1.0f / (1.0f + expf(-v));
				break;
			case NN_ACT_GELU:
				y[i] = 0.5f * v * (1.0f + erff(v * (float) M_SQRT1_2));
				break;
			default:
				y[i] = v;
				break;
		}
	}
}

/* CPU reference: nn_act_forward (layers.c), NN_ACT_SOFTMAX: one thread per row */
__global__ static void
k_softmax_rows(const float *x, float *y, int64_t n, int64_t width)
{
	GRID_STRIDE(r, n)
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
}

void
gk_act_forward(int act, float alpha, const float *x, float *y, int64_t n, int64_t width,
			   cudaStream_t s)
{
	if (act == NN_ACT_SOFTMAX)
		k_softmax_rows<<<blocks_for(n), THREADS, 0, s>>>(x, y, n, width);
	else if (act == NN_ACT_NONE && x == y)
		return;
	else
		k_act_forward<<<blocks_for(n * width), THREADS, 0, s>>>(act, alpha, x, y, n * width);
}

/* CPU reference: nn_act_backward (layers.c), elementwise activations */
__global__ static void
k_act_backward(int act, float alpha, const float *x, const float *y, const float *dy,
			   float *dx, int64_t total)
{
	GRID_STRIDE(i, total)
	{
		float		g = dy[i];

		switch (act)
		{
			case NN_ACT_RELU:
				dx[i] = x[i] > 0.0f ? g : 0.0f;
				break;
			case NN_ACT_LEAKY_RELU:
				dx[i] = x[i] > 0.0f ? g : alpha * g;
				break;
			case NN_ACT_TANH:
				dx[i] = g * (1.0f - y[i] * y[i]);
				break;
			case NN_ACT_SIGMOID:
				dx[i] = g * y[i] * (1.0f - y[i]);
				break;
			case NN_ACT_GELU:
				{
					float		v = x[i];
					float		cdf = 0.5f * (1.0f + erff(v * (float) M_SQRT1_2));
					float		pdf = expf(-0.5f * v * v) * 0.3989422804014327f;

					dx[i] = g * (cdf + v * pdf);
					break;
				}
			default:
				dx[i] = g;
				break;
		}
	}
}

/* CPU reference: nn_act_backward (layers.c), NN_ACT_SOFTMAX */
__global__ static void
k_softmax_backward_rows(const float *y, const float *dy, float *dx, int64_t n, int64_t width)
{
	GRID_STRIDE(r, n)
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
}

void
gk_act_backward(int act, float alpha, const float *x, const float *y, const float *dy,
				float *dx, int64_t n, int64_t width, cudaStream_t s)
{
	if (act == NN_ACT_SOFTMAX)
		k_softmax_backward_rows<<<blocks_for(n), THREADS, 0, s>>>(y, dy, dx, n, width);
	else if (act == NN_ACT_NONE && dx == dy)
		return;
	else
		k_act_backward<<<blocks_for(n * width), THREADS, 0, s>>>(act, alpha, x, y, dy, dx,
																 n * width);
}

/* ---- convolution and pooling ----------------------------------------- */

/* Window geometry passed by value (a copy of the fields of nn_ilayer used). */
typedef struct gk_win
{
	int			ih, iw, ic, oh, ow, oc, kh, kw, sh, sw, pt, pl;
	int64_t		in_size, out_size;
} gk_win;

static gk_win
win_of(const nn_ilayer *L)
{
	gk_win		w;

	w.ih = L->ih;
	w.iw = L->iw;
	w.ic = L->ic;
	w.oh = L->oh;
	w.ow = L->ow;
	w.oc = L->oc;
	w.kh = L->kh;
	w.kw = L->kw;
	w.sh = L->sh;
	w.sw = L->sw;
	w.pt = L->pt;
	w.pl = L->pl;
	w.in_size = L->in_size;
	w.out_size = L->out_size;
	return w;
}

/*
 * A gang's images in a conv chunk: image n of the chunk is image n % per of
 * member n / per, which sits at image (n / per) * stride + n % per of the
 * layer's input (members are stride images apart).  One member: identity.
 */
__device__ static int64_t
chunk_image(int64_t n, int per, int stride)
{
	return per == stride ? n : (n / per) * stride + n % per;
}

/* CPU reference: im2col (layers.c): col [nb * oh * ow, kh * kw * ic] from NHWC input */
__global__ static void
k_im2col(gk_win w, const float *in, float *col, int64_t total, int per, int stride)
{
	int64_t		K = (int64_t) w.kh * w.kw * w.ic;

	GRID_STRIDE(i, total)
	{
		int64_t		row = i / K;
		int			k = (int) (i - row * K);
		int			ox = (int) (row % w.ow);
		int64_t		t = row / w.ow;
		int			oy = (int) (t % w.oh);
		int64_t		n = t / w.oh;
		int			ky = k / (w.kw * w.ic);
		int			rem = k - ky * w.kw * w.ic;
		int			kx = rem / w.ic;
		int			c = rem - kx * w.ic;
		int			iy = oy * w.sh - w.pt + ky;
		int			ix = ox * w.sw - w.pl + kx;

		col[i] = (iy < 0 || iy >= w.ih || ix < 0 || ix >= w.iw) ? 0.0f :
			in[chunk_image(n, per, stride) * w.in_size + ((int64_t) iy * w.iw + ix) * w.ic + c];
	}
}

void
gk_im2col(const nn_ilayer *L, const float *in, float *col, int members, int per, int stride,
		  cudaStream_t s)
{
	int64_t		total = (int64_t) members * per * L->oh * L->ow * L->kh * L->kw * L->ic;

	k_im2col<<<blocks_for(total), THREADS, 0, s>>>(win_of(L), in, col, total, per, stride);
}

/*
 * CPU reference: col2im (layers.c).  The CPU scatters each unfolded row
 * into the image; here each input element gathers the entries that came
 * from it, so no two threads write one place.
 */
__global__ static void
k_col2im(gk_win w, const float *col, float *din, int64_t total, int per, int stride)
{
	int64_t		K = (int64_t) w.kh * w.kw * w.ic;

	GRID_STRIDE(i, total)
	{
		int64_t		n = i / w.in_size;
		int64_t		p = i - n * w.in_size;
		int			c = (int) (p % w.ic);
		int64_t		pix = p / w.ic;
		int			ix = (int) (pix % w.iw);
		int			iy = (int) (pix / w.iw);
		float		acc = 0.0f;

		for (int ky = 0; ky < w.kh; ky++)
		{
			int			ty = iy + w.pt - ky;
			int			oy;

			if (ty < 0 || ty % w.sh != 0 || (oy = ty / w.sh) >= w.oh)
				continue;
			for (int kx = 0; kx < w.kw; kx++)
			{
				int			tx = ix + w.pl - kx;
				int			ox;

				if (tx < 0 || tx % w.sw != 0 || (ox = tx / w.sw) >= w.ow)
					continue;
				acc += col[((n * w.oh + oy) * w.ow + ox) * K + ((int64_t) ky * w.kw + kx) * w.ic + c];
			}
		}
		din[chunk_image(n, per, stride) * w.in_size + p] = acc;
	}
}

void
gk_col2im(const nn_ilayer *L, const float *col, float *din, int members, int per, int stride,
		  cudaStream_t s)
{
	int64_t		total = (int64_t) members * per * L->in_size;

	k_col2im<<<blocks_for(total), THREADS, 0, s>>>(win_of(L), col, din, total, per, stride);
}

/* CPU reference: maxpool_forward (layers.c); argmax is the offset within the image */
__global__ static void
k_maxpool_forward(gk_win w, const float *in, float *out, int32_t *argmax, int64_t total)
{
	GRID_STRIDE(i, total)
	{
		int64_t		n = i / w.out_size;
		int64_t		p = i - n * w.out_size;
		int			c = (int) (p % w.oc);
		int64_t		pix = p / w.oc;
		int			ox = (int) (pix % w.ow);
		int			oy = (int) (pix / w.ow);
		const float *img = in + n * w.in_size;
		float		best = -INFINITY;
		int32_t		arg = -1;

		for (int ky = 0; ky < w.kh; ky++)
		{
			int			iy = oy * w.sh - w.pt + ky;

			if (iy < 0 || iy >= w.ih)
				continue;
			for (int kx = 0; kx < w.kw; kx++)
			{
				int			ix = ox * w.sw - w.pl + kx;
				int32_t		pos;
				float		v;

				if (ix < 0 || ix >= w.iw)
					continue;
				pos = (iy * w.iw + ix) * w.ic;
				v = img[pos + c];
				if ((v > best) | (v != v))	/* NaN wins, as on the CPU */
				{
					best = v;
					arg = pos + c;
				}
			}
		}
		out[i] = best;
		argmax[i] = arg;
	}
}

void
gk_maxpool_forward(const nn_ilayer *L, const float *in, float *out, int32_t *argmax, int nb,
				   cudaStream_t s)
{
	int64_t		total = (int64_t) nb * L->out_size;

	k_maxpool_forward<<<blocks_for(total), THREADS, 0, s>>>(win_of(L), in, out, argmax, total);
}

/*
 * CPU reference: maxpool_backward (layers.c).  Gathered per input element
 * (the outputs whose window covers it and whose argmax it is).
 */
__global__ static void
k_maxpool_backward(gk_win w, const float *dout, const int32_t *argmax, float *din,
				   int64_t total)
{
	GRID_STRIDE(i, total)
	{
		int64_t		n = i / w.in_size;
		int32_t		p = (int32_t) (i - n * w.in_size);
		int			c = p % w.ic;
		int			pix = p / w.ic;
		int			ix = pix % w.iw;
		int			iy = pix / w.iw;
		float		acc = 0.0f;

		for (int ky = 0; ky < w.kh; ky++)
		{
			int			ty = iy + w.pt - ky;
			int			oy;

			if (ty < 0 || ty % w.sh != 0 || (oy = ty / w.sh) >= w.oh)
				continue;
			for (int kx = 0; kx < w.kw; kx++)
			{
				int			tx = ix + w.pl - kx;
				int			ox;
				int64_t		o;

				if (tx < 0 || tx % w.sw != 0 || (ox = tx / w.sw) >= w.ow)
					continue;
				o = n * w.out_size + ((int64_t) oy * w.ow + ox) * w.oc + c;
				if (argmax[o] == p)
					acc += dout[o];
			}
		}
		din[i] = acc;
	}
}

void
gk_maxpool_backward(const nn_ilayer *L, const float *dout, const int32_t *argmax, float *din,
					int nb, cudaStream_t s)
{
	int64_t		total = (int64_t) nb * L->in_size;

	k_maxpool_backward<<<blocks_for(total), THREADS, 0, s>>>(win_of(L), dout, argmax, din,
															 total);
}
