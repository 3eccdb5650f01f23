/*
 * tunnel: see tunnel.h. A direction reads only into an empty buffer and
 * writes it out before reading again: simple, and the slow side's
 * backpressure reaches the fast one through the socket buffers.
 *
 * a_peer (tunnel.h): the network socket a TLS layer reads for a, which
 * does not say when the peer stops sending. The tunnel watches it for
 * the peer's FIN, and ends a's direction once the kernel holds nothing
 * unread on it, a holds nothing either, and PEER_END_GRACE_MS have passed
 * for the layer to hand over what it had decrypted already. Nor does the
 * layer pass on a's half-close to the peer: once b has ended and all it
 * sent is in a, the tunnel ends (its caller's close is the layer's cue
 * to send the rest and close the connection).
 */
#include "proxy/tunnel.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#define TUNNEL_BUF (64u << 10)
#define PEER_END_GRACE_MS 300

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

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int unread(int fd)
{
	int n = 0;
	return ioctl(fd, FIONREAD, &n) < 0 ? 0 : n;
}

/* Whether the peer behind a has ended its sending and all it sent before
 * has gone through a (see the top). fin_ms: when its FIN was seen. */
static bool peer_done(int a, int peer, int64_t *fin_ms)
{
	int64_t now = now_ms();
	if (unread(peer) > 0)
		*fin_ms = now;	/* the layer is still reading it: wait on */
	return now - *fin_ms >= PEER_END_GRACE_MS && unread(a) == 0;
}

void tunnel_run(int a, int b, int a_peer, tunnel_tick_fn *tick, void *ctx)
{
	/* 128 KiB of buffers: from the heap, not a connection thread's stack. */
	struct dir *d = calloc(2, sizeof *d);
	if (!d)
		return;
	d[0].from = a, d[0].to = b;
	d[1].from = b, d[1].to = a;
	int64_t fin_ms = -1;	/* when a_peer's FIN was seen */

	while (!(d[0].shut && d[1].shut)) {
		bool watch = a_peer >= 0 && !d[0].eof;
		/* pf[0] is socket a: it feeds d[0] and drains d[1]. */
		struct pollfd pf[3];
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
		/* The FIN stays readable: watched until seen, then timed. */
		pf[2].fd = watch && fin_ms < 0 ? a_peer : -1;
		pf[2].events = POLLRDHUP;
		pf[2].revents = 0;
		if (poll(pf, 3, watch && fin_ms >= 0 ? PEER_END_GRACE_MS / 3 : -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (step(&d[0], pf[0].revents, pf[1].revents) < 0 ||
		    step(&d[1], pf[1].revents, pf[0].revents) < 0)
			break;
		if (pf[2].revents)
			fin_ms = now_ms();
		if (watch && fin_ms >= 0 && d[0].len == 0 && !d[0].eof && peer_done(a, a_peer, &fin_ms)) {
			d[0].eof = d[0].shut = true;
			shutdown(b, SHUT_WR);
		}
		if (a_peer >= 0 && d[1].shut)
			break;	/* b ended: the peer would never hear of a half-close */
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
