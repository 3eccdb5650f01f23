#!/bin/bash
# virtio-rng: the guest's hw_random uses it and reads distinct entropy.
. "$(dirname "$0")/lib.sh"
guest_run rng 'cat /sys/class/misc/hw_random/rng_current
dd if=/dev/hwrng bs=32 count=1 2>/dev/null | hexdump -v -e "32/1 \"%02x\"" ; echo
dd if=/dev/hwrng bs=32 count=1 2>/dev/null | hexdump -v -e "32/1 \"%02x\"" ; echo'
mapfile -t lines < <(guest_output rng)
if [[ ${lines[0]:-} == virtio_rng* ]] && [ ${#lines[1]} = 64 ] && [ "${lines[1]}" != "${lines[2]:-}" ] &&
	[ "${lines[1]}" != "$(printf '0%.0s' {1..64})" ]; then
	pass rng_virtio "rng_current=${lines[0]}, two reads differ"
else
	fail rng_virtio "got '${lines[*]:-}'; $(diagnose rng)"
fi
