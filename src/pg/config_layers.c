/*
 * config_layers.c -- the "model" of a configuration: its list of layers.
 *
 * The model is {"layers": [...]}, a bare list of layers, or a Keras
 * Sequential model (keras.c); a layer is {"type": "dense", "units": 10, ...}
 * or Keras' serialised {"class_name": "Dense", "config": {...}}.  Every key
 * of a layer is checked for its layer type; what a type needs is required,
 * never guessed (only maxpool2d's pool size defaults to 2).
 */
#include "postgres.h"

#include "utils/jsonb.h"

#include "config_internal.h"

/* Path of the layer list as the user wrote it, for error messages. */
const char *cfg_layers_path = "model.layers";

/* The layer type named type into l (in Keras' form also its activation layers). */
static void
layer_type(const char *type, const char *tkey, bool keras, const char *path,
		   nn_layer_spec *l)
{
	char	   *t = cfg_squash(type);
	char		field[256];

	if (keras && strcmp(t, "relu") == 0)
	{
		l->type = NN_LAYER_ACTIVATION;
		l->activation = NN_ACT_RELU;
	}
	else if (keras && strcmp(t, "leakyrelu") == 0)
	{
		l->type = NN_LAYER_ACTIVATION;
		l->activation = NN_ACT_LEAKY_RELU;
		l->alpha = 0.3f;	/* Keras' default slope */
	}
	else if (keras && strcmp(t, "softmax") == 0)
	{
		l->type = NN_LAYER_ACTIVATION;
		l->activation = NN_ACT_SOFTMAX;
	}
	else if (strcmp(t, "dense") == 0 || strcmp(t, "linear") == 0)
		l->type = NN_LAYER_DENSE;
	else if (strcmp(t, "conv2d") == 0 || strcmp(t, "convolution2d") == 0)
		l->type = NN_LAYER_CONV2D;
	else if (strcmp(t, "maxpool2d") == 0 || strcmp(t, "maxpooling2d") == 0 ||
			 strcmp(t, "maxpool") == 0)
		l->type = NN_LAYER_MAXPOOL2D;
	else if (strcmp(t, "flatten") == 0)
		l->type = NN_LAYER_FLATTEN;
	else if (strcmp(t, "dropout") == 0)
		l->type = NN_LAYER_DROPOUT;
	else if (strcmp(t, "activation") == 0)
		l->type = NN_LAYER_ACTIVATION;
	else if (strcmp(t, "batchnorm") == 0 || strcmp(t, "batchnormalization") == 0)
	{
		l->type = NN_LAYER_BATCHNORM;
		/* PyTorch's defaults; Keras' (momentum 0.99 of the old value, epsilon 1e-3) in its form */
		l->momentum = keras ? 0.01f : 0.1f;
		l->eps = keras ? 1e-3f : 1e-5f;
	}
	else
	{
		snprintf(field, sizeof(field), "%s.%s", path, tkey);
		cfg_error(field, "unknown layer type \"%s\" (use dense, conv2d, maxpool2d, flatten, dropout, activation or batchnorm)", type);
	}
}

