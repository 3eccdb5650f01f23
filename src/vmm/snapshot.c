/*
 * snapshot: capturing and restoring a VM's state (see snapshot.h). The
 * order of the KVM calls matters and follows Firecracker's, for the
 * reasons its sources give: on save, MP_STATE first (it can change the
 * LAPIC) and VCPU_EVENTS last; on restore, REGS before EVENTS (SET_REGS
 * clears pending exceptions), SREGS before LAPIC (the APIC base MSR rides
 * in SREGS), LAPIC before MSRS (or TSC_DEADLINE is dropped).
 */
#include "vmm/snapshot.h"
#include "vmm/devices/serial.h"
#include "vmm/devices/virtio_devices.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/vmm.h"
#include "vmm/volume.h"
#include "common/crc32.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "KILNSNAP"
#define MAX_MSRS 128

enum {
	TAG_INFO = 1, TAG_VCPU, TAG_IRQCHIP, TAG_PIT, TAG_CLOCK, TAG_SERIAL, TAG_VIRTIO,
	TAG_PARENT, TAG_DIRTY, TAG_VOLUMES,
	TAG_END = 0xff,
};

struct file_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	uint64_t payload_len;
	uint32_t payload_crc;
	uint32_t reserved;
};

/* The MSRs worth saving: those KVM lists that fall in these ranges (the
 * architectural state a Linux guest uses, and KVM's paravirtual MSRs). */
static const struct { uint32_t lo, hi; } msr_ranges[] = {
	{ 0x10, 0x10 },                 /* TSC */
	{ 0x1b, 0x1b },                 /* APIC_BASE */
	{ 0x3b, 0x3b },                 /* TSC_ADJUST */
	{ 0x48, 0x48 },                 /* SPEC_CTRL */
	{ 0x174, 0x176 },               /* SYSENTER */
	{ 0x1a0, 0x1a0 },               /* MISC_ENABLE */
	{ 0x200, 0x26f },               /* MTRRs */
	{ 0x277, 0x277 },               /* PAT */
	{ 0x2ff, 0x2ff },               /* MTRRdefType */
	{ 0x6e0, 0x6e0 },               /* TSC_DEADLINE */
	{ 0xda0, 0xda0 },               /* XSS */
	{ 0x11, 0x12 },                 /* KVM clock (old) */
	{ 0x4b564d00, 0x4b564dff },     /* KVM paravirtual MSRs */
	{ 0xc0000081, 0xc0000084 },     /* STAR LSTAR CSTAR SFMASK */
	{ 0xc0000100, 0xc0000103 },     /* FS/GS/KERNEL_GS base, TSC_AUX */
};

static int msr_list(struct vm *vm, uint32_t *out, uint32_t max)
{
	struct {
		struct kvm_msr_list hdr;
		uint32_t idx[1024];
	} list = { .hdr.nmsrs = 1024 };
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &list) < 0)
		return errf_sys("KVM_GET_MSR_INDEX_LIST");
	uint32_t n = 0;
	for (uint32_t i = 0; i < list.hdr.nmsrs && n < max; i++)
		for (size_t k = 0; k < sizeof msr_ranges / sizeof msr_ranges[0]; k++)
			if (list.idx[i] >= msr_ranges[k].lo && list.idx[i] <= msr_ranges[k].hi) {
				out[n++] = list.idx[i];
				break;
			}
	return (int)n;
}

static int xsave_size(struct vm *vm)
{
	int n = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);
	return n > (int)sizeof(struct kvm_xsave) ? n : (int)sizeof(struct kvm_xsave);
}

static void record(struct strbuf *out, uint32_t tag, const void *data, uint32_t len)
{
	strbuf_append(out, &tag, 4);
	strbuf_append(out, &len, 4);
	strbuf_append(out, data, len);
}

/* ---- reader ------------------------------------------------------------- */

const void *snap_get(struct snap_reader *r, size_t n)
{
	if (r->bad || n > r->len - r->pos) {
		r->bad = true;
		return NULL;
	}
	const void *p = r->p + r->pos;
	r->pos += n;
	return p;
}

bool snap_read(struct snap_reader *r, void *dst, size_t n)
{
	const void *p = snap_get(r, n);
	if (p)
		memcpy(dst, p, n);
	return p != NULL;
}

