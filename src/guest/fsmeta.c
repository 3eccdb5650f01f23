/*
 * File-system metadata operations: STAT, LIST, MKDIR, REMOVE, RENAME and
 * CHMOD. They behave like their POSIX counterparts (stat/lstat, a walk
 * like `find -maxdepth`, mkdir [-p], rm [-r] [-f], rename, chmod), take
 * paths literally and name the path and the errno in every error.
 *
 * LIST streams its entries as the client reads them; the others answer
 * with one frame. REMOVE never crosses into another file system, so a
 * recursive remove cannot reach into /proc, /dev or a mounted disk.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/agent.h"

#define LIST_MAX_DEPTH	64
#define LIST_BURST	256	/* entries per loop turn */
#define REMOVE_MAX_DEPTH 1024

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* The fields STAT_REPLY and ENTRY share. */
static void put_stat(struct kiln_fb *fb, const struct stat *st, const char *link)
{
	kiln_fb_u32(fb, KT_MODE, st->st_mode);
	kiln_fb_u64(fb, KT_SIZE, (uint64_t)st->st_size);
	kiln_fb_u32(fb, KT_UID, st->st_uid);
	kiln_fb_u32(fb, KT_GID, st->st_gid);
	kiln_fb_i64(fb, KT_MTIME_NS, ts_ns(&st->st_mtim));
	kiln_fb_i64(fb, KT_ATIME_NS, ts_ns(&st->st_atim));
	kiln_fb_i64(fb, KT_CTIME_NS, ts_ns(&st->st_ctim));
	kiln_fb_u64(fb, KT_NLINK, (uint64_t)st->st_nlink);
	kiln_fb_u64(fb, KT_INO, (uint64_t)st->st_ino);
	if (link)
		kiln_fb_str(fb, KT_LINK, link);
}

/* readlinkat into buf; NULL if it cannot be read. */
static const char *read_link(int dfd, const char *name, char *buf, size_t len)
{
	ssize_t n = readlinkat(dfd, name, buf, len - 1);
	if (n < 0)
		return NULL;
	buf[n] = 0;
	return buf;
}

void files_stat(struct conn *c, const struct kiln_msg *m)
{
	char path[4096], link[4096];
	struct stat st;
	bool nofollow = kiln_msg_u32(m, KT_FLAGS, 0) & KILN_STAT_NOFOLLOW;

	if (!files_path(c, m, KT_PATH, path, sizeof path))
		return;
	if ((nofollow ? lstat(path, &st) : stat(path, &st)) < 0) {
		conn_error(c, errno, "stat %s: %s", path, strerror(errno));
		return;
	}
	struct kiln_fb fb;
	conn_begin(c, &fb, KILN_STAT_REPLY);
	put_stat(&fb, &st, S_ISLNK(st.st_mode) ? read_link(AT_FDCWD, path, link, sizeof link) : NULL);
	conn_end(c, &fb);
}

/* ---- LIST ----------------------------------------------------------- */

struct lister {
	DIR *dir[LIST_MAX_DEPTH];
	size_t rel_len[LIST_MAX_DEPTH];	/* prefix length of entries in dir[i] */
	int depth;			/* directories open */
	uint32_t max_depth;
	uint64_t count;
	char rel[4096];
	char path[4096];
};

static void lister_free(struct lister *l)
{
	while (l->depth > 0)
		closedir(l->dir[--l->depth]);
	free(l);
}

