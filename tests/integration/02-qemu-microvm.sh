#!/bin/bash
# The reference peer: QEMU's microvm machine, on KVM inside the emulated
# host, boots the guest kernel and initramfs to kiln-init's ready line.
# This is the run the kiln-vmm boot benchmark is compared against.
# tier: full: the peer VMM, for comparison (bench/ measures against it)
. "$(dirname "$0")/lib.sh"
out=$T/qemu.out
start=$(now_ms)
timeout 120 qemu-system-x86_64 -M microvm,acpi=on -enable-kvm -cpu host \
	-m 256 -smp 1 -nodefaults -no-user-config -nographic -no-reboot \
	-serial "file:$out" -kernel "$GUEST/vmlinux" -initrd "$GUEST/initramfs.cpio" \
	-append "console=ttyS0 reboot=t panic=-1 quiet" </dev/null >"$T/qemu.err" 2>&1 &
qpid=$!
at_exit "kill $qpid 2>/dev/null; wait $qpid 2>/dev/null"  # TERM: timeout passes it on
if wait_for_line "$out" 'kiln-init: ready' 110; then
	ms=$(( $(now_ms) - start ))
	line=$(grep -m1 'kiln-init: ready' "$out" | tr -d '\r')
	case $line in
	*"modules loaded"*) pass qemu_microvm_boot "ready line after ${ms} ms: $line" ;;
	*) fail qemu_microvm_boot "guest booted but modules failed: $line" ;;
	esac
else
	fail qemu_microvm_boot "no ready line in 110 s; console tail: $(tail -c 400 "$out" | tr '\r\n' '  ') $(cat "$T/qemu.err")"
fi
