# Helpers for kilnd's end-to-end tests (bash). They run a real kilnd with a
# real SQLite database and, where KVM works (the emulated host), real
# sandboxes. Every test starts its own kilnd on its own port and data
# directory, and at exit deletes what it made and checks that nothing of
# it is left: no kiln-vmm process, no directory, no socket.
# Lines: "PASS name: detail" / "FAIL name: why" (tests/run counts them).
# With KILN_API_URL set they run against that endpoint instead (below).
set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${KILN_BUILD:-$REPO/build}
KILND=$BUILD/kilnd
KILN=$BUILD/kiln
# Short: Unix socket paths live below the data directory.
# (KILN_TEST_TMP: another place for it, e.g. a disk filesystem.)
T=$(mktemp -d "${KILN_TEST_TMP:-/tmp}/ke.XXXXXX")
DATA=$T/d
# KILN_API_URL: the tests run against that endpoint (a replica of a
# cluster: tests/cluster/e2e.sh, issue 12) instead of a kilnd of their
# own. start_kilnd starts none (KILN_API_ARGS: the options the endpoint's
# kilnd was given, as start_kilnd would be given them; default --rate 0,
# as tests/cluster/run starts replica 1 for them); new_key makes a
# workspace, named with this test's prefix, and a key of it through the
# operator API (KILN_ADMIN_KEY: an operator's key), and at exit the
# sandboxes of those workspaces and then the workspaces are deleted;
# build_template looks that the endpoint has the template ready
# (KILN_API_KEY: a key of a workspace there). A case that needs kilnd's
# own process, data directory or log, or a kilnd started with other
# options, says so with a SKIP line (one_box). PORT (and E2E_HOST) are
# the endpoint's, for the cases that speak HTTP on raw sockets.
# Read once here: a test exports KILN_API_URL itself for the CLI.
E2E_ENDPOINT=${KILN_API_URL:-}
if [ -n "$E2E_ENDPOINT" ]; then
	URL=${E2E_ENDPOINT%/}
	E2E_HOST=${URL#*://}; E2E_HOST=${E2E_HOST%%/*}
	PORT=${E2E_HOST##*:}; E2E_HOST=${E2E_HOST%:*}
	# Workspace names are at most 16 of a-z, 0-9 and -.
	E2E_WS=e$(printf '%04x' $RANDOM)-
	# The endpoint's log is not this test's: what greps kilnd's finds none.
	: > "$T/kilnd.log"
	if [ -z "${KILN_ADMIN_KEY:-}" ] || [ -z "${KILN_API_KEY:-}" ] || [[ ! $PORT =~ ^[0-9]+$ ]]; then
		echo "FAIL e2e_endpoint: KILN_API_URL is set ($URL): the tests then run against it, with KILN_ADMIN_KEY (an operator's key: '${KILN_ADMIN_KEY:+set}') and KILN_API_KEY (a workspace's: '${KILN_API_KEY:+set}') and a URL with its port; unset KILN_API_URL to test a kilnd of their own"
		rm -rf "$T"
		exit 1
	fi
else
PORT=${PORT:-$((17000 + RANDOM % 2000))}
URL=http://127.0.0.1:$PORT
E2E_HOST=127.0.0.1
fi
KILND_PID=
_cleanups=()

pass() { echo "PASS $1${2:+: $2}"; }
fail() {
	echo "FAIL $1${2:+: $2}"; echo "$1" >> "$T/failed"
	case ${2:-} in *"did not answer in time"*|*"no answer from the agent"*) _stuck_guest ;; esac
}
# _stuck_guest: once per file, where a guest stopped answering (issue 21:
# a sandbox whose agent took no connection while its host's QEMU used a
# whole core): which threads of the host use its CPU, each VMM's KVM exit
# counters 2 s apart (a guest that loops exits, a VMM thread that spins
# does not) and the end of its guest's console.
_stuck_guest() {
	[ -e "$T/stuck-shown" ] && return
	: > "$T/stuck-shown"
	echo "  a guest stopped answering; the host's busiest threads:"
	top -b -n 1 -H -w 160 2>/dev/null | sed -n '7,16p' | sed 's/^/  | /'
	local c a b
	for c in "$DATA"/sandboxes/*/ctl.sock; do
		[ -S "$c" ] || continue
		a=$(printf '{"cmd":"stats"}\n' | timeout 5 socat -t 4 - "UNIX-CONNECT:$c" 2>&1 | head -c 400)
		sleep 2
		b=$(printf '{"cmd":"stats"}\n' | timeout 5 socat -t 4 - "UNIX-CONNECT:$c" 2>&1 | head -c 400)
		echo "  $(basename "$(dirname "$c")"): stats $a"
		echo "    2 s later: $b"
		tail -5 "$(dirname "$c")/console.log" 2>/dev/null | cut -c1-200 | sed 's/^/    console| /'
	done
}
check() {
	local name=$1 detail=$2; shift 2
	if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
. "$REPO/tests/tier.sh"	# full, full_only
at_exit() { _cleanups+=("$1"); }
# endpoint: whether the tests run against KILN_API_URL's endpoint.
endpoint() { [ -n "$E2E_ENDPOINT" ]; }
# one_box NAMES WHY: true with one-box kilnd (the test's own); against an
# endpoint false, with a SKIP line for each case in NAMES saying what of
# kilnd's own it needs: `if one_box x "its data directory"; then ...; fi`.
one_box() {
	[ -z "$E2E_ENDPOINT" ] && return 0
	local n
	for n in $1; do echo "SKIP $n: needs one-box kilnd ($2)"; done
	return 1
}

# kiln-vmm processes that belong to this test (their command lines name
# its data directory, or their sockets live in it).
test_vmms() {
	local p
	for p in $(pgrep -x kiln-vmm 2>/dev/null); do
		if tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q "$T/" ||
		   ls -l /proc/$p/cwd /proc/$p/fd 2>/dev/null | grep -q "$T/"; then
			echo "$p"
		fi
	done
}

# Our kiln-vmm processes that are not template zygotes: sandboxes' VMMs.
sandbox_vmms() {
	local z p
	z=$(cat "$DATA"/templates/*/v*/zygote.pid 2>/dev/null | cut -d' ' -f1)
	for p in $(test_vmms); do
		grep -qx "$p" <<<"$z" || echo "$p"
	done
}

