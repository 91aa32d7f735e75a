/*
 * bench_engine.c -- training throughput of mop's engine on Fashion-MNIST
 * (the engine benchmark), one BLAS thread.  Counterpart: bench_torch.py.
 *
 * Usage:
 *   bench_engine --model mlp|lenet|ARCH [--input 784|28x28x1] [--batch 128]
 *                [--rows N (0 = all 60000)] [--warmup STEPS] [--reps R]
 *                [--shuffle 0|1] [--threads T] [--data DIR] [--lr F]
 *
 * Each repetition trains the first N rows once (one epoch of them) with
 * Adam, via nn_train_begin / nn_train_feed(all rows) / nn_train_end, and
 * prints a line
 *   RESULT fw=mop model=M rep=R rows=N steps=S seconds=T samples_per_s=X gflops=G ...
 * GFLOP/s counts 6 * MACs per row (forward 2*MACs, backward 4*MACs for
 * the input and weight gradients of every dense / conv2d layer), i.e.
 * 6 * B * sum(in * out) per step for an MLP; gflops_req subtracts the first
 * layer's input gradient (2 * its MACs), which neither mop nor PyTorch
 * computes, so it is the rate of work actually done.
 *
 * Allocation check: this binary interposes malloc/calloc/realloc/free/
 * posix_memalign/aligned_alloc/memalign (forwarding to glibc's __libc_*), so
 * every allocation in the process -- engine, dlopen'ed OpenBLAS, libc -- is
 * counted.  Counting is switched on around nn_train_feed (the per-minibatch
 * loop) and separately around nn_train_end (last partial batch).
 */
#include "src/nn/nn.h"
#include "test/xcheck/nn_arch.h"

#include <errno.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* allocation counting by interposition                                */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int g_counting;
static int64_t g_allocs;
static int64_t g_alloc_bytes;

static inline void
count_alloc(size_t n)
{
	if (g_counting)
	{
		__atomic_fetch_add(&g_allocs, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&g_alloc_bytes, (int64_t) n, __ATOMIC_RELAXED);
	}
}

void *
malloc(size_t n)
{
	count_alloc(n);
	return __libc_malloc(n);
}

void *
calloc(size_t a, size_t b)
{
	count_alloc(a * b);
	return __libc_calloc(a, b);
}

void *
realloc(void *p, size_t n)
{
	count_alloc(n);
	return __libc_realloc(p, n);
}

void
free(void *p)
{
	__libc_free(p);
}

void *
memalign(size_t al, size_t n)
{
	count_alloc(n);
	return __libc_memalign(al, n);
}

void *
aligned_alloc(size_t al, size_t n)
{
	count_alloc(n);
	return __libc_memalign(al, n);
}

