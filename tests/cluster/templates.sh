# tests/cluster/templates.sh: sourced by tests/cluster/hosts.sh once both
# agents have joined (its functions and variables: start_agent, on_host,
# agent_key, host_url, until_ok, KEY, URL). Leaves both hosts empty.
# ---- a workspace's template through the cluster (issues 12, 14) -------------------------
# Built once, on the host placement picks, through one replica; copied by
# the API to the other host (export: a sparse tar and its sha256; import:
# digest checked, its zygote booted, then in service); a sandbox of it on
# each host (the spreading replica puts two on two empty hosts); a copy
# whose digest is wrong is refused with nothing left; a host that lost it
# gets it back at its next heartbeat; a delete removes it everywhere,
# also from a host that was down through it and comes back.
KEY=$CL_KEY URL=$CL_API1
mkdir -p "$T/tctx"
printf '%s\n' 'FROM kiln/minimal' 'RUN echo cluster-built > /etc/cl-mark' > "$T/tctx/Dockerfile"
tar -C "$T/tctx" -cf "$T/tctx.tar" Dockerfile
t0=$SECONDS
STATUS=$(curl -s -m 120 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $KEY" -H 'Content-Type: application/x-tar' \
	--data-binary @"$T/tctx.tar" "$CL_API1/v1/templates?name=cltpl"); BODY=$(cat "$T/body")
[ "$STATUS" = 202 ] && pass tmpl_cluster_build "202 through replica 1: $BODY" || fail tmpl_cluster_build "$STATUS $BODY"
# Its log, followed through the other replica (the builder's, fetched
# again for what came since), to its end.
curl -sN -m 900 -H "Authorization: Bearer $KEY" "$CL_API2/v1/templates/cltpl/logs?follow=1" > "$T/cltpl.sse"
end=$(grep -A1 '^event: end' "$T/cltpl.sse" | sed -n 's/^data: //p')
[[ $end == *'"ready"'* ]] && grep -q 'RUN echo cluster-built' "$T/cltpl.sse" \
	&& pass tmpl_cluster_log_follow "$(grep -c '^event: line' "$T/cltpl.sse") lines through replica 2, then end $end, $((SECONDS - t0)) s after the upload" \
	|| fail tmpl_cluster_log_follow "end '$end': $(tail -c 600 "$T/cltpl.sse" | tr '\n' ' ')"
URL=$CL_API2
api GET /v1/templates/cltpl
[ "$(jget 'j["status"], j["version"], j["own"]')" = "('ready', 1, True)" ] && pass tmpl_cluster_get "replica 2: ready, version 1" \
	|| fail tmpl_cluster_get "$STATUS $BODY"
# host_tmpl NAME: the host name of cltpl on agent NAME and its version ("" when it has none).
host_tmpl() {
	curl -s -m 30 --cacert "$CL_TLS/ca.pem" -H "Authorization: Bearer $(agent_key "$1")" "$(host_url "$1")/v1/host/templates" |
		python3 -c 'import json,sys; print(" ".join("%s v%d" % (t["name"], t["version"]) for t in json.load(sys.stdin)["templates"] if t["name"].endswith("_cltpl") and t["built"]))' 2>/dev/null
}
both_have() { [[ $(host_tmpl a) == *" v1" && $(host_tmpl b) == *" v1" ]]; }
t1=$SECONDS
until_ok 300 both_have && pass tmpl_cluster_copied "host-a: $(host_tmpl a); host-b: $(host_tmpl b) ($((SECONDS - t1)) s after ready)" \
	|| fail tmpl_cluster_copied "host-a: '$(host_tmpl a)' host-b: '$(host_tmpl b)'"
TN=$(host_tmpl a | cut -d' ' -f1)
[ -z "$TN" ] && TN=$(host_tmpl b | cut -d' ' -f1)
# What a copy costs: the export as the API fetches it, and the replicas'
# own count of the copies they made.
curl -s -m 120 --cacert "$CL_TLS/ca.pem" -D "$T/export.h" -o "$T/export.tar" -w '%{http_code} %{size_download} %{time_total}\n' \
	-H "Authorization: Bearer $(agent_key a)" "$(host_url a)/v1/host/templates/$TN/export" > "$T/export.w"
xsha=$(sed -n 's/^X-Kiln-Sha256: *//Ip' "$T/export.h" | tr -d '\r')
read -r xst xbytes xtime < "$T/export.w"
copies=; for u in "$CL_API1" "$CL_API2"; do
	copies+="$(curl -s -m 10 -H "Authorization: Bearer $KEY" "$u/metrics" | grep '^kiln_cluster_template_copy' | tr '\n' ' ')| "
done
[ "$xst" = 200 ] && [ "$xsha" = "$(sha256sum "$T/export.tar" | cut -d' ' -f1)" ] \
	&& pass tmpl_cluster_export "$xbytes bytes (sparse tar; $(du -k "$T/export.tar" | cut -f1) KiB on disk) in $xtime s from host-a, sha256 as said; replicas: $copies" \
	|| fail tmpl_cluster_export "$xst sha '$xsha' $(head -c 200 "$T/export.tar")"
# A sandbox of it on each host: the spreading replica, both hosts empty.
URL=$CL_API1
create_sandbox '{"template":"cltpl"}'; T1=$SBX
create_sandbox '{"template":"cltpl"}'; T2=$SBX
ta=$(on_host a) tb=$(on_host b)
marks=
for s in $T1 $T2; do api POST "/v1/sandboxes/$s/exec" '{"cmd":"cat /etc/cl-mark"}'; marks+="$(jget 'j["stdout"].strip()') "; done
[ -n "$T1" ] && [ -n "$T2" ] && [ "$(wc -w <<<"$ta")" = 1 ] && [ "$(wc -w <<<"$tb")" = 1 ] && [ "$marks" = "cluster-built cluster-built " ] \
	&& pass tmpl_cluster_sandboxes "$ta on host-a, $tb on host-b: both read /etc/cl-mark" \
	|| fail tmpl_cluster_sandboxes "'$T1' '$T2' a: '$ta' b: '$tb' marks '$marks' $BODY"
# A copy whose bytes are not what its digest says: 422, nothing kept.
imp() {	# imp HOST NAME SHA: PUT the export there
	curl -s -m 120 --cacert "$CL_TLS/ca.pem" -o "$T/imp.body" -w '%{http_code}' -X PUT -H "Authorization: Bearer $(agent_key "$1")" \
		-H 'Content-Type: application/x-tar' --data-binary @"$T/export.tar" "$(host_url "$1")/v1/host/templates/$2/import?sha256=$3"
}
bad=${TN}x
st1=$(imp b "$bad" "$(printf '0%.0s' $(seq 64))")
left1=$(ls -A "$T/b/templates/.imports" 2>/dev/null | grep -v '\.lock$'; ls -d "$T/b/templates/$bad" 2>/dev/null)
# The right digest under another name: unpacked, refused, removed.
st2=$(imp b "$bad" "$xsha")
left2=$(ls -A "$T/b/templates/.imports" 2>/dev/null | grep -v '\.lock$'; ls -d "$T/b/templates/$bad" 2>/dev/null)
[ "$st1" = 422 ] && [ -z "$left1" ] && [ "$st2" = 400 ] && [ -z "$left2" ] \
	&& pass tmpl_cluster_import_checked "wrong sha256: 422; another template's archive: 400 ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["message"])' "$T/imp.body" 2>/dev/null)); nothing left on host-b" \
	|| fail tmpl_cluster_import_checked "$st1 '$left1' $st2 '$left2' $(cat "$T/imp.body")"
# A host without the newest version (here: the sandbox on it deleted and
# the template removed behind the API's back) gets it at its next
# heartbeat.
api DELETE "/v1/sandboxes/$tb"
curl -s -m 30 --cacert "$CL_TLS/ca.pem" -o /dev/null -X DELETE -H "Authorization: Bearer $(agent_key b)" "$(host_url b)/v1/host/templates/$TN"
gone_b=$(host_tmpl b)
t1=$SECONDS
back_b() { [[ $(host_tmpl b) == *" v1" ]]; }
[ -z "$gone_b" ] && until_ok 60 back_b && pass tmpl_cluster_heal "host-b lost it; copied back $((SECONDS - t1)) s later: $(host_tmpl b)" \
	|| fail tmpl_cluster_heal "after the host's delete '$gone_b', now '$(host_tmpl b)'"
# Delete: refused while a sandbox uses it; then, with host-b down (it
# has its copy), 204 through replica 2; host-a's goes at once. host-b
# comes back with its copy: the deletion recorded in the database
# (template_deletions) has it removed there, by whichever replica looks
# first, and it is copied nowhere. (Replica 2, which did the delete,
# would also have removed it by its old 10 minutes' memory; what only
# the database holds is checked by tests/cluster/run
# template_deletion_recorded and unit_kilnd_store.)
URL=$CL_API2
api DELETE /v1/templates/cltpl; st1=$STATUS
URL=$CL_API1
api DELETE "/v1/sandboxes/$ta"
kill -9 "${agent_pid[b]}"; wait "${agent_pid[b]}" 2>/dev/null; unset "agent_pid[b]"
had_b=$([ -e "$T/b/templates/$TN" ] && echo yes)
sleep 18	# marked down within 15 s (docs/cluster.md "Failure")
URL=$CL_API2
api DELETE /v1/templates/cltpl; st2=$STATUS
sleep 8
URL=$CL_API1
api GET /v1/templates/cltpl; st3=$STATUS
gone_a=$([ -z "$(host_tmpl a)" ] && [ ! -e "$T/a/templates/$TN" ] && echo yes)
start_agent b "$CL_PORT_B" "$CL_ADV_B"
t1=$SECONDS
# host-b answers, lists no cltpl, and its directory is gone.
b_clean() {
	[ "$(curl -s -m 10 -o /dev/null -w '%{http_code}' --cacert "$CL_TLS/ca.pem" -H "Authorization: Bearer $(agent_key b)" \
		"$(host_url b)/v1/host/templates")" = 200 ] && [ -z "$(host_tmpl b)" ] && [ ! -e "$T/b/templates/$TN" ]
}
until_ok 90 b_clean; took=$((SECONDS - t1))
sleep 8
[ "$st1" = 409 ] && [ "$st2" = 204 ] && [ "$st3" = 404 ] && [ "$had_b" = yes ] && [ "$gone_a" = yes ] && b_clean && [ -z "$(host_tmpl a)" ] && [ ! -e "$T/a/templates/$TN" ] \
	&& pass tmpl_cluster_delete "in use: 409; host-b down with its copy, then 204 through replica 2, gone from host-a, 404 on replica 1; host-b back: its copy removed ${took} s after its restart, 8 s later neither host has it (not copied back)" \
	|| fail tmpl_cluster_delete "$st1 $st2 $st3 had_b '$had_b' gone_a '$gone_a' a: '$(host_tmpl a)' b: '$(host_tmpl b)' ($took s) $(ls "$T/a/templates" "$T/b/templates" | tr '\n' ' '); b: $(tail -3 "$T/b.log" | tr '\n' ' ')"
