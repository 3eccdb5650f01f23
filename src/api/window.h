/*
 * window: the creates window of a workspace's plan (creates_per_hour) as
 * X-RateLimit-Limit, -Remaining and -Reset (seconds) on every answer to
 * one of its keys or sessions, not only on creates. A create or fork
 * answers with its own exact count (h_sandbox.c) and leaves it here;
 * other answers read a count at most WINDOW_FRESH_MS old, kept per
 * workspace in a small table, so an answer costs at most one count of
 * the store a second per workspace.
 */
#ifndef KILN_API_WINDOW_H
#define KILN_API_WINDOW_H

#include <stdint.h>

struct req;
struct windows;

struct window_count {
	int64_t limit;			/* the plan's creates_per_hour */
	int64_t used;			/* creates in the window */
	int64_t reset_ms;		/* wall ms its oldest create leaves it; 0: none in it */
};

struct windows *windows_new(void);
void windows_free(struct windows *w);
/* The window of r's workspace: 0 and *out; 1 when its plan has no
 * creates cap (no headers); -errno when it could not be read. */
int windows_get(struct req *r, struct window_count *out);
/* A create's or fork's exact count for workspace ws. */
void windows_note(struct windows *w, const char *ws, const struct window_count *c);

#endif
