/*
 * sched.c -- the MOP scheduler core.  See sched.h for the model.
 *
 * State per model: its epoch budget, epochs done, which partitions it has
 * visited in the current epoch, whether it is busy, and a running estimate
 * of what one of its sub-epochs costs.  mop_sched_next scans the models once
 * (O(models) per decision, which is nothing next to a sub-epoch of training)
 * and picks among the eligible ones by the configured policy, breaking ties
 * uniformly at random with reservoir sampling from the scheduler's own seeded
 * generator, so a run's schedule is reproducible from its seed and the order
 * of events.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mop_sched.h"
#include "../common/splitmix64.h"

typedef struct model_state
{
	int32_t		target;			/* epoch budget */
	int32_t		done;			/* epochs completed */
	int32_t		n_visited;		/* partitions visited in the current epoch */
	int32_t		busy;
	int32_t		stopped;
	int32_t		started;		/* has been given a task (or restored with progress) */
	double		cost_sum;		/* observed sub-epoch costs */
	int64_t		cost_n;
	double		hint;			/* a sub-epoch's cost from a profile (0: none) */
	double		priority;
	uint8_t    *visited;		/* [P] */
	int32_t    *seq;			/* fixed visiting sequence (replay), or NULL */
	int32_t		seq_len;
	int64_t		hold;			/* trains no sub-epoch past this many (-1: no hold) */
	int32_t		only;			/* its next task's partition (-1: any) */
} model_state;

struct mop_sched
{
	int32_t		W,
				P;
	int			deterministic;
	mop_pick	pick;
	uint64_t	seed;
	uint64_t	rng;
	int32_t		n,
				cap;
	model_state *m;
	double		all_cost_sum;
	int64_t		all_cost_n;
	double		hint_sum;		/* hints of all models that have one */
	int32_t		hint_n;
	double		cal_cost;		/* observed costs of hinted models' sub-epochs, */
	double		cal_hint;		/* and those models' hints: hints' calibration */
	int32_t		n_perms;		/* cached per-epoch permutations */
	int32_t   **perms;
	uint8_t    *holds;			/* [W * P]: worker w holds a copy of partition p;
								 * NULL: p belongs to worker p % W */
	int32_t    *held;			/* with holds: worker w's partitions, ascending, */
	int32_t    *held_at;		/* at held[held_at[w] .. held_at[w + 1]) */
	int32_t    *up_copies;		/* with holds: [P], the up workers holding p */
	uint8_t    *down;			/* [W]: worker w is down (its segment failed) */
};

static int64_t remaining(const mop_sched *s, const model_state *ms);

/* the scheduler's generator and its hash for orders (src/common/splitmix64.h) */
static uint64_t
mix(uint64_t x)
{
	return mop_splitmix64_hash(x);
}

static uint64_t
next_rand(mop_sched *s)
{
	s->rng += MOP_SPLITMIX64_GAMMA;
	return mix(s->rng);
}

/* Uniform integer in [0, n). */
static uint64_t
below(uint64_t r, uint64_t n)
{
	return (uint64_t) (((unsigned __int128) r * n) >> 64);
}

/* New scheduler. */
mop_sched *
mop_sched_new(int n_workers, int n_partitions, uint64_t seed, int deterministic,
			  mop_pick pick)
{
	mop_sched  *s;

	if (n_workers < 1 || n_partitions < n_workers || n_partitions > 1 << 20 ||
		pick < MOP_PICK_RANDOM || pick > MOP_PICK_FIFO)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->W = n_workers;
	s->P = n_partitions;
	s->seed = seed;
	s->rng = mix(seed ^ UINT64_C(0x5CED));
	s->deterministic = deterministic;
	s->pick = pick;
	if (!(s->down = calloc(n_workers, 1)))
	{
		free(s);
		return NULL;
	}
	return s;
}

/*
 * (Re)build, from the holds matrix and the down flags, each worker's list
 * of partitions and each partition's count of up copies; -1 out of memory.
 */
