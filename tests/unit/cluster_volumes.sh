#!/bin/bash
# tests/unit/cluster_volumes.sh [REPO [BUILD]]: named volumes in a kiln
# cluster (docs/cluster.md "Volumes"), without KVM: a throwaway
# PostgreSQL, one kilnd --role api on it and two kilnd --role agent on
# this machine (no VM is started). A volume is made on one host (the up,
# active one with the most free disk: here the one not cordoned),
# recorded in the cluster's database and placed there; its host answers
# which sandboxes have it; names are the workspace's over every host and
# the plan's volume count is the cluster's; a create whose volumes are on
# two hosts is refused before any host is called; while a volume's host
# is down the volume is listed with the reason, not deleted, and a create
# with it is refused naming the host; back up, it is deleted, file and
# all. Sandboxes with volumes on real guests: tests/cluster/hosts.sh.
# Everything started is stopped and removed at the end, failed or not.
# Run by the unit loop as build/tests/unit_cluster_volumes; prints
# PASS/FAIL lines, exits 1 on any FAIL.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${2:-$repo/build}
rc=0
pass() { echo "PASS cluster_volumes $1${2:+: $2}"; }
fail() { echo "FAIL cluster_volumes $1${2:+: $2}"; rc=1; }
check() { local n=$1 d=$2; shift 2; if "$@"; then pass "$n" "$d"; else fail "$n" "$d"; fi; }
[ -x "$build/kilnd" ] || { echo "FAIL cluster_volumes: $build/kilnd missing: make all first"; exit 1; }
dir=$(mktemp -d /tmp/kiln-clvol.XXXXXX) || exit 1
. "$repo/tests/cluster/lib.sh"
cleanup() {
	cl_cleanup
	local d
	for d in "$dir"/cg-*; do [ -e "$d" ] && rmdir "/sys/fs/cgroup/$(basename "$d")" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
t0=$EPOCHREALTIME
until_ok() {
	local end=$((SECONDS + $1)); shift
	while ! "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done
}
cl_setup || { echo "FAIL cluster_volumes setup: $cl_error"; exit 1; }
key_vq=$(cl_admin keys create --workspace cl-vq 2>/dev/null)
cl_admin workspace plan cl-vq team '{"volumes": 1}' >/dev/null 2>&1
port=$(free_port)
cl_start_api api "$port" || { echo "FAIL cluster_volumes setup: $cl_error"; exit 1; }
API=http://127.0.0.1:$port

# agent NAME PORT: a host agent that starts no VM here (no network, no
# jail, a cgroup of its own), joining with the token (its credential
# after that); its pid in pid_NAME.
agent() {
	local name=$1 port=$2
	mkdir -p "$dir/$name"
	touch "$dir/cg-kiln-test-$$-$name"
	"$kilnd" --data "$dir/$name" --no-net --no-jail --net-pool 0 --cgroup "/sys/fs/cgroup/kiln-test-$$-$name" \
		--role agent --listen "127.0.0.1:$port" --api "$API" --name "$name" --join-token "$token" \
		>> "$dir/$name.log" 2>&1 &
	cl_pids+=($!)
	eval "pid_${name//-/_}=$!"
}
state() { cl_admin cluster hosts 2>/dev/null | awk -v n="$1" '$2 == n { print $3 }'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
# api METHOD PATH [BODY] [KEY]: STATUS and BODY of one call.
api() {
	STATUS=$(curl -s -m 60 -o "$dir/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer ${4:-$key}" \
		-H 'Content-Type: application/json' ${3:+--data-binary "$3"} "$API$2")
	BODY=$(cat "$dir/body")
}
jget() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$dir/body" "$1" 2>/dev/null; }
host_of() { cl_sql "SELECT h.name || ' ' || p.kind FROM placements p JOIN hosts h ON h.id = p.host_id WHERE p.id = '$1' AND p.ended_ms IS NULL"; }

port_a=$(free_port) port_b=$(free_port)
agent host-a "$port_a"
agent host-b "$port_b"
until_ok 30 eval 'is_state host-a up && is_state host-b up' || { echo "FAIL cluster_volumes setup: hosts $(state host-a) $(state host-b)"; exit 1; }

# ---- made where there is room, recorded and placed -------------------------------
cl_admin cluster hosts cordon host-b >/dev/null 2>&1
api POST /v1/volumes '{"name":"va","size_mib":8}'; VA=$(jget 'j["id"]')
check create_on_host "$STATUS $VA: $(host_of "$VA"); file on host-a only" \
	eval '[ "$STATUS" = 201 ] && [ "$(host_of "$VA")" = "host-a volume" ] && [ -f "$dir/host-a/volumes/$VA.img" ] &&
	      [ ! -e "$dir/host-b/volumes/$VA.img" ] && [ "$(jget "j[\"attached_to\"]")" = "[]" ]'
cl_admin cluster hosts uncordon host-b >/dev/null 2>&1
cl_admin cluster hosts cordon host-a >/dev/null 2>&1
api POST /v1/volumes '{"name":"vb","size_mib":8}'; VB=$(jget 'j["id"]')
check create_other_host "$STATUS $VB: $(host_of "$VB")" \
	eval '[ "$STATUS" = 201 ] && [ "$(host_of "$VB")" = "host-b volume" ] && [ -f "$dir/host-b/volumes/$VB.img" ]'
# host-b has no "va": the cluster's database says the name is taken.
api POST /v1/volumes '{"name":"va","size_mib":8}'
check name_is_the_clusters "$STATUS: $(jget 'j["error"]["message"]')" \
	eval '[ "$STATUS" = 409 ] && grep -q "named .va. exists" <<<"$BODY" && [ -z "$(ls "$dir/host-b/volumes" | grep -v "$VB")" ]'
cl_admin cluster hosts uncordon host-a >/dev/null 2>&1
rows=$(cl_sql "SELECT name FROM volumes WHERE name LIKE 'v%' AND deleted_ms IS NULL ORDER BY name" | tr '\n' ' ')
api GET /v1/volumes
check listed "$STATUS; database: $rows" \
	eval '[ "$STATUS" = 200 ] && [ "$(jget "sorted((v[\"name\"], v[\"attached_to\"]) for v in j[\"volumes\"])")" = "[('"'"'va'"'"', []), ('"'"'vb'"'"', [])]" ] &&
	      [ "$rows" = "va vb " ]'
api GET "/v1/volumes/$VB"
check get "$STATUS $(jget 'j["name"], j["size_mib"]')" eval '[ "$STATUS" = 200 ] && [ "$(jget "j[\"name\"]")" = vb ]'

# ---- the plan's count is over every host ------------------------------------------
api POST /v1/volumes '{"name":"q1","size_mib":4}' "$key_vq"; st1=$STATUS
api POST /v1/volumes '{"name":"q2","size_mib":4}' "$key_vq"
check plan_volumes "first $st1, second $STATUS: $(jget 'j["error"]["message"]')" \
	eval '[ "$st1" = 201 ] && [ "$STATUS" = 429 ] && [ "$(jget "j[\"error\"][\"limit\"]")" = volumes ]'

# ---- a sandbox's volumes share its host ------------------------------------------
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"va","path":"/a"},{"name":"vb","path":"/b"}]}'
check volumes_two_hosts "$STATUS: $(jget 'j["error"]["message"]')" \
	eval '[ "$STATUS" = 400 ] && grep -q "on different hosts" <<<"$BODY" &&
	      [ "$(cl_sql "SELECT count(*) FROM placements WHERE kind = '"'"'sandbox'"'"'")" = 0 ]'

