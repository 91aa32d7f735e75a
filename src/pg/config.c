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
 *
 * This file holds mop's own top-level keys, their defaults and the checks
 * against the dataset's target; the model's layers are parsed in
 * config_layers.c, Keras' form in keras.c, and the typed JSON accessors
 * are in config_json.c.
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "config_internal.h"

/* The configuration keys given, for the checks and defaults that follow. */
typedef struct ConfigSeen
{
	bool		model;
	bool		loss;
	bool		metric;
	bool		wd;				/* a weight_decay above 0 */
	bool		init;
	bool		l2;
	JsonbValue *schedule;		/* "lr_schedule", parsed once the rate is known */
	JsonbValue *class_weight;	/* "class_weight", parsed once the loss is known */
} ConfigSeen;

/* Check a float in [lo, hi) or (lo, ...) per flags, then store it. */
static float
get_ranged(const JsonbValue *v, const char *field, double lo, bool lo_open,
		   double hi, bool has_hi)
{
	double		d = cfg_number(v, field);

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

/* "optimizer": its nn_optimizer. */
static int32
parse_optimizer(const JsonbValue *v, const char *k)
{
	char	   *o = cfg_squash(cfg_string(v, k));

	if (strcmp(o, "sgd") == 0)
		return NN_OPT_SGD;
	if (strcmp(o, "adam") == 0)
		return NN_OPT_ADAM;
	if (strcmp(o, "adamw") == 0)
		return NN_OPT_ADAMW;
	if (strcmp(o, "rmsprop") == 0)
		return NN_OPT_RMSPROP;
	cfg_error(k, "unknown optimizer \"%s\" (use sgd, adam, adamw or rmsprop)",
			  cfg_string(v, k));
}

/* "init": its nn_init. */
static int32
parse_init(const JsonbValue *v, const char *k)
{
	char	   *s = cfg_squash(cfg_string(v, k));

	if (strcmp(s, "auto") == 0)
		return NN_INIT_AUTO;
	if (strcmp(s, "he") == 0 || strcmp(s, "heuniform") == 0)
		return NN_INIT_HE;
	if (strcmp(s, "glorot") == 0 || strcmp(s, "glorotuniform") == 0 ||
		strcmp(s, "xavier") == 0)
		return NN_INIT_GLOROT;
	cfg_error(k, "must be \"auto\", \"he\" or \"glorot\"");
}

/* "loss": its nn_loss. */
static int32
parse_loss(const JsonbValue *v, const char *k)
{
	char	   *s = cfg_squash(cfg_string(v, k));

	if (strcmp(s, "categoricalcrossentropy") == 0 ||
		strcmp(s, "sparsecategoricalcrossentropy") == 0 ||
		strcmp(s, "crossentropy") == 0 ||
		strcmp(s, "softmaxcrossentropy") == 0)
		return NN_LOSS_SOFTMAX_CE;
	if (strcmp(s, "binarycrossentropy") == 0 || strcmp(s, "bce") == 0)
		return NN_LOSS_SIGMOID_BCE;
	if (strcmp(s, "mse") == 0 || strcmp(s, "meansquarederror") == 0)
		return NN_LOSS_MSE;
	cfg_error(k, "unknown loss \"%s\" (use categorical_crossentropy, binary_crossentropy or mse)",
			  cfg_string(v, k));
}

/* "metric": its nn_metric. */
static int32
parse_metric(const JsonbValue *v, const char *k)
{
	char	   *s = cfg_squash(cfg_string(v, k));

	if (strcmp(s, "accuracy") == 0 || strcmp(s, "acc") == 0)
		return NN_METRIC_ACCURACY;
	if (strcmp(s, "topkaccuracy") == 0 ||
		strcmp(s, "topkcategoricalaccuracy") == 0 ||
		strcmp(s, "topk") == 0)
		return NN_METRIC_TOPK;
	if (strcmp(s, "mse") == 0 || strcmp(s, "meansquarederror") == 0)
		return NN_METRIC_MSE;
	if (strcmp(s, "mae") == 0 || strcmp(s, "meanabsoluteerror") == 0)
		return NN_METRIC_MAE;
	if (strcmp(s, "logloss") == 0 || strcmp(s, "crossentropy") == 0)
		return NN_METRIC_LOG_LOSS;
	if (strcmp(s, "r2") == 0 || strcmp(s, "r2score") == 0)
		return NN_METRIC_R2;
	if (strcmp(s, "precision") == 0)
		return NN_METRIC_PRECISION;
	if (strcmp(s, "recall") == 0)
		return NN_METRIC_RECALL;
	if (strcmp(s, "f1") == 0 || strcmp(s, "f1score") == 0)
		return NN_METRIC_F1;
	if (strcmp(s, "auc") == 0 || strcmp(s, "rocauc") == 0)
		return NN_METRIC_AUC;
	cfg_error(k, "unknown metric \"%s\" (use accuracy, top_k_accuracy, log_loss, precision, recall, f1, auc, mse, mae or r2)",
			  cfg_string(v, k));
}

/*
 * "lr_schedule": {"type": "step", "step_size": N, "gamma": g},
 * {"type": "exponential", "gamma": g} or {"type": "cosine", "min_lr": m
 * [, "epochs": T]}, each with an optional "warmup": W epochs; {"type":
 * "none"} (a constant rate, with a warmup if given) too.  A cosine schedule
 * anneals over T epochs, by default the run's epochs (run_epochs; 0: none
 * known, then "epochs" is required).  Errors name the key's path.
 */
static void
parse_schedule(const JsonbValue *v, int32 run_epochs, nn_spec *spec)
{
	JsonItem   *items;
	int			n;
	const char *type = NULL;
	bool		has_step = false,
				has_gamma = false,
				has_min = false,
				has_epochs = false;

	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		cfg_error("lr_schedule", "must be a JSON object such as {\"type\": \"step\", \"step_size\": 10, \"gamma\": 0.5}");
	items = cfg_object_items(v->val.binary.data, "lr_schedule", &n);
	for (int i = 0; i < n; i++)
		if (strcmp(items[i].key, "type") == 0)
			type = cfg_squash(cfg_string(&items[i].val, "lr_schedule.type"));
	if (type == NULL)
		cfg_error("lr_schedule.type", "is required: \"step\", \"exponential\", \"cosine\" or \"none\"");
	if (strcmp(type, "none") == 0 || strcmp(type, "constant") == 0)
		spec->lr_schedule = NN_SCHED_NONE;
	else if (strcmp(type, "step") == 0)
		spec->lr_schedule = NN_SCHED_STEP;
	else if (strcmp(type, "exponential") == 0)
		spec->lr_schedule = NN_SCHED_EXPONENTIAL;
	else if (strcmp(type, "cosine") == 0)
		spec->lr_schedule = NN_SCHED_COSINE;
	else
		cfg_error("lr_schedule.type", "unknown schedule (use \"step\", \"exponential\", \"cosine\" or \"none\")");

	for (int i = 0; i < n; i++)
	{
		const char *k = items[i].key;
		const JsonbValue *iv = &items[i].val;
		char	   *path = psprintf("lr_schedule.%s", k);
		bool		ok = true;

		if (strcmp(k, "type") == 0)
			continue;
		if (strcmp(k, "warmup") == 0)
			spec->lr_warmup = (int32) cfg_int(iv, path, 0, NN_MAX_SCHED_EPOCHS);
		else if (strcmp(k, "step_size") == 0 && (ok = spec->lr_schedule == NN_SCHED_STEP))
		{
			spec->lr_step_size = (int32) cfg_int(iv, path, 1, NN_MAX_SCHED_EPOCHS);
			has_step = true;
		}
		else if (strcmp(k, "gamma") == 0 &&
				 (ok = spec->lr_schedule == NN_SCHED_STEP ||
				  spec->lr_schedule == NN_SCHED_EXPONENTIAL))
		{
			spec->lr_gamma = get_ranged(iv, path, 0, true, 0, false);
			if (spec->lr_gamma <= 0)
				cfg_error(path, "must be > 0");
			has_gamma = true;
		}
		else if (strcmp(k, "min_lr") == 0 && (ok = spec->lr_schedule == NN_SCHED_COSINE))
		{
			spec->lr_min = get_ranged(iv, path, 0, false, 0, false);
			has_min = true;
		}
		else if (strcmp(k, "epochs") == 0 && (ok = spec->lr_schedule == NN_SCHED_COSINE))
		{
			spec->lr_epochs = (int32) cfg_int(iv, path, 1, NN_MAX_SCHED_EPOCHS);
			has_epochs = true;
		}
		else if (!ok)
			cfg_error(path, "does not apply to a \"%s\" schedule", type);
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown configuration key \"%s\"", path),
					 errhint("lr_schedule takes type, warmup, and step_size and gamma (step), gamma (exponential), min_lr and epochs (cosine).")));
	}
	if (spec->lr_schedule == NN_SCHED_STEP && !has_step)
		cfg_error("lr_schedule.step_size", "is required by a \"step\" schedule");
	if ((spec->lr_schedule == NN_SCHED_STEP || spec->lr_schedule == NN_SCHED_EXPONENTIAL) &&
		!has_gamma)
		cfg_error("lr_schedule.gamma", "is required by a \"%s\" schedule", type);
	if (spec->lr_schedule == NN_SCHED_COSINE)
	{
		if (!has_min)
			cfg_error("lr_schedule.min_lr", "is required by a \"cosine\" schedule (0 anneals to zero)");
		if (!has_epochs)
		{
			if (run_epochs < 1)
				cfg_error("lr_schedule.epochs", "is required here: there is no run whose epochs the cosine schedule could anneal over");
			spec->lr_epochs = Min(run_epochs, NN_MAX_SCHED_EPOCHS);
		}
		if (spec->lr_min >= spec->lr)
			cfg_error("lr_schedule.min_lr", "must be < learning_rate (%g)", (double) spec->lr);
	}
}

