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
 * went wrong.  The layout of the structs below is part of the ABI:
 * mop_gpu_abi_version() must return MOP_GPU_ABI_VERSION or the loader
 * refuses the library (an old mop_gpu.so next to a new mop.so).
 *
 * The training engine on the GPU
 * ------------------------------
 * The GPU engine is a backend of the CPU engine (src/nn), not a second
 * engine: a model always exists as a host nn_model (spec, plan, counters,
 * random generator, and the authoritative copy of weights and optimizer
 * state between sub-epochs), and a mop_gpu_model is its device mirror for
 * the duration of a training or evaluation stream.  Opening the mirror
 * uploads weights and optimizer state; mop_gpu_model_sync() writes them
 * back into the host model, which then serializes to the very same blob as
 * a model trained on the CPU.  So a model hops between CPU and GPU workers
 * freely: only its state moves.
 *
 * The GPU library reads the host model's fields (nn_internal.h), so it
 * must be built from the same engine sources: mop_gpu_engine_layout()
 * reports the struct sizes it was built with, and the loader compares them
 * with its own before calling anything else.
 *
 * Rows live on the device as mop_gpu_data (a buffer of x and y uploaded
 * once and kept by the caller across sub-epochs: only model states move).
 * A training stream mirrors nn_train_begin/feed/end: rows are gathered into
 * minibatches across buffer boundaries in the order given by the buffer's
 * permutation, and only the last partial batch of a stream is short.
 *
 * Device memory is accounted per process against a budget
 * (mop_gpu_set_budget, 0 = no limit); an allocation that would pass it
 * fails with MOP_GPU_ENOMEM and a message naming the need, the budget and
 * what is in use, before anything is allocated.
 */
#ifndef MOP_GPU_H
#define MOP_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "nn.h"

