/*
 * prepare.c -- mop_prepare(): pack a table into training buffers.
 *
 * mop_prepare reads a table or view (as the caller), maps the target to
 * class indices (or keeps it as a value for regression), shuffles the rows
 * once with its own seeded generator, splits off a validation fraction,
 * standardises every feature with the mean and standard deviation of the
 * training rows (a feature with zero deviation gets std 1), and writes
 * float32 buffers into mop.buffers:
 *
 *   training rows      -> partitions 0..P-1, contiguous runs of the shuffled
 *                         order whose sizes differ by at most one row;
 *   validation rows    -> spread over the same P partitions the same way;
 *   each partition     -> buffers of at most buffer_rows rows, numbered 0..
 *
 * Categorical feature columns (text, varchar, char, enum, boolean) are
 * one-hot encoded in place (column i's inputs follow column i-1's), over a
 * vocabulary built from the training rows' values (encode.h: descending
 * count, then value; at most max_categories inputs, the rarest values
 * sharing an "other" input when there are more), stored in
 * mop.datasets.categories.  One-hot inputs are not standardised (mean 0,
 * std 1 are stored for them).
 *
 * x is rows * n_features float32 values (row-major, images H x W x C), y is
 * one float32 per row (class index or value), both in native byte order,
 * stored uncompressed (STORAGE EXTERNAL).  The statistics, the label mapping
 * and the shapes go to mop.datasets so prediction can apply them again.
 * Everything is written in the caller's transaction.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "guc.h"
#include "mop.h"
#include "prepare.h"
#include "segment.h"

PG_FUNCTION_INFO_V1(mop_prepare);

/* text[] argument as a palloc'd array of C strings (NULL elements kept). */
static char **
text_array_to_cstrings(ArrayType *a, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **out;

	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features must be a one-dimensional array")));
	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	out = palloc(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = nulls[i] ? NULL : TextDatumGetCString(elems[i]);
	return out;
}

/* Build a text[] datum from C strings. */
Datum
mop_prepare_text_array(char **s, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(s[i]);
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* Build a float8[] datum. */
Datum
mop_prepare_float8_array(const double *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Float8GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/* Resolve the declared shape into H, W, C for nfeatures values. */
void
mop_prepare_resolve_shape(ArrayType *shape, int nfeatures, int32 *h, int32 *w, int32 *c)
{
	int32	   *v;
	int			n;
	int64		prod = 1;

	*h = 1;
	*w = 1;
	*c = nfeatures;
	if (shape == NULL)
		return;
	if (ARR_NDIM(shape) != 1 || ARR_HASNULL(shape) ||
		ARR_ELEMTYPE(shape) != INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"shape\": must be a one-dimensional int[] without nulls")));
	n = ArrayGetNItems(1, ARR_DIMS(shape));
	v = (int32 *) ARR_DATA_PTR(shape);
	if (n < 1 || n > 3)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"shape\": must have 1 to 3 elements ([n], [h, w] or [h, w, c])")));
	for (int i = 0; i < n; i++)
	{
		if (v[i] <= 0 || v[i] > NN_MAX_DIM)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"shape\": dimensions must be between 1 and %d",
							NN_MAX_DIM)));
		prod *= v[i];
	}
	if (prod != nfeatures)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"shape\": %lld values per row, but the features have %d",
						(long long) prod, nfeatures)));
	if (n == 1)
		*c = v[0];
	else
	{
		*h = v[0];
		*w = v[1];
		*c = (n == 3) ? v[2] : 1;
	}
}

/*
 * The vocabulary of each categorical column of src from its count table
 * (counts[c] for the c-th categorical column, counted over the training
 * rows), with a NOTICE for a column whose rarest values share the "other"
 * input.  *vocab gets one entry per feature column (NULL for a numeric
 * one); the result is mop.datasets.categories as JSON text.
 */
