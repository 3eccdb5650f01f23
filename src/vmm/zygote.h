/*
 * zygote: `kiln-vmm --zygote DIR --ctl PATH` loads a template snapshot
 * once (its memory read into anonymous memory with transparent huge pages,
 * which makes fork() cheap), owns no KVM VM, stays single-threaded, and
 * answers "spawn" on its control socket by starting a child VM from it.
 */
#ifndef KILN_VMM_ZYGOTE_H
#define KILN_VMM_ZYGOTE_H

struct vmm_config;
int zygote_main(struct vmm_config *cfg, int kvm_max_vcpus);

#endif
