/*
 * store_apps: the records of apps (docs/api.md "Apps"): a long-running
 * service in a sandbox, reached at a stable URL, whose sandbox kiln
 * replaces when its VM ends or a new version is deployed. The record is
 * what any API replica needs to route a request to the app and to
 * supervise it; the rules (what a deploy does, when a sandbox is remade)
 * are the operations layer's (ops/app.h).
 *
 * Every change of the sandbox an app points at is a compare-and-set on
 * its generation (gen): two replicas that both remake or redeploy an app
 * at once cannot both switch it; the loser deletes what it made.
 */
#ifndef KILN_STORE_STORE_APPS_H
#define KILN_STORE_STORE_APPS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

#define APP_COMMAND_MAX	4096
#define APP_ENV_MAX	16384	/* the env as JSON text */
#define APP_REASON_MAX	512

struct app_row {
	char id[ID_MAX], workspace[ID_MAX];
	char name[NAME_MAX_LEN];
	/* Where its sandboxes come from: a template, or a snapshot (taken
	 * when a running sandbox was made an app: its command already runs
	 * in it, source_runs). */
	char template[NAME_MAX_LEN], snapshot[ID_MAX];
	bool source_runs;
	char command[APP_COMMAND_MAX];	/* "" when the source runs it */
	char env[APP_ENV_MAX];		/* JSON object text, or "" */
	int port;
	char restart[16];		/* always | on-failure | never */
	int64_t idle_seconds;		/* hibernated after this idle; 0: never */
	char sandbox[ID_MAX];		/* serving now; "" while none */
	char retiring[ID_MAX];		/* the one it replaced, deleted at retire_ms */
	int64_t retire_ms;
	int64_t gen;			/* bumped by every switch of sandbox */
	int64_t version;		/* deploys: 1 the first */
	int64_t vm_restarts;		/* sandboxes remade after their VM ended */
	char state[16];			/* running | failed */
	char reason[APP_REASON_MAX];	/* failed: why */
	int64_t created_ms, updated_ms, deleted_ms;
};

/* Record a new app: -EEXIST "an app named N exists" when the workspace
 * has a live one of that name (one statement). */
int store_app_insert(struct store *st, const struct app_row *r);
/* The workspace's live app by id or (by_name) name; workspace NULL: any
 * workspace's, by id. -ENOENT "app X not found". */
int store_app_load(struct store *st, const char *workspace, const char *key, bool by_name,
		   struct app_row *r);
/* Write every field of r back if the stored gen is still expect_gen (r->gen
 * is written as it is: the caller bumps it when the sandbox changes):
 * -ESTALE when another change came first, -ENOENT when it was deleted. */
int store_app_update(struct store *st, const struct app_row *r, int64_t expect_gen);
/* Mark it deleted: -ENOENT unless live and the workspace's. */
int store_app_delete(struct store *st, const char *workspace, const char *id);
typedef int store_app_fn(void *ctx, const struct app_row *r);
/* The workspace's live apps (NULL: every workspace's), oldest first. */
int store_app_each(struct store *st, const char *workspace, store_app_fn *fn, void *ctx);
/* The live app served by sandbox (as its sandbox now): -ENOENT if none. */
int store_app_by_sandbox(struct store *st, const char *sandbox, struct app_row *r);

/* What happened to an app (deployed, its VM ended and was remade, ...),
 * kept for its logs: the newest APP_EVENTS_KEPT of each app. */
#define APP_EVENTS_KEPT 200
int store_app_event(struct store *st, const char *app, const char *text);
typedef int store_app_event_fn(void *ctx, int64_t ts_ms, const char *text);
int store_app_events(struct store *st, const char *app, store_app_event_fn *fn, void *ctx);

/* The log lines of an app's earlier sandboxes (those its VM ended in or
 * a deploy replaced), with kiln's line about each replacement, oldest
 * first: what ops/app.c keeps when it replaces one (it bounds the text).
 * kept: "" when none (malloc'd, the caller frees it). keep replaces the
 * text; drop forgets it (the app was deleted). */
int store_app_log_kept(struct store *st, const char *app, char **text);
int store_app_log_keep(struct store *st, const char *app, const char *text);
int store_app_log_drop(struct store *st, const char *app);

#endif
