#!/bin/bash
# The agent in a real guest (kiln-vmm on KVM inside the emulated host,
# reached through the VMM's vsock bridge): processes. Exit codes, stdin,
# environment, working directory, user, timeout, pty, 64 concurrent execs,
# background processes that outlive their client, an independent client
# written from docs/protocol.md (agent_raw.py) with malformed frames; and
# the same agent under QEMU's microvm reached over AF_VSOCK.
# tier: full: the quick tier covers it through kilnd (e2e 61 execs through kilnd (exit codes, stdin, env, cwd, users, timeouts, background processes))
. "$(dirname "$0")/lib.sh"
disk=$(root_disk 256) || { fail agent_boot "cannot make a root disk"; exit 1; }
start=$(now_ms)
if ! boot_guest -d "$disk"; then
	fail agent_boot "the guest's agent did not answer"
	exit 1
fi
pass agent_boot "agent answered $(( $(now_ms) - start )) ms after kiln-vmm started: $(grep -m1 'kiln-init: ready' "$GUEST_CONSOLE" | tr -d '\r')"

info=$(kg info)
check agent_info "$(echo "$info" | grep -E '^(agent|kernel|pid)=' | tr '\n' ' ')" \
	grep -qx 'pid=1' <<<"$info"

kg exec -- true; rc0=$?
kg exec -- sh -c 'exit 1'; rc1=$?
kg exec -- sh -c 'kill -9 $$'; rc137=$?
check exec_exit_codes "true=$rc0 exit1=$rc1 kill-9=$rc137" test "$rc0 $rc1 $rc137" = "0 1 137"

out=$(printf 'one\ntwo\n' | kg exec -i -- cat)
check exec_stdin_cat "cat echoed $(echo "$out" | wc -l) lines" test "$out" = $'one\ntwo'

out=$(kg exec -e FOO='bar baz' -w /tmp -- sh -c 'echo "$FOO|$(pwd)|$HOME|$PATH"')
check exec_env_cwd "$out" test "$out" = "bar baz|/tmp|/root|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

out=$(kg exec -u 65534:65534 -- id)
check exec_user "$out" grep -q 'uid=65534.*gid=65534' <<<"$out"

err=$(kg exec -- /no/such/program 2>&1); rc=$?
check exec_missing_program "status $rc: $err" grep -q 'execve /no/such/program: No such file or directory' <<<"$err"

t0=$(now_ms)
err=$(kg exec -T 1 -- sleep 30 2>&1); rc=$?
ms=$(( $(now_ms) - t0 ))
check exec_timeout "status $rc after $ms ms: $err" test "$rc" = 124 -a "$ms" -lt 15000

out=$(kg exec -t -- tty | tr -d '\r')
check pty_tty "$out" grep -qE '^/dev/pts/[0-9]+$' <<<"$out"
out=$(kg exec -t --rows 30 --cols 100 -- stty size | tr -d '\r')
check pty_size "$out" test "$out" = "30 100"
out=$(kg exec -t -T 60 --resize 40x132 -- sh -c 'trap "stty size; exit 0" WINCH; echo ready; while :; do sleep 0.05; done' | tr -d '\r')
check pty_resize "$(echo $out)" test "$out" = $'ready\n40 132'
out=$(printf 'hello\n' | kg exec -t -i -- sh -c 'read x; echo got:$x' | tr -d '\r')
check pty_input "$(echo $out)" grep -q 'got:hello' <<<"$out"

# 64 concurrent execs, each on its own connection.
t0=$(now_ms)
pids=()
for i in $(seq 1 64); do
	kg --timeout 120 exec -- sh -c 'sleep 2; echo $0' "$i" > "$T/c$i" 2>&1 &
	pids+=($!)
done
wait "${pids[@]}"	# not a bare wait: the VMM is our child too
ms=$(( $(now_ms) - t0 ))
bad=0
for i in $(seq 1 64); do [ "$(cat "$T/c$i")" = "$i" ] || bad=$((bad + 1)); done
check exec_64_concurrent "64 x (sleep 2; echo) in $ms ms, $bad wrong" test "$bad" = 0 -a "$ms" -lt 60000

# A background process outlives its client and can be re-attached.
read -r id pid < <(kg exec -b -- sh -c 'echo start; sleep 4; echo end; exit 5')
sleep 1
alive=$(kg exec -- sh -c "kill -0 $pid && echo alive")
ps=$(kg ps)
out=$(kg attach "$id"); rc=$?
check background_reattach "id $id pid $pid: $alive; attach gave '$(echo $out)' status $rc" \
	test "$alive" = alive -a "$out" = $'start\nend' -a "$rc" = 5
check background_ps "$(echo "$ps" | grep -E "^$id ")" grep -qE "^$id +$pid +running +bg" <<<"$ps"

# An independent client (Python, from docs/protocol.md) and malformed frames.
out=$(python3 "$REPO/tests/integration/agent_raw.py" bridge "$GUEST_SOCK" 2>&1)
while read -r line; do
	case $line in PASS*|FAIL*) echo "$line" ;; esac
done <<<"$out"
grep -q '^PASS\|^FAIL' <<<"$out" || fail agent_raw "$(tail -3 <<<"$out")"
check agent_alive_after_raw "ping after the raw tests" eval "kg ping >/dev/null"

# The same agent under QEMU's microvm, over AF_VSOCK (vhost-vsock): the
# peer VMM, in the full tier (it boots a second kind of VM).
qemu_vsock() {
	boot_guest -Q -c 5 -d "$(root_disk 128)" || { fail qemu_vsock_exec "the QEMU guest's agent did not answer"; return; }
	out=$(kg exec -- sh -c 'echo via AF_VSOCK; exit 3'); rc=$?
	check qemu_vsock_exec "status $rc: $out" test "$rc" = 3 -a "$out" = "via AF_VSOCK"
	out=$(timeout 120 python3 "$REPO/tests/integration/agent_raw.py" vsock 5 2>&1 | grep -c '^PASS')
	check qemu_vsock_raw "$out of 12 raw-client cases pass over AF_VSOCK" test "$out" = 12
}
if full_only qemu_vsock "the agent over AF_VSOCK under QEMU's microvm"; then qemu_vsock; fi
