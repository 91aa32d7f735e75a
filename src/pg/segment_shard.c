/*
 * segment_shard.c -- preparing a table whose rows already live on the
 * segments: mop_prepare(..., segments => ..., source_on_segments => true).
 *
 * Each segment holds its own rows of a table of the same name (the sharded
 * case; the coordinator needs the table's definition, and its rows count
 * only if 'local' is among the segments).  No training row crosses the
 * network:
 *
 *   1. every segment, all at once, reads its rows as the user's mapped
 *      role, shuffles them with the seed and its position in segments,
 *      splits off its validation fraction, and answers with its row
 *      counts, its labels and, per feature, the mean and the sum of squared
 *      deviations of its training rows (mop.shard_stats); it keeps the
 *      rows until its transaction ends;
 *   2. the coordinator merges them (the union of the labels in the target
 *      type's order; means and deviations by Chan's pairwise formula, as if
 *      computed over all training rows at once) and writes the dataset's
 *      row;
 *   3. every segment, all at once, packs its rows into partitions s * k .. s * k + k - 1
 *      of its copy of the dataset (k = partitions / segments), standardised
 *      with the merged statistics (mop.shard_pack); its validation buffers
 *      come to the coordinator, which validates every run (the validation
 *      fraction is all that moves);
 *   4. replicas => r copies each segment's partitions to the r - 1 segments
 *      after it (a copy is data that moves, by request);
 *   5. the segments commit when the caller's transaction does.
 *
 * The remote transactions are the caller's transaction's on each segment
 * (segment_xact.c), open from step 1 until the caller's commit, so a
 * failure anywhere, or a rollback of the caller's, leaves no copy behind on
 * any segment.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "mop.h"
#include "prepare.h"
#include "segment.h"

PG_FUNCTION_INFO_V1(mop_shard_stats);
PG_FUNCTION_INFO_V1(mop_shard_pack_sql);

/* ------------------------------------------------------------------------
 * The segment's side
 * ------------------------------------------------------------------------ */

/* The rows one transaction read for a sharded preparation. */
typedef struct ShardCache
{
	MopRows		rows;
	int64	   *idx;			/* shuffled: validation rows first */
	int64		n_valid;
	char	  **labels;			/* this shard's own labels (class indices in rows.y) */
	int			nlabels;
	MopTargetKind kind;
	int			nfeatcols;		/* the feature columns, to encode categorical ones */
	char	  **featcols;
	bool	   *featcat;
	MemoryContext cxt;			/* holds all of it */
} ShardCache;

/*
 * The cache lives in TopTransactionContext: it is valid only while
 * shard_cache_lxid is this transaction's (checked before it is touched).
 */
static ShardCache *shard_cache = NULL;
static LocalTransactionId shard_cache_lxid = InvalidLocalTransactionId;

/* See prepare.h. */
void
mop_shard_read(MopSource *src, MopTargetKind kind, double validation, int64 shuffle_seed,
			   MopShardStats *st)
{
	MemoryContext cxt;
	MemoryContext old;
	ShardCache *c;
	MopRng		rng;
	int64		n;
	int			nf;

	/* one read per transaction is kept: a second replaces the first */
	if (shard_cache != NULL && shard_cache_lxid == MyProc->lxid)
		MemoryContextDelete(shard_cache->cxt);
	shard_cache = NULL;
	shard_cache_lxid = InvalidLocalTransactionId;
	cxt = AllocSetContextCreate(TopTransactionContext, "mop shard", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	c = palloc0(sizeof(ShardCache));
	c->cxt = cxt;

	c->kind = kind;
	if (kind != MOP_TARGET_REGRESSION)
		c->labels = mop_source_labels(src, &c->nlabels);
	mop_source_read(src, kind, c->labels, c->nlabels, src->nfeatures, &c->rows);
	n = c->rows.nrows;
	nf = c->rows.nfeatures;
	c->n_valid = (int64) floor(validation * (double) n + 0.5);
	c->idx = MemoryContextAllocHuge(cxt, sizeof(int64) * Max(n, 1));
	for (int64 i = 0; i < n; i++)
		c->idx[i] = i;
	mop_prng_seed(&rng, (uint64) shuffle_seed);
	mop_shuffle_index(c->idx, n, &rng);
	c->nfeatcols = src->nfeatcols;
	c->featcols = palloc(sizeof(char *) * Max(src->nfeatcols, 1));
	c->featcat = palloc0(sizeof(bool) * Max(src->nfeatcols, 1));
	for (int i = 0; i < src->nfeatcols; i++)
	{
		c->featcols[i] = pstrdup(src->featcols[i]);
		c->featcat[i] = src->featcat != NULL && src->featcat[i];
	}
	/* the categorical values of the training rows, counted */
	if (c->rows.ncat > 0)
		mop_prepare_count_categories(&c->rows, c->idx + c->n_valid, n - c->n_valid);
	MemoryContextSwitchTo(old);

	st->rows = n;
	st->n_valid = c->n_valid;
	st->n_train = n - c->n_valid;
	st->nfeatures = nf;
	st->labels = c->labels;
	st->nlabels = c->nlabels;
	st->ncat = c->rows.ncat;
	st->counts = c->rows.dicts;
	st->mean = palloc0(sizeof(double) * Max(nf, 1));
	st->m2 = palloc0(sizeof(double) * Max(nf, 1));
	/* two passes over the training rows, as mop_prepare computes them */
	for (int64 i = c->n_valid; i < n; i++)
	{
		const float *xr = c->rows.x + c->idx[i] * (int64) nf;

		for (int j = 0; j < nf; j++)
			st->mean[j] += xr[j];
	}
	for (int j = 0; j < nf && st->n_train > 0; j++)
		st->mean[j] /= (double) st->n_train;
	for (int64 i = c->n_valid; i < n; i++)
	{
		const float *xr = c->rows.x + c->idx[i] * (int64) nf;

		for (int j = 0; j < nf; j++)
		{
			double		d = xr[j] - st->mean[j];

			st->m2[j] += d * d;
		}
	}
	shard_cache = c;
	shard_cache_lxid = MyProc->lxid;
}

/* The C strings of a text[] (no NULLs). */
static char **
text_array_elems(ArrayType *a, int *n)
{
	Datum	   *el;
	bool	   *nulls;
	char	  **out;

	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &el, &nulls, n);
	out = palloc(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("an array of names must not contain NULL")));
		out[i] = TextDatumGetCString(el[i]);
	}
	return out;
}

