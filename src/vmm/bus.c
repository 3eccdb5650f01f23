#include "vmm/bus.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>

int bus_add(struct bus *b, uint64_t base, uint64_t len, bus_fn fn, void *opaque)
{
	if (b->n == BUS_MAX)
		return errf(ENOSPC, "too many devices on one bus");
	for (int i = 0; i < b->n; i++)
		if (base < b->r[i].base + b->r[i].len && b->r[i].base < base + len)
			return errf(EEXIST, "device range 0x%llx overlaps another",
				    (unsigned long long)base);
	b->r[b->n++] = (struct bus_range){ base, len, fn, opaque };
	return 0;
}

bool bus_access(struct bus *b, uint64_t addr, uint8_t *data, uint32_t len, bool is_write)
{
	for (int i = 0; i < b->n; i++) {
		struct bus_range *r = &b->r[i];
		if (addr >= r->base && addr - r->base < r->len) {
			r->fn(r->opaque, addr - r->base, data, len, is_write);
			return true;
		}
	}
	if (!is_write)
		memset(data, 0xff, len);
	return false;
}
