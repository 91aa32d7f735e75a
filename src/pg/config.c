/*
 * config.c -- turn a model configuration (jsonb) into an engine nn_spec.
 *
 * The configuration is Keras-like:
 *
 *   {"model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"},
 *                         {"type": "dense", "units": 10}]},
 *    "optimizer": "adam", "learning_rate": 0.001, "batch_size": 128,
 *    "l2": 1e-5, "seed": 1}
 *
 * Every key is checked: an unknown key, a value of the wrong JSON type or
 * out of range is an ERROR (SQLSTATE 22023) whose message names the field
 * with its path, e.g. invalid value for "model.layers[1].units".  The model
 * may also be a Keras Sequential model exactly as Keras' model.to_json()
 * prints it (Keras 3 or 2), and layers may be given in Keras' serialised
 * form {"class_name": "Dense", "config": {...}}: every Keras setting is
 * either mapped (initializers, L2 regularizers, use_bias, the input shape
 * checked against the dataset's) or refused with the path of the key --
 * never dropped.  The input shape comes from the dataset; the output layer must
 * match the dataset's target (one unit per class for cross-entropy, one unit
 * for binary cross-entropy or regression) and is never added silently.  A
 * final softmax (with cross-entropy) or sigmoid (with binary cross-entropy)
 * is accepted and dropped, because the engine fuses it into the loss;
 * predictions are still probabilities.
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "mop.h"

/* One key/value of a JSON object. */
typedef struct JsonItem
{
	char	   *key;
	JsonbValue	val;
} JsonItem;

/* Raise the standard configuration error naming field. */
static void
cfg_error(const char *field, const char *fmt,...)
pg_attribute_printf(2, 3) pg_attribute_noreturn();

static void
cfg_error(const char *field, const char *fmt,...)
{
	char		buf[512];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for \"%s\": %s", field, buf)));
	pg_unreachable();
}

/* Items of the object c (error naming path if c is not an object). */
static JsonItem *
object_items(JsonbContainer *c, const char *path, int *n)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonItem   *items;
	int			cap = 16,
				cnt = 0;

	if (!JsonContainerIsObject(c))
		cfg_error(path, "must be a JSON object");
	items = palloc(sizeof(JsonItem) * cap);
	it = JsonbIteratorInit(c);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			if (cnt == cap)
			{
				cap *= 2;
				items = repalloc(items, sizeof(JsonItem) * cap);
			}
			items[cnt].key = pnstrdup(v.val.string.val, v.val.string.len);
		}
		else if (tok == WJB_VALUE)
			items[cnt++].val = v;
	}
	*n = cnt;
	return items;
}

/* Elements of the array v (error naming path if v is not an array). */
static JsonbValue *
array_elems(const JsonbValue *v, const char *path, int *n)
{
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;
	JsonbValue *elems;
	int			cap = 16,
				cnt = 0;

	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		cfg_error(path, "must be a JSON array");
	elems = palloc(sizeof(JsonbValue) * cap);
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (cnt == cap)
		{
			cap *= 2;
			elems = repalloc(elems, sizeof(JsonbValue) * cap);
		}
		elems[cnt++] = e;
	}
	*n = cnt;
	return elems;
}

/* A JSON number as double. */
static double
get_number(const JsonbValue *v, const char *field)
{
	double		d;

	if (v->type != jbvNumeric)
		cfg_error(field, "must be a number");
	d = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
										   NumericGetDatum(v->val.numeric)));
	if (isnan(d) || isinf(d))
		cfg_error(field, "must be a finite number");
	return d;
}

/* A JSON integer within [lo, hi]. */
static int64
get_int(const JsonbValue *v, const char *field, int64 lo, int64 hi)
{
	double		d = get_number(v, field);

	if (d != floor(d))
		cfg_error(field, "must be an integer");
	if (d < (double) lo || d > (double) hi)
	{
		if (hi == PG_INT32_MAX || hi == (int64) 1 << 53)
			cfg_error(field, "must be >= " INT64_FORMAT, lo);
		cfg_error(field, "must be between " INT64_FORMAT " and " INT64_FORMAT,
				  lo, hi);
	}
	return (int64) d;
}