char *
mop_prepare_vocabularies(const MopSource *src, MopCatCounts **counts, int max_categories,
						 MopVocab ***vocab)
{
	StringInfoData js;
	MopVocab  **v = palloc0(sizeof(MopVocab *) * src->nfeatcols);
	int			c = 0;

	if (!mop_datasets_have_categories())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("categorical feature columns need mop 0.2's catalog"),
				 errhint("Run ALTER EXTENSION mop UPDATE.")));
	initStringInfo(&js);
	appendStringInfoChar(&js, '{');
	for (int i = 0; i < src->nfeatcols; i++)
	{
		MopCatCounts *cc;
		int32		distinct = 0;

		if (!src->featcat[i])
			continue;
		cc = counts[c++];
		v[i] = mop_vocab_build(cc, max_categories, format_type_be(src->feattypes[i]));
		for (int32 id = 0; id < mop_catcounts_size(cc); id++)
			distinct += mop_catcounts_count(cc, id) > 0;
		if (v[i]->has_other && v[i]->nvalues == 0)
			ereport(NOTICE,
					(errmsg("column \"%s\" has %d distinct values in the training rows: with max_categories => 1 they share one \"other\" input",
							src->featcols[i], distinct),
					 errhint("max_categories => %d would give each value its own input.", distinct)));
		else if (v[i]->has_other)
			ereport(NOTICE,
					(errmsg("column \"%s\" has %d distinct values in the training rows: the %d most frequent get an input each, the other %d (" INT64_FORMAT " rows) share one \"other\" input",
							src->featcols[i], distinct, v[i]->nvalues, distinct - v[i]->nvalues,
							v[i]->other_count),
					 errhint("max_categories => %d would give each value its own input.", distinct)));
		if (js.len > 1)
			appendStringInfoString(&js, ", ");
		escape_json(&js, src->featcols[i]);
		appendStringInfoString(&js, ": ");
		mop_vocab_append_json(&js, v[i]);
	}
	appendStringInfoChar(&js, '}');
	*vocab = v;
	return js.data;
}

/*
 * Count the values of the categorical columns over the training rows
 * (train[0..n_train) index rows) into rows' own count tables.
 */
void
mop_prepare_count_categories(MopRows *rows, const int64 *train, int64 n_train)
{
	for (int64 i = 0; i < n_train; i++)
	{
		const int32 *ids = rows->cat + train[i] * rows->ncat;

		for (int k = 0; k < rows->ncat; k++)
			mop_catcounts_add(rows->dicts[k], ids[k], 1);
	}
}

/* Vocabularies from the training rows, then rows one-hot encoded over them. */
static char *
build_vocabularies(MopSource *src, MopRows *rows, const int64 *train, int64 n_train,
				   int max_categories, MopVocab ***vocab)
{
	char	   *js;

	mop_prepare_count_categories(rows, train, n_train);
	js = mop_prepare_vocabularies(src, rows->dicts, max_categories, vocab);
	mop_rows_encode(rows, src->nfeatcols, *vocab);
	return js;
}