/* ---- capture ------------------------------------------------------------ */

static int capture_vcpu(struct vm *vm, struct vcpu *v, struct strbuf *out)
{
	struct strbuf b;
	strbuf_init(&b);
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs dregs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
	int rc = 0;
	int xs = xsave_size(vm);
	struct kvm_xsave *xsave = calloc(1, (size_t)xs);
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[MAX_MSRS];
	} msrs;
	uint32_t idx[MAX_MSRS];
	if (!xsave)
		return errf(ENOMEM, "out of memory");

	if (ioctl(v->fd, KVM_GET_MP_STATE, &mp) < 0 ||
	    ioctl(v->fd, KVM_GET_REGS, &regs) < 0 ||
	    ioctl(v->fd, KVM_GET_SREGS, &sregs) < 0 ||
	    ioctl(v->fd, xs > (int)sizeof(struct kvm_xsave) ? KVM_GET_XSAVE2 : KVM_GET_XSAVE, xsave) < 0 ||
	    ioctl(v->fd, KVM_GET_XCRS, &xcrs) < 0 ||
	    ioctl(v->fd, KVM_GET_DEBUGREGS, &dregs) < 0 ||
	    ioctl(v->fd, KVM_GET_LAPIC, &lapic) < 0) {
		rc = errf_sys("saving vCPU %d", v->index);
		goto out;
	}
	int tsc_khz = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);
	int n = msr_list(vm, idx, MAX_MSRS);
	if (n < 0) {
		rc = n;
		goto out;
	}
	memset(&msrs, 0, sizeof msrs);
	msrs.hdr.nmsrs = (uint32_t)n;
	for (int i = 0; i < n; i++)
		msrs.e[i].index = idx[i];
	int got = ioctl(v->fd, KVM_GET_MSRS, &msrs);
	if (got < 0) {
		rc = errf_sys("KVM_GET_MSRS on vCPU %d", v->index);
		goto out;
	}
	/* An armed-but-zero TSC deadline would be lost; make it "now". */
	uint64_t tsc = 0;
	for (int i = 0; i < got; i++)
		if (msrs.e[i].index == 0x10)
			tsc = msrs.e[i].data;
	for (int i = 0; i < got; i++)
		if (msrs.e[i].index == 0x6e0 && msrs.e[i].data == 0)
			msrs.e[i].data = tsc;
	if (ioctl(v->fd, KVM_GET_VCPU_EVENTS, &events) < 0) {
		rc = errf_sys("KVM_GET_VCPU_EVENTS on vCPU %d", v->index);
		goto out;
	}

	uint32_t index = (uint32_t)v->index, nmsrs = (uint32_t)got, xlen = (uint32_t)xs;
	uint32_t khz = tsc_khz > 0 ? (uint32_t)tsc_khz : 0;
	strbuf_append(&b, &index, 4);
	strbuf_append(&b, &mp, sizeof mp);
	strbuf_append(&b, &regs, sizeof regs);
	strbuf_append(&b, &sregs, sizeof sregs);
	strbuf_append(&b, &xcrs, sizeof xcrs);
	strbuf_append(&b, &dregs, sizeof dregs);
	strbuf_append(&b, &lapic, sizeof lapic);
	strbuf_append(&b, &events, sizeof events);
	strbuf_append(&b, &khz, 4);
	strbuf_append(&b, &nmsrs, 4);
	strbuf_append(&b, msrs.e, nmsrs * sizeof msrs.e[0]);
	strbuf_append(&b, &xlen, 4);
	strbuf_append(&b, xsave, xlen);
	record(out, TAG_VCPU, b.data, (uint32_t)b.len);
out:
	free(xsave);
	strbuf_free(&b);
	return rc;
}

