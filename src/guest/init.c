/*
 * kiln-init: PID 1 of every kiln guest.
 *
 * It runs from the initramfs. Its first job is to make the guest usable:
 * mount the kernel filesystems, give itself a console, and load the virtio
 * and vsock modules (the Debian kernel builds them as modules, and a
 * busybox-free initramfs has no modprobe, so the build resolves the order
 * and writes it to /lib/modules/kiln.order).
 *
 * This is the foundation stage: after setting up it prints the ready line
 * and powers the machine off. The agent proper (exec, files, pty over
 * vsock) builds on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MODULE_ORDER "/lib/modules/kiln.order"
#define MODULE_DIR   "/lib/modules"

static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kiln-init: ", stdout);
	vfprintf(stdout, fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
	va_end(ap);
}

static int mount_one(const char *src, const char *dir, const char *type,
		     unsigned long flags, const char *data)
{
	mkdir(dir, 0755);
	if (mount(src, dir, type, flags, data) < 0 && errno != EBUSY) {
		say("mount %s on %s: %s", type, dir, strerror(errno));
		return -errno;
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

static int load_module(const char *relpath)
{
	char path[768];
	if ((size_t)snprintf(path, sizeof path, "%s/%s", MODULE_DIR, relpath) >= sizeof path)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		say("module %s: %s", path, strerror(errno));
		return -errno;
	}
	int rc = syscall(SYS_finit_module, fd, "", 0);
	int err = errno;
	close(fd);
	if (rc < 0 && err != EEXIST) {
		say("module %s: %s", path, strerror(err));
		return -err;
	}
	return 0;
}

static int load_modules(void)
{
	FILE *f = fopen(MODULE_ORDER, "re");
	if (!f) {
		say("%s: %s", MODULE_ORDER, strerror(errno));
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

static double uptime_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
	mount_one("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	open_console();
	mount_one("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	mount_one("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");

	int rc = load_modules();
	say("ready (modules %s, uptime %.3f s)", rc == 0 ? "loaded" : "FAILED",
	    uptime_seconds());

	sync();
	reboot(RB_POWER_OFF);
	/* reboot() only returns on failure; PID 1 must never exit. */
	for (;;)
		pause();
}
