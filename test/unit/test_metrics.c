/*
 * test_metrics.c -- the metrics over a whole set (precision, recall, f1, r2,
 * auc) and log-loss, against references written independently here from
 * nn_predict's probabilities: AUC by counting every positive-negative pair
 * (ties one half), the others by their textbook formulas in double.  Each
 * evaluation is fed in uneven pieces, so the engine must gather the rows
 * across calls; a training stream must report the same metric as an
 * evaluation of the same rows (its learning rate of 1e-30 moves no float32
 * weight).
 */
#include "harness.h"
#include "util.h"

#define N 203

static nn_model *
make_model(int in, int out, int loss, int metric, uint64_t seed)
{
	nn_spec		s;
	nn_model   *m;
	nn_error	err;

	nn_spec_init(&s);
	s.in_c = in;
	s.batch_size = 16;
	s.seed = seed;
	s.loss = loss;
	s.metric = metric;
	s.lr = 1e-30f;			/* the weights do not move in float32 */
	add_dense(&s, 8, NN_ACT_TANH);
	add_dense(&s, out, NN_ACT_NONE);
	CHECK_OK(nn_model_create(&s, &m, &err));
	return m;
}

/* the metric from nn_evaluate over x, y in three uneven pieces */
static double
evaluate(nn_model *m, const float *x, const float *y, int in, int ydim, nn_result *r)
{
	nn_error	err;
	int			cut[4] = {0, 17, 120, N};

	memset(r, 0, sizeof(*r));
	nn_evaluate_reset(m);
	for (int i = 0; i < 3; i++)
		CHECK_OK(nn_evaluate(m, x + cut[i] * in, y + cut[i] * ydim, cut[i + 1] - cut[i], r, &err));
	return nn_evaluate_metric(m);
}

/* AUC of scores s against 0/1 labels by counting pairs; NaN without both */
static double
pair_auc(const double *s, const int *pos, int n)
{
	double		wins = 0,
				pairs = 0;

	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			if (pos[i] && !pos[j])
			{
				pairs += 1;
				wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
			}
	return pairs > 0 ? wins / pairs : NAN;
}

static double
safe_ratio(double a, double b)
{
	return b > 0 ? a / b : 0.0;
}

TEST(metrics_binary_against_reference)
{
	float		x[N * 3],
				y[N],
				p[N];
	int			metrics[4] = {NN_METRIC_PRECISION, NN_METRIC_RECALL, NN_METRIC_F1, NN_METRIC_AUC};

	fill_uniform(x, N * 3, 5, -1, 1);
	for (int i = 0; i < N; i++)
		y[i] = (x[3 * i] + 0.5f * x[3 * i + 1] > 0.1f) != (i % 7 == 0);
	for (int k = 0; k < 4; k++)
	{
		nn_model   *m = make_model(3, 1, NN_LOSS_SIGMOID_BCE, metrics[k], 11);
		nn_error	err;
		nn_result	r;
		double		got = evaluate(m, x, y, 3, 1, &r),
					want,
					tp = 0,
					fp = 0,
					fn = 0,
					s[N];
		int			pos[N];

		CHECK_OK(nn_predict(m, x, N, p, &err));
		for (int i = 0; i < N; i++)
		{
			int			pr = p[i] > 0.5f,
						t = y[i] > 0.5f;

			tp += pr && t;
			fp += pr && !t;
			fn += !pr && t;
			s[i] = p[i];
			pos[i] = t;
		}
		want = metrics[k] == NN_METRIC_PRECISION ? safe_ratio(tp, tp + fp) :
			metrics[k] == NN_METRIC_RECALL ? safe_ratio(tp, tp + fn) :
			metrics[k] == NN_METRIC_F1 ? safe_ratio(2 * tp, 2 * tp + fp + fn) :
			pair_auc(s, pos, N);
		CHECKF(close_enough(got, want, 1e-12), "%s: %.17g, reference %.17g",
			   nn_metric_name(metrics[k]), got, want);
		CHECKF(r.rows == N && r.metric_sum == 0, "%s: rows %lld metric_sum %g",
			   nn_metric_name(metrics[k]), (long long) r.rows, r.metric_sum);
		CHECK(want > 0 && want < 1);
		nn_model_free(m);
	}
}

