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
 * list of architectures.  The result is
 * a list of configuration jsonb values in a deterministic order; each is then
 * validated by the caller with mop_config_to_spec, whose errors name the
 * field.  Errors here name the parameter of the space.
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

/* One hyperparameter of the space. */
typedef struct SpaceParam
{
	char	   *key;
	ParamKind	kind;
	int			n;				/* candidates (FIXED: 1) */
	char	  **json;			/* candidate values as JSON text */
	double		lo,
				hi;				/* distribution bounds */
} SpaceParam;

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

/* Parse one parameter of the space. */
static void
parse_param(SpaceParam *p, const char *key, JsonbValue *v)
{
	p->key = pstrdup(key);
	if (is_container(v, true) && strcmp(key, "model") == 0 &&
		JsonContainerSize(v->val.binary.data) > 0)
	{
		/* a list of layers (the shorthand of one architecture) is fixed */
		JsonbValue *first = getIthJsonbValueFromContainer(v->val.binary.data, 0);

		if (first && is_container(first, false) &&
			(getKeyJsonValueFromContainer(first->val.binary.data, "type", 4, NULL) ||
			 getKeyJsonValueFromContainer(first->val.binary.data, "class_name", 10, NULL)))
		{
			p->kind = PARAM_FIXED;
			p->n = 1;
			p->json = palloc(sizeof(char *));
			p->json[0] = value_json(v);
			return;
		}
	}
	if (is_container(v, true))
	{
		p->kind = PARAM_LIST;
		p->json = array_elements(v, &p->n);
		if (p->n == 0)
			space_error(key, "the list of candidates is empty");
		return;
	}
	if (is_container(v, false) && strcmp(key, "model") != 0)
	{
		JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
		JsonbValue	k,
					arg;
		JsonbIteratorToken tok;
		char	   *dist = NULL;
		int			nkeys = 0;

		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			if (tok != WJB_KEY)
				continue;
			nkeys++;
			dist = pnstrdup(k.val.string.val, k.val.string.len);
			tok = JsonbIteratorNext(&it, &arg, true);
		}
		if (nkeys != 1)
			space_error(key, "a distribution is an object with exactly one key");
		if (!is_container(&arg, true))
			space_error(key, "the argument of distribution \"%s\" must be a list", dist);
		if (strcmp(dist, "choice") == 0)
		{
			p->kind = PARAM_LIST;
			p->json = array_elements(&arg, &p->n);
			if (p->n == 0)
				space_error(key, "the list of choices is empty");
			return;
		}
		if (JsonContainerSize(arg.val.binary.data) != 2)
			space_error(key, "distribution \"%s\" takes two bounds [low, high]", dist);
		p->lo = element_number(&arg, 0, key);
		p->hi = element_number(&arg, 1, key);
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
		return;
	}
	p->kind = PARAM_FIXED;
	p->n = 1;
	p->json = palloc(sizeof(char *));
	p->json[0] = value_json(v);
}

/* Parse a space object into params (in key order); returns the count. */
static int
parse_space(Jsonb *space, SpaceParam **params)
{
	JsonbIterator *it;
	JsonbValue	k,
				v;
	JsonbIteratorToken tok;
	int			n = 0,
				cap = 16;

	if (!JB_ROOT_IS_OBJECT(space) || JB_ROOT_IS_SCALAR(space))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("search space must be a JSON object")));
	*params = palloc0(sizeof(SpaceParam) * cap);
	it = JsonbIteratorInit(&space->root);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		char	   *key;

		if (tok != WJB_KEY)
			continue;
		key = pnstrdup(k.val.string.val, k.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		if (n == cap)
		{
			cap *= 2;
			*params = repalloc(*params, sizeof(SpaceParam) * cap);
		}
		parse_param(&(*params)[n++], key, &v);
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("search space is empty")));
	return n;
}

/* Build a config from chosen JSON texts, one per param. */
static Jsonb *
make_config(SpaceParam *params, int n, char **chosen)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&s, ", ");
		escape_json(&s, params[i].key);
		appendStringInfoString(&s, ": ");
		appendStringInfoString(&s, chosen[i]);
	}
	appendStringInfoChar(&s, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
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
	{
		if (params[i].kind != PARAM_FIXED && params[i].kind != PARAM_LIST)
			space_error(params[i].key,
						"a grid needs lists of values; distributions are for mop_random_search");
		total *= params[i].n;
	}
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

		for (i = 0; i < n; i++)
			chosen[i] = params[i].json[idx[i]];
		out = lappend(out, make_config(params, n, chosen));
		for (i = n - 1; i >= 0; i--)
		{
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
					chosen[i] = p->json[mop_prng_below(&rng, p->n)];
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
		out = lappend(out, make_config(params, n, chosen));
	}
	return out;
}

/*
 * Describe a space for the numeric search cores (PBT, TPE): every list or
 * distribution becomes a mop_param (lists are CHOICEs over their JSON
 * values), fixed values stay fixed.  The description is palloc'd.
 */
MopSpaceDesc *
mop_space_describe(Jsonb *space)
{
	SpaceParam *params;
	int			n = parse_space(space, &params);
	MopSpaceDesc *d = palloc0(sizeof(MopSpaceDesc));

	d->n_keys = n;
	d->keys = palloc(sizeof(char *) * n);
	d->fixed = palloc0(sizeof(char *) * n);
	d->param_of_key = palloc(sizeof(int) * n);
	d->choices = palloc0(sizeof(char **) * n);
	d->params = palloc0(sizeof(mop_param) * n);
	for (int i = 0; i < n; i++)
	{
		SpaceParam *p = &params[i];
		mop_param  *q;

		d->keys[i] = p->key;
		if (p->kind == PARAM_FIXED)
		{
			d->fixed[i] = p->json[0];
			d->param_of_key[i] = -1;
			continue;
		}
		q = &d->params[d->n_params];
		q->name = p->key;
		q->cond_param = -1;
		q->lo = p->lo;
		q->hi = p->hi;
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
	}
	return d;
}

/* The configuration (jsonb) of numeric values x for a described space. */
Jsonb *
mop_space_config(const MopSpaceDesc *d, const double *x)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < d->n_keys; i++)
	{
		int			k = d->param_of_key[i];

		if (k >= 0 && isnan(x[k]))
			continue;			/* inactive conditional parameter */
		if (s.len > 1)
			appendStringInfoString(&s, ", ");
		escape_json(&s, d->keys[i]);
		appendStringInfoString(&s, ": ");
		if (k < 0)
			appendStringInfoString(&s, d->fixed[i]);
		else if (d->params[k].kind == MOP_PARAM_CHOICE)
		{
			int			c = (int) x[k];

			c = c < 0 ? 0 : (c >= d->params[k].n_choices ? d->params[k].n_choices - 1 : c);
			appendStringInfoString(&s, d->choices[k][c]);
		}
		else if (d->params[k].kind == MOP_PARAM_INT || d->params[k].kind == MOP_PARAM_LOGINT)
			appendStringInfo(&s, "%.0f", x[k]);
		else
			appendStringInfo(&s, "%.9g", x[k]);
	}
	appendStringInfoChar(&s, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
}
