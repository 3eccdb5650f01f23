/*
 * cgroup: one cgroup v2 per sandbox VMM, CGROUP/<sandbox id> (CGROUP is
 * --cgroup, /sys/fs/cgroup/kiln by default), with cpu.max (its vCPUs'
 * worth), memory.max (cgroup_memory_mib; no swap) and
 * pids.max. The kernel kills a VMM that goes over memory.max (the whole
 * cgroup: memory.oom.group), and memory.events says so afterwards.
 * Hosts with only cgroup v1 get no cgroups (logged once): the rest of the
 * jail still applies.
 */
#ifndef KILN_HOST_CGROUP_H
#define KILN_HOST_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct host_config;

/* The parent made and the cpu, memory and pids controllers enabled on
 * the way down from the cgroup v2 root. false: no cgroup v2 here. */
bool cgroup_setup(const struct host_config *cfg);
/* memory.max of a VMM whose guest has memory_mib: twice that (its pages,
 * and a snapshot of them in the page cache) plus --vmm-overhead, plus
 * disk_mib (cgroup_disk_mib: what its disk may hold in RAM). */
int cgroup_memory_mib(const struct host_config *cfg, int memory_mib, int disk_mib);
/* How much of a disk of disk_bytes its VMM's cgroup is charged for: all
 * of it where DATA/sandboxes is on a RAM filesystem (tmpfs, ramfs), whose
 * pages are the file's only copy and are charged to the process that
 * wrote them; 0 on a disk filesystem, whose page cache the VMM keeps
 * written back and dropped (src/vmm/overlay.c) and the kernel can
 * reclaim. docs/kilnd.md "Memory of a VMM". */
int cgroup_disk_mib(const struct host_config *cfg, uint64_t disk_bytes);
/* A sandbox's cgroup with its limits; path gets its directory. */
int cgroup_make(const struct host_config *cfg, const char *id, int vcpus, int memory_mib,
		int disk_mib, char path[PATH_MAX]);
/* Its cpu.weight (1-10000, 100 the kernel's default): a pool member's
 * VMM restores and boots at 1, so that refilling the pool yields the CPU
 * to creates and running guests (pool.h), and gets 100 when a create
 * takes it, before its vCPUs resume. */
#define CGROUP_WEIGHT_POOLED 1
#define CGROUP_WEIGHT_DEFAULT 100
int cgroup_cpu_weight(const struct host_config *cfg, const char *id, int weight);
/* Its memory.max in MiB as set (for messages); 0 if unknown. */
int cgroup_memory_max_mib(const struct host_config *cfg, const char *id);
/* Move pid (a whole process) into the cgroup at path. */
int cgroup_move(const char *path, pid_t pid);
/* Did the kernel kill something in it for going over memory.max? */
bool cgroup_oom_killed(const struct host_config *cfg, const char *id);
/* Remove it (idempotent); processes still in it are killed first. */
void cgroup_remove(const struct host_config *cfg, const char *id);
/* The parent, when nothing is left in it (clean shutdown). */
void cgroup_finish(const struct host_config *cfg);

#endif
