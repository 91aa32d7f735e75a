/*
 * mop_params.h -- a plain C description of a hyperparameter search space,
 * shared by PBT and TPE (the coordinator translates the user's JSON space
 * into an array of mop_param).
 *
 * A configuration is an array of doubles, one per parameter:
 *   MOP_PARAM_FLOAT     uniform on [lo, hi];
 *   MOP_PARAM_LOGFLOAT  log-uniform on [lo, hi], 0 < lo;
 *   MOP_PARAM_INT       integer in [lo, hi], uniform;
 *   MOP_PARAM_LOGINT    integer in [lo, hi], log-uniform, 0 < lo;
 *   MOP_PARAM_CHOICE    index 0 .. n_choices-1 of a categorical choice.
 * A parameter may be conditional: active only when an earlier CHOICE
 * parameter (cond_param, an index) takes one of the choices in cond_mask
 * (bit c for choice c; conditions only on the first 64 choices) -- momentum
 * only for SGD.  An inactive parameter's value is NaN.
 */
#ifndef MOP_PARAMS_H
#define MOP_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "mop_search.h"

typedef enum mop_param_kind
{
	MOP_PARAM_FLOAT = 0,
	MOP_PARAM_LOGFLOAT = 1,
	MOP_PARAM_INT = 2,
	MOP_PARAM_LOGINT = 3,
	MOP_PARAM_CHOICE = 4
} mop_param_kind;

typedef struct mop_param
{
	const char *name;
	mop_param_kind kind;
	double		lo,
				hi;				/* bounds, inclusive (not for CHOICE) */
	int32_t		n_choices;		/* CHOICE only */
	int32_t		cond_param;		/* -1: always active */
	uint64_t	cond_mask;		/* choices of cond_param that activate it */
} mop_param;

#define MOP_PARAMS_MAX 64

/*
 * Validate a space; 0, or MOP_SEARCH_EINVAL with a message naming the
 * parameter in err (err may be NULL).
 */
int			mop_params_check(const mop_param *p, int32_t n, char *err, size_t errlen);

/* Is parameter i active in configuration x (its condition holds)? */
int			mop_param_active(const mop_param *p, const double *x, int32_t i);

/* Sample a configuration from the prior (uniform / log-uniform); inactive: NaN. */
void		mop_params_sample(const mop_param *p, int32_t n, mop_rng *r, double *x);

/* Sample parameter i alone from its prior. */
double		mop_param_sample(const mop_param *p, mop_rng *r);

/* Round and clip a value of parameter p into its domain. */
double		mop_param_clip(const mop_param *p, double v);

#endif							/* MOP_PARAMS_H */
