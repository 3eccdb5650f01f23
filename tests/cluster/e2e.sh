#!/bin/bash
# tests/cluster/e2e.sh: e2e files of tests/e2e, unchanged in what they
# assert, against an API replica of the cluster instead of a kilnd of
# their own (issue 12: "the existing e2e suites pass against the
# cluster's endpoint"). Run on this machine by tests/cluster/run
# (KILN_CLUSTER_ONLY=e2e, and the full tier) while the hosts' agents
# serve, as tests/cluster/sdk.sh runs the SDK suites. Each file runs with
# KILN_API_URL at the replica (tests/e2e/lib.sh): it makes its
# workspaces and keys through the replica's operator API and deletes
# them at its end; what it needs of a kilnd of its own (its process, data
# directory, log, or other options) are SKIP lines naming why.
# Environment: CL_E2E_URL (the replica; started with --rate 0, what the
# files give their own kilnd), CL_E2E_REPLICAS (lines "FILE URL ARGS": a
# replica for FILE started with the options ARGS that FILE gives its
# kilnd: 61, 80, 81 and 85), CL_OP (an operator's key), CL_KEY (a
# workspace's key, to see the hosts' templates), KILN_CLUSTER_E2E_FILES
# (names of tests/e2e files without .sh; default: those below).
# Prints each file's lines as they come, each case's name led by clNN_
# (NN: the file's number; apart from the one-box runs' in tests/run's
# log), headed "== cluster-e2e-NAME" and ended "-- cluster-e2e-NAME: S s,
# P PASS, F FAIL, K SKIP, exit R".
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
. "$repo/tests/python.sh"
: "${CL_E2E_URL:?} ${CL_OP:?} ${CL_KEY:?}"
# The files that speak only HTTP to kilnd, on minimal sandboxes (the
# hosts build minimal) and 69's of base (host-a builds it where 69 runs:
# tests/cluster/hosts.sh); docs/cluster.md "How it is tested" says which
# others do not run here and why.
FILES=(60-kilnd-api 74-kilnd-contract 63-kilnd-ttl 58-kilnd-sdk-admin 61-kilnd-sandbox 62-kilnd-concurrency
	69-kilnd-ports 72-kilnd-cli 80-kilnd-plans 81-kilnd-billing 85-kilnd-pause)
T=$(mktemp -d /tmp/kcle2e.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
for f in ${KILN_CLUSTER_E2E_FILES:-${FILES[*]}}; do
	echo "== cluster-e2e-$f"
	t0=$(date +%s)
	if [ ! -f "$repo/tests/e2e/$f.sh" ]; then
		echo "FAIL cluster_e2e_$f: no tests/e2e/$f.sh"
		continue
	fi
	# The one-box limit of a file (tests/integration/run's 420 s) plus
	# the cluster's slower creates.
	url=$CL_E2E_URL args="--rate 0" tier=${KILN_TEST_FULL:-}
	# A file with a replica of its own (tests/cluster/run e2e_args).
	if line=$(grep -m1 "^$f " <<<"${CL_E2E_REPLICAS:-}"); then
		line=${line#"$f "} url=${line%% *} args=${line#* }
	elif [[ $f == @(61|80|81|85)-* ]]; then
		echo "FAIL cluster_e2e_$f: no replica of its own (CL_E2E_REPLICAS)"
		continue
	fi
	# These at the quick tier's sizes, whatever the tier. 61: relayed
	# bytes cross the emulated host's forwarded ports, slow under load
	# (one run moved about 25 kB/s, docs/cluster.md): the full tier's
	# four 20 MB execs could take most of an hour there. 80: its replica
	# has the quick tier's window (--plan-window 75). 81: the full tier's
	# four forks of its 2-vCPU sandbox (10 vCPUs on the parent's host)
	# are more than a host here offers (8).
	[[ $f == @(61|80|81)-* ]] && tier=
	# 69 gives its kilnd --domain sbx.test, which replica 1 has.
	[[ $f == 69-* ]] && args="--rate 0 --domain sbx.test"
	KILN_TEST_FULL=$tier KILN_API_URL=$url KILN_ADMIN_KEY=$CL_OP KILN_API_KEY=$CL_KEY KILN_API_ARGS=$args \
		timeout -k 5 "${KILN_CLUSTER_E2E_TIMEOUT:-900}" bash "$repo/tests/e2e/$f.sh" < /dev/null 2>&1 |
		sed -u -E "s/^(PASS|FAIL|SKIP) /\1 cl${f%%-*}_/" | tee "$T/out"
	st=${PIPESTATUS[0]}
	# As tests/integration/run: an exit with no FAIL line, or no line at
	# all, is a FAIL.
	if [ $st != 0 ] && ! grep -q '^FAIL ' "$T/out"; then
		echo "FAIL cluster_e2e_$f: exit $st with no FAIL line$([ $st = 124 ] && echo " (timed out)")" | tee -a "$T/out"
	elif ! grep -qE '^(PASS|FAIL|SKIP) ' "$T/out"; then
		echo "FAIL cluster_e2e_$f: reported nothing" | tee -a "$T/out"
	fi
	echo "-- cluster-e2e-$f: $(( $(date +%s) - t0 )) s, $(grep -c '^PASS ' "$T/out") PASS, $(grep -c '^FAIL ' "$T/out") FAIL, $(grep -c '^SKIP ' "$T/out") SKIP, exit $st"
done
