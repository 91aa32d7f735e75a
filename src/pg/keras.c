/*
 * keras.c -- read a Keras model as model.to_json() prints it (Keras 3 or 2).
 *
 * A configuration's "model" may be a Keras Sequential model, and its layers
 * may be given in Keras' serialised form {"class_name": "Dense", "config":
 * {...}}.  Every Keras setting is either mapped (initializers, L2
 * regularizers, use_bias, the input shape checked against the dataset's) or
 * refused with the path of the key -- never dropped.  What the layers say
 * about initializers and L2 is gathered in keras_info while they are parsed
 * (config_layers.c) and settled into the spec once all are known.
 */
#include "postgres.h"

#include <math.h>

#include "utils/jsonb.h"

#include "config_internal.h"

KerasInfo	keras_info;

/* A Keras object {"class_name": C, "config": {...}, ...}: its class name (squashed) and config items. */
static char *
keras_object(const JsonbValue *v, const char *field, JsonItem **cfg, int *ncfg)
{
	JsonItem   *items;
	int			n;
	char	   *cls = NULL;

	*cfg = NULL;
	*ncfg = 0;
	if (v->type == jbvString)
		return cfg_squash(cfg_string(v, field));	/* Keras 2 also writes "glorot_uniform" */
	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		cfg_error(field, "must be a Keras object {\"class_name\": ..., \"config\": {...}}");
	items = cfg_object_items(v->val.binary.data, field, &n);
	for (int i = 0; i < n; i++)
	{
		if (strcmp(items[i].key, "class_name") == 0)
			cls = cfg_squash(cfg_string(&items[i].val, psprintf("%s.class_name", field)));
		else if (strcmp(items[i].key, "config") == 0)
		{
			if (items[i].val.type == jbvBinary && JsonContainerIsObject(items[i].val.val.binary.data))
				*cfg = cfg_object_items(items[i].val.val.binary.data, psprintf("%s.config", field), ncfg);
			else if (items[i].val.type != jbvNull)
				cfg_error(psprintf("%s.config", field), "must be a JSON object");
		}
		else if (strcmp(items[i].key, "module") != 0 && strcmp(items[i].key, "registered_name") != 0)
			cfg_error(psprintf("%s.%s", field, items[i].key), "unknown key in a Keras object");
	}
	if (cls == NULL)
		cfg_error(field, "a Keras object needs \"class_name\"");
	return cls;
}

/* The class name of a Keras object as written (for messages). */
static const char *
keras_class_name(const JsonbValue *v, const char *field)
{
	JsonItem   *items;
	int			n;

	if (v->type == jbvString)
		return cfg_string(v, field);
	items = cfg_object_items(v->val.binary.data, field, &n);
	for (int i = 0; i < n; i++)
		if (strcmp(items[i].key, "class_name") == 0)
			return cfg_string(&items[i].val, field);
	return "(unnamed)";
}

/* Keras "dtype": float32 only (a name, or a DTypePolicy of float32). */
static void
keras_dtype(const JsonbValue *v, const char *field)
{
	JsonItem   *cfg;
	int			n;
	const char *name = NULL;

	if (v->type == jbvNull)
		return;
	if (v->type == jbvString)
		name = cfg_string(v, field);
	else
	{
		(void) keras_object(v, field, &cfg, &n);
		for (int i = 0; i < n; i++)
			if (strcmp(cfg[i].key, "name") == 0)
				name = cfg_string(&cfg[i].val, psprintf("%s.config.name", field));
	}
	if (name == NULL || strcmp(name, "float32") != 0)
		cfg_error(field, "not supported: mop computes in float32 only (%s)",
				  name ? name : "no dtype name");
}

/* A Keras setting that must have its default value, or be refused naming it. */
static void
keras_require(bool ok, const char *field, const char *why)
{
	if (!ok)
		cfg_error(field, "not supported: %s", why);
}

