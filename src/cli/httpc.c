#include "cli/httpc.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(struct httpc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct httpc *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->error, sizeof c->error, fmt, ap);
	va_end(ap);
	return -1;
}

int httpc_target_env(struct httpc_target *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof *t);
	const char *url = getenv("KILN_API_URL");
	const char *key = getenv("KILN_API_KEY");
	if (!url || !*url)
		url = "http://127.0.0.1:7070";
	if (strncmp(url, "http://", 7) != 0) {
		snprintf(err, errlen, "KILN_API_URL must start with http:// (put TLS in a proxy)");
		return -1;
	}
	const char *h = url + 7, *end = h + strcspn(h, "/");
	const char *colon = memchr(h, ':', end - h);
	size_t hl = colon ? (size_t)(colon - h) : (size_t)(end - h);
	if (hl == 0 || hl >= sizeof t->host) {
		snprintf(err, errlen, "KILN_API_URL: bad host");
		return -1;
	}
	memcpy(t->host, h, hl);
	if (colon && (size_t)(end - colon - 1) < sizeof t->port && end > colon + 1)
		memcpy(t->port, colon + 1, end - colon - 1);
	else
		snprintf(t->port, sizeof t->port, "80");
	if (key && strlen(key) < sizeof t->key)
		snprintf(t->key, sizeof t->key, "%s", key);
	return 0;
}

