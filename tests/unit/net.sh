#!/bin/bash
# tests/unit/net.sh [REPO [BUILD]]: sandbox networks made and removed in
# kilnd's own process (src/net/netns.c: libnftables, the namespace bound
# and unbound, the veth deleted over rtnetlink), for real on this machine
# with kiln-net (no VM): each slot's namespace, forwarding sysctl, NAT
# table and host-side chains are there, a name another creator holds is
# passed over, a removed namespace is gone from a mount namespace made
# after it (/run/netns shared, as ip-netns(8) makes it), and removing
# leaves no namespace, link or chain. Root only; run by the unit
# loop as build/tests/unit_net; PASS/FAIL/SKIP lines, exit 1 on a FAIL.
set -u
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${2:-$repo/build}
NET=$build/kiln-net
rc=0
pass() { echo "PASS net $1${2:+: $2}"; }
fail() { echo "FAIL net $1${2:+: $2}"; rc=1; }
[ -x "$NET" ] || { echo "FAIL net: $NET missing: make all first"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP net: needs root (network namespaces and nftables)"; exit 0; }
# Only this test's slots are removed (never `kiln-net cleanup`, which
# takes every kiln network of the machine): a kilnd may run beside it.
holder= blocked= mine=() spy=
cleanup() {
	[ -n "$holder" ] && { kill "$holder"; wait "$holder"; } 2>/dev/null
	[ -n "$blocked" ] && rm -f "$blocked"
	rm -rf "$spy"
	local s
	for s in "${mine[@]}"; do "$NET" destroy "$s" > /dev/null 2>&1; done
	# The table too when no kiln network is left (as kilnd's stop does).
	ls /run/netns/kiln-n* > /dev/null 2>&1 || nft delete table inet kiln 2>/dev/null
}
trap cleanup EXIT
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }

# Which programs kiln-net runs: ip and nft through a spy that counts.
spy=$(mktemp -d /tmp/kiln-net-spy.XXXXXX) || exit 1
for prog in ip nft sysctl; do
	real=$(command -v "$prog") || real=/usr/sbin/$prog
	printf '#!/bin/sh\necho "%s $*" >> %s/runs\nexec %s "$@"\n' "$prog" "$spy" "$real" > "$spy/$prog"
	chmod +x "$spy/$prog"
done
runs() { local n; n=$(cat "$spy/runs" 2>/dev/null | wc -l); : > "$spy/runs"; echo "$n"; }
export PATH=$spy:$PATH
out=$("$NET" init 2>&1) && pass init || fail init "$out"
runs > /dev/null
# The first free slot is another creator's (its name taken by hand):
# passed over.
free=1
while [ -e "/run/netns/kiln-n$free" ]; do free=$((free + 1)); done
blocked=/run/netns/kiln-n$free
mkdir -p /run/netns && : > "$blocked"
t0=$(date +%s%N)
A=$("$NET" create 2>&1) || fail create "$A"
B=$("$NET" create 2>&1) || fail create "$B"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
made_runs=$(grep -c . "$spy/runs" 2>/dev/null); nft_runs=$(grep -c '^nft' "$spy/runs" 2>/dev/null); runs > /dev/null
# Two ip batches a slot and no nft run (there were about seven runs a
# slot before session 31, three of them nft).
[ "$made_runs" = 4 ] && [ "$nft_runs" = 0 ] && pass create_runs "two slots: $made_runs ip runs, no nft run" ||
	fail create_runs "two slots: $made_runs runs ($nft_runs nft): $(tr '\n' ';' < "$spy/runs")"
sa=$(field "$A" slot) sb=$(field "$B" slot) na=$(field "$A" netns) va=$(field "$A" veth) vb=$(field "$B" veth)
mine=($sa $sb)
[ -n "$sa" ] && [ -n "$sb" ] && [ "$sa" != "$free" ] && [ "$sb" != "$free" ] && [ "$sa" != "$sb" ] &&
	pass create_passes_taken "slots $sa and $sb with kiln-n$free taken, two in $ms ms" ||
	fail create_passes_taken "slots '$sa' '$sb' (kiln-n$free taken): $A / $B"
