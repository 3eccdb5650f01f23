/*
 * The client's operations: one function per request, following the frame
 * sequences of docs/protocol.md.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_int.h"

#define WRITE_CHUNK (256u << 10)	/* DATA frame size for uploads */

/* Send a request built in fb and take the one reply of type `want`. */
static int request(struct kiln_client *c, struct kiln_fb *fb, uint8_t want, struct kiln_msg *m)
{
	int rc = cl_send(c, fb);
	return rc < 0 ? rc : cl_expect(c, want, m);
}

static int simple(struct kiln_client *c, struct kiln_fb *fb)
{
	struct kiln_msg m;
	return request(c, fb, KILN_OK, &m);
}

/* After a CANCEL: read up to the op's terminal frame and drop the rest. */
static int drain_to_end(struct kiln_client *c)
{
	for (;;) {
		struct kiln_hdr h;
		const uint8_t *p;
		int rc = cl_recv(c, true, &h, &p);
		if (rc < 0)
			return rc;
		if (h.type == KILN_END || h.type == KILN_ERROR || h.type == KILN_OK ||
		    h.type == KILN_EXIT)
			return 0;
	}
}

/* ---- guest ------------------------------------------------------------ */

int kiln_tcp_connect(struct kiln_client *c, const char *host, unsigned port)
{
	struct kiln_fb fb;
	struct kiln_msg m;
	cl_begin(c, &fb, KILN_CONNECT);
	kiln_fb_u32(&fb, KT_PORT, port);
	if (host)
		kiln_fb_str(&fb, KT_HOST, host);
	return request(c, &fb, KILN_OK, &m);
}

int kiln_ping(struct kiln_client *c)
{
	struct kiln_fb fb;
	struct kiln_msg m;
	cl_begin(c, &fb, KILN_PING);
	return request(c, &fb, KILN_PONG, &m);
}

int kiln_info(struct kiln_client *c, struct kiln_info *out)
{
	struct kiln_fb fb;
	struct kiln_msg m;
	cl_begin(c, &fb, KILN_INFO);
	int rc = request(c, &fb, KILN_INFO_REPLY, &m);
	if (rc < 0)
		return rc;
	if (kiln_decode_info(&m, out) < 0)
		return cl_break(c, EBADMSG, "INFO_REPLY without VERSION");
	return 0;
}

int kiln_resync(struct kiln_client *c, const struct kiln_resync *r)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_RESYNC);
	if (r->set_time)
		kiln_fb_i64(&fb, KT_TIME_NS, r->time_ns);
	if (r->entropy)
		kiln_fb_bytes(&fb, KT_ENTROPY, r->entropy, r->entropy_len);
	if (r->hostname)
		kiln_fb_str(&fb, KT_HOSTNAME, r->hostname);
	if (r->identity)
		kiln_fb_str(&fb, KT_IDENTITY, r->identity);
	return simple(c, &fb);
}

int kiln_poweroff(struct kiln_client *c, uint32_t flags)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_POWEROFF);
	kiln_fb_u32(&fb, KT_FLAGS, flags);
	return simple(c, &fb);
}

/* ---- processes -------------------------------------------------------- */

static int started(struct kiln_client *c, uint32_t *id, uint32_t *pid, uint64_t *dropped)
{
	struct kiln_msg m;
	int rc = cl_expect(c, KILN_STARTED, &m);
	if (rc < 0)
		return rc;
	if (!kiln_msg_has(&m, KT_ID))
		return cl_break(c, EBADMSG, "STARTED without ID");
	if (id)
		*id = kiln_msg_u32(&m, KT_ID, 0);
	if (pid)
		*pid = kiln_msg_u32(&m, KT_PID, 0);
	if (dropped)
		*dropped = kiln_msg_u64(&m, KT_DROPPED, 0);
	return 0;
}

