#include "kilnd/config.h"
#include "common/err.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen, sizeof c->listen, "127.0.0.1:7070");
	snprintf(c->data_dir, sizeof c->data_dir, "/var/lib/kiln");
	snprintf(c->role, sizeof c->role, "all");
	c->max_sandboxes = 256;
	struct sysinfo si;
	/* Guest memory is overcommitted three to one: a sandbox's memory is
	 * the template's snapshot, shared copy-on-write until the guest writes
	 * it, so what a sandbox costs is what it changes, far below its size. */
	c->max_memory_mib = sysinfo(&si) == 0
		? (int64_t)((uint64_t)si.totalram * si.mem_unit / (1024 * 1024) * 3) : 4096;
	c->max_creates = 8;
	c->create_wait_ms = 30000;
	c->default_ttl = 600;
	c->max_ttl = 7 * 24 * 3600;
	c->rate_per_sec = 200;
	c->rate_burst = 400;
	c->max_json_bytes = 1 << 20;
	c->max_file_bytes = 256ull << 20;
	c->max_exec_output = 16ull << 20;
	c->max_connections = 512;
	c->sample_ms = 5000;
	c->boot_timeout_ms = 120000;
	c->reap_ms = 250;
	c->net = true;
	c->net_pool = 4;
	c->jail = true;
	c->jail_uid = 900000;
	snprintf(c->cgroup, sizeof c->cgroup, "/sys/fs/cgroup/kiln");
	/* What a VMM needs besides its guest's memory: its own code and
	 * heap, device buffers, page tables of the guest's memory. */
	c->vmm_overhead_mib = 96;
	c->vmm_pids = 64;
	c->reserve_disk_mib = 256;
}

static int set_path(char *dst, const char *dir, const char *rel)
{
	if (dst[0])
		return 0;
	if (snprintf(dst, PATH_MAX, "%s/%s", dir, rel) >= PATH_MAX)
		return errf(ENAMETOOLONG, "path %s/%s too long", dir, rel);
	return 0;
}

int config_finish(struct config *c)
{
	if (!c->bin_dir[0]) {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n < 0)
			return errf_sys("readlink /proc/self/exe");
		exe[n] = 0;
		snprintf(c->bin_dir, sizeof c->bin_dir, "%s", dirname(exe));
	}
	int rc = 0;
	rc = rc ?: set_path(c->vmm, c->bin_dir, "kiln-vmm");
	rc = rc ?: set_path(c->disk_tool, c->bin_dir, "kiln-disk");
	rc = rc ?: set_path(c->kernel, c->bin_dir, "guest/vmlinux");
	rc = rc ?: set_path(c->initrd, c->bin_dir, "guest/initramfs.cpio");
	rc = rc ?: set_path(c->images, c->bin_dir, "guest");
	rc = rc ?: set_path(c->image_builders, c->bin_dir, "../images");
	if (rc)
		return rc;
	if (!c->store[0])
		snprintf(c->store, sizeof c->store, "sqlite:%s/kilnd.db", c->data_dir);
	if (c->data_dir[0] != '/')
		return errf(EINVAL, "--data must be an absolute path");
	return 0;
}
