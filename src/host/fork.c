/*
 * fork: forks and snapshots of a running sandbox (docs/vmm.md, "fork" and
 * "snapshot" control commands; docs/disk.md, "Forking a disk").
 *
 * A fork is one control request: kiln-vmm pauses the VM, seals its disk's
 * top, makes a new overlay on it for every child (at the paths we give,
 * in the children's directories) and one for the parent (which it names
 * in its reply), forks the process, and resumes. No disk data is copied.
 *
 * A snapshot pauses the VM, flattens its disk chain into one overlay over
 * the raw base (a copy of what the template and the sandbox wrote), saves
 * memory and device state, and resumes it; creates with from_snapshot
 * restore it with an overlay of their own on that copy.
 */
#include "host/cgroup.h"
#include "host/disk.h"
#include "host/fork_uid.h"
#include "host/jail.h"
#include "host/host_int.h"
#include "host/net.h"
#include "host/proc.h"
#include "common/failpoint.h"
#include "host/vmm.h"
#include "vmm/overlay.h"
#include "common/metrics.h"
#include "common/err.h"
#include "host/host_config.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A child's record, linked. With pending, it was admitted against its
 * workspace's caps: counted there until linked, or given back here if it
 * fails before. */
static int child_new(struct host *h, struct sandbox *parent, bool pending, struct sandbox **out)
{
	struct sbx_row row = { 0 };
	int rc = make_id(row.id, "sbx_");
	if (rc < 0) {
		host_ws_unused(h, pending ? parent->row.workspace : NULL, 1);
		return rc;
	}
	pthread_mutex_lock(&parent->lock);
	snprintf(row.workspace, sizeof row.workspace, "%s", parent->row.workspace);
	snprintf(row.template, sizeof row.template, "%s", parent->row.template);
	snprintf(row.parent, sizeof row.parent, "%s", parent->row.id);
	row.vcpus = parent->row.vcpus;
	row.memory_mib = parent->row.memory_mib;
	row.disk_mib = parent->row.disk_mib;
	row.ttl_seconds = parent->row.ttl_seconds;
	row.ttl_absolute = parent->row.ttl_absolute;
	row.idle_hibernate = parent->row.idle_hibernate;
	row.retention_seconds = parent->row.retention_seconds;
	row.idle_pause_seconds = parent->row.idle_pause_seconds;
	row.metadata = parent->row.metadata ? strdup(parent->row.metadata) : NULL;
	row.env = parent->row.env ? strdup(parent->row.env) : NULL;
	/* A fork keeps its parent's egress policy (in its own namespace). */
	row.net_policy = parent->row.net_policy ? strdup(parent->row.net_policy) : NULL;
	pthread_mutex_unlock(&parent->lock);
	row.state = SBX_CREATING;
	row.created_ms = row.active_ms = wall_ms();
	struct sandbox *sb = sandbox_alloc(h, &row);
	sbx_row_clear(&row);
	if (!sb) {
		host_ws_unused(h, pending ? parent->row.workspace : NULL, 1);
		return errf(ENOMEM, "out of memory");
	}
	sb->counts_memory = true;
	sb->ws_pending = pending;
	pthread_mutex_lock(&sb->op);	/* until it is ready or gone, as in a create */
	host_link(h, sb);
	rc = sandbox_save(h, sb);
	if (rc == 0)
		rc = layers_mkdir(h, sb->dir, false);
	/* The parent's VMM makes the child's files, as the parent's uid. */
	if (rc == 0)
		rc = vmm_jail_inherit(h, parent, sb);
	if (rc < 0) {
		char why[300];
		snprintf(why, sizeof why, "fork failed: %s", errmsg());
		sandbox_abort(h, sb, why);
		pthread_mutex_unlock(&sb->op);
		sandbox_put(h, sb);
		return errf(-rc, "%s", why);
	}
	*out = sb;
	return 0;
}

