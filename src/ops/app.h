/*
 * app: long-running services (docs/api.md "Apps"). An app is a command
 * listening on a port in a sandbox kiln keeps for it, reached at a
 * stable URL on its own origin (APP_ID.DOMAIN, proxy/proxy.c) whatever
 * sandbox serves it now:
 *
 *   - deploy: a sandbox from the app's template or snapshot, persistent
 *     (hibernated when idle for idle_seconds, woken by the next request,
 *     never deleted by a TTL), its command started under a supervisor,
 *     ready once something listens on the port; the port exposed public.
 *     A running sandbox can be made an app instead: it is snapshotted
 *     once ready, and that snapshot is where its later sandboxes come from.
 *   - the process: the supervisor runs in the sandbox (a shell loop kiln
 *     starts), so the restart policy holds while kilnd is away and across
 *     hibernation, snapshot and fork; it appends the command's output and
 *     its own lines ("kiln: the app exited with status S; restart N in
 *     D s") to APP_LOG in the guest, which the app's logs read.
 *   - the VM: the app watch (one thread per API process) remakes the
 *     sandbox of an app whose sandbox ended (failed, lost with its host,
 *     deleted), unless the restart policy is "never".
 *   - redeploy: the new sandbox is made and ready first, then the app is
 *     switched to it (one compare-and-set: requests from then on go to
 *     it), and the old one is deleted APP_DRAIN_MS later, when requests
 *     that were on their way to it are done.
 *
 * Errors as ops.h: -EINVAL naming the field, -ENOENT "app X not found",
 * -EEXIST for a name the workspace has, -ETIMEDOUT when the command did
 * not listen in time (errmsg() ends with the end of its log), -ESTALE
 * when another replica changed the app meanwhile; the rest as ops_create.
 */
#ifndef KILN_OPS_APP_H
#define KILN_OPS_APP_H

#include <jansson.h>

#include "ops/ops.h"
#include "store/store_apps.h"

#define APP_LOG "/var/log/kiln-app.log"
/* Each line of APP_LOG goes to the sandbox's console too, so marked. */
#define APP_CONSOLE_PREFIX "kiln-app: "
/* What an app keeps of the lines of its earlier sandboxes (replaced when
 * their VM ended or by a deploy): the last 64 KiB, in the store. */
#define APP_LOG_KEPT_BYTES (64 << 10)
#define APP_DRAIN_MS 5000		/* a replaced sandbox is deleted this much later */
#define APP_READY_DEFAULT_S 60
#define APP_READY_MAX_S 600
#define APP_IDLE_DEFAULT_S 900
/* A request to an app goes to this DNS label's app: "app-" and the id's
 * random part (ids have '_', DNS names cannot). */
#define APP_LABEL_PREFIX "app-"

/* Why a server without --domain makes no app (REST's 400, MCP's error). */
#define APP_NO_DOMAIN "apps are served on their own origin (APP.DOMAIN): this server has no --domain " \
		      "(kilnd --domain localhost will do on one machine: *.localhost is this machine)"

/* The fields ops_app_create and ops_app_deploy accept (ops/fields.h):
 * what both share, and each one's whole table. */
extern const struct field ops_app_fields[];
extern const struct field ops_app_create_fields[];
extern const struct field ops_app_deploy_fields[];

/* POST /v1/apps: name ([a-z0-9-], as a volume's), port, and where it
 * comes from: template (default "base"), from_snapshot, or sandbox_id
 * (a running sandbox of the caller's); command, unless the source runs
 * the server already (a template built with --start, a snapshot, a
 * sandbox); env, restart
 * (always | on-failure (default) | never), idle_seconds (0: never
 * hibernated; default APP_IDLE_DEFAULT_S; at most the plan's TTL cap),
 * ready_timeout_seconds. Returns once the app answers on its port. */
int ops_app_create(const struct ops_caller *c, const json_t *args, struct app_row *out);
/* POST /v1/apps/{id}/deploy: a new version, fields as create's
 * (name and sandbox_id excepted), each absent one as the app had it. */
int ops_app_deploy(const struct ops_caller *c, const char *key, const json_t *args, struct app_row *out);
/* The caller's app by id or name. */
int ops_app_get(const struct ops_caller *c, const char *key, struct app_row *out);
/* The app, its sandboxes and the snapshot it made are deleted. */
int ops_app_delete(const struct ops_caller *c, const char *key);
/* {id, name, url (NULL without a domain), port, template, from_snapshot,
 * command, env, restart, idle_seconds, sandbox_id, status (running,
 * hibernated, paused, failed, ...: its sandbox's), version, vm_restarts,
 * reason, created_ms, updated_ms}; url: the front end's (proxy_app_url). */
json_t *ops_app_json(const struct ops_caller *c, const struct app_row *a, const char *url);

/* The app's log: the lines its earlier sandboxes wrote (what the app
 * keeps of them, APP_LOG_KEPT_BYTES, with kiln's line about each
 * replacement: "kiln: ... remade as sandbox ..."), then APP_LOG in its
 * sandbox; the last `lines` lines of both into *out, malloc'd; its
 * sandbox is woken if it sleeps. Lines an old version writes while it
 * drains after a deploy (APP_DRAIN_MS) are not kept. */
int ops_app_log_tail(const struct ops_caller *c, const struct app_row *a, int lines, char **out, size_t *n);
/* Of those, the earlier sandboxes' lines only (the last `lines`): what a
 * follower is sent before the current sandbox's. */
int ops_app_log_earlier(const struct ops_caller *c, const struct app_row *a, int lines, char **out, size_t *n);
/* How many lines `tail -n lines` of APP_LOG in its sandbox gives now
 * (0 without a sandbox): a follower of the last N lines is sent the
 * last N - *count of the earlier sandboxes' lines, then the current
 * sandbox's (tail -F), so that it starts with the lines ops_app_log_tail
 * answers, not up to twice as many. */
int ops_app_log_current(const struct ops_caller *c, const struct app_row *a, int lines, int *count);

/* The sandbox and port serving the app a request's host name (its first
 * label, lower case) names: -ENOENT if none; the sandbox may be "" (none
 * serving: failed). From a cache (app.c "the route cache"): another API
 * replica's change is seen within a second. */
int ops_app_route(struct store *st, const char *label, char sandbox[ID_MAX], int *port);

/* The parts a managed database (ops/database.c) shares with apps:
 * start command in sandbox under the supervisor (its env the sandbox's;
 * restart as an app's; output to APP_LOG), the guest tried until
 * until_ms (CLOCK_MONOTONIC ms) while slow; and wait until something
 * accepts connections on port there (-ETIMEDOUT after timeout_s, with
 * the end of APP_LOG in the message). */
int ops_app_supervise(const struct ops_caller *c, const char *sandbox, const char *command, const char *restart,
		      int64_t until_ms);
int ops_app_wait_listening(const struct ops_caller *c, const char *sandbox, int port, int64_t timeout_s);

/* The app watch (see above): every period_ms, each app's sandbox looked
 * at (never woken: a hibernated app is left asleep) and remade if it
 * ended; replaced sandboxes deleted once drained. max_ttl: the server's
 * cap (ops_caller.max_ttl). */
int app_watch_start(struct store *st, struct hostif *hi, const struct plans *plans, int64_t max_ttl,
		    int period_ms);
void app_watch_kick(void);
void app_watch_stop(void);

#endif
