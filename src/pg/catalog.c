/*
 * catalog.c -- read rows of the mop.* catalog into C structures.
 *
 * Each function connects to SPI itself (nested connections are fine) and
 * builds its result in the memory context that was current when it was
 * called.  Row-level security on the catalog applies: a role sees only its
 * own datasets and models, so "does not exist" also covers "not yours".
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "mop.h"

#define DATASET_COLS \
	"SELECT d.id, d.name, d.source, d.features, d.feature_kind, d.input_shape, " \
	"d.n_features, d.target, d.target_kind, " \
	"ARRAY(SELECT pg_catalog.jsonb_array_elements_text(d.labels)), " \
	"d.normalized, d.feature_mean, d.feature_std, d.partitions, " \
	"d.train_rows, d.valid_rows, %s FROM mop.datasets d "

/* Elements of a non-null 1-D array datum of the given element type. */
static Datum *
array_datums(Datum d, Oid elemtype, int *n)
{
	ArrayType  *a = DatumGetArrayTypeP(d);
	Datum	   *elems;
	bool	   *nulls;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(a, elemtype, typlen, typbyval, typalign,
					  &elems, &nulls, n);
	for (int i = 0; i < *n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("unexpected null in a mop.datasets array")));
	return elems;
}

/*
 * The vocabularies of ds's categorical columns from mop.datasets.categories,
 * checked: an object with one entry per categorical feature column, whose
 * widths and the numeric columns make n_features.
 */
static void
dataset_vocabularies(MopDataset *ds, Jsonb *jb)
{
	int			found = 0;

	if (!JB_ROOT_IS_OBJECT(jb) || ds->is_array)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("dataset \"%s\" has invalid categories", ds->name),
				 errdetail("mop.datasets.categories must be a JSON object, and only a dataset of columns has one.")));
	ds->categories = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	ds->vocab = palloc0(sizeof(MopVocab *) * Max(ds->nfeatcols, 1));
	for (int i = 0; i < ds->nfeatcols; i++)
	{
		JsonbValue	v;

		if (getKeyJsonValueFromContainer(&jb->root, ds->featcols[i], strlen(ds->featcols[i]),
										 &v) == NULL)
			continue;
		if (v.type != jbvBinary)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("dataset \"%s\" has an invalid vocabulary for column \"%s\": not a JSON object",
							ds->name, ds->featcols[i])));
		ds->vocab[i] = mop_vocab_from_jsonb(v.val.binary.data, ds->name, ds->featcols[i]);
		found++;
	}
	if (found != (int) JsonContainerSize(&jb->root) ||
		mop_input_width(ds->nfeatcols, ds->vocab) != ds->nfeatures)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("dataset \"%s\" has categories that do not fit its features", ds->name),
				 errdetail("Its %d feature columns with the stored vocabularies make %d model inputs; n_features is %d.",
						   ds->nfeatcols, mop_input_width(ds->nfeatcols, ds->vocab), ds->nfeatures)));
}