/* kiln-vmm forks the disks before the processes, so a fork that failed
 * may have left the parent on a new overlay, STEM.<pid>-<n>
 * (docs/disk.md, vmm/overlay.h overlay_fork_name), with the old top
 * sealed under it. Find the one whose base is the top, so the record
 * follows the disk the VM really writes. */
static void follow_new_top(struct host *h, struct sandbox *parent)
{
	char top[PATH_MAX], prefix[PATH_MAX + 32], found[PATH_MAX] = "";
	if (sandbox_top(parent, top) < 0)
		return;
	const char *name = strrchr(top, '/') + 1;
	size_t stem = overlay_fork_stem(top) - (size_t)(name - top);
	int plen = snprintf(prefix, sizeof prefix, "%.*s.%d-", (int)stem, name, parent->row.vmm_pid);
	char (*chain)[PATH_MAX] = calloc(CHAIN_MAX, PATH_MAX);
	DIR *d = chain ? opendir(parent->dir) : NULL;
	struct dirent *e;
	while (d && !found[0] && (e = readdir(d))) {
		char cand[PATH_MAX];
		int clen = snprintf(cand, sizeof cand, "%s/%s", parent->dir, e->d_name);
		/* STEM.<pid>-<n> exactly: its own stem is the top's. */
		if (strncmp(e->d_name, prefix, plen) != 0 ||
		    overlay_fork_stem(cand) != (size_t)clen - strlen(e->d_name) + stem)
			continue;
		int n = 0;
		if (strcmp(cand, top) != 0 && disk_chain(h->cfg->data_dir, cand, chain, CHAIN_MAX, &n) == 0 &&
		    n > 1 && strcmp(chain[1], top) == 0)
			snprintf(found, sizeof found, "%s", cand);
	}
	if (d)
		closedir(d);
	free(chain);
	if (!found[0])
		return;	/* the parent is still on its top */
	log_warn("sandbox %s: the failed fork left it on %s", parent->row.id, found);
	sandbox_set_top(parent, found);
	sandbox_save(h, parent);
}

/* One fork of parent into n children (one pause): kids[] gets the ones
 * that came up, *made grows by their number. */
