#include "kilnd/config.h"
#include "api/api.h"
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
	c->anon_rate_per_sec = 50;
	c->anon_rate_burst = 100;
	c->max_json_bytes = 1 << 20;
	c->max_file_bytes = 256ull << 20;
	c->max_exec_output = 16ull << 20;
	c->max_connections = 512;
	c->max_inflight = 128;
	c->max_uploads = 8;
	c->max_tunnels = 64;
	c->max_exec_buffer = 256LL << 20;
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
	rc = rc ?: set_path(c->web_dir, c->bin_dir, "web");
	if (rc)
		return rc;
	if (!c->store[0])
		snprintf(c->store, sizeof c->store, "sqlite:%s/kilnd.db", c->data_dir);
	if (c->data_dir[0] != '/')
		return errf(EINVAL, "--data must be an absolute path");
	if (!c->tls_cert[0] != !c->tls_key[0])
		return errf(EINVAL, "--tls-cert and --tls-key go together");
	if (c->tls_cert[0] && access(c->tls_cert, R_OK) != 0)
		return errf_sys("--tls-cert %s", c->tls_cert);
	if (c->tls_key[0] && access(c->tls_key, R_OK) != 0)
		return errf_sys("--tls-key %s", c->tls_key);
	return 0;
}

void config_host(const struct config *c, struct host_config *h)
{
	memset(h, 0, sizeof *h);
	snprintf(h->data_dir, sizeof h->data_dir, "%s", c->data_dir);
	snprintf(h->vmm, sizeof h->vmm, "%s", c->vmm);
	snprintf(h->kernel, sizeof h->kernel, "%s", c->kernel);
	snprintf(h->initrd, sizeof h->initrd, "%s", c->initrd);
	snprintf(h->images, sizeof h->images, "%s", c->images);
	snprintf(h->image_builders, sizeof h->image_builders, "%s", c->image_builders);
	h->max_sandboxes = c->max_sandboxes;
	h->max_memory_mib = c->max_memory_mib;
	h->max_creates = c->max_creates;
	h->create_wait_ms = c->create_wait_ms;
	h->default_ttl = c->default_ttl;
	h->sample_ms = c->sample_ms;
	h->boot_timeout_ms = c->boot_timeout_ms;
	h->reap_ms = c->reap_ms;
	h->net = c->net;
	h->net_pool = c->net_pool;
	h->pool = c->pool;
	h->jail = c->jail;
	h->jail_uid = c->jail_uid;
	snprintf(h->cgroup, sizeof h->cgroup, "%s", c->cgroup);
	h->vmm_overhead_mib = c->vmm_overhead_mib;
	h->vmm_pids = c->vmm_pids;
	h->reserve_disk_mib = c->reserve_disk_mib;
	snprintf(h->dns, sizeof h->dns, "%s", c->dns);
}

void config_api(const struct config *c, struct api_config *a)
{
	memset(a, 0, sizeof *a);
	snprintf(a->listen, sizeof a->listen, "%s", c->listen);
	snprintf(a->data_dir, sizeof a->data_dir, "%s", c->data_dir);
	snprintf(a->role, sizeof a->role, "%s", c->role);
	snprintf(a->domain, sizeof a->domain, "%s", c->domain);
	snprintf(a->mcp_origins, sizeof a->mcp_origins, "%s", c->mcp_origins);
	snprintf(a->tls_cert, sizeof a->tls_cert, "%s", c->tls_cert);
	snprintf(a->tls_key, sizeof a->tls_key, "%s", c->tls_key);
	snprintf(a->web_dir, sizeof a->web_dir, "%s", c->web_dir);
	a->max_ttl = c->max_ttl;
	a->max_json_bytes = c->max_json_bytes;
	a->max_file_bytes = c->max_file_bytes;
	a->max_exec_output = c->max_exec_output;
	a->max_connections = c->max_connections;
	a->max_inflight = c->max_inflight;
	a->max_uploads = c->max_uploads;
	a->max_tunnels = c->max_tunnels;
}
