#ifndef KILN_VMM_SERIAL_H
#define KILN_VMM_SERIAL_H

#include "common/strbuf.h"

#include <stddef.h>

struct vm;
struct snap_reader;
/* serial_add: COM1 (8250 UART at 0x3f8, GSI 4), output to fd (-1: discard). */
int serial_add(struct vm *vm, int out_fd);
void serial_flush(struct vm *vm);
void serial_destroy(struct vm *vm);
/* serial_tail: up to size of the console's last bytes (2 KiB kept, plus the
 * line not yet written out) into buf; returns how many. Not locked: for a
 * post-mortem. */
size_t serial_tail(struct vm *vm, char *buf, size_t size);
void serial_save(struct vm *vm, struct strbuf *out);
int serial_load(struct vm *vm, struct snap_reader *r);

/* The other small legacy devices, each in its own file. */
int i8042_add(struct vm *vm);
int acpi_pm_add(struct vm *vm);
int pvpanic_add(struct vm *vm);
#define PVPANIC_PORT 0x505

#endif
