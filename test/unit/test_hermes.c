/*
 * test_hermes.c -- convergence-aware priorities: the window rate on
 * scripted histories (Hermes' rule, relative mode), the projected-loss rule
 * that is the default, the new-model quantum, diverged and rising losses,
 * and the order a MOP_PICK_PRIORITY scheduler then follows.
 */
#include "harness.h"
#include "../../src/search/mop_hermes.h"

static const double loss5[5] = {1.0, 0.8, 0.5, 0.45, 0.44};
static const double sec5[5] = {10, 20, 30, 40, 50};

/* Hermes' published rule: the rate alone. */
static void
rate_opts(mop_hermes_opts *o)
{
	mop_hermes_default_opts(o);
	o->rule = MOP_HERMES_RATE;
}

TEST(hermes_window_slope)
{
	mop_hermes_opts o;

	rate_opts(&o);
	/* window 3: (0.8 - 0.44) / (50 - 20) */
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, &o), 0.36 / 30, 1e-12));
	CHECK(close_enough(mop_hermes_rate(loss5, sec5, 5, 3, 0), 0.36 / 30, 1e-12));
	o.window = 1;
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, &o), 0.01 / 10, 1e-12));
	o.window = 10;				/* longer than the history: all of it */
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, &o), 0.56 / 40, 1e-12));
	o.window = 3;
	o.relative = 1;
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, &o), 0.36 / 0.8 / 30, 1e-12));
	/* a model twice as slow per epoch gets half the priority */
	{
		double		slow[5];

		for (int i = 0; i < 5; i++)
			slow[i] = 2 * sec5[i];
		o.relative = 0;
		CHECK(close_enough(mop_hermes_priority(loss5, slow, 5, &o), 0.36 / 60, 1e-12));
	}
}

TEST(hermes_new_models_and_divergence)
{
	mop_hermes_opts o;
	double		rising[3] = {0.5, 0.6, 0.7},
				nan_last[3] = {0.5, 0.4, NAN},
				nan_first[3] = {NAN, 0.4, 0.3},
				flat_t[3] = {5, 5, 5};

	rate_opts(&o);
	CHECK(mop_hermes_priority(loss5, sec5, 0, &o) == 1e30);
	CHECK(mop_hermes_priority(loss5, sec5, 1, &o) == 1e30);
	CHECK(mop_hermes_priority(loss5, sec5, 2, &o) < 1e30);
	o.min_seconds = 25;			/* a quantum of 25 s of training */
	CHECK(mop_hermes_priority(loss5, sec5, 2, &o) == 1e30);
	CHECK(mop_hermes_priority(loss5, sec5, 3, &o) < 1e30);
	o.min_seconds = 0;
	o.min_evals = 4;
	CHECK(mop_hermes_priority(loss5, sec5, 3, &o) == 1e30);
	rate_opts(&o);
	CHECK(mop_hermes_priority(rising, sec5, 3, &o) < 0);
	CHECK(mop_hermes_priority(nan_last, sec5, 3, &o) == -INFINITY);
	CHECK(mop_hermes_priority(nan_last, sec5, 1, &o) == 1e30);	/* fine so far */
	CHECK(mop_hermes_priority(nan_first, sec5, 3, &o) == -INFINITY);	/* in the window */
	o.window = 1;
	CHECK(close_enough(mop_hermes_priority(nan_first, sec5, 3, &o), 0.01, 1e-12));
	CHECK(mop_hermes_priority(loss5, flat_t, 3, &o) == 0.0);	/* no time passed */
}

TEST(hermes_drives_priority_scheduler)
{
	mop_sched  *s = mop_sched_new(1, 1, 1, 0, MOP_PICK_PRIORITY);
	mop_task	task;
	mop_hermes_opts o;
	double		fast[3] = {1.0, 0.6, 0.3},
				slow[3] = {1.0, 0.95, 0.9},
				diverged[3] = {1.0, 0.9, NAN},
				t[3] = {1, 2, 3};

	rate_opts(&o);
	for (int m = 0; m < 3; m++)
		CHECK(mop_sched_add_model(s, 10) == m);
	mop_hermes_apply(s, 0, slow, t, 3, &o);
	mop_hermes_apply(s, 1, fast, t, 3, &o);
	mop_hermes_apply(s, 2, fast, t, 1, &o);	/* new: its quantum first */
	CHECK(mop_sched_next(s, 0, &task) == MOP_ASSIGNED && task.model == 2);
	mop_sched_complete(s, &task, 1.0);
	mop_hermes_apply(s, 2, diverged, t, 3, &o);
	/* then the fastest-converging model, preempting the slow one */
	CHECK(mop_sched_next(s, 0, &task) == MOP_ASSIGNED && task.model == 1);
	mop_sched_complete(s, &task, 1.0);
	/* its loss flattens below the slow one's rate: the slow one gets the worker */
	{
		double		flat[4] = {1.0, 0.6, 0.3, 0.3};
		double		t4[4] = {1, 2, 3, 40};

		mop_hermes_apply(s, 1, flat, t4, 4, &o);
	}
	CHECK(mop_sched_next(s, 0, &task) == MOP_ASSIGNED && task.model == 0);
	mop_sched_free(s);
}

