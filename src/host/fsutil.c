/*
 * fsutil: removing a VM's directory tree (disks, sockets, logs).
 */
#include "host/host_int.h"
#include "common/err.h"

#include <dirent.h>
#include <errno.h>
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
