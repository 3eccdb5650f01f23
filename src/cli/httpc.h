/*
 * httpc: the kiln CLI's HTTP client, over libcurl: http:// or https://
 * (certificates verified against the system's store, or against the CAs
 * in KILN_CA_CERT alone). One transfer per request. A response body is
 * read whole (bounded) or streamed as it arrives, for Server-Sent Events
 * and downloads. A WebSocket (the PTY) is a connection of its own: libcurl
 * connects (TLS included) and kiln speaks HTTP/1.1's Upgrade and RFC 6455
 * framing over it (Debian 12's libcurl has no WebSocket support).
 */
#ifndef KILN_CLI_HTTPC_H
#define KILN_CLI_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct httpc_target {
	char base[300];			/* scheme://host:port, no trailing slash */
	char host[256];
	char port[16];
	bool tls;
	char key[128];			/* API key, or "" */
	const char *key_env;		/* where key came from: "KILN_API_KEY" (messages) */
	const char *key_what;		/* "API key", or "operator credential" for kiln admin */
	char ca[4096];			/* KILN_CA_CERT, or "" for the system's store */
};

struct httpc {
	int status;
	char content_type[128];
	char error[1024];
	/* private */
	void *easy, *multi, *headers;
	const struct httpc_target *t;
	char *buf;			/* body bytes received, not yet read */
	size_t off, len, cap;
	bool headers_done, done;
	int result;			/* CURLcode once done */
	int body_fd;
	char errbuf[256];
};

/* From KILN_API_URL (default http://127.0.0.1:7070), KILN_API_KEY and
 * KILN_CA_CERT. */
int httpc_target_env(struct httpc_target *t, char *err, size_t errlen);

/* Send a request (body may be NULL; body_fd >= 0 streams that file of
 * body_fd_len bytes instead) and wait for the status and headers.
 * extra_headers: "Name: value\r\n" lines or NULL. 0 or -1 (c->error). */
int httpc_start(struct httpc *c, const struct httpc_target *t, const char *method,
		const char *path, const char *extra_headers, const void *body, size_t len,
		int body_fd, int64_t body_fd_len);
/* Read up to n bytes of the body: > 0, 0 at its end, < 0 on error. */
long httpc_read(struct httpc *c, void *p, size_t n);
/* The whole body (malloc'd, NUL-terminated), at most max bytes. */
int httpc_read_all(struct httpc *c, char **out, size_t *len, size_t max);
void httpc_close(struct httpc *c);

/* A connection upgraded to a WebSocket. */
struct httpc_ws {
	void *easy;
	int fd;				/* the socket, for poll() only */
	int status;			/* of the Upgrade answer: 101, or an error's */
	char *body;			/* an error answer's body (malloc'd), or NULL */
	uint8_t extra[16384];		/* bytes that came after the 101's headers */
	size_t extra_len;
	char error[1024];
	char errbuf[256];
};
/* Connect and send GET path with Upgrade: websocket; read the answer's
 * head. 0 (see w->status) or -1 (w->error). */
int httpc_ws_open(struct httpc_ws *w, const struct httpc_target *t, const char *path, const char *ws_key);
/* Send all of p; 0 or -1. */
int httpc_ws_send(struct httpc_ws *w, const void *p, size_t n);
/* Receive what is there without blocking: > 0 bytes, 0 when the peer
 * closed, -2 when nothing is there (poll w->fd), -1 on an error. Call it
 * until -2 before polling again: TLS may hold bytes the socket does not
 * show. */
long httpc_ws_recv(struct httpc_ws *w, void *p, size_t n);
void httpc_ws_close(struct httpc_ws *w);

/* Percent-encode s for a query string (malloc'd). */
char *httpc_escape(const char *s);

#endif
