#!/bin/bash
# tests/unit/cluster.sh [REPO [BUILD]]: hosts joining a kiln cluster and
# heartbeating (docs/cluster.md), for real: a throwaway PostgreSQL (the
# cluster's store), kilnd serving the API on it, and several kilnd
# --role agent on this machine (no VM is started, so no KVM is needed),
# each with its own data directory and port. Join tokens (single use, any
# number of uses, expired, revoked, eight joins racing on one use), the
# credential kept across an agent's restart, a host killed with SIGKILL
# marked down within the documented bound and up again on its return, a
# revoked host's heartbeats refused and logged on both sides, cordon /
# drain / uncordon, bad credentials, and a join over HTTPS with a private
# CA (and refused with the wrong CA). Everything started is stopped and
# removed at the end, failed or not. Run by the unit loop as
# build/tests/unit_cluster; prints PASS/FAIL lines, exits 1 on any FAIL.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${2:-$repo/build}
kilnd=$build/kilnd
rc=0
pass() { echo "PASS cluster $1${2:+: $2}"; }
fail() { echo "FAIL cluster $1${2:+: $2}"; rc=1; }
check() { local n=$1 d=$2; shift 2; if "$@"; then pass "$n" "$d"; else fail "$n" "$d"; fi; }
[ -x "$kilnd" ] || { echo "FAIL cluster: $kilnd missing: make all first"; exit 1; }
. "$repo/tests/unit/pgserver.sh"

