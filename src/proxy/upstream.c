/*
 * upstream: reading a guest's HTTP response. See upstream.h.
 */
#include "proxy/upstream.h"
#include "common/err.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define UP_BUF (UP_HEAD_MAX + UP_READ)

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int up_init(struct upstream *u, int fd, int watch_fd, const void *early, size_t n)
{
	memset(u, 0, sizeof *u);
	u->fd = fd;
	u->watch_fd = watch_fd;
	u->buf = malloc(UP_BUF);
	if (!u->buf)
		return errf(ENOMEM, "out of memory");
	/* Bytes that came with CONNECT's OK: the server spoke first. An HTTP
	 * server does not, but within the head limit they are kept as the
	 * start of its answer. */
	if (n > UP_HEAD_MAX) {
		up_free(u);
		return errf(EPROTO, "the sandbox's server sent %zu bytes before the request", n);
	}
	if (n)
		memcpy(u->buf, early, n);
	u->len = n;
	return 0;
}

void up_free(struct upstream *u)
{
	free(u->buf);
	u->buf = NULL;
}

/* Wait until the guest socket is ready for `events`. 0, or -errno. */
static int up_wait(struct upstream *u, short events, int timeout_ms)
{
	struct pollfd p[2] = {
		{ .fd = u->fd, .events = events },
		{ .fd = u->watch_fd, .events = POLLRDHUP },
	};
	int n;
	while ((n = poll(p, u->watch_fd >= 0 ? 2 : 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return errf_sys("poll");
	if (n == 0)
		return errf(ETIMEDOUT, "the sandbox's server did not answer within %d s",
			    timeout_ms / 1000);
	if (u->watch_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return errf(ECONNABORTED, "the client went away");
	return 0;
}

int up_write(struct upstream *u, const void *p, size_t n, int timeout_ms)
{
	const char *s = p;
	while (n > 0) {
		ssize_t w = send(u->fd, s, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			s += w, n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return errf(errno == ECONNRESET ? EPIPE : errno,
				    "sending the request to the sandbox: %s", strerror(errno));
		int rc = up_wait(u, POLLOUT, timeout_ms);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Read more into the buffer (moving unread bytes to its front). 1 with
 * bytes, 0 at the end of the stream, -errno. */
static int up_fill(struct upstream *u, int timeout_ms)
{
	if (u->eof)
		return 0;
	if (u->off) {
		memmove(u->buf, u->buf + u->off, u->len - u->off);
		u->len -= u->off;
		u->off = 0;
	}
	if (u->len >= UP_BUF)
		return errf(ENOBUFS, "upstream buffer full");
	for (;;) {
		ssize_t r = recv(u->fd, u->buf + u->len, UP_BUF - u->len, MSG_DONTWAIT);
		if (r > 0) {
			u->len += (size_t)r;
			return 1;
		}
		if (r == 0) {
			u->eof = true;
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return errf(errno, "reading from the sandbox: %s", strerror(errno));
		int rc = up_wait(u, POLLIN, timeout_ms);
		if (rc < 0)
			return rc;
	}
}

static bool is_token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool up_list_has(const char *value, const char *token)
{
	size_t n = strlen(token);
	for (const char *p = value; p && *p;) {
		p += strspn(p, " \t,");
		const char *e = p + strcspn(p, ",");
		const char *t = e;
		while (t > p && (t[-1] == ' ' || t[-1] == '\t'))
			t--;
		if ((size_t)(t - p) == n && strncasecmp(p, token, n) == 0)
			return true;
		p = e;
	}
	return false;
}

/* Split a head (NUL-terminated, CRLF or LF lines, no final blank line)
 * into the status and headers. */
static int parse_head(char *text, bool head_only, struct up_head *h)
{
	char *line = text, *next;
	h->text = text;
	h->n = 0;
	next = strchr(line, '\n');
	if (next)
		*next++ = 0;
	line[strcspn(line, "\r")] = 0;
	/* HTTP/1.x SP 3DIGIT [SP reason] */
	if (strncmp(line, "HTTP/1.", 7) != 0 || !(line[7] == '0' || line[7] == '1') ||
	    line[8] != ' ' || line[9] < '1' || line[9] > '5' || line[10] < '0' || line[10] > '9' ||
	    line[11] < '0' || line[11] > '9' || (line[12] && line[12] != ' '))
		return errf(EPROTO, "the sandbox's server did not answer HTTP (status line '%.40s')", line);
	h->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
	while (next && *next) {
		line = next;
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		size_t len = strlen(line);
		if (len && line[len - 1] == '\r')
			line[--len] = 0;
		char *colon = strchr(line, ':');
		if (!colon || colon == line)
			return errf(EPROTO, "the sandbox's server sent a bad header line '%.40s'", line);
		for (char *c = line; c < colon; c++)
			if (!is_token_char(*c))
				return errf(EPROTO, "the sandbox's server sent a bad header name '%.40s'", line);
		if (h->n >= UP_HEADERS_MAX)
			return errf(EPROTO, "the sandbox's server sent over %d headers", UP_HEADERS_MAX);
		*colon = 0;
		char *v = colon + 1;
		v += strspn(v, " \t");
		char *end = v + strlen(v);
		while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = 0;
		for (char *c = v; *c; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				return errf(EPROTO, "the sandbox's server sent a control character in %s", line);
		h->h[h->n].name = line;
		h->h[h->n].value = v;
		h->n++;
	}
	/* The body's framing (RFC 9112 6.3). */
	const char *te = up_header(h, "Transfer-Encoding");
	const char *cl = up_header(h, "Content-Length");
	if (head_only || h->status < 200 || h->status == 204 || h->status == 304) {
		h->body = UP_BODY_NONE;
	} else if (te) {
		const char *last = strrchr(te, ',');
		last = last ? last + 1 : te;
		last += strspn(last, " \t");
		h->body = strncasecmp(last, "chunked", 7) == 0 && !last[7 + strspn(last + 7, " \t")]
				  ? UP_BODY_CHUNKED : UP_BODY_CLOSE;
	} else if (cl) {
		char *e;
		errno = 0;
		unsigned long long n = strtoull(cl, &e, 10);
		if (errno || e == cl || *e || *cl == '-' || *cl == '+')
			return errf(EPROTO, "the sandbox's server sent Content-Length '%.40s'", cl);
		/* Repeated Content-Length headers must agree. */
		for (int i = 0; i < h->n; i++)
			if (!strcasecmp(h->h[i].name, "Content-Length") && strtoull(h->h[i].value, NULL, 10) != n)
				return errf(EPROTO, "the sandbox's server sent conflicting Content-Length headers");
		h->body = UP_BODY_LENGTH;
		h->length = n;
	} else {
		h->body = UP_BODY_CLOSE;
	}
	return 0;
}

/* The end of a head in buf[off, len): the offset past its blank line, or 0. */
static size_t head_end(const struct upstream *u)
{
	const uint8_t *b = u->buf + u->off;
	size_t n = u->len - u->off;
	for (size_t i = 0; i + 1 < n; i++) {
		if (b[i] != '\n')
			continue;
		if (b[i + 1] == '\n')
			return i + 2;
		if (b[i + 1] == '\r' && i + 2 < n && b[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

int up_read_head(struct upstream *u, bool head_only, int timeout_ms, struct up_head *h)
{
	int64_t deadline = now_ms() + timeout_ms;
	memset(h, 0, sizeof *h);
	for (;;) {
		size_t end;
		while (!(end = head_end(u))) {
			if (u->len - u->off > UP_HEAD_MAX)
				return errf(EPROTO, "the sandbox's server sent a head over %u bytes", UP_HEAD_MAX);
			int left = (int)(deadline - now_ms());
			int rc = up_fill(u, left > 0 ? left : 0);
			if (rc < 0)
				return rc;
			if (rc == 0)
				return errf(EPROTO, u->len > u->off
						    ? "the sandbox's server closed the connection mid-answer"
						    : "the sandbox's server closed the connection without an answer");
		}
		/* Cut the blank line: the head is the text before it. */
		char *text = strndup((const char *)u->buf + u->off, end);
		if (!text)
			return errf(ENOMEM, "out of memory");
		size_t tl = strlen(text);
		if (tl != end)
			return free(text), errf(EPROTO, "the sandbox's server sent a NUL byte in its head");
		while (tl && (text[tl - 1] == '\n' || text[tl - 1] == '\r'))
			text[--tl] = 0;
		u->off += end;
		up_head_free(h);
		int rc = parse_head(text, head_only, h);
		if (rc < 0) {
			up_head_free(h);
			return rc;
		}
		/* 1xx interim answers (100 Continue, 103 Early Hints) are
		 * dropped; 101 is the answer to an upgrade. */
		if (h->status >= 200 || h->status == 101)
			break;
	}
	u->body = h->body;
	u->left = h->length;
	u->chunk = 0;
	return 0;
}

void up_head_free(struct up_head *h)
{
	free(h->text);
	h->text = NULL;
	h->n = 0;
}

const char *up_header(const struct up_head *h, const char *name)
{
	for (int i = 0; i < h->n; i++)
		if (!strcasecmp(h->h[i].name, name))
			return h->h[i].value;
	return NULL;
}

static bool cookie_reaches_past_sandbox(const char *v)
{
	v += strspn(v, " \t");
	if (!strncasecmp(v, "kiln_", 5))
		return true;
	for (const char *p = strchr(v, ';'); p; p = strchr(p + 1, ';')) {
		const char *a = p + 1 + strspn(p + 1, " \t");
		if (!strncasecmp(a, "domain", 6) && (a[6] == '=' || a[6] == ' ' || a[6] == '\t'))
			return true;
	}
	return false;
}

bool up_answer_header_passes(const char *guest_connection, const char *name, const char *value)
{
	if (up_hop_by_hop(name) || (guest_connection && up_list_has(guest_connection, name)))
		return false;
	return strcasecmp(name, "Set-Cookie") != 0 || !cookie_reaches_past_sandbox(value);
}

bool up_is_kiln_credential(const char *authorization)
{
	const char *v = authorization + strspn(authorization, " \t");
	if (strncasecmp(v, "Bearer", 6) != 0)
		return false;
	v += 6;
	v += strspn(v, " \t");
	return strncmp(v, "kiln_", 5) == 0;
}

bool up_hop_by_hop(const char *name)
{
	static const char *const names[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length", NULL,
	};
	for (int i = 0; names[i]; i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

size_t up_pending(const struct upstream *u, const uint8_t **p)
{
	*p = u->buf + u->off;
	return u->len - u->off;
}

/* One line of chunked framing, without its CRLF, into line. 1, or 0 / -errno. */
static int chunk_line(struct upstream *u, char *line, size_t cap)
{
	for (;;) {
		uint8_t *b = u->buf + u->off, *nl = memchr(b, '\n', u->len - u->off);
		if (nl) {
			size_t n = (size_t)(nl - b);
			if (n && b[n - 1] == '\r')
				n--;
			if (n >= cap)
				return errf(EPROTO, "the sandbox's server sent a chunk line over %zu bytes", cap);
			memcpy(line, b, n);
			line[n] = 0;
			u->off += (size_t)(nl - b) + 1;
			return 1;
		}
		if (u->len - u->off >= cap)
			return errf(EPROTO, "the sandbox's server sent a chunk line over %zu bytes", cap);
		int rc = up_fill(u, -1);
		if (rc <= 0)
			return rc < 0 ? rc : errf(EPROTO, "the sandbox's server ended a chunked body early");
	}
}

/* Step the chunked decoder to data (1), the end (0), or an error. */
static int chunk_next(struct upstream *u)
{
	char line[1024];
	int rc;
	while (u->chunk != 1) {
		if (u->chunk == 3)
			return 0;
		if ((rc = chunk_line(u, line, sizeof line)) <= 0)
			return rc;
		if (u->chunk == 2) {
			if (line[0])
				return errf(EPROTO, "the sandbox's server sent chunk data longer than its size");
			u->chunk = 0;
			continue;
		}
		if (u->chunk == 4) {		/* trailer lines, dropped */
			if (!line[0])
				u->chunk = 3;
			continue;
		}
		/* size in hex, then optional ";extensions" */
		char *e;
		if (!((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f') ||
		      (line[0] >= 'A' && line[0] <= 'F')) || strlen(line) > 1000)
			return errf(EPROTO, "the sandbox's server sent a bad chunk size '%.20s'", line);
		errno = 0;
		unsigned long long size = strtoull(line, &e, 16);
		if (errno || (*e && *e != ';' && *e != ' ' && *e != '\t'))
			return errf(EPROTO, "the sandbox's server sent a bad chunk size '%.20s'", line);
		if (size == 0) {
			u->chunk = 4;
			continue;
		}
		u->left = size;
		u->chunk = 1;
	}
	return 1;
}

long up_read_body(struct upstream *u, char *out, size_t max)
{
	if (u->body == UP_BODY_NONE || max == 0)
		return 0;
	if (u->body == UP_BODY_LENGTH && u->left == 0)
		return 0;
	if (u->body == UP_BODY_CHUNKED) {
		int rc = chunk_next(u);
		if (rc <= 0)
			return rc;
	}
	while (u->len == u->off) {
		int rc = up_fill(u, -1);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (u->body == UP_BODY_CLOSE)
				return 0;
			return errf(EPROTO, "the sandbox's server closed the connection before the body's end");
		}
	}
	size_t n = u->len - u->off;
	if (n > max)
		n = max;
	if (u->body != UP_BODY_CLOSE && n > u->left)
		n = (size_t)u->left;
	memcpy(out, u->buf + u->off, n);
	u->off += n;
	if (u->body != UP_BODY_CLOSE) {
		u->left -= n;
		if (u->body == UP_BODY_CHUNKED && u->left == 0)
			u->chunk = 2;
	}
	return (long)n;
}
