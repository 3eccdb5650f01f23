/*
 * database: managed PostgreSQL databases (ops/database.h).
 */
#include "ops/database.h"
#include "ops/fields.h"
#include "ops/app.h"
#include "ops/dbcert.h"
#include "ops/validate.h"
#include "net/net.h"
#include "common/err.h"
#include "common/log.h"
#include "common/periodic.h"
#include "common/randid.h"
#include "store/sbx_state.h"
#include "store/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STR_(x) #x
#define NUM(x) STR_(x)

/* What a create and PATCH share. */
const struct field ops_db_update_fields[] = {
	{ .name = "idle_seconds", .type = FIELD_INTEGER, .min = 0, .max = DB_IDLE_MAX_S,
	  .description = "Hibernated after this long without connections (0: never; default "
			 NUM(DB_IDLE_DEFAULT_S) "); the next connection wakes it." },
	{ .name = "external_access", .type = FIELD_BOOLEAN,
	  .description = "Reachable from outside kiln through a TCP port of kilnd's (external_url); default false." },
	{ .name = "backup_interval_seconds", .type = FIELD_INTEGER, .min = 0, .max = DB_BACKUP_INTERVAL_MAX,
	  .description = "A backup every this many seconds (0: none, the default; else at least 300)." },
	{ .name = "backups_kept", .type = FIELD_INTEGER, .min = 1, .max = DB_BACKUPS_KEPT_MAX,
	  .description = "The scheduled backups kept, the newest (default 7)." },
	{ .type = FIELD_END }
};

const struct field ops_db_fields[] = {
	{ .type = FIELD_INCLUDE, .items = ops_db_update_fields },
	{ .name = "name", .type = FIELD_STRING, .max = OPS_VOLUME_NAME_MAX,
	  .description = "a-z, 0-9 and '-', starting with a letter or digit; unique among the workspace's databases." },
	{ .name = "from_backup", .type = FIELD_STRING, .max = OPS_NAME_MAX,
	  .description = "A backup (snap_...) of one of the workspace's databases to restore." },
	{ .type = FIELD_END }
};

int64_t ops_db_backup_min_s = DB_BACKUP_MIN_S;
struct db_external ops_db_external = { DB_EXTERNAL_BIND, "", DB_EXTERNAL_PORT_LO, DB_EXTERNAL_PORT_HI,
				       DB_EXTERNAL_CONNS };
void (*ops_db_external_sync)(void);

static void external_sync(void)
{
	if (ops_db_external_sync)
		ops_db_external_sync();
}

/* d's external access on (a free port of the range, unless it has one)
 * or off (its port released). The listener follows (external_sync). */
static int set_external(const struct ops_caller *c, struct db_row *d, bool on)
{
	if (!on) {
		int rc = d->external_port ? store_db_set_external(c->store, d->id, 0) : 0;
		if (rc == 0 && d->external_port)
			log_info("database %s: external access off (port %lld released)", d->id,
				 (long long)d->external_port);
		d->external_port = rc == 0 ? 0 : d->external_port;
		return rc;
	}
	if (d->external_port)
		return 0;
	for (int p = ops_db_external.port_lo; p > 0 && p <= ops_db_external.port_hi; p++) {
		int rc = store_db_set_external(c->store, d->id, p);
		if (rc == -EEXIST)
			continue;	/* another database's */
		if (rc < 0)
			return rc;
		d->external_port = p;
		log_info("database %s: external access: port %d given", d->id, p);
		return 0;
	}
	return errf(EAGAIN, "no free port for external access: kilnd's ports %d-%d are all taken "
		    "(kilnd --db-external-ports)", ops_db_external.port_lo, ops_db_external.port_hi);
}

