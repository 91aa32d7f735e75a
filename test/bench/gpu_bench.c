/*
 * gpu_bench.c -- throughput of mop's GPU engine, without PostgreSQL.
 *
 *   gpu_bench step --model mlp|cnn [--batch 128] [--rows N] [--reps R] [--data DIR]
 *       one model, Adam(1e-3), rows resident on the device, R timed epochs
 *       after one warm-up epoch; prints per epoch
 *       RESULT fw=mop-gpu model=M batch=B rows=N seconds=T samples_per_s=X
 *
 *   gpu_bench grid --model mlp|cnn [--rows N] [--threads T] [--gangs 0|1]
 *                  [--shuffle 0|1] [--reps R]
 *       the 16-configuration grid (learning rate 1e-3, 3e-4, 1e-4, 3e-3 x
 *       batch size 32, 64, 128, 256), one epoch each, T jobs at once (one
 *       thread, stream and cuBLAS handle per job, as T workers sharing one
 *       GPU; T = 1: one job at a time), R times.  A job is one model, or
 *       with --gangs 1 the four models of one batch size trained as a gang
 *       (one mirror, every layer launched once for the four).  --shuffle 1:
 *       every model visits the rows in its own order.  Prints
 *       RESULT fw=mop-gpu grid=sequential|concurrent gangs=G seconds=T
 *
 *   gpu_bench gangs --model mlp|cnn [--batch 128] [--rows N] [--reps R]
 *       one gang of K models (K = 1, 2, 4, 8, 16, 32; learning rates
 *       spread around 1e-3) for one epoch, R times after a warm-up; prints
 *       RESULT fw=mop-gpu gang=K seconds=T samples_per_s=X (all K models'
 *       samples): how a step's cost grows with the models fused into it.
 *
 * Data: DIR/train_x.f32 and train_y.f32 as written by fmnist_convert.py
 * (pixels / 255, 28 x 28 x 1).  Needs gpu/mop_gpu.so and OpenBLAS (the
 * CPU engine builds the host model); run through test/bench/run_gpu_bench.sh.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_internal.h"
#include "loader.h"

static mop_gpu_api G;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static nn_spec
model_spec(const char *name, int batch, float lr)
{
	nn_spec		s;
	nn_layer_spec *L = s.layers;

	nn_spec_init(&s);
	memset(s.layers, 0, sizeof(s.layers));
	s.batch_size = batch;
	s.lr = lr;
	s.optimizer = NN_OPT_ADAM;
	s.seed = 42;
	if (strcmp(name, "mlp") == 0)
	{
		s.in_h = s.in_w = 1;
		s.in_c = 784;
		L[0] = (nn_layer_spec) {.type = NN_LAYER_DENSE, .units = 256, .activation = NN_ACT_RELU, .use_bias = 1};
		L[1] = (nn_layer_spec) {.type = NN_LAYER_DENSE, .units = 128, .activation = NN_ACT_RELU, .use_bias = 1};
		L[2] = (nn_layer_spec) {.type = NN_LAYER_DENSE, .units = 10, .use_bias = 1};
		s.n_layers = 3;
	}
	else
	{
		s.in_h = s.in_w = 28;
		s.in_c = 1;
		L[0] = (nn_layer_spec) {.type = NN_LAYER_CONV2D, .filters = 32, .kernel_h = 3, .kernel_w = 3,
		.padding = NN_PAD_SAME, .activation = NN_ACT_RELU, .use_bias = 1};
		L[1] = (nn_layer_spec) {.type = NN_LAYER_MAXPOOL2D, .kernel_h = 2, .kernel_w = 2};
		L[2] = (nn_layer_spec) {.type = NN_LAYER_CONV2D, .filters = 64, .kernel_h = 3, .kernel_w = 3,
		.padding = NN_PAD_SAME, .activation = NN_ACT_RELU, .use_bias = 1};
		L[3] = (nn_layer_spec) {.type = NN_LAYER_MAXPOOL2D, .kernel_h = 2, .kernel_w = 2};
		L[4] = (nn_layer_spec) {.type = NN_LAYER_FLATTEN};
		L[5] = (nn_layer_spec) {.type = NN_LAYER_DENSE, .units = 128, .activation = NN_ACT_RELU, .use_bias = 1};
		L[6] = (nn_layer_spec) {.type = NN_LAYER_DENSE, .units = 10, .use_bias = 1};
		s.n_layers = 7;
	}
	return s;
}

static void
die(const char *what, const char *why)
{
	fprintf(stderr, "gpu_bench: %s: %s\n", what, why);
	exit(1);
}

static float *
read_f32(const char *dir, const char *name, int64_t count)
{
	char		path[512];
	FILE	   *f;
	float	   *buf = malloc(sizeof(float) * count);

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "rb")) || fread(buf, sizeof(float), count, f) != (size_t) count)
		die(path, "cannot read (run fmnist_convert.py first)");
	fclose(f);
	return buf;
}

static int64_t
gcd(int64_t a, int64_t b)
{
	while (b)
	{
		int64_t		t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* seconds of the last epoch() spent opening and closing the mirror */
