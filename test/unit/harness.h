/*
 * harness.h -- a minimal unit-test runner: TEST() registers a function,
 * CHECK() records a failure without stopping the test, and main() ends with
 * the line "N passed, N failed".
 */
#ifndef MOP_TEST_HARNESS_H
#define MOP_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn) (void);

void		harness_register(const char *name, test_fn fn);
extern int	harness_failures;	/* failures in the running test */

#define TEST(name) \
	static void name(void); \
	__attribute__((constructor)) static void register_##name(void) \
	{ harness_register(#name, name); } \
	static void name(void)

#define CHECK(cond) do { \
	if (!(cond)) { \
		harness_failures++; \
		fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
	} } while (0)

#define CHECKF(cond, ...) do { \
	if (!(cond)) { \
		harness_failures++; \
		fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
	} } while (0)

#define CHECK_OK(expr) do { \
	nn_error e_ = {0}; \
	nn_status s_ = (expr); \
	(void) e_; \
	CHECKF(s_ == NN_OK, "%s returned %s", #expr, nn_status_name(s_)); \
	} while (0)

/* |a - b| <= tol * max(1, |a|, |b|) */
static inline int
close_enough(double a, double b, double tol)
{
	double		s = fabs(a) > fabs(b) ? fabs(a) : fabs(b);

	return fabs(a - b) <= tol * (s > 1.0 ? s : 1.0);
}

#endif
