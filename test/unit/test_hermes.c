/*
 * test_hermes.c -- convergence-aware priorities: the window slope on
 * scripted histories, relative mode, the new-model quantum, diverged and
 * rising losses, and the order a MOP_PICK_PRIORITY scheduler then follows.
 */
#include "harness.h"
#include "../../src/search/mop_hermes.h"

static const double loss5[5] = {1.0, 0.8, 0.5, 0.45, 0.44};
static const double sec5[5] = {10, 20, 30, 40, 50};

TEST(hermes_window_slope)
{
	mop_hermes_opts o;

	mop_hermes_default_opts(&o);
	/* window 3: (0.8 - 0.44) / (50 - 20) */
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, &o), 0.36 / 30, 1e-12));
	CHECK(close_enough(mop_hermes_priority(loss5, sec5, 5, NULL), 0.36 / 30, 1e-12));
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

	mop_hermes_default_opts(&o);
	CHECK(mop_hermes_priority(loss5, sec5, 0, &o) == 1e30);
	CHECK(mop_hermes_priority(loss5, sec5, 1, &o) == 1e30);
	CHECK(mop_hermes_priority(loss5, sec5, 2, &o) < 1e30);
	o.min_seconds = 25;			/* a quantum of 25 s of training */
	CHECK(mop_hermes_priority(loss5, sec5, 2, &o) == 1e30);
	CHECK(mop_hermes_priority(loss5, sec5, 3, &o) < 1e30);
	o.min_seconds = 0;
	o.min_evals = 4;
	CHECK(mop_hermes_priority(loss5, sec5, 3, &o) == 1e30);
	mop_hermes_default_opts(&o);
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
	double		fast[3] = {1.0, 0.6, 0.3},
				slow[3] = {1.0, 0.95, 0.9},
				diverged[3] = {1.0, 0.9, NAN},
				t[3] = {1, 2, 3};

	for (int m = 0; m < 3; m++)
		CHECK(mop_sched_add_model(s, 10) == m);
	mop_hermes_apply(s, 0, slow, t, 3, NULL);
	mop_hermes_apply(s, 1, fast, t, 3, NULL);
	mop_hermes_apply(s, 2, fast, t, 1, NULL);	/* new: its quantum first */
	CHECK(mop_sched_next(s, 0, &task) == MOP_ASSIGNED && task.model == 2);
	mop_sched_complete(s, &task, 1.0);
	mop_hermes_apply(s, 2, diverged, t, 3, NULL);
	/* then the fastest-converging model, preempting the slow one */
	CHECK(mop_sched_next(s, 0, &task) == MOP_ASSIGNED && task.model == 1);
	mop_sched_complete(s, &task, 1.0);
	/* its loss flattens below the slow one's rate: the slow one gets the worker */
	{
		double		flat[4] = {1.0, 0.6, 0.3, 0.3};
		double		t4[4] = {1, 2, 3, 40};

		mop_hermes_apply(s, 1, flat, t4, 4, NULL);
	}
	CHECK(mop_sched_next(s, 0, &task) == MOP_ASSIGNED && task.model == 0);
	mop_sched_free(s);
}