int
posix_memalign(void **out, size_t al, size_t n)
{
	void	   *p;

	if (al < sizeof(void *) || (al & (al - 1)) != 0)
		return EINVAL;
	count_alloc(n);
	p = __libc_memalign(al, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

static void
count_start(void)
{
	g_allocs = 0;
	g_alloc_bytes = 0;
	__atomic_store_n(&g_counting, 1, __ATOMIC_SEQ_CST);
}

static int64_t
count_stop(void)
{
	__atomic_store_n(&g_counting, 0, __ATOMIC_SEQ_CST);
	return g_allocs;
}

/* ------------------------------------------------------------------ */

static void
die(const char *what, nn_error *e)
{
	fprintf(stderr, "bench_engine: %s failed: %s (%s)\n", what, e->msg,
			nn_status_name(e->status));
	exit(2);
}

/*
 * multiply-accumulates per row of all dense and conv2d layers; *first gets
 * those of the first such layer (whose input gradient nobody needs)
 */
static double
macs_per_row(const nn_spec *s, double *first)
{
	int			h = s->in_h,
				w = s->in_w,
				c = s->in_c,
				i;
	double		macs = 0;

	*first = -1;
	for (i = 0; i < s->n_layers; i++)
	{
		const nn_layer_spec *l = &s->layers[i];

		switch (l->type)
		{
			case NN_LAYER_DENSE:
				macs += (double) h * w * c * l->units;
				if (*first < 0)
					*first = macs;
				h = w = 1;
				c = l->units;
				break;
			case NN_LAYER_CONV2D:
				{
					int			sh = l->stride_h ? l->stride_h : 1,
								sw = l->stride_w ? l->stride_w : 1;
					int			ho = l->padding == NN_PAD_SAME ? (h + sh - 1) / sh : (h - l->kernel_h) / sh + 1;
					int			wo = l->padding == NN_PAD_SAME ? (w + sw - 1) / sw : (w - l->kernel_w) / sw + 1;

					macs += (double) ho * wo * l->kernel_h * l->kernel_w * c * l->filters;
					if (*first < 0)
						*first = macs;
					h = ho;
					w = wo;
					c = l->filters;
				}
				break;
			case NN_LAYER_MAXPOOL2D:
				{
					int			sh = l->stride_h ? l->stride_h : l->kernel_h,
								sw = l->stride_w ? l->stride_w : l->kernel_w;

					h = (h - l->kernel_h) / sh + 1;
					w = (w - l->kernel_w) / sw + 1;
				}
				break;
			case NN_LAYER_FLATTEN:
				c = h * w * c;
				h = w = 1;
				break;
			default:
				break;
		}
	}
	return macs;
}

int
main(int argc, char **argv)
{
	const char *model_name = "mlp",
			   *input = NULL,
			   *data = "test/bench/.cache";
	int			batch = 128,
				warmup = 10,
				reps = 1,
				shuffle = 0,
				threads = 1,
				i;
	long		rows = 0;
	float		lr = 1e-3f;
	nn_spec		spec;
	nn_error	e;
	nn_memory	mem;
	nn_model   *m;
	float	   *x,
			   *y;
	char		path[1024];
	double		macs,
				macs_first,
				flops_row;
	int64_t		ac0,
				create_mallocs;

	for (i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

#define ARG(name) (strcmp(a, name) == 0 && v && (i++, 1))
		if (ARG("--model"))
			model_name = v;
		else if (ARG("--input"))
			input = v;
		else if (ARG("--batch"))
			batch = atoi(v);
		else if (ARG("--rows"))
			rows = atol(v);
		else if (ARG("--warmup"))
			warmup = atoi(v);
		else if (ARG("--reps"))
			reps = atoi(v);
		else if (ARG("--shuffle"))
			shuffle = atoi(v);
		else if (ARG("--threads"))
			threads = atoi(v);
		else if (ARG("--data"))
			data = v;
		else if (ARG("--lr"))
			lr = strtof(v, NULL);
		else
		{
			fprintf(stderr, "bench_engine: bad argument %s\n", a);
			return 2;
		}
#undef ARG
	}
	if (!input)
		input = strncmp(model_name, "mlp", 3) == 0 ? "784" : "28x28x1";
	if (rows <= 0 || rows > 60000)
		rows = 60000;

	nn_spec_init(&spec);
	spec.loss = NN_LOSS_SOFTMAX_CE;
	spec.metric = NN_METRIC_ACCURACY;
	spec.optimizer = NN_OPT_ADAM;
	spec.lr = lr;
	spec.batch_size = batch;
	spec.seed = 42;
	if (arch_parse_input(input, &spec) || arch_parse_layers(model_name, &spec))
	{
		fprintf(stderr, "bench_engine: bad --model/--input\n");
		return 2;
	}
	if (nn_blas_init(threads, &e) != NN_OK)
		die("nn_blas_init", &e);
	if (nn_spec_memory(&spec, &mem, &e) != NN_OK)
		die("nn_spec_memory", &e);

	snprintf(path, sizeof path, "%s/train_x.f32", data);
	x = read_f32(path, (size_t) rows * 784);
	snprintf(path, sizeof path, "%s/train_y.f32", data);
	y = read_f32(path, (size_t) rows);
	if (!x || !y)
		return 2;

	/* counted too, to show that the interposed counter does see the engine */
	count_start();
	if (nn_model_create(&spec, &m, &e) != NN_OK)
		die("nn_model_create", &e);
	create_mallocs = count_stop();
	ac0 = nn_model_alloc_count(m);
	macs = macs_per_row(&spec, &macs_first);
	/* needed work: forward 2*MACs, backward 4*MACs except the first layer's
	 * input gradient (2*MACs of the first layer), which is not computed */
	flops_row = 6.0 * macs - 2.0 * macs_first;

	printf("INFO fw=mop model=%s blas=\"%s\" threads=%d params=%lld macs_per_row=%.0f\n",
		   model_name, nn_blas_info(), threads, (long long) nn_model_param_count(m), macs);
	printf("MEM fw=mop model=%s batch=%d params=%zu grads=%zu optimizer=%zu workspace=%zu total=%zu "
		   "mallocs_create=%lld model_allocs_at_create=%lld\n",
		   model_name, batch, mem.params, mem.grads, mem.optimizer, mem.workspace, mem.total,
		   (long long) create_mallocs, (long long) ac0);

	/* warm-up: loads BLAS, touches every buffer, fills caches */
	if (warmup > 0)
	{
		nn_result	r;
		long		wr = (long) warmup * batch;

		if (wr > rows)
			wr = rows;
		memset(&r, 0, sizeof r);
		if (nn_train(m, x, y, wr, shuffle, &r, &e) != NN_OK)
			die("nn_train (warm-up)", &e);
	}

	for (i = 0; i < reps; i++)
	{
		nn_result	r;
		double		t0,
					t1,
					c0,
					c1;
		int64_t		a_feed,
					a_end,
					ac1,
					ac2;

		memset(&r, 0, sizeof r);
		ac1 = nn_model_alloc_count(m);
		c0 = cpu_s();
		t0 = now_s();
		if (nn_train_begin(m, shuffle, &e) != NN_OK)
			die("nn_train_begin", &e);
		count_start();
		if (nn_train_feed(m, x, y, rows, &e) != NN_OK)
			die("nn_train_feed", &e);
		a_feed = count_stop();
		count_start();
		if (nn_train_end(m, &r, &e) != NN_OK)
			die("nn_train_end", &e);
		a_end = count_stop();
		t1 = now_s();
		c1 = cpu_s();
		ac2 = nn_model_alloc_count(m);
		printf("RESULT fw=mop model=%s rep=%d rows=%lld steps=%lld seconds=%.4f cpu_seconds=%.4f "
			   "samples_per_s=%.1f gflops=%.2f gflops_req=%.2f loss=%.4f acc=%.4f "
			   "mallocs_feed=%lld mallocs_end=%lld model_allocs_before=%lld model_allocs_after=%lld "
			   "model_allocs_at_create=%lld shuffle=%d\n",
			   model_name, i + 1, (long long) r.rows, (long long) r.steps, t1 - t0, c1 - c0,
			   r.rows / (t1 - t0), 6.0 * macs * r.rows / (t1 - t0) * 1e-9,
			   flops_row * r.rows / (t1 - t0) * 1e-9,
			   r.loss_sum / r.rows, r.metric_sum / r.rows,
			   (long long) a_feed, (long long) a_end, (long long) ac1, (long long) ac2,
			   (long long) ac0, shuffle);
		fflush(stdout);
	}
	nn_model_free(m);
	free(x);
	free(y);
	return 0;
}