/* A Keras shape [null, d1, ...] (batch_shape, batch_input_shape, build_input_shape): the dataset's? */
static void
keras_input_shape(const JsonbValue *v, const char *field, bool with_batch)
{
	int			n;
	JsonbValue *e;
	int32		d[4] = {0, 0, 0, 0};
	int32		h,
				w,
				c;

	if (v->type == jbvNull)
		return;
	e = cfg_array_elems(v, field, &n);
	if (with_batch)
	{
		if (n < 1 || e[0].type != jbvNull)
		{
			if (n >= 1 && e[0].type != jbvNull)
				cfg_error(field, "the batch dimension must be null (mop sets the batch size with \"batch_size\")");
		}
		e++;
		n--;
	}
	if (n != 1 && n != 3)
		cfg_error(field, "an input of %d dimensions is not supported (use [n] for vectors or [height, width, channels] for images)", n);
	for (int i = 0; i < n; i++)
		d[i] = (int32) cfg_int(&e[i], field, 1, NN_MAX_DIM);
	h = n == 1 ? 1 : d[0];
	w = n == 1 ? 1 : d[1];
	c = n == 1 ? d[0] : d[2];
	if (h != keras_info.in_h || w != keras_info.in_w || c != keras_info.in_c)
		cfg_error(field, "the model's input shape (%d, %d, %d) is not the dataset's (%d, %d, %d)",
				  h, w, c, keras_info.in_h, keras_info.in_w, keras_info.in_c);
}

/*
 * A layer in Keras' serialised form {"class_name": "Dense", "config":
 * {...}}: point *items, *n and *path at its config and set *type and *tkey
 * from its class name.  False (nothing changed) for a layer in mop's form.
 */
bool
keras_layer_config(JsonItem **items, int *n, const char **path, char **type,
				   const char **tkey)
{
	char		field[256];

	for (int i = 0; i < *n; i++)
		if (strcmp((*items)[i].key, "class_name") == 0)
		{
			JsonItem   *inner = NULL;
			int			ninner = 0;

			snprintf(field, sizeof(field), "%s.class_name", *path);
			*type = cfg_string(&(*items)[i].val, field);
			*tkey = "class_name";
			for (int j = 0; j < *n; j++)
			{
				const char *key = (*items)[j].key;

				if (strcmp(key, "config") == 0)
				{
					snprintf(field, sizeof(field), "%s.config", *path);
					if ((*items)[j].val.type != jbvBinary)
						cfg_error(field, "must be a JSON object");
					inner = cfg_object_items((*items)[j].val.val.binary.data, field, &ninner);
				}
				else if (strcmp(key, "class_name") != 0 &&
						 strcmp(key, "name") != 0 &&
						 strcmp(key, "module") != 0 &&
						 strcmp(key, "registered_name") != 0 &&
						 strcmp(key, "build_config") != 0)
				{
					snprintf(field, sizeof(field), "%s.%s", *path, key);
					cfg_error(field, "unknown key in a Keras layer (expected class_name and config)");
				}
			}
			*items = inner;
			*n = ninner;
			snprintf(field, sizeof(field), "%s.config", *path);
			*path = pstrdup(field);
			return true;
		}
	return false;
}

/* A Keras InputLayer's config: it only states (and here checks) the input shape. */
void
keras_input_layer(JsonItem *items, int n, const char *path)
{
	char		field[256];

	for (int i = 0; i < n; i++)
	{
		const char *k = items[i].key;
		JsonbValue *v = &items[i].val;

		snprintf(field, sizeof(field), "%s.%s", path, k);
		if (strcmp(k, "batch_shape") == 0 || strcmp(k, "batch_input_shape") == 0)
			keras_input_shape(v, field, true);
		else if (strcmp(k, "shape") == 0)
			keras_input_shape(v, field, false);
		else if (strcmp(k, "dtype") == 0)
			keras_dtype(v, field);
		else if (strcmp(k, "sparse") == 0 || strcmp(k, "ragged") == 0 ||
				 strcmp(k, "optional") == 0)
			keras_require(v->type == jbvNull || !cfg_bool(v, field), field,
						  "sparse, ragged or optional inputs");
		else if (strcmp(k, "name") == 0)
			(void) cfg_string(v, field);
		else
			cfg_error(field, "unknown key for an InputLayer");
	}
}

/*
 * A key of a Keras BatchNormalization config besides momentum and epsilon
 * (config_layers.c maps those): mop normalises the last axis, scales and
 * shifts, starts gamma and the moving variance at one, beta and the moving
 * mean at zero, and has no regularizers or constraints on them.
 */