int snapshot_capture(struct vm *vm, struct strbuf *out, const struct snap_diff *diff)
{
	const struct vmm_config *cfg = vm->cfg;
	struct snap_info info = {
		.mem_size = vm->mem.size,
		.nvcpus = (uint32_t)vm->nvcpus,
		.ndisks = (uint32_t)cfg->ndisks,
		.rng = cfg->rng,
		.net = cfg->tap != NULL,
		.vsock = cfg->vsock_path != NULL,
		.guest_cid = cfg->guest_cid,
	};
	for (int i = 0; i < cfg->ndisks; i++)
		info.disk_ro[i] = cfg->disks[i].read_only;
	unsigned m[6] = { 0 };
	if (cfg->mac)
		sscanf(cfg->mac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]);
	for (int i = 0; i < 6; i++)
		info.mac[i] = (uint8_t)m[i];
	int khz = ioctl(vm->vcpus[0].fd, KVM_GET_TSC_KHZ, 0);
	info.tsc_khz = khz > 0 ? (uint32_t)khz : 0;
	record(out, TAG_INFO, &info, sizeof info);
	struct snap_volumes vols = { .nslots = (uint32_t)vm->nslots };
	for (int i = 0; i < vm->nslots; i++) {
		const struct volume *v = virtio_blk_volume(vm->slots[i]);
		if (v && v->fd >= 0) {
			vols.slot[i].attached = 1;
			vols.slot[i].read_only = v->read_only;
			vols.slot[i].size = v->size;
		}
	}
	record(out, TAG_VOLUMES, &vols, sizeof vols);

	int rc;
	for (int i = 0; i < vm->nvcpus; i++)
		if ((rc = capture_vcpu(vm, &vm->vcpus[i], out)) < 0)
			return rc;

	struct kvm_irqchip chips[3] = { { .chip_id = KVM_IRQCHIP_PIC_MASTER },
					{ .chip_id = KVM_IRQCHIP_PIC_SLAVE },
					{ .chip_id = KVM_IRQCHIP_IOAPIC } };
	for (int i = 0; i < 3; i++)
		if (ioctl(vm->vm_fd, KVM_GET_IRQCHIP, &chips[i]) < 0)
			return errf_sys("KVM_GET_IRQCHIP");
	record(out, TAG_IRQCHIP, chips, sizeof chips);
	struct kvm_pit_state2 pit;
	if (ioctl(vm->vm_fd, KVM_GET_PIT2, &pit) < 0)
		return errf_sys("KVM_GET_PIT2");
	record(out, TAG_PIT, &pit, sizeof pit);
	struct kvm_clock_data clock = { 0 };
	if (ioctl(vm->vm_fd, KVM_GET_CLOCK, &clock) < 0)
		return errf_sys("KVM_GET_CLOCK");
	clock.flags = 0;   /* restore as a plain value: the guest resumes where it stopped */
	record(out, TAG_CLOCK, &clock, sizeof clock);

	struct strbuf b;
	strbuf_init(&b);
	serial_save(vm, &b);
	record(out, TAG_SERIAL, b.data, (uint32_t)b.len);
	for (int i = 0; i < vm->nvirtio; i++) {
		strbuf_reset(&b);
		uint32_t idx = (uint32_t)i;
		strbuf_append(&b, &idx, 4);
		virtio_mmio_save(vm->virtio[i], &b);
		record(out, TAG_VIRTIO, b.data, (uint32_t)b.len);
	}
	strbuf_free(&b);
	if (diff) {
		record(out, TAG_PARENT, diff->parent, (uint32_t)strlen(diff->parent) + 1);
		record(out, TAG_DIRTY, diff->bits, (uint32_t)(diff->words * 8));
	}
	record(out, TAG_END, NULL, 0);
	return strbuf_failed(out) ? errf(ENOMEM, "out of memory capturing the VM's state") : 0;
}

/* ---- apply -------------------------------------------------------------- */

static int bad(const char *what)
{
	return errf(EINVAL, "snapshot state is damaged: %s", what);
}

/* next_record: the next (tag, body) of a payload. */
static bool next_record(struct snap_reader *r, uint32_t *tag, struct snap_reader *body)
{
	uint32_t len;
	if (!snap_read(r, tag, 4) || !snap_read(r, &len, 4))
		return false;
	const uint8_t *p = snap_get(r, len);
	if (!p)
		return false;
	*body = (struct snap_reader){ .p = p, .len = len };
	return true;
}

int snapshot_info(const uint8_t *payload, size_t len, struct snap_info *info)
{
	struct snap_reader r = { .p = payload, .len = len }, body;
	uint32_t tag;
	if (!next_record(&r, &tag, &body) || tag != TAG_INFO || body.len != sizeof *info)
		return bad("no VM description record");
	memcpy(info, body.p, sizeof *info);
	if (info->nvcpus == 0 || info->nvcpus > MAX_VCPUS || info->ndisks > 8 ||
	    info->mem_size < (64ULL << 20) || (info->mem_size & 0xfffff))
		return bad("impossible VM description");
	return 0;
}