/* Insert the buffers of one split (see prepare.h); returns how many were written. */
int
mop_prepare_write_split(SPIPlanPtr plan, int64 dataset_id, const char *split,
						const MopRows *rows, const int64 *idx, int64 n,
						int first_partition, int partitions, int buffer_rows,
						const double *mean, const double *std)
{
	int			nf = rows->nfeatures;
	int			written = 0;
	size_t		xbytes = (size_t) buffer_rows * nf * sizeof(float);
	bytea	   *xb = palloc(VARHDRSZ + xbytes);
	bytea	   *yb = palloc(VARHDRSZ + (size_t) buffer_rows * sizeof(float));

	for (int p = 0; p < partitions; p++)
	{
		int64		start = n * p / partitions;
		int64		end = n * (p + 1) / partitions;
		int			bno = 0;

		for (int64 b = start; b < end; b += buffer_rows)
		{
			int			cnt = (int) Min((int64) buffer_rows, end - b);
			float	   *xd = (float *) VARDATA(xb);
			float	   *yd = (float *) VARDATA(yb);
			Datum		args[7];
			int			rc;

			for (int r = 0; r < cnt; r++)
			{
				const float *src = rows->x + idx[b + r] * (int64) nf;
				float	   *dst = xd + (int64) r * nf;

				if (mean)
					for (int j = 0; j < nf; j++)
						dst[j] = (float) ((src[j] - mean[j]) / std[j]);
				else
					memcpy(dst, src, sizeof(float) * nf);
				yd[r] = rows->y[idx[b + r]];
			}
			SET_VARSIZE(xb, VARHDRSZ + (size_t) cnt * nf * sizeof(float));
			SET_VARSIZE(yb, VARHDRSZ + (size_t) cnt * sizeof(float));
			args[0] = Int64GetDatum(dataset_id);
			args[1] = CStringGetTextDatum(split);
			args[2] = Int32GetDatum(first_partition + p);
			args[3] = Int32GetDatum(bno);
			args[4] = Int32GetDatum(cnt);
			args[5] = PointerGetDatum(xb);
			args[6] = PointerGetDatum(yb);
			rc = SPI_execute_plan(plan, args, NULL, false, 0);
			if (rc != SPI_OK_INSERT)
				elog(ERROR, "could not insert into mop.buffers: %s",
					 SPI_result_code_string(rc));
			bno++;
			written++;
			CHECK_FOR_INTERRUPTS();
		}
	}
	return written;
}

/* The plan inserting one buffer (see prepare.h). */
SPIPlanPtr
mop_prepare_buffer_plan(void)
{
	Oid			btypes[7] = {INT8OID, TEXTOID, INT4OID, INT4OID, INT4OID, BYTEAOID, BYTEAOID};
	SPIPlanPtr	plan;

	plan = SPI_prepare("INSERT INTO mop.buffers (dataset_id, split, partition, buffer_no, "
					   "rows, x, y) VALUES ($1, $2, $3, $4, $5, $6, $7)", 7, btypes);
	if (plan == NULL)
		elog(ERROR, "could not prepare insert into mop.buffers: %s",
			 SPI_result_code_string(SPI_result));
	return plan;
}

