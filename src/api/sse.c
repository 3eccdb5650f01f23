/*
 * sse: the buffer of a Server-Sent Events answer (sse.h).
 */
#include "api/sse.h"
#include "api/http.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define KEEPALIVE_MS 15000

void sse_init(struct sse_out *o)
{
	strbuf_init(&o->b);
	o->off = 0;
}

void sse_free(struct sse_out *o)
{
	strbuf_free(&o->b);
}

bool sse_drained(struct sse_out *o)
{
	if (o->off < o->b.len)
		return false;
	strbuf_reset(&o->b);
	o->off = 0;
	return true;
}

void sse_event(struct sse_out *o, const char *name, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	json_decref(data);
	strbuf_printf(&o->b, "event: %s\ndata: %s\n\n", name,
		      text ? text : "{\"code\":\"internal\",\"message\":\"out of memory\"}");
	free(text);
}

void sse_comment(struct sse_out *o, const char *text)
{
	strbuf_printf(&o->b, ": %s\n\n", text);
}

long sse_take(struct sse_out *o, char *buf, size_t max)
{
	if (strbuf_failed(&o->b))
		return HTTP_STREAM_ERROR;
	size_t n = o->b.len - o->off;
	if (n > max)
		n = max;
	memcpy(buf, o->b.data + o->off, n);
	o->off += n;
	return (long)n;
}

void sse_follow_init(struct sse_follow *f, int sock)
{
	sse_init(&f->out);
	f->sock = sock;
	f->wait_fd = -1;
	f->done = false;
	f->quiet_ms = 0;
}

long sse_follow_read(struct sse_follow *f, sse_more_fn *more, void *ctx, char *buf, size_t max)
{
	while (sse_drained(&f->out)) {
		if (f->done)
			return HTTP_STREAM_END;
		if (more(ctx, f)) {
			f->quiet_ms = 0;
			continue;
		}
		/* Nothing new: wait a little, watching for the client to go
		 * (and for the source's next bytes, where they come to a fd). */
		struct pollfd p[2] = { { .fd = f->sock, .events = POLLRDHUP }, { .fd = f->wait_fd, .events = POLLIN } };
		int r = poll(p, 2, SSE_FOLLOW_POLL_MS);
		if (r > 0 && (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return HTTP_STREAM_END;
		f->quiet_ms += SSE_FOLLOW_POLL_MS;
		if (f->quiet_ms >= KEEPALIVE_MS) {
			sse_comment(&f->out, "keepalive");
			f->quiet_ms = 0;
		}
	}
	return sse_take(&f->out, buf, max);
}
