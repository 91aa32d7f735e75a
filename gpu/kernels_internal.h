/*
 * kernels_internal.h -- launch geometry shared by the kernel files
 * (kernels.cu: fills, activations, convolution and pooling;
 * kernels_train.cu: losses, metrics and optimizers).
 */
#ifndef MOP_GPU_KERNELS_INTERNAL_H
#define MOP_GPU_KERNELS_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "kernels.h"

#define THREADS 256

static inline unsigned
blocks_for(int64_t n)
{
	int64_t		b = (n + THREADS - 1) / THREADS;

	if (b < 1)
		b = 1;
	return (unsigned) (b > 65535 * 16 ? 65535 * 16 : b);
}

#define GRID_STRIDE(i, n) \
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
		 i += (int64_t) blockDim.x * gridDim.x)

#endif							/* MOP_GPU_KERNELS_INTERNAL_H */
