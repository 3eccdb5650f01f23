# tests/cluster/lib.sh: sourced by tests/cluster/run and bench/cluster,
# which set repo, build and dir (a fresh directory of their own) first.
# The cluster's side on this machine: a throwaway PostgreSQL (the
# cluster's store), a workspace's key and a join token, and kilnd --role
# api replicas. cl_cleanup (from the caller's EXIT trap) stops and
# removes all of it.
. "$repo/tests/unit/pgserver.sh"
kilnd=$build/kilnd
cl_pids=()

cl_cleanup() {
	local p
	for p in "${cl_pids[@]}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null; done
	pg_server_remove "$dir"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# cl_setup: the database (store), a token of any number of uses (token),
# a key of workspace cl on the team plan (key) and one of workspace
# cl-cap, whose own limits are tighter (key_cap), and one of cl-broke,
# whose credit is almost nothing (key_broke), and two with TTL rules
# (key_idle, key_abs); 1 with cl_error.
cl_setup() {
	pg_server_start "$dir" || { cl_error=$pg_error; return 1; }
	"${pg_as[@]}" "$pg_bin/createdb" -h "$dir" -U kiln kiln_cl >/dev/null 2>&1 || { cl_error=createdb; return 1; }
	store="postgresql://kiln@/kiln_cl?host=$dir&pool=8"
	mkdir -p "$dir/admin"
	token=$(cl_admin cluster token create --uses any --expires 3600 2>"$dir/token.err")
	key=$(cl_admin keys create --workspace cl 2>"$dir/key.err")
	cl_admin workspace plan cl team >/dev/null 2>&1
	# A workspace with caps of its own, which the cluster counts over
	# every host (tests/cluster/hosts.sh).
	key_cap=$(cl_admin keys create --workspace cl-cap 2>"$dir/key.err")
	cl_admin workspace plan cl-cap team '{"running": 3, "creates_per_hour": 5}' >/dev/null 2>&1
	# And one whose credit a few seconds of CPU spend (key_broke).
	key_broke=$(cl_admin keys create --workspace cl-broke 2>"$dir/key.err")
	cl_admin workspace plan cl-broke team '{"credit_microdollars": 50}' >/dev/null 2>&1
	# The TTL rules, scaled down: hibernate when idle and delete 8 s
	# later (key_idle); count from creation (key_abs).
	key_idle=$(cl_admin keys create --workspace cl-idle 2>"$dir/key.err")
	cl_admin workspace plan cl-idle team '{"idle_hibernate": 1, "hibernated_retention_seconds": 8}' >/dev/null 2>&1
	key_abs=$(cl_admin keys create --workspace cl-abs 2>"$dir/key.err")
	cl_admin workspace plan cl-abs team '{"ttl_absolute": 1}' >/dev/null 2>&1
	[[ $token == kjt_* && $key == kiln_* && $key_cap == kiln_* && $key_broke == kiln_* && $key_idle == kiln_* && $key_abs == kiln_* ]] ||
		{ cl_error="token '$token' key '$key' key_cap '$key_cap' key_broke '$key_broke' key_idle '$key_idle' key_abs '$key_abs'"; return 1; }
}

cl_admin() { "$kilnd" --data "$dir/admin" --store "$store" "$@"; }
cl_sql() { "${pg_as[@]}" "$pg_bin/psql" -h "$dir" -U kiln -d kiln_cl -At -c "$1" 2>&1; }

# cl_start_api NAME PORT [ARGS...]: a replica on 127.0.0.1:PORT; its pid
# in api_pid; 1 with cl_error when it does not answer. With cl_user set
# (a uid), it runs as that user with no capabilities at all: the API role
# needs no privilege (docs/security.md "Privilege map").
cl_start_api() {
	local name=$1 port=$2; shift 2
	local as=()
	mkdir -p "$dir/$name"
	if [ -n "${cl_user:-}" ]; then
		chown "$cl_user:$cl_user" "$dir/$name"
		as=(setpriv --reuid="$cl_user" --regid="$cl_user" --clear-groups --inh-caps=-all --bounding-set=-all)
	fi
	"${as[@]}" "$kilnd" --role api --store "$store" --data "$dir/$name" --listen "127.0.0.1:$port" "$@" \
		>> "$dir/$name.log" 2>&1 &
	api_pid=$!
	cl_pids+=($api_pid)
	local i
	for i in $(seq 1 100); do
		curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && return 0
		sleep 0.1
	done
	cl_error="API $name did not start: $(tail -3 "$dir/$name.log")"
	return 1
}

# cl_inner_api PORT GUESTPORT: the URL a command run by tests/host/run
# reaches this machine's 127.0.0.1:PORT at (forwarded as GUESTPORT with
# -g in the emulated host; with hardware KVM it runs here).
cl_hardware() { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }
cl_inner_api() { if cl_hardware; then echo "http://127.0.0.1:$1"; else echo "http://10.0.2.100:$2"; fi; }
