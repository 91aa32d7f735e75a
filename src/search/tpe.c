/*
 * tpe.c -- the Tree-structured Parzen Estimator.  See mop_tpe.h for the
 * algorithm and its defaults.
 *
 * Observations live in flat arrays (configuration rows, scores, status).
 * Each proposal re-fits, per parameter, two small Parzen estimators -- l on
 * the good group, g on the bad -- from scratch: with a few hundred
 * observations that is microseconds, far below one epoch of training, and it
 * keeps the sampler stateless apart from its observations and its generator.
 * Numeric parameters are modelled in a transformed space (log for log
 * parameters, half-integer-widened bounds for integers); densities of l and
 * g share the transform, so its Jacobian cancels in log l - log g.
 */
#include <stdlib.h>
#include <string.h>

#include "mop_tpe.h"

#define TPE_SQRT2	1.4142135623730951
#define TPE_LOG_2PI 1.8378770664093453

#define ST_PENDING	0
#define ST_COMPLETE 1

typedef struct parzen
{
	int32_t		k;				/* kernels (numeric) */
	double	   *mu,
			   *sigma,
			   *w,
			   *logz;			/* log of each kernel's mass inside the bounds */
	double		low,
				high;
	double	   *p;				/* choice probabilities (choice) */
	int32_t		n_choices;
} parzen;

typedef struct sort_item
{
	double		v;
	int32_t		i;
} sort_item;

struct mop_tpe
{
	mop_param	space[MOP_PARAMS_MAX];
	int32_t		np,
				max_choices;
	mop_tpe_opts o;
	mop_rng		rng;
	double	   *x;				/* [cap][np] */
	double	   *score;
	uint8_t    *status;
	int32_t		n,
				cap,
				n_complete;
	/* scratch, sized for cap + 1 kernels */
	int32_t    *good,
			   *bad,
			   *ids;
	double	   *sc;
	double	   *buf[10];
	sort_item  *items;
	int32_t		scratch_cap;
};

/* Optuna's defaults. */
void
mop_tpe_default_opts(mop_tpe_opts *o)
{
	o->n_startup = 10;
	o->n_ei_candidates = 24;
	o->gamma = 0.1;
	o->gamma_cap = 25;
	o->prior_weight = 1.0;
	o->constant_liar = 1;
}

/* New sampler. */
mop_tpe *
mop_tpe_new(const mop_param *space, int32_t n_params, const mop_tpe_opts *opts, uint64_t seed)
{
	mop_tpe    *t;
	mop_tpe_opts o;

	if (opts)
		o = *opts;
	else
		mop_tpe_default_opts(&o);
	if (mop_params_check(space, n_params, NULL, 0) != 0 || o.n_startup < 0 ||
		o.n_ei_candidates < 1 || !(o.gamma > 0 && o.gamma <= 1) || o.gamma_cap < 1 ||
		!(o.prior_weight > 0))
		return NULL;
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	memcpy(t->space, space, sizeof(mop_param) * n_params);
	t->np = n_params;
	for (int32_t i = 0; i < n_params; i++)
		if (space[i].kind == MOP_PARAM_CHOICE && space[i].n_choices > t->max_choices)
			t->max_choices = space[i].n_choices;
	t->o = o;
	mop_rng_seed(&t->rng, seed);
	return t;
}

void
mop_tpe_free(mop_tpe *t)
{
	if (!t)
		return;
	free(t->x);
	free(t->score);
	free(t->status);
	free(t->good);
	free(t->bad);
	free(t->ids);
	free(t->sc);
	for (int i = 0; i < 10; i++)
		free(t->buf[i]);
	free(t->items);
	free(t);
}

int32_t
mop_tpe_n_complete(const mop_tpe *t)
{
	return t->n_complete;
}

