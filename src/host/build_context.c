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
static __thread struct {
	uint64_t bytes, max;
	long entries;
	size_t dirlen;
	const struct dign *ign;
} measure;

static int measure_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)f;
	const char *rel = path + (strlen(path) > measure.dirlen ? measure.dirlen : strlen(path));
	while (*rel == '/')
		rel++;
	if (!*rel)
		rel = ".";
	if (dign_ignored(measure.ign, rel)) {
		/* Not the build's: uncounted, and not entered unless a `!`
		 * pattern may keep something in it. */
		return type == FTW_D && !measure.ign->exceptions ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
	}
	measure.entries++;
	if (S_ISREG(st->st_mode))
		measure.bytes += (uint64_t)st->st_size;
	return measure.bytes > measure.max || measure.entries > BCTX_MAX_ENTRIES ? FTW_STOP : FTW_CONTINUE;
}

/* The context's .dockerignore, if it has one (a regular file in it). */
static int read_ignore(struct bctx *c)
{
	int fd = bctx_openat(c, ".dockerignore", O_RDONLY | O_NONBLOCK);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return errf(EINVAL, ".dockerignore in the build context is not a regular file");
	}
	char *text = malloc(DIGN_MAX_BYTES + 1);
	ssize_t n = text ? read(fd, text, DIGN_MAX_BYTES + 1) : -1;
	close(fd);
	int rc = n < 0 ? errf(EIO, "reading .dockerignore") : dign_parse(text, (size_t)n, &c->ign);
	free(text);
	return rc;
}

int bctx_open(const char *dir, uint64_t max_bytes, struct bctx *out)
{
	return bctx_open_flags(dir, max_bytes, 0, out);
}

int bctx_open_flags(const char *dir, uint64_t max_bytes, int flags, struct bctx *out)
{
	memset(out, 0, sizeof *out);
	out->dirfd = -1;
	if (strlen(dir) >= sizeof out->dir)
		return errf(ENAMETOOLONG, "build context path too long");
	snprintf(out->dir, sizeof out->dir, "%s", dir);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("the build context %s", dir);
	out->dirfd = fd;
	int rc = flags & BCTX_NO_IGNORE ? 0 : read_ignore(out);
	if (rc < 0) {
		bctx_close(out);
		return rc;
	}
	measure.bytes = 0;
	measure.entries = 0;
	measure.max = max_bytes ? max_bytes : BCTX_MAX_BYTES;
	measure.dirlen = strlen(dir);
	measure.ign = &out->ign;
	rc = nftw(dir, measure_one, 16, FTW_PHYS | FTW_ACTIONRETVAL);
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
		bctx_close(out);
		return rc;
	}
	out->bytes = measure.bytes;
	out->entries = measure.entries;
	return 0;
}

void bctx_close(struct bctx *c)
{
	if (c->dirfd >= 0)
		close(c->dirfd);
	c->dirfd = -1;
	dign_free(&c->ign);
}