static __thread double last_setup;
static int	shuffle;

/*
 * One epoch of the n models m[] (a gang if n > 1) over d; returns seconds
 * (dies with the message on failure).
 */
static double
epoch(nn_model **m, int n, mop_gpu_data *d, nn_result *res)
{
	mop_gpu_options o = {0, 0, getenv("MOP_GPU_NO_GRAPHS") != NULL};
	mop_gpu_model *g;
	char		msg[512];
	double		t0 = now();
	int64_t		rows = G.data_rows(d);
	int64_t    *perm = NULL;
	int			rc;

	double		t1,
				t2;

	if ((rc = G.gang_open(m, n, &o, &g, msg, sizeof(msg))) != MOP_GPU_OK)
		die("open", msg);
	t1 = now();
	rc = G.train_begin(g, msg, sizeof(msg));
	if (shuffle)
	{
		perm = malloc(sizeof(int64_t) * rows);
		for (int k = 0; k < n && !rc; k++)
		{
			/* a stride coprime to the row count: a permutation per model */
			int64_t		step = 7919 + 2 * k;

			while (gcd(step, rows) != 1)
				step += 2;
			for (int64_t i = 0; i < rows; i++)
				perm[i] = (i * step + 13 * k) % rows;
			rc = G.train_order(g, k, d, perm, msg, sizeof(msg));
		}
	}
	if (!rc)
		rc = G.train_feed(g, d, 0, rows, msg, sizeof(msg));
	if (!rc)
		rc = G.train_end(g, res, msg, sizeof(msg));
	if (!rc)
		rc = G.model_sync(g, msg, sizeof(msg));
	t2 = now();
	G.model_close(g);
	free(perm);
	if (rc)
		die("train", msg);
	last_setup = (t1 - t0) + (now() - t2);
	return now() - t0;
}

typedef struct job
{
	int			n;				/* models: 1, or a gang */
	nn_spec		spec[4];
	mop_gpu_data *d;
	double		seconds;
	double		setup;			/* of which opening and closing the mirror */
	double		loss[4];
} job;

