#!/bin/bash
# tests/unit/pg.sh [REPO [BUILD]]: the store's unit tests (unit_kilnd_store)
# against a real PostgreSQL, and kilnd's store commands on it. Starts a
# throwaway server: initdb in a temporary directory (as the postgres user
# when run as root: initdb refuses root), listening only on a Unix socket
# there; stops it and removes everything on exit, failed or not. Run by
# the unit loop as build/tests/unit_pg. PostgreSQL's server missing is a
# failure (Debian's postgresql package; scripts/setup installs it), not a
# skip. Prints "PASS name" / "FAIL name: why" lines; exits 1 on any FAIL.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${2:-$repo/build}

fail() { echo "FAIL pg: $*"; exit 1; }

[ -x "$build/tests/unit_kilnd_store" ] || fail "$build/tests/unit_kilnd_store missing: make all first"
. "$repo/tests/unit/pgserver.sh"

dir=$(mktemp -d /tmp/kiln-pg.XXXXXX) || fail "mktemp"
trap 'pg_server_remove "$dir"' EXIT
trap 'exit 130' INT TERM
t0=$EPOCHREALTIME
pg_server_start "$dir" || fail "$pg_error"
url=$pg_url
as=("${pg_as[@]}") bin=$pg_bin start=("${pg_start[@]}") stop=("${pg_stop[@]}")

# The tests stop and start the server themselves (the outage test).
export KILN_TEST_STORE=$url
export KILN_TEST_PG_STOP="$(printf '%q ' "${stop[@]}") >/dev/null 2>&1"
export KILN_TEST_PG_START="$(printf '%q ' "${start[@]}") >/dev/null 2>&1"
set -o pipefail
timeout -k 5 240 "$build/tests/unit_kilnd_store" 2>&1 | sed -E 's/^(PASS|FAIL) /\1 pg /'
rc=$?
[ $rc != 0 ] && echo "FAIL pg unit_kilnd_store: exited with status $rc"

# kilnd's store commands on PostgreSQL: keys made and listed through it.
kd=$dir/kilnd
mkdir -p "$kd"
kurl="postgresql://kiln@/kiln_keys?host=$dir&pool=2"
"${as[@]}" "$bin/createdb" -h "$dir" -U kiln kiln_keys >/dev/null 2>&1 || fail "createdb kiln_keys"
if key=$("$build/kilnd" --data "$kd" --store "$kurl" keys create --workspace pgws --name ci 2>"$dir/err") &&
	[[ $key == kiln_* ]] &&
	"$build/kilnd" --data "$kd" --store "$kurl" keys list 2>&1 | grep -q ' pgws .* ci .*active'; then
	echo "PASS pg kilnd_keys_on_postgresql"
else
	echo "FAIL pg kilnd_keys_on_postgresql: $(cat "$dir/err")"
	rc=1
fi

# A store that cannot be reached fails kilnd at once, saying why, never
# showing the password.
out=$("$build/kilnd" --data "$kd" --store "postgresql://kiln:topsecret@127.0.0.1:1/kiln" keys list 2>&1)
krc=$?
if [ $krc != 0 ] && [[ $out == *"postgresql://kiln:***@127.0.0.1:1/kiln"* ]] &&
	[[ $out == *"database unavailable"* ]] && [[ $out == *refused* ]] && [[ $out != *topsecret* ]]; then
	echo "PASS pg kilnd_bad_store_fails_clearly"
else
	echo "FAIL pg kilnd_bad_store_fails_clearly: status $krc: $out"
	rc=1
fi
out=$("$build/kilnd" --data "$kd" --store "postgresql://kiln@/nosuchdb?host=$dir" keys list 2>&1)
if [ $? != 0 ] && [[ $out == *nosuchdb*"does not exist"* ]]; then
	echo "PASS pg kilnd_missing_database_fails_clearly"
else
	echo "FAIL pg kilnd_missing_database_fails_clearly: $out"
	rc=1
fi
echo "pg: $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s with the server"
[ $rc = 0 ]
