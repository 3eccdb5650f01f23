#!/bin/bash
# 74-kilnd-writes with kilnd's data directory on a disk filesystem (ext4)
# instead of tmpfs: there the overlay's writes go through the page cache,
# which the VMM writes back and drops as it goes (docs/vmm.md "Disk writes
# and host memory"); in the emulated host, the scratch disk that
# tests/host/run -s gives (tests/run does).
# Three times the guest's memory is written (issue 15): in the quick tier
# by a sandbox of 128 MiB (a template of base's image built here with
# --memory 128: 384 MiB, about two and a half minutes in the emulated
# host), in the full tier by a `base` sandbox (512 MiB: 1.5 GiB).
# time limit: 900
dir=${KILN_SCRATCH:-/var/tmp}
fs=$(stat -f -c %T "$dir" 2>/dev/null)
case $fs in
tmpfs|ramfs|"") echo "FAIL writes_disk_fs: $dir is '$fs', not a disk filesystem (run tests/host/run with -s MIB)"; exit 0 ;;
esac
echo "  data directory below $dir ($fs)"
export KILN_TEST_TMP=$dir
export WRITES_TIMES=${WRITES_TIMES:-30}
[ "${KILN_TEST_FULL:-}" != 1 ] && export WRITES_MEMORY=${WRITES_MEMORY:-128}
. "$(dirname "$0")/74-kilnd-writes.sh"
