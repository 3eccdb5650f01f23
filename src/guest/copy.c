/*
 * The copy built-in (builtin.h): a file or a directory tree, copied under
 * a temporary name next to the target and renamed into place. Symlinks
 * are copied as symlinks (never followed, the top one included), so a
 * copy cannot leave the tree it was given.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/builtin.h"

#define COPY_MAX_DEPTH 256

struct copy {
	char path[8192];	/* the source entry now copied, for messages */
	bool root;		/* keep owners */
};

static int copy_data(int in, int out)
{
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n == 0)
			return 0;
		if (n > 0)
			continue;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
			return -errno;
		break;	/* no copy_file_range here: plain reads and writes */
	}
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : 0;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return w < 0 ? -errno : -EIO;
			off += w;
		}
	}
}

/* Mode, owner (as root) and times of a copied entry, through its fd. */
static void copy_attrs(struct copy *cp, int fd, const struct stat *st)
{
	if (cp->root && fchown(fd, st->st_uid, st->st_gid) < 0) {
		/* keep going: an owner the file system refuses */
	}
	if (fchmod(fd, st->st_mode & 07777) < 0) {
		/* as above */
	}
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	futimens(fd, ts);
}

static int copy_node(struct copy *cp, int sdir, const char *sname, int ddir, const char *dname,
		     const struct stat *st, int depth);

static int copy_dir(struct copy *cp, int sdir, const char *sname, int ddir, const char *dname,
		    const struct stat *st, int depth)
{
	if (depth > COPY_MAX_DEPTH)
		return builtin_fail(ELOOP, "copy %s: nested more than %d directories deep", cp->path,
				    COPY_MAX_DEPTH);
	int sfd = openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return builtin_fail(errno, "copy %s: %s", cp->path, strerror(errno));
	if (mkdirat(ddir, dname, 0700) < 0) {
		int e = errno;
		close(sfd);
		return builtin_fail(e, "copy %s: mkdir: %s", cp->path, strerror(e));
	}
	int dfd = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = sfd >= 0 ? fdopendir(sfd) : NULL;
	if (dfd < 0 || !d) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		if (!d)
			close(sfd);
		else
			closedir(d);
		return builtin_fail(e, "copy %s: %s", cp->path, strerror(e));
	}
	size_t plen = strlen(cp->path);
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int n = snprintf(cp->path + plen, sizeof cp->path - plen, "/%s", de->d_name);
		if (n < 0 || (size_t)n >= sizeof cp->path - plen) {
			cp->path[plen] = 0;
			rc = builtin_fail(ENAMETOOLONG, "copy %s: a name below it is too long", cp->path);
			break;
		}
		struct stat cst;
		if (fstatat(dirfd(d), de->d_name, &cst, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;	/* removed while we copied */
			rc = builtin_fail(errno, "copy %s: %s", cp->path, strerror(errno));
			break;
		}
		rc = copy_node(cp, dirfd(d), de->d_name, dfd, de->d_name, &cst, depth + 1);
		cp->path[plen] = 0;
	}
	if (rc == 0 && errno)
		rc = builtin_fail(errno, "copy %s: %s", cp->path, strerror(errno));
	closedir(d);
	if (rc == 0)
		copy_attrs(cp, dfd, st);
	close(dfd);
	return rc;
}

