#!/bin/bash
# Volume slots (docs/vmm.md, "Volume slots"): empty virtio-blk devices a
# guest has from boot, to which root attaches a volume's open descriptor at
# run time. The guest sees the size change; what it fsyncs is in the file
# even when the VMM is killed -9; detach empties the slot; a read-only
# volume refuses writes; a hibernated VM with a volume needs it back to
# wake; a fork shares a read-only volume and is refused with a read-write
# one; a zygote refuses a template with one; bad requests are answered and
# the VMM runs on.
# tier: full: a slow file whose ground the quick tier covers otherwise (e2e 86 attaches volumes through kilnd: sizes, fsync after kill -9, read-only, fork refused, hibernate and wake; unit_vmm_volume the descriptor checks and the I/O bounds)
# time limit: 900
. "$(dirname "$0")/lib.sh"
host=$(dirname "$0")/vsock_host.py
# fctl CTL PATH MODE JSON: a control request with PATH's descriptor passed.
fctl() { timeout 60 python3 "$host" filectl "$@"; }
# size_is VSOCK DEV SECTORS: wait (10 s) until the guest sees DEV of SECTORS.
size_is() {
	local i s
	for i in $(seq 50); do
		s=$(gsh "$1" "cat /sys/block/$2/size")
		[ "$s" = "$3" ] && return 0
		sleep 0.2
	done
	echo "$2 is '$s' sectors, not $3" >&2
	return 1
}
# fsck_cat IMAGE FILE: FILE's md5 in an ext4 image, as a mount would see it
# (e2fsck replays the journal first: a VMM killed -9 never unmounted it).
fsck_cat() {
	e2fsck -fy "$1" >/dev/null 2>&1
	debugfs -R "cat $2" "$1" 2>/dev/null | md5sum | cut -d' ' -f1
}

mke2fs -q -F -t ext4 "$T/base.ext4" 64M >/dev/null
"$BUILD/kiln-disk" create "$T/a.kcow" "$T/base.ext4"
mke2fs -q -F -t ext4 -L vol "$T/vol.ext4" 64M >/dev/null
guest_start a 'vsock_sh 1000 & sleep 100000' --disk "$T/a.kcow" --volume-slots 2 \
	--vsock "$T/a.vsock" --ctl "$T/a.ctl" --mem 256
wait_for_line "$T/a.console" 'vsock_sh: listening' 90 || fail volume_setup "$(diagnose a)"
apid=$GUEST_PID

# Empty slots: the guest has /dev/vdb and /dev/vdc of size 0, status says so.
sizes=$(gsh "$T/a.vsock" 'cat /sys/block/vdb/size /sys/block/vdc/size; ls /sys/block | tr "\n" " "' | tr '\n' ' ')
st=$(ctl "$T/a.ctl" '{"cmd":"status"}')
ok=; [[ $sizes == "0 0 "* ]] && [[ $st == *'"volume_slots":[{"slot":0,"attached":false},{"slot":1,"attached":false}]'* ]] && ok=1
check volume_empty_slots "guest sizes/devices '$sizes'; $st" [ -n "$ok" ]

# Bad requests: each answered with an error naming the slot; the VMM runs on.
truncate -s 0 "$T/empty.img"
truncate -s 1000 "$T/odd.img"
mkdir "$T/dir"
bad=0 msgs=""
expect_err() {   # expect_err WHAT REPLY PATTERN
	if [[ $2 == *'"ok":false'*"$3"* ]]; then msgs+="$1 ok; "; else bad=1; msgs+="$1: '$2'; "; fi
}
expect_err range "$(fctl "$T/a.ctl" "$T/vol.ext4" rw '{"cmd":"volume_attach","slot":2}')" 'slot 2 is not a volume slot'
expect_err negative "$(fctl "$T/a.ctl" "$T/vol.ext4" rw '{"cmd":"volume_attach","slot":-1}')" 'slot -1 is not a volume slot'
expect_err noslot "$(fctl "$T/a.ctl" "$T/vol.ext4" rw '{"cmd":"volume_attach"}')" '"slot'
expect_err nofd "$(fctl "$T/a.ctl" x none '{"cmd":"volume_attach","slot":0}')" 'slot 0: no volume descriptor'
expect_err dir "$(fctl "$T/a.ctl" "$T/dir" dir '{"cmd":"volume_attach","slot":0}')" 'slot 0: a volume must be a regular file'
expect_err size0 "$(fctl "$T/a.ctl" "$T/empty.img" rw '{"cmd":"volume_attach","slot":0}')" 'slot 0: a volume'"'"'s size must be'
expect_err odd "$(fctl "$T/a.ctl" "$T/odd.img" rw '{"cmd":"volume_attach","slot":1}')" 'slot 1: a volume'"'"'s size must be'
expect_err rdonly_fd "$(fctl "$T/a.ctl" "$T/vol.ext4" r '{"cmd":"volume_attach","slot":0}')" 'slot 0: a read-write volume needs'
expect_err detach_empty "$(ctl "$T/a.ctl" '{"cmd":"volume_detach","slot":1}')" 'slot 1 has no volume attached'
st=$(ctl "$T/a.ctl" '{"cmd":"status"}')
[[ $st == *'"ok":true'*'"attached":false},{"slot":1,"attached":false}'* ]] || { bad=1; msgs+="status after: $st"; }
check volume_bad_requests "$msgs" [ $bad = 0 ]

