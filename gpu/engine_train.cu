/*
 * engine_train.cu -- the streams of the GPU engine: training (begin, feed
 * rows, each member's order, quiesce, end), evaluation and gradients, and
 * the status checks between them (divergence, labels, the step table).
 * The GPU twin of nn_train_begin/feed/end, nn_evaluate and nn_gradients
 * (src/nn/model.c); engine.cu's header comment describes the design.
 */
#include "engine_internal.h"

/* ---- status checks --------------------------------------------------- */

/* Wait for the stream and read the members' status words. */
static int
read_status(mop_gpu_model *g, char *msg, size_t msglen)
{
	CU(cudaMemcpyAsync(g->st_host, g->st, g->n * sizeof(gk_status), cudaMemcpyDeviceToHost,
					   g->stream), "reading the training status");
	CU(cudaStreamSynchronize(g->stream), "training on the GPU");
	return MOP_GPU_OK;
}

/*
 * After a wait: for each member whose step diverged, put its host counters
 * where the CPU would have stopped (before the failing step) and say so as
 * nn_optim_step and nn_gradients do.  Returns MOP_GPU_EDIVERGED if any
 * member diverged (msg names the first; a gang names its member).
 */
static int
check_diverged(mop_gpu_model *g, char *msg, size_t msglen)
{
	int			r = MOP_GPU_OK;

	for (int k = 0; k < g->n; k++)
	{
		gang_member *mb = &g->mem[k];
		nn_model   *m = mb->host;
		const gk_status *st = &g->st_host[k];
		int64_t		done;
		char		who[32] = "";

		if (!st->flag || mb->diverged0)
			continue;			/* fine, or diverged before this stream */
		m->diverged = 1;
		done = st->step - 1 - mb->steps0;	/* steps of this stream that completed */
		if (done < 0)
			done = 0;
		if (m->steps > mb->steps0 + done)
		{
			/*
			 * The steps after the failing one never happened on the CPU.
			 * Every step before it was a full batch (only a stream's last
			 * step is partial, and a later one failed or this is it).
			 */
			m->steps = mb->steps0 + done;
			m->rows_trained = mb->rows0 + done * m->plan.batch;
			mb->acc_steps = done;
			mb->acc_rows = done * m->plan.batch;
		}
		if (r != MOP_GPU_OK)
			continue;
		if (g->n > 1)
			snprintf(who, sizeof(who), "model %d of the gang: ", k + 1);
		if (st->flag == GK_BAD_WEIGHTS)
			r = fail(msg, msglen, MOP_GPU_EDIVERGED, "%sweights became NaN or infinite at step %lld",
					 who, st->step);
		else
			r = fail(msg, msglen, MOP_GPU_EDIVERGED, "%sloss became %s at step %lld", who,
					 st->flag == GK_BAD_LOSS_NAN ? "NaN" : "infinite", st->step);
	}
	return r;
}

/* Have all members diverged?  (A gang trains on while one of them can.) */
static int
all_diverged(const mop_gpu_model *g)
{
	for (int k = 0; k < g->n; k++)
		if (!g->mem[k].host->diverged)
			return 0;
	return 1;
}

/*
 * Wait for the stream, report divergence, and start the step table over
 * (the kernels read entry 0 next).  Every complete step has been launched;
 * the step being gathered moves to entry 0.  A member's divergence is not
 * an error here while other members train on.
 */
static int
table_reset(mop_gpu_model *g, char *msg, size_t msglen)
{
	int			r;

	launch_ready(g);
	if ((r = read_status(g, msg, msglen)) != MOP_GPU_OK)
		return r;
	if ((r = check_diverged(g, msg, msglen)) != MOP_GPU_OK && all_diverged(g))
		return r;
	if (g->fill > 0 && g->tab_launched > 0)
		memcpy(g->steptab_host, g->steptab_host + g->tab_launched * g->n,
			   g->n * sizeof(gk_step));
	g->tab_launched = 0;
	CU(cudaMemsetAsync(g->stepidx, 0, sizeof(int), g->stream), "resetting the step table");
	return MOP_GPU_OK;
}

/*
 * Labels of d valid for this model's loss? (the checks of nn_loss_eval;
 * strict: as there with class weights, which training uses)
 */
