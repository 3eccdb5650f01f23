/*
 * kvm_smoke: the smallest proof that /dev/kvm works. Creates a VM with one
 * page of memory, runs a few real-mode instructions that add two registers
 * and write the sum to an I/O port, and checks the I/O exit and the HLT.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

static int failf(const char *what)
{
	printf("FAIL kvm_smoke: %s: %s\n", what, strerror(errno));
	return 1;
}

int main(void)
{
	/* mov dx, 0x10; add ax, bx; out dx, ax; hlt */
	static const uint8_t code[] = { 0xba, 0x10, 0x00, 0x01, 0xd8, 0xef, 0xf4 };

	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return failf("open /dev/kvm");
	int version = ioctl(kvm, KVM_GET_API_VERSION, 0);
	if (version != KVM_API_VERSION) {
		printf("FAIL kvm_smoke: KVM API version %d, want %d\n", version, KVM_API_VERSION);
		return 1;
	}
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return failf("KVM_CREATE_VM");

	uint8_t *mem = mmap(NULL, 0x1000, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return failf("mmap");
	memcpy(mem, code, sizeof code);
	struct kvm_userspace_memory_region region = {
		.slot = 0, .guest_phys_addr = 0x1000, .memory_size = 0x1000,
		.userspace_addr = (uint64_t)mem,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		return failf("KVM_SET_USER_MEMORY_REGION");

	int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return failf("KVM_CREATE_VCPU");
	int run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	struct kvm_run *run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		return failf("mmap kvm_run");

	struct kvm_sregs sregs;
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0)
		return failf("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0)
		return failf("KVM_SET_SREGS");
	struct kvm_regs regs = { .rip = 0x1000, .rax = 2, .rbx = 40, .rflags = 2 };
	if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0)
		return failf("KVM_SET_REGS");

	int saw_out = 0;
	for (int i = 0; i < 10; i++) {
		if (ioctl(vcpu, KVM_RUN, 0) < 0)
			return failf("KVM_RUN");
		switch (run->exit_reason) {
		case KVM_EXIT_IO: {
			uint16_t v;
			memcpy(&v, (uint8_t *)run + run->io.data_offset, sizeof v);
			if (run->io.direction != KVM_EXIT_IO_OUT || run->io.port != 0x10 || v != 42) {
				printf("FAIL kvm_smoke: unexpected I/O exit port 0x%x value %u\n",
				       run->io.port, v);
				return 1;
			}
			saw_out = 1;
			break;
		}
		case KVM_EXIT_HLT:
			if (!saw_out) {
				printf("FAIL kvm_smoke: HLT before the OUT\n");
				return 1;
			}
			printf("PASS kvm_smoke: guest computed 2+40=42 and halted\n");
			return 0;
		default:
			printf("FAIL kvm_smoke: exit reason %u\n", run->exit_reason);
			return 1;
		}
	}
	printf("FAIL kvm_smoke: guest never halted\n");
	return 1;
}
