/*
 * hcommon: what several handlers share: finding the caller's sandbox from
 * the path, and the environment of a command (the sandbox's env, then the
 * request's).
 */
#ifndef KILN_API_HCOMMON_H
#define KILN_API_HCOMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/fields.h"

struct api;
struct guest_stat;
struct hostif;
struct hostif_guest;
struct ops_caller;
struct prices;
struct req;
struct sbx_row;

/* The operations layer's view of the request (ops/ops.h): who, when, and
 * whether looking a sandbox up is activity (any method but GET). */
void req_caller(struct req *r, struct ops_caller *out);
/* req_caller with q (zeroed) for what the workspace's plan says of the
 * operation (a create, fork, hibernate, snapshot, volume). */
struct ops_quota;
void req_caller_quota(struct req *r, struct ops_caller *c, struct ops_quota *q);
/* A limit of the plan refused (-EDQUOT, q filled): 429 limit_exceeded
 * naming the limit, its value and the plan (docs/api.md "Limits"), with
 * the headers of quota_headers. */
int reply_limit(struct req *r, const struct ops_quota *q);
/* The headers of an answer that the plan's limits had a say in: the
 * creates window of the workspace's plan (X-RateLimit-Limit, -Remaining,
 * and -Reset in seconds from now) when the operation counted it (a
 * create or fork under a creates cap), and Retry-After on a refusal that
 * knows when trying again can succeed. Points into qh. */
struct quota_headers {
	char limit[24], remaining[24], reset[24], retry[24];
	const char *h[5][2];
};
const char *const (*quota_headers(struct req *r, const struct ops_quota *q, bool refused,
				   struct quota_headers *qh))[2];
/* What usage costs on this server (kilnd --price-*, else the published
 * prices, ops/billing.h). */
const struct prices *req_prices(struct req *r);
/* The caller's workspace's plan (ops_workspace_plan); -errno. */
struct plan;
int req_plan(struct req *r, struct plan *out);

/* The path's {id} ("" without one). */
const char *req_sandbox_id(struct req *r);
/* The sandbox named by the path's {id} is the caller's; a request other
 * than GET counts as activity (TTL). *out (NULL: only the check) gets a
 * copy of its record (sbx_row_clear it). On failure the answer (404 for
 * a sandbox that is not there) has been sent: return *answered. */
int req_sandbox(struct req *r, struct sbx_row *out, int *answered);
/* req_sandbox, then into its guest (woken if hibernated; an operation
 * until req_guest_leave): hg->g. On failure the answer is sent: return
 * *answered. */
int req_guest_enter(struct req *r, struct hostif_guest *hg, int *answered);
void req_guest_leave(struct req *r, struct hostif_guest *hg);
/* The files routes' req_guest_enter: with a `user` query parameter (a
 * name, uid or uid:gid) the guest's file requests act as that user
 * (permissions, owner of new files); a malformed one is a 400, one the
 * guest does not know a 400 from the guest. *user (may be NULL) gets it. */
int req_files_enter(struct req *r, struct hostif_guest *hg, const char **user, int *answered);
int req_query_user(struct req *r, const char **user);
/* The before_body hook (routes.h) of a route that takes an upload: the
 * route's check of the query and headers (NULL: none; -EFBIG answers 413
 * payload_too_large, any other error 400 invalid_request, with its
 * message), then the sandbox must be the caller's (req_sandbox). So a
 * request bound to fail is answered before its body is spooled to
 * DATA/tmp (a client sending Expect: 100-continue sends none of it).
 * -1 to go on, or the answer's MHD result. */
int req_upload_admit(struct req *r, int (*check)(struct req *r));
/* Whether the sandbox has ended (being deleted or deleted, failed, or gone
 * from the host): what a followed log ends with. False while it cannot be
 * told. */
bool sandbox_ended(struct hostif *hi, const char *ws, const char *id);
/* How long a sandbox that ended is still named in 404s (docs/api.md). */
#define ENDED_RETENTION_S (24 * 3600)
/* The 404 for a sandbox id the caller cannot use: "sandbox_ended" with
 * why and when for the caller's sandbox that ended within
 * ENDED_RETENTION_S (its record is kept), else "not_found". */
int reply_sandbox_missing(struct req *r, const char *id);
/* 404 template_not_found with errmsg() and "templates": names (taken). */
int reply_template_missing(struct req *r, json_t *names);
/* A command from a JSON body (exec, exec/stream, processes): cmd or argv,
 * env, cwd, user, timeout_seconds, stdin. */