static int
check_labels(mop_gpu_model *g, mop_gpu_data *d, int strict, char *msg, size_t msglen)
{
	nn_model   *m = g->host;
	unsigned long long none = ~0ULL;
	int			r;

	if (d->checked_loss == m->spec.loss && d->checked_out == m->plan.out_dim &&
		(d->checked_strict || !strict))
		return MOP_GPU_OK;
	if (d->in_dim != m->plan.in_dim || d->y_dim != m->plan.y_dim)
		return fail(msg, msglen, MOP_GPU_EINVAL,
					"rows of %d features and %d label values do not fit a model of %d inputs and %d label values",
					d->in_dim, d->y_dim, m->plan.in_dim, m->plan.y_dim);
	CU(cudaMemcpyAsync(&g->st->bad_label_row, &none, sizeof(none), cudaMemcpyHostToDevice,
					   g->stream), "checking labels");
	if (d->n > 0)
		gk_check_labels(m->spec.loss, m->plan.out_dim, d->y, d->n, strict, g->st, g->stream);
	if ((r = read_status(g, msg, msglen)) != MOP_GPU_OK)
		return r;
	if (g->st_host->bad_label_row != none)
	{
		int64_t		row = (int64_t) g->st_host->bad_label_row;
		float		v = 0;

		cudaMemcpy(&v, d->y + row * d->y_dim, sizeof(float), cudaMemcpyDeviceToHost);
		return fail(msg, msglen, MOP_GPU_EINVAL, "invalid label %g in row %lld", (double) v,
					(long long) row);
	}
	if (d->checked_loss != m->spec.loss || d->checked_out != m->plan.out_dim)
		d->checked_strict = 0;
	d->checked_loss = m->spec.loss;
	d->checked_out = m->plan.out_dim;
	d->checked_strict |= strict;
	return MOP_GPU_OK;
}

/*
 * A metric over the whole set: add the rows of the step whose first entry
 * is e (nb per member, outputs z on the device, labels staged in yb) to
 * each member's training gatherer, as nn_gradients does while streaming.
 * Waits for the step.  A member's rows count up to the step at which it
 * diverged (the CPU gathers that step's rows before it sees the loss),
 * not after.
 */
int
harvest_step(mop_gpu_model *g, const gk_step *e, const float *z, int nb, char *msg,
			 size_t msglen)
{
	const nn_plan *p = &g->host->plan;

	CU(cudaMemcpyAsync(g->out_host, z, (size_t) g->n * nb * p->out_dim * 4,
					   cudaMemcpyDeviceToHost, g->stream), "reading outputs");
	CU(cudaMemcpyAsync(g->y_host, g->yb, (size_t) g->n * nb * p->y_dim * 4,
					   cudaMemcpyDeviceToHost, g->stream), "reading labels");
	CU(cudaMemcpyAsync(g->st_host, g->st, g->n * sizeof(gk_status), cudaMemcpyDeviceToHost,
					   g->stream), "reading the training status");
	CU(cudaStreamSynchronize(g->stream), "training on the GPU");
	for (int k = 0; k < g->n; k++)
	{
		const gk_status *st = &g->st_host[k];

		if (g->tacc_stop[k])
			continue;
		if (st->flag && st->step < e[k].t)
		{
			g->tacc_stop[k] = 1;	/* stopped at an earlier step */
			continue;
		}
		if (nn_metric_acc_add(&g->mem[k].host->tacc, g->out_host + (size_t) k * nb * p->out_dim,
							  g->y_host + (size_t) k * nb * p->y_dim, nb, NULL) != NN_OK)
			g->tacc_failed = 1;
		if (st->flag)
			g->tacc_stop[k] = 1;
	}
	return MOP_GPU_OK;
}


/* Rows [off, off + n) of d, to feed or evaluate: inside d, labels checked, on g's device. */
static int
rows_ready(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n, char *msg, size_t msglen)
{
	if (off < 0 || n < 0 || off > d->n || n > d->n - off)
		return fail(msg, msglen, MOP_GPU_EINVAL, "rows %lld..%lld are outside a buffer of %lld rows",
					(long long) off, (long long) (off + n), (long long) d->n);
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	return check_labels(g, d, g->streaming && g->weighs, msg, msglen);
}

