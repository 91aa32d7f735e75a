/*
 * encode.c -- one-hot encoding of categorical feature columns: count
 * tables, vocabularies, slots (see encode.h for the contract).
 *
 * A count table interns each distinct value once (a simplehash keyed by
 * the string, the SQL NULL kept beside it), so reading a column costs one
 * hash lookup per row and an int32 per row.  A vocabulary looks a value up
 * by binary search over its kept values (at most max_categories).
 */
#include "postgres.h"

#include <errno.h>

#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "encode.h"

typedef struct CatEntry
{
	const char *key;
	int32		id;
	uint32		hash;
	char		status;
} CatEntry;

#define SH_PREFIX cathash
#define SH_ELEMENT_TYPE CatEntry
#define SH_KEY_TYPE const char *
#define SH_KEY key
#define SH_HASH_KEY(tb, k) hash_bytes((const unsigned char *) (k), (int) strlen(k))
#define SH_EQUAL(tb, a, b) (strcmp((a), (b)) == 0)
#define SH_SCOPE static inline
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_DEFINE
#define SH_DECLARE
#include "lib/simplehash.h"

struct MopCatCounts
{
	MemoryContext cxt;
	cathash_hash *hash;
	int32		n;				/* distinct values */
	int32		cap;
	const char **values;		/* by id; NULL: the SQL NULL */
	int64	   *counts;			/* by id */
	int32		null_id;		/* id of the SQL NULL, or -1 */
};

MopCatCounts *
mop_catcounts_create(void)
{
	MopCatCounts *c = palloc0(sizeof(MopCatCounts));

	c->cxt = CurrentMemoryContext;
	c->hash = cathash_create(c->cxt, 64, NULL);
	c->cap = 16;
	c->values = palloc(sizeof(char *) * c->cap);
	c->counts = palloc(sizeof(int64) * c->cap);
	c->null_id = -1;
	return c;
}

/* A new id for value (already copied into c->cxt, or NULL). */
static int32
new_id(MopCatCounts *c, const char *value)
{
	if (c->n == c->cap)
	{
		if (c->cap >= PG_INT32_MAX / 2)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a categorical column has more than %d distinct values",
							PG_INT32_MAX / 2)));
		c->cap *= 2;
		c->values = repalloc_huge(c->values, sizeof(char *) * c->cap);
		c->counts = repalloc_huge(c->counts, sizeof(int64) * c->cap);
	}
	c->values[c->n] = value;
	c->counts[c->n] = 0;
	return c->n++;
}

int32
mop_catcounts_intern(MopCatCounts *c, const char *value)
{
	CatEntry   *e;
	bool		found;

	if (value == NULL)
	{
		if (c->null_id < 0)
			c->null_id = new_id(c, NULL);
		return c->null_id;
	}
	e = cathash_insert(c->hash, value, &found);
	if (!found)
	{
		e->key = MemoryContextStrdup(c->cxt, value);
		e->id = new_id(c, e->key);
	}
	return e->id;
}

void
mop_catcounts_add(MopCatCounts *c, int32 id, int64 n)
{
	Assert(id >= 0 && id < c->n);
	c->counts[id] += n;
}

MopCatCounts *
mop_catcounts_merge(MopCatCounts *dst, const MopCatCounts *src)
{
	for (int32 i = 0; i < src->n; i++)
		mop_catcounts_add(dst, mop_catcounts_intern(dst, src->values[i]), src->counts[i]);
	return dst;
}

int32
mop_catcounts_size(const MopCatCounts *c)
{
	return c->n;
}

const char *
mop_catcounts_value(const MopCatCounts *c, int32 id)
{
	return c->values[id];
}

int64
mop_catcounts_count(const MopCatCounts *c, int32 id)
{
	return c->counts[id];
}

/* Vocabulary order: descending count, then value in byte order, NULL last. */
static const MopCatCounts *sort_counts;

static int
vocab_order_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;
	int64		cx = sort_counts->counts[x];
	int64		cy = sort_counts->counts[y];
	const char *vx = sort_counts->values[x];
	const char *vy = sort_counts->values[y];

	if (cx != cy)
		return cx > cy ? -1 : 1;
	if (vx == NULL || vy == NULL)
		return (vx == NULL) - (vy == NULL);
	return strcmp(vx, vy);
}

