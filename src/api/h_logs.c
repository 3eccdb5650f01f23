/*
 * h_logs: GET /v1/sandboxes/{id}/logs, the sandbox's console log as lines
 * (docs/api.md, Logs): the guest console ("console") and kiln-init's own
 * lines ("init", written to the console as "kiln-init: ..."). ?tail=N
 * answers the last N lines as JSON; &follow=true streams them as SSE, then
 * new lines as the VMM appends them, and "end" when the sandbox ends.
 * Reading logs is not activity (TTL) and does not wake a hibernated
 * sandbox.
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/sse.h"
#include "api/render.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strbuf.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TAIL_DEFAULT 200
#define WINDOW (4 << 20)	/* the tail is looked for in the last 4 MiB */
#define LINE_MAX_BYTES 8192	/* a longer line is cut there */
#define INIT_PREFIX "kiln-init: "

/* One console line (no newline) as {"source","text","ts"}. The console
 * has no times of its own: ts is null. */
static json_t *line_json(const char *p, size_t n)
{
	if (n && p[n - 1] == '\r')
		n--;
	if (n > LINE_MAX_BYTES)
		n = LINE_MAX_BYTES;
	const char *source = "console";
	if (n >= strlen(INIT_PREFIX) && memcmp(p, INIT_PREFIX, strlen(INIT_PREFIX)) == 0) {
		source = "init";
		p += strlen(INIT_PREFIX);
		n -= strlen(INIT_PREFIX);
	}
	return json_pack("{s:s,s:o,s:n}", "source", source, "text", render_text(p, n), "ts");
}

/* The last tail complete lines of fd, as a JSON array; *end gets the
 * offset after the last complete line (where following goes on). */
static int read_tail(int fd, long tail, json_t **out, off_t *end)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return errf_sys("console log");
	off_t from = st.st_size > WINDOW ? st.st_size - WINDOW : 0;
	size_t cap = (size_t)(st.st_size - from);
	char *buf = malloc(cap + 1);
	if (!buf)
		return errf(ENOMEM, "out of memory");
	ssize_t n = cap ? pread(fd, buf, cap, from) : 0;
	if (n < 0) {
		free(buf);
		return errf_sys("console log");
	}
	/* Only complete lines; a partial last one comes when it ends. */
	size_t len = (size_t)n;
	while (len && buf[len - 1] != '\n')
		len--;
	*end = from + (off_t)len;
	/* Walk back over tail newlines (the first line of a cut window is
	 * partial: skipped unless the window starts the file). */
	size_t start = len, count = 0;
	while (start > 0 && count < (size_t)tail) {
		size_t i = start - 1;	/* the newline ending the line */
		while (i > 0 && buf[i - 1] != '\n')
			i--;
		if (i == 0 && from > 0)
			break;
		start = i;
		count++;
	}
	json_t *a = json_array();
	for (size_t i = start; a && i < len;) {
		char *nl = memchr(buf + i, '\n', len - i);
		json_array_append_new(a, line_json(buf + i, (size_t)(nl - (buf + i))));
		i = (size_t)(nl - buf) + 1;
	}
	free(buf);
	if (!a)
		return errf(ENOMEM, "out of memory");
	*out = a;
	return 0;
}

/* ---- follow ------------------------------------------------------------------------- */

struct follow {
	struct api *api;
	char workspace[ID_MAX], id[ID_MAX];	/* the sandbox followed */
	int fd;
	int more;		/* -1, or where later bytes come (hostif_log_open) */
	off_t off;		/* next byte of the log to read (fd) */
	struct sse_follow sf;
	char part[LINE_MAX_BYTES];	/* a line not ended yet */
	size_t npart;
	int quiet;		/* more: waits with nothing from the host since it last looked */
};

/* A relay from a cluster's host (more) ends when the sandbox does; one
 * whose end never arrived stayed open after the sandbox was deleted
 * through an API replica (e2e 72-kilnd-cli's `kiln logs -f` against the
 * cluster, issue 12). Quiet for this many waits (SSE_FOLLOW_POLL_MS each),
 * the follower looks at the sandbox itself. */
#define RELAY_QUIET_LOOK 8

static void flush_line(struct follow *f)
{
	sse_event(&f->sf.out, "line", line_json(f->part, f->npart));
	f->npart = 0;
}

