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
 * ({"patience": N, ...}) is its fixed value; and "class_weight": an object
 * of label -> weight is its fixed value unless it is {"choice": [...]}
 * (a label named "choice" goes in a list then).  The result is
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
	/* conditional parameter: active only when when_key takes one of when_values */
	char	   *when_key;
	char	  **when_values;
	int			n_when;
	int			cond;			/* index of when_key's parameter (resolved) */
	bool	   *cond_ok;		/* per candidate of cond: does it activate this one */
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
	if (is_container(v, false) && strcmp(key, "early_stopping") == 0 &&
		(getKeyJsonValueFromContainer(v->val.binary.data, "patience", 8, NULL) ||
		 getKeyJsonValueFromContainer(v->val.binary.data, "min_delta", 9, NULL)))
	{
		/* {"patience": N, ...} is the configuration's value, not a distribution */
		p->kind = PARAM_FIXED;
		p->n = 1;
		p->json = palloc(sizeof(char *));
		p->json[0] = value_json(v);
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
		/* bounded before anything is expanded: a list cannot outgrow a grid */
		if (JsonContainerSize(v->val.binary.data) > MAX_GRID)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("search space key \"%s\" lists %d values, more than %d",
							key, (int) JsonContainerSize(v->val.binary.data), MAX_GRID),
					 errhint("Use a distribution and mop_random_search for a large range.")));
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
					arg,
					val;
		JsonbIteratorToken tok;
		char	   *dist = NULL;
		int			nkeys = 0;

		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			char	   *name;

			if (tok != WJB_KEY)
				continue;
			name = pnstrdup(k.val.string.val, k.val.string.len);
			tok = JsonbIteratorNext(&it, &val, true);
			if (strcmp(name, "when") == 0)
			{
				parse_when(p, key, &val);
				continue;
			}
			nkeys++;
			dist = name;
			arg = val;
		}
		if (nkeys != 1)
			space_error(key, "a distribution is an object with exactly one key (besides \"when\")");
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

/* Link each conditional parameter to the one it depends on; check values. */
static void
resolve_conditions(SpaceParam *params, int n)
{
	for (int i = 0; i < n; i++)
	{
		SpaceParam *p = &params[i];
		SpaceParam *c = NULL;

		p->cond = -1;
		if (!p->when_key)
			continue;
		for (int j = 0; j < n; j++)
			if (j != i && strcmp(params[j].key, p->when_key) == 0)
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
	resolve_conditions(*params, n);
	return n;
}

/* Build a config from chosen JSON texts, one per param (NULL: inactive). */
static Jsonb *
make_config(SpaceParam *params, int n, char **chosen)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < n; i++)
	{
		if (chosen[i] == NULL)
			continue;
		if (s.len > 1)
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
		d->keys[i] = params[i].key;
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
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < d->n_keys; i++)
	{
		int			k = d->param_of_key[i];

		if (k >= 0 && isnan(x[k]))
			continue;			/* inactive conditional parameter */
		if (k < 0 && d->fixed[i] == NULL)
			continue;			/* a parameter whose condition never holds */
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