static int dial(struct httpc *c, const struct httpc_target *t)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	int e = getaddrinfo(t->host, t->port, &hints, &ai);
	if (e)
		return fail(c, "%s:%s: %s", t->host, t->port, gai_strerror(e));
	c->fd = -1;
	for (a = ai; a && c->fd < 0; a = a->ai_next) {
		c->fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (c->fd >= 0 && connect(c->fd, a->ai_addr, a->ai_addrlen) < 0) {
			e = errno;
			close(c->fd);
			c->fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (c->fd < 0)
		return fail(c, "cannot reach kilnd at %s:%s: %s (is it running? KILN_API_URL)", t->host,
			    t->port, strerror(e ? e : ECONNREFUSED));
	return 0;
}

static int send_all(struct httpc *c, const void *p, size_t n)
{
	const char *s = p;
	while (n > 0) {
		ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return fail(c, "sending to kilnd: %s", strerror(errno));
		s += w, n -= w;
	}
	return 0;
}

/* Fill the buffer if it is empty: > 0, 0 at EOF, < 0 error. */
static long fill(struct httpc *c)
{
	if (c->off < c->len)
		return (long)(c->len - c->off);
	c->off = c->len = 0;
	for (;;) {
		ssize_t r = recv(c->fd, c->buf, sizeof c->buf, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fail(c, "reading from kilnd: %s", strerror(errno));
		c->len = (size_t)r;
		return r;
	}
}

/* One line (CRLF or LF stripped) of at most cap-1 bytes. */
static int read_line(struct httpc *c, char *line, size_t cap)
{
	size_t n = 0;
	for (;;) {
		long f = fill(c);
		if (f < 0)
			return -1;
		if (f == 0)
			return fail(c, "kilnd closed the connection mid-response");
		char ch = c->buf[c->off++];
		if (ch == '\n')
			break;
		if (n + 1 >= cap)
			return fail(c, "response line too long");
		line[n++] = ch;
	}
	if (n && line[n - 1] == '\r')
		n--;
	line[n] = 0;
	return 0;
}

int httpc_start(struct httpc *c, const struct httpc_target *t, const char *method,
		const char *path, const char *extra_headers, const void *body, size_t len,
		int body_fd, int64_t body_fd_len)
{
	memset(c, 0, sizeof *c);
	c->remaining = -1;
	if (dial(c, t) < 0)
		return -1;
	char head[2048];
	uint64_t clen = body_fd >= 0 ? (uint64_t)body_fd_len : len;
	/* One request per connection, unless the caller upgrades it. */
	bool upgrade = extra_headers && strcasestr(extra_headers, "Connection:");
	int n = snprintf(head, sizeof head,
			 "%s %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: kiln-cli\r\n%s"
			 "%s%s%s%s",
			 method, path, t->host, t->port, upgrade ? "" : "Connection: close\r\n",
			 t->key[0] ? "Authorization: Bearer " : "", t->key, t->key[0] ? "\r\n" : "",
			 extra_headers ? extra_headers : "");
	if (n < 0 || (size_t)n >= sizeof head - 64)
		return fail(c, "request too long");
	if (body || body_fd >= 0)
		n += snprintf(head + n, sizeof head - n, "Content-Length: %llu\r\n", (unsigned long long)clen);
	n += snprintf(head + n, sizeof head - n, "\r\n");
	if (send_all(c, head, n) < 0)
		return -1;
	if (body && len && send_all(c, body, len) < 0)
		return -1;
	if (body_fd >= 0) {
		char buf[65536];
		ssize_t r;
		while ((r = read(body_fd, buf, sizeof buf)) > 0)
			if (send_all(c, buf, r) < 0)
				break;	/* the server may have answered early: read it */
	}
	char line[4096];
	if (read_line(c, line, sizeof line) < 0)
		return -1;
	if (sscanf(line, "HTTP/1.%*d %d", &c->status) != 1)
		return fail(c, "not an HTTP response: %.80s", line);
	for (;;) {
		if (read_line(c, line, sizeof line) < 0)
			return -1;
		if (!line[0])
			break;
		char *v = strchr(line, ':');
		if (!v)
			continue;
		*v++ = 0;
		while (*v == ' ')
			v++;
		if (!strcasecmp(line, "Content-Length"))
			c->remaining = strtoll(v, NULL, 10);
		else if (!strcasecmp(line, "Transfer-Encoding") && strcasestr(v, "chunked"))
			c->chunked = true;
		else if (!strcasecmp(line, "Content-Type"))
			snprintf(c->content_type, sizeof c->content_type, "%s", v);
	}
	if (c->status == 101 || c->status == 204 || c->status == 304 || !strcmp(method, "HEAD"))
		c->remaining = 0;
	return 0;
}

long httpc_read(struct httpc *c, void *p, size_t n)
{
	if (c->eof || n == 0)
		return 0;
	if (c->chunked) {
		if (c->chunk_left == 0) {
			char line[64];
			if (read_line(c, line, sizeof line) < 0)
				return -1;
			if (!line[0] && read_line(c, line, sizeof line) < 0)	/* CRLF after data */
				return -1;
			char *end;
			c->chunk_left = strtoull(line, &end, 16);
			if (end == line)
				return fail(c, "bad chunk size");
			if (c->chunk_left == 0) {
				c->eof = true;
				return 0;
			}
		}
		if (n > c->chunk_left)
			n = c->chunk_left;
	} else if (c->remaining >= 0) {
		if (c->remaining == 0) {
			c->eof = true;
			return 0;
		}
		if ((int64_t)n > c->remaining)
			n = (size_t)c->remaining;
	}
	long f = fill(c);
	if (f < 0)
		return -1;
	if (f == 0) {
		if (c->chunked || c->remaining > 0)
			return fail(c, "kilnd closed the connection mid-body");
		c->eof = true;
		return 0;
	}
	if (n > (size_t)f)
		n = (size_t)f;
	memcpy(p, c->buf + c->off, n);
	c->off += n;
	if (c->chunked)
		c->chunk_left -= n;
	else if (c->remaining > 0)
		c->remaining -= (int64_t)n;
	return (long)n;
}

int httpc_read_all(struct httpc *c, char **out, size_t *len, size_t max)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1);
	if (!b)
		return fail(c, "out of memory");
	for (;;) {
		if (n == cap) {
			if (cap >= max) {
				free(b);
				return fail(c, "response larger than %zu bytes", max);
			}
			cap *= 2;
			char *nb = realloc(b, cap + 1);
			if (!nb) {
				free(b);
				return fail(c, "out of memory");
			}
			b = nb;
		}
		long r = httpc_read(c, b + n, cap - n);
		if (r < 0) {
			free(b);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	b[n] = 0;
	*out = b;
	if (len)
		*len = n;
	return 0;
}

void httpc_close(struct httpc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

char *httpc_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;
	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    strchr("-_.~/", ch)) {
			*o++ = (char)ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = 0;
	return out;
}
