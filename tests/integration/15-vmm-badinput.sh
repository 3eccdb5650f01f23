#!/bin/bash
# Bad input to kiln-vmm: a one-line message naming the problem, exit status
# 2, and nothing left behind (no socket file, no TAP).
. "$(dirname "$0")/lib.sh"
ns=kiln-t15-$$
ip netns add $ns
at_exit "ip netns del $ns 2>/dev/null"
K=$GUEST/vmlinux
I=$GUEST/initramfs.cpio
truncate -s 1M "$T/disk.img"

# case NAME EXPECTED-MESSAGE-PART ARGS...
case_() {
	local name=$1 want=$2; shift 2
	local err st
	err=$(ip netns exec $ns "$VMM" "$@" --vsock "$T/$name.sock" --ctl "$T/$name.ctl" --net kbad0 2>&1 >/dev/null)
	st=$?
	local lines left=""
	lines=$(printf '%s\n' "$err" | grep -c .)
	[ -e "$T/$name.sock" ] && left="$left $name.sock"
	[ -e "$T/$name.ctl" ] && left="$left $name.ctl"
	ip -n $ns link show kbad0 >/dev/null 2>&1 && left="$left TAP kbad0"
	if [ $st = 2 ] && [ "$lines" = 1 ] && [[ $err == *"$want"* ]] && [ -z "$left" ]; then
		pass "badinput_$name" "$err"
	else
		fail "badinput_$name" "status $st, message '$err' (want '$want'), left behind:${left:- nothing}"
	fi
}
case_ missing_kernel "kernel /nonexistent/vmlinux" --kernel /nonexistent/vmlinux --initrd "$I"
case_ not_elf "is not an x86-64 ELF vmlinux" --kernel "$I" --initrd "$I"
case_ missing_initrd "initrd /nonexistent.cpio" --kernel "$K" --initrd /nonexistent.cpio
case_ missing_disk "disk /nonexistent.img" --kernel "$K" --initrd "$I" --disk /nonexistent.img
case_ mem_small "at least 64 MiB" --kernel "$K" --initrd "$I" --mem 16
case_ mem_huge "more than this host's" --kernel "$K" --initrd "$I" --mem 100000000
case_ mem_nan "'lots' is not a number" --kernel "$K" --initrd "$I" --mem lots
case_ vcpus_many "at most" --kernel "$K" --initrd "$I" --vcpus 300
case_ unknown_option "unknown" --kernel "$K" --frobnicate
case_ no_kernel "--kernel is required" --initrd "$I"

# A kernel that fails only after devices exist (a truncated ELF): the TAP
# and sockets made by then are removed again.
head -c 4096 "$K" > "$T/short.elf"
case_ truncated_kernel "kernel $T/short.elf: file is truncated" --kernel "$T/short.elf" --initrd "$I"

# A socket path in use by a live VMM is refused, not stolen.
python3 -c 'import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1); time.sleep(30)' "$T/busy.sock" &
lpid=$!
at_exit "kill $lpid 2>/dev/null"
# Python takes a while to start under emulation: the VMM must not get
# there first (it would take the path and run a guest until the timeout).
for _ in $(seq 1 100); do [ -S "$T/busy.sock" ] && break; sleep 0.1; done
err=$("$VMM" --kernel "$K" --initrd "$I" --vsock "$T/busy.sock" 2>&1 >/dev/null); st=$?
if [ $st = 2 ] && [[ $err == *"in use"* ]] && [ -S "$T/busy.sock" ]; then
	pass badinput_socket_in_use "$err"
else
	fail badinput_socket_in_use "status $st, '$err'"
fi
