/*
 * source.c -- read a user's table or view into float32 arrays.
 *
 * mop_prepare and mop_evaluate both read "features + target" from a relation
 * the caller names.  The relation is read through SPI with the caller's
 * privileges (the functions are SECURITY INVOKER), after an explicit SELECT
 * privilege check that names the table.  Features are either numeric and
 * categorical columns or a single numeric array column (cast to float4[],
 * flattened row-major).  A numeric column is cast to float8; a categorical
 * one (text, varchar, char, an enum, boolean) is read as text and interned
 * into its column's count table (encode.h), one int32 id per row, for the
 * caller to one-hot encode (mop_rows_encode) once it has a vocabulary.
 * Rows with a NULL numeric feature, NULL array element or NULL target are
 * rejected: the whole call fails and reports how many rows had NULLs
 * (policy: mop never silently drops data); in a categorical column NULL is
 * a value like any other.  NaN and infinite values are rejected.
 *
 * The data are read with a no-scroll cursor in chunks, so only the packed
 * float arrays (not SPI tuples) are held for the whole table.
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "mop.h"

#define FETCH_ROWS 2048

/* Is typid (or its base type) a numeric scalar type mop can read? */
bool
mop_type_is_numeric(Oid typid)
{
	switch (getBaseType(typid))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			return true;
		default:
			return false;
	}
}

/* Is typid (or its base type) one mop one-hot encodes: text, varchar, char, enum, boolean? */
bool
mop_type_is_categorical(Oid typid)
{
	Oid			t = getBaseType(typid);

	switch (t)
	{
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case BOOLOID:
			return true;
		default:
			return type_is_enum(t);
	}
}

/* Is typid (or its base type) an array of numbers? */
bool
mop_type_is_numeric_array(Oid typid)
{
	Oid			elem = get_element_type(getBaseType(typid));

	return OidIsValid(elem) && mop_type_is_numeric(elem);
}

/* Attribute number of column name in src (ERROR if missing). */
static AttrNumber
column_attnum(MopSource *src, const char *name)
{
	AttrNumber	att = get_attnum(src->relid, name);

	if (att == InvalidAttrNumber || att < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation %s does not exist",
						name, src->relname)));
	return att;
}

/*
 * Resolve src: relation name, target column and feature columns (featcols
 * NULL = every numeric column except the target or, if there is none, the
 * only numeric array column).  Checks types, not data.
 */
