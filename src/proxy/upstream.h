/*
 * upstream: the guest's side of a proxied HTTP exchange (proxy.c). It
 * reads an HTTP/1.x response from a byte stream that a guest program
 * writes, so everything is bounded and checked: the head is at most
 * UP_HEAD_MAX bytes and UP_HEADERS_MAX header lines, chunk sizes are
 * parsed strictly, and a body ends where its framing says (Content-Length,
 * chunked, or the end of the stream), never later.
 *
 * Every wait also watches the HTTP client's socket, so a request whose
 * client went away does not hold its thread until the guest answers.
 */
#ifndef KILN_PROXY_UPSTREAM_H
#define KILN_PROXY_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UP_HEAD_MAX	(64u << 10)
#define UP_HEADERS_MAX	128
#define UP_READ		(64u << 10)

enum up_body { UP_BODY_NONE, UP_BODY_LENGTH, UP_BODY_CHUNKED, UP_BODY_CLOSE };

struct up_header {
	const char *name, *value;	/* into up_head.text */
};

struct up_head {
	int status;
	char *text;			/* the head, split in place */
	struct up_header h[UP_HEADERS_MAX];
	int n;
	enum up_body body;
	uint64_t length;		/* UP_BODY_LENGTH */
};

struct upstream {
	int fd;				/* the guest connection (non-blocking) */
	int watch_fd;			/* the HTTP client's socket, or -1 */
	uint8_t *buf;			/* read, not yet used: [off, len) */
	size_t off, len;
	bool eof;
	/* body decoding */
	enum up_body body;
	uint64_t left;			/* LENGTH: bytes left; CHUNKED: of this chunk */
	int chunk;			/* CHUNKED: 0 size line, 1 data, 2 its CRLF, 3 done */
};

/* fd is borrowed; early: bytes the guest sent before the request (at most
 * UP_HEAD_MAX, else -EPROTO). 0, -ENOMEM or -EPROTO. */
int up_init(struct upstream *u, int fd, int watch_fd, const void *early, size_t n);
void up_free(struct upstream *u);
/* Write all of p to the guest (waiting up to timeout_ms without
 * progress). 0 or -errno: -EPIPE when the guest closed, -ECONNABORTED
 * when the client went away. */
int up_write(struct upstream *u, const void *p, size_t n, int timeout_ms);
/* Read a response head (skipping 1xx answers other than 101). head_only:
 * the request was HEAD, so there is no body whatever the headers say.
 * 0, or -errno with errmsg() set (-EPROTO: not HTTP; -ETIMEDOUT). */
int up_read_head(struct upstream *u, bool head_only, int timeout_ms, struct up_head *h);
void up_head_free(struct up_head *h);
/* The value of a header (the first one named so), or NULL. */
const char *up_header(const struct up_head *h, const char *name);
/* Hop-by-hop headers, which a proxy does not pass on (RFC 9110 7.6.1),
 * plus those the proxy sets itself. */
bool up_hop_by_hop(const char *name);
/* Does a comma-separated header value (Connection) hold token, in any case? */
bool up_list_has(const char *value, const char *token);
/* May a header of the guest's answer reach the client? Not if hop-by-hop,
 * named in the guest's own Connection header (guest_connection, or
 * NULL), or a Set-Cookie that would reach past the sandbox: one with a
 * Domain attribute (it would go to kilnd's API host and every sandbox
 * under the domain) or one named kiln_* (kilnd's own cookies, such as the
 * dashboard's session, which a guest must not set or shadow). */
bool up_answer_header_passes(const char *guest_connection, const char *name, const char *value);
/* Is an Authorization value a kiln API key (Bearer kiln_...), valid or not?
 * Such a header never goes to a guest. */
bool up_is_kiln_credential(const char *authorization);
/* Up to max body bytes into out: the count, 0 at the end of the body, or
 * -errno (-EPROTO for a broken body). Waits as long as it must. */
long up_read_body(struct upstream *u, char *out, size_t max);
/* Bytes read past the head that belong to the stream (after a 101). */
size_t up_pending(const struct upstream *u, const uint8_t **p);

#endif
