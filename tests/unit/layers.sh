#!/bin/bash
# tests/unit/layers.sh [SRC]: every arrow points down (DESIGN.md "Layers").
# Reads the `#include "dir/..."` lines of every C file under SRC (default:
# the src/ next to this script) and fails for each one that names a header
# of a layer above the including file's own. Modules of one layer may
# include each other, except src/common, which includes nothing of kiln's.
# A directory under src/ that is not in the table below fails too: a new
# module must be given its place. Prints "PASS name: detail" or
# "FAIL name: why" lines; exits 1 on any FAIL.
set -u

# layer MODULE: its rank (higher is nearer the user), or nothing.
layer() {
	case $1 in
	kilnd) echo 6 ;;		# main, roles, configuration
	api|mcp|proxy|cli|tools) echo 5 ;;	# front ends (and standalone programs)
	ops) echo 4 ;;			# the operations layer
	hostif) echo 3 ;;		# the host interface: local | remote
	host) echo 2 ;;		# the host agent
	vmm|net|store|client|guest) echo 1 ;;	# mechanisms
	common) echo 0 ;;
	esac
}
name() {
	case $1 in
	6) echo "kilnd" ;; 5) echo "front ends" ;; 4) echo "operations" ;;
	3) echo "host interface" ;; 2) echo "host agent" ;; 1) echo "mechanisms" ;;
	0) echo "common" ;;
	esac
}

# check SRC: prints one FAIL line per upward include or unknown module, and
# a count on stdout's last line: "ok N M" (N includes, M modules) or "bad K".
check() {
	local src=$1 bad=0 n=0 mods=0 d m r f line inc im ir
	for d in "$src"/*/; do
		m=$(basename "$d")
		r=$(layer "$m")
		if [ -z "$r" ]; then
			echo "FAIL layers src/$m: not in the layer table of tests/unit/layers.sh"
			bad=$((bad + 1))
			continue
		fi
		mods=$((mods + 1))
		while IFS= read -r line; do
			f=${line%%:*}
			inc=$(sed -E 's/^[^:]*:[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")
			case $inc in */*) ;; *) continue ;; esac
			im=${inc%%/*}
			[ -d "$src/$im" ] || continue
			n=$((n + 1))
			[ "$im" = "$m" ] && continue
			ir=$(layer "$im")
			[ -z "$ir" ] && continue	# reported as unknown above
			if [ "$ir" -gt "$r" ] || { [ "$r" = 0 ] && [ "$im" != "$m" ]; }; then
				echo "FAIL layers ${line%%#*} includes \"$inc\": $(name "$ir") above $m's layer ($(name "$r"))"
				bad=$((bad + 1))
			fi
		done < <(cd "$src/.." && grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' --include='*.c' --include='*.h' "src/$m" | sort)
	done
	if [ $bad = 0 ]; then echo "ok $n $mods"; else echo "bad $bad"; fi
}

here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here/../../src}
[ -d "$src" ] || { echo "FAIL layers: no source directory $src"; exit 1; }
fail=0

# The check itself can fail: a planted upward include, an include from
# common into a mechanism, and an unknown module must each be caught,
# while downward and same-layer includes must not.
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/src/common" "$t/src/store" "$t/src/host" "$t/src/api" "$t/src/mcp" "$t/src/zzz"
printf '#include "common/err.h"\n#include <stdio.h>\n' > "$t/src/store/ok.c"
printf '#include "store/store.h"\n#include "common/err.h"\n' > "$t/src/host/ok.c"
printf '#include "mcp/mcp.h"\n#include "host/host.h"\n' > "$t/src/api/ok.c"
printf '#include "api/api.h"\n' > "$t/src/host/up.c"
printf '#include "store/store.h"\n' > "$t/src/common/up.h"
out=$(check "$t/src")
if [ "$(grep -c '^FAIL' <<<"$out")" = 3 ] && grep -q '^FAIL layers src/host/up.c:1:' <<<"$out" \
	&& grep -q '^FAIL layers src/common/up.h:1:' <<<"$out" && grep -q '^FAIL layers src/zzz:' <<<"$out" \
	&& [ "$(tail -1 <<<"$out")" = "bad 3" ]; then
	echo "PASS layers-selftest: planted upward includes and an unknown module are caught, downward ones are not"
else
	echo "FAIL layers-selftest: expected 3 findings (host/up.c, common/up.h, zzz), got: $(tr '\n' '|' <<<"$out")"
	fail=1
fi

out=$(check "$src")
grep '^FAIL' <<<"$out"
last=$(tail -1 <<<"$out")
case $last in
ok*) set -- $last; echo "PASS layers: $2 includes across $3 modules of src/ point down or sideways" ;;
*) echo "FAIL layers: ${last#bad } include(s) or module(s) break the layering (DESIGN.md \"Layers\")"; fail=1 ;;
esac
exit $fail