/* ---- training stream ------------------------------------------------- */

/*
 * nn_train_begin (model.c), for every member.  A member that diverged
 * earlier keeps its flag raised on the device, so the kernels leave it
 * alone while the others train; if all have, this fails as on the CPU.
 */
extern "C" int
mop_gpu_train_begin(mop_gpu_model *g, char *msg, size_t msglen)
{
	if (all_diverged(g))
		return fail(msg, msglen, MOP_GPU_EDIVERGED, "model has diverged and cannot train further");
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	/* the weights may have changed since the mirror opened (not during a stream) */
	CU(upload_class_weights(g), "uploading class weights");
	memset(g->st_host, 0, g->n * sizeof(gk_status));
	g->tacc_failed = 0;
	for (int k = 0; k < g->n; k++)
	{
		gang_member *mb = &g->mem[k];

		/* as nn_train_begin: the stream's whole-set metric starts empty */
		nn_metric_acc_reset(&mb->host->tacc);
		g->tacc_stop[k] = mb->host->diverged;

		if (mb->host->diverged)
		{
			g->st_host[k].flag = GK_BAD_WEIGHTS;
			g->st_host[k].step = mb->host->steps;
		}
		mb->diverged0 = mb->host->diverged;
		mb->steps0 = mb->host->steps;
		mb->rows0 = mb->host->rows_trained;
		mb->acc_rows = mb->acc_steps = 0;
	}
	CU(cudaMemcpyAsync(g->st, g->st_host, g->n * sizeof(gk_status), cudaMemcpyHostToDevice,
					   g->stream), "starting a stream");
	CU(cudaMemsetAsync(g->acc, 0, g->n * 4 * sizeof(double), g->stream), "starting a stream");
	CU(cudaMemsetAsync(g->stepidx, 0, sizeof(int), g->stream), "starting a stream");
	/* the statuses come from pinned memory that a later read overwrites */
	CU(cudaStreamSynchronize(g->stream), "starting a stream");
	g->tab_launched = 0;
	g->ready = 0;
	g->streaming = 1;
	g->fill = 0;
	g->pregathered = 0;
	return MOP_GPU_OK;
}

/* nn_train_feed (model.c), without the engine's own shuffle: rows in each member's order of d */
extern "C" int
mop_gpu_train_feed(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n, char *msg,
				   size_t msglen)
{
	nn_model   *m = g->host;
	int64_t		B = m->plan.batch;
	const int64_t *perm = member_perm(g, 0, d->x);
	int64_t		i = 0;
	int			r;

	if (!g->streaming)
		return fail(msg, msglen, MOP_GPU_EINVAL, "feed called without begin");
	if (all_diverged(g))
		return fail(msg, msglen, MOP_GPU_EDIVERGED, "model has diverged and cannot train further");
	if ((r = rows_ready(g, d, off, n, msg, msglen)) != MOP_GPU_OK)
		return r;
	while (i < n)
	{
		gk_step    *e;
		gk_seg	   *last;
		int64_t		k = B - g->fill < n - i ? B - g->fill : n - i;

		/* room for the step being gathered, or wait and start the table over */
		if (g->tab_launched + g->ready + 1 > g->tab_cap &&
			(r = table_reset(g, msg, msglen)) != MOP_GPU_OK)
			return r;
		e = cur_entry(g);
		if (g->fill == 0)
		{
			e->nseg = 0;
			g->pregathered = 0;
		}
		last = e->nseg > 0 ? &e->seg[e->nseg - 1] : NULL;
		if (last && last->x == d->x && last->perm == perm && last->off + last->n == off + i &&
			last->dst + last->n == g->fill)
			last->n += (int32_t) k;		/* the next rows of the same piece */
		else
		{
			if (e->nseg == GK_SEGS)
				pregather(g, e = cur_entry(g));
			e->seg[e->nseg].x = d->x;
			e->seg[e->nseg].y = d->y;
			e->seg[e->nseg].perm = perm;
			e->seg[e->nseg].off = off + i;
			e->seg[e->nseg].n = (int32_t) k;
			e->seg[e->nseg].dst = (int32_t) g->fill;
			e->nseg++;
		}
		g->fill += k;
		i += k;
		if (g->fill == B)
		{
			complete_step(g, e, (int) B);
			g->fill = 0;
			if (g->ready >= GRAPH_STEPS)
				launch_ready(g);
		}
	}
	launch_ready(g);
	/* no wait here: divergence surfaces at the next wait (the end at the latest) */
	return MOP_GPU_OK;
}