bool ops_db_name_ok(const char *s)
{
	return ops_volume_name_ok(s);	/* the same rule: a DNS-safe label */
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the guest side ------------------------------------------------------- */

/* The new password in the server, through its local socket as the
 * postgres user (peer authentication). The password travels in the
 * command's environment and reaches psql on its stdin (printf is the
 * shell's own), never an argv a process list shows, nor a log. Tried
 * again while the server still starts (it listens before it accepts). */
static const char set_password[] =
	"i=0\n"
	"until printf \"ALTER ROLE " DB_USER " PASSWORD '%s';\\n\" \"$KILN_DB_PASSWORD\" |\n"
	"    runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 >/dev/null 2>/tmp/kiln-db.err; do\n"
	"  i=$((i + 1)); [ $i -ge 120 ] && { tail -c 400 /tmp/kiln-db.err >&2; exit 1; }; sleep 0.5\n"
	"done\n"
	"rm -f /tmp/kiln-db.err\n";

/* script run by /bin/sh in the sandbox, with env (NAME=VALUE, NULL-ended,
 * or NULL) in its environment; what: what it does, for the error. out
 * (or NULL): the first out_max bytes of its stdout (*out_n of them). */
static int guest_sh_out(const struct ops_caller *c, const char *sandbox, const char *script,
			const char *const *env_extra, const char *what, char *out, size_t out_max, size_t *out_n)
{
	const char *env[8] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" };
	for (int i = 0; env_extra && env_extra[i] && i < 6; i++)
		env[i + 1] = env_extra[i];
	const char *argv[] = { "/bin/sh", "-c", script, "kiln-db", NULL };
	/* The first 400 bytes of the script's stderr, for the error. */
	struct hostif_run run = { .argv = argv, .env = env, .timeout_ms = 90000, .err_max = 400,
				  .out_max = out ? out_max : 0 };
	int rc = hostif_run(c->hostif, c->workspace, sandbox, &run);
	char err[420];
	snprintf(err, sizeof err, "%.*s", (int)run.err.len, run.err.len ? run.err.data : "");
	if (out) {
		*out_n = rc == 0 && run.out.len <= out_max ? run.out.len : 0;
		if (*out_n)
			memcpy(out, run.out.data, *out_n);
	}
	hostif_run_free(&run);
	if (rc < 0) {
		char why[300];	/* errf must not read the buffer it writes */
		snprintf(why, sizeof why, "%s", errmsg());
		return errf(-rc, "sandbox %s: %s: %s", sandbox, what, why);
	}
	for (char *p = err; *p; p++)
		if ((unsigned char)*p < ' ')
			*p = ' ';
	return run.code == 0 ? 0 : errf(EIO, "the database's server: %s failed (exit %d): %s", what, run.code, err);
}

static int guest_sh(const struct ops_caller *c, const char *sandbox, const char *script, const char *env_extra,
		    const char *what)
{
	const char *env[] = { env_extra, NULL };
	return guest_sh_out(c, sandbox, script, env, what, NULL, 0, NULL);
}

static int guest_password(const struct ops_caller *c, const char *sandbox, const char *password)
{
	char pw[64];
	snprintf(pw, sizeof pw, "KILN_DB_PASSWORD=%s", password);
	int rc = guest_sh(c, sandbox, set_password, pw, "setting the password");
	explicit_bzero(pw, sizeof pw);
	return rc;
}

/* The server takes queries: after a crash it listens while it replays its
 * WAL, and refuses connections until that is done. */
static const char await_queries[] =
	"i=0\n"
	"until runuser -u postgres -- psql -X -q -c 'SELECT 1' >/dev/null 2>/tmp/kiln-db.err; do\n"
	"  i=$((i + 1)); [ $i -ge 170 ] && { tail -c 400 /tmp/kiln-db.err >&2; exit 1; }; sleep 0.5\n"
	"done\n"
	"rm -f /tmp/kiln-db.err\n";

/* The server's own key and certificate (docs/databases.md "TLS"), made
 * in its guest: a new P-256 key (fast in an emulated guest too, where
 * RSA's search for primes is not) that never leaves it, a certificate
 * signed by that key for the database's id (CN) and its addresses
 * (KILN_DB_SAN), and the server told to use them (ALTER SYSTEM, which
 * is after the template's `ssl = off` in the configuration's order;
 * reloaded, so no connection is cut). It then checks that the server
 * presents that certificate on 127.0.0.1:5432 (a reload takes effect a
 * moment later) and prints it. Run at create, at a restore (a restored
 * database gets a key of its own, not its backup's), and for a database
 * made before TLS when its external access is turned on. The key and
 * certificate are on the disk (fsync'ed, then renamed, the directory
 * fsync'ed) before ALTER SYSTEM, which PostgreSQL makes durable: else a
 * VM killed within the guest's writeback delay boots again with ssl =
 * on and an empty server.crt, and the server never starts ("no start
 * line"; tests/e2e/90 db_vm_restarted saw it). Debian's
 * snakeoil key, which every database would share, is deleted from the
 * image when it is built (images/postgres-setup). */
#define DB_TLS_DIR "/var/lib/postgresql/kiln-tls"
static const char make_tls[] =
	"d=" DB_TLS_DIR "\n"
	"umask 077\n"
	"mkdir -p $d\n"
	"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 -sha256 \\\n"
	"    -subj \"/CN=$KILN_DB_ID\" -addext \"subjectAltName=$KILN_DB_SAN\" \\\n"
	"    -keyout $d/server.key.new -out $d/server.crt.new 2>/tmp/kiln-db.err ||\n"
	"  { tail -c 400 /tmp/kiln-db.err >&2; exit 1; }\n"
	"chown postgres:postgres $d $d/server.key.new $d/server.crt.new\n"
	"sync $d/server.key.new $d/server.crt.new &&\n"
	"  mv -f $d/server.key.new $d/server.key && mv -f $d/server.crt.new $d/server.crt && sync $d || exit 1\n"
	"runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -c \"ALTER SYSTEM SET ssl_cert_file = '$d/server.crt'\" \\\n"
	"    -c \"ALTER SYSTEM SET ssl_key_file = '$d/server.key'\" -c 'ALTER SYSTEM SET ssl = on' \\\n"
	"    -c 'SELECT pg_reload_conf()' >/dev/null 2>/tmp/kiln-db.err || { tail -c 400 /tmp/kiln-db.err >&2; exit 1; }\n"
	"want=$(openssl x509 -noout -fingerprint -sha256 -in $d/server.crt)\n"
	"i=0\n"
	"until [ \"$(openssl s_client -starttls postgres -connect 127.0.0.1:5432 </dev/null 2>/dev/null |\n"
	"    openssl x509 -noout -fingerprint -sha256 2>/dev/null)\" = \"$want\" ]; do\n"
	"  i=$((i + 1)); [ $i -ge 60 ] && { echo 'the server does not present its new certificate' >&2; exit 1; }\n"
	"  sleep 0.25\n"
	"done\n"
	"rm -f /tmp/kiln-db.err\n"
	"cat $d/server.crt\n";

/* The address of sandbox's network namespace (its veth's end), which its
 * workspace's sandboxes connect to; "" when it has none or is gone. */
static void sandbox_address(const struct ops_caller *c, const char *sandbox, char host[16], const char **status)
{
	struct sbx_row row;
	host[0] = 0;
	if (!sandbox[0] || hostif_get(c->hostif, c->workspace, sandbox, false, &row) < 0) {
		if (status)
			*status = sandbox[0] ? "lost" : "creating";
		return;
	}
	if (status)
		*status = sbx_state_name(row.state);
	if (row.net_slot > 0) {
		struct net_config nc;
		struct net_slot s;
		net_default_config(&nc);
		net_slot_info(&nc, (uint32_t)row.net_slot, &s);
		snprintf(host, 16, "%s", s.ns_ip);
	}
	sbx_row_clear(&row);
}

static const char *external_host(void);

/* Whether s may go in a certificate's subjectAltName as a DNS name. */
static bool dns_name_ok(const char *s)
{
	size_t n = strlen(s);
	return n && n < 254 && !s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")];
}

/* A new key and certificate in d's server (make_tls): the certificate,
 * checked (ops/dbcert.h), into pem. It names the database's address
 * and the host external URLs name, so sslmode=verify-full works with
 * either while they stay what they were. */
static int guest_tls(const struct ops_caller *c, const char *id, const char *sandbox, char pem[DBCERT_PEM_MAX])
{
	char host[16], idv[ID_MAX + 16], san[400];
	sandbox_address(c, sandbox, host, NULL);
	const char *eh = external_host();
	struct in6_addr a;
	bool ip = inet_pton(AF_INET, eh, &a) == 1 || inet_pton(AF_INET6, eh, &a) == 1;
	int k = snprintf(san, sizeof san, "KILN_DB_SAN=IP:127.0.0.1");
	if (host[0])
		k += snprintf(san + k, sizeof san - (size_t)k, ",IP:%s", host);
	if ((ip || dns_name_ok(eh)) && strcmp(eh, "127.0.0.1") && strcmp(eh, host))
		snprintf(san + k, sizeof san - (size_t)k, ",%s:%s", ip ? "IP" : "DNS", eh);
	snprintf(idv, sizeof idv, "KILN_DB_ID=%s", id);
	const char *env[] = { idv, san, NULL };
	char buf[DBCERT_PEM_MAX];
	size_t n = 0;
	int64_t t0 = mono_ms();
	int rc = guest_sh_out(c, sandbox, make_tls, env, "making its TLS key and certificate", buf, sizeof buf, &n);
	rc = rc ?: dbcert_take(buf, n, pem);
	if (rc == 0)
		log_info("database %s: its server's own TLS key and certificate made in its guest, in use (%.2f s)", id,
			 (double)(mono_ms() - t0) / 1000);
	return rc;
}

static int new_password(char password[DB_PASSWORD_LEN + 1])
{
	return randid_make(password, DB_PASSWORD_LEN + 1, "", DB_PASSWORD_LEN);
}

/* ---- operations ------------------------------------------------------------ */

/* A sandbox for the database, its server up, password set and its own
 * TLS key made (pem: its certificate; a restored one gets a new key, so
 * no two databases share one). */
static int spawn(const struct ops_caller *c, const struct db_row *d, const char *password, char sandbox[ID_MAX],
		 char pem[DBCERT_PEM_MAX])
{
	json_t *args = json_pack("{s:b,s:i,s:{s:s},s:[i]}", "persistent", 1, "ttl_seconds", 0, "metadata",
				 "kiln_database", d->id, "workspace_ports", DB_PORT);
	if (!args)
		return errf(ENOMEM, "out of memory");
	/* A backup is a whole VM: its server runs (under its supervisor)
	 * when the sandbox does. */
	if (d->from_backup[0])
		json_object_set_new(args, "from_snapshot", json_string(d->from_backup));
	else
		json_object_set_new(args, "template", json_string(DB_TEMPLATE));
	struct sbx_row row;
	int rc = ops_create_service(c, args, &row);
	if (rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -EPROTO || rc == -EPIPE) {
		log_warn("database %s: its sandbox failed to start (%s): one more try", d->id, errmsg());
		rc = ops_create_service(c, args, &row);
	}
	json_decref(args);
	if (rc < 0)
		return rc;
	snprintf(sandbox, ID_MAX, "%s", row.id);
	sbx_row_clear(&row);
	if (!d->from_backup[0])
		rc = ops_app_supervise(c, sandbox, DB_COMMAND, "always", mono_ms() + DB_READY_S * 1000);
	rc = rc ?: ops_app_wait_listening(c, sandbox, DB_PORT, DB_READY_S);
	rc = rc ?: guest_password(c, sandbox, password);
	rc = rc ?: guest_tls(c, d->id, sandbox, pem);
	if (rc < 0) {
		char why[1024];
		snprintf(why, sizeof why, "%s", errmsg());
		if (hostif_delete(c->hostif, c->workspace, sandbox) < 0)
			log_warn("database %s: deleting sandbox %s that did not come up: %s", d->id, sandbox, errmsg());
		sandbox[0] = 0;
		return errf(-rc, "%s", why);
	}
	return 0;
}

/* The schedule fields of args over d's (a new interval starts now). */
static int parse_schedule(const json_t *args, struct db_row *d)
{
	/* Checked against ops_db_update_fields already (fields_check). */
	int64_t iv = field_int(args, "backup_interval_seconds", -1), kept = field_int(args, "backups_kept", -1);
	if (iv > 0 && iv < ops_db_backup_min_s)
		return errf(EINVAL, "field 'backup_interval_seconds' is 0 (no scheduled backups) or at least %lld, not %lld",
			    (long long)ops_db_backup_min_s, (long long)iv);
	if (iv >= 0) {
		d->backup_interval_s = iv;
		d->next_backup_ms = iv ? wall_ms() + iv * 1000 : 0;
	}
	if (kept > 0)
		d->backups_kept = kept;
	if (!d->backups_kept)
		d->backups_kept = DB_BACKUPS_KEPT_DEFAULT;
	return 0;
}

int ops_db_create(const struct ops_caller *c, const json_t *args, struct db_row *out,
		  char password[DB_PASSWORD_LEN + 1])
{
	const char *name = NULL, *backup = NULL;
	int64_t idle = -1;
	bool external = false;
	int rc = ops_fields_check(c, ops_db_fields, args, NULL);
	if (rc == 0) {
		idle = field_int(args, "idle_seconds", -1);
		external = field_bool(args, "external_access", false);
		name = field_str(args, "name", NULL);
		backup = field_str(args, "from_backup", NULL);
	}
	if (rc == 0 && name && !ops_db_name_ok(name))
		rc = errf(EINVAL, "field 'name' of a database is [a-z0-9][a-z0-9-]* (at most %d characters), not '%.80s'",
			  OPS_VOLUME_NAME_MAX, name);
	struct db_row *d = out;
	memset(d, 0, sizeof *d);
	rc = rc ?: parse_schedule(args, d);
	if (rc < 0)
		return rc;
	if (!c->store)
		return errf(ENOTSUP, "databases need the store");
	struct db_backup_row b;
	if (backup && (rc = store_db_backup_load(c->store, c->workspace, backup, &b)) < 0)
		return rc;
	if ((rc = make_id(d->id, "db_")) < 0 || (rc = new_password(password)) < 0)
		return rc;
	snprintf(d->workspace, sizeof d->workspace, "%s", c->workspace);
	snprintf(d->name, sizeof d->name, "%s", name ? name : d->id + 3);
	snprintf(d->from_backup, sizeof d->from_backup, "%s", backup ? backup : "");
	d->created_ms = wall_ms();
	/* The name is taken first, so two creates of one name do not both
	 * make a sandbox. */
	if ((rc = store_db_insert(c->store, d)) < 0)
		return rc;
	/* Its external port is taken before its sandbox is made: none free
	 * is a 503 at once (the listener opens once it has a sandbox). */
	char pem[DBCERT_PEM_MAX] = "";
	rc = external ? set_external(c, d, true) : 0;
	rc = rc ?: spawn(c, d, password, d->sandbox, pem);
	rc = rc ?: store_db_set_tls(c->store, d->id, pem);
	if (rc == 0 && d->backup_interval_s)
		rc = store_db_set_schedule(c->store, d);
	if (rc == 0 && idle >= 0)
		rc = store_db_set_idle(c->store, d->id, idle);
	if (rc == 0 && d->sandbox[0] && (rc = store_db_set_sandbox(c->store, d->id, d->sandbox)) < 0)
		hostif_delete(c->hostif, c->workspace, d->sandbox);
	else if (rc < 0 && d->sandbox[0])
		hostif_delete(c->hostif, c->workspace, d->sandbox);
	if (rc < 0) {
		char why[1024];
		snprintf(why, sizeof why, "%s", errmsg());
		if (d->external_port && store_db_set_external(c->store, d->id, 0) < 0)
			log_warn("database %s: releasing port %lld of a create that failed: %s", d->id,
				 (long long)d->external_port, errmsg());
		store_db_delete(c->store, c->workspace, d->id);
		explicit_bzero(password, DB_PASSWORD_LEN + 1);
		return errf(-rc, "%s", why);
	}
	log_info("database %s (%s): sandbox %s%s%s", d->id, d->name, d->sandbox, backup ? ", restored from " : "",
		 backup ? backup : "");
	if (d->external_port)
		external_sync();
	return 0;
}

int ops_db_get(const struct ops_caller *c, const char *key, struct db_row *out)
{
	bool by_id = v_is_id(key, "db_");
	if (!c->store || (!by_id && !ops_db_name_ok(key)))
		return errf(ENOENT, "database %.64s not found", key);
	return store_db_load(c->store, c->workspace, key, !by_id, out);
}

struct rows {
	struct db_row *r;
	int n, cap;
};

static int keep_row(void *ctx, const struct db_row *r)
{
	struct rows *l = ctx;
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 16;
		struct db_row *m = realloc(l->r, (size_t)cap * sizeof *m);
		if (!m)
			return errf(ENOMEM, "out of memory");
		l->r = m, l->cap = cap;
	}
	l->r[l->n++] = *r;
	return 0;
}

