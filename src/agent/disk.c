#include "agent/disk.h"
#include "agent/proc.h"
#include "common/err.h"
#include "kilnd/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The writable upper layer's size: sparse, so it costs only what is written. */
#define UPPER_SIZE "8G"

const char *disk_mode_name(enum disk_mode m)
{
	return m == DISK_OVERLAY ? "overlay" : "upper";
}

int disk_mode_parse(const char *s, enum disk_mode *m)
{
	if (strcmp(s, "overlay") == 0)
		*m = DISK_OVERLAY;
	else if (strcmp(s, "upper") == 0)
		*m = DISK_UPPER;
	else
		return errf(EINVAL, "unknown disk mode '%s'", s);
	return 0;
}

enum disk_mode disk_default_mode(const struct config *cfg)
{
	return access(cfg->disk_tool, X_OK) == 0 ? DISK_OVERLAY : DISK_UPPER;
}

int disk_create(const struct config *cfg, enum disk_mode mode, const char *base, const char *top)
{
	int rc;
	if (access(base, R_OK) < 0)
		return errf_sys("disk base %s", base);
	if (mode == DISK_OVERLAY) {
		char *argv[] = { (char *)cfg->disk_tool, "create", (char *)top, (char *)base, NULL };
		rc = proc_run(argv, "/dev/null");
		if (rc != 0)
			return rc < 0 ? rc : errf(EIO, "kiln-disk create %s %s: exit status %d", top, base, rc);
		return 0;
	}
	int fd = open(top, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf_sys("create %s", top);
	close(fd);
	char *argv[] = { "mke2fs", "-q", "-F", "-t", "ext4", "-E",
			 "lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0",
			 (char *)top, UPPER_SIZE, NULL };
	rc = proc_run(argv, "/dev/null");
	if (rc != 0) {
		unlink(top);
		return rc < 0 ? rc : errf(EIO, "mke2fs %s: exit status %d", top, rc);
	}
	return 0;
}

void disk_plan(enum disk_mode mode, const char *base, const char *top, struct disk_plan *out)
{
	memset(out, 0, sizeof *out);
	if (mode == DISK_OVERLAY) {
		out->n = 1;
		snprintf(out->path[0], PATH_MAX, "%s", top);
		snprintf(out->append, sizeof out->append, "kiln.root=/dev/vda");
		return;
	}
	out->n = 2;
	snprintf(out->path[0], PATH_MAX, "%s", base);
	out->ro[0] = true;
	snprintf(out->path[1], PATH_MAX, "%s", top);
	snprintf(out->append, sizeof out->append, "kiln.root=/dev/vda kiln.overlay=/dev/vdb");
}

int disk_copy(const char *src, const char *dst)
{
	char *argv[] = { "cp", "--sparse=always", "--reflink=auto", (char *)src, (char *)dst, NULL };
	int rc = proc_run(argv, "/dev/null");
	if (rc != 0)
		return rc < 0 ? rc : errf(EIO, "copying %s to %s: exit status %d", src, dst, rc);
	return 0;
}
