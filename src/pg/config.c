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
 * with its path, e.g. invalid value for "model.layers[1].units".  Layers may
 * also be given in Keras' serialised form {"class_name": "Dense", "config":
 * {...}}, in which case Keras bookkeeping keys (name, initializers...) are
 * ignored.  The input shape comes from the dataset; the output layer must
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

/* Keras bookkeeping keys ignored in the {"class_name", "config"} form. */
static bool
keras_ignored_key(const char *k)
{
	static const char *const keys[] = {
		"name", "trainable", "dtype", "kernel_initializer", "bias_initializer",
		"kernel_regularizer", "bias_regularizer", "activity_regularizer",
		"kernel_constraint", "bias_constraint", "data_format", "dilation_rate",
		"groups", "noise_shape", "batch_input_shape", "input_shape", NULL
	};

	for (int i = 0; keys[i]; i++)
		if (strcmp(k, keys[i]) == 0)
			return true;
	return false;
}

/* Parse one layer object at path into l. */
static void
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
						 strcmp(items[j].key, "registered_name") != 0)
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
	{
		char	   *t = squash(type);

		if (strcmp(t, "dense") == 0 || strcmp(t, "linear") == 0)
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
			l->activation = get_activation(v, field);
		else if (strcmp(k, "alpha") == 0 || strcmp(k, "negative_slope") == 0)
		{
			double		a = get_number(v, field);

			if (a < 0 || a >= 1)
				cfg_error(field, "must be >= 0 and < 1");
			l->alpha = (float) a;
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
		else if (keras && keras_ignored_key(k))
			continue;
		else
			cfg_error(field, "unknown key for a layer of type \"%s\"", type);
	}

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
}

/* Path of the layer list as the user wrote it, for error messages. */
static const char *layers_path = "model.layers";

/* Parse the "model" value: {"layers": [...]} or a bare list of layers. */
static void
parse_model(JsonbValue *mv, nn_spec *spec)
{
	JsonbValue *layers = NULL;
	JsonbValue *elems;
	const char *lpath = "model.layers";
	int			n;

	if (mv->type == jbvBinary && JsonContainerIsArray(mv->val.binary.data))
	{
		layers = mv;
		lpath = "model";
	}
	else if (mv->type == jbvBinary && JsonContainerIsObject(mv->val.binary.data))
	{
		JsonItem   *items;
		int			ni;

		items = object_items(mv->val.binary.data, "model", &ni);
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
	else
		cfg_error("model", "must be an object {\"layers\": [...]} or an array of layers");

	layers_path = lpath;
	elems = array_elems(layers, lpath, &n);
	if (n == 0)
		cfg_error(lpath, "must list at least one layer");
	if (n > NN_MAX_LAYERS)
		cfg_error(lpath, "at most %d layers are supported", NN_MAX_LAYERS);
	for (int i = 0; i < n; i++)
		parse_layer(&elems[i], psprintf("%s[%d]", lpath, i), &spec->layers[i]);
	spec->n_layers = n;
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
	int32		out_dim;
	nn_error	err;
	nn_status	st;

	nn_spec_init(spec);
	spec->in_h = ds->in_h;
	spec->in_w = ds->in_w;
	spec->in_c = ds->in_c;
	spec->seed = 0;

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
			spec->l2 = get_ranged(v, k, 0, false, 0, false);
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
			else
				cfg_error(k, "unknown metric \"%s\" (use accuracy, top_k_accuracy, mse or mae)",
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
	if ((spec->metric == NN_METRIC_ACCURACY || spec->metric == NN_METRIC_TOPK) &&
		ds->target_kind == MOP_TARGET_REGRESSION)
		cfg_error("metric", "\"%s\" needs a class target, but dataset \"%s\" has a regression target",
				  nn_metric_name(spec->metric), ds->name);
	if ((spec->metric == NN_METRIC_MSE || spec->metric == NN_METRIC_MAE) &&
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