static int fork_once(struct host *h, struct sandbox *parent, int n, const struct ws_caps *caps,
		     struct ws_caps_report *rep, struct sandbox **kids, int *made)
{
	const struct host_config *cfg = h->cfg;
	int64_t t0 = mono_ms();
	int ok = 0, have = 0, tried = 0;
	/* The workspace never changes: read without the lock is safe. */
	const char *ws = parent->row.workspace;
	int rc = host_admit_ws(h, ws, caps, rep, n, parent->row.vcpus, parent->row.memory_mib);
	if (rc < 0)
		return rc;
	for (int i = 0; rc == 0 && i < n; i++, tried++)
		if ((rc = child_new(h, parent, caps != NULL, &kids[i])) == 0)
			have++;
	host_admit_done(h, n - have, (int64_t)(n - have) * parent->row.memory_mib, false);
	host_ws_unused(h, caps ? ws : NULL, n - tried);
	json_t *children = json_array(), *reply = NULL;
	/* Each child's TAP, opened here in its own namespace and passed: a
	 * fork stays in its parent's jail and cannot open one by name. */
	int taps[HOST_FORK_MAX + 1], ntaps = 0;
	bool want_net = parent->row.net_slot != 0;
	/* A jailed parent's children each take a uid of their own
	 * (fork_uid.h), asking on one socket passed first. */
	struct fork_uids uids = { .running = false };
	pthread_mutex_lock(&h->lock);
	uid_t family = parent->jail_uid;
	pthread_mutex_unlock(&h->lock);
	bool own_uids = rc == 0 && cfg->jail && family;
	if (own_uids) {
		int end = -1;
		rc = fork_uids_start(&uids, family, kids, n, &end);
		if (rc == 0)
			taps[ntaps++] = end;
	}
	/* And each child's own vmm.log as its stderr (else it writes to its
	 * parent's), where the descriptors a request can carry allow. */
	bool logs = (want_net ? 2 : 1) * n + ntaps <= VMM_CTL_FDS_MAX;
	for (int i = 0; rc == 0 && i < n; i++) {
		char top[PATH_MAX], vsock[PATH_MAX], ctl[PATH_MAX], console[PATH_MAX];
		snprintf(top, sizeof top, "%s/disk", kids[i]->dir);
		vm_path(console, sizeof console, kids[i]->dir, "console.log");
		vm_path(vsock, sizeof vsock, kids[i]->dir, "vsock.sock");
		vm_path(ctl, sizeof ctl, kids[i]->dir, "ctl.sock");
		struct net_lease net;
		rc = net_acquire(h, kids[i], want_net, &net);
		if (rc == 0)
			sandbox_save(h, kids[i]);	/* its slot, for a restart's cleanup */
		if (rc == 0 && net.slot) {
			int fd = net_tap_open(net.netns, net.tap);
			if (fd < 0)
				rc = fd;
			else
				taps[ntaps++] = fd;
		}
		json_t *c = rc == 0 ? json_pack("{s:[s],s:s,s:s,s:s,s:s}", "disks", top, "vsock", vsock,
						 "ctl", ctl, "hostname", kids[i]->row.id, "console", console) : NULL;
		if (c && net.slot)
			json_object_set_new(c, "tap_fd", json_integer(ntaps - 1));
		if (c && failpoint_hit(FP_FORK_DIES))
			json_object_set_new(c, "test_triple_fault", json_true());
		if (c && logs) {
			char logp[PATH_MAX];
			vm_path(logp, sizeof logp, kids[i]->dir, "vmm.log");
			int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd >= 0) {
				taps[ntaps++] = fd;
				json_object_set_new(c, "stderr_fd", json_integer(ntaps - 1));
			}
		}
		if (rc == 0 && (!c || json_array_append_new(children, c) < 0))
			rc = errf(ENOMEM, "out of memory");
	}
	/* The layers lock covers the fork and the recording of the new tops,
	 * which kiln-vmm makes: the collector must not see them unrecorded. */
	pthread_mutex_lock(&h->layers);
	if (rc == 0 && ntaps > VMM_CTL_FDS_MAX)
		rc = errf(E2BIG, "a fork of %d children with networks carries too many descriptors: "
			  "fork at most %d at once", n, VMM_CTL_FDS_MAX - (own_uids ? 1 : 0));
	if (rc == 0) {
		json_t *req = json_pack("{s:s,s:O}", "cmd", "fork", "children", children);
		if (req && own_uids)
			json_object_set_new(req, "uid_fd", json_integer(0));
		char ctl[PATH_MAX];
		sandbox_ctl(parent, ctl, sizeof ctl);
		rc = req ? vmm_ctl_fds(ctl, req, taps, ntaps, &reply, cfg->boot_timeout_ms)
			 : errf(ENOMEM, "out of memory");
		json_decref(req);
	}
	for (int i = 0; i < ntaps; i++)
		close(taps[i]);
	/* A child refused its uid ended before it was ready, saying why:
	 * the fork's error names it. */
	if (own_uids)
		fork_uids_stop(&uids);
	json_decref(children);
	json_t *pids = json_object_get(reply, "children");
	const char *ptop = json_string_value(json_array_get(json_object_get(reply, "parent_disks"), 0));
	if (rc == 0 && (json_array_size(pids) != (size_t)n || !ptop || ptop[0] != '/'))
		rc = errf(EPROTO, "kiln-vmm fork: the reply lacks children or parent_disks");
	if (rc == 0) {
		/* The parent's pause, as kiln-vmm measured it (bench/hardware
		 * reads it here: the API does not carry it). */
		json_t *st = json_object_get(reply, "steps_ms");
		log_info("sandbox %s: forked %d, parent paused %.1f ms (stop %.1f, flush %.1f, seal %.1f, "
			 "capture %.1f, start %.1f)", parent->row.id, n,
			 json_number_value(json_object_get(reply, "pause_ms")),
			 json_number_value(json_object_get(st, "stop")), json_number_value(json_object_get(st, "flush")),
			 json_number_value(json_object_get(st, "seal")), json_number_value(json_object_get(st, "capture")),
			 json_number_value(json_object_get(st, "start")));
		sandbox_set_top(parent, ptop);
		sandbox_save(h, parent);
		for (int i = 0; i < n; i++) {
			char top[PATH_MAX];
			snprintf(top, sizeof top, "%s/disk", kids[i]->dir);
			sandbox_set_top(kids[i], top);
			sandbox_save(h, kids[i]);
		}
	}
	if (rc < 0) {
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		follow_new_top(h, parent);
		errf(-rc, "%s", msg);
	}
	pthread_mutex_unlock(&h->layers);
	if (rc < 0) {
		json_decref(reply);
		goto fail_kids;
	}

	for (int i = 0; i < n; i++) {
		pid_t pid = (pid_t)json_integer_value(json_object_get(json_array_get(pids, i), "pid"));
		/* The parent VMM names its children: a jailed one may name only
		 * processes of its own uid (never a host process kilnd would
		 * then move into a cgroup, and kill). */
		uid_t owner = 0;
		int crc = pid <= 0 ? errf(EPROTO, "kiln-vmm fork: no pid for child %d", i)
			: kids[i]->jail_uid && (proc_uid(pid, &owner) < 0 || owner != kids[i]->jail_uid)
			? errf(EPERM, "kiln-vmm fork: child %d's pid %d is not a process of its jail",
			       i, (int)pid)
			: sandbox_attach_vmm(h, kids[i], pid, proc_start_time(pid));
		/* Born in its parent's cgroup: its own limits from now on. */
		if (crc == 0 && h->cgroups && kids[i]->jail_uid) {
			char cg[PATH_MAX + 64];
			snprintf(cg, sizeof cg, "%s/%s", cfg->cgroup, kids[i]->row.id);
			crc = cgroup_move(cg, pid);
		}
		if (crc == 0)
			crc = sandbox_wait_ready(h, kids[i], true, NULL);
		if (crc == 0)
			crc = volumes_fork_record(h, parent, kids[i]);	/* its read-only ones */
		double ms = (double)(mono_ms() - t0);
		if (crc == 0) {
			pthread_mutex_lock(&kids[i]->lock);
			kids[i]->row.ready_ms = ms;
			kids[i]->row.active_ms = wall_ms();
			pthread_mutex_unlock(&kids[i]->lock);
			sandbox_set_state(h, kids[i], SBX_RUNNING);
			metrics_create(h->metrics, ms / 1000, true);
			pthread_mutex_unlock(&kids[i]->op);
			kids[ok++] = kids[i];
		} else {
			char why[300];
			snprintf(why, sizeof why, "fork failed: %s", errmsg());
			log_warn("sandbox %s: %s", kids[i]->row.id, why);
			sandbox_abort(h, kids[i], why);
			pthread_mutex_unlock(&kids[i]->op);
			sandbox_put(h, kids[i]);
			metrics_create(h->metrics, ms / 1000, false);
			if (rc == 0)
				rc = -EIO;
			errf(EIO, "%s", why);
		}
	}
	json_decref(reply);
	host_admit_done(h, 0, 0, true);
	*made += ok;
	return rc;