static void lister_drain(struct conn *c)
{
	struct lister *l = c->st;
	char link[4096];
	struct kiln_fb fb;

	for (int i = 0; i < LIST_BURST && conn_has_room(c); i++) {
		if (l->depth == 0) {
			conn_begin(c, &fb, KILN_END);
			kiln_fb_u64(&fb, KT_COUNT, l->count);
			lister_free(l);
			conn_end_op(c, &fb);
			return;
		}
		DIR *d = l->dir[l->depth - 1];
		size_t base = l->rel_len[l->depth - 1];
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			int e = errno;
			closedir(d);
			l->depth--;
			if (e) {
				char path[8200];
				l->rel[base] = 0;
				snprintf(path, sizeof path, "%s/%s", l->path, l->rel);
				lister_free(l);
				conn_error(c, e, "list %s: %s", path, strerror(e));
				return;
			}
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int n = snprintf(l->rel + base, sizeof l->rel - base, "%s%s",
				 base ? "/" : "", de->d_name);
		if (n < 0 || (size_t)n >= sizeof l->rel - base)
			continue;	/* deeper than a path can be */
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* removed while we looked */
		conn_begin(c, &fb, KILN_ENTRY);
		kiln_fb_str(&fb, KT_NAME, l->rel);
		put_stat(&fb, &st, S_ISLNK(st.st_mode) ?
			 read_link(dirfd(d), de->d_name, link, sizeof link) : NULL);
		if (conn_end(c, &fb) < 0)
			return;
		l->count++;
		if (S_ISDIR(st.st_mode) && (uint32_t)l->depth < l->max_depth) {
			int fd = openat(dirfd(d), de->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			DIR *sub = fd >= 0 ? fdopendir(fd) : NULL;
			if (sub) {
				l->rel_len[l->depth] = strlen(l->rel);
				l->dir[l->depth++] = sub;
			} else if (fd >= 0) {
				close(fd);
			}
		}
	}
	conn_want_drain(c);
}

static int lister_frame(struct conn *c, uint8_t type, const uint8_t *p, uint32_t len)
{
	struct lister *l = c->st;
	(void)p;
	(void)len;
	if (type != KILN_CANCEL)
		return -EPROTO;
	char path[4096];
	snprintf(path, sizeof path, "%s", l->path);
	lister_free(l);
	conn_error(c, ECANCELED, "list %s: cancelled", path);
	return 0;
}

static void lister_abort(struct conn *c)
{
	lister_free(c->st);
}

static const struct conn_op list_op = {
	.name = "LIST",
	.frame = lister_frame,
	.drain = lister_drain,
	.abort = lister_abort,
};

void files_list(struct conn *c, const struct kiln_msg *m)
{
	struct lister *l = calloc(1, sizeof *l);
	if (!l) {
		conn_error(c, ENOMEM, "list: out of memory");
		return;
	}
	if (!files_path(c, m, KT_PATH, l->path, sizeof l->path)) {
		free(l);
		return;
	}
	uint32_t depth = kiln_msg_u32(m, KT_DEPTH, 1);
	l->max_depth = depth == 0 ? 1 : depth > LIST_MAX_DEPTH ? LIST_MAX_DEPTH : depth;
	int fd = open(l->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		conn_error(c, e, "list %s: %s", l->path, strerror(e));
		free(l);
		return;
	}
	l->dir[0] = d;
	l->depth = 1;
	conn_op_start(c, &list_op, l);
	lister_drain(c);
}

/* ---- MKDIR ---------------------------------------------------------- */

void files_mkdir(struct conn *c, const struct kiln_msg *m)
{
	char path[4096];
	mode_t mode = kiln_msg_u32(m, KT_MODE, 0755) & 07777;
	bool parents = kiln_msg_u32(m, KT_FLAGS, 0) & KILN_MKDIR_PARENTS;
	struct stat st;

	if (!files_path(c, m, KT_PATH, path, sizeof path))
		return;
	if (!parents) {
		if (mkdir(path, mode) < 0) {
			conn_error(c, errno, "mkdir %s: %s", path, strerror(errno));
			return;
		}
		chmod(path, mode);	/* beat the umask */
		conn_ok(c);
		return;
	}
	/* mkdir -p: each prefix in turn; existing directories are fine. */
	for (char *s = path + 1; ; s++) {
		if (*s && *s != '/')
			continue;
		char saved = *s;
		*s = 0;
		bool last = !saved || !s[1];
		if (mkdir(path, last ? mode : 0755) == 0) {
			if (last)
				chmod(path, mode);
		} else if (errno != EEXIST || stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
			int e = errno == EEXIST ? ENOTDIR : errno;
			if (errno == EEXIST && last)
				e = EEXIST;
			conn_error(c, e, "mkdir %s: %s", path, strerror(e));
			return;
		}
		*s = saved;
		if (last)
			break;
	}
	conn_ok(c);
}

/* ---- REMOVE --------------------------------------------------------- */

/* Remove `name` (relative to dfd) and, if a directory, everything in
 * it. `path` holds its full path for error messages (plen bytes used). */
static int remove_at(int dfd, const char *name, dev_t dev, int depth,
		     char *path, size_t pathsize, size_t plen)
{
	if (unlinkat(dfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (depth > REMOVE_MAX_DEPTH)
		return -ELOOP;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR ? -EPERM : -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_dev != dev) {
		close(fd);
		return -EXDEV;	/* a mount point: not ours to empty */
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int n = snprintf(path + plen, pathsize - plen, "/%s", de->d_name);
		if (n < 0 || (size_t)n >= pathsize - plen) {
			rc = -ENAMETOOLONG;
			break;
		}
		rc = remove_at(dirfd(d), de->d_name, dev, depth + 1, path, pathsize, plen + (size_t)n);
		if (rc == 0)
			path[plen] = 0;
	}
	if (rc == 0 && errno)
		rc = -errno;
	closedir(d);
	if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		rc = -errno;
	return rc;
}

void files_remove(struct conn *c, const struct kiln_msg *m)
{
	char path[4096];
	uint32_t flags = kiln_msg_u32(m, KT_FLAGS, 0);
	struct stat st;

	if (!files_path(c, m, KT_PATH, path, sizeof path))
		return;
	if (lstat(path, &st) < 0) {
		if (errno == ENOENT && (flags & KILN_REMOVE_FORCE))
			conn_ok(c);
		else
			conn_error(c, errno, "remove %s: %s", path, strerror(errno));
		return;
	}
	int rc = 0;
	if (!S_ISDIR(st.st_mode))
		rc = unlink(path) < 0 ? -errno : 0;
	else if (!(flags & KILN_REMOVE_RECURSIVE))
		rc = rmdir(path) < 0 ? -errno : 0;
	else
		rc = remove_at(AT_FDCWD, path, st.st_dev, 0, path, sizeof path, strlen(path));
	if (rc < 0) {
		const char *why = rc == -EXDEV ? "a mount point; not removing across file systems" :
				  rc == -ELOOP ? "too deeply nested" : strerror(-rc);
		conn_error(c, -rc, "remove %s: %s", path, why);
		return;
	}
	conn_ok(c);
}

/* ---- RENAME, CHMOD -------------------------------------------------- */

void files_rename(struct conn *c, const struct kiln_msg *m)
{
	char from[4096], to[4096];
	bool noreplace = kiln_msg_u32(m, KT_FLAGS, 0) & KILN_RENAME_NOREPLACE;

	if (!files_path(c, m, KT_PATH, from, sizeof from) ||
	    !files_path(c, m, KT_TARGET, to, sizeof to))
		return;
	int rc = noreplace ? renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE)
			   : rename(from, to);
	if (rc < 0) {
		conn_error(c, errno, "rename %s to %s: %s", from, to, strerror(errno));
		return;
	}
	conn_ok(c);
}

void files_chmod(struct conn *c, const struct kiln_msg *m)
{
	char path[4096];

	if (!files_path(c, m, KT_PATH, path, sizeof path))
		return;
	if (!kiln_msg_has(m, KT_MODE)) {
		conn_error(c, EINVAL, "chmod %s: the MODE field is missing", path);
		return;
	}
	if (chmod(path, kiln_msg_u32(m, KT_MODE, 0) & 07777) < 0) {
		conn_error(c, errno, "chmod %s: %s", path, strerror(errno));
		return;
	}
	conn_ok(c);
}
