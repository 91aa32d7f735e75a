/*
 * kernels_train.cu -- the CUDA kernels of a training step's end: label
 * checks, per-row losses and metrics and their sums, the step counter,
 * gradient clipping and the optimizers.
 *
 * As in kernels.cu, each kernel's comment names the CPU function of src/nn
 * it must match (test/gpu/parity.c checks it); the arithmetic follows the
 * CPU code term for term, and no floating-point sum uses atomics.
 */
#include "kernels_internal.h"

/* ---- losses and metrics ---------------------------------------------- */

/* raise flag (first writer wins) and remember the step */
__device__ static void
raise_flag(gk_status *st, int code, long long step)
{
	if (atomicCAS(&st->flag, 0, code) == 0)
		st->step = step;
}

/*
 * CPU reference: the label checks at the top of nn_loss_eval (loss.c);
 * strict as there with class weights: a label must then be a class, so
 * binary cross-entropy takes exactly 0 or 1.
 */
__global__ static void
k_check_labels(int loss, int out_dim, const float *y, int64_t n, int strict, gk_status *st)
{
	GRID_STRIDE(r, n)
	{
		int			bad = 0;

		if (loss == NN_LOSS_SOFTMAX_CE)
		{
			float		l = y[r];

			bad = !(l >= 0 && l < out_dim) || l != floorf(l);
		}
		else
			for (int j = 0; j < out_dim && !bad; j++)
			{
				float		t = y[r * out_dim + j];

				bad = !isfinite(t) || (loss == NN_LOSS_SIGMOID_BCE && (t < 0 || t > 1)) ||
					(strict && t != 0.0f && t != 1.0f);
			}
		if (bad)
			atomicMin(&st->bad_label_row, (unsigned long long) r);
	}
}

void
gk_check_labels(int loss, int out_dim, const float *y, int64_t n, int strict, gk_status *st,
				cudaStream_t s)
{
	k_check_labels<<<blocks_for(n), THREADS, 0, s>>>(loss, out_dim, y, n, strict, st);
}

/*
 * CPU reference: weight_class (loss.c): the class of row r's label for
 * class weights, the class index for cross-entropy, 0 or 1 for binary
 * cross-entropy of one output.
 */
__device__ static int
weight_class(int loss, const float *y, int64_t r)
{
	return loss == NN_LOSS_SOFTMAX_CE ? (int) y[r] : (y[r] > 0.5f ? 1 : 0);
}

/*
 * CPU reference: the sum of the row weights in nn_loss_eval (wsum), one
 * block per member of a gang, a fixed reduction tree (the same bits every
 * run; the CPU adds in row order, so the last bits may differ).
 */
