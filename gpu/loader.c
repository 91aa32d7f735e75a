/*
 * loader.c -- resolve and check the GPU library's entry points.  See loader.h.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nn_internal.h"
#include "loader.h"

int
mop_gpu_api_resolve(void *handle, mop_gpu_api *api, char *msg, size_t msglen)
{
	static const struct
	{
		const char *name;
		size_t		offset;
	}			syms[] = {
#define SYM(field, name) {name, offsetof(mop_gpu_api, field)}
		SYM(abi_version, "mop_gpu_abi_version"),
		SYM(engine_layout, "mop_gpu_engine_layout"),
		SYM(device_count, "mop_gpu_device_count"),
		SYM(device_info, "mop_gpu_device_info"),
		SYM(set_budget, "mop_gpu_set_budget"),
		SYM(memory_info, "mop_gpu_memory_info"),
		SYM(model_bytes, "mop_gpu_model_bytes"),
		SYM(data_upload, "mop_gpu_data_upload"),
		SYM(data_rows, "mop_gpu_data_rows"),
		SYM(data_free, "mop_gpu_data_free"),
		SYM(model_open, "mop_gpu_model_open"),
		SYM(model_sync, "mop_gpu_model_sync"),
		SYM(model_close, "mop_gpu_model_close"),
		SYM(train_begin, "mop_gpu_train_begin"),
		SYM(train_feed, "mop_gpu_train_feed"),
		SYM(train_end, "mop_gpu_train_end"),
		SYM(train_order, "mop_gpu_train_order"),
		SYM(train_quiesce, "mop_gpu_train_quiesce"),
		SYM(evaluate, "mop_gpu_evaluate"),
		SYM(gradients, "mop_gpu_gradients"),
		SYM(gang_bytes, "mop_gpu_gang_bytes"),
		SYM(gang_open, "mop_gpu_gang_open"),
		SYM(gang_check, "mop_gpu_gang_check"),
#undef SYM
	};
	mop_gpu_layout lo;
	int			abi;

	memset(api, 0, sizeof(*api));
	/* the version first: an old library may lack the newer symbols */
	api->abi_version = (mop_gpu_abi_version_fn) dlsym(handle, "mop_gpu_abi_version");
	if (!api->abi_version)
	{
		snprintf(msg, msglen, "it has no mop_gpu_abi_version (not a mop GPU library)");
		return -1;
	}
	if ((abi = api->abi_version()) != MOP_GPU_ABI_VERSION)
	{
		snprintf(msg, msglen, "it has GPU ABI %d, this mop expects %d (install both from one build)",
				 abi, MOP_GPU_ABI_VERSION);
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
	{
		void	   *f = dlsym(handle, syms[i].name);

		if (!f)
		{
			snprintf(msg, msglen, "it lacks %s", syms[i].name);
			return -1;
		}
		memcpy((char *) api + syms[i].offset, &f, sizeof(f));
	}
	api->engine_layout(&lo);
	if (lo.model_size != sizeof(nn_model) || lo.plan_size != sizeof(nn_plan) ||
		lo.spec_size != sizeof(nn_spec) || lo.result_size != sizeof(nn_result))
	{
		snprintf(msg, msglen,
				 "it was built from other engine sources (model %u/%zu, plan %u/%zu bytes); install both from one build",
				 lo.model_size, sizeof(nn_model), lo.plan_size, sizeof(nn_plan));
		return -1;
	}
	return 0;
}
