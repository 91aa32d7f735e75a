/*
 * export.c -- mop_export(): a trained model, ready to load elsewhere.
 *
 * format 'keras' returns one jsonb document:
 *
 *   model          a Keras 3 Sequential model exactly as model.to_json()
 *                  writes one (keras.models.model_from_json reads it), with
 *                  the dataset's standardisation as a first Normalization
 *                  layer (preprocessing => true) so it takes raw features,
 *                  and the output activation the loss fuses (softmax for
 *                  classes, sigmoid for binary targets) as a last layer, so
 *                  it predicts what mop_predict_proba gives;
 *   weights        every kernel and bias (and batchnorm's gamma, beta,
 *                  moving mean and moving variance) in the order Keras'
 *                  set_weights() takes them: layer name, tensor name, shape, and the
 *                  values flattened in row-major order (Keras' layouts:
 *                  dense (inputs, units), conv2d (kh, kw, in, filters));
 *   labels, features, input_shape, target, target_kind, preprocessing
 *                  (mean and std per feature), categories (the one-hot
 *                  vocabularies of categorical columns, whose inputs take
 *                  their column's place, in order): what the model's input
 *                  and output mean.
 *
 * The model part with preprocessing => false is also a configuration mop
 * itself reads (config "model"), so a model can be trained again elsewhere.
 * Values are printed with 9 significant digits: float32 exactly.
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "mop.h"

PG_FUNCTION_INFO_V1(mop_export);

/* A float as JSON: 9 significant digits round-trip a float32. */
static void
append_float(StringInfo s, double v)
{
	appendStringInfo(s, "%.9g", v);
}

/* A JSON string (escaped). */
static void
append_str(StringInfo s, const char *v)
{
	escape_json(s, v);
}

/* Keras' name of an activation function. */
static const char *
keras_activation(int32 act)
{
	switch (act)
	{
		case NN_ACT_RELU:
			return "relu";
		case NN_ACT_TANH:
			return "tanh";
		case NN_ACT_SIGMOID:
			return "sigmoid";
		case NN_ACT_GELU:
			return "gelu";
		case NN_ACT_SOFTMAX:
			return "softmax";
		default:
			return "linear";
	}
}

/* Open a layer object: class, module, name; the caller adds its config keys. */
static void
layer_begin_as(StringInfo s, bool *first, const char *cls, const char *name, bool trainable)
{
	if (!*first)
		appendStringInfoString(s, ", ");
	*first = false;
	appendStringInfo(s, "{\"module\": \"keras.layers\", \"class_name\": \"%s\", "
					 "\"registered_name\": null, \"config\": {\"name\": ", cls);
	append_str(s, name);
	if (trainable)
		appendStringInfoString(s, ", \"trainable\": true, \"dtype\": \"float32\"");
}

static void
layer_begin(StringInfo s, bool *first, const char *cls, const char *name)
{
	layer_begin_as(s, first, cls, name, true);
}

static void
layer_end(StringInfo s)
{
	appendStringInfoString(s, "}}");
}

/* kernel_initializer and kernel_regularizer of a dense or conv2d layer. */
static void
append_kernel_settings(StringInfo s, const nn_spec *spec, int i)
{
	int			init = spec->init;

	if (init == NN_INIT_AUTO)
		init = mop_relu_like_after(spec, i) ? NN_INIT_HE : NN_INIT_GLOROT;
	appendStringInfo(s, ", \"kernel_initializer\": {\"module\": \"keras.initializers\", "
					 "\"class_name\": \"%s\", \"config\": {\"seed\": null}, \"registered_name\": null}",
					 init == NN_INIT_HE ? "HeUniform" : "GlorotUniform");
	if (spec->l2 > 0)
	{
		/* mop's l2 is on the gradient; Keras' penalty l2 * sum(w^2) has twice that */
		appendStringInfoString(s, ", \"kernel_regularizer\": {\"module\": \"keras.regularizers\", "
							   "\"class_name\": \"L2\", \"config\": {\"l2\": ");
		append_float(s, (double) spec->l2 / 2.0);
		appendStringInfoString(s, "}, \"registered_name\": null}");
	}
}

/* The slope a leaky ReLU of the engine uses. */
static float
leaky_slope(const nn_layer_spec *l)
{
	return l->alpha != 0 ? l->alpha : 0.01f;
}

/* A separate LeakyReLU layer (Keras' activation string cannot carry a slope). */
static void
append_leaky(StringInfo s, bool *first, const char *name, const nn_layer_spec *l)
{
	layer_begin(s, first, "LeakyReLU", name);
	appendStringInfoString(s, ", \"negative_slope\": ");
	append_float(s, leaky_slope(l));
	layer_end(s);
}