dir=$(mktemp -d /tmp/kiln-cluster.XXXXXX) || exit 1
pids=()
cleanup() {
	for p in "${pids[@]}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done
	for d in "$dir"/cg-*; do [ -e "$d" ] && rmdir "/sys/fs/cgroup/$(basename "$d")" 2>/dev/null; done
	pg_server_remove "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
t0=$EPOCHREALTIME
pg_server_start "$dir" || { echo "FAIL cluster: $pg_error"; exit 1; }
"${pg_as[@]}" "$pg_bin/createdb" -h "$dir" -U kiln kiln_cluster >/dev/null 2>&1 || { echo "FAIL cluster: createdb"; exit 1; }
store="postgresql://kiln@/kiln_cluster?host=$dir&pool=4"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# until SECONDS CMD...: run CMD every 0.2 s until it succeeds or time is up.
until_ok() {
	local end=$((SECONDS + $1)); shift
	while ! "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done
}
# A kilnd that touches nothing of the machine: no network, no jail, a
# cgroup of its own (if the machine has cgroup v2 at all).
kd_opts() { echo --no-net --no-jail --net-pool 0 --cgroup "/sys/fs/cgroup/kiln-test-$$-$1"; }
# start NAME ARGS...: kilnd serve in the background, its data in dir/NAME.
start() {
	local name=$1; shift
	mkdir -p "$dir/$name"
	touch "$dir/cg-kiln-test-$$-$name"
	"$kilnd" --data "$dir/$name" $(kd_opts "$name") "$@" > "$dir/$name.log" 2>&1 &
	pids+=($!)
	eval "pid_${name//-/_}=$!"
}
admin() { "$kilnd" --data "$dir/admin" --store "$store" "$@"; }
# state NAME: the host's STATE column in `kilnd cluster hosts`.
state() { admin cluster hosts 2>/dev/null | awk -v n="$1" '$2 == n { print $3 }'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
hosts_named() { admin cluster hosts 2>/dev/null | awk -v n="$1" '$2 == n' | wc -l; }

api_port=$(free_port)
API=http://127.0.0.1:$api_port
start api --store "$store" --listen "127.0.0.1:$api_port"
until_ok 20 curl -sf -o /dev/null "$API/healthz" || { fail api_start "$(tail -5 "$dir/api.log")"; exit 1; }

agent() { # agent NAME [ARGS...]: a host joining the API
	local name=$1; shift
	start "$name" --role agent --listen "127.0.0.1:$(free_port)" --api "$API" --name "$name" "$@"
}

# ---- join: a single-use token admits one host -------------------------------------------------
t1=$(admin cluster token create 2>/dev/null)
agent host-a --join-token "$t1"
until_ok 15 is_state host-a up
check join_single_use "host-a: $(state host-a); token ${t1:0:12}..." [ "$(state host-a)" = up ]
mode=$(stat -c %a "$dir/host-a/cluster.json" 2>/dev/null)
check credential_kept "DATA/cluster.json mode $mode, holds a kiln_node_ credential" \
	eval '[ "$mode" = 600 ] && grep -q "\"kiln_node_" "$dir/host-a/cluster.json" && ! grep -q "$t1" "$dir/host-a/cluster.json"'
line=$(admin cluster hosts | awk '$2 == "host-a"')
check hosts_capacity "$line" eval '[ "$(awk "{print \$4}" <<<"$line")" = "$(nproc)" ] && [[ $line == *" 0.1.0 "* ]]'

agent host-b --join-token "$t1"
until_ok 15 sh -c "! kill -0 $pid_host_b 2>/dev/null"
wait "$pid_host_b"; st=$?
check join_token_used_up "second join: exit $st: $(grep -o 'cluster: .*' "$dir/host-b.log" | head -1); API: $(grep -o 'join from .*' "$dir/api.log" | tail -1)" \
	eval '[ $st != 0 ] && grep -q "refused" "$dir/host-b.log" && grep -q "join token jt_.* is used up" "$dir/api.log" && [ "$(hosts_named host-b)" = 0 ]'

# ---- any number of uses, expired, revoked ----------------------------------------------------------
tm=$(admin cluster token create --uses any 2>/dev/null)
rm -rf "$dir/host-b"
agent host-b --join-token "$tm"
agent host-c --join-token "$tm"
until_ok 15 eval '[ "$(state host-b) $(state host-c)" = "up up" ]'
check join_multi_use "host-b $(state host-b), host-c $(state host-c)" [ "$(state host-b) $(state host-c)" = "up up" ]
te=$(admin cluster token create --expires 1 2>/dev/null)
sleep 2
agent host-d --join-token "$te"
until_ok 15 sh -c "! kill -0 $pid_host_d 2>/dev/null"
check join_expired "$(grep -o 'join from .*' "$dir/api.log" | tail -1)" \
	eval 'grep -q "join token jt_.* expired" "$dir/api.log" && [ "$(hosts_named host-d)" = 0 ]'
tr_=$(admin cluster token create 2>/dev/null)
admin cluster token revoke "${tr_:0:12}" 2>/dev/null
rm -rf "$dir/host-d"
agent host-d --join-token "$tr_"
until_ok 15 sh -c "! kill -0 $pid_host_d 2>/dev/null"
check join_revoked "$(grep -o 'join from .*' "$dir/api.log" | tail -1)" \
	eval 'grep -q "join token jt_.* is revoked" "$dir/api.log" && [ "$(hosts_named host-d)" = 0 ]'
listed=$(admin cluster token list | awk 'NR > 1 { print $3 }' | sort | tr '\n' ' ')
check token_list "states: $listed" [ "$listed" = "active expired revoked used " ]

# ---- eight joins racing on one use: exactly one wins --------------------------------------------------
tr1=$(admin cluster token create 2>/dev/null)
racers=()
for i in 1 2 3 4 5 6 7 8; do
	curl -s -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
		--data "{\"token\":\"$tr1\",\"name\":\"race-$i\",\"url\":\"http://127.0.0.1:1\",\"vcpus\":1,\"memory_mib\":64}" \
		"$API/v1/cluster/join" > "$dir/race-$i" &
	racers+=($!)
done
wait "${racers[@]}"
codes=$(cat "$dir"/race-* | sort | uniq -c | awk '{ print $2 "x" $1 }' | tr '\n' ' ')
check join_race_one_winner "8 joins on one use: $codes" eval '[ "$codes" = "201x1 401x7 " ] && [ "$(admin cluster hosts | grep -c " race-")" = 1 ]'

# ---- bad credentials and bodies -------------------------------------------------------------------------
bad=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer kiln_node_$(head -c 32 /dev/zero | tr '\0' a)" \
	-H 'Content-Type: application/json' --data '{"vcpus":1,"memory_mib":1}' "$API/v1/cluster/heartbeat")
none=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data '{"vcpus":1,"memory_mib":1}' "$API/v1/cluster/heartbeat")
body=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data "{\"token\":\"$tm\",\"name\":\"x\"}" "$API/v1/cluster/join")
check bad_credentials "unknown credential $bad, none $none, join without url $body" \
	eval '[ "$bad $none $body" = "401 401 400" ] && grep -q "heartbeat from .* refused: unknown host credential" "$dir/api.log"'

