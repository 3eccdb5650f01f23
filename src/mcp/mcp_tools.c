/*
 * mcp_tools: the tools of kiln's MCP servers (mcp.h). The sandbox tools
 * (shell, run_code, read_file, write_file, write_files, copy_file,
 * move_file, list_dir) act on the endpoint's sandbox,
 * or, on the workspace endpoint, on the one their sandbox_id names; the
 * others manage the caller's sandboxes. They call the operations layer
 * and the host interface as the REST handlers do, with tighter output
 * bounds: what they return goes into a model's context.
 */
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/code.h"
#include "api/file_batch.h"
#include "api/hcommon.h"
#include "api/http.h"
#include "mcp/mcp.h"
#include "api/render.h"
#include "ops/app.h"
#include "ops/database.h"
#include "ops/credit.h"
#include "ops/ops.h"
#include "ops/validate.h"
#include "common/err.h"
#include "common/strbuf.h"
#include "net/net.h"
#include "proxy/proxy.h"

#include <errno.h>
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define OUTPUT_MAX (1u << 20)		/* shell: bytes kept per stream */
#define FILE_MAX (4u << 20)		/* read_file */
#define LIST_MAX 10000
#define APP_TAIL_DEFAULT 100		/* app_logs, as GET /v1/apps/{app}/logs */
#define APP_LINE_MAX 8192
/* A bound of ops.h or hostif.h, as the number a schema shows. */
#define STR_(x) #x
#define NUM(x) STR_(x)

/* ---- results (field tables, ops/fields.h: mcp.c makes the outputSchema; the
 * objects the REST API answers with too are api/render.h's) ------------ */

/* read_file's and write_file's */
static const char *const encodings[] = { "utf-8", "base64", NULL };