# Attach read-write: the guest sees the new size (a configuration change
# interrupt), mounts it, writes and fsyncs; a second attach is refused.
r=$(fctl "$T/a.ctl" "$T/vol.ext4" rw '{"cmd":"volume_attach","slot":0}')
grown=no; size_is "$T/a.vsock" vdb 131072 && grown=yes
r2=$(fctl "$T/a.ctl" "$T/vol.ext4" rw '{"cmd":"volume_attach","slot":0}')
ok=; [[ $r == *'"ok":true,"slot":0,"size":67108864,"read_only":false'* ]] && [ $grown = yes ] &&
	[[ $r2 == *'"ok":false'*'slot 0 already has a volume'* ]] && ok=1
check volume_attach "$r; guest sees 131072 sectors: $grown; again: $r2; $(grep -m1 'vdb.*capacity\|vdb.*size' "$T/a.console")" [ -n "$ok" ]

# The guest unmounts before the detach, as it must (a detach pulls the
# disk from under a mounted file system).
want=$(gsh "$T/a.vsock" 'mkdir -p /v && mount -t ext4 /dev/vdb /v && dd if=/dev/urandom of=/v/one bs=1k count=512 conv=fsync 2>/dev/null && md5sum < /v/one | cut -d" " -f1; umount /v')
r=$(ctl "$T/a.ctl" '{"cmd":"volume_detach","slot":0}')
shrunk=no; size_is "$T/a.vsock" vdb 0 && shrunk=yes
cp "$T/vol.ext4" "$T/vol.copy"
got=$(fsck_cat "$T/vol.copy" /one)
ok=; [ -n "$want" ] && [ "$want" = "$got" ] && [[ $r == *'"ok":true,"slot":0'* ]] && [ $shrunk = yes ] && ok=1
check volume_detach "guest md5 $want, on the host after detach $got; $r; guest back to 0 sectors: $shrunk" [ -n "$ok" ]
e2fsck -fy "$T/vol.ext4" >/dev/null 2>&1   # a clean file system for what follows

# Read-only: mounts read-only and reads; a write fails; the file is untouched.
before=$(md5sum < "$T/vol.ext4")
r=$(fctl "$T/a.ctl" "$T/vol.ext4" r '{"cmd":"volume_attach","slot":1,"read_only":true}')
size_is "$T/a.vsock" vdc 131072 >/dev/null
# (vsock_sh runs one line.)
out=$(gsh "$T/a.vsock" 'mkdir -p /r && mount -t ext4 -o ro,noload /dev/vdc /r && md5sum < /r/one | cut -d" " -f1; umount /r; if dd if=/dev/zero of=/dev/vdc bs=4096 seek=100 count=1 conv=fsync 2>/dev/null; then echo write-succeeded; else echo write-refused; fi' | tr '\n' ' ')
after=$(md5sum < "$T/vol.ext4")
ok=; [ "$out" = "$want write-refused " ] && [ "$before" = "$after" ] && [[ $r == *'"read_only":true'* ]] && ok=1
check volume_read_only "$r; guest: '$out'; file changed: $([ "$before" = "$after" ] && echo no || echo yes)" [ -n "$ok" ]

