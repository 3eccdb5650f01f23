# tests/unit/apilib.sh: what the unit loop's shell tests of kilnd's API
# share (billing.sh, admin.sh, statements.sh). Source it with name set to
# the test's name and the test's arguments ([REPO [BUILD]]) in place. It
# gives PASS/FAIL lines prefixed with the name (rc becomes 1 at a FAIL:
# end with "exit $rc"), a scratch directory dir removed at exit with the
# kilnd it started, kd (kilnd's commands on dir/data), start_kilnd [ARGS]
# (kilnd serving the API on dir/data and port, no VM, no network, no
# jail, until it answers /healthz), stop_kilnd, api KEY METHOD PATH [BODY]
# (KEY "": none; sets STATUS, the body in dir/body), is EXPR (a Python
# expression over j, the last body) and body (its start, for messages).
set -u
repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
build=${2:-$repo/build}
kilnd=$build/kilnd
rc=0
pass() { echo "PASS $name $1${2:+: $2}"; }
fail() { echo "FAIL $name $1${2:+: $2}"; rc=1; }
check() { local n=$1 d=$2; shift 2; if "$@"; then pass "$n" "$d"; else fail "$n" "$d"; fi; }
[ -x "$kilnd" ] || { echo "FAIL $name: $kilnd missing: make all first"; exit 1; }

dir=$(mktemp -d "/tmp/kiln-$name.XXXXXX") || exit 1
pid=
stop_kilnd() { [ -n "$pid" ] && { kill -9 "$pid"; wait "$pid"; } 2>/dev/null; pid=; }
cleanup() {
	stop_kilnd
	rmdir "/sys/fs/cgroup/kiln-test-$$-$name" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
API=http://127.0.0.1:$port
kd() { "$kilnd" --data "$dir/data" "$@"; }
start_kilnd() {
	"$kilnd" --data "$dir/data" --no-net --no-jail --net-pool 0 --cgroup "/sys/fs/cgroup/kiln-test-$$-$name" \
		--listen "127.0.0.1:$port" "$@" >> "$dir/kilnd.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do curl -sf -o /dev/null "$API/healthz" && return 0; sleep 0.2; done
	fail start "$(tail -5 "$dir/kilnd.log")"
	exit 1
}
api() {
	local key=$1 method=$2 path=$3 body=${4-}
	local args=(-s -o "$dir/body" -w '%{http_code}' -X "$method")
	[ -n "$key" ] && args+=(-H "Authorization: Bearer $key")
	[ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data "$body")
	STATUS=$(curl "${args[@]}" "$API$path")
}
is() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$dir/body" 2>/dev/null; }
body() { head -c 400 "$dir/body"; }
