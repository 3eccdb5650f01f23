#!/bin/bash
# Sandbox networks through kilnd (docs/network.md): every sandbox gets its
# own namespace from the warm pool and its guest has its address from the
# template (kiln.ip), so it reaches "the internet" (a namespace this test
# makes upstream of the host, standing in for it) at once; but not another
# sandbox, cloud metadata, the host's own addresses, the networks they are
# on (its LAN, public or private) or a Stratum port.
# DNS: kilnd (--dns) writes each guest's /etc/resolv.conf at create, fork
# and wake, and a name resolves through a resolver in "the internet".
# Egress policies: allow_out with one CIDR, allow_internet false, changes
# with PUT .../network on a running sandbox, bad CIDRs refused with 400;
# forks get networks of their own with their parent's policy. Deleting
# everything and stopping kilnd leaves no namespace, veth, TAP or nftables
# table. Only addresses this test makes are ever contacted.
. "$(dirname "$0")/lib.sh"
have_kvm || { echo "SKIP kilnd_net: no KVM"; exit 0; }
up=kiln-t67-up
. "$(dirname "$0")/../integration/upstream.sh"

# Upstream: HTTP on its own address, on a second "internet" address, on
# 169.254.169.254 and on Stratum's 3333; the host serves on its own.
upstream $up kup67
mkdir -p "$T/www" && echo kiln-upstream > "$T/www/index.html"
serve() {   # serve NETNS|- PORT [BIND]: an HTTP server, stopped at exit
	local ns=$1 port=$2 bind=${3:-0.0.0.0} pre=()
	[ "$ns" != - ] && pre=(ip netns exec "$ns")
	"${pre[@]}" python3 -m http.server "$port" --bind "$bind" --directory "$T/www" >/dev/null 2>&1 &
	at_exit "kill $! 2>/dev/null"
}
serve $up 80
serve $up 3333
serve - 8080
# answers URL: it serves (python starts slowly in the emulated host).
answers() {
	local i
	for i in $(seq 60); do
		[ "$(curl -s -m 5 "$1")" = kiln-upstream ] && return 0
		sleep 0.5
	done
	return 1
}
# The servers answer the host: "blocked" below is the firewall's doing.
for u in 192.0.2.2:80 192.0.2.2:3333 203.0.113.10:80 169.254.169.254:80 192.0.2.1:8080 \
	 10.99.0.10:80 100.64.99.10:80; do
	answers "http://$u/" || { fail net_setup "http://$u/ does not answer the host"; exit 1; }
done

# A resolver in "the internet": one name, kiln-dns.test, is 198.51.100.7.
ip netns exec $up python3 "$(dirname "$0")/dns_server.py" 203.0.113.10 kiln-dns.test 198.51.100.7 \
	> "$T/dns.log" 2>&1 &
at_exit "kill $! 2>/dev/null"

# Built with the servers kilnd will have: its boot writes the guest's
# resolv.conf (kiln.dns) and its manifest keeps them, so a create from it
# need not write the file again; a kilnd with other servers does (below).
"$KILND" --data "$DATA" --dns 203.0.113.10 template build minimal > "$T/build-minimal.log" 2>&1 ||
	{ echo "FAIL template_minimal: $(tail -3 "$T/build-minimal.log" | tr '\n' ' ')"; exit 1; }
start_kilnd --rate 0 --net-pool 2 --dns 203.0.113.10 --verbose || exit 1
KEY=$(new_key net)
# The host's LAN on addresses that are not private (issue 15): a neighbour
# on the network of one of the host's own addresses, 198.18.0.0/24, made
# after kilnd started (its sets follow the host's addresses at each create).
lan=kiln-t67-lan
at_exit "ip netns del $lan 2>/dev/null; ip link del kl67 2>/dev/null"
ip netns add $lan && ip link add kl67 type veth peer name lv netns $lan &&
	ip addr add 198.18.0.1/24 dev kl67 && ip link set kl67 up &&
	ip -n $lan addr add 198.18.0.2/24 dev lv && ip -n $lan link set lv up && ip -n $lan link set lo up
serve $lan 80
answers http://198.18.0.2/ || fail net_setup "http://198.18.0.2/ (the host's LAN) does not answer the host"
at_exit 'for s in $(curl -s -H "Authorization: Bearer $KEY" $URL/v1/sandboxes | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do api DELETE /v1/sandboxes/$s; done'

