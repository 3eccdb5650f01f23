#!/bin/bash
# tests/unit/docs.sh [REPO]: the documents agree with the tree. Every
# NAME.md that README.md and docs/*.md name exists (in docs/ or at the
# top), and README's map names every directory under src/. These read the
# checkout, so they run here with the unit tests, not in the emulated
# host (which sees only build/, tests/ and bench/). Prints "PASS name:
# detail" or "FAIL name: why" lines; exits 1 on any FAIL.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
rc=0
check() {
	local name=$1 detail=$2
	shift 2
	if "$@"; then echo "PASS $name: $detail"; else echo "FAIL $name: $detail"; rc=1; fi
}
[ -f "$repo/README.md" ] && [ -d "$repo/docs" ] && [ -d "$repo/src" ] ||
	{ echo "FAIL docs_tree: no README.md, docs/ or src/ under $repo"; exit 1; }

missing= named=0
for n in $(grep -ohE '\b[A-Za-z_-]+\.md\b' "$repo/README.md" "$repo"/docs/*.md | sort -u); do
	named=$((named + 1))
	[ -e "$repo/docs/$n" ] || [ -e "$repo/$n" ] || [ -n "$(find "$repo/docs" -name "$n" -print -quit)" ] ||
		missing="$missing $n"
done
check docs_links "every one of the $named NAME.md the docs name exists${missing:+; missing:$missing}" \
	[ -z "$missing" -a "$named" -gt 0 ]

unmapped= dirs=0
for d in "$repo"/src/*/; do
	dirs=$((dirs + 1))
	d=${d%/}; d=src/${d##*/}/
	grep -q "^    $d" "$repo/README.md" || unmapped="$unmapped $d"
done
check readme_map "README's map names all $dirs directories under src/${unmapped:+; not:$unmapped}" \
	[ -z "$unmapped" -a "$dirs" -gt 0 ]
exit $rc
