#include "host/cgroup.h"
#include "common/err.h"
#include "host/host_config.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup"

static int write_text(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
		return errf(ENAMETOOLONG, "cgroup path too long");
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("%s", path);
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : errf_sys("write '%s' to %s", text, path);
}

static int read_text(const char *dir, const char *file, char *buf, size_t cap)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n < 0 ? -errno : 0;
}

bool cgroup_setup(const struct host_config *cfg)
{
	static bool warned;
	char probe[64];
	if (access(CGROUP_ROOT "/cgroup.controllers", F_OK) < 0 ||
	    strncmp(cfg->cgroup, CGROUP_ROOT "/", strlen(CGROUP_ROOT) + 1) != 0) {
		if (!warned)
			log_warn("no cgroup v2 at %s (or --cgroup is outside it): VMMs run without "
				 "cpu, memory and pids limits", CGROUP_ROOT);
		warned = true;
		return false;
	}
	/* Each level from the root down to the parent passes the controllers
	 * on. A level that holds processes itself cannot (cgroup v2's "no
	 * internal processes"); the root can. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s", CGROUP_ROOT);
	const char *rest = cfg->cgroup + strlen(CGROUP_ROOT);
	for (;;) {
		if (strcmp(path, CGROUP_ROOT) != 0 && mkdir(path, 0755) < 0 && errno != EEXIST) {
			log_warn("cgroup %s: %s; VMMs run without limits", path, strerror(errno));
			return false;
		}
		if (write_text(path, "cgroup.subtree_control", "+cpu +memory +pids") < 0 &&
		    (read_text(path, "cgroup.subtree_control", probe, sizeof probe) < 0 ||
		     !strstr(probe, "memory"))) {
			log_warn("cgroup %s: %s; VMMs run without limits", path, errmsg());
			return false;
		}
		if (!*rest)
			break;
		const char *next = strchr(rest + 1, '/');
		size_t len = next ? (size_t)(next - rest) : strlen(rest);
		size_t have = strlen(path);
		if (have + len >= sizeof path)
			return false;
		memcpy(path + have, rest, len);
		path[have + len] = 0;
		rest += len;
	}
	return true;
}

int cgroup_memory_mib(const struct host_config *cfg, int memory_mib, int disk_mib)
{
	/* The guest's memory once as its own pages and once as page cache:
	 * a snapshot or hibernation writes all of it to a file, and a VMM
	 * restored from one maps it from that file. Both are charged to the
	 * VMM, and dirty pages cannot be dropped at once. */
	long long mib = 2LL * memory_mib + cfg->vmm_overhead_mib + disk_mib;
	return mib > 16 ? (int)mib : 16;
}

int cgroup_disk_mib(const struct host_config *cfg, uint64_t disk_bytes)
{
	char dir[PATH_MAX];
	struct statfs fs;
	snprintf(dir, sizeof dir, "%s/sandboxes", cfg->data_dir);
	if (statfs(dir, &fs) < 0 || (fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC))
		return 0;
	/* Its top layer grows by whole clusters, at most to the disk's size,
	 * plus the cluster map (8 bytes per 64 KiB) and the header. */
	uint64_t mib = (disk_bytes + (disk_bytes >> 13) + (1 << 20) - 1) >> 20;
	return mib < (1u << 30) ? (int)mib + 1 : 1 << 30;
}

/* A sandbox's cgroup directory, CGROUP/<id>: 0, or -1 if it is too long. */
static int dir_of(const struct host_config *cfg, const char *id, char path[PATH_MAX])
{
	return snprintf(path, PATH_MAX, "%s/%s", cfg->cgroup, id) >= PATH_MAX ? -1 : 0;
}

int cgroup_memory_max_mib(const struct host_config *cfg, const char *id)
{
	char path[PATH_MAX], buf[64];
	if (dir_of(cfg, id, path) < 0 || read_text(path, "memory.max", buf, sizeof buf) < 0)
		return 0;
	return (int)(atoll(buf) >> 20);
}

int cgroup_make(const struct host_config *cfg, const char *id, int vcpus, int memory_mib,
		int disk_mib, char path[PATH_MAX])
{
	if (dir_of(cfg, id, path) < 0)
		return errf(ENAMETOOLONG, "cgroup path too long");
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return errf_sys("mkdir %s", path);
	char v[64];
	int rc = 0;
	snprintf(v, sizeof v, "%d 100000", vcpus * 100000);
	rc = rc ?: write_text(path, "cpu.max", v);
	snprintf(v, sizeof v, "%lld", (long long)cgroup_memory_mib(cfg, memory_mib, disk_mib) << 20);
	rc = rc ?: write_text(path, "memory.max", v);
	/* Swapped out, a VMM would go over its limit slowly instead of
	 * being stopped; and one killed takes its whole cgroup along. */
	if (rc == 0) {
		write_text(path, "memory.swap.max", "0");
		write_text(path, "memory.oom.group", "1");
	}
	snprintf(v, sizeof v, "%d", cfg->vmm_pids);
	rc = rc ?: write_text(path, "pids.max", v);
	if (rc < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", errmsg());
		rmdir(path);
		return errf(-rc, "cgroup of %s: %s", id, msg);
	}
	return 0;
}

int cgroup_cpu_weight(const struct host_config *cfg, const char *id, int weight)
{
	char path[PATH_MAX], v[16];
	if (dir_of(cfg, id, path) < 0)
		return errf(ENAMETOOLONG, "cgroup path too long");
	snprintf(v, sizeof v, "%d", weight);
	return write_text(path, "cpu.weight", v);
}

int cgroup_move(const char *path, pid_t pid)
{
	char v[32];
	snprintf(v, sizeof v, "%d", (int)pid);
	return write_text(path, "cgroup.procs", v);
}

bool cgroup_oom_killed(const struct host_config *cfg, const char *id)
{
	char path[PATH_MAX], buf[512];
	if (dir_of(cfg, id, path) < 0 || read_text(path, "memory.events", buf, sizeof buf) < 0)
		return false;
	const char *k = strstr(buf, "oom_kill ");
	return k && atol(k + 9) > 0;
}

void cgroup_remove(const struct host_config *cfg, const char *id)
{
	char path[PATH_MAX];
	if (dir_of(cfg, id, path) < 0 || access(path, F_OK) < 0)
		return;
	/* An exiting process leaves its cgroup a moment after its pidfd
	 * says so (a big VM takes a while to free): try for a while,
	 * killing whatever is still in it. */
	for (int i = 0; i < 500; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return;
		if (errno != EBUSY)
			break;
		if (i % 50 == 10)
			write_text(path, "cgroup.kill", "1");
		usleep(20000);
	}
	char procs[128] = "";
	read_text(path, "cgroup.procs", procs, sizeof procs);
	procs[strcspn(procs, "\n")] = 0;
	log_warn("cgroup %s: cannot remove it: %s (processes: %s)", path, strerror(errno),
		 procs[0] ? procs : "none");
}

void cgroup_finish(const struct host_config *cfg)
{
	rmdir(cfg->cgroup);	/* fails while sandboxes that live on use it */
}
