/*
 * mop_pbt.h -- population based training decisions (Jaderberg et al. 2017),
 * pure C, seeded and deterministic.
 *
 * A population of n members trains in intervals (a number of epochs or
 * sub-epochs the caller chooses).  After an interval a member is "ready"
 * with its current score (higher is better, NaN: diverged).  The members
 * with a score are ranked (higher first, NaN last, ties by smaller member);
 * with nq = ceil(n_ranked * quantile), at most floor(n_ranked / 2):
 *   - a member ranked in the bottom nq EXPLOITS a member drawn uniformly
 *     from the top nq that have a finite score: the caller copies the
 *     parent's weights *and* optimizer state into it (PBT itself copies
 *     nothing);
 *   - and EXPLORES: starting from the parent's hyperparameters, each active
 *     parameter is, with probability resample_p, resampled from its prior;
 *     otherwise a FLOAT/LOGFLOAT/INT/LOGINT is multiplied by 0.8 or 1.2
 *     (each with probability 1/2; INT rounded) and clipped to its bounds,
 *     and a CHOICE moves to the neighbouring choice below or above (clipped),
 *     as Ray Tune does for lists.  A parameter that becomes active through a
 *     changed condition is sampled from its prior; one that becomes
 *     inactive becomes NaN.
 * Two ways to drive it: mop_pbt_step ranks the whole population once per
 * interval (synchronous generations), mop_pbt_ready decides for one member
 * against the others' latest scores (asynchronous, as on MOP where members
 * finish intervals at different times).
 *
 * Lineage: every exploit is recorded (member, parent, new values, the
 * numbers behind it).  A member's "age" is the number of intervals its
 * weights have been trained; an exploiting member takes its parent's age.
 * mop_pbt_schedule walks a member's lineage back to the start and returns
 * the hyperparameter schedule its final weights were trained with.
 */
#ifndef MOP_PBT_H
#define MOP_PBT_H

#include <stdint.h>

#include "mop_params.h"

#define MOP_PBT_MAX_PARAMS 32

/* What exploration did to one parameter. */
typedef enum mop_pbt_how
{
	MOP_PBT_KEPT = 0,			/* copied unchanged (clipped at a bound, or inactive) */
	MOP_PBT_DOWN = 1,			/* x 0.8, or the choice below */
	MOP_PBT_UP = 2,				/* x 1.2, or the choice above */
	MOP_PBT_RESAMPLED = 3		/* drawn from the prior */
} mop_pbt_how;

typedef struct mop_pbt_opts
{
	double		quantile;		/* (0, 0.5]; default 0.25 */
	double		resample_p;		/* [0, 1]; default 0.25 */
	double		down,
				up;				/* perturbation factors; default 0.8, 1.2 */
} mop_pbt_opts;

/* An exploit-and-explore decision. */
typedef struct mop_pbt_decision
{
	int32_t		seq;			/* 0, 1, 2, ... over the whole run */
	int32_t		member;
	int32_t		parent;			/* whose weights and optimizer state to copy */
	int32_t		age;			/* intervals trained by the copied weights */
	int32_t		rank;			/* member's 1-based rank */
	int32_t		n_ranked;
	int32_t		n_quantile;		/* nq */
	double		score;			/* member's score */
	double		parent_score;
	double		old_values[MOP_PBT_MAX_PARAMS];	/* member's before */
	double		values[MOP_PBT_MAX_PARAMS];	/* member's from now on */
	uint8_t		how[MOP_PBT_MAX_PARAMS];	/* mop_pbt_how per parameter */
	char		reason[160];
} mop_pbt_decision;

typedef struct mop_pbt mop_pbt;

/*
 * New population: a valid space of at most MOP_PBT_MAX_PARAMS parameters,
 * n_members >= 2, opts NULL for defaults.  Initial values are drawn from the
 * prior (mop_pbt_set overrides them).  NULL on bad arguments.
 */
mop_pbt    *mop_pbt_new(const mop_param *space, int32_t n_params, int32_t n_members,
						const mop_pbt_opts *opts, uint64_t seed);
void		mop_pbt_free(mop_pbt *p);

/* A member's current hyperparameters (n_params doubles), or NULL. */
const double *mop_pbt_values(const mop_pbt *p, int32_t member);

/* Set a member's hyperparameters before training starts; 0 or an error. */
int			mop_pbt_set(mop_pbt *p, int32_t member, const double *values);

/*
 * Synchronous interval: every member trained one more interval and scored
 * scores[member].  Writes at most cap decisions (bottom members, in rank
 * order from the top) and returns how many members exploited, or an error.
 */
int32_t		mop_pbt_step(mop_pbt *p, const double *scores, mop_pbt_decision *out,
						 int32_t cap);

/*
 * Asynchronous: `member` trained one more interval and scored `score`.
 * Returns 1 when it exploits (*out filled), 0 when it continues as it is,
 * or an error.
 */
int			mop_pbt_ready(mop_pbt *p, int32_t member, double score, mop_pbt_decision *out);

/* All decisions so far, oldest first. */
const mop_pbt_decision *mop_pbt_history(const mop_pbt *p, int32_t *n);

/* A member's age: intervals its current weights have been trained. */
int32_t		mop_pbt_age(const mop_pbt *p, int32_t member);

/* One piece of a schedule: from age `from` on, trained with `values`. */
typedef struct mop_pbt_segment
{
	int32_t		member;			/* the member that trained these intervals */
	int32_t		from;			/* age at which these values took over */
	double		values[MOP_PBT_MAX_PARAMS];
} mop_pbt_segment;

/*
 * The hyperparameter schedule of `member`'s current weights, oldest
 * segment first (the first starts at age 0).  Writes at most cap segments,
 * returns the total number, or an error.
 */
int32_t		mop_pbt_schedule(const mop_pbt *p, int32_t member, mop_pbt_segment *out,
							 int32_t cap);

#endif							/* MOP_PBT_H */
