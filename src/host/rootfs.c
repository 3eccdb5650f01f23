/*
 * rootfs: see rootfs.h. The directory comes from an untrusted image, so
 * every path in it is opened relative to its descriptor with openat2:
 * RESOLVE_NO_SYMLINKS where kiln writes, RESOLVE_IN_ROOT where it only
 * looks (as the guest will see the path).
 */
#include "host/rootfs.h"
#include "host/proc.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int openat2_fd(int dirfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .resolve = resolve };
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	return fd < 0 ? -errno : fd;
}

#define NOFOLLOW (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static int hostname_file(int root)
{
	if (mkdirat(root, "etc", 0755) < 0 && errno != EEXIST)
		return errf_sys("the image's /etc");
	int etc = openat2_fd(root, "etc", O_RDONLY | O_DIRECTORY, NOFOLLOW);
	if (etc < 0)
		return errf(-etc, "the image's /etc: %s", etc == -ELOOP ? "a symlink" : strerror(-etc));
	struct stat sb;
	int rc = 0;
	if (fstatat(etc, "hostname", &sb, AT_SYMLINK_NOFOLLOW) == 0 && (!S_ISREG(sb.st_mode) || sb.st_size))
		goto out;	/* the image's own */
	unlinkat(etc, "hostname", 0);
	int fd = openat(etc, "hostname", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, "kiln\n", 5) != 5)
		rc = errf_sys("writing the image's /etc/hostname");
	if (fd >= 0)
		close(fd);
out:
	close(etc);
	return rc;
}

/* mkdir -p of an absolute path inside root; a component that is a
 * symlink is left as it is (the guest resolves it) and ends the walk. */
static int make_workdir(int root, const char *workdir)
{
	char path[4096];
	if (workdir[0] != '/' || snprintf(path, sizeof path, "%s", workdir + 1) >= (int)sizeof path)
		return errf(EINVAL, "the image's WorkingDir '%.100s' is not an absolute path", workdir);
	int fd = fcntl(root, F_DUPFD_CLOEXEC, 0), rc = 0;
	for (char *s = path, *next; fd >= 0 && rc == 0 && *s; s = next) {
		next = s + strcspn(s, "/");
		if (*next)
			*next++ = 0;
		if (!*s || !strcmp(s, "."))
			continue;
		if (!strcmp(s, "..")) {
			rc = errf(EINVAL, "the image's WorkingDir '%.100s' has '..'", workdir);
			break;
		}
		if (mkdirat(fd, s, 0755) < 0 && errno != EEXIST) {
			rc = errf_sys("creating the image's WorkingDir %s", workdir);
			break;
		}
		int sub = openat(fd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = sub;	/* -1 at a symlink or a file: the guest's to resolve */
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

int rootfs_for_guest(const char *dir, const char *workdir)
{
	int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return errf_sys("%s", dir);
	static const struct { const char *name; mode_t mode; } mp[] = {
		{ "dev", 0755 }, { "proc", 0555 }, { "sys", 0555 }, { "tmp", 01777 }, { "run", 0755 },
	};
	int rc = 0;
	for (size_t i = 0; i < sizeof mp / sizeof mp[0] && rc == 0; i++)
		if (mkdirat(root, mp[i].name, mp[i].mode) == 0)
			fchmodat(root, mp[i].name, mp[i].mode, AT_SYMLINK_NOFOLLOW);	/* past the umask */
		else if (errno != EEXIST)
			rc = errf_sys("the image's /%s", mp[i].name);
	if (rc == 0)
		rc = hostname_file(root);
	if (rc == 0 && workdir && *workdir)
		rc = make_workdir(root, workdir);
	if (rc == 0) {
		int sh = openat2_fd(root, "bin/sh", O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
		struct stat sb;
		if (sh < 0 || fstat(sh, &sb) < 0 || !S_ISREG(sb.st_mode) || !(sb.st_mode & 0111))
			rc = errf(ENOENT, "the image has no executable /bin/sh: kiln runs commands and checks "
					  "the root through it");
		if (sh >= 0)
			close(sh);
	}
	close(root);
	return rc;
}

int rootfs_make_ext4(const char *dir, const char *out, uint64_t used_bytes, long entries, uint64_t size_mib,
		     const char *log)
{
	uint64_t mib = used_bytes / (1 << 20);
	mib += mib / 4;
	if (size_mib && size_mib < mib + 1)
		return errf(EINVAL, "--disk %llu: the image's files need %llu MiB (their %llu MiB and a quarter "
				    "more for the filesystem)", (unsigned long long)size_mib,
			    (unsigned long long)mib + 1, (unsigned long long)(used_bytes >> 20));
	mib = size_mib ? size_mib : mib + ROOTFS_HEADROOM_MIB;
	long inodes = entries + entries / 4 + 8192;
	char size[32], nino[32];
	snprintf(size, sizeof size, "%lluM", (unsigned long long)mib);
	snprintf(nino, sizeof nino, "%ld", inodes);
	unlink(out);
	/* root_owner: the root directory is root's even when the tests run
	 * this unprivileged; the rest keeps the owners unpacked. */
	char *argv[] = { "mke2fs", "-q", "-F", "-t", "ext4", "-L", "kiln-root", "-N", nino,
			 "-E", "root_owner=0:0", "-d", (char *)dir, (char *)out, size, NULL };
	int rc = proc_run(argv, log);
	if (rc != 0) {
		unlink(out);
		return rc < 0 ? rc : errf(EIO, "mke2fs -d %s failed (exit status %d; see %s)", dir, rc, log);
	}
	return 0;
}
