#!/bin/bash
# 20 creates at once: each one succeeds (201, a running sandbox that runs
# a command) or is refused with 503; kilnd does not crash, and no
# half-made sandbox is left (every VMM and directory belongs to a sandbox
# the API lists). kilnd runs with room for 12, so some must be refused.
# Against an endpoint (a cluster's replica, tests/cluster/e2e.sh) the
# hosts' own room applies, not the file's: every create answers 201 or
# 503 no_capacity, at least one is made, and what is made is listed,
# works and is deleted at once; the 12 and 8, and kilnd's VMMs and
# directories, are one-box kilnd's (SKIP lines say so).
# First: creates while a delete's layers collector runs (held open 1 s by
# KILN_TEST_GC_SLOW: kilnd's start's collection is the first, the
# delete's the second), from another workspace: each keeps the directory
# it makes and succeeds (the collector took a directory made after it
# read the sandbox list for a deleted sandbox's, and removed it: "create
# failed: overlay .../disk: No such file or directory").
# tier: full: a slow file whose ground the quick tier covers otherwise (e2e 80 creates eight sandboxes at once, and the SDK tests create in parallel)
. "$(dirname "$0")/lib.sh"

build_template minimal || exit 1
limits="--max-sandboxes 12 --max-creates 4 --create-wait 60000"
# (The collector's hold is kilnd's own setting: one-box only.)
if one_box "concurrent_creates_counted create_while_collecting" "started with $limits: 12 made, 8 refused; KILN_TEST_GC_SLOW"; then
	KILN_TEST_GC_SLOW=2 start_kilnd --rate 0 $limits || exit 1
	KEY2=$(new_key conc2) KEY=$(new_key conc3)
	api POST /v1/sandboxes '{"template":"minimal"}'
	first=$(jget 'j["id"]')
	curl -s -m 60 -o /dev/null -w '%{http_code}\n' -X DELETE -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$first" \
		> "$T/gc.del" &
	dpid=$! n=0 pids=()
	while kill -0 $dpid 2>/dev/null && [ $n -lt 10 ]; do
		n=$((n + 1))
		curl -s -m 120 -o "$T/g$n.json" -w '%{http_code}\n' -X POST -H "Authorization: Bearer $KEY2" \
			--data-binary '{"template":"minimal"}' "$URL/v1/sandboxes" > "$T/g$n.code" &
		pids+=($!)
		sleep 0.2
	done
	wait $dpid "${pids[@]}"
	gc_ok=0 gc_bad= made=()
	for i in $(seq 1 $n); do
		if [ "$(cat "$T/g$i.code")" = 201 ]; then
			gc_ok=$((gc_ok + 1))
			made+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/g$i.json")")
		else
			gc_bad+="$(cat "$T/g$i.code") $(head -c 300 "$T/g$i.json"); "
		fi
	done
	check create_while_collecting "delete $(cat "$T/gc.del"); $gc_ok of $n creates made during it succeeded${gc_bad:+; $gc_bad}" \
		[ "$(cat "$T/gc.del")" = 204 -a -z "$gc_bad" -a $n -ge 3 ]
	KEY=$KEY2
	for s in "${made[@]}"; do api DELETE "/v1/sandboxes/$s"; done
else
	start_kilnd --rate 0 || exit 1
fi
KEY=$(new_key conc)

pids=()
for i in $(seq 1 20); do
	curl -s -m 300 -o "$T/c$i.json" -w '%{http_code}\n' -X POST -H "Authorization: Bearer $KEY" \
		--data-binary '{"template":"minimal"}' "$URL/v1/sandboxes" > "$T/c$i.code" &
	pids+=($!)
done
wait "${pids[@]}"	# not kilnd, which runs in the background too
created=() refused=0 other=
for i in $(seq 1 20); do
	code=$(cat "$T/c$i.code")
	case $code in
	201) created+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/c$i.json")") ;;
	503) grep -q '"no_capacity"' "$T/c$i.json" && refused=$((refused + 1)) || other+="$i:503-without-code " ;;
	*) other+="$i:$code $(head -c 200 "$T/c$i.json") " ;;
	esac
done
if endpoint; then
	check concurrent_creates "20 at once: ${#created[@]} created, $refused refused with 503 no_capacity${other:+, others: $other}" \
		[ -z "$other" -a ${#created[@]} -ge 1 -a $(( ${#created[@]} + refused )) = 20 ]
elif [ -z "$other" ] && [ ${#created[@]} = 12 ] && [ $refused = 8 ]; then
	pass concurrent_creates "20 at once: 12 created, 8 refused with 503"
else
	fail concurrent_creates "${#created[@]} created, $refused refused, others: $other"
fi
alive alive_after_burst

api GET /v1/sandboxes
listed=$(jget '" ".join(sorted(s["id"] for s in j["sandboxes"] if s["status"] == "running"))')
all=$(jget 'len(j["sandboxes"])')
[ "$listed" = "$(printf '%s\n' "${created[@]}" | sort | tr '\n' ' ' | sed 's/ $//')" ] && [ "$all" = ${#created[@]} ] &&
	pass listed_are_created "the API lists exactly the 201s, all running" || fail listed_are_created "listed: $listed ($all)"
ok=0
for s in "${created[@]}"; do
	api POST "/v1/sandboxes/$s/exec" '{"cmd":"cat /proc/sys/kernel/hostname"}'
	[ "$(jget 'j["stdout"]')" = "$s" ] && ok=$((ok + 1))
done
check created_all_work "$ok of ${#created[@]} answer an exec, each with its own hostname" [ "$ok" = ${#created[@]} ]
if one_box no_half_made "counts its kiln-vmm processes and sandbox directories"; then
	vmms=$(sandbox_vmms | wc -l)
	dirs=$(ls "$DATA/sandboxes" | wc -l)
	check no_half_made "sandbox VMMs $vmms, directories $dirs, for ${#created[@]} sandboxes" [ "$vmms" = ${#created[@]} -a "$dirs" = ${#created[@]} ]
fi

# Deleting them all at once, too.
pids=()
for s in "${created[@]}"; do
	curl -s -m 300 -o /dev/null -w '%{http_code}\n' -X DELETE -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$s" >> "$T/del.codes" &
	pids+=($!)
done
wait "${pids[@]}"
sleep 0.5
codes=$(sort "$T/del.codes" | uniq -c | tr -s ' ' | tr '\n' ' ')
if endpoint; then
	api GET /v1/sandboxes
	check concurrent_deletes "codes: $codes; the endpoint lists $(jget 'len(j["sandboxes"])') sandboxes after" \
		[ "$(grep -c 204 "$T/del.codes")" = ${#created[@]} -a "$(jget 'len(j["sandboxes"])')" = 0 ]
else
	check concurrent_deletes "codes: $codes; sandbox VMMs left $(sandbox_vmms | wc -l), directories $(ls "$DATA/sandboxes" | wc -l)" \
		[ "$(grep -c 204 "$T/del.codes")" = ${#created[@]} -a "$(sandbox_vmms | wc -l)" = 0 -a "$(ls "$DATA/sandboxes" | wc -l)" = 0 ]
fi
alive alive_at_end
