/*
 * volume_ctl: the control socket's volume commands (volume.h).
 *
 *   {"cmd":"volume_attach","slot":I,"read_only":B,"fd":K}  with the volume's
 *       descriptor passed (SCM_RIGHTS); "fd" is its index among those sent
 *       with the line (default 0).
 *   {"cmd":"volume_detach","slot":I}
 *
 * Every error names the slot, and leaves the VM as it was.
 */
#include "vmm/volume.h"
#include "vmm/ctl.h"
#include "vmm/vmm.h"
#include "vmm/devices/virtio_devices.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* slot_of: the request's "slot", which must be one of this VM's. */
static int slot_of(struct vm *vm, const struct json *req, int *out)
{
	int64_t slot;
	if (!json_get(req, "slot") || !json_get_int(req, "slot", &slot))
		return errf(EINVAL, "\"slot\" (a slot number) is required");
	if (slot < 0 || slot >= vm->nslots) {
		if (vm->nslots == 0)
			return errf(EINVAL, "slot %lld is not a volume slot (this VM has none: "
				    "start it with --volume-slots N)", (long long)slot);
		return errf(EINVAL, "slot %lld is not a volume slot (this VM has %d: 0 to %d)",
			    (long long)slot, vm->nslots, vm->nslots - 1);
	}
	*out = (int)slot;
	return 0;
}

int cmd_volume_attach(struct vm *vm, const struct json *req, struct strbuf *r)
{
	int slot, rc;
	if ((rc = slot_of(vm, req, &slot)) < 0)
		return rc;
	bool ro = false;
	if (json_get(req, "read_only") && !json_get_bool(req, "read_only", &ro))
		return errf(EINVAL, "slot %d: \"read_only\" must be true or false", slot);
	int64_t idx = 0;
	if (json_get(req, "fd") && !json_get_int(req, "fd", &idx))
		return errf(EINVAL, "slot %d: \"fd\" must be the index of a passed descriptor", slot);
	const struct volume *v = virtio_blk_volume(vm->slots[slot]);
	if (v && v->fd >= 0)
		return errf(EBUSY, "slot %d already has a volume (detach it first)", slot);
	/* Descriptors the request does not claim are closed after it. */
	int fd = ctl_claim_fd(vm, idx);
	if (fd < 0)
		return errf(EBADF, "slot %d: no volume descriptor %lld was passed with this request "
			    "(send it with SCM_RIGHTS)", slot, (long long)idx);
	uint64_t size;
	if ((rc = volume_check(fd, ro, slot, &size)) < 0 ||
	    (rc = virtio_blk_attach(vm->slots[slot], fd, size, ro)) < 0) {
		close(fd);
		return rc;
	}
	strbuf_printf(r, ",\"slot\":%d,\"size\":%llu,\"read_only\":%s", slot, (unsigned long long)size,
		      ro ? "true" : "false");
	return 0;
}

int cmd_volume_detach(struct vm *vm, const struct json *req, struct strbuf *r)
{
	int slot, rc;
	if ((rc = slot_of(vm, req, &slot)) < 0)
		return rc;
	const struct volume *v = virtio_blk_volume(vm->slots[slot]);
	if (!v || v->fd < 0)
		return errf(EINVAL, "slot %d has no volume attached", slot);
	if ((rc = virtio_blk_detach(vm->slots[slot])) < 0)
		return errf(-rc, "slot %d: flushing the volume failed: %s (it is detached)", slot,
			    strerror(-rc));
	strbuf_printf(r, ",\"slot\":%d", slot);
	return 0;
}

void volume_status(struct vm *vm, struct strbuf *r)
{
	strbuf_printf(r, ",\"volume_slots\":[");
	for (int i = 0; i < vm->nslots; i++) {
		const struct volume *v = virtio_blk_volume(vm->slots[i]);
		strbuf_printf(r, "%s{\"slot\":%d,\"attached\":", i ? "," : "", i);
		if (v && v->fd >= 0)
			strbuf_printf(r, "true,\"size\":%llu,\"read_only\":%s}", (unsigned long long)v->size,
				      v->read_only ? "true" : "false");
		else
			strbuf_printf(r, "false}");
	}
	strbuf_printf(r, "]");
}
