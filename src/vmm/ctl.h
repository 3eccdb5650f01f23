/*
 * ctl: the control socket. Clients send one JSON object per line, such as
 * {"cmd":"pause"}, and get one JSON object per line back: {"ok":true,...}
 * or {"ok":false,"error":"..."}. Requests are handled on the main thread,
 * between device events, so a handler sees a consistent VM.
 */
#ifndef KILN_VMM_CTL_H
#define KILN_VMM_CTL_H

#include "common/buf.h"
#include "common/json.h"

struct vm;

int ctl_start(struct vm *vm, const char *path);
void ctl_stop(struct vm *vm);

/* A command handler writes its reply's members after {"ok":true (reply
 * already holds that opening) and returns 0, or returns -errno with
 * errmsg() set for an error reply. */
typedef int (*ctl_cmd_fn)(struct vm *vm, const struct json *req, struct buf *reply);

#endif
