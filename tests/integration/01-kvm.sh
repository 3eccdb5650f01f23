#!/bin/bash
# /dev/kvm inside the emulated host is real KVM: a tiny guest runs to HLT.
. "$(dirname "$0")/lib.sh"
check kvm_device "/dev/kvm is a character device" test -c /dev/kvm
"$BUILD/tests/kvm_smoke" || true