bool bctx_ignored(const struct bctx *c, const char *rel)
{
	return dign_ignored(&c->ign, rel);
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

struct walk {
	const struct bctx *c;
	size_t src_len;			/* the source's length in rel, 0 for "." */
	bctx_fn *fn;
	void *ctx;
	long given;			/* entries given to fn */
};

/* hidden: rel is ignored, a directory walked only for what a `!` keeps
 * in it (not itself given to fn). */
static int walk(struct walk *w, char *rel, size_t relcap, int depth, bool hidden)
{
	const struct bctx *c = w->c;
	if (depth > BCTX_MAX_DEPTH)
		return errf(ELOOP, "'%.200s': more than %d directory levels (a symlink loop?)", rel,
			    BCTX_MAX_DEPTH);
	if (depth > 0) {
		/* Below the source a symlink is an entry of its own: its
		 * target is read, never followed, so one pointing out of the
		 * context makes the builder read nothing there. */
		int lfd = bctx_openat(c, rel, O_PATH | O_NOFOLLOW);
		if (lfd < 0)
			return lfd;
		struct stat lst;
		if (fstat(lfd, &lst) < 0) {
			int rc = errf_sys("stat '%.200s'", rel);
			close(lfd);
			return rc;
		}
		if (S_ISLNK(lst.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlinkat(lfd, "", target, sizeof target);
			int rc = 0;
			close(lfd);
			if (n < 0)
				return errf_sys("readlink '%.200s'", rel);
			if ((size_t)n >= sizeof target)
				return errf(ENAMETOOLONG, "'%.200s': a symlink target too long", rel);
			target[n] = 0;
			if (!hidden) {
				struct bctx_entry e = { .rel = rel, .sub = w->src_len ? rel + w->src_len + 1 : rel,
							.mode = lst.st_mode, .size = (uint64_t)n, .fd = -1,
							.link = target };
				rc = w->fn(w->ctx, &e);
				w->given++;
			}
			return rc;
		}
		close(lfd);
	}
	int fd = bctx_openat(c, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK | (depth > 0 ? O_NOFOLLOW : 0));
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int rc = errf_sys("stat '%.200s'", rel);
		close(fd);
		return rc;
	}
	if (hidden && !S_ISDIR(st.st_mode)) {
		close(fd);
		return 0;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		close(fd);
		return errf(EINVAL, "'%.200s' is neither a file nor a directory", rel);
	}
	struct bctx_entry e = { .rel = rel, .sub = depth == 0 ? "" : w->src_len ? rel + w->src_len + 1 : rel,
				.mode = st.st_mode, .size = (uint64_t)st.st_size,
				.fd = S_ISREG(st.st_mode) ? fd : -1 };
	if (S_ISREG(st.st_mode))
		fcntl(fd, F_SETFL, 0);	/* blocking reads from here */
	int rc = 0;
	if (!hidden) {
		rc = w->fn(w->ctx, &e);
		w->given++;
	}
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
	bool dot = !strcmp(rel, ".");
	for (size_t i = 0; rc == 0 && i < n; i++) {
		size_t add = strlen(names[i]) + 1;
		if ((dot ? 0 : len) + add + 1 > relcap) {
			rc = errf(ENAMETOOLONG, "'%.200s/%.100s': path too long", rel, names[i]);
			break;
		}
		if (dot)
			snprintf(rel, relcap, "%s", names[i]);
		else
			snprintf(rel + len, relcap - len, "/%s", names[i]);
		bool ign = bctx_ignored(c, rel);
		if (!ign || c->ign.exceptions)
			rc = walk(w, rel, relcap, depth + 1, ign);
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
	struct walk w = { .c = c, .src_len = strcmp(path, ".") ? strlen(path) : 0, .fn = fn, .ctx = ctx };
	bool ign = bctx_ignored(c, path);
	rc = walk(&w, path, sizeof path, 0, ign);
	if (rc == 0 && ign && !w.given)
		rc = errf(ENOENT, "'%.200s' is excluded by .dockerignore", path);
	return rc;
}

/* ---- wildcards ---------------------------------------------------------------------------- */

static bool has_wildcard(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

struct list {
	char **v;
	int n, cap;
};

static int list_add(struct list *l, const char *s, size_t len)
{
	if (l->n + 1 >= l->cap) {
		int cap = l->cap ? l->cap * 2 : 16;
		char **v = realloc(l->v, (size_t)cap * sizeof *v);
		if (!v)
			return errf(ENOMEM, "out of memory");
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strndup(s, len)))
		return errf(ENOMEM, "out of memory");
	l->v[++l->n] = NULL;
	return 0;
}

static void list_free(struct list *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

/* The names in directory dir (a path in the context) that comp matches,
 * each as dir/NAME onto next. */
static int glob_dir(const struct bctx *c, const char *dir, const char *comp, struct list *next, const char *pattern)
{
	int fd = bctx_openat(c, dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return 0;	/* not a directory (or gone): matches nothing */
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return errf_sys("opendir '%.200s'", dir);
	}
	int rc = 0;
	struct dirent *de;
	char path[PATH_MAX];
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int m = dign_match(comp, de->d_name, false);
		if (m < 0) {
			rc = errf(EINVAL, "'%.200s': a bad wildcard (an unclosed '[' or a trailing '\\')", pattern);
			break;
		}
		if (!m)
			continue;
		if (next->n >= BCTX_MAX_MATCHES) {
			rc = errf(E2BIG, "'%.200s' matches more than %d paths (the limit)", pattern,
				  BCTX_MAX_MATCHES);
			break;
		}
		int len = strcmp(dir, ".") ? snprintf(path, sizeof path, "%s/%s", dir, de->d_name)
					    : snprintf(path, sizeof path, "%s", de->d_name);
		if (len < 0 || (size_t)len >= sizeof path) {
			rc = errf(ENAMETOOLONG, "'%.200s': a match's path is too long", pattern);
			break;
		}
		rc = list_add(next, path, (size_t)len);
	}
	closedir(d);
	return rc;
}

/* One source with wildcards onto out: component by component from the
 * context's root, every open beneath it. */
static int glob_one(const struct bctx *c, const char *pattern, struct list *out)
{
	struct list cur = { 0 };
	int rc = list_add(&cur, ".", 1);
	for (const char *p = pattern; rc == 0 && *p;) {
		size_t len = strcspn(p, "/");
		char comp[NAME_MAX + 1];
		if (len > NAME_MAX) {
			rc = errf(ENAMETOOLONG, "'%.200s': a name too long", pattern);
			break;
		}
		memcpy(comp, p, len);
		comp[len] = 0;
		struct list next = { 0 };
		for (int i = 0; rc == 0 && i < cur.n; i++) {
			if (has_wildcard(comp)) {
				rc = glob_dir(c, cur.v[i], comp, &next, pattern);
				continue;
			}
			char path[PATH_MAX];
			int n = strcmp(cur.v[i], ".") ? snprintf(path, sizeof path, "%s/%s", cur.v[i], comp)
						      : snprintf(path, sizeof path, "%s", comp);
			rc = n < 0 || (size_t)n >= sizeof path ? errf(ENAMETOOLONG, "'%.200s': path too long", pattern)
							       : list_add(&next, path, (size_t)n);
		}
		list_free(&cur);
		cur = next;
		p += len;
		while (*p == '/')
			p++;
	}
	/* What is there and not ignored (a directory a `!` may keep
	 * something in stays: its walk says if nothing is). */
	int kept = 0, hidden = 0;
	if (rc == 0)
		qsort(cur.v, (size_t)cur.n, sizeof *cur.v, cmp_names);
	for (int i = 0; rc == 0 && i < cur.n; i++) {
		int fd = bctx_openat(c, cur.v[i], O_PATH);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			if (fd >= 0)
				close(fd);
			if (fd == -EXDEV) {
				rc = fd;
				break;
			}
			continue;	/* a literal part that is not there */
		}
		close(fd);
		if (bctx_ignored(c, cur.v[i]) && !(S_ISDIR(st.st_mode) && c->ign.exceptions)) {
			hidden++;
			continue;
		}
		rc = list_add(out, cur.v[i], strlen(cur.v[i]));
		kept++;
	}
	list_free(&cur);
	if (rc == 0 && !kept)
		rc = errf(ENOENT, "'%.200s' matches no file in the build context%s", pattern,
			  hidden ? " (what it matches is excluded by .dockerignore)" : "");
	return rc;
}

int bctx_sources(const struct bctx *c, const char *const *srcs, int nsrc, char ***out, int *n)
{
	struct list l = { 0 };
	int rc = 0;
	*out = NULL;
	*n = 0;
	for (int i = 0; rc == 0 && i < nsrc; i++) {
		char path[PATH_MAX];
		if ((rc = bctx_clean(srcs[i], path, sizeof path)) < 0)
			break;
		rc = has_wildcard(path) ? glob_one(c, path, &l) : list_add(&l, path, strlen(path));
		if (rc == 0 && l.n > BCTX_MAX_MATCHES)
			rc = errf(E2BIG, "the sources match more than %d paths (the limit)", BCTX_MAX_MATCHES);
	}
	if (rc < 0) {
		list_free(&l);
		return rc;
	}
	if (!l.v && (rc = list_add(&l, ".", 0)) == 0) {	/* no sources: an empty list */
		free(l.v[0]);
		l.v[0] = NULL;
		l.n = 0;
	}
	*out = l.v;
	*n = l.n;
	return rc;
}

void bctx_sources_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
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
	snprintf(meta, sizeof meta, "%c %o %llu", S_ISDIR(e->mode) ? 'd' : S_ISLNK(e->mode) ? 'l' : 'f',
		 (unsigned)(e->mode & 07777), (unsigned long long)e->size);
	put_str(h, e->sub);
	put_str(h, meta);
	if (e->link)
		put_str(h, e->link);
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