TEST(metrics_classes_against_reference)
{
	float		x[N * 4],
				y[N],
				p[N * 3];
	int			metrics[4] = {NN_METRIC_PRECISION, NN_METRIC_RECALL, NN_METRIC_F1, NN_METRIC_AUC};

	fill_uniform(x, N * 4, 6, -1, 1);
	for (int i = 0; i < N; i++)
		y[i] = (float) ((x[4 * i] > 0.3f) + (x[4 * i + 1] > 0.0f));
	for (int k = 0; k < 4; k++)
	{
		nn_model   *m = make_model(4, 3, NN_LOSS_SOFTMAX_CE, metrics[k], 12);
		nn_error	err;
		nn_result	r;
		double		got = evaluate(m, x, y, 4, 1, &r),
					want = 0,
					tp[3] = {0},
					fp[3] = {0},
					fn[3] = {0},
					s[N];
		int			pos[N],
					used = 0;

		CHECK_OK(nn_predict(m, x, N, p, &err));
		for (int i = 0; i < N; i++)
		{
			int			pr = 0,
						t = (int) y[i];

			for (int c = 1; c < 3; c++)
				if (p[i * 3 + c] > p[i * 3 + pr])
					pr = c;
			if (pr == t)
				tp[t]++;
			else
			{
				fp[pr]++;
				fn[t]++;
			}
		}
		for (int c = 0; c < 3; c++)
		{
			double		v;

			if (metrics[k] == NN_METRIC_AUC)
			{
				for (int i = 0; i < N; i++)
				{
					s[i] = p[i * 3 + c];
					pos[i] = (int) y[i] == c;
				}
				v = pair_auc(s, pos, N);
				if (isnan(v))
					continue;
			}
			else if (tp[c] + fp[c] + fn[c] == 0)
				continue;
			else
				v = metrics[k] == NN_METRIC_PRECISION ? safe_ratio(tp[c], tp[c] + fp[c]) :
					metrics[k] == NN_METRIC_RECALL ? safe_ratio(tp[c], tp[c] + fn[c]) :
					safe_ratio(2 * tp[c], 2 * tp[c] + fp[c] + fn[c]);
			want += v;
			used++;
		}
		want /= used;
		CHECKF(close_enough(got, want, 1e-12), "%s: %.17g, reference %.17g",
			   nn_metric_name(metrics[k]), got, want);
		nn_model_free(m);
	}
}

TEST(metrics_r2_and_log_loss_against_reference)
{
	float		x[N * 2],
				y[N],
				p[N * 3];
	nn_model   *m;
	nn_error	err;
	nn_result	r;
	double		got,
				mean = 0,
				sst = 0,
				sse = 0,
				ll = 0;

	fill_uniform(x, N * 2, 7, -1, 1);
	for (int i = 0; i < N; i++)
		y[i] = 100.0f + 3.0f * x[2 * i] - x[2 * i + 1];
	m = make_model(2, 1, NN_LOSS_MSE, NN_METRIC_R2, 13);
	got = evaluate(m, x, y, 2, 1, &r);
	CHECK_OK(nn_predict(m, x, N, p, &err));
	for (int i = 0; i < N; i++)
		mean += y[i] / (double) N;
	for (int i = 0; i < N; i++)
	{
		sst += (y[i] - mean) * (y[i] - mean);
		sse += ((double) p[i] - y[i]) * ((double) p[i] - y[i]);
	}
	CHECKF(close_enough(got, 1 - sse / sst, 1e-9), "r2 %.17g, reference %.17g", got, 1 - sse / sst);
	CHECK(got < 0);				/* an untrained model predicts about 0 for targets near 100 */
	nn_model_free(m);

	/* log-loss: a per-row mean, so metric_sum / rows */
	for (int i = 0; i < N; i++)
		y[i] = (float) (i % 3);
	m = make_model(2, 3, NN_LOSS_SOFTMAX_CE, NN_METRIC_LOG_LOSS, 14);
	(void) evaluate(m, x, y, 2, 1, &r);
	CHECK_OK(nn_predict(m, x, N, p, &err));
	for (int i = 0; i < N; i++)
		ll -= log((double) p[i * 3 + (int) y[i]]);
	CHECKF(close_enough(r.metric_sum / r.rows, ll / N, 1e-5), "log_loss %.9g, reference %.9g",
		   r.metric_sum / r.rows, ll / N);
	CHECKF(r.metric_sum == r.loss_sum, "log-loss is the data loss: %.17g vs %.17g",
		   r.metric_sum, r.loss_sum);
	CHECK(!nn_metric_higher_is_better(NN_METRIC_LOG_LOSS) && nn_metric_higher_is_better(NN_METRIC_AUC) &&
		  nn_metric_higher_is_better(NN_METRIC_R2) && nn_metric_higher_is_better(NN_METRIC_F1));
	nn_model_free(m);
}