static void *
run_job(void *arg)
{
	job		   *j = arg;
	nn_model   *m[4];
	nn_error	err;
	nn_result	res[4];

	for (int k = 0; k < j->n; k++)
		if (nn_model_create(&j->spec[k], &m[k], &err) != NN_OK)
			die("model", err.msg);
	j->seconds = epoch(m, j->n, j->d, res);
	j->setup = last_setup;
	for (int k = 0; k < j->n; k++)
	{
		j->loss[k] = res[k].loss_sum / (res[k].rows ? res[k].rows : 1);
		nn_model_free(m[k]);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "step";
	const char *model = "mlp",
			   *dir = "test/bench/.cache",
			   *lib = "gpu/mop_gpu.so";
	int			batch = 128,
				reps = 3,
				threads = 16,
				gangs = 0;
	int64_t		rows = 60000;
	void	   *h;
	char		msg[512];
	nn_error	err;
	float	   *x,
			   *y;
	mop_gpu_data *d;

	for (int i = 2; i + 1 < argc; i += 2)
	{
		if (!strcmp(argv[i], "--model"))
			model = argv[i + 1];
		else if (!strcmp(argv[i], "--batch"))
			batch = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--rows"))
			rows = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--threads"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--gangs"))
			gangs = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--shuffle"))
			shuffle = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--data"))
			dir = argv[i + 1];
		else if (!strcmp(argv[i], "--lib"))
			lib = argv[i + 1];
		else
			die(argv[i], "unknown option");
	}
	if (!(h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)))
		die(lib, dlerror());
	if (mop_gpu_api_resolve(h, &G, msg, sizeof(msg)) != 0)
		die(lib, msg);
	if (nn_blas_init(1, &err) != NN_OK)
		die("OpenBLAS", err.msg);
	x = read_f32(dir, "train_x.f32", rows * 784);
	y = read_f32(dir, "train_y.f32", rows);
	if (G.data_upload(0, x, y, rows, 784, 1, &d, msg, sizeof(msg)) != MOP_GPU_OK)
		die("upload", msg);

	if (!strcmp(mode, "step"))
	{
		nn_spec		s = model_spec(model, batch, 1e-3f);
		nn_model   *m;
		nn_result	res;

		if (nn_model_create(&s, &m, &err) != NN_OK)
			die("model", err.msg);
		epoch(&m, 1, d, &res);	/* warm-up: context, cuBLAS heuristics */
		for (int r = 0; r < reps; r++)
		{
			double		t = epoch(&m, 1, d, &res);

			printf("RESULT fw=mop-gpu%s model=%s batch=%d rep=%d rows=%lld seconds=%.4f samples_per_s=%.0f loss=%.4f\n",
				   getenv("MOP_GPU_NO_GRAPHS") ? "-nographs" : "", model, batch, r, (long long) rows,
				   t, rows / t, res.loss_sum / res.rows);
			fflush(stdout);
		}
		nn_model_free(m);
	}
	else if (!strcmp(mode, "gangs"))
	{
		static const int sizes[] = {1, 2, 4, 8, 16, 32};

		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		{
			int			k = sizes[i];
			nn_model   *m[32];
			nn_result	res[32];

			for (int j = 0; j < k; j++)
			{
				nn_spec		s = model_spec(model, batch, 1e-3f * (0.5f + (float) j / k));

				if (nn_model_create(&s, &m[j], &err) != NN_OK)
					die("model", err.msg);
			}
			epoch(m, k, d, res);	/* warm-up: graphs, cuBLAS heuristics */
			for (int r = 0; r < reps; r++)
			{
				double		t = epoch(m, k, d, res);

				printf("RESULT fw=mop-gpu model=%s batch=%d gang=%d rep=%d rows=%lld seconds=%.4f samples_per_s=%.0f loss_first=%.4f\n",
					   model, batch, k, r, (long long) rows, t, (double) rows * k / t,
					   res[0].loss_sum / res[0].rows);
				fflush(stdout);
			}
			for (int j = 0; j < k; j++)
				nn_model_free(m[j]);
		}
	}
	else
	{
		static const float lrs[4] = {1e-3f, 3e-4f, 1e-4f, 3e-3f};
		static const int batches[4] = {32, 64, 128, 256};
		job			jobs[16];
		pthread_t	tid[16];
		int			njobs = gangs ? 4 : 16;

		if (threads < 1 || threads > 16)
			die("--threads", "must be 1..16");
		/* job k: config k alone, or the gang of batch size k (its four rates) */
		for (int k = 0; k < njobs; k++)
		{
			jobs[k].n = gangs ? 4 : 1;
			for (int i = 0; i < jobs[k].n; i++)
				jobs[k].spec[i] = gangs ? model_spec(model, batches[k], lrs[i]) :
					model_spec(model, batches[k / 4], lrs[k % 4]);
			jobs[k].d = d;
		}
		run_job(&jobs[0]);		/* warm-up */
		for (int r = 0; r < reps; r++)
		{
			double		t0 = now(),
						t;
			double		setup = 0,
						busy = 0;

			/* threads = 1: one job at a time; else that many at once */
			for (int k0 = 0; k0 < njobs; k0 += threads)
			{
				int			k1 = k0 + threads < njobs ? k0 + threads : njobs;

				for (int k = k0; k < k1; k++)
					pthread_create(&tid[k], NULL, run_job, &jobs[k]);
				for (int k = k0; k < k1; k++)
					pthread_join(tid[k], NULL);
			}
			t = now() - t0;
			for (int k = 0; k < njobs; k++)
			{
				setup += jobs[k].setup;
				busy += jobs[k].seconds;
			}
			printf("RESULT fw=mop-gpu model=%s grid=%s threads=%d gangs=%d shuffle=%d rep=%d rows=%lld configs=16 seconds=%.3f job_seconds=%.3f setup_seconds=%.3f loss_first=%.4f loss_last=%.4f\n",
				   model, threads > 1 ? "concurrent" : "sequential", threads, gangs, shuffle, r,
				   (long long) rows, t, busy, setup, jobs[0].loss[0],
				   jobs[njobs - 1].loss[jobs[njobs - 1].n - 1]);
			fflush(stdout);
		}
	}
	G.data_free(d);
	return 0;
}
