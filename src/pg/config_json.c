/*
 * config_json.c -- typed access to the JSON values of a model configuration.
 *
 * The objects, arrays, numbers, strings and booleans of a configuration,
 * each checked for its type (and range) as it is read: a value that does
 * not fit is an ERROR (SQLSTATE 22023) whose message names the field with
 * its path, e.g. invalid value for "model.layers[1].units".  Also the
 * lenient name matching (cfg_squash) and the values several kinds of layer
 * share: activation names and [h, w] pairs.
 */
#include "postgres.h"

#include <math.h>

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "config_internal.h"

/* Raise the standard configuration error naming field. */
void
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
JsonItem *
cfg_object_items(JsonbContainer *c, const char *path, int *n)
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
JsonbValue *
cfg_array_elems(const JsonbValue *v, const char *path, int *n)
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
double
cfg_number(const JsonbValue *v, const char *field)
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
int64
cfg_int(const JsonbValue *v, const char *field, int64 lo, int64 hi)
{
	double		d = cfg_number(v, field);

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
char *
cfg_string(const JsonbValue *v, const char *field)
{
	if (v->type != jbvString)
		cfg_error(field, "must be a string");
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* A JSON boolean. */
bool
cfg_bool(const JsonbValue *v, const char *field)
{
	if (v->type != jbvBool)
		cfg_error(field, "must be true or false");
	return v->val.boolean;
}

/* Lower-case copy of s without '_' and '-' (for lenient name matching). */
char *
cfg_squash(const char *s)
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
int32
cfg_activation(const JsonbValue *v, const char *field)
{
	char	   *s;

	if (v->type == jbvNull)
		return NN_ACT_NONE;
	s = cfg_squash(cfg_string(v, field));
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
			  cfg_string(v, field));
}

/* An int or [h, w] pair, each in [1, NN_MAX_DIM]. */
void
cfg_pair(const JsonbValue *v, const char *field, int32 *h, int32 *w)
{
	if (v->type == jbvNumeric)
	{
		*h = *w = (int32) cfg_int(v, field, 1, NN_MAX_DIM);
		return;
	}
	else
	{
		int			n;
		JsonbValue *e;

		if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
			cfg_error(field, "must be an integer or an array of two integers");
		e = cfg_array_elems(v, field, &n);
		if (n != 2)
			cfg_error(field, "must be an integer or an array of two integers");
		*h = (int32) cfg_int(&e[0], field, 1, NN_MAX_DIM);
		*w = (int32) cfg_int(&e[1], field, 1, NN_MAX_DIM);
	}
}
