/*
 * jail: the walls around a kiln-vmm process, applied before any guest code
 * runs (docs/vmm.md, "Jail"). In order:
 *
 *   1. join the sandbox's network namespace (the TAP is opened there) and
 *      its cgroup (cpu, memory, pids limits set by the owner);
 *   2. a new mount namespace whose root is a fresh tmpfs holding only the
 *      directories named in binds (read-write) and ro_binds, each at its
 *      own path, so paths mean the same inside and outside;
 *   3. rlimits;
 *   4. once the VM is built: drop to an unprivileged uid/gid with no
 *      supplementary groups and no way to regain privileges, and load the
 *      main thread's seccomp allowlist; each vCPU thread adds its own.
 *
 * A new PID namespace is the caller's part (the VMM must be forked into
 * it). The /dev/kvm descriptor is opened before the jail and kept.
 */
#ifndef KILN_VMM_JAIL_H
#define KILN_VMM_JAIL_H

#include <stdbool.h>
#include <sys/types.h>

#define JAIL_MAX_BINDS 8

struct jail_config {
	const char *root;                    /* NULL: no jail */
	uid_t uid;
	gid_t gid;
	const char *cgroup;                  /* a cgroup directory to join */
	const char *netns;                   /* a network namespace to join */
	const char *binds[JAIL_MAX_BINDS];   /* read-write */
	int nbinds;
	const char *ro_binds[JAIL_MAX_BINDS];
	int nro_binds;
	/* No PID namespace of its own: for VMMs that will be live-forked.
	 * Their children share the parent's namespaces, and in a PID
	 * namespace of the parent's they would all die with it (its PID 1). */
	bool no_pidns;
};

/* jail_join: step 1 (as root). The TAP is opened after it. */
int jail_join(const struct jail_config *j);
/* jail_enter: steps 2-3 (as root). */
int jail_enter(const struct jail_config *j);
/* jail_lock: step 4, main thread, before the vCPUs start. */
int jail_lock(const struct jail_config *j);
/* jail_noop_handler: a handler for PID 1's signals (see main.c). */
void jail_noop_handler(int sig);
/* jail_vcpu_thread: the vCPU threads' allowlist, at thread start. */
int jail_vcpu_thread(void);
/* jail_seccomp: the main thread's allowlist alone (no uid change, no
 * NO_NEW_PRIVS): for tests that run code under the VMM's filter. The
 * caller must have no_new_privs set or be privileged. */
int jail_seccomp(void);

#endif