int snapshot_volumes(const uint8_t *payload, size_t len, struct snap_volumes *vols)
{
	struct snap_reader r = { .p = payload, .len = len }, body;
	uint32_t tag;
	memset(vols, 0, sizeof *vols);
	while (next_record(&r, &tag, &body)) {
		if (tag != TAG_VOLUMES)
			continue;
		if (body.len != sizeof *vols)
			return bad("volume slots record");
		memcpy(vols, body.p, sizeof *vols);
		if (vols->nslots > VOLUME_SLOTS_MAX)
			return bad("volume slots record");
		for (uint32_t i = 0; i < VOLUME_SLOTS_MAX; i++) {
			uint64_t size = vols->slot[i].size;
			if (!vols->slot[i].attached)
				continue;
			if (i >= vols->nslots || !size || size % 512 || size > VOLUME_MAX_BYTES)
				return bad("volume slots record");
		}
		return 0;
	}
	return 0;
}

static int apply_vcpu(struct vm *vm, struct snap_reader *r)
{
	uint32_t index, khz, nmsrs, xlen;
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs dregs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
	if (!snap_read(r, &index, 4) || index >= (uint32_t)vm->nvcpus ||
	    !snap_read(r, &mp, sizeof mp) || !snap_read(r, &regs, sizeof regs) ||
	    !snap_read(r, &sregs, sizeof sregs) || !snap_read(r, &xcrs, sizeof xcrs) ||
	    !snap_read(r, &dregs, sizeof dregs) || !snap_read(r, &lapic, sizeof lapic) ||
	    !snap_read(r, &events, sizeof events) || !snap_read(r, &khz, 4) ||
	    !snap_read(r, &nmsrs, 4) || nmsrs > MAX_MSRS)
		return bad("vCPU record");
	const struct kvm_msr_entry *entries = snap_get(r, nmsrs * sizeof(struct kvm_msr_entry));
	if (!entries || !snap_read(r, &xlen, 4) || xlen < sizeof(struct kvm_xsave) || xlen > 1 << 20)
		return bad("vCPU record");
	const void *xdata = snap_get(r, xlen);
	if (!xdata)
		return bad("vCPU record");
	if ((int)xlen > xsave_size(vm))
		return errf(EINVAL, "snapshot needs an XSAVE area of %u bytes, this host offers %d",
			    xlen, xsave_size(vm));

	struct vcpu *v = &vm->vcpus[index];
	/* A TSC rate other than the saved one would make guest time run off. */
	int host_khz = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);
	if (khz && host_khz > 0 && (uint32_t)host_khz != khz &&
	    ioctl(v->fd, KVM_SET_TSC_KHZ, khz) < 0) {
		uint64_t diff = (uint64_t)(host_khz > (int)khz ? (uint32_t)host_khz - khz : khz - (uint32_t)host_khz);
		if (diff * 4000 > khz)   /* more than 250 ppm, Firecracker's bound */
			return errf(EINVAL, "snapshot was taken at TSC %u kHz; this host runs %d kHz and cannot scale",
				    khz, host_khz);
	}

	struct kvm_xsave *xsave = calloc(1, (size_t)xsave_size(vm));
	if (!xsave)
		return errf(ENOMEM, "out of memory");
	memcpy(xsave, xdata, xlen);
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[MAX_MSRS];
	} msrs;
	memset(&msrs, 0, sizeof msrs);
	msrs.hdr.nmsrs = nmsrs;
	memcpy(msrs.e, entries, nmsrs * sizeof msrs.e[0]);

	int rc = 0;
	const char *step;
	if ((step = "MP_STATE", ioctl(v->fd, KVM_SET_MP_STATE, &mp) < 0) ||
	    (step = "REGS", ioctl(v->fd, KVM_SET_REGS, &regs) < 0) ||
	    (step = "SREGS", ioctl(v->fd, KVM_SET_SREGS, &sregs) < 0) ||
	    (step = "XSAVE", ioctl(v->fd, KVM_SET_XSAVE, xsave) < 0) ||
	    (step = "XCRS", ioctl(v->fd, KVM_SET_XCRS, &xcrs) < 0) ||
	    (step = "DEBUGREGS", ioctl(v->fd, KVM_SET_DEBUGREGS, &dregs) < 0) ||
	    (step = "LAPIC", ioctl(v->fd, KVM_SET_LAPIC, &lapic) < 0))
		rc = errf_sys("restoring vCPU %u: KVM_SET_%s", index, step);
	else if (ioctl(v->fd, KVM_SET_MSRS, &msrs) != (int)nmsrs)
		rc = errf(EINVAL, "restoring vCPU %u: KVM did not accept every saved MSR", index);
	else if (ioctl(v->fd, KVM_SET_VCPU_EVENTS, &events) < 0)
		rc = errf_sys("restoring vCPU %u: KVM_SET_VCPU_EVENTS", index);
	free(xsave);
	return rc;
}

