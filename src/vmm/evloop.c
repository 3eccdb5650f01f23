#include "vmm/evloop.h"
#include "common/err.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

int ev_init(struct evloop *l)
{
	l->handlers = NULL;
	for (int i = 0; i < 2; i++) {
		l->ep[i] = epoll_create1(EPOLL_CLOEXEC);
		if (l->ep[i] < 0)
			return errf_sys("epoll_create1");
	}
	return 0;
}

static void reap(struct evloop *l)
{
	struct ev_handler **pp = &l->handlers;
	while (*pp) {
		if ((*pp)->dead) {
			struct ev_handler *h = *pp;
			*pp = h->next;
			free(h);
		} else {
			pp = &(*pp)->next;
		}
	}
}

void ev_close(struct evloop *l)
{
	for (struct ev_handler *h = l->handlers; h; h = h->next)
		h->dead = true;
	reap(l);
	for (int i = 0; i < 2; i++)
		if (l->ep[i] >= 0)
			close(l->ep[i]);
}

struct ev_handler *ev_add(struct evloop *l, enum ev_group g, int fd, uint32_t events,
			  ev_fn fn, void *opaque)
{
	struct ev_handler *h = calloc(1, sizeof *h);
	if (!h) {
		errf(ENOMEM, "out of memory");
		return NULL;
	}
	*h = (struct ev_handler){ .fd = fd, .fn = fn, .opaque = opaque, .group = g };
	struct epoll_event ev = { .events = events, .data.ptr = h };
	if (events && epoll_ctl(l->ep[g], EPOLL_CTL_ADD, fd, &ev) < 0) {
		errf_sys("epoll_ctl add fd %d", fd);
		free(h);
		return NULL;
	}
	h->armed = events != 0;
	h->next = l->handlers;
	l->handlers = h;
	return h;
}

int ev_modify(struct evloop *l, struct ev_handler *h, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = h };
	int op = !events ? EPOLL_CTL_DEL : h->armed ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (!events && !h->armed)
		return 0;
	if (epoll_ctl(l->ep[h->group], op, h->fd, &ev) < 0)
		return errf_sys("epoll_ctl fd %d", h->fd);
	h->armed = events != 0;
	return 0;
}

void ev_del(struct evloop *l, struct ev_handler *h)
{
	if (!h || h->dead)
		return;
	if (h->armed)
		epoll_ctl(l->ep[h->group], EPOLL_CTL_DEL, h->fd, NULL);
	h->dead = true;
}

int ev_run_once(struct evloop *l, int timeout_ms, const bool *devices_paused)
{
	struct pollfd pfd[2] = {
		{ .fd = l->ep[EV_CONTROL], .events = POLLIN },
		{ .fd = l->ep[EV_DEVICE], .events = POLLIN },
	};
	int n = poll(pfd, *devices_paused ? 1 : 2, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : errf_sys("poll");
	for (int g = 0; g < 2; g++) {
		/* A control handler may just have paused the VM. */
		if (g == 1 && *devices_paused)
			break;
		if (!(pfd[g].revents & POLLIN))
			continue;
		struct epoll_event evs[64];
		int k = epoll_wait(pfd[g].fd, evs, 64, 0);
		for (int i = 0; i < k; i++) {
			struct ev_handler *h = evs[i].data.ptr;
			if (!h->dead)
				h->fn(h->opaque, evs[i].events);
		}
	}
	reap(l);
	return 0;
}
