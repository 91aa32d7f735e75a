/*
 * metrics.c -- metrics over a whole set of rows.
 *
 * Accuracy, top-k accuracy, mse, mae and log-loss are means of per-row
 * values: loss.c adds each row's value to metric_sum and a caller divides by
 * rows.  Precision, recall, F1, R² and ROC AUC are not means of anything
 * per row; an accumulator gathers what they need from every row (counts per
 * class, a running mean and sum of squares per output, or every row's
 * scores) and computes them once over the whole set:
 *
 *   precision, recall, F1  binary: of the positive class (output > 0, i.e.
 *                          probability > 0.5); classes: the unweighted mean
 *                          over the classes that occur in the labels or the
 *                          predictions (scikit-learn's average='macro'); a
 *                          0/0 ratio counts as 0 (zero_division=0)
 *   r2                     1 - SSE/SST per output, the unweighted mean over
 *                          outputs; a constant target gives 1 when predicted
 *                          exactly, else 0 (scikit-learn's force_finite)
 *   auc                    binary: the probability that a random positive
 *                          scores above a random negative, ties counting
 *                          one half (the Mann-Whitney statistic, equal to the
 *                          area under the ROC curve); classes: the unweighted
 *                          mean of one-vs-rest AUCs over the classes that have
 *                          both positives and negatives; NaN when none has
 *
 * The model keeps one accumulator for its training stream (reset by
 * nn_train_begin, read by nn_train_end) and one for evaluation (reset by
 * nn_evaluate_reset, read by nn_evaluate_metric).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

/* At most this many stored scores (floats) for AUC: 64 MB, sorted in seconds. */
#define MAX_AUC_SCORES ((int64_t) 1 << 24)

int
nn_metric_whole_set(nn_metric metric)
{
	return metric == NN_METRIC_PRECISION || metric == NN_METRIC_RECALL ||
		metric == NN_METRIC_F1 || metric == NN_METRIC_R2 || metric == NN_METRIC_AUC;
}

/* Classes the accumulator counts: softmax outputs, or 2 for a sigmoid. */
static int
n_classes(const nn_metric_acc *a)
{
	return a->loss == NN_LOSS_SOFTMAX_CE ? a->out_dim : 2;
}

/* Scores stored per row for AUC: one per class, one for a sigmoid. */
static int
score_width(const nn_metric_acc *a)
{
	return a->loss == NN_LOSS_SOFTMAX_CE ? a->out_dim : 1;
}

nn_status
nn_metric_acc_init(nn_metric_acc *a, const nn_spec *spec, int out_dim, nn_error *err)
{
	int			k;

	memset(a, 0, sizeof(*a));
	a->metric = spec->metric;
	a->loss = spec->loss;
	a->out_dim = out_dim;
	if (!nn_metric_whole_set(spec->metric))
		return NN_OK;
	if (spec->loss == NN_LOSS_SIGMOID_BCE && out_dim != 1)
		return nn_fail(err, NN_ERR_INVALID,
					   "metric %s needs one sigmoid output, the model has %d",
					   nn_metric_name(spec->metric), out_dim);
	k = a->loss == NN_LOSS_SOFTMAX_CE ? out_dim : 2;
	a->counts = calloc((size_t) 3 * k, sizeof(double));
	a->moments = calloc((size_t) 3 * out_dim, sizeof(double));
	if (!a->counts || !a->moments)
	{
		nn_metric_acc_free(a);
		return nn_fail(err, NN_ERR_NOMEM, "out of memory for the metric");
	}
	a->on = 1;
	return NN_OK;
}

void
nn_metric_acc_reset(nn_metric_acc *a)
{
	if (!a->on)
		return;
	a->rows = 0;
	a->nan = 0;
	memset(a->counts, 0, sizeof(double) * 3 * n_classes(a));
	memset(a->moments, 0, sizeof(double) * 3 * a->out_dim);
	a->n_scores = 0;
}

