#!/bin/bash
# A guest that dies leaves a post-mortem: kiln-vmm prints each vCPU's last
# exits (reason, RIP, port or address, data) and the console's tail to
# stderr before its one-line reason, which stays the last line (kilnd
# reports it). The guest is a 12-byte PVH kernel (tiny_pvh.py) that writes
# "K\n" to COM1 and triple-faults on a ud2 with an empty IDT.
. "$(dirname "$0")/lib.sh"
ud2=$(python3 "$(dirname "$0")/tiny_pvh.py" "$T/tiny.elf") || { fail postmortem_setup "cannot make the tiny kernel"; exit 1; }
echo x > "$T/initrd"

for n in 1 2; do
	timeout 60 "$VMM" --kernel "$T/tiny.elf" --initrd "$T/initrd" --mem 64 --vcpus $n \
		--console "$T/c$n" 2>"$T/e$n" </dev/null
	st=$?
	err=$(cat "$T/e$n")
	last=$(tail -1 "$T/e$n")
	# the OUT of 'K' (0x4b) to 0x3f8, its RIP inside the 12 bytes of code
	rip=$(sed -n 's/.* io rip \(0x[0-9a-f]*\) .* w 0x3f8\/1 = 0x4b$/\1/p' "$T/e$n" | head -1)
	inside=0
	[ -n "$rip" ] && [ $((rip)) -ge $((0x100000)) ] && [ $((rip)) -le $((ud2)) ] && inside=1
	if [ $st = 4 ] && [[ $err == *"post-mortem: guest triple fault"* ]] && [ $inside = 1 ] &&
	   grep -q '^kiln-vmm: | K$' "$T/e$n" && [ "$(grep -c 'exits to userspace' "$T/e$n")" = $n ] &&
	   [[ $last == "kiln-vmm: guest triple fault on vCPU 0"*"(exit status 4)" ]]; then
		pass "postmortem_${n}vcpu" "status $st; the OUT of 'K' at rip $rip; last line: $last"
	else
		fail "postmortem_${n}vcpu" "status $st, rip '${rip}'; stderr: $(tr '\n' '~' < "$T/e$n" | cut -c1-900)"
	fi
done
