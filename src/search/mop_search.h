/*
 * mop_search.h -- what the search-algorithm cores (Hyperband, ASHA, median
 * stopping, PBT, TPE, convergence priority) have in common, pure C.
 *
 * The cores never train anything.  They are state machines driven by the
 * caller -- the PostgreSQL coordinator, a simulator, a unit test: the caller
 * asks "what next?" whenever a worker is idle and reports "trial t reached
 * resource r with score x" whenever a rung, interval or epoch is done.  Every
 * answer is an action (start a trial, continue one to a larger resource, stop
 * one) that carries its decision record: why, and the numbers behind it
 * (rung, rank, rung size, how many were kept, the cutoff score), ready to be
 * written to a catalog table.
 *
 * Conventions shared by every core:
 *   - scores are oriented so that higher is better (pass -loss for a loss);
 *   - a NaN score is a failed or diverged trial: it ranks below every number
 *     and is never promoted, exploited or returned as a winner;
 *   - rankings are total and deterministic: higher score first, NaN last,
 *     equal scores by smaller trial id first;
 *   - randomness comes only from the core's own seeded splitmix64 generator
 *     (mop_rng below), never from rand(), so a run is reproducible from its
 *     seed and the order of the calls made to it;
 *   - errors are negative MOP_SEARCH_E* codes, never aborts.
 */
#ifndef MOP_SEARCH_H
#define MOP_SEARCH_H

#include <math.h>
#include <stdint.h>

#include "../common/splitmix64.h"

#define MOP_SEARCH_OK		0
#define MOP_SEARCH_EINVAL	(-1)	/* bad argument */
#define MOP_SEARCH_ENOMEM	(-2)	/* out of memory */
#define MOP_SEARCH_ERANGE	(-3)	/* arithmetic would overflow */
#define MOP_SEARCH_ESTATE	(-4)	/* call does not fit the state (unknown trial...) */

/* What the caller is told to do with a trial. */
typedef enum mop_act_kind
{
	MOP_ACT_NEW = 0,			/* create trial `trial`, train it to `resource` */
	MOP_ACT_CONTINUE = 1,		/* resume trial `trial`, train it on to `resource` */
	MOP_ACT_STOP = 2			/* trial `trial` will never train again */
} mop_act_kind;

/* Why a decision was taken. */
typedef enum mop_why
{
	MOP_WHY_START = 0,			/* a new configuration */
	MOP_WHY_PROMOTE = 1,		/* ranked within the top of its rung */
	MOP_WHY_CUT = 2,			/* ranked below the cutoff of its rung */
	MOP_WHY_FAILED = 3,			/* NaN score: failed or diverged */
	MOP_WHY_FINISHED = 4,		/* reached the maximum resource */
	MOP_WHY_MEDIAN = 5,			/* worse than the median of the others */
	MOP_WHY_EXPLOIT = 6,		/* PBT: copied a better member and explored */
	MOP_WHY_PATIENCE = 7,		/* no improvement for its configuration's patience */
	MOP_WHY_TIME_BUDGET = 8		/* the run's time budget is spent */
} mop_why;

/* A decision and the numbers behind it (fields not relevant are -1 / NaN). */
typedef struct mop_decision
{
	mop_why		why;
	int32_t		trial;
	int32_t		bracket;		/* Hyperband bracket s; -1 elsewhere */
	int32_t		rung;			/* rung (round) the trial was ranked in */
	int32_t		rank;			/* 1-based rank within the rung */
	int32_t		rung_size;		/* trials ranked in the rung */
	int32_t		keep;			/* how many the rung promotes */
	double		score;			/* the trial's score at the rung */
	double		cutoff;			/* score of the last one kept (NaN: none) */
	int32_t		from_resource;	/* resource reached */
	int32_t		to_resource;	/* resource it goes on to (-1: none) */
	char		reason[160];	/* the same, in words */
} mop_decision;

/* An action for the caller, with its decision. */
typedef struct mop_action
{
	mop_act_kind kind;
	int32_t		trial;
	int32_t		bracket;		/* -1 outside Hyperband */
	int32_t		resource;		/* NEW/CONTINUE: train until this resource */
	mop_decision d;
} mop_action;

/* Where a trial stands in a driver (Hyperband, ASHA). */
typedef enum mop_trial_state
{
	MOP_TRIAL_RUNNING = 0,		/* told to train to a resource, no result yet */
	MOP_TRIAL_PAUSED = 1,		/* result in; waiting for its rung's decision */
	MOP_TRIAL_STOPPED = 2,		/* cut: ranked below a cutoff */
	MOP_TRIAL_FINISHED = 3,		/* trained to the maximum resource */
	MOP_TRIAL_FAILED = 4		/* NaN score */
} mop_trial_state;

/* Answer of a core's "next" call (mirrors mop_next of mop_sched.h). */
typedef enum mop_poll
{
	MOP_POLL_ACTION = 0,		/* *action filled */
	MOP_POLL_WAIT = 1,			/* nothing now; ask again after a report */
	MOP_POLL_DONE = 2			/* the search is over */
} mop_poll;

const char *mop_why_name(mop_why why);
const char *mop_act_name(mop_act_kind kind);

/*
 * Deterministic ranking: negative if (a, ia) ranks before (b, ib), i.e.
 * a higher score, NaN last, ties by smaller id.
 */
int			mop_rank_cmp(double a, int32_t ia, double b, int32_t ib);

/* Sort trial ids by their scores (score[i] belongs to ids[i]) in rank order. */
void		mop_rank_sort(int32_t *ids, double *score, int32_t n);

/* A FIFO of actions (internal to the cores). */
typedef struct mop_actq
{
	mop_action *a;
	int32_t		head,
				n,
				cap;
} mop_actq;

int			mop_actq_push(mop_actq *q, const mop_action *a);
int			mop_actq_pop(mop_actq *q, mop_action *a);	/* 1 if one was popped */
void		mop_actq_free(mop_actq *q);

/* Fill a decision with "not relevant" values. */
void		mop_decision_init(mop_decision *d, mop_why why, int32_t trial);

/* ---- the private generator: src/common/splitmix64.h, one hash per step ---- */

typedef struct mop_rng
{
	uint64_t	state;
} mop_rng;

static inline uint64_t
mop_rng_mix(uint64_t x)
{
	return mop_splitmix64_hash(x);
}

static inline void
mop_rng_seed(mop_rng *r, uint64_t seed)
{
	r->state = mop_rng_mix(seed ^ UINT64_C(0x5EA2C4));
}

static inline uint64_t
mop_rng_next(mop_rng *r)
{
	r->state += MOP_SPLITMIX64_GAMMA;
	return mop_rng_mix(r->state);
}

/* Uniform double in [0, 1), 53 bits. */
static inline double
mop_rng_uniform(mop_rng *r)
{
	return (double) (mop_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n >= 1. */
static inline uint64_t
mop_rng_below(mop_rng *r, uint64_t n)
{
	return (uint64_t) (((unsigned __int128) mop_rng_next(r) * n) >> 64);
}

/* Standard normal (Box-Muller, one value per call: no hidden cache). */
static inline double
mop_rng_normal(mop_rng *r)
{
	double		u = 1.0 - mop_rng_uniform(r);	/* (0, 1] */
	double		v = mop_rng_uniform(r);

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#endif							/* MOP_SEARCH_H */
