/*
 * kvm: the VM-wide KVM objects, created in the order KVM requires: the TSS
 * and identity-map pages (needed by Intel VMX for real-mode emulation,
 * harmless on AMD), the in-kernel interrupt controllers (PIC, IOAPIC and
 * per-vCPU LAPICs) before any vCPU exists, then the PIT.
 */
#include "vmm/vmm.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static const struct { int cap; const char *name; } required_caps[] = {
	{ KVM_CAP_IRQCHIP, "IRQCHIP" },
	{ KVM_CAP_IOEVENTFD, "IOEVENTFD" },
	{ KVM_CAP_IRQFD, "IRQFD" },
	{ KVM_CAP_USER_MEMORY, "USER_MEMORY" },
	{ KVM_CAP_SET_TSS_ADDR, "SET_TSS_ADDR" },
	{ KVM_CAP_PIT2, "PIT2" },
	{ KVM_CAP_EXT_CPUID, "EXT_CPUID" },
	{ KVM_CAP_MP_STATE, "MP_STATE" },
};

int kvm_open_vm(struct vm *vm)
{
	/* A jailed VMM has no /dev/kvm: it was opened before the jail. */
	vm->kvm_fd = vm->cfg->kvm_fd >= 0 ? vm->cfg->kvm_fd : open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0)
		return errf_sys("cannot open /dev/kvm");
	int version = ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0);
	if (version != KVM_API_VERSION)
		return errf(ENOTSUP, "/dev/kvm speaks API version %d, kiln-vmm needs %d",
			    version, KVM_API_VERSION);
	for (size_t i = 0; i < sizeof required_caps / sizeof required_caps[0]; i++)
		if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, required_caps[i].cap) <= 0)
			return errf(ENOTSUP, "KVM lacks the %s capability", required_caps[i].name);

	vm->run_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vm->run_size <= 0)
		return errf_sys("KVM_GET_VCPU_MMAP_SIZE");

	/* KVM_CREATE_VM can fail with EINTR under signal pressure. */
	do
		vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	while (vm->vm_fd < 0 && errno == EINTR);
	if (vm->vm_fd < 0)
		return errf_sys("KVM_CREATE_VM");

	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, TSS_ADDR) < 0)
		return errf_sys("KVM_SET_TSS_ADDR");
	uint64_t idmap = IDMAP_ADDR;
	if (ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &idmap) < 0)
		return errf_sys("KVM_SET_IDENTITY_MAP_ADDR");
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return errf_sys("KVM_CREATE_IRQCHIP");
	/* SPEAKER_DUMMY: port 0x61 is handled in the kernel, not by us. */
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return errf_sys("KVM_CREATE_PIT2");
	return 0;
}

int kvm_set_memory(struct vm *vm)
{
	uint32_t flags = vm->dirty_logging ? KVM_MEM_LOG_DIRTY_PAGES : 0;
	struct kvm_userspace_memory_region low = {
		.slot = 0,
		.flags = flags,
		.guest_phys_addr = 0,
		.memory_size = vm->mem.low_size,
		.userspace_addr = (uint64_t)vm->mem.host,
	};
	if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &low) < 0)
		return errf_sys("KVM_SET_USER_MEMORY_REGION (low memory: %llu MiB at %p, flags %u)",
				(unsigned long long)(low.memory_size >> 20), vm->mem.host, flags);
	if (vm->mem.high_size) {
		struct kvm_userspace_memory_region high = {
			.slot = 1,
			.flags = flags,
			.guest_phys_addr = MMIO_HOLE_END,
			.memory_size = vm->mem.high_size,
			.userspace_addr = (uint64_t)vm->mem.host + vm->mem.low_size,
		};
		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &high) < 0)
			return errf_sys("KVM_SET_USER_MEMORY_REGION (high memory)");
	}
	return 0;
}

int kvm_irq_line(struct vm *vm, int gsi, int level)
{
	struct kvm_irq_level irq = { .irq = (uint32_t)gsi, .level = (uint32_t)level };
	if (ioctl(vm->vm_fd, KVM_IRQ_LINE, &irq) < 0)
		return errf_sys("KVM_IRQ_LINE %d", gsi);
	return 0;
}

int kvm_dirty_logging(struct vm *vm, bool on)
{
	if (vm->dirty_logging == on)
		return 0;
	vm->dirty_logging = on;
	if (on && !vm->mem.dirty) {
		vm->mem.dirty = calloc((vm->mem.size / 4096 + 63) / 64, 8);
		if (!vm->mem.dirty)
			return errf(ENOMEM, "out of memory");
	}
	return kvm_set_memory(vm);
}

/* kvm_collect_dirty: OR the pages dirtied since the last call (KVM's log,
 * which this call clears, and the VMM's own writes) into bits, one bit per
 * 4 KiB page of guest memory, and clear the VMM's bits. */
int kvm_collect_dirty(struct vm *vm, uint64_t *bits)
{
	struct { uint64_t gpa_pages_off, pages; int slot; } slots[2] = {
		{ 0, vm->mem.low_size / 4096, 0 },
		{ vm->mem.low_size / 4096, vm->mem.high_size / 4096, 1 },
	};
	for (int s = 0; s < 2; s++) {
		if (!slots[s].pages)
			continue;
		uint64_t words = (slots[s].pages + 63) / 64;
		uint64_t *log = calloc(words, 8);
		if (!log)
			return errf(ENOMEM, "out of memory");
		struct kvm_dirty_log dl = { .slot = (uint32_t)slots[s].slot, .dirty_bitmap = log };
		if (ioctl(vm->vm_fd, KVM_GET_DIRTY_LOG, &dl) < 0) {
			free(log);
			return errf_sys("KVM_GET_DIRTY_LOG");
		}
		for (uint64_t p = 0; p < slots[s].pages; p++)
			if (log[p / 64] & (1ULL << (p % 64))) {
				uint64_t q = slots[s].gpa_pages_off + p;
				bits[q / 64] |= 1ULL << (q % 64);
			}
		free(log);
	}
	uint64_t words = (vm->mem.size / 4096 + 63) / 64;
	if (vm->mem.dirty)
		for (uint64_t i = 0; i < words; i++) {
			bits[i] |= vm->mem.dirty[i];
			vm->mem.dirty[i] = 0;
		}
	return 0;
}
