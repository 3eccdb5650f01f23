#!/bin/bash
# Sandbox networks (src/net, kiln-net): a guest in its own namespace reaches
# "the internet" (a namespace this test makes upstream of the host) but not
# another sandbox, cloud metadata, the host itself or a Stratum port; egress
# policies (allow_out, no internet) apply to a running sandbox at once; and
# destroying everything leaves no namespace, link or rule behind.
# tier: full: the quick tier covers it through kilnd (e2e 67 checks the same isolation and egress rules through kilnd)
. "$(dirname "$0")/lib.sh"
NET=$BUILD/kiln-net
up=kiln-t71-up
. "$(dirname "$0")/upstream.sh"
at_exit "$NET cleanup >/dev/null 2>&1"

# Upstream: the host routes to it through kup0; it serves HTTP on its own
# address, on a second "internet" address, on 169.254.169.254, and on 3333.
upstream $up kup0
ip route show default | grep -q . || ip route add default via 192.0.2.2
mkdir -p "$T/www" && echo kiln-upstream > "$T/www/index.html"
ip netns exec $up python3 -m http.server 80 --directory "$T/www" >/dev/null 2>&1 &
at_exit "kill $! 2>/dev/null"
ip netns exec $up python3 -m http.server 3333 --directory "$T/www" >/dev/null 2>&1 &
at_exit "kill $! 2>/dev/null"
python3 -m http.server 8080 --bind 192.0.2.1 --directory "$T/www" >/dev/null 2>&1 &
at_exit "kill $! 2>/dev/null"

out=$($NET init 2>&1) || { fail net_init "$out"; exit 1; }
A=$($NET create 2>&1) || { fail net_create "$A"; exit 1; }
B=$($NET create 2>&1) || { fail net_create "$B"; exit 1; }
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
nsA=$(field "$A" netns) slotA=$(field "$A" slot) nsB=$(field "$B" netns) ipB=$(field "$B" ns_ip)
ok=; [ -e "/run/netns/$nsA" ] && [ -e "/run/netns/$nsB" ] && ok=1
check net_create "two sandbox networks: $nsA, $nsB" [ -n "$ok" ]
ip netns exec "$nsB" python3 -m http.server 80 --bind "$ipB" --directory "$T/www" >/dev/null 2>&1 &
at_exit "kill $! 2>/dev/null"
sleep 1

VMM_PREFIX="ip netns exec $nsA" guest_start g 'ip link set eth0 up
ip addr add 172.16.0.2/30 dev eth0
ip route add default via 172.16.0.1
vsock_sh 1000 & sleep 100000' --net tap0 --vsock "$T/g.sock"
wait_for_line "$T/g.console" 'vsock_sh: listening' 90 || { fail net_guest "$(diagnose g)"; exit 1; }
fetch() { gsh "$T/g.sock" "http_get $1 || echo blocked"; }
expect() {   # expect NAME URL WANT
	local got
	got=$(fetch "$2")
	check "$1" "$2 -> '$got'" [ "$got" = "$3" ]
}
expect net_reaches_internet "192.0.2.2 80" kiln-upstream
expect net_blocks_sandbox "$ipB 80" blocked
expect net_blocks_metadata "169.254.169.254 80" blocked
expect net_blocks_host "192.0.2.1 8080" blocked
expect net_blocks_stratum "192.0.2.2 3333" blocked

$NET policy "$slotA" --allow 203.0.113.0/24
expect net_allow_out_cidr "203.0.113.10 80" kiln-upstream
expect net_allow_out_others_dropped "192.0.2.2 80" blocked
$NET policy "$slotA" --deny 203.0.113.0/24
expect net_deny_out "203.0.113.10 80" blocked
expect net_deny_out_others_pass "192.0.2.2 80" kiln-upstream
$NET policy "$slotA" --no-internet
expect net_no_internet "192.0.2.2 80" blocked
$NET policy "$slotA"
expect net_policy_back_open "192.0.2.2 80" kiln-upstream
err=$($NET policy "$slotA" --allow 300.1.2.3/8 2>&1); st=$?
ok=; [ $st != 0 ] && grep -q "not an IPv4" <<<"$err" && ok=1
check net_policy_bad_cidr "status $st: $err" [ -n "$ok" ]

kill -9 "$GUEST_PID" 2>/dev/null; wait "$GUEST_PID" 2>/dev/null
$NET destroy "$slotA"; $NET destroy "$(field "$B" slot)"; $NET cleanup
left=$( (ls /run/netns 2>/dev/null | grep '^kiln-n'; ip -o link show | grep -o ' kv[0-9]*'; nft list table inet kiln 2>/dev/null | head -1) | tr '\n' ' ')
check net_cleanup "nothing left: '$left'" [ -z "$left" ]