int snapshot_apply(struct vm *vm, const uint8_t *payload, size_t len)
{
	struct snap_reader r = { .p = payload, .len = len }, body;
	uint32_t tag;
	int rc, vcpus_seen = 0, devices_seen = 0;
	bool end = false;
	struct kvm_irqchip chips[3];
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;
	bool have_chips = false, have_pit = false, have_clock = false;

	while (!end && next_record(&r, &tag, &body)) {
		switch (tag) {
		case TAG_INFO:
		case TAG_PARENT:
		case TAG_DIRTY:
		case TAG_VOLUMES:         /* read before the VM was built */
			break;
		case TAG_VCPU:
			if ((rc = apply_vcpu(vm, &body)) < 0)
				return rc;
			vcpus_seen++;
			break;
		case TAG_IRQCHIP:
			if (!snap_read(&body, chips, sizeof chips))
				return bad("irqchip record");
			have_chips = true;
			break;
		case TAG_PIT:
			if (!snap_read(&body, &pit, sizeof pit))
				return bad("PIT record");
			have_pit = true;
			break;
		case TAG_CLOCK:
			if (!snap_read(&body, &clock, sizeof clock))
				return bad("clock record");
			have_clock = true;
			break;
		case TAG_SERIAL:
			if ((rc = serial_load(vm, &body)) < 0)
				return rc;
			break;
		case TAG_VIRTIO: {
			uint32_t idx;
			if (!snap_read(&body, &idx, 4) || idx >= (uint32_t)vm->nvirtio)
				return bad("virtio record for a device that does not exist");
			if ((rc = virtio_mmio_load(vm->virtio[idx], &body)) < 0)
				return rc;
			devices_seen++;
			break;
		}
		case TAG_END:
			end = true;
			break;
		default:
			return bad("unknown record");
		}
	}
	if (!end || vcpus_seen != vm->nvcpus || devices_seen != vm->nvirtio ||
	    !have_chips || !have_pit || !have_clock)
		return bad("records missing");
	/* VM-wide state after the vCPUs, as Firecracker does. */
	if (ioctl(vm->vm_fd, KVM_SET_PIT2, &pit) < 0)
		return errf_sys("KVM_SET_PIT2");
	if (ioctl(vm->vm_fd, KVM_SET_CLOCK, &clock) < 0)
		return errf_sys("KVM_SET_CLOCK");
	for (int i = 0; i < 3; i++)
		if (ioctl(vm->vm_fd, KVM_SET_IRQCHIP, &chips[i]) < 0)
			return errf_sys("KVM_SET_IRQCHIP");
	/* Devices last: their first interrupts need the irqchip in place. */
	for (int i = 0; i < vm->nvirtio; i++)
		virtio_mmio_restored(vm->virtio[i]);
	return 0;
}

/* ---- files -------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n, const char *path)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return errf_sys("%s", path);
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	const uint64_t *q = (const uint64_t *)p;
	for (size_t i = 0; i < n / 8; i++)
		if (q[i])
			return false;
	return true;
}

/* write_memory: guest RAM to a sparse file; all-zero 64 KiB runs become
 * holes, so an idle 1 GiB guest costs what it uses. */
