/*
 * exitlog: the last EXITLOG_N exits of each vCPU, kept in a ring that costs
 * a clock read and a few stores per exit, and printed to stderr when the
 * guest dies (triple fault, failed entry, internal error), so that a death
 * that KVM erases (AMD resets the vCPU on a shutdown intercept) still
 * leaves where the guest was and what it did last.
 *
 * RIP and RSP come from KVM's synced registers (KVM_CAP_SYNC_REGS: KVM
 * copies them into kvm_run on every exit, no extra ioctl); where KVM cannot
 * sync them they read as 0. Only exits that reach userspace are seen; the
 * ones KVM handles itself (page faults, interrupts, MSRs) are not.
 *
 * One writer per ring (the vCPU's own thread). The dump may run while
 * other vCPUs still write theirs: a torn entry is possible there and is
 * acceptable in a post-mortem.
 */
#ifndef KILN_VMM_EXITLOG_H
#define KILN_VMM_EXITLOG_H

#include <stdint.h>

#define EXITLOG_N 64

struct exitlog_entry {
	uint64_t t_ns;          /* CLOCK_MONOTONIC */
	uint64_t rip, rsp;
	uint64_t addr;          /* port or MMIO address; 0 for other exits */
	uint64_t data;          /* first value moved by an I/O or MMIO exit */
	uint32_t reason;        /* KVM_EXIT_* */
	uint8_t size, write;
};

struct exitlog {
	uint64_t count;         /* exits recorded in all, the ring keeps the last N */
	struct exitlog_entry e[EXITLOG_N];
};

struct vcpu;
struct vm;

/* exitlog_enable: ask KVM to sync registers into kvm_run on each exit,
 * where it can. Returns whether RIP will be recorded. */
int exitlog_enable(struct vcpu *v);
/* exitlog_record: after each KVM_RUN that returned 0. */
void exitlog_record(struct vcpu *v);
/* exitlog_dump: every vCPU's ring, oldest first, times relative to now,
 * and the guest console's last lines, to stderr. why names the death. */
void exitlog_dump(struct vm *vm, const char *why);

#endif
