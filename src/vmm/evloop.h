/*
 * evloop: the main thread's epoll loop. Handlers belong to one of two
 * groups: device handlers (queue kicks, TAP, vsock sockets), which stop
 * running while the VM is paused so that paused guest memory and device
 * state do not change, and control handlers (control socket, signals),
 * which always run.
 */
#ifndef KILN_VMM_EVLOOP_H
#define KILN_VMM_EVLOOP_H

#include <stdbool.h>
#include <stdint.h>

enum ev_group { EV_DEVICE, EV_CONTROL };

typedef void (*ev_fn)(void *opaque, uint32_t events);

struct ev_handler {
	int fd;
	ev_fn fn;
	void *opaque;
	enum ev_group group;
	struct ev_handler *next;   /* in the loop's list, for cleanup */
	bool armed;                /* in the epoll set (events != 0) */
	bool dead;
};

struct evloop {
	int ep[2];                 /* one epoll set per group */
	struct ev_handler *handlers;
};

int ev_init(struct evloop *l);
void ev_close(struct evloop *l);
/* ev_add: watch fd for events (EPOLLIN...). Returns the handler or NULL. */
struct ev_handler *ev_add(struct evloop *l, enum ev_group g, int fd, uint32_t events,
			  ev_fn fn, void *opaque);
/* ev_modify: change the events watched. With 0 the fd leaves the epoll set
 * altogether, so that not even EPOLLHUP wakes the loop for it. */
int ev_modify(struct evloop *l, struct ev_handler *h, uint32_t events);
/* ev_del: stop watching; the handler is freed after the current round. */
void ev_del(struct evloop *l, struct ev_handler *h);
/* ev_run_once: wait up to timeout_ms and dispatch. While *devices_paused,
 * only control handlers run. */
int ev_run_once(struct evloop *l, int timeout_ms, const bool *devices_paused);

#endif
