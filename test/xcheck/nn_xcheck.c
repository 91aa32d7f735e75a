/*
 * nn_xcheck.c -- import weights into a mop engine model, train it on given
 * batches with shuffle off, and write per-step losses and final weights, so
 * that test/xcheck/xcheck_torch.py can compare them with PyTorch.
 *
 * Weight exchange format: one raw little-endian float32 file holding every
 * parameter tensor concatenated in nn_model_tensor() order (for each layer
 * with parameters: kernel, then bias), each in the engine's layout
 * (dense kernel [in, out], conv2d kernel [kh, kw, c_in, f] HWIO, bias [out]).
 * Data: raw float32 x (n rows x in_dim, NHWC images) and y (n class indices,
 * or n labels 0/1 with --loss bce and a network of one output).
 *
 * Usage:
 *   nn_xcheck --input 784|HxWxC --arch mlp|cnn_small|lenet|LAYERS
 *             --opt adam|adamw|sgd|rmsprop --lr F --batch B
 *             [--momentum F] [--nesterov 0|1] [--beta1 F] [--beta2 F]
 *             [--eps F] [--rho F] [--l2 F] [--wd F] [--clip F] [--threads T]
 *             [--loss ce|bce] [--class-weights W0,W1,...]
 *             [--weights-in FILE] --x FILE --y FILE --n ROWS
 *             --losses FILE --weights-out FILE [--eval-out FILE]
 *   nn_xcheck --input ... --arch ... --describe
 *
 * --class-weights sets one weight per class of the training loss
 * (nn_model_set_class_weights) on both models below.
 *
 * Training runs one nn_train(shuffle = 0) call per minibatch of --batch rows
 * (the last one may be partial) and records loss_sum / rows per step.  A
 * second model with the same imported weights is then trained over the whole
 * buffer in a single nn_train call (the streaming path, which gathers the
 * minibatches itself); its final weights must be bit-identical.
 *
 * Output on stdout: "tensor ..." lines, then "stream_identical 0|1",
 * "alloc_count_before/after", "steps".  Exit status 0 unless an engine call
 * failed or the streaming path disagreed.
 */
#include "src/nn/nn.h"
#include "test/xcheck/nn_arch.h"

#include <math.h>

static void
die(const char *what, nn_error *e)
{
	fprintf(stderr, "nn_xcheck: %s failed: %s (%s)\n", what,
			e ? e->msg : "", e ? nn_status_name(e->status) : "");
	exit(2);
}

static int
opt_code(const char *s)
{
	if (strcmp(s, "sgd") == 0)
		return NN_OPT_SGD;
	if (strcmp(s, "adam") == 0)
		return NN_OPT_ADAM;
	if (strcmp(s, "adamw") == 0)
		return NN_OPT_ADAMW;
	if (strcmp(s, "rmsprop") == 0)
		return NN_OPT_RMSPROP;
	return -1;
}

/* Parse "w0,w1,..." into w (at most cap); returns the count, -1 if malformed. */
static int
parse_weights(const char *s, float *w, int cap)
{
	int			n = 0;
	char	   *end;

	while (*s)
	{
		if (n == cap)
			return -1;
		w[n++] = strtof(s, &end);
		if (end == s || (*end != ',' && *end != '\0'))
			return -1;
		s = *end ? end + 1 : end;
	}
	return n;
}

static int
import_weights(nn_model *m, const float *w, long nw)
{
	int32_t		i,
				nt = nn_model_n_tensors(m);
	long		off = 0;
	nn_error	e;

	for (i = 0; i < nt; i++)
	{
		nn_tensor	t;

		if (nn_model_tensor(m, i, &t, &e) != NN_OK)
			die("nn_model_tensor", &e);
		if (off + t.size > nw)
			return -1;
		memcpy(t.data, w + off, t.size * sizeof(float));
		off += t.size;
	}
	return off == nw ? 0 : -1;
}