/* The target kind named by text (resolved already: class, binary or regression). */
static MopTargetKind
kind_by_name(const char *k)
{
	if (strcmp(k, "class") == 0)
		return MOP_TARGET_CLASS;
	if (strcmp(k, "binary") == 0)
		return MOP_TARGET_BINARY;
	if (strcmp(k, "regression") == 0)
		return MOP_TARGET_REGRESSION;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for \"target_kind\": \"%s\"", k),
			 errhint("Use class, binary or regression.")));
	return MOP_TARGET_CLASS;	/* not reached */
}

/*
 * mop.shard_stats(source regclass, target text, features text[],
 *                 target_kind text, validation float8, shuffle_seed int8)
 * RETURNS record (rows, train_rows, valid_rows, n_features, target_type,
 *                 features, is_array, labels, mean, m2,
 *                 cat_columns, cat_values, cat_counts)
 *
 * n_features, mean and m2 are over the numeric columns; each categorical
 * column's training values come as (cat_columns[i], cat_values[i],
 * cat_counts[i]) triples (a NULL value is the NULL category).
 *
 * Step 1 of a sharded preparation, on a segment: read this server's rows of
 * source as the calling role and keep them until the transaction ends.
 */
Datum
mop_shard_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	td;
	MopSource	src;
	MopShardStats st;
	char	  **feats;
	int			nfeats;
	MopTargetKind kind;
	double		validation;
	Datum		values[13];
	bool		nulls[13] = {0};

	for (int i = 0; i < 6; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %d of mop.shard_stats must not be null", i + 1)));
	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "mop.shard_stats must return a record");
	if (!IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("mop.shard_stats must run inside a transaction block"),
				 errdetail("It keeps the rows it read for mop.shard_pack in the same transaction."),
				 errhint("mop_prepare(..., source_on_segments => true) calls it on each segment.")));
	feats = text_array_elems(PG_GETARG_ARRAYTYPE_P(2), &nfeats);
	kind = kind_by_name(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	validation = PG_GETARG_FLOAT8(4);
	if (!(validation >= 0.0 && validation < 1.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for \"validation\": must be >= 0 and < 1")));
	mop_source_open(&src, PG_GETARG_OID(0), text_to_cstring(PG_GETARG_TEXT_PP(1)), feats, nfeats);
	mop_source_check_privileges(&src);
	if (kind == MOP_TARGET_REGRESSION && !mop_type_is_numeric(src.target_type))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target column \"%s\" has type %s, which cannot be a regression target",
						src.target, format_type_be(src.target_type))));
	mop_shard_read(&src, kind, validation, PG_GETARG_INT64(5), &st);

	values[0] = Int64GetDatum(st.rows);
	values[1] = Int64GetDatum(st.n_train);
	values[2] = Int64GetDatum(st.n_valid);
	values[3] = Int32GetDatum(st.nfeatures);
	values[4] = CStringGetTextDatum(format_type_be(src.target_type));
	values[5] = mop_prepare_text_array(src.featcols, src.nfeatcols);
	values[6] = BoolGetDatum(src.is_array);
	if (kind == MOP_TARGET_REGRESSION)
		nulls[7] = true;
	else
		values[7] = mop_prepare_text_array(st.labels, st.nlabels);
	values[8] = mop_prepare_float8_array(st.mean, st.nfeatures);
	values[9] = mop_prepare_float8_array(st.m2, st.nfeatures);
	/* the categorical columns, and each training value's count: (column, value, count) */
	{
		int			total = 0,
					k = 0,
					c = 0;
		Datum	   *cols,
				   *vals,
				   *cnts;
		bool	   *vnulls;
		int			dims[1],
					lbs[1] = {1};

		for (int i = 0; i < st.ncat; i++)
			total += mop_catcounts_size(st.counts[i]);
		cols = palloc(sizeof(Datum) * Max(total, 1));
		vals = palloc(sizeof(Datum) * Max(total, 1));
		vnulls = palloc0(sizeof(bool) * Max(total, 1));
		cnts = palloc(sizeof(Datum) * Max(total, 1));
		for (int i = 0; i < src.nfeatcols; i++)
		{
			MopCatCounts *cc;

			if (!src.featcat[i])
				continue;
			cc = st.counts[c++];
			for (int32 id = 0; id < mop_catcounts_size(cc); id++)
			{
				const char *v = mop_catcounts_value(cc, id);

				if (mop_catcounts_count(cc, id) <= 0)
					continue;
				cols[k] = CStringGetTextDatum(src.featcols[i]);
				vnulls[k] = v == NULL;
				vals[k] = v ? CStringGetTextDatum(v) : (Datum) 0;
				cnts[k] = Int64GetDatum(mop_catcounts_count(cc, id));
				k++;
			}
		}
		dims[0] = k;
		values[10] = PointerGetDatum(construct_array(cols, k, TEXTOID, -1, false, TYPALIGN_INT));
		values[11] = PointerGetDatum(construct_md_array(vals, vnulls, 1, dims, lbs, TEXTOID, -1, false,
														TYPALIGN_INT));
		values[12] = PointerGetDatum(construct_array(cnts, k, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(td), values, nulls)));
}