# ---- a host killed: down within the bound, up again when it returns ---------------------------------------
{ kill -9 "$pid_host_c"; wait "$pid_host_c"; } 2>/dev/null
t=$SECONDS
until_ok 20 is_state host-c down
took=$((SECONDS - t))
reason=$(admin cluster hosts | awk '$2 == "host-c"' | grep -o 'no heartbeat for [0-9]* s')
check host_down_within_bound "host-c down after ${took} s ($reason); host-a $(state host-a)" \
	eval '[ "$(state host-c)" = down ] && [ $took -le 15 ] && [ -n "$reason" ] && [ "$(state host-a)" = up ]'
agent host-c
until_ok 15 is_state host-c up
check host_back_up "restarted without a token: $(state host-c), $(hosts_named host-c) record" \
	eval '[ "$(state host-c)" = up ] && [ "$(hosts_named host-c)" = 1 ] && grep -q "host-c .* is up again" "$dir/api.log"'

# ---- revoke, cordon, drain --------------------------------------------------------------------------------
admin cluster hosts revoke host-b 2>/dev/null
until_ok 15 grep -q "heartbeat refused" "$dir/host-b.log"
check host_revoked "host-b $(state host-b); API: $(grep -o 'heartbeat from .* revoked' "$dir/api.log" | tail -1)" \
	eval '[ "$(state host-b)" = revoked ] && grep -q "heartbeat from .* refused: host host-b .* is revoked" "$dir/api.log" &&
	      grep -q "heartbeat refused" "$dir/host-b.log"'
admin cluster hosts uncordon host-b 2> "$dir/err"; st=$?
check revoked_is_final "uncordon a revoked host: exit $st: $(cat "$dir/err")" [ $st != 0 ]
admin cluster hosts cordon host-a 2>/dev/null; s1=$(state host-a)
admin cluster hosts drain host-a 2>/dev/null; s2=$(state host-a)
admin cluster hosts uncordon host-a 2>/dev/null; s3=$(state host-a)
check cordon_drain_uncordon "$s1 -> $s2 -> $s3" [ "$s1 $s2 $s3" = "cordoned draining up" ]

# ---- over HTTPS with a private CA ------------------------------------------------------------------------------
C=$dir/certs
mkdir -p "$C"
(
	cd "$C" &&
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=kiln test CA" &&
	openssl req -newkey rsa:2048 -nodes -keyout api.key -out api.csr -subj "/CN=127.0.0.1" &&
	printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > ext &&
	openssl x509 -req -in api.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out api.pem -days 2 -extfile ext &&
	openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 -subj "/CN=another CA"
) > "$dir/openssl.log" 2>&1 || fail certificates "$(tail -3 "$dir/openssl.log" | tr '\n' ' ')"
tls_port=$(free_port)
# A second API on the same database (a replica), serving HTTPS.
start api2 --store "$store" --listen "127.0.0.1:$tls_port" --tls-cert "$C/api.pem" --tls-key "$C/api.key"
until_ok 20 curl -sf --cacert "$C/ca.pem" -o /dev/null "https://127.0.0.1:$tls_port/healthz"
API=https://127.0.0.1:$tls_port
agent host-e --join-token "$tm" --api-ca "$C/other.pem"
until_ok 15 sh -c "! kill -0 $pid_host_e 2>/dev/null"
check tls_wrong_ca "$(grep -o 'cluster: .*' "$dir/host-e.log" | head -1)" \
	eval 'grep -qi "certificate" "$dir/host-e.log" && [ "$(hosts_named host-e)" = 0 ]'
rm -rf "$dir/host-e"
agent host-e --join-token "$tm" --api-ca "$C/ca.pem"
until_ok 15 is_state host-e up
check tls_join_and_heartbeat "host-e over https: $(state host-e)" \
	eval '[ "$(state host-e)" = up ] && grep -q "host host-e .* joined" "$dir/api2.log"'

echo "cluster: $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
exit $rc