/* qsort comparator of strings in byte order (through the pointers). */
static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* Fill v's lookup table from its values. */
static void
vocab_index(MopVocab *v)
{
	const char **tmp;

	v->null_slot = -1;
	v->nsorted = 0;
	tmp = palloc(sizeof(char *) * Max(v->nvalues, 1));
	for (int32 i = 0; i < v->nvalues; i++)
	{
		if (v->values[i] == NULL)
			v->null_slot = i;
		else
			tmp[v->nsorted++] = v->values[i];
	}
	qsort(tmp, v->nsorted, sizeof(char *), str_cmp);
	v->sorted = tmp;
	v->sorted_slot = palloc(sizeof(int32) * Max(v->nsorted, 1));
	for (int32 i = 0; i < v->nvalues; i++)
	{
		const char **hit;

		if (v->values[i] == NULL)
			continue;
		hit = bsearch(&v->values[i], v->sorted, v->nsorted, sizeof(char *), str_cmp);
		v->sorted_slot[hit - v->sorted] = i;
	}
}

MopVocab *
mop_vocab_build(const MopCatCounts *c, int max_categories, const char *type)
{
	MopVocab   *v = palloc0(sizeof(MopVocab));
	int32	   *order = palloc(sizeof(int32) * Max(c->n, 1));
	int32		nz = 0;
	int32		keep;

	Assert(max_categories >= 1);
	for (int32 i = 0; i < c->n; i++)
		if (c->counts[i] > 0)
			order[nz++] = i;
	sort_counts = c;
	qsort(order, nz, sizeof(int32), vocab_order_cmp);
	sort_counts = NULL;

	v->type = pstrdup(type);
	v->has_other = nz > max_categories;
	keep = v->has_other ? max_categories - 1 : nz;
	v->nvalues = keep;
	v->values = palloc(sizeof(char *) * Max(keep, 1));
	v->counts = palloc(sizeof(int64) * Max(keep, 1));
	for (int32 i = 0; i < keep; i++)
	{
		v->values[i] = c->values[order[i]] ? pstrdup(c->values[order[i]]) : NULL;
		v->counts[i] = c->counts[order[i]];
	}
	for (int32 i = keep; i < nz; i++)
		v->other_count += c->counts[order[i]];
	v->width = keep + (v->has_other ? 1 : 0);
	vocab_index(v);
	pfree(order);
	return v;
}

int32
mop_vocab_slot(const MopVocab *v, const char *value)
{
	const char **hit;

	if (value == NULL)
	{
		if (v->null_slot >= 0)
			return v->null_slot;
	}
	else
	{
		bool		b;

		/*
		 * a boolean column's vocabulary holds its ::text forms; any spelling
		 * boolean input takes ('t', 'yes', 'on', '1', ...) is one of them
		 */
		if (v->type != NULL && strcmp(v->type, "boolean") == 0 && parse_bool(value, &b))
			value = b ? "true" : "false";
		hit = bsearch(&value, v->sorted, v->nsorted, sizeof(char *), str_cmp);
		if (hit != NULL)
			return v->sorted_slot[hit - v->sorted];
	}
	return v->has_other ? v->nvalues : -1;
}

int32 *
mop_vocab_slots_of(const MopVocab *v, const MopCatCounts *c)
{
	int32	   *slots = palloc(sizeof(int32) * Max(c->n, 1));

	for (int32 i = 0; i < c->n; i++)
		slots[i] = mop_vocab_slot(v, c->values[i]);
	return slots;
}

void
mop_vocab_encode(const MopVocab *v, int32 slot, float *dst)
{
	memset(dst, 0, sizeof(float) * v->width);
	if (slot >= 0)
		dst[slot] = 1.0f;
}

void
mop_vocab_append_json(StringInfo s, const MopVocab *v)
{
	appendStringInfoString(s, "{\"type\": ");
	escape_json(s, v->type);
	appendStringInfoString(s, ", \"values\": [");
	for (int32 i = 0; i < v->nvalues; i++)
	{
		if (i)
			appendStringInfoString(s, ", ");
		if (v->values[i] == NULL)
			appendStringInfoString(s, "null");
		else
			escape_json(s, v->values[i]);
	}
	appendStringInfoString(s, "], \"counts\": [");
	for (int32 i = 0; i < v->nvalues; i++)
		appendStringInfo(s, i ? ", " INT64_FORMAT : INT64_FORMAT, v->counts[i]);
	appendStringInfoString(s, "], \"other\": ");
	if (v->has_other)
		appendStringInfo(s, INT64_FORMAT "}", v->other_count);
	else
		appendStringInfoString(s, "null}");
}

