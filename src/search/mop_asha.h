/*
 * mop_asha.h -- asynchronous successive halving (ASHA, Li et al., MLSys
 * 2020) in its promotion form, pure C.
 *
 * Rungs k = 0, 1, ... have resources r_k = r_min eta^k (epochs, as
 * Hyperband) for every such value below R, and one top rung with R itself
 * (so the best configurations always train to the full R, as in Ray Tune;
 * when R = r_min eta^K the top rung is simply r_min eta^K).  There are no
 * barriers.  Whenever a worker is idle the caller asks mop_asha_next:
 *   - for k from the highest rung below the top down to 0: rank the results
 *     of rung k (higher score first, NaN last, ties by smaller id), take the
 *     top floor(|rung k| / eta); the best of them not yet promoted (and not
 *     NaN) is promoted: CONTINUE it to r_{k+1} -- on MOP it resumes from its
 *     checkpoint;
 *   - otherwise, while fewer than max_trials trials exist (0: no limit),
 *     start a NEW trial with resource r_0;
 *   - otherwise WAIT while a trial is running (its result may make another
 *     promotable), and when nothing runs: STOP every paused trial (they will
 *     never be promoted), then DONE.
 * |rung k| counts every result reported at rung k, NaN included (the NaN
 * trial used that budget), but a NaN result is never promoted: it is stopped
 * as failed at once.  A trial that reports at the top rung is stopped as
 * finished.  Trials that are not promoted are paused, not stopped: ASHA may
 * still promote them when their rung grows.
 *
 * As Hyperband's driver, the state depends only on the sequence of calls.
 */
#ifndef MOP_ASHA_H
#define MOP_ASHA_H

#include <stdint.h>

#include "mop_search.h"

typedef struct mop_asha mop_asha;

/* New ASHA: 1 <= r_min <= R, eta >= 2, max_trials >= 0.  NULL on bad arguments. */
mop_asha   *mop_asha_new(int32_t r_min, int32_t R, int32_t eta, int32_t max_trials);
void		mop_asha_free(mop_asha *a);

/* Number of rungs and the resource of rung k (-1 if out of range). */
int32_t		mop_asha_n_rungs(const mop_asha *a);
int32_t		mop_asha_rung_resource(const mop_asha *a, int32_t k);

/* The next action for an idle worker (see the header comment). */
mop_poll	mop_asha_next(mop_asha *a, mop_action *act);

/*
 * Trial reached `resource` with `score`.  Returns 0 when used, 1 when ignored
 * (below the trial's target and not NaN, or the trial is not running),
 * MOP_SEARCH_ESTATE for an unknown trial, MOP_SEARCH_ENOMEM.
 */
int			mop_asha_report(mop_asha *a, int32_t trial, int32_t resource, double score);

int32_t		mop_asha_n_trials(const mop_asha *a);

/* A trial's state, its current rung and latest result; 0 or MOP_SEARCH_ESTATE. */
int			mop_asha_trial(const mop_asha *a, int32_t trial, mop_trial_state *state,
						   int32_t *rung, double *score);

/* Best trial: highest rung reached, then rank order; 0, or 1 if none. */
int			mop_asha_best(const mop_asha *a, int32_t *trial, double *score, int32_t *resource);

#endif							/* MOP_ASHA_H */
