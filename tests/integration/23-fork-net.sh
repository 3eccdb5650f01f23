#!/bin/bash
# A forked child takes its own TAP, opened by the caller in the child's own
# network namespace and passed over the control socket (SCM_RIGHTS): the
# clone keeps the parent's guest address and reaches its own namespace.
# tier: full: the quick tier covers it through kilnd (e2e 67 forks a networked sandbox (net_fork_*))
. "$(dirname "$0")/lib.sh"
host=$(dirname "$0")/vsock_host.py
n1=kiln-t23a-$$ n2=kiln-t23b-$$
for ns in $n1 $n2; do
	ip netns add $ns
	at_exit "ip netns del $ns 2>/dev/null"
	ip -n $ns link set lo up
done
# Clones keep the guest's ARP cache, so every sandbox's host side wears the
# same MAC, as it wears the same address.
ip -n $n1 tuntap add dev ktap0 mode tap
ip -n $n1 link set ktap0 address 02:6b:69:6c:6e:01
ip -n $n1 addr add 10.200.0.1/24 dev ktap0
ip -n $n1 link set ktap0 up
ip -n $n2 tuntap add dev ktapc mode tap
ip -n $n2 link set ktapc address 02:6b:69:6c:6e:01
ip -n $n2 addr add 10.200.0.1/24 dev ktapc
ip -n $n2 link set ktapc up

mke2fs -q -F -t ext4 "$T/base.ext4" 32M >/dev/null
"$BUILD/kiln-disk" create "$T/p.kcow" "$T/base.ext4"
VMM_PREFIX="ip netns exec $n1" guest_start p 'ip link set eth0 up; ip addr add 10.200.0.2/24 dev eth0
vsock_sh 1000 & sleep 100000' --net ktap0 --disk "$T/p.kcow" --vsock "$T/p.vsock" --ctl "$T/p.ctl"
wait_for_line "$T/p.console" 'vsock_sh: listening' 90 || fail fork_net_setup "$(diagnose p)"
pre=$(gsh "$T/p.vsock" 'ping -c 1 -W 5 10.200.0.1 >/dev/null && echo reach')

r=$(ip netns exec $n2 python3 "$host" tapctl "$T/p.ctl" ktapc \
	"{\"cmd\":\"fork\",\"children\":[{\"disks\":[\"$T/c.kcow\"],\"vsock\":\"$T/c.vsock\",\"tap_fd\":0,\"resync\":false}]}")
cpid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$r")
[ -n "$cpid" ] && at_exit "kill -9 $cpid 2>/dev/null"
rx0=$(ip -n $n2 -s link show ktapc | awk '/RX:/{getline; print $2}')
child=$(gsh "$T/c.vsock" 'ip -o -4 addr show eth0 | awk "{print \$4}"; ping -c 2 -W 5 10.200.0.1 | grep -o "2 packets received"')
rx1=$(ip -n $n2 -s link show ktapc | awk '/RX:/{getline; print $2}')
parent=$(gsh "$T/p.vsock" 'ping -c 1 -W 5 10.200.0.1 >/dev/null && echo reach')
if [ "$pre" = reach ] && [[ $child == *"10.200.0.2/24"*"2 packets received"* ]] && [ "$rx1" -gt "$rx0" ] &&
	[ "$parent" = reach ]; then
	pass fork_passed_tap "child on its own TAP in its own namespace: '$(tr '\n' ' ' <<<"$child")', $((rx1 - rx0)) packets on ktapc; parent still reaches its own"
else
	fail fork_passed_tap "reply $r; before '$pre'; child '$child'; ktapc packets $rx0 -> $rx1; parent '$parent'"
fi
