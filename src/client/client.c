/*
 * The client's connection: transports (Unix socket, AF_VSOCK, a VMM's
 * vsock bridge), buffered non-blocking I/O with timeouts, and framing.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "client/client_int.h"

#define READ_CHUNK (64u << 10)

struct kiln_client *kiln_client_new(void)
{
	struct kiln_client *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->fd = -1;
	c->timeout_ms = -1;
	return c;
}

void kiln_close(struct kiln_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	buf_free(&c->in);
	buf_free(&c->out);
	c->consume = 0;
	c->broken = false;
}

void kiln_client_free(struct kiln_client *c)
{
	if (!c)
		return;
	kiln_close(c);
	free(c->fs_user);
	free(c);
}

const char *kiln_client_error(const struct kiln_client *c)
{
	return c->err;
}

void kiln_client_set_timeout(struct kiln_client *c, int ms)
{
	c->timeout_ms = ms < 0 ? -1 : ms;
}

int kiln_client_set_user(struct kiln_client *c, const char *user)
{
	char *u = user && *user ? strdup(user) : NULL;
	if (user && *user && !u)
		return cl_fail(c, ENOMEM, "out of memory");
	free(c->fs_user);
	c->fs_user = u;
	return 0;
}

int kiln_client_fd(const struct kiln_client *c)
{
	return c->fd;
}

size_t kiln_client_pending(const struct kiln_client *c)
{
	return buf_used(&c->out);
}

short kiln_client_events(const struct kiln_client *c)
{
	return POLLIN | (buf_used(&c->out) ? POLLOUT : 0);
}

static int vfail(struct kiln_client *c, int err, const char *fmt, va_list ap)
{
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	return -err;
}

int cl_fail(struct kiln_client *c, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vfail(c, err, fmt, ap);
	va_end(ap);
	return rc;
}

int cl_break(struct kiln_client *c, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vfail(c, err, fmt, ap);
	va_end(ap);
	c->broken = true;
	return rc;
}

int cl_usable(struct kiln_client *c)
{
	if (c->fd < 0)
		return cl_fail(c, ENOTCONN, "not connected to an agent");
	if (c->broken)
		return -EPIPE;	/* the message of the failure that broke it stays */
	return 0;
}

/* ---- connecting ------------------------------------------------------- */

