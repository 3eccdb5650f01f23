# tests/sdk/lib.sh: what the SDK suites need on the client's side, for
# tests/sdk/run (one-box kilnd in an emulated host) and tests/cluster/sdk.sh
# (an API replica of a cluster) alike. The caller sets T (its own fresh
# directory) and repo, and defines pass and fail.

# sdk_python_venv: the Python SDK as a user gets it: a wheel built offline
# from a copy of sdk/python with Debian's setuptools and wheel, installed
# in a venv at $T/venv. A PASS or FAIL line; 1 when it failed.
sdk_python_venv() {
	cp -r "$repo/sdk/python" "$T/pysrc"
	if /usr/bin/python3 -m pip wheel --no-deps --no-build-isolation --no-index -w "$T/dist" "$T/pysrc" > "$T/wheel.log" 2>&1 &&
	   /usr/bin/python3 -m venv "$T/venv" > "$T/venv.log" 2>&1 &&
	   "$T/venv/bin/pip" install --no-index --no-deps "$T"/dist/kiln-*.whl > "$T/install.log" 2>&1; then
		pass sdk_python_wheel "$(basename "$T"/dist/kiln-*.whl) built offline and installed in a venv"
		return 0
	fi
	fail sdk_python_wheel "$(cat "$T"/wheel.log "$T"/venv.log "$T"/install.log 2>/dev/null | tail -8 | tr '\n' ' ')"
	return 1
}

# sdk_run NAME CMD...: one suite, its PASS/FAIL/SKIP/FLAKY lines passed through;
# one that exits non-zero without a FAIL line is a failure too, and so is
# one that reports nothing. Its whole output stays in $T/NAME.out.
sdk_run() {
	local name=$1; shift
	"$@" > "$T/$name.out" 2>&1
	local rc=$?
	grep -E '^(PASS|FAIL|SKIP|FLAKY) ' "$T/$name.out"
	if [ $rc != 0 ] && ! grep -q '^FAIL ' "$T/$name.out"; then
		fail "$name" "exited with status $rc: $(tail -15 "$T/$name.out" | tr '\n' ' ')"
	elif ! grep -qE '^(PASS|FAIL) ' "$T/$name.out"; then
		fail "$name" "reported nothing: $(tail -15 "$T/$name.out" | tr '\n' ' ')"
	fi
	if grep -q '^FAIL ' "$T/$name.out"; then
		echo "  $name's other output:"; grep -vE '^(PASS|FAIL|SKIP|FLAKY) ' "$T/$name.out" | tail -30 | sed 's/^/  | /'
	fi
}

# sdk_npm_ci DIR NAME: the locked dependencies of a package (quiet unless it
# fails). Where tests/run already started them (tests/sdk/npm-prepare),
# its result, once there.
sdk_npm_ci() {
	local prep=${KILN_SDK_NPM_PREPARED:-} i
	if [ -n "$prep" ] && [ -d "$prep" ]; then
		for i in $(seq 1 1200); do
			[ -e "$prep/$2.rc" ] && break
			sleep 1
		done
		if [ -e "$prep/$2.rc" ]; then
			[ "$(cat "$prep/$2.rc")" = 0 ] && return 0
			fail "sdk_npm_$2" "npm ci in $1 failed: $(tail -5 "$prep/$2.log" | tr '\n' ' ')"
			return 1
		fi
	fi
	if (cd "$1" && npm ci --no-audit --no-fund --loglevel=error) > "$T/npm-$2.log" 2>&1; then
		return 0
	fi
	fail "sdk_npm_$2" "npm ci in $1 failed: $(tail -5 "$T/npm-$2.log" | tr '\n' ' ')"
	return 1
}
# sdk_typescript_build: @kiln/sdk and its tests built with tsc (the
# tests in sdk/typescript/build-test); a PASS or FAIL line, 1 when it failed.
sdk_typescript_build() {
	if sdk_npm_ci "$repo/sdk/typescript" typescript &&
	   (cd "$repo/sdk/typescript" && npm run --silent build && npm run --silent build:test) > "$T/tsc.log" 2>&1; then
		pass sdk_typescript_build "tsc built @kiln/sdk (ES modules and .d.ts) and its tests"
		return 0
	fi
	[ -s "$T/tsc.log" ] && fail sdk_typescript_build "$(tail -20 "$T/tsc.log" | tr '\n' ' ')"
	return 1
}