# fetch SBX HOST PORT: what the guest gets from http://HOST:PORT/, or
# "blocked". (nc: the static busybox's wget crashes resolving names.) A
# dropped connection is given 5 s in the full tier, 3 in the quick one:
# an allowed one answers in milliseconds here, and every allowed case
# below would fail if that were not so.
NC_WAIT=$(full && echo 5 || echo 3)
fetch() {
	api POST "/v1/sandboxes/$1/exec" "{\"cmd\":\"echo GET / | nc -w $NC_WAIT $2 $3 | head -1 | grep . || echo blocked\"}"
	jget 'j["stdout"].strip()'
}
reach() {   # reach NAME SBX HOST PORT WANT
	local got
	got=$(fetch "$2" "$3" "$4")
	check "$1" "$3:$4 -> '$got'" [ "$got" = "$5" ]
}
# reach_all SBX "NAME HOST PORT WANT" ...: reach's checks, the probes all
# at once in one exec (each nc in the background with its own wait): the
# quick tier's eight blocked probes took 3 s each one after another.
reach_all() {
	local sbx=$1 c n h p w got targets=
	shift
	for c in "$@"; do read -r n h p w <<<"$c"; targets="$targets $h:$p"; done
	api POST "/v1/sandboxes/$sbx/exec" "{\"cmd\":\"for t in$targets; do (echo GET / | nc -w $NC_WAIT \${t%:*} \${t#*:} | head -1 | grep . || echo blocked) | while read -r l; do echo \$t \$l; done & done; wait\",\"timeout_seconds\":60}"
	jget 'j["stdout"]' > "$T/reach_all"
	for c in "$@"; do
		read -r n h p w <<<"$c"
		got=$(awk -v t="$h:$p" '$1 == t { $1 = ""; sub(/^ /, ""); print; exit }' "$T/reach_all")
		check "$n" "$h:$p -> '$got'" [ "$got" = "$w" ]
	done
}
# The namespace of a sandbox's VMM (it runs in it, jailed).
netns_of() { ip netns identify "$(cut -d' ' -f1 "$DATA/sandboxes/$1/vmm.pid")"; }

create_sandbox '{"template":"minimal"}'
A=$SBX
[ -n "$A" ] || { fail net_create "$STATUS $BODY"; exit 1; }
check net_policy_shown "GET shows $(jget 'j["network"]')" \
	[ "$(jget 'j["network"]')" = "{'allow_internet': True, 'allow_out': [], 'deny_out': []}" ]
api POST "/v1/sandboxes/$A/exec" '{"cmd":"ip -4 addr show eth0 | grep -o \"inet [0-9./]*\"; ip route | grep default"}'
check net_guest_configured "$(jget 'j["stdout"]' | tr '\n' ' ')" grep -q "inet 172.16.0.2/30" "$T/body"
nsA=$(netns_of "$A")
check net_own_namespace "VMM of $A runs in '$nsA'" [ -n "$nsA" ]
reach net_reaches_internet "$A" 192.0.2.2 80 kiln-upstream

# ---- DNS ------------------------------------------------------------------------------------
# resolves SBX: what the guest's resolver says kiln-dns.test is.
resolves() {
	api POST "/v1/sandboxes/$1/exec" '{"cmd":"nslookup kiln-dns.test 2>&1 | grep -A2 -i \"^name:\" | grep -o \"198.51.100.7\" | head -1; grep ^nameserver /etc/resolv.conf"}'
	jget 'j["stdout"]' | tr '\n' ' ' | sed 's/ *$//'
}
got=$(resolves "$A")
check net_dns_create "after create: '$got'" [ "$got" = "198.51.100.7 nameserver 203.0.113.10" ]
# ready_steps SBX: the steps of its create (kilnd --verbose's "ready in").
ready_steps() { grep -o "sandbox $1: ready in .*" "$T/kilnd.log" | head -1; }
man=$(grep -ho '"dns": "[^"]*"' "$DATA"/templates/minimal/v*/manifest.json 2>/dev/null | head -1)
st=$(ready_steps "$A")
ok=; [ "$man" = '"dns": "203.0.113.10"' ] && [[ $st == *spawn* ]] && [[ $st != *resolv* ]] && ok=1
check net_dns_from_template "manifest $man; $st" [ -n "$ok" ]
# The guest's file is kiln's to write: spoiled, it comes back at wake and
# in a fork (both write it again, as the host's resolver may have moved).
api POST "/v1/sandboxes/$A/exec" '{"cmd":"echo nameserver 192.0.2.99 > /etc/resolv.conf"}'
api POST "/v1/sandboxes/$A/fork"
AF=$(jget 'j["sandboxes"][0]["id"]')
got=$(resolves "$AF")
check net_dns_fork "the fork: '$got'" [ "$got" = "198.51.100.7 nameserver 203.0.113.10" ]
[ -n "$AF" ] && api DELETE "/v1/sandboxes/$AF"
api POST "/v1/sandboxes/$A/hibernate"
got=$(resolves "$A")
check net_dns_wake "after a wake: '$got'" [ "$got" = "198.51.100.7 nameserver 203.0.113.10" ]
bad=$("$KILND" --data "$DATA" --dns 1.2.3.4,nope 2>&1)
check net_dns_bad "status $?: $bad" eval '[[ $bad == *"--dns 1.2.3.4,nope"* ]]'