/* See prepare.h: step 3, pack the rows read in this transaction into a dataset's partitions. */
int
mop_shard_pack(int64 dataset_id, int first_partition, int partitions, const char *categories)
{
	ShardCache *c = shard_cache;
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(dataset_id)};
	HeapTuple	row;
	TupleDesc	td;
	bool		isnull;
	bool		normalized;
	int			nf,
				buffer_rows,
				nglobal = 0;
	char	  **global = NULL;
	double	   *mean = NULL,
			   *std = NULL;
	MopRows		rows;
	int64		n_train;
	int			written;
	SPIPlanPtr	plan;

	if (c == NULL || shard_cache_lxid != MyProc->lxid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no rows were read for a sharded preparation in this transaction"),
				 errhint("Call mop.shard_stats first, in the same transaction.")));
	if (SPI_execute_with_args("SELECT normalized, n_features, buffer_rows, feature_mean, feature_std, "
							  "ARRAY(SELECT pg_catalog.jsonb_array_elements_text(labels)) "
							  "FROM mop.datasets WHERE id OPERATOR(pg_catalog.=) $1",
							  1, t, v, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read dataset %lld", (long long) dataset_id);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dataset %lld does not exist", (long long) dataset_id)));
	row = SPI_tuptable->vals[0];
	td = SPI_tuptable->tupdesc;
	normalized = DatumGetBool(SPI_getbinval(row, td, 1, &isnull));
	nf = DatumGetInt32(SPI_getbinval(row, td, 2, &isnull));
	buffer_rows = DatumGetInt32(SPI_getbinval(row, td, 3, &isnull));
	/* the row is the caller's to edit: checked before it sizes anything */
	if (nf < 1 || buffer_rows < 1 ||
		(int64) buffer_rows * nf * sizeof(float) > MaxAllocSize / 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("dataset %lld has %d features and buffers of %d rows, which cannot be packed",
						(long long) dataset_id, nf, buffer_rows)));
	if (normalized)
	{
		Datum		dm = SPI_getbinval(row, td, 4, &isnull);
		Datum		ds;
		ArrayType  *am,
				   *as;

		if (isnull)
			elog(ERROR, "dataset %lld has no feature means", (long long) dataset_id);
		ds = SPI_getbinval(row, td, 5, &isnull);
		if (isnull)
			elog(ERROR, "dataset %lld has no feature deviations", (long long) dataset_id);
		am = DatumGetArrayTypeP(dm);
		as = DatumGetArrayTypeP(ds);
		if (ARR_NDIM(am) != 1 || ARR_HASNULL(am) || ArrayGetNItems(1, ARR_DIMS(am)) != nf ||
			ARR_NDIM(as) != 1 || ARR_HASNULL(as) || ArrayGetNItems(1, ARR_DIMS(as)) != nf)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("dataset %lld has feature statistics of the wrong shape", (long long) dataset_id)));
		mean = palloc(sizeof(double) * nf);
		std = palloc(sizeof(double) * nf);
		memcpy(mean, ARR_DATA_PTR(am), sizeof(double) * nf);
		memcpy(std, ARR_DATA_PTR(as), sizeof(double) * nf);
	}
	if (c->kind != MOP_TARGET_REGRESSION)
		global = text_array_elems(DatumGetArrayTypeP(SPI_getbinval(row, td, 6, &isnull)), &nglobal);
	SPI_freetuptable(SPI_tuptable);

	/* this shard's class indices become the dataset's */
	rows = c->rows;
	if (c->kind != MOP_TARGET_REGRESSION)
	{
		int		   *map = palloc(sizeof(int) * Max(c->nlabels, 1));

		for (int i = 0; i < c->nlabels; i++)
		{
			map[i] = -1;
			for (int g = 0; g < nglobal; g++)
				if (strcmp(c->labels[i], global[g]) == 0)
					map[i] = g;
			if (map[i] < 0)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("label \"%s\" of this server is not a label of the dataset", c->labels[i])));
		}
		rows.y = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(float) * Max(rows.nrows, 1));
		for (int64 i = 0; i < rows.nrows; i++)
			rows.y[i] = (float) map[(int) c->rows.y[i]];
	}
	/* categorical columns: one-hot over the dataset's vocabularies */
	if (c->rows.ncat > 0)
	{
		Jsonb	   *jb;
		MopVocab  **vocab = palloc0(sizeof(MopVocab *) * Max(c->nfeatcols, 1));
		char	   *dsname = psprintf("%lld", (long long) dataset_id);

		if (categories == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("the rows read here have categorical columns, but no vocabularies were given")));
		jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(categories)));
		if (!JB_ROOT_IS_OBJECT(jb))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the vocabularies must be a JSON object")));
		for (int i = 0; i < c->nfeatcols; i++)
		{
			JsonbValue	jv;

			if (!c->featcat[i])
				continue;
			if (getKeyJsonValueFromContainer(&jb->root, c->featcols[i], strlen(c->featcols[i]),
											 &jv) == NULL || jv.type != jbvBinary)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("no vocabulary for categorical column \"%s\"", c->featcols[i])));
			vocab[i] = mop_vocab_from_jsonb(jv.val.binary.data, dsname, c->featcols[i]);
		}
		mop_rows_encode(&rows, c->nfeatcols, vocab);
	}
	if (nf != rows.nfeatures)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the dataset has %d features per row, the rows read here have %d",
						nf, rows.nfeatures)));
	n_train = rows.nrows - c->n_valid;
	if (partitions < 1 || n_train < partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fewer training rows (" INT64_FORMAT ") than partitions (%d) on this server",
						n_train, partitions)));
	plan = mop_prepare_buffer_plan();
	written = mop_prepare_write_split(plan, dataset_id, "train", &rows, c->idx + c->n_valid, n_train,
									  first_partition, partitions, buffer_rows, mean, std);
	written += mop_prepare_write_split(plan, dataset_id, "valid", &rows, c->idx, c->n_valid,
									   first_partition, partitions, buffer_rows, mean, std);
	return written;
}