static bool
keras_batchnorm_key(const char *k, const JsonbValue *v, const char *field)
{
	JsonItem   *cfg;
	int			n;

	if (strcmp(k, "axis") == 0)
	{
		int64		ax = cfg_int(v, field, -4, 3);
		int64		last = keras_info.flat ? 1 : 3;

		keras_require(ax == -1 || ax == last, field, "normalising another axis than the last (channels)");
	}
	else if (strcmp(k, "center") == 0 || strcmp(k, "scale") == 0)
		keras_require(cfg_bool(v, field), field, "batch normalisation without its beta or gamma (center and scale must be true)");
	else if (strcmp(k, "beta_initializer") == 0 || strcmp(k, "moving_mean_initializer") == 0)
		keras_require(strcmp(keras_object(v, field, &cfg, &n), "zeros") == 0 && n == 0, field,
					  "mop starts beta and the moving mean at zero (the initializer must be Zeros)");
	else if (strcmp(k, "gamma_initializer") == 0 || strcmp(k, "moving_variance_initializer") == 0)
		keras_require(strcmp(keras_object(v, field, &cfg, &n), "ones") == 0 && n == 0, field,
					  "mop starts gamma and the moving variance at one (the initializer must be Ones)");
	else if (strcmp(k, "beta_regularizer") == 0 || strcmp(k, "gamma_regularizer") == 0 ||
			 strcmp(k, "beta_constraint") == 0 || strcmp(k, "gamma_constraint") == 0)
		keras_require(v->type == jbvNull, field, "mop has no regularizer or constraint on beta and gamma (it must be null)");
	else if (strcmp(k, "synchronized") == 0 || strcmp(k, "renorm") == 0)
		keras_require(!cfg_bool(v, field), field, "synchronized batch normalisation or batch renormalisation");
	else
		return false;
	return true;
}

/*
 * One key of a layer's Keras config that mop's own form does not have:
 * map it (initializers, regularizers, input shapes) or refuse any value mop
 * cannot honour.  False if k is not such a key.
 */
