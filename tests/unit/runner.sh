#!/bin/bash
# tests/unit/runner.sh [REPO [BUILD]]: how tests/run counts a test it ran
# more than once (tests/settle.sh), on made-up runs: a case that failed
# and then passed is FLAKY and the test settles; one that failed in every
# run fails; a check that speaks only when it fails (a file's `cleanup`)
# settles once a later run of the file ran to its end, but not when that
# run was cut short or named it as skipped. Run by the unit loop as
# build/tests/unit_runner; PASS/FAIL lines, exit 1 on any FAIL.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$repo/tests/settle.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; failed=1; }
# runs NAME LINES...: the files $T/NAME.0, .1, ... one per argument
# (lines separated by '|').
runs() {
	local name=$1 i=0 r
	shift
	rm -f "$T/$name".*
	for r in "$@"; do tr '|' '\n' <<<"$r" > "$T/$name.$i"; i=$((i + 1)); done
}
# expect NAME STATUS GREP-PATTERN WHAT: settle over NAME's runs gives
# STATUS and its output matches the pattern (a line-anchored ERE).
expect() {
	local name=$1 want=$2 pat=$3 what=$4 out st
	out=$(settle "$T/$name".?)
	st=$?
	if [ "$st" = "$want" ] && grep -qE "$pat" <<<"$out"; then
		pass "runner_$name" "$what"
	else
		fail "runner_$name" "$what: status $st (want $want), output: $(tr '\n' ';' <<<"$out")"
	fi
}

runs flaky 'PASS a: x|FAIL b: broke' 'PASS a: x|PASS b: y|PASS t: ran to its end'
expect flaky 0 '^FLAKY b: broke$' "failed once, passed when run again: settled, the failure kept as FLAKY"

runs always 'PASS a: x|FAIL b: broke' 'PASS a: x|FAIL b: broke again'
expect always 1 '^FAIL b: broke again$' "failed in every run: not settled, FAIL"

runs cleanup 'PASS a: x|FAIL cleanup: kiln-vmm left' 'PASS a: x|PASS t: ran to its end' 'PASS a: x|PASS t: ran to its end'
expect cleanup 0 '^FLAKY cleanup: kiln-vmm left$' "a cleanup check that failed once, then two runs to their end: settled"

runs cut 'PASS a: x|FAIL cleanup: kiln-vmm left' 'PASS a: x'
expect cut 1 '^FAIL cleanup: kiln-vmm left$' "the same, but the later run did not run to its end: not settled"

runs skipped 'PASS a: x|FAIL b: broke' 'PASS a: x|SKIP b: not here|PASS t: ran to its end'
expect skipped 1 '^FAIL b: broke$' "failed, then skipped in a run to its end: not settled (it never passed)"

runs passed_before 'PASS b: y' 'FAIL b: broke|PASS a: x'
expect passed_before 0 '^FLAKY b: broke$' "passed in an earlier run, failed in the last: FLAKY, settled"

exit $failed
