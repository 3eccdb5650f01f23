/*
 * kvmstats: KVM's binary statistics (Documentation/virt/kvm/api.rst,
 * "KVM_GET_STATS_FD"), read from each vCPU's stats file and summed.
 *
 * The file holds a header, descriptors (flags, exponent, size, offset,
 * bucket size, then a name of header.name_size bytes) and the data, each
 * at an offset the header gives; a counter's value is the u64 at
 * data_offset + its descriptor's offset. Every vCPU of one VM has the
 * same layout, but reading it again per call keeps no state beyond the fd
 * and costs a few kilobytes: this is for benchmarks, not a hot path.
 */
#include "vmm/kvmstats.h"
#include "vmm/vmm.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* What bench/counts reports, in this order. */
static const char *const wanted[] = {
	"exits", "io_exits", "mmio_exits", "halt_exits", "irq_exits",
	"irq_window_exits", "request_irq_exits", "signal_exits", "insn_emulation",
	"hypercalls", "irq_injections", "halt_wakeup", "pf_taken", "pf_fixed",
};
#define NWANTED (sizeof wanted / sizeof wanted[0])
#define DESCS_MAX (1u << 20)   /* a sanity bound on what the header may claim */

/* add_vcpu: adds fd's counters to sum[], marking the ones found. */
static int add_vcpu(int fd, uint64_t sum[NWANTED], bool found[NWANTED])
{
	struct kvm_stats_header hdr;
	if (pread(fd, &hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr)
		return errf_sys("KVM statistics: header");
	size_t one = sizeof(struct kvm_stats_desc) + hdr.name_size;
	if (hdr.name_size == 0 || hdr.name_size > 256 || (size_t)hdr.num_desc * one > DESCS_MAX)
		return errf(EPROTO, "KVM statistics: a header of %u descriptors of %zu bytes",
			    hdr.num_desc, one);
	size_t len = (size_t)hdr.num_desc * one;
	char *descs = malloc(len ? len : 1);
	if (!descs)
		return errf(ENOMEM, "KVM statistics: %zu bytes", len);
	if (pread(fd, descs, len, hdr.desc_offset) != (ssize_t)len) {
		free(descs);
		return errf_sys("KVM statistics: descriptors");
	}
	for (uint32_t i = 0; i < hdr.num_desc; i++) {
		const struct kvm_stats_desc *d = (const void *)(descs + i * one);
		size_t nlen = strnlen(d->name, hdr.name_size);
		if ((d->flags & KVM_STATS_TYPE_MASK) != KVM_STATS_TYPE_CUMULATIVE || d->size != 1)
			continue;
		for (size_t w = 0; w < NWANTED; w++) {
			if (strlen(wanted[w]) != nlen || memcmp(wanted[w], d->name, nlen) != 0)
				continue;
			uint64_t v;
			if (pread(fd, &v, sizeof v, (off_t)hdr.data_offset + d->offset) == (ssize_t)sizeof v) {
				sum[w] += v;
				found[w] = true;
			}
			break;
		}
	}
	free(descs);
	return 0;
}

int kvmstats_json(struct vm *vm, struct strbuf *out)
{
	uint64_t sum[NWANTED] = { 0 };
	bool found[NWANTED] = { false };
	uint64_t user = 0;
	for (int i = 0; i < vm->nvcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		if (v->stats_fd < 0)
			return errf(ENOTSUP, "KVM has no statistics for vCPU %d (KVM_GET_STATS_FD: Linux 5.14 or later)", i);
		int rc = add_vcpu(v->stats_fd, sum, found);
		if (rc < 0)
			return rc;
		user += v->exits.count;
	}
	strbuf_printf(out, ",\"kvm\":{");
	const char *sep = "";
	for (size_t w = 0; w < NWANTED; w++) {
		if (!found[w])
			continue;
		strbuf_printf(out, "%s\"%s\":%llu", sep, wanted[w], (unsigned long long)sum[w]);
		sep = ",";
	}
	strbuf_printf(out, "},\"user_exits\":%llu", (unsigned long long)user);
	return 0;
}