/*
 * "early_stopping": {"patience": N, "min_delta": d} -- the model stops once
 * its validation metric has not improved by more than d (in the metric's
 * direction) for N consecutive epochs.  patience is required (>= 1),
 * min_delta defaults to 0 (>= 0); null is none (for a grid that lists it).
 * Errors name the key's path.
 */
static void
parse_patience(const JsonbValue *v, MopPatience *p)
{
	JsonItem   *items;
	int			n;
	bool		has_patience = false;

	p->patience = 0;
	p->min_delta = 0;
	if (v->type == jbvNull)
		return;					/* none, as when the key is absent */
	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		cfg_error("early_stopping", "must be a JSON object such as {\"patience\": 3, \"min_delta\": 0.001}");
	items = cfg_object_items(v->val.binary.data, "early_stopping", &n);
	for (int i = 0; i < n; i++)
	{
		const char *k = items[i].key;
		char	   *path = psprintf("early_stopping.%s", k);

		if (strcmp(k, "patience") == 0)
		{
			p->patience = (int32) cfg_int(&items[i].val, path, 1, 1000000);
			has_patience = true;
		}
		else if (strcmp(k, "min_delta") == 0)
		{
			p->min_delta = cfg_number(&items[i].val, path);
			if (!(p->min_delta >= 0) || isinf(p->min_delta))
				cfg_error(path, "must be >= 0");
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown configuration key \"%s\"", path),
					 errhint("early_stopping takes patience (epochs, >= 1) and min_delta (>= 0).")));
	}
	if (!has_patience)
		cfg_error("early_stopping.patience", "is required, e.g. {\"patience\": 3}");
}

