/*
 * mop_tpe.h -- the Tree-structured Parzen Estimator (Bergstra et al., NIPS
 * 2011) with Optuna-like defaults, pure C, over a mop_param search space.
 *
 * Observations are (configuration, score), higher is better; NaN (a failed
 * trial) ranks below every number.  To propose:
 *   1. while fewer than n_startup observations are complete, sample the
 *      prior (uniform / log-uniform / uniform choice);
 *   2. otherwise split the complete observations in rank order: the best
 *      n_good = min(ceil(gamma * n), gamma_cap) -- never a NaN -- are "good",
 *      the rest "bad" (Optuna's default: gamma 0.1, cap 25);
 *      with constant_liar, trials asked but not yet told count as bad, so a
 *      batch (or parallel workers) does not propose the same point twice;
 *   3. per parameter, independently, in parameter order (a conditional one
 *      only when its condition holds, fitted on the observations where it
 *      was active), fit l(x) on the good and g(x) on the bad observations:
 *        numeric: a Gaussian mixture truncated to the bounds, in log space
 *          for log parameters and over [lo - 0.5, hi + 0.5] for integers;
 *          one kernel per observation at its value plus a prior kernel at
 *          the middle of the range with sigma = the range; each kernel's
 *          sigma is the larger gap to its sorted neighbours (bounds as outer
 *          neighbours; the two extreme kernels use their inner gap), clipped
 *          to [range / min(100, 1 + kernels), range] (Optuna's "magic clip");
 *        choice: weight prior_weight / n_choices per choice plus each
 *          observation's weight on its choice, normalised;
 *      observation weights are Optuna's: 1 each when a group has fewer than
 *      25, otherwise a ramp from 1/n up to 1 over the older ones and 1 for
 *      the newest 25; the prior kernel has weight prior_weight;
 *   4. draw n_ei_candidates values from l and keep the one maximising
 *      log l(x) - log g(x) (which ranks candidates as expected improvement
 *      does); ties keep the earlier draw.
 * Everything random comes from the seeded splitmix64 stream in a fixed
 * order, so proposals depend only on the seed and the sequence of calls.
 */
#ifndef MOP_TPE_H
#define MOP_TPE_H

#include <stdint.h>

#include "mop_params.h"

typedef struct mop_tpe_opts
{
	int32_t		n_startup;		/* default 10 */
	int32_t		n_ei_candidates;	/* default 24 */
	double		gamma;			/* (0, 1]; default 0.1 */
	int32_t		gamma_cap;		/* default 25 */
	double		prior_weight;	/* > 0; default 1.0 */
	int			constant_liar;	/* default 1 */
} mop_tpe_opts;

/* The defaults above. */
void		mop_tpe_default_opts(mop_tpe_opts *o);

typedef struct mop_tpe mop_tpe;

/* New sampler over a valid space; opts NULL for defaults.  NULL on bad arguments. */
mop_tpe    *mop_tpe_new(const mop_param *space, int32_t n_params, const mop_tpe_opts *opts,
						uint64_t seed);
void		mop_tpe_free(mop_tpe *t);

/*
 * Propose a configuration into x (n_params doubles, NaN for inactive
 * parameters); it is recorded as pending.  Returns its trial id (0, 1, ...)
 * or an error.
 */
int32_t		mop_tpe_ask(mop_tpe *t, double *x);

/* A batch: k asks; x holds k * n_params values, ids k ids.  Returns k or an error. */
int32_t		mop_tpe_propose(mop_tpe *t, int32_t k, double *x, int32_t *ids);

/* The score of an asked trial (NaN: failed).  0, or an error (unknown id, told twice). */
int			mop_tpe_tell(mop_tpe *t, int32_t id, double score);

/* Add a complete observation made elsewhere (warm start); returns its id or an error. */
int32_t		mop_tpe_add(mop_tpe *t, const double *x, double score);

int32_t		mop_tpe_n_complete(const mop_tpe *t);

/*
 * The good/bad split: order receives the indices 0..n-1 in rank order (score
 * descending, NaN last, ties by index); returns n_good =
 * min(ceil(gamma n), cap, number of finite scores).
 */
int32_t		mop_tpe_split(const double *scores, int32_t n, double gamma, int32_t cap,
						  int32_t *order);

/*
 * log l(v) - log g(v) for k candidate values of parameter `param` under the
 * current observations (the quantity candidates are ranked by); out gets k
 * values.  Returns 0 or an error.
 */
int			mop_tpe_log_ratio(mop_tpe *t, int32_t param, const double *cand, int32_t k,
							  double *out);

#endif							/* MOP_TPE_H */
