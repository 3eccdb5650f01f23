#!/bin/bash
# Fork of a VM that a zygote spawned, at the size of a real template (2
# vCPUs, 512 MiB): the memory it inherited from the zygote is registered
# again in the child; both sides keep running. Then the child forks too,
# twice: a fork of a fork keeps its own settings.
# tier: full: the quick tier covers it through kilnd (every kilnd fork is of a zygote-spawned VM (e2e 61, 66, 67))
. "$(dirname "$0")/lib.sh"
replies=""

mke2fs -q -F -t ext4 "$T/base.ext4" 64M >/dev/null
"$BUILD/kiln-disk" create "$T/t.kcow" "$T/base.ext4"
guest_start t 'mount -t ext4 /dev/vda /mnt && vsock_sh 1000 &
sleep 600' --disk "$T/t.kcow" --vsock "$T/t.vsock" --ctl "$T/t.ctl" --mem ${MEM:-512} --vcpus ${VCPUS:-2}
wait_for_line "$T/t.console" 'vsock_sh: listening' 90 || fail fork_spawned_setup "$(diagnose t)"
r=$(ctl "$T/t.ctl" "{\"cmd\":\"snapshot\",\"dir\":\"$T/snap\"}")
ctl "$T/t.ctl" '{"cmd":"shutdown"}' >/dev/null
guest_wait 30

"$VMM" --zygote "$T/snap" --ctl "$T/zy.ctl" 2>"$T/zy.err" &
zpid=$!
at_exit "kill -9 $zpid 2>/dev/null; wait $zpid 2>/dev/null"
wait_for_line "$T/zy.err" 'zygote ready' 30 || fail fork_spawned_setup "zygote: $(cat "$T/zy.err")"
"$BUILD/kiln-disk" create "$T/s.kcow" "$T/t.kcow" 2>/dev/null || cp "$T/t.kcow" "$T/s.kcow"
r=$(ctl "$T/zy.ctl" "{\"cmd\":\"spawn\",\"disks\":[\"$T/s.kcow\"],\"vsock\":\"$T/s.vsock\",\"ctl\":\"$T/s.ctl\",\"resync\":false}")
spid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$r")
[ -n "$spid" ] && at_exit "kill -9 $spid 2>/dev/null"
check fork_spawned_spawn "$r" grep -q '"ok":true' <<<"$r"
gsh "$T/s.vsock" 'echo before > /mnt/f; sync; echo ok' >/dev/null

r=$(ctl "$T/s.ctl" "{\"cmd\":\"fork\",\"children\":[{\"disks\":[\"$T/c.kcow\"],\"vsock\":\"$T/c.vsock\",\"ctl\":\"$T/c.ctl\",\"resync\":false}]}")
cpid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$r")
[ -n "$cpid" ] && at_exit "kill -9 $cpid 2>/dev/null"
pv=$(gsh "$T/s.vsock" 'cat /mnt/f; nproc' | tr '\n' ' ')
cv=$(gsh "$T/c.vsock" 'cat /mnt/f; nproc' | tr '\n' ' ')
if grep -q '"ok":true' <<<"$r" && [ "$pv" = "before 2 " ] && [ "$cv" = "before 2 " ]; then
	pass fork_spawned "2 vCPUs, 512 MiB: parent '$pv', child '$cv'"
else
	fail fork_spawned "reply $r; parent '$pv', child '$cv'; $(cat "$T/zy.err" | tail -5)"
fi

# The child forks twice; it and both grandchildren answer on their sockets.
for g in 1 2; do
	r=$(ctl "$T/c.ctl" "{\"cmd\":\"fork\",\"children\":[{\"disks\":[\"$T/g$g.kcow\"],\"vsock\":\"$T/g$g.vsock\",\"ctl\":\"$T/g$g.ctl\",\"resync\":false}]}")
	gpid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$r")
	[ -n "$gpid" ] && at_exit "kill -9 $gpid 2>/dev/null"
	replies+="$r "
done
cv=$(gsh "$T/c.vsock" 'echo c; cat /mnt/f' | tr '\n' ' ')
g1=$(gsh "$T/g1.vsock" 'echo g1; cat /mnt/f' | tr '\n' ' ')
g2=$(gsh "$T/g2.vsock" 'echo g2; cat /mnt/f' | tr '\n' ' ')
st=$(ctl "$T/c.ctl" '{"cmd":"status"}')
if [ "$cv$g1$g2" = "c before g1 before g2 before " ] && grep -q '"ok":true' <<<"$st"; then
	pass fork_of_fork "child and 2 grandchildren answer: '$cv$g1$g2'"
else
	fail fork_of_fork "got '$cv' '$g1' '$g2'; status $st; replies $replies"
fi
