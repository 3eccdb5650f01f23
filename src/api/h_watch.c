/*
 * h_watch: changes under a guest path, as Server-Sent Events.
 *
 *   GET /v1/sandboxes/{id}/files/watch?path=P&recursive=true
 *
 * The stream opens with `event: ready` once the guest agent watches P
 * (events before it are not seen), then one `event: fs` per change:
 * {"type","name","dir"} with type create, write, remove, rename (with
 * "moved": "from" or "to") or chmod, and name relative to P ("" for P
 * itself). Coalescing: a write to a name whose last event sent was a
 * write of the same name within WRITE_COALESCE_MS is not sent again (a
 * file written in many pieces gives one write, or one per 100 ms); a
 * close after writing is not an event of its own. `event: overflow`: the
 * guest dropped events (the reader was slow); `event: gone`: P itself was
 * deleted or moved, and the stream ends. A comment every 15 s keeps
 * proxies from closing a quiet stream; closing the connection ends the
 * watch. Bounded by the inotify limits of the guest (docs/protocol.md).
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "api/sse.h"
#include "ops/validate.h"
#include "common/err.h"
#include "common/proto.h"
#include "common/strbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WRITE_COALESCE_MS 100
#define KEEPALIVE_MS 15000

struct watch {
	struct api *api;
	struct hostif_guest hg;		/* the watch's connection: hg.g */
	int sock;			/* the client's: its hangup ends the watch */
	struct sse_out out;		/* formatted, not yet handed to MHD */
	bool done;
	char last_write[4096];		/* the name of the last write sent... */
	int64_t last_write_ms;		/* ...and when */
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One guest event as the stream's events (none, one, or for a rename
 * pair the one half it is). */
static void fs_event(struct watch *w, uint32_t ev, const char *name)
{
	if (ev & KILN_EV_OVERFLOW) {
		sse_event(&w->out, "overflow", json_pack("{s:b}", "lost", 1));
		return;
	}
	const char *type = NULL, *moved = NULL;
	if (ev & KILN_EV_CREATE)
		type = "create";
	else if (ev & KILN_EV_DELETE)
		type = "remove";
	else if (ev & KILN_EV_MOVED_FROM)
		type = "rename", moved = "from";
	else if (ev & KILN_EV_MOVED_TO)
		type = "rename", moved = "to";
	else if (ev & KILN_EV_MODIFY)
		type = "write";
	else if (ev & KILN_EV_ATTRIB)
		type = "chmod";
	if (!type)
		return;		/* CLOSE_WRITE: its writes were reported */
	int64_t now = mono_ms();
	if (!strcmp(type, "write")) {
		if (!strcmp(w->last_write, name) && now - w->last_write_ms < WRITE_COALESCE_MS)
			return;
		snprintf(w->last_write, sizeof w->last_write, "%s", name);
		w->last_write_ms = now;
	} else if (!strcmp(w->last_write, name)) {
		w->last_write[0] = 0;	/* a later write is news again */
	}
	json_t *j = json_pack("{s:s,s:o,s:b}", "type", type, "name", render_text(name, strlen(name)), "dir",
			      (ev & KILN_EV_ISDIR) != 0);
	if (j && moved)
		json_object_set_new(j, "moved", json_string(moved));
	sse_event(&w->out, "fs", j);
}

static long watch_read(void *ctx, char *buf, size_t max)
{
	struct watch *w = ctx;
	while (sse_drained(&w->out)) {
		if (w->done)
			return HTTP_STREAM_END;
		uint32_t ev = 0;
		char name[4096];
		int rc = guest_watch_next(w->hg.g, &ev, name, sizeof name, w->sock, KEEPALIVE_MS);
		if (rc == 0) {
			sse_comment(&w->out, "keepalive");
		} else if (rc == 2 || (rc == 1 && (ev & KILN_EV_GONE))) {
			sse_event(&w->out, "gone", json_pack("{s:s}", "message", "the watched path was deleted or moved"));
			w->done = true;
		} else if (rc < 0) {
			const char *code;
			errno_status(rc, &code);
			sse_event(&w->out, "error", json_pack("{s:s,s:s}", "code", code, "message", errmsg()));
			w->done = true;
		} else {
			fs_event(w, ev, name);
		}
	}
	return sse_take(&w->out, buf, max);
}

static void watch_done(void *ctx)
{
	struct watch *w = ctx;
	/* The connection is closed, not reused: that ends the guest's watch. */
	hostif_leave(w->api->hostif, &w->hg);
	sse_free(&w->out);
	free(w);
}

int h_file_watch(struct req *r)
{
	const char *path = NULL;
	bool recursive = false;
	int rc = req_query_exact(r, "path", &path);
	rc = rc ?: v_guest_path(path, "path");
	rc = rc ?: req_query_bool(r, "recursive", &recursive);
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct watch *w = calloc(1, sizeof *w);
	if (!w)
		return reply_error(r, 500, "internal", "out of memory");
	w->api = r->api;
	w->sock = req_socket(r);
	sse_init(&w->out);
	int answered;
	if (req_files_enter(r, &w->hg, NULL, &answered) < 0) {
		free(w);
		return answered;
	}
	/* The agent answers ACCEPT or ERROR before any event: a missing
	 * path is a 404 here, not an event in a 200 stream. */
	if ((rc = guest_watch_start(w->hg.g, path, recursive)) < 0) {
		req_guest_leave(r, &w->hg);
		free(w);
		return reply_errno(r, rc);
	}
	sse_event(&w->out, "ready", json_pack("{s:s,s:b}", "path", path, "recursive", recursive));
	return reply_stream(r, 200, "text/event-stream", watch_read, watch_done, w);
}
