#!/bin/bash
# kiln-init as PID 1 in a real guest: a read-only template root with a
# tmpfs or disk overlay, network setup from the kernel command line,
# hostname, RESYNC (clock, entropy, hostname, identity), orphan reaping,
# a memory hog and a fork bomb that do not take the agent down, and
# POWEROFF.
# tier: full: the quick tier covers it through kilnd (every kilnd test runs kiln-init as PID 1 (resync at fork and wake in e2e 61))
. "$(dirname "$0")/lib.sh"

# Guest 1: the template image attached read-only, a tmpfs overlay, a NIC
# on a TAP whose host side is 10.201.3.1.
template=$(root_disk 128) || { fail system_boot "cannot make a root disk"; exit 1; }
sum_before=$(md5sum < "$template")
if ! boot_guest -R "$template" -N -r "kiln.root=/dev/vda kiln.overlay=tmpfs" \
	-a "kiln.ip=10.201.3.2/24 kiln.gw=10.201.3.1 kiln.dns=10.201.3.1 kiln.hostname=sbx-one kiln.pids_max=1024"; then
	fail system_boot "the guest's agent did not answer"
	exit 1
fi
out=$(kg exec -- sh -c 'echo written > /etc/kiln-test && cat /etc/kiln-test && grep " / " /proc/mounts')
check overlay_tmpfs_root "$(echo $out)" grep -q '^written' <<<"$out"
check overlay_is_root "/ is overlayfs" grep -q '^overlay / overlay' <<<"$(cut -d' ' -f1-3 <<<"$(tail -1 <<<"$out")")"

out=$(kg exec -- ip -4 addr show eth0)
route=$(kg exec -- ip route)
dns=$(kg exec -- cat /etc/resolv.conf)
check net_address "$(grep -o 'inet [0-9./]*' <<<"$out")" grep -q 'inet 10.201.3.2/24' <<<"$out"
check net_route "$(echo $route)" grep -q 'default via 10.201.3.1 dev eth0' <<<"$route"
check net_dns "$dns" test "$dns" = "nameserver 10.201.3.1"
out=$(kg exec -T 30 -- ping -c 2 -W 5 10.201.3.1 | tail -2 | tr '\n' ' ')
check net_ping_host "$out" grep -q '2 packets received' <<<"$out"
lo=$(kg exec -- ip -4 addr show lo)
check net_lo "$(grep -o 'inet [0-9./]*' <<<"$lo")" grep -q 'inet 127.0.0.1/8' <<<"$lo"
out=$(kg exec -- hostname)
check hostname "$out" test "$out" = sbx-one

# RESYNC: the clock jumps to 2033-05-18, a new hostname and identity.
kg resync --time 2000000000000000000 --entropy 64 --hostname resynced --identity sbx-42; rc=$?
t=$(kg exec -- date +%s)
h=$(kg exec -- hostname)
id=$(kg exec -- cat /run/kiln/identity)
info_id=$(kg info | sed -n 's/^identity=//p')
check resync "status $rc; date +%s=$t hostname=$h identity=$id/$info_id" \
	test "$rc" = 0 -a "$t" -ge 2000000000 -a "$t" -lt 2000000600 -a "$h" = resynced -a "$id" = sbx-42 -a "$info_id" = sbx-42
err=$(kg resync --hostname "$(printf 'x%.0s' $(seq 1 70))" 2>&1)
check resync_bad_hostname "$err" grep -q 'HOSTNAME longer than 64' <<<"$err"

# Orphans are reaped by PID 1.
kg exec -- sh -c 'for i in 1 2 3 4 5 6 7 8; do (sleep 0.3 &); done'
sleep 2
z=$(kg exec -- sh -c 'grep -l "^State:.*Z" /proc/[0-9]*/status 2>/dev/null | wc -l')
check orphans_reaped "$z zombies" test "$z" = 0

# A memory hog is killed inside the user cgroup; the agent lives on.
kg exec -T 300 -- sh -c 'x=aaaaaaaaaaaaaaaa; while :; do x=$x$x; done' 2>"$T/hog.err"; rc=$?
events=$(kg exec -- cat /sys/fs/cgroup/kiln-user/memory.events | tr '\n' ' ')
check memory_hog "status $rc ($(tr '\n' ' ' < "$T/hog.err")); memory.events: $events" \
	test "$rc" != 0 -a "$rc" != 124
check agent_after_memory_hog "ping" eval "kg --timeout 60 ping >/dev/null"

# A fork bomb hits pids.max; meanwhile the agent answers and starts processes.
# (The bomb runs in the background of a shell that stays, so that its
# timeout has something to kill: all of it, through the command's cgroup.)
kg exec -T 25 -- sh -c 'b() { b | b & }; b; sleep 600' >/dev/null 2>&1 &
bomb=$!
sleep 5
t0=$(now_ms)
kg --timeout 60 ping >/dev/null
ping_ms=$(( $(now_ms) - t0 ))
t0=$(now_ms)
during=$(kg --timeout 60 exec -- echo alive)
ms=$(( $(now_ms) - t0 ))
pids=$(kg --timeout 60 exec -- cat /sys/fs/cgroup/kiln-user/pids.max /sys/fs/cgroup/kiln-user/pids.events | tr '\n' ' ')
wait "$bomb"; bomb_rc=$?
# The timeout kills the command's cgroup; hundreds of processes take a
# while to go under emulation (2 s was not always enough): up to 30 s.
for _ in $(seq 1 30); do
	left=$(kg --timeout 60 exec -- cat /sys/fs/cgroup/kiln-user/pids.current)
	[ "${left:-999}" -lt 20 ] && break
	sleep 1
done
check fork_bomb "during the bomb: ping in $ping_ms ms, exec '$during' in $ms ms; pids.max/events: $pids; timeout status $bomb_rc; after: $left in the cgroup" \
	test "$during" = alive -a "$bomb_rc" = 124 -a "${left:-999}" -lt 20

# POWEROFF: the VM stops.
kg poweroff; rc=$?
for i in $(seq 1 600); do kill -0 "$GUEST_VM" 2>/dev/null || break; sleep 0.1; done
check poweroff "status $rc; kiln-vmm $(kill -0 "$GUEST_VM" 2>/dev/null && echo 'still runs' || echo exited); console: $(tail -2 "$GUEST_CONSOLE" | tr '\r\n' '  ')" \
	eval "! kill -0 $GUEST_VM 2>/dev/null"
check template_untouched "the read-only template's checksum" test "$(md5sum < "$template")" = "$sum_before"

# Guest 2: the same template with a disk as the overlay's upper layer; what
# is written survives in that disk.
upper=$T/upper.ext4
truncate -s 64M "$upper" && mke2fs -q -t ext4 "$upper"
if ! boot_guest -c 4 -R "$template" -d "$upper" -r "kiln.root=/dev/vda kiln.overlay=/dev/vdb"; then
	fail overlay_disk "the second guest's agent did not answer"
	exit 1
fi
kg exec -- sh -c 'echo persisted > /root/kept' && kg poweroff
for i in $(seq 1 600); do kill -0 "$GUEST_VM" 2>/dev/null || break; sleep 0.1; done
kept=$(debugfs -R 'cat /upper/root/kept' "$upper" 2>/dev/null)
check overlay_disk "upper layer holds: '$kept'" test "$kept" = persisted
