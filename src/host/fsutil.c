/*
 * fsutil: removing a VM's directory tree (disks, sockets, logs), and
 * measuring the disk space one takes.
 */
#include "host/fsutil.h"
#include "common/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)ftw;
	int rc = type == FTW_DP ? rmdir(path) : unlink(path);
	if (rc < 0 && errno != ENOENT)
		return errf_sys("remove %s", path);
	return 0;
}

int rmtree(const char *path)
{
	/* Depth first, not following links nor crossing mounts: nothing
	 * outside the tree can be removed through it. */
	int rc = nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (rc < 0 && errno == ENOENT)
		return 0;
	return rc < 0 ? (rc == -1 ? errf_sys("remove %s", path) : rc) : 0;
}

int rmtree_except_disks(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : errf_sys("open %s", dir);
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strncmp(e->d_name, "disk", 4))
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
			continue;
		int r = e->d_type == DT_DIR ? rmtree(path) : unlink(path) < 0 && errno != ENOENT
			? errf_sys("remove %s", path) : 0;
		if (r < 0 && rc == 0)
			rc = r;
	}
	closedir(d);
	return rc;
}

/* A VM's directory is the VMM's to write: the walk opens every entry
 * relative to its parent without following a link, counts only regular
 * files, and stops at a depth and a count no kiln directory reaches, so
 * a hostile VMM can neither point it elsewhere nor make it endless. */
#define BYTES_DEPTH_MAX 4
#define BYTES_ENTRIES_MAX 10000

static int64_t bytes_in(int dirfd, int depth, int *entries)
{
	DIR *d = fdopendir(dirfd);
	if (!d) {
		close(dirfd);
		return 0;
	}
	int64_t sum = 0;
	struct dirent *e;
	while ((e = readdir(d)) && ++*entries <= BYTES_ENTRIES_MAX) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			sum += (int64_t)st.st_blocks * 512;
		} else if (S_ISDIR(st.st_mode) && depth < BYTES_DEPTH_MAX) {
			int fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0)
				sum += bytes_in(fd, depth + 1, entries);
		}
	}
	closedir(d);
	return sum;
}

int64_t dir_bytes(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int entries = 0;
	return fd < 0 ? 0 : bytes_in(fd, 0, &entries);
}
