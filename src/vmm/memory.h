/*
 * memory: guest RAM. One host mapping holds all of it; the guest sees the
 * part below the 32-bit MMIO hole at [0, low_size) and the rest, if any,
 * at [4 GiB, 4 GiB + high_size). Every guest-physical address a device
 * uses goes through gpa_ptr(), which refuses anything outside guest RAM:
 * the guest is hostile, and its descriptors are just numbers.
 */
#ifndef KILN_VMM_MEMORY_H
#define KILN_VMM_MEMORY_H

#include <stddef.h>
#include <stdint.h>

struct guest_mem {
	uint8_t *host;
	uint64_t size;       /* total bytes */
	uint64_t low_size;   /* bytes mapped at gpa 0 */
	uint64_t high_size;  /* bytes mapped at gpa 4 GiB */
	/* Pages the VMM itself wrote (device DMA), one bit per 4 KiB page of
	 * the host mapping; KVM's dirty log does not see these writes. NULL
	 * unless dirty tracking is on. */
	uint64_t *dirty;
};

/* mem_mark_dirty: note a VMM write to [host, host+len) inside guest RAM. */
static inline void mem_mark_dirty(struct guest_mem *m, const void *host, uint64_t len)
{
	if (!m->dirty || !len)
		return;
	uint64_t first = (uint64_t)((const uint8_t *)host - m->host) >> 12;
	uint64_t last = ((uint64_t)((const uint8_t *)host - m->host) + len - 1) >> 12;
	for (uint64_t p = first; p <= last; p++)
		m->dirty[p / 64] |= 1ULL << (p % 64);
}

int guest_mem_alloc(struct guest_mem *m, uint64_t size);
/* guest_mem_adopt: use an existing mapping (a snapshot's memory file). */
void guest_mem_adopt(struct guest_mem *m, void *host, uint64_t size);
void guest_mem_free(struct guest_mem *m);

/* gpa_ptr: the host address of [gpa, gpa+len), or NULL unless that whole
 * range is guest RAM in one piece. */
static inline void *gpa_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	if (len > m->size)
		return NULL;
	if (gpa < m->low_size) {
		if (len > m->low_size - gpa)
			return NULL;
		return m->host + gpa;
	}
	const uint64_t high = 0x100000000ULL;
	if (gpa >= high && gpa - high < m->high_size && len <= m->high_size - (gpa - high))
		return m->host + m->low_size + (gpa - high);
	return NULL;
}

#endif
