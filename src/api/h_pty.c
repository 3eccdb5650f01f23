/*
 * h_pty: an interactive terminal in a sandbox over a WebSocket.
 *
 *   GET /v1/sandboxes/{id}/pty?cols=80&rows=24[&cmd=...]  (Upgrade: websocket)
 *
 * Client to server: binary messages are keyboard input; text messages are
 * JSON, {"type":"resize","cols":C,"rows":R}. Server to client: binary
 * messages are terminal output; at the end a text message
 * {"type":"exit","exit_code":N} and a close frame. Without cmd the user's
 * login shell runs.
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "ops/ops.h"
#include "ops/validate.h"
#include "api/ws.h"
#include "common/err.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define PTY_CMD_MAX 4096
/* A session quiet this long looks at its sandbox: a terminal may idle for
 * hours, but one whose sandbox was deleted, or whose host went down or
 * stalls (a cluster's relay: the stream need not end), ends with the
 * reason rather than wait forever. */
#define PTY_CHECK_MS 15000

struct pty {
	struct api *api;
	char workspace[ID_MAX], id[ID_MAX];
	unsigned rows, cols;
	char cmd[PTY_CMD_MAX + 1];
};

static void send_json(int fd, json_t *j)
{
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (t)
		ws_send(fd, WS_TEXT, t, strlen(t));
	free(t);
}

static void send_error(int fd, const char *msg)
{
	send_json(fd, json_pack("{s:s,s:s}", "type", "error", "message", msg));
	ws_close(fd, 1011, "error");
}

/* A text message from the client: a resize. Anything else is ignored. */
static void control(struct guest *g, const uint8_t *data, size_t len)
{
	json_t *j = json_loadb((const char *)data, len, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	json_int_t cols = json_integer_value(json_object_get(j, "cols"));
	json_int_t rows = json_integer_value(json_object_get(j, "rows"));
	if (type && !strcmp(type, "resize") && cols > 0 && cols <= 1000 && rows > 0 && rows <= 1000)
		guest_exec_resize(g, (unsigned)rows, (unsigned)cols);
	json_decref(j);
}

/* The quiet session's look at its sandbox: 1 (with the reason sent) when
 * it has ended, is gone, or cannot be reached. */
static int gone(struct pty *p, int fd)
{
	struct sbx_row row;
	int rc = hostif_get(p->api->hostif, p->workspace, p->id, false, &row);
	char why[600];
	bool live = rc == 0 && (row.state == SBX_RUNNING || row.state == SBX_PAUSED);
	if (live) {
		sbx_row_clear(&row);
		return 0;
	}
	/* Another error (the database away: 503 until it returns) says
	 * nothing of the sandbox: the session goes on. */
	if (rc < 0 && rc != -ENOENT && rc != -EHOSTDOWN && rc != -ETIMEDOUT)
		return 0;
	if (rc == -ENOENT)
		snprintf(why, sizeof why, "sandbox %s was deleted", p->id);
	else if (rc < 0)
		snprintf(why, sizeof why, "sandbox %s cannot be reached: %s", p->id, errmsg());
	else
		snprintf(why, sizeof why, "sandbox %s is %s%s%s", p->id, sbx_state_name(row.state),
			 row.error[0] ? ": " : "", row.error);
	if (rc == 0)
		sbx_row_clear(&row);
	send_error(fd, why);
	return 1;
}

/* Frames from the client. 1 when the session should end. */
static int from_client(int fd, struct ws_reader *wr, struct guest *g)
{
	uint8_t buf[16384];
	ssize_t n = recv(fd, buf, sizeof buf, 0);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0)
		return 1;
	if (ws_reader_feed(wr, buf, (size_t)n) < 0) {
		ws_close(fd, 1009, "message too big");
		return 1;
	}
	int op, rc;
	const uint8_t *data;
	size_t len;
	while ((rc = ws_next(wr, &op, &data, &len)) == 1) {
		switch (op) {
		case WS_BINARY:
			if (guest_exec_stdin(g, data, len) < 0)
				return 1;
			break;
		case WS_TEXT:
			control(g, data, len);
			break;
		case WS_PING:
			ws_send(fd, WS_PONG, data, len);
			break;
		case WS_CLOSE:
			ws_close(fd, 1000, "bye");
			return 1;
		default:
			break;
		}
	}
	if (rc < 0) {
		ws_close(fd, rc == -EMSGSIZE ? 1009 : 1002, "protocol error");
		return 1;
	}
	return 0;
}