fail_kids:;
	char why[300];
	snprintf(why, sizeof why, "fork failed: %s", errmsg());
	for (int i = 0; i < have; i++) {
		sandbox_abort(h, kids[i], why);
		pthread_mutex_unlock(&kids[i]->op);
		sandbox_put(h, kids[i]);
		metrics_create(h->metrics, 0, false);
	}
	host_admit_done(h, 0, 0, true);
	return errf(-rc, "%s", why);
}

/* fork_retrying: fork_once, and once more when a child's guest died before
 * it was ready (ECHILD: kiln-vmm then ended every child of that fork and
 * resumed the parent, so nothing is left of the first try). */
static int fork_retrying(struct host *h, struct sandbox *parent, int n, const struct ws_caps *caps,
			 struct ws_caps_report *rep, struct sandbox **kids, int *made)
{
	int rc = fork_once(h, parent, n, caps, rep, kids, made);
	if (rc != -ECHILD)
		return rc;
	log_warn("sandbox %s: %s; forking again", parent->row.id, errmsg());
	metrics_start_retry(h->metrics);
	return fork_once(h, parent, n, caps, rep, kids, made);
}

int host_fork(struct host *h, struct sandbox *sb, int count, bool tree,
	      const struct ws_caps *caps, struct ws_caps_report *report,
	      struct sandbox **children, int *made)
{
	*made = 0;
	if (count < 1 || count > HOST_FORK_MAX)
		return errf(EINVAL, "count must be from 1 to %d", HOST_FORK_MAX);
	/* A live fork's VMM runs in a user namespace of its own (fork_uid.h),
	 * in which its own forks could map no uid but its: it moves to a
	 * fresh VMM first, hibernated and woken (started by root, as a wake
	 * is), which forks as any other. */
	pthread_mutex_lock(&sb->lock);
	pid_t vmm = sb->row.vmm_pid;
	pthread_mutex_unlock(&sb->lock);
	bool move = h->cfg->jail && (sandbox_in(sb, SBX_RUNNING) || sandbox_in(sb, SBX_PAUSED)) &&
		    proc_own_userns(vmm);
	if (move && host_hibernate(h, sb, false) < 0) {
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(EBUSY, "sandbox %s is itself a live fork: moving it to a fresh VMM before it "
			    "forks failed: %s", sb->row.id, msg);
	}
	if (move)
		log_info("sandbox %s: moved to a fresh VMM to fork (it is a live fork)", sb->row.id);
	pthread_mutex_lock(&sb->op);
	/* A paused one is resumed first (its children run); a hibernated
	 * one is refused: wake it first (one moved above is woken here). */
	int rc = move ? ready_locked(h, sb) : sandbox_in(sb, SBX_PAUSED) ? resume_locked(h, sb) : 0;
	if (rc < 0)
		;
	else if (!sandbox_in(sb, SBX_RUNNING))
		rc = sandbox_state_error(sb, "running");
	else if ((rc = volumes_fork_check(h, sb)) < 0)
		;
	else if (tree)
		rc = fork_retrying(h, sb, count, caps, report, children, made);
	else
		for (int i = 0; i < count && rc == 0; i++)
			rc = fork_retrying(h, sb, 1, caps, report, children + *made, made);
	sandbox_touch(sb);
	pthread_mutex_unlock(&sb->op);
	return rc;
}

