/*
 * mop_hyperband.h -- Hyperband (Li et al., JMLR 2018): the bracket plan in
 * integers, and a successive-halving driver that runs the plan on MOP.
 *
 * Resource unit: whole epochs (a caller may define one unit as any fixed
 * number of sub-epochs instead; nothing here depends on it).  R is the
 * maximum resource a single configuration may receive, eta >= 2 the
 * reduction factor.
 *
 *   s_max = floor(log_eta R), by integer arithmetic: the largest s with
 *           eta^s <= R (no floating-point log, so no 0.9999 surprises);
 *   B     = (s_max + 1) R, the budget of one bracket;
 *   for s = s_max .. 0 (bracket s):
 *     n   = ceil((s_max + 1) / (s + 1) * eta^s)
 *         = ((s_max + 1) eta^s + s) div (s + 1)      (exact integer ceil)
 *     round i = 0 .. s:  n_i = floor(n eta^-i)  configurations,
 *                        r_i = floor(R eta^(i - s)) epochs each.
 * The paper's r = R eta^-s is fractional when R is not a power of eta; here
 * r_i is rounded down to a whole epoch.  Since eta^s <= R, r_i >= 1 always
 * (the minimum of 1 epoch never has to be imposed), r_s = R, and r_i grows
 * strictly with i.  For R = 81, eta = 3 the plan is exactly the paper's
 * Table 1.  r_i is the total resource a configuration has been trained for
 * after round i: on MOP a promoted model resumes from its checkpoint and
 * trains r_{i+1} - r_i more epochs.
 *
 * The driver (mop_hb) runs every bracket of the plan as successive halving:
 * it hands out NEW trials for a bracket's round 0; when every trial of a
 * round has reported, it ranks them (mop_rank_cmp: higher score first, NaN
 * last, ties by smaller id) and promotes the top n_{i+1} -- never a NaN, so a
 * round may promote fewer -- to r_{i+1} (CONTINUE), and stops the rest
 * (STOP).  Trials of the last round are stopped as finished.  Brackets run
 * concurrently: when no action is available in the brackets already begun
 * (all waiting at a rung barrier), the next bracket (s_max first, then
 * s_max - 1, ...) is begun, so idle workers always get work while there is
 * any; max_brackets bounds how many may be in progress at once.  Called with
 * one worker, reporting every result before asking again, the driver is
 * exactly sequential Hyperband.
 *
 * The driver's state depends only on the sequence of calls made to it, so an
 * interrupted run resumes by replaying its recorded next/report calls.
 */
#ifndef MOP_HYPERBAND_H
#define MOP_HYPERBAND_H

#include <stdint.h>

#include "mop_search.h"

/* One row of the plan. */
typedef struct mop_hb_round
{
	int32_t		bracket;		/* s */
	int32_t		round;			/* i, 0 .. s */
	int32_t		configs;		/* n_i */
	int32_t		resource;		/* r_i, epochs */
} mop_hb_round;

/* s_max = floor(log_eta R), or a negative MOP_SEARCH_E* code. */
int32_t		mop_hyperband_smax(int32_t R, int32_t eta);

/*
 * The plan, brackets s_max..0 and rounds 0..s in order.  Writes at most cap
 * rows to out (out may be NULL when cap is 0) and returns the number of rows
 * of the whole plan, (s_max+1)(s_max+2)/2, so a first call with cap 0 sizes
 * the array; or MOP_SEARCH_EINVAL when R < 1 or eta < 2.
 */
int32_t		mop_hyperband_plan(int32_t R, int32_t eta, mop_hb_round *out, int32_t cap);

/*
 * Total epochs the plan trains: with resume (MOP) a promoted configuration
 * only trains r_{i+1} - r_i more; without, every round retrains from scratch.
 * Negative on bad arguments.
 */
int64_t		mop_hyperband_cost(int32_t R, int32_t eta, int resume);

typedef struct mop_hb mop_hb;

/* A driver for the plan of (R, eta); max_brackets 0: no bound.  NULL on bad arguments. */
mop_hb	   *mop_hb_new(int32_t R, int32_t eta, int32_t max_brackets);

/*
 * Run only the plan's first n brackets (s_max, s_max - 1, ...; a cap on the
 * configurations tried); before the first call of mop_hb_next.  0 or an
 * error (n outside 1 .. s_max + 1, or a bracket already begun).
 */
int			mop_hb_limit_brackets(mop_hb *hb, int32_t n);
void		mop_hb_free(mop_hb *hb);

/*
 * The next action for an idle worker: MOP_POLL_ACTION (*a filled: NEW trial
 * with its bracket and first resource, CONTINUE a trial to a resource, STOP
 * a trial), MOP_POLL_WAIT (every begun bracket waits for results), or
 * MOP_POLL_DONE.  Trial ids are 0, 1, 2, ... in order of their NEW actions.
 */
mop_poll	mop_hb_next(mop_hb *hb, mop_action *a);

/*
 * Trial `trial` reached `resource` epochs with `score` (higher is better,
 * NaN: failed).  A result below the trial's current target is an
 * intermediate one and is ignored unless it is NaN (a failure counts at once).
 * Returns 0 when the result was used, 1 when ignored (intermediate, repeated,
 * or the trial is not running), MOP_SEARCH_ESTATE for an unknown trial.
 */
int			mop_hb_report(mop_hb *hb, int32_t trial, int32_t resource, double score);

/* A trial's state. */
typedef struct mop_hb_trial_info
{
	int32_t		bracket;
	int32_t		round;			/* current (or last) round */
	int32_t		target;			/* resource of that round */
	int32_t		resource;		/* resource of its latest used result (0: none) */
	mop_trial_state state;
	double		score;			/* latest used result (NaN: none or failed) */
} mop_hb_trial_info;

int32_t		mop_hb_n_trials(const mop_hb *hb);
int			mop_hb_trial(const mop_hb *hb, int32_t trial, mop_hb_trial_info *info);

/*
 * The best trial so far: the largest resource reached first, then rank
 * order; NaN never.  Returns 0 and fills the outputs, or 1 if there is none.
 */
int			mop_hb_best(const mop_hb *hb, int32_t *trial, double *score, int32_t *resource);

#endif							/* MOP_HYPERBAND_H */
