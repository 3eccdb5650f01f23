/*
 * httpc: the small HTTP/1.1 client of the kiln CLI (plain HTTP to kilnd,
 * which listens on loopback or behind a TLS proxy). One connection per
 * request. A response body is read whole (bounded) or streamed, with
 * chunked transfer decoding, for Server-Sent Events; a connection can also
 * be upgraded to a WebSocket (the raw socket is handed over).
 */
#ifndef KILN_CLI_HTTPC_H
#define KILN_CLI_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct httpc {
	int fd;
	int status;
	char content_type[128];
	bool chunked;
	int64_t remaining;		/* Content-Length left, -1 if unknown */
	uint64_t chunk_left;		/* of the current chunk */
	bool eof;
	char buf[16384];		/* bytes read past what was consumed */
	size_t off, len;
	char error[256];
};

struct httpc_target {
	char host[256];
	char port[16];
	char key[128];			/* API key, or "" */
};

/* From KILN_API_URL (default http://127.0.0.1:7070) and KILN_API_KEY. */
int httpc_target_env(struct httpc_target *t, char *err, size_t errlen);

/* Send a request (body may be NULL; body_fd >= 0 streams a file instead)
 * and read the status line and headers. extra_headers: "Name: value\r\n"
 * lines or NULL. */
int httpc_start(struct httpc *c, const struct httpc_target *t, const char *method,
		const char *path, const char *extra_headers, const void *body, size_t len,
		int body_fd, int64_t body_fd_len);
/* Read up to n bytes of the body: > 0, 0 at its end, < 0 on error. */
long httpc_read(struct httpc *c, void *p, size_t n);
/* The whole body (malloc'd, NUL-terminated), at most max bytes. */
int httpc_read_all(struct httpc *c, char **out, size_t *len, size_t max);
void httpc_close(struct httpc *c);

/* Percent-encode s for a query string (malloc'd). */
char *httpc_escape(const char *s);

#endif
