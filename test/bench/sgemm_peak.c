/*
 * sgemm_peak.c -- single-thread FP32 GEMM throughput of the OpenBLAS the
 * engine uses (dlopen("libopenblas.so.0"), as src/nn does), as a practical
 * one-core peak to compare the engine's GFLOP/s against.
 *
 * Usage: sgemm_peak [N (2048)] [reps (5)]; prints
 *   PEAK sgemm n=N threads=1 best_gflops=G median_gflops=M config="..."
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*sgemm_fn) (int, int, int, int, int, int, float, const float *, int,
						  const float *, int, float, float *, int);

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int			n = argc > 1 ? atoi(argv[1]) : 2048;
	int			reps = argc > 2 ? atoi(argv[2]) : 5;
	void	   *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
	sgemm_fn	gemm;
	void		(*set_threads) (int);
	char	   *(*get_config) (void);
	float	   *a,
			   *b,
			   *c;
	double	   *g;
	size_t		i;
	int			r;

	if (!h)
	{
		fprintf(stderr, "sgemm_peak: %s\n", dlerror());
		return 2;
	}
	gemm = (sgemm_fn) dlsym(h, "cblas_sgemm");
	set_threads = (void (*) (int)) dlsym(h, "openblas_set_num_threads");
	get_config = (char *(*) (void)) dlsym(h, "openblas_get_config");
	if (!gemm || !set_threads)
		return 2;
	set_threads(1);
	a = malloc(sizeof(float) * n * n);
	b = malloc(sizeof(float) * n * n);
	c = malloc(sizeof(float) * n * n);
	g = malloc(sizeof(double) * reps);
	for (i = 0; i < (size_t) n * n; i++)
	{
		a[i] = (float) ((i * 7) % 13) / 13.0f;
		b[i] = (float) ((i * 5) % 11) / 11.0f;
		c[i] = 0;
	}
	/* CblasRowMajor = 101, CblasNoTrans = 111 */
	gemm(101, 111, 111, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
	for (r = 0; r < reps; r++)
	{
		double		t0 = now_s();

		gemm(101, 111, 111, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
		g[r] = 2.0 * n * n * (double) n / (now_s() - t0) * 1e-9;
	}
	qsort(g, reps, sizeof(double), cmp);
	printf("PEAK sgemm n=%d threads=1 best_gflops=%.1f median_gflops=%.1f config=\"%s\"\n",
		   n, g[reps - 1], g[reps / 2], get_config ? get_config() : "?");
	return 0;
}
