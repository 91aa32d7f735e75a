/*
 * predict.c -- mop_predict(), mop_predict_proba() and mop_evaluate().
 *
 * Prediction applies the dataset's stored standardisation to the given
 * features, runs the model's latest checkpoint (mop.models.state) and maps
 * the output back to the original label: the class text for class and
 * binary targets, the value for regression.  Deserialized models are cached
 * in fn_extra (a few per call site) for the rest of the query, so predicting
 * over a table deserializes each model once, not once per row.
 *
 * mop_evaluate reads a table or view with the dataset's feature and target
 * columns (as the caller, NULL rows rejected as in mop_prepare), maps labels
 * through the dataset's label list (an unseen label is an error naming it)
 * and returns the mean loss and metric over its rows.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "mop.h"

PG_FUNCTION_INFO_V1(mop_predict);
PG_FUNCTION_INFO_V1(mop_predict_typed);
PG_FUNCTION_INFO_V1(mop_predict_proba);
PG_FUNCTION_INFO_V1(mop_evaluate);

/* How model input i is named in messages: its column, or an element of the array column. */
static char *
feature_name(const MopDataset *ds, int i)
{
	int			col;

	if (ds->is_array && ds->nfeatcols > 0)
		return psprintf("element %d of column \"%s\"", i + 1, ds->featcols[0]);
	col = mop_input_column(ds->nfeatcols, ds->vocab, i);
	if (col < ds->nfeatcols)
		return psprintf("column \"%s\"", ds->featcols[col]);
	return psprintf("feature %d", i + 1);
}

/*
 * A stored state must fit the dataset it is recorded under before the
 * engine sees the dataset's rows: as many inputs as the dataset has
 * features, and one label value per row (mop's targets).  Anyone who may
 * write mop.models can put another dataset's blob there.
 */
static void
check_model_fits(int64 model_id, nn_model *m, const MopDataset *ds)
{
	if (nn_model_in_dim(m) != ds->nfeatures)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model " INT64_FORMAT " expects %d features but its dataset has %d",
						model_id, nn_model_in_dim(m), ds->nfeatures),
				 errhint("The state stored for the model was made for another dataset.")));
	if (nn_model_y_dim(m) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model " INT64_FORMAT " expects %d label values per row, dataset \"%s\" has 1",
						model_id, nn_model_y_dim(m), ds->name),
				 errhint("The state stored for the model was made for another dataset.")));
}

/*
 * The checkpoint argument argno of a function (absent: 'best'): 'best' or
 * 'last'.
 */
MopCheckpoint
mop_checkpoint_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *s;

	if (PG_NARGS() <= argno)
		return MOP_CHECKPOINT_BEST;
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("checkpoint must not be NULL"),
				 errhint("Use 'best' (the checkpoint of the model's best epoch, the default) or 'last' (its latest).")));
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(s, "best") == 0)
		return MOP_CHECKPOINT_BEST;
	if (strcmp(s, "last") == 0)
		return MOP_CHECKPOINT_LAST;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown checkpoint \"%s\"", s),
			 errhint("Use 'best' (the checkpoint of the model's best epoch, the default) or 'last' (its latest).")));
	return MOP_CHECKPOINT_BEST; /* not reached */
}

/*
 * One of model model_id's checkpoints (its best, or its latest), loaded
 * into cxt and checked against its dataset (returned in *ds): what every
 * user of a stored model calls.
 */
ModelHandle *
mop_model_of(int64 model_id, MopCheckpoint which, MemoryContext cxt, MopDataset **ds)
{
	bytea	   *state;
	ModelHandle *h;

	*ds = mop_dataset_of_model(model_id, which, &state);
	h = mop_model_from_blob(state, cxt);
	pfree(state);
	check_model_fits(model_id, h->model, *ds);
	return h;
}

#define EVAL_SLICE 1024

/* One loaded model of a call site's cache. */
typedef struct PredictCache
{
	int64		model_id;
	MopCheckpoint which;
	MopDataset *ds;
	ModelHandle *h;
	int			out_dim;
	float	   *x;
	float	   *out;
	MemoryContext cxt;
} PredictCache;

/*
 * Models cached per call site (fn_extra), so that predicting with a few
 * models over a table, e.g. comparing them, does not reload per row.
 */
#define PREDICT_CACHE_SLOTS 8

typedef struct PredictSlots
{
	PredictCache *slot[PREDICT_CACHE_SLOTS];
	int			next;			/* round-robin victim */
} PredictSlots;

