/*
 * space.c -- search spaces: expand a grid, sample random configurations.
 *
 * A search space is a configuration (see config.c) in which any top-level
 * value may be replaced by a list of candidates or by a distribution:
 *
 *   {"model": [arch1, arch2], "optimizer": ["adam", "sgd"],
 *    "learning_rate": {"loguniform": [1e-5, 1e-1]},
 *    "batch_size": {"choice": [32, 64, 128]}, "momentum": {"uniform": [0.5, 0.99]},
 *    "epochs_hint": {"int": [1, 5]}}
 *
 * A grid takes every combination of the lists (distributions are not
 * allowed, except choice, which is a list); random search draws each value
 * independently (a list is a uniform choice).  A value that is neither a
 * list nor a distribution is fixed.  "model" is special: its value is an
 * architecture ({"layers": [...]}, or the shorthand list of layers) or a
 * list of architectures.  So is "early_stopping": an object with its keys
 * ({"patience": N, ...}) is its fixed value, as is an "lr_schedule" object
 * with a "type" ({"type": "cosine", ...}); and "class_weight": an object
 * of label -> weight is its fixed value unless it is {"choice": [...]}
 * (a label named "choice" goes in a list then).
 *
 * Inside an architecture, a field of a layer in mop's own form ({"type":
 * "dense", "units": [64, 256]}) may be searched the same way, and a block
 * {"repeat": [1, 3], "layers": [...]} stands for its layers repeated k
 * times, k searched like a field (a plain integer is fixed).  Each such
 * field is a parameter of its own, named by its path in the space
 * ("model[1].layers[0].units", "model[2].repeat"), placed right after
 * "model" and active only with the architecture it belongs to; a repeated
 * block's fields take one value for all its copies.  A field whose
 * concrete value is a list (kernel_size, pool_size, strides: [3, 3]) keeps
 * a list of numbers as its value; a list of lists, or {"choice": [3, 5]},
 * searches it.  Layers in Keras' serialised form are taken as written.
 *
 * The result is a list of concrete configuration jsonb values in a
 * deterministic order; each is then validated by the caller with
 * mop_config_to_spec, whose errors name the field.  Errors here name the
 * parameter of the space.
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "mop.h"
#include "space.h"
#include "search/mop_params.h"

/* Largest grid we expand. */
#define MAX_GRID 100000

typedef enum ParamKind
{
	PARAM_FIXED,
	PARAM_LIST,
	PARAM_LOGUNIFORM,
	PARAM_UNIFORM,
	PARAM_INT
} ParamKind;

/* What a layer field holds, for what its searched form may be. */
typedef enum FieldClass
{
	FIELD_ANY,					/* a key the layer parser will judge */
	FIELD_INT,					/* units, filters */
	FIELD_PAIR,					/* kernel_size, pool_size, strides: n or [h, w] */
	FIELD_NUMBER,				/* rate, alpha, negative_slope */
	FIELD_WORD,					/* activation, padding, name */
	FIELD_BOOL,					/* use_bias */
	FIELD_REPEAT				/* the count of a repeated block */
} FieldClass;

/* One field of a layer in a template: as written, or a parameter's value. */
typedef struct TmplField
{
	char	   *key;
	char	   *json;			/* the value as written */
	int			param;			/* the parameter giving it, or -1: json */
} TmplField;

/* One element of a list of layers in a template. */
typedef struct TmplItem
{
	char	   *json;			/* the element as written */
	int			n_fields;		/* > 0: a layer with searched fields */
	TmplField  *fields;
	bool		repeat;			/* a repeated block: */
	int			times;			/* its fixed count, */
	int			times_param;	/* or the parameter giving it (-1: fixed) */
	int			n_items;		/* its layers */
	struct TmplItem *items;
} TmplItem;

/* An architecture with something searched inside. */
typedef struct ArchTmpl
{
	bool		object;			/* {"layers": [...], ...}, not a bare list */
	int			n_extra;		/* the object's other keys, as written */
	char	  **extra_keys;
	char	  **extra_json;
	int			n_items;
	TmplItem   *items;
} ArchTmpl;

/* One parameter of the space. */
typedef struct SpaceParam
{
	char	   *key;			/* a top-level key, or a layer field's path */
	ParamKind	kind;
	int			n;				/* candidates (FIXED: 1) */
	char	  **json;			/* candidate values as JSON text */
	double		lo,
				hi;				/* distribution bounds */
	/* conditional parameter: active only when when_key takes one of when_values */
	char	   *when_key;
	char	  **when_values;
	int			n_when;
	int			cond;			/* index of when_key's parameter (resolved) */
	bool	   *cond_ok;		/* per candidate of cond: does it activate this one */
	/* a layer field: a parameter, not a key of the configuration */
	bool		nested;
	/* "model": per candidate, its template, or NULL where nothing is searched */
	ArchTmpl  **arch;
} SpaceParam;