/* Long because it resolves the target, the default and the named feature columns in one pass over the relation's attributes. */
void
mop_source_open(MopSource *src, Oid relid, const char *target,
				char **featcols, int nfeatcols)
{
	char	   *relname = get_rel_name(relid);
	AttrNumber	tatt;
	int			narrays = 0;

	memset(src, 0, sizeof(*src));
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	src->relid = relid;
	src->relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											  relname);

	/* no privilege at all on the relation: say so before anything else */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_SELECT, ACLMASK_ANY) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", src->relname),
				 errdetail("mop reads the source with the privileges of the calling role.")));

	if (target == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("target column must not be null")));
	tatt = column_attnum(src, target);
	src->target = pstrdup(target);
	src->target_type = get_atttype(relid, tatt);

	if (featcols == NULL)
	{
		Relation	rel = relation_open(relid, AccessShareLock);
		TupleDesc	td = RelationGetDescr(rel);

		src->featcols = palloc(sizeof(char *) * Max(td->natts, 1));
		src->feattypes = palloc(sizeof(Oid) * Max(td->natts, 1));
		src->featcat = palloc0(sizeof(bool) * Max(td->natts, 1));
		for (int i = 0; i < td->natts; i++)
		{
			Form_pg_attribute a = TupleDescAttr(td, i);

			if (a->attisdropped || a->attnum == tatt ||
				!mop_type_is_numeric(a->atttypid))
				continue;
			src->featcols[src->nfeatcols] = pstrdup(NameStr(a->attname));
			src->feattypes[src->nfeatcols++] = a->atttypid;
		}
		/* no numeric column: a single numeric array column will do */
		if (src->nfeatcols == 0)
		{
			int			found = 0;

			for (int i = 0; i < td->natts; i++)
			{
				Form_pg_attribute a = TupleDescAttr(td, i);

				if (a->attisdropped || a->attnum == tatt ||
					!mop_type_is_numeric_array(a->atttypid))
					continue;
				if (found++ == 0)
				{
					src->featcols[0] = pstrdup(NameStr(a->attname));
					src->feattypes[0] = a->atttypid;
				}
			}
			if (found == 1)
			{
				src->nfeatcols = 1;
				src->is_array = true;
			}
		}
		/* say which columns were left out, and why: never a silent choice */
		{
			StringInfoData skipped;
			int			nskipped = 0;

			initStringInfo(&skipped);
			for (int i = 0; i < td->natts; i++)
			{
				Form_pg_attribute a = TupleDescAttr(td, i);
				bool		used = false;

				if (a->attisdropped || a->attnum == tatt)
					continue;
				for (int j = 0; j < src->nfeatcols; j++)
					used |= strcmp(src->featcols[j], NameStr(a->attname)) == 0;
				if (used)
					continue;
				appendStringInfo(&skipped, "%s%s (%s)", nskipped++ ? ", " : "",
								 quote_identifier(NameStr(a->attname)), format_type_be(a->atttypid));
			}
			if (nskipped > 0 && src->nfeatcols > 0)
				ereport(NOTICE,
						(errmsg("%d column%s of %s %s not feature%s: %s", nskipped,
								nskipped == 1 ? "" : "s", src->relname, nskipped == 1 ? "is" : "are",
								nskipped == 1 ? "" : "s", skipped.data),
						 errdetail("Without features, mop uses every numeric column but the target%s.",
								   src->is_array ? " (here: none, so the only numeric array column)" : ""),
						 errhint("Name the features to choose them yourself, e.g. features => ARRAY['a', 'b']; text, enum and boolean columns named there are one-hot encoded.")));
		}
		relation_close(rel, AccessShareLock);
		if (src->nfeatcols == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("relation %s has no numeric feature column (or single numeric array column) besides the target \"%s\"",
							src->relname, target),
					 errhint("Name the features explicitly: text, enum and boolean columns named there are one-hot encoded; e.g. features => ARRAY['pixels'] for an array column.")));
	}
	else
	{
		if (nfeatcols == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("features must list at least one column")));
		src->featcols = palloc(sizeof(char *) * nfeatcols);
		src->feattypes = palloc(sizeof(Oid) * nfeatcols);
		src->featcat = palloc0(sizeof(bool) * nfeatcols);
		for (int i = 0; i < nfeatcols; i++)
		{
			AttrNumber	att;
			Oid			typ;

			if (featcols[i] == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("features must not contain nulls")));
			att = column_attnum(src, featcols[i]);
			if (att == tatt)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("column \"%s\" cannot be both the target and a feature",
								featcols[i])));
			for (int j = 0; j < i; j++)
				if (strcmp(src->featcols[j], featcols[i]) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_DUPLICATE_COLUMN),
							 errmsg("feature column \"%s\" is listed twice", featcols[i])));
			typ = get_atttype(relid, att);
			if (mop_type_is_numeric_array(typ))
				narrays++;
			else if (mop_type_is_categorical(typ))
			{
				src->featcat[i] = true;
				src->ncat++;
			}
			else if (!mop_type_is_numeric(typ))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("feature column \"%s\" has type %s, which mop cannot use as a feature",
								featcols[i], format_type_be(typ)),
						 errdetail("Features are numeric columns, categorical columns (text, varchar, char, enum, boolean; one-hot encoded) or one numeric array column."),
						 errhint("Cast the column in a view: to text to one-hot encode its values, or to a number.")));
			src->featcols[i] = pstrdup(featcols[i]);
			src->feattypes[i] = typ;
		}
		src->nfeatcols = nfeatcols;
		if (narrays > 0 && nfeatcols > 1)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("an array feature column must be the only feature"),
					 errhint("Combine the columns into one array in a view.")));
		src->is_array = (narrays == 1);
	}
	/* floats per row read: the array's (not yet known) or the numeric columns' */
	src->nfeatures = src->is_array ? -1 : src->nfeatcols - src->ncat;
}