/* The cached checkpoint `which` of model_id (loading it on a miss). */
static PredictCache *
predict_cache(FunctionCallInfo fcinfo, int64 model_id, MopCheckpoint which)
{
	PredictSlots *slots = (PredictSlots *) fcinfo->flinfo->fn_extra;
	PredictCache *c;
	MemoryContext cxt,
				old;
	int			i;

	if (slots == NULL)
	{
		slots = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(PredictSlots));
		fcinfo->flinfo->fn_extra = slots;
	}
	for (i = 0; i < PREDICT_CACHE_SLOTS; i++)
		if (slots->slot[i] != NULL && slots->slot[i]->model_id == model_id &&
			slots->slot[i]->which == which)
			return slots->slot[i];

	/* a miss: take a free slot, or evict round-robin */
	for (i = 0; i < PREDICT_CACHE_SLOTS && slots->slot[i] != NULL; i++)
		;
	if (i == PREDICT_CACHE_SLOTS)
	{
		i = slots->next;
		slots->next = (slots->next + 1) % PREDICT_CACHE_SLOTS;
		MemoryContextDelete(slots->slot[i]->cxt);	/* frees its model too */
		slots->slot[i] = NULL;
	}

	cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "mop_predict model",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	c = palloc0(sizeof(PredictCache));
	c->cxt = cxt;
	c->model_id = model_id;
	c->which = which;
	c->h = mop_model_of(model_id, which, cxt, &c->ds);
	c->out_dim = nn_model_out_dim(c->h->model);
	c->x = palloc(sizeof(float) * c->ds->nfeatures);
	c->out = palloc(sizeof(float) * Max(c->out_dim, 2));
	MemoryContextSwitchTo(old);
	slots->slot[i] = c;
	return c;
}

/*
 * Model input i from the raw value v (the pos'th value given, counted
 * from 0): checked, standardised, into c->x.
 */
static void
put_number(PredictCache *c, int i, int pos, double v)
{
	const MopDataset *ds = c->ds;
	double		raw = v;

	if (!isfinite(v))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("feature %d (%s) is %s", pos + 1, feature_name(ds, i),
						isnan(v) ? "NaN" : "infinite"),
				 errhint("mop predicts from finite values only.")));
	if (ds->normalized)
		v = (v - ds->mean[i]) / ds->std[i];
	if (!isfinite((float) v))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("feature %d (%s) is out of range for single precision", pos + 1,
						feature_name(ds, i)),
				 errdetail("The value %g is beyond the range of real after standardisation.",
						   raw)));
	c->x[i] = (float) v;
}

/* Run the model on c->x (one row) into c->out. */
static void
run_one(PredictCache *c)
{
	nn_error	err;
	nn_status	st;

	st = nn_predict(c->h->model, c->x, 1, c->out, &err);
	if (st != NN_OK)
		mop_nn_error(st, &err, "prediction failed");
}

/*
 * The raw values of a row as text (text[], in the order of the dataset's
 * feature columns; an array dataset's elements): numbers parsed,
 * categorical values one-hot over their vocabulary (NULL is a value; one
 * the vocabulary lacks goes to "other", or to no input without one), then
 * the model runs.
 */
static void
predict_one_text(PredictCache *c, ArrayType *a)
{
	const MopDataset *ds = c->ds;
	int			n;
	int			want = ds->is_array ? ds->nfeatures : ds->nfeatcols;
	Datum	   *elems;
	bool	   *nulls;
	int			off = 0;

	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features must be a one-dimensional array")));
	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n != want)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model " INT64_FORMAT " expects %d %s, got %d",
						c->model_id, want, ds->is_array ? "array elements" : "feature values", n),
				 errhint("Give one value per column of mop.datasets.features of dataset \"%s\", in that order.",
						 ds->name)));
	for (int i = 0; i < n; i++)
	{
		const MopVocab *v = ds->vocab ? ds->vocab[i] : NULL;
		char	   *s = nulls[i] ? NULL : TextDatumGetCString(elems[i]);

		if (v)
		{
			mop_vocab_encode(v, mop_vocab_slot(v, s), c->x + off);
			off += v->width;
		}
		else
		{
			bool		bad = false;
			double		d;

			if (s == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("feature %d (%s) is null", i + 1, feature_name(ds, off)),
						 errhint("Only a categorical column may be NULL.")));
			d = float8in_internal_opt_error(s, NULL, "double precision", s, &bad);
			if (bad)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						 errmsg("feature %d (%s) is not a number: \"%s\"", i + 1,
								feature_name(ds, off), s),
						 errhint("The column is numeric in dataset \"%s\".", ds->name)));
			put_number(c, off, i, d);
			off++;
		}
	}
	Assert(off == ds->nfeatures);
	run_one(c);
}