static int
index_holds(mop_sched *s)
{
	int32_t    *held;

	s->held_at[0] = 0;
	memset(s->up_copies, 0, sizeof(int32_t) * s->P);
	for (int w = 0; w < s->W; w++)
	{
		int32_t		n = 0;

		for (int p = 0; p < s->P; p++)
			n += s->holds[(size_t) w * s->P + p];
		s->held_at[w + 1] = s->held_at[w] + n;
	}
	if (!(held = malloc(sizeof(int32_t) * (s->held_at[s->W] ? s->held_at[s->W] : 1))))
		return -1;
	free(s->held);
	s->held = held;
	for (int w = 0, k = 0; w < s->W; w++)
		for (int p = 0; p < s->P; p++)
			if (s->holds[(size_t) w * s->P + p])
			{
				s->held[k++] = p;
				if (!s->down[w])
					s->up_copies[p]++;
			}
	return 0;
}

/* New scheduler whose workers hold the partitions that holds[w * P + p] says. */
mop_sched *
mop_sched_new_placed(int n_workers, int n_partitions, const uint8_t *holds,
					 uint64_t seed, int deterministic, mop_pick pick)
{
	mop_sched  *s;

	if (!holds || n_workers < 1 || n_workers > 1 << 16 || n_partitions < 1)
		return NULL;
	/* every partition is held (a worker may hold nothing yet: a spare) */
	for (int p = 0; p < n_partitions; p++)
	{
		int			any = 0;

		for (int w = 0; w < n_workers && !any; w++)
			any = holds[(size_t) w * n_partitions + p] != 0;
		if (!any)
			return NULL;
	}
	/* the plain constructor wants P >= W, which copies make unnecessary */
	if (!(s = mop_sched_new(1, n_partitions, seed, deterministic, pick)))
		return NULL;
	free(s->down);
	s->W = n_workers;
	s->down = calloc(n_workers, 1);
	s->holds = malloc((size_t) n_workers * n_partitions);
	s->held_at = malloc(sizeof(int32_t) * ((size_t) n_workers + 1));
	s->up_copies = calloc(n_partitions, sizeof(int32_t));
	if (!s->down || !s->holds || !s->held_at || !s->up_copies)
	{
		mop_sched_free(s);
		return NULL;
	}
	for (size_t i = 0; i < (size_t) n_workers * n_partitions; i++)
		s->holds[i] = holds[i] != 0;
	if (index_holds(s) != 0)
	{
		mop_sched_free(s);
		return NULL;
	}
	return s;
}

/* Does worker w, up, hold partition p? */
static inline int
worker_holds(const mop_sched *s, int32_t w, int32_t p)
{
	if (s->down[w])
		return 0;
	if (s->holds)
		return s->holds[(size_t) w * s->P + p];
	return p % s->W == w;
}

/* Worker w gains (on) or loses a copy of partition p (a placed scheduler only). */
int
mop_sched_set_holds(mop_sched *s, int32_t worker, int32_t partition, int on)
{
	if (!s->holds || worker < 0 || worker >= s->W || partition < 0 || partition >= s->P)
		return -1;
	if (s->holds[(size_t) worker * s->P + partition] == (on != 0))
		return 0;
	s->holds[(size_t) worker * s->P + partition] = on != 0;
	return index_holds(s);
}

/* Workers of a scheduler that is not placed: p belongs to worker p % n_workers. */
int
mop_sched_set_n_workers(mop_sched *s, int n_workers)
{
	uint8_t    *down;

	if (s->holds || n_workers < 1 || n_workers > s->P)
		return -1;
	if (n_workers == s->W)
		return 0;
	if (!(down = calloc(n_workers, 1)))
		return -1;
	memcpy(down, s->down, n_workers < s->W ? n_workers : s->W);
	free(s->down);
	s->down = down;
	s->W = n_workers;
	return 0;
}

/* Mark a worker down (its partitions' copies unreachable) or up again. */
void
mop_sched_set_worker_down(mop_sched *s, int32_t worker, int down)
{
	if (worker < 0 || worker >= s->W || s->down[worker] == (down != 0))
		return;
	s->down[worker] = down != 0;
	if (s->holds)
		for (int32_t j = s->held_at[worker]; j < s->held_at[worker + 1]; j++)
			s->up_copies[s->held[j]] += down ? -1 : 1;
}