_on_exit() {
	local i
	for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do eval "${_cleanups[i]}"; done
	if [ -n "$E2E_ENDPOINT" ]; then _endpoint_cleanup; rm -rf "$T"; return; fi
	stop_kilnd
	# Zygotes outlive kilnd on purpose (a restart reuses them): stop ours.
	local z
	for z in "$DATA"/templates/*/v*/zygote.pid; do
		[ -f "$z" ] && kill -9 "$(cut -d' ' -f1 "$z")" 2>/dev/null
	done
	local left
	left=$(test_vmms)
	if [ -n "$left" ]; then
		echo "FAIL cleanup: kiln-vmm processes left behind: $left"
		# Which sandbox each was, and what kilnd said of it.
		local p id
		for p in $left; do
			id=$( (readlink "/proc/$p/cwd"; tr '\0' ' ' < "/proc/$p/cmdline"; ls -l "/proc/$p/fd") 2>/dev/null |
				grep -o 'sbx_[a-z0-9]*' | head -1)
			echo "  $p: ${id:-no sandbox id in its cwd, command line or files}; $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | head -c 200)"
			[ -n "$id" ] && grep "$id" "$T/kilnd.log" 2>/dev/null | tail -6 | sed 's/^/  | /'
		done
		kill -9 $left 2>/dev/null
	fi
	# Networks and cgroups of sandboxes a failed test left (its kilnd
	# claimed them in DATA/net; cgroups are named after sandboxes).
	local slot c
	for slot in $(ls "$DATA/net" 2>/dev/null); do
		"$BUILD/kiln-net" destroy "$slot" >/dev/null 2>&1
	done
	# And the owner records (net.h NET_OWNER_DIR) of this test's data
	# directories, which would keep those slots from every other kilnd.
	local rec real
	real=$(readlink -f "$T")
	for rec in /run/kiln-net/*; do
		case $(readlink "$rec" 2>/dev/null) in "$real"/*) rm -f "$rec" ;; esac
	done
	for c in $(ls "$DATA/sandboxes" 2>/dev/null); do
		[ -d "/sys/fs/cgroup/kiln/$c" ] && { echo 1 > "/sys/fs/cgroup/kiln/$c/cgroup.kill"; sleep 0.2; rmdir "/sys/fs/cgroup/kiln/$c"; } 2>/dev/null
	done
	rmdir /sys/fs/cgroup/kiln 2>/dev/null
	ip netns list 2>/dev/null | grep -q '^kiln-n' || nft delete table inet kiln 2>/dev/null
	# What kilnd said, when something failed, and what the kernel said of
	# killed processes (an OOM kill, a seccomp kill, a segfault).
	if [ -s "$T/failed" ] && [ -s "$T/kilnd.log" ]; then
		echo "  kilnd's last log lines:"
		tail -25 "$T/kilnd.log" | sed 's/^/  | /'
	fi
	if [ -s "$T/failed" ]; then
		dmesg 2>/dev/null | grep -iE 'oom|killed process|audit.*sig=|segfault|trap' | tail -8 | sed 's/^/  kernel: /'
	fi
	rm -rf "$T"
}
trap _on_exit EXIT
# A test stopped by its time limit (tests/integration/run's timeout sends
# TERM) still cleans up: bash runs the EXIT trap only when it exits itself.
trap 'exit 143' TERM INT

# start_kilnd [options]: run kilnd on $PORT with $DATA; waits for /healthz.
start_kilnd() {
	[ -n "$E2E_ENDPOINT" ] && { _endpoint_start "$@"; return; }
	"$KILND" --data "$DATA" --listen "127.0.0.1:$PORT" "$@" >> "$T/kilnd.log" 2>&1 &
	KILND_PID=$!
	local i
	# 60 s: kilnd may take more than 10 to start under the emulated host.
	for i in $(seq 1 600); do
		curl -s -o /dev/null "$URL/healthz" && return 0
		kill -0 "$KILND_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "FAIL start_kilnd: kilnd did not come up; log: $(tail -5 "$T/kilnd.log" | tr '\n' ' ')"
	return 1
}

stop_kilnd() {
	[ -n "$KILND_PID" ] || return 0
	kill "$KILND_PID" 2>/dev/null
	wait "$KILND_PID" 2>/dev/null
	KILND_PID=
}

# new_key [WORKSPACE]: print a fresh API key.
new_key() {
	[ -n "$E2E_ENDPOINT" ] && { _endpoint_key "${1:-default}"; return; }
	"$KILND" --data "$DATA" keys create --workspace "${1:-default}" 2>/dev/null
}

# api METHOD PATH [BODY] [curl args...]: sets STATUS and BODY (the body
# is also in $T/body). $KEY is the caller's key ("" for none). The
# request goes through the test's client (tests/e2e/client.py, and why)
# where it can: from the test's own shell or a command substitution, over
# http, with no curl argument but --data-binary and -H; else through curl.
KEY=
api() {
	local method=$1 path=$2 body=${3-}; shift; shift; [ $# -gt 0 ] && shift
	if ! _kc_api "$method" "$path" "$body" "$@"; then
		local auth=()
		[ -n "$KEY" ] && auth=(-H "Authorization: Bearer $KEY")
		if [ -n "$body" ]; then
			STATUS=$(curl -s -m 300 -o "$T/body" -w '%{http_code}' -X "$method" "${auth[@]}" \
				-H 'Content-Type: application/json' --data-binary "$body" "$@" "$URL$path")
		else
			STATUS=$(curl -s -m 300 -o "$T/body" -w '%{http_code}' -X "$method" "${auth[@]}" "$@" "$URL$path")
		fi
	fi
	# As $(cat) would, less its fork: no trailing newlines.
	BODY=
	IFS= read -r -d '' BODY < "$T/body"
	while [[ $BODY == *$'\n' ]]; do BODY=${BODY%$'\n'}; done
}

# jget EXPR: evaluate a Python expression on the last answer's JSON (as j).
# (It reads the body from $T/body, where api put it: a large body does not
# fit in an argument.)
jget() {
	local rc out=
	if _kc jget "$1" "$T/body"; then
		rc=$_KC_ANSWER
		IFS= read -r -d '' out < "$T/kc.out.$BASHPID"
		printf '%s' "$out"
		return "$rc"
	fi
	python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(($1))" "$T/body" 2>/dev/null
}

# ---- the test's client (tests/e2e/client.py) ----
# Started by the test's own shell at its first use (a coprocess started
# in a command substitution would end with it). KILN_TEST_CURL=1: never.
_KC_N=0
# _kc OP ARG...: one request to the client (api: METHOD URL KEY BODYFILE
# CTYPE [HEADER...]; jget: EXPR JSONFILE); sets _KC_ANSWER. False where
# the client cannot be used here or did not answer.
_kc() {
	local op=$1 id line rid ans i
	shift
	if [ -z "${_KC_PID:-}" ]; then
		{ [ "${KILN_TEST_CURL:-}" = 1 ] || [ "$BASHPID" != $$ ]; } && return 1
		coproc _KC { exec python3 "$REPO/tests/e2e/client.py"; }
	fi
	{ : >&"${_KC[1]:-}"; } 2>/dev/null || return 1
	_KC_N=$((_KC_N + 1))
	id=$BASHPID.$_KC_N
	if [ "$op" = jget ]; then
		printf '%s' "$1" > "$T/kc.expr.$BASHPID"
		line="jget	$id	$T/kc.expr.$BASHPID	$2	$T/kc.out.$BASHPID"
	else
		local IFS=$'\t'
		line="api	$id	$1	$2	$3	$4	$5	$T/body${6:+	}${*:6}"
	fi
	printf '%s\n' "$line" >&"${_KC[1]:-}" 2>/dev/null || return 1
	# An answer to a request whose asker was stopped before it read it
	# comes first: skip it.
	for i in 1 2 3 4; do
		IFS=$'\t' read -r rid ans <&"${_KC[0]:-}" 2>/dev/null || return 1
		[ "$rid" = "$id" ] && break
	done
	[ "$rid" = "$id" ] && [ "$ans" != err ] || return 1
	_KC_ANSWER=$ans
}
# _kc_api METHOD PATH BODY [curl args]: api through the client, where the
# curl arguments are only --data-binary (a literal or @FILE) and -H.
_kc_api() {
	local method=$1 path=$2 body=$3 ctype=application/json hdrs=() bfile=
	shift 3
	[[ $URL == http://* ]] || return 1
	while [ $# -gt 0 ]; do
		case $1 in
			--data-binary) [ $# -ge 2 ] || return 1
				if [[ $2 == @* ]]; then bfile=${2#@}; else printf '%s' "$2" > "$T/kc.body.$BASHPID"; bfile=$T/kc.body.$BASHPID; fi
				ctype=application/x-www-form-urlencoded; shift 2 ;;
			-H) [ $# -ge 2 ] || return 1
				[[ $2 == *$'\t'* || $2 == *$'\n'* ]] && return 1
				if [[ ${2,,} == content-type:* ]]; then ctype=${2#*:}; ctype=${ctype# }; else hdrs+=("$2"); fi
				shift 2 ;;
			*) return 1 ;;
		esac
	done
	if [ -n "$body" ]; then
		printf '%s' "$body" > "$T/kc.body.$BASHPID"; bfile=$T/kc.body.$BASHPID; ctype=application/json
	fi
	_kc api "$method" "$URL$path" "$KEY" "$bfile" "$ctype" "${hdrs[@]}" || return 1
	STATUS=$_KC_ANSWER
}

# expect NAME STATUS CODE: the last api call answered STATUS and, if CODE
# is not "-", an error with that code in the documented shape.
expect() {
	local name=$1 want=$2 code=$3
	if [ "$STATUS" != "$want" ]; then
		fail "$name" "status $STATUS, wanted $want: $(head -c 300 <<<"$BODY")"
		return 1
	fi
	if [ "$code" != - ]; then
		local got
		got=$(jget 'j["error"]["code"] if isinstance(j["error"]["message"], str) else ""')
		if [ "$got" != "$code" ]; then
			fail "$name" "status $STATUS but error code '$got', wanted '$code': $(head -c 300 <<<"$BODY")"
			return 1
		fi
	fi
	if [ "$code" = - ]; then pass "$name" "$want"; else pass "$name" "$want $code"; fi
}

# alive NAME: kilnd is still running and answering.
alive() {
	if [ -n "$E2E_ENDPOINT" ]; then
		if curl -s -m 30 -o /dev/null -w '%{http_code}' "$URL/healthz" | grep -q 200; then
			pass "$1" "the endpoint still serving"
		else
			fail "$1" "the endpoint $URL stopped answering /healthz"
		fi
		return
	fi
	if kill -0 "$KILND_PID" 2>/dev/null && curl -s -o /dev/null -w '%{http_code}' "$URL/healthz" | grep -q 200; then
		pass "$1" "kilnd still serving"
	else
		fail "$1" "kilnd died or stopped answering; log: $(tail -5 "$T/kilnd.log" | tr '\n' ' ')"
	fi
}

# build_template NAME: build (or reuse, within this test) a template.
# (Each test builds its own: a template's layer names its root image by
# path, and kilnd refuses one outside its own directories, so one built
# for the whole run could not be handed out.)
# It reports PASS as well as FAIL: tests/run's reruns count a case that
# failed once as settled only when it passed in another run.
# build_template [--own] NAME: `kilnd template build NAME` for this test.
# Under tests/integration/run (KILN_TEMPLATE_CACHE), NAME is built once
# per run there and DATA/templates is a link to the run's templates: their
# files are only read by sandboxes (a sandbox's disk is a layer above its
# template's, in DATA/sandboxes), and a template's zygote is this test's
# own (those a test before left are stopped here; _on_exit stops this
# test's through the link). --own: a build of the test's own, for a test
# that changes its template or keeps its data on a filesystem of its own.
build_template() {
	local own= z
	[ "$1" = --own ] && { own=1; shift; }
	[ -n "$E2E_ENDPOINT" ] && { _endpoint_template "$1" "$own"; return; }
	local cache=${KILN_TEMPLATE_CACHE:-}
	if [ -z "$own" ] && [ -n "$cache" ] && { [ -L "$DATA/templates" ] || [ ! -e "$DATA/templates" ]; }; then
		if [ ! -e "$cache/templates/$1/current" ]; then
			"$KILND" --data "$cache" template build "$1" > "$cache/build-$1.log" 2>&1 ||
				{ echo "FAIL template_$1: $(tail -3 "$cache/build-$1.log" | tr '\n' ' ')"; rm -rf "$cache/templates/$1"; return 1; }
		fi
		# As kilnd opens its own data directory's template directories to
		# the jailed VMMs (passable, not listable; src/host/jail.c
		# add_ro), which it does not do outside its data directory.
		chmod a+x "$cache" "$cache/templates" "$cache"/templates/* "$cache"/templates/*/v* 2>/dev/null
		for z in "$cache"/templates/*/v*/zygote.pid; do
			[ -f "$z" ] && kill -9 "$(cut -d' ' -f1 "$z")" 2>/dev/null
		done
		mkdir -p "$DATA" && ln -sfn "$cache/templates" "$DATA/templates" ||
			{ echo "FAIL template_$1: cannot link $cache/templates to $DATA/templates"; return 1; }
		echo "PASS template_$1: $(tail -1 "$cache/build-$1.log") (built once in this run, $cache)"
		return 0
	fi
	"$KILND" --data "$DATA" template build "$1" > "$T/build-$1.log" 2>&1 ||
		{ echo "FAIL template_$1: $(tail -3 "$T/build-$1.log" | tr '\n' ' ')"; return 1; }
	echo "PASS template_$1: $(tail -1 "$T/build-$1.log")"
}

