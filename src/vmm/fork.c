#include "vmm/fork.h"
#include "vmm/child.h"
#include "vmm/ctl.h"
#include "vmm/devices/virtio_devices.h"
#include "vmm/disk.h"
#include "vmm/snapshot.h"
#include "vmm/vmm.h"
#include "vmm/volume.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static double ms_between(uint64_t a, uint64_t b)
{
	return (double)(b - a) / 1e6;
}

/* close_taps: the descriptors passed for the children (TAPs, stderr). */
static void close_taps(struct vmm_config *cfgs, int n)
{
	for (int i = 0; i < n; i++) {
		if (cfgs[i].tap_fd >= 0) {
			close(cfgs[i].tap_fd);
			cfgs[i].tap_fd = -1;
		}
		if (cfgs[i].stderr_fd >= 0) {
			close(cfgs[i].stderr_fd);
			cfgs[i].stderr_fd = -1;
		}
	}
}

/* fork_volumes: what each child gets in the volume slots. A read-only
 * volume is shared: the children inherit its descriptor. A read-write one
 * cannot be: two VMs writing one file system would corrupt it, so such a
 * fork is refused (detach it first, or attach it read-only). */
static int fork_volumes(struct vm *vm, struct vmm_config *cfgs, int n)
{
	for (int s = 0; s < vm->nslots; s++) {
		const struct volume *v = virtio_blk_volume(vm->slots[s]);
		if (v && v->fd >= 0 && !v->read_only)
			return errf(EBUSY, "slot %d has a read-write volume: a fork cannot share it", s);
	}
	for (int i = 0; i < n; i++)
		for (int s = 0; s < VOLUME_SLOTS_MAX; s++) {
			const struct volume *v = s < vm->nslots ? virtio_blk_volume(vm->slots[s]) : NULL;
			cfgs[i].volumes[s] = (struct volume_config){ .fd = v ? v->fd : -1, .read_only = true };
		}
	return 0;
}

