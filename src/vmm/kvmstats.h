/*
 * kvmstats: KVM's own counters for this VM's vCPUs, summed (KVM's binary
 * statistics, KVM_GET_STATS_FD, Linux 5.14): exits by kind, interrupts
 * injected, halts. The exitlog sees only the exits that reach userspace;
 * most (interrupt windows, halts, page faults, MSRs) KVM handles itself.
 * These counts do not depend on how fast the machine is, so they are the
 * budget that carries a figure measured under emulation to hardware
 * (docs/benchmarks.md, bench/counts).
 */
#ifndef KILN_VMM_KVMSTATS_H
#define KILN_VMM_KVMSTATS_H

#include "common/strbuf.h"

struct vm;

/* kvmstats_json: appends ,"kvm":{"exits":N,...} with the counters this
 * kernel has (a name it lacks is left out) and ,"user_exits":N, the exits
 * that came to the VMM. 0, or -errno (errmsg set) when KVM has no
 * statistics for a vCPU. */
int kvmstats_json(struct vm *vm, struct strbuf *out);

#endif
