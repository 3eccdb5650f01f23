/*
 * build_context: see build_context.h.
 */
#include "host/build_context.h"
#include "common/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/openat2.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- measuring ------------------------------------------------------------------------ */

/* nftw has no context argument: one measure at a time (builds hold a lock). */
static __thread struct { uint64_t bytes, max; long entries; } measure;

static int measure_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)path, (void)type, (void)f;
	measure.entries++;
	if (S_ISREG(st->st_mode))
		measure.bytes += (uint64_t)st->st_size;
	return measure.bytes > measure.max || measure.entries > BCTX_MAX_ENTRIES;
}

int bctx_open(const char *dir, uint64_t max_bytes, struct bctx *out)
{
	memset(out, 0, sizeof *out);
	out->dirfd = -1;
	if (strlen(dir) >= sizeof out->dir)
		return errf(ENAMETOOLONG, "build context path too long");
	snprintf(out->dir, sizeof out->dir, "%s", dir);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("the build context %s", dir);
	measure.bytes = 0;
	measure.entries = 0;
	measure.max = max_bytes ? max_bytes : BCTX_MAX_BYTES;
	int rc = nftw(dir, measure_one, 16, FTW_PHYS);
	if (rc < 0) {
		rc = errf_sys("reading the build context %s", dir);
	} else if (rc > 0 && measure.entries > BCTX_MAX_ENTRIES) {
		rc = errf(EFBIG, "the build context %s holds more than %d entries (the limit)", dir,
			  BCTX_MAX_ENTRIES);
	} else if (rc > 0) {
		rc = errf(EFBIG, "the build context %s holds more than %llu MiB (the limit; --max-context)",
			  dir, (unsigned long long)(measure.max >> 20));
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	out->dirfd = fd;
	out->bytes = measure.bytes;
	out->entries = measure.entries;
	return 0;
}

void bctx_close(struct bctx *c)
{
	if (c->dirfd >= 0)
		close(c->dirfd);
	c->dirfd = -1;
}

/* ---- paths ---------------------------------------------------------------------------- */

int bctx_clean(const char *src, char *out, size_t cap)
{
	size_t n = 0;
	const char *p = src;
	if (!*src)
		return errf(EINVAL, "an empty source path");
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = p + strcspn(p, "/");
		size_t len = (size_t)(e - p);
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return errf(EINVAL, "'%.200s' leads out of the build context (..)", src);
		if (len && !(len == 1 && p[0] == '.')) {
			if (n + len + 2 > cap)
				return errf(ENAMETOOLONG, "'%.200s': path too long", src);
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p = e;
	}
	if (!n) {
		if (cap < 2)
			return errf(ENAMETOOLONG, "path too long");
		out[n++] = '.';
	}
	out[n] = 0;
	return 0;
}

int bctx_openat(const struct bctx *c, const char *rel, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .resolve = RESOLVE_BENEATH };
	int fd = (int)syscall(SYS_openat2, c->dirfd, rel, &how, sizeof how);
	if (fd >= 0)
		return fd;
	if (errno == EXDEV)
		return errf(EXDEV, "'%.200s' leads out of the build context (a symlink out of it)", rel);
	if (errno == ENOENT)
		return errf(ENOENT, "'%.200s' is not in the build context", rel);
	return errf_sys("'%.200s' in the build context", rel);
}

/* ---- walking ---------------------------------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* src_len: the source's length in rel, 0 for "." (whose entries' paths
 * carry no prefix). */
