/*
 * h_files: files inside a sandbox. Paths are guest paths, absolute, taken
 * literally and resolved by the guest agent inside the VM: "/../etc" is
 * the guest's /etc, and nothing on the host is reachable through them.
 * Downloads and uploads pass through an unlinked temporary file under
 * DATA/tmp, so a large file costs no memory and the status is known before
 * the first byte is sent.
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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIST_MAX 10000

static int query_path(struct req *r, const char **path)
{
	*path = NULL;
	int rc = req_query_exact(r, "path", path);
	return rc ?: v_guest_path(*path, "path");
}

/* The routes whose only parameter is the path. */
static int path_and_guest(struct req *r, const char **path, struct hostif_guest *hg, int *answered)
{
	if (query_path(r, path) < 0) {
		*answered = reply_error(r, 400, "invalid_request", "%s", errmsg());
		return -1;
	}
	return req_files_enter(r, hg, NULL, answered);
}

static const char *type_of(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	case S_IFCHR: return "char";
	case S_IFBLK: return "block";
	default: return "other";
	}
}

json_t *stat_json(const struct guest_stat *st, const char *key, const char *name)
{
	char mode[8];
	snprintf(mode, sizeof mode, "%04o", st->mode & 07777);
	json_t *j = json_pack("{s:o,s:s,s:I,s:s,s:i,s:i,s:o}", key, render_text(name, strlen(name)),
			      "type", type_of(st->mode), "size", (json_int_t)st->size, "mode", mode,
			      "uid", (int)st->uid, "gid", (int)st->gid,
			      "modified_at", render_time(st->mtime_ns / 1000000));
	if (j && st->link[0])
		json_object_set_new(j, "link", render_text(st->link, strlen(st->link)));
	/* A name that is not UTF-8 shows with U+FFFD in `key`; its bytes are
	 * in `key`_b64, and go back percent-encoded in a `path` query. */
	size_t n = strlen(name);
	if (j && !utf8_valid(name, n)) {
		char field[16], *b64 = base64_of(name, n);
		snprintf(field, sizeof field, "%s_b64", key);
		if (b64)
			json_object_set_new(j, field, json_string(b64));
		free(b64);
	}
	return j;
}

static int tmpfile_fd(struct req *r)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/tmp", r->api->cfg->data_dir);
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd < 0 ? errf_sys("temporary file in %s", dir) : fd;
}

int h_file_get(struct req *r)
{
	const char *path;
	struct hostif_guest hg;
	int answered;
	if (path_and_guest(r, &path, &hg, &answered) < 0)
		return answered;
	int fd = tmpfile_fd(r);
	uint64_t size = 0;
	int rc = fd < 0 ? fd : guest_read_file(hg.g, path, fd, r->api->cfg->max_file_bytes, &size);
	req_guest_leave(r, &hg);
	if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0)
		rc = errf_sys("rewind");
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return reply_errno(r, rc);
	}
	return reply_fd(r, fd, size, "application/octet-stream");
}

static int file_put_query(struct req *r, const char **path, unsigned long *mode, bool *mkdirs)
{
	const char *mode_s = req_query(r, "mode");
	*mkdirs = true;
	*mode = 0644;
	const char *user;
	int rc = query_path(r, path);
	rc = rc ?: req_query_bool(r, "mkdirs", mkdirs);
	rc = rc ?: req_query_user(r, &user);
	if (rc == 0 && mode_s) {
		char *end;
		*mode = strtoul(mode_s, &end, 8);
		if (!*mode_s || *end || *mode > 07777)
			rc = errf(EINVAL, "query parameter 'mode' must be octal permission bits, e.g. 0644");
	}
	if (rc == 0 && (*path)[strlen(*path) - 1] == '/')
		rc = errf(EINVAL, "'path' names a directory; give the file's path");
	return rc;
}

static int file_put_check(struct req *r)
{
	const char *path;
	unsigned long mode;
	bool mkdirs;
	return file_put_query(r, &path, &mode, &mkdirs);
}

