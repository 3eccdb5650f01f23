/*
 * fork + execve with the child's setup: see spawn.h.
 *
 * The agent is single-threaded, so the child may use any libc function
 * between fork and exec. A failed step is written to a close-on-exec pipe
 * as {step, errno}; a successful execve closes the pipe, so the parent's
 * read returns 0 and knows the program is running.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "guest/spawn.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

enum step {
	STEP_SETSID, STEP_TTY, STEP_STDIO, STEP_CGROUP, STEP_RLIMIT,
	STEP_GROUPS, STEP_GID, STEP_UID, STEP_CHDIR, STEP_EXEC,
};

static const char *const step_names[] = {
	[STEP_SETSID] = "setsid", [STEP_TTY] = "set the controlling terminal",
	[STEP_STDIO] = "set up stdio", [STEP_CGROUP] = "join cgroup",
	[STEP_RLIMIT] = "setrlimit", [STEP_GROUPS] = "setgroups",
	[STEP_GID] = "setgid", [STEP_UID] = "setuid", [STEP_CHDIR] = "chdir",
	[STEP_EXEC] = "execve",
};

struct child_err {
	int step;
	int err;
};

static void child_fail(int wfd, enum step step)
{
	struct child_err ce = { step, errno };
	ssize_t rc = write(wfd, &ce, sizeof ce);
	(void)rc;
	_exit(127);
}

static void child_write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t rc = write(fd, s, strlen(s));
		(void)rc;
		close(fd);
	}
}

static __attribute__((noreturn)) void child(const struct spawn_req *r, int wfd,
					    int in_fd, int out_fd, int err_fd, int slave)
{
	sigset_t none;

	/* Undo what the agent changed for itself: blocked signals (taken by
	 * its signalfd) and SIGPIPE ignored, which execve would keep. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);

	if (setsid() < 0)
		child_fail(wfd, STEP_SETSID);
	if (slave >= 0) {
		if (ioctl(slave, TIOCSCTTY, 0) < 0)
			child_fail(wfd, STEP_TTY);
		in_fd = out_fd = err_fd = slave;
	}
	if (r->merge && slave < 0)
		err_fd = out_fd;
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		child_fail(wfd, STEP_STDIO);

	if (r->cgroup) {
		char path[256];
		snprintf(path, sizeof path, "%s/cgroup.procs", r->cgroup);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "0", 1) != 1)
			child_fail(wfd, STEP_CGROUP);
		close(fd);
	}
	/* The agent protects itself with -1000; its children must not
	 * inherit that. */
	child_write_file("/proc/self/oom_score_adj", "0");
	if (setrlimit(RLIMIT_NOFILE, &r->nofile) < 0)
		child_fail(wfd, STEP_RLIMIT);

	if (r->user) {
		if (setgroups((size_t)r->user->ngroups, r->user->groups) < 0)
			child_fail(wfd, STEP_GROUPS);
		if (setgid(r->user->gid) < 0)
			child_fail(wfd, STEP_GID);
		if (setuid(r->user->uid) < 0)
			child_fail(wfd, STEP_UID);
	}
	if (r->cwd && chdir(r->cwd) < 0)
		child_fail(wfd, STEP_CHDIR);

	if (r->builtin) {
		/* No execve will close the agent's descriptors (its
		 * connections, the error pipe: its end of file tells the
		 * agent the start went well), so close them now. */
		int argc = 0;
		while (r->argv[argc])
			argc++;
		syscall(SYS_close_range, 3U, ~0U, 0U);
		environ = (char **)r->envp;
		_exit(r->builtin(argc, r->argv) & 0xff);
	}
	/* Everything the agent opens is close-on-exec already; this covers
	 * anything that slipped through. */
	syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
	/* execvp searches the PATH of environ: make that the child's. */
	environ = (char **)r->envp;
	execvp(r->argv[0], r->argv);
	child_fail(wfd, STEP_EXEC);
	_exit(127);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The master and the child's end of a new pseudo-terminal. */
