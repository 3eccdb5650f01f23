#!/bin/bash
# The kiln CLI (build/kiln) against a real kilnd with real sandboxes (the
# minimal template): each command in its documented form (docs/cli.md),
# options anywhere among the arguments and only what follows -- passed
# through, the positional template, exit statuses (the remote command's
# passed through, kiln's own 125), the missing-key message, cp from named
# files, pipes, FIFOs and process substitution (never kiln's own stdin),
# directories refused without -r and copied with -r both ways, a shell on
# piped stdin ending at its end, ls filters and pages, guest fs commands,
# logs, the egress flags and `network`, and output for a terminal (aligned
# tables, relative times, colour only on a terminal and never with
# NO_COLOR, a progress line). Needs KVM (the emulated host).
. "$(dirname "$0")/lib.sh"

build_template minimal || exit 1
start_kilnd --rate 0 || exit 1
KEY=$(new_key cli)
export KILN_API_URL=$URL KILN_API_KEY=$KEY
at_exit 'for s in $("$KILN" ls --json 2>/dev/null | python3 -c "import json,sys; [print(s[\"id\"]) for s in json.load(sys.stdin)[\"sandboxes\"]]" 2>/dev/null); do "$KILN" rm "$s" 2>/dev/null; done'
k() { "$KILN" "$@"; }
# js EXPR < JSON: a Python expression on stdin's JSON (as j).
js() { python3 -c "import json,sys; j=json.load(sys.stdin); print(($1))" 2>/dev/null; }

# ---- create: the positional template, --json, options after it -----------------------------
out=$(k create minimal --ttl 600 --meta who=cli --meta run=72 --json 2> "$T/err")
A=$(js 'j["id"]' <<<"$out")
[[ $A == sbx_* ]] && [ "$(js 'j["template"], j["ttl_seconds"], j["metadata"]["who"]' <<<"$out")" = "('minimal', 600, 'cli')" ] &&
	pass create_positional "kiln create minimal --ttl 600 --meta ... --json: $A" ||
	{ fail create_positional "$out $(cat "$T/err")"; exit 1; }
k create nosuchtemplate > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q nosuchtemplate "$T/err" && pass create_unknown_template "exit 125: $(head -c 200 "$T/err")" ||
	fail create_unknown_template "exit $st: $(cat "$T/err")"

# ---- usage errors: exit 2, naming the option and the value -------------------------------------
usage2() {	# NAME WANT-IN-STDERR ARGS...
	local name=$1 want=$2; shift 2
	k "$@" > /dev/null 2> "$T/err"
	local st=$?
	[ "$st" = 2 ] && grep -qF -- "$want" "$T/err" && pass "$name" "exit 2: $(head -1 "$T/err")" ||
		fail "$name" "exit $st: $(cat "$T/err")"
}
usage2 usage_ttl_create "--ttl: 'abc'" create minimal --ttl abc
usage2 usage_ttl_cmd "'abc'" ttl "$A" abc
usage2 usage_exec_timeout "-t/--timeout: 'abc'" exec -t abc "$A" -- true
usage2 usage_fork_count "-n/--count: 'abc'" fork "$A" -n abc
usage2 usage_fork_count_range "'0'" fork "$A" -n 0
usage2 usage_unknown_option "--tree" ls --tree
usage2 usage_exec_no_dashdash "-l" exec "$A" ls -l
usage2 usage_bad_port "'http'" expose "$A" http
usage2 usage_cp_dir "-r" cp "$T" "$A:/tmp/x"
[ "$(k ls -n 2 2>&1 >/dev/null | head -1)" ] && pass usage_messages "printed" || fail usage_messages "nothing on stderr"

