/*
 * predict_table.c -- mop_predict_table(): a model's predictions for every
 * row of a table, written into a new table in one call.
 *
 *   mop_predict_table(model_id, source, output, id_column => NULL)
 *
 * The source is read with the caller's privileges, through a cursor, a
 * batch of rows at a time; its feature columns are found by the names the
 * model's dataset was prepared with (not by position), a missing one or
 * one of the wrong kind is an error naming it, the dataset's stored
 * standardisation is applied as for mop_predict, and categorical columns
 * are one-hot encoded over the dataset's vocabulary.  Each batch goes through
 * the engine at once, and its rows are written into the output table
 * (created here, owned by the caller) with the heap's bulk insertion, as
 * COPY does.  Output columns: id (the id column's own type, or the row's
 * number in reading order), prediction (the class in the target's own
 * type; a regression value as double precision), and for
 * class targets probability (of the predicted class) and probabilities
 * (one per label, in the order of mop.datasets.labels).
 *
 * The output name is resolved in the caller's search_path (as CREATE
 * TABLE would resolve it), so the function carries no SET clause; right
 * after that it pins search_path for the rest of the call, and every SQL
 * text here is schema-qualified anyway.
 */
#include "postgres.h"

#include <math.h>

#include "access/heapam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/regproc.h"

#include "mop.h"

PG_FUNCTION_INFO_V1(mop_predict_table);

#define PT_BATCH 1024

/* The column name of relid, or an error naming it and the dataset. */
static Oid
source_column(Oid relid, const char *relname, const char *col, const char *dsname,
			  const char *what)
{
	AttrNumber	att = get_attnum(relid, col);

	if (att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" does not exist in %s", col, relname),
				 errdetail("The %s of dataset \"%s\" are read by name.", what, dsname),
				 errhint("Give the source the columns the dataset was prepared from (mop.datasets.features).")));
	return get_atttype(relid, att);
}

/* The dataset's target type (mop.datasets.target_type), as a type oid. */
static Oid
target_type_of(const MopDataset *ds)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(ds->id);
	Oid			typ = InvalidOid;

	SPI_connect();
	if (SPI_execute_with_args("SELECT pg_catalog.to_regtype(target_type)::pg_catalog.oid FROM mop.datasets "
							  "WHERE id OPERATOR(pg_catalog.=) $1", 1, &t, &v, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			typ = DatumGetObjectId(d);
	}
	SPI_finish();
	if (!OidIsValid(typ))
		typ = ds->target_kind == MOP_TARGET_REGRESSION ? FLOAT8OID : TEXTOID;
	return typ;
}

/* Input j of a row from the raw value v: standardised and checked. */
static float
standardised(const MopDataset *ds, int j, double v, int64 rowno, const char *relname)
{
	double		raw = v;

	if (ds->normalized)
		v = (v - ds->mean[j]) / ds->std[j];
	if (!isfinite((float) v))
		ereport(ERROR,
				(errcode(isfinite(raw) ? ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE :
						 ERRCODE_DATA_EXCEPTION),
				 errmsg("row " INT64_FORMAT " of %s has a feature that is NaN, infinite or out of range for single precision",
						rowno, relname),
				 errhint("mop predicts from finite values only.")));
	return (float) v;
}

/*
 * The model input of one row of feature columns (column 2 + i of the
 * cursor is feature column i): numbers standardised, categorical values
 * one-hot over the dataset's vocabulary (NULL a value like any other, one
 * it lacks in "other" or, without one, in no input).
 */
static void
read_columns(const MopDataset *ds, HeapTuple tup, TupleDesc td, float *x, int64 rowno,
			 const char *relname)
{
	int			off = 0;

	for (int i = 0; i < ds->nfeatcols; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(tup, td, i + 2, &isnull);
		const MopVocab *v = ds->vocab ? ds->vocab[i] : NULL;

		if (v)
		{
			char	   *s = isnull ? NULL : TextDatumGetCString(d);

			mop_vocab_encode(v, mop_vocab_slot(v, s), x + off);
			off += v->width;
			continue;
		}
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("row " INT64_FORMAT " of %s has a null feature (\"%s\")",
							rowno, relname, ds->featcols[i])));
		x[off] = standardised(ds, off, DatumGetFloat8(d), rowno, relname);
		off++;
	}
}

