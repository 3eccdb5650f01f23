/*
 * h_file_tree: files routes that work on many files at once.
 *
 *   POST .../files/copy     {"from","to","recursive","replace"}
 *   POST .../files/write    {"files":[{"path","content"|"content_base64","mode"}]}
 *   GET  .../files/archive?path=DIR     the tree as application/x-tar
 *   PUT  .../files/archive?path=DIR     a tar body extracted into DIR
 *
 * Copy and the archives run as built-ins of the guest agent (a process of
 * their own in the guest, as the `user` asked for: docs/protocol.md), so
 * they work on every image, tar or not, never stall the agent, and the
 * hostile parts of a tar (names, links, types) are judged inside the VM,
 * next to the files they would touch. kilnd only relays bytes: a tar
 * download streams through in the agent's chunks, an upload is spooled
 * to DATA/tmp like any file upload and fed to the guest with at most
 * 1 MiB in flight.
 *
 * The multi-file write is file_batch.c's, shared with the MCP tool.
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/file_batch.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static int reply_400(struct req *r)
{
	return reply_error(r, 400, "invalid_request", "%s", errmsg());
}

static json_t *text(const char *s)
{
	return render_text(s, strlen(s));
}

/* ---- copy ------------------------------------------------------------------- */

int h_file_copy(struct req *r)
{
	static const char *const keys[] = { "from", "to", "recursive", "replace", NULL };
	const char *from = NULL, *to = NULL;
	bool recursive = false, replace = false;
	json_t *body = r->json;
	if (!body)
		return reply_error(r, 400, "invalid_request", "a JSON body {\"from\", \"to\"} is required");
	int rc = v_known_keys(body, keys);
	rc = rc ?: v_str(body, "from", true, 4095, &from);
	rc = rc ?: v_str(body, "to", true, 4095, &to);
	rc = rc ?: v_guest_path(from, "from");
	rc = rc ?: v_guest_path(to, "to");
	rc = rc ?: v_bool(body, "recursive", &recursive);
	rc = rc ?: v_bool(body, "replace", &replace);
	if (rc < 0)
		return reply_400(r);
	struct hostif_guest hg;
	const char *user;
	int answered;
	if (req_files_enter(r, &hg, &user, &answered) < 0)
		return answered;
	const char *argv[] = { "copy", from, to, recursive ? "1" : "0", replace ? "1" : "0", NULL };
	rc = guest_builtin_run(hg.g, argv, user, -1, req_socket(r));
	req_guest_leave(r, &hg);
	if (rc < 0)
		return reply_errno(r, rc);
	return reply_json(r, 200, json_pack("{s:o,s:o}", "from", text(from), "to", text(to)));
}

/* ---- multi-file write ------------------------------------------------------- */

/* Before the body: the query, the declared size. */
static int write_query(struct req *r)
{
	const char *user;
	int rc = req_query_user(r, &user);
	const char *cl = req_header(r, "Content-Length");
	if (rc == 0 && cl && strtoull(cl, NULL, 10) > WRITE_MAX_BODY)
		rc = errf(EFBIG, "a multi-file write's body is at most %llu bytes; write fewer files per request",
			  (unsigned long long)WRITE_MAX_BODY);
	return rc;
}

static int write_before_body(struct req *r)
{
	return req_upload_admit(r, write_query);
}

const struct route_hooks file_write_hooks = { .before_body = write_before_body };

int h_file_write_many(struct req *r)
{
	struct stat st;
	if (fstat(r->body_fd, &st) < 0)
		return reply_error(r, 500, "internal", "the spooled body: %s", strerror(errno));
	if ((uint64_t)st.st_size > WRITE_MAX_BODY)
		return reply_error(r, 413, "payload_too_large",
				   "a multi-file write's body is at most %llu bytes; write fewer files per request",
				   (unsigned long long)WRITE_MAX_BODY);
	json_error_t je;
	json_t *body = json_loadfd(r->body_fd, JSON_REJECT_DUPLICATES, &je);
	if (!body)
		return reply_error(r, 400, "invalid_json", "JSON body: %s (line %d, column %d)", je.text,
				   je.line, je.column);
	static const char *const keys[] = { "files", NULL };
	struct file_batch *fb = NULL;
	int rc = json_is_object(body) ? v_known_keys(body, keys)
				      : errf(EINVAL, "the JSON body must be an object {\"files\": [...]}");
	rc = rc ?: file_batch_parse(json_object_get(body, "files"), &fb);
	if (rc < 0) {
		json_decref(body);
		return rc == -ENOMEM ? reply_errno(r, rc) : rc == -EMSGSIZE
			? reply_error(r, 413, "payload_too_large", "%s", errmsg()) : reply_400(r);
	}
	struct hostif_guest hg;
	int answered;
	if (req_files_enter(r, &hg, NULL, &answered) < 0) {
		json_decref(body);
		file_batch_free(fb);
		return answered;
	}
	json_t *written = NULL;
	rc = file_batch_write(hg.g, fb, &written);
	req_guest_leave(r, &hg);
	int result = rc < 0 ? reply_errno(r, rc) : reply_json(r, 200, written);
	json_decref(body);
	file_batch_free(fb);
	return result;
}