int cmd_fork(struct vm *vm, const struct json *req, struct strbuf *r)
{
	uint64_t t0 = now_ns();
	struct json *children = json_get(req, "children");
	if (!children || children->type != JSON_ARRAY || !children->child)
		return errf(EINVAL, "\"children\" must be a non-empty array of child settings");
	int n = 0;
	for (struct json *c = children->child; c; c = c->next)
		n++;
	if (n > CHILDREN_MAX)
		return errf(EINVAL, "at most %d children per fork", CHILDREN_MAX);

	/* A jailed parent's children each take a uid of their own, asking
	 * the host on this socket (child.c own_uid): one descriptor shared
	 * by all of them, each naming its place. */
	int uid_sock = -1;
	int64_t idx;
	if (json_get(req, "uid_fd")) {
		if (!json_get_int(req, "uid_fd", &idx))
			return errf(EINVAL, "\"uid_fd\" must be the index of a passed descriptor");
		if ((uid_sock = ctl_claim_fd(vm, idx)) < 0)
			return uid_sock;
	}
	static struct vmm_config cfgs[CHILDREN_MAX];
	int i = 0, rc, made = 0;      /* made: settings whose descriptors are ours to close */
	for (struct json *c = children->child; c; c = c->next, i++) {
		if (c->type != JSON_OBJECT) {
			rc = errf(EINVAL, "child %d: settings must be an object", i);
			goto refused;
		}
		cfgs[i] = *vm->cfg;
		cfgs[i].restore_dir = "(fork)";
		cfgs[i].snap_base = NULL;    /* its memory is no snapshot on disk */
		/* A jailed parent's children live in its jail: they cannot leave
		 * it or build another, having no privileges left. */
		cfgs[i].jailed = vm->cfg->jail.root || vm->cfg->jailed;
		memset(&cfgs[i].jail, 0, sizeof cfgs[i].jail);
		cfgs[i].kvm_fd = vm->kvm_fd;
		cfgs[i].tap_fd = -1;
		cfgs[i].stderr_fd = -1;
		cfgs[i].tap = NULL;
		cfgs[i].kernel = cfgs[i].initrd = NULL;
		cfgs[i].uid_sock = uid_sock;
		cfgs[i].uid_index = i;
		rc = ctl_child_config(vm, c, &cfgs[i]);
		made = i + 1;
		if (rc == 0 && cfgs[i].jail.root)
			rc = errf(EINVAL, "forked children share their parent's jail");
		if (rc < 0) {
			rc = errf(-rc, "child %d: %s", i, errmsg());
			goto refused;
		}
	}

	for (i = 0; i < n; i++)
		if (cfgs[i].ndisks != vm->cfg->ndisks) {
			rc = errf(EINVAL, "child %d: give \"disks\" with %d path(s), one per parent disk",
				  i, vm->cfg->ndisks);
			goto refused;
		}
	if ((rc = fork_volumes(vm, cfgs, n)) < 0)
		goto refused;

	/* Where the pause goes, step by step (the reply's steps_ms): the
	 * vCPUs stopping, the disks' pending writes, sealing the disk layers,
	 * the capture of the VM's state, and starting (forking) the children. */
	uint64_t t_start = now_ns(), t_stopped, t_flushed, t_sealed = 0, t_captured = 0;
	bool was_paused = vm->paused;
	if ((rc = vm_pause(vm)) < 0)
		goto refused;
	t_stopped = now_ns();
	struct strbuf payload;
	strbuf_init(&payload);
	struct snap_info info;
	struct snap_volumes vols;
	rc = vm_flush_disks(vm);
	t_flushed = now_ns();
	/* Disks first: each read-write disk's current top is sealed, and the
	 * parent and every child get a new overlay over it. */
	int ndisks = 0;
	for (int d = 0; rc == 0 && d < vm->nvirtio; d++) {
		struct disk *disk = virtio_blk_disk(vm->virtio[d]);
		if (!disk)
			continue;
		const char *paths[CHILDREN_MAX];
		for (i = 0; i < n; i++) {
			paths[i] = cfgs[i].disks[ndisks].path;
			if (disk->read_only) {
				/* shared as it is */
				cfgs[i].disks[ndisks].path = strdup(disk->path);
				cfgs[i].disks[ndisks].read_only = true;
			}
		}
		rc = disk_fork_next(disk, (int)getpid(), vm->forks, paths, n);
		/* Each child's top sits on the layer just sealed: it takes that
		 * and those below from this chain, open (chain_open_over). */
		for (i = 0; rc == 0 && !disk->read_only && i < n; i++) {
			cfgs[i].disks[ndisks].below = &disk->chain;
			cfgs[i].disks[ndisks].below_from = 1;
		}
		ndisks++;
	}
	t_sealed = now_ns();
	if (rc == 0)
		rc = snapshot_capture(vm, &payload, NULL);
	t_captured = now_ns();
	if (rc == 0)
		rc = snapshot_info((const uint8_t *)payload.data, payload.len, &info);
	if (rc == 0)
		rc = snapshot_volumes((const uint8_t *)payload.data, payload.len, &vols);
	for (i = 0; rc == 0 && i < n; i++) {
		rc = config_from_snapshot(&cfgs[i], &info, &vols);
		if (rc == 0)
			rc = config_check(&cfgs[i], MAX_VCPUS);
		if (rc < 0)
			rc = errf(-rc, "child %d: %s", i, errmsg());
	}
	/* Fork the seed that starts every child, then let the parent run on
	 * while they restore and resync: one pause covers the capture and a
	 * single fork, however many children (child.h). */
	int fds[CHILDREN_MAX];
	int started = 0;
	pid_t seed = -1;
	if (rc == 0) {
		rc = children_start(&vm->mem, cfgs, n, (const uint8_t *)payload.data, payload.len,
				    t0, fds, &seed);
		if (rc == 0)
			started = n;
	}
	uint64_t t_started = now_ns();
	close_taps(cfgs, n);           /* the children have their own copies */
	close_fd(&uid_sock);
	double pause_ms = (double)(now_ns() - t0) / 1e6;
	if (!was_paused)
		vm_resume(vm);
	struct child_result res[CHILDREN_MAX];
	for (i = 0; i < started; i++) {
		int wrc = child_wait(fds[i], &res[i]);
		if (wrc < 0 && rc == 0)
			rc = errf(-wrc, "child %d: %s", i, errmsg());
	}
	child_reap(seed);
	strbuf_free(&payload);
	vm->forks++;
	/* The parent's disks may have moved to a new layer even when the
	 * fork failed: the caller learns where either way. */
	struct strbuf disks;
	strbuf_init(&disks);
	strbuf_printf(&disks, ",\"parent_disks\":[");
	int k = 0;
	for (int d = 0; d < vm->nvirtio; d++) {
		struct disk *disk = virtio_blk_disk(vm->virtio[d]);
		if (disk) {
			strbuf_printf(&disks, "%s", k++ ? "," : "");
			strbuf_json_str(&disks, disk->path);
		}
	}
	strbuf_printf(&disks, "]");
	if (rc < 0) {
		/* All or nothing: children that did start are not left behind. */
		for (i = 0; i < started; i++)
			child_discard(&res[i]);
		rc = ctl_fail(r, rc, disks.data ? disks.data : "");
		strbuf_free(&disks);
		return rc;
	}
	strbuf_printf(r, ",\"children\":[");
	for (i = 0; i < started; i++)
		strbuf_printf(r, "%s{\"pid\":%d,\"ready_ms\":%.2f}", i ? "," : "", (int)res[i].pid,
			      res[i].ready_ms);
	strbuf_printf(r, "],\"pause_ms\":%.2f,\"steps_ms\":{\"checks\":%.2f,\"stop\":%.2f,\"flush\":%.2f,"
		      "\"seal\":%.2f,\"capture\":%.2f,\"start\":%.2f}%s", pause_ms,
		      ms_between(t0, t_start), ms_between(t_start, t_stopped), ms_between(t_stopped, t_flushed),
		      ms_between(t_flushed, t_sealed), ms_between(t_sealed, t_captured),
		      ms_between(t_captured, t_started), disks.data ? disks.data : "");
	strbuf_free(&disks);
	return 0;

refused:	/* before anything started: the descriptors passed go */
	close_taps(cfgs, made);
	close_fd(&uid_sock);
	return rc;
}

