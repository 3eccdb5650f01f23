# upstream NS LINK: "the internet" for the network tests (71, e2e 67): a
# namespace NS reached from the host through the veth LINK (the host's end
# 192.0.2.1, NS's 192.0.2.2, point to point: the networks of the host's
# own addresses are no sandbox's internet, net.h), holding 203.0.113.10/24 and the cloud
# metadata address 169.254.169.254 and the private 10.99.0.10 and
# 100.64.99.10 behind it, routed to from the host.
# The tests contact only these addresses: nothing leaves the machine.
# Removed at exit (the routes go with the link). Needs at_exit (lib.sh).
upstream() {
	local ns=$1 link=$2
	at_exit "ip netns del $ns 2>/dev/null; ip link del $link 2>/dev/null"
	ip netns add "$ns"
	ip link add "$link" type veth peer name uv netns "$ns"
	ip addr add 192.0.2.1 peer 192.0.2.2 dev "$link" && ip link set "$link" up
	ip -n "$ns" addr add 192.0.2.2 peer 192.0.2.1 dev uv && ip -n "$ns" link set uv up && ip -n "$ns" link set lo up
	ip -n "$ns" link add inet0 type dummy && ip -n "$ns" link set inet0 up
	ip -n "$ns" addr add 203.0.113.10/24 dev inet0
	ip -n "$ns" addr add 169.254.169.254/32 dev inet0
	# Private addresses beyond the host (a LAN, a carrier-grade NAT).
	ip -n "$ns" addr add 10.99.0.10/32 dev inet0
	ip -n "$ns" addr add 100.64.99.10/32 dev inet0
	ip route add 203.0.113.0/24 via 192.0.2.2
	ip route add 169.254.169.254/32 via 192.0.2.2
	ip route add 10.99.0.10/32 via 192.0.2.2
	ip route add 100.64.99.10/32 via 192.0.2.2
}