/* Long because one cursor loop reads, predicts and writes each batch inside a single SPI connection and memory context. */
Datum
mop_predict_table(PG_FUNCTION_ARGS)
{
	int64		model_id;
	Oid			relid;
	char	   *output;
	char	   *idcol = NULL;
	MemoryContext opcxt,
				batchcxt,
				oldcxt;
	MopDataset *ds;
	ModelHandle *h;
	char	   *relname;
	Oid			idtype = INT8OID,
				predtype,
				typinput,
				typioparam;
	StringInfoData q;
	RangeVar   *rv;
	Relation	out;
	BulkInsertState bistate;
	CommandId	cid;
	Portal		portal;
	SPIPlanPtr	plan;
	int			nf,
				out_dim;
	bool		classes;
	float	   *x,
			   *y;
	int64		written = 0;
	int			guclevel;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model_id, source and output of mop_predict_table must not be null")));
	model_id = PG_GETARG_INT64(0);
	relid = PG_GETARG_OID(1);
	output = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		idcol = text_to_cstring(PG_GETARG_TEXT_PP(3));

	/* where the output goes, by the caller's search_path; then pin it */
	rv = makeRangeVarFromNameList(stringToQualifiedNameList(output));
	rv->schemaname = get_namespace_name(RangeVarGetCreationNamespace(rv));
	guclevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_predict_table",
								  ALLOCSET_DEFAULT_SIZES);
	batchcxt = AllocSetContextCreate(opcxt, "mop_predict_table batch",
									 ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(opcxt);

	h = mop_model_of(model_id, mop_checkpoint_arg(fcinfo, 4), opcxt, &ds);
	nf = ds->nfeatures;
	out_dim = nn_model_out_dim(h->model);
	classes = ds->target_kind != MOP_TARGET_REGRESSION;

	/* the source: its feature columns by name, read as the caller */
	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										 get_rel_name(relid));
	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT ");
	if (idcol)
	{
		idtype = source_column(relid, relname, idcol, ds->name, "id column");
		appendStringInfo(&q, "%s, ", quote_identifier(idcol));
	}
	else
		appendStringInfoString(&q, "NULL::pg_catalog.int8, ");
	for (int i = 0; i < ds->nfeatcols; i++)
	{
		Oid			typ = source_column(relid, relname, ds->featcols[i], ds->name, "features");
		bool		cat = ds->vocab && ds->vocab[i];

		if (ds->is_array ? !mop_type_is_numeric_array(typ) :
			cat ? !mop_type_is_categorical(typ) : !mop_type_is_numeric(typ))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("feature column \"%s\" of %s has type %s, dataset \"%s\" needs %s",
							ds->featcols[i], relname, format_type_be(typ), ds->name,
							ds->is_array ? "a numeric array" :
							cat ? "a categorical column (text, varchar, char, enum, boolean)" : "a number")));
	}
	/* array: column 2 is the array; else column 2 + i is feature column i */
	if (ds->is_array)
		appendStringInfo(&q, "%s::pg_catalog.float8[]", quote_identifier(ds->featcols[0]));
	else
		for (int i = 0; i < ds->nfeatcols; i++)
			appendStringInfo(&q, "%s%s::pg_catalog.%s", i ? ", " : "",
							 quote_identifier(ds->featcols[i]),
							 (ds->vocab && ds->vocab[i]) ? "text" : "float8");
	appendStringInfo(&q, " FROM %s", relname);

	/* the output table, the caller's */
	/* a value of any type for regression (an integer target predicts fractions) */
	predtype = classes ? target_type_of(ds) : FLOAT8OID;
	getTypeInputInfo(predtype, &typinput, &typioparam);
	{
		StringInfoData c;

		initStringInfo(&c);
		appendStringInfo(&c, "CREATE TABLE %s (id %s, prediction %s",
						 quote_qualified_identifier(rv->schemaname, rv->relname),
						 format_type_be_qualified(idtype), format_type_be_qualified(predtype));
		if (classes)
			appendStringInfoString(&c, ", probability pg_catalog.float8, probabilities pg_catalog.float8[]");
		/* heap: the rows are written with the heap's bulk insertion */
		appendStringInfoString(&c, ") USING heap");
		SPI_connect();
		if (SPI_execute(c.data, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not create %s", output);
		SPI_finish();
	}
	out = table_openrv(rv, RowExclusiveLock);
	bistate = GetBulkInsertState();
	cid = GetCurrentCommandId(true);

	x = palloc(sizeof(float) * (Size) PT_BATCH * nf);
	y = palloc(sizeof(float) * (Size) PT_BATCH * Max(out_dim, 2));
	SPI_connect();
	plan = SPI_prepare(q.data, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "could not prepare the read of %s: %s", relname,
			 SPI_result_code_string(SPI_result));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		uint64		n;
		Datum	   *ids;
		bool	   *idnull;
		nn_error	err;
		nn_status	st;

		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, PT_BATCH);
		n = SPI_processed;
		if (n == 0)
			break;
		MemoryContextReset(batchcxt);
		MemoryContextSwitchTo(batchcxt);
		ids = palloc(sizeof(Datum) * n);
		idnull = palloc(sizeof(bool) * n);
		for (uint64 r = 0; r < n; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	td = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		a;
			Datum	   *elems;
			bool	   *nulls;
			int			ne;

			if (idcol)
			{
				Datum		d = SPI_getbinval(tup, td, 1, &idnull[r]);

				ids[r] = idnull[r] ? (Datum) 0 : datumCopy(d, get_typbyval(idtype), get_typlen(idtype));
			}
			else
			{
				ids[r] = Int64GetDatum(written + (int64) r + 1);
				idnull[r] = false;
			}
			if (!ds->is_array)
			{
				read_columns(ds, tup, td, x + r * nf, written + (int64) r + 1, relname);
				continue;
			}
			a = SPI_getbinval(tup, td, 2, &isnull);
			if (isnull)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("row " INT64_FORMAT " of %s has a null feature",
								written + (int64) r + 1, relname)));
			deconstruct_array(DatumGetArrayTypeP(a), FLOAT8OID, 8, FLOAT8PASSBYVAL,
							  TYPALIGN_DOUBLE, &elems, &nulls, &ne);
			if (ne != nf)
				ereport(ERROR,
						(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
						 errmsg("row " INT64_FORMAT " of %s has %d features, model " INT64_FORMAT " expects %d",
								written + (int64) r + 1, relname, ne, model_id, nf)));
			for (int j = 0; j < nf; j++)
			{
				double		v;

				if (nulls[j])
					ereport(ERROR,
							(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							 errmsg("row " INT64_FORMAT " of %s has a null feature (%s)",
									written + (int64) r + 1, relname,
									ds->is_array ? psprintf("element %d of \"%s\"", j + 1, ds->featcols[0]) :
									psprintf("\"%s\"", ds->featcols[j]))));
				v = DatumGetFloat8(elems[j]);
				x[r * nf + j] = standardised(ds, j, v, written + (int64) r + 1, relname);
			}
		}
		/* the batch's rows are read: free them (SPI keeps every fetch until SPI_finish) */
		SPI_freetuptable(SPI_tuptable);
		st = nn_predict(h->model, x, (int64) n, y, &err);
		if (st != NN_OK)
			mop_nn_error(st, &err, "prediction failed");
		for (uint64 r = 0; r < n; r++)
		{
			const float *o = y + r * out_dim;
			Datum		values[4];
			bool		vnull[4] = {idnull[r], false, false, false};
			HeapTuple	tup;

			values[0] = ids[r];
			if (!classes)
				values[1] = OidInputFunctionCall(typinput,
												 DatumGetCString(DirectFunctionCall1(float4out, Float4GetDatum(o[0]))),
												 typioparam, -1);
			else
			{
				int			best = 0;
				int			np = out_dim == 1 ? 2 : out_dim;
				Datum	   *p = palloc(sizeof(Datum) * np);

				if (out_dim == 1)
				{
					p[0] = Float8GetDatum(1.0 - (double) o[0]);
					p[1] = Float8GetDatum((double) o[0]);
					best = o[0] >= 0.5f ? 1 : 0;
				}
				else
				{
					for (int k = 0; k < out_dim; k++)
					{
						p[k] = Float8GetDatum((double) o[k]);
						if (o[k] > o[best])
							best = k;
					}
				}
				if (best >= ds->nclasses)
					ereport(ERROR,
							(errcode(ERRCODE_DATA_CORRUPTED),
							 errmsg("model output %d has no label in dataset \"%s\"", best, ds->name)));
				values[1] = OidInputFunctionCall(typinput, ds->labels[best], typioparam, -1);
				values[2] = p[best];
				values[3] = PointerGetDatum(construct_array(p, np, FLOAT8OID, 8, FLOAT8PASSBYVAL,
															TYPALIGN_DOUBLE));
			}
			tup = heap_form_tuple(RelationGetDescr(out), values, vnull);
			heap_insert(out, tup, cid, 0, bistate);
		}
		written += (int64) n;
		MemoryContextSwitchTo(opcxt);
	}
	SPI_cursor_close(portal);
	SPI_finish();
	FreeBulkInsertState(bistate);
	table_close(out, NoLock);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(opcxt);
	AtEOXact_GUC(true, guclevel);
	PG_RETURN_INT64(written);
}