/* The parameters being parsed (they grow as layer fields are found). */
typedef struct ParamList
{
	SpaceParam *p;
	int			n;
	int			cap;
} ParamList;

/* Where a layer field being parsed lies. */
typedef struct NestCtx
{
	ParamList  *pl;
	int			model;			/* index of the "model" parameter */
	int			choice;			/* its candidate holding the field, -1: fixed */
	int			n_choices;		/* its candidates */
	bool		searched;		/* a parameter or a repeated block was found */
} NestCtx;

static void
space_error(const char *key, const char *fmt,...)
pg_attribute_printf(2, 3) pg_attribute_noreturn();

/* Raise an error about parameter key of the search space. */
static void
space_error(const char *key, const char *fmt,...)
{
	char		buf[512];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid search space parameter \"%s\": %s", key, buf),
			 errhint("Give a value, a list of values, or a distribution such as {\"loguniform\": [1e-5, 1e-1]}, {\"uniform\": [a, b]}, {\"int\": [a, b]}, {\"choice\": [...]}.")));
	pg_unreachable();
}

/* JSON text of a JsonbValue (scalar or binary container). */
static char *
value_json(JsonbValue *v)
{
	if (v->type == jbvBinary)
		return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
	else
	{
		Jsonb	   *j = JsonbValueToJsonb(v);

		return JsonbToCString(NULL, &j->root, VARSIZE(j));
	}
}

/* Elements of a JSON array value as JSON texts. */
static char **
array_elements(JsonbValue *arr, int *n)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	  **out;
	int			cap = 8;

	*n = 0;
	out = palloc(sizeof(char *) * cap);
	it = JsonbIteratorInit(arr->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (*n == cap)
		{
			cap *= 2;
			out = repalloc(out, sizeof(char *) * cap);
		}
		out[(*n)++] = value_json(&v);
	}
	return out;
}

/* Numeric value of an array element, or error naming key. */
static double
element_number(JsonbValue *arr, int i, const char *key)
{
	JsonbValue *e = getIthJsonbValueFromContainer(arr->val.binary.data, i);

	if (e == NULL || e->type != jbvNumeric)
		space_error(key, "distribution bounds must be two numbers");
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(e->val.numeric)));
}

/* Is v a container of the given kind? */
static bool
is_container(JsonbValue *v, bool array)
{
	if (v->type != jbvBinary)
		return false;
	return array ? JsonContainerIsArray(v->val.binary.data) :
		JsonContainerIsObject(v->val.binary.data);
}

/* Is v an object with key k? */
static bool
has_key(JsonbValue *v, const char *k)
{
	return is_container(v, false) &&
		getKeyJsonValueFromContainer(v->val.binary.data, k, strlen(k), NULL) != NULL;
}

/* Is v a layer, or a repeated block of layers (not an architecture)? */
static bool
is_layer_like(JsonbValue *v)
{
	return has_key(v, "type") || has_key(v, "class_name") || has_key(v, "repeat");
}

/*
 * Parse a condition {"other_key": value or [values]}: the parameter is
 * active only when other_key takes one of those values.
 */
static void
parse_when(SpaceParam *p, const char *key, JsonbValue *v)
{
	JsonbIterator *it;
	JsonbValue	k,
				val;
	JsonbIteratorToken tok;
	int			n = 0;

	if (!is_container(v, false))
		space_error(key, "\"when\" must be an object such as {\"optimizer\": \"sgd\"}");
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY)
			continue;
		n++;
		p->when_key = pnstrdup(k.val.string.val, k.val.string.len);
		tok = JsonbIteratorNext(&it, &val, true);
		if (is_container(&val, true))
			p->when_values = array_elements(&val, &p->n_when);
		else
		{
			p->when_values = palloc(sizeof(char *));
			p->when_values[0] = value_json(&val);
			p->n_when = 1;
		}
	}
	if (n != 1 || p->n_when == 0)
		space_error(key, "\"when\" names exactly one parameter and at least one of its values");
}

/* p is the fixed value v. */
static void
set_fixed(SpaceParam *p, JsonbValue *v)
{
	p->kind = PARAM_FIXED;
	p->n = 1;
	p->json = palloc(sizeof(char *));
	p->json[0] = value_json(v);
}

/* p is the list of candidates v (what), bounded before anything is expanded. */
static void
set_list(SpaceParam *p, const char *key, JsonbValue *v, const char *what)
{
	/* a list cannot outgrow a grid */
	if (JsonContainerSize(v->val.binary.data) > MAX_GRID)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("search space key \"%s\" lists %d values, more than %d",
						key, (int) JsonContainerSize(v->val.binary.data), MAX_GRID),
				 errhint("Use a distribution and mop_random_search for a large range.")));
	p->kind = PARAM_LIST;
	p->json = array_elements(v, &p->n);
	if (p->n == 0)
		space_error(key, "the list of %s is empty", what);
}

/*
 * Parse a distribution object v into p; "when" is allowed only for a
 * top-level key.  *list_arg is set to the list of a "choice" (else NULL).
 */