/*
 * Rows of d are fed to member `member` in the order perm from now on
 * (NULL: the stored order).  The order is the member's, so models sharing
 * a buffer each keep their own; rows of the step being gathered that came
 * through the previous orders are copied first.  Nothing waits.
 */
extern "C" int
mop_gpu_train_order(mop_gpu_model *g, int32_t member, const mop_gpu_data *d,
					const int64_t *perm, char *msg, size_t msglen)
{
	gang_member *mb;
	int			r;

	if (!g->streaming)
		return fail(msg, msglen, MOP_GPU_EINVAL, "order given without begin");
	if (member < 0 || member >= g->n)
		return fail(msg, msglen, MOP_GPU_EINVAL, "no model %d in a gang of %d", member + 1, g->n);
	mb = &g->mem[member];
	for (int64_t i = 0; perm && i < d->n; i++)
		if (perm[i] < 0 || perm[i] >= d->n)
			return fail(msg, msglen, MOP_GPU_EINVAL, "row order entry %lld is %lld, not in 0..%lld",
						(long long) i, (long long) perm[i], (long long) d->n - 1);
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	/* queued and pending steps read the old order before it changes */
	launch_ready(g);
	if (g->fill > 0)
		pregather(g, cur_entry(g));
	mb->order_of = NULL;
	if (!perm)
		return MOP_GPU_OK;
	if (d->n > mb->perm_cap)
	{
		int64_t		cap = d->n;

		r = ledger_reserve((uint64_t) cap * 8, "a row order", msg, msglen);
		if (r != 0)
			return MOP_GPU_ENOMEM;
		if (mb->perm)
		{
			cudaFreeAsync(mb->perm, g->stream);
			ledger_release((uint64_t) mb->perm_cap * 8);
			mb->perm = NULL;
			mb->perm_cap = 0;
		}
		if (cudaMallocAsync((void **) &mb->perm, (size_t) cap * 8, g->stream) != cudaSuccess)
		{
			cudaError_t e = cudaGetLastError();

			ledger_release((uint64_t) cap * 8);
			mb->perm = NULL;
			return cuda_fail(msg, msglen, "allocating a row order", e);
		}
		mb->perm_cap = cap;
	}
	/* stream-ordered: steps queued before read the old order */
	CU(cudaMemcpyAsync(mb->perm, perm, (size_t) d->n * 8, cudaMemcpyHostToDevice, g->stream),
	   "uploading a row order");
	mb->order_of = d;
	return MOP_GPU_OK;
}

/*
 * Queue every step whose rows are known (copying those of the step being
 * gathered) and wait for the GPU: afterwards no queued work reads any
 * buffer of rows, so the caller may free them.
 */
extern "C" int
mop_gpu_train_quiesce(mop_gpu_model *g, char *msg, size_t msglen)
{
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	launch_ready(g);
	if (g->fill > 0)
		pregather(g, cur_entry(g));
	CU(cudaStreamSynchronize(g->stream), "waiting for the GPU");
	return MOP_GPU_OK;
}

/*
 * nn_train_end (model.c), for every member: res[k] gets member k's sums.
 * Returns MOP_GPU_EDIVERGED if any member diverged during the stream (its
 * host model says so); the others' sub-epochs count.
 */