/* Insert the dataset's row (see prepare.h); its id. */
int64
mop_prepare_insert_dataset(const MopDatasetRow *d)
{
	Oid			types[20] = {TEXTOID, TEXTOID, TEXTARRAYOID, TEXTOID, INT4ARRAYOID,
							 INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID,
							 BOOLOID, FLOAT8ARRAYOID, FLOAT8ARRAYOID, INT4OID, INT4OID,
							 FLOAT8OID, INT8OID, INT8OID, INT4OID, TEXTOID};
	Datum		args[20];
	char		argnulls[20];
	Datum		shp[3] = {Int32GetDatum(d->in_h), Int32GetDatum(d->in_w), Int32GetDatum(d->in_c)};
	bool		isnull;
	int			rc;

	memset(argnulls, ' ', sizeof(argnulls));
	args[0] = CStringGetTextDatum(d->name);
	args[1] = CStringGetTextDatum(d->src->relname);
	args[2] = mop_prepare_text_array(d->src->featcols, d->src->nfeatcols);
	args[3] = CStringGetTextDatum(d->src->is_array ? "array" : "columns");
	args[4] = PointerGetDatum(construct_array(shp, 3, INT4OID, 4, true, TYPALIGN_INT));
	args[5] = Int32GetDatum(d->nfeatures);
	args[6] = CStringGetTextDatum(d->target);
	args[7] = CStringGetTextDatum(mop_target_kind_name(d->kind));
	args[8] = CStringGetTextDatum(format_type_be(d->src->target_type));
	if (d->kind == MOP_TARGET_REGRESSION)
	{
		args[9] = (Datum) 0;
		argnulls[9] = 'n';
	}
	else
		args[9] = mop_prepare_text_array(d->labels, d->nlabels);
	args[10] = BoolGetDatum(d->normalize);
	if (d->normalize)
	{
		args[11] = mop_prepare_float8_array(d->mean, d->nfeatures);
		args[12] = mop_prepare_float8_array(d->std, d->nfeatures);
	}
	else
	{
		args[11] = args[12] = (Datum) 0;
		argnulls[11] = argnulls[12] = 'n';
	}
	args[13] = Int32GetDatum(d->partitions);
	args[14] = Int32GetDatum(d->buffer_rows);
	args[15] = Float8GetDatum(d->validation);
	args[16] = Int64GetDatum(d->n_train);
	args[17] = Int64GetDatum(d->n_valid);
	args[18] = Int32GetDatum(d->seed);
	/* categories only where there are some: a 0.1 catalog has no such column */
	if (d->categories)
		args[19] = CStringGetTextDatum(d->categories);
	rc = SPI_execute_with_args(psprintf("INSERT INTO mop.datasets (name, source, features, feature_kind, "
										"input_shape, n_features, target, target_kind, target_type, labels, "
										"normalized, feature_mean, feature_std, partitions, buffer_rows, "
										"validation, train_rows, valid_rows, seed%s) VALUES ($1, $2, $3, $4, "
										"$5, $6, $7, $8, $9, pg_catalog.to_jsonb($10), $11, $12, $13, $14, "
										"$15, $16, $17, $18, $19%s) ON CONFLICT (name) DO NOTHING RETURNING id",
										d->categories ? ", categories" : "",
										d->categories ? ", $20::pg_catalog.jsonb" : ""),
							   d->categories ? 20 : 19, types, args, argnulls, false, 1);
	if (rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not insert into mop.datasets: %s", SPI_result_code_string(rc));
	/*
	 * The name looked free above, but it is taken: by a transaction that
	 * prepared it meanwhile (the insert waited for it to commit; had it
	 * rolled back, the name would be ours), or by another role's
	 * dataset, which row-level security hid from the check.
	 */
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("dataset \"%s\" already exists", d->name),
				 errdetail("It was prepared by another transaction while this one read the source, or it belongs to another role (dataset names are shared by all roles)."),
				 errhint("Choose another name with dataset => '...', or drop it with mop_drop_dataset('%s').",
						 d->name)));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
}

/* mop_prepare's result row (allocated in the current context). */
static Datum
result_tuple(TupleDesc rettd, const MopPrepareResult *r, const char *dsname)
{
	Datum		values[8];
	bool		nulls[8] = {0};

	values[0] = Int64GetDatum(r->dataset_id);
	values[1] = CStringGetTextDatum(dsname);
	values[2] = Int64GetDatum(r->n_train);
	values[3] = Int64GetDatum(r->n_valid);
	values[4] = Int32GetDatum(r->partitions);
	values[5] = Int32GetDatum(r->buffers);
	values[6] = Int32GetDatum(r->nfeatures);
	values[7] = Int32GetDatum(r->nlabels);
	nulls[7] = r->nlabels < 0;
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(rettd), values, nulls));
}

/*
 * mop_prepare(source regclass, target text, features text[], dataset text,
 *             partitions int, validation float8, buffer_rows int,
 *             normalize bool, seed int, shape int[], target_kind text,
 *             segments text[], replicas int, source_on_segments bool,
 *             max_categories int)
 */
