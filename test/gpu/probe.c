/*
 * probe.c -- the GPU test runner's first check, runnable without
 * PostgreSQL: open gpu/mop_gpu.so the way mop.so does (dlopen, ABI and
 * engine layout checked by gpu/loader.c), count the visible devices and
 * print each.  Exit status: 0 when at least one GPU is usable, 77 (the
 * automake "skipped" code) when the library loads but no GPU is usable, 1
 * on any other failure (library missing or broken, ABI or layout mismatch,
 * a CUDA error other than "no device").
 */
#include <dlfcn.h>
#include <stdio.h>

#include "loader.h"

int
main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "gpu/mop_gpu.so";
	void	   *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	mop_gpu_api api;
	char		msg[512] = "";
	int32_t		n = 0;
	int			rc;

	if (!lib)
	{
		printf("not ok gpu: cannot open %s: %s\n", path, dlerror());
		return 1;
	}
	if (mop_gpu_api_resolve(lib, &api, msg, sizeof(msg)) != 0)
	{
		printf("not ok gpu: %s: %s\n", path, msg);
		return 1;
	}
	printf("ok gpu: %s loads, GPU ABI %d, engine layout matches\n", path, api.abi_version());
	rc = api.device_count(&n, msg, sizeof(msg));
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

		if (api.device_info(i, &d, msg, sizeof(msg)) != MOP_GPU_OK)
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