/*
 * The patience early stopping of a configuration (patience 0: none), checked
 * as mop_config_to_spec() checks it.
 */
void
mop_config_patience(Jsonb *config, MopPatience *p)
{
	JsonbValue *v;

	p->patience = 0;
	p->min_delta = 0;
	if (!JB_ROOT_IS_OBJECT(config))
		return;
	v = getKeyJsonValueFromContainer(&config->root, "early_stopping",
									 strlen("early_stopping"), NULL);
	if (v != NULL)
		parse_patience(v, p);
}

void
mop_patience_init(MopPatienceState *st)
{
	st->best = NAN;
	st->best_epoch = 0;
	st->wait = 0;
}

/*
 * Fold epoch `epoch`'s validation metric into st; true when the model has
 * gone p->patience epochs without improving on its best by more than
 * p->min_delta (in the metric's direction), and so stops.  An epoch with no
 * finite metric (no validation rows) is not counted, as Keras skips a
 * missing monitor.  As Keras' EarlyStopping: the best moves only with an
 * improvement that counts.
 */
bool
mop_patience_epoch(const MopPatience *p, MopPatienceState *st, bool higher_is_better,
				   int32 epoch, double metric)
{
	bool		improved;

	if (p->patience < 1 || !isfinite(metric))
		return false;
	if (isnan(st->best))
		improved = true;
	else
		improved = higher_is_better ? metric - p->min_delta > st->best :
			metric + p->min_delta < st->best;
	if (improved)
	{
		st->best = metric;
		st->best_epoch = epoch;
		st->wait = 0;
		return false;
	}
	return ++st->wait >= p->patience;
}

