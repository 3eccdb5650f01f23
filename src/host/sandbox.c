/*
 * sandbox: the lifecycle of one sandbox: create (from a template's zygote,
 * by booting, or from a snapshot), delete, hibernate, wake, and guest
 * access. Forks and snapshots are in fork.c.
 */
#include "host/disk.h"
#include "host/dns.h"
#include "host/guest_conn.h"
#include "host/jail.h"
#include "host/host_int.h"
#include "host/net.h"
#include "host/pool.h"
#include "host/proc.h"
#include "host/template.h"
#include "host/vmm.h"
#include "common/metrics.h"
#include "common/err.h"
#include "common/failpoint.h"
#include "host/host_config.h"
#include "common/log.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* step: the time since the previous step under name, in sb->steps, while
 * a create measures them (at_ns set; 0 otherwise: a pool member's start,
 * a fork's child, a wake). The create's log line says where its time went:
 * with creates at once, which step they queue in. */
static void step(struct sandbox *sb, const char *name)
{
	if (!sb->steps.at_ns)
		return;
	int64_t now = mono_ns();
	size_t n = strlen(sb->steps.text);
	if (n + 1 < sizeof sb->steps.text)
		snprintf(sb->steps.text + n, sizeof sb->steps.text - n, "%s%s %.1f", n ? ", " : "", name,
			 (double)(now - sb->steps.at_ns) / 1e6);
	sb->steps.at_ns = now;
}

void sandbox_ctl(struct sandbox *sb, char *out, size_t cap)
{
	vm_path(out, cap, sb->dir, "ctl.sock");
}

/* ---- the disk in the record --------------------------------------------------------- */

int disks_json_top(const char *disks, char top[PATH_MAX])
{
	json_t *j = disks ? json_loads(disks, 0, NULL) : NULL;
	const char *t = json_string_value(json_object_get(j, "top"));
	int rc = t && t[0] == '/' && strlen(t) < PATH_MAX ? 0 : -EINVAL;
	if (rc == 0)
		snprintf(top, PATH_MAX, "%s", t);
	json_decref(j);
	return rc;
}

char *disks_json(const char *top)
{
	json_t *j = json_pack("{s:s}", "top", top);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return text;
}

int sandbox_top(struct sandbox *sb, char top[PATH_MAX])
{
	pthread_mutex_lock(&sb->lock);
	int rc = disks_json_top(sb->row.disks, top);
	pthread_mutex_unlock(&sb->lock);
	return rc < 0 ? errf(EINVAL, "sandbox %s: no disk recorded", sb->row.id) : 0;
}

int sandbox_set_top(struct sandbox *sb, const char *top)
{
	char *text = disks_json(top);
	if (!text)
		return errf(ENOMEM, "out of memory");
	pthread_mutex_lock(&sb->lock);
	free(sb->row.disks);
	sb->row.disks = text;
	pthread_mutex_unlock(&sb->lock);
	return 0;
}

/* ---- the VMM ------------------------------------------------------------------------ */

/* Metering (docs/billing.md). Each sample adds, since the last one: the
 * vCPUs' time in guest mode (what the kernel counted as guest time for the
 * VMM's threads: the VMM's own work and any time it could report on its
 * own are left out), the working set (PSS: a page shared with the
 * template's zygote or a fork parent counts in part) times the time
 * between samples, and the running time. The VMM's other CPU time is its
 * overhead, reported, not billed. */
void sandbox_sample(struct host *h, struct sandbox *sb)
{
	(void)h;
	pthread_mutex_lock(&sb->lock);
	struct proc_usage u;
	int64_t pss = 0;
	if (sb->row.vmm_pid > 0 && proc_alive(sb->row.vmm_pid, sb->row.vmm_start) &&
	    proc_usage(sb->row.vmm_pid, &u) == 0) {
		if (proc_pss(sb->row.vmm_pid, &pss) < 0)
			pss = sb->row.pss_bytes;	/* gone between the two reads */
		int64_t now = mono_ms(), dt_ms = sb->sample_ms ? now - sb->sample_ms : 0;
		double dt = (double)dt_ms / 1000;
		double active = sb->row.active_base + u.guest_seconds;
		double dcpu = active - sb->row.active_cpu_seconds;
		sb->row.cpu_seconds = sb->row.cpu_base + u.cpu_seconds;
		sb->row.active_cpu_seconds = active;
		sb->row.rss_bytes = u.rss_bytes;
		sb->row.pss_bytes = pss;
		sb->row.mem_mib_seconds += (double)u.rss_bytes / (1024 * 1024) * dt;
		sb->row.pss_mib_seconds += (double)pss / (1024 * 1024) * dt;
		sb->row.running_seconds += dt;
		sb->sample_ms = now;
		/* By the hour it was used in: a sample across midnight is
		 * billed in both days (meter.h). */
		meter_add(&sb->unsaved, wall_ms(), dt_ms, dcpu > 0 ? dcpu : 0, (double)pss / (1024 * 1024));
	}
	pthread_mutex_unlock(&sb->lock);
}

int sandbox_attach_vmm(struct host *h, struct sandbox *sb, pid_t pid, int64_t start)
{
	int fd = proc_pidfd(pid);
	if (fd < 0 || (start && proc_start_time(pid) != start)) {
		if (fd >= 0)
			close(fd);
		return errf(ECHILD, "the VMM (pid %d) is gone", (int)pid);
	}
	char pidf[PATH_MAX];
	vm_path(pidf, sizeof pidf, sb->dir, "vmm.pid");
	pidfile_write(pidf, pid, start);
	pthread_mutex_lock(&sb->lock);
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	sb->pidfd = fd;
	sb->row.vmm_pid = pid;
	sb->row.vmm_start = start;
	sb->vmm_dead = false;
	sb->expect_exit = false;
	sb->sample_ms = mono_ms();
	pthread_mutex_unlock(&sb->lock);
	return sandbox_save(h, sb);
}

/* The VMM that answers on a control socket, if any (found even when
 * kilnd died before it could record the pid). */
static pid_t ctl_pid(const char *ctl)
{
	struct stat st;
	if (lstat(ctl, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0;
	json_t *req = json_pack("{s:s}", "cmd", "status"), *reply = NULL;
	pid_t pid = 0;
	if (req && vmm_ctl(ctl, req, &reply, 2000) == 0)
		pid = (pid_t)json_integer_value(json_object_get(reply, "pid"));
	if (pid <= 1)
		pid = 0;	/* a VMM in a PID namespace of its own says 1: not ours to kill */
	json_decref(req);
	json_decref(reply);
	return pid;
}

static void teardown(struct host *h, struct sandbox *sb, bool keep_net);

void sandbox_teardown(struct host *h, struct sandbox *sb)
{
	teardown(h, sb, false);
}

bool sandbox_restartable(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	bool yes = sb->row.idle_hibernate;
	pthread_mutex_unlock(&sb->lock);
	return yes;
}

void sandbox_stop(struct host *h, struct sandbox *sb)
{
	teardown(h, sb, sandbox_restartable(sb));
}

static void teardown(struct host *h, struct sandbox *sb, bool keep_net)
{
	portwake_disarm(h, sb);	/* its listeners, if it slept */
	pthread_mutex_lock(&sb->lock);
	pid_t pid = sb->row.vmm_pid;
	int64_t start = sb->row.vmm_start;
	sb->expect_exit = true;
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	sb->pidfd = -1;
	sb->row.vmm_pid = 0;
	sb->row.vmm_start = 0;
	pthread_mutex_unlock(&sb->lock);

	if (pid > 0 && proc_kill_wait(pid, start, 5000) < 0)
		log_warn("sandbox %s: %s", sb->row.id, errmsg());
	/* A VMM kilnd did not get to record (a crash in between) is found
	 * by what it left: vmm.pid, or the pid its control socket gives.
	 * Both are the VMM's to write, so such a pid is signalled only if it
	 * runs as this sandbox's own jail uid, which no host process has.
	 * (Its cgroup, removed below, catches the rest.) Unjailed VMMs run
	 * as root: there is no line to hold (--no-jail is for debugging). */
	uid_t owner = h->cfg->jail ? sb->jail_uid : (uid_t)-1;
	if (owner != 0) {
		char path[PATH_MAX];
		pid_t other;
		int64_t ostart;
		vm_path(path, sizeof path, sb->dir, "vmm.pid");
		if (pidfile_read(path, &other, &ostart) == 0 && (other != pid || ostart != start))
			proc_kill_owned(other, ostart, owner, 5000);
		vm_path(path, sizeof path, sb->dir, "ctl.sock");
		if ((other = ctl_pid(path)) > 0)
			proc_kill_owned(other, proc_start_time(other), owner, 5000);
	}
	if (!keep_net)
		net_release(h, sb);
	vmm_jail_release(h, sb);
	/* Its disk layers may be the base of others' (forks): the collector
	 * removes them, and the directory, once nothing uses them. */
	if (rmtree_except_disks(sb->dir) < 0)
		log_warn("sandbox %s: %s", sb->row.id, errmsg());
}

/* The guest's resolver, as the host's is now (dns.h): a template's copy
 * may be stale, and a host that moved networks has other servers. A guest
 * whose file cannot be written (a read-only image) still works otherwise:
 * that is logged, not a failed create. t: the template whose snapshot the
 * guest was spawned from, or NULL: when its servers (written at its boot)
 * are the host's, the guest has the file already (the write cost a create
 * 52 ms of its 308 in the emulated host). */
static void write_resolv_conf(struct host *h, struct sandbox *sb, struct guest *g, const struct tmpl *t)
{
	char servers[DNS_LIST_MAX], text[512];
	dns_servers(h->cfg, servers);
	if (t && t->dns[0] && strcmp(t->dns, servers) == 0)
		return;
	dns_resolv_conf(servers, text, sizeof text);
	if (!text[0]) {
		log_warn("sandbox %s: the host has no nameserver a guest can reach (give kilnd --dns)",
			 sb->row.id);
		return;
	}
	int fd = memfd_create("resolv.conf", MFD_CLOEXEC);
	int rc = fd < 0 ? errf_sys("memfd_create")
		 : write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : errf_sys("memfd write");
	/* guest_write_file reads from the descriptor's offset: rewind. */
	if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0)
		rc = errf_sys("memfd lseek");
	if (rc == 0)
		rc = guest_write_file(g, "/etc/resolv.conf", 0644, false, fd, NULL);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		log_warn("sandbox %s: writing the guest's /etc/resolv.conf: %s", sb->row.id, errmsg());
	step(sb, "resolv");
}

/* The agent of a VM just started answering, within the boot timeout. */
static int agent_ready(struct host *h, struct sandbox *sb, struct guest **out)
{
	char vsock[PATH_MAX];
	vm_path(vsock, sizeof vsock, sb->dir, "vsock.sock");
	int rc = guest_wait_ready(vsock, h->cfg->boot_timeout_ms, sb->row.vmm_pid, out);
	if (rc == 0)
		guest_set_timeout(*out, h->cfg->boot_timeout_ms);
	return rc;
}

/* Whether the VMM exits within ms (not reaped: the caller's start_over,
 * abort or wait_exit does that). */
static bool vmm_exits_within(struct sandbox *sb, int ms)
{
	pthread_mutex_lock(&sb->lock);
	int fd = sb->pidfd;
	pthread_mutex_unlock(&sb->lock);
	if (fd < 0)
		return false;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;
	while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return n == 1;
}

/* How long a resync that failed waits for the VMM to end: a guest that
 * dies while kilnd resyncs it closes the agent's connection first, and its
 * VMM writes its post-mortem and exits a moment later. */
#define RESYNC_DEATH_MS 5000

int sandbox_wait_ready(struct host *h, struct sandbox *sb, bool resync, const struct tmpl *t)
{
	struct guest *g;
	int rc = agent_ready(h, sb, &g);
	step(sb, "agent");
	if (rc < 0)
		return rc;
	if (resync && failpoint_hit(FP_RESYNC_DIES)) {
		/* Tests: the VMM ends before the resync, which then finds the
		 * agent's connection closed, as a guest's death makes it. */
		sandbox_ctl_cmd(sb, "shutdown", 5000);
		vmm_exits_within(sb, RESYNC_DEATH_MS);
	}
	if (resync)
		rc = guest_resync(g, sb->row.id, sb->row.id);
	step(sb, "resync");
	if (rc < 0 && vmm_exits_within(sb, RESYNC_DEATH_MS)) {
		/* Its guest died before it was ready, as one that dies before its
		 * agent answers (guest_open): ECHILD, which the create and the
		 * wake answer by starting it once more (a fork's child fails
		 * its fork, with this reason; session 37's CI
		 * lost a TypeScript test's create so: "guest resync: the agent
		 * closed the connection; the VMM said: end of post-mortem"). */
		char why[300];
		snprintf(why, sizeof why, "%s", errmsg());
		rc = errf(ECHILD, "the guest died while kilnd resynced it (%s)", why);
	}
	if (rc == 0 && sb->row.net_slot)
		write_resolv_conf(h, sb, g, t);
	guest_close(g);
	return rc;
}

int sandbox_ctl_cmd(struct sandbox *sb, const char *cmd, int timeout_ms)
{
	char ctl[PATH_MAX];
	sandbox_ctl(sb, ctl, sizeof ctl);
	json_t *req = json_pack("{s:s}", "cmd", cmd), *reply = NULL;
	int rc = req ? vmm_ctl(ctl, req, &reply, timeout_ms) : errf(ENOMEM, "out of memory");
	json_decref(req);
	json_decref(reply);
	return rc;
}

/* Metering restarts now: CPU and time its VMM had before (a pooled VM's
 * spawn and wait) are nobody's. The bases make the next sample's totals
 * count from here (sandbox_sample adds them to the VMM's own). */
void sandbox_meter_reset(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	struct proc_usage u;
	if (sb->row.vmm_pid > 0 && proc_usage(sb->row.vmm_pid, &u) == 0) {
		sb->row.cpu_base = -u.cpu_seconds;
		sb->row.active_base = -u.guest_seconds;
	}
	sb->row.cpu_seconds = sb->row.active_cpu_seconds = 0;
	sb->row.mem_mib_seconds = sb->row.pss_mib_seconds = sb->row.running_seconds = 0;
	memset(&sb->unsaved, 0, sizeof sb->unsaved);
	sb->sample_ms = mono_ms();
	pthread_mutex_unlock(&sb->lock);
}

void sandbox_abort(struct host *h, struct sandbox *sb, const char *why)
{
	sandbox_teardown(h, sb);
	sandbox_mem_release(h, sb);
	pthread_mutex_lock(&sb->lock);
	snprintf(sb->row.error, sizeof sb->row.error, "%s", why);
	snprintf(sb->row.ended, sizeof sb->row.ended, "failed");
	pthread_mutex_unlock(&sb->lock);
	sandbox_set_state(h, sb, SBX_DELETED);
	host_unlink(h, sb);
	layers_gc(h);
}

void sandbox_fail(struct host *h, struct sandbox *sb, const char *why)
{
	sandbox_sample(h, sb);
	sandbox_log_keep(h, sb);	/* why it failed is often in there */
	sandbox_stop(h, sb);	/* a persistent one keeps its disk and address */
	sandbox_mem_release(h, sb);
	pthread_mutex_lock(&sb->lock);
	sb->row.cpu_base = sb->row.cpu_seconds;
	sb->row.active_base = sb->row.active_cpu_seconds;
	snprintf(sb->row.error, sizeof sb->row.error, "%s", why);
	pthread_mutex_unlock(&sb->lock);
	/* Housekeeping marks a dead VMM's sandbox failed before it reaps the
	 * pid; here the record only takes the final accounting. */
	if (sandbox_in(sb, SBX_FAILED))
		sandbox_save(h, sb);
	else
		sandbox_set_state(h, sb, SBX_FAILED);
}

/* ---- create ---------------------------------------------------------------------------- */

/* A failed disk_create of a new sandbox's top layer over what (a
 * template or snapshot), said as that: the bare "overlay PATH: ..." names
 * neither the step nor the cause. ENOENT with the sandbox's directory
 * gone: something removed it under the create (as the layers collector
 * once did: layers.c), which the error says rather than the path. */
static int disk_error(struct sandbox *sb, int rc, const char *what)
{
	char msg[200];
	snprintf(msg, sizeof msg, "%s", errmsg());
	struct stat st;
	if (rc == -ENOENT && stat(sb->dir, &st) < 0 && errno == ENOENT)
		return errf(-rc, "making its disk over %s: its directory %s was removed while the sandbox "
			    "was being made", what, sb->dir);
	return errf(-rc, "making its disk over %s: %s", what, msg);
}

static int build_from_template(struct host *h, struct sandbox *sb, struct tmpl *t,
			       const struct net_lease *net)
{
	const struct host_config *cfg = h->cfg;
	char top[PATH_MAX];
	snprintf(top, sizeof top, "%s/disk", sb->dir);
	pthread_mutex_lock(&h->layers);	/* made and recorded before the collector looks */
	int rc = disk_create(top, t->base);
	if (rc < 0) {
		char what[64];
		snprintf(what, sizeof what, "template %s v%d", t->name, t->version);
		rc = disk_error(sb, rc, what);
	}
	if (rc == 0)
		rc = sandbox_set_top(sb, top);
	pthread_mutex_unlock(&h->layers);
	if (rc < 0)
		return rc;
	step(sb, "disk");
	pid_t pid;
	const char *tap = net->slot ? net->tap : NULL, *netns = net->slot ? net->netns : NULL;
	struct vmm_jail *jail = malloc(sizeof *jail);
	if (!jail)
		return errf(ENOMEM, "out of memory");
	char kdir[PATH_MAX], idir[PATH_MAX];
	snprintf(kdir, sizeof kdir, "%s", cfg->kernel);
	snprintf(idir, sizeof idir, "%s", cfg->initrd);
	if (strrchr(kdir, '/'))
		*strrchr(kdir, '/') = 0;
	if (strrchr(idir, '/'))
		*strrchr(idir, '/') = 0;
	rc = vmm_jail_prepare(h, sb, top, t->snapshot ? NULL : kdir, t->snapshot ? NULL : idir, netns,
			      jail);
	step(sb, "jail");
	if (rc == 0 && t->snapshot) {
		double vmm_ms, held_ms = 0;
		struct spawn_spec s = { .dir = sb->dir, .disk = top, .tap = tap, .netns = netns,
					.hostname = sb->row.id, .jail = jail };
		rc = tmpl_spawn(cfg, t, &s, &pid, &vmm_ms, &held_ms);
		step(sb, "spawn");
		if (rc == 0)
			log_debug("sandbox %s: spawned by the zygote, VMM ready in %.1f ms (its loop held %.1f)",
				  sb->row.id, vmm_ms, held_ms);
	} else if (rc == 0) {
		struct vm_spec s = { .dir = sb->dir, .vcpus = t->vcpus, .memory_mib = t->memory_mib,
				     .disk = top, .tap = tap, .netns = netns, .hostname = sb->row.id,
				     .jail = jail, .volume_slots = t->volume_slots };
		rc = vmm_launch(cfg, &s, &pid);
		step(sb, "launch");
	}
	free(jail);
	if (rc < 0)
		return rc;
	return sandbox_attach_vmm(h, sb, pid, proc_start_time(pid));
}

static int build_from_snapshot(struct host *h, struct sandbox *sb, const struct snap_row *snap,
			       const struct net_lease *net)
{
	const struct host_config *cfg = h->cfg;
	char base[PATH_MAX], top[PATH_MAX];
	snprintf(top, sizeof top, "%s/disk", sb->dir);
	/* The snapshot's disk stays while a live sandbox's chain holds it:
	 * the collector waits until this one is recorded. */
	pthread_mutex_lock(&h->layers);
	int rc = disks_json_top(snap->disks, base) < 0
		? errf(EINVAL, "snapshot %s: no disk recorded", snap->id) : 0;
	if (rc == 0 && access(base, R_OK) < 0)
		rc = errf(ENOENT, "snapshot %s: its disk is gone", snap->id);
	if (rc == 0 && (rc = disk_create(top, base)) < 0) {
		char what[64];
		snprintf(what, sizeof what, "snapshot %s", snap->id);
		rc = disk_error(sb, rc, what);
	}
	if (rc == 0)
		rc = sandbox_set_top(sb, top);
	pthread_mutex_unlock(&h->layers);
	if (rc < 0)
		return rc;
	char restore[PATH_MAX], sdir[VM_DIR_MAX];
	snprintf(sdir, sizeof sdir, "%s/snapshots/%s", cfg->data_dir, snap->id);
	snprintf(restore, sizeof restore, "%s/vm", sdir);
	struct vmm_jail *jail = malloc(sizeof *jail);
	if (!jail)
		return errf(ENOMEM, "out of memory");
	const char *netns = net->slot ? net->netns : NULL;
	struct vm_spec s = { .dir = sb->dir, .disk = top, .tap = net->slot ? net->tap : NULL,
			     .netns = netns, .hostname = sb->row.id, .restore = restore, .jail = jail };
	pid_t pid;
	step(sb, "disk");
	rc = vmm_jail_prepare(h, sb, top, sdir, NULL, netns, jail);
	step(sb, "jail");
	if (rc == 0)
		rc = vmm_launch(cfg, &s, &pid);
	step(sb, "launch");
	free(jail);
	if (rc < 0)
		return rc;
	return sandbox_attach_vmm(h, sb, pid, proc_start_time(pid));
}

/* A snapshot of a VM with a network device is marked so (fork.c). */
static bool snapshot_has_net(const struct host_config *cfg, const char *id)
{
	char mark[PATH_MAX];
	snprintf(mark, sizeof mark, "%s/snapshots/%s/net", cfg->data_dir, id);
	return access(mark, F_OK) == 0;
}

/* start_vm: a new sandbox's directory, network and VMM, from its template
 * (t) or its snapshot; again by start_over after a first VMM died. */
static int start_vm(struct host *h, struct sandbox *sb, struct tmpl *t, const struct snap_row *snap,
		    struct net_lease *net)
{
	int rc = layers_mkdir(h, sb->dir, false);
	if (rc == 0)
		rc = net_acquire(h, sb, t ? t->net : snapshot_has_net(h->cfg, snap->id), net);
	step(sb, "net");
	if (rc == 0)
		rc = sandbox_save(h, sb);	/* its slot: a restart after a kill frees it */
	step(sb, "save");
	if (rc == 0)
		rc = t ? build_from_template(h, sb, t, net) : build_from_snapshot(h, sb, snap, net);
	return rc;
}

/* start_over: a sandbox whose first VMM died while it started, made again
 * from its template (t) or snapshot: the dead VMM reaped and its network,
 * jail and files released (sandbox_teardown), its disk (its own top
 * layer, over the template's or snapshot's) and directory removed, then
 * start_vm as the first time. */
static int start_over(struct host *h, struct sandbox *sb, struct tmpl *t, const struct snap_row *snap,
		      struct net_lease *net)
{
	char top[PATH_MAX];
	snprintf(top, sizeof top, "%s/disk", sb->dir);
	sandbox_teardown(h, sb);
	pthread_mutex_lock(&h->layers);
	int rc = unlink(top) < 0 && errno != ENOENT ? errf_sys("unlink %s", top) : 0;
	pthread_mutex_unlock(&h->layers);
	if (rc == 0 && rmdir(sb->dir) < 0 && errno != ENOENT)
		rc = errf_sys("rmdir %s", sb->dir);
	return rc < 0 ? rc : start_vm(h, sb, t, snap, net);
}

int sandbox_prestart(struct host *h, struct sandbox *sb, struct tmpl *t, struct guest **g)
{
	struct net_lease net;
	int rc = start_vm(h, sb, t, NULL, &net);
	if (rc == 0)
		rc = agent_ready(h, sb, g);
	if (rc == 0 && sb->row.net_slot)
		write_resolv_conf(h, sb, *g, t);
	return rc;
}

void sandbox_claim(struct host *h, struct sandbox *sb, struct sbx_row *row, bool pending)
{
	pthread_mutex_lock(&h->lock);
	pthread_mutex_lock(&sb->lock);
	snprintf(sb->row.workspace, sizeof sb->row.workspace, "%s", row->workspace);
	sb->row.ttl_seconds = row->ttl_seconds;
	sb->row.ttl_absolute = row->ttl_absolute;
	sb->row.idle_hibernate = row->idle_hibernate;
	sb->row.retention_seconds = row->retention_seconds;
	sb->row.idle_pause_seconds = row->idle_pause_seconds;
	sb->row.created_ms = row->created_ms;
	sb->row.active_ms = row->active_ms;
	char *swap = sb->row.metadata;
	sb->row.metadata = row->metadata;
	row->metadata = swap;
	swap = sb->row.env;
	sb->row.env = row->env;
	row->env = swap;
	pthread_mutex_unlock(&sb->lock);
	/* Admission counted it as the create's (h->live, h->mem_mib, the
	 * workspace's pending one): the pool's count lets it go. */
	sb->pooled = false;
	h->pooled--;
	sb->counts_memory = true;
	sb->ws_pending = pending;
	ws_linked(h, sb);
	pthread_mutex_unlock(&h->lock);
}

/* Errors while building say what failed; the status is a server error
 * unless the cause is one the client can act on. */
static int build_errno(int rc)
{
	switch (-rc) {
	case EAGAIN: case ENOSPC: case ENOMEM: case ETIMEDOUT: case ENOTSUP: case ENOSYS:
		return rc;
	default:
		return -EIO;
	}
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* host_create's own VMM, from t or snap: *out (sb->op held, linked) with
 * 0 when it is ready, or with the error for the caller to record. *out
 * NULL: nothing made, the admission given back. row is cleared. */
static int create_spawned(struct host *h, const struct create_req *req, struct tmpl *t,
			  struct snap_row *snap, struct sbx_row *row, struct sandbox **out)
{
	struct sandbox *sb = sandbox_alloc(h, row);
	int64_t memory_mib = row->memory_mib;
	sbx_row_clear(row);
	*out = sb;
	if (!sb) {
		host_admit_done(h, 1, memory_mib, true);
		host_ws_unused(h, req->caps ? req->workspace : NULL, 1);
		return errf(ENOMEM, "out of memory");
	}
	sb->counts_memory = true;	/* the admission's reservation is now the sandbox's */
	sb->ws_pending = req->caps != NULL;	/* and the workspace's, once linked */
	/* Held until it is ready or gone: a DELETE of a sandbox still being
	 * made (its id is listed) waits for the create to end. */
	pthread_mutex_lock(&sb->op);
	host_link(h, sb);
	log_debug("sandbox %s: creating from %s %s", sb->row.id, req->snapshot ? "snapshot" : "template",
		  req->snapshot ? req->snapshot : req->template);
	sb->steps.at_ns = req->arrival_ns;
	sb->steps.text[0] = 0;
	step(sb, "admit");

	struct net_lease net;
	int rc = sandbox_save(h, sb);
	step(sb, "record");
	if (rc == 0)
		rc = start_vm(h, sb, t, snap, &net);
	if (rc == 0)
		rc = sandbox_wait_ready(h, sb, true, t);
	if (rc == -ECHILD) {
		/* Its guest died at start: before its VMM was ready (the spawn
		 * says so: tmpl_spawn) or before its agent answered. Nothing of
		 * the user's is in it yet: once more, from the start (a fresh
		 * disk: the dead guest may have written to this one). A second
		 * death is the create's error. */
		log_warn("sandbox %s: %s; starting it again on a fresh disk", sb->row.id, errmsg());
		metrics_start_retry(h->metrics);
		rc = start_over(h, sb, t, t ? NULL : snap, &net);
		if (rc == 0)
			rc = sandbox_wait_ready(h, sb, true, t);
	}
	return rc;
}

/* disk_wanted: the create's disk_mib (0: none asked) against the disk it
 * comes with (the template's root image, or the snapshot's disk): *grow
 * the bytes to grow it to, 0 when it is that size already or none was
 * asked; -EINVAL when smaller. *mib: the size the sandbox's disk has
 * then, in MiB, for its record (0, unknown, when none was asked and the
 * size could not be read: that alone refuses no create). */
static int disk_wanted(const struct create_req *req, struct tmpl *t, const struct snap_row *snap, uint64_t *grow,
		       int64_t *mib)
{
	char path[PATH_MAX];
	uint64_t have = 0, want = (uint64_t)req->disk_mib << 20;
	*grow = 0;
	*mib = 0;
	int rc = 0;
	if (t)
		snprintf(path, sizeof path, "%s", t->base);
	else if (disks_json_top(snap->disks, path) < 0)
		rc = errf(EINVAL, "snapshot %s: no disk recorded", snap->id);
	rc = rc ?: disk_size(path, &have);
	if (req->disk_mib <= 0) {
		*mib = rc == 0 ? (int64_t)((have + (1 << 20) - 1) >> 20) : 0;
		return 0;
	}
	if (rc < 0)
		return rc;
	if (want < have)
		return errf(EINVAL, "disk_mib %lld is smaller than %s %s's disk of %llu MiB (a disk is never shrunk)",
			    (long long)req->disk_mib, t ? "template" : "snapshot", t ? t->name : snap->id,
			    (unsigned long long)((have + (1 << 20) - 1) >> 20));
	*grow = want > have ? want : 0;
	*mib = req->disk_mib;
	return 0;
}

int host_create(struct host *h, const struct create_req *req, struct sandbox **out)
{
	const struct host_config *cfg = h->cfg;
	struct tmpl *t = NULL;
	struct snap_row snap = { 0 };
	struct sbx_row row = { 0 };
	int rc;
	if (req->snapshot) {
		if ((rc = store_snapshot_load(h->store, req->snapshot, req->workspace, &snap)) < 0)
			return rc;
		snprintf(row.template, sizeof row.template, "%s", snap.template);
		snprintf(row.snapshot, sizeof row.snapshot, "%s", snap.id);
		row.vcpus = snap.vcpus;
		row.memory_mib = snap.memory_mib;
	} else {
		if ((rc = templates_get(h->tpl, req->template, &t)) < 0)
			return rc;
		snprintf(row.template, sizeof row.template, "%s", t->name);
		row.vcpus = t->vcpus;
		row.memory_mib = t->memory_mib;
	}
	/* Refused before anything is made: no slots, or a volume held, or a
	 * disk smaller than the one it comes with. */
	if ((rc = volumes_check(h, req, t)) < 0)
		goto out;
	uint64_t grow = 0;
	int64_t disk_mib = 0;
	if ((rc = disk_wanted(req, t, &snap, &grow, &disk_mib)) < 0)
		goto out;
	if ((rc = host_admit_ws(h, req->workspace, req->caps, req->report, 1, row.vcpus,
				row.memory_mib)) < 0)
		goto out;
	if ((rc = make_id(row.id, "sbx_")) < 0) {
		host_admit_done(h, 1, row.memory_mib, true);
		host_ws_unused(h, req->caps ? req->workspace : NULL, 1);
		goto out;
	}
	snprintf(row.workspace, sizeof row.workspace, "%s", req->workspace);
	row.state = SBX_CREATING;
	row.ttl_seconds = req->ttl_seconds >= 0 ? req->ttl_seconds : cfg->default_ttl;
	if (req->ttl_seconds < 0 && req->ttl_cap > 0 && (!row.ttl_seconds || row.ttl_seconds > req->ttl_cap))
		row.ttl_seconds = req->ttl_cap;	/* the default (0: none) within the plan's cap */
	row.ttl_absolute = req->ttl_absolute;
	row.idle_hibernate = req->idle_hibernate;
	row.retention_seconds = req->retention_seconds;
	row.idle_pause_seconds = req->idle_pause_seconds;
	row.created_ms = row.active_ms = wall_ms();
	row.disk_mib = disk_mib;
	row.metadata = dup_or_null(req->metadata);
	/* From a template, its image's Env under the create's (templates.md). */
	row.env = req->snapshot ? dup_or_null(req->env ? req->env : snap.env) : tmpl_env_merge(t, req->env);
	row.net_policy = dup_or_null(req->net_policy);
	/* A VM the pool spawned ahead (pool.h), or this create's own. */
	struct sandbox *sb = t ? pool_take(h->pool, t, req->net_policy) : NULL;
	if (sb) {
		pthread_mutex_lock(&sb->op);
		sandbox_claim(h, sb, &row, req->caps != NULL);
		sbx_row_clear(&row);
		log_debug("sandbox %s: taken from the pool", sb->row.id);
	} else {
		rc = create_spawned(h, req, t, &snap, &row, &sb);
		if (!sb)
			goto out;	/* nothing made; the admission given back */
	}
	if (rc == 0 && grow) {
		rc = sandbox_grow_disk(h, sb, grow);
		step(sb, "grow");
	}
	int vrc = 0;
	if (rc == 0 && req->nvolumes > 0) {
		rc = vrc = volumes_attach(h, sb, req);
		step(sb, "volumes");
	}
	double ms = (double)(mono_ns() - req->arrival_ns) / 1e6;
	if (rc == 0) {
		pthread_mutex_lock(&sb->lock);
		sb->row.disk_mib = disk_mib;	/* a pool's VM came with none */
		sb->row.ready_ms = ms;
		sb->row.active_ms = wall_ms();
		pthread_mutex_unlock(&sb->lock);
		sandbox_set_state(h, sb, SBX_RUNNING);
		metrics_create(h->metrics, ms / 1000, true);
		log_debug("sandbox %s: ready in %.1f ms (%s)", sb->row.id, ms, sb->steps.text);
		sb->steps.at_ns = 0;	/* measured: later starts (wakes) are not */
		pthread_mutex_unlock(&sb->op);
		*out = sb;
	} else {
		char why[300], last[120];
		int len = snprintf(why, sizeof why, "create failed: %s", errmsg());
		/* The VMM's own last words, when it wrote any (it may have died). */
		vmm_last_line(sb->dir, last, sizeof last);
		if (last[0] && !strstr(why, last) && len < (int)sizeof why)
			snprintf(why + len, sizeof why - len, "; the VMM said: %s", last);
		/* A mount the guest refused at the request's path stays the
		 * caller's to mend (volumes_attach: -EINVAL). */
		rc = vrc == -EINVAL ? vrc : build_errno(rc);
		log_warn("sandbox %s: %s", sb->row.id, why);
		sandbox_abort(h, sb, why);
		metrics_create(h->metrics, ms / 1000, false);
		pthread_mutex_unlock(&sb->op);
		sandbox_put(h, sb);
		errf(-rc, "%s", why);
	}
	host_admit_done(h, 0, 0, true);
out:
	tmpl_put(h->tpl, t);
	snap_row_clear(&snap);
	return rc;
}

/* ---- delete, hibernate, wake ------------------------------------------------------------ */

int host_delete(struct host *h, struct sandbox *sb)
{
	return sandbox_delete_why(h, sb, "deleted");
}

int sandbox_delete_why(struct host *h, struct sandbox *sb, const char *why)
{
	pthread_mutex_lock(&sb->op);
	if (sandbox_in(sb, SBX_DELETED)) {
		pthread_mutex_unlock(&sb->op);
		return errf(ENOENT, "sandbox %s not found", sb->row.id);
	}
	/* One that had failed ended by failing, whatever removed it. */
	pthread_mutex_lock(&sb->lock);
	snprintf(sb->row.ended, sizeof sb->row.ended, "%s",
		 sb->row.state == SBX_FAILED ? "failed" : why);
	pthread_mutex_unlock(&sb->lock);
	sandbox_sample(h, sb);
	volumes_detach(h, sb);	/* flushed and let go while its VMM lives */
	sandbox_set_state(h, sb, SBX_DELETING);	/* a restart finishes the job */
	sandbox_teardown(h, sb);
	sandbox_mem_release(h, sb);
	pthread_mutex_lock(&sb->lock);
	sb->row.cpu_base = sb->row.cpu_seconds;
	sb->row.active_base = sb->row.active_cpu_seconds;
	pthread_mutex_unlock(&sb->lock);
	sandbox_set_state(h, sb, SBX_DELETED);
	sandbox_log_drop(h, sb);
	host_unlink(h, sb);
	pthread_mutex_unlock(&sb->op);
	layers_gc(h);
	log_debug("sandbox %s: deleted", sb->row.id);
	return 0;
}

int sandbox_state_error(struct sandbox *sb, const char *want)
{
	char why[sizeof sb->row.error];
	pthread_mutex_lock(&sb->lock);
	enum sbx_state state = sb->row.state;
	snprintf(why, sizeof why, "%s", state == SBX_FAILED ? sb->row.error : "");
	pthread_mutex_unlock(&sb->lock);
	if (state == SBX_DELETED)
		return errf(ENOENT, "sandbox %s not found", sb->row.id);
	/* A failed one says why: the caller's next question. */
	if (why[0])
		return errf(EBUSY, "sandbox %s is failed (%s), not %s", sb->row.id, why, want);
	return errf(EBUSY, "sandbox %s is %s, not %s", sb->row.id, sbx_state_name(state), want);
}

/* Wait up to ms for the VMM to exit (it was asked to). */
static int wait_exit(struct sandbox *sb, int ms)
{
	pthread_mutex_lock(&sb->lock);
	bool none = sb->pidfd < 0;
	pid_t pid = sb->row.vmm_pid;
	pthread_mutex_unlock(&sb->lock);
	if (none)
		return 0;
	if (!vmm_exits_within(sb, ms))
		return errf(ETIMEDOUT, "the VMM did not exit within %d ms", ms);
	proc_reap(pid);
	return 0;
}

/* How long a hibernate waits for the sandbox's operations to end. A
 * client sees its call end before the host does: the relay or tunnel that
 * carried it ends after the client's connection does (a close travels
 * through the API, the host and the guest), so "hibernate right after my
 * download" would otherwise meet an operation still counted. */
#define HIBERNATE_DRAIN_MS 5000

int host_hibernate(struct host *h, struct sandbox *sb, bool now)
{
	pthread_mutex_lock(&sb->op);	/* no operation starts meanwhile (sandbox_enter) */
	int rc = 0;
	if (!now)	/* now: their guest connections break */
		sandbox_drain(sb, 1u << SBX_RUNNING | 1u << SBX_PAUSED, HIBERNATE_DRAIN_MS);
	pthread_mutex_lock(&sb->lock);
	bool running = (sb->row.state == SBX_RUNNING || sb->row.state == SBX_PAUSED) && !sb->vmm_dead;
	int active = now ? 0 : sb->active;
	if (running && active == 0)	/* under the lock that saw it up: check_vmm */
		sb->expect_exit = true;	/* must not take its exit for a crash */
	pthread_mutex_unlock(&sb->lock);
	if (!running) {
		rc = sandbox_state_error(sb, "running or paused");
		goto out;
	}
	if (active > 0) {
		rc = errf(EBUSY, "sandbox %s has %d operations running; hibernate it when they end",
			  sb->row.id, active);
		goto out;
	}
	char dir[PATH_MAX], ctl[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/hibernate", sb->dir);
	sandbox_ctl(sb, ctl, sizeof ctl);
	rmtree(dir);
	sandbox_sample(h, sb);
	json_t *req = json_pack("{s:s,s:s}", "cmd", "hibernate", "dir", dir), *reply = NULL;
	rc = req ? vmm_ctl(ctl, req, &reply, 120000) : errf(ENOMEM, "out of memory");
	json_decref(req);
	json_decref(reply);
	if (rc == 0)
		rc = wait_exit(sb, 30000);
	if (rc < 0) {
		pthread_mutex_lock(&sb->lock);
		sb->expect_exit = false;	/* still running (or housekeeping will notice) */
		pthread_mutex_unlock(&sb->lock);
		rmtree(dir);
		goto out;
	}
	char pidf[PATH_MAX];
	vm_path(pidf, sizeof pidf, sb->dir, "vmm.pid");
	unlink(pidf);
	pthread_mutex_lock(&sb->lock);
	sb->row.cpu_base = sb->row.cpu_seconds;
	sb->row.active_base = sb->row.active_cpu_seconds;
	sb->row.vmm_pid = 0;
	sb->row.vmm_start = 0;
	sb->row.rss_bytes = 0;
	sb->row.pss_bytes = 0;
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	sb->pidfd = -1;
	sb->row.active_ms = wall_ms();
	pthread_mutex_unlock(&sb->lock);
	/* What it keeps on the host's disk while it sleeps (plans' storage). */
	int64_t stored = dir_bytes(sb->dir);
	pthread_mutex_lock(&sb->lock);
	sb->row.stored_bytes = stored;
	pthread_mutex_unlock(&sb->lock);
	sandbox_set_state(h, sb, SBX_HIBERNATED);
	sandbox_mem_release(h, sb);
	portwake_arm(h, sb);
out:
	pthread_mutex_unlock(&sb->op);
	return rc;
}

static int wake_admitted(struct host *h, struct sandbox *sb);
static int reboot_admitted(struct host *h, struct sandbox *sb);

/* Wake, with sb->op held. A wake starts a sandbox as a create does: it
 * counts against the workspace's running cap (ws_caps.c). A failed
 * persistent sandbox is started again by a cold boot of its disk. */
int wake_locked(struct host *h, struct sandbox *sb)
{
	if (sandbox_in(sb, SBX_RUNNING))
		return 0;
	bool reboot = sandbox_in(sb, SBX_FAILED) && sandbox_restartable(sb);
	if (!reboot && !sandbox_in(sb, SBX_HIBERNATED))
		return sandbox_state_error(sb, "hibernated");
	int reserved = ws_wake_reserve(h, sb->row.workspace);
	if (reserved < 0)
		return reserved;
	int rc = reboot ? reboot_admitted(h, sb) : wake_admitted(h, sb);
	if (reserved)
		ws_wake_release(h, sb->row.workspace);
	if (rc == 0)
		portwake_disarm(h, sb);
	return rc;
}

/* The disk as a wake found it: a guest that died in a wake is woken once
 * more only if it wrote nothing (its disk holds what the hibernation
 * left; a second restore of the same memory over writes made after it
 * could corrupt it). The change time, which a write moves and no call
 * of the VMM's can set back, and the size. */
struct disk_mark {
	bool ok;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec ctime;
};

static void disk_mark(const char *top, struct disk_mark *m)
{
	struct stat st;
	m->ok = lstat(top, &st) == 0 && S_ISREG(st.st_mode);
	if (m->ok)
		*m = (struct disk_mark){ true, st.st_dev, st.st_ino, st.st_size, st.st_ctim };
}

static bool disk_unchanged(const char *top, const struct disk_mark *before)
{
	struct disk_mark now;
	disk_mark(top, &now);
	return before->ok && now.ok && now.dev == before->dev && now.ino == before->ino &&
	       now.size == before->size && now.ctime.tv_sec == before->ctime.tv_sec &&
	       now.ctime.tv_nsec == before->ctime.tv_nsec;
}

/* wake_vmm: a VMM restoring the sandbox from restore, attached, and its
 * guest's agent answering. mark (or NULL): the disk as the VMM gets it,
 * its jail made (which hands the disk to the VMM's uid: a change). */
static int wake_vmm(struct host *h, struct sandbox *sb, const struct vm_spec *spec, const char *top,
		    struct disk_mark *mark)
{
	struct vm_spec s = *spec;
	struct vmm_jail *jail = malloc(sizeof *jail);
	int rc = jail ? 0 : errf(ENOMEM, "out of memory");
	if (rc == 0)
		rc = vmm_jail_prepare(h, sb, top, NULL, NULL, s.netns, jail);
	if (rc == 0 && mark)
		disk_mark(top, mark);
	s.jail = jail;
	pid_t pid = 0;
	if (rc == 0)
		rc = vmm_launch(h->cfg, &s, &pid);
	free(jail);
	if (rc == 0)
		rc = sandbox_attach_vmm(h, sb, pid, proc_start_time(pid));
	if (rc == 0)
		rc = sandbox_wait_ready(h, sb, true, NULL);
	return rc;
}

/* wake_reap: the VMM of a wake that failed, ended and forgotten. */
static void wake_reap(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	pid_t p = sb->row.vmm_pid;
	int64_t st = sb->row.vmm_start;
	sb->expect_exit = true;
	sb->row.vmm_pid = 0;
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	sb->pidfd = -1;
	pthread_mutex_unlock(&sb->lock);
	if (p > 0)
		proc_kill_wait(p, st, 5000);
}

/* start_failed: a wake or restart (verb) that failed with rc: its VMM
 * reaped, its memory given back, its row saved as it stays (hibernated
 * or failed). A guest that died says how in its VMM's last line, which
 * goes into the error. Returns rc's error with that message. */
static int start_failed(struct host *h, struct sandbox *sb, int rc, const char *verb)
{
	char why[900], last[512] = "";	/* whole: a triple fault's line is 170 bytes */
	if (rc == -ECHILD)
		vmm_last_line(sb->dir, last, sizeof last);
	snprintf(why, sizeof why, "%s failed: %s%s%s%s", verb, errmsg(), last[0] ? " (the VMM said: " : "",
		 last, last[0] ? ")" : "");
	wake_reap(sb);
	sandbox_mem_release(h, sb);
	sandbox_save(h, sb);
	return errf(-build_errno(rc), "%s", why);
}

static int wake_admitted(struct host *h, struct sandbox *sb)
{
	int rc = host_admit(h, 0, sb->row.memory_mib, false);
	if (rc < 0)
		return rc;
	sb->counts_memory = true;
	char top[PATH_MAX], restore[PATH_MAX];
	rc = sandbox_top(sb, top);
	snprintf(restore, sizeof restore, "%s/hibernate", sb->dir);
	struct vm_spec s = { .dir = sb->dir, .disk = top, .hostname = sb->row.id, .restore = restore };
	struct net_lease net;
	/* It had a network when it hibernated: it keeps its slot meanwhile
	 * (or gets a new one with its policy, if a restart lost it). */
	if (rc == 0)
		rc = net_acquire(h, sb, sb->row.net_slot != 0, &net);
	if (rc == 0 && net.slot) {
		s.tap = net.tap;
		s.netns = net.netns;
		sandbox_save(h, sb);
	}
	/* Its volumes, by descriptor: the snapshot has them attached. */
	struct vol_fds vols = { .n = 0 };
	if (rc == 0 && (rc = volumes_open(h, sb, &vols)) == 0 && vols.n > 0) {
		s.nvol = vols.n;
		s.vol_fd = vols.fd;
		s.vol_slot = vols.slot;
		s.vol_ro = vols.ro;
	}
	struct disk_mark before = { .ok = false };
	if (rc == 0)
		rc = wake_vmm(h, sb, &s, top, &before);
	if (rc == -ECHILD && disk_unchanged(top, &before)) {
		/* Its guest died before it was ready, and wrote nothing: the
		 * hibernation is as it was. Once more (issue 21). */
		char last[512];	/* whole: a triple fault's line is 170 bytes */
		vmm_last_line(sb->dir, last, sizeof last);
		log_warn("sandbox %s: %s (the VMM said: %s); its disk is as the hibernation left it: "
			 "waking it once more", sb->row.id, errmsg(), last[0] ? last : "nothing");
		metrics_start_retry(h->metrics);
		wake_reap(sb);
		rc = wake_vmm(h, sb, &s, top, NULL);
	}
	volumes_close(&vols);	/* the VMM has its own */
	if (rc < 0) {
		/* Stay hibernated: the snapshot is still there for another try. */
		return start_failed(h, sb, rc, "wake");
	}
	pthread_mutex_lock(&sb->lock);
	sb->row.active_ms = wall_ms();
	sb->row.stored_bytes = 0;	/* running: its compute is what it uses */
	pthread_mutex_unlock(&sb->lock);
	sandbox_set_state(h, sb, SBX_RUNNING);
	rmtree(restore);	/* the VMM maps its memory file; the mapping keeps it */
	log_debug("sandbox %s: woken", sb->row.id);
	return 0;
}

/* reboot_admitted: a failed persistent sandbox started again from what
 * its disk holds, as a machine whose power was cut: a cold boot of its
 * kernel and its own disk (the guest's file system replays its journal,
 * a database its log), on the network slot it kept (sandbox_stop), so
 * its address and policy are the same. Its memory is lost; whatever was
 * written to its disk before the VMM died is there (the VMM's writes
 * are in the host's page cache once made). Volumes were let go when it
 * failed: it comes back without them. On failure it stays failed. */
static int reboot_admitted(struct host *h, struct sandbox *sb)
{
	char top[PATH_MAX], kdir[PATH_MAX], idir[PATH_MAX];
	int rc = sandbox_top(sb, top);
	if (rc == 0 && access(top, R_OK | W_OK) < 0)
		rc = errf(ENOENT, "sandbox %s: its disk is gone: it cannot be started again", sb->row.id);
	rc = rc ?: host_admit(h, 0, sb->row.memory_mib, false);
	if (rc < 0)
		return rc;
	sb->counts_memory = true;
	rc = layers_mkdir(h, sb->dir, true);
	struct net_lease net;
	if (rc == 0)
		rc = net_acquire(h, sb, sb->row.net_slot != 0, &net);
	snprintf(kdir, sizeof kdir, "%s", h->cfg->kernel);
	snprintf(idir, sizeof idir, "%s", h->cfg->initrd);
	if (strrchr(kdir, '/'))
		*strrchr(kdir, '/') = 0;
	if (strrchr(idir, '/'))
		*strrchr(idir, '/') = 0;
	struct vm_spec s = { .dir = sb->dir, .vcpus = sb->row.vcpus, .memory_mib = sb->row.memory_mib,
			     .disk = top, .tap = rc == 0 && net.slot ? net.tap : NULL,
			     .netns = rc == 0 && net.slot ? net.netns : NULL, .hostname = sb->row.id };
	struct vmm_jail *jail = rc == 0 ? malloc(sizeof *jail) : NULL;
	if (rc == 0 && !jail)
		rc = errf(ENOMEM, "out of memory");
	rc = rc ?: vmm_jail_prepare(h, sb, top, kdir, idir, s.netns, jail);
	s.jail = jail;
	pid_t pid = 0;
	rc = rc ?: vmm_launch(h->cfg, &s, &pid);
	free(jail);
	rc = rc ?: sandbox_attach_vmm(h, sb, pid, proc_start_time(pid));
	rc = rc ?: sandbox_wait_ready(h, sb, true, NULL);
	if (rc < 0) {
		return start_failed(h, sb, rc, "restart");
	}
	pthread_mutex_lock(&sb->lock);
	sb->row.active_ms = wall_ms();
	sb->row.error[0] = 0;
	pthread_mutex_unlock(&sb->lock);
	sandbox_set_state(h, sb, SBX_RUNNING);
	log_info("sandbox %s: started again (a cold boot of its disk)", sb->row.id);
	return 0;
}

int host_wake(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&sb->op);
	int rc = wake_locked(h, sb);
	pthread_mutex_unlock(&sb->op);
	return rc;
}

int host_set_lifecycle(struct host *h, struct sandbox *sb, const struct lifecycle_change *lc)
{
	pthread_mutex_lock(&sb->lock);
	bool gone = sb->row.state == SBX_DELETED;
	if (!gone && lc->set_ttl)
		sb->row.ttl_seconds = lc->ttl_seconds;
	if (!gone && lc->set_idle) {
		sb->row.idle_hibernate = lc->idle_hibernate;
		sb->row.retention_seconds = lc->retention_seconds;
	}
	if (!gone && lc->set_pause)
		sb->row.idle_pause_seconds = lc->idle_pause_seconds;
	if (!gone)
		sb->row.active_ms = wall_ms();
	pthread_mutex_unlock(&sb->lock);
	if (gone)
		return errf(ENOENT, "sandbox %s not found", sb->row.id);
	return sandbox_save(h, sb);
}

void sandbox_touch(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	sb->row.active_ms = wall_ms();
	pthread_mutex_unlock(&sb->lock);
}

/* ---- guest access ----------------------------------------------------------------------- */

int sandbox_enter(struct host *h, struct sandbox *sb, struct guest **out)
{
	pthread_mutex_lock(&sb->op);
	int rc = ready_locked(h, sb);
	if (rc == 0) {
		pthread_mutex_lock(&sb->lock);
		if (sb->row.state == SBX_RUNNING && !sb->vmm_dead) {
			sb->active++;
			sb->row.active_ms = wall_ms();
		} else {
			rc = 1;
		}
		pthread_mutex_unlock(&sb->lock);
		if (rc == 1)
			rc = sandbox_state_error(sb, "running");
	}
	pthread_mutex_unlock(&sb->op);
	if (rc < 0)
		return rc;
	char vsock[PATH_MAX];
	vm_path(vsock, sizeof vsock, sb->dir, "vsock.sock");
	rc = guest_open(vsock, 10000, sb->row.vmm_pid, out);
	/* A healthy agent answers a request in milliseconds and streams data
	 * without pauses: a minute of silence means the guest is stuck, and a
	 * request must not hold its thread forever. (Command output has no
	 * such limit: commands may be quiet for long; see guest_exec_next.) */
	if (rc == 0) {
		guest_set_timeout(*out, 60000);
		guest_set_default_cwd(*out, sb->workdir);
	}
	if (rc < 0) {
		char msg[300];	/* errf must not read the buffer it writes */
		snprintf(msg, sizeof msg, "%s", errmsg());
		rc = errf(ECONNREFUSED, "sandbox %s: %s", sb->row.id, msg);
		sandbox_leave(h, sb, NULL);
	}
	return rc;
}

int sandbox_hold(struct host *h, struct sandbox *sb)
{
	(void)h;
	pthread_mutex_lock(&sb->lock);
	bool running = sb->row.state == SBX_RUNNING && !sb->vmm_dead;
	if (running) {
		sb->active++;
		sb->row.active_ms = wall_ms();
	}
	pthread_mutex_unlock(&sb->lock);
	return running ? 0 : sandbox_state_error(sb, "running");
}

void sandbox_leave(struct host *h, struct sandbox *sb, struct guest *g)
{
	(void)h;
	guest_close(g);
	pthread_mutex_lock(&sb->lock);
	sb->active--;
	sb->row.active_ms = wall_ms();
	pthread_mutex_unlock(&sb->lock);
}

void sandbox_drain(struct sandbox *sb, unsigned states, int max_ms)
{
	for (int waited = 0; waited < max_ms; waited += 20) {
		pthread_mutex_lock(&sb->lock);
		bool wait = (states >> sb->row.state & 1) && !sb->vmm_dead && sb->active > 0;
		pthread_mutex_unlock(&sb->lock);
		if (!wait)
			return;
		usleep(20000);
	}
}

/* ---- network ---------------------------------------------------------------------------- */

int host_set_network(struct host *h, struct sandbox *sb, const char *policy)
{
	pthread_mutex_lock(&sb->op);
	int rc = sandbox_in(sb, SBX_DELETED) || sandbox_in(sb, SBX_FAILED)
		 ? sandbox_state_error(sb, "running or hibernated") : 0;
	if (rc == 0)
		rc = net_change_policy(h, sb, policy);
	sandbox_touch(sb);
	pthread_mutex_unlock(&sb->op);
	return rc;
}
