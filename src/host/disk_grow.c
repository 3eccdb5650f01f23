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
 * Step 3 retries while grow-fs still sees the old device size (step 2 not
 * yet done), for up to the boot timeout.
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
#include <string.h>
#include <time.h>

#define GROW_RETRY_MS 5

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One run of grow-fs /: 1 when it grew the filesystem, 0 when the device
 * was no larger yet, or -errno. out gets its stdout (for the log). */
static int grow_fs_once(struct guest *g, char *out, size_t cap)
{
	const char *argv[] = { "grow-fs", "/", NULL };
	int rc = guest_builtin_start(g, argv, NULL, false);
	if (rc < 0)
		return rc;
	char err[1024];
	size_t errlen = 0, outlen = 0;
	out[0] = 0;
	for (;;) {
		struct guest_ev ev;
		rc = guest_exec_next(g, &ev, -1, -1);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (ev.kind == GEV_STDERR) {
			size_t k = ev.len < sizeof err - errlen ? ev.len : sizeof err - errlen;
			memcpy(err + errlen, ev.data, k);
			errlen += k;
		} else if (ev.kind == GEV_STDOUT) {
			size_t k = ev.len < cap - 1 - outlen ? ev.len : cap - 1 - outlen;
			memcpy(out + outlen, ev.data, k);
			outlen += k;
			out[outlen] = 0;
		} else if (ev.kind == GEV_EXIT) {
			rc = guest_builtin_status(&ev, err, errlen);
			if (rc < 0)
				return rc;
			if (outlen && out[outlen - 1] == '\n')
				out[--outlen] = 0;
			return strstr(out, "no larger") ? 0 : 1;
		}
	}
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
	if (rc < 0)
		return errf(-rc, "growing the disk to %llu MiB: %s", (unsigned long long)(bytes >> 20), errmsg());

	int64_t t_layer = now_ms();
	struct guest *g;
	vm_path(vsock, sizeof vsock, sb->dir, "vsock.sock");
	if ((rc = guest_open(vsock, 10000, sb->row.vmm_pid, &g)) < 0)
		return rc;
	guest_set_timeout(g, h->cfg->boot_timeout_ms);
	char out[256] = "";
	int64_t deadline = now_ms() + h->cfg->boot_timeout_ms;
	int tries = 0;
	int64_t t_try = now_ms();
	while ((rc = grow_fs_once(g, out, sizeof out)) == 0 && now_ms() < deadline) {
		tries++;
		t_try = now_ms();
		struct timespec ts = { 0, GROW_RETRY_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	guest_close(g);
	if (rc == 0)
		return errf(ETIMEDOUT, "growing the root filesystem to %llu MiB: the guest still sees its old "
			    "disk size after %d ms (%s)", (unsigned long long)(bytes >> 20),
			    h->cfg->boot_timeout_ms, out);
	if (rc < 0)
		return errf(-rc, "growing the root filesystem to %llu MiB: %s", (unsigned long long)(bytes >> 20),
			    errmsg());
	/* Where the time went (tests/e2e/61 disk_at_create prints it): the
	 * VMM's new layer, the guest's wait for the new capacity (grow-fs
	 * runs that saw the old size), the resize itself (the last run). */
	int64_t t_end = now_ms();
	log_info("sandbox %s: disk grown to %llu MiB in %lld ms: layer %lld, capacity seen after %d tries "
		 "%lld, grow-fs %lld (%s)", sb->row.id, (unsigned long long)(bytes >> 20), (long long)(t_end - t0),
		 (long long)(t_layer - t0), tries, (long long)(t_try - t_layer), (long long)(t_end - t_try), out);
	return 0;
}