int ops_db_each(const struct ops_caller *c, store_db_fn *fn, void *ctx)
{
	/* Read whole first: fn may use the store (a database's JSON reads its
	 * events), which a callback of the store's must not. */
	struct rows l = { NULL, 0, 0 };
	int rc = c->store ? store_db_each(c->store, c->workspace, keep_row, &l) : 0;
	for (int i = 0; rc >= 0 && i < l.n; i++)
		rc = fn(ctx, &l.r[i]);
	free(l.r);
	return rc < 0 ? rc : 0;
}

int ops_db_delete(const struct ops_caller *c, const char *key)
{
	struct db_row d;
	int rc = ops_db_get(c, key, &d);
	if (rc < 0)
		return rc;
	/* Its port closed, and the connections through it cut, first. */
	if (d.external_port) {
		if ((rc = set_external(c, &d, false)) < 0)
			return rc;
		external_sync();
	}
	if (d.sandbox[0] && (rc = hostif_delete(c->hostif, c->workspace, d.sandbox)) < 0 && rc != -ENOENT)
		return rc;
	rc = store_db_delete(c->store, c->workspace, d.id);
	d.backup_interval_s = 0;
	if (rc == 0 && store_db_set_schedule(c->store, &d) < 0)
		log_warn("database %s: removing its backup schedule: %s", d.id, errmsg());
	if (rc == 0)
		log_info("database %s (%s): deleted with sandbox %s", d.id, d.name, d.sandbox);
	return rc;
}