create_sandbox '{"template":"minimal"}'
B=$SBX
nsB=$(netns_of "$B")
ipB=$(ip -n "$nsB" -4 -o addr show vn 2>/dev/null | grep -o 'inet [0-9.]*' | cut -d' ' -f2)
hostB=$(ip -4 -o addr show "kv${nsB#kiln-n}" 2>/dev/null | grep -o 'inet [0-9.]*' | cut -d' ' -f2)
check net_two_namespaces "$A in $nsA, $B in $nsB ($ipB, host side $hostB)" \
	eval '[ -n "$nsB" ] && [ "$nsA" != "$nsB" ] && [ -n "$ipB" ]'
serve "$nsB" 80 "$ipB"
check net_setup_sandbox_server "B's namespace serves on $ipB" answers "http://$ipB/"
# Private address space is not "the internet" (issue 15), nor is the
# host's own network, whatever its range. The one allowed probe beside
# them shows that the parallel probes do not starve one another.
reach_all "$A" "net_blocks_other_sandbox $ipB 80 blocked" "net_blocks_metadata 169.254.169.254 80 blocked" \
	"net_blocks_host 192.0.2.1 8080 blocked" "net_blocks_host_veth $hostB 8080 blocked" \
	"net_blocks_stratum 192.0.2.2 3333 blocked" "net_blocks_private 10.99.0.10 80 blocked" \
	"net_blocks_cgnat 100.64.99.10 80 blocked" "net_blocks_host_lan 198.18.0.2 80 blocked" \
	"net_reaches_beside_blocked 203.0.113.10 80 kiln-upstream"

# ---- policies -----------------------------------------------------------------------------
create_sandbox '{"template":"minimal","allow_out":["203.0.113.0/24"]}'
C=$SBX
reach net_allow_out_cidr "$C" 203.0.113.10 80 kiln-upstream
reach net_allow_out_others_dropped "$C" 192.0.2.2 80 blocked
create_sandbox '{"template":"minimal","allow_out":["10.99.0.0/24"]}'
E=$SBX
reach net_allow_out_private "$E" 10.99.0.10 80 kiln-upstream
[ -n "$E" ] && api DELETE "/v1/sandboxes/$E"
create_sandbox '{"template":"minimal","allow_internet":false}'
D=$SBX
check net_no_internet_shown "$(jget 'j["network"]')" [ "$(jget 'j["network"]["allow_internet"]')" = False ]
reach net_no_internet "$D" 192.0.2.2 80 blocked

api PUT "/v1/sandboxes/$A/network" '{"allow_out":["198.18.0.0/24"]}'
reach net_allow_out_host_lan "$A" 198.18.0.2 80 kiln-upstream
api PUT "/v1/sandboxes/$A/network" '{"allow_internet":false}'
[ "$STATUS" = 200 ] && [ "$(jget 'j["network"]["allow_internet"]')" = False ] &&
	reach net_put_no_internet "$A" 192.0.2.2 80 blocked || fail net_put_no_internet "$STATUS $BODY"
api PUT "/v1/sandboxes/$A/network" '{"deny_out":["192.0.2.2"]}'
check net_put_deny "$STATUS $(jget 'j["network"]')" [ "$(jget 'j["network"]["deny_out"]')" = "['192.0.2.2/32']" ]
reach net_put_deny_dropped "$A" 192.0.2.2 80 blocked
reach net_put_deny_others_pass "$A" 203.0.113.10 80 kiln-upstream
api PUT "/v1/sandboxes/$D/network" '{}'
reach net_put_open "$D" 192.0.2.2 80 kiln-upstream

api POST /v1/sandboxes '{"template":"minimal","allow_out":["10.0.0.300/8"]}'
expect net_bad_cidr 400 invalid_request && check net_bad_cidr_named "$(jget 'j["error"]["message"]')" grep -q '10.0.0.300/8' "$T/body"
api POST /v1/sandboxes '{"template":"minimal","deny_out":"10.0.0.0/8"}'
expect net_bad_list 400 invalid_request
api PUT "/v1/sandboxes/$A/network" '{"allow_out":["1.2.3.4/33"]}'
expect net_put_bad_cidr 400 invalid_request && check net_put_bad_named "$(jget 'j["error"]["message"]')" grep -q '1.2.3.4/33' "$T/body"
api PUT "/v1/sandboxes/$A/network" '{"allow_everything":true}'
expect net_put_unknown_field 400 invalid_request
api PUT /v1/sandboxes/sbx_doesnotexist/network '{}'
expect net_put_not_found 404 not_found