int kiln_exec_start(struct kiln_client *c, const struct kiln_exec_req *r,
		    uint32_t *id, uint32_t *pid)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_EXEC);
	for (const char *const *a = r->argv; a && *a; a++)
		kiln_fb_str(&fb, KT_ARG, *a);
	if (r->shell)
		kiln_fb_str(&fb, KT_SHELL, r->shell);
	for (const char *const *e = r->env; e && *e; e++)
		kiln_fb_str(&fb, KT_ENV, *e);
	if (r->cwd)
		kiln_fb_str(&fb, KT_CWD, r->cwd);
	if (r->user)
		kiln_fb_str(&fb, KT_USER, r->user);
	if (r->timeout_ms)
		kiln_fb_u32(&fb, KT_TIMEOUT_MS, r->timeout_ms);
	if (r->flags)
		kiln_fb_u32(&fb, KT_FLAGS, r->flags);
	if (r->rows)
		kiln_fb_u32(&fb, KT_ROWS, r->rows);
	if (r->cols)
		kiln_fb_u32(&fb, KT_COLS, r->cols);
	if (r->ring)
		kiln_fb_u32(&fb, KT_RING, r->ring);
	int rc = cl_send(c, &fb);
	return rc < 0 ? rc : started(c, id, pid, NULL);
}

int kiln_attach(struct kiln_client *c, uint32_t id, uint32_t *pid, uint64_t *dropped)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_ATTACH);
	kiln_fb_u32(&fb, KT_ID, id);
	int rc = cl_send(c, &fb);
	return rc < 0 ? rc : started(c, NULL, pid, dropped);
}

static int exec_event(struct kiln_client *c, const struct kiln_hdr *h, const uint8_t *p,
		      struct kiln_io *ev)
{
	struct kiln_msg m;

	memset(ev, 0, sizeof *ev);
	switch (h->type) {
	case KILN_STDOUT:
	case KILN_STDERR:
		ev->kind = h->type == KILN_STDOUT ? KILN_IO_STDOUT : KILN_IO_STDERR;
		ev->data = p;
		ev->len = h->len;
		return 1;
	case KILN_EXIT:
		if (cl_parse(c, h, p, &m) < 0)
			return -EBADMSG;
		if (kiln_decode_exit(&m, ev) < 0)
			return cl_break(c, EBADMSG, "EXIT without CODE or SIGNAL");
		return 1;
	case KILN_END:
		ev->kind = KILN_IO_DETACHED;
		return 1;
	case KILN_ERROR:
		return cl_parse(c, h, p, &m);
	}
	return cl_unexpected(c, h->type, "EXEC");
}

int kiln_exec_next(struct kiln_client *c, struct kiln_io *ev)
{
	struct kiln_hdr h;
	const uint8_t *p;
	int rc = cl_recv(c, true, &h, &p);
	if (rc < 0)
		return rc;
	rc = exec_event(c, &h, p, ev);
	return rc < 0 ? rc : 0;
}

int kiln_exec_poll(struct kiln_client *c, struct kiln_io *ev)
{
	struct kiln_hdr h;
	const uint8_t *p;
	int rc = cl_recv(c, false, &h, &p);
	if (rc <= 0)
		return rc;
	return exec_event(c, &h, p, ev);
}

/* Queue an in-op frame and send what the socket takes without blocking. */
static int queue_now(struct kiln_client *c, struct kiln_fb *fb)
{
	int rc = cl_usable(c);
	if (rc == 0)
		rc = cl_queue(c, fb);
	else
		buf_truncate(&c->out, fb->start);
	return rc < 0 ? rc : kiln_client_io(c, POLLOUT);
}

int kiln_exec_stdin(struct kiln_client *c, const void *p, size_t n)
{
	struct kiln_fb fb;
	const uint8_t *d = p;
	while (n) {
		size_t k = n > KILN_CHUNK ? KILN_CHUNK : n;
		cl_begin(c, &fb, KILN_DATA);
		kiln_fb_raw(&fb, d, k);
		int rc = queue_now(c, &fb);
		if (rc < 0)
			return rc;
		d += k;
		n -= k;
	}
	return 0;
}

int kiln_exec_eof(struct kiln_client *c)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_EOF);
	return queue_now(c, &fb);
}

int kiln_exec_resize(struct kiln_client *c, unsigned rows, unsigned cols)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_RESIZE);
	kiln_fb_u32(&fb, KT_ROWS, rows);
	kiln_fb_u32(&fb, KT_COLS, cols);
	return queue_now(c, &fb);
}

int kiln_exec_kill(struct kiln_client *c, int sig)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_KILL);
	kiln_fb_u32(&fb, KT_SIGNAL, (uint32_t)sig);
	return queue_now(c, &fb);
}

