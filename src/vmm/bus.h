/*
 * bus: maps guest port-I/O and MMIO addresses to device handlers. vCPU
 * threads dispatch their exits here (under vm->dev_lock). An access nobody
 * claims reads as all ones and is otherwise ignored, as on real hardware.
 */
#ifndef KILN_VMM_BUS_H
#define KILN_VMM_BUS_H

#include <stdbool.h>
#include <stdint.h>

#define BUS_MAX 32

typedef void (*bus_fn)(void *opaque, uint64_t offset, uint8_t *data, uint32_t len, bool is_write);

struct bus_range {
	uint64_t base, len;
	bus_fn fn;
	void *opaque;
};

struct bus {
	struct bus_range r[BUS_MAX];
	int n;
};

int bus_add(struct bus *b, uint64_t base, uint64_t len, bus_fn fn, void *opaque);
/* bus_access: returns false if no device claims addr. */
bool bus_access(struct bus *b, uint64_t addr, uint8_t *data, uint32_t len, bool is_write);

#endif