/* One key k of a layer (of type as written) into l. */
static void
layer_key(const char *k, const JsonbValue *v, const char *field, const char *type,
		  bool keras, nn_layer_spec *l)
{
	int			t = l->type;

	if (strcmp(k, "units") == 0 && t == NN_LAYER_DENSE)
		l->units = (int32) cfg_int(v, field, 1, NN_MAX_DIM);
	else if (strcmp(k, "filters") == 0 && t == NN_LAYER_CONV2D)
		l->filters = (int32) cfg_int(v, field, 1, NN_MAX_DIM);
	else if (strcmp(k, "kernel_size") == 0 && t == NN_LAYER_CONV2D)
		cfg_pair(v, field, &l->kernel_h, &l->kernel_w);
	else if (strcmp(k, "pool_size") == 0 && t == NN_LAYER_MAXPOOL2D)
		cfg_pair(v, field, &l->kernel_h, &l->kernel_w);
	else if (strcmp(k, "strides") == 0 &&
			 (t == NN_LAYER_CONV2D || t == NN_LAYER_MAXPOOL2D))
	{
		if (v->type == jbvNull)
			l->stride_h = l->stride_w = 0;
		else
			cfg_pair(v, field, &l->stride_h, &l->stride_w);
	}
	else if (strcmp(k, "padding") == 0 &&
			 (t == NN_LAYER_CONV2D || t == NN_LAYER_MAXPOOL2D))
	{
		char	   *p = cfg_squash(cfg_string(v, field));

		if (strcmp(p, "valid") == 0)
			l->padding = NN_PAD_VALID;
		else if (strcmp(p, "same") == 0)
			l->padding = NN_PAD_SAME;
		else
			cfg_error(field, "must be \"valid\" or \"same\"");
	}
	else if (strcmp(k, "activation") == 0 &&
			 (t == NN_LAYER_DENSE || t == NN_LAYER_CONV2D ||
			  t == NN_LAYER_ACTIVATION))
	{
		l->activation = cfg_activation(v, field);
		/* Keras' leaky_relu activation slope, unless alpha says otherwise */
		if (keras && l->activation == NN_ACT_LEAKY_RELU && l->alpha == 0)
			l->alpha = 0.2f;
	}
	else if (strcmp(k, "alpha") == 0 || strcmp(k, "negative_slope") == 0)
	{
		double		a = cfg_number(v, field);

		if (a < 0 || a >= 1)
			cfg_error(field, "must be >= 0 and < 1");
		l->alpha = (float) a;
		/* a Keras ReLU layer with a slope is a leaky ReLU; a leaky one without, a ReLU */
		if (keras && t == NN_LAYER_ACTIVATION && l->activation == NN_ACT_RELU && a > 0)
			l->activation = NN_ACT_LEAKY_RELU;
		else if (keras && t == NN_LAYER_ACTIVATION && l->activation == NN_ACT_LEAKY_RELU && a == 0)
			l->activation = NN_ACT_RELU;
	}
	else if (strcmp(k, "use_bias") == 0 &&
			 (t == NN_LAYER_DENSE || t == NN_LAYER_CONV2D))
		l->use_bias = cfg_bool(v, field) ? 1 : 0;
	else if (strcmp(k, "rate") == 0 && t == NN_LAYER_DROPOUT)
	{
		double		r = cfg_number(v, field);

		if (r < 0 || r >= 1)
			cfg_error(field, "must be >= 0 and < 1");
		l->rate = (float) r;
	}
	else if (strcmp(k, "momentum") == 0 && t == NN_LAYER_BATCHNORM)
	{
		double		mo = cfg_number(v, field);

		if (!(mo >= 0 && mo <= 1))
			cfg_error(field, "must be >= 0 and <= 1");
		/* Keras' momentum is the weight of the old value, PyTorch's (mop's) of the new */
		l->momentum = (float) (keras ? 1.0 - mo : mo);
	}
	else if ((strcmp(k, "eps") == 0 || strcmp(k, "epsilon") == 0) && t == NN_LAYER_BATCHNORM)
	{
		double		e = cfg_number(v, field);

		if (!(e > 0 && e <= 1))
			cfg_error(field, "must be > 0 and <= 1");
		l->eps = (float) e;
	}
	else if (strcmp(k, "name") == 0)
		(void) cfg_string(v, field);
	else if (!keras || !keras_layer_key(k, v, field, l))
		cfg_error(field, "unknown key for a layer of type \"%s\"", type);
}

/* What a layer of l's type cannot do without: refused naming the key at path. */
static void
layer_required(const char *path, nn_layer_spec *l)
{
	char		field[256];

	if (l->type == NN_LAYER_DENSE && l->units == 0)
	{
		snprintf(field, sizeof(field), "%s.units", path);
		cfg_error(field, "a dense layer needs \"units\"");
	}
	if (l->type == NN_LAYER_CONV2D && l->filters == 0)
	{
		snprintf(field, sizeof(field), "%s.filters", path);
		cfg_error(field, "a conv2d layer needs \"filters\"");
	}
	if (l->type == NN_LAYER_CONV2D && l->kernel_h == 0)
	{
		snprintf(field, sizeof(field), "%s.kernel_size", path);
		cfg_error(field, "a conv2d layer needs \"kernel_size\"");
	}
	if (l->type == NN_LAYER_MAXPOOL2D && l->kernel_h == 0)
		l->kernel_h = l->kernel_w = 2;
	if (l->type == NN_LAYER_ACTIVATION && l->activation == NN_ACT_NONE)
	{
		snprintf(field, sizeof(field), "%s.activation", path);
		cfg_error(field, "an activation layer needs \"activation\"");
	}
}

/*
 * Parse one layer object at path into l.  False for a Keras InputLayer,
 * which only states (and here checks) the input shape.
 */
