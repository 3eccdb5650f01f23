/*
 * i8042: the keyboard controller, only so that the guest can reset the
 * machine: `reboot=k` makes Linux write 0xfe (pulse the reset line) to the
 * command port, which ends the VMM with the reboot status.
 */
#include "vmm/devices/serial.h"
#include "vmm/vmm.h"

#include <string.h>

#define I8042_DATA    0x60
#define I8042_COMMAND 0x64
#define CMD_RESET_CPU 0xfe

static void i8042_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct vm *vm = opaque;
	if (!is_write) {
		memset(data, 0, len);         /* no data, input buffer empty */
		return;
	}
	if (off == I8042_COMMAND - I8042_DATA && data[0] == CMD_RESET_CPU)
		vm_request_exit(vm, EXIT_REBOOT, "guest reboot (i8042 reset)");
}

int i8042_add(struct vm *vm)
{
	return bus_add(&vm->pio, I8042_DATA, 5, i8042_io, vm);
}