/* Standardise features (float8[]) into c->x and run the model. */
static void
predict_one(PredictCache *c, ArrayType *a)
{
	int			n;
	Datum	   *elems;
	bool	   *nulls;
	const MopDataset *ds = c->ds;

	if (ds->vocab)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("dataset \"%s\" of model " INT64_FORMAT " has categorical feature columns",
						ds->name, c->model_id),
				 errdetail("Numbers (float8[]) cannot give their values."),
				 errhint("Give the raw values as text[], one per column of mop.datasets.features, e.g. mop_predict(m, ARRAY['red', '2.5']).")));
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features must be a one-dimensional array")));
	deconstruct_array(a, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &nulls, &n);
	if (n != ds->nfeatures)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model " INT64_FORMAT " expects %d features, got %d",
						c->model_id, ds->nfeatures, n),
				 errhint("Give the features in the order of mop.datasets.features of dataset \"%s\".",
						 ds->name)));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("feature %d is null", i + 1)));
		put_number(c, i, i, DatumGetFloat8(elems[i]));
	}
	run_one(c);
}

/*
 * Run the model on argument 1, in whichever form it comes: the same C
 * functions serve the float8[] and the text[] forms, told apart by the
 * array's own element type.
 */
static void
predict_arg(FunctionCallInfo fcinfo, PredictCache *c)
{
	ArrayType  *a = PG_GETARG_ARRAYTYPE_P(1);

	if (ARR_ELEMTYPE(a) == TEXTOID)
		predict_one_text(c, a);
	else if (ARR_ELEMTYPE(a) == FLOAT8OID)
		predict_one(c, a);
	else
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("features must be float8[] or text[], not %s",
						format_type_be(get_array_type(ARR_ELEMTYPE(a))))));
}

/*
 * The predicted label (class) or value (regression) as a C string; the
 * checkpoint is argument checkpoint_arg when given.
 */
static char *
predict_label(FunctionCallInfo fcinfo, int checkpoint_arg)
{
	PredictCache *c = predict_cache(fcinfo, PG_GETARG_INT64(0),
									mop_checkpoint_arg(fcinfo, checkpoint_arg));
	const MopDataset *ds = c->ds;
	int			best = 0;

	predict_arg(fcinfo, c);
	if (ds->target_kind == MOP_TARGET_REGRESSION)
	{
		/* the model computes in float32: print its shortest exact form */
		return DatumGetCString(DirectFunctionCall1(float4out,
												   Float4GetDatum(c->out[0])));
	}
	if (c->out_dim == 1)
		best = c->out[0] >= 0.5f ? 1 : 0;
	else
		for (int i = 1; i < c->out_dim; i++)
			if (c->out[i] > c->out[best])
				best = i;
	if (best >= ds->nclasses)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model output %d has no label in dataset \"%s\"", best, ds->name)));
	return ds->labels[best];
}

/*
 * mop_predict(model_id bigint, features float8[] [, checkpoint text])
 * -> text label or value
 */
Datum
mop_predict(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(predict_label(fcinfo, 2)));
}

/*
 * mop_predict(model_id bigint, features float8[], as anyelement
 * [, checkpoint text]) -> anyelement: the prediction converted to the type
 * of the third argument (usually a typed NULL such as NULL::int), through
 * that type's input function.
 */
Datum
mop_predict_typed(PG_FUNCTION_ARGS)
{
	Oid			rettype = get_fn_expr_rettype(fcinfo->flinfo);
	Oid			typinput,
				typioparam;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (!OidIsValid(rettype))
		ereport(ERROR,
				(errcode(ERRCODE_INDETERMINATE_DATATYPE),
				 errmsg("could not determine the result type of mop_predict")));
	getTypeInputInfo(rettype, &typinput, &typioparam);
	PG_RETURN_DATUM(OidInputFunctionCall(typinput, predict_label(fcinfo, 3),
										 typioparam, -1));
}

/*
 * mop_predict_proba(model_id bigint, features float8[] [, checkpoint text])
 * -> float8[]:
 * one probability per label (in the order of mop.datasets.labels); for a
 * regression model, the predicted value(s).
 */