static bool
parse_layer(JsonbValue *lv, const char *path, nn_layer_spec *l)
{
	JsonItem   *items;
	int			n;
	char	   *type = NULL;
	const char *tkey = NULL;
	bool		keras;
	char		field[256];

	if (lv->type != jbvBinary || !JsonContainerIsObject(lv->val.binary.data))
		cfg_error(path, "must be a JSON object such as {\"type\": \"dense\", \"units\": 10}");
	items = cfg_object_items(lv->val.binary.data, path, &n);

	/* Keras' serialised form: {"class_name": "Dense", "config": {...}} */
	keras = keras_layer_config(&items, &n, &path, &type, &tkey);
	if (!keras)
	{
		for (int i = 0; i < n; i++)
			if (strcmp(items[i].key, "type") == 0)
			{
				snprintf(field, sizeof(field), "%s.type", path);
				type = cfg_string(&items[i].val, field);
				tkey = "type";
			}
		if (type == NULL)
			cfg_error(path, "a layer needs a \"type\" (dense, conv2d, maxpool2d, flatten, dropout, activation or batchnorm)");
	}

	memset(l, 0, sizeof(*l));
	l->use_bias = 1;
	if (keras)
		keras_info.keras = true;
	if (keras && strcmp(cfg_squash(type), "inputlayer") == 0)
	{
		keras_input_layer(items, n, path);
		return false;
	}
	layer_type(type, tkey, keras, path, l);

	for (int i = 0; i < n; i++)
	{
		snprintf(field, sizeof(field), "%s.%s", path, items[i].key);
		if (strcmp(items[i].key, "type") == 0 && !keras)
			continue;
		layer_key(items[i].key, &items[i].val, field, type, keras, l);
	}

	/* Keras applies Dense to the last axis of an image; mop flattens it */
	if (keras && l->type == NN_LAYER_DENSE && !keras_info.flat)
		cfg_error(path, "a Dense layer on an image input: add a Flatten layer before it (Keras would apply it to the channels of every pixel)");
	if (l->type == NN_LAYER_CONV2D || l->type == NN_LAYER_MAXPOOL2D)
		keras_info.flat = false;
	else if (l->type == NN_LAYER_FLATTEN)
		keras_info.flat = true;

	layer_required(path, l);
	return true;
}

/* Parse the "model" value: {"layers": [...]}, a bare list of layers, or a Keras Sequential model. */
void
cfg_parse_model(JsonbValue *mv, nn_spec *spec)
{
	JsonbValue *layers = NULL;
	JsonbValue *elems;
	const char *lpath = "model.layers";
	int			n,
				nl = 0;

	if (mv->type == jbvBinary && JsonContainerIsArray(mv->val.binary.data))
	{
		layers = mv;
		lpath = "model";
	}
	else if (mv->type == jbvBinary && JsonContainerIsObject(mv->val.binary.data))
	{
		JsonItem   *items;
		int			ni;
		bool		keras = false;

		items = cfg_object_items(mv->val.binary.data, "model", &ni);
		for (int i = 0; i < ni; i++)
			keras |= strcmp(items[i].key, "class_name") == 0;
		if (keras)
		{
			keras_info.keras = true;
			layers = keras_sequential(items, ni, &lpath);
		}
		else
		{
			for (int i = 0; i < ni; i++)
			{
				if (strcmp(items[i].key, "layers") == 0)
					layers = &items[i].val;
				else if (strcmp(items[i].key, "name") == 0)
					(void) cfg_string(&items[i].val, "model.name");
				else
					cfg_error(psprintf("model.%s", items[i].key),
							  "unknown key (expected \"layers\")");
			}
			if (layers == NULL)
				cfg_error("model.layers", "is required");
		}
	}
	else
		cfg_error("model", "must be an object {\"layers\": [...]} or an array of layers");

	cfg_layers_path = lpath;
	elems = cfg_array_elems(layers, lpath, &n);
	if (n == 0)
		cfg_error(lpath, "must list at least one layer");
	if (n > NN_MAX_LAYERS)
		cfg_error(lpath, "at most %d layers are supported", NN_MAX_LAYERS);
	for (int i = 0; i < n; i++)
	{
		keras_info.cur = nl;
		keras_info.src[nl] = i;
		keras_info.init[nl] = -1;
		keras_info.l2[nl] = 0;
		if (parse_layer(&elems[i], psprintf("%s[%d]", lpath, i), &spec->layers[nl]))
			nl++;
	}
	if (nl == 0)
		cfg_error(lpath, "must list at least one layer besides the input");
	spec->n_layers = nl;
	/* batchnorm normalises what a dense or conv2d layer before it computes */
	for (int i = 0, seen = 0; i < nl; i++)
	{
		seen |= spec->layers[i].type == NN_LAYER_DENSE || spec->layers[i].type == NN_LAYER_CONV2D;
		if (spec->layers[i].type == NN_LAYER_BATCHNORM && !seen)
			cfg_error(psprintf("%s[%d]", lpath, keras_info.src[i]),
					  "a batchnorm layer must follow a dense or conv2d layer");
	}
}

/*
 * The activation that follows layer i in the engine (its own, or that of an
 * Activation layer right after it): what NN_INIT_AUTO looks at.
 */
bool
mop_relu_like_after(const nn_spec *spec, int i)
{
	int32		a = spec->layers[i].activation;

	if (a == NN_ACT_NONE && i + 1 < spec->n_layers &&
		spec->layers[i + 1].type == NN_LAYER_ACTIVATION)
		a = spec->layers[i + 1].activation;
	return a == NN_ACT_RELU || a == NN_ACT_LEAKY_RELU || a == NN_ACT_GELU;
}