/* The database's sandbox, which must be there. */
static int its_sandbox(const struct db_row *d)
{
	return d->sandbox[0] ? 0 : errf(EBUSY, "database %s has no server now (it is being made)", d->id);
}

int ops_db_reset_password(const struct ops_caller *c, const char *key, struct db_row *out,
			  char password[DB_PASSWORD_LEN + 1])
{
	int rc = ops_db_get(c, key, out);
	rc = rc ?: its_sandbox(out);
	rc = rc ?: new_password(password);
	rc = rc ?: guest_password(c, out->sandbox, password);
	if (rc < 0)
		explicit_bzero(password, DB_PASSWORD_LEN + 1);
	return rc;
}

/* d's server has its own key and certificate (made now if it has none:
 * a database made before TLS; this wakes it). */
static int ensure_tls(const struct ops_caller *c, const struct db_row *d)
{
	char pem[DBCERT_PEM_MAX];
	int rc = store_db_tls(c->store, d->id, pem, sizeof pem);
	if (rc < 0 || pem[0])
		return rc;
	rc = its_sandbox(d);
	rc = rc ?: guest_tls(c, d->id, d->sandbox, pem);
	return rc ?: store_db_set_tls(c->store, d->id, pem);
}

int ops_db_update(const struct ops_caller *c, const char *key, const json_t *args, struct db_row *out)
{
	int64_t idle = -1;
	bool external = false;
	int rc = ops_fields_check(c, ops_db_update_fields, args, NULL);
	if (rc == 0) {
		idle = field_int(args, "idle_seconds", -1);
		external = field_bool(args, "external_access", false);
	}
	rc = rc ?: ops_db_get(c, key, out);
	rc = rc ?: parse_schedule(args, out);
	rc = rc ?: store_db_set_schedule(c->store, out);
	if (rc == 0 && idle >= 0)
		rc = store_db_set_idle(c->store, out->id, idle);
	/* A database made before TLS gets its key before it is opened to
	 * outside (the external port takes TLS connections only). */
	if (rc == 0 && external && !out->external_port)
		rc = ensure_tls(c, out);
	if (rc == 0 && json_object_get(args, "external_access")) {
		rc = set_external(c, out, external);
		external_sync();
	}
	if (rc == 0)
		log_info("database %s: backups every %lld s, %lld kept%s", out->id, (long long)out->backup_interval_s,
			 (long long)out->backups_kept, idle > 0 ? "; hibernated when idle" : idle == 0 ? "; never hibernated" : "");
	return rc;
}