# ---- exec: options anywhere before --, the command untouched after it ---------------------
out=$(k exec -e X=one "$A" -- sh -c 'echo $X' 2>&1)
check exec_opts_before "$out" [ "$out" = one ]
out=$(k exec "$A" -e X=two -w /tmp -- sh -c 'echo $X; pwd' 2>&1)
check exec_opts_after_id "$(tr '\n' ' ' <<<"$out")" [ "$out" = $'two\n/tmp' ]
out=$(k exec "$A" -- printf '%s\n' --json -n 2 -- -e 2>&1)
check exec_after_dashdash_untouched "$(tr '\n' ' ' <<<"$out")" [ "$out" = $'--json\n-n\n2\n--\n-e' ]
k exec "$A" -- sh -c 'echo out; echo err >&2; exit 7' > "$T/out" 2> "$T/err"
st=$?
[ "$st" = 7 ] && [ "$(cat "$T/out")" = out ] && [ "$(cat "$T/err")" = err ] && pass exec_status "remote exit 7 passed through" ||
	fail exec_status "exit $st out '$(cat "$T/out")' err '$(cat "$T/err")'"
k exec "$A" -- sh -c 'exit 125' 2> /dev/null
st=$?
check exec_status_125 "the remote's own 125 passed through: $st" [ "$st" = 125 ]
k exec "$A" -- nosuchcommand-kiln 2> /dev/null
st=$?
check exec_not_found "exit $st" [ "$st" = 127 ]
k exec sbx_doesnotexist -- true 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q 'kiln:' "$T/err" && pass exec_kiln_failure "exit 125: $(cat "$T/err")" || fail exec_kiln_failure "exit $st: $(cat "$T/err")"
out=$(echo typed | k exec -i "$A" -- cat)
check exec_stdin "$out" [ "$out" = typed ]

# ---- proc: a background process fed through kiln's stdin, its output and status -----------------
p=$(k proc start --stdin "$A" -- sh -c 'while read -r l; do echo "got:$l"; done; echo done >&2; exit 3')
listed=$(k proc ls "$A" --json | js '[q["status"] for q in j["processes"] if q["id"] == '"${p:-0}"']')
printf 'one\ntwo\n' | k proc stdin --close "$A" "$p"
k proc output --wait 30 "$A" "$p" > "$T/out" 2> "$T/err"
st=$?
check proc_stdin_output "proc $p listed $listed; out '$(tr '\n' ' ' < "$T/out")' err '$(cat "$T/err")' exit $st" \
	eval '[ "$listed" = "['"'running'"']" ] && [ "$(cat "$T/out")" = $'"'got:one\ngot:two'"' ] && [ "$(cat "$T/err")" = done ] && [ "$st" = 3 ]'
q=$(k proc start "$A" sleep 300)
k proc output "$A" "$q" > /dev/null 2> "$T/err"
st=$?
running=$(cat "$T/err")
k proc kill -s TERM "$A" "$q"
k proc output --wait 30 "$A" "$q" > /dev/null 2>&1
st2=$?
check proc_kill "while running: exit $st ($running); after TERM: exit $st2" \
	eval '[ "$st" = 0 ] && [[ $running == *"still running"* ]] && [ "$st2" = 143 ]'
echo x | k proc stdin "$A" "$q" 2> "$T/err"
st=$?
check proc_stdin_ended "exit $st: $(cat "$T/err")" [ "$st" = 125 ]
k proc kill "$A" 0 2> "$T/err"
st=$?
check proc_bad_id "exit $st: $(head -1 "$T/err")" [ "$st" = 2 ]

# ---- missing and bad keys ----------------------------------------------------------------
KILN_API_KEY= k ls > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q KILN_API_KEY "$T/err" && pass missing_key "exit 125: $(cat "$T/err")" || fail missing_key "exit $st: $(cat "$T/err")"
KILN_API_KEY=kiln_bad k ls > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q KILN_API_KEY "$T/err" && pass bad_key "exit 125: $(cat "$T/err")" || fail bad_key "exit $st: $(cat "$T/err")"

# ---- fork: options after the id (scripts/demo's form) ----------------------------------------
out=$(k fork "$A" --json 2> "$T/err")
F1=$(js 'j["sandboxes"][0]["id"]' <<<"$out")
[[ $F1 == sbx_* ]] && pass fork_json_after_id "kiln fork ID --json: $F1" || fail fork_json_after_id "$out $(cat "$T/err")"
out=$(k fork "$A" -n 2 --tree --json 2> "$T/err")
[ "$(js 'len(j["sandboxes"])' <<<"$out")" = 2 ] && pass fork_tree_after_id "kiln fork ID -n 2 --tree --json: 2 children" ||
	fail fork_tree_after_id "$out $(cat "$T/err")"