TEST(metrics_training_stream_matches_evaluation)
{
	float		x[N * 3],
				y[N];
	int			metrics[3] = {NN_METRIC_F1, NN_METRIC_AUC, NN_METRIC_RECALL};

	fill_uniform(x, N * 3, 8, -1, 1);
	for (int i = 0; i < N; i++)
		y[i] = (float) ((x[3 * i] > 0) + (x[3 * i + 2] > 0.5f));
	for (int k = 0; k < 3; k++)
	{
		nn_model   *m = make_model(3, 3, NN_LOSS_SOFTMAX_CE, metrics[k], 15);
		nn_error	err;
		nn_result	r,
					t;
		double		e = evaluate(m, x, y, 3, 1, &r);

		/* a learning rate of 1e-30 and no dropout: training sees what evaluation sees */
		CHECK_OK(nn_train_begin(m, 0, &err));
		CHECK_OK(nn_train_feed(m, x, y, 50, &err));
		CHECK_OK(nn_train_feed(m, x + 50 * 3, y + 50, N - 50, &err));
		CHECK_OK(nn_train_end(m, &t, &err));
		CHECKF(t.rows == N && close_enough(t.metric_sum / t.rows, e, 1e-12),
			   "%s: training %.17g, evaluation %.17g", nn_metric_name(metrics[k]),
			   t.metric_sum / t.rows, e);
		/* a second stream starts afresh */
		CHECK_OK(nn_train(m, x, y, N, 0, &t, &err));
		CHECK(close_enough(t.metric_sum / t.rows, e, 1e-12));
		nn_model_free(m);
	}
}

TEST(metrics_undefined_and_specs)
{
	float		x[10 * 2],
				y[10];
	nn_model   *m;
	nn_spec		s;
	nn_error	err;
	nn_result	r = {0};

	/* auc with one class only is undefined; f1 without positives is 0 */
	fill_uniform(x, 20, 9, -1, 1);
	for (int i = 0; i < 10; i++)
		y[i] = 0;
	m = make_model(2, 1, NN_LOSS_SIGMOID_BCE, NN_METRIC_AUC, 16);
	CHECK_OK(nn_evaluate(m, x, y, 10, &r, &err));
	CHECK(isnan(nn_evaluate_metric(m)));
	nn_model_free(m);
	m = make_model(2, 1, NN_LOSS_SIGMOID_BCE, NN_METRIC_RECALL, 16);
	CHECK(isnan(nn_evaluate_metric(m)));	/* no rows yet */
	CHECK_OK(nn_evaluate(m, x, y, 10, &r, &err));
	CHECK(nn_evaluate_metric(m) == 0.0);
	nn_evaluate_reset(m);
	CHECK(isnan(nn_evaluate_metric(m)));
	nn_model_free(m);

	/* metrics must fit the loss */
	nn_spec_init(&s);
	s.in_c = 2;
	add_dense(&s, 1, NN_ACT_NONE);
	s.loss = NN_LOSS_MSE;
	s.metric = NN_METRIC_F1;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
	s.metric = NN_METRIC_R2;
	CHECK(nn_spec_validate(&s, &err) == NN_OK);
	s.loss = NN_LOSS_SIGMOID_BCE;
	CHECK(nn_spec_validate(&s, &err) == NN_ERR_INVALID);
	s.metric = NN_METRIC_LOG_LOSS;
	CHECK(nn_spec_validate(&s, &err) == NN_OK);
	/* a whole-set metric needs one sigmoid output */
	nn_spec_init(&s);
	s.in_c = 2;
	add_dense(&s, 2, NN_ACT_NONE);
	s.loss = NN_LOSS_SIGMOID_BCE;
	s.metric = NN_METRIC_AUC;
	CHECK(nn_model_create(&s, &m, &err) == NN_ERR_INVALID);
}

TEST(metrics_nan_outputs_give_nan_quickly)
{
	/* a model whose outputs are NaN (a diverged model's): every whole-set
	 * metric is NaN, and AUC returns instead of looping on NaN ties */
	float		x[N * 2],
				y[N];
	int			metrics[5] = {NN_METRIC_AUC, NN_METRIC_F1, NN_METRIC_PRECISION, NN_METRIC_RECALL, NN_METRIC_R2};

	for (int i = 0; i < N; i++)
	{
		x[2 * i] = i % 3 == 0 ? NAN : 0.5f;
		x[2 * i + 1] = -0.5f;
		y[i] = (float) (i % 2);
	}
	for (int k = 0; k < 5; k++)
	{
		int			regression = metrics[k] == NN_METRIC_R2;
		nn_model   *m = make_model(2, regression ? 1 : 2,
								   regression ? NN_LOSS_MSE : NN_LOSS_SOFTMAX_CE, metrics[k], 17);
		nn_error	err;
		nn_result	r = {0},
					t;

		CHECK_OK(nn_evaluate(m, x, y, N, &r, &err));
		CHECKF(isnan(nn_evaluate_metric(m)), "%s: %g", nn_metric_name(metrics[k]), nn_evaluate_metric(m));
		/* the training stream too: it diverges, and its end reports NaN */
		CHECK_OK(nn_train_begin(m, 0, &err));
		CHECK(nn_train_feed(m, x, y, N, &err) == NN_DIVERGED);
		(void) nn_train_end(m, &t, &err);
		CHECK(isnan(t.metric_sum));
		nn_model_free(m);
	}
}
