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
# A test stopped by its time limit (tests/integration/run's timeout sends
# TERM) still cleans up: bash runs the EXIT trap only when it exits itself.
trap 'exit 143' TERM INT
# at_exit CMD: run CMD when the test ends, also on failure (last in, first out).
at_exit() { _cleanups+=("$1"); }

pass() { echo "PASS $1${2:+: $2}"; }
fail() { echo "FAIL $1${2:+: $2}"; }
# check NAME DETAIL CMD...: PASS if CMD succeeds, else FAIL.
check() {
	local name=$1 detail=$2; shift 2
	if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
. "$REPO/tests/tier.sh"	# full, full_only

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

# ---- booting test guests under kiln-vmm ---------------------------------
VMM=$BUILD/kiln-vmm
TEST_INITRD=$REPO/build/tests/test-initramfs.cpio

# guest_initrd NAME SCRIPT: the test initramfs plus SCRIPT as /test.sh
# (a second cpio archive appended: the kernel unpacks both).
guest_initrd() {
	local name=$1 script=$2 d=$T/$1.stage
	mkdir -p "$d"
	printf '%s\n' "$script" > "$d/test.sh"
	(cd "$d" && echo test.sh | cpio --quiet -o -H newc) > "$T/$name.add.cpio"
	cat "$TEST_INITRD" "$T/$name.add.cpio" > "$T/$name.cpio"
}

# guest_start NAME SCRIPT [kiln-vmm options...]: boot a test guest in the
# background running SCRIPT; its console goes to $T/NAME.console, kiln-vmm's
# stderr to $T/NAME.err. Sets GUEST_PID. $VMM_PREFIX (words) runs before
# kiln-vmm, e.g. "ip netns exec NS".
guest_start() {
	local name=$1 script=$2; shift 2
	guest_initrd "$name" "$script"
	# shellcheck disable=SC2086
	${VMM_PREFIX:-} "$VMM" --kernel "$GUEST/vmlinux" --initrd "$T/$name.cpio" \
		--console "$T/$name.console" "$@" 2>"$T/$name.err" &
	GUEST_PID=$!
	at_exit "kill -9 $GUEST_PID 2>/dev/null; wait $GUEST_PID 2>/dev/null"
}

# guest_wait SECONDS: wait for the guest started last; sets GUEST_STATUS
# (124 if it had to be killed).
guest_wait() {
	local limit=$1 start=$SECONDS
	while kill -0 "$GUEST_PID" 2>/dev/null; do
		if [ $((SECONDS - start)) -ge "$limit" ]; then
			kill -9 "$GUEST_PID" 2>/dev/null
			wait "$GUEST_PID" 2>/dev/null
			GUEST_STATUS=124
			return
		fi
		sleep 0.1
	done
	wait "$GUEST_PID" 2>/dev/null
	GUEST_STATUS=$?
}

# guest_run NAME SCRIPT [kiln-vmm options...]: boot, run, wait (120 s).
guest_run() {
	guest_start "$@"
	guest_wait 120
}

# guest_output NAME: what SCRIPT printed (console lines after test-init's
# ready line, without the exit marker or kernel messages).
guest_output() {
	tr -d '\r' < "$T/$1.console" | sed -n '/^test-init: ready/,$p' | sed '1d' |
		grep -v '^KILN-TEST-EXIT' | grep -v '^\[ *[0-9.]*\]'
}
# guest_script_status NAME: SCRIPT's exit status, or "none".
guest_script_status() {
	local s
	s=$(tr -d '\r' < "$T/$1.console" | sed -n 's/^KILN-TEST-EXIT \([0-9]*\)$/\1/p' | tail -1)
	echo "${s:-none}"
}
# diagnose NAME: a one-line summary of why a guest test went wrong.
diagnose() {
	echo "vmm status ${GUEST_STATUS:-?}; stderr: $(tr '\n' ' ' < "$T/$1.err" | cut -c1-300); console tail: $(tail -c 300 "$T/$1.console" 2>/dev/null | tr '\r\n' '  ')"
}

# ctl SOCKET JSON: one request on a kiln-vmm control socket, the reply.
ctl() { timeout 160 python3 "$REPO/tests/integration/vsock_host.py" ctl "$1" "$2"; }
# gsh VSOCK CMD: run CMD in a test guest's vsock_sh (port 1000), its output.
gsh() { timeout 30 python3 "$REPO/tests/integration/vsock_host.py" sh "$1" 1000 "$2"; }

# ---- guests with the agent -------------------------------------------------
# boot_guest [-Q] [-c CID] [-m MIB] [-n VCPUS] [-d DISK]... [-R DISK] [-N] [-a APPEND] [-r ROOTARGS] [-w] [-C CTL]
# Boots build/guest/{vmlinux,initramfs.cpio} (kiln-init as PID 1) under
# kiln-vmm and waits until its agent answers over the VMM's vsock bridge.
# DISKs become /dev/vda, /dev/vdb, ... (-R adds one read-only); -N adds a
# NIC on a new TAP kt<CID> whose host side is 10.201.<CID>.1/24; ROOTARGS
# (default "kiln.root=/dev/vda" when a disk is given) and APPEND go on the
# kernel command line. Sets GUEST_CONSOLE (the console log), GUEST_VM (the
# kiln-vmm pid) and GUEST_SOCK (the vsock bridge socket), and makes `kg ARGS`
# run build/kiln-guest against this guest; -w returns without waiting for
# the agent; -C gives kiln-vmm a control socket at CTL. Fails (returns 1)
# with the console's tail on stderr if the guest does not come up. Which
# VMM boots the guest is decided here only: -Q boots QEMU's microvm
# instead (the reference peer), with vhost-vsock
# reached over AF_VSOCK (`kg --cid CID`); it takes no -N.
boot_guest() {
	local cid=3 mem=512 vcpus=1 append="" rootargs="" wait=1 disks=() net=() ctl=() qemu=0 opt OPTIND=1
	while getopts "Qc:m:n:d:R:Na:r:wC:" opt; do
		case $opt in
		Q) qemu=1 ;;
		C) ctl=(--ctl "$OPTARG") ;;
		c) cid=$OPTARG ;;
		m) mem=$OPTARG ;;
		n) vcpus=$OPTARG ;;
		d) disks+=(--disk "$OPTARG") ;;
		R) disks+=(--disk "$OPTARG,ro") ;;
		N) net=(--net "kt$cid") ;;
		a) append=$OPTARG ;;
		r) rootargs=$OPTARG ;;
		w) wait=0 ;;
		*) return 2 ;;
		esac
	done
	[ ${#disks[@]} -gt 0 ] && [ -z "$rootargs" ] && rootargs="kiln.root=/dev/vda"
	if [ ${#net[@]} -gt 0 ]; then
		ip tuntap add dev "kt$cid" mode tap &&
			ip addr add "10.201.$cid.1/24" dev "kt$cid" && ip link set "kt$cid" up || return 1
		at_exit "ip link del kt$cid 2>/dev/null"
	fi
	GUEST_CONSOLE=$T/console.$cid
	GUEST_SOCK=$T/vm.$cid.sock
	if [ $qemu = 1 ]; then
		local drives=() i=0 d
		for ((i = 1; i < ${#disks[@]}; i += 2)); do
			d=${disks[i]}
			[[ $d == *,ro ]] && d="${d%,ro},readonly=on"
			drives+=(-drive "file=$d,format=raw,if=none,id=d$i,cache=unsafe"
				 -device "virtio-blk-device,drive=d$i")
		done
		qemu-system-x86_64 -M microvm,acpi=on -enable-kvm -cpu host -m "$mem" -smp "$vcpus" \
			-nodefaults -no-user-config -nographic -no-reboot \
			-serial "file:$GUEST_CONSOLE" -kernel "$GUEST/vmlinux" -initrd "$GUEST/initramfs.cpio" \
			-append "console=ttyS0 reboot=t panic=-1 quiet $rootargs $append" \
			-device "vhost-vsock-device,guest-cid=$cid" "${drives[@]}" \
			</dev/null >"$T/vmm.$cid.err" 2>&1 &
		GUEST_TRANSPORT="--cid $cid"
	else
		"$VMM" --kernel "$GUEST/vmlinux" --initrd "$GUEST/initramfs.cpio" --mem "$mem" \
			--vcpus "$vcpus" --cid "$cid" --vsock "$GUEST_SOCK" --console "$GUEST_CONSOLE" \
			--append "quiet $rootargs $append" "${disks[@]}" "${net[@]}" "${ctl[@]}" \
			</dev/null 2>"$T/vmm.$cid.err" &
		GUEST_TRANSPORT="--vsock $GUEST_SOCK"
	fi
	GUEST_VM=$!
	at_exit "kill -9 $GUEST_VM 2>/dev/null; wait $GUEST_VM 2>/dev/null"
	[ $wait = 1 ] || return 0
	if ! wait_for_line "$GUEST_CONSOLE" 'kiln-init: ready' 150 ||
	   ! kg --wait 30 --timeout 30 ping >/dev/null; then
		echo "boot_guest: no agent; console tail:" >&2
		tail -c 1500 "$GUEST_CONSOLE" >&2
		cat "$T/vmm.$cid.err" >&2
		return 1
	fi
}

# kg ARGS...: kiln-guest against the guest boot_guest started last.
# (An agent silent for 120 s fails the call, as a guest that died or hung
# would otherwise hold the test until its time limit; a --timeout of the
# caller's, after this one, wins.)
kg() { "$BUILD/kiln-guest" $GUEST_TRANSPORT --timeout "${KG_TIMEOUT:-120}" "$@"; }

# root_disk SIZE_MIB: a private copy of the minimal root image, grown to
# SIZE_MIB; prints its path.
root_disk() {
	local d=$T/root.$RANDOM.ext4
	cp --sparse=always "$GUEST/rootfs-minimal.ext4" "$d" &&
		truncate -s "${1}M" "$d" && resize2fs -f "$d" >/dev/null 2>&1 && echo "$d"
}