/* Room for one more observation, and scratch for all of them. */
static int
grow(mop_tpe *t)
{
	if (t->n == t->cap)
	{
		int32_t		cap = t->cap ? 2 * t->cap : 64;
		double	   *x = realloc(t->x, sizeof(double) * cap * t->np),
				   *s;
		uint8_t    *st;

		if (!x)
			return MOP_SEARCH_ENOMEM;
		t->x = x;
		if (!(s = realloc(t->score, sizeof(double) * cap)))
			return MOP_SEARCH_ENOMEM;
		t->score = s;
		if (!(st = realloc(t->status, cap)))
			return MOP_SEARCH_ENOMEM;
		t->status = st;
		t->cap = cap;
	}
	if (t->scratch_cap < t->cap + 1)
	{
		int32_t		c = t->cap + 1 > t->max_choices ? t->cap + 1 : t->max_choices;

		free(t->good);
		free(t->bad);
		free(t->ids);
		free(t->sc);
		free(t->items);
		t->good = malloc(sizeof(int32_t) * c);
		t->bad = malloc(sizeof(int32_t) * c);
		t->ids = malloc(sizeof(int32_t) * c);
		t->sc = malloc(sizeof(double) * c);
		t->items = malloc(sizeof(sort_item) * c);
		if (!t->good || !t->bad || !t->ids || !t->sc || !t->items)
		{
			t->scratch_cap = 0;
			return MOP_SEARCH_ENOMEM;
		}
		for (int i = 0; i < 10; i++)
		{
			free(t->buf[i]);
			if (!(t->buf[i] = malloc(sizeof(double) * c)))
			{
				t->scratch_cap = 0;
				return MOP_SEARCH_ENOMEM;
			}
		}
		t->scratch_cap = c;
	}
	return MOP_SEARCH_OK;
}

/* ceil(gamma n) without floating-point noise (0.1 * 30 is 3.0000000000000004). */
static int32_t
gamma_count(double gamma, int32_t n)
{
	return (int32_t) ceil(gamma * n - 1e-9);
}

/* The good/bad split of known scores. */
int32_t
mop_tpe_split(const double *scores, int32_t n, double gamma, int32_t cap, int32_t *order)
{
	double	   *sc;
	int32_t		n_good,
				finite = 0;

	if (n < 0 || !(gamma > 0 && gamma <= 1) || cap < 1 || (n > 0 && (!scores || !order)))
		return MOP_SEARCH_EINVAL;
	if (n == 0)
		return 0;
	if (!(sc = malloc(sizeof(double) * n)))
		return MOP_SEARCH_ENOMEM;
	for (int32_t i = 0; i < n; i++)
	{
		order[i] = i;
		sc[i] = scores[i];
		finite += !isnan(scores[i]);
	}
	mop_rank_sort(order, sc, n);
	free(sc);
	n_good = gamma_count(gamma, n);
	if (n_good > cap)
		n_good = cap;
	if (n_good > finite)
		n_good = finite;
	return n_good;
}

static int
cmp_int32(const void *a, const void *b)
{
	int32_t		x = *(const int32_t *) a,
				y = *(const int32_t *) b;

	return x < y ? -1 : (x > y);
}

/* Split the observations into t->good / t->bad (each sorted by id). */
static void
groups(mop_tpe *t, int32_t *ng, int32_t *nb)
{
	int32_t		nc = 0,
				finite = 0,
				n_good;

	for (int32_t i = 0; i < t->n; i++)
		if (t->status[i] == ST_COMPLETE)
		{
			t->ids[nc] = i;
			t->sc[nc++] = t->score[i];
			finite += !isnan(t->score[i]);
		}
	mop_rank_sort(t->ids, t->sc, nc);
	n_good = gamma_count(t->o.gamma, nc);
	if (n_good > t->o.gamma_cap)
		n_good = t->o.gamma_cap;
	if (n_good > finite)
		n_good = finite;
	*ng = n_good;
	*nb = 0;
	memcpy(t->good, t->ids, sizeof(int32_t) * n_good);
	for (int32_t j = n_good; j < nc; j++)
		t->bad[(*nb)++] = t->ids[j];
	if (t->o.constant_liar)
		for (int32_t i = 0; i < t->n; i++)
			if (t->status[i] == ST_PENDING)
				t->bad[(*nb)++] = i;
	qsort(t->good, *ng, sizeof(int32_t), cmp_int32);
	qsort(t->bad, *nb, sizeof(int32_t), cmp_int32);
}

