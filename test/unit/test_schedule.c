/*
 * test_schedule.c -- learning-rate schedules: nn_lr_at against PyTorch's
 * rates (lr_schedule_expected.h, written by test/xcheck/lr_schedule_check.py),
 * the optimizer training with the scheduled rate of the model's epoch
 * counter, a version 1 blob (no schedule) still loading, and
 * nn_blob_set_epochs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"
#include "lr_schedule_expected.h"

#ifndef DATA_DIR
#define DATA_DIR "test/unit/data"
#endif

static void
small_spec(nn_spec *s)
{
	nn_spec_init(s);
	s->in_c = 4;
	add_dense(s, 5, NN_ACT_RELU);
	add_dense(s, 3, NN_ACT_NONE);
	s->optimizer = NN_OPT_SGD;
	s->batch_size = 4;
	s->seed = 11;
}

TEST(lr_schedule_matches_pytorch)
{
	int			n = (int) (sizeof(lr_xcheck_cases) / sizeof(lr_xcheck_cases[0]));

	for (int i = 0; i < n; i++)
	{
		const lr_xcheck_case *c = &lr_xcheck_cases[i];
		nn_spec		s;
		nn_error	err;

		small_spec(&s);
		s.lr = c->lr;
		s.lr_schedule = c->kind;
		s.lr_step_size = c->step_size;
		s.lr_gamma = c->gamma;
		s.lr_min = c->min_lr;
		s.lr_epochs = c->epochs;
		s.lr_warmup = c->warmup;
		CHECK_OK(nn_spec_validate(&s, &err));
		for (int e = 0; e < LR_XCHECK_EPOCHS; e++)
		{
			double		got = nn_lr_at(&s, e),
						want = c->rate[e];

			if (!(fabs(got - want) <= 1e-9 * fabs(want) + 1e-18))
			{
				fprintf(stderr, "  %s epoch %d: engine %.17g, PyTorch %.17g\n",
						c->name, e, got, want);
				CHECK(0);
			}
		}
	}
}

TEST(lr_schedule_validation)
{
	nn_spec		s;
	nn_error	err;

	small_spec(&s);
	s.lr_schedule = 7;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
	s.lr_schedule = NN_SCHED_STEP;
	s.lr_gamma = 0.5f;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);	/* step_size 0 */
	s.lr_step_size = 2;
	CHECK_OK(nn_spec_validate(&s, &err));
	s.lr_gamma = 0;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
	s.lr_schedule = NN_SCHED_COSINE;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);	/* no epochs */
	s.lr_epochs = 5;
	CHECK_OK(nn_spec_validate(&s, &err));
	s.lr_min = -1;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
	s.lr_min = 0;
	s.lr_warmup = -1;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
}

/* Training at epoch counter 1 of step(1, 0.5) from 0.1 equals constant 0.05. */
TEST(lr_schedule_drives_training)
{
	nn_spec		a,
				b;
	nn_model   *ma,
			   *mb,
			   *mc;
	nn_error	err;
	float		x[16 * 4],
				y[16];

	fill_uniform(x, 16 * 4, 3, -1, 1);
	for (int i = 0; i < 16; i++)
		y[i] = (float) (i % 3);
	small_spec(&a);
	a.lr = 0.05f;
	a.momentum = 0.9f;
	b = a;
	b.lr = 0.1f;
	b.lr_schedule = NN_SCHED_STEP;
	b.lr_step_size = 1;
	b.lr_gamma = 0.5f;
	CHECK_OK(nn_model_create(&a, &ma, &err));
	CHECK_OK(nn_model_create(&b, &mb, &err));
	CHECK_OK(nn_model_create(&b, &mc, &err));
	nn_model_set_epochs(mb, 1);
	CHECK_OK(nn_train(ma, x, y, 16, 0, NULL, &err));
	CHECK_OK(nn_train(mb, x, y, 16, 0, NULL, &err));
	CHECK_OK(nn_train(mc, x, y, 16, 0, NULL, &err));	/* epoch 0: 0.1 */
	CHECK(memcmp(ma->params, mb->params, sizeof(float) * ma->plan.n_params) == 0);
	CHECK(memcmp(ma->params, mc->params, sizeof(float) * ma->plan.n_params) != 0);
	/* PBT's explore: a new rate through set_hyper keeps the schedule's shape */
	b.lr = 0.2f;
	CHECK_OK(nn_model_set_hyper(mb, &b, &err));
	CHECK(fabs(nn_lr_at(nn_model_spec(mb), 1) - 0.1) < 1e-8);
	nn_model_free(ma);
	nn_model_free(mb);
	nn_model_free(mc);
}

