/*
 * Starting a process for the agent: the fork, everything the child sets up
 * before execve (session, terminal, cgroup, OOM score, limits, user,
 * working directory), and reporting a failure in any of those steps back
 * to the agent with the step and errno.
 */
#ifndef KILN_SPAWN_H
#define KILN_SPAWN_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#define USER_MAX_GROUPS 64

struct user_info {
	uid_t uid;
	gid_t gid;
	char name[64];
	char home[256];
	char shell[256];
	gid_t groups[USER_MAX_GROUPS];
	int ngroups;
};

/* Resolve "NAME", "UID" or "UID:GID" (empty: root) against the guest's
 * /etc/passwd and /etc/group. 0 or -errno with a message. */
int user_lookup(const char *spec, struct user_info *u, char *err, size_t errlen);

/* A built-in of the agent (builtin.c): run in the forked child instead of
 * a program, with the same stdio, user, directory and cgroup. It returns
 * 0, or an errno value that becomes its exit code (its message goes to
 * stderr). */
typedef int builtin_fn(int argc, char *const *argv);

/* The built-in named `name`, or NULL. */
builtin_fn *builtin_find(const char *name);

struct spawn_req {
	char *const *argv;		/* argv[0] is looked up in PATH */
	builtin_fn *builtin;		/* or this runs, with argv */
	char *const *envp;
	const char *cwd;
	const struct user_info *user;
	bool pty;
	unsigned short rows, cols;
	bool want_stdin;		/* else stdin is /dev/null */
	bool merge;			/* stderr into stdout */
	const char *cgroup;		/* directory to join, or NULL */
	struct rlimit nofile;		/* RLIMIT_NOFILE for the child */
	size_t pipe_size;		/* output pipe capacity (0: default) */
};

/* The agent's ends, all non-blocking and close-on-exec; -1 where absent.
 * With a pty, pty_fd is the master and the three others are -1. */
struct spawn_io {
	int in_fd, out_fd, err_fd, pty_fd;
};

/* Start the process. On success it runs in its own session and process
 * group (pgid = pid). 0 or -errno with a message such as
 * "execve python3: No such file or directory". */
int spawn(const struct spawn_req *r, pid_t *pid, struct spawn_io *io,
	  char *err, size_t errlen);

#endif