int kiln_exec_cancel(struct kiln_client *c)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_CANCEL);
	return queue_now(c, &fb);
}

int kiln_procs(struct kiln_client *c, kiln_proc_fn *fn, void *ctx)
{
	struct kiln_fb fb;
	int stop = 0;
	cl_begin(c, &fb, KILN_PROCS);
	int rc = cl_send(c, &fb);
	while (rc == 0) {
		struct kiln_hdr h;
		const uint8_t *p;
		struct kiln_msg m;
		struct kiln_proc_info pi;
		if ((rc = cl_recv(c, true, &h, &p)) < 0 || (rc = cl_parse(c, &h, p, &m)) < 0)
			return rc;
		if (h.type == KILN_END)
			return stop;
		if (h.type != KILN_PROC)
			return cl_unexpected(c, h.type, "PROCS");
		if (kiln_decode_proc(&m, &pi) < 0)
			return cl_break(c, EBADMSG, "PROC without ID or STATE");
		if (!stop)
			stop = fn(ctx, &pi);
	}
	return rc;
}

int kiln_signal(struct kiln_client *c, uint32_t id, int sig, uint32_t flags)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_SIGNAL);
	kiln_fb_u32(&fb, KT_ID, id);
	kiln_fb_u32(&fb, KT_SIGNAL, (uint32_t)sig);
	if (flags)
		kiln_fb_u32(&fb, KT_FLAGS, flags);
	return simple(c, &fb);
}

int kiln_input(struct kiln_client *c, uint32_t id, const void *p, size_t n, uint32_t flags)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_INPUT);
	kiln_fb_u32(&fb, KT_ID, id);
	if (n)
		kiln_fb_bytes(&fb, KT_DATA, p, n);
	if (flags)
		kiln_fb_u32(&fb, KT_FLAGS, flags);
	return simple(c, &fb);
}

/* ---- files ------------------------------------------------------------ */

int kiln_read_file(struct kiln_client *c, const char *path, uint64_t offset,
		   uint64_t length, kiln_sink_fn *sink, void *ctx,
		   uint64_t *size, uint32_t *mode, uint64_t *bytes)
{
	struct kiln_fb fb;
	struct kiln_msg m;
	uint64_t got = 0;

	cl_begin(c, &fb, KILN_READ);
	kiln_fb_str(&fb, KT_PATH, path);
	if (offset)
		kiln_fb_u64(&fb, KT_OFFSET, offset);
	if (length != UINT64_MAX)
		kiln_fb_u64(&fb, KT_LENGTH, length);
	int rc = request(c, &fb, KILN_ACCEPT, &m);
	if (rc < 0)
		return rc;
	if (size)
		*size = kiln_msg_u64(&m, KT_SIZE, 0);
	if (mode)
		*mode = kiln_msg_u32(&m, KT_MODE, 0);
	for (;;) {
		struct kiln_hdr h;
		const uint8_t *p;
		if ((rc = cl_recv(c, true, &h, &p)) < 0)
			return rc;
		if (h.type == KILN_FDATA) {
			got += h.len;
			if (length != UINT64_MAX && got > length)
				return cl_break(c, EPROTO, "the agent sent more than the %llu bytes asked for",
						(unsigned long long)length);
			rc = sink(ctx, p, h.len);
			if (rc != 0) {
				char why[sizeof c->err];
				memcpy(why, c->err, sizeof why);
				cl_begin(c, &fb, KILN_CANCEL);
				if (cl_send(c, &fb) == 0)
					drain_to_end(c);
				memcpy(c->err, why, sizeof why);
				return rc < 0 ? rc : -ECANCELED;
			}
			continue;
		}
		if ((rc = cl_parse(c, &h, p, &m)) < 0)
			return rc;
		if (h.type != KILN_END)
			return cl_unexpected(c, h.type, "READ");
		if (kiln_msg_u64(&m, KT_BYTES, got) != got)
			return cl_break(c, EPROTO, "READ: the agent counted %llu bytes, %llu arrived",
					(unsigned long long)kiln_msg_u64(&m, KT_BYTES, 0),
					(unsigned long long)got);
		if (bytes)
			*bytes = got;
		return 0;
	}
}

