/*
 * engine_step.cu -- one training step of the GPU engine, queued on a
 * mirror's stream: the layers' forward and backward passes (cuBLAS GEMMs
 * for dense and convolution layers, kernels.cu for the rest), the
 * optimizer, full-batch steps captured as CUDA graphs, and the step table
 * the kernels read (gk_step).  engine.cu's header comment describes the
 * design; this is the GPU twin of the step of src/nn/model.c and
 * src/nn/optim.c.
 */
#include "engine_internal.h"

/* ---- forward and backward -------------------------------------------- */

/*
 * Row-major C = alpha op(A) op(B) + beta C, as nn_gemm (blas.c), on cuBLAS,
 * for every member of the gang: member k's matrices are sa, sb and sc
 * floats after member k - 1's.  A gang of one makes the plain call.
 */
static void
gemm(mop_gpu_model *g, int ta, int tb, int m, int n, int k, float alpha, const float *a,
	 int lda, int64_t sa, const float *b, int ldb, int64_t sb, float beta, float *c, int ldc,
	 int64_t sc)
{
	/* row-major C = A B is column-major C^T = B^T A^T */
	if (g->n == 1)
		cublasSgemm(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
					n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
	else if (k >= 2048 && k > 8 * (m + n))
	{
		/*
		 * A long reduction onto a small result (a convolution's weight
		 * gradient sums over every pixel of the batch): cuBLAS splits the
		 * reduction across the GPU for one GEMM but not in a batch, where
		 * each member's would run on a handful of blocks.  One call each.
		 */
		for (int j = 0; j < g->n; j++)
			cublasSgemm(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
						n, m, k, &alpha, b + j * sb, ldb, a + j * sa, lda, &beta, c + j * sc, ldc);
	}
	else
		cublasSgemmStridedBatched(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
								  ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, sb,
								  a, lda, sa, &beta, c, ldc, sc, g->n);
}

/*
 * sum_rows (layers.c): out[width] = sum over rows of x[rows, width], via a
 * GEMV with ones; member k's x is sx floats further and its out so.
 */
static void
sum_rows(mop_gpu_model *g, const float *x, int64_t rows, int64_t width, int64_t sx, float *out,
		 int64_t so)
{
	const float one = 1.0f,
				zero = 0.0f;

	if (g->n == 1)
		cublasSgemv(g->blas, CUBLAS_OP_N, (int) width, (int) rows, &one, x, (int) width,
					g->ones, 1, &zero, out, 1);
	else
		cublasSgemvStridedBatched(g->blas, CUBLAS_OP_N, (int) width, (int) rows, &one, x,
								  (int) width, sx, g->ones, 1, 0, &zero, out, 1, so, g->n);
}

/*
 * Draw one dropout layer's masks, per members nb * out_size floats, each
 * from its own model's generator on the host, and upload them (see the
 * header).
 */
static void
dropout_mask(mop_gpu_model *g, const nn_ilayer *L, float *mask_dev, int64_t per)
{
	float		keep = 1.0f / (1.0f - L->rate);

	/* the pinned buffer may still be feeding the last copy */
	cudaStreamSynchronize(g->stream);
	for (int k = 0; k < g->n; k++)
	{
		nn_model   *m = g->mem[k].host;
		float	   *mk = g->mask_host + k * per;

		for (int64_t i = 0; i < per; i++)
			mk[i] = nn_rng_uniform(m->rng) >= L->rate ? keep : 0.0f;
	}
	cudaMemcpyAsync(mask_dev, g->mask_host, (size_t) (per * g->n) * 4, cudaMemcpyHostToDevice,
					g->stream);
}

/* A batchnorm layer's numbers for the kernels (gk_bn) */
static gk_bn
bn_of(mop_gpu_model *g, const nn_ilayer *L)
{
	gk_bn		b;

	b.gamma = g->params + L->w_off;
	b.beta = g->params + L->b_off;
	b.dgamma = g->grads + L->w_off;
	b.dbeta = g->grads + L->b_off;
	b.run = g->bufs + L->s_off;
	b.aux = g->acts + g->n * L->aux_off;
	b.stride_p = g->host->plan.n_params;
	b.stride_b = g->host->plan.n_bufs;
	b.oc = L->oc;
	b.per_row = (int64_t) L->oh * L->ow;
	b.momentum = L->momentum;
	b.eps = L->eps;
	return b;
}

/* nn_layer_forward (layers.c), nb rows per member */
static void
layer_forward(mop_gpu_model *g, int li, const nn_ilayer *L, const float *in, float *out,
			  int nb, int training)
{
	int64_t		P = g->host->plan.n_params;
	const float *W = L->w_off >= 0 ? g->params + L->w_off : NULL;
	const float *b = L->b_off >= 0 ? g->params + L->b_off : NULL;
	int64_t		rows = (int64_t) g->n * nb;	/* every member's rows */
	cudaStream_t s = g->stream;

	switch (L->type)
	{
		case NN_LAYER_DENSE:
			{
				int			K = (int) L->in_size;

				if (b)
					gk_fill_rows(out, g->n, nb, L->oc, b, P, s);
				gemm(g, 0, 0, nb, L->oc, K, 1.0f, in, K, (int64_t) nb * K, W, L->oc, P,
					 b ? 1.0f : 0.0f, out, L->oc, (int64_t) nb * L->oc);
				break;
			}
		case NN_LAYER_CONV2D:
			{
				int			K = L->kh * L->kw * L->ic;
				int64_t		img_rows = (int64_t) L->oh * L->ow;
				int			chunk = g->chunk[li];

				if (b)
					gk_fill_rows(out, g->n, nb * img_rows, L->oc, b, P, s);
				for (int n0 = 0; n0 < nb; n0 += chunk)
				{
					int			cn = nb - n0 < chunk ? nb - n0 : chunk;

					gk_im2col(L, in + (int64_t) n0 * L->in_size, g->col, g->n, cn, nb, s);
					gemm(g, 0, 0, (int) (cn * img_rows), L->oc, K, 1.0f, g->col, K,
						 cn * img_rows * K, W, L->oc, P, b ? 1.0f : 0.0f,
						 out + n0 * img_rows * L->oc, L->oc, nb * img_rows * L->oc);
				}
				break;
			}
		case NN_LAYER_MAXPOOL2D:
			gk_maxpool_forward(L, in, out, (int32_t *) (g->acts + g->n * L->aux_off), (int) rows,
							   s);
			break;
		case NN_LAYER_DROPOUT:
			{
				int64_t		total = rows * L->out_size;

				if (training && L->rate > 0)
				{
					float	   *mask = g->acts + g->n * L->aux_off;

					dropout_mask(g, L, mask, (int64_t) nb * L->out_size);
					gk_mul(in, mask, out, total, s);
				}
				else
					cudaMemcpyAsync(out, in, (size_t) total * 4, cudaMemcpyDeviceToDevice, s);
				break;
			}
		case NN_LAYER_ACTIVATION:
			gk_act_forward(L->act, L->alpha, in, out, rows, L->out_size, s);
			break;
		case NN_LAYER_BATCHNORM:
			{
				gk_bn		bn = bn_of(g, L);

				gk_bn_forward(&bn, in, out, g->n, nb, training, g->st, s);
				break;
			}
		default:
			break;
	}
}

/* nn_layer_backward (layers.c), nb rows per member */
static void
layer_backward(mop_gpu_model *g, int li, const nn_ilayer *L, const float *in,
			   const float *out, const float *dout, float *din, int nb)
{
	int64_t		P = g->host->plan.n_params;
	const float *W = L->w_off >= 0 ? g->params + L->w_off : NULL;
	float	   *dW = L->w_off >= 0 ? g->grads + L->w_off : NULL;
	float	   *db = L->b_off >= 0 ? g->grads + L->b_off : NULL;
	int64_t		rows = (int64_t) g->n * nb;
	cudaStream_t s = g->stream;

	switch (L->type)
	{
		case NN_LAYER_DENSE:
			{
				int			K = (int) L->in_size;

				gemm(g, 1, 0, K, L->oc, nb, 1.0f, in, K, (int64_t) nb * K, dout, L->oc,
					 (int64_t) nb * L->oc, 0.0f, dW, L->oc, P);
				if (db)
					sum_rows(g, dout, nb, L->oc, (int64_t) nb * L->oc, db, P);
				if (din)
					gemm(g, 0, 1, nb, K, L->oc, 1.0f, dout, L->oc, (int64_t) nb * L->oc, W,
						 L->oc, P, 0.0f, din, K, (int64_t) nb * K);
				break;
			}
		case NN_LAYER_CONV2D:
			{
				int			K = L->kh * L->kw * L->ic;
				int64_t		img_rows = (int64_t) L->oh * L->ow;
				int64_t		sd = nb * img_rows * L->oc;	/* one member's dout */
				int			chunk = g->chunk[li];

				if (db)
					sum_rows(g, dout, nb * img_rows, L->oc, sd, db, P);
				for (int n0 = 0; n0 < nb; n0 += chunk)
				{
					int			cn = nb - n0 < chunk ? nb - n0 : chunk;
					int			crows = (int) (cn * img_rows);
					const float *dchunk = dout + n0 * img_rows * L->oc;

					gk_im2col(L, in + (int64_t) n0 * L->in_size, g->col, g->n, cn, nb, s);
					gemm(g, 1, 0, K, L->oc, crows, 1.0f, g->col, K, (int64_t) crows * K, dchunk,
						 L->oc, sd, n0 == 0 ? 0.0f : 1.0f, dW, L->oc, P);
					if (din)
					{
						gemm(g, 0, 1, crows, K, L->oc, 1.0f, dchunk, L->oc, sd, W, L->oc, P,
							 0.0f, g->col, K, (int64_t) crows * K);
						gk_col2im(L, g->col, din + (int64_t) n0 * L->in_size, g->n, cn, nb, s);
					}
				}
				break;
			}
		case NN_LAYER_MAXPOOL2D:
			if (din)
				gk_maxpool_backward(L, dout, (const int32_t *) (g->acts + g->n * L->aux_off), din,
									(int) rows, s);
			break;
		case NN_LAYER_DROPOUT:
			if (din)
			{
				int64_t		total = rows * L->out_size;

				if (L->rate > 0)
					gk_mul(dout, g->acts + g->n * L->aux_off, din, total, s);
				else
					cudaMemcpyAsync(din, dout, (size_t) total * 4, cudaMemcpyDeviceToDevice, s);
			}
			break;
		case NN_LAYER_ACTIVATION:
			if (din)
				gk_act_backward(L->act, L->alpha, in, out, dout, din, rows, L->out_size, s);
			break;
		case NN_LAYER_BATCHNORM:
			{
				gk_bn		bn = bn_of(g, L);

				gk_bn_backward(&bn, in, dout, din, g->n, nb, s);
				break;
			}
		default:
			break;
	}
}

/* nn_forward (model.c): returns the network output (logits) [n * nb, out_dim] */
const float *
forward(mop_gpu_model *g, const float *x, int nb, int training)
{
	const nn_plan *p = &g->host->plan;
	const float *cur = x;

	for (int i = 0; i < p->n; i++)
	{
		const nn_ilayer *L = &p->l[i];
		float	   *out;

		g->lin[i] = cur;
		if (L->fused || L->type == NN_LAYER_FLATTEN)
			continue;
		out = g->acts + g->n * L->out_off;
		layer_forward(g, i, L, cur, out, nb, training);
		cur = out;
	}
	return cur;
}

/* backward (model.c); dz is in grad0 */
void
backward(mop_gpu_model *g, const float *x, int nb)
{
	const nn_plan *p = &g->host->plan;
	float	   *dcur = g->grad0,
			   *dnext = g->grad1;

	for (int i = p->n - 1; i >= 0; i--)
	{
		const nn_ilayer *L = &p->l[i];
		const float *in = g->lin[i];
		float	   *din;

		if (L->fused || L->type == NN_LAYER_FLATTEN)
			continue;
		din = (in == x) ? NULL : dnext;
		layer_backward(g, i, L, in, g->acts + g->n * L->out_off, dcur, din, nb);
		if (!din)
			break;
		dnext = dcur;
		dcur = din;
	}
}

/* nn_optim_step (optim.c): the step's scalars come from the step table */
static void
optim_step(mop_gpu_model *g)
{
	const nn_spec *s = &g->host->spec;
	const nn_plan *p = &g->host->plan;
	int64_t		P = p->n_params;
	const float *coef = NULL;

	if (g->clips)
	{
		gk_clip_coef(g->grads, P, g->n, g->hp, g->coef, g->stream);
		coef = g->coef;
	}
	for (int k = 0; k < p->n_tensors; k++)
	{
		const nn_itensor *T = &p->t[k];
		gk_tensor	t;

		if (T->is_buffer)
			continue;			/* batchnorm running statistics: not trained */
		t.off = T->off;
		t.size = T->size;
		t.n_params = P;
		t.n_opt = p->n_opt;
		t.is_kernel = T->is_kernel;
		t.s1 = t.s2 = 0;
		switch (s->optimizer)
		{
			case NN_OPT_SGD:
				t.s1 = s->momentum > 0;
				break;
			case NN_OPT_ADAM:
			case NN_OPT_ADAMW:
				t.s1 = t.s2 = 1;
				break;
			case NN_OPT_RMSPROP:
				t.s1 = 1;
				t.s2 = s->momentum > 0;
				break;
		}
		gk_optim_tensor(s->optimizer, g->hp, &t, g->params, g->grads, g->opt, coef, g->st,
						g->steptab, g->stepidx, g->n, g->stream);
	}
}

/* The members' class weights for the loss kernels (NULL: nobody weighs). */
const gk_cw *
class_weights(const mop_gpu_model *g)
{
	return g->weighs ? &g->cw : NULL;
}

/* The kernels of one training step (train_step, model.c); nothing waits. */
static const float *
step_kernels(mop_gpu_model *g, const float *x, const float *y, int nb)
{
	nn_model   *m = g->host;
	const nn_plan *p = &m->plan;
	const float *z = forward(g, x, nb, 1);
	const gk_cw *cw = class_weights(g);

	gk_class_wsum(m->spec.loss, cw, y, g->n, nb, g->stream);
	gk_loss_rows(m->spec.loss, m->spec.metric, m->spec.top_k, p->out_dim, z, y, g->n, nb, cw,
				 g->grad0, g->rowloss, g->rowmetric, g->stream);
	gk_loss_reduce(g->rowloss, g->rowmetric, g->n, nb, cw, g->acc, g->st, g->steptab,
				   g->stepidx, 1, g->stream);
	backward(g, x, nb);
	optim_step(g);
	gk_commit_sums(g->acc, g->st, g->n, g->stream);
	gk_step_advance(g->stepidx, g->stream);
	return z;
}

/*
 * Rows staged for a full batch (members batch rows apart) close up to nb
 * rows apart, member after member, for a gang's short last step (grad1 is
 * free before the step's backward pass).
 */
static void
close_up(mop_gpu_model *g, float *buf, int64_t width, int nb)
{
	int64_t		B = g->host->plan.batch;
	size_t		row = (size_t) width * 4;

	cudaMemcpy2DAsync(g->grad1, nb * row, buf, B * row, nb * row, g->n,
					  cudaMemcpyDeviceToDevice, g->stream);
	cudaMemcpyAsync(buf, g->grad1, g->n * nb * row, cudaMemcpyDeviceToDevice, g->stream);
}

/*
 * One step as the step table describes it: gather its rows (members nb
 * rows apart), then train on nb rows per member.  Returns the step's
 * outputs (valid until the next step).
 */
const float *
step_body(mop_gpu_model *g, int nb)
{
	const nn_plan *p = &g->host->plan;

	if (g->n > 1 && nb < p->batch && g->pregathered)
	{
		close_up(g, g->xb, p->in_dim, nb);
		close_up(g, g->yb, p->y_dim, nb);
		g->pregathered = 0;
	}
	gk_gather_step(g->steptab, g->stepidx, g->n, g->xb, g->yb, nb, p->in_dim, p->y_dim,
				   g->stream);
	return step_kernels(g, g->xb, g->yb, nb);
}

/* Capture nsteps full-batch steps as a graph into *exec; 0 if it worked. */
static int
capture_steps(mop_gpu_model *g, int nsteps, cudaGraphExec_t *exec)
{
	cudaGraph_t graph = NULL;
	cudaError_t e;

	if (cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
	{
		(void) cudaGetLastError();
		return -1;
	}
	for (int k = 0; k < nsteps; k++)
		step_body(g, g->host->plan.batch);
	e = cudaStreamEndCapture(g->stream, &graph);
	if (e == cudaSuccess && graph)
		e = cudaGraphInstantiate(exec, graph, 0);
	if (graph)
		cudaGraphDestroy(graph);
	if (e != cudaSuccess)
	{
		(void) cudaGetLastError();
		return -1;
	}
	return 0;
}

/* The first member's entry of the step being gathered now (the others follow it). */
gk_step *
cur_entry(mop_gpu_model *g)
{
	return &g->steptab_host[(g->tab_launched + g->ready) * g->n];
}

/* Member k's order of the rows of the buffer whose x is x (NULL: stored order). */
const int64_t *
member_perm(const mop_gpu_model *g, int k, const float *x)
{
	const gang_member *mb = &g->mem[k];

	return mb->order_of && mb->order_of->x == x ? mb->perm : NULL;
}

/*
 * The step whose first entry is e is complete with nb rows per member:
 * give each member its entry (the first one's rows in the member's own
 * order) with its step number and the optimizer's scalars for it, as
 * nn_optim_step computes them -- the learning rate too, from the member's
 * schedule at its epoch count now, so graphs replay with each step's own
 * rate -- and count it as train_step (model.c) does.
 * A member known to have diverged counts nothing (its kernels skip it).
 */
void
complete_step(mop_gpu_model *g, gk_step *e, int nb)
{
	for (int k = 0; k < g->n; k++)
	{
		gang_member *mb = &g->mem[k];
		nn_model   *m = mb->host;
		const nn_spec *s = &m->spec;
		gk_step    *ek = e + k;
		long long	t = (long long) m->steps + 1;
		mop_gpu_step_scalars sc;

		if (k > 0)
		{
			ek->nseg = e->nseg;
			for (int j = 0; j < e->nseg; j++)
			{
				ek->seg[j] = e->seg[j];
				ek->seg[j].perm = member_perm(g, k, e->seg[j].x);
			}
		}
		ek->t = t;
		/* the rate of the model's epoch now (a schedule's), as nn_optim_step */
		mop_gpu_step_scalars_of(s, m->epochs, t, &sc);
		ek->lr = sc.lr;
		ek->kernel_decay = sc.kernel_decay;
		ek->step_size = sc.step_size;
		ek->bc2_sqrt = sc.bc2_sqrt;
		if (m->diverged)
			continue;
		m->steps = nn_counter_add(m->steps, 1);
		m->rows_trained = nn_counter_add(m->rows_trained, nb);
		mb->acc_rows += nb;
		mb->acc_steps++;
	}
	g->ready++;
}

/* Upload the entries of the next k complete steps (they never change again). */
void
upload_entries(mop_gpu_model *g, int64_t k)
{
	cudaMemcpyAsync(g->steptab + g->tab_launched * g->n,
					g->steptab_host + g->tab_launched * g->n,
					(size_t) (k * g->n) * sizeof(gk_step), cudaMemcpyHostToDevice, g->stream);
}

/*
 * Queue every complete full-batch step: GRAPH_STEPS at a time as one long
 * graph, the rest one graph each (or kernel by kernel without graphs).
 */
void
launch_ready(mop_gpu_model *g)
{
	int			B = g->host->plan.batch;

	while (g->ready > 0)
	{
		int64_t		k = (g->ready >= GRAPH_STEPS && g->graph_state >= 0) ? GRAPH_STEPS : 1;

		upload_entries(g, k);
		if (g->graph_state == 0)
		{
			if (capture_steps(g, 1, &g->exec1) != 0)
				g->graph_state = -1;
			else if (capture_steps(g, GRAPH_STEPS, &g->execn) != 0)
			{
				cudaGraphExecDestroy(g->exec1);
				g->graph_state = -1;
			}
			else
				g->graph_state = 1;
		}
		if (g->graph_state == 1)
			cudaGraphLaunch(k == GRAPH_STEPS ? g->execn : g->exec1, g->stream);
		else
			for (int64_t j = 0; j < k; j++)
			{
				const float *z = step_body(g, B);

				if (g->whole_set)
					(void) harvest_step(g, &g->steptab_host[(g->tab_launched + j) * g->n], z, B,
										NULL, 0);
			}
		g->tab_launched += k;
		g->ready -= k;
	}
}

/*
 * Rows of the step being gathered that its segments cannot describe (more
 * than GK_SEGS pieces): copy the pieces so far into the staging buffers now
 * (members a full batch apart), after every earlier step has been queued,
 * and start the list over.
 */
void
pregather(mop_gpu_model *g, gk_step *e)
{
	const nn_plan *p = &g->host->plan;
	int64_t		B = p->batch;

	launch_ready(g);
	for (int k = 0; k < g->n; k++)
	{
		float	   *xk = g->xb + k * B * p->in_dim;
		float	   *yk = g->yb + k * B * p->y_dim;

		for (int j = 0; j < e->nseg; j++)
		{
			const gk_seg *sg = &e->seg[j];
			const int64_t *perm = member_perm(g, k, sg->x);

			gk_gather_rows(xk + (int64_t) sg->dst * p->in_dim, sg->x, perm, sg->off, sg->n,
						   p->in_dim, g->stream);
			gk_gather_rows(yk + (int64_t) sg->dst * p->y_dim, sg->y, perm, sg->off, sg->n,
						   p->y_dim, g->stream);
		}
	}
	e->nseg = 0;
	g->pregathered = 1;
}
