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