/* Check SELECT on every column src uses (table-level SELECT suffices). */
void
mop_source_check_privileges(MopSource *src)
{
	if (pg_class_aclcheck(src->relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK)
		return;
	for (int i = 0; i <= src->nfeatcols; i++)
	{
		const char *col = (i < src->nfeatcols) ? src->featcols[i] : src->target;
		AttrNumber	att = get_attnum(src->relid, col);

		if (pg_attribute_aclcheck(src->relid, att, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for table %s", src->relname),
					 errdetail("The calling role may not read column \"%s\".", col)));
	}
}

/*
 * Distinct non-null target values as text, in the target type's own sort
 * order (so class 2 comes before class 10).  These define class indices.
 */
char	  **
mop_source_labels(MopSource *src, int *nlabels)
{
	MemoryContext cxt = CurrentMemoryContext;
	const char *t = quote_identifier(src->target);
	char	  **labels;
	int			rc;

	SPI_connect();
	rc = SPI_execute(psprintf("SELECT s.t::pg_catalog.text FROM "
							  "(SELECT DISTINCT %s AS t FROM %s WHERE %s IS NOT NULL) s "
							  "ORDER BY s.t",
							  t, src->relname, t),
					 true, MOP_MAX_CLASSES + 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read labels: %s", SPI_result_code_string(rc));
	if (SPI_processed > MOP_MAX_CLASSES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("target column \"%s\" has more than %d distinct values",
						src->target, MOP_MAX_CLASSES),
				 errhint("Use target_kind => 'regression' for a numeric target.")));
	*nlabels = (int) SPI_processed;
	labels = MemoryContextAlloc(cxt, sizeof(char *) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *s = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

		labels[i] = MemoryContextStrdup(cxt, s);
	}
	SPI_finish();
	return labels;
}

/* A label and its class index, for binary search by text. */
typedef struct LabelIdx
{
	const char *label;
	int			idx;
} LabelIdx;

/* qsort/bsearch comparator of LabelIdx by label. */
static int
labelidx_cmp(const void *a, const void *b)
{
	return strcmp(((const LabelIdx *) a)->label, ((const LabelIdx *) b)->label);
}

/* Grow rows to hold at least need rows. */
static void
rows_reserve(MopRows *rows, int64 *cap, int64 need)
{
	int64		ncap;

	if (need <= *cap)
		return;
	ncap = Max(*cap * 2, Max(need, 1024));
	if (rows->x == NULL)
	{
		rows->x = MemoryContextAllocHuge(CurrentMemoryContext,
										 sizeof(float) * ncap * Max(rows->nfeatures, 1));
		rows->y = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * ncap);
		if (rows->ncat > 0)
			rows->cat = MemoryContextAllocHuge(CurrentMemoryContext,
											   sizeof(int32) * ncap * rows->ncat);
	}
	else
	{
		rows->x = repalloc_huge(rows->x, sizeof(float) * ncap * Max(rows->nfeatures, 1));
		rows->y = repalloc_huge(rows->y, sizeof(float) * ncap);
		if (rows->ncat > 0)
			rows->cat = repalloc_huge(rows->cat, sizeof(int32) * ncap * rows->ncat);
	}
	*cap = ncap;
}

/*
 * Read every row of src into rows (allocated in the current context).
 * kind says how to encode the target: class/binary through labels (a label
 * not in the list is an error), regression as the value.  nfeatures is the
 * expected floats per row, or -1 to take it from the first row (arrays).
 */