static const struct field out_read_file[] = {
	{ .name = "path", .type = FIELD_STRING, .required = true },
	{ .name = "encoding", .type = FIELD_STRING, .required = true, .choices = encodings },
	{ .name = "content", .type = FIELD_STRING, .required = true },
	{ .name = "size", .type = FIELD_INTEGER, .required = true },
	{ .type = FIELD_END }
};
/* write_file's, and each of write_files' */
static const struct field out_write_file[] = {
	{ .name = "path", .type = FIELD_STRING, .required = true },
	{ .name = "size", .type = FIELD_INTEGER, .required = true },
	{ .type = FIELD_END }
};
/* copy_file's and move_file's */
static const struct field out_copy_file[] = {
	{ .name = "from", .type = FIELD_STRING, .required = true },
	{ .name = "to", .type = FIELD_STRING, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_write_files[] = {
	{ .name = "files", .type = FIELD_OBJECTS, .required = true, .items = out_write_file },
	{ .name = "count", .type = FIELD_INTEGER, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_list_dir[] = {
	{ .name = "path", .type = FIELD_STRING, .required = true },
	{ .name = "truncated", .type = FIELD_BOOLEAN, .required = true },
	{ .name = "entries", .type = FIELD_OBJECTS, .required = true, .items = render_dir_entry_fields },
	{ .type = FIELD_END }
};
static const struct field out_list_sandboxes[] = {
	{ .name = "sandboxes", .type = FIELD_OBJECTS, .required = true, .items = render_sandbox_fields },
	{ .type = FIELD_END }
};
static const struct field out_delete_sandbox[] = {
	{ .name = "sandbox_id", .type = FIELD_STRING, .required = true },
	{ .name = "deleted", .type = FIELD_BOOLEAN, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_fork_sandbox[] = {
	{ .name = "sandboxes", .type = FIELD_OBJECTS, .required = true, .items = render_sandbox_fields },
	{ .name = "failed", .type = FIELD_INTEGER },
	{ .name = "error", .type = FIELD_STRING },
	{ .type = FIELD_END }
};
static const struct field out_promote_failed[] = {
	{ .name = "id", .type = FIELD_STRING, .required = true },
	{ .name = "error", .type = FIELD_STRING, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_promote_sandbox[] = {
	{ .name = "kept", .type = FIELD_STRING, .required = true },
	{ .name = "parent", .type = FIELD_STRING, .required = true },
	{ .name = "deleted", .type = FIELD_STRINGS, .required = true },
	{ .name = "parent_deleted", .type = FIELD_BOOLEAN, .required = true },
	{ .name = "failed", .type = FIELD_OBJECTS, .required = true, .items = out_promote_failed },
	{ .type = FIELD_END }
};
static const struct field out_list_volumes[] = {
	{ .name = "volumes", .type = FIELD_OBJECTS, .required = true, .items = render_volume_fields },
	{ .type = FIELD_END }
};
static const struct field out_delete_volume[] = {
	{ .name = "volume_id", .type = FIELD_STRING, .required = true },
	{ .name = "deleted", .type = FIELD_BOOLEAN, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_detach_volume[] = {
	{ .name = "sandbox_id", .type = FIELD_STRING, .required = true },
	{ .name = "volume", .type = FIELD_STRING, .required = true },
	{ .name = "detached", .type = FIELD_BOOLEAN, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_list_databases[] = {
	{ .name = "databases", .type = FIELD_OBJECTS, .required = true, .items = render_database_fields },
	{ .type = FIELD_END }
};
/* delete_database's and delete_app's */
static const struct field out_deleted[] = {
	{ .name = "id", .type = FIELD_STRING, .required = true },
	{ .name = "name", .type = FIELD_STRING, .required = true },
	{ .name = "deleted", .type = FIELD_BOOLEAN, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_list_database_backups[] = {
	{ .name = "backups", .type = FIELD_OBJECTS, .required = true, .items = render_db_backup_fields },
	{ .type = FIELD_END }
};
static const struct field out_list_apps[] = {
	{ .name = "apps", .type = FIELD_OBJECTS, .required = true, .items = render_app_fields },
	{ .type = FIELD_END }
};
static const struct field out_app_logs_events[] = {
	{ .name = "at", .type = FIELD_STRING, .required = true, .nullable = true },
	{ .name = "text", .type = FIELD_STRING, .required = true },
	{ .type = FIELD_END }
};
static const struct field out_app_logs[] = {
	{ .name = "events", .type = FIELD_OBJECTS, .required = true, .items = out_app_logs_events },
	{ .name = "lines", .type = FIELD_STRINGS, .required = true },
	{ .type = FIELD_END }
};




/* ---- arguments ------------------------------------------------------------------------------------ */

/* Each tool's arguments are a field table (ops/fields.h): an operation's
 * own (create_sandbox is ops_create_fields), or, for what only a tool
 * takes (a shell command, a path), one written here. mcp.c makes the
 * inputSchema from it; nothing here is schema text. */

const struct field mcp_no_args[] = { { .type = FIELD_END } };
const struct field mcp_sandbox_only[] = { MCP_SANDBOX_ID("The sandbox (sbx_...)."), { .type = FIELD_END } };

static const char *const languages[] = { "python", "bash", "sh", "javascript", NULL };

#define GUEST_PATH(n, req, desc) \
	{ .name = n, .type = FIELD_STRING, .required = req, .max = 4095, .description = desc }
#define TIMEOUT_MS(desc) \
	{ .name = "timeout_ms", .type = FIELD_INTEGER, .min = 1, .max = 86400000, .description = desc }

static const struct field shell_args[] = {
	{ .name = "command", .type = FIELD_STRING, .required = true, .max = 262144, .description = "The shell command." },
	TIMEOUT_MS("Kill the command after this long (default 120000)."),
	{ .type = FIELD_END }
};
static const struct field run_code_args[] = {
	{ .name = "code", .type = FIELD_STRING, .required = true, .max = 1048576, .description = "The source: a cell." },
	{ .name = "language", .type = FIELD_STRING, .choices = languages,
	  .description = "Default: the context's (python for the default context); each language has its own "
			 "default context." },
	{ .name = "context", .type = FIELD_STRING, .max = 64,
	  .description = "A context id (from POST .../code/contexts); default: the language's default context." },
	TIMEOUT_MS("Interrupt the cell after this long (default 120000); its variables stay."),
	{ .name = "envs", .type = FIELD_MAP, .env_names = true, .max = CODE_ENVS_MAX, .key_max = CODE_ENV_NAME_MAX,
	  .item_max = CODE_ENV_VALUE_MAX,
	  .description = "Environment variables of this cell only (os.environ, process.env, exported shell "
			 "variables), undone after it." },
	{ .type = FIELD_END }
};
static const struct field path_args[] = {
	GUEST_PATH("path", true, "An absolute path in the sandbox."), { .type = FIELD_END }
};
static const struct field write_file_args[] = {
	GUEST_PATH("path", true, "An absolute path in the sandbox."),
	{ .name = "content", .type = FIELD_STRING, .required = true,
	  .description = "The file's content, as text or base64." },
	{ .name = "encoding", .type = FIELD_STRING, .choices = encodings,
	  .description = "How content is written: utf-8 (default) or base64." },
	{ .type = FIELD_END }
};
static const struct field copy_args[] = {
	GUEST_PATH("from", true, "An absolute path in the sandbox."),
	GUEST_PATH("to", true, "The copy's absolute path."),
	{ .name = "recursive", .type = FIELD_BOOLEAN, .description = "Copy a directory and everything in it (default false)." },
	{ .name = "replace", .type = FIELD_BOOLEAN, .description = "Overwrite an existing target (default false)." },
	{ .type = FIELD_END }
};
static const struct field move_args[] = {
	GUEST_PATH("from", true, "An absolute path in the sandbox."),
	GUEST_PATH("to", true, "Its new absolute path."),
	{ .name = "replace", .type = FIELD_BOOLEAN, .description = "Replace an existing target (default false)." },
	{ .type = FIELD_END }
};
static const struct field batch_file[] = {
	GUEST_PATH("path", true, "An absolute path in the sandbox."),
	{ .name = "content", .type = FIELD_STRING, .description = "The file's content as text (or give content_base64)." },
	{ .name = "content_base64", .type = FIELD_STRING, .description = "The file's bytes, base64." },
	{ .name = "mode", .type = FIELD_SCALAR, .description = "Octal text such as \"755\" (default 644)." },
	{ .type = FIELD_END }
};
static const struct field write_files_args[] = {
	{ .name = "files", .type = FIELD_OBJECTS, .required = true, .min = 1, .max = FILE_BATCH_MAX_FILES,
	  .items = batch_file },
	{ .type = FIELD_END }
};
static const struct field fork_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."), { .type = FIELD_INCLUDE, .items = ops_fork_fields }, { .type = FIELD_END }
};
static const struct field promote_args[] = {
	MCP_SANDBOX_ID("The child to keep (sbx_...)."),
	{ .name = "delete_parent", .type = FIELD_BOOLEAN, .description = "Delete the parent too (default false)." },
	{ .type = FIELD_END }
};
static const struct field delete_volume_args[] = {
	{ .name = "volume_id", .type = FIELD_STRING, .description = "The volume (vol_...)." },
	{ .name = "name", .type = FIELD_STRING, .max = OPS_VOLUME_NAME_MAX, .description = "Its name, instead of volume_id." },
	{ .type = FIELD_END }
};
static const struct field attach_volume_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."), { .type = FIELD_INCLUDE, .items = ops_volume_entry_fields },
	{ .type = FIELD_END }
};
static const struct field detach_volume_args[] = {
	MCP_SANDBOX_ID("The sandbox (sbx_...)."),
	{ .name = "volume", .type = FIELD_STRING, .required = true, .max = 64,
	  .description = "The volume's name or id (vol_...)." },
	{ .name = "force", .type = FIELD_BOOLEAN,
	  .description = "Kill the processes using the mount first (default false)." },
	{ .type = FIELD_END }
};
/* The database or app a tool acts on: its name or id, as the REST routes take. */
#define DB_KEY { .name = "database", .type = FIELD_STRING, .required = true, .max = 64, \
		 .description = "The database's name or id (db_...)." }
#define APP_KEY { .name = "app", .type = FIELD_STRING, .required = true, .max = 64, \
		  .description = "The app's name or id (app_...)." }
static const struct field db_key_args[] = { DB_KEY, { .type = FIELD_END } };
/* update_database: PATCH /v1/databases/{database}'s body and the key. */
static const struct field db_update_args[] = {
	DB_KEY, { .type = FIELD_INCLUDE, .items = ops_db_update_fields }, { .type = FIELD_END }
};
static const struct field app_key_args[] = { APP_KEY, { .type = FIELD_END } };
/* deploy_app: POST /v1/apps/{app}/deploy's body and the key. */
static const struct field deploy_app_args[] = {
	APP_KEY, { .type = FIELD_INCLUDE, .items = ops_app_deploy_fields }, { .type = FIELD_END }
};
static const struct field app_logs_args[] = {
	APP_KEY,
	{ .name = "tail", .type = FIELD_INTEGER, .min = 0, .max = 10000,
	  .description = "How many of the log's last lines (default 100)." },
	{ .type = FIELD_END }
};

/* ---- helpers --------------------------------------------------------------------------------------- */

const char *tool_sandbox_id(struct mcp_call *c, const json_t *args)
{
	return c->sandbox_id ? c->sandbox_id : json_string_value(json_object_get(args, "sandbox_id"));
}

/* The tool's sandbox is the caller's; *row (NULL: only the check) gets its
 * record. A tool call is not activity by itself (docs/api.md): reads are
 * not; what changes the sandbox says so (touch). */
int tool_sandbox(struct mcp_call *c, const json_t *args, bool touch, struct sbx_row *row)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	oc.touch = touch;
	return ops_sandbox(&oc, tool_sandbox_id(c, args), row);
}

/* The sandbox, entered for guest work (waking it if it hibernates): hg->g. */
int tool_guest(struct mcp_call *c, const json_t *args, struct hostif_guest *hg)
{
	int rc = tool_sandbox(c, args, false, NULL);
	return rc < 0 ? rc : hostif_enter(c->r->api->hostif, c->r->workspace, tool_sandbox_id(c, args), hg);
}

void tool_leave(struct mcp_call *c, struct hostif_guest *hg)
{
	hostif_leave(c->r->api->hostif, hg);
}

/* The sandbox's record as a tool's answer (the row is cleared). */
json_t *sandbox_json(struct sbx_row *row)
{
	json_t *j = render_sandbox(row);
	sbx_row_clear(row);
	return j;
}

/* ---- shell ---------------------------------------------------------------------------------------- */

struct capped {
	struct strbuf b;
	bool truncated;
};

/* ctx: struct capped[2], stdout's and stderr's. */
static int keep(void *ctx, const struct guest_ev *ev)
{
	struct capped *o = (struct capped *)ctx + (ev->kind == GEV_STDOUT ? 0 : 1);
	size_t room = o->b.len < OUTPUT_MAX ? OUTPUT_MAX - o->b.len : 0;
	strbuf_append(&o->b, ev->data, ev->len < room ? ev->len : room);
	o->truncated = o->truncated || ev->len > room;
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int run_shell(struct mcp_call *c, struct guest *g, const char *command, char **env,
		     int64_t timeout_ms, struct mcp_out *out)
{
	struct guest_cmd cmd = { .shell = command, .env = (const char *const *)env,
				 .timeout_ms = (uint32_t)timeout_ms };
	double t0 = now_ms();
	struct capped o[2] = { { .truncated = false }, { .truncated = false } };
	struct capped *so = &o[0], *se = &o[1];
	strbuf_init(&so->b);
	strbuf_init(&se->b);
	struct guest_ev ev;
	int rc = guest_exec_run(g, &cmd, keep, o, req_socket(c->r), -1, &ev);
	if (rc >= 0 && (strbuf_failed(&so->b) || strbuf_failed(&se->b)))
		rc = errf(ENOMEM, "out of memory holding the output");
	if (rc >= 0) {
		/* For the model: stdout, then stderr and how it ended when there
		 * is something to say. */
		struct strbuf t;
		strbuf_init(&t);
		strbuf_append(&t, so->b.data, so->b.len);
		if (se->b.len)
			strbuf_printf(&t, "%s[stderr]\n%.*s", t.len ? "\n" : "", (int)se->b.len, se->b.data);
		if (ev.timed_out)
			strbuf_printf(&t, "%s[timed out after %lld ms]", t.len ? "\n" : "", (long long)timeout_ms);
		if (ev.code != 0 || t.len == 0)
			strbuf_printf(&t, "%s[exit code %d]", t.len ? "\n" : "", ev.code);
		if (so->truncated || se->truncated)
			strbuf_printf(&t, "\n[output truncated to %u bytes per stream]", OUTPUT_MAX);
		json_t *text = render_text(t.data, t.len);
		json_array_append_new(out->content, json_pack("{s:s,s:o}", "type", "text", "text", text));
		strbuf_free(&t);
		out->structured = render_exec_result(so->b.data, so->b.len, se->b.data, se->b.len, ev.code, ev.signal,
						     ev.timed_out, now_ms() - t0, so->truncated || se->truncated);
	}
	strbuf_free(&so->b);
	strbuf_free(&se->b);
	return rc < 0 ? rc : 0;
}

static int t_shell(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct hostif_guest hg;
	struct sbx_row row;
	int rc = tool_sandbox(c, args, false, &row);
	if (rc < 0)
		return rc;
	char **env = ops_env_merge(row.env, NULL);
	sbx_row_clear(&row);
	rc = env ? hostif_enter(c->r->api->hostif, c->r->workspace, tool_sandbox_id(c, args), &hg)
		 : errf(ENOMEM, "out of memory");
	if (rc == 0) {
		rc = run_shell(c, hg.g, field_str(args, "command", ""), env, field_int(args, "timeout_ms", 120000),
			       out);
		tool_leave(c, &hg);
	}
	free(env);
	return rc;
}

/* ---- the code interpreter --------------------------------------------------------------------------- */

/* A cell in the sandbox's interpreter (api/code.h): for the model, its
 * output, its value and its error as text, and each PNG it made as an
 * image block; the Execution as the structured result. */
static int t_run_code(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	const char *context = field_str(args, "context", NULL), *lang = field_str(args, "language", NULL);
	int rc = context ? code_context_name(context) : 0;
	rc = rc ?: lang ? code_language(lang, &lang) : 0;
	rc = rc ?: tool_sandbox(c, args, true, NULL);
	int64_t timeout_ms = field_int(args, "timeout_ms", 120000), wait;
	json_t *request, *execution, *fail, *envs = NULL;
	rc = rc ?: code_envs(args, "envs", &envs);
	rc = rc ?: code_run_request(field_str(args, "code", ""), lang, context, (timeout_ms + 999) / 1000, OUTPUT_MAX,
				    envs, &wait, &request);
	rc = rc ?: code_cell(c->r->api->hostif, c->r->workspace, tool_sandbox_id(c, args), request, req_socket(c->r),
			     wait, OUTPUT_MAX, &execution, &fail);
	if (rc < 0)
		return rc;
	if (fail) {
		rc = errf(!strcmp(code_str(fail, "code"), "not_found") ? ENOENT : EINVAL, "%s", code_str(fail, "message"));
		json_decref(fail);
		return rc;
	}
	struct strbuf t;
	strbuf_init(&t);
	strbuf_printf(&t, "%s", code_str(execution, "stdout"));
	const char *err = code_str(execution, "stderr");
	if (*err)
		strbuf_printf(&t, "%s[stderr]\n%s", t.len ? "\n" : "", err);
	size_t i;
	json_t *res;
	json_array_foreach(json_object_get(execution, "results"), i, res) {
		if (json_is_true(json_object_get(res, "is_main_result")) && json_is_string(json_object_get(res, "text")))
			strbuf_printf(&t, "%s[value]\n%s", t.len ? "\n" : "", code_str(res, "text"));
		if (json_is_string(json_object_get(res, "png")))
			json_array_append_new(out->content, json_pack("{s:s,s:s,s:s}", "type", "image", "data",
								      code_str(res, "png"), "mimeType", "image/png"));
	}
	json_t *e = json_object_get(execution, "error");
	if (json_is_object(e))
		strbuf_printf(&t, "%s[error] %s: %s\n%s", t.len ? "\n" : "", code_str(e, "name"), code_str(e, "value"),
			      code_str(e, "traceback"));
	if (!t.len)
		strbuf_printf(&t, "[no output]");
	json_array_insert_new(out->content, 0, json_pack("{s:s,s:o}", "type", "text", "text", render_text(t.data, t.len)));
	strbuf_free(&t);
	out->structured = execution;
	return 0;
}

/* ---- files ---------------------------------------------------------------------------------------- */

static int read_all(int fd, char *buf, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t got = pread(fd, buf + off, n - off, (off_t)off);
		if (got <= 0)
			return errf(EIO, "reading the file back: %s", got < 0 ? strerror(errno) : "short");
		off += (size_t)got;
	}
	return 0;
}

/* The tools whose only arguments are the sandbox and a path: check the
 * path, then enter the sandbox. */
static int path_guest(struct mcp_call *c, const json_t *args, const char **path, struct hostif_guest *hg)
{
	*path = field_str(args, "path", "");
	int rc = v_guest_path(*path, "path");
	return rc < 0 ? rc : tool_guest(c, args, hg);
}

static int t_read_file(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	const char *path;
	struct hostif_guest hg;
	int rc = path_guest(c, args, &path, &hg);
	if (rc < 0)
		return rc;
	int fd = memfd_create("kiln-mcp-read", MFD_CLOEXEC);
	uint64_t size = 0;
	rc = fd < 0 ? errf_sys("memfd_create") : guest_read_file(hg.g, path, fd, FILE_MAX, &size);
	tool_leave(c, &hg);
	if (rc == -EFBIG)
		rc = errf(EFBIG, "%s is larger than read_file's limit of %u bytes; download it with "
			  "GET /v1/sandboxes/{id}/files", path, FILE_MAX);
	char *buf = rc == 0 ? malloc(size + 1) : NULL;
	if (rc == 0 && !buf)
		rc = errf(ENOMEM, "out of memory");
	if (rc == 0)
		rc = read_all(fd, buf, size);
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	json_t *st;
	if (utf8_valid(buf, size)) {
		mcp_text(out, buf, size);
		st = json_pack("{s:s,s:s,s:s%,s:I}", "path", path, "encoding", "utf-8", "content", buf,
			       (size_t)size, "size", (json_int_t)size);
	} else {
		/* Bytes that are not text travel as base64, as an embedded
		 * resource (clients know it is binary) and in the structure. */
		char *b64 = base64_of(buf, size), uri[4200];
		snprintf(uri, sizeof uri, "file://%s", path);
		json_array_append_new(out->content, json_pack("{s:s,s:{s:s,s:s,s:s}}", "type", "resource",
			"resource", "uri", uri, "mimeType", "application/octet-stream", "blob", b64 ? b64 : ""));
		st = json_pack("{s:s,s:s,s:s,s:I}", "path", path, "encoding", "base64", "content",
			       b64 ? b64 : "", "size", (json_int_t)size);
		free(b64);
	}
	free(buf);
	out->structured = st;
	return st ? 0 : errf(ENOMEM, "out of memory");
}

static int decode_base64(const char *s, size_t n, uint8_t **out, size_t *len)
{
	struct base64_decode_ctx ctx;
	base64_decode_init(&ctx);
	uint8_t *b = malloc(BASE64_DECODE_LENGTH(n) + 1);
	*len = BASE64_DECODE_LENGTH(n);
	if (!b)
		return errf(ENOMEM, "out of memory");
	if (!base64_decode_update(&ctx, len, b, n, s) || !base64_decode_final(&ctx)) {
		free(b);
		return errf(EINVAL, "content is not valid base64");
	}
	*out = b;
	return 0;
}

static int t_write_file(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	const char *path = field_str(args, "path", ""), *enc = field_str(args, "encoding", "utf-8");
	json_t *content = json_object_get(args, "content");
	int rc = v_guest_path(path, "path");
	if (rc == 0 && path[strlen(path) - 1] == '/')
		rc = errf(EINVAL, "path names a directory; give the file's path");
	if (rc < 0)
		return rc;
	const uint8_t *data = (const uint8_t *)json_string_value(content);
	size_t len = json_string_length(content);
	uint8_t *decoded = NULL;
	if (!strcmp(enc, "base64")) {
		if ((rc = decode_base64((const char *)data, len, &decoded, &len)) < 0)
			return rc;
		data = decoded;
	}
	int fd = memfd_create("kiln-mcp-write", MFD_CLOEXEC);
	if (fd < 0)
		rc = errf_sys("memfd_create");
	for (size_t off = 0; rc == 0 && off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w <= 0)
			rc = errf_sys("buffering the file");
		else
			off += (size_t)w;
	}
	free(decoded);
	if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0)
		rc = errf_sys("rewinding the file");
	struct hostif_guest hg;
	uint64_t bytes = 0;
	if (rc == 0 && (rc = tool_guest(c, args, &hg)) == 0) {
		rc = guest_write_file(hg.g, path, 0644, true, fd, &bytes);
		tool_leave(c, &hg);
	}
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return rc;
	char text[4200];
	int n = snprintf(text, sizeof text, "wrote %llu bytes to %s", (unsigned long long)bytes, path);
	mcp_text(out, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
	out->structured = json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)bytes);
	return 0;
}

/* copy_file, move_file: as POST .../files/copy and .../files/rename. */
static int t_copy(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	const char *from = field_str(args, "from", ""), *to = field_str(args, "to", "");
	bool recursive = json_is_true(json_object_get(args, "recursive"));
	bool replace = json_is_true(json_object_get(args, "replace"));
	int rc = v_guest_path(from, "from");
	rc = rc ?: v_guest_path(to, "to");
	struct hostif_guest hg;
	if (rc < 0 || (rc = tool_guest(c, args, &hg)) < 0)
		return rc;
	const char *argv[] = { "copy", from, to, recursive ? "1" : "0", replace ? "1" : "0", NULL };
	rc = guest_builtin_run(hg.g, argv, NULL, -1, -1);
	tool_leave(c, &hg);
	if (rc < 0)
		return rc;
	char text[8300];
	int n = snprintf(text, sizeof text, "copied %s to %s", from, to);
	mcp_text(out, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
	out->structured = json_pack("{s:s,s:s}", "from", from, "to", to);
	return 0;
}

static int t_move(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	const char *from = field_str(args, "from", ""), *to = field_str(args, "to", "");
	bool replace = json_is_true(json_object_get(args, "replace"));
	int rc = v_guest_path(from, "from");
	rc = rc ?: v_guest_path(to, "to");
	struct hostif_guest hg;
	if (rc < 0 || (rc = tool_guest(c, args, &hg)) < 0)
		return rc;
	rc = guest_rename(hg.g, from, to, replace);
	tool_leave(c, &hg);
	if (rc < 0)
		return rc;
	char text[8300];
	int n = snprintf(text, sizeof text, "moved %s to %s", from, to);
	mcp_text(out, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
	out->structured = json_pack("{s:s,s:s}", "from", from, "to", to);
	return 0;
}

/* write_files: as POST .../files/write, all or none (file_batch.h). */
static int t_write_files(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct file_batch *fb;
	int rc = file_batch_parse(json_object_get(args, "files"), &fb);
	if (rc < 0)
		return rc == -EMSGSIZE ? errf(EINVAL, "%s", errmsg()) : rc;
	struct hostif_guest hg;
	json_t *written = NULL;
	if ((rc = tool_guest(c, args, &hg)) == 0) {
		rc = file_batch_write(hg.g, fb, &written);
		tool_leave(c, &hg);
	}
	file_batch_free(fb);
	if (rc < 0)
		return rc;
	struct strbuf t;
	strbuf_init(&t);
	size_t i;
	json_t *f;
	strbuf_printf(&t, "wrote %zu files:\n", json_array_size(json_object_get(written, "files")));
	json_array_foreach(json_object_get(written, "files"), i, f)
		strbuf_printf(&t, "%10lld  %s\n", (long long)json_integer_value(json_object_get(f, "size")),
			      json_string_value(json_object_get(f, "path")));
	rc = strbuf_failed(&t) ? errf(ENOMEM, "out of memory") : 0;
	if (rc == 0) {
		mcp_text(out, t.data, t.len);
		out->structured = written;
	} else {
		json_decref(written);
	}
	strbuf_free(&t);
	return rc;
}

struct listing {
	json_t *entries;
	struct strbuf text;
	bool truncated;
};

static int add_entry(void *ctx, const struct guest_stat *e)
{
	struct listing *l = ctx;
	if (json_array_size(l->entries) >= LIST_MAX) {
		l->truncated = true;
		return 1;
	}
	json_t *j = stat_json(e, "name", e->name);
	if (!j || json_array_append_new(l->entries, j) < 0)
		return -ENOMEM;
	const char *type = json_string_value(json_object_get(j, "type"));
	strbuf_printf(&l->text, "%-7s %10llu  %s%s\n", type, (unsigned long long)e->size, e->name,
		      !strcmp(type, "dir") ? "/" : "");
	return 0;
}

static int t_list_dir(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	const char *path;
	struct hostif_guest hg;
	int rc = path_guest(c, args, &path, &hg);
	if (rc < 0)
		return rc;
	struct listing l = { json_array(), { 0 }, false };
	strbuf_init(&l.text);
	rc = l.entries ? guest_list(hg.g, path, 1, add_entry, &l) : errf(ENOMEM, "out of memory");
	tool_leave(c, &hg);
	if (rc == 0 && strbuf_failed(&l.text))
		rc = errf(ENOMEM, "out of memory");
	if (rc == 0) {
		if (l.truncated)
			strbuf_printf(&l.text, "[only the first %d entries]\n", LIST_MAX);
		if (l.text.len == 0)
			strbuf_printf(&l.text, "(empty directory)\n");
		mcp_text(out, l.text.data, l.text.len);
		out->structured = json_pack("{s:s,s:O,s:b}", "path", path, "entries", l.entries,
					    "truncated", l.truncated);
	}
	json_decref(l.entries);
	strbuf_free(&l.text);
	return rc;
}

/* ---- sandboxes -------------------------------------------------------------------------------------- */

static int t_create(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	struct sbx_row row;
	req_caller(c->r, &oc);
	oc.shaped = args;	/* mcp.c checked it against ops_create_fields */
	int rc = ops_create(&oc, args, &row);
	if (rc < 0)
		return rc;
	json_t *j = sandbox_json(&row);
	mcp_json(out, j);
	return j ? 0 : errf(ENOMEM, "out of memory");
}

static int add_row(void *ctx, const struct sbx_row *row)
{
	return json_array_append_new(ctx, render_sandbox(row));
}

static int t_list(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	(void)args;
	json_t *a = json_array();
	if (!a || hostif_each(c->r->api->hostif, c->r->workspace, add_row, a) < 0) {
		json_decref(a);
		return errf(ENOMEM, "out of memory");
	}
	mcp_json(out, json_pack("{s:o}", "sandboxes", a));
	return 0;
}

static int t_get(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct sbx_row row;
	int rc = tool_sandbox(c, args, false, &row);
	if (rc < 0)
		return rc;
	json_t *j = sandbox_json(&row);
	mcp_json(out, j);
	return j ? 0 : errf(ENOMEM, "out of memory");
}

static int t_delete(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	int rc = tool_sandbox(c, args, false, NULL);
	if (rc < 0)
		return rc;
	rc = hostif_delete(c->r->api->hostif, c->r->workspace, tool_sandbox_id(c, args));
	if (rc < 0)
		return rc;
	mcp_json(out, json_pack("{s:s,s:b}", "sandbox_id", field_str(args, "sandbox_id", ""), "deleted", 1));
	return 0;
}

static int t_fork(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	struct ops_forked f;
	req_caller(c->r, &oc);
	int rc = ops_fork(&oc, tool_sandbox_id(c, args), args, false, &f);
	if (rc < 0 && f.made == 0)
		return rc;
	json_t *a = json_array();
	for (int i = 0; i < f.made; i++)
		if (f.kids[i].id[0])
			json_array_append_new(a, render_sandbox(&f.kids[i]));
	ops_forked_clear(&f);
	json_t *j = json_pack("{s:o}", "sandboxes", a);
	if (j && rc < 0) {
		json_object_set_new(j, "failed", json_integer(f.count - f.made));
		json_object_set_new(j, "error", json_string(f.why));
	}
	mcp_json(out, j);
	return j ? 0 : errf(ENOMEM, "out of memory");
}

struct promoted {
	json_t *deleted, *failed;
	bool parent_deleted;
};

static void promoted_one(void *ctx, const char *id, bool is_parent, int rc)
{
	struct promoted *p = ctx;
	if (rc == 0 && is_parent)
		p->parent_deleted = true;
	else if (rc == 0)
		json_array_append_new(p->deleted, json_string(id));
	else
		json_array_append_new(p->failed, json_pack("{s:s,s:s}", "id", id, "error", errmsg()));
}

static int t_promote(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	const json_t *dp = json_object_get(args, "delete_parent");
	struct promoted p = { json_array(), json_array(), false };
	char parent[ID_MAX] = "";
	int rc = p.deleted && p.failed ? ops_promote(&oc, tool_sandbox_id(c, args), json_is_true(dp), parent,
						     promoted_one, &p)
				       : errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(p.deleted);
		json_decref(p.failed);
		return rc;
	}
	json_t *j = json_pack("{s:s,s:s,s:o,s:b,s:o}", "kept", tool_sandbox_id(c, args), "parent", parent,
			      "deleted", p.deleted, "parent_deleted", p.parent_deleted, "failed", p.failed);
	mcp_json(out, j);
	return j ? 0 : errf(ENOMEM, "out of memory");
}

static int lifecycle(struct mcp_call *c, const json_t *args, struct mcp_out *out,
		     int (*action)(struct hostif *, const char *, const char *, struct sbx_row *))
{
	struct sbx_row row;
	int rc = tool_sandbox(c, args, true, NULL);
	if (rc < 0)
		return rc;
	rc = action(c->r->api->hostif, c->r->workspace, tool_sandbox_id(c, args), &row);
	if (rc < 0)
		return rc;
	json_t *j = sandbox_json(&row);
	mcp_json(out, j);
	return j ? 0 : errf(ENOMEM, "out of memory");
}

static int t_hibernate(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct sbx_row row;
	struct ops_caller oc;
	int rc = tool_sandbox(c, args, true, NULL);
	if (rc < 0)
		return rc;
	req_caller(c->r, &oc);
	if ((rc = ops_hibernate(&oc, tool_sandbox_id(c, args), &row)) < 0)
		return rc;	/* a plan's limit: its message names it */
	json_t *j = sandbox_json(&row);
	mcp_json(out, j);
	return j ? 0 : errf(ENOMEM, "out of memory");
}

static int t_wake(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	int rc = ops_credit_check(&oc);
	return rc < 0 ? rc : lifecycle(c, args, out, hostif_wake);
}

static int t_pause(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	return lifecycle(c, args, out, hostif_pause);
}

static int t_resume(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	int rc = ops_credit_check(&oc);
	return rc < 0 ? rc : lifecycle(c, args, out, hostif_resume);
}

/* ---- volumes ----------------------------------------------------------------------------------------- */

/* rc of an operation that filled v: its error, or v as the tool's result. */
static int volume_result(const struct ops_caller *oc, int rc, const struct vol_row *v, struct mcp_out *out)
{
	if (rc < 0)
		return rc;
	json_t *j = render_volume(ops_volume_json(oc, v));
	return mcp_json(out, j);
}

static int t_volume_create(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	struct vol_row v;
	req_caller(c->r, &oc);
	oc.shaped = args;
	/* a plan's limit: its message names it */
	return volume_result(&oc, ops_volume_create(&oc, args, &v), &v, out);
}

static int t_volume_list(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	(void)args;
	struct ops_caller oc;
	json_t *a, *v;
	size_t i;
	req_caller(c->r, &oc);
	int rc = ops_volume_list(&oc, &a);
	if (rc < 0)
		return rc;
	json_array_foreach(a, i, v)
		render_volume(v);
	mcp_json(out, json_pack("{s:o}", "volumes", a));
	return 0;
}

/* delete_volume takes the volume's id, as DELETE /v1/volumes/{id} does, or
 * its name (unique in the workspace), found in the workspace's list. */
static int t_volume_delete(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	const char *id = field_str(args, "volume_id", NULL), *name = field_str(args, "name", NULL);
	if (!id == !name)
		return errf(EINVAL, "give the volume's volume_id (vol_...) or its name, not both");
	char found[ID_MAX] = "";
	if (name) {
		json_t *a, *v;
		size_t i;
		int rc = ops_volume_list(&oc, &a);
		if (rc < 0)
			return rc;
		json_array_foreach(a, i, v)
			if (!strcmp(field_str(v, "name", ""), name))
				snprintf(found, sizeof found, "%s", field_str(v, "id", ""));
		json_decref(a);
		if (!found[0])
			return errf(ENOENT, "volume %s not found", name);
		id = found;
	}
	int rc = ops_volume_delete(&oc, id);	/* attached: -EBUSY naming the sandbox */
	if (rc < 0)
		return rc;
	mcp_json(out, json_pack("{s:s,s:b}", "volume_id", id, "deleted", 1));
	return 0;
}

/* attach_volume: create_sandbox's volumes entry {name, path, read_only}
 * for a sandbox that runs already (POST /v1/sandboxes/{id}/volumes). */
static int t_volume_attach(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	struct vol_row v;
	req_caller(c->r, &oc);
	json_t *entry = json_deep_copy(args);
	if (!entry)
		return errf(ENOMEM, "out of memory");
	json_object_del(entry, "sandbox_id");
	/* the one-writer rule, no free slot: -EBUSY naming it */
	int rc = ops_volume_attach(&oc, field_str(args, "sandbox_id", ""), entry, &v);
	json_decref(entry);
	return volume_result(&oc, rc, &v, out);
}

static int t_volume_detach(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	const char *sbx = field_str(args, "sandbox_id", ""), *vol = field_str(args, "volume", "");
	/* in use in the guest (and not forced): -EBUSY naming the mount */
	int rc = ops_volume_detach(&oc, sbx, vol, json_is_true(json_object_get(args, "force")));
	if (rc < 0)
		return rc;
	mcp_json(out, json_pack("{s:s,s:s,s:b}", "sandbox_id", sbx, "volume", vol, "detached", 1));
	return 0;
}

/* ---- databases ----------------------------------------------------------------------------------------- */

/* A database's JSON as the REST routes give it (password: create's only). */
static int db_result(const struct ops_caller *oc, int rc, const struct db_row *d, const char *password,
		     struct mcp_out *out)
{
	if (rc < 0)
		return rc;
	return mcp_json(out, render_database(oc, d, password));
}

static int t_db_create(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct db_row d;
	char pw[DB_PASSWORD_LEN + 1] = "";
	oc.shaped = args;
	int rc = ops_db_create(&oc, args, &d, pw);
	rc = db_result(&oc, rc, &d, pw, out);
	explicit_bzero(pw, sizeof pw);
	return rc;
}

struct db_list {
	const struct ops_caller *oc;
	json_t *a;
};

static int db_list_one(void *ctx, const struct db_row *d)
{
	struct db_list *l = ctx;
	json_t *j = render_database(l->oc, d, NULL);
	return j && json_array_append_new(l->a, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

static int t_db_list(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	(void)args;
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct db_list l = { &oc, json_array() };
	int rc = l.a ? ops_db_each(&oc, db_list_one, &l) : errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(l.a);
		return rc;
	}
	mcp_json(out, json_pack("{s:o}", "databases", l.a));
	return 0;
}

static int t_db_get(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct db_row d;
	return db_result(&oc, ops_db_get(&oc, field_str(args, "database", ""), &d), &d, NULL, out);
}

static int t_db_delete(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct db_row d;
	int rc = ops_db_get(&oc, field_str(args, "database", ""), &d);
	rc = rc ?: ops_db_delete(&oc, d.id);
	if (rc == 0)
		mcp_json(out, json_pack("{s:s,s:s,s:b}", "id", d.id, "name", d.name, "deleted", 1));
	return rc;
}

static int t_db_reset_password(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct db_row d;
	char pw[DB_PASSWORD_LEN + 1] = "";
	int rc = ops_db_reset_password(&oc, field_str(args, "database", ""), &d, pw);
	rc = db_result(&oc, rc, &d, pw, out);
	explicit_bzero(pw, sizeof pw);
	return rc;
}

/* update_database: PATCH /v1/databases/{database}, its body the
 * arguments less database; answers the database as GET does. */
static int t_db_update(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct db_row d;
	json_t *body = json_deep_copy(args);
	if (!body)
		return errf(ENOMEM, "out of memory");
	json_object_del(body, "database");
	oc.shaped = body;	/* checked as db_update_args: the key and ops_db_update_fields */
	/* no free external port: -EAGAIN saying so */
	int rc = ops_db_update(&oc, field_str(args, "database", ""), body, &d);
	json_decref(body);
	return db_result(&oc, rc, &d, NULL, out);
}

/* A backup now (a snapshot of the database's sandbox; the plan's
 * snapshots limit: its message names it). */
static int t_db_backup(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct db_backup_row b;
	int rc = ops_db_backup(&oc, field_str(args, "database", ""), &b);
	if (rc < 0)
		return rc;
	json_t *j = ops_db_backup_json(&b);
	return mcp_json(out, j);
}

static int t_db_backups(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	json_t *a;
	int rc = ops_db_backups(&oc, field_str(args, "database", ""), &a);
	if (rc < 0)
		return rc;
	mcp_json(out, json_pack("{s:o}", "backups", a));
	return 0;
}

/* ---- apps ---------------------------------------------------------------------------------------------- */

/* An app's JSON as GET /v1/apps/{app} gives it: its URL as this request's
 * client reaches the server (proxy_app_url), created_at and updated_at. */
static json_t *app_out(struct mcp_call *c, const struct ops_caller *oc, const struct app_row *a)
{
	char url[400];
	proxy_app_url(c->r, a->id, url, sizeof url);
	return render_app(oc, a, url);
}

static int app_result(struct mcp_call *c, const struct ops_caller *oc, int rc, const struct app_row *a,
		      struct mcp_out *out)
{
	if (rc < 0)
		return rc;
	json_t *j = app_out(c, oc, a);
	return mcp_json(out, j);
}

/* An app's row is 21 KiB: on the heap, not the connection thread's stack
 * (as h_apps.c). */
static struct app_row *app_row_new(void)
{
	struct app_row *a = malloc(sizeof *a);
	if (!a)
		errf(ENOMEM, "out of memory");
	return a;
}

static int t_app_create(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	/* As POST /v1/apps: an app is served on its own origin only. */
	if (!c->r->api->cfg->domain[0])
		return errf(EINVAL, "%s", APP_NO_DOMAIN);
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct app_row *a = app_row_new();
	if (!a)
		return -ENOMEM;
	/* not listening in time: -ETIMEDOUT with the end of its log; a plan's
	 * limit: its message names it */
	oc.shaped = args;
	int rc = app_result(c, &oc, ops_app_create(&oc, args, a), a, out);
	free(a);
	return rc;
}

struct app_list {
	struct mcp_call *c;
	const struct ops_caller *oc;
	json_t *a;
};

static int app_list_one(void *ctx, const struct app_row *a)
{
	struct app_list *l = ctx;
	json_t *j = app_out(l->c, l->oc, a);
	return j && json_array_append_new(l->a, j) == 0 ? 0 : errf(ENOMEM, "out of memory");
}

static int t_app_list(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	(void)args;
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct app_list l = { c, &oc, json_array() };
	int rc = l.a ? store_app_each(oc.store, oc.workspace, app_list_one, &l) : errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(l.a);
		return rc;
	}
	mcp_json(out, json_pack("{s:o}", "apps", l.a));
	return 0;
}

static int t_app_get(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct app_row *a = app_row_new();
	if (!a)
		return -ENOMEM;
	int rc = app_result(c, &oc, ops_app_get(&oc, field_str(args, "app", ""), a), a, out);
	free(a);
	return rc;
}

/* deploy_app: POST /v1/apps/{app}/deploy, its body the arguments less app. */
static int t_app_deploy(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	json_t *body = json_deep_copy(args);
	struct app_row *a = body ? app_row_new() : NULL;
	if (!a) {
		json_decref(body);
		return errf(ENOMEM, "out of memory");
	}
	json_object_del(body, "app");
	oc.shaped = body;	/* checked as deploy_app_args: the key and ops_app_deploy_fields */
	/* never listened: -ETIMEDOUT, the old version serving on; another
	 * deploy switched first: -ESTALE */
	int rc = app_result(c, &oc, ops_app_deploy(&oc, field_str(args, "app", ""), body, a), a, out);
	json_decref(body);
	free(a);
	return rc;
}

static int t_app_delete(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct app_row *a = app_row_new();
	if (!a)
		return -ENOMEM;
	/* By its id once found, so that the answer names the app deleted
	 * whichever way the caller named it. */
	int rc = ops_app_get(&oc, field_str(args, "app", ""), a);
	rc = rc ?: ops_app_delete(&oc, a->id);
	if (rc == 0)
		mcp_json(out, json_pack("{s:s,s:s,s:b}", "id", a->id, "name", a->name, "deleted", 1));
	free(a);
	return rc;
}

static int add_app_event(void *ctx, int64_t ts_ms, const char *text)
{
	return json_array_append_new(ctx, json_pack("{s:o,s:s}", "at", render_time(ts_ms), "text", text));
}

/* app_logs: what GET /v1/apps/{app}/logs answers (no follow: a tool call
 * ends), and the same as plain text for the model. */
static int t_app_logs(struct mcp_call *c, const json_t *args, struct mcp_out *out)
{
	struct ops_caller oc;
	req_caller(c->r, &oc);
	struct app_row *a = app_row_new();
	json_t *events = a ? json_array() : NULL, *lines = events ? json_array() : NULL;
	int rc = lines ? ops_app_get(&oc, field_str(args, "app", ""), a) : errf(ENOMEM, "out of memory");
	rc = rc ?: store_app_events(oc.store, a->id, add_app_event, events);
	char *text = NULL;
	size_t n = 0;
	rc = rc ?: ops_app_log_tail(&oc, a, (int)field_int(args, "tail", APP_TAIL_DEFAULT), &text, &n);
	free(a);
	if (rc < 0) {
		json_decref(events);
		json_decref(lines);
		return rc;
	}
	struct strbuf t;
	strbuf_init(&t);
	size_t i;
	json_t *e;
	json_array_foreach(events, i, e)
		strbuf_printf(&t, "[%s] %s\n", field_str(e, "at", ""), field_str(e, "text", ""));
	strbuf_printf(&t, "[log]\n");
	for (const char *p = text, *end = text + n; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_array_append_new(lines, render_text(p, len < APP_LINE_MAX ? len : APP_LINE_MAX));
		p += len + (nl != NULL);
	}
	strbuf_append(&t, text ? text : "", n);
	if (!n)
		strbuf_printf(&t, "(empty)\n");
	free(text);
	rc = strbuf_failed(&t) ? errf(ENOMEM, "out of memory") : 0;
	if (rc == 0) {
		mcp_text(out, t.data, t.len);
		out->structured = json_pack("{s:o,s:o}", "events", events, "lines", lines);
	} else {
		json_decref(events);
		json_decref(lines);
	}
	strbuf_free(&t);
	return rc;
}

/* ---- the table ------------------------------------------------------------------------------------------ */

const struct mcp_tool mcp_tools[] = {
	{ "shell", "Run a shell command",
	  "Run a command with /bin/sh -c in the sandbox and wait for it to end. Returns its "
	  "standard output, then its standard error and exit code when there is something to say "
	  "(each stream is cut after 1 MiB).",
	  shell_args,
	  render_exec_result_fields, MCP_SANDBOX | MCP_DESTRUCTIVE, t_shell },
	{ "run_code", "Run code",
	  "Run Python (or bash, sh, javascript) in the sandbox's interpreter, which keeps variables, "
	  "imports and functions from one call to the next (as a notebook does; bash keeps its variables, "
	  "exports and working directory; a context id keeps separate sets). Returns what it printed, the "
	  "value of its last expression, its error with the traceback (bash: a failing last command), and "
	  "any plot as an image. Needs python3 in the sandbox (the base template); javascript needs node "
	  "(the code-interpreter template).",
	  run_code_args,
	  render_code_execution_fields, MCP_SANDBOX | MCP_DESTRUCTIVE, t_run_code },
	{ "read_file", "Read a file",
	  "Read a file of the sandbox (at most 4 MiB). Text comes back as text; other bytes as "
	  "base64 (an embedded resource, and encoding \"base64\" in the structured result).",
	  path_args,
	  out_read_file, MCP_SANDBOX | MCP_READ_ONLY, t_read_file },
	{ "write_file", "Write a file",
	  "Create or replace a file of the sandbox (atomically; missing directories are made).",
	  write_file_args,
	  out_write_file, MCP_SANDBOX | MCP_DESTRUCTIVE, t_write_file },
	{ "copy_file", "Copy a file or directory",
	  "Copy a file (or, with recursive, a directory tree) of the sandbox to another path, keeping "
	  "modes; missing parent directories of the target are made. An existing target is an error "
	  "unless replace.",
	  copy_args,
	  out_copy_file, MCP_SANDBOX | MCP_DESTRUCTIVE, t_copy },
	{ "move_file", "Move or rename a file or directory",
	  "Move (rename) a file or directory of the sandbox to another path. An existing target is an "
	  "error unless replace.",
	  move_args,
	  out_copy_file, MCP_SANDBOX | MCP_DESTRUCTIVE, t_move },
	{ "write_files", "Write several files",
	  "Create or replace several files of the sandbox in one call, all or none: each is staged "
	  "beside its target and they are put in place only when all are written (missing directories "
	  "are made). At most " NUM(FILE_BATCH_MAX_FILES) " files, 64 MiB in all.",
	  write_files_args,
	  out_write_files, MCP_SANDBOX | MCP_DESTRUCTIVE, t_write_files },
	{ "list_dir", "List a directory",
	  "List the entries of a directory of the sandbox: type, size and name, one a line.",
	  path_args,
	  out_list_dir, MCP_SANDBOX | MCP_READ_ONLY, t_list_dir },
	{ "create_sandbox", "Create a sandbox",
	  "Create a sandbox (a Linux microVM) from a template, running in well under a second, or "
	  "from a snapshot. base is Debian with python3, pip, git, curl and a C compiler; minimal is busybox.",
	  ops_create_fields,
	  render_sandbox_fields, 0, t_create },
	{ "list_sandboxes", "List sandboxes", "List the workspace's sandboxes, oldest first.",
	  mcp_no_args,
	  out_list_sandboxes, MCP_READ_ONLY, t_list },
	{ "get_sandbox", "Describe a sandbox", "One sandbox: its status, template, size, parent and usage.",
	  mcp_sandbox_only, render_sandbox_fields, MCP_READ_ONLY, t_get },
	{ "delete_sandbox", "Delete a sandbox", "Delete a sandbox: its VM, its disk and its files are gone.",
	  mcp_sandbox_only,
	  out_delete_sandbox, MCP_DESTRUCTIVE, t_delete },
	{ "fork_sandbox", "Fork a sandbox",
	  "Fork a running sandbox into count copies, memory and disk (copy-on-write): each child "
	  "continues from the parent's state, to try different paths from one point.",
	  fork_args,
	  out_fork_sandbox, 0, t_fork },
	{ "promote_sandbox", "Keep one fork, delete its siblings",
	  "After fork_sandbox: keep this child and delete every other sandbox forked from the same "
	  "parent (and the parent with delete_parent), in one call; says what was deleted and what failed.",
	  promote_args,
	  out_promote_sandbox, MCP_DESTRUCTIVE, t_promote },
	{ "hibernate_sandbox", "Hibernate a sandbox",
	  "Save a sandbox to disk and stop its VM: it costs nothing until used again (any tool "
	  "call on it wakes it).",
	  mcp_sandbox_only, render_sandbox_fields, 0, t_hibernate },
	{ "wake_sandbox", "Wake a sandbox", "Restore a hibernated sandbox now (tools wake it anyway).",
	  mcp_sandbox_only, render_sandbox_fields, 0, t_wake },
	{ "pause_sandbox", "Pause a sandbox",
	  "Stop a sandbox's CPUs, keeping its memory and processes: no CPU is billed, and it comes back "
	  "in milliseconds (any tool call on it resumes it).",
	  mcp_sandbox_only, render_sandbox_fields, 0, t_pause },
	{ "resume_sandbox", "Resume a sandbox", "Start a paused sandbox's CPUs again (tools resume it anyway).",
	  mcp_sandbox_only, render_sandbox_fields, 0, t_resume },
	{ "create_volume", "Create a volume",
	  "Make a named volume: storage that outlives sandboxes (an ext4 disk). Attach it with "
	  "create_sandbox's volumes [{name, path}]; a read-write one is one sandbox's at a time.",
	  ops_volume_create_fields,
	  render_volume_fields, 0, t_volume_create },
	{ "list_volumes", "List volumes",
	  "List the workspace's volumes, oldest first, with the sandboxes each is attached to (path, read-only).",
	  mcp_no_args,
	  out_list_volumes, MCP_READ_ONLY, t_volume_list },
	{ "delete_volume", "Delete a volume",
	  "Delete a volume and its data, by its id or its name. A volume attached to a sandbox is not "
	  "deleted (the error names the sandbox): delete that sandbox first.",
	  delete_volume_args,
	  out_delete_volume, MCP_DESTRUCTIVE, t_volume_delete },
	{ "attach_volume", "Attach a volume to a running sandbox",
	  "Mount one of the workspace's volumes at path in a sandbox that runs already (a hibernated one is "
	  "woken); refused while another sandbox writes to it, for a path or volume the sandbox has, or when "
	  "its volume slots are all used.",
	  attach_volume_args,
	  render_volume_fields, 0, t_volume_attach },
	{ "detach_volume", "Detach a volume from a sandbox",
	  "Sync, unmount and let go a volume (its name or id) of a sandbox, so another may take it; refused, "
	  "naming the mount, while a process in the sandbox uses it, unless force kills those processes first.",
	  detach_volume_args,
	  out_detach_volume, MCP_DESTRUCTIVE, t_volume_detach },
	{ "create_database", "Create a PostgreSQL database",
	  "Make a managed PostgreSQL 15 database in a microVM of its own, reachable from this workspace's "
	  "sandboxes only (psql is in template postgres). Returns once it takes connections, with its url "
	  "(postgresql://postgres:PASSWORD@HOST:5432/postgres): the password is shown here only. "
	  "from_backup restores a backup (a snapshot id) into the new database.",
	  ops_db_fields,
	  render_database_fields, 0, t_db_create },
	{ "list_databases", "List databases", "List the workspace's databases, oldest first (no passwords).",
	  mcp_no_args,
	  out_list_databases, MCP_READ_ONLY, t_db_list },
	{ "get_database", "Describe a database",
	  "One database: its status, host, port and url (without the password).",
	  db_key_args,
	  render_database_fields, MCP_READ_ONLY, t_db_get },
	{ "delete_database", "Delete a database", "Delete a database and its VM (its backups are kept).",
	  db_key_args,
	  out_deleted, MCP_DESTRUCTIVE, t_db_delete },
	{ "reset_database_password", "Reset a database's password",
	  "Set a new random password for the database's user: the old one fails from then on. Returns the "
	  "database with its new url and password (shown here only).",
	  db_key_args,
	  render_database_fields, MCP_DESTRUCTIVE, t_db_reset_password },
	{ "update_database", "Change a database's settings",
	  "Set a database's backup schedule (backup_interval_seconds, backups_kept), its idle time before it "
	  "hibernates, and whether it is reachable from outside kiln (external_access): the fields given "
	  "change, the rest stay. Returns the database as get_database does.",
	  db_update_args, render_database_fields, 0, t_db_update },
	{ "backup_database", "Back up a database",
	  "A backup of the database now (a snapshot of its VM, memory and disk, counted in the plan's "
	  "snapshots); create_database with from_backup restores it into a new database.",
	  db_key_args,
	  render_db_backup_fields, 0, t_db_backup },
	{ "list_database_backups", "List a database's backups",
	  "The database's backups, manual and scheduled, oldest first.",
	  db_key_args,
	  out_list_database_backups, MCP_READ_ONLY, t_db_backups },
	{ "create_app", "Deploy an app",
	  "Run a long-lived service (a web server, an API) in a sandbox kiln keeps for it, at a stable URL "
	  "(url in the result) that needs no key: command must listen on port. Returns once it does; "
	  "kiln restarts the command when it exits (restart), remakes the sandbox when it ends, hibernates "
	  "it when idle and wakes it on the next request. A running sandbox (sandbox_id) can be made an app.",
	  ops_app_create_fields,
	  render_app_fields, 0, t_app_create },
	{ "list_apps", "List apps", "List the workspace's apps, oldest first, with their URLs and status.",
	  mcp_no_args,
	  out_list_apps, MCP_READ_ONLY, t_app_list },
	{ "get_app", "Describe an app",
	  "One app: its URL, command, port, status (its sandbox's: running, hibernated, ... or failed with "
	  "a reason), version and how often its VM was remade.",
	  app_key_args,
	  render_app_fields, MCP_READ_ONLY, t_app_get },
	{ "deploy_app", "Deploy a new version of an app",
	  "Make the app's next version (any field given replaces the app's, the rest are kept) in a new "
	  "sandbox, wait until it listens, then switch the URL to it; the old version serves until then, "
	  "and on as before if the new one never listens.",
	  deploy_app_args,
	  render_app_fields, MCP_DESTRUCTIVE, t_app_deploy },
	{ "delete_app", "Delete an app", "Delete an app: its sandboxes and its URL are gone.",
	  app_key_args,
	  out_deleted, MCP_DESTRUCTIVE, t_app_delete },
	{ "app_logs", "Read an app's logs",
	  "What kiln did with the app (deployed, restarted, remade: events) and the last lines its command "
	  "and the supervisor wrote (its output, and lines such as \"kiln: the app exited with status 1\").",
	  app_logs_args,
	  out_app_logs, MCP_READ_ONLY, t_app_logs },
};
const int mcp_ntools = sizeof mcp_tools / sizeof mcp_tools[0];
