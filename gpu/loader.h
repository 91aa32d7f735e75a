/*
 * loader.h -- resolve the entry points of gpu/mop_gpu.so from a dlopen
 * handle and check that the library fits the caller: its ABI version and
 * the engine struct sizes it was built with.  Plain C, no CUDA: compiled
 * into mop.so and into the GPU tests, so the list of entry points exists
 * once.
 */
#ifndef MOP_GPU_LOADER_H
#define MOP_GPU_LOADER_H

#include "mop_gpu.h"

#ifdef __cplusplus
extern "C"
{
#endif

/*
 * Fill api from handle.  Returns 0, or -1 with the reason in msg (a missing
 * symbol, another ABI version, another engine layout).
 */
int			mop_gpu_api_resolve(void *handle, mop_gpu_api *api, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif

#endif							/* MOP_GPU_LOADER_H */
