/*
 * heartbeat: runs in the emulated KVM host and writes one byte every
 * 5 seconds to QEMU's debug console port (isa-debugcon at 0x402), which
 * tests/host/run watches. The channel is separate from the serial console
 * so that the command's output is never interleaved with it, and needs no
 * driver in the host. When the bytes stop, the host's kernel is hung
 * (under TCG its vCPUs have been seen to halt for good, timers and all),
 * and tests/host/run stops it instead of waiting for a test's timeout.
 */
#include <stdio.h>
#include <sys/io.h>
#include <unistd.h>

#define DEBUGCON_PORT 0x402

int main(void)
{
	if (ioperm(DEBUGCON_PORT, 1, 1) < 0) {
		perror("heartbeat: ioperm");
		return 1;
	}
	for (;;) {
		outb('.', DEBUGCON_PORT);
		sleep(5);
	}
}
