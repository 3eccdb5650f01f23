/*
 * code: the client side of the code interpreter kilnd runs inside a
 * sandbox (code.c says how), for the REST handlers (h_code.c) and the MCP
 * tool. Its program, src/guest/interp/kiln_interp.py, is built into kilnd
 * as interp_py (scripts/embed-text makes the C file at build time).
 *
 * Errors are -errno with errmsg() set: -ENOTSUP the sandbox has no
 * python3 (the interpreter's own refusal of a language the sandbox lacks,
 * javascript without node, is a fail message "unsupported"), -ETIMEDOUT no answer in time, -ECONNABORTED the client (its
 * socket, client_fd) went away, -EPROTO the guest answered nonsense.
 */
#ifndef KILN_API_CODE_H
#define KILN_API_CODE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostif/hostif.h"

extern const char interp_py[];
extern const size_t interp_py_len;

#define CODE_TIMEOUT_MAX (24 * 3600)	/* a cell's timeout_seconds */
#define CODE_REPLY_GRACE_MS 30000	/* waited past a cell's own time limit */

/* A request under way: send it with code_open, read its answer messages
 * with code_next, end with code_close (which interrupts a cell still
 * running). */
struct code_conn {
	struct hostif *hi;
	struct hostif_guest hg;
	int fd, client;
	char *buf;
	size_t len, cap;
	int64_t deadline;
};
int code_open(struct hostif *hi, const char *ws, const char *id, json_t *request, int client_fd,
	      int64_t wait_ms, struct code_conn *c);
/* The next message (a JSON object, yours): 1, or -errno. */
int code_next(struct code_conn *c, json_t **msg);
void code_close(struct code_conn *c);

/* A cell's "run" request; *wait_ms how long its answer may take. language
 * NULL: the context's (python for the default context); max_output bounds
 * stdout and stderr inside the guest (0: the interpreter's 1 MiB); envs
 * (NULL: none; checked by code_envs) are that cell's environment
 * variables, undone after it. */
int code_run_request(const char *code, const char *language, const char *context, int64_t timeout_s,
		     uint64_t max_output, json_t *envs, int64_t *wait_ms, json_t **out);

/* A cell's envs: at most CODE_ENVS_MAX variables, names of shell variables
 * ([A-Za-z_][A-Za-z0-9_]*, at most CODE_ENV_NAME_MAX bytes), values
 * strings without NUL of at most CODE_ENV_VALUE_MAX bytes (the
 * interpreter, kiln_interp.py, has the same bounds). The member key of
 * obj into *out (borrowed; left alone when absent); -EINVAL naming the
 * bad variable. */
#define CODE_ENVS_MAX 128
#define CODE_ENV_NAME_MAX 256
#define CODE_ENV_VALUE_MAX 65536
int code_envs(const json_t *obj, const char *key, json_t **out);
/* The interpreter's name of a language: python (python3), bash, sh or
 * javascript (js, node); -EINVAL naming the languages there are. */
int code_language(const char *s, const char **canonical);
/* Run a cell to its end: *execution the API's Execution object, or *fail
 * the interpreter's refusal ({"t":"fail","code","message"}); both yours. */
int code_cell(struct hostif *hi, const char *ws, const char *id, json_t *request, int client_fd,
	      int64_t wait_ms, uint64_t max_text, json_t **execution, json_t **fail);

/* A Result (text, html, markdown, png, svg, json, is_main_result) from the
 * interpreter's MIME map; an ExecutionError from its error message. */
json_t *code_result(json_t *data, bool main);
json_t *code_error(json_t *msg);
/* A string member of a message, "" if missing. */
const char *code_str(json_t *o, const char *k);
/* Whether s is a context id: -EINVAL saying why not. */
int code_context_name(const char *s);
int64_t code_mono_ms(void);

#endif