/* An early ERROR while uploading: the agent discards until EOF. */
static int write_failed_early(struct kiln_client *c, bool *failed)
{
	struct kiln_hdr h;
	const uint8_t *p;
	struct kiln_msg m;
	int rc = cl_recv(c, false, &h, &p);
	if (rc <= 0)
		return rc;
	rc = cl_parse(c, &h, p, &m);
	if (rc == 0)
		return cl_unexpected(c, h.type, "WRITE");
	*failed = true;
	return rc;
}

int kiln_write_file(struct kiln_client *c, const char *path, uint32_t mode,
		    uint32_t flags, kiln_source_fn *source, void *ctx, uint64_t *bytes)
{
	struct kiln_fb fb;
	struct kiln_msg m;
	uint64_t sent = 0;
	bool failed = false;

	cl_begin(c, &fb, KILN_WRITE);
	kiln_fb_str(&fb, KT_PATH, path);
	kiln_fb_u32(&fb, KT_MODE, mode);
	if (flags)
		kiln_fb_u32(&fb, KT_FLAGS, flags);
	int rc = request(c, &fb, KILN_ACCEPT, &m);
	if (rc < 0)
		return rc;
	for (;;) {
		rc = write_failed_early(c, &failed);
		if (rc < 0) {
			if (failed) {
				/* Tell it we are done, so the connection stays
				 * usable; the ERROR was the reply. */
				char why[sizeof c->err];
				memcpy(why, c->err, sizeof why);
				cl_begin(c, &fb, KILN_EOF);
				cl_send(c, &fb);
				memcpy(c->err, why, sizeof why);
			}
			return rc;
		}
		cl_begin(c, &fb, KILN_DATA);
		uint8_t *dst = kiln_fb_raw_reserve(&fb, WRITE_CHUNK);
		if (!dst) {
			kiln_fb_end(&fb);
			return cl_fail(c, ENOMEM, "write %s: out of memory", path);
		}
		ssize_t n = source(ctx, dst, WRITE_CHUNK);
		if (n <= 0) {
			kiln_fb_raw_commit(&fb, 0);
			kiln_fb_end(&fb);
			buf_truncate(&c->out, fb.start);
			/* Abort with CANCEL, finish with EOF. */
			cl_begin(c, &fb, n < 0 ? KILN_CANCEL : KILN_EOF);
			if (n < 0) {
				char why[sizeof c->err];
				memcpy(why, c->err, sizeof why);
				if (cl_send(c, &fb) == 0)
					drain_to_end(c);
				memcpy(c->err, why, sizeof why);
				return (int)n;
			}
			rc = request(c, &fb, KILN_OK, &m);
			if (rc < 0)
				return rc;
			if (kiln_msg_u64(&m, KT_BYTES, sent) != sent)
				return cl_break(c, EPROTO, "WRITE: the agent counted %llu bytes, %llu were sent",
						(unsigned long long)kiln_msg_u64(&m, KT_BYTES, 0),
						(unsigned long long)sent);
			if (bytes)
				*bytes = sent;
			return 0;
		}
		kiln_fb_raw_commit(&fb, (size_t)n);
		sent += (uint64_t)n;
		rc = cl_send(c, &fb);
		if (rc < 0)
			return rc;
	}
}

int kiln_stat(struct kiln_client *c, const char *path, uint32_t flags, struct kiln_stat *st)
{
	struct kiln_fb fb;
	struct kiln_msg m;
	cl_begin(c, &fb, KILN_STAT);
	kiln_fb_str(&fb, KT_PATH, path);
	if (flags)
		kiln_fb_u32(&fb, KT_FLAGS, flags);
	int rc = request(c, &fb, KILN_STAT_REPLY, &m);
	if (rc < 0)
		return rc;
	if (kiln_decode_stat(&m, st) < 0)
		return cl_break(c, EBADMSG, "STAT_REPLY without MODE");
	return 0;
}