static int write_memory(struct vm *vm, const char *path, const struct snap_diff *diff)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf_sys("%s", path);
	const size_t chunk = diff ? 4096 : 64 * 1024;
	int rc = 0;
	for (uint64_t off = 0; off < vm->mem.size && rc == 0; off += chunk) {
		const uint8_t *p = vm->mem.host + off;
		uint64_t page = off / 4096;
		if (diff ? !(diff->bits[page / 64] & (1ULL << (page % 64))) : all_zero(p, chunk))
			continue;
		if (pwrite(fd, p, chunk, (off_t)off) != (ssize_t)chunk)
			rc = errf_sys("%s", path);
	}
	if (rc == 0 && ftruncate(fd, (off_t)vm->mem.size) < 0)
		rc = errf_sys("%s", path);
	if (rc == 0 && fsync(fd) < 0)
		rc = errf_sys("%s", path);
	close(fd);
	return rc;
}

int snapshot_write(struct vm *vm, const char *dir, const struct strbuf *payload,
		   const struct snap_diff *diff)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errf_sys("snapshot directory %s", dir);
	char path[PATH_MAX], tmp[PATH_MAX];
	snprintf(path, sizeof path, "%s/memory", dir);
	int rc = write_memory(vm, path, diff);
	if (rc < 0)
		return rc;
	struct file_header h = { .version = SNAP_VERSION, .header_size = sizeof h,
				 .payload_len = payload->len,
				 .payload_crc = crc32(payload->data, payload->len) };
	memcpy(h.magic, MAGIC, 8);
	snprintf(path, sizeof path, "%s/state", dir);
	snprintf(tmp, sizeof tmp, "%s/state.tmp", dir);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf_sys("%s", tmp);
	rc = write_all(fd, &h, sizeof h, tmp);
	if (rc == 0)
		rc = write_all(fd, payload->data, payload->len, tmp);
	if (rc == 0 && fsync(fd) < 0)
		rc = errf_sys("%s", tmp);
	close(fd);
	/* The state file appears last and whole: a snapshot without one is
	 * an unfinished snapshot. */
	if (rc == 0 && rename(tmp, path) < 0)
		rc = errf_sys("%s", path);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

int snapshot_read(const char *dir, uint8_t **payload, size_t *len)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/state", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("snapshot %s", path);
	struct file_header h;
	struct stat st;
	int rc = 0;
	uint8_t *p = NULL;
	if (fstat(fd, &st) < 0 || read(fd, &h, sizeof h) != (ssize_t)sizeof h) {
		rc = errf(EINVAL, "snapshot %s: truncated header", path);
		goto out;
	}
	if (memcmp(h.magic, MAGIC, 8) != 0) {
		rc = errf(EINVAL, "snapshot %s: not a kiln snapshot", path);
		goto out;
	}
	if (h.version < SNAP_VERSION_OLDEST || h.version > SNAP_VERSION) {
		rc = errf(EINVAL, "snapshot %s: format version %u, this kiln-vmm reads versions %d to %d",
			  path, h.version, SNAP_VERSION_OLDEST, SNAP_VERSION);
		goto out;
	}
	if (h.header_size != sizeof h || h.payload_len > 64 << 20 ||
	    (uint64_t)st.st_size != sizeof h + h.payload_len) {
		rc = errf(EINVAL, "snapshot %s: size %lld does not match its header (truncated?)",
			  path, (long long)st.st_size);
		goto out;
	}
	p = malloc(h.payload_len ? h.payload_len : 1);
	if (!p) {
		rc = errf(ENOMEM, "out of memory");
		goto out;
	}
	if (read(fd, p, h.payload_len) != (ssize_t)h.payload_len) {
		rc = errf(EINVAL, "snapshot %s: truncated", path);
		goto out;
	}
	if (crc32(p, h.payload_len) != h.payload_crc) {
		rc = errf(EINVAL, "snapshot %s: checksum mismatch (corrupted)", path);
		goto out;
	}
	*payload = p;
	*len = h.payload_len;
	p = NULL;
out:
	free(p);
	close(fd);
	return rc;
}