int
mop_sched_worker_down(const mop_sched *s, int32_t worker)
{
	return worker >= 0 && worker < s->W && s->down[worker];
}

/*
 * A partition that some model still has to visit and that no up worker
 * holds, or -1: the run cannot finish until a copy of it comes back.
 */
int32_t
mop_sched_unreachable(const mop_sched *s)
{
	for (int32_t p = 0; p < s->P; p++)
	{
		int			held = 0;

		for (int32_t w = 0; w < s->W && !held; w++)
			held = worker_holds(s, w, p);
		if (held)
			continue;
		for (int32_t i = 0; i < s->n; i++)
			if (remaining(s, &s->m[i]) > 0 && !s->m[i].visited[p])
				return p;
	}
	return -1;
}

/* Free a scheduler. */
void
mop_sched_free(mop_sched *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
	{
		free(s->m[i].visited);
		free(s->m[i].seq);
	}
	free(s->m);
	for (int i = 0; i < s->n_perms; i++)
		free(s->perms[i]);
	free(s->perms);
	free(s->holds);
	free(s->held);
	free(s->held_at);
	free(s->up_copies);
	free(s->down);
	free(s);
}

/* Add a model; returns its index. */
int32_t
mop_sched_add_model(mop_sched *s, int32_t epochs)
{
	model_state *ms;

	if (epochs < 0)
		return -1;
	if (s->n == s->cap)
	{
		int32_t		cap = s->cap ? 2 * s->cap : 16;
		model_state *m = realloc(s->m, sizeof(model_state) * cap);

		if (!m)
			return -1;
		s->m = m;
		s->cap = cap;
	}
	ms = &s->m[s->n];
	memset(ms, 0, sizeof(*ms));
	ms->visited = calloc(s->P, 1);
	if (!ms->visited)
		return -1;
	ms->target = epochs;
	ms->hold = -1;
	ms->only = -1;
	return s->n++;
}

int32_t
mop_sched_n_models(const mop_sched *s)
{
	return s->n;
}

void
mop_sched_set_epochs(mop_sched *s, int32_t model, int32_t epochs)
{
	if (model >= 0 && model < s->n && epochs >= 0)
		s->m[model].target = epochs;
}

void
mop_sched_stop(mop_sched *s, int32_t model)
{
	if (model >= 0 && model < s->n)
		s->m[model].stopped = 1;
}

/* Hold a model after `subepochs` sub-epochs in all (-1: release it). */
void
mop_sched_hold(mop_sched *s, int32_t model, int64_t subepochs)
{
	if (model >= 0 && model < s->n)
		s->m[model].hold = subepochs < 0 ? -1 : subepochs;
}

/* Sub-epochs a model has trained in all. */
int64_t
mop_sched_position(const mop_sched *s, int32_t model)
{
	if (model < 0 || model >= s->n)
		return 0;
	return (int64_t) s->m[model].done * s->P + s->m[model].n_visited;
}

/* Fix a model's visiting sequence; returns 0, or -1 on bad input. */
int
mop_sched_set_sequence(mop_sched *s, int32_t model, const int32_t *seq, int32_t len)
{
	int32_t    *copy;

	if (model < 0 || model >= s->n || len < 0)
		return -1;
	for (int32_t i = 0; i < len; i++)
		if (seq[i] < 0 || seq[i] >= s->P)
			return -1;
	copy = malloc(sizeof(int32_t) * (len ? len : 1));
	if (!copy)
		return -1;
	memcpy(copy, seq, sizeof(int32_t) * len);
	free(s->m[model].seq);
	s->m[model].seq = copy;
	s->m[model].seq_len = len;
	return 0;
}

void
mop_sched_set_priority(mop_sched *s, int32_t model, double priority)
{
	if (model >= 0 && model < s->n)
		s->m[model].priority = priority;
}

void
mop_sched_set_cost_hint(mop_sched *s, int32_t model, double cost)
{
	model_state *ms;

	if (model < 0 || model >= s->n || !(cost > 0) || !isfinite(cost))
		return;
	ms = &s->m[model];
	if (ms->hint > 0)
	{
		s->hint_sum -= ms->hint;
		s->hint_n--;
	}
	ms->hint = cost;
	s->hint_sum += cost;
	s->hint_n++;
}

