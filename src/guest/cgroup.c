/*
 * cgroups for guest processes (PID 1 only).
 *
 * Everything the agent starts runs below /sys/fs/cgroup/kiln-user, whose
 * memory.max and pids.max leave the agent (in the root cgroup) memory and
 * process slots when a guest program eats all memory or forks without
 * end. The cpu controller makes kiln-user a single scheduling entity next
 * to the agent, so a thousand runnable fork-bomb processes share one half
 * of the CPU instead of starving the agent.
 *
 * Each EXEC gets its own child cgroup, kiln-user/p<ID>: with cpu enabled
 * below kiln-user too, a new command competes with a runaway one as an
 * equal, not as one process among thousands; and a timeout or a vanished
 * client can kill every process the command started (cgroup.kill), even
 * those that left its process group. An empty child cgroup is removed
 * when its process is done; one still holding daemons is retried when
 * orphans are reaped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "guest/agent.h"

#define CGROUP_ROOT	"/sys/fs/cgroup"
#define CGROUP_USER	CGROUP_ROOT "/kiln-user"

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, s, strlen(s));
	int e = errno;
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : n < 0 ? -e : -EIO;
}

void cg_setup(struct agent *a, uint64_t mem_total)
{
	struct statfs sfs;
	char val[32];
	int rc;

	mkdir(CGROUP_ROOT, 0755);
	if (statfs(CGROUP_ROOT, &sfs) < 0 || sfs.f_type != CGROUP2_SUPER_MAGIC) {
		if (mount("cgroup2", CGROUP_ROOT, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
			agent_log("mount cgroup2: %s; guest processes run without limits", strerror(errno));
			return;
		}
	}
	rc = write_file(CGROUP_ROOT "/cgroup.subtree_control", "+memory +pids +cpu");
	if (rc < 0)
		agent_log("enable memory, pids and cpu controllers: %s", strerror(-rc));
	if (mkdir(CGROUP_USER, 0755) < 0 && errno != EEXIST) {
		agent_log("mkdir %s: %s; guest processes run without limits", CGROUP_USER, strerror(errno));
		return;
	}
	if (mem_total > a->mem_reserve * 2) {
		snprintf(val, sizeof val, "%llu", (unsigned long long)(mem_total - a->mem_reserve));
		if ((rc = write_file(CGROUP_USER "/memory.max", val)) < 0)
			agent_log("%s/memory.max: %s", CGROUP_USER, strerror(-rc));
	}
	snprintf(val, sizeof val, "%u", a->pids_max);
	if ((rc = write_file(CGROUP_USER "/pids.max", val)) < 0)
		agent_log("%s/pids.max: %s", CGROUP_USER, strerror(-rc));
	if ((rc = write_file(CGROUP_USER "/cgroup.subtree_control", "+cpu")) < 0)
		agent_log("%s: enable cpu: %s", CGROUP_USER, strerror(-rc));
	snprintf(a->cgroup, sizeof a->cgroup, "%s", CGROUP_USER);
}

int cg_create(struct agent *a, uint32_t id, char *path, size_t len)
{
	if (!a->cgroup[0]) {
		path[0] = 0;
		return 0;
	}
	snprintf(path, len, "%s/p%u", a->cgroup, id);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		int e = errno;
		path[0] = 0;
		return -e;
	}
	return 0;
}

void cg_kill(const char *path)
{
	char file[160];
	if (!path[0])
		return;
	snprintf(file, sizeof file, "%s/cgroup.kill", path);
	write_file(file, "1");
}

static bool cg_remove(struct agent *a, uint32_t id)
{
	char path[160];
	snprintf(path, sizeof path, "%s/p%u", a->cgroup, id);
	return rmdir(path) == 0 || errno == ENOENT;
}

void cg_release(struct agent *a, uint32_t id)
{
	if (!a->cgroup[0] || cg_remove(a, id))
		return;
	/* Descendants still live in it: try again later. */
	if (a->ncg_pending < CG_PENDING_MAX)
		a->cg_pending[a->ncg_pending++] = id;
}

void cg_sweep(struct agent *a)
{
	for (int i = 0; i < a->ncg_pending;) {
		if (cg_remove(a, a->cg_pending[i]))
			a->cg_pending[i] = a->cg_pending[--a->ncg_pending];
		else
			i++;
	}
}
