#!/bin/bash
# kilnd against a VMM its guest took over (issue 15; docs/security.md).
# kilnd runs as root and acts on a sandbox's directory, which belongs to
# the VMM's uid. This test plays that VMM: as it could, it plants symlinks
# where root writes (vmm.pid.tmp, vmm.log), names a host process as its own
# (in vmm.pid, and on a control socket of its own making), and points its
# disk's overlay header at a host file. kilnd must do nothing outside the
# sandbox: the host files keep their bytes, mode and owner, the host processes
# live, the forged disk is refused.
. "$(dirname "$0")/../e2e/lib.sh"
have_kvm || { echo "SKIP security_vmm: no KVM"; exit 0; }

build_template minimal || exit 1
start_kilnd --rate 0 --net-pool 1 || exit 1
KEY=$(new_key sec)
create_sandbox
A=$SBX
[ -n "$A" ] || { fail security_create "$STATUS $BODY"; exit 1; }
at_exit 'api DELETE /v1/sandboxes/$A'
D=$DATA/sandboxes/$A
owner=$(stat -c %u "$D")
check security_jailed "sandbox directory owned by uid $owner (the VMM's)" [ "$owner" != 0 ]

# ---- symlinks where root writes: vmm.pid.tmp and vmm.log -------------------------------------
echo precious > "$T/victim-pid"
echo precious > "$T/victim-log"
api POST "/v1/sandboxes/$A/hibernate"
expect security_hibernate 200 -
ln -sfn "$T/victim-pid" "$D/vmm.pid.tmp"
rm -f "$D/vmm.log"
ln -sfn "$T/victim-log" "$D/vmm.log"
api POST "/v1/sandboxes/$A/wake"
expect security_wake 200 -
check security_pid_tmp_symlink "host file behind vmm.pid.tmp holds '$(head -c 40 "$T/victim-pid" | tr '\n' ' ')'" \
	[ "$(cat "$T/victim-pid")" = precious ]
check security_log_symlink "host file behind vmm.log holds $(wc -c < "$T/victim-log") bytes: '$(head -c 40 "$T/victim-log" | tr '\n' ' ')'" \
	[ "$(cat "$T/victim-log")" = precious ]

# ---- a forged overlay header: the base is a host file -------------------------------------------
api POST "/v1/sandboxes/$A/hibernate"
expect security_hibernate_again 200 -
echo secret > "$T/secret"
chmod 600 "$T/secret"
cp "$D/disk" "$T/disk.saved"
python3 - "$D/disk" "$T/secret" <<'PY'
import struct, sys
path, base = sys.argv[1], sys.argv[2].encode()
with open(path, "r+b") as f:
    f.seek(56); f.write(struct.pack("<I", len(base)))
    f.seek(64); f.write(base + b"\0")
PY
api POST "/v1/sandboxes/$A/wake"
woke=$STATUS
check security_forged_base "wake with the base pointed at $T/secret: $woke $(jget 'j.get("error",{}).get("message","")' | head -c 160); its mode $(stat -c %a "$T/secret")" \
	eval '[ "$woke" != 200 ] && [ "$(stat -c %a "$T/secret")" = 600 ] && grep -q "outside kiln" "$T/body"'
binds=$(grep -c "$T/secret\| $T " /proc/self/mountinfo)
check security_forged_base_no_bind "no mount of the host file's directory made ($binds)" [ "$binds" = 0 ]
cp "$T/disk.saved" "$D/disk"

# ---- its disk a symlink to a host file: root must not hand that file over ------------------------
echo secret > "$T/secret2"
chmod 600 "$T/secret2"
mv "$D/disk" "$T/disk.real"
ln -s "$T/secret2" "$D/disk"
api POST "/v1/sandboxes/$A/wake"
woke=$STATUS
check security_disk_symlink "wake with disk -> $T/secret2: $woke; the file's owner $(stat -c %u:%g "$T/secret2"), mode $(stat -c %a "$T/secret2")" \
	eval '[ "$woke" != 200 ] && [ "$(stat -c %u:%g:%a "$T/secret2")" = 0:0:600 ]'
rm -f "$D/disk"
mv "$T/disk.real" "$D/disk"

# ---- host processes named as the VMM's ------------------------------------------------------------
sleep 1000 &
v1=$!
sleep 1000 &
v2=$!
at_exit "kill $v1 $v2 2>/dev/null"
st1=$(awk '{print $22}' /proc/$v1/stat)
echo "$v1 $st1" > "$D/vmm.pid"
rm -f "$D/ctl.sock"
python3 - "$D/ctl.sock" "$v2" <<'PY' &
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.sendall((json.dumps({"ok": True, "pid": int(sys.argv[2])}) + "\n").encode())
    c.close()
PY
fake=$!
at_exit "kill $fake 2>/dev/null"
sleep 1
api DELETE "/v1/sandboxes/$A"
expect security_delete 204 -
sleep 1
check security_fake_pidfile "host process $v1 named in vmm.pid (with its true start time) $(kill -0 $v1 2>/dev/null && echo lives || echo was killed)" \
	kill -0 $v1
check security_fake_ctl_pid "host process $v2 named by a fake control socket $(kill -0 $v2 2>/dev/null && echo lives || echo was killed)" \
	kill -0 $v2
kill $fake 2>/dev/null
alive security_kilnd
