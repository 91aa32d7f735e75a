/*
 * step_scalars.h -- the optimizer's scalars of one training step, as
 * nn_optim_step (src/nn/optim.c) computes them: plain C, shared by the GPU
 * engine (which writes them into each step's table entry) and the unit
 * tests (which check them against the CPU engine without a GPU).
 */
#ifndef MOP_GPU_STEP_SCALARS_H
#define MOP_GPU_STEP_SCALARS_H

#include <stdint.h>

#include "nn.h"

#ifdef __cplusplus
extern "C"
{
#endif

typedef struct mop_gpu_step_scalars
{
	float		lr;				/* the scheduled rate of the epoch: (float) nn_lr_at */
	float		kernel_decay;	/* AdamW: 1 - lr * weight_decay; 1 otherwise */
	float		step_size;		/* Adam, AdamW: lr / (1 - beta1^t); 0 otherwise */
	float		bc2_sqrt;		/* Adam, AdamW: sqrt(1 - beta2^t); 1 otherwise */
} mop_gpu_step_scalars;

/*
 * The scalars of step t (steps + 1) of a model of spec s whose count of
 * completed epochs is epochs (the schedule's position, nn_counters.epochs).
 */
void		mop_gpu_step_scalars_of(const nn_spec *s, int64_t epochs, int64_t t,
									mop_gpu_step_scalars *out);

#ifdef __cplusplus
}
#endif

#endif							/* MOP_GPU_STEP_SCALARS_H */
