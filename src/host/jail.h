/*
 * jail: what kilnd asks of kiln-vmm's jail (docs/vmm.md "Jail") for each
 * VMM it starts or has a zygote spawn, and the host side of it: the
 * sandbox's network namespace, its cgroup (cgroup.h), an unprivileged
 * uid and gid of its own, and an empty per-VM directory DATA/jail/<id>
 * that becomes the root of its mount namespace, holding only:
 *
 *   DATA/sandboxes       read-write; the sandboxes' directories are 0700,
 *                        each owned by its VMM's uid, so a VMM reaches its
 *                        own only (a fork takes a uid of its own: fork_uid.h)
 *   the disk chain's directories below the template or snapshot, the
 *   snapshot being restored, the kernel (read-only)
 *
 * Forks of a VMM stay in its jail (they share its namespaces, not its
 * uid); a VMM that may be forked therefore has no PID namespace of its own, or
 * its forks would die with it. --no-jail turns all of this off (debugging).
 */
#ifndef KILN_HOST_JAIL_H
#define KILN_HOST_JAIL_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct host;
struct sandbox;

#define JAIL_BINDS 8
#define JAIL_PATH 512

struct vmm_jail {
	bool on;
	char root[JAIL_PATH];
	uid_t uid;
	char cgroup[PATH_MAX];			/* "" : none */
	char netns[64];				/* "" : none */
	char binds[2][JAIL_PATH];
	int nbinds;
	char ro_binds[JAIL_BINDS][JAIL_PATH];
	int nro_binds;
};

/* The jail of sb's next VMM: top is its disk (the chain below it is made
 * visible), extra a directory it reads besides (a snapshot, the kernel's;
 * NULL: none), netns its namespace ("" or NULL: none). Makes the root
 * directory and the cgroup, and gives sb->dir to the VMM's uid. */
int vmm_jail_prepare(struct host *h, struct sandbox *sb, const char *top, const char *extra,
		     const char *extra2, const char *netns, struct vmm_jail *out);
/* A child forked from parent: a uid of its own (child->jail_uid), its
 * cgroup, and its directory given to the parent's uid for now (the
 * parent's VMM makes the child's files there). */
int vmm_jail_inherit(struct host *h, struct sandbox *parent, struct sandbox *child);
/* vmm_jail_adopt: give the child's directory, and the plain files the
 * parent's VMM (uid from) made in it, to uid (the child's own,
 * fork_uid.h). */
int vmm_jail_adopt(struct sandbox *child, uid_t from, uid_t uid);
/* Remove the root directory and the cgroup (idempotent). */
void vmm_jail_release(struct host *h, struct sandbox *sb);
/* kiln-vmm's --jail options, appended at argv[*n]. */
void vmm_jail_argv(struct vmm_jail *j, char **argv, int *n, char *uidbuf, size_t cap);
/* The "jail" object of a zygote spawn request. */
json_t *vmm_jail_json(const struct vmm_jail *j);

#endif
