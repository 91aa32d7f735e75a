/*
 * harness.c -- runs every registered test (or those named on the command
 * line) and prints "N passed, N failed" as its last line.
 */
#include "harness.h"

#define MAX_TESTS 512

static struct
{
	const char *name;
	test_fn		fn;
}			tests[MAX_TESTS];
static int	n_tests;
int			harness_failures;

/* Called by TEST() constructors. */
void
harness_register(const char *name, test_fn fn)
{
	if (n_tests < MAX_TESTS)
	{
		tests[n_tests].name = name;
		tests[n_tests].fn = fn;
		n_tests++;
	}
}

/* Is name selected by the command line (no arguments: all)? */
static int
selected(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strstr(name, argv[i]))
			return 1;
	return 0;
}

int
main(int argc, char **argv)
{
	int			passed = 0,
				failed = 0;

	for (int i = 0; i < n_tests; i++)
	{
		if (!selected(tests[i].name, argc, argv))
			continue;
		harness_failures = 0;
		tests[i].fn();
		if (harness_failures == 0)
		{
			passed++;
			printf("ok   %s\n", tests[i].name);
		}
		else
		{
			failed++;
			printf("FAIL %s (%d checks)\n", tests[i].name, harness_failures);
		}
		fflush(stdout);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
