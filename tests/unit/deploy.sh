#!/bin/bash
# tests/unit/deploy.sh [REPO [BUILD]]: what docs/deploy/ and the systemd
# units in scripts/systemd/ tell an operator to run. Each unit passes
# `systemd-analyze verify` (with this build's kilnd in ExecStart and its
# EnvironmentFile given), and every kilnd flag the units and the deploy
# pages use is one this kilnd has (its usage text): a renamed flag fails
# here, not on an operator's machine. Prints PASS/FAIL lines; exits 1 on
# any FAIL.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${2:-$repo/build}
rc=0
pass() { echo "PASS deploy $1${2:+: $2}"; }
fail() { echo "FAIL deploy $1${2:+: $2}"; rc=1; }
[ -x "$build/kilnd" ] || { echo "FAIL deploy: $build/kilnd missing: make all first"; exit 1; }
command -v systemd-analyze >/dev/null || { echo "FAIL deploy: no systemd-analyze (Debian's systemd package; scripts/setup installs it)"; exit 1; }
dir=$(mktemp -d /tmp/kiln-deploy.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
usage=$("$build/kilnd" --help 2>&1)

n=0
for unit in "$repo"/scripts/systemd/*.service; do
	name=$(basename "$unit")
	n=$((n + 1))
	printf 'KILN_STORE=postgresql://kiln@db/kiln\nKILN_API=https://api:7070\nKILN_TOKEN=kjt_x\nKILN_ADVERTISE=https://h:7071\n' > "$dir/env"
	sed -e "s|/usr/local/lib/kiln/kilnd|$build/kilnd|" -e "s|^EnvironmentFile=.*|EnvironmentFile=$dir/env|" \
		"$unit" > "$dir/$name"
	out=$(systemd-analyze verify "$dir/$name" 2>&1)
	# Its own lines only: the host's other units may warn of their own.
	mine=$(grep -F "$name" <<<"$out")
	if [ -z "$mine" ]; then pass "unit_$name" "systemd-analyze verify: clean"
	else fail "unit_$name" "$(tr '\n' ' ' <<<"$mine")"; fi
	grep -q '^KillMode=process' "$unit" || grep -q -- '--role api' "$unit" \
		|| fail "unit_$name" "a unit of a kilnd that runs VMMs must leave them running (KillMode=process)"
done
[ $n -ge 3 ] && pass units "$n units" || fail units "only $n units in scripts/systemd"

# Every --flag on a kilnd line of the pages, and in the units' ExecStart.
flags=$( { grep -hE '(^|[/ ])kilnd [a-z-]' "$repo"/docs/deploy/*.md | grep -v systemctl; sed -n '/^ExecStart=/,/[^\\]$/p' "$repo"/scripts/systemd/*.service; } |
	grep -o -- '--[a-z][a-z-]*' | sort -u)
bad=
for f in $flags; do grep -q -- "$f\b" <<<"$usage" || bad="$bad $f"; done
[ -n "$flags" ] && [ -z "$bad" ] && pass flags "$(wc -w <<<"$flags") kilnd flags the pages and units use, all in kilnd's usage" \
	|| fail flags "not kilnd's:${bad:- (none found at all)}"
exit $rc