extern "C" int
mop_gpu_train_end(mop_gpu_model *g, nn_result *res, char *msg, size_t msglen)
{
	int			r = MOP_GPU_OK;
	long long	partial_t[MOP_GPU_GANG_MAX];

	if (!g->streaming)
		return fail(msg, msglen, MOP_GPU_EINVAL, "end called without begin");
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	if (g->fill > 0 && !all_diverged(g) && g->tab_launched + 1 > g->tab_cap)
		r = table_reset(g, msg, msglen);
	if (r != MOP_GPU_OK && r != MOP_GPU_EDIVERGED)
	{
		g->streaming = 0;
		g->fill = 0;
		return r;
	}
	for (int k = 0; k < g->n; k++)
		partial_t[k] = 0;
	if (g->fill > 0 && !all_diverged(g))
	{
		/* the last, partial batch: its own launch, on fill rows per member */
		gk_step    *e = cur_entry(g);

		const float *z;

		complete_step(g, e, (int) g->fill);
		for (int k = 0; k < g->n; k++)
			partial_t[k] = e[k].t;
		upload_entries(g, 1);
		z = step_body(g, (int) g->fill);
		if (g->whole_set)
			(void) harvest_step(g, e, z, (int) g->fill, NULL, 0);
		g->tab_launched++;
		g->ready--;
	}
	g->fill = 0;
	g->streaming = 0;
	CU(cudaMemcpyAsync(g->acc_host, g->acc, g->n * 4 * sizeof(double), cudaMemcpyDeviceToHost,
					   g->stream), "reading the training sums");
	if ((r = read_status(g, msg, msglen)) != MOP_GPU_OK)
		return r;
	r = check_diverged(g, msg, msglen);
	for (int k = 0; k < g->n; k++)
	{
		gang_member *mb = &g->mem[k];
		const gk_status *st = &g->st_host[k];

		/*
		 * As nn_train_end: the sub-epoch counts unless its last, partial
		 * step is the one that diverged (or the model had diverged before).
		 */
		if (!mb->diverged0 && (!mb->host->diverged || st->step != partial_t[k]))
			mb->host->sub_epochs = nn_counter_add(mb->host->sub_epochs, 1);
		if (res)
		{
			res[k].loss_sum = g->acc_host[4 * k];
			res[k].metric_sum = g->acc_host[4 * k + 1];
			res[k].rows = mb->acc_rows;
			res[k].steps = mb->acc_steps;
			/* as nn_train_end: the whole-set metric over the stream's rows, times them */
			if (g->whole_set)
				res[k].metric_sum = nn_metric_acc_value(&mb->host->tacc) * (double) mb->acc_rows;
		}
	}
	if (r == MOP_GPU_OK && all_diverged(g))
		r = fail(msg, msglen, MOP_GPU_EDIVERGED, "model has diverged");
	if (r == MOP_GPU_OK && g->tacc_failed)
		r = fail(msg, msglen, MOP_GPU_ENOMEM, "out of host memory gathering the %s metric",
				 nn_metric_name((nn_metric) g->host->spec.metric));
	return r;
}

/*
 * nn_evaluate (model.c) of every member over rows [off, off + n) of d in
 * stored order: res[k] += member k's sums.
 */
