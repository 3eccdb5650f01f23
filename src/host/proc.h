/*
 * proc: the processes kilnd runs and watches (VMMs, zygotes, image
 * builders). A VMM must outlive kilnd (restart safety), so it gets its own
 * session, /dev/null as stdin and a log file as stdout and stderr: never a
 * pipe to kilnd, whose death would kill it with SIGPIPE. A process is
 * named by its pid and its start time, so a recycled pid is never mistaken
 * for it.
 */
#ifndef KILN_HOST_PROC_H
#define KILN_HOST_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Start argv[0] with argv, detached (setsid), stdout and stderr appended to
 * log (or /dev/null), no other fds. *pid gets its pid. */
int proc_spawn(char *const argv[], const char *log, pid_t *pid);
/* The same, in the network namespace at netns (NULL: kilnd's). */
int proc_spawn_in(char *const argv[], const char *log, const char *netns, pid_t *pid);
/* The same, and keep[0..nkeep) become its descriptors 3, 4, ... (a
 * restored VMM's volumes); the caller's stay open in kilnd. */
int proc_spawn_keep(char *const argv[], const char *log, const char *netns, const int *keep, int nkeep,
		    pid_t *pid);
/* Run argv to completion (stdout/stderr to log, or inherited if NULL);
 * returns its exit status (0..255), 128+signal, or -errno. */
int proc_run(char *const argv[], const char *log);

/* Field 22 of /proc/PID/stat (clock ticks after boot); 0 if gone. */
int64_t proc_start_time(pid_t pid);
/* Is pid alive and started at start (0: any start time)? Zombies are not. */
bool proc_alive(pid_t pid, int64_t start);
/* What a process has used (/proc/PID/stat, every thread, living or ended):
 * CPU seconds (user + system), of which the kernel counted guest_seconds
 * as time in guest mode (KVM_RUN inside the guest: the vCPUs' own work,
 * what the VMM cannot fake), and resident bytes. -ESRCH if gone. */
struct proc_usage {
	double cpu_seconds, guest_seconds;
	int64_t rss_bytes;
};
int proc_usage(pid_t pid, struct proc_usage *u);
/* Proportional set size (/proc/PID/smaps_rollup): resident bytes, each
 * page shared with other processes (a template's zygote, a fork parent)
 * divided by how many map it. -ESRCH if gone. */
int proc_pss(pid_t pid, int64_t *pss_bytes);

/* pidfd_open(2), or -errno. */
int proc_pidfd(pid_t pid);
/* Reap pid if it is our child and has exited: its wait status, or -1. */
int proc_reap(pid_t pid);
/* The wait status of pid if it is our child and has exited, without
 * reaping it (WNOWAIT: the pid stays taken), or -1. */
int proc_exit_status(pid_t pid);
/* SIGKILL pid if it is still the process started at start, then wait up
 * to ms for it to be gone. 0 if gone (or never there), -ETIMEDOUT. */
int proc_kill_wait(pid_t pid, int64_t start, int ms);
/* The same, only if it also runs as uid (all of real, effective, saved
 * and filesystem uid): for a pid a VMM could have named (its control
 * socket, a file in its directory), which must be one of its jail's own
 * processes, never a host process. uid -1: any. */
int proc_kill_owned(pid_t pid, int64_t start, uid_t uid, int ms);
/* The uid a process runs as (-EPERM while its uids differ). */
int proc_uid(pid_t pid, uid_t *uid);
/* proc_own_userns: whether pid runs in a user namespace other than ours
 * (a live fork's VMM: fork_uid.h). false when it cannot be told. */
bool proc_own_userns(pid_t pid);
/* proc_dir_own_userns: the same for a process's open /proc/PID directory:
 * 1 or 0, or -errno when it cannot be told. */
int proc_dir_own_userns(int procdir);

/* Write / read "PID START\n" files (a VMM's identity in its directory).
 * Neither follows a symlink; a record with no start time is refused. */
int pidfile_write(const char *path, pid_t pid, int64_t start);
int pidfile_read(const char *path, pid_t *pid, int64_t *start);

/* Monotonic milliseconds. */
int64_t mono_ms(void);

#endif
