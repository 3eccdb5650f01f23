/*
 * tunnel: see tunnel.h. A direction reads only into an empty buffer and
 * writes it out before reading again: simple, and the slow side's
 * backpressure reaches the fast one through the socket buffers.
 */
#include "proxy/tunnel.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

#define TUNNEL_BUF (64u << 10)

struct dir {
	int from, to;
	char buf[TUNNEL_BUF];
	size_t off, len;
	bool eof, shut;
};

/* Move what can move in one direction. -1 when the tunnel must end. */
static int step(struct dir *d, short from_rev, short to_rev)
{
	if (d->len > d->off && (to_rev & (POLLOUT | POLLERR | POLLHUP))) {
		ssize_t n = send(d->to, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (n > 0)
			d->off += (size_t)n;
		if (d->off == d->len)
			d->off = d->len = 0;
	}
	if (!d->eof && d->len == 0 && (from_rev & (POLLIN | POLLERR | POLLHUP | POLLRDHUP))) {
		ssize_t n = recv(d->from, d->buf, sizeof d->buf, MSG_DONTWAIT);
		if (n == 0)
			d->eof = true;
		else if (n > 0)
			d->len = (size_t)n;
		else if (errno != EAGAIN && errno != EINTR)
			return -1;
	}
	if (d->eof && d->len == 0 && !d->shut) {
		shutdown(d->to, SHUT_WR);
		d->shut = true;
	}
	return 0;
}

void tunnel_run(int a, int b, tunnel_tick_fn *tick, void *ctx)
{
	/* 128 KiB of buffers: from the heap, not a connection thread's stack. */
	struct dir *d = calloc(2, sizeof *d);
	if (!d)
		return;
	d[0].from = a, d[0].to = b;
	d[1].from = b, d[1].to = a;

	while (!(d[0].shut && d[1].shut)) {
		/* pf[0] is socket a: it feeds d[0] and drains d[1]. */
		struct pollfd pf[2];
		for (int i = 0; i < 2; i++) {
			pf[i].fd = d[i].from;
			pf[i].events = (!d[i].eof && d[i].len == 0 ? POLLIN : 0) |
				       (d[!i].len > d[!i].off ? POLLOUT : 0);
			pf[i].revents = 0;
			/* Nothing to do on this side: leave it out, or its
			 * hang-up would wake the loop until the other moves. */
			if (!pf[i].events)
				pf[i].fd = -1;
		}
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (step(&d[0], pf[0].revents, pf[1].revents) < 0 ||
		    step(&d[1], pf[1].revents, pf[0].revents) < 0)
			break;
		if (tick)
			tick(ctx);
	}
	free(d);
}

int tunnel_send_all(int fd, const void *p, size_t n, int wait_ms)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			if (poll(&pf, 1, wait_ms) <= 0)
				return -1;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w, n -= (size_t)w;
	}
	return 0;
}
