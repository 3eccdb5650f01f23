/*
 * Event loop: see loop.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "guest/loop.h"

#define LOOP_BATCH 64

int loop_init(struct loop *l)
{
	memset(l, 0, sizeof *l);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	return l->epfd < 0 ? -errno : 0;
}

void loop_free(struct loop *l)
{
	if (l->epfd >= 0)
		close(l->epfd);
	free(l->fds);
	l->fds = NULL;
	l->cap = 0;
	l->epfd = -1;
}

static int ensure_slot(struct loop *l, int fd)
{
	if (fd < 0)
		return -EBADF;
	if (fd < l->cap)
		return 0;
	int cap = l->cap ? l->cap : 64;
	while (cap <= fd)
		cap *= 2;
	struct loop_fd *n = realloc(l->fds, (size_t)cap * sizeof *n);
	if (!n)
		return -ENOMEM;
	memset(n + l->cap, 0, (size_t)(cap - l->cap) * sizeof *n);
	l->fds = n;
	l->cap = cap;
	return 0;
}

static int apply(struct loop *l, int fd, uint32_t events)
{
	struct loop_fd *s = &l->fds[fd];
	struct epoll_event ev = { .events = events, .data.fd = fd };
	int op;

	if (events == 0) {
		if (!s->in_epoll)
			goto done;
		op = EPOLL_CTL_DEL;
	} else {
		op = s->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	}
	if (epoll_ctl(l->epfd, op, fd, &ev) < 0)
		return -errno;
	s->in_epoll = events != 0;
done:
	s->events = events;
	return 0;
}

int loop_add(struct loop *l, int fd, uint32_t events, loop_fn *fn, void *ctx)
{
	int rc = ensure_slot(l, fd);
	if (rc < 0)
		return rc;
	struct loop_fd *s = &l->fds[fd];
	if (s->fn)
		return -EEXIST;
	s->fn = fn;
	s->ctx = ctx;
	s->in_epoll = false;
	rc = apply(l, fd, events);
	if (rc < 0)
		s->fn = NULL;
	return rc;
}

int loop_mod(struct loop *l, int fd, uint32_t events)
{
	if (fd < 0 || fd >= l->cap || !l->fds[fd].fn)
		return -EBADF;
	if (l->fds[fd].events == events)
		return 0;
	return apply(l, fd, events);
}

void loop_del(struct loop *l, int fd)
{
	if (fd < 0 || fd >= l->cap || !l->fds[fd].fn)
		return;
	if (l->fds[fd].in_epoll)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	memset(&l->fds[fd], 0, sizeof l->fds[fd]);
}

int loop_once(struct loop *l, int timeout_ms)
{
	struct epoll_event ev[LOOP_BATCH];
	int n = epoll_wait(l->epfd, ev, LOOP_BATCH, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		int fd = ev[i].data.fd;
		if (fd < 0 || fd >= l->cap)
			continue;
		struct loop_fd *s = &l->fds[fd];
		/* Gone, or paused by an earlier handler in this batch. */
		if (!s->fn || !s->events)
			continue;
		s->fn(l, fd, ev[i].events, s->ctx);
	}
	return 0;
}
