# Helpers for integration tests (bash, run inside the emulated KVM host).
# A test reports each case as one line: "PASS name: detail" or
# "FAIL name: why"; tests/run counts those lines.
set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${KILN_BUILD:-$REPO/build}
GUEST=$REPO/build/guest
T=$(mktemp -d /tmp/kiln-test.XXXXXX)
_cleanups=()
_on_exit() {
	local i
	for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do eval "${_cleanups[i]}"; done
	rm -rf "$T"
}
trap _on_exit EXIT
# at_exit CMD: run CMD when the test ends, also on failure (last in, first out).
at_exit() { _cleanups+=("$1"); }

pass() { echo "PASS $1${2:+: $2}"; }
fail() { echo "FAIL $1${2:+: $2}"; }
# check NAME DETAIL CMD...: PASS if CMD succeeds, else FAIL.
check() {
	local name=$1 detail=$2; shift 2
	if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}

# wait_for_line FILE REGEX SECONDS: wait until FILE has a line matching REGEX.
wait_for_line() {
	local file=$1 re=$2 limit=$3 start=$SECONDS
	while ! grep -qE "$re" "$file" 2>/dev/null; do
		[ $((SECONDS - start)) -ge "$limit" ] && return 1
		sleep 0.1
	done
}
# now_ms: a monotonic clock in milliseconds.
now_ms() { local s; s=$(cut -d' ' -f1 /proc/uptime); echo $(( ${s%.*} * 1000 + 10#${s#*.} * 10 )); }

# ---- booting test guests under kiln-vmm ---------------------------------
VMM=$BUILD/kiln-vmm
TEST_INITRD=$REPO/build/tests/test-initramfs.cpio

# guest_initrd NAME SCRIPT: the test initramfs plus SCRIPT as /test.sh
# (a second cpio archive appended: the kernel unpacks both).
guest_initrd() {
	local name=$1 script=$2 d=$T/$1.stage
	mkdir -p "$d"
	printf '%s\n' "$script" > "$d/test.sh"
	(cd "$d" && echo test.sh | cpio --quiet -o -H newc) > "$T/$name.add.cpio"
	cat "$TEST_INITRD" "$T/$name.add.cpio" > "$T/$name.cpio"
}

# guest_start NAME SCRIPT [kiln-vmm options...]: boot a test guest in the
# background running SCRIPT; its console goes to $T/NAME.console, kiln-vmm's
# stderr to $T/NAME.err. Sets GUEST_PID. $VMM_PREFIX (words) runs before
# kiln-vmm, e.g. "ip netns exec NS".
guest_start() {
	local name=$1 script=$2; shift 2
	guest_initrd "$name" "$script"
	# shellcheck disable=SC2086
	${VMM_PREFIX:-} "$VMM" --kernel "$GUEST/vmlinux" --initrd "$T/$name.cpio" \
		--console "$T/$name.console" "$@" 2>"$T/$name.err" &
	GUEST_PID=$!
	at_exit "kill -9 $GUEST_PID 2>/dev/null; wait $GUEST_PID 2>/dev/null"
}

# guest_wait SECONDS: wait for the guest started last; sets GUEST_STATUS
# (124 if it had to be killed).
guest_wait() {
	local limit=$1 start=$SECONDS
	while kill -0 "$GUEST_PID" 2>/dev/null; do
		if [ $((SECONDS - start)) -ge "$limit" ]; then
			kill -9 "$GUEST_PID" 2>/dev/null
			wait "$GUEST_PID" 2>/dev/null
			GUEST_STATUS=124
			return
		fi
		sleep 0.1
	done
	wait "$GUEST_PID" 2>/dev/null
	GUEST_STATUS=$?
}

# guest_run NAME SCRIPT [kiln-vmm options...]: boot, run, wait (120 s).
guest_run() {
	guest_start "$@"
	guest_wait 120
}

# guest_output NAME: what SCRIPT printed (console lines after test-init's
# ready line, without the exit marker or kernel messages).
guest_output() {
	tr -d '\r' < "$T/$1.console" | sed -n '/^test-init: ready/,$p' | sed '1d' |
		grep -v '^KILN-TEST-EXIT' | grep -v '^\[ *[0-9.]*\]'
}
# guest_script_status NAME: SCRIPT's exit status, or "none".
guest_script_status() {
	local s
	s=$(tr -d '\r' < "$T/$1.console" | sed -n 's/^KILN-TEST-EXIT \([0-9]*\)$/\1/p' | tail -1)
	echo "${s:-none}"
}
# diagnose NAME: a one-line summary of why a guest test went wrong.
diagnose() {
	echo "vmm status ${GUEST_STATUS:-?}; stderr: $(tr '\n' ' ' < "$T/$1.err" | cut -c1-300); console tail: $(tail -c 300 "$T/$1.console" 2>/dev/null | tr '\r\n' '  ')"
}

# ctl SOCKET JSON: one request on a kiln-vmm control socket, the reply.
ctl() { printf '%s\n' "$2" | timeout 120 socat -t 120 - "UNIX-CONNECT:$1"; }
# gsh VSOCK CMD: run CMD in a test guest's vsock_sh (port 1000), its output.
gsh() { timeout 30 python3 "$REPO/tests/integration/vsock_host.py" sh "$1" 1000 "$2"; }
