#!/bin/bash
# virtio-net: with a TAP in a network namespace, the guest pings the host
# side; a TAP the VMM created itself is gone when it exits.
# tier: full: the quick tier covers it through kilnd (e2e 67 runs guests on TAPs in their namespaces)
. "$(dirname "$0")/lib.sh"
ns=kiln-t14-$$
ip netns add $ns
at_exit "ip netns del $ns 2>/dev/null"
ip -n $ns tuntap add dev ktap0 mode tap
ip -n $ns addr add 10.200.0.1/24 dev ktap0
ip -n $ns link set ktap0 up

VMM_PREFIX="ip netns exec $ns" guest_run net 'ip link set eth0 up
ip addr add 10.200.0.2/24 dev eth0
ping -c 3 -W 5 10.200.0.1 | tail -2' --net ktap0
out=$(guest_output net | tr '\n' ' ')
if [[ $out == *"3 packets transmitted, 3 packets received"* ]]; then
	pass net_ping "$out"
else
	fail net_ping "got '$out'; $(diagnose net)"
fi

# A TAP kiln-vmm creates is removed with the process.
VMM_PREFIX="ip netns exec $ns" guest_run net2 'ip link show eth0 | head -1' --net ktap9
if ip -n $ns link show ktap9 >/dev/null 2>&1; then
	fail net_tap_cleanup "ktap9 still exists after kiln-vmm exited"
else
	check net_tap_cleanup "the VMM's own TAP is gone after exit (status $GUEST_STATUS)" [ "$GUEST_STATUS" = 0 ]
fi