TEST(hermes_projected_rule)
{
	mop_hermes_opts o;
	double		one[1] = {0.7},
				t1[1] = {5};

	mop_hermes_default_opts(&o);
	CHECK(o.rule == MOP_HERMES_PROJECTED && o.min_evals == 1);
	/* no horizon: the level alone, whatever the rate */
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, &o), -0.44, 1e-12));
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, NULL), -0.44, 1e-12));
	/* a horizon of 10 s at (0.8 - 0.44) / 30 per second */
	o.horizon = 10;
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, &o), -(0.44 - 0.12), 1e-12));
	/* one evaluation: the level (the rate is unknown, taken as 0) */
	CHECK(close_enough(mop_hermes_priority(one, t1, 1, &o), -0.7, 1e-12));
	CHECK(mop_hermes_priority(one, t1, 0, &o) == 1e30);
	/* relative applies to the rate rule only */
	o.relative = 1;
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, &o), -(0.44 - 0.12), 1e-12));
	/* a rising loss is projected to rise */
	{
		double		rising[3] = {0.5, 0.6, 0.7};

		CHECK(close_enough(mop_hermes_priority(rising, sec5, 3, &o), -(0.7 + 0.1), 1e-12));
	}
	/* divergence, anywhere in the window */
	{
		double		nan_last[3] = {0.5, 0.4, NAN},
					nan_first[3] = {NAN, 0.4, 0.3};

		CHECK(mop_hermes_priority(nan_last, sec5, 3, &o) == -INFINITY);
		CHECK(mop_hermes_priority(nan_first, sec5, 3, &o) == -INFINITY);
	}
}

/*
 * The case that made the projected loss the default: a good model that
 * converged in two epochs against a far-too-small learning rate whose large
 * loss keeps falling.  The rate (absolute or relative) prefers the slow
 * model; the projected loss prefers the good one unless the slow one would
 * overtake it within the horizon.
 */
TEST(hermes_projected_prefers_converged_good_model)
{
	mop_hermes_opts o;
	double		good[4] = {0.45, 0.36, 0.34, 0.335},
				tiny_lr[4] = {2.10, 1.80, 1.50, 1.20},
				t[4] = {2, 4, 6, 8};

	mop_hermes_default_opts(&o);
	o.horizon = 2;				/* one epoch */
	CHECK(mop_hermes_priority(good, t, 4, &o) > mop_hermes_priority(tiny_lr, t, 4, &o));
	o.rule = MOP_HERMES_RATE;
	CHECK(mop_hermes_priority(good, t, 4, &o) < mop_hermes_priority(tiny_lr, t, 4, &o));
	o.relative = 1;
	CHECK(mop_hermes_priority(good, t, 4, &o) < mop_hermes_priority(tiny_lr, t, 4, &o));
	/* of two models at the same loss, the one falling faster comes first */
	{
		double		steep[3] = {0.9, 0.6, 0.4},
					flat[3] = {0.45, 0.42, 0.4};

		mop_hermes_default_opts(&o);
		o.horizon = 2;
		CHECK(mop_hermes_priority(steep, t, 3, &o) > mop_hermes_priority(flat, t, 3, &o));
		/* and a model twice as slow per epoch gains half as much */
		{
			double		t_slow[3] = {4, 8, 12};

			CHECK(close_enough(mop_hermes_priority(steep, t_slow, 3, &o),
							   -(0.4 - 0.5 / 8 * 2), 1e-12));
		}
	}
	/* in the scheduler: the good model's sub-epochs go first */
	{
		mop_sched  *s = mop_sched_new(1, 1, 1, 0, MOP_PICK_PRIORITY);
		mop_task	task;

		mop_hermes_default_opts(&o);
		o.horizon = 2;
		CHECK(mop_sched_add_model(s, 10) == 0);
		CHECK(mop_sched_add_model(s, 10) == 1);
		mop_hermes_apply(s, 0, tiny_lr, t, 4, &o);
		mop_hermes_apply(s, 1, good, t, 4, &o);
		CHECK(mop_sched_next(s, 0, &task) == MOP_ASSIGNED && task.model == 1);
		mop_sched_free(s);
	}
}