/* ---- archives --------------------------------------------------------------- */

struct tar_out {
	struct api *api;
	struct hostif_guest hg;
	int sock;
	const uint8_t *p;		/* stdout not yet handed on (the agent's buffer) */
	size_t left;
	char err[1024];
	size_t errlen;
	int status;			/* 1 running, 0 done, <0 failed */
};

/* The next stdout bytes into t->p/left; status when the built-in ends. */
static int tar_pull(struct tar_out *t)
{
	while (t->left == 0 && t->status == 1) {
		struct guest_ev ev;
		int rc = guest_exec_next(t->hg.g, &ev, t->sock, -1);
		if (rc < 0) {
			t->status = rc;
			break;
		}
		if (rc == 0)
			continue;
		if (ev.kind == GEV_STDOUT) {
			t->p = ev.data;
			t->left = ev.len;
		} else if (ev.kind == GEV_STDERR) {
			size_t k = ev.len < sizeof t->err - t->errlen ? ev.len : sizeof t->err - t->errlen;
			memcpy(t->err + t->errlen, ev.data, k);
			t->errlen += k;
		} else {
			t->status = guest_builtin_status(&ev, t->err, t->errlen);
		}
	}
	return t->status;
}

static long tar_read(void *ctx, char *buf, size_t max)
{
	struct tar_out *t = ctx;
	if (tar_pull(t) < 0 && t->left == 0)
		return HTTP_STREAM_ERROR;	/* the client sees a cut-off body */
	if (t->left == 0)
		return HTTP_STREAM_END;
	size_t k = t->left < max ? t->left : max;
	memcpy(buf, t->p, k);
	t->p += k;
	t->left -= k;
	return (long)k;
}

static void tar_done(void *ctx)
{
	struct tar_out *t = ctx;
	/* Closing the connection mid-way kills the built-in in the guest. */
	hostif_leave(t->api->hostif, &t->hg);
	free(t);
}

int h_file_archive_get(struct req *r)
{
	const char *path = NULL;
	int rc = req_query_exact(r, "path", &path);
	rc = rc ?: v_guest_path(path, "path");
	if (rc < 0)
		return reply_400(r);
	struct tar_out *t = calloc(1, sizeof *t);
	if (!t)
		return reply_error(r, 500, "internal", "out of memory");
	t->api = r->api;
	t->sock = req_socket(r);
	t->status = 1;
	const char *user;
	int answered;
	if (req_files_enter(r, &t->hg, &user, &answered) < 0) {
		free(t);
		return answered;
	}
	const char *argv[] = { "tar-create", path, NULL };
	rc = guest_builtin_start(t->hg.g, argv, user, false);
	/* Wait for the first bytes or the end before the status line: a
	 * missing or unreadable directory is a 404 or 403, not a 200 with
	 * an empty body. */
	if (rc == 0)
		rc = tar_pull(t);
	if (rc < 0) {
		req_guest_leave(r, &t->hg);
		free(t);
		return reply_errno(r, rc);
	}
	static const char *const headers[][2] = {
		{ "Content-Type", "application/x-tar" },
		{ "Cache-Control", "no-store" },
		{ NULL, NULL },
	};
	return reply_response(r, 200, headers, HTTP_SIZE_UNKNOWN, tar_read, tar_done, t);
}

static int archive_put_query(struct req *r)
{
	const char *path = NULL, *user;
	int rc = req_query_exact(r, "path", &path);
	rc = rc ?: v_guest_path(path, "path");
	return rc ?: req_query_user(r, &user);
}

static int archive_put_before_body(struct req *r)
{
	return req_upload_admit(r, archive_put_query);
}

const struct route_hooks archive_put_hooks = { .before_body = archive_put_before_body };

int h_file_archive_put(struct req *r)
{
	const char *path = NULL;
	int rc = req_query_exact(r, "path", &path);
	rc = rc ?: v_guest_path(path, "path");
	if (rc < 0)
		return reply_400(r);
	struct stat st;
	uint64_t size = fstat(r->body_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	struct hostif_guest hg;
	const char *user;
	int answered;
	if (req_files_enter(r, &hg, &user, &answered) < 0)
		return answered;
	const char *argv[] = { "tar-extract", path, NULL };
	rc = guest_builtin_run(hg.g, argv, user, r->body_fd, req_socket(r));
	req_guest_leave(r, &hg);
	if (rc < 0)
		return reply_errno(r, rc);
	return reply_json(r, 200, json_pack("{s:o,s:I}", "path", text(path), "bytes", (json_int_t)size));
}