/*
 * n values as a JSON array: flat, or nested (h, w, c) for an image (Keras'
 * Normalization wants its mean and variance in the input's shape).
 */
static void
append_values(StringInfo s, const double *v, bool square, const nn_spec *spec)
{
	int			n = spec->in_h * spec->in_w * spec->in_c;
	int			c = spec->in_c,
				w = spec->in_w;

	appendStringInfoChar(s, '[');
	for (int j = 0; j < n; j++)
	{
		bool		image = spec->in_h > 1 || spec->in_w > 1;

		if (j)
			appendStringInfoString(s, ", ");
		if (image && j % (w * c) == 0)
			appendStringInfoChar(s, '[');
		if (image && j % c == 0)
			appendStringInfoChar(s, '[');
		append_float(s, square ? v[j] * v[j] : v[j]);
		if (image && (j + 1) % c == 0)
			appendStringInfoChar(s, ']');
		if (image && (j + 1) % (w * c) == 0)
			appendStringInfoChar(s, ']');
	}
	appendStringInfoChar(s, ']');
}

/* The standardisation as a Keras Normalization layer over the input's axes. */
static void
append_normalization(StringInfo s, bool *first, const MopDataset *ds, const nn_spec *spec)
{
	bool		image = spec->in_h > 1 || spec->in_w > 1;

	layer_begin(s, first, "Normalization", "mop_standardisation");
	appendStringInfoString(s, image ? ", \"axis\": [-3, -2, -1], \"mean\": "
						   : ", \"axis\": [-1], \"mean\": ");
	append_values(s, ds->mean, false, spec);
	appendStringInfoString(s, ", \"variance\": ");
	append_values(s, ds->std, true, spec);
	appendStringInfoString(s, ", \"invert\": false");
	layer_end(s);
}