static void
parse_distribution(SpaceParam *p, const char *key, JsonbValue *v, bool top,
				   JsonbValue **list_arg)
{
	JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
	JsonbValue	k,
				val;
	JsonbValue *arg = palloc0(sizeof(JsonbValue));
	JsonbIteratorToken tok;
	char	   *dist = NULL;
	int			nkeys = 0;

	*list_arg = NULL;
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *name;

		if (tok != WJB_KEY)
			continue;
		name = pnstrdup(k.val.string.val, k.val.string.len);
		tok = JsonbIteratorNext(&it, &val, true);
		if (strcmp(name, "when") == 0)
		{
			if (!top)
				space_error(key, "\"when\" conditions are for top-level keys, not for a layer's fields");
			parse_when(p, key, &val);
			continue;
		}
		nkeys++;
		dist = name;
		*arg = val;
	}
	if (nkeys != 1)
		space_error(key, "a distribution is an object with exactly one key (besides \"when\")");
	if (!is_container(arg, true))
		space_error(key, "the argument of distribution \"%s\" must be a list", dist);
	if (strcmp(dist, "choice") == 0)
	{
		set_list(p, key, arg, "choices");
		*list_arg = arg;
		return;
	}
	if (JsonContainerSize(arg->val.binary.data) != 2)
		space_error(key, "distribution \"%s\" takes two bounds [low, high]", dist);
	p->lo = element_number(arg, 0, key);
	p->hi = element_number(arg, 1, key);
	if (!isfinite(p->lo) || !isfinite(p->hi) || p->lo > p->hi)
		space_error(key, "bounds [%g, %g] must be finite with low <= high", p->lo, p->hi);
	if (strcmp(dist, "loguniform") == 0)
	{
		if (p->lo <= 0)
			space_error(key, "loguniform bounds must be > 0, got %g", p->lo);
		p->kind = PARAM_LOGUNIFORM;
	}
	else if (strcmp(dist, "uniform") == 0)
		p->kind = PARAM_UNIFORM;
	else if (strcmp(dist, "int") == 0)
	{
		if (p->lo != floor(p->lo) || p->hi != floor(p->hi))
			space_error(key, "int bounds must be integers");
		p->kind = PARAM_INT;
	}
	else
		space_error(key, "unknown distribution \"%s\"", dist);
	p->n = 0;
}

/* A new parameter at the end of pl; its index. */
static int
add_param(ParamList *pl)
{
	if (pl->n == pl->cap)
	{
		pl->cap *= 2;
		pl->p = repalloc(pl->p, sizeof(SpaceParam) * pl->cap);
	}
	memset(&pl->p[pl->n], 0, sizeof(SpaceParam));
	return pl->n++;
}

/* What a field of a layer holds (see FieldClass). */
static FieldClass
field_class(const char *key)
{
	static const struct
	{
		const char *key;
		FieldClass	cls;
	}			fields[] = {
		{"units", FIELD_INT}, {"filters", FIELD_INT},
		{"kernel_size", FIELD_PAIR}, {"pool_size", FIELD_PAIR}, {"strides", FIELD_PAIR},
		{"rate", FIELD_NUMBER}, {"alpha", FIELD_NUMBER}, {"negative_slope", FIELD_NUMBER},
		{"momentum", FIELD_NUMBER}, {"eps", FIELD_NUMBER}, {"epsilon", FIELD_NUMBER},
		{"activation", FIELD_WORD}, {"padding", FIELD_WORD}, {"name", FIELD_WORD},
		{"use_bias", FIELD_BOOL},
	};

	for (int i = 0; i < lengthof(fields); i++)
		if (strcmp(fields[i].key, key) == 0)
			return fields[i].cls;
	return FIELD_ANY;
}

/* Check that a repeated block's count v (at path) is 1..NN_MAX_LAYERS. */
static int
repeat_count(JsonbValue *v, const char *path)
{
	double		d;

	if (v->type != jbvNumeric)
		space_error(path, "a repeat count is an integer, a list of integers or {\"int\": [low, high]}");
	d = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
	if (d != floor(d) || d < 1 || d > NN_MAX_LAYERS)
		space_error(path, "a repeat count is an integer from 1 to %d, not %s",
					NN_MAX_LAYERS, value_json(v));
	return (int) d;
}

/* Check the alternatives arr of a layer field of class cls at path. */
static void
check_alternatives(JsonbValue *arr, FieldClass cls, const char *path)
{
	JsonbIterator *it = JsonbIteratorInit(arr->val.binary.data);
	JsonbValue	v;
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (cls == FIELD_REPEAT)
			(void) repeat_count(&v, path);
		else if (cls != FIELD_ANY && cls != FIELD_PAIR && v.type == jbvBinary)
			space_error(path, "each alternative is one value, not %s", value_json(&v));
	}
}

/*
 * A field key of a layer (value v, at path): as written, or a new parameter
 * when v is a list of alternatives or a distribution.
 */
