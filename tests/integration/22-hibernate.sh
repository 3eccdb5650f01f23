#!/bin/bash
# Hibernate then wake: the VMM process is gone in between (no compute), and
# after the wake the guest's files, processes and memory are as they were.
# tier: full: the quick tier covers it through kilnd (e2e 61, 69 and 80 hibernate and wake through kilnd (files, memory, processes))
. "$(dirname "$0")/lib.sh"
host=$(dirname "$0")/vsock_host.py

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
# Connections made the moment the restored VM's socket exists (before the
# guest has handled the vsock transport reset, which drops every connected
# socket) must not be cut by it: kiln-vmm holds them until the guest has.
timeout 60 python3 "$host" early "$T/w.vsock" 1000 8 > "$T/early.out" 2>&1 &
epid=$!
"$VMM" --restore "$T/hib" --disk "$T/d.kcow" --vsock "$T/w.vsock" --ctl "$T/w.ctl" \
	--console "$T/w.console" --no-resync 2>"$T/w.err" &
wpid=$!
at_exit "kill -9 $wpid 2>/dev/null; wait $wpid 2>/dev/null"
wait $epid
wait_for_line "$T/w.err" 'ready in' 30
check wake_first_connections "$(cat "$T/early.out"); $(grep -m1 'transport reset' "$T/w.err")" \
	eval "grep -q 'early 8/8$' '$T/early.out' && grep -q 'handled the transport reset in' '$T/w.err'"
out=$(gsh "$T/w.vsock" 'cat /mnt/f /tmp/m; cat /tmp/ticks; sleep 1; cat /tmp/ticks' | tr '\n' ' ')
read -r f m ta tb <<<"$out"
if [ "$f" = on-disk ] && [ "$m" = in-memory ] && [ "${ta:-0}" -ge "$t1" ] && [ "${tb:-0}" -gt "${ta:-0}" ]; then
	pass wake "files, memory and a running process survive: ticks $t1 before, $ta -> $tb after; $(cat "$T/w.err" | head -1)"
else
	fail wake "got '$out' (ticks before $t1); $(cat "$T/w.err")"
fi

# Diff snapshots: after a full snapshot, a diff holds only the pages changed
# since (plus what the VMM itself wrote), and restoring it gives the whole
# memory back.
kill -9 $wpid 2>/dev/null; wait $wpid 2>/dev/null
"$BUILD/kiln-disk" create "$T/e.kcow" "$T/base.ext4"
guest_start d 'vsock_sh 1000 & sleep 100000' --vsock "$T/d.vsock" --ctl "$T/d.ctl"
wait_for_line "$T/d.console" 'vsock_sh: listening' 90
m1=$(gsh "$T/d.vsock" 'dd if=/dev/urandom of=/tmp/one bs=1M count=16 2>/dev/null; md5sum < /tmp/one')
r1=$(ctl "$T/d.ctl" "{\"cmd\":\"snapshot\",\"dir\":\"$T/full\"}")
m2=$(gsh "$T/d.vsock" 'dd if=/dev/urandom of=/tmp/two bs=1M count=8 2>/dev/null; md5sum < /tmp/two')
r2=$(ctl "$T/d.ctl" "{\"cmd\":\"snapshot\",\"dir\":\"$T/diff\",\"diff\":true}")
full_kib=$(du -k "$T/full/memory" | cut -f1)
diff_kib=$(du -k "$T/diff/memory" | cut -f1)
ctl "$T/d.ctl" '{"cmd":"shutdown"}' >/dev/null
guest_wait 30
"$VMM" --restore "$T/diff" --vsock "$T/dr.vsock" --no-resync 2>"$T/dr.err" &
dpid=$!
at_exit "kill -9 $dpid 2>/dev/null; wait $dpid 2>/dev/null"
wait_for_line "$T/dr.err" 'ready in' 30
got=$(gsh "$T/dr.vsock" 'md5sum < /tmp/one; md5sum < /tmp/two' | tr '\n' ' ')
if [[ $r2 == *'"diff":true'* ]] && [ "$got" = "$m1 $m2 " ] && [ "$diff_kib" -ge 8192 ] &&
	[ "$diff_kib" -lt $((full_kib / 2)) ]; then
	pass diff_snapshot "full memory file $full_kib KiB, diff $diff_kib KiB after 8 MiB changed; restored from the diff, both files intact"
else
	fail diff_snapshot "full '$r1' $full_kib KiB, diff '$r2' $diff_kib KiB; md5s want '$m1 $m2' got '$got'; $(cat "$T/dr.err")"
fi

# A snapshot taken while the guest is in the middle of port I/O: the
# guest prints numbers to its serial console as fast as it can, so most of
# its exits are port writes, and kiln-vmm is hibernated mid-stream. KVM
# finishes such an instruction only on the next KVM_RUN; kiln-vmm does
# that before it reads the state, or the woken guest would write the same
# character again. The console before and after must join into one
# unbroken count.
guest_start io 'i=0; while [ $i -lt 10000000 ]; do i=$((i+1)); echo $i; done' --ctl "$T/io.ctl" --mem 256
wait_for_line "$T/io.console" '^2000' 60
r=$(ctl "$T/io.ctl" "{\"cmd\":\"hibernate\",\"dir\":\"$T/iohib\"}")
guest_wait 30
"$VMM" --restore "$T/iohib" --console "$T/io2.console" 2>"$T/io2.err" &
iopid=$!
at_exit "kill -9 $iopid 2>/dev/null; wait $iopid 2>/dev/null"
wait_for_line "$T/io2.console" '.' 30
sleep 1
kill -9 $iopid 2>/dev/null; wait $iopid 2>/dev/null
# The last 200 lines before and the first 200 after, joined where they met.
join=$( { tr -d '\r' < "$T/io.console" | sed -n '/^test-init: ready/,$p' | tail -c 2000
	  tr -d '\r' < "$T/io2.console" | head -c 2000; } | sed '1d;$d')
bad=$(awk 'NR > 1 && $0 != prev + 1 { print "after " prev ": \"" $0 "\""; n++ } { prev = $0 } END { exit n > 0 }' <<<"$join")
lines=$(grep -c . <<<"$join")
if [[ $r == *'"ok":true'* ]] && [ "$lines" -gt 100 ] && [ -z "$bad" ]; then
	pass snapshot_mid_io "$lines numbers around the hibernation, none repeated or lost"
else
	fail snapshot_mid_io "reply $r; $lines lines; $(head -3 <<<"$bad" | tr '\n' ' ')"
fi