/*
 * Configurations not started yet rank with the best first epoch so far, so
 * the leader keeps training while the rest of the workers try new ones
 * (instead of every configuration getting its first epoch before any model
 * its second), and a started one keeps its quantum.  The caller's protocol
 * of src/pg/coordinator.c, on a 2-worker, 2-partition scheduler: models A
 * and B may train 9 epochs, C, D, E one (as in a Hyperband bracket).
 */
TEST(hermes_fresh_configurations_wait_behind_the_leader)
{
	mop_sched  *s = mop_sched_new(2, 2, 5, 0, MOP_PICK_PRIORITY);
	mop_hermes_opts o;
	mop_task	t0,
				t1;
	int32_t		a,
				b;
	double		la[1] = {0.40},
				lb[1] = {0.60},
				sec[1] = {1.0},
				best;

	mop_hermes_default_opts(&o);
	o.horizon = 1.0;
	CHECK(mop_hermes_fresh_priority(INFINITY, &o) == o.new_priority);
	CHECK(mop_hermes_fresh_priority(0.25, &o) == -0.25);
	for (int m = 0; m < 5; m++)
	{
		CHECK(mop_sched_add_model(s, m < 2 ? 9 : 1) == m);
		mop_sched_set_priority(s, m, mop_hermes_fresh_priority(INFINITY, &o));
	}
	/* all tied: the two with the largest budget start first */
	CHECK(mop_sched_next(s, 0, &t0) == MOP_ASSIGNED && t0.model < 2);
	CHECK(mop_sched_next(s, 1, &t1) == MOP_ASSIGNED && t1.model < 2);
	mop_sched_complete(s, &t0, 1.0);
	mop_sched_complete(s, &t1, 1.0);
	/* a started model finishes its epoch before a new one starts */
	CHECK(mop_sched_next(s, 0, &t0) == MOP_ASSIGNED && t0.model == t1.model);
	CHECK(mop_sched_next(s, 1, &t1) == MOP_ASSIGNED && t1.model != t0.model && t1.model < 2);
	CHECK(mop_sched_complete(s, &t0, 1.0) == 1 && mop_sched_complete(s, &t1, 1.0) == 1);
	/* first evaluations: model a leads (0.40), b is behind (0.60) */
	a = t0.model;
	b = t1.model;
	mop_hermes_apply(s, a, la, sec, 1, &o);
	mop_hermes_apply(s, b, lb, sec, 1, &o);
	best = 0.40;
	for (int m = 2; m < 5; m++)
		if (!mop_sched_started(s, m))
			mop_sched_set_priority(s, m, mop_hermes_fresh_priority(best, &o));
	/* the leader goes on (it wins the tie); the other worker tries a new configuration, not b */
	CHECK(mop_sched_next(s, 0, &t0) == MOP_ASSIGNED && t0.model == a);
	CHECK(mop_sched_next(s, 1, &t1) == MOP_ASSIGNED && t1.model >= 2);
	CHECK(mop_sched_started(s, t1.model));
	mop_sched_set_priority(s, t1.model, o.new_priority);	/* its quantum */
	mop_sched_complete(s, &t0, 1.0);
	mop_sched_complete(s, &t1, 1.0);
	/* the leader's loss keeps falling: projected below the best first epoch */
	{
		double		la2[2] = {0.40, 0.35},
					sec2[2] = {1.0, 2.0};

		mop_hermes_apply(s, a, la2, sec2, 2, &o);
		CHECK(mop_hermes_priority(la2, sec2, 2, &o) > mop_hermes_fresh_priority(best, &o));
	}
	/* the started new configuration completes its epoch (quantum) before anything else */
	CHECK(mop_sched_next(s, 0, &t0) == MOP_ASSIGNED && t0.model == t1.model);
	/* and the leader has the other worker, never b, never an unstarted one */
	CHECK(mop_sched_next(s, 1, &t1) == MOP_ASSIGNED && t1.model == a);
	mop_sched_free(s);
}
