#!/bin/bash
# The jail around kiln-vmm: the VMM runs unprivileged as PID 1 of its own
# PID namespace, sees only the directories it was given, still serves its
# guest, and a forbidden system call (execve) kills it with the call named.
. "$(dirname "$0")/lib.sh"
host=$(dirname "$0")/vsock_host.py

mkdir -p "$T/jail" "$T/box" "$T/tmpl"
truncate -s 32M "$T/tmpl/base.img"
"$BUILD/kiln-disk" create "$T/box/d.kcow" "$T/tmpl/base.img"
chown -R 4000:4000 "$T/box"
guest_initrd j 'vsock_sh 1000 & sleep 100000'
cp "$T/j.cpio" "$T/tmpl/guest.cpio"
KILN_VMM_TEST_HOOKS=1 "$VMM" --kernel "$GUEST/vmlinux" --initrd "$T/tmpl/guest.cpio" \
	--disk "$T/box/d.kcow" --vsock "$T/box/v.sock" --ctl "$T/box/c.sock" --console "$T/box/console" \
	--jail "$T/jail" --jail-uid 4000 --jail-gid 4000 --jail-bind "$T/box" \
	--jail-ro-bind "$T/tmpl" --jail-ro-bind "$GUEST" 2>"$T/j.err" &
waiter=$!
at_exit "kill -9 $waiter 2>/dev/null; pkill -9 -f 'jail $T/jail' 2>/dev/null"
wait_for_line "$T/box/console" 'vsock_sh: listening' 60
vmpid=$(pgrep -P $waiter | head -1)
out=$(gsh "$T/box/v.sock" 'echo answered')
check jail_guest_runs "the jailed VMM serves its guest: '$out'" [ "$out" = answered ]

uid=$(awk '/^Uid:/{print $2 "/" $3}' /proc/$vmpid/status)
nspid=$(awk '/^NSpid:/{print $NF}' /proc/$vmpid/status)
ok=; [ "$uid" = 4000/4000 ] && [ "$nspid" = 1 ] && ok=1
check jail_unprivileged "uid $uid, PID $nspid in its own namespace" [ -n "$ok" ]

# Its root holds only the skeleton of what was bound in.
seen=$(ls -A /proc/$vmpid/root/ | tr '\n' ' ')
want=$(for d in "$T/box" "$T/tmpl" "$GUEST"; do echo "$d" | cut -d/ -f2; done | sort -u | tr '\n' ' ')
bound=$(ls -A "/proc/$vmpid/root$T/box" 2>/dev/null | sort | tr '\n' ' ')
if [ "$seen" = "$want" ] && ! [ -e "/proc/$vmpid/root/etc/passwd" ] && ! [ -e "/proc/$vmpid/root/dev/kvm" ] &&
	[[ $bound == *"d.kcow"* ]]; then
	pass jail_filesystem "root holds '$seen'; its box holds '$bound'"
else
	fail jail_filesystem "root holds '$seen' (want '$want'), box '$bound'"
fi

# It can still snapshot into its own directory, as the unprivileged user.
r=$(ctl "$T/box/c.sock" "{\"cmd\":\"snapshot\",\"dir\":\"$T/box/snap\"}")
check jail_snapshot "$r; owner $(stat -c %u "$T/box/snap/state" 2>/dev/null)" \
	[ "$(stat -c %u "$T/box/snap/state" 2>/dev/null)" = 4000 ]

# A forbidden system call kills it, and says which.
ctl "$T/box/c.sock" '{"cmd":"debug_exec"}' >/dev/null 2>&1
for _ in $(seq 50); do kill -0 $waiter 2>/dev/null || break; sleep 0.1; done
wait $waiter; st=$?
if [ $st = 159 ] && grep -q 'forbidden system call execve' "$T/j.err"; then
	pass jail_seccomp "status $st: $(grep -m1 seccomp "$T/j.err")"
else
	fail jail_seccomp "status $st; stderr: $(tail -3 "$T/j.err")"
fi

# A zygote's children are jailed the same way, each in its own jail.
mkdir -p "$T/jail2" "$T/box2"
"$BUILD/kiln-disk" create "$T/box2/d.kcow" "$T/tmpl/base.img"
chown -R 4000:4000 "$T/box2"
"$VMM" --zygote "$T/box/snap" --ctl "$T/z.ctl" 2>"$T/z.err" &
zpid=$!
at_exit "kill -9 $zpid 2>/dev/null; wait $zpid 2>/dev/null"
wait_for_line "$T/z.err" 'zygote ready' 30
r=$(ctl "$T/z.ctl" "{\"cmd\":\"spawn\",\"disks\":[\"$T/box2/d.kcow\"],\"vsock\":\"$T/box2/v.sock\",\"resync\":false,\"jail\":{\"root\":\"$T/jail2\",\"uid\":4001,\"gid\":4000,\"binds\":[\"$T/box2\"],\"ro_binds\":[\"$T/tmpl\"]}}")
cpid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$r")
[ -n "$cpid" ] && at_exit "kill -9 $cpid 2>/dev/null"
out=$(gsh "$T/box2/v.sock" 'echo answered')
uid=$(awk '/^Uid:/{print $2}' /proc/$cpid/status 2>/dev/null)
nspid=$(awk '/^NSpid:/{print $NF}' /proc/$cpid/status 2>/dev/null)
seen=$(ls -A /proc/$cpid/root/ 2>/dev/null | tr '\n' ' ')
want=$(for d in "$T/box2" "$T/tmpl"; do echo "$d" | cut -d/ -f2; done | sort -u | tr '\n' ' ')
if [ "$out" = answered ] && [ "$uid" = 4001 ] && [ "$nspid" = 1 ] && [ "$seen" = "$want" ]; then
	pass jail_zygote_child "spawned in its own jail: uid $uid, PID $nspid, root '$seen'; $r"
else
	fail jail_zygote_child "reply $r; answer '$out', uid '$uid', pid '$nspid', root '$seen'; $(tail -2 "$T/z.err")"
fi