int kiln_list(struct kiln_client *c, const char *path, uint32_t depth,
	      kiln_entry_fn *fn, void *ctx, uint64_t *count)
{
	struct kiln_fb fb;
	struct kiln_stat *st = malloc(sizeof *st);
	uint64_t n = 0;
	int rc;

	if (!st)
		return cl_fail(c, ENOMEM, "list %s: out of memory", path);
	cl_begin(c, &fb, KILN_LIST);
	kiln_fb_str(&fb, KT_PATH, path);
	kiln_fb_u32(&fb, KT_DEPTH, depth);
	rc = cl_send(c, &fb);
	while (rc == 0) {
		struct kiln_hdr h;
		const uint8_t *p;
		struct kiln_msg m;
		if ((rc = cl_recv(c, true, &h, &p)) < 0 || (rc = cl_parse(c, &h, p, &m)) < 0)
			break;
		if (h.type == KILN_END)
			break;
		if (h.type != KILN_ENTRY) {
			rc = cl_unexpected(c, h.type, "LIST");
			break;
		}
		if (kiln_decode_stat(&m, st) < 0) {
			rc = cl_break(c, EBADMSG, "ENTRY without MODE");
			break;
		}
		n++;
		rc = fn(ctx, st);
		if (rc != 0) {
			cl_begin(c, &fb, KILN_CANCEL);
			if (cl_send(c, &fb) == 0)
				drain_to_end(c);
			break;
		}
	}
	free(st);
	if (count)
		*count = n;
	return rc;
}

int kiln_mkdir(struct kiln_client *c, const char *path, uint32_t mode, uint32_t flags)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_MKDIR);
	kiln_fb_str(&fb, KT_PATH, path);
	kiln_fb_u32(&fb, KT_MODE, mode);
	if (flags)
		kiln_fb_u32(&fb, KT_FLAGS, flags);
	return simple(c, &fb);
}

int kiln_remove(struct kiln_client *c, const char *path, uint32_t flags)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_REMOVE);
	kiln_fb_str(&fb, KT_PATH, path);
	if (flags)
		kiln_fb_u32(&fb, KT_FLAGS, flags);
	return simple(c, &fb);
}

int kiln_rename(struct kiln_client *c, const char *from, const char *to, uint32_t flags)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_RENAME);
	kiln_fb_str(&fb, KT_PATH, from);
	kiln_fb_str(&fb, KT_TARGET, to);
	if (flags)
		kiln_fb_u32(&fb, KT_FLAGS, flags);
	return simple(c, &fb);
}

int kiln_chmod(struct kiln_client *c, const char *path, uint32_t mode)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_CHMOD);
	kiln_fb_str(&fb, KT_PATH, path);
	kiln_fb_u32(&fb, KT_MODE, mode);
	return simple(c, &fb);
}

int kiln_watch_start(struct kiln_client *c, const char *path, uint32_t flags)
{
	struct kiln_fb fb;
	struct kiln_msg m;
	cl_begin(c, &fb, KILN_WATCH);
	kiln_fb_str(&fb, KT_PATH, path);
	if (flags)
		kiln_fb_u32(&fb, KT_FLAGS, flags);
	return request(c, &fb, KILN_ACCEPT, &m);
}

static int watch_event(struct kiln_client *c, bool block, uint32_t *events, char *name, size_t namelen)
{
	struct kiln_hdr h;
	const uint8_t *p;
	struct kiln_msg m;
	int rc = cl_recv(c, block, &h, &p);
	if (!block && rc == 0)
		return 2;	/* nothing buffered */
	if (rc < 0 || (rc = cl_parse(c, &h, p, &m)) < 0)
		return rc;
	if (h.type == KILN_END)
		return 0;
	if (h.type != KILN_EVENT)
		return cl_unexpected(c, h.type, "WATCH");
	*events = kiln_msg_u32(&m, KT_EVENT, 0);
	cl_copy_str(&m, KT_NAME, name, namelen);
	return 1;
}

int kiln_watch_next(struct kiln_client *c, uint32_t *events, char *name, size_t namelen)
{
	return watch_event(c, true, events, name, namelen);
}

int kiln_watch_poll(struct kiln_client *c, uint32_t *events, char *name, size_t namelen)
{
	return watch_event(c, false, events, name, namelen);
}

int kiln_watch_cancel(struct kiln_client *c)
{
	struct kiln_fb fb;
	cl_begin(c, &fb, KILN_CANCEL);
	return cl_send(c, &fb);
}