__global__ static void
k_class_wsum(int loss, gk_cw cw, const float *y, int nb)
{
	__shared__ double sw[THREADS];
	double		w = 0.0;
	int			k = blockIdx.x;

	if (!cw.on[k])
	{
		if (threadIdx.x == 0)
			cw.wsum[k] = 0.0;
		return;
	}
	y += (int64_t) k * nb;		/* y_dim is 1 wherever class weights apply */
	for (int r = threadIdx.x; r < nb; r += THREADS)
		w += (double) cw.cw[(int64_t) k * cw.ncls + weight_class(loss, y, r)];
	sw[threadIdx.x] = w;
	__syncthreads();
	for (int h = THREADS / 2; h > 0; h >>= 1)
	{
		if (threadIdx.x < h)
			sw[threadIdx.x] += sw[threadIdx.x + h];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		cw.wsum[k] = sw[0];
}

void
gk_class_wsum(int loss, const gk_cw *cw, const float *y, int members, int nb, cudaStream_t s)
{
	if (cw)
		k_class_wsum<<<members, THREADS, 0, s>>>(loss, *cw, y, nb);
}

/*
 * CPU reference: nn_loss_eval (loss.c), the per-row part: each row's loss
 * (times its class weight, if its member weighs), metric and (if dz)
 * gradient of the (weighted) mean batch loss.  A metric over the whole
 * set adds nothing here, as on the CPU (metrics.c gathers it).
 */
__global__ static void
k_loss_rows(int loss, int metric, int top_k, int out_dim, const float *z, const float *y,
			int64_t rows, int nb, gk_cw cw, float *dz, double *rowloss, double *rowmetric)
{
	float		inv_nb = 1.0f / (float) nb;

	GRID_STRIDE(r, rows)
	{
		const float *zr = z + r * out_dim;
		float	   *dzr = dz ? dz + r * out_dim : NULL;
		int			k = (int) (r / nb);
		int			weighs = cw.cw != NULL && cw.on[k];
		/* the row's share of the batch loss: 1 / rows, or w[y_r] / sum w */
		double		w = weighs ? (double) cw.cw[(int64_t) k * cw.ncls + weight_class(loss, y, r)] : 1.0;
		float		rs = weighs ? (float) (w / cw.wsum[k]) : inv_nb;

		if (loss == NN_LOSS_SOFTMAX_CE)
		{
			int			label = (int) y[r];
			float		mx = zr[0],
						sum = 0.0f,
						lse;
			int			best = 0;

			for (int j = 1; j < out_dim; j++)
				mx = zr[j] > mx ? zr[j] : mx;
			for (int j = 0; j < out_dim; j++)
				sum += expf(zr[j] - mx);
			lse = mx + logf(sum);
			rowloss[r] = w * (double) (lse - zr[label]);
			if (dzr)
			{
				for (int j = 0; j < out_dim; j++)
					dzr[j] = expf(zr[j] - lse) * rs;
				dzr[label] -= rs;
			}
			if (metric == NN_METRIC_TOPK)
			{
				int			rank = 0;

				for (int j = 0; j < out_dim; j++)
					if (zr[j] > zr[label] || (zr[j] == zr[label] && j < label))
						rank++;
				rowmetric[r] = rank < top_k ? 1.0 : 0.0;
			}
			else if (metric == NN_METRIC_LOG_LOSS)
				rowmetric[r] = (double) (lse - zr[label]);
			else if (metric == NN_METRIC_ACCURACY)
			{
				for (int j = 1; j < out_dim; j++)
					if (zr[j] > zr[best])
						best = j;
				rowmetric[r] = best == label ? 1.0 : 0.0;
			}
			else
				rowmetric[r] = 0.0;
		}
		else if (loss == NN_LOSS_SIGMOID_BCE)
		{
			const float *yr = y + r * out_dim;
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
			rowloss[r] = w * (rl / out_dim);
			rowmetric[r] = metric == NN_METRIC_LOG_LOSS ? rl / out_dim :
				metric == NN_METRIC_ACCURACY ? ra / out_dim : 0.0;
		}
		else
		{
			const float *yr = y + r * out_dim;
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
			rowloss[r] = se / out_dim;
			rowmetric[r] = metric == NN_METRIC_MAE ? ae / out_dim :
				metric == NN_METRIC_MSE ? se / out_dim : 0.0;
		}
	}
}

void
gk_loss_rows(int loss, int metric, int top_k, int out_dim, const float *z, const float *y,
			 int members, int nb, const gk_cw *cw, float *dz, double *rowloss,
			 double *rowmetric, cudaStream_t s)
{
	int64_t		rows = (int64_t) members * nb;
	gk_cw		none = {NULL, NULL, NULL, 0};

	k_loss_rows<<<blocks_for(rows), THREADS, 0, s>>>(loss, metric, top_k, out_dim, z, y, rows,
													 nb, cw ? *cw : none, dz, rowloss,
													 rowmetric);
}

/*
 * CPU reference: the sums of nn_loss_eval and the loss check of
 * nn_gradients (model.c).  One block, a fixed reduction tree: the same
 * bits every run.  A member that weighs its classes sums the weighted row
 * losses and takes their weighted mean times the rows, as nn_loss_eval.
 * Without check (evaluation) the sums are added to acc[0..1].  With check
 * (training) a non-finite batch loss raises the flag, and a finite one is
 * held in acc[2..3] until gk_commit_sums.
 */
__global__ static void
k_loss_reduce(const double *rowloss, const double *rowmetric, int nb, gk_cw cw, double *acc,
			  gk_status *st, const gk_step *tab, const int *idx, int check)
{
	__shared__ double sl[THREADS];
	__shared__ double sm[THREADS];
	double		l = 0.0,
				m = 0.0;
	int			k = blockIdx.x;	/* the member of a gang: one block each */

	rowloss += (int64_t) k * nb;
	rowmetric += (int64_t) k * nb;
	acc += 4 * k;
	st += k;

	for (int r = threadIdx.x; r < nb; r += THREADS)
	{
		l += rowloss[r];
		m += rowmetric[r];
	}
	sl[threadIdx.x] = l;
	sm[threadIdx.x] = m;
	__syncthreads();
	for (int h = THREADS / 2; h > 0; h >>= 1)
	{
		if (threadIdx.x < h)
		{
			sl[threadIdx.x] += sl[threadIdx.x + h];
			sm[threadIdx.x] += sm[threadIdx.x + h];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0)
	{
		if (cw.cw != NULL && cw.on[k])
			sl[0] = sl[0] / cw.wsum[k] * (double) nb;
		if (!check)
		{
			acc[0] += sl[0];
			acc[1] += sm[0];
			return;
		}
		if (st->flag)
			return;
		if (!isfinite(sl[0]))
		{
			raise_flag(st, isnan(sl[0]) ? GK_BAD_LOSS_NAN : GK_BAD_LOSS_INF,
					   tab[(int64_t) *idx * gridDim.x + k].t);
			return;
		}
		/* held until the optimizer has taken the step (gk_commit_sums) */
		acc[2] = sl[0];
		acc[3] = sm[0];
	}
}

/*
 * CPU reference: the end of train_step (model.c): a step's loss and metric
 * count only once its update succeeded (the CPU adds them after
 * nn_optim_step returns).
 */
__global__ static void
k_commit_sums(double *acc, const gk_status *st, int members)
{
	int			k = threadIdx.x;

	if (k < members && !st[k].flag)
	{
		acc[4 * k] += acc[4 * k + 2];
		acc[4 * k + 1] += acc[4 * k + 3];
	}
}

void
gk_commit_sums(double *acc, const gk_status *st, int members, cudaStream_t s)
{
	k_commit_sums<<<1, members, 0, s>>>(acc, st, members);
}

void
gk_loss_reduce(const double *rowloss, const double *rowmetric, int members, int nb,
			   const gk_cw *cw, double *acc, gk_status *st, const gk_step *tab, const int *idx,
			   int check, cudaStream_t s)
{
	gk_cw		none = {NULL, NULL, NULL, 0};

	k_loss_reduce<<<members, THREADS, 0, s>>>(rowloss, rowmetric, nb, cw ? *cw : none, acc, st,
											  tab, idx, check);
}

/* the end of a step: the next one reads the next entry of the step table */
__global__ static void
k_step_advance(int *idx)
{
	(*idx)++;
}

void
gk_step_advance(int *idx, cudaStream_t s)
{
	k_step_advance<<<1, 1, 0, s>>>(idx);
}

/* ---- optimizers ------------------------------------------------------ */

/*
 * CPU reference: clip_gradients (optim.c): coef = clip / (|g| + 1e-6),
 * applied if < 1.  One block per member of a gang (member k's gradients
 * at g + k * n); a member without clipping gets 1, which leaves its
 * gradients as they are.
 */
__global__ static void
k_clip_coef(const float *g, int64_t n, const gk_optim *o, float *coef)
{
	__shared__ double ss[1024];
	double		a = 0.0;
	int			k = blockIdx.x;

	if (o[k].clip <= 0.0f)
	{
		if (threadIdx.x == 0)
			coef[k] = 1.0f;
		return;
	}
	g += (int64_t) k * n;
	for (int64_t i = threadIdx.x; i < n; i += 1024)
		a += (double) g[i] * g[i];
	ss[threadIdx.x] = a;
	__syncthreads();
	for (int h = 512; h > 0; h >>= 1)
	{
		if (threadIdx.x < h)
			ss[threadIdx.x] += ss[threadIdx.x + h];
		__syncthreads();
	}
	if (threadIdx.x == 0)
	{
		float		c = (float) (o[k].clip / (sqrt(ss[0]) + 1e-6));

		coef[k] = c < 1.0f ? c : 1.0f;
	}
}

void
gk_clip_coef(const float *g, int64_t n, int members, const gk_optim *o, float *coef,
			 cudaStream_t s)
{
	k_clip_coef<<<members, 1024, 0, s>>>(g, n, o, coef);
}

/*
 * CPU reference: sgd_tensor, adam_tensor and rmsprop_tensor (optim.c), one
 * tensor of every member of a gang: element i is element i % t.size of
 * member i / t.size, whose parameters start at member * n_params and whose
 * optimizer state at member * n_opt (second slot n_params further), with
 * its own hyperparameters o[member], status and step entry.  The gradient
 * is first scaled by the clip coefficient (clip_gradients), then the
 * coupled L2 term is added.  Nothing is updated once a member's flag is
 * up; a non-finite weight raises it.
 */
__global__ static void
k_optim(int kind, const gk_optim *o, gk_tensor t, float *params, const float *grads,
		float *opt, const float *coef, gk_status *st, const gk_step *tab, const int *idx,
		int members)
{
	GRID_STRIDE(i, (int64_t) members * t.size)
	{
		int			k = members == 1 ? 0 : (int) (i / t.size);
		int64_t		j = i - (int64_t) k * t.size;
		const gk_optim *ok = &o[k];
		const gk_step *sp;
		int64_t		at = (int64_t) k * t.n_params + t.off + j;
		float	   *s1 = t.s1 ? opt + (int64_t) k * t.n_opt + t.off + j : NULL;
		float	   *s2 = t.s2 ? opt + (int64_t) k * t.n_opt + t.n_params + t.off + j : NULL;
		float		l2 = t.is_kernel ? ok->l2 : 0.0f;
		float		decay;
		float		gi,
					d,
					wi;

		if (st[k].flag)
			continue;
		sp = &tab[(int64_t) *idx * members + k];
		decay = t.is_kernel ? sp->kernel_decay : 1.0f;
		gi = coef ? grads[at] * coef[k] : grads[at];
		wi = params[at];
		d = gi + l2 * wi;
		switch (kind)
		{
			case NN_OPT_SGD:
				if (s1)
				{
					*s1 = ok->momentum * *s1 + d;
					d = ok->nesterov ? d + ok->momentum * *s1 : *s1;
				}
				wi -= sp->lr * d;
				break;
			case NN_OPT_ADAM:
			case NN_OPT_ADAMW:
				wi *= decay;
				*s1 = ok->beta1 * *s1 + (1.0f - ok->beta1) * d;
				*s2 = ok->beta2 * *s2 + (1.0f - ok->beta2) * d * d;
				wi -= sp->step_size * (*s1 / (sqrtf(*s2) / sp->bc2_sqrt + ok->eps));
				break;
			case NN_OPT_RMSPROP:
				{
					float		avg;

					*s1 = ok->rho * *s1 + (1.0f - ok->rho) * d * d;
					avg = sqrtf(*s1) + ok->eps;
					if (s2)
					{
						*s2 = ok->momentum * *s2 + d / avg;
						wi -= sp->lr * *s2;
					}
					else
						wi -= sp->lr * (d / avg);
					break;
				}
		}
		params[at] = wi;
		if ((wi - wi) != 0.0f)
			raise_flag(&st[k], GK_BAD_WEIGHTS, sp->t);
	}
}

void
gk_optim_tensor(int kind, const gk_optim *o, const gk_tensor *t, float *params,
				const float *grads, float *opt, const float *coef, gk_status *st,
				const gk_step *tab, const int *idx, int members, cudaStream_t s)
{
	k_optim<<<blocks_for((int64_t) members * t->size), THREADS, 0, s>>>(kind, o, *t, params,
																	   grads, opt, coef, st,
																	   tab, idx, members);
}