bool
keras_layer_key(const char *k, const JsonbValue *v, const char *field, nn_layer_spec *l)
{
	JsonItem   *cfg;
	int			n;
	char	   *cls;

	if (strcmp(k, "trainable") == 0)
		keras_require(cfg_bool(v, field), field, "mop trains every layer (trainable must be true)");
	else if (strcmp(k, "dtype") == 0)
		keras_dtype(v, field);
	else if (strcmp(k, "kernel_initializer") == 0 &&
			 (l->type == NN_LAYER_DENSE || l->type == NN_LAYER_CONV2D))
	{
		cls = keras_object(v, field, &cfg, &n);
		for (int i = 0; i < n; i++)
			keras_require((strcmp(cfg[i].key, "seed") == 0 ||
						   strcmp(cfg[i].key, "input_axes") == 0 ||
						   strcmp(cfg[i].key, "output_axes") == 0) && cfg[i].val.type == jbvNull,
						  psprintf("%s.config.%s", field, cfg[i].key),
						  "an initializer's own settings (mop draws every weight from the configuration's \"seed\")");
		if (strcmp(cls, "glorotuniform") == 0)
			keras_info.init[keras_info.cur] = NN_INIT_GLOROT;
		else if (strcmp(cls, "heuniform") == 0)
			keras_info.init[keras_info.cur] = NN_INIT_HE;
		else
			cfg_error(field, "not supported: initializer %s (mop initialises kernels with GlorotUniform or HeUniform)",
					  keras_class_name(v, field));
	}
	else if (strcmp(k, "bias_initializer") == 0 &&
			 (l->type == NN_LAYER_DENSE || l->type == NN_LAYER_CONV2D))
	{
		cls = keras_object(v, field, &cfg, &n);
		keras_require(strcmp(cls, "zeros") == 0 && n == 0, field,
					  "mop starts every bias at zero (bias_initializer must be Zeros)");
	}
	else if (strcmp(k, "kernel_regularizer") == 0 &&
			 (l->type == NN_LAYER_DENSE || l->type == NN_LAYER_CONV2D))
	{
		double		l2 = 0,
					l1 = 0;

		if (v->type == jbvNull)
			return true;
		cls = keras_object(v, field, &cfg, &n);
		if (strcmp(cls, "l2") != 0 && strcmp(cls, "l1l2") != 0)
			cfg_error(field, "not supported: regularizer %s (mop has L2 on kernels)",
					  keras_class_name(v, field));
		for (int i = 0; i < n; i++)
		{
			char	   *f = psprintf("%s.config.%s", field, cfg[i].key);

			if (strcmp(cfg[i].key, "l2") == 0)
				l2 = cfg_number(&cfg[i].val, f);
			else if (strcmp(cfg[i].key, "l1") == 0)
				l1 = cfg_number(&cfg[i].val, f);
			else
				cfg_error(f, "unknown key of a regularizer");
		}
		keras_require(l1 == 0, psprintf("%s.config.l1", field), "mop has no L1 regularization");
		if (l2 < 0 || !isfinite(l2))
			cfg_error(psprintf("%s.config.l2", field), "must be >= 0");
		keras_info.l2[keras_info.cur] = l2;
	}
	else if (strcmp(k, "bias_regularizer") == 0 || strcmp(k, "activity_regularizer") == 0 ||
			 strcmp(k, "kernel_constraint") == 0 || strcmp(k, "bias_constraint") == 0)
		keras_require(v->type == jbvNull, field, "mop has no such regularizer or constraint (it must be null)");
	else if (strcmp(k, "data_format") == 0)
		keras_require(v->type == jbvNull || strcmp(cfg_string(v, field), "channels_last") == 0,
					  field, "mop's images are channels_last");
	else if (strcmp(k, "dilation_rate") == 0)
	{
		int32		h = 1,
					w = 1;

		cfg_pair(v, field, &h, &w);
		keras_require(h == 1 && w == 1, field, "dilated convolutions");
	}
	else if (strcmp(k, "groups") == 0)
		keras_require(cfg_int(v, field, 1, NN_MAX_DIM) == 1, field, "grouped convolutions");
	else if (strcmp(k, "noise_shape") == 0 || strcmp(k, "lora_rank") == 0 ||
			 strcmp(k, "lora_alpha") == 0 || strcmp(k, "quantization_config") == 0)
		keras_require(v->type == jbvNull, field, "it must be null");
	else if (strcmp(k, "seed") == 0 && l->type == NN_LAYER_DROPOUT)
		keras_require(v->type == jbvNull, field,
					  "a dropout seed of its own (mop draws masks from the configuration's \"seed\")");
	else if (strcmp(k, "batch_input_shape") == 0 || strcmp(k, "input_shape") == 0)
		keras_input_shape(v, field, strcmp(k, "batch_input_shape") == 0);
	else if (strcmp(k, "axis") == 0 && l->type == NN_LAYER_ACTIVATION &&
			 l->activation == NN_ACT_SOFTMAX)
		keras_require(cfg_int(v, field, -1, -1) == -1, field, "softmax over another axis than the last");
	else if (l->type == NN_LAYER_BATCHNORM && keras_batchnorm_key(k, v, field))
		return true;
	else if (strcmp(k, "max_value") == 0 && l->type == NN_LAYER_ACTIVATION)
		keras_require(v->type == jbvNull, field, "a capped ReLU (max_value must be null)");
	else if (strcmp(k, "threshold") == 0 && l->type == NN_LAYER_ACTIVATION)
		keras_require(cfg_number(v, field) == 0, field, "a ReLU threshold other than 0");
	else
		return false;
	return true;
}

/*
 * A Keras Sequential model as model.to_json() prints it:
 * {"class_name": "Sequential", "config": {"name", "trainable", "dtype",
 * "layers": [...], "build_input_shape"}, "module", "keras_version",
 * "backend", "registered_name", "build_config": {"input_shape"}}.
 * Returns its layer list.
 */