/* Optuna's weights for n observations, oldest first: a ramp, then 25 ones. */
static void
obs_weights(int32_t n, double *w)
{
	if (n < 25)
	{
		for (int32_t i = 0; i < n; i++)
			w[i] = 1.0;
		return;
	}
	/* linspace(1/n, 1, n - 25) */
	for (int32_t i = 0; i < n - 25; i++)
		w[i] = n - 25 == 1 ? 1.0 / n : 1.0 / n + (1.0 - 1.0 / n) * i / (n - 25 - 1);
	for (int32_t i = n - 25; i < n; i++)
		w[i] = 1.0;
}

/* Transformed bounds of a numeric parameter. */
static void
bounds(const mop_param *q, double *low, double *high)
{
	switch (q->kind)
	{
		case MOP_PARAM_LOGFLOAT:
			*low = log(q->lo);
			*high = log(q->hi);
			break;
		case MOP_PARAM_INT:
			*low = q->lo - 0.5;
			*high = q->hi + 0.5;
			break;
		case MOP_PARAM_LOGINT:
			*low = log(q->lo - 0.5 > 0 ? q->lo - 0.5 : q->lo * 0.5);
			*high = log(q->hi + 0.5);
			break;
		default:
			*low = q->lo;
			*high = q->hi;
			break;
	}
}

/* Value of parameter q in the transformed space. */
static double
to_model(const mop_param *q, double v)
{
	return (q->kind == MOP_PARAM_LOGFLOAT || q->kind == MOP_PARAM_LOGINT) ? log(v) : v;
}

/* Back from the transformed space into the parameter's domain. */
static double
from_model(const mop_param *q, double y)
{
	if (q->kind == MOP_PARAM_LOGFLOAT || q->kind == MOP_PARAM_LOGINT)
		y = exp(y);
	return mop_param_clip(q, y);
}

static int
cmp_item(const void *a, const void *b)
{
	const sort_item *x = a,
			   *y = b;

	if (x->v != y->v)
		return x->v < y->v ? -1 : 1;
	return x->i < y->i ? -1 : (x->i > y->i);
}

/* log Phi(b) - Phi(a) for standard normal bounds a < b. */
static double
log_mass(double a, double b)
{
	double		m = 0.5 * (erf(b / TPE_SQRT2) - erf(a / TPE_SQRT2));

	return log(m > 1e-300 ? m : 1e-300);
}

/*
 * Fit parameter i's estimator on observations ids[0..n-1] (sorted by id),
 * using scratch buffers base..base+4.
 */