/*
 * The dataset's labels for a hint: "a", "b", "c" (the first 20, then how
 * many more).
 */
static char *
labels_hint(const MopDataset *ds)
{
	StringInfoData b;
	int			shown = Min(ds->nclasses, 20);

	initStringInfo(&b);
	for (int i = 0; i < shown; i++)
		appendStringInfo(&b, "%s\"%s\"", i ? ", " : "", ds->labels[i]);
	if (ds->nclasses > shown)
		appendStringInfo(&b, " and %d more", ds->nclasses - shown);
	return b.data;
}

/*
 * "class_weight": "balanced", or an object of label -> weight (labels as
 * text, as mop.datasets.labels holds them; a label left out weighs 1); null
 * is none (for a grid that lists it).  Only for a class or binary target.
 * Fills cw: balanced, or the n = classes explicit weights by class index;
 * weights that are all 1 are none (n = 0), the same loss.  Errors name the
 * key's path.
 */
static void
parse_class_weight(const JsonbValue *v, const MopDataset *ds, const nn_spec *spec,
				   MopClassWeight *cw)
{
	JsonItem   *items;
	int			n;
	bool		any = false;

	memset(cw, 0, sizeof(*cw));
	if (v->type == jbvNull)
		return;
	if (ds->target_kind == MOP_TARGET_REGRESSION || spec->loss == NN_LOSS_MSE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"class_weight\": class weights need a class or binary target, but dataset \"%s\" has a regression target",
						ds->name),
				 errhint("Leave out \"class_weight\" for a regression model.")));
	if (v->type == jbvString)
	{
		char	   *str = pnstrdup(v->val.string.val, v->val.string.len);

		if (strcmp(str, "balanced") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"class_weight\": unknown value \"%s\"", str),
					 errhint("Use \"balanced\", or a JSON object of label -> weight such as {\"%s\": 2}.",
							 ds->labels[ds->nclasses - 1])));
		cw->balanced = true;
		cw->n = ds->nclasses;
		return;
	}
	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"class_weight\": must be \"balanced\" or a JSON object of label -> weight"),
				 errhint("For example {\"class_weight\": {\"%s\": 2}}; labels left out weigh 1.",
						 ds->labels[ds->nclasses - 1])));

	cw->n = ds->nclasses;
	cw->w = palloc(sizeof(float) * cw->n);
	for (int c = 0; c < cw->n; c++)
		cw->w[c] = 1.0f;
	items = cfg_object_items(v->val.binary.data, "class_weight", &n);
	for (int i = 0; i < n; i++)
	{
		const char *label = items[i].key;
		const JsonbValue *iv = &items[i].val;
		char	   *path = psprintf("class_weight.%s", label);
		int			c;
		double		d;
		float		f;

		for (c = 0; c < ds->nclasses; c++)
			if (strcmp(ds->labels[c], label) == 0)
				break;
		if (c == ds->nclasses)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"%s\": dataset \"%s\" has no label \"%s\"",
							path, ds->name, label),
					 errhint("Its labels are %s (as text).", labels_hint(ds))));
		if (iv->type != jbvNumeric)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"%s\": must be a number", path),
					 errhint("A class weight is a finite number > 0, e.g. 2.")));
		/* no overflow error: a weight out of a float's range is refused below */
		d = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow,
											   NumericGetDatum(iv->val.numeric)));
		f = (float) d;
		if (!(d > 0) || !isfinite(f) || !(f > 0))
		{
			char	   *text = numeric_normalize(iv->val.numeric);
			/* by its text: 1e-999 is positive, though its double is 0 */
			bool		positive = text[0] != '-' && strspn(text, "0.") < strlen(text);

			/* 1e999 is a valid JSON number: show such a value shortly */
			if (strlen(text) > 24)
				text = numeric_out_sci(iv->val.numeric, 2);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 positive ?
					 errmsg("invalid value for \"%s\": a class weight must lie within the range of a float (about 1e-38 to 3e38), not %s",
							path, text) :
					 errmsg("invalid value for \"%s\": a class weight must be a finite number > 0, not %s",
							path, text),
					 errhint("A class weight is a finite number > 0; a label left out weighs 1.")));
		}
		cw->w[c] = f;
	}
	for (int c = 0; c < cw->n; c++)
		any |= cw->w[c] != 1.0f;
	if (!any)
	{
		pfree(cw->w);
		cw->w = NULL;
		cw->n = 0;
	}
}