Datum
mop_predict_proba(PG_FUNCTION_ARGS)
{
	PredictCache *c = predict_cache(fcinfo, PG_GETARG_INT64(0),
									mop_checkpoint_arg(fcinfo, 2));
	int			n = c->out_dim;
	Datum	   *d;

	predict_arg(fcinfo, c);
	if (c->ds->target_kind != MOP_TARGET_REGRESSION && n == 1)
	{
		c->out[1] = c->out[0];
		c->out[0] = 1.0f - c->out[1];
		n = 2;
	}
	d = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
		d[i] = Float8GetDatum((double) c->out[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(d, n, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * mop_evaluate(model_id bigint, source regclass [, checkpoint text])
 * -> (loss, metric, rows)
 */
Datum
mop_evaluate(PG_FUNCTION_ARGS)
{
	int64		model_id = PG_GETARG_INT64(0);
	Oid			relid = PG_GETARG_OID(1);
	MemoryContext opcxt,
				oldcxt;
	MopDataset *ds;
	ModelHandle *h;
	MopSource	src;
	MopRows		rows;
	nn_result	res;
	TupleDesc	td;
	Datum		values[3];
	bool		nulls[3] = {0};
	int			nf;
	bool	   *onehot;

	if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "mop_evaluate must return a record");
	opcxt = AllocSetContextCreate(CurrentMemoryContext, "mop_evaluate",
								  ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(opcxt);

	h = mop_model_of(model_id, mop_checkpoint_arg(fcinfo, 2), opcxt, &ds);
	mop_source_open(&src, relid, ds->target, ds->featcols, ds->nfeatcols);
	mop_source_check_privileges(&src);
	if (src.is_array != ds->is_array)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("feature columns of %s do not have the types of dataset \"%s\"",
						src.relname, ds->name)));
	for (int i = 0; i < ds->nfeatcols && !ds->is_array; i++)
		if ((ds->vocab && ds->vocab[i]) != src.featcat[i])
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("feature column \"%s\" of %s has type %s, dataset \"%s\" needs %s",
							ds->featcols[i], src.relname, format_type_be(src.feattypes[i]), ds->name,
							src.featcat[i] ? "a number" : "a categorical column (text, varchar, char, enum, boolean)")));
	mop_source_read(&src, ds->target_kind, ds->labels, ds->nclasses,
					ds->vocab ? src.nfeatures : ds->nfeatures, &rows);
	if (ds->vocab)
		mop_rows_encode(&rows, ds->nfeatcols, ds->vocab);
	nf = rows.nfeatures;
	onehot = mop_onehot_mask(ds->nfeatcols, ds->vocab, nf);
	if (ds->normalized)
		for (int64 r = 0; r < rows.nrows; r++)
		{
			float	   *xr = rows.x + r * nf;

			for (int j = 0; j < nf; j++)
			{
				if (onehot && onehot[j])
					continue;
				xr[j] = (float) ((xr[j] - ds->mean[j]) / ds->std[j]);
				if (!isfinite(xr[j]))
					ereport(ERROR,
							(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
							 errmsg("feature %d (%s) of row " INT64_FORMAT " of %s is out of range for single precision after standardisation",
									j + 1, feature_name(ds, j), r + 1, src.relname),
							 errhint("mop computes in single precision; scale the column.")));
			}
		}

	memset(&res, 0, sizeof(res));
	for (int64 off = 0; off < rows.nrows; off += EVAL_SLICE)
	{
		int64		cnt = Min((int64) EVAL_SLICE, rows.nrows - off);
		nn_error	err;
		nn_status	st;

		CHECK_FOR_INTERRUPTS();
		st = nn_evaluate(h->model, rows.x + off * nf, rows.y + off, cnt, &res, &err);
		if (st != NN_OK && st != NN_DIVERGED)
			mop_nn_error(st, &err, "evaluation failed");
	}
	MemoryContextSwitchTo(oldcxt);
	if (res.rows > 0)
	{
		/* a metric over the whole table (auc, f1, r2...), or a mean per row */
		double		metric = nn_metric_whole_set(nn_model_spec(h->model)->metric) ?
			nn_evaluate_metric(h->model) : res.metric_sum / (double) res.rows;

		values[0] = Float8GetDatum(res.loss_sum / (double) res.rows);
		values[1] = Float8GetDatum(metric);
		nulls[1] = !isfinite(metric);	/* e.g. auc of a table with one class */
	}
	else
		nulls[0] = nulls[1] = true;
	values[2] = Int64GetDatum(res.rows);
	MemoryContextDelete(opcxt);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(td), values, nulls)));
}
