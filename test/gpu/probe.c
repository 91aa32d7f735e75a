/*
 * probe.c -- the GPU test runner's first check, runnable without
 * PostgreSQL: open gpu/mop_gpu.so the way mop.so does (dlopen, ABI check),
 * count the visible devices and print each.  Exit status: 0 when at least
 * one GPU is usable, 77 (the automake "skipped" code) when the library
 * loads but no GPU is usable, 1 on any other failure (library missing or
 * broken, ABI mismatch, a CUDA error other than "no device").
 */
#include <dlfcn.h>
#include <stdio.h>

#include "../../gpu/mop_gpu.h"

int
main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "gpu/mop_gpu.so";
	void	   *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	mop_gpu_abi_version_fn abi;
	mop_gpu_device_count_fn count;
	mop_gpu_device_info_fn info;
	char		msg[512] = "";
	int32_t		n = 0;
	int			rc;

	if (!lib)
	{
		printf("not ok gpu: cannot open %s: %s\n", path, dlerror());
		return 1;
	}
	abi = (mop_gpu_abi_version_fn) dlsym(lib, "mop_gpu_abi_version");
	count = (mop_gpu_device_count_fn) dlsym(lib, "mop_gpu_device_count");
	info = (mop_gpu_device_info_fn) dlsym(lib, "mop_gpu_device_info");
	if (!abi || !count || !info || abi() != MOP_GPU_ABI_VERSION)
	{
		printf("not ok gpu: %s lacks the mop GPU ABI %d\n", path, MOP_GPU_ABI_VERSION);
		return 1;
	}
	rc = count(&n, msg, sizeof(msg));
	if (rc == MOP_GPU_ENODEV)
	{
		printf("skip gpu: no usable GPU (%s)\n", msg);
		return 77;
	}
	if (rc != MOP_GPU_OK)
	{
		printf("not ok gpu: device query failed: %s\n", msg);
		return 1;
	}
	for (int32_t i = 0; i < n; i++)
	{
		mop_gpu_device d;

		if (info(i, &d, msg, sizeof(msg)) != MOP_GPU_OK)
		{
			printf("not ok gpu: device %d: %s\n", i, msg);
			return 1;
		}
		printf("ok gpu: device %d: %s, compute capability %d.%d, %llu MiB (%llu free), %d SMs\n",
			   d.ordinal, d.name, d.cc_major, d.cc_minor,
			   (unsigned long long) (d.total_bytes >> 20),
			   (unsigned long long) (d.free_bytes >> 20), d.multiprocessors);
	}
	return 0;
}