# ---- forks ---------------------------------------------------------------------------------
api POST "/v1/sandboxes/$C/fork" '{"count":1}'
F=$(jget 'j["sandboxes"][0]["id"]')
[ -n "$F" ] || F=
if [ "$STATUS" = 201 ] && [ -n "$F" ]; then
	reach net_fork_policy_kept "$F" 192.0.2.2 80 blocked
	reach net_fork_reaches "$F" 203.0.113.10 80 kiln-upstream
	reach net_fork_parent_runs_on "$C" 203.0.113.10 80 kiln-upstream
else
	fail net_fork "$STATUS $BODY"
fi

# ---- the switches -----------------------------------------------------------------------------
for s in "$A" "$B" "$C" "$D" "$F"; do [ -n "$s" ] && api DELETE "/v1/sandboxes/$s"; done
# A burst raises the pool (netpool.c): 4 creates at once with --net-pool 2,
# deleted (their networks with them), then as many ready as were taken in
# the last minute, at least 4 (the claims in DATA/net are the pool's now).
# (The full tier: 20 s in the emulated host.)
if full_only net_pool_follows_burst; then
	pids=
	for i in 1 2 3 4; do
		curl -s -m 120 -o "$T/burst$i" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
			--data '{"template":"minimal"}' "$URL/v1/sandboxes" &
		pids="$pids $!"
	done
	wait $pids
	for i in 1 2 3 4; do
		s=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/burst$i" 2>/dev/null)
		[ -n "$s" ] && api DELETE "/v1/sandboxes/$s"
	done
	n=0
	for i in $(seq 90); do
		n=$(ls "$DATA/net" | wc -l)
		[ "$n" -ge 4 ] && break
		sleep 0.5
	done
	check net_pool_follows_burst "$n networks ready after a burst of 4 (--net-pool 2)" [ "$n" -ge 4 ]
fi
# --no-jail (debugging): the VMM runs as root (a zygote's child in the
# zygote's namespace, with its TAP opened in its own by kilnd and passed),
# and its guest is online with its policy.
stop_kilnd
# Its networks come from another range (--net-range).
# And other servers than the template's: a create writes the file.
start_kilnd --rate 0 --net-pool 0 --no-jail --net-range 10.201.4.0/24 --dns 198.51.100.53 --verbose || exit 1
create_sandbox '{"template":"minimal","allow_out":["203.0.113.0/24"]}'
N=$SBX
api POST "/v1/sandboxes/$N/exec" '{"cmd":"grep ^nameserver /etc/resolv.conf"}'
got=$(jget 'j["stdout"]' | tr '\n' ' ' | sed 's/ *$//')
st=$(ready_steps "$N")
ok=; [ "$got" = "nameserver 198.51.100.53" ] && [[ $st == *resolv* ]] && ok=1
check net_dns_host_moved "'$got'; $st" [ -n "$ok" ]
hostend=$(ip -o -4 addr show | awk '$2 ~ /^kv/ {print $4}' | tr '\n' ' ')
check net_range "host ends '$hostend'" eval '[[ $hostend == 10.201.4.* ]]'
bad=$("$KILND" --data "$DATA" --net-range 10.201.4.0/30 2>&1)
check net_range_bad "status $?: $bad" eval '[[ $bad == *"--net-range"*"/28"* ]]'

uidN=$(awk '/^Uid:/{print $2}' /proc/$(cut -d' ' -f1 "$DATA/sandboxes/$N/vmm.pid" 2>/dev/null)/status 2>/dev/null)
check net_no_jail "unjailed VMM uid '$uidN'" eval '[ -n "$N" ] && [ "$uidN" = 0 ]'
reach net_no_jail_reaches "$N" 203.0.113.10 80 kiln-upstream
reach net_no_jail_policy "$N" 192.0.2.2 80 blocked
[ -n "$N" ] && api DELETE "/v1/sandboxes/$N"
# --no-net: a template built with a network device is refused, by name.
stop_kilnd
start_kilnd --rate 0 --no-net || exit 1
api POST /v1/sandboxes '{"template":"minimal"}'
check net_off_refuses_net_template "$STATUS $(jget 'j["error"]["message"]')" \
	eval '[ "$STATUS" = 501 ] && grep -q -- "--no-net" "$T/body"'

# ---- nothing left --------------------------------------------------------------------------
stop_kilnd
left_ns=$(ip netns list | grep -o 'kiln-n[0-9]*' | tr '\n' ' ')
left_links=$(ip -o link show | grep -o ' kv[0-9]*' | tr '\n' ' ')
left_table=$(nft list tables 2>/dev/null | grep 'inet kiln')
check net_nothing_left "namespaces '$left_ns', veths '$left_links', table '$left_table', DATA/net: $(ls "$DATA/net" 2>/dev/null | wc -l)" \
	eval '[ -z "$left_ns" ] && [ -z "$left_links" ] && [ -z "$left_table" ]'