kids=$(js '" ".join(s["id"] for s in j["sandboxes"])' <<<"$out")
k rm $F1 $kids && pass rm_many "$F1 $kids" || fail rm_many "$(k ls)"
out=$(k get "$F1" 2>&1)
[ $? = 125 ] && pass get_deleted "$(head -c 200 <<<"$out")" || fail get_deleted "$out"

# ---- expose with the option after the port ------------------------------------------------------
out=$(k expose "$A" 8080 --public)
[[ $out == *"/v1/sandboxes/$A/proxy/8080/"* ]] && pass expose_public "$out" || fail expose_public "$out"
out=$(k ports "$A" --json)
[ "$(js '[(p["port"], p["public"]) for p in j["ports"]]' <<<"$out")" = "[(8080, True)]" ] && pass ports_public "8080 public" ||
	fail ports_public "$out"
k unexpose "$A" 8080 && [ "$(k ports "$A" --json | js 'len(j["ports"])')" = 0 ] && pass unexpose "gone" || fail unexpose "$(k ports "$A")"

# ---- cp: the named source, whatever kind of file it is --------------------------------------
echo "from the file" > "$T/named.txt"
echo "kiln's stdin, not to be sent" | k cp "$T/named.txt" "$A:/tmp/named.txt"
check cp_named_not_stdin "$(k exec "$A" -- cat /tmp/named.txt)" [ "$(k exec "$A" -- cat /tmp/named.txt)" = "from the file" ]
echo "kiln's stdin" | k cp <(echo "from process substitution") "$A:/tmp/procsub.txt"
check cp_process_substitution "$(k exec "$A" -- cat /tmp/procsub.txt)" [ "$(k exec "$A" -- cat /tmp/procsub.txt)" = "from process substitution" ]
mkfifo "$T/fifo"
(echo "from a fifo" > "$T/fifo") &
writer=$!
echo "kiln's stdin" | k cp "$T/fifo" "$A:/tmp/fifo.txt"
wait $writer
check cp_fifo "$(k exec "$A" -- cat /tmp/fifo.txt)" [ "$(k exec "$A" -- cat /tmp/fifo.txt)" = "from a fifo" ]
echo "piped in" | k cp - "$A:/tmp/stdin.txt"
check cp_stdin_dash "$(k exec "$A" -- cat /tmp/stdin.txt)" [ "$(k exec "$A" -- cat /tmp/stdin.txt)" = "piped in" ]
k cp "$A:/tmp/named.txt" - > "$T/down.txt"
check cp_to_stdout "$(cat "$T/down.txt")" [ "$(cat "$T/down.txt")" = "from the file" ]
mkdir -p "$T/tree/sub/deeper" "$T/back"
echo one > "$T/tree/a.txt"; echo two > "$T/tree/sub/b.txt"; head -c 100000 /dev/urandom > "$T/tree/sub/deeper/c.bin"
k cp -r "$T/tree" "$A:/tmp/up" && k cp "$A:/tmp/up" -r "$T/back/tree" && diff -r "$T/tree" "$T/back/tree" &&
	pass cp_recursive "a tree up and down again, identical" || fail cp_recursive "$(diff -r "$T/tree" "$T/back/tree" 2>&1 | head -5)"
k cp "$A:/tmp/up" "$T/back/x" 2> "$T/err"
st=$?
[ "$st" = 2 ] && grep -q -- -r "$T/err" && [ ! -e "$T/back/x" ] && pass cp_remote_dir_refused "exit 2: $(head -1 "$T/err")" ||
	fail cp_remote_dir_refused "exit $st: $(cat "$T/err")"
k cp "$T/named.txt" "$A:/tmp/up/" && check cp_into_dir "$(k exec "$A" -- cat /tmp/up/named.txt)" [ "$(k exec "$A" -- cat /tmp/up/named.txt)" = "from the file" ]

# ---- guest fs ----------------------------------------------------------------------------------
k fs mkdir "$A:/tmp/made/deep" && k fs stat "$A:/tmp/made/deep" --json | js 'j["type"]' | grep -qx dir &&
	pass fs_mkdir "with parents" || fail fs_mkdir "$(k fs stat "$A:/tmp/made/deep" 2>&1)"