void
nn_metric_acc_free(nn_metric_acc *a)
{
	free(a->counts);
	free(a->moments);
	free(a->score);
	free(a->label);
	memset(a, 0, sizeof(*a));
}

/* Predicted class of a row of outputs z (before the link). */
static int
predicted(const nn_metric_acc *a, const float *z)
{
	int			best = 0;

	if (a->loss != NN_LOSS_SOFTMAX_CE)
		return z[0] > 0.0f ? 1 : 0;
	for (int j = 1; j < a->out_dim; j++)
		if (z[j] > z[best])
			best = j;
	return best;
}

/* True class of a row of labels y. */
static int
actual(const nn_metric_acc *a, const float *y)
{
	if (a->loss == NN_LOSS_SOFTMAX_CE)
		return (int) y[0];
	return y[0] > 0.5f ? 1 : 0;
}

nn_status
nn_metric_acc_add(nn_metric_acc *a, const float *z, const float *y, int nb, nn_error *err)
{
	int			k,
				y_dim;

	if (!a->on || nb <= 0)
		return NN_OK;
	/* a diverged model's outputs rank nothing: the metric is NaN */
	for (int64_t i = 0; i < (int64_t) nb * a->out_dim && !a->nan; i++)
		if (!isfinite(z[i]))
			a->nan = 1;
	if (a->nan)
	{
		a->rows += nb;
		return NN_OK;
	}
	k = n_classes(a);
	y_dim = a->loss == NN_LOSS_SOFTMAX_CE ? 1 : a->out_dim;
	if (a->metric == NN_METRIC_R2)
	{
		/* Welford's running mean and sum of squares per output */
		double	   *mean = a->moments,
				   *m2 = a->moments + a->out_dim,
				   *sse = a->moments + 2 * a->out_dim;

		for (int r = 0; r < nb; r++)
		{
			double		n1 = (double) (a->rows + r + 1);

			for (int j = 0; j < a->out_dim; j++)
			{
				double		t = y[(int64_t) r * y_dim + j];
				double		d = t - mean[j];
				double		e = (double) z[(int64_t) r * a->out_dim + j] - t;

				mean[j] += d / n1;
				m2[j] += d * (t - mean[j]);
				sse[j] += e * e;
			}
		}
	}
	else if (a->metric == NN_METRIC_AUC)
	{
		int			w = score_width(a);

		if (a->n_scores + (int64_t) nb * w > MAX_AUC_SCORES)
			return nn_fail(err, NN_ERR_NOMEM,
						   "the auc metric keeps every row's scores: more than %lld would be kept",
						   (long long) MAX_AUC_SCORES);
		if ((a->n_scores / w) + nb > a->cap)
		{
			int64_t		cap = a->cap ? a->cap : 1024;
			float	   *s;
			int32_t    *l;

			while (cap < (a->n_scores / w) + nb)
				cap *= 2;
			s = realloc(a->score, (size_t) cap * w * sizeof(float));
			if (s)
				a->score = s;
			l = realloc(a->label, (size_t) cap * sizeof(int32_t));
			if (l)
				a->label = l;
			if (!s || !l)
				return nn_fail(err, NN_ERR_NOMEM, "out of memory keeping scores for auc");
			a->cap = cap;
		}
		/* the probabilities mop_predict_proba gives */
		nn_link(a->loss, z, a->score + a->n_scores, nb, a->out_dim);
		for (int r = 0; r < nb; r++)
			a->label[a->n_scores / w + r] = actual(a, y + (int64_t) r * y_dim);
		a->n_scores += (int64_t) nb * w;
	}
	else
	{
		double	   *tp = a->counts,
				   *fp = a->counts + k,
				   *fn = a->counts + 2 * k;

		for (int r = 0; r < nb; r++)
		{
			int			p = predicted(a, z + (int64_t) r * a->out_dim);
			int			t = actual(a, y + (int64_t) r * y_dim);

			if (p == t)
				tp[t] += 1;
			else
			{
				fp[p] += 1;
				fn[t] += 1;
			}
		}
	}
	a->rows += nb;
	return NN_OK;
}

