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

/* ---- batch normalisation --------------------------------------------- */

/* Sum of v over the block into every thread's return value (fixed tree). */
__device__ static double
block_sum(double v, double *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int h = THREADS / 2; h > 0; h >>= 1)
	{
		if (threadIdx.x < h)
			sh[threadIdx.x] += sh[threadIdx.x + h];
		__syncthreads();
	}
	v = sh[0];
	__syncthreads();
	return v;
}

/*
 * CPU reference: batchnorm_forward (layers.c).  One block per channel c
 * (blockIdx.x) and member k (blockIdx.y) over the member's n = nb * oh *
 * ow values of the channel: in training the batch mean and biased
 * variance (in double, two passes, a fixed reduction tree instead of the
 * CPU's row order), the running statistics updated as there (unbiased
 * variance, not for a single value, nor for a member whose flag is up: it
 * stopped training at an earlier step), then every value normalised,
 * scaled and shifted in float as on the CPU.  Evaluation uses the running
 * statistics.  The batch mean and 1/std are saved for the backward pass.
 */
__global__ static void
k_bn_forward(gk_bn b, const float *in, float *out, int nb, int training, const gk_status *st)
{
	__shared__ double sh[THREADS];
	__shared__ float stat[2];
	int			C = b.oc,
				c = blockIdx.x,
				k = blockIdx.y;
	int64_t		n = (int64_t) nb * b.per_row;
	const float *x = in + (int64_t) k * n * C;
	float	   *y = out + (int64_t) k * n * C;
	float	   *rmean = b.run + (int64_t) k * b.stride_b,
			   *rvar = rmean + C;
	float	   *aux = b.aux + (int64_t) k * 2 * C;
	float		gamma = b.gamma[(int64_t) k * b.stride_p + c],
				beta = b.beta[(int64_t) k * b.stride_p + c];

	if (training)
	{
		double		s = 0.0,
					ss = 0.0,
					mu;

		for (int64_t r = threadIdx.x; r < n; r += THREADS)
			s += x[r * C + c];
		mu = block_sum(s, sh) / (double) n;
		for (int64_t r = threadIdx.x; r < n; r += THREADS)
		{
			double		d = x[r * C + c] - mu;

			ss += d * d;
		}
		ss = block_sum(ss, sh);
		if (threadIdx.x == 0)
		{
			double		var = ss / (double) n;

			if (n > 1 && !st[k].flag)
			{
				double		mom = b.momentum;

				rmean[c] = (float) ((1.0 - mom) * rmean[c] + mom * mu);
				rvar[c] = (float) ((1.0 - mom) * rvar[c] + mom * (ss / (double) (n - 1)));
			}
			stat[0] = (float) mu;
			stat[1] = (float) (1.0 / sqrt(var + (double) b.eps));
		}
	}
	else if (threadIdx.x == 0)
	{
		stat[0] = (float) (double) rmean[c];
		stat[1] = (float) (1.0 / sqrt((double) rvar[c] + (double) b.eps));
	}
	__syncthreads();
	if (threadIdx.x == 0)
	{
		aux[c] = stat[0];
		aux[C + c] = stat[1];
	}
	for (int64_t r = threadIdx.x; r < n; r += THREADS)
		y[r * C + c] = (x[r * C + c] - stat[0]) * stat[1] * gamma + beta;
}

void
gk_bn_forward(const gk_bn *b, const float *in, float *out, int members, int nb, int training,
			  const gk_status *st, cudaStream_t s)
{
	dim3		grid(b->oc, members);

	k_bn_forward<<<grid, THREADS, 0, s>>>(*b, in, out, nb, training, st);
}

/*
 * CPU reference: batchnorm_backward (layers.c).  One block per channel
 * and member: dbeta = sum dy and dgamma = sum dy * xhat in double (a fixed
 * tree), then, if din, dx = gamma / std / n * (n dy - dbeta - xhat dgamma)
 * with the double sums, as on the CPU.
 */
__global__ static void
k_bn_backward(gk_bn b, const float *in, const float *dout, float *din, int nb)
{
	__shared__ double sh[THREADS];
	int			C = b.oc,
				c = blockIdx.x,
				k = blockIdx.y;
	int64_t		n = (int64_t) nb * b.per_row;
	const float *x = in + (int64_t) k * n * C;
	const float *dy = dout + (int64_t) k * n * C;
	const float *aux = b.aux + (int64_t) k * 2 * C;
	float		mean = aux[c],
				istd = aux[C + c];
	double		sb = 0.0,
				sg = 0.0;

	for (int64_t r = threadIdx.x; r < n; r += THREADS)
	{
		double		g = dy[r * C + c];

		sb += g;
		sg += g * (((double) x[r * C + c] - mean) * istd);
	}
	sb = block_sum(sb, sh);
	sg = block_sum(sg, sh);
	if (threadIdx.x == 0)
	{
		b.dgamma[(int64_t) k * b.stride_p + c] = (float) sg;
		b.dbeta[(int64_t) k * b.stride_p + c] = (float) sb;
	}
	if (din)
	{
		double		kk = (double) b.gamma[(int64_t) k * b.stride_p + c] * istd / (double) n;
		float	   *dx = din + (int64_t) k * n * C;

		for (int64_t r = threadIdx.x; r < n; r += THREADS)
		{
			double		xhat = ((double) x[r * C + c] - mean) * istd;

			dx[r * C + c] = (float) (kk * ((double) n * dy[r * C + c] - sb - xhat * sg));
		}
	}
}

void
gk_bn_backward(const gk_bn *b, const float *in, const float *dout, float *din, int members,
			   int nb, cudaStream_t s)
{
	dim3		grid(b->oc, members);

	k_bn_backward<<<grid, THREADS, 0, s>>>(*b, in, dout, din, nb);
}
