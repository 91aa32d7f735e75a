/*
 * test_gpu_host.c -- the plain-C parts of the GPU library, tested without a
 * GPU or CUDA: the device-memory ledger (gpu/budget.c: reservations within
 * and past the budget, no limit, release, overflow, byte formatting) and
 * the loader (gpu/loader.c) against fake libraries that the Makefile builds
 * from fake/ into FAKE_DIR: another ABI version (also the previous one,
 * whose library ignored learning-rate schedules, class weights, batchnorm
 * and whole-set metrics), a missing entry point, another engine layout, a
 * library that fits, and a handle that is no GPU library at all; and the
 * optimizer's scalars of each step (gpu/step_scalars.c: the scheduled
 * learning rate of the model's epoch, AdamW's decay, Adam's bias
 * corrections) against the CPU optimizer's own step.
 */
#include <dlfcn.h>

#include "harness.h"
#include "util.h"
#include "../../gpu/budget.h"
#include "../../gpu/loader.h"
#include "../../gpu/step_scalars.h"

#ifndef FAKE_DIR
#define FAKE_DIR "fake"
#endif

/* --- the ledger ------------------------------------------------------- */

TEST(gpu_ledger_within_budget)
{
	mop_gpu_ledger l = {0};
	char		msg[256] = "";

	l.budget = 1000;
	CHECK(mop_gpu_ledger_reserve(&l, 400, "weights", msg, sizeof(msg)) == 0);
	CHECK(l.in_use == 400 && l.peak == 400 && l.allocations == 1);
	/* up to the budget exactly is granted */
	CHECK(mop_gpu_ledger_reserve(&l, 600, "rows", msg, sizeof(msg)) == 0);
	CHECK(l.in_use == 1000 && l.peak == 1000 && l.allocations == 2);
	CHECK(msg[0] == '\0');		/* a grant writes no message */
	/* a zero-byte reservation fits even at the budget */
	CHECK(mop_gpu_ledger_reserve(&l, 0, "nothing", msg, sizeof(msg)) == 0);
	CHECK(l.in_use == 1000 && l.allocations == 3);
}

TEST(gpu_ledger_over_budget)
{
	mop_gpu_ledger l = {0};
	char		msg[256] = "";

	l.budget = UINT64_C(64) << 20;	/* 64 MB */
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_C(60) << 20, "rows", msg, sizeof(msg)) == 0);
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_C(8) << 20, "optimizer state", msg, sizeof(msg)) == -1);
	/* nothing changed */
	CHECK(l.in_use == UINT64_C(60) << 20 && l.peak == UINT64_C(60) << 20 && l.allocations == 1);
	CHECK(l.budget == UINT64_C(64) << 20);
	/* the message names what, the need, the budget and what is in use */
	CHECKF(strstr(msg, "optimizer state") != NULL, "%s", msg);
	CHECKF(strstr(msg, "needs 8.0 MB") != NULL, "%s", msg);
	CHECKF(strstr(msg, "over the budget of 64.0 MB") != NULL, "%s", msg);
	CHECKF(strstr(msg, "60.0 MB in use") != NULL, "%s", msg);
	/* what NULL: a generic name */
	CHECK(mop_gpu_ledger_reserve(&l, 5 << 20, NULL, msg, sizeof(msg)) == -1);
	CHECKF(strstr(msg, "an allocation needs 5.0 MB") != NULL, "%s", msg);
	/* no message buffer, or a short one: refused all the same, no overrun */
	CHECK(mop_gpu_ledger_reserve(&l, 5 << 20, "x", NULL, 0) == -1);
	memset(msg, 'z', sizeof(msg));
	CHECK(mop_gpu_ledger_reserve(&l, 5 << 20, "x", msg, 8) == -1);
	CHECK(strlen(msg) == 7 && msg[8] == 'z');
	CHECK(l.in_use == UINT64_C(60) << 20 && l.allocations == 1);
	/* what still fits is granted after a refusal */
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_C(4) << 20, "bias", msg, sizeof(msg)) == 0);
	CHECK(l.in_use == l.budget && l.allocations == 2);
}

TEST(gpu_ledger_no_limit)
{
	mop_gpu_ledger l = {0};
	char		msg[256];

	/* budget 0: no limit */
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_C(1) << 40, "a", msg, sizeof(msg)) == 0);
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_C(1) << 40, "b", msg, sizeof(msg)) == 0);
	CHECK(l.in_use == UINT64_C(2) << 40 && l.peak == UINT64_C(2) << 40 && l.allocations == 2);
	/* a budget set later applies to later reservations only */
	l.budget = UINT64_C(1) << 40;
	CHECK(mop_gpu_ledger_reserve(&l, 1, "c", msg, sizeof(msg)) == -1);
	CHECK(l.in_use == UINT64_C(2) << 40);
	l.budget = 0;
	CHECK(mop_gpu_ledger_reserve(&l, 1, "c", msg, sizeof(msg)) == 0);
}