#ifdef __cplusplus
extern "C"
{
#endif

/*
 * 4: the library trains learning-rate schedules, class weights and
 *    batchnorm layers and gathers whole-set metrics; a mop.so that sends
 *    such models to the GPU must not load a library that would ignore them
 */
#define MOP_GPU_ABI_VERSION 4

/* Most models one mirror trains together (a gang; see mop_gpu_gang_open). */
#define MOP_GPU_GANG_MAX 64

typedef enum mop_gpu_status
{
	MOP_GPU_OK = 0,
	MOP_GPU_ENODEV = -1,		/* no usable device (no driver, none visible, ...) */
	MOP_GPU_ECUDA = -2,			/* another CUDA or cuBLAS error; see msg */
	MOP_GPU_EINVAL = -3,		/* bad argument (bad label, wrong width, ...) */
	MOP_GPU_ENOMEM = -4,		/* over the memory budget, or the device is full */
	MOP_GPU_EDIVERGED = -5,		/* NaN or Inf in loss or weights (model kept) */
	MOP_GPU_ELAYOUT = -6		/* built from other engine sources than the caller */
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

/* Engine struct sizes the library was built with (see above). */
typedef struct mop_gpu_layout
{
	uint32_t	model_size;		/* sizeof(nn_model) */
	uint32_t	plan_size;		/* sizeof(nn_plan) */
	uint32_t	spec_size;		/* sizeof(nn_spec) */
	uint32_t	result_size;	/* sizeof(nn_result) */
} mop_gpu_layout;

/* Device memory accounting of this process. */
typedef struct mop_gpu_memory
{
	uint64_t	in_use;			/* bytes mop holds on the device now */
	uint64_t	peak;			/* most it held at once */
	uint64_t	budget;			/* 0: no limit */
	int64_t		allocations;	/* live device allocations */
} mop_gpu_memory;

typedef struct mop_gpu_model mop_gpu_model;
typedef struct mop_gpu_data mop_gpu_data;

/* Options of a device mirror. */
typedef struct mop_gpu_options
{
	int32_t		device;			/* CUDA ordinal */
	int32_t		tf32;			/* 1: let cuBLAS use TF32 tensor cores (not bit-parity) */
	int32_t		no_graphs;		/* 1: launch every kernel of a step (no CUDA graph) */
} mop_gpu_options;

/* --- discovery -------------------------------------------------------- */
int			mop_gpu_abi_version(void);
void		mop_gpu_engine_layout(mop_gpu_layout *out);

/*
 * Number of usable devices into *n.  MOP_GPU_ENODEV (and *n = 0) when there
 * is none, with CUDA's reason in msg (e.g. no driver installed).
 */
int			mop_gpu_device_count(int32_t *n, char *msg, size_t msglen);

/* Properties of device `ordinal`, including its free memory now. */
int			mop_gpu_device_info(int32_t ordinal, mop_gpu_device *out, char *msg,
								size_t msglen);

/* --- memory budget ---------------------------------------------------- */
void		mop_gpu_set_budget(uint64_t bytes);
void		mop_gpu_memory_info(mop_gpu_memory *out);

/* Device bytes a mirror of this model would take (for planning). */
uint64_t	mop_gpu_model_bytes(const nn_model *host);

/* Device bytes a gang of n models shaped as host would take. */
uint64_t	mop_gpu_gang_bytes(const nn_model *host, int32_t n);

/* --- rows resident on the device -------------------------------------- */

/*
 * Upload n rows (x: n * in_dim floats, y: n * y_dim floats) to device
 * `device`.  The copy is the caller's to keep across sub-epochs and to free.
 */
int			mop_gpu_data_upload(int32_t device, const float *x, const float *y,
								int64_t n, int32_t in_dim, int32_t y_dim,
								mop_gpu_data **out, char *msg, size_t msglen);

int64_t		mop_gpu_data_rows(const mop_gpu_data *d);
void		mop_gpu_data_free(mop_gpu_data *d);

/* --- a model's device mirror ------------------------------------------ */

/* Allocate the mirror of host and upload its weights and optimizer state. */
int			mop_gpu_model_open(nn_model *host, const mop_gpu_options *opt,
							   mop_gpu_model **out, char *msg, size_t msglen);

/*
 * A gang: one mirror of n models of one shape (same layers, batch size,
 * loss, metric and optimizer; learning rate and the other hyperparameters
 * free), trained together on the same rows, each in its own order, with
 * every layer launched once for all of them (batched GEMMs), as HFTA fuses
 * models.  Each model's numbers are those it would get alone.  A mirror
 * from mop_gpu_model_open is a gang of one.  EINVAL, naming the model and
 * what differs, if two cannot share a gang; mop_gpu_gang_check asks first
 * (MOP_GPU_OK or MOP_GPU_EINVAL with the reason in why).
 *
 * Everything below takes a gang: begin, feed, quiesce and sync act on every
 * member; train_order sets one member's order; train_end and evaluate fill
 * one nn_result per member (res[0 .. n-1]).  A member that diverges stops
 * (its host model says so, its counters where the CPU would stop) while
 * the others train on; train_end then returns MOP_GPU_EDIVERGED naming it,
 * and feed fails only once every member has diverged.
 */
int			mop_gpu_gang_open(nn_model **hosts, int32_t n, const mop_gpu_options *opt,
							  mop_gpu_model **out, char *msg, size_t msglen);
int			mop_gpu_gang_check(const nn_model *a, const nn_model *b, char *why,
							   size_t whylen);

/* Write weights and optimizer state back into the host model (waits). */
int			mop_gpu_model_sync(mop_gpu_model *g, char *msg, size_t msglen);

/* Free the mirror (NULL is fine); the host model is untouched. */
void		mop_gpu_model_close(mop_gpu_model *g);

/*
 * Training stream, as nn_train_begin/feed/end (the host model's counters
 * and random generator advance exactly as on the CPU).  feed queues
 * training on rows [off, off + n) of d in its current order and returns
 * without waiting for the GPU, so it may be called once per minibatch.  A
 * diverged model returns MOP_GPU_EDIVERGED from a later feed or from end;
 * its counters then say where it stopped, as on the CPU.  res receives the
 * stream's sums at end.
 */
int			mop_gpu_train_begin(mop_gpu_model *g, char *msg, size_t msglen);
int			mop_gpu_train_feed(mop_gpu_model *g, mop_gpu_data *d, int64_t off,
							   int64_t n, char *msg, size_t msglen);
int			mop_gpu_train_end(mop_gpu_model *g, nn_result *res, char *msg,
							  size_t msglen);

/*
 * The order in which member `member` (0 for a model alone) visits the rows
 * of d from now on: perm[i] is the row visited i-th (each of 0..n-1 once);
 * NULL: the stored order.  The order belongs to the member, so models
 * sharing a buffer keep their own.
 */
int			mop_gpu_train_order(mop_gpu_model *g, int32_t member, const mop_gpu_data *d,
								const int64_t *perm, char *msg, size_t msglen);

/*
 * Queue all work whose rows are known and wait for the GPU: afterwards no
 * queued work reads any mop_gpu_data, so buffers fed so far may be freed.
 */
int			mop_gpu_train_quiesce(mop_gpu_model *g, char *msg, size_t msglen);

/* Loss and metric sums of rows [off, off + n) of d (stored order), added into *res. */
int			mop_gpu_evaluate(mop_gpu_model *g, mop_gpu_data *d, int64_t off,
							 int64_t n, nn_result *res, char *msg, size_t msglen);

/*
 * Parity hook: forward, loss and backward on rows [off, off + n) of d
 * without an update, as nn_gradients does.  Copies the network's output
 * (n * out_dim floats) into z and the parameter gradients (n_params
 * floats) into grads when they are not NULL; loss and metric sums into
 * *ls / *ms.
 */
int			mop_gpu_gradients(mop_gpu_model *g, mop_gpu_data *d, int64_t off,
							  int64_t n, float *z, float *grads, double *ls,
							  double *ms, char *msg, size_t msglen);

/* --- function pointer types for the loader ---------------------------- */
typedef int (*mop_gpu_abi_version_fn) (void);
typedef void (*mop_gpu_engine_layout_fn) (mop_gpu_layout *out);
typedef int (*mop_gpu_device_count_fn) (int32_t *n, char *msg, size_t msglen);
typedef int (*mop_gpu_device_info_fn) (int32_t ordinal, mop_gpu_device *out,
									   char *msg, size_t msglen);
typedef void (*mop_gpu_set_budget_fn) (uint64_t bytes);
typedef void (*mop_gpu_memory_info_fn) (mop_gpu_memory *out);
typedef uint64_t (*mop_gpu_model_bytes_fn) (const nn_model *host);
typedef int (*mop_gpu_data_upload_fn) (int32_t device, const float *x, const float *y,
									   int64_t n, int32_t in_dim, int32_t y_dim,
									   mop_gpu_data **out, char *msg, size_t msglen);
typedef int64_t (*mop_gpu_data_rows_fn) (const mop_gpu_data *d);
typedef void (*mop_gpu_data_free_fn) (mop_gpu_data *d);
typedef int (*mop_gpu_model_open_fn) (nn_model *host, const mop_gpu_options *opt,
									  mop_gpu_model **out, char *msg, size_t msglen);
typedef int (*mop_gpu_model_sync_fn) (mop_gpu_model *g, char *msg, size_t msglen);
typedef void (*mop_gpu_model_close_fn) (mop_gpu_model *g);
typedef int (*mop_gpu_train_begin_fn) (mop_gpu_model *g, char *msg, size_t msglen);
typedef int (*mop_gpu_train_feed_fn) (mop_gpu_model *g, mop_gpu_data *d, int64_t off,
									  int64_t n, char *msg, size_t msglen);
typedef int (*mop_gpu_train_end_fn) (mop_gpu_model *g, nn_result *res, char *msg,
									 size_t msglen);
typedef int (*mop_gpu_train_order_fn) (mop_gpu_model *g, int32_t member,
									   const mop_gpu_data *d, const int64_t *perm,
									   char *msg, size_t msglen);
typedef uint64_t (*mop_gpu_gang_bytes_fn) (const nn_model *host, int32_t n);
typedef int (*mop_gpu_gang_open_fn) (nn_model **hosts, int32_t n, const mop_gpu_options *opt,
									 mop_gpu_model **out, char *msg, size_t msglen);
typedef int (*mop_gpu_gang_check_fn) (const nn_model *a, const nn_model *b, char *why,
									  size_t whylen);
typedef int (*mop_gpu_train_quiesce_fn) (mop_gpu_model *g, char *msg, size_t msglen);
typedef int (*mop_gpu_evaluate_fn) (mop_gpu_model *g, mop_gpu_data *d, int64_t off,
									int64_t n, nn_result *res, char *msg, size_t msglen);
typedef int (*mop_gpu_gradients_fn) (mop_gpu_model *g, mop_gpu_data *d, int64_t off,
									 int64_t n, float *z, float *grads, double *ls,
									 double *ms, char *msg, size_t msglen);

/*
 * Every entry point, resolved by name with dlsym.  gpu/api.c fills one from
 * a dlopen handle; mop.so and the GPU tests both use it, so the list of
 * symbols exists once.
 */
typedef struct mop_gpu_api
{
	mop_gpu_abi_version_fn abi_version;
	mop_gpu_engine_layout_fn engine_layout;
	mop_gpu_device_count_fn device_count;
	mop_gpu_device_info_fn device_info;
	mop_gpu_set_budget_fn set_budget;
	mop_gpu_memory_info_fn memory_info;
	mop_gpu_model_bytes_fn model_bytes;
	mop_gpu_data_upload_fn data_upload;
	mop_gpu_data_rows_fn data_rows;
	mop_gpu_data_free_fn data_free;
	mop_gpu_model_open_fn model_open;
	mop_gpu_model_sync_fn model_sync;
	mop_gpu_model_close_fn model_close;
	mop_gpu_train_begin_fn train_begin;
	mop_gpu_train_feed_fn train_feed;
	mop_gpu_train_end_fn train_end;
	mop_gpu_train_order_fn train_order;
	mop_gpu_train_quiesce_fn train_quiesce;
	mop_gpu_evaluate_fn evaluate;
	mop_gpu_gradients_fn gradients;
	mop_gpu_gang_bytes_fn gang_bytes;
	mop_gpu_gang_open_fn gang_open;
	mop_gpu_gang_check_fn gang_check;
} mop_gpu_api;

#ifdef __cplusplus
}
#endif

#endif							/* MOP_GPU_H */