/*
 * The class weights a configuration asks for (checked as
 * mop_config_to_spec() checks them) for dataset ds and the spec
 * mop_config_to_spec() made of the configuration.
 */
void
mop_config_class_weight(Jsonb *config, const MopDataset *ds, const nn_spec *spec,
						MopClassWeight *cw)
{
	JsonbValue *v;

	memset(cw, 0, sizeof(*cw));
	if (!JB_ROOT_IS_OBJECT(config))
		return;
	v = getKeyJsonValueFromContainer(&config->root, "class_weight",
									 strlen("class_weight"), NULL);
	if (v != NULL)
		parse_class_weight(v, ds, spec, cw);
}

/* One top-level key k of the configuration into spec, noting it in seen. */
static void
config_key(const char *k, JsonbValue *v, nn_spec *spec, ConfigSeen *seen)
{
	if (strcmp(k, "lr_schedule") == 0)
	{
		seen->schedule = v;
		return;
	}
	if (strcmp(k, "class_weight") == 0)
	{
		seen->class_weight = v;
		return;
	}
	if (strcmp(k, "early_stopping") == 0)
	{
		MopPatience p;

		parse_patience(v, &p);	/* checked here, read by mop_config_patience() */
		return;
	}
	if (strcmp(k, "model") == 0)
	{
		cfg_parse_model(v, spec);
		seen->model = true;
	}
	else if (strcmp(k, "optimizer") == 0)
		spec->optimizer = parse_optimizer(v, k);
	else if (strcmp(k, "learning_rate") == 0 || strcmp(k, "lr") == 0)
		spec->lr = get_ranged(v, k, 0, true, 0, false);
	else if (strcmp(k, "momentum") == 0)
		spec->momentum = get_ranged(v, k, 0, false, 1, true);
	else if (strcmp(k, "nesterov") == 0)
		spec->nesterov = cfg_bool(v, k) ? 1 : 0;
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
		seen->l2 = true;
	}
	else if (strcmp(k, "weight_decay") == 0)
	{
		spec->weight_decay = get_ranged(v, k, 0, false, 0, false);
		seen->wd = spec->weight_decay > 0;
	}
	else if (strcmp(k, "clip_norm") == 0)
		spec->clip_norm = get_ranged(v, k, 0, false, 0, false);
	else if (strcmp(k, "batch_size") == 0)
		spec->batch_size = (int32) cfg_int(v, k, 1, NN_MAX_BATCH);
	else if (strcmp(k, "seed") == 0)
		spec->seed = (uint64) cfg_int(v, k, 0, (int64) 1 << 53);
	else if (strcmp(k, "top_k") == 0)
		spec->top_k = (int32) cfg_int(v, k, 1, MOP_MAX_CLASSES);
	else if (strcmp(k, "init") == 0)
	{
		seen->init = true;
		spec->init = parse_init(v, k);
	}
	else if (strcmp(k, "loss") == 0)
	{
		seen->loss = true;
		spec->loss = parse_loss(v, k);
	}
	else if (strcmp(k, "metric") == 0)
	{
		seen->metric = true;
		spec->metric = parse_metric(v, k);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown configuration key \"%s\"", k),
				 errhint("Valid keys are model, optimizer, learning_rate, momentum, nesterov, beta1, beta2, epsilon, rho, l2, weight_decay, clip_norm, lr_schedule, early_stopping, class_weight, batch_size, loss, metric, top_k, init and seed.")));
}

/*
 * Loss and metric defaults follow the dataset's target; the output
 * activation the loss fuses is dropped (see the header comment).
 */
