/*
 * fork: live fork of a running VM. One pause, the state captured once,
 * then N children started from it over copy-on-write memory, then the
 * parent resumes. The control command is {"cmd":"fork","children":[...]}.
 */
#ifndef KILN_VMM_FORK_H
#define KILN_VMM_FORK_H

#include "common/json.h"
#include "common/strbuf.h"

struct vm;
int cmd_fork(struct vm *vm, const struct json *req, struct strbuf *reply);
/* {"cmd":"layer","path":P}: seal the root disk's top, go on over a new one at P. */
int cmd_layer(struct vm *vm, const struct json *req, struct strbuf *reply);

#endif
