/*
 * gpu_gemm.cu -- how close cuBLAS SGEMM comes to the GPU's FP32 peak on the
 * GEMM shapes of the benchmark models' training steps (batch 128), and how
 * long those GEMMs take per step.  Peak = SMs x 128 FP32 lanes x 2 x the
 * SM clock given on the command line (MHz; nvidia-smi's clocks.max.sm).
 *
 *   nvcc -O3 -o gpu_gemm gpu_gemm.cu -lcublas && ./gpu_gemm 1980
 *
 * Each shape is written as mop's row-major call (layers.c / engine.cu):
 * forward out = in W, weight gradient dW = in^T dout, input gradient
 * din = dout W^T.  Two timings per shape: "launched" is cublasSgemm called
 * in a host loop (what a framework that launches every kernel pays; for
 * small shapes this is the launch cost), "graph" the same calls captured
 * once in a CUDA graph and replayed (the GPU's own time, as mop's
 * training steps run).
 */
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

typedef struct shape
{
	const char *model, *what;
	int			ta, tb, m, n, k;
} shape;

int
main(int argc, char **argv)
{
	double		mhz = argc > 1 ? atof(argv[1]) : 1980;
	int			B = 128;
	shape		s[] = {
		{"mlp", "dense0 forward", 0, 0, B, 256, 784},
		{"mlp", "dense0 dW", 1, 0, 784, 256, B},
		{"mlp", "dense1 forward", 0, 0, B, 128, 256},
		{"mlp", "dense1 dW", 1, 0, 256, 128, B},
		{"mlp", "dense1 din", 0, 1, B, 256, 128},
		{"mlp", "dense2 forward", 0, 0, B, 10, 128},
		{"mlp", "dense2 dW", 1, 0, 128, 10, B},
		{"mlp", "dense2 din", 0, 1, B, 128, 10},
		{"cnn", "conv0 forward", 0, 0, B * 784, 32, 9},
		{"cnn", "conv0 dW", 1, 0, 9, 32, B * 784},
		{"cnn", "conv1 forward", 0, 0, B * 196, 64, 288},
		{"cnn", "conv1 dW", 1, 0, 288, 64, B * 196},
		{"cnn", "conv1 din (to col)", 0, 1, B * 196, 288, 64},
		{"cnn", "dense0 forward", 0, 0, B, 128, 3136},
		{"cnn", "dense0 dW", 1, 0, 3136, 128, B},
		{"cnn", "dense0 din", 0, 1, B, 3136, 128},
		{"cnn", "dense1 forward", 0, 0, B, 10, 128},
		{"cnn", "dense1 dW", 1, 0, 128, 10, B},
		{"cnn", "dense1 din", 0, 1, B, 128, 10},
	};
	int			ns = sizeof(s) / sizeof(s[0]);
	cudaDeviceProp p;
	cublasHandle_t h;
	float	   *a,
			   *b,
			   *c;
	double		peak;
	double		total[2] = {0, 0};
	cudaEvent_t e0,
				e1;
	cudaStream_t st;
	void	   *ws;

	cudaGetDeviceProperties(&p, 0);
	peak = (double) p.multiProcessorCount * 128 * 2 * mhz * 1e6;
	printf("GEMM device=\"%s\" sms=%d clock_mhz=%.0f fp32_peak_tflops=%.1f\n", p.name,
		   p.multiProcessorCount, mhz, peak / 1e12);
	cublasCreate(&h);
	cudaStreamCreate(&st);
	cudaMalloc(&ws, 32 << 20);
	cublasSetWorkspace(h, ws, 32 << 20);	/* needed to capture cuBLAS in a graph */
	cudaMalloc((void **) &a, 64 << 20);
	cudaMalloc((void **) &b, 64 << 20);
	cudaMalloc((void **) &c, 64 << 20);
	cudaMemset(a, 0, 64 << 20);
	cudaMemset(b, 0, 64 << 20);
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	for (int i = 0; i < ns; i++)
	{
		const float one = 1.0f,
					zero = 0.0f;
		int			lda = s[i].ta ? s[i].m : s[i].k;
		int			ldb = s[i].tb ? s[i].k : s[i].n;
		int			iters = 200;
		float		ms;
		double		flops = 2.0 * s[i].m * s[i].n * s[i].k,
					us,
					us_launched;

		for (int w = 0; w < 2; w++)
		{
			cudaEventRecord(e0);
			for (int it = 0; it < iters; it++)
				cublasSgemm(h, s[i].tb ? CUBLAS_OP_T : CUBLAS_OP_N, s[i].ta ? CUBLAS_OP_T : CUBLAS_OP_N,
							s[i].n, s[i].m, s[i].k, &one, b, ldb, a, lda, &zero, c, s[i].n);
			cudaEventRecord(e1);
			cudaEventSynchronize(e1);
		}
		cudaEventElapsedTime(&ms, e0, e1);
		us_launched = ms * 1000.0 / iters;
		{
			cudaGraph_t graph;
			cudaGraphExec_t exec;

			cublasSetStream(h, st);
			cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
			for (int it = 0; it < iters; it++)
				cublasSgemm(h, s[i].tb ? CUBLAS_OP_T : CUBLAS_OP_N, s[i].ta ? CUBLAS_OP_T : CUBLAS_OP_N,
							s[i].n, s[i].m, s[i].k, &one, b, ldb, a, lda, &zero, c, s[i].n);
			cudaStreamEndCapture(st, &graph);
			cudaGraphInstantiate(&exec, graph, 0);
			for (int w = 0; w < 2; w++)
			{
				cudaEventRecord(e0, st);
				cudaGraphLaunch(exec, st);
				cudaEventRecord(e1, st);
				cudaEventSynchronize(e1);
			}
			cudaEventElapsedTime(&ms, e0, e1);
			cudaGraphExecDestroy(exec);
			cudaGraphDestroy(graph);
			cublasSetStream(h, 0);
		}
		us = ms * 1000.0 / iters;
		total[s[i].model[0] == 'c'] += us;
		printf("GEMM model=%s what=\"%s\" m=%d n=%d k=%d launched_us=%.2f graph_us=%.2f tflops=%.2f of_peak=%.1f%%\n",
			   s[i].model, s[i].what, s[i].m, s[i].n, s[i].k, us_launched, us, flops / us / 1e6,
			   100.0 * flops / (us * 1e-6) / peak);
	}
	printf("GEMM per-step GPU time of the GEMMs (graph): mlp %.1f us, cnn %.1f us (batch %d)\n",
		   total[0], total[1], B);
	return 0;
}