# A fork shares a read-only volume: the child reads it too.
r=$(ctl "$T/a.ctl" "{\"cmd\":\"fork\",\"children\":[{\"disks\":[\"$T/c.kcow\"],\"vsock\":\"$T/c.vsock\",\"ctl\":\"$T/c.ctl\",\"resync\":false}]}")
cpid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$r")
[ -n "$cpid" ] && at_exit "kill -9 $cpid 2>/dev/null"
# The parent now writes a new layer of its disk (docs/vmm.md, fork).
pdisk=$(sed -n 's/.*"parent_disks":\["\([^"]*\)"\].*/\1/p' <<<"$r")
[ -n "$pdisk" ] || pdisk=$T/a.kcow
cv=$(gsh "$T/c.vsock" 'mount -t ext4 -o ro,noload /dev/vdc /r && md5sum < /r/one | cut -d" " -f1; umount /r')
cst=$(ctl "$T/c.ctl" '{"cmd":"status"}')
ok=; [[ $r == *'"ok":true'* ]] && [ "$cv" = "$want" ] &&
	[[ $cst == *'{"slot":1,"attached":true,"size":67108864,"read_only":true}'* ]] && ok=1
check volume_fork_read_only "$r; child reads md5 '$cv'; child status $cst" [ -n "$ok" ]
[ -n "$cpid" ] && kill -9 "$cpid" 2>/dev/null

# A fork with a read-write volume is refused, naming the slot; the parent runs on.
ctl "$T/a.ctl" '{"cmd":"volume_detach","slot":1}' >/dev/null
r=$(fctl "$T/a.ctl" "$T/vol.ext4" rw '{"cmd":"volume_attach","slot":0}')
size_is "$T/a.vsock" vdb 131072 >/dev/null
r=$(ctl "$T/a.ctl" "{\"cmd\":\"fork\",\"children\":[{\"disks\":[\"$T/d.kcow\"],\"vsock\":\"$T/d.vsock\"}]}")
alive=$(gsh "$T/a.vsock" 'echo alive')
ok=; [[ $r == *'"ok":false'*'slot 0 has a read-write volume: a fork cannot share it'* ]] && [ "$alive" = alive ] &&
	[ ! -e "$T/d.kcow" ] && ok=1
check volume_fork_read_write_refused "$r; parent '$alive'" [ -n "$ok" ]

# Hibernate with the volume attached and mounted; the wake needs it back.
gsh "$T/a.vsock" 'mount -t ext4 /dev/vdb /v && echo before-hibernate > /v/two && sync' >/dev/null
r=$(ctl "$T/a.ctl" "{\"cmd\":\"hibernate\",\"dir\":\"$T/hib\"}")
guest_wait 30
"$VMM" --restore "$T/hib" --disk "$pdisk" --vsock "$T/n.vsock" --no-resync 2>"$T/n.err"
st_none=$?
exec 7<>"$T/vol.ext4"
"$VMM" --restore "$T/hib" --disk "$pdisk" --vsock "$T/n.vsock" --volume 0:7:ro --no-resync 2>"$T/ro.err"
st_ro=$?
"$VMM" --restore "$T/hib" --disk "$pdisk" --vsock "$T/w.vsock" --ctl "$T/w.ctl" --volume 0:7 \
	--console "$T/w.console" --no-resync 2>"$T/w.err" &
wpid=$!
exec 7>&-
at_exit "kill -9 $wpid 2>/dev/null; wait $wpid 2>/dev/null"
wait_for_line "$T/w.err" 'ready in' 30
out=$(gsh "$T/w.vsock" 'cat /v/two; cat /sys/block/vdb/size' | tr '\n' ' ')
st=$(ctl "$T/w.ctl" '{"cmd":"status"}')
ok=; [[ $r == *'"ok":true'* ]] && [ $st_none = 2 ] && grep -q 'slot 0 had a volume attached in the snapshot: give its descriptor with --volume 0:FD' "$T/n.err" &&
	[ $st_ro = 2 ] && grep -q "slot 0's volume was read-write" "$T/ro.err" &&
	[ "$out" = "before-hibernate 131072 " ] && [[ $st == *'{"slot":0,"attached":true,"size":67108864,"read_only":false}'* ]] && ok=1
check volume_hibernate_wake "without --volume: status $st_none, '$(cat "$T/n.err")'; ro: $st_ro '$(cat "$T/ro.err")'; woken guest '$out'; $st" [ -n "$ok" ]

# A zygote refuses a template that has a volume attached.
"$VMM" --zygote "$T/hib" --ctl "$T/z.ctl" 2>"$T/z.err"
zst=$?
check volume_zygote_refused "status $zst: $(cat "$T/z.err")" eval "[ $zst = 2 ] && grep -q 'template snapshot has a volume in slot 0' '$T/z.err'"