static void session(void *ctx, int fd, int peer, const char *extra, size_t n)
{
	struct pty *p = ctx;
	struct hostif *hi = p->api->hostif;
	struct ws_reader wr;
	struct hostif_guest hg = { 0 };	/* left at out (zeroed until entered: nothing to leave) */
	struct guest *g;
	if (ws_reader_init(&wr) < 0) {
		send_error(fd, "out of memory");
		free(p);
		return;
	}
	if (n && ws_reader_feed(&wr, extra, n) < 0)
		goto out;
	/* The sandbox's create-time env, as for exec (docs/api.md). */
	struct sbx_row row;
	int got = hostif_get(hi, p->workspace, p->id, false, &row);
	if (got == -ENOENT) {
		send_error(fd, "sandbox not found");
		goto out;
	}
	char **env = got == 0 ? ops_env_merge(row.env, NULL) : NULL;
	if (got == 0)
		sbx_row_clear(&row);
	if (hostif_enter(hi, p->workspace, p->id, &hg) < 0) {
		free(env);
		send_error(fd, errmsg());
		goto out;
	}
	g = hg.g;
	if (!env) {
		send_error(fd, "out of memory");
		goto out;
	}
	struct guest_cmd cmd = {
		.shell = p->cmd[0] ? p->cmd : "exec \"${SHELL:-/bin/sh}\" -l",
		.env = (const char *const *)env,
		.stdin_pipe = true,
		.pty = true,
		.rows = p->rows,
		.cols = p->cols,
	};
	int started = guest_exec_start(g, &cmd);
	free(env);
	if (started < 0) {
		send_error(fd, errmsg());
		goto out;
	}
	/* Frames that came with the upgrade request. */
	int op;
	const uint8_t *data;
	size_t len;
	while (ws_next(&wr, &op, &data, &len) == 1)
		if (op == WS_BINARY)
			guest_exec_stdin(g, data, len);
	for (;;) {
		short gev;
		int gfd = guest_poll_fd(g, &gev);
		struct pollfd pf[3] = {
			/* Stop reading the client while the guest is not keeping up. */
			{ .fd = guest_exec_pending(g) < (1u << 20) ? fd : -1, .events = POLLIN },
			{ .fd = gfd, .events = gev },
			/* HTTPS: the client's socket, whose end TLS does not pass
			 * on (http.h). A WebSocket has no half-close: its end is
			 * the session's. */
			{ .fd = peer, .events = POLLRDHUP },
		};
		int k = poll(pf, 3, PTY_CHECK_MS);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (k == 0 && gone(p, fd))
			break;
		if (pf[0].revents && from_client(fd, &wr, g))
			break;
		if (pf[2].revents)
			break;
		if (!pf[1].revents)
			continue;
		struct guest_ev ev;
		int rc;
		bool done = false;
		while ((rc = guest_exec_next(g, &ev, -1, 0)) == 1) {
			if (ev.kind == GEV_EXIT) {
				send_json(fd, json_pack("{s:s,s:i}", "type", "exit", "exit_code", ev.code));
				ws_close(fd, 1000, "exited");
				done = true;
				break;
			}
			if (ws_send(fd, WS_BINARY, ev.data, ev.len) < 0) {
				done = true;
				break;
			}
		}
		if (rc < 0) {
			send_error(fd, errmsg());
			done = true;
		}
		if (done)
			break;
	}
out:
	hostif_leave(hi, &hg);
	ws_reader_free(&wr);
	free(p);
}

static int query_uint(struct req *r, const char *name, unsigned dflt, unsigned *out)
{
	const char *v = req_query(r, name);
	*out = dflt;
	if (!v)
		return 0;
	char *end;
	unsigned long n = strtoul(v, &end, 10);
	if (!*v || *end || n < 1 || n > 1000)
		return errf(EINVAL, "query parameter '%s' must be from 1 to 1000", name);
	*out = (unsigned)n;
	return 0;
}

int h_pty(struct req *r)
{
	const char *upgrade = req_header(r, "Upgrade"), *conn = req_header(r, "Connection");
	const char *version = req_header(r, "Sec-WebSocket-Version");
	const char *key = req_header(r, "Sec-WebSocket-Key"), *cmd = NULL;
	char accept[29];
	if (!upgrade || strcasecmp(upgrade, "websocket") != 0 || !conn || !strcasestr(conn, "upgrade"))
		return reply_error(r, 400, "invalid_request", "this route is a WebSocket: send Upgrade: websocket");
	if (!version || strcmp(version, "13") != 0 || ws_accept_key(key, accept) < 0)
		return reply_error(r, 400, "invalid_request", "bad Sec-WebSocket-Version or Sec-WebSocket-Key");
	int full = req_tunnel_room(r);		/* --max-tunnels */
	if (full >= 0)
		return full;
	struct pty *p = calloc(1, sizeof *p);
	if (!p)
		return reply_error(r, 500, "internal", "out of memory");
	int rc = query_uint(r, "rows", 24, &p->rows);
	rc = rc ?: query_uint(r, "cols", 80, &p->cols);
	rc = rc ?: req_query_exact(r, "cmd", &cmd);
	if (rc == 0 && cmd && strlen(cmd) > PTY_CMD_MAX)
		rc = errf(EINVAL, "query parameter 'cmd' is longer than %d bytes", PTY_CMD_MAX);
	if (rc < 0) {
		free(p);
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	}
	/* Look it up now for a proper 404; the session looks again (by id:
	 * a response MHD never sends holds nothing of the sandbox's). */
	int answered;
	if (req_sandbox(r, NULL, &answered) < 0) {
		free(p);
		return answered;
	}
	p->api = r->api;
	snprintf(p->workspace, sizeof p->workspace, "%s", r->workspace);
	snprintf(p->id, sizeof p->id, "%s", r->params[0]);
	snprintf(p->cmd, sizeof p->cmd, "%s", cmd ? cmd : "");
	const char *const headers[][2] = {
		{ "Upgrade", "websocket" },
		{ "Connection", "Upgrade" },
		{ "Sec-WebSocket-Accept", accept },
		{ NULL, NULL },
	};
	return reply_upgrade(r, headers, session, p);
}
