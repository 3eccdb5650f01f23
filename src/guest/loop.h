/*
 * A small epoll event loop in the style of Redis's ae: handlers are kept in
 * a table indexed by file descriptor, so an event for a descriptor that was
 * closed earlier in the same batch finds either nothing or the descriptor's
 * new owner (which then sees a spurious wakeup and EAGAIN) - never a freed
 * object.
 */
#ifndef KILN_LOOP_H
#define KILN_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct loop;
typedef void loop_fn(struct loop *l, int fd, uint32_t events, void *ctx);

struct loop_fd {
	loop_fn *fn;
	void *ctx;
	uint32_t events;	/* EPOLLIN / EPOLLOUT wanted; 0 = paused */
	bool in_epoll;
};

struct loop {
	int epfd;
	struct loop_fd *fds;
	int cap;
};

int loop_init(struct loop *l);
void loop_free(struct loop *l);
/* Watch fd for `events` (EPOLLIN, EPOLLOUT or both; 0 registers it
 * paused). 0 or -errno. */
int loop_add(struct loop *l, int fd, uint32_t events, loop_fn *fn, void *ctx);
/* Change what fd waits for. A paused descriptor (0) is taken out of the
 * epoll set, so that a hang-up it cannot act on does not wake the loop
 * over and over. */
int loop_mod(struct loop *l, int fd, uint32_t events);
/* Forget fd; call before closing it. */
void loop_del(struct loop *l, int fd);
/* Wait up to timeout_ms (-1: forever) and run the handlers of what is
 * ready. 0 or -errno. */
int loop_once(struct loop *l, int timeout_ms);

#endif