/* ---- snapshots ------------------------------------------------------------------------------ */

int host_snapshot(struct host *h, struct sandbox *sb, char id[ID_MAX])
{
	const struct host_config *cfg = h->cfg;
	pthread_mutex_lock(&sb->op);
	struct snap_row snap = { 0 };
	char top[PATH_MAX];
	/* A hibernated one is woken first (docs/api.md), like any request
	 * that needs its guest, and stays running; a paused one is taken as
	 * it is (its vCPUs are stopped already) and stays paused. */
	int rc = volumes_snapshot_check(h, sb);
	bool was_paused = rc == 0 && sandbox_in(sb, SBX_PAUSED);
	if (rc == 0 && !was_paused)
		rc = ready_locked(h, sb);
	if (rc == 0 && !was_paused && !sandbox_in(sb, SBX_RUNNING))
		rc = sandbox_state_error(sb, "running");
	if (rc == 0)
		rc = sandbox_top(sb, top);
	if (rc == 0)
		rc = make_id(snap.id, "snap_");
	char dir[VM_DIR_MAX], vmdir[PATH_MAX], disk[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/snapshots/%s", cfg->data_dir, snap.id);
	snprintf(vmdir, sizeof vmdir, "%s/vm", dir);
	snprintf(disk, sizeof disk, "%s/disk", dir);
	if (rc < 0)
		goto out;
	/* Made under the layers lock, held until its record is saved: the
	 * collector takes a snapshot directory without one for a deleted
	 * snapshot's. */
	pthread_mutex_lock(&h->layers);
	if (mkdir(dir, 0700) < 0) {
		rc = errf_sys("mkdir %s", dir);
		pthread_mutex_unlock(&h->layers);
		goto out;
	}
	/* Paused, the disk and the memory are of the same instant; kiln-vmm
	 * keeps a VM that was paused before a snapshot paused after it. */
	bool paused = !was_paused && (rc = sandbox_ctl_cmd(sb, "pause", 10000)) == 0;
	if (rc == 0)
		rc = disk_flatten(cfg->data_dir, top, disk);
	if (rc == 0)
		rc = disk_seal(disk);
	/* A jailed VMM sees only the sandboxes' directories: it writes the
	 * snapshot into its own, and it is moved into place after. */
	char own[PATH_MAX];
	snprintf(own, sizeof own, "%s/snap.%s", sb->dir, snap.id);
	if (rc == 0) {
		char ctl[PATH_MAX];
		sandbox_ctl(sb, ctl, sizeof ctl);
		json_t *req = json_pack("{s:s,s:s,s:b}", "cmd", "snapshot", "dir", own, "diff", 0);
		json_t *reply = NULL;
		rc = req ? vmm_ctl(ctl, req, &reply, 120000) : errf(ENOMEM, "out of memory");
		json_decref(req);
		json_decref(reply);
		/* The VMM wrote it: a directory, not a link to elsewhere. */
		struct stat st;
		if (rc == 0 && (lstat(own, &st) < 0 || !S_ISDIR(st.st_mode)))
			rc = errf(EPERM, "snapshot: %s is not a directory", own);
		if (rc == 0 && rename(own, vmdir) < 0)
			rc = errf_sys("rename %s", own);
		if (rc < 0)
			rmtree(own);
	}
	/* Its VM has a network device: sandboxes made from it need one. */
	if (rc == 0 && sb->row.net_slot) {
		char mark[PATH_MAX];
		snprintf(mark, sizeof mark, "%s/net", dir);
		int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			rc = errf_sys("%s", mark);
		else
			close(fd);
	}
	if (paused) {
		int saved = rc;
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		if (sandbox_ctl_cmd(sb, "resume", 10000) < 0)
			log_warn("sandbox %s: resume after snapshot: %s", sb->row.id, errmsg());
		if (saved < 0)
			errf(-saved, "%s", msg);
	}
	if (rc == 0) {
		snap.disks = disks_json(disk);
		pthread_mutex_lock(&sb->lock);
		snprintf(snap.workspace, sizeof snap.workspace, "%s", sb->row.workspace);
		snprintf(snap.sandbox, sizeof snap.sandbox, "%s", sb->row.id);
		snprintf(snap.template, sizeof snap.template, "%s", sb->row.template);
		snap.vcpus = sb->row.vcpus;
		snap.memory_mib = sb->row.memory_mib;
		snap.env = sb->row.env ? strdup(sb->row.env) : NULL;
		pthread_mutex_unlock(&sb->lock);
		snap.created_ms = wall_ms();
		snap.stored_bytes = dir_bytes(dir);
		rc = snap.disks ? store_snapshot_save(h->store, &snap) : errf(ENOMEM, "out of memory");
	}
	if (rc < 0)
		rmtree(dir);
	pthread_mutex_unlock(&h->layers);
	if (rc == 0)
		snprintf(id, ID_MAX, "%s", snap.id);
out:
	sandbox_touch(sb);
	pthread_mutex_unlock(&sb->op);
	snap_row_clear(&snap);
	return rc;
}

int host_snapshot_delete(struct host *h, const char *workspace, const char *id)
{
	/* One statement: of two deletes at once (two API replicas), one
	 * succeeds and the other finds nothing to delete. */
	int rc = store_snapshot_delete(h->store, id, workspace);
	if (rc < 0)
		return rc;
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/snapshots/%s/vm", h->cfg->data_dir, id);
	rmtree(dir);
	layers_gc(h);	/* its disk goes when no sandbox sits on it */
	return 0;
}
