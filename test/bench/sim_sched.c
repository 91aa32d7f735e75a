/*
 * sim_sched.c -- scale benchmark of the MOP scheduler core by simulation:
 * 1,000 configurations of mixed cost over 64 workers / 64 partitions.
 * Reports makespan against the lower bound max(total work / W, longest
 * model's total work) for each pick policy.  Target: within 5%.
 * Then small uneven grids (a long model among short ones, on 2 and 4
 * workers), where the longest-first policy depends on knowing which models
 * are long: without a profile, with a profile off by up to 30 %, and with
 * an exact one, over 200 draws each.
 *
 *   make -C test/bench sim   (or: cc -O2 -Isrc/search test/bench/sim_sched.c src/search/sched.c src/search/sim.c)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mop_sched.h"
#include "mop_sim.h"

static uint64_t
rnd(uint64_t *s)
{
	uint64_t	z = (*s += UINT64_C(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static double
unif(uint64_t *s)
{
	return (double) (rnd(s) >> 11) / 9007199254740992.0;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/*
 * 16 configurations, one of them 12 times as long (a CNN among MLPs), W
 * workers and partitions, 2 epochs; makespan / bound for random, longest
 * without hints, with hints off by up to 30 %, with exact hints; 200 draws
 * (seeds), median and worst.
 */
static void
uneven(int W)
{
	enum {N = 16, DRAWS = 200};
	static const char *names[] = {"random (Cerebro)", "longest, no profile", "longest, profile +-30%",
	"longest, exact profile"};
	int32_t		epochs[N];
	double		cost[N],
				hint[N],
				ratio[4][DRAWS];
	uint64_t	s = 99;

	for (int d = 0; d < DRAWS; d++)
	{
		for (int i = 0; i < N; i++)
		{
			epochs[i] = 2;
			cost[i] = (i == 11 ? 12.0 : 1.0) * (0.9 + 0.2 * unif(&s));
			hint[i] = cost[i] * (0.7 + 0.6 * unif(&s));
		}
		for (int k = 0; k < 4; k++)
		{
			mop_sim_result r;

			if (mop_sim_run(W, W, N, epochs, cost, NULL, k == 2 ? hint : k == 3 ? cost : NULL,
							(uint64_t) d + 1, 0, k == 0 ? MOP_PICK_RANDOM : MOP_PICK_LONGEST, 0, &r) != 0)
			{
				fprintf(stderr, "simulation failed\n");
				exit(1);
			}
			ratio[k][d] = r.makespan / r.lower_bound;
		}
	}
	printf("\nuneven grid: %d configurations (one 12 times as long), %d workers and partitions, 2 epochs, %d draws\n",
		   N, W, DRAWS);
	printf("%-26s %14s %14s %14s\n", "policy", "median ratio", "90th pct", "worst");
	for (int k = 0; k < 4; k++)
	{
		qsort(ratio[k], DRAWS, sizeof(double), cmp_double);
		printf("%-26s %14.4f %14.4f %14.4f\n", names[k], ratio[k][DRAWS / 2],
			   ratio[k][DRAWS * 9 / 10], ratio[k][DRAWS - 1]);
	}
}

int
main(int argc, char **argv)
{
	int			n = argc > 1 ? atoi(argv[1]) : 1000;
	int			W = argc > 2 ? atoi(argv[2]) : 64;
	int			E = argc > 3 ? atoi(argv[3]) : 5;
	int32_t    *epochs = malloc(sizeof(int32_t) * n);
	double	   *cost = malloc(sizeof(double) * n);
	uint64_t	s = 2026;
	static const char *names[] = {"random (Cerebro)", "longest-remaining-first", "priority"};

	/* mixed cost: four architecture sizes (x1, x2, x4, x8) times batch-size and noise factors */
	for (int i = 0; i < n; i++)
	{
		double		arch = (double) (1 << (rnd(&s) % 4));

		cost[i] = arch * (0.5 + unif(&s)) * (rnd(&s) % 2 ? 1.0 : 1.6);
		epochs[i] = E;
	}
	printf("MOP scheduler simulation: %d configurations, %d workers, %d partitions, %d epochs each\n",
		   n, W, W, E);
	printf("%-26s %-13s %12s %12s %8s %9s\n", "policy", "mode", "makespan", "lower bound",
		   "ratio", "sim secs");
	for (int det = 0; det <= 1; det++)
		for (int pick = 0; pick <= 1; pick++)
		{
			mop_sim_result r;
			clock_t		t0 = clock();

			if (mop_sim_run(W, W, n, epochs, cost, NULL, NULL, 7, det, pick, 0, &r) != 0)
			{
				fprintf(stderr, "simulation failed\n");
				return 1;
			}
			printf("%-26s %-13s %12.1f %12.1f %8.4f %9.2f\n", names[pick],
				   det ? "deterministic" : "asynchronous", r.makespan, r.lower_bound,
				   r.makespan / r.lower_bound, (double) (clock() - t0) / CLOCKS_PER_SEC);
		}
	uneven(2);
	uneven(4);
	return 0;
}
