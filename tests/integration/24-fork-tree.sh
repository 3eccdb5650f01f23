#!/bin/bash
# fork_tree of 16 over a guest running kiln-init: one pause, 16 children,
# each resynced by kiln-vmm before it is reported ready, so all answer exec
# with their own hostname and their own random numbers (their RNG state
# was cloned: without the reseed their first UUIDs would be the same), and
# the parent runs on. Restores resync too.
# tier: full: the quick tier covers it through kilnd (e2e 61 forks through kilnd; 21-fork runs a fork tree of 4)
. "$(dirname "$0")/lib.sh"
KG() { timeout 60 "$BUILD/kiln-guest" --vsock "$1" "${@:2}"; }

cp --sparse=always "$GUEST/rootfs-minimal.ext4" "$T/root.ext4"
"$BUILD/kiln-disk" create "$T/p.kcow" "$T/root.ext4"
"$VMM" --kernel "$GUEST/vmlinux" --initrd "$GUEST/initramfs.cpio" --disk "$T/p.kcow" \
	--append "kiln.root=/dev/vda kiln.hostname=parent" --mem 256 \
	--vsock "$T/p.sock" --ctl "$T/p.ctl" --console "$T/p.console" 2>"$T/p.err" &
ppid_=$!
at_exit "kill -9 $ppid_ 2>/dev/null; wait $ppid_ 2>/dev/null"
wait_for_line "$T/p.console" 'kiln-init: ready' 90 && KG "$T/p.sock" --wait 30 ping >/dev/null ||
	fail fork_tree_setup "parent agent never answered: $(tail -c 300 "$T/p.console")"
KG "$T/p.sock" exec -- sh -c 'echo warm > /root/before' >/dev/null

req='{"cmd":"fork","children":['
for k in $(seq 1 16); do
	req+="$([ "$k" = 1 ] || echo ,){\"disks\":[\"$T/c$k.kcow\"],\"vsock\":\"$T/c$k.sock\",\"hostname\":\"child-$k\",\"identity\":\"sbx-$k\"}"
done
req+=']}'
t0=$(now_ms)
r=$(ctl "$T/p.ctl" "$req")
t1=$(now_ms)
fork_reply=$r
for p in $(grep -o '"pid":[0-9]*' <<<"$r" | cut -d: -f2); do at_exit "kill -9 $p 2>/dev/null"; done
names="" uuids="" answered=0
errors=""
for k in $(seq 1 16); do
	# The first connection to each child must work: kiln-vmm held it
	# until the child's guest had handled its vsock transport reset.
	out=$(KG "$T/c$k.sock" exec -- sh -c 'hostname; cat /proc/sys/kernel/random/uuid; cat /root/before' 2>&1)
	read -r name uuid before <<<"$(tr '\n' ' ' <<<"$out")"
	[ "$name" = "child-$k" ] && [ "$before" = warm ] ||
		errors+="child $k: $(tr '\n' ' ' <<<"$out" | cut -c1-160); "
	[ "$name" = "child-$k" ] && [ "$before" = warm ] && answered=$((answered + 1)) && uuids+="$uuid"$'\n'
done
distinct=$(sort -u <<<"$uuids" | grep -c .)
parent=$(KG "$T/p.sock" exec -- hostname 2>&1)
if [ $answered = 16 ] && [ "$distinct" = 16 ] && [ "$parent" = parent ]; then
	pass fork_tree_16 "16 children answer with their own hostname and 16 distinct UUIDs; parent runs on; fork reply in $((t1 - t0)) ms, $(grep -o '"pause_ms":[0-9.]*' <<<"$r")"
else
	fail fork_tree_16 "answered $answered/16, distinct UUIDs $distinct, parent '$parent'; $errors reply $r"
fi
# Where the pause went, step by step; the seed that started the children
# (one fork in the pause, not 16) is gone, no zombie left to the parent.
steps=$(python3 -c '
import json, sys
r = json.loads(sys.argv[1]); st = r.get("steps_ms", {})
names = ["checks", "stop", "flush", "seal", "capture", "start"]
ok = all(isinstance(st.get(n), (int, float)) and st[n] >= 0 for n in names) and sum(st[n] for n in names) <= r["pause_ms"] + 1
print(("ok " if ok else "bad ") + " ".join("%s %.1f" % (n, st.get(n, -1)) for n in names) + ", pause %.1f" % r["pause_ms"])' "$fork_reply" 2>&1)
left=$(ps -o pid=,stat= --ppid "$ppid_" | tr '\n' ' ')
ok=; [[ $steps == ok* ]] && [ -z "$left" ] && ok=1
check fork_tree_steps "steps (ms): ${steps#* }; the parent's children now: '${left}'" [ -n "$ok" ]

# Restore resyncs too: a hibernated guest wakes with the clock set and a
# new name.
r=$(ctl "$T/p.ctl" "{\"cmd\":\"hibernate\",\"dir\":\"$T/hib\"}")
for _ in $(seq 100); do kill -0 $ppid_ 2>/dev/null || break; sleep 0.1; done
sleep 3
# The parent writes to the layer the fork gave it.
"$VMM" --restore "$T/hib" --disk "$(sed -n 's/.*"parent_disks":\["\([^"]*\)".*/\1/p' <<<"$fork_reply")" \
	--vsock "$T/w.sock" --hostname woken 2>"$T/w.err" &
wpid=$!
at_exit "kill -9 $wpid 2>/dev/null; wait $wpid 2>/dev/null"
wait_for_line "$T/w.err" 'ready in|did not resync' 60
out=$(KG "$T/w.sock" exec -- sh -c 'hostname; date +%s' 2>&1 | tr '\n' ' ')
read -r name gtime <<<"$out"
[[ $gtime =~ ^[0-9]+$ ]] || gtime=0
skew=$(( $(date +%s) - gtime ))
if [ "$name" = woken ] && [ "${skew#-}" -le 2 ]; then
	pass restore_resync "$(grep -m1 'ready in' "$T/w.err"); hostname '$name', clock off by ${skew} s after 3 s asleep"
else
	fail restore_resync "got '$out' (skew $skew); $(cat "$T/w.err")"
fi