struct exec_req {
	const char *cmd, *cwd, *user, *stdin_text;
	const char **argv;		/* malloc'd (free it) */
	json_t *env;
	int64_t timeout_s;
	bool background;		/* processes: survives the request */
	bool stdin_open;		/* processes: stdin stays open for POST .../stdin */
	uint32_t id, pid;		/* out of exec_start: the agent's id, the guest pid */
	uint64_t event;			/* out of exec_start: its exec_started event (event_log.h), 0: none */
};
/* A command's bounds: its shell text (256 KiB) and timeout (a day), as
 * plain numbers because MCP's schemas show them. */
#define EXEC_CMD_MAX 262144
#define EXEC_TIMEOUT_MAX 86400
int exec_parse(struct req *r, struct exec_req *e);
/* exec_parse of a JSON object (NULL: empty); stdin_max bounds its stdin. */
int exec_parse_json(const json_t *body, size_t stdin_max, struct exec_req *e);
/* Its fields but stdin (ops/fields.h): MCP's start_process shows them. */
extern const struct field exec_fields[];
/* Start e on g, the guest of sandbox id (entered), with env
 * (ops_env_merge), and tell the event stream: what exec_start does once
 * in, for a front end with no path (MCP's start_process). -errno: the
 * agent refused it (no such program, a bad cwd) or the link broke. */
struct guest;
int exec_launch(struct api *api, const char *ws, const char *id, struct guest *g, char **env,
		struct exec_req *e);
/* Enter the sandbox and start the command (on hg->g, left with
 * req_guest_leave). On failure the answer is sent (return *answered). */
int exec_start(struct req *r, struct exec_req *e, struct hostif_guest *hg, int *answered);
/* Tell the event stream that the command exec_start started ended. */
void exec_ended_event(struct api *api, const char *ws, const char *id, uint64_t event, int code, int sig,
		      double ms);
/* The answers a handler and the workspace MCP (src/mcp) share; each
 * returns -errno with errmsg() set, *out the JSON of the REST answer. */

/* A background process's {id, pid, status, stdout, stderr, exit_code,
 * signal, output_dropped, truncated}: what the agent kept of its output,
 * then more until it ends or wait_s (0 to PROC_WAIT_MAX) pass; each
 * stream cut at max bytes. sock: the client's (gone ends the wait). */
#define PROC_WAIT_MAX 3600
int proc_output(struct guest *g, uint32_t id, int64_t wait_s, uint64_t max, int sock, json_t **out);
/* The processes the guest agent keeps (GET .../processes). */
int proc_list(struct guest *g, json_t **out);
/* A signal as a request gives it ("TERM", "SIGTERM" or 15): -EINVAL
 * naming the field 'signal' otherwise. */
int proc_signal_of(const json_t *v, int *sig);
/* Expose port of the caller's sandbox (its record; counted and added in
 * one transaction: -ENOSPC past PORTS_MAX), or change whether it is
 * public; *existed: it was exposed. The JSON names the URLs through
 * which r's client reaches it. */
#define PORTS_MAX 32	/* per sandbox */
int port_expose(struct req *r, const char *sandbox, int port, bool public, bool *existed, json_t **out);
int port_list(struct req *r, const char *sandbox, json_t **out);
/* The workspace's snapshots (GET /v1/snapshots); one of them (-ENOENT). */
int snapshot_list(struct req *r, json_t **out);
int snapshot_json(struct req *r, const char *id, json_t **out);
/* The templates (GET /v1/templates). */
int templates_list(struct hostif *hi, const char *ws, json_t **out);
/* A fork's answer {sandboxes, failed, error} from ops_fork's rc and f
 * (cleared); NULL when out of memory. */
struct ops_forked;
json_t *forked_json(int rc, struct ops_forked *f);

/* A guest file as the API shows it (FileEntry), its name under key. */
json_t *stat_json(const struct guest_stat *st, const char *key, const char *name);

/* A time in a query parameter called name: RFC 3339 in UTC
 * ("2026-12-01T00:00:00Z"), a date ("2026-12-01", its midnight UTC), or
 * Unix seconds; -EINVAL naming the parameter. */
int query_time(const char *s, const char *name, int64_t *ms);
/* A true/false query parameter (also 1/0); absent: *out unchanged. */
int req_query_bool(struct req *r, const char *name, bool *out);

/* A log route's query: tail=N (0 to LOG_TAIL_MAX; absent: tail_default)
 * and follow=true|false; anything else is -EINVAL naming it. */
#define LOG_TAIL_MAX 10000
struct logq {
	long tail;
	bool follow;
};
int req_log_query(struct req *r, long tail_default, struct logq *q);

#endif
