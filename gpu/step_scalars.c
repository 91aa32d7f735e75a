/*
 * step_scalars.c -- the optimizer's scalars of one step.  See step_scalars.h.
 */
#include <math.h>

#include "step_scalars.h"

/* CPU reference: the head of nn_optim_step (optim.c), term for term */
void
mop_gpu_step_scalars_of(const nn_spec *s, int64_t epochs, int64_t t, mop_gpu_step_scalars *out)
{
	float		lr = (float) nn_lr_at(s, epochs);

	out->lr = lr;
	out->kernel_decay = s->optimizer == NN_OPT_ADAMW ? 1.0f - lr * s->weight_decay : 1.0f;
	out->step_size = 0.0f;
	out->bc2_sqrt = 1.0f;
	if (s->optimizer == NN_OPT_ADAM || s->optimizer == NN_OPT_ADAMW)
	{
		double		bc1 = 1.0 - pow((double) s->beta1, (double) t);
		double		bc2 = 1.0 - pow((double) s->beta2, (double) t);

		out->step_size = (float) ((double) lr / bc1);
		out->bc2_sqrt = (float) sqrt(bc2);
	}
}
