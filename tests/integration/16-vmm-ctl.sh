#!/bin/bash
# The control socket: status, pause (the guest stops making progress),
# resume (it continues), bad requests, and shutdown (exit status 0).
. "$(dirname "$0")/lib.sh"
ctl() { printf '%s\n' "$1" | socat -t 10 - "UNIX-CONNECT:$T/c.ctl"; }

guest_start c 'i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.2; done' --ctl "$T/c.ctl"
wait_for_line "$T/c.console" 'tick 3' 60 || fail ctl_setup "guest never ticked; $(diagnose c)"

r=$(ctl '{"cmd":"status","id":7}')
check ctl_status "$r" grep -q '"ok":true,"state":"running","ready":true,"vcpus":1.*"id":7' <<<"$r"

r=$(ctl '{"cmd":"pause"}')
n1=$(grep -c tick "$T/c.console")
sleep 2
n2=$(grep -c tick "$T/c.console")
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