# have_kvm: whether sandboxes can run here.
have_kvm() { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }

# create_sandbox [BODY]: POST /v1/sandboxes; sets SBX (empty on failure).
# wait_status ID WANT SECONDS: poll GET (not activity) until its status,
# or "ended:WHY" once it answers 404 sandbox_ended; prints what it saw.
wait_status() {
	local seen= i
	for i in $(seq 1 $(( $3 * 2 ))); do
		api GET "/v1/sandboxes/$1"
		if [ "$STATUS" = 404 ]; then seen=ended:$(jget 'j["error"].get("ended")'); else seen=$(jget 'j["status"]'); fi
		[ "$seen" = "$2" ] && break
		sleep 0.5
	done
	echo "$seen"
}

create_sandbox() {
	local body=${1:-'{"template":"minimal"}'}
	api POST /v1/sandboxes "$body"
	SBX=
	[ "$STATUS" = 201 ] && SBX=$(jget 'j["id"]')
}

# ---- metering (81-kilnd-billing, 83-kilnd-metering) ----

# meter_sandbox PREFIX: a template "meter" of 2 vCPUs and 512 MiB (the
# minimal root: metering counts what a sandbox of that size does; against
# an endpoint, built by its hosts), kilnd
# sampling every 500 ms on the free plan, a key, and a sandbox of it in
# S. On failure it says which step (PREFIX_create for the sandbox) and
# returns 1.
meter_sandbox() {
	S=
	if endpoint; then
		# The endpoint's hosts built it so (tests/cluster/hosts.sh).
		build_template meter || return 1
	else
		"$KILND" --data "$DATA" template build meter --image "$BUILD/guest/rootfs-minimal.ext4" --vcpus 2 --memory 512 \
			> "$T/build.log" 2>&1 || { fail template_meter "$(tail -3 "$T/build.log" | tr '\n' ' ')"; return 1; }
	fi
	start_kilnd --rate 0 --sample-ms 500 --default-plan free || return 1
	KEY=$(new_key meter)
	create_sandbox '{"template":"meter"}'
	S=$SBX
	[ -n "$S" ] || { fail "$1_create" "$STATUS $BODY"; return 1; }
}
# sbx_usage ID FIELD: the field of a sandbox's usage, a sample after now.
sbx_usage() { sleep 1.2; api GET "/v1/sandboxes/$1"; jget "j['usage']['$2']"; }
# within V LO HI: LO <= V <= HI (numbers with decimals).
within() { python3 -c "import sys; v, lo, hi = map(float, sys.argv[1:]); sys.exit(0 if lo <= v <= hi else 1)" "$@"; }