extern "C" int
mop_gpu_evaluate(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n, nn_result *res,
				 char *msg, size_t msglen)
{
	nn_model   *m = g->host;
	const nn_plan *p = &m->plan;
	int64_t		B = p->batch;
	int			r;

	if ((r = rows_ready(g, d, off, n, msg, msglen)) != MOP_GPU_OK)
		return r;
	CU(cudaMemsetAsync(g->eacc, 0, g->n * 4 * sizeof(double), g->stream), "evaluating");
	for (int64_t i = 0; i < n; i += B)
	{
		int			nb = (int) (n - i < B ? n - i : B);
		const float *x = d->x + (off + i) * d->in_dim;
		const float *y = d->y + (off + i) * d->y_dim;
		const float *z;

		if (g->n > 1)
		{
			/* every member sees the same rows: one copy each, side by side */
			for (int k = 0; k < g->n; k++)
			{
				gk_gather_rows(g->xb + (int64_t) k * nb * p->in_dim, d->x, NULL, off + i, nb,
							   p->in_dim, g->stream);
				gk_gather_rows(g->yb + (int64_t) k * nb * p->y_dim, d->y, NULL, off + i, nb,
							   p->y_dim, g->stream);
			}
			x = g->xb;
			y = g->yb;
		}
		z = forward(g, x, nb, 0);
		/* unweighted: class weights weigh training only, as nn_evaluate */
		gk_loss_rows(m->spec.loss, m->spec.metric, m->spec.top_k, p->out_dim, z, y, g->n, nb,
					 NULL, NULL, g->rowloss, g->rowmetric, g->stream);
		gk_loss_reduce(g->rowloss, g->rowmetric, g->n, nb, NULL, g->eacc, g->st, g->steptab,
					   g->stepidx, 0, g->stream);
		if (g->whole_set)
		{
			/* nn_evaluate: each batch's outputs into the model's gatherer (waits) */
			CU(cudaMemcpyAsync(g->out_host, z, (size_t) g->n * nb * p->out_dim * 4,
							   cudaMemcpyDeviceToHost, g->stream), "reading outputs");
			CU(cudaMemcpyAsync(g->y_host, d->y + (off + i) * d->y_dim,
							   (size_t) nb * p->y_dim * 4, cudaMemcpyDeviceToHost, g->stream),
			   "reading labels");
			CU(cudaStreamSynchronize(g->stream), "evaluating on the GPU");
			for (int k = 0; k < g->n; k++)
				if (nn_metric_acc_add(&g->mem[k].host->eacc,
									  g->out_host + (size_t) k * nb * p->out_dim, g->y_host, nb,
									  NULL) != NN_OK)
					return fail(msg, msglen, MOP_GPU_ENOMEM,
								"out of host memory gathering the %s metric",
								nn_metric_name((nn_metric) m->spec.metric));
		}
	}
	for (int k = 0; k < g->n; k++)
		CU(cudaMemcpyAsync(g->acc_host + 2 * k, g->eacc + 4 * k, 2 * sizeof(double),
						   cudaMemcpyDeviceToHost, g->stream), "reading the evaluation sums");
	CU(cudaStreamSynchronize(g->stream), "evaluating on the GPU");
	for (int k = 0; k < g->n; k++)
	{
		res[k].loss_sum += g->acc_host[2 * k];
		res[k].metric_sum += g->acc_host[2 * k + 1];
		res[k].rows += n;
	}
	return MOP_GPU_OK;
}

/* nn_gradients (model.c): the parity hook (see mop_gpu.h); a model alone */
extern "C" int
mop_gpu_gradients(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n, float *z,
				  float *grads, double *ls, double *ms, char *msg, size_t msglen)
{
	nn_model   *m = g->host;
	const float *x,
			   *zd;
	int			r;

	if (g->n != 1)
		return fail(msg, msglen, MOP_GPU_EINVAL, "gradients are computed for a model alone");
	if (n < 1 || n > m->plan.batch || off < 0 || off > d->n - n)
		return fail(msg, msglen, MOP_GPU_EINVAL, "gradients take 1..%d rows inside the buffer",
					m->plan.batch);
	CU(cudaSetDevice(g->device), "cudaSetDevice");
	if ((r = check_labels(g, d, g->weighs, msg, msglen)) != MOP_GPU_OK)
		return r;
	x = d->x + off * d->in_dim;
	CU(cudaMemsetAsync(g->eacc, 0, 2 * sizeof(double), g->stream), "gradients");
	zd = forward(g, x, (int) n, 1);
	gk_class_wsum(m->spec.loss, class_weights(g), d->y + off * d->y_dim, 1, (int) n, g->stream);
	gk_loss_rows(m->spec.loss, m->spec.metric, m->spec.top_k, m->plan.out_dim, zd,
				 d->y + off * d->y_dim, 1, (int) n, class_weights(g), g->grad0, g->rowloss,
				 g->rowmetric, g->stream);
	gk_loss_reduce(g->rowloss, g->rowmetric, 1, (int) n, class_weights(g), g->eacc, g->st,
				   g->steptab, g->stepidx, 0, g->stream);
	if (z)
		CU(cudaMemcpyAsync(z, zd, (size_t) n * m->plan.out_dim * 4, cudaMemcpyDeviceToHost,
						   g->stream), "reading outputs");
	backward(g, x, (int) n);
	if (grads)
		CU(cudaMemcpyAsync(grads, g->grads, (size_t) m->plan.n_params * 4,
						   cudaMemcpyDeviceToHost, g->stream), "reading gradients");
	CU(cudaMemcpyAsync(g->acc_host, g->eacc, 2 * sizeof(double), cudaMemcpyDeviceToHost,
					   g->stream), "reading sums");
	CU(cudaStreamSynchronize(g->stream), "gradients on the GPU");
	*ls = g->acc_host[0];
	*ms = g->acc_host[1];
	return MOP_GPU_OK;
}
