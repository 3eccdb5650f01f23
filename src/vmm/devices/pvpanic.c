/*
 * pvpanic: QEMU's panic notification device (ACPI "QEMU0001", one I/O
 * port). A panicking guest kernel writes PANICKED to it before rebooting,
 * so the VMM can tell a panic from an ordinary reboot in its exit status.
 */
#include "vmm/devices/serial.h"
#include "vmm/vmm.h"

#define PVPANIC_PANICKED     1
#define PVPANIC_CRASH_LOADED 2

static void pvpanic_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	(void)off;
	(void)len;
	struct vm *vm = opaque;
	if (!is_write)
		data[0] = PVPANIC_PANICKED;   /* the events we understand */
	else if (data[0] & PVPANIC_PANICKED)
		vm_request_exit(vm, EXIT_PANIC, "guest kernel panic");
}

int pvpanic_add(struct vm *vm)
{
	return bus_add(&vm->pio, PVPANIC_PORT, 1, pvpanic_io, vm);
}