out=$(k fs ls "$A:/tmp/up")
grep -q 'a.txt' <<<"$out" && grep -q 'sub/' <<<"$out" && head -1 <<<"$out" | grep -q '^MODE' && pass fs_ls "$(tr '\n' '|' <<<"$out")" ||
	fail fs_ls "$out"
out=$(k fs stat "$A" /tmp/up/a.txt)
grep -q '^size *4$' <<<"$out" && pass fs_stat "ID PATH form: size 4" || fail fs_stat "$out"
k fs rm "$A:/tmp/up" 2> "$T/err"
st=$?
[ "$st" = 125 ] && k fs rm -r "$A:/tmp/up" && ! k fs stat "$A:/tmp/up" 2>/dev/null && pass fs_rm "non-empty refused ($st), -r removes" ||
	fail fs_rm "exit $st: $(cat "$T/err")"
k fs mkdir "$A:/tmp/cw"
timeout 60 "$KILN" fs watch -r "$A:/tmp/cw" > "$T/watch.out" 2> "$T/watch.err" &
watcher=$!
sleep 2
k exec "$A" -- sh -c 'mkdir /tmp/cw/d; echo x > /tmp/cw/d/f; mv /tmp/cw/d/f /tmp/cw/g; rm /tmp/cw/g; sleep 0.5; rm -rf /tmp/cw'
wait $watcher
st=$?
check fs_watch "exit $st; $(tr '\n' '|' < "$T/watch.out"); $(cat "$T/watch.err")" \
	eval '[ "$st" = 0 ] && grep -qx "create d/" "$T/watch.out" && grep -qx "create d/f" "$T/watch.out" &&
	      grep -qx "rename-from d/f" "$T/watch.out" && grep -qx "rename-to g" "$T/watch.out" &&
	      grep -qx "remove g" "$T/watch.out" && grep -q "deleted or moved" "$T/watch.err"'
k fs watch "$A:/tmp/no-such" 2> "$T/err"
st=$?
check fs_watch_missing "exit $st: $(cat "$T/err")" eval '[ "$st" = 125 ] && grep -q not_found "$T/err"'

# ---- shell: piped stdin ends the session -----------------------------------------------------------
printf 'echo from-shell\n' | timeout 60 "$KILN" shell "$A" > "$T/shell.out" 2>&1
st=$?
grep -q from-shell "$T/shell.out" && [ "$st" = 0 ] && pass shell_piped_eof "ended at EOF, exit 0" ||
	fail shell_piped_eof "exit $st: $(tail -c 300 "$T/shell.out")"
printf 'echo x; exit 4' | timeout 60 "$KILN" shell "$A" > /dev/null 2>&1
st=$?
check shell_exit_status "no final newline, exit 4: $st" [ "$st" = 4 ]
out=$(timeout 60 "$KILN" shell "$A" -- echo one-command < /dev/null 2>&1)
[[ $out == *one-command* ]] && pass shell_cmd "$(tr -d '\r' <<<"$out")" || fail shell_cmd "$out"

# ---- network -----------------------------------------------------------------------------------
out=$(k create minimal --no-internet --deny-out 192.0.2.0/24 --json)
N=$(js 'j["id"]' <<<"$out")
[ "$(js 'j["network"]["allow_internet"], j["network"]["deny_out"]' <<<"$out")" = "(False, ['192.0.2.0/24'])" ] &&
	pass create_egress "--no-internet --deny-out at create" || fail create_egress "$out"
out=$(k network "$N" --allow-out 10.0.0.0/8,192.0.2.7 --json)
[ "$(js 'j["allow_internet"], j["allow_out"], j["deny_out"]' <<<"$out")" = "(True, ['10.0.0.0/8', '192.0.2.7/32'], [])" ] &&
	pass network_set "--allow-out replaces the policy" || fail network_set "$out"
out=$(k network "$N")
grep -q '^allow_out *10.0.0.0/8 192.0.2.7/32' <<<"$out" && grep -q '^internet *yes' <<<"$out" && pass network_show "$(tr '\n' '|' <<<"$out")" ||
	fail network_show "$out"
