/*
 * app: deploying, supervising and replacing the sandboxes of apps
 * (ops/app.h).
 */
#include "ops/app.h"
#include "ops/fields.h"
#include "ops/validate.h"
#include "common/err.h"
#include "common/log.h"
#include "common/periodic.h"
#include "common/strbuf.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define READY_POLL_MS 100
#define LOG_TAIL_MAX (64 << 10)
#define REMAKE_BACKOFF_MS 10000	/* after a remake that failed */
#define CONSOLE_WINDOW (512 << 10)	/* of a replaced sandbox's console, read for its app's lines */

static const char *const restarts[] = { "always", "on-failure", "never", NULL };

/* What create and deploy share; a deploy's port is optional (the app's
 * stays), a create's required. */
const struct field ops_app_fields[] = {
	{ .name = "command", .type = FIELD_STRING, .max = APP_COMMAND_MAX - 1,
	  .description = "The shell command that serves (run under a supervisor that restarts it)." },
	{ .name = "template", .type = FIELD_STRING, .max = OPS_NAME_MAX, .description = "base (default) or minimal." },
	{ .name = "from_snapshot", .type = FIELD_STRING, .max = OPS_NAME_MAX,
	  .description = "A snapshot (snap_...) to start from instead of a template (command optional: it may run "
			 "already)." },
	{ .name = "restart", .type = FIELD_STRING, .choices = restarts,
	  .description = "When the command is started again after it exits (default on-failure)." },
	{ .name = "idle_seconds", .type = FIELD_INTEGER, .min = 0, .max = FIELD_NO_MAX,
	  .description = "Hibernate it after this long without requests (0: never; default 900); the next "
			 "request wakes it." },
	{ .name = "ready_timeout_seconds", .type = FIELD_INTEGER, .min = 1, .max = APP_READY_MAX_S,
	  .description = "How long the command has to listen on port (default 60)." },
	{ .name = "env", .type = FIELD_MAP, .env_names = true, .max = OPS_ENV_MAX, .key_max = OPS_ENV_KEY_MAX,
	  .item_max = OPS_ENV_VALUE_MAX, .description = "Environment of the command." },
	{ .type = FIELD_END }
};

#define PORT_FIELD(req) \
	{ .name = "port", .type = FIELD_INTEGER, .required = req, .min = 1, .max = 65535, \
	  .description = "The port the command listens on in the sandbox." }

const struct field ops_app_create_fields[] = {
	{ .name = "name", .type = FIELD_STRING, .required = true, .max = OPS_VOLUME_NAME_MAX,
	  .description = "a-z, 0-9 and '-', starting with a letter or digit; unique among the workspace's apps." },
	{ .name = "sandbox_id", .type = FIELD_STRING, .max = OPS_NAME_MAX,
	  .description = "A running sandbox (sbx_...) to make the app, instead of a template or snapshot." },
	PORT_FIELD(true),
	{ .type = FIELD_INCLUDE, .items = ops_app_fields },
	{ .type = FIELD_END }
};

const struct field ops_app_deploy_fields[] = {
	PORT_FIELD(false),
	{ .type = FIELD_INCLUDE, .items = ops_app_fields },
	{ .type = FIELD_END }
};

/* The supervisor, run by /bin/sh with the command and the restart policy
 * in its environment, not its arguments: `pkill -f SERVER` in the
 * sandbox must find the server, not the loop that restarts it. (They are
 * taken out of the environment the command sees.) Its output and the
 * command's go to APP_LOG, and each line to the console too, marked
 * APP_CONSOLE_PREFIX: the console is written on the host as the guest
 * writes it, so a VM that dies leaves its app's lines where kiln can
 * keep them (keep_log). (A guest without mkfifo or /run: APP_LOG only.)
 * The delay between restarts doubles from 1 s
 * up to 30 s, and starts over after a run of a minute or more, so a
 * command that fails at once does not spin. */
#define ENV_COMMAND "KILN_APP_COMMAND"
#define ENV_RESTART "KILN_APP_RESTART"
static const char supervisor[] =
	"c=$" ENV_COMMAND "; p=$" ENV_RESTART "; unset " ENV_COMMAND " " ENV_RESTART "\n"
	"mkdir -p /var/log; f=/run/kiln-app.$$\n"
	"if rm -f $f && mkfifo $f 2>/dev/null; then\n"
	"  (trap '' HUP INT TERM\n"
	"   while IFS= read -r l || [ -n \"$l\" ]; do\n"
	"     printf '%s\\n' \"$l\" >>" APP_LOG "\n"
	"     printf '" APP_CONSOLE_PREFIX "%s\\n' \"$l\" 2>/dev/null >>/dev/console\n"
	"   done) <$f &\n"
	"  exec >$f 2>&1 </dev/null; rm -f $f\n"
	"else\n"
	"  exec >>" APP_LOG " 2>&1 </dev/null\n"
	"fi\n"
	"n=0; d=0\n"
	"while :; do\n"
	"  t0=$(date +%s)\n"
	"  sh -c \"$c\"; s=$?\n"
	"  if [ \"$p\" = never ] || { [ \"$p\" = on-failure ] && [ $s -eq 0 ]; }; then\n"
	"    echo \"kiln: the app exited with status $s; restart policy $p: not restarted\"; exit $s\n"
	"  fi\n"
	"  n=$((n + 1))\n"
	"  if [ $(($(date +%s) - t0)) -ge 60 ] || [ $d -lt 1 ]; then d=1; else d=$((d * 2)); fi\n"
	"  [ $d -gt 30 ] && d=30\n"
	"  echo \"kiln: the app exited with status $s; restart $n in ${d}s\"\n"
	"  sleep $d\n"
	"done\n";

