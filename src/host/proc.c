#include "host/proc.h"
#include "common/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child_setup_from(const char *log, bool detach, int first_closed);

static void child_setup(const char *log, bool detach)
{
	child_setup_from(log, detach, 3);
}

/* child_setup keeping descriptors 3 .. first_closed - 1. */
static void child_setup_from(const char *log, bool detach, int first_closed)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (detach)
		setsid();
	int in = open("/dev/null", O_RDONLY);
	/* The log lies in a directory the VMM may write: never through a
	 * symlink (root would append to any file), never a FIFO or device. */
	int out = log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK, 0644) : -1;
	struct stat st;
	if (out >= 0 && (fstat(out, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)) {
		close(out);
		out = -1;
	}
	if (out >= 0)
		fcntl(out, F_SETFL, O_APPEND);
	if (in >= 0)
		dup2(in, 0);
	if (out >= 0) {
		dup2(out, 1);
		dup2(out, 2);
	} else if (detach || log) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
	}
	/* Close everything else: the HTTP sockets, the database, other VMMs'
	 * sockets must not leak into a VMM that lives on. */
	syscall(SYS_close_range, (unsigned)first_closed, ~0U, 0);
}

int proc_spawn(char *const argv[], const char *log, pid_t *pid)
{
	return proc_spawn_in(argv, log, NULL, pid);
}

int proc_spawn_in(char *const argv[], const char *log, const char *netns, pid_t *pid)
{
	return proc_spawn_keep(argv, log, netns, NULL, 0, pid);
}

int proc_spawn_keep(char *const argv[], const char *log, const char *netns, const int *keep, int nkeep,
		    pid_t *pid)
{
	if (nkeep < 0 || nkeep > 16)
		return errf(EINVAL, "at most 16 descriptors for %s", argv[0]);
	/* Opened here: the child may only make async-signal-safe calls. */
	int ns = netns ? open(netns, O_RDONLY | O_CLOEXEC) : -1;
	if (netns && ns < 0)
		return errf_sys("network namespace %s", netns);
	pid_t p = fork();
	if (p < 0) {
		if (ns >= 0)
			close(ns);
		return errf_sys("fork for %s", argv[0]);
	}
	if (p == 0) {
		if (ns >= 0 && setns(ns, CLONE_NEWNET) < 0)
			_exit(126);
		/* Out of the way first (a keep[] may be 3 + j), then in place;
		 * dup2 clears their close-on-exec. */
		int high[16];
		for (int i = 0; i < nkeep; i++)
			if ((high[i] = fcntl(keep[i], F_DUPFD, 64)) < 0)
				_exit(126);
		for (int i = 0; i < nkeep; i++)
			if (dup2(high[i], 3 + i) < 0)
				_exit(126);
		child_setup_from(log, true, 3 + nkeep);
		execv(argv[0], argv);
		_exit(127);
	}
	if (ns >= 0)
		close(ns);
	*pid = p;
	return 0;
}

