/*
 * disk_grow: a sandbox's root disk made larger while it runs (a create's
 * disk_mib: docs/templates.md "A sandbox's disk size").
 *
 * The sandbox comes from a snapshot (its template's, a zygote's, the
 * pool's, a user's) whose guest already read its disk's capacity, so the
 * disk grows under a running guest, in three steps:
 *   1. kiln-vmm's "layer" with "size": the top is sealed and the disk goes
 *      on over a new overlay describing the larger disk (an overlay's map
 *      cannot grow in place: it sits between its header and its data),
 *      and the guest gets a configuration change interrupt for the new
 *      virtio-blk capacity;
 *   2. the guest's virtio_blk re-reads the capacity (its work queue: a
 *      moment after the interrupt);
 *   3. the guest agent's grow-fs / grows the mounted ext4 online.
 * kilnd waits for step 2 by reading the guest's /sys/block/vda/size
 * (every GROW_RETRY_MS, up to the boot timeout) before step 3: grow-fs
 * reads that size too, and a run that saw the old one would do nothing.
 */
#include "host/host_int.h"
#include "host/disk.h"
#include "host/guest_conn.h"
#include "host/host_config.h"
#include "host/vmm.h"
#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define GROW_RETRY_MS 5

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The guest's root device's size in bytes as its kernel sees it now
 * (/sys/block/vda/size, in 512-byte sectors: the root is the first
 * virtio-blk device, kiln.root=/dev/vda), read through the agent. */
static int guest_disk_bytes(struct guest *g, uint64_t *bytes)
{
	int fd = memfd_create("kiln-vda-size", MFD_CLOEXEC);
	if (fd < 0)
		return errf_sys("memfd_create");
	uint64_t n = 0;
	int rc = guest_read_file(g, "/sys/block/vda/size", fd, 64, &n);
	char text[65] = "";
	if (rc == 0 && (n == 0 || pread(fd, text, n, 0) != (ssize_t)n))
		rc = errf(EIO, "/sys/block/vda/size: nothing read");
	close(fd);
	if (rc < 0)
		return rc;
	char *end;
	unsigned long long sectors = strtoull(text, &end, 10);
	if (end == text || (*end && *end != '\n'))
		return errf(EPROTO, "/sys/block/vda/size: '%.20s' is not a number of sectors", text);
	*bytes = (uint64_t)sectors * 512;
	return 0;
}

int sandbox_grow_disk(struct host *h, struct sandbox *sb, uint64_t bytes)
{
	char top[PATH_MAX], next[PATH_MAX], ctl[PATH_MAX], vsock[PATH_MAX];
	int rc = sandbox_top(sb, top);
	if (rc < 0)
		return rc;
	/* The new top beside the old one, named after its size: a disk that
	 * grows twice gets two names. */
	snprintf(next, sizeof next, "%s/disk-%lluM", sb->dir, (unsigned long long)(bytes >> 20));
	sandbox_ctl(sb, ctl, sizeof ctl);
	json_t *req = json_pack("{s:s,s:s,s:I}", "cmd", "layer", "path", next, "size", (json_int_t)bytes);
	json_t *reply = NULL;
	int64_t t0 = now_ms();
	/* The layers lock: the collector must not see the new top unrecorded. */
	pthread_mutex_lock(&h->layers);
	rc = req ? vmm_ctl(ctl, req, &reply, h->cfg->boot_timeout_ms) : errf(ENOMEM, "out of memory");
	if (rc == 0 && (uint64_t)json_integer_value(json_object_get(reply, "size")) != bytes)
		rc = errf(EPROTO, "kiln-vmm's disk is %lld bytes, not the %llu asked for",
			  (long long)json_integer_value(json_object_get(reply, "size")), (unsigned long long)bytes);
	if (rc == 0)
		rc = sandbox_set_top(sb, next);
	if (rc == 0)
		rc = sandbox_save(h, sb);
	pthread_mutex_unlock(&h->layers);
	json_decref(req);
	json_decref(reply);
	char msg[300];	/* errf must not read the buffer it writes */
	if (rc < 0) {
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "growing the disk to %llu MiB: %s", (unsigned long long)(bytes >> 20), msg);
	}

	int64_t t_layer = now_ms();
	struct guest *g;
	vm_path(vsock, sizeof vsock, sb->dir, "vsock.sock");
	if ((rc = guest_open(vsock, 10000, sb->row.vmm_pid, &g)) < 0)
		return rc;
	guest_set_timeout(g, h->cfg->boot_timeout_ms);
	/* Step 2: the guest's kernel has the new capacity (its config work
	 * runs a moment after the interrupt); grow-fs reads the same size. */
	int64_t deadline = now_ms() + h->cfg->boot_timeout_ms;
	uint64_t seen = 0;
	int tries = 0;
	while ((rc = guest_disk_bytes(g, &seen)) == 0 && seen < bytes && now_ms() < deadline) {
		tries++;
		struct timespec ts = { 0, GROW_RETRY_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (rc == 0 && seen < bytes)
		rc = errf(ETIMEDOUT, "the guest still sees a disk of %llu MiB after %d ms", (unsigned long long)(seen >> 20),
			  h->cfg->boot_timeout_ms);
	int64_t t_try = now_ms();
	/* Step 3: the filesystem. */
	const char *argv[] = { "grow-fs", "/", NULL };
	char said[200] = "";
	if (rc == 0)
		rc = guest_builtin_said(g, argv, said, sizeof said);
	guest_close(g);
	if (rc < 0) {
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "growing the root filesystem to %llu MiB: %s", (unsigned long long)(bytes >> 20), msg);
	}
	/* Where the time went (tests/e2e/61 disk_at_create prints it): the
	 * VMM's new layer, the guest's wait for the new capacity, the resize
	 * itself (in the emulated host nearly all of it: ext4 zeroes the new
	 * groups' inode tables, docs/templates.md). */
	int64_t t_end = now_ms();
	log_info("sandbox %s: disk grown to %llu MiB in %lld ms: layer %lld, capacity seen %lld (%d more looks), "
		 "grow-fs %lld (%s)", sb->row.id, (unsigned long long)(bytes >> 20), (long long)(t_end - t0),
		 (long long)(t_layer - t0), (long long)(t_try - t_layer), tries, (long long)(t_end - t_try), said);
	return 0;
}
