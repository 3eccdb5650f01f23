/*
 * A minimal harness for native unit tests: each case is a function that
 * returns 0 or fails with T_ASSERT, and prints one line, "PASS name" or
 * "FAIL name: why", which tests/run counts. Include from one file only.
 */
#ifndef KILN_UNIT_H
#define KILN_UNIT_H

#include <stdio.h>
#include <string.h>

/* Failure messages quote whatever came back; cutting them short is fine. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static char t_why[1024];
static int t_failed;

#define T_ASSERT(cond, ...)                                                   \
	do {                                                                  \
		if (!(cond)) {                                                \
			int t_n = snprintf(t_why, sizeof t_why, "%s:%d: ",    \
					   __FILE__, __LINE__);               \
			snprintf(t_why + t_n, sizeof t_why - (size_t)t_n, __VA_ARGS__); \
			return 1;                                             \
		}                                                             \
	} while (0)

static void t_run(const char *name, int (*fn)(void))
{
	t_why[0] = 0;
	if (fn() == 0) {
		printf("PASS %s%s%s\n", name, t_why[0] ? ": " : "", t_why);
	} else {
		printf("FAIL %s: %s\n", name, t_why);
		t_failed++;
	}
	fflush(stdout);
}

/* A detail for the PASS line. */
#define T_NOTE(...) snprintf(t_why, sizeof t_why, __VA_ARGS__)

#define T_RUN(fn) t_run(#fn, fn)

#endif
