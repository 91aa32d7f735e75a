/*
 * fake_gpu_full.c -- a stand-in for gpu/mop_gpu.so with every entry point
 * as a stub (no CUDA; nothing but the layout query is ever called).
 * test/unit/Makefile builds it twice: fake/fake_gpu_full.so reports the
 * engine layout of these sources, which the loader accepts, and
 * fake/fake_gpu_badlayout.so (-DFAKE_BAD_LAYOUT) reports a larger
 * nn_model, as a library built from other engine sources would, which the
 * loader refuses; fake/fake_gpu_v3.so (-DFAKE_ABI=3) has every entry point
 * of today but reports GPU ABI 3, a library from before the GPU trained
 * learning-rate schedules, class weights, batchnorm and whole-set metrics,
 * which the loader refuses too.
 */
#include <string.h>

#include "nn_internal.h"
#include "mop_gpu.h"

#ifdef FAKE_BAD_LAYOUT
#define MODEL_SIZE (sizeof(nn_model) + 8)
#else
#define MODEL_SIZE sizeof(nn_model)
#endif

#ifndef FAKE_ABI
#define FAKE_ABI MOP_GPU_ABI_VERSION
#endif

int
mop_gpu_abi_version(void)
{
	return FAKE_ABI;
}

void
mop_gpu_engine_layout(mop_gpu_layout *out)
{
	out->model_size = MODEL_SIZE;
	out->plan_size = sizeof(nn_plan);
	out->spec_size = sizeof(nn_spec);
	out->result_size = sizeof(nn_result);
}

int
mop_gpu_device_count(int32_t *n, char *msg, size_t msglen)
{
	*n = 0;
	return MOP_GPU_ENODEV;
}

int
mop_gpu_device_info(int32_t ordinal, mop_gpu_device *out, char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

void
mop_gpu_set_budget(uint64_t bytes)
{
}

void
mop_gpu_memory_info(mop_gpu_memory *out)
{
	memset(out, 0, sizeof(*out));
}

uint64_t
mop_gpu_model_bytes(const nn_model *host)
{
	return 0;
}

int
mop_gpu_data_upload(int32_t device, const float *x, const float *y, int64_t n,
					int32_t in_dim, int32_t y_dim, mop_gpu_data **out, char *msg,
					size_t msglen)
{
	return MOP_GPU_ENODEV;
}

int
mop_gpu_train_order(mop_gpu_model *g, int32_t member, const mop_gpu_data *d,
					const int64_t *perm, char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

uint64_t
mop_gpu_gang_bytes(const nn_model *host, int32_t n)
{
	return 0;
}

int
mop_gpu_gang_open(nn_model **hosts, int32_t n, const mop_gpu_options *opt,
				  mop_gpu_model **out, char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

int
mop_gpu_gang_check(const nn_model *a, const nn_model *b, char *why, size_t whylen)
{
	return MOP_GPU_ENODEV;
}

int
mop_gpu_train_quiesce(mop_gpu_model *g, char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

int64_t
mop_gpu_data_rows(const mop_gpu_data *d)
{
	return 0;
}

void
mop_gpu_data_free(mop_gpu_data *d)
{
}

int
mop_gpu_model_open(nn_model *host, const mop_gpu_options *opt, mop_gpu_model **out,
				   char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

int
mop_gpu_model_sync(mop_gpu_model *g, char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

void
mop_gpu_model_close(mop_gpu_model *g)
{
}

int
mop_gpu_train_begin(mop_gpu_model *g, char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

int
mop_gpu_train_feed(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n,
				   char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

int
mop_gpu_train_end(mop_gpu_model *g, nn_result *res, char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

int
mop_gpu_evaluate(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n,
				 nn_result *res, char *msg, size_t msglen)
{
	return MOP_GPU_ENODEV;
}

int
mop_gpu_gradients(mop_gpu_model *g, mop_gpu_data *d, int64_t off, int64_t n,
				  float *z, float *grads, double *ls, double *ms, char *msg,
				  size_t msglen)
{
	return MOP_GPU_ENODEV;
}