int
main(int argc, char **argv)
{
	nn_spec		spec;
	nn_error	e;
	nn_model   *m = NULL,
			   *m2 = NULL;
	const char *input = "784",
			   *arch = "mlp",
			   *win = NULL,
			   *xf = NULL,
			   *yf = NULL,
			   *lf = NULL,
			   *wout = NULL,
			   *eout = NULL;
	long		n = 0;
	int			describe = 0,
				threads = 1,
				ncw = 0,
				i;
	float		cw[NN_MAX_DIM > 1024 ? 1024 : NN_MAX_DIM];
	int32_t		nt,
				t;
	int64_t		total = 0;

	nn_spec_init(&spec);
	spec.loss = NN_LOSS_SOFTMAX_CE;
	spec.metric = NN_METRIC_ACCURACY;
	for (i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

#define ARG(name) (strcmp(a, name) == 0 && v && (i++, 1))
		if (strcmp(a, "--describe") == 0)
			describe = 1;
		else if (ARG("--input"))
			input = v;
		else if (ARG("--arch"))
			arch = v;
		else if (ARG("--opt"))
			spec.optimizer = opt_code(v);
		else if (ARG("--lr"))
			spec.lr = strtof(v, NULL);
		else if (ARG("--batch"))
			spec.batch_size = atoi(v);
		else if (ARG("--momentum"))
			spec.momentum = strtof(v, NULL);
		else if (ARG("--nesterov"))
			spec.nesterov = atoi(v);
		else if (ARG("--beta1"))
			spec.beta1 = strtof(v, NULL);
		else if (ARG("--beta2"))
			spec.beta2 = strtof(v, NULL);
		else if (ARG("--eps"))
			spec.eps = strtof(v, NULL);
		else if (ARG("--rho"))
			spec.rho = strtof(v, NULL);
		else if (ARG("--l2"))
			spec.l2 = strtof(v, NULL);
		else if (ARG("--wd"))
			spec.weight_decay = strtof(v, NULL);
		else if (ARG("--clip"))
			spec.clip_norm = strtof(v, NULL);
		else if (ARG("--threads"))
			threads = atoi(v);
		else if (ARG("--loss"))
		{
			spec.loss = strcmp(v, "bce") == 0 ? NN_LOSS_SIGMOID_BCE :
				strcmp(v, "ce") == 0 ? NN_LOSS_SOFTMAX_CE : -1;
			if (spec.loss < 0)
			{
				fprintf(stderr, "nn_xcheck: bad --loss %s\n", v);
				return 2;
			}
		}
		else if (ARG("--class-weights"))
		{
			if ((ncw = parse_weights(v, cw, (int) (sizeof(cw) / sizeof(cw[0])))) < 1)
			{
				fprintf(stderr, "nn_xcheck: bad --class-weights %s\n", v);
				return 2;
			}
		}
		else if (ARG("--weights-in"))
			win = v;
		else if (ARG("--x"))
			xf = v;
		else if (ARG("--y"))
			yf = v;
		else if (ARG("--n"))
			n = atol(v);
		else if (ARG("--losses"))
			lf = v;
		else if (ARG("--eval-out"))
			eout = v;
		else if (ARG("--weights-out"))
			wout = v;
		else
		{
			fprintf(stderr, "nn_xcheck: bad argument %s\n", a);
			return 2;
		}
#undef ARG
	}
	if (arch_parse_input(input, &spec) || arch_parse_layers(arch, &spec))
	{
		fprintf(stderr, "nn_xcheck: bad --input or --arch\n");
		return 2;
	}
	if (spec.optimizer < 0)
	{
		fprintf(stderr, "nn_xcheck: bad --opt\n");
		return 2;
	}
	if (nn_blas_init(threads, &e) != NN_OK)
		die("nn_blas_init", &e);
	if (nn_spec_validate(&spec, &e) != NN_OK)
		die("nn_spec_validate", &e);
	if (nn_model_create(&spec, &m, &e) != NN_OK)
		die("nn_model_create", &e);
	if (ncw > 0 && nn_model_set_class_weights(m, cw, ncw, &e) != NN_OK)
		die("nn_model_set_class_weights", &e);

	nt = nn_model_n_tensors(m);
	for (t = 0; t < nt; t++)
	{
		nn_tensor	tt;
		int			d;

		if (nn_model_tensor(m, t, &tt, &e) != NN_OK)
			die("nn_model_tensor", &e);
		printf("tensor %d %s layer=%d shape=", t, tt.name, tt.layer);
		for (d = 0; d < tt.ndim; d++)
			printf("%s%d", d ? "x" : "", tt.shape[d]);
		printf(" size=%lld\n", (long long) tt.size);
		total += tt.size;
	}
	printf("params %lld\n", (long long) total);
	if (describe)
	{
		nn_model_free(m);
		return 0;
	}
	if (!xf || !yf || n <= 0 || !lf || !wout)
	{
		fprintf(stderr, "nn_xcheck: need --x --y --n --losses --weights-out\n");
		return 2;
	}

	{
		int32_t		in_dim = nn_model_in_dim(m),
					y_dim = nn_model_y_dim(m);
		float	   *x = read_f32(xf, (size_t) n * in_dim),
				   *y = read_f32(yf, (size_t) n * y_dim),
				   *w0 = NULL;
		long		nw = total;
		FILE	   *lo,
				   *wo;
		long		r;
		int			step = 0;
		int64_t		a0,
					a1;
		int			identical = 1;
		double		maxdiff = 0;
		nn_result	res;

		if (!x || !y)
			return 2;
		if (win)
		{
			if (file_floats(win) != nw)
			{
				fprintf(stderr, "nn_xcheck: %s holds %ld floats, model has %ld\n",
						win, file_floats(win), nw);
				return 2;
			}
			w0 = read_f32(win, nw);
			if (!w0 || import_weights(m, w0, nw))
				return 2;
		}
		lo = fopen(lf, "w");
		if (!lo)
			return 2;
		a0 = nn_model_alloc_count(m);
		for (r = 0; r < n; r += spec.batch_size)
		{
			long		rows = n - r < spec.batch_size ? n - r : spec.batch_size;
			nn_status	s;

			memset(&res, 0, sizeof res);
			s = nn_train(m, x + (size_t) r * in_dim, y + (size_t) r * y_dim, rows,
						 0, &res, &e);
			if (s != NN_OK)
				die("nn_train", &e);
			if (res.rows != rows || res.steps != 1)
			{
				fprintf(stderr, "nn_xcheck: step %d: rows %lld steps %lld (want %ld, 1)\n",
						step, (long long) res.rows, (long long) res.steps, rows);
				return 3;
			}
			fprintf(lo, "%d %ld %.9g\n", step, rows, res.loss_sum / res.rows);
			step++;
		}
		a1 = nn_model_alloc_count(m);
		fclose(lo);

		wo = fopen(wout, "wb");
		if (!wo)
			return 2;
		for (t = 0; t < nt; t++)
		{
			nn_tensor	tt;

			nn_model_tensor(m, t, &tt, &e);
			if (fwrite(tt.data, sizeof(float), tt.size, wo) != (size_t) tt.size)
				return 2;
		}
		fclose(wo);

		/* evaluation mode after training (batchnorm: the running statistics) */
		if (eout)
		{
			int32_t		od = nn_model_out_dim(m);
			float	   *p = malloc(sizeof(float) * (size_t) n * od);
			FILE	   *eo = fopen(eout, "wb");

			if (!p || !eo)
				return 2;
			if (nn_predict(m, x, n, p, &e) != NN_OK)
				die("nn_predict", &e);
			if (fwrite(p, sizeof(float), (size_t) n * od, eo) != (size_t) n * od)
				return 2;
			fclose(eo);
			free(p);
		}

		/* streaming path: same weights, whole buffer in one call */
		if (nn_model_create(&spec, &m2, &e) != NN_OK)
			die("nn_model_create", &e);
		if (ncw > 0 && nn_model_set_class_weights(m2, cw, ncw, &e) != NN_OK)
			die("nn_model_set_class_weights", &e);
		if (w0 && import_weights(m2, w0, nw))
			return 2;
		if (!w0)
		{
			/* same seed gives the same initial weights; nothing to import */
		}
		memset(&res, 0, sizeof res);
		if (nn_train(m2, x, y, n, 0, &res, &e) != NN_OK)
			die("nn_train (stream)", &e);
		if (res.steps != step || res.rows != n)
		{
			fprintf(stderr, "nn_xcheck: stream: steps %lld rows %lld (want %d, %ld)\n",
					(long long) res.steps, (long long) res.rows, step, n);
			identical = 0;
		}
		for (t = 0; t < nt; t++)
		{
			nn_tensor	ta,
						tb;
			int64_t		k;

			nn_model_tensor(m, t, &ta, &e);
			nn_model_tensor(m2, t, &tb, &e);
			if (memcmp(ta.data, tb.data, ta.size * sizeof(float)) != 0)
				identical = 0;
			for (k = 0; k < ta.size; k++)
			{
				double		d = fabs((double) ta.data[k] - tb.data[k]);

				if (d > maxdiff)
					maxdiff = d;
			}
		}
		printf("steps %d\n", step);
		printf("alloc_count_before %lld\nalloc_count_after %lld\n",
			   (long long) a0, (long long) a1);
		printf("stream_identical %d max_abs_diff %.3g\n", identical, maxdiff);
		nn_model_free(m);
		nn_model_free(m2);
		free(x);
		free(y);
		free(w0);
		return identical ? 0 : 4;
	}
}
