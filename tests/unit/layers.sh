#!/bin/bash
# tests/unit/layers.sh [SRC]: every arrow points down (DESIGN.md "Layers"),
# and nothing above the host interface reaches into the host agent (below).
# Reads the `#include "dir/..."` lines of every C file under SRC (default:
# the src/ next to this script) and fails for each one that names a header
# of a layer above the including file's own. Modules of one layer may
# include each other, except src/common, which includes nothing of kiln's.
# A directory under src/ that is not in the table below fails too: a new
# module must be given its place. Prints "PASS name: detail" or
# "FAIL name: why" lines; exits 1 on any FAIL.
set -u

# LAYER[MODULE]: its rank (higher is nearer the user). (Arrays and bash's
# own regexes below, not a sed or a $(...) per include line: with ~1,500
# lines those processes took 25 s of make test on a loaded machine.)
declare -A LAYER=(
	[kilnd]=6			# main, roles, configuration
	[api]=5 [mcp]=5 [proxy]=5 [cli]=5 [tools]=5	# front ends (and standalone programs)
	[ops]=4				# the operations layer
	[hostif]=3			# the host interface: local | remote
	[host]=2			# the host agent
	[vmm]=1 [net]=1 [store]=1 [client]=1 [guest]=1	# mechanisms
	[common]=0
)
NAME=("common" "mechanisms" "host agent" "host interface" "operations" "front ends" "kilnd")
INCLUDE_RE='^[^:]*:[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)"'