/* The Keras Sequential model of spec; names[i] gets the Keras name of layer i. */
static void
append_model(StringInfo s, const nn_spec *spec, const MopDataset *ds, bool preprocessing,
			 char **names)
{
	bool		image = spec->in_h > 1 || spec->in_w > 1;
	bool		flat = !image;
	bool		first = true;

	appendStringInfoString(s, "{\"module\": \"keras\", \"class_name\": \"Sequential\", "
						   "\"registered_name\": null, \"config\": {\"name\": \"mop_model\", "
						   "\"trainable\": true, \"dtype\": \"float32\", \"layers\": [");
	layer_begin_as(s, &first, "InputLayer", "input", false);
	if (image)
		appendStringInfo(s, ", \"batch_shape\": [null, %d, %d, %d], \"dtype\": \"float32\"",
						 spec->in_h, spec->in_w, spec->in_c);
	else
		appendStringInfo(s, ", \"batch_shape\": [null, %d], \"dtype\": \"float32\"", spec->in_c);
	layer_end(s);
	if (preprocessing && ds->normalized)
		append_normalization(s, &first, ds, spec);

	for (int i = 0; i < spec->n_layers; i++)
	{
		const nn_layer_spec *l = &spec->layers[i];
		char	   *name = NULL;

		switch (l->type)
		{
			case NN_LAYER_DENSE:
				if (!flat)
				{
					/* mop's dense reads an image row-major (h, w, c), as Flatten does */
					layer_begin(s, &first, "Flatten", psprintf("flatten_before_%d", i));
					appendStringInfoString(s, ", \"data_format\": \"channels_last\"");
					layer_end(s);
					flat = true;
				}
				name = psprintf("dense_%d", i);
				layer_begin(s, &first, "Dense", name);
				appendStringInfo(s, ", \"units\": %d, \"activation\": \"%s\", \"use_bias\": %s",
								 l->units, keras_activation(l->activation),
								 l->use_bias ? "true" : "false");
				append_kernel_settings(s, spec, i);
				layer_end(s);
				break;
			case NN_LAYER_CONV2D:
				name = psprintf("conv2d_%d", i);
				layer_begin(s, &first, "Conv2D", name);
				appendStringInfo(s, ", \"filters\": %d, \"kernel_size\": [%d, %d], "
								 "\"strides\": [%d, %d], \"padding\": \"%s\", "
								 "\"data_format\": \"channels_last\", \"activation\": \"%s\", "
								 "\"use_bias\": %s",
								 l->filters, l->kernel_h, l->kernel_w,
								 l->stride_h ? l->stride_h : 1, l->stride_w ? l->stride_w : 1,
								 l->padding == NN_PAD_SAME ? "same" : "valid",
								 keras_activation(l->activation), l->use_bias ? "true" : "false");
				append_kernel_settings(s, spec, i);
				layer_end(s);
				break;
			case NN_LAYER_MAXPOOL2D:
				name = psprintf("max_pooling2d_%d", i);
				layer_begin(s, &first, "MaxPooling2D", name);
				appendStringInfo(s, ", \"pool_size\": [%d, %d], \"strides\": [%d, %d], "
								 "\"padding\": \"%s\", \"data_format\": \"channels_last\"",
								 l->kernel_h, l->kernel_w,
								 l->stride_h ? l->stride_h : l->kernel_h,
								 l->stride_w ? l->stride_w : l->kernel_w,
								 l->padding == NN_PAD_SAME ? "same" : "valid");
				layer_end(s);
				break;
			case NN_LAYER_FLATTEN:
				name = psprintf("flatten_%d", i);
				layer_begin(s, &first, "Flatten", name);
				appendStringInfoString(s, ", \"data_format\": \"channels_last\"");
				layer_end(s);
				flat = true;
				break;
			case NN_LAYER_DROPOUT:
				name = psprintf("dropout_%d", i);
				layer_begin(s, &first, "Dropout", name);
				appendStringInfoString(s, ", \"rate\": ");
				append_float(s, l->rate);
				layer_end(s);
				break;
			case NN_LAYER_BATCHNORM:
				/* Keras' momentum weighs the old moving value, mop's (PyTorch's) the new one */
				name = psprintf("batch_normalization_%d", i);
				layer_begin(s, &first, "BatchNormalization", name);
				appendStringInfoString(s, ", \"axis\": -1, \"momentum\": ");
				append_float(s, 1.0 - (double) l->momentum);
				appendStringInfoString(s, ", \"epsilon\": ");
				append_float(s, l->eps);
				appendStringInfoString(s, ", \"center\": true, \"scale\": true");
				layer_end(s);
				break;
			case NN_LAYER_ACTIVATION:
				if (l->activation == NN_ACT_LEAKY_RELU)
				{
					name = psprintf("leaky_re_lu_%d", i);
					append_leaky(s, &first, name, l);
				}
				else
				{
					name = psprintf("activation_%d", i);
					layer_begin(s, &first, "Activation", name);
					appendStringInfo(s, ", \"activation\": \"%s\"", keras_activation(l->activation));
					layer_end(s);
				}
				break;
			default:
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("layer %d of the model has an unknown type %d", i, l->type)));
		}
		/* a fused leaky ReLU becomes a layer of its own after its dense or conv2d */
		if ((l->type == NN_LAYER_DENSE || l->type == NN_LAYER_CONV2D) &&
			l->activation == NN_ACT_LEAKY_RELU)
			append_leaky(s, &first, psprintf("leaky_re_lu_after_%d", i), l);
		names[i] = name;
	}
	/* the output activation the loss fuses */
	if (spec->loss == NN_LOSS_SOFTMAX_CE || spec->loss == NN_LOSS_SIGMOID_BCE)
	{
		layer_begin(s, &first, "Activation", "output_probabilities");
		appendStringInfo(s, ", \"activation\": \"%s\"",
						 spec->loss == NN_LOSS_SOFTMAX_CE ? "softmax" : "sigmoid");
		layer_end(s);
	}
	appendStringInfoString(s, "]}}");
}

