/*
 * device.cu -- device discovery for mop's CUDA part.  See mop_gpu.h.
 *
 * Only the CUDA runtime is used here; querying creates no context beyond
 * what cudaMemGetInfo needs on the queried device.  Nothing here is called
 * before a session asks for a GPU.
 */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "mop_gpu.h"

/* Copy CUDA's description of err into msg. */
static void
say(char *msg, size_t msglen, const char *what, cudaError_t err)
{
	if (msg && msglen > 0)
		snprintf(msg, msglen, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

extern "C" int
mop_gpu_abi_version(void)
{
	return MOP_GPU_ABI_VERSION;
}

extern "C" int
mop_gpu_device_count(int32_t *n, char *msg, size_t msglen)
{
	int			count = 0;
	cudaError_t err;

	if (!n)
		return MOP_GPU_EINVAL;
	*n = 0;
	if (msg && msglen > 0)
		msg[0] = '\0';
	err = cudaGetDeviceCount(&count);
	if (err != cudaSuccess)
	{
		say(msg, msglen, "cudaGetDeviceCount", err);
		(void) cudaGetLastError();	/* clear the sticky-free error state */
		return err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
			err == cudaErrorInitializationError
#if CUDART_VERSION >= 12000
			|| err == cudaErrorSystemDriverMismatch || err == cudaErrorCompatNotSupportedOnDevice
#endif
			? MOP_GPU_ENODEV : MOP_GPU_ECUDA;
	}
	if (count == 0)
	{
		if (msg && msglen > 0)
			snprintf(msg, msglen, "cudaGetDeviceCount: no CUDA device is visible");
		return MOP_GPU_ENODEV;
	}
	*n = count;
	return MOP_GPU_OK;
}

extern "C" int
mop_gpu_device_info(int32_t ordinal, mop_gpu_device *out, char *msg, size_t msglen)
{
	cudaDeviceProp p;
	cudaError_t err;
	size_t		free_b = 0,
				total_b = 0;
	int			prev = 0;

	if (!out || ordinal < 0)
		return MOP_GPU_EINVAL;
	memset(out, 0, sizeof(*out));
	err = cudaGetDeviceProperties(&p, ordinal);
	if (err != cudaSuccess)
	{
		say(msg, msglen, "cudaGetDeviceProperties", err);
		return err == cudaErrorInvalidDevice ? MOP_GPU_EINVAL : MOP_GPU_ECUDA;
	}
	out->ordinal = ordinal;
	snprintf(out->name, sizeof(out->name), "%s", p.name);
	out->cc_major = p.major;
	out->cc_minor = p.minor;
	out->total_bytes = p.totalGlobalMem;
	out->multiprocessors = p.multiProcessorCount;
	if (cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(ordinal) == cudaSuccess &&
		cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
		out->free_bytes = free_b;
	(void) cudaSetDevice(prev);
	(void) cudaGetLastError();
	return MOP_GPU_OK;
}
