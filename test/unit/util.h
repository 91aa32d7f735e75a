/* util.h -- helpers shared by the engine unit tests. */
#ifndef MOP_TEST_UTIL_H
#define MOP_TEST_UTIL_H

#include "../../src/nn/nn_internal.h"

/* Deterministic pseudo-random floats in [lo, hi) for test data. */
static inline void
fill_uniform(float *x, int64_t n, uint64_t seed, float lo, float hi)
{
	uint64_t	s[4];

	nn_rng_seed(s, seed, 99);
	for (int64_t i = 0; i < n; i++)
		x[i] = lo + (hi - lo) * nn_rng_uniform(s);
}

/* Append a layer to spec and return it. */
static inline nn_layer_spec *
add_layer(nn_spec *s, int type)
{
	nn_layer_spec *l = &s->layers[s->n_layers++];

	memset(l, 0, sizeof(*l));
	l->type = type;
	l->use_bias = 1;
	return l;
}

static inline void
add_dense(nn_spec *s, int units, int act)
{
	nn_layer_spec *l = add_layer(s, NN_LAYER_DENSE);

	l->units = units;
	l->activation = act;
}

static inline void
add_conv(nn_spec *s, int filters, int k, int stride, int padding, int act)
{
	nn_layer_spec *l = add_layer(s, NN_LAYER_CONV2D);

	l->filters = filters;
	l->kernel_h = l->kernel_w = k;
	l->stride_h = l->stride_w = stride;
	l->padding = padding;
	l->activation = act;
}

static inline void
add_pool(nn_spec *s, int k, int stride, int padding)
{
	nn_layer_spec *l = add_layer(s, NN_LAYER_MAXPOOL2D);

	l->kernel_h = l->kernel_w = k;
	l->stride_h = l->stride_w = stride;
	l->padding = padding;
}

static inline void
add_act(nn_spec *s, int act)
{
	add_layer(s, NN_LAYER_ACTIVATION)->activation = act;
}

/* Load sklearn's digits fixture: 1797 rows of 64 pixels (0..16) + label. */
static inline int
load_digits(const char *path, float **x, float **y)
{
	FILE	   *f = fopen(path, "rb");
	unsigned char *raw;
	int			n = 1797;

	if (!f)
		return 0;
	raw = malloc((size_t) n * 65);
	if (fread(raw, 65, n, f) != (size_t) n)
	{
		fclose(f);
		free(raw);
		return 0;
	}
	fclose(f);
	*x = malloc(sizeof(float) * n * 64);
	*y = malloc(sizeof(float) * n);
	for (int i = 0; i < n; i++)
	{
		for (int j = 0; j < 64; j++)
			(*x)[i * 64 + j] = raw[i * 65 + j] / 16.0f;
		(*y)[i] = raw[i * 65 + 64];
	}
	free(raw);
	return n;
}

#endif
