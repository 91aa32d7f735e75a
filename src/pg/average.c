/*
 * average.c -- mop.average_states(bytea[]): model averaging.
 *
 * The classic data-parallel alternative to model hopping: each worker trains
 * a copy of the model on its own partition, and the copies' weights (and
 * optimizer moments) are averaged after every epoch.  mop uses it only as
 * the baseline that MOP's convergence is compared with (docs/benchmarks.md),
 * but it is an ordinary SQL function usable by anyone.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "mop.h"

PG_FUNCTION_INFO_V1(mop_average_states);

/* mop.average_states(states bytea[]) returns bytea */
Datum
mop_average_states(PG_FUNCTION_ARGS)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	ModelHandle **h;
	nn_model  **models;
	nn_error	err;
	nn_status	st;
	bytea	   *out;

	deconstruct_array(arr, BYTEAOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mop.average_states needs at least one model state")));
	h = palloc(sizeof(ModelHandle *) * n);
	models = palloc(sizeof(nn_model *) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("model state %d of %d is null", i + 1, n)));
		h[i] = mop_model_from_blob(DatumGetByteaPP(elems[i]), CurrentMemoryContext);
		models[i] = h[i]->model;
	}
	if ((st = nn_model_average(models[0], models, n, &err)) != NN_OK)
		mop_nn_error(st, &err, "could not average model states");
	out = mop_model_to_blob(models[0]);
	for (int i = 0; i < n; i++)
		mop_model_release(h[i]);
	PG_RETURN_BYTEA_P(out);
}
