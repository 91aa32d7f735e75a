/*
 * model_init.c -- a model's initial state.
 *
 * A configuration becomes a first checkpoint in one place: the engine
 * builds the model the configuration describes (its weights drawn from the
 * configuration's seed, its optimizer state and counters at zero) and the
 * model is serialised as a mop.models.state blob.  The same configuration
 * always gives the same blob, so every executor that starts a model from
 * scratch starts it from the same state.  mop.init_model() hands it to SQL.
 *
 * The configuration's class weights go into that first state, so they
 * travel with the model from then on (hops, resumes, PBT's copies).
 * "balanced" weights are computed here, once, from the class counts of the
 * dataset's training split (its label buffers in mop.buffers): a model keeps
 * the weights it was created with.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "mop.h"

/*
 * The class counts of the last dataset counted, in this transaction: the
 * models of a search are created one after another in one transaction, and
 * each would read every label buffer again.
 */
static int64 counted_dataset = -1;
static LocalTransactionId counted_lxid = InvalidLocalTransactionId;
static int64 *counted = NULL;		/* in TopMemoryContext */

/*
 * Rows of each class (ds->nclasses) in dataset ds's training split, from
 * its label buffers.  A label that is no class index is an ERROR: the
 * buffers are not what mop_prepare wrote.
 */
static const int64 *
train_class_counts(const MopDataset *ds)
{
	Oid			t = INT8OID;
	Datum		v = Int64GetDatum(ds->id);
	Portal		portal;
	int64	   *counts;
	MemoryContext tmp,
				old;

	if (counted != NULL && counted_dataset == ds->id && counted_lxid == MyProc->lxid)
		return counted;
	{
		/* labels on segments only are not counted here: refuse, rather than weigh by a part */
		int32		p = mop_dataset_remote_partition(ds->id);

		if (p >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("class_weight \"balanced\" cannot weigh dataset \"%s\": its partition %d is only on segments", ds->name, p),
					 errdetail("\"balanced\" counts the labels of the training buffers on this server."),
					 errhint("Give \"class_weight\" as a JSON object of label -> weight, or place the dataset with 'local' holding every partition.")));
	}
	/* kept only once complete: an error while counting leaves no cache */
	counts = palloc0(sizeof(int64) * ds->nclasses);
	tmp = AllocSetContextCreate(CurrentMemoryContext, "mop class counts",
								ALLOCSET_DEFAULT_SIZES);
	SPI_connect();
	portal = SPI_cursor_open_with_args(NULL,
									   "SELECT b.y FROM mop.buffers b "
									   "WHERE b.dataset_id OPERATOR(pg_catalog.=) $1 "
									   "AND b.split OPERATOR(pg_catalog.=) 'train'",
									   1, &t, &v, NULL, true, 0);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 64);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
			bytea	   *y;
			const char *p;
			int64		n;

			if (isnull)
				continue;
			old = MemoryContextSwitchTo(tmp);
			y = DatumGetByteaPP(d);
			MemoryContextSwitchTo(old);
			p = VARDATA_ANY(y);
			n = VARSIZE_ANY_EXHDR(y) / sizeof(float);
			for (int64 r = 0; r < n; r++)
			{
				float		l;

				memcpy(&l, p + r * sizeof(float), sizeof(float));
				if (!(l >= 0 && l < ds->nclasses) || l != floorf(l))
					ereport(ERROR,
							(errcode(ERRCODE_DATA_CORRUPTED),
							 errmsg("a training buffer of dataset \"%s\" holds label %g, not one of its %d classes",
									ds->name, (double) l, ds->nclasses),
							 errhint("Prepare the dataset again with mop_prepare.")));
				counts[(int) l]++;
			}
			CHECK_FOR_INTERRUPTS();
		}
		SPI_freetuptable(SPI_tuptable);
		MemoryContextReset(tmp);
	}
	SPI_cursor_close(portal);
	SPI_finish();
	MemoryContextDelete(tmp);
	if (counted)
		pfree(counted);
	counted = MemoryContextAlloc(TopMemoryContext, sizeof(int64) * ds->nclasses);
	memcpy(counted, counts, sizeof(int64) * ds->nclasses);
	pfree(counts);
	counted_dataset = ds->id;
	counted_lxid = MyProc->lxid;
	return counted;
}

/*
 * The weights of "balanced", as scikit-learn's compute_class_weight
 * computes them over the training split's labels: rows / (classes *
 * rows of the class), where classes counts the classes that occur; a class
 * with no training rows never weighs in the training loss and gets 1.
 */
static void
balanced_weights(const MopDataset *ds, float *w)
{
	const int64 *counts = train_class_counts(ds);
	int64		rows = 0;
	int			present = 0;

	for (int c = 0; c < ds->nclasses; c++)
	{
		rows += counts[c];
		present += counts[c] > 0;
	}
	if (rows == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("dataset \"%s\" has no training rows to weigh its classes by", ds->name),
				 errhint("Give \"class_weight\" as a JSON object of label -> weight instead.")));
	for (int c = 0; c < ds->nclasses; c++)
		w[c] = counts[c] > 0 ?
			(float) ((double) rows / ((double) present * (double) counts[c])) : 1.0f;
}

PG_FUNCTION_INFO_V1(mop_init_model);

/*
 * The initial state of a model of config for dataset ds, allocated in the
 * current memory context; *spec receives the engine specification the
 * configuration maps to (metric, optimizer, ...); run_epochs as
 * mop_config_to_spec takes it.
 */
bytea *
mop_model_initial_state(Jsonb *config, const MopDataset *ds, int32 run_epochs,
						nn_spec *spec)
{
	ModelHandle *h;
	nn_error	err;
	nn_status	st;
	bytea	   *blob;
	MopClassWeight cw;

	mop_config_to_spec(config, ds, run_epochs, spec);
	mop_config_class_weight(config, ds, spec, &cw);
	if (cw.balanced)
	{
		bool		any = false;

		cw.w = palloc(sizeof(float) * cw.n);
		balanced_weights(ds, cw.w);
		/* a balanced training split weighs every class 1: no weights */
		for (int c = 0; c < cw.n; c++)
			any |= cw.w[c] != 1.0f;
		if (!any)
			cw.n = 0;
	}
	mop_blas_ensure();
	h = mop_model_handle(CurrentMemoryContext);
	st = nn_model_create(spec, &h->model, &err);
	if (st != NN_OK)
		mop_nn_error(st, &err, "could not create model");
	if (cw.n > 0 && (st = nn_model_set_class_weights(h->model, cw.w, cw.n, &err)) != NN_OK)
		mop_nn_error(st, &err, "could not set the model's class weights");
	blob = mop_model_to_blob(h->model);
	mop_model_release(h);
	return blob;
}

/* mop.init_model(dataset text, config jsonb) -> bytea: a fresh model state. */
Datum
mop_init_model(PG_FUNCTION_ARGS)
{
	char	   *dsname = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Jsonb	   *config = PG_GETARG_JSONB_P(1);
	MopDataset *ds = mop_dataset_lookup(dsname, false);
	nn_spec		spec;

	/* no run: a cosine schedule must give its epochs */
	PG_RETURN_BYTEA_P(mop_model_initial_state(config, ds, 0, &spec));
}