static int copy_node(struct copy *cp, int sdir, const char *sname, int ddir, const char *dname,
		     const struct stat *st, int depth)
{
	if (S_ISDIR(st->st_mode))
		return copy_dir(cp, sdir, sname, ddir, dname, st, depth);
	if (S_ISLNK(st->st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(sdir, sname, target, sizeof target - 1);
		if (n < 0)
			return builtin_fail(errno, "copy %s: readlink: %s", cp->path, strerror(errno));
		target[n] = 0;
		if (symlinkat(target, ddir, dname) < 0)
			return builtin_fail(errno, "copy %s: symlink: %s", cp->path, strerror(errno));
		if (cp->root)
			fchownat(ddir, dname, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW);
		struct timespec ts[2] = { st->st_atim, st->st_mtim };
		utimensat(ddir, dname, ts, AT_SYMLINK_NOFOLLOW);
		return 0;
	}
	if (S_ISFIFO(st->st_mode)) {
		if (mkfifoat(ddir, dname, st->st_mode & 07777) < 0)
			return builtin_fail(errno, "copy %s: mkfifo: %s", cp->path, strerror(errno));
		return 0;
	}
	if (!S_ISREG(st->st_mode))
		return builtin_fail(EINVAL, "copy %s: a device node or socket; not copied", cp->path);
	int in = openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (in < 0)
		return builtin_fail(errno, "copy %s: %s", cp->path, strerror(errno));
	int out = openat(ddir, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		int e = errno;
		close(in);
		return builtin_fail(e, "copy %s: create the copy: %s", cp->path, strerror(e));
	}
	int rc = copy_data(in, out);
	close(in);
	if (rc < 0) {
		close(out);
		return builtin_fail(-rc, "copy %s: %s", cp->path, strerror(-rc));
	}
	copy_attrs(cp, out, st);
	if (close(out) < 0)
		return builtin_fail(errno, "copy %s: %s", cp->path, strerror(errno));
	return 0;
}

/* rm -r of what a failed or replaced copy leaves; best effort. */
static void remove_tree(int dir, const char *name)
{
	if (unlinkat(dir, name, 0) == 0 || (errno != EISDIR && errno != EPERM))
		return;
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			remove_tree(dirfd(d), de->d_name);
	closedir(d);
	unlinkat(dir, name, AT_REMOVEDIR);
}

int builtin_copy(int argc, char *const *argv)
{
	if (argc != 5)
		return builtin_fail(EINVAL, "usage: copy FROM TO RECURSIVE REPLACE");
	const char *from = argv[1];
	bool recursive = strcmp(argv[3], "1") == 0, replace = strcmp(argv[4], "1") == 0;
	struct copy cp = { .root = geteuid() == 0 };
	struct stat st, tst;

	snprintf(cp.path, sizeof cp.path, "%s", from);
	if (lstat(from, &st) < 0)
		return builtin_fail(errno, "copy %s: %s", from, strerror(errno));
	if (S_ISDIR(st.st_mode) && !recursive)
		return builtin_fail(EISDIR, "copy %s: a directory; set recursive to copy its tree", from);

	/* TO's directory, resolved, and its last name. */
	char to[PATH_MAX], dirbuf[PATH_MAX], basebuf[PATH_MAX], parent[PATH_MAX];
	size_t tl = strlen(argv[2]);
	if (tl >= sizeof to)
		return builtin_fail(ENAMETOOLONG, "copy to %s: name too long", argv[2]);
	memcpy(to, argv[2], tl + 1);
	while (tl > 1 && to[tl - 1] == '/')
		to[--tl] = 0;
	memcpy(dirbuf, to, tl + 1);
	memcpy(basebuf, to, tl + 1);
	const char *base = basename(basebuf);
	if (!strcmp(base, "/") || !strcmp(base, ".") || !strcmp(base, ".."))
		return builtin_fail(EINVAL, "copy to %s: name the copy itself (a path ending in a name)",
				    argv[2]);
	if (!realpath(dirname(dirbuf), parent))
		return builtin_fail(errno, "copy to %s: its directory: %s", argv[2], strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		char src[PATH_MAX], dst[2 * PATH_MAX + 2];
		if (!realpath(from, src))
			return builtin_fail(errno, "copy %s: %s", from, strerror(errno));
		snprintf(dst, sizeof dst, "%s/%s", strcmp(parent, "/") ? parent : "", base);
		size_t sl = strlen(src);
		if (!strcmp(src, "/") || (strncmp(dst, src, sl) == 0 && (dst[sl] == '/' || !dst[sl])))
			return builtin_fail(EINVAL, "copy %s to %s: cannot copy a directory into itself",
					    from, argv[2]);
	}
	bool exists = lstat(to, &tst) == 0;
	if (exists && !replace)
		return builtin_fail(EEXIST, "copy to %s: it exists; set replace to overwrite it", to);

	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return builtin_fail(errno, "copy to %s: %s", parent, strerror(errno));
	char tmp[NAME_MAX + 1];
	snprintf(tmp, sizeof tmp, ".%.200s.kiln-copy-%d", base, (int)getpid());
	int rc = copy_node(&cp, AT_FDCWD, from, pfd, tmp, &st, 0);
	if (rc == 0) {
		/* The whole copy appears at once; an old TO (replace) is
		 * swapped out and removed after. */
		int r2 = renameat2(pfd, tmp, pfd, base, exists ? RENAME_EXCHANGE : RENAME_NOREPLACE);
		if (r2 < 0 && exists && errno == EINVAL)
			r2 = renameat(pfd, tmp, pfd, base);	/* no exchange on this fs */
		if (r2 < 0)
			rc = builtin_fail(errno, "copy to %s: %s", to,
					  errno == EEXIST ? "it appeared meanwhile" : strerror(errno));
	}
	remove_tree(pfd, tmp);
	close(pfd);
	return rc;
}
