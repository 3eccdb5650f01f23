/*
 * fork_uid: the host's side of a live fork's own uid (vmm/own_uid.h). A
 * jailed VMM's forks are born with its uid, which would let a fork its
 * guest took over open, connect to and signal the rest of its family; each
 * child asks here for the uid kilnd picked for it (vmm_jail_inherit), on a
 * socket passed with the fork request, and gets it by a mapping of a user
 * namespace it made, which only root can write.
 *
 * What is trusted: the kernel's word on who asks (SO_PASSCRED: the
 * sender's pid and uid), nothing the VMM says about itself. A request is
 * served once per child, only while the fork kilnd asked for runs, and
 * only for a process of the forking VMM's uid that sits in a user
 * namespace of its own with nothing mapped yet. Whichever such process
 * asks first gets the child's uid: any of them is the forking VMM or a
 * copy of it, and a child of a VMM that was taken over before the fork is
 * that VMM's anyway. What the uid then protects is what each family
 * member does after the fork.
 */
#ifndef KILN_HOST_FORK_UID_H
#define KILN_HOST_FORK_UID_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

struct sandbox;

#define FORK_UID_MAX 64

struct fork_uids {
	int sock;                /* ours (SO_PASSCRED) */
	int stop[2];             /* written when the fork's reply came */
	uid_t family;            /* the forking VMM's uid (and gid) */
	struct sandbox **kids;
	int n;
	bool given[FORK_UID_MAX];
	int ngiven;
	pthread_t thread;
	bool running;
};

/* fork_uids_start: serve the n children of one fork (kids[i] their
 * records, jail_uid set) in a thread. *child_end is the socket to pass
 * with the fork request ("uid_fd"), the caller's to close once sent.
 * 0, or -errno with errmsg() set. */
int fork_uids_start(struct fork_uids *fu, uid_t family, struct sandbox **kids, int n, int *child_end);
/* fork_uids_stop: end the serving (the fork's reply is in) and free it. */
void fork_uids_stop(struct fork_uids *fu);

#endif