int proc_run(char *const argv[], const char *log)
{
	pid_t p = fork();
	if (p < 0)
		return errf_sys("fork for %s", argv[0]);
	if (p == 0) {
		if (log)
			child_setup(log, false);
		else
			syscall(SYS_close_range, 3, ~0U, 0);
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR)
			return errf_sys("waitpid %s", argv[0]);
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

/* The start of /proc/PID/NAME, NUL-terminated, in buf; -ESRCH if gone. */
static int read_proc(pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ESRCH;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	return 0;
}

/* The fields after "(comm)" of /proc/PID/stat; comm may hold spaces and
 * parentheses, so parse from the last ')'. */
static int read_stat(pid_t pid, char *buf, size_t cap, char **rest)
{
	if (read_proc(pid, "stat", buf, cap) < 0)
		return -ESRCH;
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EPROTO;
	*rest = p + 2;	/* field 3 (state) */
	return 0;
}

/* Field number f (>= 3) of the stat line. */
static const char *stat_field(char *rest, int f)
{
	char *p = rest;
	for (int i = 3; i < f && p; i++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p;
}

int64_t proc_start_time(pid_t pid)
{
	char buf[1024], *rest;
	if (pid <= 0 || read_stat(pid, buf, sizeof buf, &rest) < 0)
		return 0;
	const char *f = stat_field(rest, 22);
	return f ? strtoll(f, NULL, 10) : 0;
}

bool proc_alive(pid_t pid, int64_t start)
{
	char buf[1024], *rest;
	if (pid <= 0 || read_stat(pid, buf, sizeof buf, &rest) < 0)
		return false;
	if (rest[0] == 'Z' || rest[0] == 'X')
		return false;
	const char *f = stat_field(rest, 22);
	return f && (start == 0 || strtoll(f, NULL, 10) == start);
}

int proc_usage(pid_t pid, struct proc_usage *u)
{
	char buf[1024], *rest;
	if (pid <= 0 || read_stat(pid, buf, sizeof buf, &rest) < 0)
		return -ESRCH;
	const char *ut = stat_field(rest, 14), *st = stat_field(rest, 15), *rss = stat_field(rest, 24),
		   *gt = stat_field(rest, 43);
	if (!ut || !st || !rss || !gt)
		return -EPROTO;
	long tick = sysconf(_SC_CLK_TCK);
	double hz = tick > 0 ? (double)tick : 100;
	u->cpu_seconds = (double)(strtoull(ut, NULL, 10) + strtoull(st, NULL, 10)) / hz;
	u->guest_seconds = (double)strtoull(gt, NULL, 10) / hz;
	u->rss_bytes = strtoll(rss, NULL, 10) * sysconf(_SC_PAGESIZE);
	return 0;
}

int proc_pss(pid_t pid, int64_t *pss_bytes)
{
	char buf[4096];
	if (read_proc(pid, "smaps_rollup", buf, sizeof buf) < 0)
		return -ESRCH;
	/* "Pss:  123456 kB", in the kernel's own text; the first line names
	 * the mapping range, so look for the field at a line's start. */
	for (char *l = buf; l; l = strchr(l, '\n')) {
		if (*l == '\n')
			l++;
		if (strncmp(l, "Pss:", 4) == 0) {
			*pss_bytes = strtoll(l + 4, NULL, 10) * 1024;
			return 0;
		}
	}
	return -EPROTO;
}

int proc_pidfd(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	return fd < 0 ? errf_sys("pidfd_open %d", (int)pid) : fd;
}

int proc_reap(pid_t pid)
{
	int st;
	pid_t p = waitpid(pid, &st, WNOHANG);
	return p == pid ? st : -1;
}

int proc_exit_status(pid_t pid)
{
	siginfo_t si = { 0 };
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid != pid)
		return -1;
	if (si.si_code == CLD_EXITED)
		return (si.si_status & 0xff) << 8;
	if (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED)
		return si.si_status & 0x7f;
	return -1;
}

int proc_uid(pid_t pid, uid_t *uid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ESRCH;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	const char *u = strstr(buf, "\nUid:");
	unsigned r, e, sv, fs;
	if (!u || sscanf(u + 5, "%u %u %u %u", &r, &e, &sv, &fs) != 4)
		return -EPROTO;
	if (r != e || r != sv || r != fs)
		return -EPERM;	/* mid-change: not one uid */
	*uid = (uid_t)r;
	return 0;
}

int proc_dir_own_userns(int procdir)
{
	struct stat mine, theirs;
	if (stat("/proc/self/ns/user", &mine) < 0 || fstatat(procdir, "ns/user", &theirs, 0) < 0)
		return -errno;
	return mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev;
}

bool proc_own_userns(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	int dir = pid > 0 ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	int own = dir >= 0 ? proc_dir_own_userns(dir) : 0;
	if (dir >= 0)
		close(dir);
	return own > 0;
}

int proc_kill_wait(pid_t pid, int64_t start, int ms)
{
	return proc_kill_owned(pid, start, (uid_t)-1, ms);
}

int proc_kill_owned(pid_t pid, int64_t start, uid_t uid, int ms)
{
	if (pid <= 0)
		return 0;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return 0;	/* gone */
	/* The pidfd pins the identity: check the start time and owner after
	 * opening it. */
	uid_t owner;
	if ((start && proc_start_time(pid) != start) ||
	    (uid != (uid_t)-1 && (proc_uid(pid, &owner) < 0 || owner != uid))) {
		close(pfd);
		return 0;
	}
	syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
	struct pollfd p = { .fd = pfd, .events = POLLIN };
	int64_t end = mono_ms() + ms;
	int rc = -ETIMEDOUT;
	for (;;) {
		int left = (int)(end - mono_ms());
		if (left < 0)
			left = 0;
		int n = poll(&p, 1, left);
		if (n > 0) {
			rc = 0;
			break;
		}
		if (n == 0)
			break;
		if (errno != EINTR)
			break;
	}
	proc_reap(pid);
	close(pfd);
	return rc == 0 ? 0 : errf(ETIMEDOUT, "process %d did not die within %d ms", (int)pid, ms);
}

int pidfile_write(const char *path, pid_t pid, int64_t start)
{
	char tmp[4200], text[64];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int n = snprintf(text, sizeof text, "%d %lld\n", (int)pid, (long long)start);
	/* Where a VMM may write, tmp could be its symlink: made anew, never
	 * followed (rename then replaces whatever path is, link or not). */
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf_sys("create %s", tmp);
	if (write(fd, text, n) != n) {
		int e = errf_sys("write %s", tmp);
		close(fd);
		unlink(tmp);
		return e;
	}
	close(fd);
	if (rename(tmp, path) < 0)
		return errf_sys("rename %s", tmp);
	return 0;
}

int pidfile_read(const char *path, pid_t *pid, int64_t *start)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	char text[64];
	ssize_t got = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, text, sizeof text - 1) : -1;
	close(fd);
	if (got <= 0)
		return -EINVAL;
	text[got] = 0;
	int p = 0;
	long long s = 0;
	int n = sscanf(text, "%d %lld", &p, &s);
	if (n != 2 || p <= 0 || s <= 0)
		return -EINVAL;	/* start 0 would match any process */
	*pid = p;
	*start = s;
	return 0;
}
