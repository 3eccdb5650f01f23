#!/bin/bash
# 74-kilnd-writes with kilnd's data directory on a disk filesystem (ext4)
# instead of tmpfs: there the overlay's writes go through the page cache,
# which the VMM writes back and drops as it goes (docs/vmm.md "Disk writes
# and host memory"); in the emulated host, the scratch disk that
# tests/host/run -s gives (tests/run does).
# tier: full: 1.5 times a sandbox's memory written to its disk and read back (four minutes)
# time limit: 600
dir=${KILN_SCRATCH:-/var/tmp}
fs=$(stat -f -c %T "$dir" 2>/dev/null)
case $fs in
tmpfs|ramfs|"") echo "FAIL writes_disk_fs: $dir is '$fs', not a disk filesystem (run tests/host/run with -s MIB)"; exit 0 ;;
esac
echo "  data directory below $dir ($fs)"
export KILN_TEST_TMP=$dir
. "$(dirname "$0")/74-kilnd-writes.sh"