static int open_pty(const struct spawn_req *r, int *master, int *slave)
{
	int unlock = 0;
	struct winsize ws = { .ws_row = r->rows ? r->rows : 24, .ws_col = r->cols ? r->cols : 80 };

	*master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (*master < 0)
		return -errno;
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 || ioctl(*master, TIOCSWINSZ, &ws) < 0)
		return -errno;
	/* TIOCGPTPEER opens the peer without a path lookup, so no one can
	 * swap /dev/pts/N underneath us. */
	*slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*slave < 0) {
		unsigned n;
		char path[32];
		if (ioctl(*master, TIOCGPTN, &n) < 0)
			return -errno;
		snprintf(path, sizeof path, "/dev/pts/%u", n);
		*slave = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (*slave < 0)
			return -errno;
	}
	return 0;
}

int spawn(const struct spawn_req *r, pid_t *pidp, struct spawn_io *io,
	  char *err, size_t errlen)
{
	int ep[2] = { -1, -1 }, in[2] = { -1, -1 }, out[2] = { -1, -1 }, er[2] = { -1, -1 };
	int master = -1, slave = -1;
	const char *what = "pipe";
	int rc;

	io->in_fd = io->out_fd = io->err_fd = io->pty_fd = -1;
	if (pipe2(ep, O_CLOEXEC) < 0)
		goto sysfail;
	if (r->pty) {
		what = "open a pseudo-terminal";
		rc = open_pty(r, &master, &slave);
		if (rc < 0) {
			errno = -rc;
			goto sysfail;
		}
	} else {
		if (r->want_stdin) {
			if (pipe2(in, O_CLOEXEC) < 0 || set_nonblock(in[1]) < 0)
				goto sysfail;
		} else {
			what = "open /dev/null";
			in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (in[0] < 0)
				goto sysfail;
			what = "pipe";
		}
		if (pipe2(out, O_CLOEXEC) < 0 || set_nonblock(out[0]) < 0)
			goto sysfail;
		if (!r->merge && (pipe2(er, O_CLOEXEC) < 0 || set_nonblock(er[0]) < 0))
			goto sysfail;
		/* Larger pipes mean fewer wakeups per MiB of output; a
		 * refusal (limits) only costs speed. */
		if (r->pipe_size) {
			fcntl(out[0], F_SETPIPE_SZ, (int)r->pipe_size);
			if (er[0] >= 0)
				fcntl(er[0], F_SETPIPE_SZ, (int)r->pipe_size);
		}
	}

	pid_t pid = fork();
	if (pid < 0) {
		what = "fork";
		goto sysfail;
	}
	if (pid == 0) {
		close(ep[0]);
		child(r, ep[1], in[0], out[1], er[1], slave);
	}
	close_fd(&ep[1]);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&er[1]);
	close_fd(&slave);

	struct child_err ce;
	ssize_t n;
	do
		n = read(ep[0], &ce, sizeof ce);
	while (n < 0 && errno == EINTR);
	close_fd(&ep[0]);
	if (n == (ssize_t)sizeof ce) {
		/* The child has exited or is about to; collect it here so
		 * the reaper never sees an unknown pid. */
		waitpid(pid, NULL, 0);
		close_fd(&in[1]);
		close_fd(&out[0]);
		close_fd(&er[0]);
		close_fd(&master);
		const char *step = (unsigned)ce.step < sizeof step_names / sizeof step_names[0]
				   ? step_names[ce.step] : "start";
		if (ce.step == STEP_EXEC)
			snprintf(err, errlen, "execve %s: %s", r->argv[0], strerror(ce.err));
		else if (ce.step == STEP_CHDIR)
			snprintf(err, errlen, "chdir %s: %s", r->cwd, strerror(ce.err));
		else
			snprintf(err, errlen, "%s: %s", step, strerror(ce.err));
		return ce.err > 0 ? -ce.err : -EIO;
	}
	*pidp = pid;
	io->in_fd = in[1];
	io->out_fd = out[0];
	io->err_fd = er[0];
	io->pty_fd = master;
	return 0;

sysfail:
	rc = errno;
	snprintf(err, errlen, "%s: %s", what, strerror(rc));
	close_fd(&ep[0]);
	close_fd(&ep[1]);
	close_fd(&in[0]);
	close_fd(&in[1]);
	close_fd(&out[0]);
	close_fd(&out[1]);
	close_fd(&er[0]);
	close_fd(&er[1]);
	close_fd(&master);
	close_fd(&slave);
	return -rc;
}