[ -f "$blocked" ] && [ ! -s "$blocked" ] && ! mountpoint -q "$blocked" && pass taken_untouched "kiln-n$free left as it was" ||
	fail taken_untouched "$(ls -l "$blocked" 2>&1)"
rm -f "$blocked"; blocked=

fw=$(ip netns exec "$na" cat /proc/sys/net/ipv4/ip_forward 2>&1)
hostfw=$(cat /proc/sys/net/ipv4/ip_forward)
[ "$fw" = 1 ] && pass forwarding_inside "net.ipv4.ip_forward in $na: 1 (the host's: $hostfw)" || fail forwarding_inside "in $na: '$fw'"
nat=$(ip netns exec "$na" nft list table ip kiln 2>&1)
grep -q 'oifname "vn" masquerade' <<<"$nat" && pass nat_inside "table ip kiln in $na masquerades" || fail nat_inside "$nat"
links=$(ip -br link show "$va" 2>&1; ip netns exec "$na" ip -br link 2>&1)
grep -q "^$va" <<<"$links" && grep -q '^vn@' <<<"$links" && grep -q '^tap0' <<<"$links" &&
	pass links "$va here, vn and tap0 in $na" || fail links "$links"
chains=$(nft list table inet kiln 2>&1)
grep -q "chain sbx$sa {" <<<"$chains" && grep -q "chain sbx$sb {" <<<"$chains" &&
	pass host_chains "sbx$sa and sbx$sb in inet kiln" || fail host_chains "$chains"
out=$("$NET" policy "$sa" --no-internet 2>&1) && nft list chain inet kiln "sbx$sa" 2>/dev/null | grep -q drop &&
	pass policy "slot $sa: no internet: a drop rule" || fail policy "$out"

# A mount namespace made now keeps /run/netns's mounts as peers of the
# host's: removing the namespace here removes it there, so no copy of
# the mount pins it (ip-netns(8) makes /run/netns shared for this).
unshare -m --propagation unchanged sleep 60 &
holder=$!
sleep 0.3
seen=$(nsenter -t "$holder" -m ls /run/netns 2>&1)
grep -qx "$na" <<<"$seen" && pass copy_sees "a new mount namespace sees $na" || fail copy_sees "$seen"
runs > /dev/null
t0=$(date +%s%N)
out=$("$NET" destroy "$sa" 2>&1) || fail destroy "$out"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
n=$(runs)
[ "$n" = 0 ] && pass destroy_runs "a slot removed without a child process" || fail destroy_runs "$n runs"
seen=$(nsenter -t "$holder" -m ls /run/netns 2>&1)
mnt=$(nsenter -t "$holder" -m grep -c "/run/netns/$na " /proc/self/mountinfo)
! grep -qx "$na" <<<"$seen" && [ "$mnt" = 0 ] && pass gone_in_copy "destroyed in $ms ms; gone from the other mount namespace too" ||
	fail gone_in_copy "there: '$seen', its mounts: $mnt"
kill "$holder"; wait "$holder" 2>/dev/null; holder=
left=$( { [ -e "/run/netns/$na" ] && echo "/run/netns/$na"; ip -br link show "$va" 2>/dev/null; nft list table inet kiln 2>/dev/null | grep "chain sbx$sa {"; } )
[ -z "$left" ] && pass destroy_leaves_nothing "slot $sa: no namespace, veth or chain" || fail destroy_leaves_nothing "$left"
[ -e "/run/netns/$(field "$B" netns)" ] && pass other_kept "slot $sb still there" || fail other_kept "slot $sb gone"
# Destroying again (each piece already gone) is no error.
out=$("$NET" destroy "$sa" 2>&1) && pass destroy_again "slot $sa a second time: ok" || fail destroy_again "$out"

out=$("$NET" destroy "$sb" 2>&1) || fail destroy "$out"
mine=()
left=$( { [ -e "/run/netns/$(field "$B" netns)" ] && echo "its namespace"; ip -br link show "$vb" 2>/dev/null;
	nft list table inet kiln 2>/dev/null | grep "chain sbx$sb {"; } )
[ -z "$left" ] && pass destroy_both "slot $sb: no namespace, veth or chain either" || fail destroy_both "$left"
exit $rc
