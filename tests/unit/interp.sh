#!/bin/bash
# tests/unit/interp.sh [REPO [BUILD]]: the code interpreter that runs in a
# sandbox (src/guest/interp/kiln_interp.py), natively: the server in a
# network namespace of its own (it listens on 127.0.0.1:49999, as in a
# guest), driven by its JSON protocol (tests/unit/interp_check.py). What
# it checks: python, bash and sh workers are forked by the zygote (a
# context's worker is the zygote's child, leads its own session, sees the
# preloads imported), contexts keep apart, a worker's exit status and
# signal reach the caller, a timeout interrupts and keeps the variables,
# a deleted context leaves no process, and the zygote's death costs
# nothing (workers live on, a new zygote forks the next ones); with
# KILN_INTERP_ZYGOTE=0 workers start as processes of their own. Root (a
# namespace). Run by the unit loop as build/tests/unit_interp.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
exec unshare -n sh -c 'ip link set lo up && exec python3 "$1/tests/unit/interp_check.py" "$1/src/guest/interp/kiln_interp.py"' sh "$repo"
