/*
 * fsutil: removing a VM's directory tree (disks, sockets, logs).
 */
#include "agent/host_int.h"
#include "common/err.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
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