/*
 * mop.shard_pack(dataset_id bigint, first_partition int, partitions int,
 *                categories text DEFAULT NULL)
 * RETURNS int
 *
 * Step 3 on a segment: pack the rows mop.shard_stats read in this
 * transaction into the dataset's partitions first_partition ..
 * first_partition + partitions - 1 (training and validation buffers),
 * categorical columns one-hot over the vocabularies in categories (JSON,
 * as mop.datasets.categories); returns how many buffers it wrote.
 */
Datum
mop_shard_pack_sql(PG_FUNCTION_ARGS)
{
	int			n;

	for (int i = 0; i < 3; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %d of mop.shard_pack must not be null", i + 1)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	n = mop_shard_pack(PG_GETARG_INT64(0), PG_GETARG_INT32(1), PG_GETARG_INT32(2),
					   PG_NARGS() > 3 && !PG_ARGISNULL(3) ? text_to_cstring(PG_GETARG_TEXT_PP(3)) : NULL);
	SPI_finish();
	PG_RETURN_INT32(n);
}

/* ------------------------------------------------------------------------
 * The coordinator's side
 * ------------------------------------------------------------------------ */

/* One segment of a sharded preparation. */
typedef struct Shard
{
	char	   *name;
	bool		local;
	PGconn	  **conn;			/* remote: the transaction's connection (segment_xact.c) */
	MopShardStats st;
	char	   *target_type;
	char	  **features;
	int			nfeatures_cols;
	bool		is_array;
	int64		remote_id;		/* its copy of the dataset, remote only */
} Shard;

/* A text value of a segment's answer, as a palloc'd string. */
static char *
answer_text(PGresult *res, int row, int col)
{
	return pnstrdup(PQgetvalue(res, row, col), PQgetlength(res, row, col));
}

/* Parse a segment's text[] or float8[] answer (checked like any input). */
static ArrayType *
answer_array(Shard *s, PGresult *res, int col, Oid elemtype)
{
	if (PQgetisnull(res, 0, col))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("segment \"%s\" sent no %s", s->name, PQfname(res, col))));
	return DatumGetArrayTypeP(OidInputFunctionCall(F_ARRAY_IN, answer_text(res, 0, col),
												   elemtype, -1));
}

/*
 * A remote segment's categorical values and their training counts, into
 * one count table per categorical column of this server's table (in
 * column order); the segment must have the same categorical columns.
 */
static void
remote_categories(Shard *s, const MopPrepareArgs *a, PGresult *res)
{
	ArrayType  *acols = answer_array(s, res, 10, TEXTOID);
	ArrayType  *avals = answer_array(s, res, 11, TEXTOID);
	ArrayType  *acnts = answer_array(s, res, 12, INT8OID);
	Datum	   *cols,
			   *vals,
			   *cnts;
	bool	   *cnulls,
			   *vnulls,
			   *nnulls;
	int			ncols,
				nvals,
				ncnts;
	bool	   *seen = palloc0(sizeof(bool) * Max(a->src.ncat, 1));

	deconstruct_array(acols, TEXTOID, -1, false, TYPALIGN_INT, &cols, &cnulls, &ncols);
	deconstruct_array(avals, TEXTOID, -1, false, TYPALIGN_INT, &vals, &vnulls, &nvals);
	deconstruct_array(acnts, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &cnts, &nnulls, &ncnts);
	if (ncols != nvals || ncols != ncnts)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("segment \"%s\" sent %d categorical columns for %d values and %d counts",
						s->name, ncols, nvals, ncnts)));
	s->st.ncat = a->src.ncat;
	s->st.counts = palloc(sizeof(MopCatCounts *) * Max(a->src.ncat, 1));
	for (int c = 0; c < a->src.ncat; c++)
		s->st.counts[c] = mop_catcounts_create();
	for (int k = 0; k < ncols; k++)
	{
		char	   *col = cnulls[k] ? NULL : TextDatumGetCString(cols[k]);
		int			c = 0,
					found = -1;
		int64		n = nnulls[k] ? -1 : DatumGetInt64(cnts[k]);

		for (int i = 0; i < a->src.nfeatcols && col; i++)
		{
			if (!a->src.featcat[i])
				continue;
			if (strcmp(a->src.featcols[i], col) == 0)
				found = c;
			c++;
		}
		if (found < 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("feature column \"%s\" is categorical on segment \"%s\" but not here",
							col ? col : "(null)", s->name),
					 errhint("Every segment's table needs the columns of this server's, with the same types.")));
		if (n <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("segment \"%s\" sent a count of %lld for a value of column \"%s\"",
							s->name, (long long) n, col)));
		mop_catcounts_add(s->st.counts[found],
						  mop_catcounts_intern(s->st.counts[found],
											   vnulls[k] ? NULL : TextDatumGetCString(vals[k])),
						  n);
		seen[found] = true;
	}
	for (int i = 0, c = 0; i < a->src.nfeatcols; i++)
	{
		if (!a->src.featcat[i])
			continue;
		if (!seen[c++] && s->st.n_train > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("feature column \"%s\" is categorical here but not on segment \"%s\"",
							a->src.featcols[i], s->name),
					 errhint("Every segment's table needs the columns of this server's, with the same types.")));
	}
}

