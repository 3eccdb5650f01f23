#include "api/mhd_errors.h"

#include <dlfcn.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The library's own definitions of the two functions kilnd interposes. */
typedef struct MHD_Response *create_fn(size_t, void *, enum MHD_ResponseMemoryMode);
typedef enum MHD_Result queue_fn(struct MHD_Connection *, unsigned int, struct MHD_Response *);
static create_fn *real_create;
static queue_fn *real_queue;
static pthread_once_t resolved = PTHREAD_ONCE_INIT;

static void resolve(void)
{
	real_create = (create_fn *)dlsym(RTLD_NEXT, "MHD_create_response_from_buffer");
	real_queue = (queue_fn *)dlsym(RTLD_NEXT, "MHD_queue_response");
	if (!real_create || !real_queue) {
		/* A kilnd linked without libmicrohttpd as a shared library:
		 * nothing could answer, so say why at once. */
		fprintf(stderr, "kilnd: libmicrohttpd's MHD_queue_response not found: %s\n", dlerror());
		abort();
	}
}

/* The buffer of this thread's latest response: when the library queues
 * its own answer, the page it made just before (its reason, in words). */
static __thread const void *last_buf;
static __thread size_t last_len;

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
						      enum MHD_ResponseMemoryMode mode)
{
	pthread_once(&resolved, resolve);
	last_buf = buffer, last_len = size;
	return real_create(size, buffer, mode);
}

enum MHD_Result mhd_queue(struct MHD_Connection *conn, unsigned int status, struct MHD_Response *resp)
{
	pthread_once(&resolved, resolve);
	return real_queue(conn, status, resp);
}

static bool page_says(const char *words)
{
	return last_buf && memmem(last_buf, last_len, words, strlen(words));
}

/* The code and message for the library's answer of this status. */
static const char *describe(unsigned int status, const char **msg)
{
	switch (status) {
	case 400:
		if (page_says("Host:"))
			*msg = "an HTTP/1.1 request needs a Host header";
		else if (page_says("chunked encoding"))
			*msg = "the body's chunked encoding is malformed";
		else
			*msg = "malformed request: a header line is not 'Name: value', or the request "
			       "line is not 'METHOD TARGET HTTP/1.x'";
		return "invalid_request";
	case 413:
		*msg = "a chunk of the body is larger than any body kilnd takes";
		return "payload_too_large";
	case 414:
		*msg = "the request target is too long: the request line and headers must fit in "
		       "128 KiB";
		return "uri_too_long";
	case 431:
		*msg = "the request's headers are too large: the request line and headers must fit "
		       "in 128 KiB";
		return "headers_too_large";
	case 505:
		*msg = "this HTTP version is not supported: kilnd speaks HTTP/1.0 and HTTP/1.1";
		return "http_version_not_supported";
	default:
		*msg = "the HTTP server refused the request";
		return status >= 500 ? "internal" : "invalid_request";
	}
}

/* Called by libmicrohttpd only (mhd_errors.h): its own error answer. */
enum MHD_Result MHD_queue_response(struct MHD_Connection *conn, unsigned int status,
				   struct MHD_Response *page)
{
	(void)page;	/* the caller destroys it; it is never sent */
	pthread_once(&resolved, resolve);
	if (page_says("Content-Length"))
		return MHD_NO;	/* close: see mhd_errors.h */
	const char *msg, *code = describe(status, &msg);
	json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	size_t len = text ? strlen(text) : 0;
	char *body = text ? realloc(text, len + 2) : NULL;
	if (!body) {
		free(text);
		return MHD_NO;	/* out of memory: the library closes the connection */
	}
	body[len++] = '\n';
	body[len] = 0;
	struct MHD_Response *resp = real_create(len, body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	enum MHD_Result rc = real_queue(conn, status, resp);
	MHD_destroy_response(resp);
	return rc;
}
