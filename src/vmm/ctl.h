/*
 * ctl: the control socket. Clients send one JSON object per line, such as
 * {"cmd":"pause"}, and get one JSON object per line back: {"ok":true,...}
 * or {"ok":false,"error":"..."}. Requests are handled on the main thread,
 * between device events, so a handler sees a consistent VM.
 */
#ifndef KILN_VMM_CTL_H
#define KILN_VMM_CTL_H

#include "common/strbuf.h"
#include "common/json.h"

struct vm;

/* A command handler writes its reply's members after {"ok":true (reply
 * already holds that opening) and returns 0, or returns -errno with
 * errmsg() set for an error reply. */
typedef int (*ctl_cmd_fn)(struct vm *vm, const struct json *req, struct strbuf *reply);

/* A handler that cannot answer yet (a spawn waiting for its child) calls
 * ctl_defer(), returns CTL_DEFERRED, and answers later with ctl_finish().
 * The client may send more requests meanwhile. */
#define CTL_DEFERRED 1
struct ctl_pending;
struct ctl_pending *ctl_defer(struct vm *vm, const struct json *req);
/* ctl_finish: reply {"ok":true<members>} when rc == 0, else the error in
 * errmsg(). The client may be gone: then the reply is dropped. */
void ctl_finish(struct ctl_pending *p, int rc, const char *members);

/* A handler whose error reply must carry members too (a failed fork says
 * which disk layer its parent now writes to) returns ctl_fail(reply, rc,
 * members) instead of rc. */
#define CTL_FAILED 2
int ctl_fail(struct strbuf *reply, int rc, const char *members);

struct ctl_command {
	const char *name;
	ctl_cmd_fn fn;
};

/* ctl_start: listen on path; commands is a table ending with a NULL name,
 * or NULL for the running VM's commands (ctl_vm_commands). */
int ctl_start(struct vm *vm, const char *path, const struct ctl_command *commands);
void ctl_stop(struct vm *vm);
extern const struct ctl_command ctl_vm_commands[];

/* Parsing a child VM's settings (spawn, fork) from a request into cfg,
 * which starts as a copy of the parent's. Strings are copied; a passed
 * TAP ("tap_fd") is claimed from vm's current request. */
struct vmm_config;
int ctl_child_config(struct vm *vm, const struct json *req, struct vmm_config *cfg);
/* ctl_claim_fd: take descriptor number index passed (SCM_RIGHTS) with the
 * request being handled; the caller owns it then. */
int ctl_claim_fd(struct vm *vm, int64_t index);

#endif
