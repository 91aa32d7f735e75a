/*
 * model_init.c -- a model's initial state.
 *
 * A configuration becomes a first checkpoint in one place: the engine
 * builds the model the configuration describes (its weights drawn from the
 * configuration's seed, its optimizer state and counters at zero) and the
 * model is serialised as a mop.models.state blob.  The same configuration
 * always gives the same blob, so every executor that starts a model from
 * scratch starts it from the same state.  mop.init_model() hands it to SQL.
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "mop.h"

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

	mop_config_to_spec(config, ds, run_epochs, spec);
	mop_blas_ensure();
	h = mop_model_handle(CurrentMemoryContext);
	st = nn_model_create(spec, &h->model, &err);
	if (st != NN_OK)
		mop_nn_error(st, &err, "could not create model");
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
