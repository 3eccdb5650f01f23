/*
 * logs: a sandbox's console (the guest kernel's messages and kiln-init's
 * own lines, "kiln-init: ..."), as its VMM writes it to console.log in the
 * sandbox's directory, and the VMM's own stderr (vmm.log).
 *
 * Both files lie in a directory the sandbox's VMM may write (a VMM the
 * guest took over is hostile): they are opened without following links,
 * without blocking on a FIFO, and used only if they are regular files with
 * one link, so root never reads a file the VMM pointed it at.
 *
 * A sandbox that failed loses its directory; the end of its console is
 * kept first in DATA/logs/ID.log (root's), until the sandbox is deleted.
 */
#include "host/host_int.h"
#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEEP_BYTES (256 << 10)	/* of a failed sandbox's console */

/* name in dir, opened for reading if it is a plain file of its own. */
static int open_plain(const char *dir, const char *name, int *out)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
		return errf(ENAMETOOLONG, "%s/%s: path too long", dir, name);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return errf_sys("%s", path);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		close(fd);
		return errf(EPERM, "%s is not a plain file", path);
	}
	*out = fd;
	return 0;
}

static void kept_path(struct host *h, struct sandbox *sb, char *out, size_t cap)
{
	snprintf(out, cap, "%s/logs/%s.log", h->cfg->data_dir, sb->row.id);
}

int host_log_open(struct host *h, struct sandbox *sb, int *fd)
{
	if (sandbox_in(sb, SBX_FAILED)) {
		char path[PATH_MAX];
		kept_path(h, sb, path, sizeof path);
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0 && errno == ENOENT)	/* nothing was kept */
			*fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return *fd < 0 ? errf_sys("%s", path) : 0;
	}
	int rc = open_plain(sb->dir, "console.log", fd);
	if (rc == -ENOENT)	/* not written yet */
		return (*fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0 ? errf_sys("/dev/null") : 0;
	return rc;
}

void sandbox_log_keep(struct host *h, struct sandbox *sb)
{
	int in;
	if (open_plain(sb->dir, "console.log", &in) < 0)
		return;
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	kept_path(h, sb, path, sizeof path);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	struct stat st;
	if (out >= 0 && fstat(in, &st) == 0) {
		off_t from = st.st_size > KEEP_BYTES ? st.st_size - KEEP_BYTES : 0;
		char buf[16384];
		ssize_t n;
		while ((n = pread(in, buf, sizeof buf, from)) > 0 && from < st.st_size) {
			if (write(out, buf, n) != n)
				break;
			from += n;
		}
	}
	if (out >= 0 && (close(out) < 0 || rename(tmp, path) < 0))
		log_warn("sandbox %s: keeping its console: %s", sb->row.id, strerror(errno));
	close(in);
}

void sandbox_log_drop(struct host *h, struct sandbox *sb)
{
	char path[PATH_MAX];
	kept_path(h, sb, path, sizeof path);
	unlink(path);
}