JsonbValue *
keras_sequential(JsonItem *items, int ni, const char **lpath)
{
	JsonbValue *layers = NULL;
	char	   *cls = NULL;

	for (int i = 0; i < ni; i++)
	{
		const char *k = items[i].key;
		JsonbValue *v = &items[i].val;
		char	   *f = psprintf("model.%s", k);

		if (strcmp(k, "class_name") == 0)
			cls = cfg_string(v, f);
		else if (strcmp(k, "config") == 0)
		{
			JsonItem   *cfg;
			int			n;

			if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
				cfg_error(f, "must be a JSON object");
			cfg = cfg_object_items(v->val.binary.data, f, &n);
			for (int j = 0; j < n; j++)
			{
				char	   *g = psprintf("model.config.%s", cfg[j].key);

				if (strcmp(cfg[j].key, "layers") == 0)
					layers = &cfg[j].val;
				else if (strcmp(cfg[j].key, "name") == 0)
					(void) cfg_string(&cfg[j].val, g);
				else if (strcmp(cfg[j].key, "trainable") == 0)
					keras_require(cfg_bool(&cfg[j].val, g), g, "mop trains every layer");
				else if (strcmp(cfg[j].key, "dtype") == 0)
					keras_dtype(&cfg[j].val, g);
				else if (strcmp(cfg[j].key, "build_input_shape") == 0)
					keras_input_shape(&cfg[j].val, g, true);
				else
					cfg_error(g, "unknown key of a Keras Sequential model");
			}
		}
		else if (strcmp(k, "build_config") == 0)
		{
			JsonItem   *cfg;
			int			n;

			if (v->type == jbvNull)
				continue;
			if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
				cfg_error(f, "must be a JSON object");
			cfg = cfg_object_items(v->val.binary.data, f, &n);
			for (int j = 0; j < n; j++)
			{
				char	   *g = psprintf("model.build_config.%s", cfg[j].key);

				if (strcmp(cfg[j].key, "input_shape") == 0)
					keras_input_shape(&cfg[j].val, g, true);
				else
					cfg_error(g, "unknown key of a Keras build_config");
			}
		}
		else if (strcmp(k, "compile_config") == 0)
			keras_require(v->type == jbvNull ||
						  (v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data) &&
						   JsonContainerSize(v->val.binary.data) == 0), f,
						  "a compiled model's settings (give the optimizer, loss and metric as mop's own keys)");
		else if (strcmp(k, "module") == 0 || strcmp(k, "keras_version") == 0 ||
				 strcmp(k, "backend") == 0 || strcmp(k, "registered_name") == 0)
			continue;
		else
			cfg_error(f, "unknown key of a Keras model");
	}
	if (cls == NULL || strcmp(cls, "Sequential") != 0)
		cfg_error("model.class_name", "only Keras Sequential models are supported, not %s",
				  cls ? cls : "(none)");
	if (layers == NULL)
		cfg_error("model.config.layers", "is required");
	*lpath = "model.config.layers";
	return layers;
}

/*
 * Settle what Keras layers said about initializers and L2 into the spec:
 * one initializer for all kernels (or He exactly before ReLU-like
 * activations and Glorot elsewhere, mop's "auto"), one L2 factor for all
 * kernels (Keras' penalty l2 * sum(w^2) is mop's l2 = 2 * that on the
 * gradient).  What cannot be expressed is refused naming the layer; a
 * conflicting "init" or "l2" given beside the model too.
 */
void
keras_settle(nn_spec *spec, bool have_init, bool have_l2)
{
	int			first = -1;
	bool		same = true,
				autoish = true;
	double		l2 = -1;

	if (!keras_info.keras)
		return;
	for (int i = 0; i < spec->n_layers; i++)
	{
		int			want;

		if (spec->layers[i].type != NN_LAYER_DENSE && spec->layers[i].type != NN_LAYER_CONV2D)
			continue;
		if (l2 < 0)
			l2 = keras_info.l2[i];
		else if (keras_info.l2[i] != l2)
			cfg_error(psprintf("%s[%d]", cfg_layers_path, keras_info.src[i]),
					  "not supported: L2 factors that differ between layers (%g here, %g before); mop has one l2 for all kernels",
					  keras_info.l2[i], l2);
		if (keras_info.init[i] < 0)
			continue;
		if (first < 0)
			first = keras_info.init[i];
		same &= keras_info.init[i] == first;
		want = mop_relu_like_after(spec, i) ? NN_INIT_HE : NN_INIT_GLOROT;
		if (keras_info.init[i] != want && autoish)
		{
			autoish = false;
			if (!same)
				cfg_error(psprintf("%s[%d]", cfg_layers_path, keras_info.src[i]),
						  "not supported: these kernel initializers (mop uses one for all kernels, or HeUniform exactly before ReLU-like activations and GlorotUniform elsewhere)");
		}
		if (!same && !autoish)
			cfg_error(psprintf("%s[%d]", cfg_layers_path, keras_info.src[i]),
					  "not supported: these kernel initializers (mop uses one for all kernels, or HeUniform exactly before ReLU-like activations and GlorotUniform elsewhere)");
	}
	if (first >= 0)
	{
		int			init = same ? first : NN_INIT_AUTO;

		if (have_init && spec->init != init)
			cfg_error("init", "conflicts with the kernel initializers of the Keras model");
		spec->init = init;
	}
	if (l2 > 0)
	{
		float		ml2 = (float) (2.0 * l2);

		if (have_l2 && spec->l2 != ml2)
			cfg_error("l2", "conflicts with the Keras model's kernel_regularizer (L2 %g is mop's l2 %g)",
					  l2, (double) ml2);
		spec->l2 = ml2;
	}
}