TEST(gpu_ledger_release)
{
	mop_gpu_ledger l = {0};
	char		msg[256];

	l.budget = 1000;
	CHECK(mop_gpu_ledger_reserve(&l, 300, "a", msg, sizeof(msg)) == 0);
	CHECK(mop_gpu_ledger_reserve(&l, 700, "b", msg, sizeof(msg)) == 0);
	mop_gpu_ledger_release(&l, 300);
	CHECK(l.in_use == 700 && l.allocations == 1 && l.peak == 1000);
	/* the room released is granted again */
	CHECK(mop_gpu_ledger_reserve(&l, 300, "c", msg, sizeof(msg)) == 0);
	CHECK(l.in_use == 1000 && l.allocations == 2);
	mop_gpu_ledger_release(&l, 300);
	mop_gpu_ledger_release(&l, 700);
	CHECK(l.in_use == 0 && l.allocations == 0 && l.peak == 1000);
	/* releasing more than is held clamps at zero */
	CHECK(mop_gpu_ledger_reserve(&l, 10, "d", msg, sizeof(msg)) == 0);
	mop_gpu_ledger_release(&l, 50);
	CHECK(l.in_use == 0 && l.allocations == 0);
	mop_gpu_ledger_release(&l, 1);
	CHECK(l.in_use == 0 && l.allocations == 0);
}

TEST(gpu_ledger_overflow)
{
	mop_gpu_ledger l = {0};
	char		msg[256];

	/* a need past the budget on an empty ledger */
	l.budget = 1000;
	CHECK(mop_gpu_ledger_reserve(&l, 1001, "a", msg, sizeof(msg)) == -1);
	CHECK(l.in_use == 0 && l.allocations == 0);
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_MAX, "a", msg, sizeof(msg)) == -1);
	CHECK(l.in_use == 0 && l.allocations == 0);
	/* in_use + need would wrap to a small number: refused, not wrapped */
	CHECK(mop_gpu_ledger_reserve(&l, 10, "b", msg, sizeof(msg)) == 0);
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_MAX, "c", msg, sizeof(msg)) == -1);
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_MAX - 5, "c", msg, sizeof(msg)) == -1);
	CHECK(l.in_use == 10 && l.allocations == 1);
	/* the largest budget: wrap-around still refused, the exact rest granted */
	l.budget = UINT64_MAX;
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_MAX - 5, "d", msg, sizeof(msg)) == -1);
	CHECK(l.in_use == 10 && l.allocations == 1);
	CHECKF(strstr(msg, "over the budget") != NULL, "%s", msg);
	CHECK(mop_gpu_ledger_reserve(&l, UINT64_MAX - 10, "e", msg, sizeof(msg)) == 0);
	CHECK(l.in_use == UINT64_MAX && l.peak == UINT64_MAX && l.allocations == 2);
	CHECK(mop_gpu_ledger_reserve(&l, 1, "f", msg, sizeof(msg)) == -1);
	CHECK(l.in_use == UINT64_MAX);
}

TEST(gpu_format_bytes)
{
	char		b[64];

	mop_gpu_format_bytes(0, b, sizeof(b));
	CHECKF(strcmp(b, "0 bytes") == 0, "%s", b);
	mop_gpu_format_bytes(1, b, sizeof(b));
	CHECKF(strcmp(b, "1 bytes") == 0, "%s", b);
	mop_gpu_format_bytes(10239, b, sizeof(b));
	CHECKF(strcmp(b, "10239 bytes") == 0, "%s", b);
	mop_gpu_format_bytes(10240, b, sizeof(b));
	CHECKF(strcmp(b, "10.0 kB") == 0, "%s", b);
	mop_gpu_format_bytes(1536 * 100, b, sizeof(b));
	CHECKF(strcmp(b, "150.0 kB") == 0, "%s", b);
	mop_gpu_format_bytes((UINT64_C(1) << 20) - 1, b, sizeof(b));
	CHECKF(strcmp(b, "1024.0 kB") == 0, "%s", b);
	mop_gpu_format_bytes(UINT64_C(1) << 20, b, sizeof(b));
	CHECKF(strcmp(b, "1.0 MB") == 0, "%s", b);
	mop_gpu_format_bytes(UINT64_C(3) << 19, b, sizeof(b));
	CHECKF(strcmp(b, "1.5 MB") == 0, "%s", b);
	mop_gpu_format_bytes(UINT64_C(1) << 30, b, sizeof(b));
	CHECKF(strcmp(b, "1.0 GB") == 0, "%s", b);
	mop_gpu_format_bytes(UINT64_C(80) << 30, b, sizeof(b));
	CHECKF(strcmp(b, "80.0 GB") == 0, "%s", b);
	mop_gpu_format_bytes(UINT64_MAX, b, sizeof(b));
	CHECKF(strcmp(b, "17179869184.0 GB") == 0, "%s", b);
	/* a short buffer is truncated, NUL-terminated, not overrun */
	memset(b, 'z', sizeof(b));
	mop_gpu_format_bytes(UINT64_C(3) << 19, b, 4);
	CHECKF(strcmp(b, "1.5") == 0 && b[4] == 'z', "%s", b);
}