/* The weights, in set_weights() order (the engine's tensor order is Keras'). */
static void
append_weights(StringInfo s, int64 model_id, nn_model *m, char **names)
{
	int32		n = nn_model_n_tensors(m);

	appendStringInfoChar(s, '[');
	for (int32 t = 0; t < n; t++)
	{
		nn_tensor	T;
		nn_error	err;
		nn_status	st = nn_model_tensor(m, t, &T, &err);
		const char *tname;

		if (st != NN_OK)
			mop_nn_error(st, &err, "could not read the model's weights");
		tname = strrchr(T.name, '.') ? strrchr(T.name, '.') + 1 : T.name;
		/* Keras' names of the running statistics */
		if (strcmp(tname, "running_mean") == 0)
			tname = "moving_mean";
		else if (strcmp(tname, "running_var") == 0)
			tname = "moving_variance";
		if (t)
			appendStringInfoString(s, ", ");
		appendStringInfoString(s, "{\"layer\": ");
		append_str(s, names[T.layer]);
		appendStringInfoString(s, ", \"name\": ");
		append_str(s, tname);
		appendStringInfoString(s, ", \"shape\": [");
		for (int d = 0; d < T.ndim; d++)
			appendStringInfo(s, d ? ", %d" : "%d", T.shape[d]);
		appendStringInfoString(s, "], \"values\": [");
		for (int64 j = 0; j < T.size; j++)
		{
			if (!isfinite(T.data[j]))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("model " INT64_FORMAT " has a non-finite weight in %s", model_id, T.name),
						 errhint("A diverged model cannot be exported; export one of the run's other models.")));
			if (j)
				appendStringInfoString(s, ", ");
			append_float(s, T.data[j]);
			if ((j & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		appendStringInfoString(s, "]}");
	}
	appendStringInfoChar(s, ']');
}

/* What the model's input and output mean. */
static void
append_dataset(StringInfo s, const MopDataset *ds, const nn_spec *spec)
{
	appendStringInfoString(s, ", \"dataset\": ");
	append_str(s, ds->name);
	appendStringInfoString(s, ", \"features\": [");
	for (int j = 0; j < ds->nfeatcols; j++)
	{
		if (j)
			appendStringInfoString(s, ", ");
		append_str(s, ds->featcols[j]);
	}
	if (spec->in_h > 1 || spec->in_w > 1)
		appendStringInfo(s, "], \"input_shape\": [%d, %d, %d]", spec->in_h, spec->in_w, spec->in_c);
	else
		appendStringInfo(s, "], \"input_shape\": [%d]", spec->in_c);
	appendStringInfoString(s, ", \"target\": ");
	append_str(s, ds->target);
	appendStringInfo(s, ", \"target_kind\": \"%s\", \"labels\": ", mop_target_kind_name(ds->target_kind));
	if (ds->nclasses > 0)
	{
		appendStringInfoChar(s, '[');
		for (int j = 0; j < ds->nclasses; j++)
		{
			if (j)
				appendStringInfoString(s, ", ");
			append_str(s, ds->labels[j]);
		}
		appendStringInfoChar(s, ']');
	}
	else
		appendStringInfoString(s, "null");
	appendStringInfoString(s, ", \"preprocessing\": ");
	if (ds->normalized)
	{
		appendStringInfoString(s, "{\"standardise\": true, \"mean\": [");
		for (int j = 0; j < ds->nfeatures; j++)
		{
			if (j)
				appendStringInfoString(s, ", ");
			append_float(s, ds->mean[j]);
		}
		appendStringInfoString(s, "], \"std\": [");
		for (int j = 0; j < ds->nfeatures; j++)
		{
			if (j)
				appendStringInfoString(s, ", ");
			append_float(s, ds->std[j]);
		}
		appendStringInfoString(s, "]}");
	}
	else
		appendStringInfoString(s, "{\"standardise\": false}");
	/* categorical columns: the input is their one-hot encoding, in place */
	if (ds->categories)
	{
		appendStringInfoString(s, ", \"categories\": ");
		appendStringInfoString(s, ds->categories);
	}
}

/*
 * mop_export(model_id bigint, format text, preprocessing boolean,
 * checkpoint text) -> jsonb
 */
Datum
mop_export(PG_FUNCTION_ARGS)
{
	int64		model_id = PG_GETARG_INT64(0);
	char	   *format = text_to_cstring(PG_GETARG_TEXT_PP(1));
	bool		preprocessing = PG_GETARG_BOOL(2);
	MopCheckpoint which = mop_checkpoint_arg(fcinfo, 3);
	MemoryContext opcxt,
				oldcxt;
	MopDataset *ds;
	ModelHandle *h;
	const nn_spec *spec;
	char	  **names;
	StringInfoData s;
	Datum		result;

	if (strcmp(format, "keras") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown export format \"%s\"", format),
				 errhint("mop exports format 'keras' (a Keras 3 model and its weights).")));
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_export", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(opcxt);
	h = mop_model_of(model_id, which, opcxt, &ds);
	spec = nn_model_spec(h->model);
	names = palloc0(sizeof(char *) * Max(spec->n_layers, 1));

	initStringInfo(&s);
	appendStringInfo(&s, "{\"format\": \"keras\", \"model_id\": " INT64_FORMAT
					 ", \"checkpoint\": \"%s\", \"model\": ", model_id,
					 which == MOP_CHECKPOINT_LAST ? "last" : "best");
	append_model(&s, spec, ds, preprocessing, names);
	appendStringInfoString(&s, ", \"weights\": ");
	append_weights(&s, model_id, h->model, names);
	append_dataset(&s, ds, spec);
	appendStringInfoChar(&s, '}');

	MemoryContextSwitchTo(oldcxt);
	result = DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data));
	MemoryContextDelete(opcxt);
	PG_RETURN_DATUM(result);
}
