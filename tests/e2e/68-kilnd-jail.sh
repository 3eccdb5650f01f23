#!/bin/bash
# The jail around every VMM kilnd starts (docs/kilnd.md "Isolation"): an
# unprivileged uid of its own, seccomp, its sandbox's network namespace,
# a cgroup with cpu, memory and pids limits, and a root holding only the
# sandboxes' directory and the template. Forks get a uid and a cgroup of
# their own. A guest fork bomb and a memory hog leave kilnd and
# a neighbour responsive; a VMM that goes over its memory limit is killed
# and its sandbox marked failed, the neighbour unharmed. A SIGKILL of
# kilnd and a restart, then deleting everything, leave no namespace, veth,
# nftables table, cgroup or jail directory behind.
. "$(dirname "$0")/lib.sh"
have_kvm || { echo "SKIP kilnd_jail: no KVM"; exit 0; }
CG=/sys/fs/cgroup/kiln
[ -e /sys/fs/cgroup/cgroup.controllers ] || { echo "SKIP kilnd_jail: no cgroup v2"; exit 0; }

build_template minimal || exit 1
start_kilnd --rate 0 --net-pool 1 || exit 1
KEY=$(new_key jail)
at_exit 'for s in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/sandboxes | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do api DELETE /v1/sandboxes/$s; done'
vmm_of() { cut -d' ' -f1 "$DATA/sandboxes/$1/vmm.pid" 2>/dev/null; }
run_in() {   # run_in SBX CMD [TIMEOUT]: stdout of CMD in the guest
	api POST "/v1/sandboxes/$1/exec" "{\"cmd\":\"$2\",\"timeout_seconds\":${3:-60}}"
	jget 'j["stdout"].strip()'
}

create_sandbox
A=$SBX
create_sandbox
B=$SBX
[ -n "$A" ] && [ -n "$B" ] || { fail jail_create "$STATUS $BODY"; exit 1; }
pa=$(vmm_of "$A") pb=$(vmm_of "$B")
ua=$(awk '/^Uid:/{print $2 "/" $3 "/" $4}' /proc/$pa/status)
ub=$(awk '/^Uid:/{print $2}' /proc/$pb/status)
nnp=$(awk '/^NoNewPrivs:/{print $2}' /proc/$pa/status)
sec=$(awk '/^Seccomp:/{print $2}' /proc/$pa/status)
check jail_uid "VMM $pa runs as $ua (B's as $ub), NoNewPrivs $nnp, seccomp mode $sec" \
	eval '[ "${ua%%/*}" != 0 ] && [ "$ua" = "${ua%%/*}/${ua%%/*}/${ua%%/*}" ] && [ "$ub" != "${ua%%/*}" ] && [ "$nnp" = 1 ] && [ "$sec" = 2 ]'
dirs=$(stat -c '%u:%a' "$DATA/sandboxes/$A" "$DATA/sandboxes/$B" | tr '\n' ' ')
check jail_dirs_private "sandbox directories (uid:mode): $dirs" [ "$dirs" = "${ua%%/*}:700 $ub:700 " ]

# Where the data directory is in RAM (tmpfs), the disk's pages are the
# VMM's too: its 64 MiB, the cluster map and a MiB (cgroup_disk_mib).
disk_mib=0
case $(stat -f -c %T "$DATA/sandboxes") in tmpfs|ramfs) disk_mib=66 ;; esac
cga=$(cut -d: -f3 /proc/$pa/cgroup)
lim="$(cat $CG/$A/memory.max 2>/dev/null) $(cat $CG/$A/pids.max 2>/dev/null) $(cut -d' ' -f1 $CG/$A/cpu.max 2>/dev/null)"
check jail_cgroup "in $cga; memory.max pids.max cpu.max: $lim" \
	eval '[ "$cga" = "/kiln/$A" ] && [ "$lim" = "$(( (2 * 256 + 96 + disk_mib) << 20 )) 64 100000" ]'
nsa=$(ip netns identify "$pa")
check jail_netns "VMM in namespace '$nsa'" [ -n "$nsa" ]
seen=$(ls -A /proc/$pa/root/ 2>/dev/null | tr '\n' ' ')
want="$(echo "$DATA" | cut -d/ -f2) "
others=$(ls -A "/proc/$pa/root$DATA/" 2>/dev/null | tr '\n' ' ')
check jail_root "root holds '$seen', DATA in it holds '$others'" \
	eval '[ "$seen" = "$want" ] && ! [ -e "/proc/$pa/root/etc/passwd" ] && ! [ -e "/proc/$pa/root$DATA/kilnd.db" ]'