/* Seeded Fisher-Yates permutation of 0..P-1 for one epoch, into perm. */
static void
epoch_perm(uint64_t seed, int32_t epoch, int32_t P, int32_t *perm)
{
	uint64_t	h = mix(seed ^ mix((uint64_t) epoch + 0x1234));

	for (int32_t i = 0; i < P; i++)
		perm[i] = i;
	for (int32_t i = P - 1; i > 0; i--)
	{
		int32_t		j,
					t;

		h = mix(h);
		j = (int32_t) below(h, (uint64_t) i + 1);
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

/*
 * k-th partition a model visits in an epoch (deterministic mode): position
 * k of a per-epoch seeded permutation, shifted by the model index so that
 * models at the same position want different partitions (a Latin square).
 * Permutations are computed once per epoch and cached.
 */
int32_t
mop_sched_order(const mop_sched *cs, int32_t model, int32_t epoch, int32_t k)
{
	mop_sched  *s = (mop_sched *) cs;	/* the cache is not logical state */
	int32_t		pos = (int32_t) (((int64_t) k + model) % s->P);

	if (epoch < 0)
		return pos;
	if (epoch >= s->n_perms)
	{
		int32_t		n = epoch + 8;
		int32_t   **p = realloc(s->perms, sizeof(int32_t *) * n);

		if (!p)
			return pos;
		for (int32_t e = s->n_perms; e < n; e++)
			p[e] = NULL;
		s->perms = p;
		s->n_perms = n;
	}
	if (!s->perms[epoch])
	{
		if (!(s->perms[epoch] = malloc(sizeof(int32_t) * s->P)))
			return pos;
		epoch_perm(s->seed, epoch, s->P, s->perms[epoch]);
	}
	return s->perms[epoch][pos];
}

/*
 * Estimated cost of one sub-epoch of model i: what its sub-epochs took so
 * far; before its first, its profiled cost (hint) scaled by how the
 * hinted models' sub-epochs compared with their hints so far (profiles
 * measure a few minibatches, a sub-epoch also pays its hop); else the mean
 * of all sub-epochs so far, or of all hints, or 1.
 */
static double
est_cost(const mop_sched *s, const model_state *ms)
{
	if (ms->cost_n > 0)
		return ms->cost_sum / ms->cost_n;
	if (ms->hint > 0)
		return ms->hint * (s->cal_hint > 0 && s->cal_cost > 0 ? s->cal_cost / s->cal_hint : 1.0);
	if (s->all_cost_n > 0)
		return s->all_cost_sum / s->all_cost_n;
	if (s->hint_n > 0)
		return s->hint_sum / s->hint_n;
	return 1.0;
}

/* Sub-epochs a model still has to train. */
static int64_t
remaining(const mop_sched *s, const model_state *ms)
{
	int64_t		r;

	if (ms->stopped || ms->done >= ms->target)
		return 0;
	r = (int64_t) (ms->target - ms->done) * s->P - ms->n_visited;
	if (ms->seq)
	{
		int64_t		left = ms->seq_len - ((int64_t) ms->done * s->P + ms->n_visited);

		if (left < r)
			r = left > 0 ? left : 0;
	}
	if (ms->hold >= 0)
	{
		int64_t		left = ms->hold - ((int64_t) ms->done * s->P + ms->n_visited);

		if (left < r)
			r = left > 0 ? left : 0;
	}
	return r;
}

/* Partition of worker w that model i should train next, or -1. */
static int32_t
partition_for(mop_sched *s, int32_t i, int32_t w)
{
	model_state *ms = &s->m[i];

	if (ms->only >= 0)
		return worker_holds(s, w, ms->only) && !ms->visited[ms->only] ? ms->only : -1;
	if (ms->seq)
	{
		int64_t		pos = (int64_t) ms->done * s->P + ms->n_visited;
		int32_t		p;

		if (pos >= ms->seq_len)
			return -1;
		p = ms->seq[pos];
		return (worker_holds(s, w, p) && !ms->visited[p]) ? p : -1;
	}
	if (s->deterministic)
	{
		int32_t		p = mop_sched_order(s, i, ms->done, ms->n_visited);

		return worker_holds(s, w, p) ? p : -1;
	}
	if (s->holds)
	{
		if (s->down[w])
			return -1;
		for (int32_t j = s->held_at[w]; j < s->held_at[w + 1]; j++)
			if (!ms->visited[s->held[j]])
				return s->held[j];
		return -1;
	}
	for (int32_t p = w; p < s->P; p += s->W)
		if (!ms->visited[p] && worker_holds(s, w, p))
			return p;
	return -1;
}

static const char *const pick_names[] = {"random", "longest", "convergence", "fifo"};

/* The SQL name of a pick policy. */
const char *
mop_pick_name(mop_pick pick)
{
	if (pick < MOP_PICK_RANDOM || pick > MOP_PICK_FIFO)
		return "random";
	return pick_names[pick];
}

/* The policy of a SQL name; -1 if unknown. */
int
mop_pick_parse(const char *name)
{
	for (int i = 0; i <= MOP_PICK_FIFO; i++)
		if (name && strcmp(name, pick_names[i]) == 0)
			return i;
	return -1;
}

/* Next task for idle worker w. */
mop_next
mop_sched_next(mop_sched *s, int32_t worker, mop_task *task)
{
	int32_t		best = -1,
				best_p = -1;
	double		best_key = 0,
				best_key2 = 0;
	uint64_t	ties = 0;
	int			any_left = 0;

	if (worker < 0 || worker >= s->W)
		return MOP_DONE;
	for (int32_t i = 0; i < s->n; i++)
	{
		model_state *ms = &s->m[i];
		int32_t		p;
		double		key,
					key2 = 0;

		if (remaining(s, ms) > 0 || ms->busy)
			any_left = 1;
		if (ms->busy || remaining(s, ms) == 0)
			continue;
		if ((p = partition_for(s, i, worker)) < 0)
			continue;
		switch (s->pick)
		{
			case MOP_PICK_LONGEST:
				key = (double) remaining(s, ms) * est_cost(s, ms);
				break;
			case MOP_PICK_PRIORITY:
				/*
				 * Ties (models without results often share one priority)
				 * go to a started model -- finish what has begun, its
				 * result comes sooner -- then to the unstarted model with
				 * the most work granted: it can go deepest if it is good.
				 */
				key = ms->priority;
				key2 = ms->started ? INFINITY : (double) remaining(s, ms);
				break;
			case MOP_PICK_FIFO:
				key = -(double) i;
				break;
			default:
				key = 0;
				break;
		}
		if (best < 0 || key > best_key || (key == best_key && key2 > best_key2))
		{
			best = i;
			best_p = p;
			best_key = key;
			best_key2 = key2;
			ties = 1;
		}
		else if (key == best_key && key2 == best_key2)
		{
			/* reservoir sampling: each tied candidate equally likely */
			ties++;
			if (below(next_rand(s), ties) == 0)
			{
				best = i;
				best_p = p;
			}
		}
	}
	if (best < 0)
		return any_left ? MOP_WAIT : MOP_DONE;
	/*
	 * In asynchronous mode, also pick among the worker's unvisited
	 * partitions: uniformly, or with placed data by their copies' load.
	 */
	if (!s->deterministic && !s->m[best].seq && s->m[best].only < 0 && (s->holds || s->W < s->P))
	{
		int32_t		cnt = 0;

		if (s->holds)
		{
			/*
			 * Placed data: the partition with the most work waiting for
			 * each up copy of it -- the estimated work of the models yet to
			 * visit it this epoch, over the up workers that hold it -- so
			 * that a partition with fewer copies (next to a failed segment)
			 * is not left for the end; ties uniformly at random.  The
			 * worker is up and holds best_p (partition_for).
			 */
			double		best_pr = -1;

			for (int32_t j = s->held_at[worker]; j < s->held_at[worker + 1]; j++)
			{
				int32_t		p = s->held[j];
				double		waiting = 0,
							pr;

				if (s->m[best].visited[p])
					continue;
				for (int32_t i = 0; i < s->n; i++)
					if (!s->m[i].visited[p] && remaining(s, &s->m[i]) > 0)
						waiting += est_cost(s, &s->m[i]);
				pr = waiting / s->up_copies[p];
				if (pr > best_pr)
				{
					best_pr = pr;
					best_p = p;
					cnt = 1;
				}
				else if (pr == best_pr && below(next_rand(s), ++cnt) == 0)
					best_p = p;
			}
		}
		else
			for (int32_t p = worker; p < s->P; p += s->W)
				if (!s->m[best].visited[p] && worker_holds(s, worker, p) &&
					below(next_rand(s), ++cnt) == 0)
					best_p = p;
	}
	s->m[best].busy = 1;
	s->m[best].started = 1;
	task->model = best;
	task->partition = best_p;
	task->epoch = s->m[best].done;
	task->last_of_epoch = s->m[best].n_visited == s->P - 1;
	return MOP_ASSIGNED;
}

/* Record a finished task; returns 1 if it completed the model's epoch. */
int
mop_sched_complete(mop_sched *s, const mop_task *t, double cost)
{
	model_state *ms;

	if (t->model < 0 || t->model >= s->n)
		return 0;
	ms = &s->m[t->model];
	ms->busy = 0;
	ms->only = -1;
	if (t->partition < 0 || t->partition >= s->P || ms->visited[t->partition] ||
		t->epoch != ms->done)
		return 0;
	ms->visited[t->partition] = 1;
	ms->n_visited++;
	if (cost > 0)
	{
		ms->cost_sum += cost;
		ms->cost_n++;
		s->all_cost_sum += cost;
		s->all_cost_n++;
		if (ms->hint > 0)
		{
			s->cal_cost += cost;
			s->cal_hint += ms->hint;
		}
	}
	if (ms->n_visited == s->P)
	{
		ms->done++;
		ms->n_visited = 0;
		memset(ms->visited, 0, s->P);
		return 1;
	}
	return 0;
}

/* Release a model whose task failed; nothing was visited. */
void
mop_sched_abort(mop_sched *s, const mop_task *t)
{
	if (t->model >= 0 && t->model < s->n)
		s->m[t->model].busy = 0;
}

void
mop_sched_only(mop_sched *s, int32_t model, int32_t partition)
{
	if (model >= 0 && model < s->n)
		s->m[model].only = partition >= 0 && partition < s->P ? partition : -1;
}

/* Restore a model's progress (resume). */
void
mop_sched_restore(mop_sched *s, int32_t model, int32_t epochs_done,
				  const int32_t *visited, int32_t n_visited)
{
	model_state *ms;

	if (model < 0 || model >= s->n)
		return;
	ms = &s->m[model];
	ms->done = epochs_done;
	ms->n_visited = 0;
	memset(ms->visited, 0, s->P);
	for (int32_t i = 0; i < n_visited; i++)
		if (visited[i] >= 0 && visited[i] < s->P && !ms->visited[visited[i]])
		{
			ms->visited[visited[i]] = 1;
			ms->n_visited++;
		}
	ms->started = ms->done > 0 || ms->n_visited > 0;
}

int
mop_sched_started(const mop_sched *s, int32_t model)
{
	return s->m[model].started;
}

int32_t
mop_sched_epochs_done(const mop_sched *s, int32_t model)
{
	return s->m[model].done;
}

int32_t
mop_sched_visited(const mop_sched *s, int32_t model)
{
	return s->m[model].n_visited;
}

int
mop_sched_busy(const mop_sched *s, int32_t model)
{
	return s->m[model].busy;
}

/* Models with work left or busy. */
int32_t
mop_sched_active(const mop_sched *s)
{
	int32_t		n = 0;

	for (int32_t i = 0; i < s->n; i++)
		n += s->m[i].busy || remaining(s, &s->m[i]) > 0;
	return n;
}

/* Sub-epochs a model still has to train. */
int64_t
mop_sched_remaining(const mop_sched *s, int32_t model)
{
	if (model < 0 || model >= s->n)
		return 0;
	return remaining(s, &s->m[model]);
}

/* No work left and nothing running. */
int
mop_sched_finished(const mop_sched *s)
{
	for (int32_t i = 0; i < s->n; i++)
		if (s->m[i].busy || remaining(s, &s->m[i]) > 0)
			return 0;
	return 1;
}