/* Step 1 on a remote segment: ask for its statistics (the answer comes to remote_stats). */
static void
send_stats(Shard *s, const MopPrepareArgs *a, int64 shuffle_seed)
{
	const char *values[6];
	char		val[64],
				seed[32];
	StringInfoData feats;

	initStringInfo(&feats);
	appendStringInfoChar(&feats, '{');
	for (int i = 0; i < a->src.nfeatcols; i++)
	{
		appendStringInfoString(&feats, i ? ",\"" : "\"");
		for (const char *p = a->src.featcols[i]; *p; p++)
		{
			if (*p == '"' || *p == '\\')
				appendStringInfoChar(&feats, '\\');
			appendStringInfoChar(&feats, *p);
		}
		appendStringInfoChar(&feats, '"');
	}
	appendStringInfoChar(&feats, '}');
	snprintf(val, sizeof(val), "%.17g", a->validation);
	snprintf(seed, sizeof(seed), INT64_FORMAT, shuffle_seed);
	values[0] = a->src.relname;
	values[1] = a->src.target;
	values[2] = feats.data;
	values[3] = mop_target_kind_name(a->kind);
	values[4] = val;
	values[5] = seed;
	mop_segment_send(s->conn, s->name,
					 "SELECT rows, train_rows, valid_rows, n_features, target_type, features, "
					 "is_array, labels, mean, m2, cat_columns, cat_values, cat_counts "
					 "FROM mop.shard_stats($1::pg_catalog.regclass, "
					 "$2, $3::pg_catalog.text[], $4, $5::pg_catalog.float8, $6::pg_catalog.int8)",
					 6, values);
}

/* The statistics a remote segment answered, checked like any input. */
static void
remote_stats(Shard *s, const MopPrepareArgs *a)
{
	PGresult   *res = mop_segment_result(s->conn, s->name);
	ArrayType  *arr;

	PG_TRY();
	{
		if (PQntuples(res) != 1 || PQnfields(res) != 13)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("segment \"%s\" answered mop.shard_stats with %d rows of %d columns",
							s->name, PQntuples(res), PQnfields(res))));
		s->st.rows = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		s->st.n_train = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		s->st.n_valid = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
		s->st.nfeatures = atoi(PQgetvalue(res, 0, 3));
		s->target_type = answer_text(res, 0, 4);
		s->features = text_array_elems(answer_array(s, res, 5, TEXTOID), &s->nfeatures_cols);
		s->is_array = PQgetvalue(res, 0, 6)[0] == 't';
		if (a->kind != MOP_TARGET_REGRESSION)
			s->st.labels = text_array_elems(answer_array(s, res, 7, TEXTOID), &s->st.nlabels);
		if (s->st.rows < 0 || s->st.n_train < 0 || s->st.n_valid < 0 ||
			s->st.n_train + s->st.n_valid != s->st.rows ||
			s->st.nfeatures < 0 || s->st.nfeatures > MaxAllocSize / sizeof(double))
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("segment \"%s\" sent inconsistent row counts", s->name)));
		arr = answer_array(s, res, 8, FLOAT8OID);
		if (ARR_NDIM(arr) > 1 || ARR_HASNULL(arr) ||
			ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr)) != s->st.nfeatures)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("segment \"%s\" sent %d feature means for %d features", s->name,
							ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr)), s->st.nfeatures)));
		s->st.mean = palloc(sizeof(double) * Max(s->st.nfeatures, 1));
		memcpy(s->st.mean, ARR_DATA_PTR(arr), sizeof(double) * s->st.nfeatures);
		arr = answer_array(s, res, 9, FLOAT8OID);
		if (ARR_NDIM(arr) > 1 || ARR_HASNULL(arr) ||
			ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr)) != s->st.nfeatures)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("segment \"%s\" sent %d feature deviations for %d features", s->name,
							ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr)), s->st.nfeatures)));
		s->st.m2 = palloc(sizeof(double) * Max(s->st.nfeatures, 1));
		memcpy(s->st.m2, ARR_DATA_PTR(arr), sizeof(double) * s->st.nfeatures);
		remote_categories(s, a, res);
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
}

/*
 * Copy buffers of a remote copy (one split; one partition, or all with -1)
 * into this server's dataset, checking each before it is stored (its
 * partition within first..last, its sizes).  Returns
 * how many it copied.
 */
static int
pull_buffers(Shard *s, const char *split, int partition, int first, int last,
			 int64 dataset_id, int nf, int buffer_rows, SPIPlanPtr plan)
{
	char		rid[32],
				part[16];
	const char *values[3];
	PGresult   *res;
	int			n;

	snprintf(rid, sizeof(rid), INT64_FORMAT, s->remote_id);
	snprintf(part, sizeof(part), "%d", partition);
	values[0] = rid;
	values[1] = split;
	values[2] = part;
	res = mop_segment_exec(s->conn, s->name,
						   "SELECT partition::pg_catalog.text, buffer_no::pg_catalog.text, "
						   "rows::pg_catalog.text, x, y FROM mop.buffers "
						   "WHERE dataset_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 "
						   "AND split OPERATOR(pg_catalog.=) $2 "
						   "AND ($3::pg_catalog.int4 OPERATOR(pg_catalog.<) 0 "
						   "OR partition OPERATOR(pg_catalog.=) $3::pg_catalog.int4) "
						   "ORDER BY partition, buffer_no",
						   3, values, NULL, NULL, true, 0, NULL);
	PG_TRY();
	{
		n = PQntuples(res);
		if (PQnfields(res) != 5)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("segment \"%s\" answered with %d columns for its buffers", s->name,
							PQnfields(res))));
		for (int i = 0; i < n; i++)
		{
			char	   *p = answer_text(res, i, 0);
			char	   *no = answer_text(res, i, 1);
			long		rows = strtol(answer_text(res, i, 2), NULL, 10);
			int			xl = PQgetlength(res, i, 3),
						yl = PQgetlength(res, i, 4);
			bytea	   *x,
					   *y;
			Datum		args[7];

			/* a buffer from elsewhere is checked before this server keeps it */
			if (atoi(p) < first || atoi(p) > last || atoi(no) < 0 ||
				rows < 1 || rows > buffer_rows ||
				(int64) xl != (int64) rows * nf * (int64) sizeof(float) ||
				(int64) yl != (int64) rows * (int64) sizeof(float) ||
				PQgetisnull(res, i, 3) || PQgetisnull(res, i, 4))
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("segment \"%s\" sent a malformed %s buffer (partition %s, buffer %s)",
								s->name, split, p, no),
						 errdetail("%ld rows, %d bytes of features and %d bytes of labels for %d features a row.",
								   rows, xl, yl, nf)));
			x = palloc(VARHDRSZ + xl);
			SET_VARSIZE(x, VARHDRSZ + xl);
			memcpy(VARDATA(x), PQgetvalue(res, i, 3), xl);
			y = palloc(VARHDRSZ + yl);
			SET_VARSIZE(y, VARHDRSZ + yl);
			memcpy(VARDATA(y), PQgetvalue(res, i, 4), yl);
			args[0] = Int64GetDatum(dataset_id);
			args[1] = CStringGetTextDatum(split);
			args[2] = Int32GetDatum(atoi(p));
			args[3] = Int32GetDatum(atoi(no));
			args[4] = Int32GetDatum((int32) rows);
			args[5] = PointerGetDatum(x);
			args[6] = PointerGetDatum(y);
			if (SPI_execute_plan(plan, args, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "could not insert into mop.buffers");
			pfree(x);
			pfree(y);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
	return n;
}

