#!/bin/bash
# kiln-vmm boots the guest kernel: to kiln-init's ready line, with 2 vCPUs
# online, and ends with the right status for power-off, reboot and panic.
. "$(dirname "$0")/lib.sh"

# The real initramfs (kiln-init) to its ready line.
"$VMM" --kernel "$GUEST/vmlinux" --initrd "$GUEST/initramfs.cpio" --console "$T/boot.console" \
	--vsock "$T/boot.vsock" 2>"$T/boot.err" &
pid=$!
at_exit "kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null"
if wait_for_line "$T/boot.console" 'kiln-init: ready' 60; then
	pass vmm_boot_ready "$(grep -m1 'kiln-init: ready' "$T/boot.console" | tr -d '\r')"
else
	GUEST_STATUS=?; fail vmm_boot_ready "$(diagnose boot)"
fi
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null

# Two vCPUs, both online in the guest.
guest_run smp 'cat /sys/devices/system/cpu/online; grep -c ^processor /proc/cpuinfo' --vcpus 2
out=$(guest_output smp | tr '\n' ' ')
if [ "$GUEST_STATUS" = 0 ] && [ "$out" = "0-1 2 " ]; then
	pass vmm_two_vcpus "online: $out"
else
	fail vmm_two_vcpus "got '$out'; $(diagnose smp)"
fi

# Exit statuses: power-off 0 (checked above), reboot 3, panic 5.
guest_run reboot 'reboot -f'
check vmm_exit_reboot "guest reboot gives status 3 (got $GUEST_STATUS)" [ "$GUEST_STATUS" = 3 ]
guest_run panic 'echo c > /proc/sysrq-trigger'
check vmm_exit_panic "guest panic gives status 5 (got $GUEST_STATUS)" [ "$GUEST_STATUS" = 5 ]
