# The test tiers (tests/integration/run), for tests/integration/lib.sh and
# tests/e2e/lib.sh alike.
# full: true in the full tier (make test-full: KILN_TEST_FULL=1), which
# runs the larger sizes and the longer cases; `make test` is the quick one.
full() { [ "${KILN_TEST_FULL:-}" = 1 ]; }
# full_only NAME WHY: false, with a SKIP line naming the case, in the quick
# tier: `if full_only x "..."; then the long case; fi` (an `if`, so that a
# skip is not the status a file ends with).
full_only() { full && return 0; echo "SKIP $1: the full tier (make test-full) runs it${2:+; $2}"; return 1; }
