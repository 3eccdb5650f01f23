#!/bin/bash
# The SDKs' API keys, audit log and operator client (issue 13) against a
# real kilnd over real HTTP: for the Python SDK (sdk/python, as it is) and
# the TypeScript one (@kiln/sdk as tsc builds it), each in a workspace of
# its own: a key made through the SDK works and is listed, a read key is
# refused a write with PermissionDenied, a revoked key is AuthError at its
# next request, the audit log holds those calls, pages of 2 (the
# next_cursor followed, by hand and by iter_audit / auditAll) give every
# entry once, as the unpaged list, and a key filter (id or prefix) only
# that key's; with an operator credential, a workspace made, listed, given
# a key, its keys listed, one revoked (401 at its next request; another
# workspace's key id: NotFound), moved to another plan, its limits
# changed, suspended and restored, its audit log naming the operator and
# what it made (the workspace id, the key ids, NAME/KEY_ID for the
# revocation), usage across workspaces, the workspace deleted; and bad
# operator credentials raise AuthError saying which credential and where
# it comes from. The scripts (sdk_admin.py, sdk_admin.mjs) print the
# PASS/FAIL lines and delete what they made. With KILN_API_URL, against
# that endpoint (lib.sh), with its operator key (KILN_ADMIN_KEY).
# where: native (no sandbox is started: tests/integration/run)
# time limit: 900 (a fresh checkout first waits for, or runs, npm ci of sdk/typescript)
# order: last (the other native files run while npm-prepare works)
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)

start_kilnd --rate 0 || exit 1
KEY_PY=$(new_key sdk-py)
KEY_TS=$(new_key sdk-ts)
if endpoint; then
	OP=$KILN_ADMIN_KEY
else
OP=$("$KILND" --data "$DATA" admin create --name sdk-e2e 2>/dev/null)
fi
if [[ $KEY_PY != kiln_* || $KEY_TS != kiln_* || $OP != kilnop_* ]]; then
	fail sdk_credentials "kilnd keys create / admin create printed no key: '$KEY_PY' '$KEY_TS' '$OP'"
	exit 1
fi
# The workspaces the scripts make are named after this test's port: two
# runs at once (on one database they would share) never collide.
prefix=e2e$PORT

# ---- Python -------------------------------------------------------------------------------------
# ran SCRIPT_NAME OUT RC: a script that died before its end says so.
ran() {
	grep -q "^PASS ${1}_ran:" "$2" ||
		fail "${1}_script" "exited with status $3 before its end: $(tail -5 "$2" | tr '\n' ' ')"
}
env -u KILN_API_KEY -u KILN_ADMIN_KEY PYTHONPATH="$REPO/sdk/python" \
	python3 "$here/sdk_admin.py" "$URL" "$KEY_PY" "$OP" "$prefix" > "$T/py.out" 2>&1
rc=$?
cat "$T/py.out"
ran sdk_py "$T/py.out" $rc

# ---- TypeScript ---------------------------------------------------------------------------------
# tsc from sdk/typescript's locked dev dependencies, as tests/sdk/run builds
# the SDK: where tests/run's npm-prepare installs them, its result, else
# npm ci here. The build goes to this test's directory, not dist/.
ts=$REPO/sdk/typescript
v=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
if [ -z "$v" ] || [ "$v" -lt 20 ]; then
	fail sdk_ts_node "Node 20 or later is needed (found: ${v:-none}); scripts/setup installs nodejs"
	exit 1
fi
prep=${KILN_SDK_NPM_PREPARED:-}
if [ -n "$prep" ] && [ -d "$prep" ]; then
	for _ in $(seq 1 600); do
		[ -e "$prep/typescript.rc" ] && break
		sleep 1
	done
fi
if [ ! -x "$ts/node_modules/.bin/tsc" ] &&
   ! (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error) > "$T/npm.log" 2>&1; then
	fail sdk_ts_npm "npm ci in sdk/typescript failed: $(tail -5 "$T/npm.log" | tr '\n' ' ')"
	exit 1
fi
if ! (cd "$ts" && node_modules/.bin/tsc -p tsconfig.json --outDir "$T/ts" --sourceMap false --declaration false) > "$T/tsc.log" 2>&1; then
	fail sdk_ts_build "$(tail -20 "$T/tsc.log" | tr '\n' ' ')"
	exit 1
fi
# The package is ES modules (package.json "type": "module"): so is its build here.
echo '{"type": "module"}' > "$T/ts/package.json"
pass sdk_ts_build "tsc built @kiln/sdk into $T/ts"
env -u KILN_API_KEY -u KILN_ADMIN_KEY node "$here/sdk_admin.mjs" "$T/ts/index.js" "$URL" "$KEY_TS" "$OP" "$prefix" \
	> "$T/ts.out" 2>&1
rc=$?
cat "$T/ts.out"
ran sdk_ts "$T/ts.out" $rc

# ---- what they left ------------------------------------------------------------------------------
KEY=$KEY_PY
api GET /v1/keys
left=$(jget 'sum(1 for k in j["keys"] if not k["revoked"])')
KEY=$KEY_TS
api GET /v1/keys
left_ts=$(jget 'sum(1 for k in j["keys"] if not k["revoked"])')
KEY=$OP
api GET /v1/admin/workspaces
ws_left=$(jget "[w['name'] for w in j['workspaces'] if w['name'].startswith('$prefix')]")
if [ "$left" = 1 ] && [ "$left_ts" = 1 ] && [ "$ws_left" = "[]" ]; then
	pass sdk_cleanup "each workspace keeps only the test's own key; no workspace of the scripts is left"
else
	fail sdk_cleanup "keys not revoked: py $left ts $left_ts (want 1 each); workspaces left: $ws_left"
fi
# (The endpoint's operator key is not this test's to revoke.)
endpoint || "$KILND" --data "$DATA" admin revoke "${OP:0:15}" 2>/dev/null
alive sdk_kilnd_alive