/* Build a MopDataset (in cxt) from the current SPI row. */
static MopDataset *
dataset_from_row(HeapTuple tup, TupleDesc td, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	MopDataset *ds = palloc0(sizeof(MopDataset));
	bool		isnull;
	Datum		d;
	Datum	   *e;
	int			n;
	char	   *s;

	ds->id = DatumGetInt64(SPI_getbinval(tup, td, 1, &isnull));
	ds->name = SPI_getvalue(tup, td, 2);
	ds->source = SPI_getvalue(tup, td, 3);
	e = array_datums(SPI_getbinval(tup, td, 4, &isnull), TEXTOID, &n);
	ds->nfeatcols = n;
	ds->featcols = palloc(sizeof(char *) * n);
	for (int i = 0; i < n; i++)
		ds->featcols[i] = TextDatumGetCString(e[i]);
	s = SPI_getvalue(tup, td, 5);
	ds->is_array = (strcmp(s, "array") == 0);
	e = array_datums(SPI_getbinval(tup, td, 6, &isnull), INT4OID, &n);
	if (n != 3)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("dataset \"%s\" has an invalid input_shape", ds->name)));
	ds->in_h = DatumGetInt32(e[0]);
	ds->in_w = DatumGetInt32(e[1]);
	ds->in_c = DatumGetInt32(e[2]);
	ds->nfeatures = DatumGetInt32(SPI_getbinval(tup, td, 7, &isnull));
	ds->target = SPI_getvalue(tup, td, 8);
	s = SPI_getvalue(tup, td, 9);
	ds->target_kind = strcmp(s, "class") == 0 ? MOP_TARGET_CLASS :
		strcmp(s, "binary") == 0 ? MOP_TARGET_BINARY : MOP_TARGET_REGRESSION;
	e = array_datums(SPI_getbinval(tup, td, 10, &isnull), TEXTOID, &n);
	ds->nclasses = (ds->target_kind == MOP_TARGET_REGRESSION) ? 0 : n;
	ds->labels = palloc(sizeof(char *) * (n + 1));
	for (int i = 0; i < n; i++)
		ds->labels[i] = TextDatumGetCString(e[i]);
	ds->normalized = DatumGetBool(SPI_getbinval(tup, td, 11, &isnull));
	d = SPI_getbinval(tup, td, 12, &isnull);
	if (ds->normalized && !isnull)
	{
		Datum		sd;

		e = array_datums(d, FLOAT8OID, &n);
		if (n != ds->nfeatures)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("dataset \"%s\" has %d means for %d features",
							ds->name, n, ds->nfeatures)));
		ds->mean = palloc(sizeof(double) * n);
		for (int i = 0; i < n; i++)
			ds->mean[i] = DatumGetFloat8(e[i]);
		sd = SPI_getbinval(tup, td, 13, &isnull);
		e = isnull ? NULL : array_datums(sd, FLOAT8OID, &n);
		if (e == NULL || n != ds->nfeatures)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("dataset \"%s\" has invalid feature_std", ds->name)));
		ds->std = palloc(sizeof(double) * n);
		for (int i = 0; i < n; i++)
			ds->std[i] = DatumGetFloat8(e[i]);
	}
	else
		ds->normalized = false;
	ds->partitions = DatumGetInt32(SPI_getbinval(tup, td, 14, &isnull));
	ds->train_rows = DatumGetInt64(SPI_getbinval(tup, td, 15, &isnull));
	ds->valid_rows = DatumGetInt64(SPI_getbinval(tup, td, 16, &isnull));
	d = SPI_getbinval(tup, td, 17, &isnull);
	if (!isnull)
		dataset_vocabularies(ds, DatumGetJsonbP(d));
	/*
	 * The row is its owner's to edit: the feature columns must make the
	 * inputs (one array column, or one input per numeric column), since
	 * readers size their buffers by n_features and fill them column by
	 * column (the categorical case is checked above).
	 */
	else if (ds->is_array ? ds->nfeatcols != 1 : ds->nfeatcols != ds->nfeatures)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("dataset \"%s\" has %d feature columns for %d features",
						ds->name, ds->nfeatcols, ds->nfeatures),
				 errdetail("A dataset of one array column has one feature column; one of numeric columns has one feature per column.")));
	MemoryContextSwitchTo(old);
	return ds;
}

/* Run a one-parameter dataset query and return its row, or NULL. */
static MopDataset *
dataset_query(const char *where, Oid argtype, Datum arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	MopDataset *ds = NULL;
	int			rc;

	bool		cats = mop_datasets_have_categories();

	SPI_connect();
	rc = SPI_execute_with_args(psprintf(DATASET_COLS "%s",
										cats ? "d.categories" : "NULL::pg_catalog.jsonb", where),
							   1, &argtype, &arg, NULL, true, 2);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.datasets: %s", SPI_result_code_string(rc));
	if (SPI_processed == 1)
		ds = dataset_from_row(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, cxt);
	SPI_finish();
	return ds;
}

/* The dataset named name; ERROR (or NULL if missing_ok) when absent. */
MopDataset *
mop_dataset_lookup(const char *name, bool missing_ok)
{
	MopDataset *ds;

	ds = dataset_query("WHERE d.name OPERATOR(pg_catalog.=) $1",
					   TEXTOID, CStringGetTextDatum(name));
	if (ds == NULL && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dataset \"%s\" does not exist", name),
				 errhint("Create it with mop_prepare(); existing datasets are listed in mop.datasets.")));
	return ds;
}