/* Wait for events on the socket, within the timeout. */
static int wait_fd(struct kiln_client *c, short events, short *revents)
{
	struct pollfd pfd = { .fd = c->fd, .events = events };
	int rc;
	do
		rc = poll(&pfd, 1, c->timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	if (rc == 0)
		return -ETIMEDOUT;
	*revents = pfd.revents;
	return 0;
}

static int connect_sock(struct kiln_client *c, int domain, const struct sockaddr *sa,
			socklen_t len, const char *what)
{
	short rev;
	int err = 0;
	socklen_t elen = sizeof err;

	kiln_close(c);
	c->err[0] = 0;
	c->fd = socket(domain, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->fd < 0)
		return cl_fail(c, errno, "socket for %s: %s", what, strerror(errno));
	if (domain == AF_VSOCK) {
		/* The receive buffer is the agent's send credit: more of it
		 * keeps downloads streaming (the default is 256 KiB). */
		unsigned long long size = 2u << 20;
		setsockopt(c->fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_MAX_SIZE, &size, sizeof size);
		setsockopt(c->fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_SIZE, &size, sizeof size);
	}
	if (connect(c->fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EAGAIN) {
		err = errno;
		goto fail;
	}
	int rc = wait_fd(c, POLLOUT, &rev);
	if (rc < 0) {
		err = -rc;
		goto fail;
	}
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
		err = errno;
	if (!err)
		return 0;
fail:
	kiln_close(c);
	return cl_fail(c, err, "connect %s: %s", what, strerror(err));
}

int kiln_connect_unix(struct kiln_client *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path)
		return cl_fail(c, ENAMETOOLONG, "connect %s: socket path too long", path);
	/* The socket lies in a directory its VMM may write, and kilnd is
	 * root: it connects to the socket at path itself, never through a
	 * symlink there to some other service's (the O_PATH fd pins what
	 * was checked; connect goes through its /proc link). */
	int pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (pfd < 0)
		return cl_fail(c, errno, "connect %s: %s", path, strerror(errno));
	if (fstat(pfd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(pfd);
		return cl_fail(c, ENOTSOCK, "connect %s: not a socket", path);
	}
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d", pfd);
	int rc = connect_sock(c, AF_UNIX, (struct sockaddr *)&sa, sizeof sa, path);
	if (rc == -ENOENT) {
		/* No /proc here (kiln-vmm's jail, whose own socket it is): the
		 * path, checked above. */
		strcpy(sa.sun_path, path);
		rc = connect_sock(c, AF_UNIX, (struct sockaddr *)&sa, sizeof sa, path);
	}
	close(pfd);
	return rc;
}

int kiln_connect_vsock(struct kiln_client *c, unsigned cid, unsigned port)
{
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port };
	char what[64];
	snprintf(what, sizeof what, "vsock cid %u port %u", cid, port);
	return connect_sock(c, AF_VSOCK, (struct sockaddr *)&sa, sizeof sa, what);
}

int kiln_connect_bridge(struct kiln_client *c, const char *uds, unsigned port)
{
	char line[64];
	size_t n = 0;
	short rev;
	int rc = kiln_connect_unix(c, uds);
	if (rc < 0)
		return rc;

	snprintf(line, sizeof line, "CONNECT %u\n", port);
	rc = buf_append(&c->out, line, strlen(line), CL_OUT_LIMIT);
	if (rc == 0)
		rc = kiln_client_flush(c);
	if (rc < 0)
		goto fail;
	/* Byte by byte, so as not to read past the reply into the stream. */
	while (n + 1 < sizeof line) {
		ssize_t r = recv(c->fd, line + n, 1, 0);
		if (r == 1) {
			if (line[n++] == '\n')
				break;
			continue;
		}
		if (r == 0) {
			kiln_close(c);
			return cl_fail(c, ECONNREFUSED,
				       "vsock bridge %s: closed before OK (is the agent listening on port %u?)",
				       uds, port);
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN) {
			rc = -errno;
			goto fail;
		}
		rc = wait_fd(c, POLLIN, &rev);
		if (rc < 0)
			goto fail;
	}
	line[n] = 0;
	if (n == 0 || line[n - 1] != '\n' || strncmp(line, "OK ", 3) != 0) {
		line[strcspn(line, "\r\n")] = 0;
		kiln_close(c);
		return cl_fail(c, EPROTO, "vsock bridge %s: expected 'OK <port>', got '%.40s'", uds, line);
	}
	return 0;
fail:
	kiln_close(c);
	return cl_fail(c, -rc, "vsock bridge %s: %s", uds, strerror(-rc));
}

/* Drop the frame handed out last: its bytes are used up. */
static void drop_last(struct kiln_client *c)
{
	if (c->consume) {
		buf_consume(&c->in, c->consume);
		c->consume = 0;
	}
}

int kiln_client_adopt(struct kiln_client *c, int fd, const void *early, size_t n)
{
	kiln_close(c);
	c->err[0] = 0;
	c->fd = fd;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;
		kiln_close(c);
		return cl_fail(c, e, "adopting a stream: %s", strerror(e));
	}
	if (n && buf_append(&c->in, early, n, CL_IN_LIMIT) < 0) {
		kiln_close(c);
		return cl_fail(c, ENOMEM, "out of memory");
	}
	return 0;
}

int kiln_client_detach(struct kiln_client *c, int *fd, void **early, size_t *n)
{
	int rc = cl_usable(c);
	if (rc < 0)
		return rc;
	drop_last(c);
	*early = NULL;
	*n = buf_used(&c->in);
	if (*n) {
		*early = malloc(*n);
		if (!*early)
			return cl_fail(c, ENOMEM, "out of memory");
		memcpy(*early, buf_data(&c->in), *n);
	}
	*fd = c->fd;
	c->fd = -1;
	kiln_close(c);
	return 0;
}

/* ---- I/O -------------------------------------------------------------- */

static int write_some(struct kiln_client *c)
{
	int rc = buf_send(&c->out, c->fd);
	return rc < 0 ? cl_break(c, -rc, "send to the agent: %s", strerror(-rc)) : 0;
}

static int read_some(struct kiln_client *c)
{
	/* Drop the frame handed out last before making room. */
	drop_last(c);
	size_t room = CL_IN_LIMIT - buf_used(&c->in);
	if (room == 0)
		return 0;	/* full: the caller must take frames first */
	if (room > READ_CHUNK)
		room = READ_CHUNK;
	int rc = buf_reserve(&c->in, room, CL_IN_LIMIT);
	if (rc < 0)
		return cl_break(c, -rc, "receive buffer: %s", strerror(-rc));
	ssize_t n = recv(c->fd, buf_tail(&c->in), room, MSG_DONTWAIT);
	if (n == 0)
		return cl_break(c, ECONNRESET, "the agent closed the connection");
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		return cl_break(c, errno, "receive from the agent: %s", strerror(errno));
	}
	c->in.len += (size_t)n;
	return 0;
}

int kiln_client_io(struct kiln_client *c, short revents)
{
	int rc = cl_usable(c);
	if (rc < 0)
		return rc;
	if (revents & POLLOUT) {
		rc = write_some(c);
		if (rc < 0)
			return rc;
	}
	if (revents & (POLLIN | POLLHUP | POLLERR))
		return read_some(c);
	return 0;
}

