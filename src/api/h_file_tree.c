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
 * The multi-file write stages every file under a temporary name beside
 * its target first (the atomic single-file WRITE), and renames them into
 * place only when all are in the guest. A failure while staging changes
 * nothing (the staged files are removed; parent directories it made
 * stay); a failure among the renames, which only a concurrent change in
 * the guest can cause, leaves the earlier files written and says which.
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_MAX_FILES	1000
#define WRITE_MAX_BYTES	(64ull << 20)	/* decoded content, all files */
#define WRITE_MAX_BODY	(96ull << 20)	/* the JSON, base64 included */

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

struct wfile {
	const char *path;
	uint8_t *data;
	size_t len;
	uint32_t mode;
	char tmp[4200];
	bool staged;
};

static int decode_b64(const char *s, uint8_t **out, size_t *len)
{
	size_t n = strlen(s);
	uint8_t *p = malloc(BASE64_DECODE_LENGTH(n) + 1);
	struct base64_decode_ctx ctx;
	size_t got = 0;
	if (!p)
		return -ENOMEM;
	base64_decode_init(&ctx);
	if (!base64_decode_update(&ctx, &got, p, n, s) || !base64_decode_final(&ctx)) {
		free(p);
		return -EINVAL;
	}
	*out = p;
	*len = got;
	return 0;
}

static int parse_mode(const json_t *m, uint32_t *out, size_t i)
{
	long mode = -1;
	if (!m) {
		*out = 0644;
		return 0;
	}
	if (json_is_integer(m))
		mode = (long)json_integer_value(m);
	else if (json_is_string(m)) {
		const char *t = json_string_value(m);
		size_t l = strlen(t);
		mode = l >= 1 && l <= 5 && strspn(t, "01234567") == l ? strtol(t, NULL, 8) : -1;
	}
	if (mode < 0 || mode > 07777)
		return errf(EINVAL, "files[%zu].mode is octal text such as \"644\" or a number, 0 to 07777", i);
	*out = (uint32_t)mode;
	return 0;
}

static int parse_files(json_t *body, struct wfile **out, size_t *count)
{
	static const char *const keys[] = { "files", NULL };
	static const char *const fkeys[] = { "path", "content", "content_base64", "mode", NULL };
	int rc = v_known_keys(body, keys);
	if (rc < 0)
		return rc;
	json_t *a = json_object_get(body, "files");
	if (!json_is_array(a) || json_array_size(a) == 0)
		return errf(EINVAL, "field 'files' must be a non-empty array of {\"path\", \"content\" or "
			    "\"content_base64\", \"mode\"}");
	size_t n = json_array_size(a);
	if (n > WRITE_MAX_FILES)
		return errf(EMSGSIZE, "%zu files in one write; the limit is %d", n, WRITE_MAX_FILES);
	struct wfile *f = calloc(n, sizeof *f);
	if (!f)
		return errf(ENOMEM, "out of memory");
	*out = f;
	*count = n;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(a, i);
		if (!json_is_object(e))
			return errf(EINVAL, "files[%zu] must be an object", i);
		if ((rc = v_known_keys(e, fkeys)) < 0)
			return errf(EINVAL, "files[%zu]: %s", i, errmsg());
		const char *content = NULL, *b64 = NULL;
		rc = v_str(e, "path", true, 4095, &f[i].path);
		rc = rc ?: v_guest_path(f[i].path, "path");
		rc = rc ?: v_str(e, "content", false, WRITE_MAX_BYTES, &content);
		rc = rc ?: v_str(e, "content_base64", false, WRITE_MAX_BODY, &b64);
		if (rc < 0)
			return errf(EINVAL, "files[%zu]: %s", i, errmsg());
		if (f[i].path[strlen(f[i].path) - 1] == '/')
			return errf(EINVAL, "files[%zu].path names a directory; give the file's path", i);
		if (!content == !b64)
			return errf(EINVAL, "files[%zu]: give one of 'content' (text) and 'content_base64'", i);
		if ((rc = parse_mode(json_object_get(e, "mode"), &f[i].mode, i)) < 0)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(f[j].path, f[i].path))
				return errf(EINVAL, "files[%zu] and files[%zu] name the same path %s", j, i,
					    f[i].path);
		if (content) {
			f[i].len = json_string_length(json_object_get(e, "content"));
			f[i].data = malloc(f[i].len + 1);
			if (!f[i].data)
				return errf(ENOMEM, "out of memory");
			memcpy(f[i].data, content, f[i].len);
		} else if ((rc = decode_b64(b64, &f[i].data, &f[i].len)) < 0) {
			return rc == -ENOMEM ? errf(ENOMEM, "out of memory")
					     : errf(EINVAL, "files[%zu].content_base64 is not valid base64", i);
		}
		total += f[i].len;
		if (total > WRITE_MAX_BYTES)
			return errf(EMSGSIZE, "the files' content is over the limit of %llu bytes in one write",
				    (unsigned long long)WRITE_MAX_BYTES);
	}
	return 0;
}