static TmplField
parse_field(NestCtx *ctx, const char *key, JsonbValue *v, const char *path, FieldClass cls)
{
	TmplField	f;
	SpaceParam *p;
	JsonbValue *alts = NULL;
	int			i;

	f.key = pstrdup(key);
	f.json = value_json(v);
	f.param = -1;
	if (strcmp(key, "type") == 0 && v->type == jbvBinary)
		space_error(path, "a layer's type is not searched: list whole architectures under \"model\" instead");
	if (v->type != jbvBinary)
		return f;				/* a plain value */
	if (is_container(v, true) && cls == FIELD_PAIR)
	{
		JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
		JsonbValue	e;
		JsonbIteratorToken tok;
		int			n = 0,
					numbers = 0;

		while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
			if (tok == WJB_ELEM)
			{
				n++;
				numbers += e.type == jbvNumeric;
			}
		if (n > 0 && numbers == n)
		{
			/* a list of numbers is the field's own value, [height, width] */
			if (n != 2)
				space_error(path, "a list of numbers is one [height, width] pair; for alternatives give a list of pairs such as [[3, 3], [5, 5]] or {\"choice\": [3, 5]}");
			return f;
		}
	}

	i = add_param(ctx->pl);
	p = &ctx->pl->p[i];
	p->key = pstrdup(path);
	p->nested = true;
	p->cond = -1;
	if (ctx->choice >= 0)
	{
		/* active only with the architecture it belongs to */
		p->cond = ctx->model;
		p->cond_ok = palloc0(sizeof(bool) * ctx->n_choices);
		p->cond_ok[ctx->choice] = true;
	}
	if (is_container(v, true))
	{
		set_list(p, path, v, "alternatives");
		alts = v;
	}
	else
	{
		parse_distribution(p, path, v, false, &alts);
		if (alts == NULL)
		{
			if (cls == FIELD_WORD || cls == FIELD_BOOL)
				space_error(path, "is not a number: give a list of alternatives or {\"choice\": [...]}");
			if ((cls == FIELD_INT || cls == FIELD_PAIR || cls == FIELD_REPEAT) &&
				p->kind != PARAM_INT)
				space_error(path, "takes integers: use {\"int\": [low, high]} or a list of alternatives");
			if (cls == FIELD_REPEAT && (p->lo < 1 || p->hi > NN_MAX_LAYERS))
				space_error(path, "a repeat count is an integer from 1 to %d, not [%g, %g]",
							NN_MAX_LAYERS, p->lo, p->hi);
		}
	}
	if (alts)
		check_alternatives(alts, cls, path);
	f.param = i;
	ctx->searched = true;
	return f;
}

static TmplItem *parse_items(NestCtx *ctx, JsonbValue *arr, const char *path, int *n);

/* One element v (at path) of a list of layers into item. */
static void
parse_item(NestCtx *ctx, JsonbValue *v, const char *path, TmplItem *item)
{
	JsonbIterator *it;
	JsonbValue	k,
				val;
	JsonbIteratorToken tok;

	memset(item, 0, sizeof(*item));
	item->json = value_json(v);
	item->times_param = -1;
	if (has_key(v, "repeat"))
	{
		JsonbValue *times = NULL,
				   *layers = NULL;
		char	   *lpath = psprintf("%s.layers", path);

		it = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			char	   *key;

			if (tok != WJB_KEY)
				continue;
			key = pnstrdup(k.val.string.val, k.val.string.len);
			tok = JsonbIteratorNext(&it, &val, true);
			if (strcmp(key, "repeat") == 0)
			{
				times = palloc(sizeof(JsonbValue));
				*times = val;
			}
			else if (strcmp(key, "layers") == 0)
			{
				layers = palloc(sizeof(JsonbValue));
				*layers = val;
			}
			else
				space_error(psprintf("%s.%s", path, key),
							"a repeated block has only \"repeat\" and \"layers\"");
		}
		if (layers == NULL || !is_container(layers, true) ||
			JsonContainerSize(layers->val.binary.data) == 0)
			space_error(lpath, "a repeated block needs \"layers\", a non-empty list of layers");
		item->repeat = true;
		ctx->searched = true;
		if (times->type == jbvBinary)
			item->times_param = parse_field(ctx, "repeat", times,
											psprintf("%s.repeat", path), FIELD_REPEAT).param;
		else
			item->times = repeat_count(times, psprintf("%s.repeat", path));
		item->items = parse_items(ctx, layers, lpath, &item->n_items);
		return;
	}
	if (!has_key(v, "type") || has_key(v, "class_name"))
		return;					/* Keras' form, or not a layer: as written */

	item->fields = palloc(sizeof(TmplField) * JsonContainerSize(v->val.binary.data));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(k.val.string.val, k.val.string.len);
		tok = JsonbIteratorNext(&it, &val, true);
		item->fields[item->n_fields++] =
			parse_field(ctx, key, &val, psprintf("%s.%s", path, key), field_class(key));
	}
	for (int i = 0; i < item->n_fields; i++)
		if (item->fields[i].param >= 0)
			return;
	item->n_fields = 0;			/* nothing searched: as written */
}