/* layer: {"cmd":"layer","path":P}. The root disk's current top is sealed
 * as it is now and the disk goes on writing a new overlay created at P
 * over it (a fork with no children): the sealed layer is a checkpoint of
 * the disk that later VMs can boot over. The template build uses it to
 * keep the disk after each Dockerfile step (its step cache). The guest
 * should have synced: what it still holds in its page cache is not in
 * the sealed layer. Reply: "sealed", the layer that now holds the state.
 *
 * With "size":B (bytes, a multiple of 512, no smaller than the disk, at
 * most LAYER_SIZE_MAX) the new overlay describes a disk of B, zeros past
 * the old end, and the guest is told its capacity changed (a sandbox
 * created with a larger disk than its template's: docs/templates.md).
 * Reply also: "size", the disk's size now. */
#define LAYER_SIZE_MAX (1ULL << 40)

int cmd_layer(struct vm *vm, const struct json *req, struct strbuf *r)
{
	const char *path = json_get_str(req, "path");
	if (!path || path[0] != '/')
		return errf(EINVAL, "\"path\" must be an absolute path for the new top layer");
	int64_t size = 0;
	if (json_get(req, "size") && (!json_get_int(req, "size", &size) || size <= 0 || size % 512 ||
				      (uint64_t)size > LAYER_SIZE_MAX))
		return errf(EINVAL, "\"size\" must be a number of bytes, a multiple of 512, 1 TiB at most");
	struct disk *disk = NULL;
	struct virtio_dev *dev = NULL;
	for (int d = 0; !disk && d < vm->nvirtio; d++) {
		struct disk *x = virtio_blk_disk(vm->virtio[d]);
		if (x && !x->read_only)
			disk = x, dev = vm->virtio[d];
	}
	if (!disk)
		return errf(EINVAL, "the VM has no writable disk");
	if (size && (uint64_t)size < disk->size)
		return errf(EINVAL, "\"size\" %lld is smaller than the disk's %llu bytes (a disk never shrinks)",
			    (long long)size, (unsigned long long)disk->size);
	bool was_paused = vm->paused;
	int rc = vm_pause(vm);
	if (rc < 0)
		return rc;
	char sealed[4200];
	snprintf(sealed, sizeof sealed, "%s", disk->path);
	uint64_t before = disk->size;
	if ((rc = vm_flush_disks(vm)) == 0)
		rc = disk_fork_sized(disk, path, NULL, 0, (uint64_t)size);
	if (rc == 0 && disk->size != before)
		rc = virtio_blk_resized(dev);
	if (!was_paused)
		vm_resume(vm);
	if (rc < 0)
		return rc;
	strbuf_printf(r, ",\"sealed\":");
	strbuf_json_str(r, sealed);
	strbuf_printf(r, ",\"size\":%llu", (unsigned long long)disk->size);
	return 0;
}