/* --- the loader ------------------------------------------------------- */

/*
 * Open fake library name (from FAKE_DIR), resolve it and return what
 * mop_gpu_api_resolve returned; the message into msg.  -2 if it does not
 * open at all.
 */
static int
resolve_fake(const char *name, mop_gpu_api *api, char *msg, size_t msglen)
{
	char		path[1024];
	void	   *h;
	int			r;

	snprintf(path, sizeof(path), "%s/%s", FAKE_DIR, name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
	{
		fprintf(stderr, "  cannot open %s: %s\n", path, dlerror());
		return -2;
	}
	memset(msg, 0, msglen);
	r = mop_gpu_api_resolve(h, api, msg, msglen);
	/* api's pointers point into h: test what is needed before closing */
	if (r == 0)
		CHECK(api->abi_version() == MOP_GPU_ABI_VERSION);
	dlclose(h);
	return r;
}

TEST(gpu_loader_old_abi)
{
	mop_gpu_api api;
	char		msg[256];
	char		want[64];

	CHECK(resolve_fake("fake_gpu_v1.so", &api, msg, sizeof(msg)) == -1);
	CHECKF(strstr(msg, "GPU ABI 1") != NULL, "%s", msg);
	snprintf(want, sizeof(want), "expects %d", MOP_GPU_ABI_VERSION);
	CHECKF(strstr(msg, want) != NULL, "%s", msg);
}

TEST(gpu_loader_previous_abi)
{
	mop_gpu_api api;
	char		msg[256];

	/* every entry point of today, but from before schedules, class weights, batchnorm */
	CHECK(resolve_fake("fake_gpu_v3.so", &api, msg, sizeof(msg)) == -1);
	CHECKF(strstr(msg, "GPU ABI 3") != NULL, "%s", msg);
	CHECKF(strstr(msg, "install both from one build") != NULL, "%s", msg);
}

TEST(gpu_loader_missing_symbol)
{
	mop_gpu_api api;
	char		msg[256];

	CHECK(resolve_fake("fake_gpu_v2_partial.so", &api, msg, sizeof(msg)) == -1);
	CHECKF(strstr(msg, "lacks") != NULL, "%s", msg);
	/* the first entry point after the two it has */
	CHECKF(strstr(msg, "mop_gpu_device_count") != NULL, "%s", msg);
}

TEST(gpu_loader_other_layout)
{
	mop_gpu_api api;
	char		msg[256];

	CHECK(resolve_fake("fake_gpu_badlayout.so", &api, msg, sizeof(msg)) == -1);
	CHECKF(strstr(msg, "other engine sources") != NULL, "%s", msg);
}

TEST(gpu_loader_fits)
{
	mop_gpu_api api;
	char		msg[256];

	CHECKF(resolve_fake("fake_gpu_full.so", &api, msg, sizeof(msg)) == 0, "%s", msg);
	CHECK(msg[0] == '\0');
	/* every entry point was filled */
	CHECK(api.abi_version && api.engine_layout && api.device_count && api.device_info);
	CHECK(api.set_budget && api.memory_info && api.model_bytes && api.data_upload);
	CHECK(api.train_order && api.train_quiesce && api.data_rows && api.data_free && api.model_open);
	CHECK(api.model_sync && api.model_close && api.train_begin && api.train_feed);
	CHECK(api.train_end && api.evaluate && api.gradients);
	CHECK(api.gang_bytes && api.gang_open && api.gang_check);
}

TEST(gpu_loader_not_a_gpu_library)
{
	mop_gpu_api api;
	char		msg[256] = "";
	void	   *h = dlopen(NULL, RTLD_NOW);	/* this test binary */

	CHECK(h != NULL);
	if (!h)
		return;
	CHECK(mop_gpu_api_resolve(h, &api, msg, sizeof(msg)) == -1);
	CHECKF(strstr(msg, "not a mop GPU library") != NULL, "%s", msg);
	CHECK(api.abi_version == NULL && api.gradients == NULL);
	dlclose(h);
}

/* --- the optimizer's scalars of a step ---------------------------------- */

/* A 3-in, 2-out dense model (kernel and bias) with optimizer opt and schedule sched. */
static nn_model *
sched_model(int opt, int sched)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;

	nn_spec_init(&s);
	s.in_c = 3;
	s.loss = NN_LOSS_MSE;
	s.metric = NN_METRIC_MSE;
	add_dense(&s, 2, NN_ACT_NONE);
	s.optimizer = opt;
	s.lr = 0.1f;
	s.weight_decay = opt == NN_OPT_ADAMW ? 0.3f : 0.0f;
	s.lr_schedule = sched;
	s.lr_warmup = 2;
	s.lr_step_size = 2;
	s.lr_gamma = 0.5f;
	s.lr_min = 0.01f;
	s.lr_epochs = 5;
	if (nn_model_create(&s, &m, &err) != NN_OK)
	{
		fprintf(stderr, "  %s\n", err.msg);
		return NULL;
	}
	return m;
}

