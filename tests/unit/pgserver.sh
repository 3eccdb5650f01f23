# tests/unit/pgserver.sh: sourced by the tests that need a real PostgreSQL
# (pg.sh, cluster.sh). pg_server_start DIR makes a throwaway server in DIR
# (initdb as the postgres user when run as root: initdb refuses root),
# listening only on a Unix socket there, fsync off, and sets:
#   pg_bin            the server's binaries
#   pg_as             the command prefix that runs as the server's user
#   pg_url            postgresql://kiln@/postgres?host=DIR
#   pg_start, pg_stop commands (arrays) that start and stop it again
# It returns 1 with the reason in pg_error. pg_server_remove DIR stops it
# at once and removes DIR: call it from an EXIT trap. PostgreSQL's server
# missing is an error naming the package, never a skip.

pg_server_start() {
	local dir=$1
	pg_bin=${KILN_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
	if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ] || [ ! -x "$pg_bin/pg_ctl" ]; then
		pg_error="PostgreSQL's server is not installed (no /usr/lib/postgresql/*/bin/initdb): install Debian's postgresql package (scripts/setup does)"
		return 1
	fi
	pg_as=()
	if [ "$(id -u)" = 0 ]; then
		if ! id postgres >/dev/null 2>&1; then
			pg_error="no postgres user to run the server as (Debian's postgresql package makes it)"
			return 1
		fi
		pg_as=(runuser -u postgres --)
	fi
	chmod 755 "$dir"
	[ ${#pg_as[@]} -gt 0 ] && chown postgres: "$dir"
	if ! "${pg_as[@]}" "$pg_bin/initdb" -D "$dir/data" -U kiln -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1; then
		pg_error="initdb: $(tail -3 "$dir/initdb.log" | tr '\n' ' ')"
		return 1
	fi
	pg_start=("${pg_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60
		  -o "-c listen_addresses='' -k $dir -c fsync=off -c max_connections=200" start)
	pg_stop=("${pg_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop)
	if ! "${pg_start[@]}" >/dev/null 2>&1; then
		pg_error="pg_ctl start: $(tail -3 "$dir/server.log" | tr '\n' ' ')"
		return 1
	fi
	pg_url="postgresql://kiln@/postgres?host=$dir"
}

pg_server_remove() {
	local dir=$1
	[ -d "$dir/data" ] && "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$dir"
}