# ---- against an endpoint (KILN_API_URL, above) ----

# _op METHOD PATH [BODY]: the endpoint's operator API; _OP_STATUS, the
# body in $T/op.body.
_op() {
	_OP_STATUS=$(curl -s -m 60 -o "$T/op.body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $KILN_ADMIN_KEY" \
		${3:+-H 'Content-Type: application/json' --data-binary "$3"} "$URL$2")
}
_op_json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(($1))" "$T/op.body" 2>/dev/null; }

# _endpoint_start ARGS: the endpoint answers, and has the options asked.
_endpoint_start() {
	local has=${KILN_API_ARGS---rate 0}
	if [ "$*" != "$has" ]; then
		fail start_kilnd "this test's kilnd is given '$*', the endpoint $URL has '$has' (KILN_API_ARGS): run it with one-box kilnd"
		return 1
	fi
	curl -s -m 30 -o /dev/null -w '%{http_code}' "$URL/healthz" | grep -q 200 && return 0
	fail start_kilnd "the endpoint $URL does not answer /healthz"
	return 1
}

# _endpoint_ws NAME: the endpoint's name of this test's workspace NAME.
_endpoint_ws() { local ws=$E2E_WS$1; echo "${ws:0:16}"; }

# _endpoint_key NAME: a workspace of this test (made at its first key,
# recorded in $T/workspaces for _endpoint_cleanup) and a key of it.
_endpoint_key() {
	local ws
	ws=$(_endpoint_ws "$1")
	if ! grep -qx "$ws" "$T/workspaces" 2>/dev/null; then
		_op POST /v1/admin/workspaces "{\"name\":\"$ws\"}"
		if [ "$_OP_STATUS" != 201 ]; then
			fail new_key "workspace $ws at $URL: $_OP_STATUS $(head -c 300 "$T/op.body")" >&2
			return 1
		fi
		echo "$ws" >> "$T/workspaces"
	fi
	_op POST "/v1/admin/workspaces/$ws/keys" '{"name":"e2e"}'
	if [ "$_OP_STATUS" != 201 ]; then
		fail new_key "a key of $ws at $URL: $_OP_STATUS $(head -c 300 "$T/op.body")" >&2
		return 1
	fi
	_op_json 'j["key"]'
}