/* The dataset with this id (ERROR if absent). */
MopDataset *
mop_dataset_by_id(int64 id)
{
	MopDataset *ds;

	ds = dataset_query("WHERE d.id OPERATOR(pg_catalog.=) $1",
					   INT8OID, Int64GetDatum(id));
	if (ds == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dataset with id " INT64_FORMAT " does not exist", id)));
	return ds;
}

/*
 * Is the installed catalog 0.2's (detected by mop.models.best_state, which
 * 0.2 adds)?  The library serves a database still at 0.1 until its ALTER
 * EXTENSION mop UPDATE: there the latest checkpoint is the only one, and
 * decisions have no parent_subepochs.
 */
bool
mop_catalog_is_02(void)
{
	Oid			nsp = get_namespace_oid("mop", true);
	Oid			rel = OidIsValid(nsp) ? get_relname_relid("models", nsp) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, "best_state") != InvalidAttrNumber;
}

/*
 * Has mop.runs the columns of run names and budgets (name, tags, note,
 * time_used)?  A 0.1 catalog, or a 0.2 one of before them, has not.
 */
bool
mop_catalog_has_run_names(void)
{
	Oid			nsp = get_namespace_oid("mop", true);
	Oid			rel = OidIsValid(nsp) ? get_relname_relid("runs", nsp) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, "time_used") != InvalidAttrNumber;
}

/*
 * Has the mop schema the table relname?  The tables added after 0.1
 * (mop.dataset_segments, mop.profiles) are missing from a catalog that
 * ALTER EXTENSION mop UPDATE has not reached yet.
 */
bool
mop_catalog_has_table(const char *relname)
{
	Oid			nsp = get_namespace_oid("mop", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid(relname, nsp));
}

/* See mop.h. */
int32
mop_dataset_remote_partition(int64 dataset_id)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(dataset_id)};
	int32		p = -1;
	bool		isnull;

	/* a catalog before segments (0.1, or a 0.2 of before them) places nothing */
	if (!mop_catalog_has_table("dataset_segments"))
		return -1;
	SPI_connect();
	if (SPI_execute_with_args("SELECT s.partition FROM mop.dataset_segments s "
							  "WHERE s.dataset_id OPERATOR(pg_catalog.=) $1 AND NOT EXISTS "
							  "(SELECT 1 FROM mop.dataset_segments l "
							  "WHERE l.dataset_id OPERATOR(pg_catalog.=) s.dataset_id "
							  "AND l.segment OPERATOR(pg_catalog.=) 'local' "
							  "AND l.partition OPERATOR(pg_catalog.=) s.partition) "
							  "ORDER BY s.partition LIMIT 1",
							  1, t, v, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.dataset_segments");
	if (SPI_processed == 1)
		p = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return p;
}

/*
 * The dataset of model model_id, and (if state is not NULL) a copy of one of
 * the model's checkpoints: its best (the checkpoint of its best epoch; the
 * latest while it has none) or, with MOP_CHECKPOINT_LAST, its latest.
 * ERROR if the model does not exist or has no checkpoint.
 */
MopDataset *
mop_dataset_of_model(int64 model_id, MopCheckpoint which, bytea **state)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			argtype[2] = {INT8OID, BOOLOID};
	Datum		arg[2] = {Int64GetDatum(model_id), BoolGetDatum(which == MOP_CHECKPOINT_LAST)};
	int64		dataset_id;
	bool		isnull;
	int			rc;

	SPI_connect();
	if (mop_catalog_is_02())
		rc = SPI_execute_with_args("SELECT m.dataset_id, "
								   "CASE WHEN $2 THEN m.state ELSE COALESCE(m.best_state, m.state) END "
								   "FROM mop.models m WHERE m.id OPERATOR(pg_catalog.=) $1",
								   2, argtype, arg, NULL, true, 1);
	else
		rc = SPI_execute_with_args("SELECT m.dataset_id, m.state "
								   "FROM mop.models m WHERE m.id OPERATOR(pg_catalog.=) $1",
								   1, argtype, arg, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read mop.models: %s", SPI_result_code_string(rc));
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model " INT64_FORMAT " does not exist", model_id)));
	dataset_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
	if (state)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0],
									  SPI_tuptable->tupdesc, 2, &isnull);
		MemoryContext old;

		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("model " INT64_FORMAT " has no trained state", model_id)));
		old = MemoryContextSwitchTo(cxt);
		*state = DatumGetByteaPCopy(d);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return mop_dataset_by_id(dataset_id);
}

/*
 * Does mop.datasets have the categories column (a 0.2 catalog of after
 * categorical features)?  The library also serves older catalogs.
 */
bool
mop_datasets_have_categories(void)
{
	Oid			nsp = get_namespace_oid("mop", true);
	Oid			rel = OidIsValid(nsp) ? get_relname_relid("datasets", nsp) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, "categories") != InvalidAttrNumber;
}