static void free_files(struct wfile *f, size_t n)
{
	for (size_t i = 0; f && i < n; i++)
		free(f[i].data);
	free(f);
}

/* One file's bytes, as the descriptor guest_write_file reads. */
static int stage_one(struct guest *g, struct wfile *f)
{
	int fd = memfd_create("kiln-write", MFD_CLOEXEC);
	if (fd < 0)
		return errf_sys("memfd");
	size_t off = 0;
	while (off < f->len) {
		ssize_t w = write(fd, f->data + off, f->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return errf_sys("memfd");
		}
		off += (size_t)w;
	}
	lseek(fd, 0, SEEK_SET);
	uint64_t bytes;
	int rc = guest_write_file(g, f->tmp, f->mode, true, fd, &bytes);
	close(fd);
	return rc;
}

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
	struct wfile *f = NULL;
	size_t n = 0;
	int rc = json_is_object(body) ? parse_files(body, &f, &n)
				      : errf(EINVAL, "the JSON body must be an object {\"files\": [...]}");
	if (rc < 0) {
		json_decref(body);
		free_files(f, n);
		return rc == -ENOMEM ? reply_errno(r, rc) : rc == -EMSGSIZE
			? reply_error(r, 413, "payload_too_large", "%s", errmsg()) : reply_400(r);
	}
	struct hostif_guest hg;
	int answered;
	if (req_files_enter(r, &hg, NULL, &answered) < 0) {
		json_decref(body);
		free_files(f, n);
		return answered;
	}
	uint32_t tag = 0;
	if (getrandom(&tag, sizeof tag, 0) != sizeof tag)
		tag = (uint32_t)getpid();
	/* A directory where a file should go is refused before anything. */
	struct guest_stat *gs = malloc(sizeof *gs);
	rc = gs ? 0 : errf(ENOMEM, "out of memory");
	size_t bad = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (guest_stat(hg.g, f[i].path, gs) == 0 && S_ISDIR(gs->mode))
			rc = errf(EISDIR, "%s is a directory", f[i].path), bad = i;
	}
	free(gs);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *slash = strrchr(f[i].path, '/');
		snprintf(f[i].tmp, sizeof f[i].tmp, "%.*s.%.200s.kiln-write-%08x", (int)(slash - f[i].path + 1),
			 f[i].path, slash + 1, tag);
		rc = stage_one(hg.g, &f[i]);
		if (rc < 0)
			bad = i;
		else
			f[i].staged = true;
	}
	size_t renamed = 0;
	for (size_t i = 0; rc == 0 && i < n; i++, renamed++) {
		rc = guest_rename(hg.g, f[i].tmp, f[i].path, true);
		if (rc < 0)
			bad = i;
		else
			f[i].staged = false;
	}
	char why[1024] = "";
	if (rc < 0) {
		snprintf(why, sizeof why, "%s", errmsg());
		for (size_t i = 0; i < n; i++)
			if (f[i].staged)
				guest_remove(hg.g, f[i].tmp, false);
	}
	req_guest_leave(r, &hg);
	int result;
	if (rc < 0) {
		errf(-rc, "files[%zu] (%s): %s; %s", bad, f[bad].path, why,
		     renamed ? "the files before it were written, the rest not"
			     : "no file was changed");
		result = reply_errno(r, rc);
	} else {
		json_t *a = json_array();
		for (size_t i = 0; a && i < n; i++)
			json_array_append_new(a, json_pack("{s:o,s:I}", "path", text(f[i].path), "size",
							   (json_int_t)f[i].len));
		result = reply_json(r, 200, json_pack("{s:o,s:I}", "files", a, "count", (json_int_t)n));
	}
	json_decref(body);
	free_files(f, n);
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