/* Long because one cursor loop decodes every kind of feature and target column and counts nulls and non-finite values as it goes. */
void
mop_source_read(MopSource *src, MopTargetKind kind, char **labels, int nlabels,
				int nfeatures, MopRows *rows)
{
	MemoryContext cxt = CurrentMemoryContext;
	StringInfoData q;
	LabelIdx   *lidx = NULL;
	Portal		portal;
	int64		cap = 0;
	int64		nulls = 0;
	int64		nonfinite = 0;
	int			ncols = src->nfeatcols;

	memset(rows, 0, sizeof(*rows));
	rows->nfeatures = nfeatures;
	rows->ncat = src->ncat;
	if (src->ncat > 0)
	{
		rows->dicts = palloc(sizeof(MopCatCounts *) * src->ncat);
		for (int i = 0; i < src->ncat; i++)
			rows->dicts[i] = mop_catcounts_create();
	}

	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT ");
	for (int i = 0; i < ncols; i++)
		appendStringInfo(&q, "%s::pg_catalog.%s, ", quote_identifier(src->featcols[i]),
						 src->is_array ? "float4[]" : src->featcat[i] ? "text" : "float8");
	appendStringInfo(&q, "%s::pg_catalog.%s FROM %s",
					 quote_identifier(src->target),
					 kind == MOP_TARGET_REGRESSION ? "float8" : "text",
					 src->relname);

	if (kind != MOP_TARGET_REGRESSION)
	{
		lidx = palloc(sizeof(LabelIdx) * Max(nlabels, 1));
		for (int i = 0; i < nlabels; i++)
		{
			lidx[i].label = labels[i];
			lidx[i].idx = i;
		}
		qsort(lidx, nlabels, sizeof(LabelIdx), labelidx_cmp);
	}

	SPI_connect();
	portal = SPI_cursor_open_with_args(NULL, q.data, 0, NULL, NULL, NULL, true,
									   CURSOR_OPT_NO_SCROLL);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		{
			MemoryContext spicxt = MemoryContextSwitchTo(cxt);
			TupleDesc	td = SPI_tuptable->tupdesc;

			for (uint64 r = 0; r < SPI_processed; r++)
			{
				HeapTuple	tup = SPI_tuptable->vals[r];
				bool		isnull;
				Datum		d;
				float	   *xr;
				float		yv;
				bool		bad = false;

				/* target first: a NULL row is skipped (and counted) */
				d = SPI_getbinval(tup, td, ncols + 1, &isnull);
				if (isnull)
				{
					nulls++;
					continue;
				}
				if (kind == MOP_TARGET_REGRESSION)
				{
					double		v = DatumGetFloat8(d);

					if (!isfinite(v))
					{
						nonfinite++;
						continue;
					}
					if (!isfinite((float) v))
						ereport(ERROR,
								(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
								 errmsg("target column \"%s\" has the value %g, out of range for single precision",
										src->target, v),
								 errhint("mop trains in single precision (|x| < 3.4e38); scale the column in a view.")));
					yv = (float) v;
				}
				else
				{
					LabelIdx	key;
					LabelIdx   *hit;
					char	   *s = TextDatumGetCString(d);

					key.label = s;
					hit = bsearch(&key, lidx, nlabels, sizeof(LabelIdx), labelidx_cmp);
					if (hit == NULL)
						ereport(ERROR,
								(errcode(ERRCODE_DATA_EXCEPTION),
								 errmsg("unknown label \"%s\" in column \"%s\"", s, src->target),
								 errdetail("The dataset knows %d labels.", nlabels)));
					yv = (float) hit->idx;
					pfree(s);
				}

				if (src->is_array)
				{
					ArrayType  *a;
					int			n;
					float	   *p;

					d = SPI_getbinval(tup, td, 1, &isnull);
					if (isnull)
					{
						nulls++;
						continue;
					}
					a = DatumGetArrayTypeP(d);
					if (ARR_HASNULL(a))
					{
						nulls++;
						continue;
					}
					n = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
					if (rows->nfeatures < 0)
					{
						if (n == 0)
							ereport(ERROR,
									(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
									 errmsg("array feature \"%s\" is empty", src->featcols[0])));
						rows->nfeatures = n;
					}
					if (n != rows->nfeatures)
						ereport(ERROR,
								(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
								 errmsg("array feature \"%s\" has %d elements in a row, expected %d",
										src->featcols[0], n, rows->nfeatures)));
					rows_reserve(rows, &cap, rows->nrows + 1);
					p = (float *) ARR_DATA_PTR(a);
					xr = rows->x + rows->nrows * (int64) rows->nfeatures;
					for (int j = 0; j < n; j++)
					{
						if (!isfinite(p[j]))
							bad = true;
						xr[j] = p[j];
					}
					if ((Pointer) a != DatumGetPointer(d))
						pfree(a);
				}
				else
				{
					int			k = 0;	/* numeric columns so far */
					int			c = 0;	/* categorical columns so far */
					int32	   *cr;

					rows_reserve(rows, &cap, rows->nrows + 1);
					xr = rows->x + rows->nrows * (int64) rows->nfeatures;
					cr = rows->cat ? rows->cat + rows->nrows * (int64) rows->ncat : NULL;
					for (int j = 0; j < ncols; j++)
					{
						double		v;

						d = SPI_getbinval(tup, td, j + 1, &isnull);
						if (src->featcat[j])
						{
							char	   *s = isnull ? NULL : TextDatumGetCString(d);

							cr[c] = mop_catcounts_intern(rows->dicts[c], s);
							c++;
							if (s)
								pfree(s);
							continue;
						}
						if (isnull)
						{
							bad = true;
							nulls++;
							break;
						}
						v = DatumGetFloat8(d);
						if (!isfinite(v))
						{
							nonfinite++;
							bad = true;
							break;
						}
						if (!isfinite((float) v))
							ereport(ERROR,
									(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
									 errmsg("feature column \"%s\" has the value %g, out of range for single precision",
											src->featcols[j], v),
									 errhint("mop trains in single precision (|x| < 3.4e38); scale the column in a view.")));
						xr[k++] = (float) v;
					}
					if (bad)
						continue;
				}
				if (bad)
				{
					nonfinite++;
					continue;
				}
				rows->y[rows->nrows++] = yv;
			}
			MemoryContextSwitchTo(spicxt);
		}
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	SPI_finish();

	if (nulls > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg(INT64_FORMAT " rows of %s have NULL features or target",
						nulls, src->relname),
				 errdetail("mop rejects rows with NULLs rather than skipping them."),
				 errhint("Filter or impute them in a view, e.g. CREATE VIEW v AS SELECT * FROM t WHERE col IS NOT NULL.")));
	if (nonfinite > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg(INT64_FORMAT " rows of %s have NaN or infinite features or target",
						nonfinite, src->relname),
				 errhint("Filter them in a view.")));
	if (rows->nfeatures < 0)
		rows->nfeatures = 0;
}

