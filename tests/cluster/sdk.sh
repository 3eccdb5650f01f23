#!/bin/bash
# tests/cluster/sdk.sh: the SDK suites, unchanged in what they assert,
# against an API replica of the cluster instead of one-box kilnd (issue
# 12: "the same SDKs pointed at the operator's endpoint"). Run on this
# machine by tests/cluster/run (KILN_CLUSTER_ONLY=sdk, and the full tier)
# while the hosts' agents serve, as tests/sdk/run runs them against
# tests/sdk/serve's kilnd: the clients here (the emulated host has no
# Node), the server in the emulated host. What tests/sdk/serve makes with
# kilnd's CLI on its own data directory (the workspaces, their keys, the
# one-sandbox plan) is made here through the replica's operator API, as
# an operator of a cluster would.
# Environment: CL_SDK_URL (the replica the suites talk to), CL_OP (an
# operator's key), CL_SDK_RATE_URL and CL_SDK_RATE_KEY (a replica limited
# to 1 request a second, of a cluster with no host: tests/sdk/serve's
# kilnd with no templates), CL_SDK_HOST_LOG (where the hosts' lines go:
# the code-interpreter template's KILN_SDK_CODE_INTERPRETER line),
# KILN_CLUSTER_SDK_GROUPS (python, typescript, mcp; default: python),
# KILN_CLUSTER_SDK_SMOKE.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tests/python.sh"
# With KILN_CLUSTER_SDK_SMOKE=1 (make test's cluster run): only the
# Python tests in SMOKE below, on minimal sandboxes one at a time (no
# rate-limited replica, no base template there).
smoke=${KILN_CLUSTER_SDK_SMOKE:-}
: "${CL_SDK_URL:?} ${CL_OP:?} ${CL_SDK_HOST_LOG:?}"
[ "$smoke" = 1 ] || : "${CL_SDK_RATE_URL:?} ${CL_SDK_RATE_KEY:?}"
SMOKE=(config_from_env_and_args ended_sandbox create_errors delete context_manager_deletes_even_when_the_block_raises)
T=$(mktemp -d /tmp/kclsdk.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL $1: $2"; }
pass() { echo "PASS $1: $2"; }
. "$repo/tests/sdk/lib.sh"

# op METHOD PATH [BODY]: the operator API of the replica; STATUS, and the
# body in $T/body.
op() {
	STATUS=$(curl -s -m 30 -o "$T/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $CL_OP" \
		${3:+-H 'Content-Type: application/json' --data-binary "$3"} "$CL_SDK_URL$2")
}
# workspace NAME [JSON]: a workspace made through the operator API (with
# JSON's plan and limits), and a key of it on stdout.
workspace() {
	op POST /v1/admin/workspaces "{\"name\":\"$1\"${2:+,$2}}"
	[ "$STATUS" = 201 ] || { echo "workspace $1: $STATUS $(head -c 300 "$T/body")" >&2; return 1; }
	op POST "/v1/admin/workspaces/$1/keys" '{"name":"sdk-tests"}'
	[ "$STATUS" = 201 ] || { echo "key of $1: $STATUS $(head -c 300 "$T/body")" >&2; return 1; }
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["key"])' "$T/body"
}
if key=$(workspace sdk 2>"$T/ws.err") && key2=$(workspace other 2>>"$T/ws.err") &&
   limited=$(workspace limited '"plan":"free","limits":{"running":1}' 2>>"$T/ws.err"); then
	pass sdk_cluster_workspaces "sdk, other and limited (free, running 1) with their keys, made through the replica's operator API"
else
	fail sdk_cluster_workspaces "$(cat "$T/ws.err")"
	exit 1
fi
export KILN_API_URL=$CL_SDK_URL KILN_API_KEY=$key KILN_TEST_KEY2=$key2 KILN_TEST_LIMITED_KEY=$limited
export KILN_TEST_RATE_URL=${CL_SDK_RATE_URL:-} KILN_TEST_RATE_KEY=${CL_SDK_RATE_KEY:-}
export KILN_TEST_HOST_LOG=$CL_SDK_HOST_LOG KILN_TEST_ORIGIN_ALLOWED=http://allowed.example KILN_REPO=$repo
# What a test cannot do against a cluster says so with a SKIP line
# naming why (test_python.py's skip_on_cluster).
export KILN_TEST_CLUSTER=1

if [ "$smoke" = 1 ]; then
	sdk_python_venv && sdk_run cl-sdk-smoke "$T/venv/bin/python" "$repo/tests/sdk/test_python.py" "${SMOKE[@]}"
	exit 0
fi
for g in ${KILN_CLUSTER_SDK_GROUPS:-python}; do
	t0=$(date +%s)
	echo "== cluster-sdk-$g"
	case $g in
	python)
		sdk_python_venv && sdk_run cl-sdk-python "$T/venv/bin/python" "$repo/tests/sdk/test_python.py" ;;
	typescript)
		sdk_typescript_build && sdk_run cl-sdk-typescript env KILN_TEST_PREFIX=ts_ node --test --test-concurrency=1 \
			--test-reporter="$repo/tests/sdk/reporter.mjs" "$repo/sdk/typescript/build-test/test/" ;;
	mcp)
		sdk_npm_ci "$repo/tests/sdk/mcp" mcp && sdk_run cl-sdk-mcp env KILN_TEST_PREFIX=mcp_ node --test --test-concurrency=1 \
			--test-reporter="$repo/tests/sdk/reporter.mjs" "$repo/tests/sdk/mcp/" ;;
	*) fail "cluster_sdk_$g" "no such group here (python, typescript, mcp)" ;;
	esac
	echo "-- cluster-sdk-$g: $(( $(date +%s) - t0 )) s"
done