static bool ended(struct follow *f)
{
	return sandbox_ended(f->api->hostif, f->workspace, f->id);
}

/* Bytes of the log as lines (the last one, not ended yet, kept). */
static void take(struct follow *f, const char *chunk, ssize_t n)
{
	for (ssize_t i = 0; i < n; i++) {
		if (chunk[i] == '\n')
			flush_line(f);
		else if (f->npart < sizeof f->part)
			f->part[f->npart++] = chunk[i];
	}
}

/* The end: the relay closed, a line not ended sent, then "end". */
static bool finish(struct follow *f, struct sse_follow *sf, const char *why)
{
	if (f->more >= 0)
		close(f->more);
	f->more = sf->wait_fd = -1;
	if (f->npart)
		flush_line(f);
	sse_event(&sf->out, "end", json_pack("{s:s}", "reason", why));
	sf->done = true;
	return true;
}

/* The log's next bytes as lines, or its end (sse_more_fn). */
static bool follow_more(void *ctx, struct sse_follow *sf)
{
	struct follow *f = ctx;
	char chunk[16384];
	ssize_t n = f->more >= 0 ? recv(f->more, chunk, sizeof chunk, MSG_DONTWAIT)
				 : pread(f->fd, chunk, sizeof chunk, f->off);
	if (n <= 0 && f->more >= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR)))
		/* The host ended it: the sandbox ended, or the host went. */
		return finish(f, sf, ended(f) ? "the sandbox ended" : "its host stopped sending it");
	if (n > 0) {
		f->quiet = 0;
		f->off += n;
		take(f, chunk, n);
		return true;
	}
	if (f->more >= 0 && ++f->quiet >= RELAY_QUIET_LOOK) {
		f->quiet = 0;
		if (ended(f)) {
			/* What the host sent before it stopped, then the end. */
			while ((n = recv(f->more, chunk, sizeof chunk, MSG_DONTWAIT)) > 0)
				take(f, chunk, n);
			log_info("log of sandbox %s followed: it ended and its host's relay had not", f->id);
			return finish(f, sf, "the sandbox ended");
		}
	}
	if (f->more < 0 && ended(f))
		return finish(f, sf, "the sandbox ended");
	return false;
}

static long follow_read(void *ctx, char *buf, size_t max)
{
	struct follow *f = ctx;
	return sse_follow_read(&f->sf, follow_more, f, buf, max);
}

static void follow_done(void *ctx)
{
	struct follow *f = ctx;
	close(f->fd);
	if (f->more >= 0)
		close(f->more);
	sse_free(&f->sf.out);
	free(f);
}

int h_sandbox_logs(struct req *r)
{
	struct logq q;
	if (req_log_query(r, TAIL_DEFAULT, &q) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	int answered, fd, more;
	if (req_sandbox(r, NULL, &answered) < 0)
		return answered;
	int rc = hostif_log_open(r->api->hostif, r->workspace, req_sandbox_id(r), q.follow, &fd, &more);
	if (rc < 0)
		return reply_errno(r, rc);
	json_t *lines = NULL;
	off_t end = 0;
	if ((rc = read_tail(fd, q.tail, &lines, &end)) < 0 || !q.follow) {
		close(fd);
		if (more >= 0)
			close(more);
		return rc < 0 ? reply_errno(r, rc) : reply_json(r, 200, json_pack("{s:o}", "lines", lines));
	}
	struct follow *f = calloc(1, sizeof *f);
	if (!f) {
		json_decref(lines);
		close(fd);
		if (more >= 0)
			close(more);
		return reply_error(r, 500, "internal", "out of memory");
	}
	f->api = r->api;
	snprintf(f->workspace, sizeof f->workspace, "%s", r->workspace);
	snprintf(f->id, sizeof f->id, "%s", req_sandbox_id(r));
	f->fd = fd;
	f->more = more;
	f->off = end;
	sse_follow_init(&f->sf, req_socket(r));
	f->sf.wait_fd = more;
	size_t i;
	json_t *l;
	json_array_foreach(lines, i, l)
		sse_event(&f->sf.out, "line", json_incref(l));
	json_decref(lines);
	return reply_stream(r, 200, "text/event-stream", follow_read, follow_done, f);
}