static int file_put_before_body(struct req *r)
{
	return req_upload_admit(r, file_put_check);
}

const struct route_hooks file_put_hooks = { .before_body = file_put_before_body };

int h_file_put(struct req *r)
{
	const char *path;
	unsigned long mode;
	bool mkdirs;
	if (file_put_query(r, &path, &mode, &mkdirs) < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct hostif_guest hg;
	int answered;
	if (req_files_enter(r, &hg, NULL, &answered) < 0)
		return answered;
	int rc;
	uint64_t bytes = 0;
	rc = guest_write_file(hg.g, path, (uint32_t)mode, mkdirs, r->body_fd, &bytes);
	req_guest_leave(r, &hg);
	if (rc < 0)
		return reply_errno(r, rc);
	return reply_json(r, 200, json_pack("{s:o,s:I}", "path", render_text(path, strlen(path)),
					    "size", (json_int_t)bytes));
}

int h_file_delete(struct req *r)
{
	const char *path;
	bool recursive = false;
	int rc = query_path(r, &path);
	rc = rc ?: req_query_bool(r, "recursive", &recursive);
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct hostif_guest hg;
	int answered;
	if (req_files_enter(r, &hg, NULL, &answered) < 0)
		return answered;
	rc = guest_remove(hg.g, path, recursive);
	req_guest_leave(r, &hg);
	return rc < 0 ? reply_errno(r, rc) : reply_empty(r, 204);
}

struct list_ctx {
	json_t *a;
	bool truncated;
};

static int add_entry(void *ctx, const struct guest_stat *e)
{
	struct list_ctx *l = ctx;
	if (json_array_size(l->a) >= LIST_MAX) {
		l->truncated = true;
		return 1;	/* stops the walk */
	}
	return json_array_append_new(l->a, stat_json(e, "name", e->name)) < 0 ? -ENOMEM : 0;
}

int h_file_list(struct req *r)
{
	const char *path, *depth_s = req_query(r, "depth");
	long depth = 1;
	int rc = query_path(r, &path);
	if (rc == 0 && depth_s) {
		char *end;
		depth = strtol(depth_s, &end, 10);
		if (!*depth_s || *end || depth < 1 || depth > 64)
			rc = errf(EINVAL, "query parameter 'depth' must be from 1 to 64");
	}
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct hostif_guest hg;
	int answered;
	if (req_files_enter(r, &hg, NULL, &answered) < 0)
		return answered;
	struct list_ctx l = { json_array(), false };
	rc = l.a ? guest_list(hg.g, path, (unsigned)depth, add_entry, &l) : -ENOMEM;
	req_guest_leave(r, &hg);
	if (rc < 0) {
		json_decref(l.a);
		return reply_errno(r, rc);
	}
	return reply_json(r, 200, json_pack("{s:o,s:o,s:b}", "path", render_text(path, strlen(path)),
					    "entries", l.a, "truncated", l.truncated));
}

int h_file_stat(struct req *r)
{
	const char *path;
	struct hostif_guest hg;
	int answered;
	if (path_and_guest(r, &path, &hg, &answered) < 0)
		return answered;
	struct guest_stat *st = calloc(1, sizeof *st);
	int rc = st ? guest_stat(hg.g, path, st) : errf(ENOMEM, "out of memory");
	req_guest_leave(r, &hg);
	if (rc < 0) {
		free(st);
		return reply_errno(r, rc);
	}
	json_t *j = stat_json(st, "path", path);
	free(st);
	return reply_json(r, 200, j);
}

/* POST .../files/mkdir?path=P[&parents=true][&mode=0755] */
int h_file_mkdir(struct req *r)
{
	const char *path, *mode_s = req_query(r, "mode");
	bool parents = true;
	unsigned long mode = 0755;
	int rc = query_path(r, &path);
	rc = rc ?: req_query_bool(r, "parents", &parents);
	if (rc == 0 && mode_s) {
		char *end;
		mode = strtoul(mode_s, &end, 8);
		if (!*mode_s || *end || mode > 07777)
			rc = errf(EINVAL, "query parameter 'mode' must be octal permission bits, e.g. 0755");
	}
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct hostif_guest hg;
	int answered;
	if (req_files_enter(r, &hg, NULL, &answered) < 0)
		return answered;
	rc = guest_mkdir(hg.g, path, (uint32_t)mode, parents);
	req_guest_leave(r, &hg);
	return rc < 0 ? reply_errno(r, rc) : reply_json(r, 201, json_pack("{s:o}", "path", render_text(path, strlen(path))));
}

/* POST .../files/rename {"from":P,"to":Q,"replace":false} */
int h_file_rename(struct req *r)
{
	static const char *const keys[] = { "from", "to", "replace", NULL };
	const char *from = NULL, *to = NULL;
	json_t *body = r->json ? r->json : json_object();
	int rc = v_known_keys(body, keys);
	rc = rc ?: v_str(body, "from", true, 4095, &from);
	rc = rc ?: v_str(body, "to", true, 4095, &to);
	rc = rc ?: v_guest_path(from, "from");
	rc = rc ?: v_guest_path(to, "to");
	const json_t *rep = json_object_get(body, "replace");
	if (rc == 0 && rep && !json_is_boolean(rep))
		rc = errf(EINVAL, "field 'replace' must be true or false");
	bool replace = json_is_true(rep);
	if (rc < 0) {
		if (!r->json)
			json_decref(body);
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	}
	struct hostif_guest hg;
	int answered;
	if (req_files_enter(r, &hg, NULL, &answered) < 0) {
		if (!r->json)
			json_decref(body);
		return answered;
	}
	rc = guest_rename(hg.g, from, to, replace);
	req_guest_leave(r, &hg);
	int result = rc < 0 ? reply_errno(r, rc)
			    : reply_json(r, 200, json_pack("{s:o,s:o}", "from", render_text(from, strlen(from)),
							   "to", render_text(to, strlen(to))));
	if (!r->json)
		json_decref(body);
	return result;
}

/* POST .../files/chmod {"path", "mode"}: mode is octal text ("755",
 * "0644") or a number, the 07777 bits (set-id and sticky included). */
int h_file_chmod(struct req *r)
{
	static const char *const keys[] = { "path", "mode", NULL };
	const char *path = NULL;
	json_t *body = r->json ? r->json : json_object();
	int rc = body ? v_known_keys(body, keys) : errf(ENOMEM, "out of memory");
	rc = rc ?: v_str(body, "path", true, 4095, &path);
	rc = rc ?: v_guest_path(path, "path");
	const json_t *m = json_object_get(body, "mode");
	long mode = -1;
	if (rc == 0 && json_is_integer(m))
		mode = (long)json_integer_value(m);
	else if (rc == 0 && json_is_string(m)) {
		const char *t = json_string_value(m);
		char *end;
		mode = strspn(t, "01234567") == strlen(t) && strlen(t) >= 1 && strlen(t) <= 5 ? strtol(t, &end, 8) : -1;
	}
	if (rc == 0 && (mode < 0 || mode > 07777))
		rc = errf(EINVAL, "field 'mode' is octal text such as \"755\" or a number, 0 to 07777");
	if (rc < 0) {
		if (!r->json)
			json_decref(body);
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	}
	struct hostif_guest hg;
	int answered;
	if (req_files_enter(r, &hg, NULL, &answered) < 0) {
		if (!r->json)
			json_decref(body);
		return answered;
	}
	rc = guest_chmod(hg.g, path, (uint32_t)mode);
	req_guest_leave(r, &hg);
	char octal[8];
	snprintf(octal, sizeof octal, "%04lo", mode);
	int result = rc < 0 ? reply_errno(r, rc)
			    : reply_json(r, 200, json_pack("{s:o,s:s}", "path", render_text(path, strlen(path)),
							   "mode", octal));
	if (!r->json)
		json_decref(body);
	return result;
}
