/*
 * test.h: the smallest test harness. Each CHECK prints nothing on success;
 * a test function reports one PASS or FAIL line (the format tests/run
 * counts) depending on whether any of its checks failed.
 */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include <stdio.h>

static int test_failed;

#define CHECK(cond) do { \
	if (!(cond)) { \
		printf("  check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
		test_failed = 1; \
	} \
} while (0)

#define RUN(fn) do { \
	test_failed = 0; \
	fn(); \
	printf("%s %s\n", test_failed ? "FAIL" : "PASS", #fn); \
	failures += test_failed; \
} while (0)

#endif