/* The elements of a list of layers arr (at path). */
static TmplItem *
parse_items(NestCtx *ctx, JsonbValue *arr, const char *path, int *n)
{
	int			size = JsonContainerSize(arr->val.binary.data);
	TmplItem   *items = palloc0(sizeof(TmplItem) * Max(size, 1));

	*n = size;
	for (int i = 0; i < size; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr->val.binary.data, i);

		parse_item(ctx, e, psprintf("%s[%d]", path, i), &items[i]);
	}
	return items;
}

/*
 * The template of architecture v (at path), candidate choice of the model
 * parameter (-1: the only one), or NULL when nothing in it is searched.
 */
static ArchTmpl *
parse_arch(ParamList *pl, int model, int choice, int n_choices, JsonbValue *v,
		   const char *path)
{
	NestCtx		ctx = {pl, model, choice, n_choices, false};
	ArchTmpl   *a = palloc0(sizeof(ArchTmpl));
	JsonbValue *layers = NULL;
	const char *lpath = path;

	if (is_container(v, true))
		layers = v;
	else if (is_container(v, false) && !has_key(v, "class_name"))
	{
		JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
		JsonbValue	k,
					val;
		JsonbIteratorToken tok;
		int			size = JsonContainerSize(v->val.binary.data);

		a->object = true;
		a->extra_keys = palloc(sizeof(char *) * size);
		a->extra_json = palloc(sizeof(char *) * size);
		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			char	   *key;

			if (tok != WJB_KEY)
				continue;
			key = pnstrdup(k.val.string.val, k.val.string.len);
			tok = JsonbIteratorNext(&it, &val, true);
			if (strcmp(key, "layers") == 0 && is_container(&val, true))
			{
				layers = palloc(sizeof(JsonbValue));
				*layers = val;
			}
			else
			{
				a->extra_keys[a->n_extra] = key;
				a->extra_json[a->n_extra++] = value_json(&val);
			}
		}
		lpath = psprintf("%s.layers", path);
	}
	if (layers == NULL)
		return NULL;			/* Keras' form, or malformed: as written */
	a->items = parse_items(&ctx, layers, lpath, &a->n_items);
	return ctx.searched ? a : NULL;
}

/* The "model" parameter (index idx) from v, and the fields searched in it. */
static void
parse_model(ParamList *pl, int idx, JsonbValue *v)
{
	SpaceParam *p = &pl->p[idx];
	int			n;

	p->key = pstrdup("model");
	if (is_container(v, true) && JsonContainerSize(v->val.binary.data) > 0 &&
		!is_layer_like(getIthJsonbValueFromContainer(v->val.binary.data, 0)))
		set_list(p, "model", v, "candidates");	/* a list of architectures */
	else
		set_fixed(p, v);		/* one architecture (a list of layers too) */
	n = p->n;
	p->arch = palloc0(sizeof(ArchTmpl *) * n);
	for (int c = 0; c < n; c++)
	{
		ArchTmpl   *a;

		if (n == 1 && pl->p[idx].kind == PARAM_FIXED)
			a = parse_arch(pl, idx, -1, 1, v, "model");
		else
			a = parse_arch(pl, idx, c, n,
						   getIthJsonbValueFromContainer(v->val.binary.data, c),
						   psprintf("model[%d]", c));
		pl->p[idx].arch[c] = a; /* pl->p may have moved */
	}
}

/* Parse top-level parameter idx of the space (and those inside it). */
static void
parse_param(ParamList *pl, int idx, const char *key, JsonbValue *v)
{
	SpaceParam *p = &pl->p[idx];
	JsonbValue *unused;

	p->key = pstrdup(key);
	if (strcmp(key, "model") == 0)
	{
		parse_model(pl, idx, v);
		return;
	}
	if (is_container(v, false) && strcmp(key, "early_stopping") == 0 &&
		(getKeyJsonValueFromContainer(v->val.binary.data, "patience", 8, NULL) ||
		 getKeyJsonValueFromContainer(v->val.binary.data, "min_delta", 9, NULL)))
	{
		/* {"patience": N, ...} is the configuration's value, not a distribution */
		set_fixed(p, v);
		return;
	}
	if (is_container(v, false) && strcmp(key, "lr_schedule") == 0 &&
		getKeyJsonValueFromContainer(v->val.binary.data, "type", 4, NULL))
	{
		/* {"type": "cosine", ...} is the configuration's value, not a distribution */
		set_fixed(p, v);
		return;
	}
	if (is_container(v, false) && strcmp(key, "class_weight") == 0 &&
		!getKeyJsonValueFromContainer(v->val.binary.data, "choice", 6, NULL))
	{
		/* {"label": weight, ...} is the configuration's value, not a distribution */
		p->kind = PARAM_FIXED;
		p->n = 1;
		p->json = palloc(sizeof(char *));
		p->json[0] = value_json(v);
		return;
	}
	if (is_container(v, true))
	{
		set_list(p, key, v, "candidates");
		return;
	}
	if (is_container(v, false))
	{
		parse_distribution(p, key, v, true, &unused);
		return;
	}
	set_fixed(p, v);
}