static int walk(const struct bctx *c, char *rel, size_t relcap, size_t src_len, int depth, bctx_fn *fn,
		void *ctx)
{
	if (depth > BCTX_MAX_DEPTH)
		return errf(ELOOP, "'%.200s': more than %d directory levels (a symlink loop?)", rel,
			    BCTX_MAX_DEPTH);
	int fd = bctx_openat(c, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int rc = errf_sys("stat '%.200s'", rel);
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		close(fd);
		return errf(EINVAL, "'%.200s' is neither a file nor a directory", rel);
	}
	struct bctx_entry e = { .rel = rel, .sub = depth == 0 ? "" : src_len ? rel + src_len + 1 : rel, .mode = st.st_mode, .size = (uint64_t)st.st_size,
				.fd = S_ISREG(st.st_mode) ? fd : -1 };
	if (S_ISREG(st.st_mode))
		fcntl(fd, F_SETFL, 0);	/* blocking reads from here */
	int rc = fn(ctx, &e);
	if (rc < 0 || !S_ISDIR(st.st_mode)) {
		close(fd);
		return rc;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		rc = errf_sys("opendir '%.200s'", rel);
		close(fd);
		return rc;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			char **nn = cap <= BCTX_MAX_ENTRIES ? realloc(names, cap * sizeof *nn) : NULL;
			if (!nn) {
				rc = errf(ENOMEM, "'%.200s': too many entries", rel);
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = errf(ENOMEM, "out of memory");
			break;
		}
		n++;
	}
	closedir(d);
	if (rc == 0)
		qsort(names, n, sizeof *names, cmp_names);
	size_t len = strlen(rel);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		bool dot = !strcmp(rel, ".");
		size_t add = strlen(names[i]) + 1;
		if ((dot ? 0 : len) + add + 1 > relcap) {
			rc = errf(ENAMETOOLONG, "'%.200s/%.100s': path too long", rel, names[i]);
			break;
		}
		if (dot)
			snprintf(rel, relcap, "%s", names[i]);
		else
			snprintf(rel + len, relcap - len, "/%s", names[i]);
		rc = walk(c, rel, relcap, src_len, depth + 1, fn, ctx);
		rel[len] = 0;
		if (dot)
			snprintf(rel, relcap, ".");
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int bctx_walk(const struct bctx *c, const char *rel, bctx_fn *fn, void *ctx)
{
	char path[PATH_MAX];
	int rc = bctx_clean(rel, path, sizeof path);
	if (rc < 0)
		return rc;
	return walk(c, path, sizeof path, strcmp(path, ".") ? strlen(path) : 0, 0, fn, ctx);
}

/* ---- digests ---------------------------------------------------------------------------- */

static void put_str(struct sha256_ctx *h, const char *s)
{
	char len[24];
	snprintf(len, sizeof len, "%zu:", strlen(s));
	sha256_update(h, strlen(len), (const uint8_t *)len);
	sha256_update(h, strlen(s), (const uint8_t *)s);
}

static void hex_of(struct sha256_ctx *h, char hex[65])
{
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(h, sizeof d, d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static int digest_entry(void *ctx, const struct bctx_entry *e)
{
	struct sha256_ctx *h = ctx;
	char meta[64];
	snprintf(meta, sizeof meta, "%c %o %llu", S_ISDIR(e->mode) ? 'd' : 'f', (unsigned)(e->mode & 07777),
		 (unsigned long long)e->size);
	put_str(h, e->sub);
	put_str(h, meta);
	if (e->fd < 0)
		return 0;
	static __thread uint8_t buf[65536];
	uint64_t left = e->size;
	while (left) {
		ssize_t n = read(e->fd, buf, left < sizeof buf ? left : sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errf_sys("read '%.200s'", e->rel)
				     : errf(EIO, "'%.200s' shrank while read", e->rel);
		sha256_update(h, (size_t)n, buf);
		left -= (uint64_t)n;
	}
	if (lseek(e->fd, 0, SEEK_SET) < 0)
		return errf_sys("seek '%.200s'", e->rel);
	return 0;
}

int bctx_digest(const struct bctx *c, const char *const *srcs, int n, char hex[65])
{
	struct sha256_ctx h;
	sha256_init(&h);
	for (int i = 0; i < n; i++) {
		put_str(&h, srcs[i]);
		int rc = bctx_walk(c, srcs[i], digest_entry, &h);
		if (rc < 0)
			return rc;
	}
	hex_of(&h, hex);
	return 0;
}

void bctx_step_key(const char *parent, const char *text, const char *inputs, char hex[65])
{
	struct sha256_ctx h;
	sha256_init(&h);
	put_str(&h, parent);
	put_str(&h, text);
	put_str(&h, inputs ? inputs : "");
	hex_of(&h, hex);
}