/* A blob written by format version 1 (before schedules) loads as "none". */
TEST(blob_version_1_still_loads)
{
	FILE	   *f = fopen(DATA_DIR "/blob_v1.bin", "rb");
	unsigned char buf[4096],
			   *again;
	size_t		len,
				len2;
	uint32_t	v;
	nn_model   *m,
			   *m2;
	nn_error	err;
	nn_counters c;
	nn_spec		s;

	CHECK(f != NULL);
	if (!f)
		return;
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	memcpy(&v, buf + 8, 4);
	CHECK(v == 1);
	CHECK_OK(nn_blob_spec(buf, len, &s, &err));
	CHECK(s.lr_schedule == NN_SCHED_NONE && s.lr_warmup == 0 && s.lr == 0.05f);
	CHECK_OK(nn_model_deserialize(buf, len, &m, &err));
	nn_model_counters(m, &c);
	CHECK(c.steps == 3 && c.epochs == 3 && c.rows_trained == 12);
	CHECK(nn_lr_at(nn_model_spec(m), 3) == (double) 0.05f);
	/* written again, it is a current-version blob of the same model */
	len2 = nn_model_blob_size(m);
	again = malloc(len2);
	CHECK_OK(nn_model_serialize(m, again, len2, &len2, &err));
	memcpy(&v, again + 8, 4);
	/* the schedule, the class weights' count, momentum and eps per layer, the running statistics' count */
	CHECK(v == NN_BLOB_VERSION && len2 == len + 24 + 4 + 8 * (size_t) m->spec.n_layers + 8);
	CHECK_OK(nn_model_deserialize(again, len2, &m2, &err));
	CHECK(memcmp(m->params, m2->params, sizeof(float) * m->plan.n_params) == 0);
	CHECK(memcmp(m->opt, m2->opt, sizeof(float) * m->plan.n_opt) == 0);
	nn_model_free(m);
	nn_model_free(m2);
	free(again);
}

TEST(blob_set_epochs)
{
	nn_spec		s;
	nn_model   *m,
			   *m2;
	nn_error	err;
	nn_counters c;
	size_t		len;
	unsigned char *b;

	small_spec(&s);
	s.lr_schedule = NN_SCHED_EXPONENTIAL;
	s.lr_gamma = 0.9f;
	CHECK_OK(nn_model_create(&s, &m, &err));
	len = nn_model_blob_size(m);
	b = malloc(len);
	CHECK_OK(nn_model_serialize(m, b, len, &len, &err));
	CHECK_OK(nn_blob_set_epochs(b, len, 7, &err));
	CHECK_OK(nn_model_deserialize(b, len, &m2, &err));
	nn_model_counters(m2, &c);
	CHECK(c.epochs == 7 && c.steps == 0);
	CHECK(nn_model_spec(m2)->lr_schedule == NN_SCHED_EXPONENTIAL);
	CHECK(nn_blob_set_epochs(b, len, -1, &err) == NN_ERR_INVALID);
	{
		int64_t		e = -1;

		CHECK_OK(nn_blob_epochs(b, len, &e, &err));
		CHECK(e == 7);
		CHECK(nn_blob_epochs(b, 40, &e, &err) != NN_OK);	/* truncated: refused, no read past it */
		/*
		 * every truncation with a header that agrees (the checksum is not
		 * computed): refused unless the counter is inside, and never read
		 * past the end (the copy is exactly cut bytes, for the sanitizers)
		 */
		for (size_t cut = 33; cut < len && cut < 400; cut++)
		{
			unsigned char *t = malloc(cut);
			uint64_t	plen = cut - 32;
			nn_status	st;

			memcpy(t, b, cut);
			memcpy(t + 16, &plen, 8);
			e = -1;
			st = nn_blob_epochs(t, cut, &e, &err);
			CHECK(st != NN_OK || e == 7);
			free(t);
		}
	}
	b[len - 12] ^= 1;			/* the lowest bit of the last optimizer value */
	CHECK(nn_blob_set_epochs(b, len, 2, &err) == NN_ERR_CHECKSUM);
	nn_model_free(m2);
	/* the checksum is what the verified decoding leaves out, and only that */
	CHECK(nn_model_deserialize(b, len, &m2, &err) == NN_ERR_CHECKSUM);
	CHECK_OK(nn_model_deserialize_verified(b, len, &m2, &err));
	nn_model_free(m2);
	CHECK(nn_model_deserialize_verified(b, len - 1, &m2, &err) != NN_OK);
	b[8] ^= 0x7f;				/* the format version */
	CHECK(nn_model_deserialize_verified(b, len, &m2, &err) == NN_ERR_VERSION);
	nn_model_free(m);
	free(b);
}