/* Training buffers and bytes of each partition of a segment's copy (or of this server's dataset). */
static void
partition_sizes(Shard *s, int64 dataset_id, int P, int64 *buffers, int64 *bytes)
{
	const char *sql = "SELECT partition, pg_catalog.count(*), "
		"COALESCE(pg_catalog.sum(pg_catalog.octet_length(x) OPERATOR(pg_catalog.+) "
		"pg_catalog.octet_length(y)), 0)::pg_catalog.int8 FROM mop.buffers "
		"WHERE dataset_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 "
		"AND split OPERATOR(pg_catalog.=) 'train' GROUP BY partition";

	if (s->local)
	{
		Oid			t[1] = {INT8OID};
		Datum		v[1] = {Int64GetDatum(dataset_id)};

		if (SPI_execute_with_args(sql, 1, t, v, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not count the training buffers");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			int			p = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));

			if (p >= 0 && p < P)
			{
				buffers[p] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
				bytes[p] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
			}
		}
		SPI_freetuptable(SPI_tuptable);
	}
	else
	{
		char		rid[32];
		const char *values[1] = {rid};
		PGresult   *res;

		snprintf(rid, sizeof(rid), INT64_FORMAT, s->remote_id);
		res = mop_segment_exec(s->conn, s->name, sql, 1, values, NULL, NULL, false, 0, NULL);
		if (PQnfields(res) != 3)
		{
			int			nfields = PQnfields(res);

			PQclear(res);
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("segment \"%s\" answered the count of its buffers with %d columns, not 3",
							s->name, nfields)));
		}
		for (int i = 0; i < PQntuples(res); i++)
		{
			int			p = atoi(PQgetvalue(res, i, 0));

			if (p >= 0 && p < P)
			{
				buffers[p] = strtoll(PQgetvalue(res, i, 1), NULL, 10);
				bytes[p] = strtoll(PQgetvalue(res, i, 2), NULL, 10);
			}
		}
		PQclear(res);
	}
}

/* The union of the segments' labels, in the target type's order (SPI connected). */
static char **
merge_labels(Shard *sh, int S, Oid target_type, const char *target, MopTargetKind kind, int *n)
{
	int			total = 0;
	Datum	   *all;
	Oid			t[1] = {TEXTARRAYOID};
	Datum		v[1];
	char	  **out;
	int			k = 0;
	ArrayType  *a;
	bool		isnull;
	Datum		d;

	for (int s = 0; s < S; s++)
		total += sh[s].st.nlabels;
	all = palloc(sizeof(Datum) * Max(total, 1));
	for (int s = 0; s < S; s++)
		for (int i = 0; i < sh[s].st.nlabels; i++)
			all[k++] = CStringGetTextDatum(sh[s].st.labels[i]);
	v[0] = PointerGetDatum(construct_array(all, total, TEXTOID, -1, false, TYPALIGN_INT));
	if (SPI_execute_with_args(psprintf("SELECT ARRAY(SELECT l::pg_catalog.text FROM "
									   "(SELECT DISTINCT u::%s AS l FROM pg_catalog.unnest($1) u) s "
									   "ORDER BY l)", format_type_be_qualified(target_type)),
							  1, t, v, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not merge the labels of the segments");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	a = DatumGetArrayTypeP(d);
	out = text_array_elems(a, n);
	SPI_freetuptable(SPI_tuptable);
	if (*n > MOP_MAX_CLASSES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("target column \"%s\" has more than %d distinct values on the segments",
						target, MOP_MAX_CLASSES),
				 errhint("Use target_kind => 'regression' for a numeric target.")));
	if (*n == 1 || (kind == MOP_TARGET_BINARY && *n != 2))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("target column \"%s\" has %d distinct values on the segments, a %s target needs %s",
						target, *n, mop_target_kind_name(kind),
						kind == MOP_TARGET_BINARY ? "exactly 2" : "at least 2")));
	return out;
}

/* The segments agree on what the table is: the columns, their types, the width of a row. */
static void
check_shards_agree(Shard *sh, int S, const MopPrepareArgs *a)
{
	const char *ttype = format_type_be(a->src.target_type);

	for (int s = 0; s < S; s++)
	{
		if (sh[s].local)
			continue;
		if (strcmp(sh[s].target_type, ttype) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("target column \"%s\" has type %s on segment \"%s\" but %s here",
							a->target, sh[s].target_type, sh[s].name, ttype),
					 errhint("Every segment's table needs the columns of this server's, with the same types.")));
		if (sh[s].is_array != a->src.is_array || sh[s].nfeatures_cols != a->src.nfeatcols)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("the feature columns of %s differ on segment \"%s\"", a->src.relname, sh[s].name),
					 errhint("Every segment's table needs the columns of this server's, with the same types.")));
		for (int i = 0; i < a->src.nfeatcols; i++)
			if (strcmp(sh[s].features[i], a->src.featcols[i]) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("feature column \"%s\" is \"%s\" on segment \"%s\"",
								a->src.featcols[i], sh[s].features[i], sh[s].name)));
	}
	for (int s = 1; s < S; s++)
		if (sh[s].st.nfeatures != sh[0].st.nfeatures && sh[s].st.rows > 0 && sh[0].st.rows > 0)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("rows have %d features on segment \"%s\" but %d on segment \"%s\"",
							sh[s].st.nfeatures, sh[s].name, sh[0].st.nfeatures, sh[0].name)));
}

