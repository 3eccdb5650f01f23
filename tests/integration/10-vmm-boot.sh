#!/bin/bash
# kiln-vmm boots the guest kernel: to kiln-init's ready line, with 2 vCPUs
# online, and ends with the right status for power-off, reboot and panic.
# tier: full: the quick tier covers it through kilnd (every kilnd test boots guests (template builds), and 79 checks how a dead VMM is reported)
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

# The ACPI tables the guest got disassemble cleanly with iasl, and the DSDT
# announces the virtio-mmio devices (LNRO0005) the guest bound.
guest_run acpi 'for t in DSDT FACP APIC; do echo "TABLE $t"; base64 /sys/firmware/acpi/tables/$t; done
echo "BOUND $(ls /sys/bus/virtio/devices | wc -l)"' --disk "$GUEST/rootfs-minimal.ext4,ro"
out=$(guest_output acpi)
mkdir -p "$T/acpi"
ok=1 detail=""
for t in DSDT FACP APIC; do
	awk -v t="$t" '/^TABLE /{on = ($2 == t); next} /^BOUND/{on=0} on' <<<"$out" | base64 -d > "$T/acpi/$t.dat" 2>/dev/null
	if ! (cd "$T/acpi" && iasl -d "$t.dat" >"$t.log" 2>&1) || grep -qi 'error' "$T/acpi/$t.log"; then
		ok=0 detail="$detail $t does not disassemble: $(tail -2 "$T/acpi/$t.log" | tr '\n' ' ');"
	fi
done
grep -q LNRO0005 "$T/acpi/DSDT.dsl" 2>/dev/null || { ok=0; detail="$detail no LNRO0005 in the DSDT;"; }
grep -q 'Hardware Reduced (V5) : 1' "$T/acpi/FACP.dsl" 2>/dev/null || { ok=0; detail="$detail FADT not hardware-reduced;"; }
bound=$(sed -n 's/^BOUND //p' <<<"$out")
# disk + rng: two virtio devices announced and bound by the guest's drivers
[ "$bound" = 2 ] || { ok=0; detail="$detail guest bound '$bound' virtio devices, want 2;"; }
if [ $ok = 1 ]; then
	pass acpi_tables "DSDT, FADT, MADT disassemble with iasl; $bound virtio-mmio devices bound"
else
	fail acpi_tables "$detail $(diagnose acpi)"
fi