# endpoint_revoke NAME: revoke every key of this test's workspace NAME
# through the operator API (what `kilnd keys revoke` does one-box).
endpoint_revoke() {
	local ws id n=0
	ws=$(_endpoint_ws "$1")
	_op GET "/v1/admin/workspaces/$ws/keys"
	for id in $(_op_json '" ".join(k["id"] for k in j["keys"])'); do
		_op DELETE "/v1/admin/workspaces/$ws/keys/$id"
		[ "$_OP_STATUS" = 204 ] && n=$((n + 1))
	done
	[ $n -ge 1 ]
}

# ws_name NAME: the name this test's workspace NAME has where it runs
# (against an endpoint, led by the test's prefix).
ws_name() { if endpoint; then _endpoint_ws "$1"; else echo "$1"; fi; }

# operator_key: an operator's key (one-box: `kilnd admin create`; against
# an endpoint, KILN_ADMIN_KEY).
operator_key() {
	if endpoint; then echo "$KILN_ADMIN_KEY"; else "$KILND" --data "$DATA" admin create --name t 2>/dev/null; fi
}

# endpoint_plan NAME PLAN [LIMITS]: against an endpoint, this test's
# workspace NAME on PLAN with the limits LIMITS over it (a JSON object)
# through the operator API: what `kilnd workspace plan NAME PLAN
# [LIMITS]` does one-box. Made if it is not yet (recorded for
# _endpoint_cleanup), else moved; a FAIL line naming it where refused.
endpoint_plan() {
	local ws body
	ws=$(_endpoint_ws "$1")
	body="{\"plan\":\"$2\"${3:+,\"limits\":$3}}"
	if grep -qx "$ws" "$T/workspaces" 2>/dev/null; then
		_op PATCH "/v1/admin/workspaces/$ws" "$body"
	else
		_op POST /v1/admin/workspaces "{\"name\":\"$ws\",${body#\{}"
		[ "$_OP_STATUS" = 201 ] && echo "$ws" >> "$T/workspaces"
	fi
	[[ $_OP_STATUS == 20? ]] && return 0
	fail "plan_$1" "workspace $ws on plan $2 ${3:-} at $URL: $_OP_STATUS $(head -c 300 "$T/op.body")"
	return 1
}

