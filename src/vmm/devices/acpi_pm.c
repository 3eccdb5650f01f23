/*
 * acpi_pm: the hardware-reduced ACPI sleep and reset registers named in the
 * FADT. Linux powers off by writing SLP_TYP (from the DSDT's \_S5, which
 * we set to 5) with SLP_EN to the sleep control register, and may reboot
 * through the reset register.
 */
#include "vmm/devices/serial.h"
#include "vmm/vmm.h"

#include <string.h>

#define SLP_EN       0x20
#define SLP_TYP(v)   (((v) >> 2) & 7)
#define S5_TYPE      5

static void acpi_pm_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct vm *vm = opaque;
	if (!is_write) {
		memset(data, 0, len);
		return;
	}
	uint64_t port = PORT_ACPI_SLEEP_CTL + off;
	if (port == PORT_ACPI_SLEEP_CTL && (data[0] & SLP_EN) && SLP_TYP(data[0]) == S5_TYPE)
		vm_request_exit(vm, EXIT_POWEROFF, "guest power-off");
	else if (port == PORT_ACPI_RESET && data[0] == ACPI_RESET_VALUE)
		vm_request_exit(vm, EXIT_REBOOT, "guest reboot (ACPI reset)");
}

int acpi_pm_add(struct vm *vm)
{
	return bus_add(&vm->pio, PORT_ACPI_SLEEP_CTL, 3, acpi_pm_io, vm);
}
