/*
 * file_batch: the multi-file write, all or none (file_batch.h).
 */
#include "api/file_batch.h"
#include "api/render.h"
#include "host/guest_conn.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <nettle/base64.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int parse_files(const json_t *a, struct wfile **out, size_t *count)
{
	static const char *const fkeys[] = { "path", "content", "content_base64", "mode", NULL };
	int rc;
	if (!json_is_array(a) || json_array_size(a) == 0)
		return errf(EINVAL, "field 'files' must be a non-empty array of {\"path\", \"content\" or "
			    "\"content_base64\", \"mode\"}");
	size_t n = json_array_size(a);
	if (n > FILE_BATCH_MAX_FILES)
		return errf(EMSGSIZE, "%zu files in one write; the limit is %d", n, FILE_BATCH_MAX_FILES);
	struct wfile *f = calloc(n, sizeof *f);
	if (!f)
		return errf(ENOMEM, "out of memory");
	*out = f;
	*count = n;
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(a, i);
		if (!json_is_object(e))
			return errf(EINVAL, "files[%zu] must be an object", i);
		if ((rc = v_known_keys(e, fkeys)) < 0)
			return errf(EINVAL, "files[%zu]: %s", i, errmsg());
		const char *content = NULL, *b64 = NULL;
		rc = v_str(e, "path", true, 4095, &f[i].path);
		rc = rc ?: v_guest_path(f[i].path, "path");
		rc = rc ?: v_str(e, "content", false, FILE_BATCH_MAX_BYTES, &content);
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
		if (total > FILE_BATCH_MAX_BYTES)
			return errf(EMSGSIZE, "the files' content is over the limit of %llu bytes in one write",
				    (unsigned long long)FILE_BATCH_MAX_BYTES);
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

struct file_batch {
	struct wfile *f;
	size_t n;
};

int file_batch_parse(const json_t *files, struct file_batch **out)
{
	struct file_batch *b = calloc(1, sizeof *b);
	if (!b)
		return errf(ENOMEM, "out of memory");
	int rc = parse_files(files, &b->f, &b->n);
	if (rc < 0) {
		file_batch_free(b);
		return rc;
	}
	*out = b;
	return 0;
}

void file_batch_free(struct file_batch *b)
{
	if (!b)
		return;
	free_files(b->f, b->n);
	free(b);
}

static json_t *text(const char *s)
{
	return render_text(s, strlen(s));
}

int file_batch_write(struct guest *g, struct file_batch *b, json_t **written)
{
	struct wfile *f = b->f;
	size_t n = b->n;
	uint32_t tag = 0;
	if (getrandom(&tag, sizeof tag, 0) != sizeof tag)
		tag = (uint32_t)getpid();
	/* A directory where a file should go is refused before anything. */
	struct guest_stat *gs = malloc(sizeof *gs);
	int rc = gs ? 0 : errf(ENOMEM, "out of memory");
	size_t bad = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (guest_stat(g, f[i].path, gs) == 0 && S_ISDIR(gs->mode))
			rc = errf(EISDIR, "%s is a directory", f[i].path), bad = i;
	}
	free(gs);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *slash = strrchr(f[i].path, '/');
		snprintf(f[i].tmp, sizeof f[i].tmp, "%.*s.%.200s.kiln-write-%08x", (int)(slash - f[i].path + 1),
			 f[i].path, slash + 1, tag);
		rc = stage_one(g, &f[i]);
		if (rc < 0)
			bad = i;
		else
			f[i].staged = true;
	}
	size_t renamed = 0;
	for (size_t i = 0; rc == 0 && i < n; i++, renamed++) {
		rc = guest_rename(g, f[i].tmp, f[i].path, true);
		if (rc < 0)
			bad = i;
		else
			f[i].staged = false;
	}
	if (rc < 0) {
		char why[1024];
		snprintf(why, sizeof why, "%s", errmsg());
		for (size_t i = 0; i < n; i++)
			if (f[i].staged)
				guest_remove(g, f[i].tmp, false);
		return errf(-rc, "files[%zu] (%s): %s; %s", bad, f[bad].path, why,
			    renamed ? "the files before it were written, the rest not" : "no file was changed");
	}
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_pack("{s:o,s:I}", "path", text(f[i].path), "size", (json_int_t)f[i].len));
	*written = a ? json_pack("{s:o,s:I}", "files", a, "count", (json_int_t)n) : NULL;
	return *written ? 0 : errf(ENOMEM, "out of memory");
}
