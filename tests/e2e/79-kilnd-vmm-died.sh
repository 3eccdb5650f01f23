#!/bin/bash
# A sandbox whose VMM died never reads "running": once the VMM is gone
# (here: its pid no longer exists), the next request that names it or
# lists it finds it "failed", with the reason. kill -9: "killed by signal
# 9" where kilnd has the wait status, else that it ended without a last
# line (a zygote's child that is not kilnd's); a VMM that ended on its own
# (here SIGTERM, which kiln-vmm handles and reports): its last stderr
# line, the line that names a triple fault or a panic when the guest died.
# Both are deletable after.
. "$(dirname "$0")/lib.sh"
have_kvm || { fail vmm_died_kvm "no KVM here: run it in tests/host/run"; exit 1; }
build_template minimal || exit 1
start_kilnd --rate 0 || exit 1
KEY=$(new_key died)

# gone PID: wait (10 ms steps, 10 s at most) until PID has exited.
gone() { local i; for i in $(seq 1 1000); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.01; done; return 1; }

# case NAME SIGNAL WANT: create, signal its VMM, GET at once.
case_() {
	local name=$1 sig=$2 want=$3 id pid st err
	create_sandbox
	id=$SBX
	[ -n "$id" ] || { fail "${name}_create" "$BODY"; return; }
	pid=$(cut -d' ' -f1 "$DATA/sandboxes/$id/vmm.pid")
	kill "-$sig" "$pid"
	gone "$pid" || { fail "$name" "VMM $pid still alive 10 s after SIG$sig"; return; }
	api GET "/v1/sandboxes/$id"
	st=$(jget 'j["status"]') err=$(jget 'j["error"]')
	if [ "$st" = failed ] && [[ $err =~ $want ]]; then
		pass "$name" "GET right after the VMM exited: failed, '$err'"
	else
		fail "$name" "GET right after the VMM exited: status '$st', error '$err' (want failed, '$want')"
	fi
	api GET /v1/sandboxes
	st=$(python3 -c "import json,sys; print([s['status'] for s in json.load(open(sys.argv[1]))['sandboxes'] if s['id']==sys.argv[2]])" "$T/body" "$id" 2>&1)
	check "${name}_listed" "in the list: $st" [ "$st" = "['failed']" ]
	api DELETE "/v1/sandboxes/$id"
	expect "${name}_deletable" 204 -
}
case_ vmm_killed KILL "the VMM was killed by signal 9|the VMM ended without a last line"
case_ vmm_exited TERM "the VMM exited( with status 0)?: kiln-vmm(\\[[0-9]+\\])?: stopped by signal 15 \\(exit status 0\\)"
