#!/bin/bash
# Files through the agent in a real guest: a 256 MiB file (48 in the quick
# tier) written and read
# back with the same checksum; mkdir -p, stat, list, rename, chmod and
# remove behave as their POSIX counterparts (checked against busybox in
# the same guest), with errors naming missing paths; watch reports create,
# modify and delete.
# tier: full: the quick tier covers it through kilnd (e2e 61 and 72 move files through kilnd and the CLI)
. "$(dirname "$0")/lib.sh"
disk=$(root_disk 1024) || { fail files_boot "cannot make a root disk"; exit 1; }
boot_guest -d "$disk" || { fail files_boot "the guest's agent did not answer"; exit 1; }

mib=$(full && echo 256 || echo 48)
head -c $((mib << 20)) /dev/urandom > "$T/big"
want=$(sha256sum < "$T/big" | cut -d' ' -f1)
t0=$(now_ms)
kg cp -p "$T/big" :/data/big.bin; rc1=$?
t1=$(now_ms)
inguest=$(kg exec -- sha256sum /data/big.bin | cut -d' ' -f1)
t2=$(now_ms)
kg cp :/data/big.bin "$T/back"; rc2=$?
t3=$(now_ms)
back=$(sha256sum < "$T/back" | cut -d' ' -f1)
rm -f "$T/back"
wr=$(( mib * 1000 / (t1 - t0 ? t1 - t0 : 1) )) rd=$(( mib * 1000 / (t3 - t2 ? t3 - t2 : 1) ))
check file_big "$mib MiB: write ${wr} MiB/s, read ${rd} MiB/s; sha256 ${want:0:16}... in the guest ${inguest:0:16}..., back ${back:0:16}..." \
	test "$rc1$rc2" = 00 -a "$inguest" = "$want" -a "$back" = "$want"
left=$(kg ls -d 2 /data | grep -c kiln-)
check file_no_temp_left "$left temporary files in /data" test "$left" = 0
out=$(kg exec -- stat -c '%s %a' /data/big.bin)
check file_mode_kept "guest stat: $out" test "$out" = "$((mib << 20)) 644"

# mkdir -p / mkdir
kg mkdir -p /w/a/b/c && kg mkdir -p /w/a/b/c
check mkdir_p "$(kg exec -- find /w | sort | tr '\n' ' ')" kg exec -- test -d /w/a/b/c
err=$(kg mkdir /w/x/y 2>&1)
check mkdir_missing_parent "$err" grep -q 'mkdir /w/x/y: No such file or directory' <<<"$err"
err=$(kg mkdir /w/a 2>&1)
check mkdir_exists "$err" grep -q 'mkdir /w/a: File exists' <<<"$err"

# stat, against busybox stat
kg cp - :/w/a/f.txt <<<"hello" && kg chmod 640 /w/a/f.txt
ours=$(kg stat /w/a/f.txt | grep -E '^(size|mode|uid)=' | tr '\n' ' ')
theirs=$(kg exec -- stat -c 'size=%s mode=%A (%f) uid=%u' /w/a/f.txt)
check stat_like_posix "ours: $ours; busybox: $theirs" \
	test "$(kg stat /w/a/f.txt | grep -E '^size=' )" = "size=6" -a "$(kg exec -- stat -c %a /w/a/f.txt)" = 640
err=$(kg stat /w/nope 2>&1); rc=$?
check stat_missing "status $rc: $err" grep -q 'stat /w/nope: No such file or directory' <<<"$err"

# list, against find
ours=$(kg ls -d 10 /w | sort | tr '\n' ' ')
theirs=$(kg exec -- find /w -mindepth 1 | sed 's|^/w/||' | sort | tr '\n' ' ')
check list_like_find "$ours" test "$ours" = "$theirs"
ours=$(kg ls /w/a | sort | tr '\n' ' ')
theirs=$(kg exec -- ls -A /w/a | sort | tr '\n' ' ')
check list_depth1_like_ls "$ours" test "$ours" = "$theirs"
err=$(kg ls /w/nope 2>&1)
check list_missing "$err" grep -q 'list /w/nope: No such file or directory' <<<"$err"

# rename
kg mv /w/a/f.txt /w/g.txt
check rename "$(kg exec -- ls /w | tr '\n' ' ')" kg exec -- sh -c 'test -f /w/g.txt && ! test -e /w/a/f.txt'
err=$(kg mv /w/a/f.txt /w/h.txt 2>&1)
check rename_missing "$err" grep -q 'rename /w/a/f.txt to /w/h.txt: No such file or directory' <<<"$err"

# remove: file, empty dir, full dir (needs -r), missing (needs -f)
err=$(kg rm /w/a 2>&1)
check remove_nonempty "$err" grep -q 'remove /w/a: Directory not empty' <<<"$err"
kg rm -r /w/a && kg rm /w/g.txt
check remove_recursive "$(kg exec -- find /w | tr '\n' ' ')" test "$(kg exec -- find /w)" = /w
err=$(kg rm /w/a 2>&1); rc=$?
check remove_missing "status $rc: $err" grep -q 'remove /w/a: No such file or directory' <<<"$err"
check remove_force "rm -f of a missing path" kg rm -f /w/a

# watch: create, modify and delete of a file
timeout 120 "$BUILD/kiln-guest" $GUEST_TRANSPORT watch -n 6 /w > "$T/events" 2> "$T/watch.err" &
wpid=$!
wait_for_line "$T/watch.err" 'watching' 60
kg exec -- sh -c 'echo a > /w/f; echo b >> /w/f; rm /w/f'
wait "$wpid"
ev=$(awk '$2 == "f" { print $1 }' "$T/events" | tr '\n' ' ')
order=$(awk '$2 == "f" && $1 ~ /create/ { c = NR } $2 == "f" && $1 ~ /^modify/ && !m { m = NR }
	     $2 == "f" && $1 ~ /delete/ { d = NR } END { print (c && m && d && c < m && m < d) ? "ok" : "bad" }' "$T/events")
check watch_create_modify_delete "events: $ev" test "$order" = ok