/* Model inputs of ncols feature columns: 1 per numeric one, its vocabulary's width per categorical one. */
int
mop_input_width(int ncols, MopVocab **vocab)
{
	int64		w = 0;

	for (int i = 0; i < ncols; i++)
		w += (vocab && vocab[i]) ? vocab[i]->width : 1;
	if (w > PG_INT32_MAX / 4)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the features would make " INT64_FORMAT " model inputs", w),
				 errhint("Use a smaller max_categories.")));
	return (int) w;
}

/*
 * Replace rows->x (the numeric columns) by the model's input: column by
 * column, a numeric value as is, a categorical one one-hot over its
 * vocabulary (vocab[i], for every categorical column i).
 */
void
mop_rows_encode(MopRows *rows, int ncols, MopVocab **vocab)
{
	int			width = mop_input_width(ncols, vocab);
	int			nnum = rows->nfeatures;
	int			ncat = rows->ncat;
	int32	  **slots = palloc(sizeof(int32 *) * Max(ncat, 1));
	float	   *x;
	int			c = 0;

	for (int i = 0; i < ncols; i++)
		if (vocab[i])
			slots[c] = mop_vocab_slots_of(vocab[i], rows->dicts[c]), c++;
	Assert(c == ncat);
	x = MemoryContextAllocHuge(CurrentMemoryContext,
							   sizeof(float) * Max(rows->nrows, 1) * (Size) width);
	for (int64 r = 0; r < rows->nrows; r++)
	{
		const float *num = rows->x + r * nnum;
		const int32 *ids = rows->cat + r * ncat;
		float	   *dst = x + r * width;
		int			k = 0;

		c = 0;
		for (int i = 0; i < ncols; i++)
		{
			if (vocab[i])
			{
				mop_vocab_encode(vocab[i], slots[c][ids[c]], dst);
				dst += vocab[i]->width;
				c++;
			}
			else
				*dst++ = num[k++];
		}
		if ((r & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	for (c = 0; c < ncat; c++)
		pfree(slots[c]);
	pfree(slots);
	pfree(rows->x);
	if (rows->cat)
		pfree(rows->cat);
	rows->x = x;
	rows->cat = NULL;
	rows->ncat = 0;
	rows->nfeatures = width;
}

/* Which of a row's width model inputs are one-hot (not standardised); NULL when none. */
bool *
mop_onehot_mask(int ncols, MopVocab **vocab, int width)
{
	bool	   *m;
	int			off = 0;

	if (vocab == NULL)
		return NULL;
	m = palloc0(sizeof(bool) * Max(width, 1));
	for (int i = 0; i < ncols && off < width; i++)
	{
		int			w = vocab[i] ? vocab[i]->width : 1;

		for (int j = 0; j < w && off + j < width; j++)
			m[off + j] = vocab[i] != NULL;
		off += w;
	}
	return m;
}

/* The feature column (index into featcols) that model input j comes from. */
int
mop_input_column(int ncols, MopVocab **vocab, int j)
{
	int			off = 0;

	if (vocab == NULL)
		return j;
	for (int i = 0; i < ncols; i++)
	{
		off += vocab[i] ? vocab[i]->width : 1;
		if (j < off)
			return i;
	}
	return ncols;
}