static void
fit(mop_tpe *t, int32_t i, const int32_t *ids, int32_t n, int base, parzen *pz)
{
	const mop_param *q = &t->space[i];
	double	   *w = t->buf[base];
	int32_t		m = 0;
	double		total;

	memset(pz, 0, sizeof(*pz));
	/* active observations of this parameter, oldest first */
	for (int32_t j = 0; j < n; j++)
	{
		double		v = t->x[(size_t) ids[j] * t->np + i];

		if (!isnan(v))
			t->buf[base + 1][m++] = v;
	}
	obs_weights(m, w);
	if (q->kind == MOP_PARAM_CHOICE)
	{
		double	   *p = t->buf[base + 2];

		pz->n_choices = q->n_choices;
		pz->p = p;
		for (int32_t c = 0; c < q->n_choices; c++)
			p[c] = t->o.prior_weight / q->n_choices;
		for (int32_t j = 0; j < m; j++)
			p[(int32_t) t->buf[base + 1][j]] += w[j];
		total = 0;
		for (int32_t c = 0; c < q->n_choices; c++)
			total += p[c];
		for (int32_t c = 0; c < q->n_choices; c++)
			p[c] /= total;
		return;
	}
	{
		double	   *mu = t->buf[base + 1],
				   *sigma = t->buf[base + 2],
				   *logz = t->buf[base + 3];
		double		low,
					high,
					range,
					minsigma;
		sort_item  *it = t->items;
		int32_t		k = m + 1;	/* kernels, with the prior last */

		bounds(q, &low, &high);
		range = high - low;
		for (int32_t j = 0; j < m; j++)
			mu[j] = to_model(q, mu[j]);
		mu[m] = 0.5 * (low + high);
		w[m] = t->o.prior_weight;
		/* sigma: the larger gap to the sorted neighbours, bounds outside */
		for (int32_t j = 0; j < k; j++)
		{
			it[j].v = mu[j];
			it[j].i = j;
		}
		qsort(it, k, sizeof(sort_item), cmp_item);
		for (int32_t r = 0; r < k; r++)
		{
			double		left = it[r].v - (r > 0 ? it[r - 1].v : low),
						right = (r < k - 1 ? it[r + 1].v : high) - it[r].v,
						s = left > right ? left : right;

			/* the extreme kernels use their inner gap (no endpoints) */
			if (k >= 2 && r == 0)
				s = it[1].v - it[0].v;
			if (k >= 2 && r == k - 1)
				s = it[k - 1].v - it[k - 2].v;
			sigma[it[r].i] = s;
		}
		minsigma = range / (100.0 < 1.0 + k ? 100.0 : 1.0 + k);
		for (int32_t j = 0; j < k; j++)
			sigma[j] = sigma[j] < minsigma ? minsigma : (sigma[j] > range ? range : sigma[j]);
		sigma[m] = range;		/* the prior kernel */
		total = 0;
		for (int32_t j = 0; j < k; j++)
			total += w[j];
		for (int32_t j = 0; j < k; j++)
		{
			w[j] /= total;
			logz[j] = log_mass((low - mu[j]) / sigma[j], (high - mu[j]) / sigma[j]);
		}
		pz->k = k;
		pz->mu = mu;
		pz->sigma = sigma;
		pz->w = w;
		pz->logz = logz;
		pz->low = low;
		pz->high = high;
	}
}

/* log density (numeric: transformed space) or log probability (choice). */
static double
log_pdf(const parzen *pz, double y)
{
	double		mx = -INFINITY,
				sum = 0;

	if (pz->p)
	{
		int32_t		c = (int32_t) y;

		return c >= 0 && c < pz->n_choices ? log(pz->p[c]) : -INFINITY;
	}
	if (y < pz->low || y > pz->high)
		return -INFINITY;
	for (int32_t j = 0; j < pz->k; j++)
	{
		double		z = (y - pz->mu[j]) / pz->sigma[j],
					l = log(pz->w[j]) - 0.5 * z * z - log(pz->sigma[j]) - pz->logz[j];

		if (l > mx)
			mx = l;
	}
	for (int32_t j = 0; j < pz->k; j++)
	{
		double		z = (y - pz->mu[j]) / pz->sigma[j];

		sum += exp(log(pz->w[j]) - 0.5 * z * z - log(pz->sigma[j]) - pz->logz[j] - mx);
	}
	return mx + log(sum) - 0.5 * TPE_LOG_2PI;
}

/* Draw from the estimator (transformed space / choice index). */
static double
draw(mop_tpe *t, const parzen *pz)
{
	double		u = mop_rng_uniform(&t->rng),
				acc = 0;
	int32_t		j;

	if (pz->p)
	{
		for (j = 0; j < pz->n_choices - 1; j++)
		{
			acc += pz->p[j];
			if (u < acc)
				break;
		}
		return j;
	}
	for (j = 0; j < pz->k - 1; j++)
	{
		acc += pz->w[j];
		if (u < acc)
			break;
	}
	for (int tries = 0; tries < 64; tries++)
	{
		double		y = pz->mu[j] + pz->sigma[j] * mop_rng_normal(&t->rng);

		if (y >= pz->low && y <= pz->high)
			return y;
	}
	return pz->mu[j];			/* inside the bounds */
}

