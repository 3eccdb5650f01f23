#!/bin/bash
# virtio-vsock bridged to Unix sockets: host-initiated and guest-initiated
# connections echo 1 MiB intact, and 1,000 sequential connections leave no
# fd or memory growth in kiln-vmm.
. "$(dirname "$0")/lib.sh"
host=$(dirname "$0")/vsock_host.py
MIB=$((1024 * 1024))

# Guest-initiated: a host listener on PATH_5000 echoes; the guest sends.
python3 "$host" serve "$T/v.sock_5000" > "$T/serve.out" 2>&1 &
spid=$!
at_exit "kill $spid 2>/dev/null"
wait_for_line "$T/serve.out" listening 10
guest_start vs 'vsock_echo listen 1234 &
vsock_echo give 1235 320000 &
sleep 0.5
echo guest-side-ready
vsock_echo connect 2 5000 1048576
sleep 600' --vsock "$T/v.sock" --mem 256
if wait_for_line "$T/vs.console" 'vsock_echo: (ok|.*failed|.*differs|.*closed|.*stalled)' 120; then
	line=$(grep -a 'vsock_echo: ' "$T/vs.console" | grep -v listening | tr -d '\r' | tail -1)
	check vsock_guest_initiated "guest connect to CID 2, 1 MiB echoed: $line" \
		grep -q "vsock_echo: ok $MIB" "$T/vs.console"
else
	fail vsock_guest_initiated "no result; $(diagnose vs)"
fi

# Host-initiated: CONNECT 1234 to the guest's echo server.
if out=$(timeout 60 python3 "$host" echo "$T/v.sock" 1234 $MIB 2>&1); then
	pass vsock_host_initiated "$out"
else
	fail vsock_host_initiated "$out; $(diagnose vs)"
fi

# The guest writes and closes before the host reads: 320,000 bytes are
# more than kiln-vmm's socket to the host takes at once (about 200 KiB),
# and less than that plus the credit the guest has (256 KiB), so the guest
# is done and closed while kiln-vmm still holds the rest. All of it must
# still reach the reader (kiln-vmm used to reset the connection there and
# drop what it held: "the agent closed the connection" on a slow exec
# reader).
if out=$(timeout 60 python3 "$host" late "$T/v.sock" 1235 320000 3 2>&1); then
	pass vsock_guest_close_drains "$out"
else
	fail vsock_guest_close_drains "$out; $(diagnose vs)"
fi

# Nobody listening on a guest port: the connection is closed, not hung.
if out=$(timeout 20 python3 "$host" echo "$T/v.sock" 4321 16 2>&1); then
	fail vsock_refused "a connection to a closed port echoed: $out"
else
	check vsock_refused "closed guest port refused: $out" grep -q 'closed before OK' <<<"$out"
fi

# Sequential connections (1,000 in the full tier, 300 in the quick one:
# a leaked fd shows in either, and 2 MiB of RSS is 7 KiB a connection):
# kiln-vmm's fds and memory stay flat.
python3 "$host" loop "$T/v.sock" 1234 50 >/dev/null 2>&1   # warm up allocator pools
fds0=$(ls /proc/$GUEST_PID/fd | wc -l)
rss0=$(awk '/VmRSS/{print $2}' /proc/$GUEST_PID/status)
if out=$(timeout 300 python3 "$host" loop "$T/v.sock" 1234 "$(full && echo 1000 || echo 300)" 2>&1); then
	sleep 1
	fds1=$(ls /proc/$GUEST_PID/fd | wc -l)
	rss1=$(awk '/VmRSS/{print $2}' /proc/$GUEST_PID/status)
	# RSS includes guest pages the guest touches meanwhile; allow 2 MiB.
	if [ "$fds1" -le "$fds0" ] && [ $((rss1 - rss0)) -lt 2048 ]; then
		pass vsock_no_leak "$out; fds $fds0 -> $fds1, RSS $rss0 -> $rss1 KiB"
	else
		fail vsock_no_leak "fds $fds0 -> $fds1, RSS $rss0 -> $rss1 KiB"
	fi
else
	fail vsock_no_leak "$out; $(diagnose vs)"
fi
