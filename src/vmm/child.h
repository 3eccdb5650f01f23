/*
 * child: starting a VM in a new process from captured state, for zygote
 * spawns and live forks. The caller forks twice (so the VM is re-parented
 * to the nearest subreaper and leaves no zombie behind), and the new
 * process builds its own KVM VM over the guest memory it inherited
 * copy-on-write: no file is read and no page copied on the way.
 */
#ifndef KILN_VMM_CHILD_H
#define KILN_VMM_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/memory.h"

struct vmm_config;

struct child_result {
	pid_t pid;
	double ready_ms;   /* from t0 to the child reporting ready */
};

/* child_start: fork a VM running payload over mem with cfg; returns a
 * descriptor on which child_wait learns its fate (which closes it). The
 * VM is forked by an intermediate process (so that it is nobody's child
 * here): with mid NULL this waits for that process to end; else *mid is
 * its pid, for child_reap once the report has been read (a zygote serves
 * other spawns meanwhile). */
int child_start(const struct guest_mem *mem, const struct vmm_config *cfg,
		const uint8_t *payload, size_t len, uint64_t t0, const int *keep_fds, pid_t *mid);
/* child_reap: wait for a process of ours to end (-1: none). */
void child_reap(pid_t pid);
int child_wait(int fd, struct child_result *out);
/* children_start: child_start for the n children of one fork, at the cost
 * of a single fork of the caller: one seed process, forked with the
 * memory as it is now, starts the children one by one while the caller
 * runs on (a fork copies the caller's page tables, so a pause that forked
 * every child grew with their number). fds[i] is child i's descriptor for
 * child_wait, *seed the seed's pid for child_reap, called once every
 * child has reported. 0, or -errno with nothing started. */
#define CHILDREN_MAX 64
int children_start(const struct guest_mem *mem, const struct vmm_config *cfgs, int n,
		   const uint8_t *payload, size_t len, uint64_t t0, int *fds, pid_t *seed);
/* child_parse: for callers that read the descriptor themselves (into a
 * buffer of CHILD_REPORT_MAX, which it only reads, so it can be called
 * again as more comes): 1 and *out when the child reported ready, 0
 * while more is to come, -errno when it failed or went away. */
#define CHILD_REPORT_MAX 600
int child_parse(const char *buf, size_t n, bool eof, struct child_result *out);
/* child_discard: a child that failed or never reported ready is killed
 * rather than left running unseen (out->pid is set once its pid is known,
 * -1 before). child_wait does this itself. */
void child_discard(const struct child_result *res);
/* child_spawn: fork a VM running payload over mem with cfg. Blocks until
 * it reports ready (or fails: -errno, errmsg() says why). keep_fds lists
 * descriptors the caller holds that the child must not close (-1 ends). */
int child_spawn(const struct guest_mem *mem, const struct vmm_config *cfg,
		const uint8_t *payload, size_t len, uint64_t t0,
		const int *keep_fds, struct child_result *out);

#endif