/* One blocking round: wait for the socket, then read and write. */
static int pump(struct kiln_client *c, bool want_read)
{
	short ev = (want_read && buf_used(&c->in) < CL_IN_LIMIT ? POLLIN : 0) |
		   (buf_used(&c->out) ? POLLOUT : 0);
	short rev;
	if (!ev)
		return cl_break(c, ENOBUFS, "receive buffer full while sending");
	int rc = wait_fd(c, ev, &rev);
	if (rc == -ETIMEDOUT)
		return cl_break(c, ETIMEDOUT, "no answer from the agent within %d ms", c->timeout_ms);
	if (rc < 0)
		return cl_break(c, -rc, "poll: %s", strerror(-rc));
	return kiln_client_io(c, rev);
}

int kiln_client_flush(struct kiln_client *c)
{
	int rc = cl_usable(c);
	if (rc < 0)
		return rc;
	rc = write_some(c);
	/* While waiting, keep reading too: an agent blocked on sending to
	 * us would otherwise never read what we send. */
	while (rc == 0 && buf_used(&c->out))
		rc = pump(c, true);
	return rc;
}

/* ---- frames ----------------------------------------------------------- */

void cl_begin(struct kiln_client *c, struct kiln_fb *fb, uint8_t type)
{
	kiln_fb_begin(fb, &c->out, CL_OUT_LIMIT, type);
	if (c->fs_user && type >= KILN_READ && type <= KILN_WATCH)
		kiln_fb_str(fb, KT_USER, c->fs_user);
}

int cl_queue(struct kiln_client *c, struct kiln_fb *fb)
{
	int rc = kiln_fb_end(fb);
	if (rc == -EMSGSIZE)
		return cl_fail(c, EMSGSIZE, "request larger than the %u-byte frame limit",
			       KILN_FRAME_MAX);
	if (rc < 0)
		return cl_fail(c, -rc, "queue a frame: %s", strerror(-rc));
	return 0;
}

int cl_send(struct kiln_client *c, struct kiln_fb *fb)
{
	int rc = cl_usable(c);
	if (rc < 0) {
		kiln_fb_end(fb);
		buf_truncate(&c->out, fb->start);
		return rc;
	}
	rc = cl_queue(c, fb);
	return rc < 0 ? rc : kiln_client_flush(c);
}

int cl_recv(struct kiln_client *c, bool block, struct kiln_hdr *h, const uint8_t **p)
{
	int rc = cl_usable(c);
	if (rc < 0)
		return rc;
	drop_last(c);
	for (bool tried = false;; tried = true) {
		rc = kiln_frame_peek(&c->in, KILN_FRAME_MAX, h, p);
		if (rc == 1) {
			c->consume = KILN_HDR_SIZE + h->len;
			return 1;
		}
		if (rc == -EMSGSIZE)
			return cl_break(c, EPROTO, "the agent sent a %u-byte frame; the limit is %u",
					h->len, KILN_FRAME_MAX);
		if (rc < 0)
			return cl_break(c, EPROTO, "the agent speaks protocol version %u, not %u",
					h->version, KILN_PROTO_VERSION);
		/* Not blocking still means looking at what the socket has. */
		if (!block && tried)
			return 0;
		rc = block ? pump(c, true) : read_some(c);
		if (rc < 0)
			return rc;
	}
}

int cl_parse(struct kiln_client *c, const struct kiln_hdr *h, const uint8_t *p,
	     struct kiln_msg *m)
{
	char why[256];
	if (kiln_msg_parse(m, h->type, p, h->len, why, sizeof why) < 0)
		return cl_break(c, EBADMSG, "malformed message from the agent: %s", why);
	if (h->type == KILN_ERROR) {
		char msg[900];
		int err;
		kiln_decode_error(m, &err, msg, sizeof msg);
		return cl_fail(c, err, "agent: %s", msg);
	}
	return 0;
}

int cl_unexpected(struct kiln_client *c, uint8_t type, const char *during)
{
	return cl_break(c, EPROTO, "the agent sent %s (0x%02x) during %s",
			kiln_type_name(type), type, during);
}

int cl_expect(struct kiln_client *c, uint8_t want, struct kiln_msg *m)
{
	struct kiln_hdr h;
	const uint8_t *p;
	int rc = cl_recv(c, true, &h, &p);
	if (rc < 0)
		return rc;
	rc = cl_parse(c, &h, p, m);
	if (rc < 0)
		return rc;
	if (h.type != want)
		return cl_break(c, EPROTO, "expected %s from the agent, got %s (0x%02x)",
				kiln_type_name(want), kiln_type_name(h.type), h.type);
	return 0;
}
