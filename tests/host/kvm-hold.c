/*
 * kvm-hold: runs in the emulated KVM host for its whole life and holds
 * one idle KVM VM: a VM with an in-kernel irqchip and one vCPU that never
 * runs. Why: creating and destroying VMs flips two of the host kernel's
 * static keys each time their count passes 0 (KVM_CREATE_VM and its
 * release: preempt_notifier_key; a vCPU's local APIC, created software-
 * disabled and enabled by the guest: apic_sw_disabled, its decrement
 * deferred a second), and a flip patches kernel text live (text_poke_bp:
 * int3 on every CPU, IPIs). Traced in the emulated host (session 14), 2.5
 * minutes of fork and jail tests patched it 25 times, every one from
 * these two keys; and the emulated host's hangs sit in that patching
 * (docs/reliability.md: one vCPU in exc_int3, the other spinning), which
 * multi-threaded TCG handles badly (code modified under another vCPU's
 * translated blocks). With this VM alive both counts stay above 0, so
 * kiln's VMs coming and going patch nothing. It needs nothing from the
 * VM but its existence: it creates it, then sleeps.
 */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		perror("kvm-hold: /dev/kvm");
		return 1;
	}
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0) {
		perror("kvm-hold: KVM_CREATE_VM");
		return 1;
	}
	/* The local APIC is in the kernel only with an irqchip there. */
	if (ioctl(vm, KVM_CREATE_IRQCHIP, 0) < 0) {
		perror("kvm-hold: KVM_CREATE_IRQCHIP");
		return 1;
	}
	if (ioctl(vm, KVM_CREATE_VCPU, 0) < 0) {
		perror("kvm-hold: KVM_CREATE_VCPU");
		return 1;
	}
	fprintf(stderr, "kvm-hold: holding an idle VM (static keys stay on)\n");
	for (;;)
		pause();
}
