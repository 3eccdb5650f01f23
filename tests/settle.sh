# tests/settle.sh: how tests/run counts a test that ran more than once
# (sourced; bash). A test's lines are "PASS name: detail", "FAIL name:
# why", "SKIP name: why"; each run of it is a file of its lines.

# section LOG NAME: the lines test NAME printed in LOG (from its "== NAME").
section() { awk -v h="== $2" '/^== / { on = ($0 == h) } on' "$1"; }

# passed_once FIRST: standard input with each FAIL of a case that passed
# in FIRST (earlier runs' lines) turned into FLAKY: that case passed once,
# as one that failed there and passes here did. A case that failed in
# every run stays FAIL.
passed_once() {
	awk -v first="$1" '
		function name(l) { l = substr(l, 6); sub(/:.*/, "", l); return l }
		BEGIN { while ((getline l < first) > 0) if (l ~ /^PASS /) passed[name(l)] = 1 }
		/^FAIL / && (name($0) in passed) { sub(/^FAIL /, "FLAKY ") }
		{ print }'
}

# settle RUN...: one test's lines over its runs (files, oldest first, each
# the test's lines in one run), on standard output: the last run's, where
# a case that passed in an earlier run is FLAKY (passed_once); when no FAIL
# is left, the earlier runs' failures follow as FLAKY lines. Status 0 when
# the test has settled: something passed, no FAIL is left, and every case
# that failed in a run passed in another (or was not named by a last run
# that ran to its end: below).
settle() {
	local last=${!#} earlier=$(mktemp) out unpassed
	cat "${@:1:$#-1}" /dev/null > "$earlier"
	out=$(passed_once "$earlier" < "$last")
	unpassed=$(cat "$@" | awk '
		function name(l) { l = substr(l, 6); sub(/:.*/, "", l); return l }
		/^PASS / { p[name($0)] = 1 } /^FAIL / { f[name($0)] = 1 }
		END { for (n in f) if (!(n in p)) print n }')
	# A check that speaks only when it fails (a file's `cleanup`, say)
	# passed in a run that ran to its end (tests/integration/run's "PASS
	# FILE: ran to its end": status 0, no FAIL) without naming it; one
	# the last run named (a SKIP, say) still has to pass.
	if grep -q '^PASS [^ ]*: ran to its end$' "$last"; then
		unpassed=$(for n in $unpassed; do grep -qE "^(PASS|FAIL|SKIP|FLAKY) $n:" "$last" && echo "$n"; done)
	fi
	if grep -q '^PASS ' <<<"$out" && ! grep -q '^FAIL ' <<<"$out" && [ -z "$unpassed" ]; then
		echo "$out"
		sed -n 's/^FAIL /FLAKY /p' "$earlier"
		rm -f "$earlier"
		return 0
	fi
	# Not settled: the last run's lines, and the failures of cases that
	# never passed and did not fail there (not run again, say).
	echo "$out"
	for n in $unpassed; do
		grep -qF "FAIL $n:" <<<"$out" || grep -m1 -F "FAIL $n:" "$earlier"
	done
	rm -f "$earlier"
	return 1
}
