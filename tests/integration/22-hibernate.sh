#!/bin/bash
# Hibernate then wake: the VMM process is gone in between (no compute), and
# after the wake the guest's files, processes and memory are as they were.
. "$(dirname "$0")/lib.sh"
host=$(dirname "$0")/vsock_host.py
ctl() { printf '%s\n' "$2" | timeout 120 socat -t 120 - "UNIX-CONNECT:$1"; }
gsh() { timeout 30 python3 "$host" sh "$1" 1000 "$2"; }

mke2fs -q -F -t ext4 "$T/base.ext4" 64M >/dev/null
"$BUILD/kiln-disk" create "$T/d.kcow" "$T/base.ext4"
guest_start h 'mount -t ext4 /dev/vda /mnt && vsock_sh 1000 &
(i=0; while true; do i=$((i+1)); echo $i > /tmp/ticks; sleep 0.2; done) &
sleep 100000' --disk "$T/d.kcow" --vsock "$T/h.vsock" --ctl "$T/h.ctl"
wait_for_line "$T/h.console" 'vsock_sh: listening' 90 || fail hibernate_setup "$(diagnose h)"
gsh "$T/h.vsock" 'echo on-disk > /mnt/f; sync; echo in-memory > /tmp/m' >/dev/null
t1=$(gsh "$T/h.vsock" 'cat /tmp/ticks')

r=$(ctl "$T/h.ctl" "{\"cmd\":\"hibernate\",\"dir\":\"$T/hib\"}")
guest_wait 30
if [[ $r == *'"ok":true'* ]] && [ "$GUEST_STATUS" = 0 ] && [ ! -e "$T/h.vsock" ] && [ -s "$T/hib/state" ]; then
	pass hibernate "$r; kiln-vmm exited 0, no process left"
else
	fail hibernate "reply $r, status $GUEST_STATUS"
fi

sleep 2
"$VMM" --restore "$T/hib" --disk "$T/d.kcow" --vsock "$T/w.vsock" --ctl "$T/w.ctl" \
	--console "$T/w.console" --no-resync 2>"$T/w.err" &
wpid=$!
at_exit "kill -9 $wpid 2>/dev/null; wait $wpid 2>/dev/null"
wait_for_line "$T/w.err" 'ready in' 30
out=$(gsh "$T/w.vsock" 'cat /mnt/f /tmp/m; cat /tmp/ticks; sleep 1; cat /tmp/ticks' | tr '\n' ' ')
read -r f m ta tb <<<"$out"
if [ "$f" = on-disk ] && [ "$m" = in-memory ] && [ "${ta:-0}" -ge "$t1" ] && [ "${tb:-0}" -gt "${ta:-0}" ]; then
	pass wake "files, memory and a running process survive: ticks $t1 before, $ta -> $tb after; $(cat "$T/w.err" | head -1)"
else
	fail wake "got '$out' (ticks before $t1); $(cat "$T/w.err")"
fi