k network "$N" --allow-out 10.0.0.300 > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q 10.0.0.300 "$T/err" && pass network_bad_cidr "exit 125: $(cat "$T/err")" || fail network_bad_cidr "exit $st: $(cat "$T/err")"

# ---- ls: filters and pages (GET /v1/sandboxes's query, docs/api.md) -------------------------
ids=$(k ls --json | js '" ".join(s["id"] for s in j["sandboxes"])')
[ "$ids" = "$A $N" ] && pass ls_all "oldest first: $ids" || fail ls_all "$ids"
check ls_meta "$(k ls --meta who=cli --json | js '[s["id"] for s in j["sandboxes"]]')" \
	[ "$(k ls --meta who=cli --meta run=72 --json | js '[s["id"] for s in j["sandboxes"]]')" = "['$A']" ]
check ls_status "--status hibernated: none; running: 2" [ "$(k ls --status hibernated --json | js 'len(j["sandboxes"])') $(k ls --status running --json | js 'len(j["sandboxes"])')" = "0 2" ]
check ls_template "--template base: none; minimal: 2" [ "$(k ls --template base --json | js 'len(j["sandboxes"])') $(k ls --template minimal --json | js 'len(j["sandboxes"])')" = "0 2" ]
page=$(k ls --limit 1 --json)
cur=$(js 'j["next_cursor"]' <<<"$page")
p2=$(k ls --limit 1 --cursor "$cur" --json)
[ "$(js 'j["sandboxes"][0]["id"]' <<<"$page") $(js 'j["sandboxes"][0]["id"]' <<<"$p2")" = "$A $N" ] &&
	pass ls_pages "--limit 1 then --cursor: $A, $N" || fail ls_pages "$page / $p2"
k ls --status bogus > /dev/null 2> "$T/err"
st=$?
[ "$st" = 125 ] && grep -q status "$T/err" && pass ls_bad_filter "exit 125: $(cat "$T/err")" || fail ls_bad_filter "exit $st: $(cat "$T/err")"

# ---- logs ----------------------------------------------------------------------------------------
out=$(k logs "$A" -n 5 --json)
n=$(js 'len(j["lines"])' <<<"$out")
[ -n "$n" ] && [ "$n" -ge 1 ] && [ "$n" -le 5 ] && pass logs_tail "$n lines" || fail logs_tail "$(head -c 300 <<<"$out")"
k logs "$A" > "$T/logs.txt" && grep -qE '^(console|init) ' "$T/logs.txt" && pass logs_text "$(wc -l < "$T/logs.txt") lines" ||
	fail logs_text "$(head -c 300 "$T/logs.txt")"
timeout 60 "$KILN" logs -f "$N" > "$T/follow.txt" 2>&1 &
fpid=$!
sleep 2
k rm "$N"
wait $fpid
st=$?
[ "$st" = 0 ] && [ -s "$T/follow.txt" ] && pass logs_follow "ended with the sandbox, $(wc -l < "$T/follow.txt") lines" ||
	fail logs_follow "exit $st: $(tail -c 300 "$T/follow.txt")"

# ---- output for people ---------------------------------------------------------------------------
k ls > "$T/ls.txt"
# The columns line up: every row's second field starts where STATUS does.
col=$(head -1 "$T/ls.txt" | grep -bo STATUS | cut -d: -f1)
bad=$(awk -v c="$col" 'NR > 1 && substr($0, c + 1, 1) == " " { print }' "$T/ls.txt")
[ -n "$col" ] && [ -z "$bad" ] && grep -q "$A *running" "$T/ls.txt" && pass table_aligned "$(tr '\n' '|' < "$T/ls.txt")" ||
	fail table_aligned "$(cat "$T/ls.txt")"
grep -qE '[0-9]+[smhd] ago' "$T/ls.txt" && pass relative_times "$(grep -oE '[0-9]+[smhd] ago' "$T/ls.txt" | head -1)" ||
	fail relative_times "$(cat "$T/ls.txt")"