/* ---- the route cache ---------------------------------------------------------
 * Every request to an app's host name asks which sandbox and port serve
 * it: from a small cache rather than the store (a PostgreSQL round trip
 * in a cluster, and a whole app row) on each request. An entry (found or
 * not) is kept ROUTE_TTL_MS; every change of an app this process makes
 * empties the cache at once, so on one box a switch is seen by the next
 * request; another API replica's change is seen within ROUTE_TTL_MS (a
 * redeploy drains the old sandbox for APP_DRAIN_MS, far longer). */
#define ROUTE_SLOTS 256		/* direct-mapped by the label's hash */
#define ROUTE_TTL_MS 1000

struct route_slot {
	char label[48];
	char sandbox[ID_MAX];
	int port;
	bool found;
	int64_t until_ms;
	uint64_t gen;
};

static struct {
	pthread_mutex_t lock;
	uint64_t gen;			/* bumped by every change made here */
	struct route_slot slot[ROUTE_SLOTS];
} routes = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void routes_changed(void)
{
	pthread_mutex_lock(&routes.lock);
	routes.gen++;
	pthread_mutex_unlock(&routes.lock);
}

static int app_store_insert(struct store *st, const struct app_row *r)
{
	int rc = store_app_insert(st, r);
	routes_changed();
	return rc;
}

static int app_store_update(struct store *st, const struct app_row *r, int64_t gen)
{
	int rc = store_app_update(st, r, gen);
	routes_changed();
	return rc;
}