static int backup_kind(const struct ops_caller *c, const struct db_row *in, const char *kind,
		       struct db_backup_row *out)
{
	int rc = its_sandbox(in);
	if (rc < 0)
		return rc;
	memset(out, 0, sizeof *out);
	snprintf(out->kind, sizeof out->kind, "%s", kind);
	if ((rc = ops_snapshot(c, in->sandbox, out->id)) < 0)
		return rc;
	snprintf(out->database, sizeof out->database, "%s", in->id);
	snprintf(out->workspace, sizeof out->workspace, "%s", c->workspace);
	out->created_ms = wall_ms();
	if ((rc = store_db_backup_insert(c->store, out)) < 0) {
		hostif_snapshot_delete(c->hostif, c->workspace, out->id);
		return rc;
	}
	log_info("database %s: backup %s (%s)", in->id, out->id, kind);
	return 0;
}

int ops_db_backup(const struct ops_caller *c, const char *key, struct db_backup_row *out)
{
	struct db_row d;
	int rc = ops_db_get(c, key, &d);
	return rc < 0 ? rc : backup_kind(c, &d, "manual", out);
}

static int backup_one(void *ctx, const struct db_backup_row *b)
{
	json_t *j = ops_db_backup_json(b);
	return j && json_array_append_new(ctx, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

int ops_db_backups(const struct ops_caller *c, const char *key, json_t **out)
{
	struct db_row d;
	int rc = ops_db_get(c, key, &d);
	if (rc < 0)
		return rc;
	json_t *a = json_array();
	if (!a)
		return errf(ENOMEM, "out of memory");
	if ((rc = store_db_backup_each(c->store, c->workspace, d.id, backup_one, a)) < 0) {
		json_decref(a);
		return rc;
	}
	*out = a;
	return 0;
}

json_t *ops_db_backup_json(const struct db_backup_row *b)
{
	return json_pack("{s:s,s:s,s:s,s:I}", "id", b->id, "database_id", b->database, "kind",
			 b->kind[0] ? b->kind : "manual", "created_ms", (json_int_t)b->created_ms);
}

/* {events: [{ts_ms, kind, text}]} and vm_restarts, the restarts among them. */
struct db_events {
	json_t *a;
	json_int_t restarts;
};

static int event_one(void *ctx, int64_t ts_ms, const char *kind, const char *text)
{
	struct db_events *e = ctx;
	if (!strcmp(kind, "restart"))
		e->restarts++;
	json_t *j = json_pack("{s:I,s:s,s:s}", "ts_ms", (json_int_t)ts_ms, "kind", kind, "text", text);
	return j && json_array_append_new(e->a, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

/* The host external URLs name: --db-external-host, else the bind
 * address, else (bound to every address) this machine's name. */
static const char *external_host(void)
{
	static char name[256];
	const char *b = ops_db_external.bind;
	if (ops_db_external.host[0])
		return ops_db_external.host;
	if (strcmp(b, "0.0.0.0") && strcmp(b, "::"))
		return b;
	if (!name[0] && gethostname(name, sizeof name - 1) < 0)
		snprintf(name, sizeof name, "%s", b);
	return name;
}

json_t *ops_db_json(const struct ops_caller *c, const struct db_row *d, const char *password)
{
	char host[16] = "";
	const char *status = "creating";
	sandbox_address(c, d->sandbox, host, &status);
	char url[600];
	snprintf(url, sizeof url, "postgresql://%s%s%s@%s:%d/%s", DB_USER, password ? ":" : "", password ? password : "",
		 host, DB_PORT, DB_DBNAME);
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:s,s:I}", "id", d->id, "name", d->name, "status",
			      status, "sandbox_id", d->sandbox, "host", host, "port", DB_PORT, "user", DB_USER,
			      "database", DB_DBNAME, "url", url, "created_ms", (json_int_t)d->created_ms);
	if (j) {
		json_object_set_new(j, "from_backup", d->from_backup[0] ? json_string(d->from_backup) : json_null());
		if (password)
			json_object_set_new(j, "password", json_string(password));
		struct db_events e = { json_array(), 0 };
		if (e.a && c->store && store_db_events(c->store, d->id, event_one, &e) < 0)
			log_warn("database %s: its events: %s", d->id, errmsg());
		json_object_set_new(j, "vm_restarts", json_integer(e.restarts));
		json_object_set_new(j, "backup_interval_seconds", json_integer(d->backup_interval_s));
		json_object_set_new(j, "backups_kept", json_integer(d->backups_kept ? d->backups_kept
										 : DB_BACKUPS_KEPT_DEFAULT));
		json_object_set_new(j, "next_backup_ms", d->backup_interval_s ? json_integer(d->next_backup_ms)
									: json_null());
		json_object_set_new(j, "events", e.a ? e.a : json_array());
		int64_t idle = DB_IDLE_DEFAULT_S;
		if (c->store && store_db_idle(c->store, d->id, DB_IDLE_DEFAULT_S, &idle) < 0)
			log_warn("database %s: its idle period: %s", d->id, errmsg());
		json_object_set_new(j, "idle_seconds", json_integer(idle));
		/* Its server's certificate (TLS: its own key, made in its
		 * guest), which a client verifies it by. */
		char pem[DBCERT_PEM_MAX] = "", sha[DBCERT_SHA256_LEN] = "";
		if (c->store && store_db_tls(c->store, d->id, pem, sizeof pem) < 0)
			log_warn("database %s: its certificate: %s", d->id, errmsg());
		if (pem[0] && dbcert_sha256(pem, sha) < 0) {
			log_warn("database %s: its certificate: %s", d->id, errmsg());
			pem[0] = 0;
		}
		json_object_set_new(j, "tls_certificate", pem[0] ? json_string(pem) : json_null());
		json_object_set_new(j, "tls_certificate_sha256", sha[0] ? json_string(sha) : json_null());
		/* From outside: through kilnd's port (ops_db_external), TLS
		 * only, the server verified by its certificate as the only
		 * root (saved as ID.crt: docs/databases.md "TLS"). */
		bool ext = d->external_port > 0;
		const char *eh = external_host();
		bool v6 = strchr(eh, ':') != NULL;	/* an IPv6 address, in brackets in a URL */
		int k = snprintf(url, sizeof url, "postgresql://%s%s%s@%s%s%s:%lld/%s", DB_USER, password ? ":" : "",
				 password ? password : "", v6 ? "[" : "", eh, v6 ? "]" : "",
				 (long long)d->external_port, DB_DBNAME);
		if (pem[0] && k > 0 && (size_t)k < sizeof url)
			snprintf(url + k, sizeof url - (size_t)k, "?sslmode=verify-ca&sslrootcert=%s.crt", d->id);
		json_object_set_new(j, "external_access", json_boolean(ext));
		json_object_set_new(j, "external_host", ext ? json_string(eh) : json_null());
		json_object_set_new(j, "external_port", ext ? json_integer(d->external_port) : json_null());
		json_object_set_new(j, "external_url", ext ? json_string(url) : json_null());
	}
	explicit_bzero(url, sizeof url);
	return j;
}

/* ---- the watch ---------------------------------------------------------------
 * A database's VM that died (its VMM killed, its guest crashed) is started
 * again: its sandbox is persistent, so the host kept its disk and its
 * address (host.h: a failed persistent sandbox's wake is a cold boot of
 * its disk). PostgreSQL finds its cluster as after a power cut and
 * replays its WAL: every transaction committed before is there (a commit
 * returns once its WAL is fsynced, and the VMM's writes are in the host's
 * page cache by then). The server is started again under its supervisor,
 * and the password is the one set last (it is in the cluster's catalog). */

#define DB_WATCH_MAX 256		/* databases looked at per pass */
#define DB_RETRY_MS 10000		/* after a restart that failed */

static struct {
	struct store *store;
	struct hostif *hostif;
	const struct plans *plans;
	struct periodic thread;
	struct { char id[ID_MAX]; int64_t after_ms; } retry[32];	/* failed restarts, by database */
	/* When each running database last had a connection (or was seen
	 * to start running): the idle clock. */
	struct { char id[ID_MAX]; int64_t busy_ms, checked_ms; bool running, seen; } idle[DB_WATCH_MAX];
} dw;

struct db_list {
	struct db_row *r;
	int n;
};

static int note_db(void *ctx, const struct db_row *r)
{
	struct db_list *l = ctx;
	if (l->n >= DB_WATCH_MAX)
		return 1;
	l->r[l->n++] = *r;
	return 0;
}

/* A restart that failed is tried again DB_RETRY_MS later, not each pass. */
static int retry_slot(const char *id)
{
	for (int i = 0; i < (int)(sizeof dw.retry / sizeof dw.retry[0]); i++)
		if (!strcmp(dw.retry[i].id, id))
			return i;
	return -1;
}

static bool backing_off(const char *id)
{
	int i = retry_slot(id);
	return i >= 0 && mono_ms() < dw.retry[i].after_ms;
}

static void note_restart(const char *id, bool failed)
{
	int i = retry_slot(id);
	if (!failed) {
		if (i >= 0)
			dw.retry[i].id[0] = 0;
		return;
	}
	for (int j = 0; i < 0 && j < (int)(sizeof dw.retry / sizeof dw.retry[0]); j++)
		if (!dw.retry[j].id[0] || dw.retry[j].after_ms < mono_ms())
			i = j;
	if (i >= 0) {
		snprintf(dw.retry[i].id, ID_MAX, "%s", id);
		dw.retry[i].after_ms = mono_ms() + DB_RETRY_MS;
	}
}


static void db_event(const char *id, const char *kind, const char *text)
{
	log_info("database %s: %s", id, text);
	if (store_db_event(dw.store, id, kind, text) < 0)
		log_warn("database %s: its event was not kept: %s", id, errmsg());
}

/* The scheduled backups of d past its backups_kept, oldest first, gone. */
struct scheduled {
	struct db_backup_row b[64];
	int n, total;
};

static int note_scheduled(void *ctx, const struct db_backup_row *b)
{
	struct scheduled *s = ctx;
	if (strcmp(b->kind, "scheduled") != 0)
		return 0;
	if (s->n < (int)(sizeof s->b / sizeof s->b[0]))
		s->b[s->n++] = *b;
	s->total++;
	return 0;
}

static void prune(const struct ops_caller *c, const struct db_row *d)
{
	static struct scheduled s;	/* one watch thread */
	s.n = s.total = 0;
	if (store_db_backup_each(dw.store, d->workspace, d->id, note_scheduled, &s) < 0) {
		log_warn("database %s: its backups: %s", d->id, errmsg());
		return;
	}
	for (int i = 0; i < s.n && s.total - i > d->backups_kept; i++) {
		int rc = hostif_snapshot_delete(c->hostif, d->workspace, s.b[i].id);
		if (rc < 0 && rc != -ENOENT) {
			log_warn("database %s: deleting backup %s: %s", d->id, s.b[i].id, errmsg());
			continue;
		}
		if (store_db_backup_delete(dw.store, s.b[i].id) < 0)
			log_warn("database %s: forgetting backup %s: %s", d->id, s.b[i].id, errmsg());
		else
			log_info("database %s: scheduled backup %s deleted (%lld kept)", d->id, s.b[i].id,
				 (long long)d->backups_kept);
	}
}

/* A scheduled backup when one is due, then the oldest past backups_kept
 * deleted. The next is due an interval later whether this one worked or
 * not (a failed one is an event). */
static void backup_due(const struct ops_caller *c, const struct db_row *d)
{
	int64_t now = wall_ms();
	if (!d->backup_interval_s || now < d->next_backup_ms)
		return;
	struct db_row n = *d;
	n.next_backup_ms = now + d->backup_interval_s * 1000;
	if (store_db_set_schedule(dw.store, &n) < 0) {
		log_warn("database %s: its backup schedule: %s", d->id, errmsg());
		return;
	}
	struct db_backup_row b;
	if (backup_kind(c, d, "scheduled", &b) < 0) {
		char text[600];
		snprintf(text, sizeof text, "a scheduled backup failed: %s", errmsg());
		db_event(d->id, "backup_failed", text);
		return;
	}
	prune(c, d);
}

/* Its established TCP connections on DB_PORT (any state but listening
 * and time-wait), as the guest's kernel has them: -1 if not known. */
static const char count_connections[] =
	"cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | "
	"awk '$2 ~ /:1538$/ && $4 != \"0A\" && $4 != \"06\" { n++ } END { print n + 0 }'\n";

static int connections(const struct ops_caller *c, const char *sandbox)
{
	const char *argv[] = { "/bin/sh", "-c", count_connections, "kiln-db", NULL };
	struct hostif_run run = { .argv = argv, .timeout_ms = 10000, .out_max = 32 };
	int rc = hostif_run(c->hostif, c->workspace, sandbox, &run);
	int n = -1;
	if (rc == 0 && run.code == 0 && run.out.len) {
		char buf[40];
		snprintf(buf, sizeof buf, "%.*s", (int)run.out.len, run.out.data);
		n = atoi(buf);
	}
	hostif_run_free(&run);
	return n;
}

/* The idle clock's slot of database id (a free one if it has none). */
static int idle_slot(const char *id)
{
	int free_at = -1;
	for (int i = 0; i < DB_WATCH_MAX; i++) {
		if (!strcmp(dw.idle[i].id, id)) {
			dw.idle[i].seen = true;
			return i;
		}
		if (free_at < 0 && !dw.idle[i].id[0])
			free_at = i;
	}
	if (free_at >= 0) {
		snprintf(dw.idle[free_at].id, ID_MAX, "%s", id);
		dw.idle[free_at].running = false;
		dw.idle[free_at].seen = true;
	}
	return free_at;
}

/* A running database without connections for its idle period is
 * hibernated (memory and all, as a sandbox is); the host wakes it on
 * the next connection to its port (host/portwake.c), and any API use
 * that needs its guest wakes it too. The clock starts over whenever it
 * was not running at the last look. */
static void idle_check(const struct ops_caller *c, const struct db_row *d, bool running)
{
	int i = idle_slot(d->id);
	if (i < 0)
		return;
	int64_t now = mono_ms();
	bool was = dw.idle[i].running;
	dw.idle[i].running = running;
	if (!running)
		return;
	if (!was)
		dw.idle[i].busy_ms = now;
	int64_t idle;
	if (store_db_idle(dw.store, d->id, DB_IDLE_DEFAULT_S, &idle) < 0 || idle <= 0)
		return;
	/* Its connections are counted a few times an idle period (at most
	 * every 30 s), and when the period is up. */
	int64_t every = idle * 250 < 30000 ? idle * 250 : 30000;
	if (now - dw.idle[i].checked_ms < every && now - dw.idle[i].busy_ms < idle * 1000)
		return;
	dw.idle[i].checked_ms = now;
	int n = connections(c, d->sandbox);
	if (n != 0) {		/* in use, or not known: not idle */
		dw.idle[i].busy_ms = now;
		return;
	}
	if (now - dw.idle[i].busy_ms < idle * 1000)
		return;
	int rc = hostif_hibernate(c->hostif, d->workspace, d->sandbox, false, NULL);
	if (rc < 0) {
		log_warn("database %s: hibernating it: %s", d->id, errmsg());
		dw.idle[i].busy_ms = now;	/* tried again an idle period later */
		return;
	}
	dw.idle[i].running = false;
	char text[200];
	snprintf(text, sizeof text, "no connections for %lld s: hibernated (the next connection wakes it)",
		 (long long)idle);
	db_event(d->id, "hibernated", text);
}

static void db_look_at(const struct db_row *d)
{
	if (!d->sandbox[0] || backing_off(d->id))
		return;
	struct ops_caller c = { .hostif = dw.hostif, .store = dw.store, .plans = dw.plans,
				.workspace = d->workspace };
	struct sbx_row row;
	if (hostif_get(c.hostif, d->workspace, d->sandbox, false, &row) < 0)
		return;		/* gone, or its host does not answer: its status says so */
	bool failed = row.state == SBX_FAILED, running = row.state == SBX_RUNNING;
	char why[300];
	snprintf(why, sizeof why, "%s", row.error[0] ? row.error : "its VM ended");
	sbx_row_clear(&row);
	if (running)
		backup_due(&c, d);
	idle_check(&c, d, running);
	if (!failed)
		return;
	int64_t t0 = mono_ms();
	memset(&row, 0, sizeof row);
	int rc = hostif_wake(c.hostif, d->workspace, d->sandbox, &row);
	sbx_row_clear(&row);
	int64_t t1 = mono_ms();
	rc = rc ?: ops_app_supervise(&c, d->sandbox, DB_COMMAND, "always", mono_ms() + DB_READY_S * 1000);
	rc = rc ?: ops_app_wait_listening(&c, d->sandbox, DB_PORT, DB_READY_S);
	rc = rc ?: guest_sh(&c, d->sandbox, await_queries, NULL, "its recovery");
	char text[1200];
	if (rc < 0) {
		snprintf(text, sizeof text, "%s; starting it again failed: %s", why, errmsg());
		db_event(d->id, "restart_failed", text);
		note_restart(d->id, true);
		return;
	}
	note_restart(d->id, false);
	snprintf(text, sizeof text, "%s: its VM was started again from its disk (booted in %.1f s), the server "
		 "recovered and takes queries (%.1f s in all)", why, (double)(t1 - t0) / 1000,
		 (double)(mono_ms() - t0) / 1000);
	db_event(d->id, "restart", text);
}

static void db_watch(void *ctx)
{
	(void)ctx;
	static struct db_row rows[DB_WATCH_MAX];	/* one watch thread */
	struct db_list l = { rows, 0 };
	if (store_db_each(dw.store, NULL, note_db, &l) < 0) {
		log_warn("database watch: %s", errmsg());
		return;
	}
	for (int i = 0; i < DB_WATCH_MAX; i++)
		dw.idle[i].seen = false;
	for (int i = 0; i < l.n; i++)
		db_look_at(&rows[i]);
	external_sync();	/* a port another kilnd of the store changed, or one that failed to open */
	for (int i = 0; i < DB_WATCH_MAX; i++)	/* gone, or not looked at: its clock starts over */
		if (!dw.idle[i].seen)
			dw.idle[i].id[0] = 0;
}

int db_watch_start(struct store *st, struct hostif *hi, const struct plans *plans, int period_ms)
{
	dw.store = st, dw.hostif = hi, dw.plans = plans;
	return periodic_start(&dw.thread, "database watch", period_ms > 0 ? period_ms : 2000, db_watch, NULL);
}

void db_watch_stop(void)
{
	if (dw.store)
		periodic_stop(&dw.thread);
}