# fsync is durable: the guest writes and fsyncs, which reaches the file as
# an fdatasync of the volume's descriptor (7, inherited; strace watches the
# VMM's main thread, which serves the queue), the VMM is killed -9, and the
# data is in the file.
strace -qq -e trace=fdatasync -p $wpid -o "$T/strace.out" 2>/dev/null &
stpid=$!
sleep 2
want=$(gsh "$T/w.vsock" 'dd if=/dev/urandom of=/v/three bs=1k count=1024 conv=fsync 2>/dev/null && md5sum < /v/three | cut -d" " -f1')
sleep 1
kill $stpid 2>/dev/null; wait $stpid 2>/dev/null
syncs=$(grep -c '^fdatasync(7) *= 0' "$T/strace.out" 2>/dev/null)
kill -9 $wpid; wait $wpid 2>/dev/null
got=$(fsck_cat "$T/vol.ext4" /three)
two=$(debugfs -R "cat /two" "$T/vol.ext4" 2>/dev/null)
ok=; [ -n "$want" ] && [ "$want" = "$got" ] && [ "$two" = before-hibernate ] && [ "${syncs:-0}" -ge 1 ] && ok=1
check volume_fsync_kill9 "guest md5 $want, in the file after kill -9 $got; /two '$two'; the guest's fsync made $syncs fdatasync(7) of the volume" [ -n "$ok" ]

# Booted with a volume (--volume SLOT:FD:ro): the guest sees it from the start.
exec 8<"$T/vol.ext4"
guest_start b 'vsock_sh 1000 & sleep 100000' --volume-slots 1 --volume 0:8:ro --vsock "$T/b.vsock" \
	--ctl "$T/b.ctl" --mem 256
exec 8<&-
wait_for_line "$T/b.console" 'vsock_sh: listening' 90 || fail volume_boot_setup "$(diagnose b)"
out=$(gsh "$T/b.vsock" 'cat /sys/block/vda/size; mkdir -p /r; mount -t ext4 -o ro,noload /dev/vda /r && cat /r/two' | tr '\n' ' ')
st=$(ctl "$T/b.ctl" '{"cmd":"status"}')
ok=; [ "$out" = '131072 before-hibernate ' ] && [[ $st == *'{"slot":0,"attached":true,"size":67108864,"read_only":true}'* ]] && ok=1
check volume_at_boot "guest '$out'; $st" [ -n "$ok" ]

# Zygote children get the template's slots, empty.
r=$(ctl "$T/b.ctl" '{"cmd":"volume_detach","slot":0}')
gsh "$T/b.vsock" 'umount -l /r; true' >/dev/null
r=$(ctl "$T/b.ctl" "{\"cmd\":\"snapshot\",\"dir\":\"$T/tpl\"}")
ctl "$T/b.ctl" '{"cmd":"shutdown"}' >/dev/null
guest_wait 30
"$VMM" --zygote "$T/tpl" --ctl "$T/zy.ctl" 2>"$T/zy.err" &
zpid=$!
at_exit "kill -9 $zpid 2>/dev/null; wait $zpid 2>/dev/null"
wait_for_line "$T/zy.err" 'zygote ready' 30
r=$(ctl "$T/zy.ctl" "{\"cmd\":\"spawn\",\"vsock\":\"$T/s.vsock\",\"ctl\":\"$T/s.ctl\",\"resync\":false}")
spid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$r")
[ -n "$spid" ] && at_exit "kill -9 $spid 2>/dev/null"
sst=$(ctl "$T/s.ctl" '{"cmd":"status"}')
ssize=$(gsh "$T/s.vsock" 'cat /sys/block/vda/size')
att=$(fctl "$T/s.ctl" "$T/vol.ext4" r '{"cmd":"volume_attach","slot":0,"read_only":true}')
grown=no; size_is "$T/s.vsock" vda 131072 && grown=yes
ok=; [[ $sst == *'"volume_slots":[{"slot":0,"attached":false}]'* ]] && [ "$ssize" = 0 ] && [ $grown = yes ] && ok=1
check volume_zygote_child "spawn $r; child status $sst; size $ssize, after attach: $grown ($att)" [ -n "$ok" ]
kill -0 $apid 2>/dev/null && kill -9 $apid
true