/* Report a malformed stored vocabulary. */
static void
vocab_corrupt(const char *dataset, const char *col, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("dataset \"%s\" has an invalid vocabulary for column \"%s\": %s",
					dataset, col, what),
			 errhint("mop.datasets.categories is written by mop_prepare; prepare the dataset again.")));
}

/* The elements of the JSON array under key of container (NULL if absent). */
static JsonbValue *
array_elems(JsonbContainer *container, const char *key, int *n)
{
	JsonbValue	kv;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbValue *out;
	int			cap = 16;

	*n = 0;
	if (getKeyJsonValueFromContainer(container, key, strlen(key), &kv) == NULL ||
		kv.type != jbvBinary || !JsonContainerIsArray(kv.val.binary.data))
		return NULL;
	out = palloc(sizeof(JsonbValue) * cap);
	it = JsonbIteratorInit(kv.val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (*n == cap)
		{
			cap *= 2;
			out = repalloc(out, sizeof(JsonbValue) * cap);
		}
		out[(*n)++] = v;
	}
	return out;
}

/* A JSON number as a non-negative int64, or -1. */
static int64
json_count(const JsonbValue *v)
{
	char	   *s,
			   *end;
	long long	r;

	if (v->type != jbvNumeric)
		return -1;
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	errno = 0;
	r = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || r < 0)
		return -1;
	return (int64) r;
}

MopVocab *
mop_vocab_from_jsonb(JsonbContainer *container, const char *dataset, const char *col)
{
	MopVocab   *v = palloc0(sizeof(MopVocab));
	JsonbValue	kv;
	JsonbValue *vals,
			   *cnts;
	int			nv,
				nc;

	if (!JsonContainerIsObject(container))
		vocab_corrupt(dataset, col, "not a JSON object");
	if (getKeyJsonValueFromContainer(container, "type", 4, &kv) != NULL && kv.type == jbvString)
		v->type = pnstrdup(kv.val.string.val, kv.val.string.len);
	else
		v->type = pstrdup("text");
	vals = array_elems(container, "values", &nv);
	cnts = array_elems(container, "counts", &nc);
	if (vals == NULL || cnts == NULL || nv != nc)
		vocab_corrupt(dataset, col, "\"values\" and \"counts\" must be arrays of the same length");
	v->nvalues = nv;
	v->values = palloc(sizeof(char *) * Max(nv, 1));
	v->counts = palloc(sizeof(int64) * Max(nv, 1));
	for (int i = 0; i < nv; i++)
	{
		if (vals[i].type == jbvNull)
			v->values[i] = NULL;
		else if (vals[i].type == jbvString)
			v->values[i] = pnstrdup(vals[i].val.string.val, vals[i].val.string.len);
		else
			vocab_corrupt(dataset, col, "a value is neither a string nor null");
		v->counts[i] = json_count(&cnts[i]);
		if (v->counts[i] < 0)
			vocab_corrupt(dataset, col, "a count is not a non-negative integer");
	}
	if (getKeyJsonValueFromContainer(container, "other", 5, &kv) == NULL)
		vocab_corrupt(dataset, col, "\"other\" is missing");
	if (kv.type == jbvNull)
		v->has_other = false;
	else
	{
		v->has_other = true;
		v->other_count = json_count(&kv);
		if (v->other_count < 0)
			vocab_corrupt(dataset, col, "\"other\" is neither null nor a non-negative integer");
	}
	v->width = nv + (v->has_other ? 1 : 0);
	if (v->width < 1)
		vocab_corrupt(dataset, col, "it has no value and no \"other\"");
	vocab_index(v);
	/* duplicates would make two slots of one value */
	for (int32 i = 1; i < v->nsorted; i++)
		if (strcmp(v->sorted[i - 1], v->sorted[i]) == 0)
			vocab_corrupt(dataset, col, "a value is listed twice");
	{
		int			nulls = 0;

		for (int32 i = 0; i < nv; i++)
			nulls += v->values[i] == NULL;
		if (nulls > 1)
			vocab_corrupt(dataset, col, "null is listed twice");
	}
	return v;
}
