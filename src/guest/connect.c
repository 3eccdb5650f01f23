/*
 * CONNECT: a TCP connection inside the guest, opened by the agent for the
 * host. kilnd uses it to reach a port the user exposed (an HTTP server in
 * the sandbox) over the agent's own vsock connection, so exposed ports work
 * whatever the guest's network looks like, and the guest never needs an
 * address the host can route to.
 *
 * The connect is non-blocking, like everything in the agent: the op waits
 * for the socket to become writable. Meanwhile the connection's input is
 * paused, so nothing the client sends is parsed as a frame; bytes it sent
 * early stay in the socket and become stream data once the pipe starts.
 * A refused or failed connect is answered ERROR with the errno and the
 * connection stays usable; a successful one is answered OK and handed over
 * to pipe.c, after which it carries no more frames.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest/agent.h"

#define HOST_DEFAULT "127.0.0.1"

struct connecting {
	int fd;
	char what[80];		/* "127.0.0.1:8080", for messages */
};

static int connecting_frame(struct conn *c, uint8_t type, const uint8_t *p, uint32_t len)
{
	/* Input is paused while connecting, so no frame should get here. */
	(void)c, (void)type, (void)p, (void)len;
	return -EPROTO;
}

static void connecting_abort(struct conn *c)
{
	struct connecting *st = c->st;
	loop_del(&c->a->loop, st->fd);
	close(st->fd);
	free(st);
}

static const struct conn_op connecting_op = {
	.name = "CONNECT",
	.frame = connecting_frame,
	.abort = connecting_abort,
};

/* The connect finished (err 0) or failed. */
static void connected(struct conn *c, int err)
{
	struct connecting *st = c->st;
	struct agent *a = c->a;
	int tcp = st->fd;

	loop_del(&a->loop, tcp);
	/* The op is over either way: a close from here on must not abort it. */
	c->op = NULL;
	c->st = NULL;
	if (err) {
		conn_error(c, err, "connect %s: %s", st->what, strerror(err));
		close(tcp);
		free(st);
		return;
	}
	free(st);

	/* OK goes into the output buffer, which the pipe sends first: after
	 * it, the stream is the TCP connection's. */
	struct kiln_fb fb;
	conn_begin(c, &fb, KILN_OK);
	if (kiln_fb_end(&fb) < 0) {
		close(tcp);
		conn_close(c);
		return;
	}
	struct buf in, out;
	int fd = conn_detach(c, &in, &out);
	if (fd < 0) {
		close(tcp);
		return;
	}
	pipe_start(a, fd, &in, &out, tcp);
}

static void on_connect(struct loop *l, int fd, uint32_t events, void *ctx)
{
	struct conn *c = ctx;
	int err = 0;
	socklen_t len = sizeof err;
	(void)l;
	(void)events;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	connected(c, err);
}

/* A numeric address: no name lookups in PID 1 (a static binary has no
 * working resolver, and a lookup would block the loop). */
static int parse_addr(const char *host, unsigned port, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof *ss);
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*len = sizeof *in4;
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof *in6;
		return 0;
	}
	return -EINVAL;
}

void connect_request(struct conn *c, const struct kiln_msg *m)
{
	char host[INET6_ADDRSTRLEN] = HOST_DEFAULT;
	struct sockaddr_storage ss;
	socklen_t sslen;

	if (!kiln_msg_has(m, KT_PORT)) {
		conn_error(c, EINVAL, "CONNECT needs a PORT");
		return;
	}
	uint32_t port = kiln_msg_u32(m, KT_PORT, 0);
	if (port == 0 || port > 65535) {
		conn_error(c, EINVAL, "port %u is not a TCP port (1..65535)", port);
		return;
	}
	if (kiln_msg_has(m, KT_HOST) && kiln_msg_str(m, KT_HOST, host, sizeof host) < 0) {
		conn_error(c, EINVAL, "HOST is not a numeric IPv4 or IPv6 address");
		return;
	}
	if (parse_addr(host, port, &ss, &sslen) < 0) {
		conn_error(c, EINVAL, "host '%s' is not a numeric IPv4 or IPv6 address", host);
		return;
	}
	struct connecting *st = calloc(1, sizeof *st);
	if (!st) {
		conn_error(c, ENOMEM, "connect: out of memory");
		return;
	}
	snprintf(st->what, sizeof st->what, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u",
		 host, port);
	st->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (st->fd < 0) {
		int e = errno;
		conn_error(c, e, "socket for %s: %s", st->what, strerror(e));
		free(st);
		return;
	}
	/* Even a connect that completes at once is finished from the loop:
	 * the request frame must be consumed before the connection's
	 * buffers are handed to the pipe. */
	if (connect(st->fd, (struct sockaddr *)&ss, sslen) < 0 && errno != EINPROGRESS) {
		int e = errno;
		conn_error(c, e, "connect %s: %s", st->what, strerror(e));
		close(st->fd);
		free(st);
		return;
	}
	int rc = loop_add(&c->a->loop, st->fd, EPOLLOUT, on_connect, c);
	if (rc < 0) {
		conn_error(c, -rc, "connect %s: %s", st->what, strerror(-rc));
		close(st->fd);
		free(st);
		return;
	}
	conn_op_start(c, &connecting_op, st);
	conn_pause_input(c, true);
}