/* A JSON string, palloc'd and NUL-terminated. */
static char *
get_string(const JsonbValue *v, const char *field)
{
	if (v->type != jbvString)
		cfg_error(field, "must be a string");
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* A JSON boolean. */
static bool
get_bool(const JsonbValue *v, const char *field)
{
	if (v->type != jbvBool)
		cfg_error(field, "must be true or false");
	return v->val.boolean;
}

/* Lower-case copy of s without '_' and '-' (for lenient name matching). */
static char *
squash(const char *s)
{
	char	   *r = palloc(strlen(s) + 1);
	char	   *p = r;

	for (; *s; s++)
		if (*s != '_' && *s != '-' && *s != ' ')
			*p++ = pg_ascii_tolower((unsigned char) *s);
	*p = '\0';
	return r;
}

/* Parse an activation name (JSON null means none). */
static int32
get_activation(const JsonbValue *v, const char *field)
{
	char	   *s;

	if (v->type == jbvNull)
		return NN_ACT_NONE;
	s = squash(get_string(v, field));
	if (strcmp(s, "linear") == 0 || strcmp(s, "none") == 0 ||
		strcmp(s, "identity") == 0)
		return NN_ACT_NONE;
	if (strcmp(s, "relu") == 0)
		return NN_ACT_RELU;
	if (strcmp(s, "leakyrelu") == 0)
		return NN_ACT_LEAKY_RELU;
	if (strcmp(s, "tanh") == 0)
		return NN_ACT_TANH;
	if (strcmp(s, "sigmoid") == 0)
		return NN_ACT_SIGMOID;
	if (strcmp(s, "gelu") == 0)
		return NN_ACT_GELU;
	if (strcmp(s, "softmax") == 0)
		return NN_ACT_SOFTMAX;
	cfg_error(field, "unknown activation \"%s\" (use linear, relu, leaky_relu, tanh, sigmoid, gelu or softmax)",
			  get_string(v, field));
}

/* An int or [h, w] pair, each in [1, NN_MAX_DIM]. */
static void
get_pair(const JsonbValue *v, const char *field, int32 *h, int32 *w)
{
	if (v->type == jbvNumeric)
	{
		*h = *w = (int32) get_int(v, field, 1, NN_MAX_DIM);
		return;
	}
	else
	{
		int			n;
		JsonbValue *e;

		if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
			cfg_error(field, "must be an integer or an array of two integers");
		e = array_elems(v, field, &n);
		if (n != 2)
			cfg_error(field, "must be an integer or an array of two integers");
		*h = (int32) get_int(&e[0], field, 1, NN_MAX_DIM);
		*w = (int32) get_int(&e[1], field, 1, NN_MAX_DIM);
	}
}

/*
 * What Keras' serialised form says beyond mop's own keys, gathered while the
 * layers are parsed and settled once all are known (keras_settle): the
 * initializer and L2 factor of every layer with a kernel, the input shape.
 */
typedef struct KerasInfo
{
	bool		keras;			/* some layer or the model came in Keras' form */
	int			init[NN_MAX_LAYERS];	/* per layer: -1 none given, else nn_init */
	double		l2[NN_MAX_LAYERS];	/* per layer: Keras L2 factor (0: none) */
	bool		flat;			/* the shape reaching the next layer is a vector */
	int32		in_h,
				in_w,
				in_c;			/* the dataset's input shape */
	int			cur;			/* index of the layer being parsed */
	int			src[NN_MAX_LAYERS];	/* per layer: its index in the JSON list */
} KerasInfo;

static KerasInfo kinfo;

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
		return squash(get_string(v, field));	/* Keras 2 also writes "glorot_uniform" */
	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		cfg_error(field, "must be a Keras object {\"class_name\": ..., \"config\": {...}}");
	items = object_items(v->val.binary.data, field, &n);
	for (int i = 0; i < n; i++)
	{
		if (strcmp(items[i].key, "class_name") == 0)
			cls = squash(get_string(&items[i].val, psprintf("%s.class_name", field)));
		else if (strcmp(items[i].key, "config") == 0)
		{
			if (items[i].val.type == jbvBinary && JsonContainerIsObject(items[i].val.val.binary.data))
				*cfg = object_items(items[i].val.val.binary.data, psprintf("%s.config", field), ncfg);
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
		return get_string(v, field);
	items = object_items(v->val.binary.data, field, &n);
	for (int i = 0; i < n; i++)
		if (strcmp(items[i].key, "class_name") == 0)
			return get_string(&items[i].val, field);
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
		name = get_string(v, field);
	else
	{
		(void) keras_object(v, field, &cfg, &n);
		for (int i = 0; i < n; i++)
			if (strcmp(cfg[i].key, "name") == 0)
				name = get_string(&cfg[i].val, psprintf("%s.config.name", field));
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
	e = array_elems(v, field, &n);
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
		d[i] = (int32) get_int(&e[i], field, 1, NN_MAX_DIM);
	h = n == 1 ? 1 : d[0];
	w = n == 1 ? 1 : d[1];
	c = n == 1 ? d[0] : d[2];
	if (h != kinfo.in_h || w != kinfo.in_w || c != kinfo.in_c)
		cfg_error(field, "the model's input shape (%d, %d, %d) is not the dataset's (%d, %d, %d)",
				  h, w, c, kinfo.in_h, kinfo.in_w, kinfo.in_c);
}

/*
 * One key of a layer's Keras config that mop's own form does not have:
 * map it (initializers, regularizers, input shapes) or refuse any value mop
 * cannot honour.  False if k is not such a key.
 */
static bool
keras_layer_key(const char *k, const JsonbValue *v, const char *field, nn_layer_spec *l)
{
	JsonItem   *cfg;
	int			n;
	char	   *cls;

	if (strcmp(k, "trainable") == 0)
		keras_require(get_bool(v, field), field, "mop trains every layer (trainable must be true)");
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
			kinfo.init[kinfo.cur] = NN_INIT_GLOROT;
		else if (strcmp(cls, "heuniform") == 0)
			kinfo.init[kinfo.cur] = NN_INIT_HE;
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
				l2 = get_number(&cfg[i].val, f);
			else if (strcmp(cfg[i].key, "l1") == 0)
				l1 = get_number(&cfg[i].val, f);
			else
				cfg_error(f, "unknown key of a regularizer");
		}
		keras_require(l1 == 0, psprintf("%s.config.l1", field), "mop has no L1 regularization");
		if (l2 < 0 || !isfinite(l2))
			cfg_error(psprintf("%s.config.l2", field), "must be >= 0");
		kinfo.l2[kinfo.cur] = l2;
	}
	else if (strcmp(k, "bias_regularizer") == 0 || strcmp(k, "activity_regularizer") == 0 ||
			 strcmp(k, "kernel_constraint") == 0 || strcmp(k, "bias_constraint") == 0)
		keras_require(v->type == jbvNull, field, "mop has no such regularizer or constraint (it must be null)");
	else if (strcmp(k, "data_format") == 0)
		keras_require(v->type == jbvNull || strcmp(get_string(v, field), "channels_last") == 0,
					  field, "mop's images are channels_last");
	else if (strcmp(k, "dilation_rate") == 0)
	{
		int32		h = 1,
					w = 1;

		get_pair(v, field, &h, &w);
		keras_require(h == 1 && w == 1, field, "dilated convolutions");
	}
	else if (strcmp(k, "groups") == 0)
		keras_require(get_int(v, field, 1, NN_MAX_DIM) == 1, field, "grouped convolutions");
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
		keras_require(get_int(v, field, -1, -1) == -1, field, "softmax over another axis than the last");
	else if (strcmp(k, "max_value") == 0 && l->type == NN_LAYER_ACTIVATION)
		keras_require(v->type == jbvNull, field, "a capped ReLU (max_value must be null)");
	else if (strcmp(k, "threshold") == 0 && l->type == NN_LAYER_ACTIVATION)
		keras_require(get_number(v, field) == 0, field, "a ReLU threshold other than 0");
	else
		return false;
	return true;
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
	char	   *tkey = NULL;
	bool		keras = false;
	char		field[256];

	if (lv->type != jbvBinary || !JsonContainerIsObject(lv->val.binary.data))
		cfg_error(path, "must be a JSON object such as {\"type\": \"dense\", \"units\": 10}");
	items = object_items(lv->val.binary.data, path, &n);

	/* Keras' serialised form: {"class_name": "Dense", "config": {...}} */
	for (int i = 0; i < n; i++)
		if (strcmp(items[i].key, "class_name") == 0)
		{
			JsonItem   *inner = NULL;
			int			ninner = 0;

			snprintf(field, sizeof(field), "%s.class_name", path);
			type = get_string(&items[i].val, field);
			tkey = "class_name";
			keras = true;
			for (int j = 0; j < n; j++)
			{
				if (strcmp(items[j].key, "config") == 0)
				{
					snprintf(field, sizeof(field), "%s.config", path);
					if (items[j].val.type != jbvBinary)
						cfg_error(field, "must be a JSON object");
					inner = object_items(items[j].val.val.binary.data, field, &ninner);
				}
				else if (strcmp(items[j].key, "class_name") != 0 &&
						 strcmp(items[j].key, "name") != 0 &&
						 strcmp(items[j].key, "module") != 0 &&
						 strcmp(items[j].key, "registered_name") != 0 &&
						 strcmp(items[j].key, "build_config") != 0)
				{
					snprintf(field, sizeof(field), "%s.%s", path, items[j].key);
					cfg_error(field, "unknown key in a Keras layer (expected class_name and config)");
				}
			}
			items = inner;
			n = ninner;
			snprintf(field, sizeof(field), "%s.config", path);
			path = pstrdup(field);
			break;
		}
	if (!keras)
	{
		for (int i = 0; i < n; i++)
			if (strcmp(items[i].key, "type") == 0)
			{
				snprintf(field, sizeof(field), "%s.type", path);
				type = get_string(&items[i].val, field);
				tkey = "type";
			}
		if (type == NULL)
			cfg_error(path, "a layer needs a \"type\" (dense, conv2d, maxpool2d, flatten, dropout or activation)");
	}

	memset(l, 0, sizeof(*l));
	l->use_bias = 1;
	if (keras)
		kinfo.keras = true;
	if (keras && strcmp(squash(type), "inputlayer") == 0)
	{
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
				keras_require(v->type == jbvNull || !get_bool(v, field), field,
							  "sparse, ragged or optional inputs");
			else if (strcmp(k, "name") == 0)
				(void) get_string(v, field);
			else
				cfg_error(field, "unknown key for an InputLayer");
		}
		return false;
	}
	{
		char	   *t = squash(type);

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
		else
		{
			snprintf(field, sizeof(field), "%s.%s", path, tkey);
			cfg_error(field, "unknown layer type \"%s\" (use dense, conv2d, maxpool2d, flatten, dropout or activation)", type);
		}
	}

	for (int i = 0; i < n; i++)
	{
		const char *k = items[i].key;
		JsonbValue *v = &items[i].val;
		int			t = l->type;

		snprintf(field, sizeof(field), "%s.%s", path, k);
		if (strcmp(k, "type") == 0 && !keras)
			continue;
		if (strcmp(k, "units") == 0 && t == NN_LAYER_DENSE)
			l->units = (int32) get_int(v, field, 1, NN_MAX_DIM);
		else if (strcmp(k, "filters") == 0 && t == NN_LAYER_CONV2D)
			l->filters = (int32) get_int(v, field, 1, NN_MAX_DIM);
		else if (strcmp(k, "kernel_size") == 0 && t == NN_LAYER_CONV2D)
			get_pair(v, field, &l->kernel_h, &l->kernel_w);
		else if (strcmp(k, "pool_size") == 0 && t == NN_LAYER_MAXPOOL2D)
			get_pair(v, field, &l->kernel_h, &l->kernel_w);
		else if (strcmp(k, "strides") == 0 &&
				 (t == NN_LAYER_CONV2D || t == NN_LAYER_MAXPOOL2D))
		{
			if (v->type == jbvNull)
				l->stride_h = l->stride_w = 0;
			else
				get_pair(v, field, &l->stride_h, &l->stride_w);
		}
		else if (strcmp(k, "padding") == 0 &&
				 (t == NN_LAYER_CONV2D || t == NN_LAYER_MAXPOOL2D))
		{
			char	   *p = squash(get_string(v, field));

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
			l->activation = get_activation(v, field);
			/* Keras' leaky_relu activation slope, unless alpha says otherwise */
			if (keras && l->activation == NN_ACT_LEAKY_RELU && l->alpha == 0)
				l->alpha = 0.2f;
		}
		else if (strcmp(k, "alpha") == 0 || strcmp(k, "negative_slope") == 0)
		{
			double		a = get_number(v, field);

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
			l->use_bias = get_bool(v, field) ? 1 : 0;
		else if (strcmp(k, "rate") == 0 && t == NN_LAYER_DROPOUT)
		{
			double		r = get_number(v, field);

			if (r < 0 || r >= 1)
				cfg_error(field, "must be >= 0 and < 1");
			l->rate = (float) r;
		}
		else if (strcmp(k, "name") == 0)
			(void) get_string(v, field);
		else if (keras && keras_layer_key(k, v, field, l))
			continue;
		else
			cfg_error(field, "unknown key for a layer of type \"%s\"", type);
	}

	/* Keras applies Dense to the last axis of an image; mop flattens it */
	if (keras && l->type == NN_LAYER_DENSE && !kinfo.flat)
		cfg_error(path, "a Dense layer on an image input: add a Flatten layer before it (Keras would apply it to the channels of every pixel)");
	if (l->type == NN_LAYER_CONV2D || l->type == NN_LAYER_MAXPOOL2D)
		kinfo.flat = false;
	else if (l->type == NN_LAYER_FLATTEN)
		kinfo.flat = true;

	/* required fields */
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
	return true;
}

/* Path of the layer list as the user wrote it, for error messages. */
static const char *layers_path = "model.layers";

/*
 * A Keras Sequential model as model.to_json() prints it:
 * {"class_name": "Sequential", "config": {"name", "trainable", "dtype",
 * "layers": [...], "build_input_shape"}, "module", "keras_version",
 * "backend", "registered_name", "build_config": {"input_shape"}}.
 * Returns its layer list.
 */
static JsonbValue *
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
			cls = get_string(v, f);
		else if (strcmp(k, "config") == 0)
		{
			JsonItem   *cfg;
			int			n;

			if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
				cfg_error(f, "must be a JSON object");
			cfg = object_items(v->val.binary.data, f, &n);
			for (int j = 0; j < n; j++)
			{
				char	   *g = psprintf("model.config.%s", cfg[j].key);

				if (strcmp(cfg[j].key, "layers") == 0)
					layers = &cfg[j].val;
				else if (strcmp(cfg[j].key, "name") == 0)
					(void) get_string(&cfg[j].val, g);
				else if (strcmp(cfg[j].key, "trainable") == 0)
					keras_require(get_bool(&cfg[j].val, g), g, "mop trains every layer");
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
			cfg = object_items(v->val.binary.data, f, &n);
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

/* Parse the "model" value: {"layers": [...]}, a bare list of layers, or a Keras Sequential model. */
static void
parse_model(JsonbValue *mv, nn_spec *spec)
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

		items = object_items(mv->val.binary.data, "model", &ni);
		for (int i = 0; i < ni; i++)
			keras |= strcmp(items[i].key, "class_name") == 0;
		if (keras)
		{
			kinfo.keras = true;
			layers = keras_sequential(items, ni, &lpath);
		}
		else
		{
			for (int i = 0; i < ni; i++)
			{
				if (strcmp(items[i].key, "layers") == 0)
					layers = &items[i].val;
				else if (strcmp(items[i].key, "name") == 0)
					(void) get_string(&items[i].val, "model.name");
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

	layers_path = lpath;
	elems = array_elems(layers, lpath, &n);
	if (n == 0)
		cfg_error(lpath, "must list at least one layer");
	if (n > NN_MAX_LAYERS)
		cfg_error(lpath, "at most %d layers are supported", NN_MAX_LAYERS);
	for (int i = 0; i < n; i++)
	{
		kinfo.cur = nl;
		kinfo.src[nl] = i;
		kinfo.init[nl] = -1;
		kinfo.l2[nl] = 0;
		if (parse_layer(&elems[i], psprintf("%s[%d]", lpath, i), &spec->layers[nl]))
			nl++;
	}
	if (nl == 0)
		cfg_error(lpath, "must list at least one layer besides the input");
	spec->n_layers = nl;
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

/*
 * Settle what Keras layers said about initializers and L2 into the spec:
 * one initializer for all kernels (or He exactly before ReLU-like
 * activations and Glorot elsewhere, mop's "auto"), one L2 factor for all
 * kernels (Keras' penalty l2 * sum(w^2) is mop's l2 = 2 * that on the
 * gradient).  What cannot be expressed is refused naming the layer; a
 * conflicting "init" or "l2" given beside the model too.
 */
static void
keras_settle(nn_spec *spec, bool have_init, bool have_l2)
{
	int			first = -1;
	bool		same = true,
				autoish = true;
	double		l2 = -1;

	if (!kinfo.keras)
		return;
	for (int i = 0; i < spec->n_layers; i++)
	{
		int			want;

		if (spec->layers[i].type != NN_LAYER_DENSE && spec->layers[i].type != NN_LAYER_CONV2D)
			continue;
		if (l2 < 0)
			l2 = kinfo.l2[i];
		else if (kinfo.l2[i] != l2)
			cfg_error(psprintf("%s[%d]", layers_path, kinfo.src[i]),
					  "not supported: L2 factors that differ between layers (%g here, %g before); mop has one l2 for all kernels",
					  kinfo.l2[i], l2);
		if (kinfo.init[i] < 0)
			continue;
		if (first < 0)
			first = kinfo.init[i];
		same &= kinfo.init[i] == first;
		want = mop_relu_like_after(spec, i) ? NN_INIT_HE : NN_INIT_GLOROT;
		if (kinfo.init[i] != want && autoish)
		{
			autoish = false;
			if (!same)
				cfg_error(psprintf("%s[%d]", layers_path, kinfo.src[i]),
						  "not supported: these kernel initializers (mop uses one for all kernels, or HeUniform exactly before ReLU-like activations and GlorotUniform elsewhere)");
		}
		if (!same && !autoish)
			cfg_error(psprintf("%s[%d]", layers_path, kinfo.src[i]),
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

/* Check a float in [lo, hi) or (lo, ...) per flags, then store it. */
static float
get_ranged(const JsonbValue *v, const char *field, double lo, bool lo_open,
		   double hi, bool has_hi)
{
	double		d = get_number(v, field);

	if (lo_open ? !(d > lo) : !(d >= lo))
		cfg_error(field, "must be %s %g", lo_open ? ">" : ">=", lo);
	if (has_hi && !(d < hi))
		cfg_error(field, "must be < %g", hi);
	return (float) d;
}

/* Output width of spec's network whatever its loss (-1 if shapes fail). */
static int32
network_out_dim(const nn_spec *spec)
{
	nn_spec		probe = *spec;

	probe.loss = NN_LOSS_MSE;
	probe.metric = NN_METRIC_MSE;
	return nn_spec_out_dim(&probe);
}

/*
 * Parse config into spec for dataset ds.  Everything is checked here or by
 * nn_spec_validate(); the result is a spec the engine accepts.
 */
void
mop_config_to_spec(Jsonb *config, const MopDataset *ds, nn_spec *spec)
{
	JsonItem   *items;
	int			n;
	bool		have_model = false;
	bool		have_loss = false;
	bool		have_metric = false;
	bool		have_wd = false;
	bool		have_init = false,
				have_l2 = false;
	int32		out_dim;
	nn_error	err;
	nn_status	st;

	nn_spec_init(spec);
	spec->in_h = ds->in_h;
	spec->in_w = ds->in_w;
	spec->in_c = ds->in_c;
	spec->seed = 0;
	memset(&kinfo, 0, sizeof(kinfo));
	kinfo.in_h = ds->in_h;
	kinfo.in_w = ds->in_w;
	kinfo.in_c = ds->in_c;
	kinfo.flat = ds->in_h == 1 && ds->in_w == 1;

	if (!JB_ROOT_IS_OBJECT(config))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration must be a JSON object"),
				 errhint("For example {\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 10}]}, \"learning_rate\": 0.01}.")));
	items = object_items(&config->root, "config", &n);

	for (int i = 0; i < n; i++)
	{
		const char *k = items[i].key;
		JsonbValue *v = &items[i].val;

		if (strcmp(k, "model") == 0)
		{
			parse_model(v, spec);
			have_model = true;
		}
		else if (strcmp(k, "optimizer") == 0)
		{
			char	   *o = squash(get_string(v, k));

			if (strcmp(o, "sgd") == 0)
				spec->optimizer = NN_OPT_SGD;
			else if (strcmp(o, "adam") == 0)
				spec->optimizer = NN_OPT_ADAM;
			else if (strcmp(o, "adamw") == 0)
				spec->optimizer = NN_OPT_ADAMW;
			else if (strcmp(o, "rmsprop") == 0)
				spec->optimizer = NN_OPT_RMSPROP;
			else
				cfg_error(k, "unknown optimizer \"%s\" (use sgd, adam, adamw or rmsprop)",
						  get_string(v, k));
		}
		else if (strcmp(k, "learning_rate") == 0 || strcmp(k, "lr") == 0)
			spec->lr = get_ranged(v, k, 0, true, 0, false);
		else if (strcmp(k, "momentum") == 0)
			spec->momentum = get_ranged(v, k, 0, false, 1, true);
		else if (strcmp(k, "nesterov") == 0)
			spec->nesterov = get_bool(v, k) ? 1 : 0;
		else if (strcmp(k, "beta1") == 0 || strcmp(k, "beta_1") == 0)
			spec->beta1 = get_ranged(v, k, 0, false, 1, true);
		else if (strcmp(k, "beta2") == 0 || strcmp(k, "beta_2") == 0)
			spec->beta2 = get_ranged(v, k, 0, false, 1, true);
		else if (strcmp(k, "epsilon") == 0 || strcmp(k, "eps") == 0)
			spec->eps = get_ranged(v, k, 0, true, 0, false);
		else if (strcmp(k, "rho") == 0)
			spec->rho = get_ranged(v, k, 0, false, 1, true);
		else if (strcmp(k, "l2") == 0)
		{
			spec->l2 = get_ranged(v, k, 0, false, 0, false);
			have_l2 = true;
		}
		else if (strcmp(k, "weight_decay") == 0)
		{
			spec->weight_decay = get_ranged(v, k, 0, false, 0, false);
			have_wd = spec->weight_decay > 0;
		}
		else if (strcmp(k, "clip_norm") == 0)
			spec->clip_norm = get_ranged(v, k, 0, false, 0, false);
		else if (strcmp(k, "batch_size") == 0)
			spec->batch_size = (int32) get_int(v, k, 1, NN_MAX_BATCH);
		else if (strcmp(k, "seed") == 0)
			spec->seed = (uint64) get_int(v, k, 0, (int64) 1 << 53);
		else if (strcmp(k, "top_k") == 0)
			spec->top_k = (int32) get_int(v, k, 1, MOP_MAX_CLASSES);
		else if (strcmp(k, "init") == 0)
		{
			char	   *s = squash(get_string(v, k));

			have_init = true;
			if (strcmp(s, "auto") == 0)
				spec->init = NN_INIT_AUTO;
			else if (strcmp(s, "he") == 0 || strcmp(s, "heuniform") == 0)
				spec->init = NN_INIT_HE;
			else if (strcmp(s, "glorot") == 0 || strcmp(s, "glorotuniform") == 0 ||
					 strcmp(s, "xavier") == 0)
				spec->init = NN_INIT_GLOROT;
			else
				cfg_error(k, "must be \"auto\", \"he\" or \"glorot\"");
		}
		else if (strcmp(k, "loss") == 0)
		{
			char	   *s = squash(get_string(v, k));

			have_loss = true;
			if (strcmp(s, "categoricalcrossentropy") == 0 ||
				strcmp(s, "sparsecategoricalcrossentropy") == 0 ||
				strcmp(s, "crossentropy") == 0 ||
				strcmp(s, "softmaxcrossentropy") == 0)
				spec->loss = NN_LOSS_SOFTMAX_CE;
			else if (strcmp(s, "binarycrossentropy") == 0 || strcmp(s, "bce") == 0)
				spec->loss = NN_LOSS_SIGMOID_BCE;
			else if (strcmp(s, "mse") == 0 || strcmp(s, "meansquarederror") == 0)
				spec->loss = NN_LOSS_MSE;
			else
				cfg_error(k, "unknown loss \"%s\" (use categorical_crossentropy, binary_crossentropy or mse)",
						  get_string(v, k));
		}
		else if (strcmp(k, "metric") == 0)
		{
			char	   *s = squash(get_string(v, k));

			have_metric = true;
			if (strcmp(s, "accuracy") == 0 || strcmp(s, "acc") == 0)
				spec->metric = NN_METRIC_ACCURACY;
			else if (strcmp(s, "topkaccuracy") == 0 ||
					 strcmp(s, "topkcategoricalaccuracy") == 0 ||
					 strcmp(s, "topk") == 0)
				spec->metric = NN_METRIC_TOPK;
			else if (strcmp(s, "mse") == 0 || strcmp(s, "meansquarederror") == 0)
				spec->metric = NN_METRIC_MSE;
			else if (strcmp(s, "mae") == 0 || strcmp(s, "meanabsoluteerror") == 0)
				spec->metric = NN_METRIC_MAE;
			else if (strcmp(s, "logloss") == 0 || strcmp(s, "crossentropy") == 0)
				spec->metric = NN_METRIC_LOG_LOSS;
			else if (strcmp(s, "r2") == 0 || strcmp(s, "r2score") == 0)
				spec->metric = NN_METRIC_R2;
			else if (strcmp(s, "precision") == 0)
				spec->metric = NN_METRIC_PRECISION;
			else if (strcmp(s, "recall") == 0)
				spec->metric = NN_METRIC_RECALL;
			else if (strcmp(s, "f1") == 0 || strcmp(s, "f1score") == 0)
				spec->metric = NN_METRIC_F1;
			else if (strcmp(s, "auc") == 0 || strcmp(s, "rocauc") == 0)
				spec->metric = NN_METRIC_AUC;
			else
				cfg_error(k, "unknown metric \"%s\" (use accuracy, top_k_accuracy, log_loss, precision, recall, f1, auc, mse, mae or r2)",
						  get_string(v, k));
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown configuration key \"%s\"", k),
					 errhint("Valid keys are model, optimizer, learning_rate, momentum, nesterov, beta1, beta2, epsilon, rho, l2, weight_decay, clip_norm, batch_size, loss, metric, top_k, init and seed.")));
	}

	if (!have_model)
		cfg_error("model", "is required, e.g. {\"layers\": [{\"type\": \"dense\", \"units\": 10}]}");
	keras_settle(spec, have_init, have_l2);
	if (have_wd && spec->optimizer != NN_OPT_ADAMW)
		cfg_error("weight_decay", "applies only to \"optimizer\": \"adamw\" (use \"l2\" for the others)");
	if (spec->nesterov && spec->optimizer != NN_OPT_SGD)
		cfg_error("nesterov", "applies only to \"optimizer\": \"sgd\"");

	/* loss and metric defaults follow the dataset's target */
	out_dim = network_out_dim(spec);
	if (!have_loss)
	{
		if (ds->target_kind == MOP_TARGET_REGRESSION)
			spec->loss = NN_LOSS_MSE;
		else if (ds->target_kind == MOP_TARGET_BINARY && out_dim == 1)
			spec->loss = NN_LOSS_SIGMOID_BCE;
		else
			spec->loss = NN_LOSS_SOFTMAX_CE;
	}
	if (!have_metric)
		spec->metric = (ds->target_kind == MOP_TARGET_REGRESSION) ?
			NN_METRIC_MSE : NN_METRIC_ACCURACY;

	/* the fused output activation is dropped (see the header comment) */
	{
		nn_layer_spec *last = &spec->layers[spec->n_layers - 1];
		int32		fused = spec->loss == NN_LOSS_SOFTMAX_CE ? NN_ACT_SOFTMAX :
			spec->loss == NN_LOSS_SIGMOID_BCE ? NN_ACT_SIGMOID : -1;

		if (last->type == NN_LAYER_ACTIVATION && last->activation == fused &&
			spec->n_layers > 1)
			spec->n_layers--;
		else if ((last->type == NN_LAYER_DENSE || last->type == NN_LAYER_CONV2D) &&
				 last->activation == fused)
			last->activation = NN_ACT_NONE;
	}

	/* loss and metric must fit the target kind */
	if (spec->loss == NN_LOSS_MSE && ds->target_kind != MOP_TARGET_REGRESSION)
		cfg_error("loss", "\"mse\" needs a regression target, but dataset \"%s\" has target kind \"%s\"",
				  ds->name, mop_target_kind_name(ds->target_kind));
	if (spec->loss != NN_LOSS_MSE && ds->target_kind == MOP_TARGET_REGRESSION)
		cfg_error("loss", "a cross-entropy loss needs a class target, but dataset \"%s\" has a regression target",
				  ds->name);
	if (spec->loss == NN_LOSS_SIGMOID_BCE && ds->nclasses != 2)
		cfg_error("loss", "\"binary_crossentropy\" needs a target with two classes, but dataset \"%s\" has %d",
				  ds->name, ds->nclasses);
	if ((spec->metric == NN_METRIC_ACCURACY || spec->metric == NN_METRIC_TOPK ||
		 spec->metric == NN_METRIC_LOG_LOSS || spec->metric == NN_METRIC_PRECISION ||
		 spec->metric == NN_METRIC_RECALL || spec->metric == NN_METRIC_F1 ||
		 spec->metric == NN_METRIC_AUC) &&
		ds->target_kind == MOP_TARGET_REGRESSION)
		cfg_error("metric", "\"%s\" needs a class target, but dataset \"%s\" has a regression target",
				  nn_metric_name(spec->metric), ds->name);
	if ((spec->metric == NN_METRIC_MSE || spec->metric == NN_METRIC_MAE ||
		 spec->metric == NN_METRIC_R2) &&
		ds->target_kind != MOP_TARGET_REGRESSION)
		cfg_error("metric", "\"%s\" needs a regression target, but dataset \"%s\" has target kind \"%s\"",
				  nn_metric_name(spec->metric), ds->name,
				  mop_target_kind_name(ds->target_kind));
	if (spec->metric == NN_METRIC_TOPK)
	{
		if (spec->top_k <= 0)
			spec->top_k = 5;
		if (spec->top_k > ds->nclasses)
			cfg_error("top_k", "must be <= %d, the number of classes of dataset \"%s\"",
					  ds->nclasses, ds->name);
	}

	/* the output layer must match the target; it is never added for you */
	out_dim = network_out_dim(spec);
	if (out_dim >= 0)
	{
		int			want = (spec->loss == NN_LOSS_SOFTMAX_CE) ? ds->nclasses : 1;
		int			li = -1;

		for (int i = spec->n_layers - 1; i >= 0; i--)
			if (spec->layers[i].type == NN_LAYER_DENSE ||
				spec->layers[i].type == NN_LAYER_CONV2D ||
				spec->layers[i].type == NN_LAYER_FLATTEN ||
				spec->layers[i].type == NN_LAYER_MAXPOOL2D)
			{
				li = i;
				break;
			}
		if (out_dim != want)
		{
			if (li >= 0 && spec->layers[li].type == NN_LAYER_DENSE)
				cfg_error(psprintf("%s[%d].units", layers_path, li),
						  "the output layer has %d units but must have %d (%s of dataset \"%s\")",
						  spec->layers[li].units, want,
						  spec->loss == NN_LOSS_SOFTMAX_CE ? "one per class" :
						  spec->loss == NN_LOSS_SIGMOID_BCE ? "one probability for the binary target" :
						  "one value for the regression target",
						  ds->name);
			cfg_error(layers_path,
					  "the network must end with a dense layer of %d units to fit dataset \"%s\" (its output has %d values)",
					  want, ds->name, out_dim);
		}
	}

	st = nn_spec_validate(spec, &err);
	if (st != NN_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid model configuration: %s", err.msg),
				 errdetail("Dataset \"%s\" has input shape [%d, %d, %d].",
						   ds->name, ds->in_h, ds->in_w, ds->in_c)));
	mop_check_model_memory(spec);
}