/* Propose a configuration by TPE into x. */
static void
propose_tpe(mop_tpe *t, double *x)
{
	int32_t		ng,
				nb;

	groups(t, &ng, &nb);
	for (int32_t i = 0; i < t->np; i++)
	{
		const mop_param *q = &t->space[i];
		parzen		l,
					g;
		double		best = NAN,
					best_r = -INFINITY;

		if (!mop_param_active(t->space, x, i))
		{
			x[i] = NAN;
			continue;
		}
		fit(t, i, t->good, ng, 0, &l);
		fit(t, i, t->bad, nb, 5, &g);
		for (int32_t c = 0; c < t->o.n_ei_candidates; c++)
		{
			double		y = draw(t, &l),
						r = log_pdf(&l, y) - log_pdf(&g, y);

			if (isnan(best) || r > best_r)
			{
				best = y;
				best_r = r;
			}
		}
		x[i] = q->kind == MOP_PARAM_CHOICE ? best : from_model(q, best);
	}
}

/* Propose one configuration; returns its id. */
int32_t
mop_tpe_ask(mop_tpe *t, double *x)
{
	int32_t		id;

	if (!x)
		return MOP_SEARCH_EINVAL;
	if (grow(t) < 0)
		return MOP_SEARCH_ENOMEM;
	if (t->n_complete < t->o.n_startup)
		mop_params_sample(t->space, t->np, &t->rng, x);
	else
		propose_tpe(t, x);
	id = t->n++;
	memcpy(&t->x[(size_t) id * t->np], x, sizeof(double) * t->np);
	t->score[id] = NAN;
	t->status[id] = ST_PENDING;
	return id;
}

/* A batch of k proposals. */
int32_t
mop_tpe_propose(mop_tpe *t, int32_t k, double *x, int32_t *ids)
{
	if (k < 0 || (k > 0 && !x))
		return MOP_SEARCH_EINVAL;
	for (int32_t j = 0; j < k; j++)
	{
		int32_t		id = mop_tpe_ask(t, &x[(size_t) j * t->np]);

		if (id < 0)
			return id;
		if (ids)
			ids[j] = id;
	}
	return k;
}

/* The result of an asked trial. */
int
mop_tpe_tell(mop_tpe *t, int32_t id, double score)
{
	if (id < 0 || id >= t->n)
		return MOP_SEARCH_EINVAL;
	if (t->status[id] != ST_PENDING)
		return MOP_SEARCH_ESTATE;
	t->score[id] = score;
	t->status[id] = ST_COMPLETE;
	t->n_complete++;
	return MOP_SEARCH_OK;
}

/* A complete observation from elsewhere. */
int32_t
mop_tpe_add(mop_tpe *t, const double *x, double score)
{
	int32_t		id;
	double	   *row;

	if (!x)
		return MOP_SEARCH_EINVAL;
	if (grow(t) < 0)
		return MOP_SEARCH_ENOMEM;
	id = t->n;
	row = &t->x[(size_t) id * t->np];
	for (int32_t i = 0; i < t->np; i++)
	{
		row[i] = mop_param_active(t->space, x, i) ? mop_param_clip(&t->space[i], x[i]) : NAN;
		if (mop_param_active(t->space, row, i) && isnan(row[i]))
			return MOP_SEARCH_EINVAL;
	}
	t->n++;
	t->score[id] = score;
	t->status[id] = ST_COMPLETE;
	t->n_complete++;
	return id;
}

/* log l - log g of candidate values of one parameter. */
int
mop_tpe_log_ratio(mop_tpe *t, int32_t param, const double *cand, int32_t k, double *out)
{
	int32_t		ng,
				nb;
	parzen		l,
				g;
	const mop_param *q;

	if (param < 0 || param >= t->np || k < 0 || (k > 0 && (!cand || !out)))
		return MOP_SEARCH_EINVAL;
	if (grow(t) < 0)
		return MOP_SEARCH_ENOMEM;
	q = &t->space[param];
	groups(t, &ng, &nb);
	fit(t, param, t->good, ng, 0, &l);
	fit(t, param, t->bad, nb, 5, &g);
	for (int32_t j = 0; j < k; j++)
	{
		double		y = q->kind == MOP_PARAM_CHOICE ? cand[j] : to_model(q, cand[j]);

		out[j] = log_pdf(&l, y) - log_pdf(&g, y);
	}
	return MOP_SEARCH_OK;
}