# Forks stay in their parent's jail with a cgroup and a uid of their own
# (docs/security.md "Forks"): a fork's VMM cannot open its parent's files
# or connect to its sockets, nor the parent its fork's; a fork of the fork
# still reads the layers of both (held open, its directories closed to
# it), its parent first moved to a fresh VMM (hibernated and woken: a
# fork wakes as its own uid, in the host's user namespace).
run_in "$A" 'echo from-a > /root/a.txt && sync' > /dev/null
api POST "/v1/sandboxes/$A/fork" '{"count":1}'
K=$(jget 'j["sandboxes"][0]["id"]')
pk=$(vmm_of "$K")
uk=$(awk '/^Uid:/{print $2 "/" $3 "/" $4}' /proc/$pk/status 2>/dev/null)
gk=$(awk '/^Gid:/{print $2}' /proc/$pk/status 2>/dev/null)
capk=$(awk '/^CapEff:/{print $2}' /proc/$pk/status 2>/dev/null)
nnpk=$(awk '/^NoNewPrivs:/{print $2}' /proc/$pk/status 2>/dev/null)
seck=$(awk '/^Seccomp:/{print $2}' /proc/$pk/status 2>/dev/null)
uk=${uk:-none} u1=${uk%%/*}
cgk=$(cut -d: -f3 /proc/$pk/cgroup 2>/dev/null)
fk=$(run_in "$K" 'cat /root/a.txt')
dk=$(stat -c '%u:%a' "$DATA/sandboxes/$K" 2>/dev/null)
check jail_fork "fork $K: uid $uk gid $gk (A's ${ua%%/*}, B's $ub), CapEff $capk, NoNewPrivs $nnpk, seccomp $seck, cgroup $cgk, directory $dk, reads '$fk'" \
	eval '[ "$uk" = "$u1/$u1/$u1" ] && [ "$u1" != 0 ] && [ "$u1" != "${ua%%/*}" ] && [ "$u1" != "$ub" ] &&
	      [ "$gk" = "$u1" ] && [ "$capk" = 0000000000000000 ] && [ "$nnpk" = 1 ] && [ "$seck" = 2 ] &&
	      [ "$cgk" = "/kiln/$K" ] && [ "$dk" = "$u1:700" ] && [ "$fk" = from-a ]'
# as_uid UID PATH: what a VMM of that uid gets, in the jails' mount
# namespace (A's VMM's: there DATA's directories above sandboxes/ are
# open to all), opening PATH or, a socket, connecting to it: "ok" or the
# error's name.
as_uid() {
	python3 - "$1" "$2" "$pa" <<'PY'
import ctypes, errno, os, socket, stat, sys
uid, path, ns = int(sys.argv[1]), sys.argv[2], sys.argv[3]
fd = os.open("/proc/%s/ns/mnt" % ns, os.O_RDONLY)
if ctypes.CDLL(None, use_errno=True).setns(fd, 0x00020000) != 0:
    print("setns failed"); sys.exit(0)
is_sock = os.path.exists(path) and stat.S_ISSOCK(os.lstat(path).st_mode)
os.setgroups([]); os.setgid(uid); os.setuid(uid)
try:
    if is_sock:
        s = socket.socket(socket.AF_UNIX); s.connect(path); s.close()
    else:
        open(path, "rb").close()
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}
sa=$DATA/sandboxes/$A sk=$DATA/sandboxes/$K
reach="A->K disk $(as_uid "${ua%%/*}" "$sk/disk"), A->K ctl $(as_uid "${ua%%/*}" "$sk/ctl.sock"),"
reach="$reach A->K vsock $(as_uid "${ua%%/*}" "$sk/vsock.sock"), K->A disk $(as_uid "$u1" "$(readlink -f "$sa/disk")"),"
reach="$reach K->A ctl $(as_uid "$u1" "$sa/ctl.sock"), K->K disk $(as_uid "$u1" "$sk/disk"), K->K ctl $(as_uid "$u1" "$sk/ctl.sock"),"
reach="$reach B->K disk $(as_uid "$ub" "$sk/disk")"
check jail_fork_apart "$reach ($(stat -c '%n %u:%g %a' "$sk"/* | sed "s|$sk/||" | tr '\n' ' '))" \
	eval '[ "$reach" = "A->K disk EACCES, A->K ctl EACCES, A->K vsock EACCES, K->A disk EACCES, K->A ctl EACCES, K->K disk ok, K->K ctl ok, B->K disk EACCES" ]'
run_in "$K" 'echo from-k > /root/k.txt && sync' > /dev/null
api POST "/v1/sandboxes/$K/fork" '{"count":1}'
G=$(jget 'j["sandboxes"][0]["id"]') gbody=$BODY
ug=$(awk '/^Uid:/{print $2}' /proc/$(vmm_of "$G")/status 2>/dev/null)
fg=$(run_in "$G" 'cat /root/a.txt /root/k.txt | xargs')
pk2=$(vmm_of "$K")
uk2=$(awk '/^Uid:/{print $2}' /proc/$pk2/status 2>/dev/null)
[ "$(readlink /proc/$pk2/ns/user)" = "$(readlink /proc/self/ns/user)" ] && uk2="$uk2 in the host's user namespace"
check jail_fork_of_fork "fork $G of $K: uid $ug, reads '$fg'; $K moved to a fresh VMM, uid $uk2$([ -n "$G" ] || echo " ($gbody)")" \
	eval '[ -n "$ug" ] && [ "$ug" != "$u1" ] && [ "$ug" != "${ua%%/*}" ] && [ "$fg" = "from-a from-k" ] && [ "$uk2" = "$u1 in the host'"'"'s user namespace" ]'
[ -n "$G" ] && api DELETE "/v1/sandboxes/$G"
[ -n "$K" ] && api DELETE "/v1/sandboxes/$K"
check jail_fork_cgroup_removed "after delete: $CG/$K exists: $([ -e "$CG/$K" ] && echo yes || echo no)" \
	eval '[ -n "$K" ] && [ ! -e "$CG/$K" ]'

# ---- a fork bomb and a memory hog in A -----------------------------------------------------
api POST "/v1/sandboxes/$A/exec" '{"cmd":"f(){ f|f& }; f","timeout_seconds":20}' &
bomb=$!
sleep 8
t0=$(date +%s.%N)
out=$(run_in "$B" 'echo neighbour-ok')
t1=$(date +%s.%N)
check jail_fork_bomb_neighbour "B answered '$out' in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s during A's fork bomb" [ "$out" = neighbour-ok ]
alive jail_fork_bomb_kilnd
wait $bomb
kill -0 "$pa" 2>/dev/null && pass jail_fork_bomb_vmm "A's VMM survives its guest's fork bomb" || fail jail_fork_bomb_vmm "A's VMM died"
api DELETE "/v1/sandboxes/$A"

# Two 150 MiB buffers filled at once in a 256 MiB guest: its OOM killer
# ends one. (A dd buffer is touched by the kernel's read of /dev/zero, a
# pass over each byte; 'head -c 400m | tail', three passes and a scan,
# took 38 s under emulation.)
out=$(run_in "$B" 'dd if=/dev/zero of=/dev/null bs=150M count=1 2>/dev/null & dd if=/dev/zero of=/dev/null bs=150M count=1 2>/dev/null; wait; echo hog-done' 120)
out2=$(run_in "$B" 'echo still-here')
api GET "/v1/sandboxes/$B"
check jail_memory_hog "guest hog: '$out'; then '$out2', status $(jget 'j["status"]')" \
	eval '[ "$out2" = still-here ] && [ "$(jget '\''j["status"]'\'')" = running ]'
alive jail_memory_hog_kilnd

# ---- over the VMM's memory limit -------------------------------------------------------------
# With a limit (2 x 256 - 330 = 182 MiB) below the guest's memory, the
# guest can push its VMM over.
stop_kilnd
start_kilnd --rate 0 --net-pool 1 --vmm-overhead $((-330 - disk_mib)) || exit 1
create_sandbox
M=$SBX
pm=$(vmm_of "$M")
run_in "$M" 'dd if=/dev/zero of=/dev/null bs=200M count=1; echo survived' 120 >/dev/null
for i in $(seq 50); do
	api GET "/v1/sandboxes/$M"
	[ "$(jget 'j["status"]')" = failed ] && break
	sleep 0.2
done
check jail_memory_limit_kill "M: $(jget 'j["status"], j.get("error")')" \
	eval '[ "$(jget '\''j["status"]'\'')" = failed ] && grep -q '\''memory limit'\'' "$T/body"'
out=$(run_in "$B" 'echo neighbour-ok')
check jail_memory_limit_neighbour "B answers '$out'" [ "$out" = neighbour-ok ]
check jail_memory_limit_cleanup "M's VMM gone, cgroup removed" eval '! kill -0 "$pm" 2>/dev/null && [ ! -e "$CG/$M" ]' 

# ---- a second kilnd on the host: each keeps its own networks -----------------------------------
# Another kilnd (its own data directory; tests side by side, a host agent
# beside a one-box kilnd) starts, makes a pool network of its own and
# stops: B's namespace, veth and TAP are all still there (netpool.h: a
# kilnd removes only the slots its data directory claims).
nsB=$(ip netns identify "$(vmm_of "$B")" 2>/dev/null)
slotB=${nsB#kiln-n}
mkdir -p "$T/d2"
"$KILND" --data "$T/d2" --listen "127.0.0.1:$((PORT + 1))" --rate 0 --net-pool 1 >> "$T/kilnd2.log" 2>&1 &
K2=$!
at_exit "kill $K2 2>/dev/null; wait $K2 2>/dev/null"
for i in $(seq 600); do
	[ -n "$(ls "$T/d2/net" 2>/dev/null)" ] && break
	kill -0 $K2 2>/dev/null || break
	sleep 0.1
done
slot2=$(ls "$T/d2/net" 2>/dev/null | tr '\n' ' ')
kill $K2; wait $K2 2>/dev/null
ns_ok=$(ip netns list | grep -c "^$nsB\b")
veth_ok=$(ip -o link show "kv$slotB" 2>/dev/null | wc -l)
tap_ok=$(ip -n "$nsB" -o link show 2>/dev/null | grep -c ' tap')
back=$(run_in "$B" 'echo still-here')
check jail_two_kilnds "B's $nsB after a second kilnd (slot '$slot2') came and went: namespace $ns_ok, veth $veth_ok, TAP $tap_ok; B '$back'" \
	eval '[ -n "$slotB" ] && [ -n "$slot2" ] && [ "${slot2% }" != "$slotB" ] && [ "$ns_ok" = 1 ] && [ "$veth_ok" = 1 ] && [ "$tap_ok" -ge 1 ] && [ "$back" = still-here ]'
alive jail_two_kilnds_first

# ---- SIGKILL, restart, delete: nothing left -----------------------------------------------
pool_before=$(ls "$DATA/net" | tr '\n' ' ')
kill -9 "$KILND_PID"
wait "$KILND_PID" 2>/dev/null
KILND_PID=
start_kilnd --rate 0 --net-pool 1 || exit 1
sleep 2
api GET "/v1/sandboxes/$B"
nns=$(ip netns list | grep -c '^kiln-n')
st=$(jget 'j["status"]')
back=$(run_in "$B" 'echo back')
check jail_restart_reattached "B $st after the kill, answers '$back'; namespaces $nns (claims before: $pool_before)" \
	eval '[ "$st" = running ] && [ "$back" = back ] && [ "$nns" -le 2 ]'
for s in "$B" "$M"; do api DELETE "/v1/sandboxes/$s"; done
stop_kilnd
left_ns=$(ip netns list | grep -o 'kiln-n[0-9]*' | tr '\n' ' ')
left_links=$(ip -o link show | grep -o ' kv[0-9]*' | tr '\n' ' ')
left_table=$(nft list tables 2>/dev/null | grep 'inet kiln')
left_cg=$(ls -A $CG 2>/dev/null | grep sbx_ | tr '\n' ' ')
for c in $left_cg; do   # why, for the failure line
	echo "  $c: procs '$(cat $CG/$c/cgroup.procs | tr '\n' ' ')' $(tr '\n' ' ' < $CG/$c/cgroup.events)"
	grep "$c" "$T/kilnd.log" | tail -5 | sed 's/^/  | /'
done
left_jail=$(ls -A "$DATA/jail" 2>/dev/null | tr '\n' ' ')
check jail_nothing_left "namespaces '$left_ns', veths '$left_links', table '$left_table', cgroups '$left_cg', jail roots '$left_jail'" \
	eval '[ -z "$left_ns$left_links$left_table$left_cg$left_jail" ] && [ ! -e $CG ]'
