# Helpers for integration tests (bash, run inside the emulated KVM host).
# A test reports each case as one line: "PASS name: detail" or
# "FAIL name: why"; tests/run counts those lines.
set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${KILN_BUILD:-$REPO/build}
GUEST=$REPO/build/guest
T=$(mktemp -d /tmp/kiln-test.XXXXXX)
_cleanups=()
_on_exit() {
	local i
	for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do eval "${_cleanups[i]}"; done
	rm -rf "$T"
}
trap _on_exit EXIT
# at_exit CMD: run CMD when the test ends, also on failure (last in, first out).
at_exit() { _cleanups+=("$1"); }

pass() { echo "PASS $1${2:+: $2}"; }
fail() { echo "FAIL $1${2:+: $2}"; }
# check NAME DETAIL CMD...: PASS if CMD succeeds, else FAIL.
check() {
	local name=$1 detail=$2; shift 2
	if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}

# wait_for_line FILE REGEX SECONDS: wait until FILE has a line matching REGEX.
wait_for_line() {
	local file=$1 re=$2 limit=$3 start=$SECONDS
	while ! grep -qE "$re" "$file" 2>/dev/null; do
		[ $((SECONDS - start)) -ge "$limit" ] && return 1
		sleep 0.1
	done
}
# now_ms: a monotonic clock in milliseconds.
now_ms() { local s; s=$(cut -d' ' -f1 /proc/uptime); echo $(( ${s%.*} * 1000 + 10#${s#*.} * 10 )); }

# ---- guests with the agent ------------------------------------------------
# boot_guest [-c CID] [-m MIB] [-d DISK]... [-R DISK] [-N] [-a APPEND] [-r ROOTARGS] [-w]
# Boots build/guest/{vmlinux,initramfs.cpio} and waits until its agent
# answers. DISKs become /dev/vda, /dev/vdb, ... (raw images; -R adds one
# read-only); -N adds a NIC on QEMU user networking (10.0.2.0/24, gateway
# 10.0.2.2, DNS 10.0.2.3, nothing leaves the machine); ROOTARGS
# (default "kiln.root=/dev/vda" when a disk is given) and APPEND go on the
# kernel command line. Sets GUEST_CONSOLE (the console log) and GUEST_QEMU
# (pid), and makes `kg ARGS` run build/kiln-guest against this guest; -w
# returns without waiting for the agent. Fails (returns 1) with the
# console's tail on stderr if the guest does not come up.
#
# kiln-vmm has no virtio-vsock yet, so this boots QEMU's microvm with
# vhost-vsock and reaches the agent over AF_VSOCK; switching to kiln-vmm
# (and `kg --vsock PATH.sock`) happens here and nowhere else.
boot_guest() {
	local cid=3 mem=512 append="" rootargs="" wait=1 disks=() net=() opt OPTIND=1
	while getopts "c:m:d:R:Na:r:w" opt; do
		case $opt in
		c) cid=$OPTARG ;;
		m) mem=$OPTARG ;;
		d) disks+=("$OPTARG") ;;
		R) disks+=("$OPTARG,readonly=on") ;;
		N) net=(-netdev user,id=n0,restrict=on -device virtio-net-device,netdev=n0) ;;
		a) append=$OPTARG ;;
		r) rootargs=$OPTARG ;;
		w) wait=0 ;;
		*) return 2 ;;
		esac
	done
	[ ${#disks[@]} -gt 0 ] && [ -z "$rootargs" ] && rootargs="kiln.root=/dev/vda"
	local drives=() i=0 d
	for d in "${disks[@]}"; do
		drives+=(-drive "file=$d,format=raw,if=none,id=d$i,cache=unsafe"
			 -device "virtio-blk-device,drive=d$i")
		i=$((i + 1))
	done
	GUEST_CONSOLE=$T/console.$cid
	: > "$GUEST_CONSOLE"
	qemu-system-x86_64 -M microvm,acpi=on -enable-kvm -cpu host -m "$mem" -smp 1 \
		-nodefaults -no-user-config -nographic -no-reboot \
		-serial "file:$GUEST_CONSOLE" -kernel "$GUEST/vmlinux" -initrd "$GUEST/initramfs.cpio" \
		-append "console=ttyS0 reboot=t panic=-1 quiet $rootargs $append" \
		-device "vhost-vsock-device,guest-cid=$cid" "${drives[@]}" "${net[@]}" \
		</dev/null >"$T/qemu.$cid.err" 2>&1 &
	GUEST_QEMU=$!
	at_exit "kill -9 $GUEST_QEMU 2>/dev/null; wait $GUEST_QEMU 2>/dev/null"
	GUEST_TRANSPORT="--cid $cid"
	[ $wait = 1 ] || return 0
	if ! wait_for_line "$GUEST_CONSOLE" 'kiln-init: ready' 150 ||
	   ! kg --wait 30 --timeout 30 ping >/dev/null; then
		echo "boot_guest: no agent; console tail:" >&2
		tail -c 1500 "$GUEST_CONSOLE" >&2
		cat "$T/qemu.$cid.err" >&2
		return 1
	fi
}

# kg ARGS...: kiln-guest against the guest boot_guest started last.
kg() { "$BUILD/kiln-guest" $GUEST_TRANSPORT "$@"; }

# root_disk SIZE_MIB: a private copy of the minimal root image, grown to
# SIZE_MIB; prints its path.
root_disk() {
	local d=$T/root.$RANDOM.ext4
	cp --sparse=always "$GUEST/rootfs-minimal.ext4" "$d" &&
		truncate -s "${1}M" "$d" && resize2fs -f "$d" >/dev/null 2>&1 && echo "$d"
}