static void
settle_loss_metric(nn_spec *spec, const MopDataset *ds, const ConfigSeen *seen)
{
	int32		out_dim = network_out_dim(spec);
	nn_layer_spec *last;
	int32		fused;

	if (!seen->loss)
	{
		if (ds->target_kind == MOP_TARGET_REGRESSION)
			spec->loss = NN_LOSS_MSE;
		else if (ds->target_kind == MOP_TARGET_BINARY && out_dim == 1)
			spec->loss = NN_LOSS_SIGMOID_BCE;
		else
			spec->loss = NN_LOSS_SOFTMAX_CE;
	}
	if (!seen->metric)
		spec->metric = (ds->target_kind == MOP_TARGET_REGRESSION) ?
			NN_METRIC_MSE : NN_METRIC_ACCURACY;

	last = &spec->layers[spec->n_layers - 1];
	fused = spec->loss == NN_LOSS_SOFTMAX_CE ? NN_ACT_SOFTMAX :
		spec->loss == NN_LOSS_SIGMOID_BCE ? NN_ACT_SIGMOID : -1;
	if (last->type == NN_LAYER_ACTIVATION && last->activation == fused &&
		spec->n_layers > 1)
		spec->n_layers--;
	else if ((last->type == NN_LAYER_DENSE || last->type == NN_LAYER_CONV2D) &&
			 last->activation == fused)
		last->activation = NN_ACT_NONE;
}

/* The loss and metric must fit the target kind (top_k defaults to 5). */
static void
check_target(nn_spec *spec, const MopDataset *ds)
{
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
}

/* The output layer must match the target; it is never added for you. */
static void
check_output_layer(const nn_spec *spec, const MopDataset *ds)
{
	int32		out_dim = network_out_dim(spec);
	int			want,
				li = -1;

	if (out_dim < 0)
		return;
	want = (spec->loss == NN_LOSS_SOFTMAX_CE) ? ds->nclasses : 1;
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
			cfg_error(psprintf("%s[%d].units", cfg_layers_path, li),
					  "the output layer has %d units but must have %d (%s of dataset \"%s\")",
					  spec->layers[li].units, want,
					  spec->loss == NN_LOSS_SOFTMAX_CE ? "one per class" :
					  spec->loss == NN_LOSS_SIGMOID_BCE ? "one probability for the binary target" :
					  "one value for the regression target",
					  ds->name);
		cfg_error(cfg_layers_path,
				  "the network must end with a dense layer of %d units to fit dataset \"%s\" (its output has %d values)",
				  want, ds->name, out_dim);
	}
}

/*
 * Parse config into spec for dataset ds; run_epochs is the number of epochs
 * of the run the model trains in (0: no run), over which a cosine
 * schedule anneals unless it says otherwise.  Everything is checked here
 * or by nn_spec_validate(); the result is a spec the engine accepts.
 */
void
mop_config_to_spec(Jsonb *config, const MopDataset *ds, int32 run_epochs,
				   nn_spec *spec)
{
	JsonItem   *items;
	int			n;
	ConfigSeen	seen = {0};
	nn_error	err;
	nn_status	st;

	nn_spec_init(spec);
	spec->in_h = ds->in_h;
	spec->in_w = ds->in_w;
	spec->in_c = ds->in_c;
	spec->seed = 0;
	memset(&keras_info, 0, sizeof(keras_info));
	keras_info.in_h = ds->in_h;
	keras_info.in_w = ds->in_w;
	keras_info.in_c = ds->in_c;
	keras_info.flat = ds->in_h == 1 && ds->in_w == 1;

	if (!JB_ROOT_IS_OBJECT(config))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration must be a JSON object"),
				 errhint("For example {\"model\": {\"layers\": [{\"type\": \"dense\", \"units\": 10}]}, \"learning_rate\": 0.01}.")));
	items = cfg_object_items(&config->root, "config", &n);
	for (int i = 0; i < n; i++)
		config_key(items[i].key, &items[i].val, spec, &seen);
	if (seen.schedule)
		parse_schedule(seen.schedule, run_epochs, spec);

	if (!seen.model)
		cfg_error("model", "is required, e.g. {\"layers\": [{\"type\": \"dense\", \"units\": 10}]}");
	keras_settle(spec, seen.init, seen.l2);
	if (seen.wd && spec->optimizer != NN_OPT_ADAMW)
		cfg_error("weight_decay", "applies only to \"optimizer\": \"adamw\" (use \"l2\" for the others)");
	if (spec->nesterov && spec->optimizer != NN_OPT_SGD)
		cfg_error("nesterov", "applies only to \"optimizer\": \"sgd\"");

	settle_loss_metric(spec, ds, &seen);
	check_target(spec, ds);
	check_output_layer(spec, ds);
	if (seen.class_weight)
	{
		MopClassWeight cw;

		/* checked here, read by mop_config_class_weight() */
		parse_class_weight(seen.class_weight, ds, spec, &cw);
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