# check SRC: prints one FAIL line per upward include or unknown module, and
# a count on stdout's last line: "ok N M" (N includes, M modules) or "bad K".
check() {
	local src=$1 bad=0 n=0 mods=0 d m r f line inc im ir
	for d in "$src"/*/; do
		m=${d%/}; m=${m##*/}
		r=${LAYER[$m]:-}
		if [ -z "$r" ]; then
			echo "FAIL layers src/$m: not in the layer table of tests/unit/layers.sh"
			bad=$((bad + 1))
			continue
		fi
		mods=$((mods + 1))
		while IFS= read -r line; do
			f=${line%%:*}
			[[ $line =~ $INCLUDE_RE ]] || continue
			inc=${BASH_REMATCH[1]}
			case $inc in */*) ;; *) continue ;; esac
			im=${inc%%/*}
			[ -d "$src/$im" ] || continue
			n=$((n + 1))
			[ "$im" = "$m" ] && continue
			ir=${LAYER[$im]:-}
			[ -z "$ir" ] && continue	# reported as unknown above
			if [ "$ir" -gt "$r" ] || { [ "$r" = 0 ] && [ "$im" != "$m" ]; }; then
				echo "FAIL layers ${line%%#*} includes \"$inc\": ${NAME[$ir]} above $m's layer (${NAME[$r]})"
				bad=$((bad + 1))
			fi
		done < <(cd "$src/.." && grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' --include='*.c' --include='*.h' "src/$m" | sort)
	done
	if [ $bad = 0 ]; then echo "ok $n $mods"; else echo "bad $bad"; fi
}

# The seam (DESIGN.md "Layers", host interface): the operations and the
# front ends reach the host agent only through src/hostif/hostif.h, by
# sandbox id, so that a remote agent can serve them. Of src/host/ they may
# include only headers of plain data or of the guest protocol (the
# operations none: their guest commands go through hostif_run), and no
# file of theirs names the agent's live objects (struct sandbox, struct host).
ABOVE_SEAM="api mcp proxy ops"
declare -A SEAM_HEADERS=([ops]="")	# the rest: host_types.h guest_conn.h host_config.h
SEAM_HEADERS_DEFAULT="host_types.h guest_conn.h host_config.h"

# check_seam SRC: one FAIL line per breach, then "ok N" (files read) or "bad K".
check_seam() {
	local src=$1 bad=0 n=0 m f line inc h ok
	for m in $ABOVE_SEAM; do
		[ -d "$src/$m" ] || continue
		for f in $(cd "$src/.." && find "src/$m" -name '*.[ch]' | sort); do
			n=$((n + 1))
			while IFS= read -r line; do
				[[ $line =~ ^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*\"host/([^\"]+)\" ]] && inc=${BASH_REMATCH[1]} || inc=$line
				ok=0
				for h in ${SEAM_HEADERS[$m]-$SEAM_HEADERS_DEFAULT}; do [ "$inc" = "$h" ] && ok=1; done
				if [ $ok = 0 ]; then
					echo "FAIL seam $f:${line%%:*} includes \"host/$inc\": above the host interface only hostif/hostif.h reaches the agent"
					bad=$((bad + 1))
				fi
			done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"host/' "$src/../$f")
			while IFS= read -r line; do
				[[ $line =~ struct[[:space:]]+(sandbox|host) ]]
				echo "FAIL seam $f:${line%%:*} names the agent's ${BASH_REMATCH[0]}: address sandboxes by id through hostif"
				bad=$((bad + 1))
			done < <(grep -nE 'struct[[:space:]]+(sandbox|host)([^_[:alnum:]]|$)' "$src/../$f")
		done
	done
	if [ $bad = 0 ]; then echo "ok $n"; else echo "bad $bad"; fi
}

# selftest NAME WHAT N OUT PATTERN...: PASS when a check's OUT on planted
# files has exactly N findings, among them one matching each PATTERN.
selftest() {
	local name=$1 what=$2 want=$3 out=$4 ok=1 p
	shift 4
	[ "$(grep -c '^FAIL' <<<"$out")" = "$want" ] && [ "$(tail -1 <<<"$out")" = "bad $want" ] || ok=0
	for p; do grep -q "$p" <<<"$out" || ok=0; done
	if [ $ok = 1 ]; then
		echo "PASS $name: $what"
	else
		echo "FAIL $name: expected $want findings ($*), got: $(tr '\n' '|' <<<"$out")"
		fail=1
	fi
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
selftest layers-selftest "planted upward includes and an unknown module are caught, downward ones are not" \
	3 "$out" '^FAIL layers src/host/up.c:1:' '^FAIL layers src/common/up.h:1:' '^FAIL layers src/zzz:'

# The seam check: host.h from a front end, an unknown host header and
# guest_conn.h from the operations and a struct sandbox are caught;
# guest_conn.h in a front end and struct host_event are not.
mkdir -p "$t/seam/src/ops" "$t/seam/src/mcp" "$t/seam/src/api"
printf '#include "host/host.h"\n#include "host/guest_conn.h"\n' > "$t/seam/src/mcp/bad.c"
printf '#include "host/template.h"\nstruct host_event *e;\n#include "host/guest_conn.h"\n' > "$t/seam/src/ops/bad.c"
printf '#include "hostif/hostif.h"\nstatic struct sandbox *sb;\n' > "$t/seam/src/api/bad.c"
out=$(check_seam "$t/seam/src")
selftest seam-selftest "host.h above the host interface, guest_conn.h in the operations and a struct sandbox are caught, plain-data headers are not" \
	4 "$out" '^FAIL seam src/mcp/bad.c:1 includes "host/host.h"' '^FAIL seam src/ops/bad.c:1 ' \
	'^FAIL seam src/ops/bad.c:3 includes "host/guest_conn.h"' \
	'^FAIL seam src/api/bad.c:2 names'

out=$(check_seam "$src")
grep '^FAIL' <<<"$out"
last=$(tail -1 <<<"$out")
case $last in
ok*) echo "PASS seam: ${last#ok } files of src/{${ABOVE_SEAM// /,}} reach the host agent only through hostif" ;;
*) echo "FAIL seam: ${last#bad } place(s) above the host interface reach into the host agent"; fail=1 ;;
esac

out=$(check "$src")
grep '^FAIL' <<<"$out"
last=$(tail -1 <<<"$out")
case $last in
ok*) set -- $last; echo "PASS layers: $2 includes across $3 modules of src/ point down or sideways" ;;
*) echo "FAIL layers: ${last#bad } include(s) or module(s) break the layering (DESIGN.md \"Layers\")"; fail=1 ;;
esac
exit $fail
