#!/bin/bash
# The control socket: status, pause (the guest stops making progress),
# resume (it continues), stats (KVM's exit counters: none while paused,
# more as the guest runs), bad requests, and shutdown (exit status 0).
. "$(dirname "$0")/lib.sh"
ctl() { printf '%s\n' "$1" | socat -t 10 - "UNIX-CONNECT:$T/c.ctl"; }
# stat REPLY NAME: a counter of a stats reply ("kvm" or top level), or "none".
stat() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j.get("kvm",{}).get(sys.argv[2], j.get(sys.argv[2], "none")))' "$1" "$2" 2>/dev/null || echo none; }

guest_start c 'i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.2; done' --ctl "$T/c.ctl"
wait_for_line "$T/c.console" 'tick 3' 60 || fail ctl_setup "guest never ticked; $(diagnose c)"

r=$(ctl '{"cmd":"status","id":7}')
check ctl_status "$r" grep -q '"ok":true,"state":"running","ready":true,"vcpus":1.*"id":7' <<<"$r"

r=$(ctl '{"cmd":"pause"}')
n1=$(grep -c tick "$T/c.console")
p1=$(ctl '{"cmd":"stats"}')
sleep 2
n2=$(grep -c tick "$T/c.console")
p2=$(ctl '{"cmd":"stats"}')
s=$(ctl '{"cmd":"status"}')
if [[ $r == *'"state":"paused"'* ]] && [ "$n1" -le "$n2" ] && [ $((n2 - n1)) -le 1 ] && [[ $s == *'"state":"paused"'* ]]; then
	pass ctl_pause "ticks $n1 -> $n2 in 2 s while paused"
else
	fail ctl_pause "reply '$r', ticks $n1 -> $n2, status '$s'"
fi

r=$(ctl '{"cmd":"resume"}')
sleep 2
n3=$(grep -c tick "$T/c.console")
check ctl_resume "ticks $n2 -> $n3 after resume" [ $((n3 - n2)) -ge 3 ]

# KVM's own counters: a sleeping, printing guest halts and writes to the
# serial port (exits that come to the VMM); a paused one makes no exit.
e1=$(stat "$p1" exits) e2=$(stat "$p2" exits)
ok=; [ "$e1" != none ] && [ "$e1" -gt 0 ] && [ "$e1" = "$e2" ] && ok=1
check ctl_stats_paused "exits $e1 -> $e2 in 2 s paused ($p2)" [ -n "$ok" ]
s3=$(ctl '{"cmd":"stats"}')
u2=$(stat "$p2" user_exits) u3=$(stat "$s3" user_exits)
e3=$(stat "$s3" exits) h3=$(stat "$s3" halt_exits) i3=$(stat "$s3" io_exits)
ok=; [ "$e3" != none ] && [ "$e3" -gt "$e2" ] && [ "$u3" -gt "$u2" ] && [ "$h3" -gt 0 ] && [ "$i3" -gt 0 ] && ok=1
check ctl_stats_running "after 2 s running: exits $e2 -> $e3, to the VMM $u2 -> $u3, halts $h3, port I/O $i3" [ -n "$ok" ]

r=$(ctl 'not json')
check ctl_bad_json "$r" grep -q '"ok":false,"error":"json' <<<"$r"
r=$(ctl '{"cmd":"frobnicate"}')
check ctl_unknown "$r" grep -q '"ok":false,"error":"unknown command' <<<"$r"
r=$(python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5)
try:
    s.sendall(b"x" * 100000)
except OSError:
    pass
print(s.recv(4096).decode())' "$T/c.ctl" 2>&1)
check ctl_long_line "$r" grep -q 'too long' <<<"$r"

r=$(ctl '{"cmd":"shutdown"}')
guest_wait 30
if [[ $r == *'"ok":true'* ]] && [ "$GUEST_STATUS" = 0 ] && [ ! -e "$T/c.ctl" ]; then
	pass ctl_shutdown "exit status 0, socket removed"
else
	fail ctl_shutdown "reply '$r', status $GUEST_STATUS, socket $(ls "$T/c.ctl" 2>&1)"
fi

# stats answers at once while the guest idles: KVM's statistics file is
# opened before the vCPU runs (a vCPU ioctl from the main thread would wait
# for a halted vCPU's next exit, and stall the VMM's event loop with it).
guest_start i 'echo idle-up; exec sleep 100000' --ctl "$T/i.ctl"
wait_for_line "$T/i.console" 'idle-up' 60 || fail ctl_stats_setup "the idle guest never came up; $(diagnose i)"
sleep 2
t0=$(now_ms)
r=$(printf '{"cmd":"stats"}\n' | socat -t 8 - "UNIX-CONNECT:$T/i.ctl")
t1=$(now_ms)
ok=; [ "$(stat "$r" exits)" != none ] && [ $((t1 - t0)) -lt 3000 ] && ok=1
check ctl_stats_idle "an idle guest's stats in $((t1 - t0)) ms: $r" [ -n "$ok" ]