static int open_memory(const char *dir, uint64_t mem_size, char *path, size_t pathlen)
{
	snprintf(path, pathlen, "%s/memory", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("snapshot %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != mem_size) {
		close(fd);
		return errf(EINVAL, "snapshot %s is %lld bytes; the state says %llu",
			    path, (long long)st.st_size, (unsigned long long)mem_size);
	}
	return fd;
}

/* diff_of: the parent and page bitmap of a diff payload (parent NULL for a
 * full snapshot). */
static int diff_of(const uint8_t *payload, size_t len, uint64_t mem_size, const char **parent,
		   const uint64_t **bits)
{
	struct snap_reader r = { .p = payload, .len = len }, body;
	uint32_t tag;
	*parent = NULL;
	*bits = NULL;
	while (next_record(&r, &tag, &body)) {
		if (tag == TAG_PARENT) {
			if (body.len < 2 || body.len > 4096 || body.p[body.len - 1] != 0)
				return bad("parent record");
			*parent = (const char *)body.p;
		} else if (tag == TAG_DIRTY) {
			if (body.len != (mem_size / 4096 + 63) / 64 * 8)
				return bad("dirty page record");
			*bits = (const uint64_t *)body.p;
		}
	}
	if (!*parent != !*bits)
		return bad("diff records incomplete");
	return 0;
}

/* read_data: copy the data regions of a sparse file into memory (holes
 * are left alone: fresh anonymous memory is already zero). */
static int read_data(int fd, const char *path, uint8_t *dst, uint64_t size)
{
	for (off_t off = 0; (uint64_t)off < size;) {
		off_t data = lseek(fd, off, SEEK_DATA);
		if (data < 0)
			break;                                /* no more data */
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > size)
			hole = (off_t)size;
		for (off_t o = data; o < hole;) {
			ssize_t n = pread(fd, dst + o, (size_t)(hole - o), o);
			if (n <= 0)
				return errf_sys("%s", path);
			o += n;
		}
		off = hole;
	}
	return 0;
}

static int memory_of(struct vm *vm, const char *dir, const uint8_t *payload, size_t len,
		     uint64_t mem_size, bool anonymous, int depth)
{
	const char *parent;
	const uint64_t *bits;
	int rc = diff_of(payload, len, mem_size, &parent, &bits);
	if (rc < 0)
		return rc;
	char path[PATH_MAX];
	if (parent) {
		if (depth >= 16)
			return errf(ELOOP, "snapshot %s: chain of diff snapshots deeper than 16", dir);
		uint8_t *pp;
		size_t plen;
		struct snap_info pinfo;
		if ((rc = snapshot_read(parent, &pp, &plen)) < 0)
			return errf(-rc, "parent of snapshot %s: %s", dir, errmsg());
		rc = snapshot_info(pp, plen, &pinfo);
		if (rc == 0 && pinfo.mem_size != mem_size)
			rc = errf(EINVAL, "parent snapshot %s has %llu bytes of memory, %s has %llu", parent,
				  (unsigned long long)pinfo.mem_size, dir, (unsigned long long)mem_size);
		if (rc == 0)
			rc = memory_of(vm, parent, pp, plen, mem_size, anonymous, depth + 1);
		free(pp);
		if (rc < 0)
			return rc;
		/* Then this snapshot's own pages over the parent's. */
		int fd = open_memory(dir, mem_size, path, sizeof path);
		if (fd < 0)
			return fd;
		for (uint64_t page = 0; rc == 0 && page < mem_size / 4096; page++)
			if (bits[page / 64] & (1ULL << (page % 64)) &&
			    pread(fd, vm->mem.host + page * 4096, 4096, (off_t)(page * 4096)) != 4096)
				rc = errf(EIO, "snapshot %s: page %llu missing", path, (unsigned long long)page);
		close(fd);
		return rc;
	}
	int fd = open_memory(dir, mem_size, path, sizeof path);
	if (fd < 0)
		return fd;
	if (anonymous) {
		rc = guest_mem_alloc(&vm->mem, mem_size);
		if (rc == 0)
			rc = read_data(fd, path, vm->mem.host, mem_size);
	} else {
		/* MAP_PRIVATE: pages come from the page cache on first touch and
		 * the guest's writes stay ours. The file must not change while
		 * mapped. */
		void *p = mmap(NULL, mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
		if (p == MAP_FAILED)
			rc = errf_sys("mmap %s", path);
		else
			guest_mem_adopt(&vm->mem, p, mem_size);
	}
	close(fd);
	return rc;
}

int snapshot_memory(struct vm *vm, const char *dir, const uint8_t *payload, size_t len,
		    bool anonymous)
{
	struct snap_info info;
	int rc = snapshot_info(payload, len, &info);
	if (rc < 0)
		return rc;
	return memory_of(vm, dir, payload, len, info.mem_size, anonymous, 0);
}
