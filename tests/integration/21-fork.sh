#!/bin/bash
# Live fork: after a fork, a file written before it is seen by both sides,
# files written after it only by their writer, and memory changed in the
# parent after the fork is unchanged in the child. fork of 4 children with
# one pause; a raw (non-overlay) disk cannot be forked.
. "$(dirname "$0")/lib.sh"
host=$(dirname "$0")/vsock_host.py

mke2fs -q -F -t ext4 "$T/base.ext4" 64M >/dev/null
"$BUILD/kiln-disk" create "$T/p.kcow" "$T/base.ext4"
guest_start p 'mount -t ext4 /dev/vda /mnt && vsock_sh 1000 &
sleep 600' --disk "$T/p.kcow" --vsock "$T/p.vsock" --ctl "$T/p.ctl" --mem 256
wait_for_line "$T/p.console" 'vsock_sh: listening' 90 || fail fork_setup "$(diagnose p)"
gsh "$T/p.vsock" 'echo before > /mnt/shared; echo 1111 > /tmp/mem; sync; echo ok' >/dev/null

r=$(ctl "$T/p.ctl" "{\"cmd\":\"fork\",\"children\":[{\"disks\":[\"$T/c.kcow\"],\"vsock\":\"$T/c.vsock\",\"ctl\":\"$T/c.ctl\",\"console\":\"$T/c.console\",\"resync\":false}]}")
cpid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$r")
[ -n "$cpid" ] && at_exit "kill -9 $cpid 2>/dev/null"
check fork_reply "$r" grep -q '"ok":true' <<<"$r"

# After the fork: each side writes its own file and changes memory.
gsh "$T/p.vsock" 'echo parent > /mnt/mine; echo 2222 > /tmp/mem; sync' >/dev/null
gsh "$T/c.vsock" 'echo child > /mnt/mine; sync' >/dev/null
pv=$(gsh "$T/p.vsock" 'cat /mnt/shared /mnt/mine /tmp/mem' | tr '\n' ' ')
cv=$(gsh "$T/c.vsock" 'cat /mnt/shared /mnt/mine /tmp/mem' | tr '\n' ' ')
if [ "$pv" = "before parent 2222 " ] && [ "$cv" = "before child 1111 " ]; then
	pass fork_cow "parent sees '$pv', child sees '$cv'"
else
	fail fork_cow "parent sees '$pv', child sees '$cv'; $(diagnose p)"
fi

# fork of 4 with one pause: all answer, the parent still runs.
req="{\"cmd\":\"fork\",\"children\":["
for k in 1 2 3 4; do
	req+="$([ $k = 1 ] || echo ,){\"disks\":[\"$T/t$k.kcow\"],\"vsock\":\"$T/t$k.vsock\",\"ctl\":\"$T/t$k.ctl\",\"resync\":false}"
done
req+="]}"
r=$(ctl "$T/p.ctl" "$req")
for p in $(grep -o '"pid":[0-9]*' <<<"$r" | cut -d: -f2); do at_exit "kill -9 $p 2>/dev/null"; done
answers=0
for k in 1 2 3 4; do
	[ "$(gsh "$T/t$k.vsock" 'cat /mnt/shared')" = before ] && answers=$((answers + 1))
done
alive=$(gsh "$T/p.vsock" 'echo alive')
if [ $answers = 4 ] && [ "$alive" = alive ]; then
	pass fork_tree_4 "4 children answer, parent alive; $(grep -o '"pause_ms":[0-9.]*' <<<"$r")"
else
	fail fork_tree_4 "$answers of 4 children answered, parent '$alive'; reply $r"
fi

# A raw disk cannot be forked copy-on-write: a clear error, parent unharmed.
truncate -s 16M "$T/raw.img"
guest_start raw 'vsock_sh 1000 & sleep 600' --disk "$T/raw.img" --vsock "$T/raw.vsock" --ctl "$T/raw.ctl"
wait_for_line "$T/raw.console" 'vsock_sh: listening' 90
r=$(ctl "$T/raw.ctl" "{\"cmd\":\"fork\",\"children\":[{\"disks\":[\"$T/rc.kcow\"],\"vsock\":\"$T/rc.vsock\"}]}")
alive=$(gsh "$T/raw.vsock" 'echo alive')
if [[ $r == *'"ok":false'*'raw image'* ]] && [ "$alive" = alive ] && [ ! -e "$T/rc.kcow" ]; then
	pass fork_raw_refused "$r"
else
	fail fork_raw_refused "reply $r, parent '$alive'"
fi

# Requests refused before anything starts (cmd_fork's one way out): each
# names what is wrong, makes no child, and leaves the parent answering.
bad=""
for req in '{"cmd":"fork","children":[5]}' \
	   "{\"cmd\":\"fork\",\"children\":[{\"vsock\":\"$T/b.vsock\"}]}" \
	   "{\"cmd\":\"fork\",\"uid_fd\":3,\"children\":[{\"disks\":[\"$T/b.kcow\"]}]}"; do
	r=$(ctl "$T/p.ctl" "$req")
	bad="$bad$(sed -n 's/.*"error":"\([^"]*\)".*/\1/p' <<<"$r" | cut -c1-60);"
done
alive=$(gsh "$T/p.vsock" 'echo alive')
check fork_requests_refused "$bad parent '$alive', child disk made: $([ -e "$T/b.kcow" ] && echo yes || echo no)" \
	eval '[[ $bad == *"settings must be an object"*"child 0: give"*"no descriptor 3 was passed"* ]] && [ "$alive" = alive ] && [ ! -e "$T/b.kcow" ]'
