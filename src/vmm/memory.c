#include "vmm/memory.h"
#include "vmm/vmm.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int guest_mem_alloc(struct guest_mem *m, uint64_t size)
{
	memset(m, 0, sizeof *m);
	/* MAP_NORESERVE: guest memory is touched lazily; a 4 GiB guest that
	 * uses 100 MiB costs 100 MiB. MAP_PRIVATE|MAP_ANONYMOUS memory is
	 * inherited copy-on-write by fork(), which zygotes rely on. */
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return errf_sys("cannot map %llu MiB of guest memory",
				(unsigned long long)(size >> 20));
	/* Huge pages make the guest's TLB reach and a later fork() cheaper. */
	if (!getenv("KILN_VMM_NO_THP"))	/* issue 21's comparison */
		madvise(p, size, MADV_HUGEPAGE);
	guest_mem_adopt(m, p, size);
	return 0;
}

void guest_mem_adopt(struct guest_mem *m, void *host, uint64_t size)
{
	m->host = host;
	m->size = size;
	m->low_size = size < MMIO_HOLE ? size : MMIO_HOLE;
	m->high_size = size - m->low_size;
}

void guest_mem_free(struct guest_mem *m)
{
	if (m->host)
		munmap(m->host, m->size);
	free(m->dirty);
	memset(m, 0, sizeof *m);
}