/* x / y, 0 when y is 0 */
static double
ratio(double x, double y)
{
	return y > 0 ? x / y : 0.0;
}

/* one row's score for a class and whether it belongs to the class */
typedef struct scored
{
	float		s;
	int32_t		pos;
} scored;

static int
by_score(const void *pa, const void *pb)
{
	float		a = ((const scored *) pa)->s;
	float		b = ((const scored *) pb)->s;

	return (a > b) - (a < b);
}

/*
 * AUC of class c against the rest (binary: c = 1, scored by its one
 * column): the Mann-Whitney statistic with average ranks for ties; NaN
 * without both positives and negatives, or when a score is NaN (a model
 * whose outputs are not numbers has no ranking).
 */
static double
auc_of(const nn_metric_acc *a, scored *v, int c)
{
	int64_t		n = a->rows;
	int			w = score_width(a);
	int			col = w == 1 ? 0 : c;
	double		pos = 0,
				rank_sum = 0;

	for (int64_t i = 0; i < n; i++)
	{
		v[i].s = a->score[i * w + col];
		if (isnan(v[i].s))
			return NAN;
		v[i].pos = a->label[i] == c;
	}
	qsort(v, (size_t) n, sizeof(scored), by_score);
	for (int64_t i = 0; i < n;)
	{
		int64_t		j = i;
		double		avg;

		do
			j++;
		while (j < n && v[j].s == v[i].s);
		avg = (double) (i + 1 + j) / 2.0;	/* the mean of ranks i+1 .. j */
		for (int64_t q = i; q < j; q++)
			if (v[q].pos)
			{
				pos += 1;
				rank_sum += avg;
			}
		i = j;
	}
	if (pos == 0 || pos == (double) n)
		return NAN;
	return (rank_sum - pos * (pos + 1) / 2.0) / (pos * ((double) n - pos));
}

double
nn_metric_acc_value(const nn_metric_acc *a)
{
	int			k;

	if (!a->on || a->rows == 0 || a->nan)
		return NAN;
	k = n_classes(a);
	if (a->metric == NN_METRIC_R2)
	{
		const double *m2 = a->moments + a->out_dim,
				   *sse = a->moments + 2 * a->out_dim;
		double		sum = 0;

		for (int j = 0; j < a->out_dim; j++)
			sum += m2[j] > 0 ? 1.0 - sse[j] / m2[j] : (sse[j] == 0 ? 1.0 : 0.0);
		return sum / a->out_dim;
	}
	if (a->metric == NN_METRIC_AUC)
	{
		scored	   *work = malloc((size_t) a->rows * sizeof(scored));
		double		sum = 0,
					v;
		int			used = 0;

		if (!work)
			return NAN;
		if (a->loss != NN_LOSS_SOFTMAX_CE)
		{
			sum = auc_of(a, work, 1);
			used = isnan(sum) ? 0 : 1;
		}
		else
			for (int c = 0; c < k; c++)
				if (!isnan(v = auc_of(a, work, c)))
				{
					sum += v;
					used++;
				}
		free(work);
		return used ? sum / used : NAN;
	}
	else
	{
		const double *tp = a->counts,
				   *fp = a->counts + k,
				   *fn = a->counts + 2 * k;
		double		sum = 0;
		int			used = 0;

		for (int c = 0; c < k; c++)
		{
			/* binary: the positive class only; classes: those that occur */
			if (a->loss != NN_LOSS_SOFTMAX_CE ? c != 1 : tp[c] + fp[c] + fn[c] == 0)
				continue;
			used++;
			if (a->metric == NN_METRIC_PRECISION)
				sum += ratio(tp[c], tp[c] + fp[c]);
			else if (a->metric == NN_METRIC_RECALL)
				sum += ratio(tp[c], tp[c] + fn[c]);
			else
				sum += ratio(2 * tp[c], 2 * tp[c] + fp[c] + fn[c]);
		}
		return used ? sum / used : 0.0;
	}
}
