/*
 * own_uid: a live fork of a jailed VMM leaves its parent's uid for one of
 * its own before its guest runs, so that a VMM its guest took over cannot
 * open, connect to or signal the rest of its family (docs/security.md,
 * "Forks"). A fork is born unprivileged (its parent dropped every
 * privilege long before), so it cannot change uid by itself; the host can
 * lend it a user namespace's mapping instead:
 *
 *   1. the child makes a user namespace of its own (unshare: the only
 *      namespace the VMM's seccomp filter lets it make), still its
 *      parent's uid outside it;
 *   2. it asks on the socket the host passed with the fork ("uid N\n", N
 *      its place in the fork) and sends the write end of a pipe; the
 *      kernel adds its pid and uid (SO_PASSCRED on the host's end);
 *   3. the host checks that process, gives the child's directory to the
 *      child's uid, maps uid and gid 1 of that namespace to it, and
 *      answers "ok" on the pipe (or "error MESSAGE");
 *   4. the child becomes uid and gid 1 there (the child's uid outside)
 *      and drops every capability the new namespace gave it.
 *
 * Its disks, opened before (disk.h disk_open_over), stay open.
 */
#ifndef KILN_VMM_OWN_UID_H
#define KILN_VMM_OWN_UID_H

/* own_uid: steps 1, 2 and 4 on sock, as child index of its fork, waiting
 * at most timeout_ms for the answer. 0, or -errno with errmsg() set. The
 * caller must be single-threaded. sock is closed. */
int own_uid(int sock, int index, int timeout_ms);
/* own_uid_ask: step 2 alone, the question and the pipe to answer on
 * (pipe_w stays the caller's). 0, or -errno with errmsg() set. */
int own_uid_ask(int sock, int index, int pipe_w);

#endif