grep -q $'\033' "$T/ls.txt" && fail no_colour_in_pipe "escape codes in a pipe" || pass no_colour_in_pipe "none"
TERM=xterm script -qec "$KILN ls" /dev/null > "$T/tty.txt" 2>&1
grep -q $'\033\[32mrunning' "$T/tty.txt" && pass colour_on_tty "running in green" || fail colour_on_tty "$(cat -v "$T/tty.txt")"
NO_COLOR=1 TERM=xterm script -qec "$KILN ls" /dev/null > "$T/tty.txt" 2>&1
grep -q running "$T/tty.txt" && ! grep -q $'\033\[' "$T/tty.txt" && pass no_colour_env "NO_COLOR honoured" || fail no_colour_env "$(cat -v "$T/tty.txt")"
KILN_PROGRESS_AFTER_MS=1 script -qec "$KILN create minimal" /dev/null > "$T/tty.txt" 2>&1
P=$(grep -o 'sbx_[a-z0-9]*' "$T/tty.txt" | tail -1)
grep -q 'creating a sandbox' "$T/tty.txt" && pass progress_line "shown on a terminal: $(tr '\r' '\n' < "$T/tty.txt" | grep -a creating | tail -1)" ||
	fail progress_line "$(cat -v "$T/tty.txt")"
[ -n "$P" ] && k rm "$P"
k create minimal --json 2>&1 | js 'j["id"]' > "$T/id" && P=$(cat "$T/id") && [[ $P == sbx_* ]] && pass json_clean "--json output is JSON alone" ||
	fail json_clean "$(cat "$T/id")"
[ -n "$P" ] && k rm "$P"

# ---- the rest of the documented forms ----------------------------------------------------------
check templates "$(k templates | head -2 | tr '\n' '|')" sh -c "'$KILN' templates | grep -q '^minimal  *ready'"
[ "$(k hibernate "$A")" = hibernated ] && [ "$(k wake "$A" --json | js 'j["status"]')" = running ] && pass hibernate_wake "text and --json" ||
	fail hibernate_wake "$(k get "$A" | head -5)"
[ "$(k pause "$A")" = paused ] && [ "$(k ls --status paused --json | js '[s["id"] for s in j["sandboxes"]]')" = "['$A']" ] &&
	[ "$(k resume "$A" --json | js 'j["status"]')" = running ] && pass pause_resume "text, --status paused and --json" ||
	fail pause_resume "$(k get "$A" | head -5)"
out=$(k persistent "$A" on)
[ "$out" = "$A persistent on, when idle hibernate" ] && [ "$(k persistent "$A" off --json | js 'j["persistent"]')" = False ] &&
	pass persistent "$out; off" || fail persistent "'$out'"
k persistent "$A" maybe > "$T/err" 2>&1
[ $? = 2 ] && grep -q "persistent takes on or off, not 'maybe'" "$T/err" && pass persistent_bad "$(head -1 "$T/err")" ||
	fail persistent_bad "$(cat "$T/err")"
P2=$(k create minimal --persistent)
[ "$(k get "$P2" | js 'j["persistent"]')" = True ] && pass create_persistent "$P2" || fail create_persistent "'$P2'"
[ -n "$P2" ] && k rm "$P2"
S=$(k snapshot "$A")
[[ $S == snap_* ]] && k snapshots | grep -q "^$S " && pass snapshot "$S" || fail snapshot "'$S'"
B=$(k create "$S")
[ "$(k exec "$B" -- cat /tmp/named.txt)" = "from the file" ] && pass create_from_snapshot_positional "kiln create $S" ||
	fail create_from_snapshot_positional "$B"
k rm "$B" "$S"
out=$(k ttl "$A" 1234 --json)
check ttl "$(js 'j["ttl_seconds"]' <<<"$out")" [ "$(js 'j["ttl_seconds"]' <<<"$out")" = 1234 ]
k usage | grep -q '^cpu_seconds' && k usage --json | js 'j["cpu_seconds"] >= 0' | grep -q True && pass usage "text and --json" || fail usage "$(k usage)"
k get "$A" | js 'j["id"]' | grep -qx "$A" && pass get "$A" || fail get "$(k get "$A")"
k rm "$A" && pass rm "$A" || fail rm "$A"
alive kilnd_alive