/* See prepare.h. */
void
mop_prepare_sharded(const MopPrepareArgs *a, ArrayType *segments, int replicas,
					MopPrepareResult *out)
{
	int			S,
				P,
				k,
				nf = 0,
				nnum,
				nlabels = 0;
	MopVocab  **vocab = NULL;
	char	   *categories = NULL;
	char	  **names = mop_segment_names(segments, &S);
	Shard	   *sh = palloc0(sizeof(Shard) * S);
	char	  **labels = NULL;
	int64		n_train = 0,
				n_valid = 0;
	double	   *mean = NULL,
			   *std = NULL;
	int64		dataset_id;
	int			nbuffers = 0;
	bool		has_local = false;

	if (replicas < 1 || replicas > S)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("replicas must be between 1 and the number of segments (%d), not %d", S, replicas),
				 errhint("Each copy of a partition goes to a distinct segment.")));
	P = a->partitions_default ? S : a->partitions;
	if (P % S != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partitions (%d) must be a multiple of the number of segments (%d) with source_on_segments",
						P, S),
				 errhint("Each segment packs its own rows into the same number of partitions; leave partitions out for one each.")));
	k = P / S;
	for (int s = 0; s < S; s++)
	{
		sh[s].name = names[s];
		sh[s].local = mop_segment_is_local(names[s]);
		has_local |= sh[s].local;
	}

	SPI_connect();
	{
		/*
		 * 1. every segment reads its rows, all at once, in this transaction's
		 * transaction there (which keeps them for step 3)
		 */
		for (int s = 0; s < S; s++)
			if (!sh[s].local)
			{
				sh[s].conn = mop_segment_xact_conn(sh[s].name, 10);
				send_stats(&sh[s], a, (int64) a->seed * 1000003 + s);
			}
		for (int s = 0; s < S; s++)
			if (sh[s].local)
				mop_shard_read((MopSource *) &a->src, a->kind, a->validation,
							   (int64) a->seed * 1000003 + s, &sh[s].st);
		for (int s = 0; s < S; s++)
			if (!sh[s].local)
				remote_stats(&sh[s], a);
		check_shards_agree(sh, S, a);
		if (!has_local)
		{
			if (SPI_execute(psprintf("SELECT 1 FROM %s LIMIT 1", a->src.relname), true, 1) == SPI_OK_SELECT &&
				SPI_processed > 0)
				ereport(NOTICE,
						(errmsg("the rows of %s on this server are not part of dataset \"%s\"",
								a->src.relname, a->dsname),
						 errdetail("'local' is not among the segments."),
						 errhint("Add 'local' to segments to pack them too.")));
		}

		/* 2. merge */
		for (int s = 0; s < S; s++)
		{
			if (sh[s].st.n_train < k)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("segment \"%s\" has " INT64_FORMAT " training rows of %s, fewer than its %d partition%s",
								sh[s].name, sh[s].st.n_train, a->src.relname, k, k == 1 ? "" : "s"),
						 errhint("Leave the segment out, or use fewer partitions or a smaller validation fraction.")));
			n_train += sh[s].st.n_train;
			n_valid += sh[s].st.n_valid;
		}
		nnum = sh[0].st.nfeatures;
		if (a->kind != MOP_TARGET_REGRESSION)
			labels = merge_labels(sh, S, a->src.target_type, a->target, a->kind, &nlabels);
		/* categorical columns: vocabularies from the merged counts */
		nf = nnum;
		if (a->src.ncat > 0)
		{
			MopCatCounts **merged = palloc(sizeof(MopCatCounts *) * a->src.ncat);

			for (int c = 0; c < a->src.ncat; c++)
			{
				merged[c] = mop_catcounts_create();
				for (int s = 0; s < S; s++)
					mop_catcounts_merge(merged[c], sh[s].st.counts[c]);
			}
			categories = mop_prepare_vocabularies(&a->src, merged, a->max_categories, &vocab);
			nf = mop_input_width(a->src.nfeatcols, vocab);
		}
		if (nf == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("the rows of %s have no features", a->src.relname)));
		if ((int64) a->buffer_rows * nf * sizeof(float) > MaxAllocSize / 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value for \"buffer_rows\": %d rows of %d features exceed 512 MB per buffer",
							a->buffer_rows, nf)));
		if (a->normalize)
		{
			/* Chan et al.: the mean and deviations of the union of the training rows */
			double	   *nmean = palloc0(sizeof(double) * Max(nnum, 1));
			double	   *nstd = palloc0(sizeof(double) * Max(nnum, 1));

			for (int s = 0; s < S; s++)
				for (int j = 0; j < nnum; j++)
					nmean[j] += sh[s].st.mean[j] * (double) sh[s].st.n_train;
			for (int j = 0; j < nnum; j++)
				nmean[j] /= (double) n_train;
			for (int s = 0; s < S; s++)
				for (int j = 0; j < nnum; j++)
				{
					double		d = sh[s].st.mean[j] - nmean[j];

					nstd[j] += sh[s].st.m2[j] + d * d * (double) sh[s].st.n_train;
				}
			for (int j = 0; j < nnum; j++)
			{
				nstd[j] = sqrt(nstd[j] / (double) n_train);
				if (!(nstd[j] > 1e-12))
					nstd[j] = 1.0;
			}
			/* in input order: a numeric column's, or 0 and 1 for one-hot inputs */
			mean = nmean;
			std = nstd;
			if (vocab)
			{
				int			off = 0,
							j = 0;

				mean = palloc(sizeof(double) * nf);
				std = palloc(sizeof(double) * nf);
				for (int i = 0; i < a->src.nfeatcols; i++)
				{
					if (vocab[i])
						for (int w = 0; w < vocab[i]->width; w++, off++)
						{
							mean[off] = 0.0;
							std[off] = 1.0;
						}
					else
					{
						if (j >= nnum)
							ereport(ERROR,
									(errcode(ERRCODE_PROTOCOL_VIOLATION),
									 errmsg("the segments report %d numeric features of %s, fewer than its numeric feature columns here",
											nnum, a->src.relname)));
						mean[off] = nmean[j];
						std[off] = nstd[j];
						off++;
						j++;
					}
				}
			}
		}

		/* the dataset's row here */
		{
			MopDatasetRow d;

			memset(&d, 0, sizeof(d));
			d.name = a->dsname;
			d.src = &a->src;
			mop_prepare_resolve_shape(a->shape, nf, &d.in_h, &d.in_w, &d.in_c);
			d.nfeatures = nf;
			d.target = a->target;
			d.kind = a->kind;
			d.labels = labels;
			d.nlabels = nlabels;
			d.normalize = a->normalize;
			d.mean = mean;
			d.std = std;
			d.partitions = P;
			d.buffer_rows = a->buffer_rows;
			d.validation = a->validation;
			d.n_train = n_train;
			d.n_valid = n_valid;
			d.seed = a->seed;
			d.categories = categories;
			dataset_id = mop_prepare_insert_dataset(&d);
		}

		/* 3. every segment packs its rows, all at once; validation buffers come here */
		{
			HeapTuple	row;
			TupleDesc	td;
			int64		id;
			int			P2;
			char	   *rname = mop_segment_copy_name(a->dsname);
			SPIPlanPtr	plan = mop_prepare_buffer_plan();
			int64	   *buffers = palloc0(sizeof(int64) * P);
			int64	   *bytes = palloc0(sizeof(int64) * P);

			row = mop_segment_lock_dataset(a->dsname, false, &td, &id, &P2);
			for (int s = 0; s < S; s++)
				if (!sh[s].local)
				{
					char		rid[32],
								fp[16],
								np[16];
					const char *values[4] = {rid, fp, np, categories};

					sh[s].remote_id = mop_segment_create_copy(sh[s].conn, sh[s].name, rname, row, td);
					snprintf(rid, sizeof(rid), INT64_FORMAT, sh[s].remote_id);
					snprintf(fp, sizeof(fp), "%d", s * k);
					snprintf(np, sizeof(np), "%d", k);
					mop_segment_send(sh[s].conn, sh[s].name,
									 "SELECT mop.shard_pack($1::pg_catalog.int8, $2::pg_catalog.int4, "
									 "$3::pg_catalog.int4, $4)", 4, values);
				}
			for (int s = 0; s < S; s++)
				if (sh[s].local)
				{
					nbuffers += mop_shard_pack(dataset_id, s * k, k, categories);
					partition_sizes(&sh[s], dataset_id, P, buffers, bytes);
				}
			for (int s = 0; s < S; s++)
				if (!sh[s].local)
				{
					char		rid[32];
					const char *values[1] = {rid};

					PQclear(mop_segment_result(sh[s].conn, sh[s].name));
					snprintf(rid, sizeof(rid), INT64_FORMAT, sh[s].remote_id);
					nbuffers += pull_buffers(&sh[s], "valid", -1, s * k, s * k + k - 1,
											 dataset_id, nf, a->buffer_rows, plan);
					PQclear(mop_segment_exec(sh[s].conn, sh[s].name,
											 "DELETE FROM mop.buffers WHERE dataset_id OPERATOR(pg_catalog.=) "
											 "$1::pg_catalog.int8 AND split OPERATOR(pg_catalog.=) 'valid'",
											 1, values, NULL, NULL, false, 0, NULL));
					partition_sizes(&sh[s], dataset_id, P, buffers, bytes);
					for (int p = s * k; p < (s + 1) * k; p++)
						nbuffers += (int) buffers[p];
					CHECK_FOR_INTERRUPTS();
				}

			/* 4. replicas: each segment's partitions on the replicas - 1 segments after it */
			for (int r = 1; r < replicas; r++)
				for (int s = 0; s < S; s++)
				{
					Shard	   *from = &sh[s],
							   *to = &sh[(s + r) % S];

					for (int p = s * k; p < (s + 1) * k; p++)
					{
						if (from->local)
							mop_segment_send_partition(to->conn, to->name, dataset_id, to->remote_id, p);
						else if (!to->local)
							mop_segment_relay_partition(from->conn, from->name, from->remote_id,
														to->conn, to->name, to->remote_id, p);
						else
							(void) pull_buffers(from, "train", p, p, p, dataset_id, nf, a->buffer_rows, plan);
						CHECK_FOR_INTERRUPTS();
					}
				}

			/* the placement */
			for (int s = 0; s < S; s++)
				for (int r = 0; r < replicas; r++)
				{
					int			owner = ((s - r) % S + S) % S;

					for (int p = owner * k; p < (owner + 1) * k; p++)
						mop_segment_record_copy(dataset_id, sh[s].name, p, sh[s].remote_id,
												sh[s].local ? NULL : rname, buffers[p], bytes[p]);
				}
		}

		/* 5. the segments commit when this transaction commits (segment_xact.c) */
	}
	SPI_finish();

	out->dataset_id = dataset_id;
	out->n_train = n_train;
	out->n_valid = n_valid;
	out->partitions = P;
	out->buffers = nbuffers;
	out->nfeatures = nf;
	out->nlabels = a->kind == MOP_TARGET_REGRESSION ? -1 : nlabels;
}
