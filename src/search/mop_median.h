/*
 * mop_median.h -- the median stopping rule (Golovin et al., Google Vizier,
 * KDD 2017; Ray Tune's MedianStoppingRule), pure C, for grid and random
 * search.
 *
 * Trials report one score per step (step 1, 2, 3, ...: an epoch, or a
 * sub-epoch if the caller reports those; higher is better).  When trial t
 * reports step s, it is stopped if
 *
 *     best_t(s) < median { mean_j(s) : j a reference trial, j != t }
 *
 * where best_t(s) is t's best score over steps 1..s (mode MOP_MEDIAN_BEST,
 * the rule as published) or t's running average over steps 1..s (mode
 * MOP_MEDIAN_MEAN, stricter against a late lucky epoch), and mean_j(s) is the
 * running average of j's scores over steps 1..min(s, steps j reported).
 * The rule does not apply while s < grace_steps, or while there are fewer
 * than min_trials reference trials.  Reference trials are the completed ones
 * (mop_median_complete: trained their whole budget; the rule as published),
 * or with only_completed = 0 also every other trial that has reported step
 * s (running trials, which gives the rule earlier teeth).
 * A trial whose histories contain a NaN is never a reference; a NaN score
 * stops the reporting trial at once (failed).  The median of an even count
 * is the mean of the middle two.  Ties are not stopped (strictly worse).
 *
 * The rule keeps prefix sums, so a decision costs O(trials log trials).
 */
#ifndef MOP_MEDIAN_H
#define MOP_MEDIAN_H

#include <stdint.h>

#include "mop_search.h"

typedef enum mop_median_mode
{
	MOP_MEDIAN_BEST = 0,
	MOP_MEDIAN_MEAN = 1
} mop_median_mode;

typedef struct mop_median mop_median;

/* New rule; grace_steps >= 0, min_trials >= 1.  NULL on bad arguments. */
mop_median *mop_median_new(int32_t grace_steps, int32_t min_trials, int only_completed,
						   mop_median_mode mode);
void		mop_median_free(mop_median *m);

/*
 * Trial `trial` (any id >= 0) reports `score` at `step`, which must be the
 * trial's next step (1 for its first report).  Returns 1: stop the trial
 * (*why filled, MOP_WHY_MEDIAN or MOP_WHY_FAILED; why may be NULL), 0:
 * continue, or MOP_SEARCH_EINVAL (bad id, step out of sequence),
 * MOP_SEARCH_ESTATE (the trial was stopped or completed), MOP_SEARCH_ENOMEM.
 */
int			mop_median_report(mop_median *m, int32_t trial, int32_t step, double score,
							  mop_decision *why);

/* The trial trained its whole budget: it becomes a reference.  0 or an error. */
int			mop_median_complete(mop_median *m, int32_t trial);

/*
 * The median the rule compares against at `step`, excluding trial `except`
 * (-1: none); NaN when there are fewer than min_trials references.
 */
double		mop_median_value(const mop_median *m, int32_t step, int32_t except,
							 int32_t *n_refs);

#endif							/* MOP_MEDIAN_H */