/* Link each conditional parameter to the one it depends on; check values. */
static void
resolve_conditions(SpaceParam *params, int n)
{
	for (int i = 0; i < n; i++)
	{
		SpaceParam *p = &params[i];
		SpaceParam *c = NULL;

		if (p->nested)
			continue;			/* linked to its architecture when parsed */
		p->cond = -1;
		if (!p->when_key)
			continue;
		for (int j = 0; j < n; j++)
			if (j != i && !params[j].nested && strcmp(params[j].key, p->when_key) == 0)
			{
				p->cond = j;
				c = &params[j];
			}
		if (!c)
			space_error(p->key, "\"when\" refers to \"%s\", which is not in the space", p->when_key);
		if (c->kind != PARAM_LIST && c->kind != PARAM_FIXED)
			space_error(p->key, "\"when\" must refer to a list or a fixed value, and \"%s\" is a distribution",
						p->when_key);
		p->cond_ok = palloc0(sizeof(bool) * c->n);
		for (int w = 0; w < p->n_when; w++)
		{
			bool		found = false;

			for (int v = 0; v < c->n; v++)
				if (strcmp(c->json[v], p->when_values[w]) == 0)
					found = p->cond_ok[v] = true;
			if (!found)
				space_error(p->key, "\"when\": %s is not a value of \"%s\"", p->when_values[w],
							p->when_key);
		}
	}
	/* no cycles: following conditions from any parameter must end */
	for (int i = 0; i < n; i++)
	{
		int			j = params[i].cond,
					steps = 0;

		while (j >= 0 && steps++ <= n)
			j = params[j].cond;
		if (steps > n)
			space_error(params[i].key, "its \"when\" conditions form a cycle");
	}
}

/* Is parameter i active when every list parameter takes candidate idx[]? */
static bool
param_active(const SpaceParam *params, const int *idx, int i)
{
	int			steps = 0;

	while (params[i].cond >= 0 && steps++ < 1000)
	{
		int			c = params[i].cond;

		if (!params[i].cond_ok[params[c].kind == PARAM_FIXED ? 0 : idx[c]])
			return false;
		i = c;
	}
	return true;
}

/*
 * Parse a space object into params (top-level keys in key order, each
 * followed by the fields searched inside it); returns the count.
 */
static int
parse_space(Jsonb *space, SpaceParam **params)
{
	JsonbIterator *it;
	JsonbValue	k,
				v;
	JsonbIteratorToken tok;
	ParamList	pl;

	if (!JB_ROOT_IS_OBJECT(space) || JB_ROOT_IS_SCALAR(space))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("search space must be a JSON object")));
	pl.cap = 16;
	pl.n = 0;
	pl.p = palloc0(sizeof(SpaceParam) * pl.cap);
	it = JsonbIteratorInit(&space->root);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(k.val.string.val, k.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		parse_param(&pl, add_param(&pl), key, &v);
	}
	if (pl.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("search space is empty")));
	resolve_conditions(pl.p, pl.n);
	*params = pl.p;
	return pl.n;
}

/* Append a list of layers' items, a parameter's value in place of each searched field. */
static void
render_items(StringInfo s, const TmplItem *items, int n, char **chosen, bool *first)
{
	for (int i = 0; i < n; i++)
	{
		const TmplItem *it = &items[i];

		if (it->repeat)
		{
			int			times = it->times;

			if (it->times_param >= 0)
				times = (int) strtod(chosen[it->times_param], NULL);
			for (int r = 0; r < times; r++)
				render_items(s, it->items, it->n_items, chosen, first);
			continue;
		}
		if (!*first)
			appendStringInfoString(s, ", ");
		*first = false;
		if (it->n_fields == 0)
		{
			appendStringInfoString(s, it->json);
			continue;
		}
		appendStringInfoChar(s, '{');
		for (int f = 0; f < it->n_fields; f++)
		{
			if (f > 0)
				appendStringInfoString(s, ", ");
			escape_json(s, it->fields[f].key);
			appendStringInfoString(s, ": ");
			appendStringInfoString(s, it->fields[f].param >= 0 ?
								   chosen[it->fields[f].param] : it->fields[f].json);
		}
		appendStringInfoChar(s, '}');
	}
}

/* Append the concrete architecture of template a. */
static void
render_arch(StringInfo s, const ArchTmpl *a, char **chosen)
{
	bool		first = true;

	if (a->object)
	{
		appendStringInfoChar(s, '{');
		for (int i = 0; i < a->n_extra; i++)
		{
			escape_json(s, a->extra_keys[i]);
			appendStringInfoString(s, ": ");
			appendStringInfoString(s, a->extra_json[i]);
			appendStringInfoString(s, ", ");
		}
		appendStringInfoString(s, "\"layers\": ");
	}
	appendStringInfoChar(s, '[');
	render_items(s, a->items, a->n_items, chosen, &first);
	appendStringInfoChar(s, ']');
	if (a->object)
		appendStringInfoChar(s, '}');
}

