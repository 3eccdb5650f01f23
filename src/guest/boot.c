/*
 * PID 1's boot and shutdown: see boot.h.
 *
 * The root switch follows switch_root(8): the initramfs (rootfs) cannot be
 * pivot_root'ed away, so the new root is mounted on /newroot, the kernel
 * file systems are moved into it, the initramfs files are deleted to give
 * their memory back, and the new root is moved over "/" and chroot'ed
 * into. The process keeps running throughout, so it stays PID 1.
 *
 * A template root is read-only and shared by many sandboxes; kiln.overlay
 * puts a writable overlayfs on top of it, backed by a tmpfs or by a disk
 * of its own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/agent.h"
#include "guest/boot.h"

#define MODULE_ORDER "/lib/modules/kiln.order"
#define MODULE_DIR   "/lib/modules"

static int mount_one(const char *src, const char *dir, const char *type,
		     unsigned long flags, const char *data)
{
	mkdir(dir, 0755);
	if (mount(src, dir, type, flags, data) < 0 && errno != EBUSY) {
		int e = errno;
		agent_log("mount %s on %s: %s", type, dir, strerror(e));
		return -e;
	}
	return 0;
}

/* The initramfs has no /dev/console node (it is built without root), so
 * PID 1 starts without stdio: mount devtmpfs first, then reopen it. */
static void open_console(void)
{
	int fd = open("/dev/console", O_RDWR | O_NOCTTY);
	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

void boot_early(void)
{
	mount_one("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	open_console();
	mount_one("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static int load_module(const char *relpath)
{
	char path[768];
	if ((size_t)snprintf(path, sizeof path, "%s/%s", MODULE_DIR, relpath) >= sizeof path)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		agent_log("module %s: %s", path, strerror(errno));
		return -errno;
	}
	int rc = (int)syscall(SYS_finit_module, fd, "", 0);
	int err = errno;
	close(fd);
	if (rc < 0 && err != EEXIST) {
		agent_log("module %s: %s", path, strerror(err));
		return -err;
	}
	return 0;
}

int boot_modules(void)
{
	FILE *f = fopen(MODULE_ORDER, "re");
	if (!f) {
		agent_log("%s: %s", MODULE_ORDER, strerror(errno));
		return -errno;
	}
	char line[512];
	int failed = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\r\n")] = 0;
		if (line[0] && line[0] != '#' && load_module(line) < 0)
			failed++;
	}
	fclose(f);
	return failed ? -EIO : 0;
}

/* Device nodes appear when the driver has probed, which may be a little
 * after the module loaded. */
static int wait_for(const char *path, unsigned ms)
{
	struct stat st;
	struct timespec tick = { 0, 10 * 1000000 };
	for (unsigned waited = 0; stat(path, &st) < 0; waited += 10) {
		if (waited >= ms)
			return -ENOENT;
		nanosleep(&tick, NULL);
	}
	return 0;
}

/* Delete the initramfs's files (switch_root does the same), staying on
 * its device so that nothing mounted is touched. */
static void free_initramfs(int dfd, dev_t dev)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0)
				free_initramfs(fd, dev);
			unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
		} else {
			unlinkat(dirfd(d), de->d_name, 0);
		}
	}
	closedir(d);
}

static int fail(char *err, size_t errlen, const char *what, const char *path)
{
	int e = errno;
	snprintf(err, errlen, "%s %s: %s", what, path, strerror(e));
	return -e;
}

static int mount_overlay(const struct boot_cfg *cfg, char *err, size_t errlen)
{
	if (mount(cfg->root, "/lower", cfg->rootfstype, MS_RDONLY, NULL) < 0)
		return fail(err, errlen, "mount (read-only lower layer)", cfg->root);
	if (!strcmp(cfg->overlay, "tmpfs")) {
		if (mount("tmpfs", "/upper", "tmpfs", 0, "mode=0755") < 0)
			return fail(err, errlen, "mount tmpfs on", "/upper");
	} else {
		if (wait_for(cfg->overlay, cfg->root_wait_ms) < 0) {
			errno = ENOENT;
			return fail(err, errlen, "overlay disk", cfg->overlay);
		}
		if (mount(cfg->overlay, "/upper", cfg->rootfstype, 0, NULL) < 0)
			return fail(err, errlen, "mount (overlay upper layer)", cfg->overlay);
	}
	mkdir("/upper/upper", 0755);
	mkdir("/upper/work", 0755);
	if (mount("overlay", "/newroot", "overlay", 0,
		  "lowerdir=/lower,upperdir=/upper/upper,workdir=/upper/work") < 0)
		return fail(err, errlen, "mount overlay on", "/newroot");
	return 0;
}