# ---- its host down: shown with the reason, kept, refused for creates --------------
kill -9 "$pid_host_a"; wait "$pid_host_a" 2>/dev/null
until_ok 30 is_state host-a down
api GET "/v1/volumes/$VA"
check listed_host_down "$STATUS attached_to $(jget 'j["attached_to"]'): $(jget 'j["error"]')" \
	eval '[ "$STATUS" = 200 ] && [ "$(jget "j[\"attached_to\"]")" = None ] && grep -q "host-a" <<<"$(jget "j[\"error\"]")"'
api DELETE "/v1/volumes/$VA"; st1=$STATUS b1=$BODY
api POST /v1/sandboxes '{"template":"minimal","volumes":[{"name":"va","path":"/a"}]}'
check host_down_refused "delete $st1, create $STATUS: $(jget 'j["error"]["message"]')" \
	eval '[ "$st1" = 502 ] && grep -q "host-a, which is down" <<<"$b1" && [ "$STATUS" = 502 ] &&
	      grep -q "on host host-a" <<<"$BODY" && [ -f "$dir/host-a/volumes/$VA.img" ]'

# ---- back: deleted, file and all --------------------------------------------------
agent host-a "$port_a"
until_ok 30 is_state host-a up
api DELETE "/v1/volumes/$VA"; st1=$STATUS
api GET "/v1/volumes/$VA"
check deleted "delete $st1, get $STATUS; file $([ -e "$dir/host-a/volumes/$VA.img" ] && echo kept || echo gone); placement $(cl_sql "SELECT ended_ms IS NOT NULL FROM placements WHERE id = '$VA'")" \
	eval '[ "$st1" = 204 ] && [ "$STATUS" = 404 ] && [ ! -e "$dir/host-a/volumes/$VA.img" ] &&
	      [ "$(cl_sql "SELECT ended_ms IS NOT NULL FROM placements WHERE id = '"'"'$VA'"'"'")" = t ]'
api DELETE "/v1/volumes/$VB"; st1=$STATUS
api DELETE "/v1/volumes/$VB"
check deleted_once "$st1 then $STATUS" eval '[ "$st1" = 204 ] && [ "$STATUS" = 404 ] && [ ! -e "$dir/host-b/volumes/$VB.img" ]'

if [ $rc != 0 ]; then
	for n in api host-a host-b; do echo "  $n's last log lines:"; tail -8 "$dir/$n.log" | sed 's/^/  | /'; done
fi
echo "cluster_volumes: $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
exit $rc