# _endpoint_template NAME OWN: the endpoint lists NAME ready (built by
# its hosts); a build of the test's own (--own) it cannot give.
_endpoint_template() {
	local st
	if [ -n "$2" ]; then
		fail "template_$1" "a build of the test's own (build_template --own) needs one-box kilnd"
		return 1
	fi
	# Asked again for up to 60 s: a replica lists what the hosts that
	# answer it have, and a template on one host only (81-kilnd-billing's
	# meter) was "absent" once while that host was slow to answer
	# (session 35).
	local i
	for i in $(seq 1 30); do
		st=$(curl -s -m 60 -H "Authorization: Bearer $KILN_API_KEY" "$URL/v1/templates" |
			python3 -c 'import json,sys; print(" ".join(t["status"] for t in json.load(sys.stdin)["templates"] if t["name"] == sys.argv[1]) or "absent")' "$1" 2>&1)
		[ "$st" = ready ] && break
		sleep 2
	done
	if [ "$st" = ready ]; then
		pass "template_$1" "ready at the endpoint $URL (built by its hosts)"
	else
		fail "template_$1" "not ready at the endpoint $URL: $st"
		return 1
	fi
}

# _endpoint_cleanup: every sandbox of the workspaces this test made is
# deleted (with a key made for it), then the workspaces, which revokes
# their keys; a workspace left is a FAIL line.
_endpoint_cleanup() {
	local ws k s i
	[ -s "$T/workspaces" ] || return 0
	while read -r ws; do
		_op POST "/v1/admin/workspaces/$ws/keys" '{"name":"e2e-cleanup"}'
		k=$(_op_json 'j["key"]')
		for i in $(seq 1 30); do
			for s in $(curl -s -m 60 -H "Authorization: Bearer $k" "$URL/v1/sandboxes?limit=1000" |
					python3 -c 'import json,sys; print(" ".join(s["id"] for s in json.load(sys.stdin)["sandboxes"]))' 2>/dev/null); do
				curl -s -m 120 -o /dev/null -X DELETE -H "Authorization: Bearer $k" "$URL/v1/sandboxes/$s"
			done
			_op DELETE "/v1/admin/workspaces/$ws"
			[ "$_OP_STATUS" = 204 ] && break
			sleep 1
		done
		[ "$_OP_STATUS" = 204 ] || echo "FAIL cleanup: workspace $ws at $URL not deleted: $_OP_STATUS $(head -c 300 "$T/op.body")"
	done < "$T/workspaces"
}