/*
 * For every schedule and epoch, a step whose weights the GPU's update
 * rule moves with mop_gpu_step_scalars_of's numbers lands exactly where
 * nn_optim_step moves them: the rate of the step is the schedule's at the
 * model's epoch counter, not the spec's constant.
 */
TEST(gpu_step_scalars_follow_the_schedule)
{
	int			opts[] = {NN_OPT_SGD, NN_OPT_ADAM, NN_OPT_ADAMW};
	int			scheds[] = {NN_SCHED_NONE, NN_SCHED_STEP, NN_SCHED_EXPONENTIAL, NN_SCHED_COSINE};

	for (int o = 0; o < 3; o++)
		for (int sc = 0; sc < 4; sc++)
			for (int64_t e = 0; e < 9; e++)
			{
				nn_model   *m = sched_model(opts[o], sc ? scheds[sc] : NN_SCHED_NONE);
				mop_gpu_step_scalars k;
				float		w0[8],
							want[8];
				int64_t		P;
				nn_error	err;
				int			same = 1;

				CHECK(m != NULL);
				if (!m)
					return;
				P = m->plan.n_params;
				nn_model_set_epochs(m, e);
				m->steps = 4 + e;	/* Adam's t = steps + 1 */
				mop_gpu_step_scalars_of(&m->spec, m->epochs, m->steps + 1, &k);
				CHECKF(k.lr == (float) nn_lr_at(&m->spec, e), "epoch %lld: lr %g, schedule says %g",
					   (long long) e, (double) k.lr, nn_lr_at(&m->spec, e));
				for (int64_t i = 0; i < P; i++)
				{
					float		g = 0.25f * (float) (i + 1) - 0.6f;
					int			kernel = i < m->plan.t[0].size;

					w0[i] = m->params[i];
					m->grads[i] = g;
					/* the GPU kernel's rule (kernels_train.cu), fresh optimizer state */
					if (opts[o] == NN_OPT_SGD)
						want[i] = w0[i] - k.lr * g;
					else
					{
						float		wi = w0[i] * (kernel ? k.kernel_decay : 1.0f);
						float		mo = (1.0f - m->spec.beta1) * g;
						float		ve = (1.0f - m->spec.beta2) * g * g;

						want[i] = wi - k.step_size * (mo / (sqrtf(ve) / k.bc2_sqrt + m->spec.eps));
					}
				}
				CHECK(nn_optim_step(m, &err) == NN_OK);
				for (int64_t i = 0; i < P; i++)
					same &= m->params[i] == want[i];
				CHECKF(same, "optimizer %d, schedule %d, epoch %lld: the GPU's step differs from the CPU's",
					   opts[o], scheds[sc], (long long) e);
				nn_model_free(m);
			}
}

/* Without a schedule the rate is the spec's, whatever the epoch; AdamW decays by it. */
TEST(gpu_step_scalars_constant)
{
	nn_spec		s;
	mop_gpu_step_scalars k;

	nn_spec_init(&s);
	s.optimizer = NN_OPT_ADAMW;
	s.lr = 0.02f;
	s.weight_decay = 0.5f;
	for (int64_t e = 0; e < 5; e++)
	{
		mop_gpu_step_scalars_of(&s, e * 1000, 1, &k);
		CHECK(k.lr == 0.02f && k.kernel_decay == 1.0f - 0.02f * 0.5f);
		CHECK(k.step_size == (float) ((double) 0.02f / (1.0 - pow((double) s.beta1, 1.0))));
	}
	s.optimizer = NN_OPT_SGD;
	mop_gpu_step_scalars_of(&s, 0, 7, &k);
	CHECK(k.kernel_decay == 1.0f && k.step_size == 0.0f && k.bc2_sqrt == 1.0f);
}
