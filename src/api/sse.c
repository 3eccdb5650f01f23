/*
 * sse: the buffer of a Server-Sent Events answer (sse.h).
 */
#include "api/sse.h"
#include "api/http.h"

#include <stdlib.h>
#include <string.h>

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