/* Long because its steps (checks, read, shuffle and split, statistics, catalog rows) share one memory context and most of its locals. */
Datum
mop_prepare(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *target;
	char	  **featcols = NULL;
	int			nfeatcols = 0;
	char	   *dsname;
	int32		partitions,
				buffer_rows,
				seed,
				max_categories = MOP_DEFAULT_MAX_CATEGORIES;
	MopVocab  **vocab = NULL;
	char	   *categories = NULL;
	double		validation;
	bool		normalize;
	bool		partitions_default;
	ArrayType  *shape;
	char	   *kindname;
	MopTargetKind kind;
	MopSource	src;
	MopRows		rows;
	char	  **labels = NULL;
	int			nlabels = 0;
	int32		in_h,
				in_w,
				in_c;
	int64		n,
				n_valid,
				n_train;
	int64	   *idx;
	MopRng		rng;
	double	   *mean = NULL,
			   *std = NULL;
	int64		dataset_id;
	int			nbuffers;
	MemoryContext opcxt,
				oldcxt;
	TupleDesc	rettd;
	Datum		result;

	for (int i = 0; i < Min(PG_NARGS(), 14); i++)
		if (PG_ARGISNULL(i) && i != 2 && i != 3 && i != 4 && i != 9 && i != 11 && i != 12)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %d of mop_prepare must not be null", i + 1)));
	if (PG_NARGS() > 11 && !PG_ARGISNULL(11) && PG_ARGISNULL(12))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("replicas must not be NULL")));
	if (PG_NARGS() > 14)
	{
		if (PG_ARGISNULL(14))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("max_categories must not be NULL"),
					 errhint("The default is %d.", MOP_DEFAULT_MAX_CATEGORIES)));
		max_categories = PG_GETARG_INT32(14);
		if (max_categories < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"max_categories\": %d", max_categories),
					 errdetail("It is the most one-hot inputs a categorical column gets, its \"other\" input included."),
					 errhint("Use 1 or more; the default is %d.", MOP_DEFAULT_MAX_CATEGORIES)));
	}
	relid = PG_GETARG_OID(0);
	target = text_to_cstring(PG_GETARG_TEXT_PP(1));
	/* by default, as many partitions as a run would use workers */
	partitions_default = PG_ARGISNULL(4);
	partitions = partitions_default ? Max(Min(mop_workers, max_worker_processes - 1), 1) :
		PG_GETARG_INT32(4);
	validation = PG_GETARG_FLOAT8(5);
	buffer_rows = PG_GETARG_INT32(6);
	normalize = PG_GETARG_BOOL(7);
	seed = PG_GETARG_INT32(8);
	shape = PG_ARGISNULL(9) ? NULL : PG_GETARG_ARRAYTYPE_P(9);
	kindname = text_to_cstring(PG_GETARG_TEXT_PP(10));

	if (get_call_result_type(fcinfo, NULL, &rettd) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "mop_prepare must return a record");

	if (partitions < 1 || partitions > 65536)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"partitions\": must be between 1 and 65536")));
	if (!(validation >= 0.0 && validation < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"validation\": must be >= 0 and < 1")));
	if (buffer_rows < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"buffer_rows\": must be >= 1")));
	if (strcmp(kindname, "auto") != 0 && strcmp(kindname, "class") != 0 &&
		strcmp(kindname, "binary") != 0 && strcmp(kindname, "regression") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"target_kind\": \"%s\"", kindname),
				 errhint("Use auto, class, binary or regression.")));

	/* all working memory of this call lives in one context */
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_prepare",
								  ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(opcxt);

	if (!PG_ARGISNULL(2))
		featcols = text_array_to_cstrings(PG_GETARG_ARRAYTYPE_P(2), &nfeatcols);
	mop_source_open(&src, relid, target, featcols, nfeatcols);
	dsname = PG_ARGISNULL(3) ? get_rel_name(relid) :
		text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (dsname[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"dataset\": the name must not be empty")));
	if (mop_dataset_lookup(dsname, true) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("dataset \"%s\" already exists", dsname),
				 errhint("Choose another name with dataset => '...', or drop it with mop_drop_dataset('%s').",
						 dsname)));
	mop_source_check_privileges(&src);
	if (shape != NULL && !src.is_array && ARR_NDIM(shape) == 1 &&
		ArrayGetNItems(1, ARR_DIMS(shape)) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"shape\": an image shape needs one array feature column")));

	/* the target kind */
	if (strcmp(kindname, "auto") == 0)
	{
		Oid			t = getBaseType(src.target_type);

		if (t == BOOLOID)
			kind = MOP_TARGET_BINARY;
		else if (t == FLOAT4OID || t == FLOAT8OID || t == NUMERICOID)
			kind = MOP_TARGET_REGRESSION;
		else
			kind = MOP_TARGET_CLASS;
	}
	else
		kind = strcmp(kindname, "class") == 0 ? MOP_TARGET_CLASS :
			strcmp(kindname, "binary") == 0 ? MOP_TARGET_BINARY : MOP_TARGET_REGRESSION;
	if (kind == MOP_TARGET_REGRESSION && !mop_type_is_numeric(src.target_type))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target column \"%s\" has type %s, which cannot be a regression target",
						target, format_type_be(src.target_type))));
	/* source_on_segments => true: every segment packs its own rows */
	if (PG_NARGS() > 13 && PG_GETARG_BOOL(13))
	{
		MopPrepareArgs a;
		MopPrepareResult r;

		if (PG_ARGISNULL(11))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("source_on_segments needs segments"),
					 errhint("Name the servers that hold the table's rows, e.g. segments => ARRAY['seg1', 'seg2'].")));
		a.src = src;
		a.target = target;
		a.dsname = dsname;
		a.partitions = partitions;
		a.partitions_default = partitions_default;
		a.validation = validation;
		a.buffer_rows = buffer_rows;
		a.normalize = normalize;
		a.seed = seed;
		a.shape = shape;
		a.kind = kind;
		a.max_categories = max_categories;
		mop_prepare_sharded(&a, PG_GETARG_ARRAYTYPE_P(11), PG_GETARG_INT32(12), &r);
		MemoryContextSwitchTo(oldcxt);
		result = result_tuple(rettd, &r, dsname);
		MemoryContextDelete(opcxt);
		PG_RETURN_DATUM(result);
	}
	if (kind != MOP_TARGET_REGRESSION)
	{
		labels = mop_source_labels(&src, &nlabels);
		if (nlabels == 1 || (kind == MOP_TARGET_BINARY && nlabels != 2 && nlabels > 0))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("target column \"%s\" has %d distinct values, a %s target needs %s",
							target, nlabels, mop_target_kind_name(kind),
							kind == MOP_TARGET_BINARY ? "exactly 2" : "at least 2")));
	}

	/* read everything, once */
	mop_source_read(&src, kind, labels, nlabels, src.nfeatures, &rows);
	n = rows.nrows;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("relation %s has no rows", src.relname)));

	/* shuffle once (the order depends on the seed and the row count only) */
	n_valid = (int64) floor(validation * (double) n + 0.5);
	n_train = n - n_valid;
	idx = MemoryContextAllocHuge(opcxt, sizeof(int64) * n);
	for (int64 i = 0; i < n; i++)
		idx[i] = i;
	mop_prng_seed(&rng, (uint64) (int64) seed);
	mop_shuffle_index(idx, n, &rng);

	/* categorical columns: vocabularies from the training rows, one-hot */
	if (src.ncat > 0)
		categories = build_vocabularies(&src, &rows, idx + n_valid, n_train, max_categories,
										&vocab);

	if ((int64) buffer_rows * rows.nfeatures * sizeof(float) > MaxAllocSize / 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"buffer_rows\": %d rows of %d features exceed 512 MB per buffer",
						buffer_rows, rows.nfeatures)));
	mop_prepare_resolve_shape(shape, rows.nfeatures, &in_h, &in_w, &in_c);

	/* split */
	if (n_train < partitions && partitions_default)
	{
		ereport(NOTICE,
				(errmsg("the dataset has %d partition%s, not %d (mop.workers): it has " INT64_FORMAT " training row%s",
						(int) Max(n_train, 1), n_train == 1 ? "" : "s", partitions,
						n_train, n_train == 1 ? "" : "s"),
				 errdetail("A partition needs at least one training row.")));
		partitions = (int) Max(n_train, 1);
	}
	if (n_train < partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fewer training rows (" INT64_FORMAT ") than partitions (%d)",
						n_train, partitions),
				 errhint("Use fewer partitions or a smaller validation fraction.")));

	/* standardisation statistics from the training rows (idx[n_valid..n)) */
	if (normalize)
	{
		int			nf = rows.nfeatures;

		mean = palloc0(sizeof(double) * nf);
		std = palloc0(sizeof(double) * nf);
		for (int64 i = n_valid; i < n; i++)
		{
			const float *xr = rows.x + idx[i] * (int64) nf;

			for (int j = 0; j < nf; j++)
				mean[j] += xr[j];
		}
		for (int j = 0; j < nf; j++)
			mean[j] /= (double) n_train;
		for (int64 i = n_valid; i < n; i++)
		{
			const float *xr = rows.x + idx[i] * (int64) nf;

			for (int j = 0; j < nf; j++)
			{
				double		d = xr[j] - mean[j];

				std[j] += d * d;
			}
		}
		for (int j = 0; j < nf; j++)
		{
			std[j] = sqrt(std[j] / (double) n_train);
			if (!(std[j] > 1e-12))
				std[j] = 1.0;
		}
		/* one-hot inputs stay 0 and 1 */
		if (vocab)
		{
			int			off = 0;

			for (int i = 0; i < src.nfeatcols; i++)
			{
				if (vocab[i])
					for (int j = 0; j < vocab[i]->width; j++)
					{
						mean[off + j] = 0.0;
						std[off + j] = 1.0;
					}
				off += vocab[i] ? vocab[i]->width : 1;
			}
		}
	}

	SPI_connect();
	{
		MopDatasetRow d;

		d.name = dsname;
		d.src = &src;
		d.in_h = in_h;
		d.in_w = in_w;
		d.in_c = in_c;
		d.nfeatures = rows.nfeatures;
		d.target = target;
		d.kind = kind;
		d.labels = labels;
		d.nlabels = nlabels;
		d.normalize = normalize;
		d.mean = mean;
		d.std = std;
		d.partitions = partitions;
		d.buffer_rows = buffer_rows;
		d.validation = validation;
		d.n_train = n_train;
		d.n_valid = n_valid;
		d.seed = seed;
		d.categories = categories;
		dataset_id = mop_prepare_insert_dataset(&d);
	}
	{
		SPIPlanPtr	plan = mop_prepare_buffer_plan();

		nbuffers = mop_prepare_write_split(plan, dataset_id, "train", &rows, idx + n_valid, n_train,
										   0, partitions, buffer_rows, mean, std);
		nbuffers += mop_prepare_write_split(plan, dataset_id, "valid", &rows, idx, n_valid,
											0, partitions, buffer_rows, mean, std);
	}
	/* segments => ...: copies of the training partitions go to other servers */
	if (PG_NARGS() > 11 && !PG_ARGISNULL(11))
		mop_place_prepared(dsname, PG_GETARG_ARRAYTYPE_P(11), PG_GETARG_INT32(12));
	SPI_finish();

	MemoryContextSwitchTo(oldcxt);
	{
		MopPrepareResult r;

		r.dataset_id = dataset_id;
		r.n_train = n_train;
		r.n_valid = n_valid;
		r.partitions = partitions;
		r.buffers = nbuffers;
		r.nfeatures = rows.nfeatures;
		r.nlabels = kind == MOP_TARGET_REGRESSION ? -1 : nlabels;
		result = result_tuple(rettd, &r, dsname);
		MemoryContextDelete(opcxt);
		PG_RETURN_DATUM(result);
	}
}
