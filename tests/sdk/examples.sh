#!/bin/bash
# The examples in examples/, run as a user would, against the test kilnd
# (tests/sdk/run examples): the Python agent loop, the TypeScript fork of
# 4 branches that keeps the best, and the MCP configuration (which
# tests/sdk/mcp/ connects with). Needs KILN_API_URL, KILN_API_KEY and
# KILN_TEST_VENV (a venv with the kiln wheel).
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
ex=$repo/examples
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; }
ids() { "$KILN_TEST_VENV/bin/python" -c 'import kiln; print(" ".join(s.id for s in kiln.Sandbox.list()))'; }

before=$(ids)
# A PASS line too: a run again in a fresh host (tests/run) settles a case
# by the lines of its runs, and one with only a FAIL line could never
# pass (session 38's CI: the MCP group left a sandbox, this failed, and
# its passing second run said nothing of it, so the build was red).
if [ -z "$before" ]; then pass examples_start "the workspace is empty"
else fail examples_start "the workspace is not empty: $before"
fi

out=$("$KILN_TEST_VENV/bin/python" "$ex/agent_loop.py" 2>&1)
if grep -qx 'step 1: exit code 1' <<<"$out" && grep -qx 'step 2: exit code 0' <<<"$out" &&
   grep -qx 'answer: 832040' <<<"$out"; then
	pass example_agent_loop "$(tr '\n' ' ' <<<"$out")"
else
	fail example_agent_loop "$(tail -15 <<<"$out" | tr '\n' ' ')"
fi
left=$(ids)
[ -z "$left" ] && pass example_agent_loop_cleanup "its sandbox is gone" ||
	fail example_agent_loop_cleanup "left: $left"

if (cd "$ex" && npx --no-install tsc) > /tmp/kiln-ex-tsc.$$ 2>&1; then
	out=$(cd "$ex" && node build/fork-best.js 2>&1)
	kept=$(sed -n 's/^best: .*; kept \(sbx_[a-z0-9]*\), deleted 3 siblings$/\1/p' <<<"$out")
	branches=$(grep -c ' sbx_[a-z0-9]*  [0-9.]* s$' <<<"$out")
	left=$(ids)
	if [ -n "$kept" ] && [ "$branches" = 4 ] && [ "$left" = "$kept" ]; then
		pass example_fork_best "4 branches timed, the best kept (promote deleted its 3 siblings), the parent deleted: $(tail -1 <<<"$out")"
	else
		fail example_fork_best "kept '$kept', $branches branches timed, sandboxes left '$left': $(tail -8 <<<"$out" | tr '\n' ' ')"
	fi
	for s in $left; do
		curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $KILN_API_KEY" "$KILN_API_URL/v1/sandboxes/$s"
	done
else
	fail example_fork_best "tsc: $(tail -10 /tmp/kiln-ex-tsc.$$ | tr '\n' ' ')"
fi
rm -f /tmp/kiln-ex-tsc.$$

if python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["mcpServers"]; assert c["kiln"]["url"].endswith("/mcp") and c["kiln-sandbox"]["url"].endswith("/mcp")' "$ex/mcp-config.json"; then
	pass example_mcp_config "valid JSON with the workspace and per-sandbox servers (tests/sdk/mcp connects with it)"
else
	fail example_mcp_config "examples/mcp-config.json is not the expected JSON"
fi