/*
 * Build a config from chosen JSON texts, one per param (NULL: inactive),
 * and the candidate idx[] each list takes.
 */
static Jsonb *
make_config(SpaceParam *params, int n, char **chosen, const int *idx)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < n; i++)
	{
		int			c = params[i].kind == PARAM_LIST ? idx[i] : 0;

		if (chosen[i] == NULL || params[i].nested)
			continue;
		if (s.len > 1)
			appendStringInfoString(&s, ", ");
		escape_json(&s, params[i].key);
		appendStringInfoString(&s, ": ");
		if (params[i].arch && params[i].arch[c])
			render_arch(&s, params[i].arch[c], chosen);
		else
			appendStringInfoString(&s, chosen[i]);
	}
	appendStringInfoChar(&s, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
}

/*
 * How many values parameter i contributes to a grid: for "model", the
 * concrete architectures of all its candidates; a layer field counts there;
 * any other parameter its candidates.
 */
static double
grid_values(const SpaceParam *params, int n, int i)
{
	double		total = 0;

	if (params[i].nested)
		return 1;
	if (params[i].arch == NULL)
		return params[i].n;
	for (int c = 0; c < params[i].n; c++)
	{
		double		prod = 1;

		for (int j = 0; j < n; j++)
		{
			if (!params[j].nested)
				continue;
			/* a field of the only architecture, or of candidate c */
			if (params[j].cond < 0 || (params[j].cond == i && params[j].cond_ok[c]))
				prod *= params[j].n;
		}
		total += prod;
	}
	return total;
}

/* Every combination of the space's lists, last key varying fastest. */
List *
mop_space_grid(Jsonb *space)
{
	SpaceParam *params;
	int			n = parse_space(space, &params);
	double		total = 1;
	int		   *idx;
	char	  **chosen;
	List	   *out = NIL;

	for (int i = 0; i < n; i++)
		if (params[i].kind != PARAM_FIXED && params[i].kind != PARAM_LIST)
			space_error(params[i].key,
						"a grid needs lists of values; distributions are for mop_random_search");
	for (int i = 0; i < n; i++)
		total *= grid_values(params, n, i);
	if (total > MAX_GRID)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("search grid has %.0f configurations, more than %d", total, MAX_GRID),
				 errhint("Use mop_random_search to sample from a large space.")));
	idx = palloc0(sizeof(int) * n);
	chosen = palloc(sizeof(char *) * n);
	for (;;)
	{
		int			i;
		bool		duplicate = false;

		for (i = 0; i < n; i++)
		{
			bool		active = param_active(params, idx, i);

			/* an inactive parameter contributes one combination, not one per value */
			if (!active && idx[i] != 0)
				duplicate = true;
			chosen[i] = active ? params[i].json[idx[i]] : NULL;
		}
		if (!duplicate)
			out = lappend(out, make_config(params, n, chosen, idx));
		for (i = n - 1; i >= 0; i--)
		{
			/*
			 * a field of an architecture not taken stays at its first
			 * value: it follows "model", which changes only after it
			 */
			if (params[i].nested && !param_active(params, idx, i))
				continue;
			if (++idx[i] < params[i].n)
				break;
			idx[i] = 0;
		}
		if (i < 0)
			break;
	}
	return out;
}