int boot_root(const struct boot_cfg *cfg, char *err, size_t errlen)
{
	static const char *const moved[] = { "/dev", "/proc", "/sys" };
	struct stat st;

	if (!cfg->root[0])
		return 0;
	if (wait_for(cfg->root, cfg->root_wait_ms) < 0) {
		errno = ENOENT;
		return fail(err, errlen, "root disk", cfg->root);
	}
	mkdir("/newroot", 0755);
	mkdir("/lower", 0755);
	mkdir("/upper", 0755);
	int rc;
	if (cfg->overlay[0])
		rc = mount_overlay(cfg, err, errlen);
	else if (mount(cfg->root, "/newroot", cfg->rootfstype, cfg->ro ? MS_RDONLY : 0, NULL) < 0)
		rc = fail(err, errlen, "mount root", cfg->root);
	else
		rc = 0;
	if (rc < 0)
		return rc;

	for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++) {
		char to[64];
		snprintf(to, sizeof to, "/newroot%s", moved[i]);
		mkdir(to, 0755);	/* fails harmlessly on a read-only root */
		if (mount(moved[i], to, NULL, MS_MOVE, NULL) < 0)
			return fail(err, errlen, "move mount", moved[i]);
	}
	if (chdir("/newroot") < 0)
		return fail(err, errlen, "chdir", "/newroot");
	if (stat("/", &st) == 0) {
		int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			free_initramfs(fd, st.st_dev);
	}
	if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
		return fail(err, errlen, "move mount", "/newroot to /");
	if (chroot(".") < 0 || chdir("/") < 0)
		return fail(err, errlen, "chroot", "/newroot");
	return 0;
}

void boot_mounts(void)
{
	mount_one("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "gid=5,mode=620,ptmxmode=666");
	mount_one("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_one("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_one("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	/* Programs expect these links; devtmpfs does not make them. */
	symlink("/proc/self/fd", "/dev/fd");
	symlink("/proc/self/fd/0", "/dev/stdin");
	symlink("/proc/self/fd/1", "/dev/stdout");
	symlink("/proc/self/fd/2", "/dev/stderr");
}

void boot_hostname(const struct boot_cfg *cfg)
{
	char name[65] = "kiln";
	if (cfg->hostname[0]) {
		snprintf(name, sizeof name, "%s", cfg->hostname);
	} else {
		FILE *f = fopen("/etc/hostname", "re");
		if (f) {
			if (fgets(name, sizeof name, f))
				name[strcspn(name, " \t\r\n")] = 0;
			fclose(f);
			if (!name[0])
				strcpy(name, "kiln");
		}
	}
	if (sethostname(name, strlen(name)) < 0)
		agent_log("sethostname %s: %s", name, strerror(errno));
}

static void reap_all(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

void boot_shutdown(int how)
{
	struct timespec tick = { 0, 20 * 1000000 };

	/* TERM first and a little time to finish writing, then KILL. */
	kill(-1, SIGTERM);
	for (int i = 0; i < 100; i++) {
		reap_all();
		if (kill(-1, 0) < 0 && errno == ESRCH)
			break;
		nanosleep(&tick, NULL);
	}
	kill(-1, SIGKILL);
	reap_all();
	sync();
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL) < 0 && errno != EBUSY)
		agent_log("remount / read-only: %s", strerror(errno));
	sync();
	reboot(how);
	/* reboot() only returns on failure; PID 1 must never exit. */
	agent_log("reboot: %s", strerror(errno));
	for (;;)
		pause();
}
