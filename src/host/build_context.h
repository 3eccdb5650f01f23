/*
 * build_context: the directory a Dockerfile build reads its files from
 * (docs/templates.md "Building from a Dockerfile"), and the keys of the
 * build's step cache. The Dockerfile and the context are untrusted: a
 * path taken from the Dockerfile is cleaned and refused when it climbs
 * out (`..`), every open goes through openat2(RESOLVE_BENEATH) from the
 * context's directory, so a symlink is followed only while it stays in
 * the context (one that leads out is refused by name), and the context's
 * size and entry count are bounded before anything is read.
 */
#ifndef KILN_HOST_BUILD_CONTEXT_H
#define KILN_HOST_BUILD_CONTEXT_H

#include "common/dockerignore.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define BCTX_MAX_BYTES   (1ULL << 30)	/* the default size limit (file bytes) */
#define BCTX_MAX_ENTRIES 200000
#define BCTX_MAX_DEPTH   64		/* directory levels a COPY walks */
#define BCTX_MAX_MATCHES 10000		/* paths one COPY source's wildcards may match */
#define BCTX_NO_IGNORE   1		/* bctx_open_flags: no .dockerignore (an unpacked ADD archive) */

struct bctx {
	int dirfd;			/* the context directory */
	char dir[4096];
	uint64_t bytes;			/* regular files' sizes, summed */
	long entries;
	struct dign ign;		/* the .dockerignore (none: no patterns) */
};

/* Open the context dir, read its .dockerignore and measure it (symlinks
 * not followed; ignored files do not count, an ignored directory is not
 * entered unless a `!` pattern may keep something in it); over max_bytes
 * (0: BCTX_MAX_BYTES) or BCTX_MAX_ENTRIES: -EFBIG, "the build context DIR
 * holds more than N MiB (the limit)". A bad .dockerignore: -EINVAL naming
 * its line. */
int bctx_open(const char *dir, uint64_t max_bytes, struct bctx *out);
int bctx_open_flags(const char *dir, uint64_t max_bytes, int flags, struct bctx *out);
void bctx_close(struct bctx *c);

/* Is rel (cleaned) hidden by the context's .dockerignore? */
bool bctx_ignored(const struct bctx *c, const char *rel);

/* A source path of COPY/ADD as a path inside the context: a leading '/'
 * and '.' components dropped, "" becomes "."; a `..` component, an empty
 * name or a too long path: -EINVAL naming it. */
int bctx_clean(const char *src, char *out, size_t cap);

/* Open rel (cleaned) inside the context with flags (O_CLOEXEC added);
 * -EXDEV, "'rel' leads out of the build context" for a symlink out. */
int bctx_openat(const struct bctx *c, const char *rel, int flags);

struct bctx_entry {
	const char *rel;		/* its path in the context */
	const char *sub;		/* its path below the source ("" for the source) */
	mode_t mode;			/* S_IFREG, S_IFDIR or S_IFLNK with the permission bits */
	uint64_t size;
	int fd;				/* a regular file, open for reading; else -1 */
	const char *link;		/* S_IFLNK: its target, as read (never followed) */
};
typedef int bctx_fn(void *ctx, const struct bctx_entry *e);

/* Every entry a COPY of source rel takes: the source, then (a directory)
 * what it holds, depth first, names sorted, a directory before its
 * contents; what the .dockerignore names is skipped (an ignored directory
 * is not given, the files a `!` keeps in it are). The source itself, a
 * symlink, is followed while it stays inside the context (Docker's rule);
 * a symlink below it is given as a symlink (S_IFLNK, its target in link),
 * never followed nor opened, wherever it points; anything but files,
 * directories and symlinks (a FIFO, a device) is refused. A source the .dockerignore hides entirely: -ENOENT,
 * "'rel' is excluded by .dockerignore". fn returning < 0 stops the walk
 * with that. */
int bctx_walk(const struct bctx *c, const char *rel, bctx_fn *fn, void *ctx);

/* COPY/ADD's sources as paths in the context, NULL-ended in *out (free
 * with bctx_sources_free), their number in *n: each cleaned; one with
 * wildcards (`*`, `?`, `[...]`, matched with fnmatch one path component
 * at a time, as Docker does) becomes the paths it matches that the
 * .dockerignore does not hide, sorted. A wildcard matching nothing:
 * -ENOENT naming it; more than BCTX_MAX_MATCHES: -E2BIG. */
int bctx_sources(const struct bctx *c, const char *const *srcs, int nsrc, char ***out, int *n);
void bctx_sources_free(char **v);

/* The sha256 (hex) of everything a COPY takes from n sources: each
 * entry's path below its source, type, mode and content. */
int bctx_digest(const struct bctx *c, const char *const *srcs, int n, char hex[65]);

/* A step's cache key: sha256 of the parent's key, the step's text and
 * its inputs (NULL: none), each length-prefixed so no two differ only by
 * where one ends. */
void bctx_step_key(const char *parent, const char *text, const char *inputs, char hex[65]);

#endif
