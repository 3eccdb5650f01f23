#include "api/reply_buf.h"
#include "api/http.h"

#include <stdlib.h>
#include <string.h>

struct membody {
	char *p;
	size_t len, off;
};

static long mem_read(void *ctx, char *buf, size_t max)
{
	struct membody *m = ctx;
	if (m->off == m->len)
		return HTTP_STREAM_END;
	size_t n = m->len - m->off < max ? m->len - m->off : max;
	memcpy(buf, m->p + m->off, n);
	m->off += n;
	return (long)n;
}

static void mem_done(void *ctx)
{
	struct membody *m = ctx;
	free(m->p);
	free(m);
}

int reply_buf(struct req *r, int status, const char *const headers[][2], char *body, size_t len)
{
	struct membody *m = calloc(1, sizeof *m);
	if (!m) {
		free(body);
		return reply_error(r, 500, "internal", "out of memory");
	}
	m->p = body, m->len = len;
	return reply_response(r, status, headers, len, mem_read, mem_done, m);
}

int reply_json_headers(struct req *r, int status, const char *const headers[][2], json_t *json)
{
	req_note_created(r, status, json);
	char *text = json_dumps(json, JSON_COMPACT);
	json_decref(json);
	if (!text)
		return reply_error(r, 500, "internal", "out of memory");
	size_t len = strlen(text);
	char *t = realloc(text, len + 2);
	if (!t) {
		free(text);
		return reply_error(r, 500, "internal", "out of memory");
	}
	t[len++] = '\n';
	const char *h[16][2];
	int n = 0;
	h[n][0] = "Content-Type", h[n][1] = "application/json", n++;
	for (int i = 0; headers && headers[i][0] && n < 14; i++)
		h[n][0] = headers[i][0], h[n][1] = headers[i][1], n++;
	h[n][0] = h[n][1] = NULL;
	return reply_buf(r, status, h, t, len);
}
