/*
 * cpuid: what each vCPU sees through CPUID. We start from what KVM can
 * virtualize on this host (KVM_GET_SUPPORTED_CPUID) and normalize it the
 * way Firecracker does: announce the hypervisor, give each vCPU its APIC
 * ID, describe a topology of N cores in one socket, and hide what a guest
 * must not use (the PMU, PDCM).
 */
#include "vmm/vmm.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define EXTRA_ENTRIES 8

int cpuid_init(struct vm *vm)
{
	for (int nent = 128; nent <= 4096; nent *= 2) {
		struct kvm_cpuid2 *c = calloc(1, sizeof *c + (nent + EXTRA_ENTRIES) * sizeof c->entries[0]);
		if (!c)
			return errf(ENOMEM, "out of memory");
		c->nent = nent;
		if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, c) == 0) {
			vm->cpuid = c;
			return 0;
		}
		free(c);
		if (errno != E2BIG)
			return errf_sys("KVM_GET_SUPPORTED_CPUID");
	}
	return errf(E2BIG, "KVM_GET_SUPPORTED_CPUID: too many entries");
}

static int bits_for(int n)
{
	int b = 0;
	while ((1 << b) < n)
		b++;
	return b;
}

static void set_topology(struct kvm_cpuid_entry2 *e, uint32_t sub, int apic_id, int nvcpus)
{
	int shift = bits_for(nvcpus);
	memset(e, 0, sizeof *e);
	e->index = sub;
	e->flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
	e->edx = (uint32_t)apic_id;
	if (sub == 0) {          /* SMT level: one thread per core */
		e->eax = 0;
		e->ebx = 1;
		e->ecx = 0 | (1 << 8);
	} else if (sub == 1) {   /* core level: all vCPUs in one package */
		e->eax = (uint32_t)shift;
		e->ebx = (uint32_t)nvcpus;
		e->ecx = 1 | (2 << 8);
	} else {                 /* invalid level ends the enumeration */
		e->ecx = sub;
	}
}

int cpuid_set_vcpu(struct vm *vm, struct vcpu *v)
{
	const struct kvm_cpuid2 *src = vm->cpuid;
	size_t size = sizeof *src + (src->nent + EXTRA_ENTRIES) * sizeof src->entries[0];
	struct kvm_cpuid2 *c = malloc(size);
	if (!c)
		return errf(ENOMEM, "out of memory");
	int n = 0, nvcpus = vm->nvcpus, id = v->index;
	bool has_b = false, has_1f = false;
	uint32_t max_basic = 0;

	for (uint32_t i = 0; i < src->nent; i++) {
		struct kvm_cpuid_entry2 e = src->entries[i];
		switch (e.function) {
		case 0:
			max_basic = e.eax;
			break;
		case 1:
			e.ebx = (e.ebx & 0xff) | (8 << 8) |
				((uint32_t)(nvcpus > 255 ? 255 : nvcpus) << 16) | ((uint32_t)id << 24);
			if (nvcpus > 1)
				e.edx |= 1u << 28;           /* HTT: >1 logical CPU */
			e.ecx |= 1u << 31;                   /* hypervisor present */
			e.ecx &= ~(1u << 15);                /* PDCM: no perf MSR */
			if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0)
				e.ecx |= 1u << 24;
			break;
		case 4:
			/* Intel cache leaf: cores per package, and who shares each
			 * cache (L3 everyone, L1/L2 one core). */
			e.eax &= 0x3fff;
			e.eax |= (uint32_t)(nvcpus - 1) << 26;
			if (((e.eax >> 5) & 7) >= 3)
				e.eax |= (uint32_t)(nvcpus - 1) << 14;
			break;
		case 0xa:                                    /* no PMU */
			e.eax = e.ebx = e.ecx = e.edx = 0;
			break;
		case 0xb:
			has_b = true;
			continue;                            /* rewritten below */
		case 0x1f:
			has_1f = true;
			continue;
		case 0x80000008:
			e.ecx = (e.ecx & ~0xf0ffu) | (uint32_t)(nvcpus - 1) |
				((uint32_t)bits_for(nvcpus) << 12);
			break;
		case 0x8000001e:                             /* AMD extended APIC ID */
			e.eax = (uint32_t)id;
			e.ebx = (uint32_t)id & 0xff;
			e.ecx = 0;
			break;
		}
		c->entries[n++] = e;
	}
	if (has_b || max_basic >= 0xb)
		for (uint32_t sub = 0; sub < 3; sub++) {
			set_topology(&c->entries[n], sub, id, nvcpus);
			c->entries[n++].function = 0xb;
		}
	if (has_1f)
		for (uint32_t sub = 0; sub < 3; sub++) {
			set_topology(&c->entries[n], sub, id, nvcpus);
			c->entries[n++].function = 0x1f;
		}
	c->nent = (uint32_t)n;
	int rc = 0;
	if (ioctl(v->fd, KVM_SET_CPUID2, c) < 0)
		rc = errf_sys("KVM_SET_CPUID2 on vCPU %d", id);
	free(c);
	return rc;
}
