/*
 * nn_arch.h -- tiny shared helpers for the engine cross-check (nn_xcheck.c)
 * and the throughput benchmark (test/bench/bench_engine.c): a one-line
 * architecture language, raw float32 file I/O and a monotonic clock.
 *
 * Architecture strings are comma-separated layers:
 *   dense:UNITS[:ACT][:nobias]        dense layer with bias, fused activation
 *   conv:FILTERS:K[:same|valid][:ACT][:nobias] conv2d K x K, stride 1, bias
 *   pool:K                            maxpool2d K x K, stride K
 *   flatten
 *   bn[:MOMENTUM[:EPS]]               batchnorm (defaults 0.1, 1e-5)
 *   ACT                               an activation layer of its own
 * ACT is relu, tanh, sigmoid, gelu or none (default none).
 * Inputs are given as "784" (a vector) or "28x28x1" (H x W x C, NHWC).
 * Presets: "mlp" = dense:256:relu,dense:128:relu,dense:10
 *          "cnn_small" = conv:8:3:same:relu,pool:2,conv:16:3:same:relu,pool:2,flatten,dense:10
 *          "lenet" = conv:32:3:same:relu,pool:2,conv:64:3:same:relu,pool:2,flatten,dense:128:relu,dense:10
 *
 * Header-only (static functions); include after "src/nn/nn.h".
 */
#ifndef MOP_NN_ARCH_H
#define MOP_NN_ARCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline const char *
arch_preset(const char *name)
{
	if (strcmp(name, "mlp") == 0)
		return "dense:256:relu,dense:128:relu,dense:10";
	if (strcmp(name, "mlp_small") == 0)
		return "dense:64:relu,dense:10";
	if (strcmp(name, "cnn_small") == 0)
		return "conv:8:3:same:relu,pool:2,conv:16:3:same:relu,pool:2,flatten,dense:10";
	if (strcmp(name, "lenet") == 0 || strcmp(name, "cnn") == 0)
		return "conv:32:3:same:relu,pool:2,conv:64:3:same:relu,pool:2,flatten,dense:128:relu,dense:10";
	return name;
}

static inline int
arch_act(const char *s)
{
	if (strcmp(s, "relu") == 0)
		return NN_ACT_RELU;
	if (strcmp(s, "tanh") == 0)
		return NN_ACT_TANH;
	if (strcmp(s, "sigmoid") == 0)
		return NN_ACT_SIGMOID;
	if (strcmp(s, "gelu") == 0)
		return NN_ACT_GELU;
	if (strcmp(s, "none") == 0 || s[0] == '\0')
		return NN_ACT_NONE;
	return -1;
}

/* Parse "784" or "28x28x1" into spec->in_{h,w,c}. 0 on success. */
static inline int
arch_parse_input(const char *s, nn_spec *spec)
{
	int			h, w, c;

	if (sscanf(s, "%dx%dx%d", &h, &w, &c) == 3)
	{
		spec->in_h = h;
		spec->in_w = w;
		spec->in_c = c;
		return 0;
	}
	if (sscanf(s, "%d", &c) == 1)
	{
		spec->in_h = 1;
		spec->in_w = 1;
		spec->in_c = c;
		return 0;
	}
	return -1;
}

/* Parse an architecture string (or preset name) into spec->layers. 0 on success. */
static inline int
arch_parse_layers(const char *arch, nn_spec *spec)
{
	char		buf[1024];
	char	   *save = NULL,
			   *tok;

	snprintf(buf, sizeof buf, "%s", arch_preset(arch));
	spec->n_layers = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
	{
		nn_layer_spec *l;
		char	   *f[6] = {0};
		int			nf = 0;
		char	   *s2 = NULL,
				   *p;

		if (spec->n_layers >= NN_MAX_LAYERS)
			return -1;
		l = &spec->layers[spec->n_layers++];
		memset(l, 0, sizeof *l);
		for (p = strtok_r(tok, ":", &s2); p && nf < 6; p = strtok_r(NULL, ":", &s2))
			f[nf++] = p;
		if (nf == 0)
			return -1;
		if (strcmp(f[0], "dense") == 0 && nf >= 2)
		{
			l->type = NN_LAYER_DENSE;
			l->units = atoi(f[1]);
			l->activation = NN_ACT_NONE;
			l->use_bias = 1;
			for (int i = 2; i < nf; i++)
			{
				if (strcmp(f[i], "nobias") == 0)
					l->use_bias = 0;
				else if ((l->activation = arch_act(f[i])) < 0)
					return -1;
			}
		}
		else if (strcmp(f[0], "conv") == 0 && nf >= 3)
		{
			int			i;

			l->type = NN_LAYER_CONV2D;
			l->filters = atoi(f[1]);
			l->kernel_h = l->kernel_w = atoi(f[2]);
			l->stride_h = l->stride_w = 1;
			l->padding = NN_PAD_VALID;
			l->activation = NN_ACT_NONE;
			l->use_bias = 1;
			for (i = 3; i < nf; i++)
			{
				if (strcmp(f[i], "nobias") == 0)
					l->use_bias = 0;
				else if (strcmp(f[i], "same") == 0)
					l->padding = NN_PAD_SAME;
				else if (strcmp(f[i], "valid") == 0)
					l->padding = NN_PAD_VALID;
				else if ((l->activation = arch_act(f[i])) < 0)
					return -1;
			}
		}
		else if (strcmp(f[0], "pool") == 0 && nf >= 2)
		{
			l->type = NN_LAYER_MAXPOOL2D;
			l->kernel_h = l->kernel_w = atoi(f[1]);
			l->stride_h = l->stride_w = atoi(f[1]);
		}
		else if (strcmp(f[0], "flatten") == 0)
			l->type = NN_LAYER_FLATTEN;
		else if (arch_act(f[0]) > 0)
		{
			/* an activation layer of its own, e.g. after bn */
			l->type = NN_LAYER_ACTIVATION;
			l->activation = arch_act(f[0]);
		}
		else if (strcmp(f[0], "bn") == 0)
		{
			/* bn[:momentum[:eps]], PyTorch's defaults 0.1 and 1e-5 */
			l->type = NN_LAYER_BATCHNORM;
			l->momentum = nf >= 2 ? (float) atof(f[1]) : 0.1f;
			l->eps = nf >= 3 ? (float) atof(f[2]) : 1e-5f;
		}
		else
			return -1;
	}
	return spec->n_layers > 0 ? 0 : -1;
}

/* Read exactly n floats from path into a new buffer (NULL on failure). */
static inline float *
read_f32(const char *path, size_t n)
{
	FILE	   *f = fopen(path, "rb");
	float	   *buf;

	if (!f)
	{
		fprintf(stderr, "cannot open %s\n", path);
		return NULL;
	}
	buf = malloc(n * sizeof(float) + 64);
	if (!buf || fread(buf, sizeof(float), n, f) != n)
	{
		fprintf(stderr, "%s: short read (wanted %zu floats)\n", path, n);
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	return buf;
}

static inline long
file_floats(const char *path)
{
	FILE	   *f = fopen(path, "rb");
	long		sz;

	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fclose(f);
	return sz / (long) sizeof(float);
}

static inline double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (all threads), seconds */
static inline double
cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif							/* MOP_NN_ARCH_H */