static int app_store_delete(struct store *st, const char *workspace, const char *id)
{
	int rc = store_app_delete(st, workspace, id);
	routes_changed();
	return rc;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void event(struct store *st, const char *app, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void event(struct store *st, const char *app, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	log_info("app %s: %s", app, text);
	if (store_app_event(st, app, text) < 0)
		log_warn("app %s: its event was not kept: %s", app, errmsg());
}

/* ---- the guest side ------------------------------------------------------- */

/* Run argv in the sandbox and keep up to max bytes of its stdout in *out. */
static int guest_run(const struct ops_caller *c, const char *sandbox, const char *const *argv, size_t max,
		     struct strbuf *out)
{
	struct hostif_run run = { .argv = argv, .timeout_ms = 10000, .out_max = max };
	int rc = hostif_run(c->hostif, c->workspace, sandbox, &run);
	if (rc == -ETIMEDOUT)
		rc = errf(ETIMEDOUT, "sandbox %s: no answer from its guest", sandbox);
	if (rc == 0)
		strbuf_append(out, run.out.data, run.out.len);
	hostif_run_free(&run);
	return rc;
}

/* The last lines of the app's log, for a message: into buf, one line. */
static void log_end(const struct ops_caller *c, const char *sandbox, char *buf, size_t cap)
{
	struct strbuf b;
	strbuf_init(&b);
	static const char *const argv[] = { "tail", "-c", "600", APP_LOG, NULL };
	*buf = 0;
	if (guest_run(c, sandbox, argv, 600, &b) == 0 && b.len) {
		size_t n = b.len < cap - 1 ? b.len : cap - 1;
		memcpy(buf, b.data, n);
		buf[n] = 0;
		for (char *p = buf; *p; p++)
			if (*p == '\n' && p[1])
				*p = '|';
			else if (*p == '\n' || (unsigned char)*p < ' ')
				*p = ' ';
	}
	strbuf_free(&b);
}

/* The app's lines in a replaced sandbox's console (the end of it), then
 * kiln's line about the replacement, appended to what the app keeps of
 * its earlier sandboxes (store_app_log_kept), of which the last
 * APP_LOG_KEPT_BYTES stay. Best effort: a sandbox whose host is gone
 * leaves only kiln's line. */
static void keep_log(const struct ops_caller *c, const char *app, const char *sandbox, const char *what)
{
	char *kept = NULL;
	if (store_app_log_kept(c->store, app, &kept) < 0) {
		log_warn("app %s: keeping the log of sandbox %s: %s", app, sandbox, errmsg());
		return;
	}
	struct strbuf b;
	strbuf_init(&b);
	strbuf_append(&b, kept, strlen(kept));
	free(kept);
	int fd = -1, more = -1;
	struct stat st;
	if (hostif_log_open(c->hostif, c->workspace, sandbox, false, &fd, &more) < 0) {
		log_warn("app %s: reading the console of sandbox %s: %s", app, sandbox, errmsg());
	} else if (fstat(fd, &st) == 0) {
		off_t from = st.st_size > CONSOLE_WINDOW ? st.st_size - CONSOLE_WINDOW : 0;
		size_t cap = (size_t)(st.st_size - from);
		char *buf = malloc(cap + 1);
		ssize_t n = buf && cap ? pread(fd, buf, cap, from) : 0;
		size_t plen = strlen(APP_CONSOLE_PREFIX);
		for (size_t i = 0; buf && n > 0 && i < (size_t)n;) {
			char *nl = memchr(buf + i, '\n', (size_t)n - i);
			size_t end = nl ? (size_t)(nl - buf) : (size_t)n, len = end - i;
			/* The first line of a window that does not start the file is cut. */
			bool whole = i > 0 || from == 0;
			if (len && buf[end - 1] == '\r')
				len--;
			if (whole && len >= plen && !memcmp(buf + i, APP_CONSOLE_PREFIX, plen)) {
				strbuf_append(&b, buf + i + plen, len - plen);
				strbuf_putc(&b, '\n');
			}
			i = end + 1;
		}
		free(buf);
	}
	if (fd >= 0)
		close(fd);
	if (more >= 0)
		close(more);
	strbuf_printf(&b, "kiln: %s\n", what);
	if (strbuf_failed(&b)) {
		log_warn("app %s: keeping the log of sandbox %s: out of memory", app, sandbox);
		strbuf_free(&b);
		return;
	}
	strbuf_putc(&b, 0);
	const char *text = b.data;
	if (b.len - 1 > APP_LOG_KEPT_BYTES) {	/* whole lines: from the first after the cut */
		text = b.data + (b.len - 1 - APP_LOG_KEPT_BYTES);
		const char *nl = strchr(text, '\n');
		text = nl ? nl + 1 : text;
	}
	if (store_app_log_keep(c->store, app, text) < 0)
		log_warn("app %s: keeping the log of sandbox %s: %s", app, sandbox, errmsg());
	strbuf_free(&b);
}

int ops_app_supervise(const struct ops_caller *c, const char *sandbox, const char *command, const char *restart,
		      int64_t until_ms)
{
	/* The sandbox's env (the template's, the app's) as exec has it. */
	struct sbx_row row;
	int rc = hostif_get(c->hostif, c->workspace, sandbox, false, &row);
	if (rc < 0)
		return rc;
	json_t *own = json_pack("{s:s,s:s}", ENV_COMMAND, command, ENV_RESTART, restart);
	char **env = own ? ops_env_merge(row.env, own) : NULL;
	json_decref(own);
	sbx_row_clear(&row);
	if (!env)
		return errf(ENOMEM, "out of memory");
	const char *argv[] = { "/bin/sh", "-c", supervisor, "kiln-app", NULL };
	struct hostif_run run = { .argv = argv, .env = (const char *const *)env, .background = true,
				  .enter_until_ms = until_ms };
	rc = hostif_run(c->hostif, c->workspace, sandbox, &run);
	hostif_run_free(&run);
	free(env);
	return rc;
}

/* Start the supervisor with the app's command and env. */
static int start_command(const struct ops_caller *c, const char *sandbox, const struct app_row *a, int64_t until_ms)
{
	return ops_app_supervise(c, sandbox, a->command, a->restart, until_ms);
}

int ops_app_wait_listening(const struct ops_caller *c, const char *sandbox, int port, int64_t timeout_s)
{
	int64_t until = mono_ms() + timeout_s * 1000;
	for (;;) {
		/* Nothing listens yet, or a guest just made (or woken) on a busy
		 * host was slow to answer: tried again until the deadline. */
		int rc = hostif_port_listening(c->hostif, c->workspace, sandbox, (unsigned)port, until);
		if (rc != 0)
			return rc < 0 ? rc : 0;
		if (mono_ms() >= until) {
			char end[520];
			log_end(c, sandbox, end, sizeof end);
			return errf(ETIMEDOUT, "nothing listened on port %d in sandbox %s within %lld s; %s%s", port,
				    sandbox, (long long)timeout_s, end[0] ? "its log ends: " : "its log is empty",
				    end);
		}
		usleep(READY_POLL_MS * 1000);
	}
}

/* ---- arguments ------------------------------------------------------------ */

struct app_args {
	const char *name, *template, *snapshot, *sandbox, *command, *restart;
	int64_t port, idle, ready;
	int64_t idle_max;		/* the server's and the plan's cap */
	bool idle_never_ok;		/* 0 (never hibernated) allowed */
	json_t *env;
	bool has_port, has_idle;
};

static bool app_name_ok(const char *s)
{
	return ops_volume_name_ok(s);	/* the same rule: it is a DNS-safe label */
}

static int parse(const struct ops_caller *c, const json_t *args, bool deploy, struct app_args *o)
{
	memset(o, 0, sizeof *o);
	o->ready = APP_READY_DEFAULT_S;
	o->port = -1, o->idle = -1;
	/* The sandbox's TTL is idle_seconds: the plan's cap on TTLs holds it,
	 * and a plan that caps them has no "never" (0). */
	struct plan p;
	int64_t max_idle = c->max_ttl;
	int rc = ops_workspace_plan(c, &p);
	if (rc == 0 && p.limits.max_ttl_seconds && p.limits.max_ttl_seconds < max_idle)
		max_idle = p.limits.max_ttl_seconds;
	o->idle_max = max_idle;
	o->idle_never_ok = !p.limits.max_ttl_seconds;
	if (rc == 0 && deploy && (json_object_get(args, "name") || json_object_get(args, "sandbox_id")))
		rc = errf(EINVAL, "a deploy keeps the app's name and makes its own sandbox: "
				  "fields 'name' and 'sandbox_id' are for POST /v1/apps");
	const struct field_cap cap[] = { { "idle_seconds", max_idle }, { NULL, 0 } };
	rc = rc ?: ops_fields_check(c, deploy ? ops_app_deploy_fields : ops_app_create_fields, args, cap);
	if (rc == 0) {
		o->name = field_str(args, "name", NULL);
		o->template = field_str(args, "template", NULL);
		o->snapshot = field_str(args, "from_snapshot", NULL);
		o->sandbox = field_str(args, "sandbox_id", NULL);
		o->command = field_str(args, "command", NULL);
		o->restart = field_str(args, "restart", NULL);
		o->port = field_int(args, "port", -1);
		o->idle = field_int(args, "idle_seconds", -1);
		o->ready = field_int(args, "ready_timeout_seconds", APP_READY_DEFAULT_S);
		o->env = field_get(args, "env");
	}
	if (rc == 0 && o->name && !app_name_ok(o->name))
		rc = errf(EINVAL, "field 'name' of an app is [a-z0-9][a-z0-9-]* (at most %d characters), not '%.80s'",
			  OPS_VOLUME_NAME_MAX, o->name);
	if (rc == 0 && p.limits.ttl_absolute)
		rc = errf(EPERM, "plan %s deletes a sandbox a fixed time after its creation: an app needs one "
				 "that lives as long as it is used (a plan whose TTL counts idle time)", p.name);
	if (rc == 0 && o->idle == 0 && !o->idle_never_ok)
		rc = errf(EINVAL, "field 'idle_seconds' 0 (never hibernated) is over plan %s's limit of %lld seconds",
			  p.name, (long long)max_idle);
	if (rc < 0)
		return rc;
	o->has_port = o->port > 0, o->has_idle = o->idle >= 0;
	int sources = !!o->template + !!o->snapshot + !!o->sandbox;
	if (sources > 1)
		return errf(EINVAL, "an app comes from one of 'template', 'from_snapshot' or 'sandbox_id', not %d", sources);
	if (o->command && !o->command[0])
		return errf(EINVAL, "field 'command' is empty");
	/* Without a command the source must run the server itself: a
	 * snapshot, a running sandbox, or a template built with --start
	 * (docs/templates.md); if nothing listens, the deploy says so. */
	return 0;
}

/* ---- sandboxes of an app --------------------------------------------------- */

/* The app's port, reachable without a key (the app's URL is public). */
static int expose_public(const struct ops_caller *c, const char *sandbox, int port)
{
	struct port_row pr = { .port = port, .public = true, .created_ms = wall_ms() };
	snprintf(pr.sandbox, sizeof pr.sandbox, "%s", sandbox);
	snprintf(pr.workspace, sizeof pr.workspace, "%s", c->workspace);
	return store_port_save(c->store, &pr);
}

/* A sandbox for app a from its source, its command started and listening,
 * its port exposed public: its id in sandbox. On failure nothing is left. */
static int spawn(const struct ops_caller *c, const struct app_row *a, int64_t ready_s, char sandbox[ID_MAX])
{
	json_t *args = json_object(), *meta = json_pack("{s:s}", "kiln_app", a->id);
	if (!args || !meta) {
		json_decref(args);
		json_decref(meta);
		return errf(ENOMEM, "out of memory");
	}
	if (a->snapshot[0])
		json_object_set_new(args, "from_snapshot", json_string(a->snapshot));
	else
		json_object_set_new(args, "template", json_string(a->template));
	json_object_set_new(args, "persistent", json_true());
	json_object_set_new(args, "ttl_seconds", json_integer(a->idle_seconds));
	json_object_set_new(args, "metadata", meta);
	if (a->env[0] && !a->snapshot[0]) {
		json_t *env = json_loads(a->env, 0, NULL);
		if (env)
			json_object_set_new(args, "env", env);
	}
	struct sbx_row row;
	int rc = ops_create(c, args, &row);
	/* A guest that died while it booted (issue 21: now and then under
	 * nested emulation) left nothing: one more try, as a user would. */
	if (rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -EPROTO || rc == -EPIPE) {
		log_warn("app %s: a sandbox for it failed to start (%s): one more try", a->id, errmsg());
		rc = ops_create(c, args, &row);
	}
	json_decref(args);
	if (rc < 0)
		return rc;
	snprintf(sandbox, ID_MAX, "%s", row.id);
	sbx_row_clear(&row);
	if (a->command[0] && !a->source_runs)
		rc = start_command(c, sandbox, a, mono_ms() + ready_s * 1000);
	if (rc == 0)
		rc = ops_app_wait_listening(c, sandbox, a->port, ready_s);
	if (rc == 0)
		rc = expose_public(c, sandbox, a->port);
	if (rc < 0) {
		char why[1024];
		snprintf(why, sizeof why, "%s", errmsg());
		if (hostif_delete(c->hostif, c->workspace, sandbox) < 0)
			log_warn("app %s: deleting sandbox %s that did not come up: %s", a->id, sandbox, errmsg());
		sandbox[0] = 0;
		return errf(-rc, "%s", why);
	}
	return 0;
}

static void drop_sandbox(const struct ops_caller *c, const char *app, const char *sandbox)
{
	int rc = sandbox[0] ? hostif_delete(c->hostif, c->workspace, sandbox) : 0;
	if (rc < 0 && rc != -ENOENT)
		log_warn("app %s: deleting sandbox %s: %s", app, sandbox, errmsg());
}

/* ---- operations ------------------------------------------------------------ */

/* Fill a's settings from args over what it has. */
static void apply(struct app_row *a, const struct app_args *o)
{
	if (o->template || o->snapshot) {
		snprintf(a->template, sizeof a->template, "%s", o->template ? o->template : "");
		snprintf(a->snapshot, sizeof a->snapshot, "%s", o->snapshot ? o->snapshot : "");
		a->source_runs = false;
	}
	if (o->command)
		snprintf(a->command, sizeof a->command, "%s", o->command);
	if (o->restart)
		snprintf(a->restart, sizeof a->restart, "%s", o->restart);
	if (o->has_port)
		a->port = (int)o->port;
	if (o->has_idle)
		a->idle_seconds = o->idle;
	if (o->env) {
		char *t = json_dumps(o->env, JSON_COMPACT);
		snprintf(a->env, sizeof a->env, "%s", t ? t : "");
		free(t);
	}
}

/* Make a running sandbox of the caller's the app's first: its command
 * started (if given) and listening, a snapshot of it taken as the source
 * of the app's later sandboxes, made persistent, its port public. */
static int adopt(const struct ops_caller *c, struct app_row *a, const char *sandbox, int64_t ready_s)
{
	struct sbx_row row;
	int rc = ops_sandbox(c, sandbox, &row);
	if (rc < 0)
		return rc;
	bool running = row.state == SBX_RUNNING;
	sbx_row_clear(&row);
	if (!running)
		return errf(EBUSY, "sandbox %s is not running: only a running sandbox can be made an app", sandbox);
	struct app_row *other = malloc(sizeof *other);
	if (!other)
		return errf(ENOMEM, "out of memory");
	rc = store_app_by_sandbox(c->store, sandbox, other);
	if (rc == 0)
		rc = errf(EEXIST, "sandbox %s already serves app %s", sandbox, other->name);
	free(other);
	if (rc != -ENOENT)
		return rc < 0 ? rc : errf(EIO, "sandbox %s: looking for its app", sandbox);
	rc = 0;
	if (a->command[0])
		rc = start_command(c, sandbox, a, mono_ms() + ready_s * 1000);
	rc = rc ?: ops_app_wait_listening(c, sandbox, a->port, ready_s);
	rc = rc ?: ops_snapshot(c, sandbox, a->snapshot);
	if (rc < 0)
		return rc;
	a->source_runs = true;
	struct lifecycle_change lc = { .set_ttl = true, .ttl_seconds = a->idle_seconds, .set_idle = true,
				       .idle_hibernate = true, .retention_seconds = 0 };
	rc = hostif_set_lifecycle(c->hostif, c->workspace, sandbox, &lc, NULL);
	if (rc == 0)
		rc = expose_public(c, sandbox, a->port);
	if (rc < 0) {
		char why[512];
		snprintf(why, sizeof why, "%s", errmsg());
		hostif_snapshot_delete(c->hostif, c->workspace, a->snapshot);
		return errf(-rc, "%s", why);
	}
	snprintf(a->sandbox, sizeof a->sandbox, "%s", sandbox);
	return 0;
}

int ops_app_create(const struct ops_caller *c, const json_t *args, struct app_row *out)
{
	struct app_args o;
	int rc = parse(c, args, false, &o);
	if (rc < 0)
		return rc;
	if (!c->store)
		return errf(ENOTSUP, "apps need the store");
	struct app_row *a = out;
	memset(a, 0, sizeof *a);
	if ((rc = make_id(a->id, "app_")) < 0)
		return rc;
	snprintf(a->workspace, sizeof a->workspace, "%s", c->workspace);
	snprintf(a->name, sizeof a->name, "%s", o.name);
	snprintf(a->template, sizeof a->template, "base");
	snprintf(a->restart, sizeof a->restart, "on-failure");
	snprintf(a->state, sizeof a->state, "running");
	a->idle_seconds = APP_IDLE_DEFAULT_S < o.idle_max ? APP_IDLE_DEFAULT_S : o.idle_max;
	apply(a, &o);
	a->gen = a->version = 1;
	a->created_ms = a->updated_ms = wall_ms();
	/* The name is taken first (sandbox_id "" until it serves), so two
	 * creates of one name do not both make a sandbox. */
	if ((rc = app_store_insert(c->store, a)) < 0)
		return rc;
	struct app_row first = *a;
	if (o.sandbox) {
		snprintf(first.template, sizeof first.template, "%s", "");
		rc = adopt(c, &first, o.sandbox, o.ready);
	} else {
		rc = spawn(c, &first, o.ready, first.sandbox);
	}
	if (rc == 0) {
		rc = app_store_update(c->store, &first, a->gen);
		if (rc < 0 && !o.sandbox)
			drop_sandbox(c, a->id, first.sandbox);
	}
	if (rc < 0) {
		char why[1024];
		snprintf(why, sizeof why, "%s", errmsg());
		app_store_delete(c->store, c->workspace, a->id);
		return errf(-rc, "%s", why);
	}
	*a = first;
	event(c->store, a->id, "version 1 deployed: sandbox %s%s", a->sandbox, o.sandbox ? " (made an app)" : "");
	return 0;
}

/* The caller's app by id or name. */
int ops_app_get(const struct ops_caller *c, const char *key, struct app_row *out)
{
	if (!c->store)
		return errf(ENOENT, "app %.64s not found", key);
	bool by_id = v_is_id(key, "app_");
	if (!by_id && !app_name_ok(key))
		return errf(ENOENT, "app %.64s not found", key);
	return store_app_load(c->store, c->workspace, key, !by_id, out);
}

int ops_app_deploy(const struct ops_caller *c, const char *key, const json_t *args, struct app_row *out)
{
	struct app_args o;
	int rc = parse(c, args, true, &o);
	if (rc < 0)
		return rc;
	struct app_row old;
	if ((rc = ops_app_get(c, key, &old)) < 0)
		return rc;
	/* An app made from a running sandbox runs its command in the
	 * snapshot it came from: a new command alone could not replace it. */
	if (old.source_runs && o.command && !o.template && !o.snapshot)
		return errf(EINVAL, "app %s comes from the snapshot of the sandbox it was made from, where its command "
				    "runs already: a new 'command' needs a 'template' or 'from_snapshot' too", old.name);
	struct app_row a = old;
	apply(&a, &o);
	char fresh[ID_MAX];
	if ((rc = spawn(c, &a, o.ready, fresh)) < 0)
		return rc;
	/* A sandbox an earlier deploy left to drain goes now: only one
	 * waits at a time. */
	if (old.retiring[0])
		drop_sandbox(c, a.id, old.retiring);
	snprintf(a.retiring, sizeof a.retiring, "%s", old.sandbox);
	a.retire_ms = wall_ms() + APP_DRAIN_MS;
	snprintf(a.sandbox, sizeof a.sandbox, "%s", fresh);
	a.gen = old.gen + 1;
	a.version = old.version + 1;
	snprintf(a.state, sizeof a.state, "running");
	a.reason[0] = 0;
	if ((rc = app_store_update(c->store, &a, old.gen)) < 0) {
		char why[512];
		snprintf(why, sizeof why, "%s", errmsg());
		drop_sandbox(c, a.id, fresh);
		return errf(-rc, "%s", why);
	}
	event(c->store, a.id, "version %lld deployed: sandbox %s serves it; %s is deleted in %d s",
	      (long long)a.version, a.sandbox, a.retiring[0] ? a.retiring : "none", APP_DRAIN_MS / 1000);
	if (old.sandbox[0]) {
		char what[256];
		snprintf(what, sizeof what, "version %lld deployed: sandbox %s serves it, not %s", (long long)a.version,
			 a.sandbox, old.sandbox);
		keep_log(c, a.id, old.sandbox, what);
	}
	/* The snapshot taken when it was made an app is its no more. */
	if (old.source_runs && !a.source_runs && hostif_snapshot_delete(c->hostif, c->workspace, old.snapshot) < 0)
		log_warn("app %s: deleting its snapshot %s: %s", a.id, old.snapshot, errmsg());
	*out = a;
	app_watch_kick();
	return 0;
}

int ops_app_delete(const struct ops_caller *c, const char *key)
{
	struct app_row a;
	int rc = ops_app_get(c, key, &a);
	if (rc < 0 || (rc = app_store_delete(c->store, c->workspace, a.id)) < 0)
		return rc;
	drop_sandbox(c, a.id, a.sandbox);
	drop_sandbox(c, a.id, a.retiring);
	if (store_app_log_drop(c->store, a.id) < 0)
		log_warn("app %s: forgetting its kept log: %s", a.id, errmsg());
	if (a.source_runs && a.snapshot[0] && hostif_snapshot_delete(c->hostif, c->workspace, a.snapshot) < 0)
		log_warn("app %s: deleting its snapshot %s: %s", a.id, a.snapshot, errmsg());
	return 0;
}

json_t *ops_app_json(const struct ops_caller *c, const struct app_row *a, const char *url)
{
	const char *status = a->state;
	struct sbx_row row;
	bool have = false;
	if (!strcmp(a->state, "running") && a->sandbox[0] &&
	    hostif_get(c->hostif, a->workspace, a->sandbox, false, &row) == 0) {
		status = sbx_state_name(row.state);
		have = true;
	}
	json_t *env = a->env[0] ? json_loads(a->env, 0, NULL) : NULL;
	json_t *j = json_pack("{s:s,s:s,s:s?,s:i,s:s?,s:s?,s:s?,s:o,s:s,s:I,s:s?,s:s,s:I,s:I,s:s?,s:I,s:I}", "id",
			      a->id, "name", a->name, "url", url && url[0] ? url : NULL, "port", a->port, "template",
			      a->template[0] ? a->template : NULL, "from_snapshot",
			      a->snapshot[0] && !a->source_runs ? a->snapshot : NULL, "command",
			      a->command[0] ? a->command : NULL, "env", env ? env : json_object(), "restart",
			      a->restart, "idle_seconds", (json_int_t)a->idle_seconds, "sandbox_id",
			      a->sandbox[0] ? a->sandbox : NULL, "status", status, "version", (json_int_t)a->version,
			      "vm_restarts", (json_int_t)a->vm_restarts, "reason", a->reason[0] ? a->reason : NULL,
			      "created_ms", (json_int_t)a->created_ms, "updated_ms", (json_int_t)a->updated_ms);
	if (have)
		sbx_row_clear(&row);
	return j;
}

/* The last `lines` lines of text[0..n) (all of them if fewer). */
static size_t last_lines(const char *text, size_t n, int lines)
{
	size_t i = n;
	if (lines <= 0)
		return n;
	if (i && text[i - 1] == '\n')
		i--;
	for (int k = 0; i > 0; i--)
		if (text[i - 1] == '\n' && ++k == lines)
			break;
	return i;
}

int ops_app_log_earlier(const struct ops_caller *c, const struct app_row *a, int lines, char **out, size_t *n)
{
	char *kept = NULL;
	*out = NULL, *n = 0;
	int rc = store_app_log_kept(c->store, a->id, &kept);
	if (rc < 0)
		return rc;
	size_t kn = strlen(kept), from = last_lines(kept, kn, lines);
	memmove(kept, kept + from, kn - from + 1);
	*out = kept, *n = kn - from;
	return 0;
}

int ops_app_log_current(const struct ops_caller *c, const struct app_row *a, int lines, int *count)
{
	*count = 0;
	if (!a->sandbox[0] || lines <= 0)
		return 0;
	char want[16];
	snprintf(want, sizeof want, "%d", lines);
	const char *const argv[] = { "tail", "-n", want, APP_LOG, NULL };
	struct strbuf b;
	strbuf_init(&b);
	int rc = guest_run(c, a->sandbox, argv, LOG_TAIL_MAX, &b);
	for (size_t i = 0; rc == 0 && i < b.len; i++)
		*count += b.data[i] == '\n' || i + 1 == b.len;	/* a last line without its newline counts */
	strbuf_free(&b);
	return rc;
}

int ops_app_log_tail(const struct ops_caller *c, const struct app_row *a, int lines, char **out, size_t *n)
{
	*out = NULL, *n = 0;
	char *kept = NULL;
	size_t kn;
	int rc = ops_app_log_earlier(c, a, lines, &kept, &kn);
	if (rc < 0)
		return rc;
	if (!a->sandbox[0] && !kept[0]) {
		free(kept);
		return errf(EHOSTDOWN, "app %s has no sandbox now (%s)", a->id, a->reason[0] ? a->reason : a->state);
	}
	/* The earlier sandboxes' lines, then the current one's: the last
	 * `lines` of them together. */
	struct strbuf b;
	strbuf_init(&b);
	strbuf_append(&b, kept, kn);
	free(kept);
	if (a->sandbox[0] && lines > 0) {
		char count[16];
		snprintf(count, sizeof count, "%d", lines);
		const char *const argv[] = { "tail", "-n", count, APP_LOG, NULL };
		rc = guest_run(c, a->sandbox, argv, LOG_TAIL_MAX, &b);
	}
	if (rc == 0 && strbuf_failed(&b))
		rc = errf(ENOMEM, "out of memory");
	if (rc < 0) {
		strbuf_free(&b);
		return rc;
	}
	size_t from = last_lines(b.data ? b.data : "", b.len, lines);
	if (from)
		memmove(b.data, b.data + from, b.len - from);
	*out = b.data, *n = b.len - from;	/* the buffer is the caller's now */
	return 0;
}

static struct route_slot *route_slot(const char *label)
{
	uint32_t h = 2166136261u;		/* FNV-1a */
	for (const char *p = label; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return &routes.slot[h % ROUTE_SLOTS];
}

int ops_app_route(struct store *st, const char *label, char sandbox[ID_MAX], int *port)
{
	size_t pl = strlen(APP_LABEL_PREFIX);
	char id[ID_MAX];
	if (strncmp(label, APP_LABEL_PREFIX, pl) != 0 || strlen(label) - pl > 32)
		return -ENOENT;
	snprintf(id, sizeof id, "app_%s", label + pl);
	if (!v_is_id(id, "app_"))
		return -ENOENT;
	int64_t now = mono_ms();
	pthread_mutex_lock(&routes.lock);
	struct route_slot *e = route_slot(label), hit = *e;
	uint64_t gen = routes.gen;
	pthread_mutex_unlock(&routes.lock);
	if (hit.gen == gen && hit.until_ms > now && !strcmp(hit.label, label)) {
		snprintf(sandbox, ID_MAX, "%s", hit.sandbox);
		*port = hit.port;
		return hit.found ? 0 : -ENOENT;
	}
	struct app_row *a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	int rc = store_app_load(st, NULL, id, false, a);
	if (rc == 0 || rc == -ENOENT) {
		struct route_slot fresh = { .port = a->port, .found = rc == 0, .until_ms = now + ROUTE_TTL_MS,
					    .gen = gen };
		snprintf(fresh.label, sizeof fresh.label, "%s", label);
		snprintf(fresh.sandbox, sizeof fresh.sandbox, "%s", rc == 0 ? a->sandbox : "");
		pthread_mutex_lock(&routes.lock);
		if (routes.gen == gen)		/* not if an app changed meanwhile */
			*e = fresh;
		pthread_mutex_unlock(&routes.lock);
	}
	snprintf(sandbox, ID_MAX, "%s", rc == 0 ? a->sandbox : "");
	*port = a->port;
	free(a);
	return rc;
}

/* ---- the watch ------------------------------------------------------------- */

static struct {
	struct store *store;
	struct hostif *hostif;
	const struct plans *plans;
	int64_t max_ttl;
	struct periodic thread;
} w;

#define WATCH_MAX 256	/* apps looked at per pass (the oldest first) */

struct app_list {
	struct app_row *a;
	int n;
};

static int note_app(void *ctx, const struct app_row *r)
{
	struct app_list *l = ctx;
	if (l->n >= WATCH_MAX)
		return 1;
	l->a[l->n++] = *r;
	return 0;
}

/* Its sandbox ended: why, or "" while it lives (running, paused,
 * hibernated, or a lifecycle change under way). */
static void ended(const struct ops_caller *c, const struct app_row *a, char *why, size_t cap)
{
	struct sbx_row row;
	*why = 0;
	int rc = hostif_get(c->hostif, a->workspace, a->sandbox, false, &row);
	if (rc == -ENOENT) {
		snprintf(why, cap, "sandbox %s is gone", a->sandbox);
		return;
	}
	if (rc < 0)
		return;		/* not known now (its host does not answer): next pass */
	if (row.state == SBX_FAILED || row.state == SBX_LOST || row.state == SBX_DELETED)
		snprintf(why, cap, "sandbox %s is %s%s%s", a->sandbox, sbx_state_name(row.state),
			 row.error[0] ? ": " : "", row.error);
	sbx_row_clear(&row);
}

static void look_at(struct app_row *a)
{
	struct ops_caller c = { .hostif = w.hostif, .store = w.store, .plans = w.plans, .workspace = a->workspace,
				.max_ttl = w.max_ttl };
	int64_t now = wall_ms();
	if (a->retiring[0] && now >= a->retire_ms) {
		drop_sandbox(&c, a->id, a->retiring);
		struct app_row n = *a;
		n.retiring[0] = 0;
		if (app_store_update(w.store, &n, a->gen) == 0)
			*a = n;
	}
	if (strcmp(a->state, "running") != 0 || !a->sandbox[0])
		return;
	/* A remake that failed is tried again after a while, not each pass. */
	if (a->reason[0] && now - a->updated_ms < REMAKE_BACKOFF_MS)
		return;
	char why[512];
	ended(&c, a, why, sizeof why);
	if (!why[0])
		return;
	struct app_row n = *a;
	if (!strcmp(a->restart, "never")) {
		snprintf(n.state, sizeof n.state, "failed");
		snprintf(n.reason, sizeof n.reason, "%s; restart policy never", why);
		if (app_store_update(w.store, &n, a->gen) == 0)
			event(w.store, a->id, "%s; restart policy never: the app is failed", why);
		return;
	}
	char fresh[ID_MAX];
	if (spawn(&c, a, APP_READY_DEFAULT_S, fresh) < 0) {
		snprintf(n.reason, sizeof n.reason, "%s; remaking it failed: %s", why, errmsg());
		if (app_store_update(w.store, &n, a->gen) == 0)
			event(w.store, a->id, "%s", n.reason);
		return;
	}
	/* The ended one goes at once (a lost one when its host comes back:
	 * its agent deletes what the cluster no longer has). */
	if (a->retiring[0])
		drop_sandbox(&c, a->id, a->retiring);
	snprintf(n.retiring, sizeof n.retiring, "%s", a->sandbox);
	n.retire_ms = now;
	snprintf(n.sandbox, sizeof n.sandbox, "%s", fresh);
	n.gen = a->gen + 1;
	n.vm_restarts = a->vm_restarts + 1;
	n.reason[0] = 0;
	/* Its lines are kept before the switch, so whoever sees the new
	 * sandbox sees them too. (Two replicas remaking it at once may both
	 * keep them: the lines twice, in a race that leaves one sandbox.) */
	char what[768];
	snprintf(what, sizeof what, "%s: remade as sandbox %s (VM restart %lld)", why, fresh, (long long)n.vm_restarts);
	keep_log(&c, a->id, a->sandbox, what);
	if (app_store_update(w.store, &n, a->gen) < 0) {
		drop_sandbox(&c, a->id, fresh);	/* another replica got there first, or it was deleted */
		return;
	}
	event(w.store, a->id, "%s: remade as sandbox %s (VM restart %lld)", why, fresh, (long long)n.vm_restarts);
}

static void watch(void *ctx)
{
	(void)ctx;
	static struct app_row rows[WATCH_MAX];	/* one watch thread */
	struct app_list l = { rows, 0 };
	if (store_app_each(w.store, NULL, note_app, &l) < 0) {
		log_warn("app watch: %s", errmsg());
		return;
	}
	for (int i = 0; i < l.n; i++)
		look_at(&rows[i]);
}

int app_watch_start(struct store *st, struct hostif *hi, const struct plans *plans, int64_t max_ttl, int period_ms)
{
	w.store = st, w.hostif = hi, w.plans = plans, w.max_ttl = max_ttl;
	return periodic_start(&w.thread, "app watch", period_ms > 0 ? period_ms : 2000, watch, NULL);
}

void app_watch_kick(void)
{
	if (w.store)
		periodic_kick(&w.thread);
}

void app_watch_stop(void)
{
	if (w.store)
		periodic_stop(&w.thread);
}
