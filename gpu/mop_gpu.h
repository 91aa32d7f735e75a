/*
 * mop_gpu.h -- the C ABI of mop's optional CUDA part, gpu/mop_gpu.so.
 *
 * mop.so never links CUDA.  The GPU part is a separate shared object, built
 * by nvcc whenever nvcc is present (see the Makefile) and opened with
 * dlopen only when a session first asks for a GPU (src/pg/gpu.c) -- never
 * in the postmaster, so no CUDA context exists before a backend or worker
 * needs one, and a machine without a driver or without the CUDA libraries
 * loads, installs and runs everything else unchanged.
 *
 * Every function returns a status code and never exits or prints; a
 * failure also fills msg (NUL-terminated, at most msglen bytes) with what
 * CUDA said.  The layout of the structs below is part of the ABI:
 * mop_gpu_abi_version() must return MOP_GPU_ABI_VERSION or the loader
 * refuses the library (an old mop_gpu.so next to a new mop.so).
 */
#ifndef MOP_GPU_H
#define MOP_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

#define MOP_GPU_ABI_VERSION 1

typedef enum mop_gpu_status
{
	MOP_GPU_OK = 0,
	MOP_GPU_ENODEV = -1,		/* no usable device (no driver, none visible, ...) */
	MOP_GPU_ECUDA = -2,			/* another CUDA error; see msg */
	MOP_GPU_EINVAL = -3			/* bad argument */
} mop_gpu_status;

/* One visible device. */
typedef struct mop_gpu_device
{
	int32_t		ordinal;		/* CUDA device number (after CUDA_VISIBLE_DEVICES) */
	char		name[128];
	int32_t		cc_major,		/* compute capability */
				cc_minor;
	uint64_t	total_bytes;	/* device memory */
	uint64_t	free_bytes;		/* free now (0 if not queried) */
	int32_t		multiprocessors;
} mop_gpu_device;

typedef int (*mop_gpu_abi_version_fn) (void);
typedef int (*mop_gpu_device_count_fn) (int32_t *n, char *msg, size_t msglen);
typedef int (*mop_gpu_device_info_fn) (int32_t ordinal, mop_gpu_device *out,
									   char *msg, size_t msglen);

/* MOP_GPU_ABI_VERSION of the library. */
int			mop_gpu_abi_version(void);

/*
 * Number of usable devices into *n.  MOP_GPU_ENODEV (and *n = 0) when there
 * is none, with CUDA's reason in msg (e.g. no driver installed).
 */
int			mop_gpu_device_count(int32_t *n, char *msg, size_t msglen);

/* Properties of device `ordinal`, including its free memory now. */
int			mop_gpu_device_info(int32_t ordinal, mop_gpu_device *out, char *msg,
								size_t msglen);

#ifdef __cplusplus
}
#endif

#endif							/* MOP_GPU_H */