/* trials configurations drawn independently with the given seed. */
List *
mop_space_random(Jsonb *space, int trials, uint64 seed)
{
	SpaceParam *params;
	int			n = parse_space(space, &params);
	char	  **chosen = palloc(sizeof(char *) * n);
	int		   *idx = palloc0(sizeof(int) * n);
	MopRng		rng;
	List	   *out = NIL;

	if (trials < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trials must be at least 1, not %d", trials)));
	mop_prng_seed(&rng, seed ^ UINT64CONST(0x72616e646f6d));
	for (int t = 0; t < trials; t++)
	{
		for (int i = 0; i < n; i++)
		{
			SpaceParam *p = &params[i];
			double		u = (double) (mop_prng_next(&rng) >> 11) / 9007199254740992.0;
			char		buf[64];

			switch (p->kind)
			{
				case PARAM_FIXED:
					chosen[i] = p->json[0];
					continue;
				case PARAM_LIST:
					idx[i] = (int) mop_prng_below(&rng, p->n);
					chosen[i] = p->json[idx[i]];
					continue;
				case PARAM_LOGUNIFORM:
					snprintf(buf, sizeof(buf), "%.9g", exp(log(p->lo) + u * (log(p->hi) - log(p->lo))));
					break;
				case PARAM_UNIFORM:
					snprintf(buf, sizeof(buf), "%.9g", p->lo + u * (p->hi - p->lo));
					break;
				case PARAM_INT:
					snprintf(buf, sizeof(buf), "%.0f",
							 p->lo + (double) mop_prng_below(&rng, (uint64) (p->hi - p->lo) + 1));
					break;
			}
			chosen[i] = pstrdup(buf);
		}
		for (int i = 0; i < n; i++)
			if (!param_active(params, idx, i))
				chosen[i] = NULL;
		out = lappend(out, make_config(params, n, chosen, idx));
	}
	return out;
}

/*
 * Describe a space for the numeric search cores (PBT, TPE): every list or
 * distribution becomes a mop_param (lists are CHOICEs over their JSON
 * values), fixed values stay fixed; a searched layer field is a parameter
 * named by its path, conditional on the architecture it is in.  The
 * description is palloc'd.
 */
MopSpaceDesc *
mop_space_describe(Jsonb *space)
{
	SpaceParam *params;
	int			n = parse_space(space, &params);
	MopSpaceDesc *d = palloc0(sizeof(MopSpaceDesc));

	d->space = params;
	d->n_keys = n;
	d->keys = palloc(sizeof(char *) * n);
	d->nested = palloc(sizeof(bool) * n);
	d->fixed = palloc0(sizeof(char *) * n);
	d->param_of_key = palloc(sizeof(int) * n);
	d->choices = palloc0(sizeof(char **) * n);
	d->params = palloc0(sizeof(mop_param) * n);
	for (int i = 0; i < n; i++)
	{
		d->keys[i] = params[i].key;
		d->nested[i] = params[i].nested;
		d->param_of_key[i] = -2;	/* not placed yet */
		if (params[i].kind == PARAM_FIXED)
		{
			d->fixed[i] = params[i].json[0];
			d->param_of_key[i] = -1;
		}
	}

	/*
	 * Place the parameters so that each conditional one comes after the
	 * choice it depends on (the cores require it; jsonb orders keys by
	 * length, not as written): repeat passes until nothing more is placed.
	 */
	for (bool progress = true; progress;)
	{
		progress = false;
		for (int i = 0; i < n; i++)
		{
			SpaceParam *p = &params[i];
			mop_param  *q;

			if (d->param_of_key[i] != -2)
				continue;
			if (p->cond >= 0 && params[p->cond].kind == PARAM_FIXED)
			{
				if (!p->cond_ok[0])
				{
					/* its condition never holds: never part of a configuration */
					d->param_of_key[i] = -1;
					progress = true;
					continue;
				}
			}
			else if (p->cond >= 0 && d->param_of_key[p->cond] < 0)
				continue;		/* the choice it depends on is not placed yet */
			q = &d->params[d->n_params];
			q->name = p->key;
			q->cond_param = -1;
			q->lo = p->lo;
			q->hi = p->hi;
			if (p->cond >= 0 && params[p->cond].kind == PARAM_LIST)
			{
				q->cond_param = d->param_of_key[p->cond];
				for (int c = 0; c < params[p->cond].n && c < 64; c++)
					if (p->cond_ok[c])
						q->cond_mask |= UINT64CONST(1) << c;
			}
			switch (p->kind)
			{
				case PARAM_LIST:
					q->kind = MOP_PARAM_CHOICE;
					q->n_choices = p->n;
					d->choices[d->n_params] = p->json;
					break;
				case PARAM_LOGUNIFORM:
					q->kind = MOP_PARAM_LOGFLOAT;
					break;
				case PARAM_UNIFORM:
					q->kind = MOP_PARAM_FLOAT;
					break;
				case PARAM_INT:
					q->kind = MOP_PARAM_INT;
					break;
				default:
					break;
			}
			d->param_of_key[i] = d->n_params++;
			progress = true;
		}
	}
	return d;
}

/* The configuration (jsonb) of numeric values x for a described space. */
Jsonb *
mop_space_config(const MopSpaceDesc *d, const double *x)
{
	char	  **chosen = palloc0(sizeof(char *) * d->n_keys);
	int		   *idx = palloc0(sizeof(int) * d->n_keys);

	for (int i = 0; i < d->n_keys; i++)
	{
		int			k = d->param_of_key[i];

		if (k < 0)
			chosen[i] = d->fixed[i];	/* NULL: its condition never holds */
		else if (isnan(x[k]))
			chosen[i] = NULL;	/* inactive conditional parameter */
		else if (d->params[k].kind == MOP_PARAM_CHOICE)
		{
			int			c = (int) x[k];

			c = c < 0 ? 0 : (c >= d->params[k].n_choices ? d->params[k].n_choices - 1 : c);
			idx[i] = c;
			chosen[i] = d->choices[k][c];
		}
		else if (d->params[k].kind == MOP_PARAM_INT || d->params[k].kind == MOP_PARAM_LOGINT)
			chosen[i] = psprintf("%.0f", x[k]);
		else
			chosen[i] = psprintf("%.9g", x[k]);
	}
	return make_config(d->space, d->n_keys, chosen, idx);
}
