/*
 * fake_gpu_v2_partial.c -- a stand-in for a broken gpu/mop_gpu.so: the
 * current ABI version and the layout query, but none of the other entry
 * points.  test/unit/Makefile builds it as fake/fake_gpu_v2_partial.so;
 * test_gpu_host.c checks that the loader refuses it, naming the first
 * missing symbol.
 */
#include "nn_internal.h"
#include "mop_gpu.h"

int
mop_gpu_abi_version(void)
{
	return MOP_GPU_ABI_VERSION;
}

void
mop_gpu_engine_layout(mop_gpu_layout *out)
{
	out->model_size = sizeof(nn_model);
	out->plan_size = sizeof(nn_plan);
	out->spec_size = sizeof(nn_spec);
	out->result_size = sizeof(nn_result);
}
