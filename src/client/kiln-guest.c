/*
 * kiln-guest: a debug command line for the guest agent, built on the
 * client library (kiln_client.h). See `kiln-guest --help`.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "client/kiln_client.h"

extern char **environ;

static const char usage_text[] =
"usage: kiln-guest TRANSPORT [--timeout SEC] [--wait SEC] COMMAND [ARGS]\n"
"\n"
"TRANSPORT (one of):\n"
"  --vsock PATH.sock   a VMM's vsock bridge (CONNECT <port>)\n"
"  --unix PATH         a Unix socket the agent listens on (kiln-init --listen)\n"
"  --cid N             AF_VSOCK to guest CID N\n"
"  --port N            agent port (default 52)\n"
"  --timeout SEC       give up when the agent is silent this long\n"
"  --wait SEC          retry connecting for up to SEC (while the guest boots)\n"
"\n"
"COMMANDS:\n"
"  ping [-n COUNT]                 round trips, with their times\n"
"  info                            agent, kernel, memory, uptime\n"
"  exec [OPTS] -- CMD [ARG...]     run CMD; exits with its status\n"
"     -c STRING    run STRING with /bin/sh -c instead of CMD\n"
"     -i           send our stdin to the command\n"
"     -t           on a pseudo-terminal (raw local terminal with -i)\n"
"     -e NAME=VAL  environment (repeatable);  -E  only the given environment\n"
"     -w DIR       working directory;  -u USER  NAME, UID or UID:GID\n"
"     -T SEC       kill it after SEC seconds (exit status 124)\n"
"     -b           background: print its id and detach\n"
"     -m           merge stderr into stdout\n"
"     --rows N --cols N   terminal size;  --resize RxC  resize after the first output\n"
"     --trace FILE write one line per output chunk (\"stdout LEN\")\n"
"  pty [-- CMD...]                 interactive shell (or CMD) on a terminal\n"
"  attach ID                       re-stream a background process until it ends\n"
"  ps                              processes the agent tracks\n"
"  kill [-s SIG] ID                signal a process's group\n"
"  cp [-m MODE] [-p] LOCAL :REMOTE copy in (atomic replace; -p: make parents)\n"
"  cp :REMOTE LOCAL                copy out (LOCAL - is stdout)\n"
"  cat PATH                        file to stdout\n"
"  ls [-l] [-d DEPTH] PATH         list a directory\n"
"  stat [-L] PATH                  metadata (-L: of a symlink itself)\n"
"  mkdir [-p] [-m MODE] PATH\n"
"  rm [-r] [-f] PATH\n"
"  mv FROM TO\n"
"  chmod MODE PATH\n"
"  watch [-r] [-n COUNT] PATH      print file events\n"
"  resync [--time now|NS] [--entropy BYTES] [--hostname NAME] [--identity ID]\n"
"  poweroff [--reboot]\n"
"  connect PORT [HOST]             TCP to HOST:PORT in the guest (default\n"
"                                  127.0.0.1), joined to stdin and stdout\n"
"  bench-exec [-n N] [--local] -- CMD...   exec round-trip percentiles\n";

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("kiln-guest: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static int fail(struct kiln_client *c, const char *what)
{
	fprintf(stderr, "kiln-guest: %s: %s\n", what, kiln_client_error(c));
	return 1;
}

static unsigned long num(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 0);
	if (!*s || *end || errno)
		die("%s: '%s' is not a number", what, s);
	return v;
}

static int64_t now_ns(int clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- connection --------------------------------------------------------- */

struct target {
	const char *vsock, *unix_path;
	long cid;
	unsigned port;
	int timeout_ms;
	int wait_ms;
};

static int connect_once(struct kiln_client *c, const struct target *t)
{
	if (t->vsock)
		return kiln_connect_bridge(c, t->vsock, t->port);
	if (t->unix_path)
		return kiln_connect_unix(c, t->unix_path);
	return kiln_connect_vsock(c, (unsigned)t->cid, t->port);
}

static struct kiln_client *open_client(const struct target *t)
{
	struct kiln_client *c = kiln_client_new();
	if (!c)
		die("out of memory");
	kiln_client_set_timeout(c, t->timeout_ms);
	int64_t until = now_ns(CLOCK_MONOTONIC) + (int64_t)t->wait_ms * 1000000;
	for (;;) {
		int rc = connect_once(c, t);
		/* With --wait, an agent that accepts but is not serving yet
		 * (the bridge refuses, or nothing answers) is retried too. */
		if (rc == 0 && (t->wait_ms == 0 || kiln_ping(c) == 0))
			return c;
		if (now_ns(CLOCK_MONOTONIC) >= until)
			die("%s", kiln_client_error(c));
		kiln_close(c);
		usleep(100 * 1000);
	}
}

/* ---- exec --------------------------------------------------------------- */

struct exec_opts {
	struct kiln_exec_req req;
	const char **env;
	int nenv;
	bool interactive, background;
	unsigned resize_rows, resize_cols;
	FILE *trace;
};

static struct termios saved_tty;
static bool tty_raw;

static void restore_tty(void)
{
	if (tty_raw)
		tcsetattr(0, TCSAFLUSH, &saved_tty);
	tty_raw = false;
}

static void make_raw(void)
{
	struct termios t;
	if (tcgetattr(0, &saved_tty) < 0)
		return;
	t = saved_tty;
	cfmakeraw(&t);
	if (tcsetattr(0, TCSAFLUSH, &t) == 0) {
		tty_raw = true;
		atexit(restore_tty);
	}
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Handle one event; returns the exit status when the process ended,
 * -1 otherwise. */
static int exec_event(struct kiln_client *c, struct exec_opts *o, const struct kiln_io *ev,
		      bool *resized)
{
	switch (ev->kind) {
	case KILN_IO_STDOUT:
	case KILN_IO_STDERR:
		if (o->trace)
			fprintf(o->trace, "%s %zu\n", ev->kind == KILN_IO_STDOUT ? "stdout" : "stderr", ev->len);
		/* A closed local stdout is like a closed pipe: stop. */
		if (write_all(ev->kind == KILN_IO_STDOUT ? 1 : 2, ev->data, ev->len) < 0) {
			kiln_exec_kill(c, SIGKILL);
			return 141;
		}
		if (o->resize_rows && !*resized) {
			*resized = true;
			kiln_exec_resize(c, o->resize_rows, o->resize_cols);
		}
		return -1;
	case KILN_IO_EXIT:
		restore_tty();
		if (ev->timed_out) {
			fprintf(stderr, "kiln-guest: the command timed out and was killed\n");
			return 124;
		}
		return ev->signal ? 128 + ev->signal : ev->code;
	case KILN_IO_DETACHED:
		return 0;
	}
	return -1;
}

/* Stream a started (or attached) process until it ends. */
static int exec_stream(struct kiln_client *c, struct exec_opts *o)
{
	bool stdin_open = o->interactive, resized = false;
	char buf[65536];
	int sfd = -1;

	if (o->req.flags & KILN_EXEC_PTY) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGWINCH);
		sigprocmask(SIG_BLOCK, &set, NULL);
		sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	}
	for (;;) {
		struct kiln_io ev;
		int rc;
		while ((rc = kiln_exec_poll(c, &ev)) > 0) {
			int st = exec_event(c, o, &ev, &resized);
			if (st >= 0)
				return st;
		}
		if (rc < 0) {
			restore_tty();
			return fail(c, "exec");
		}
		struct pollfd pfd[3] = {
			{ .fd = kiln_client_fd(c), .events = kiln_client_events(c) },
			{ .fd = stdin_open && kiln_client_pending(c) < (1u << 20) ? 0 : -1, .events = POLLIN },
			{ .fd = sfd, .events = POLLIN },
		};
		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		if (pfd[0].revents && kiln_client_io(c, pfd[0].revents) < 0) {
			restore_tty();
			return fail(c, "exec");
		}
		if (pfd[1].revents) {
			ssize_t n = read(0, buf, sizeof buf);
			if (n > 0)
				rc = kiln_exec_stdin(c, buf, (size_t)n);
			else if (n == 0 || errno != EINTR) {
				stdin_open = false;
				rc = kiln_exec_eof(c);
			}
			if (rc < 0)
				return fail(c, "exec stdin");
		}
		if (sfd >= 0 && pfd[2].revents) {
			struct signalfd_siginfo si;
			struct winsize ws;
			while (read(sfd, &si, sizeof si) > 0)
				;
			if (ioctl(0, TIOCGWINSZ, &ws) == 0)
				kiln_exec_resize(c, ws.ws_row, ws.ws_col);
		}
	}
}

static int cmd_exec(const struct target *t, int argc, char **argv, bool pty_cmd)
{
	static const struct option lopts[] = {
		{ "rows", required_argument, NULL, 'R' },
		{ "cols", required_argument, NULL, 'C' },
		{ "resize", required_argument, NULL, 'Z' },
		{ "trace", required_argument, NULL, 'X' },
		{ 0 }
	};
	struct exec_opts o = { 0 };
	int opt;

	o.env = calloc((size_t)argc + 1, sizeof *o.env);
	if (!o.env)
		die("out of memory");
	if (pty_cmd) {
		o.req.flags |= KILN_EXEC_PTY | KILN_EXEC_STDIN;
		o.interactive = true;
	}
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+c:ite:Ew:u:T:bm", lopts, NULL)) != -1) {
		switch (opt) {
		case 'c': o.req.shell = optarg; break;
		case 'i': o.interactive = true; o.req.flags |= KILN_EXEC_STDIN; break;
		case 't': o.req.flags |= KILN_EXEC_PTY; break;
		case 'e': o.env[o.nenv++] = optarg; break;
		case 'E': o.req.flags |= KILN_EXEC_CLEARENV; break;
		case 'w': o.req.cwd = optarg; break;
		case 'u': o.req.user = optarg; break;
		case 'T': o.req.timeout_ms = (uint32_t)(strtod(optarg, NULL) * 1000); break;
		case 'b': o.background = true; o.req.flags |= KILN_EXEC_BACKGROUND; break;
		case 'm': o.req.flags |= KILN_EXEC_MERGE; break;
		case 'R': o.req.rows = (uint32_t)num(optarg, "--rows"); break;
		case 'C': o.req.cols = (uint32_t)num(optarg, "--cols"); break;
		case 'Z':
			if (sscanf(optarg, "%ux%u", &o.resize_rows, &o.resize_cols) != 2)
				die("--resize wants ROWSxCOLS");
			break;
		case 'X':
			o.trace = fopen(optarg, "we");
			if (!o.trace)
				die("%s: %s", optarg, strerror(errno));
			setvbuf(o.trace, NULL, _IOLBF, 0);
			break;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	o.req.env = o.nenv ? o.env : NULL;
	static const char *const shell[] = { "/bin/sh", "-l", NULL };
	if (optind < argc)
		o.req.argv = (const char *const *)argv + optind;
	else if (pty_cmd && !o.req.shell)
		o.req.argv = shell;
	else if (!o.req.shell)
		die("exec: no command given");
	if ((o.req.flags & KILN_EXEC_PTY) && !o.req.rows && isatty(0)) {
		struct winsize ws;
		if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
			o.req.rows = ws.ws_row;
			o.req.cols = ws.ws_col;
		}
	}

	struct kiln_client *c = open_client(t);
	uint32_t id, pid;
	if (kiln_exec_start(c, &o.req, &id, &pid) < 0)
		return fail(c, "exec");
	if (o.background) {
		printf("%u %u\n", id, pid);
		fflush(stdout);
		struct kiln_io ev;
		if (kiln_exec_cancel(c) < 0)
			return fail(c, "detach");
		do {
			if (kiln_exec_next(c, &ev) < 0)
				return fail(c, "detach");
		} while (ev.kind != KILN_IO_DETACHED && ev.kind != KILN_IO_EXIT);
		return 0;
	}
	if ((o.req.flags & KILN_EXEC_PTY) && o.interactive && isatty(0))
		make_raw();
	int st = exec_stream(c, &o);
	kiln_client_free(c);
	return st;
}

static int cmd_attach(const struct target *t, int argc, char **argv)
{
	struct exec_opts o = { 0 };
	uint32_t pid;
	uint64_t dropped;
	if (argc != 2)
		die("attach wants a process id");
	struct kiln_client *c = open_client(t);
	if (kiln_attach(c, (uint32_t)num(argv[1], "id"), &pid, &dropped) < 0)
		return fail(c, "attach");
	if (dropped)
		fprintf(stderr, "kiln-guest: %" PRIu64 " bytes of output were dropped while detached\n", dropped);
	int st = exec_stream(c, &o);
	kiln_client_free(c);
	return st;
}

static int print_proc(void *ctx, const struct kiln_proc_info *p)
{
	(void)ctx;
	char status[32] = "running";
	if (p->state == KILN_PROC_EXITED) {
		if (p->signal)
			snprintf(status, sizeof status, "signal %d", p->signal);
		else
			snprintf(status, sizeof status, "exit %d", p->code);
	}
	printf("%-6u %-7u %-10s %-3s %s\n", p->id, p->pid, status,
	       p->flags & KILN_EXEC_BACKGROUND ? "bg" : "fg", p->cmd);
	return 0;
}

static int cmd_ps(const struct target *t)
{
	struct kiln_client *c = open_client(t);
	printf("%-6s %-7s %-10s %-3s %s\n", "ID", "PID", "STATUS", "", "COMMAND");
	if (kiln_procs(c, print_proc, NULL) < 0)
		return fail(c, "ps");
	kiln_client_free(c);
	return 0;
}

static int signal_number(const char *s)
{
	static const struct { const char *name; int sig; } names[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM },
		{ "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "WINCH", SIGWINCH },
	};
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(s, names[i].name))
			return names[i].sig;
	return (int)num(s, "signal");
}

static int cmd_kill(const struct target *t, int argc, char **argv)
{
	int sig = SIGTERM, opt;
	optind = 1;
	while ((opt = getopt(argc, argv, "+s:")) != -1) {
		if (opt != 's')
			return 2;
		sig = signal_number(optarg);
	}
	if (optind + 1 != argc)
		die("kill wants a process id");
	struct kiln_client *c = open_client(t);
	if (kiln_signal(c, (uint32_t)num(argv[optind], "id"), sig, 0) < 0)
		return fail(c, "kill");
	kiln_client_free(c);
	return 0;
}

/* ---- files -------------------------------------------------------------- */

static ssize_t fd_source(void *ctx, void *buf, size_t cap)
{
	int fd = *(int *)ctx;
	size_t got = 0;
	/* Fill whole frames: fewer, larger DATA frames are faster. */
	while (got < cap) {
		ssize_t n = read(fd, (char *)buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return got ? (ssize_t)got : -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static int fd_sink(void *ctx, const void *data, size_t len)
{
	return write_all(*(int *)ctx, data, len);
}

static int cmd_cp(const struct target *t, int argc, char **argv)
{
	uint32_t mode = 0, flags = 0;
	bool have_mode = false;
	int opt;
	optind = 1;
	while ((opt = getopt(argc, argv, "+m:p")) != -1) {
		if (opt == 'm') {
			mode = (uint32_t)strtoul(optarg, NULL, 8);
			have_mode = true;
		} else if (opt == 'p') {
			flags |= KILN_WRITE_MKDIRS;
		} else {
			return 2;
		}
	}
	if (optind + 2 != argc)
		die("cp wants LOCAL :REMOTE or :REMOTE LOCAL");
	const char *src = argv[optind], *dst = argv[optind + 1];
	struct kiln_client *c = open_client(t);
	uint64_t bytes;

	if (dst[0] == ':' && src[0] != ':') {
		int fd = strcmp(src, "-") ? open(src, O_RDONLY | O_CLOEXEC) : 0;
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			die("%s: %s", src, strerror(errno));
		if (!have_mode)
			mode = S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0644;
		if (kiln_write_file(c, dst + 1, mode, flags, fd_source, &fd, &bytes) < 0)
			return fail(c, "cp");
		if (fd)
			close(fd);
	} else if (src[0] == ':' && dst[0] != ':') {
		uint32_t rmode;
		int fd = strcmp(dst, "-") ? open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : 1;
		if (fd < 0)
			die("%s: %s", dst, strerror(errno));
		if (kiln_read_file(c, src + 1, 0, UINT64_MAX, fd_sink, &fd, NULL, &rmode, &bytes) < 0) {
			if (fd != 1)
				unlink(dst);
			return fail(c, "cp");
		}
		if (fd != 1) {
			/* Only a file we made takes the mode: never /dev/null. */
			struct stat st;
			if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
				fchmod(fd, have_mode ? mode : rmode & 07777);
			if (close(fd) < 0)
				die("%s: %s", dst, strerror(errno));
		}
	} else {
		die("cp: exactly one side must be :REMOTE");
	}
	kiln_client_free(c);
	return 0;
}

static void mode_string(uint32_t mode, char out[11])
{
	static const char types[] = "?pc?d?b?-?l?s???";
	out[0] = types[(mode >> 12) & 15];
	const char *rwx = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[1 + i] = mode & (1u << (8 - i)) ? rwx[i] : '-';
	out[10] = 0;
}

static int print_entry(void *ctx, const struct kiln_stat *e)
{
	bool lng = *(bool *)ctx;
	if (!lng) {
		printf("%s\n", e->name);
		return 0;
	}
	char m[11];
	mode_string(e->mode, m);
	printf("%s %5u %5u %10" PRIu64 " %" PRId64 " %s%s%s\n", m, e->uid, e->gid, e->size,
	       e->mtime_ns / 1000000000, e->name, e->link[0] ? " -> " : "", e->link);
	return 0;
}

static int cmd_ls(const struct target *t, int argc, char **argv)
{
	bool lng = false;
	uint32_t depth = 1;
	int opt;
	optind = 1;
	while ((opt = getopt(argc, argv, "+ld:")) != -1) {
		if (opt == 'l')
			lng = true;
		else if (opt == 'd')
			depth = (uint32_t)num(optarg, "depth");
		else
			return 2;
	}
	if (optind + 1 != argc)
		die("ls wants one path");
	struct kiln_client *c = open_client(t);
	if (kiln_list(c, argv[optind], depth, print_entry, &lng, NULL) < 0)
		return fail(c, "ls");
	kiln_client_free(c);
	return 0;
}

static int cmd_stat(const struct target *t, int argc, char **argv)
{
	uint32_t flags = 0;
	if (argc == 3 && !strcmp(argv[1], "-L")) {
		flags = KILN_STAT_NOFOLLOW;
		argv++;
		argc--;
	}
	if (argc != 2)
		die("stat wants one path");
	struct kiln_client *c = open_client(t);
	struct kiln_stat st;
	if (kiln_stat(c, argv[1], flags, &st) < 0)
		return fail(c, "stat");
	char m[11];
	mode_string(st.mode, m);
	printf("mode=%s (%o)\nsize=%" PRIu64 "\nuid=%u\ngid=%u\nmtime_ns=%" PRId64 "\nnlink=%" PRIu64
	       "\nino=%" PRIu64 "\n", m, st.mode, st.size, st.uid, st.gid, st.mtime_ns, st.nlink, st.ino);
	if (st.link[0])
		printf("link=%s\n", st.link);
	kiln_client_free(c);
	return 0;
}

static int cmd_mkdir(const struct target *t, int argc, char **argv)
{
	uint32_t flags = 0, mode = 0755;
	int opt;
	optind = 1;
	while ((opt = getopt(argc, argv, "+pm:")) != -1) {
		if (opt == 'p')
			flags |= KILN_MKDIR_PARENTS;
		else if (opt == 'm')
			mode = (uint32_t)strtoul(optarg, NULL, 8);
		else
			return 2;
	}
	if (optind + 1 != argc)
		die("mkdir wants one path");
	struct kiln_client *c = open_client(t);
	if (kiln_mkdir(c, argv[optind], mode, flags) < 0)
		return fail(c, "mkdir");
	kiln_client_free(c);
	return 0;
}

static int cmd_rm(const struct target *t, int argc, char **argv)
{
	uint32_t flags = 0;
	int opt;
	optind = 1;
	while ((opt = getopt(argc, argv, "+rf")) != -1) {
		if (opt == 'r')
			flags |= KILN_REMOVE_RECURSIVE;
		else if (opt == 'f')
			flags |= KILN_REMOVE_FORCE;
		else
			return 2;
	}
	if (optind + 1 != argc)
		die("rm wants one path");
	struct kiln_client *c = open_client(t);
	if (kiln_remove(c, argv[optind], flags) < 0)
		return fail(c, "rm");
	kiln_client_free(c);
	return 0;
}

static int cmd_mv(const struct target *t, int argc, char **argv)
{
	if (argc != 3)
		die("mv wants FROM TO");
	struct kiln_client *c = open_client(t);
	if (kiln_rename(c, argv[1], argv[2], 0) < 0)
		return fail(c, "mv");
	kiln_client_free(c);
	return 0;
}

static int cmd_chmod(const struct target *t, int argc, char **argv)
{
	if (argc != 3)
		die("chmod wants MODE PATH");
	struct kiln_client *c = open_client(t);
	if (kiln_chmod(c, argv[2], (uint32_t)strtoul(argv[1], NULL, 8)) < 0)
		return fail(c, "chmod");
	kiln_client_free(c);
	return 0;
}

static void event_names(uint32_t ev, char *out, size_t outlen)
{
	static const struct { uint32_t bit; const char *name; } names[] = {
		{ KILN_EV_CREATE, "create" }, { KILN_EV_MODIFY, "modify" },
		{ KILN_EV_DELETE, "delete" }, { KILN_EV_MOVED_FROM, "moved_from" },
		{ KILN_EV_MOVED_TO, "moved_to" }, { KILN_EV_ATTRIB, "attrib" },
		{ KILN_EV_CLOSE_WRITE, "close_write" }, { KILN_EV_ISDIR, "dir" },
		{ KILN_EV_OVERFLOW, "overflow" }, { KILN_EV_GONE, "gone" },
	};
	size_t used = 0;
	out[0] = 0;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (ev & names[i].bit)
			used += (size_t)snprintf(out + used, outlen - used, "%s%s", used ? "," : "", names[i].name);
}

static int cmd_watch(const struct target *t, int argc, char **argv)
{
	uint32_t flags = 0;
	long limit = -1;
	int opt;
	optind = 1;
	while ((opt = getopt(argc, argv, "+rn:")) != -1) {
		if (opt == 'r')
			flags |= KILN_WATCH_RECURSIVE;
		else if (opt == 'n')
			limit = (long)num(optarg, "count");
		else
			return 2;
	}
	if (optind + 1 != argc)
		die("watch wants one path");
	struct kiln_client *c = open_client(t);
	if (kiln_watch_start(c, argv[optind], flags) < 0)
		return fail(c, "watch");
	/* Tell a script it may start changing things now. */
	fprintf(stderr, "kiln-guest: watching %s\n", argv[optind]);
	for (long n = 0;;) {
		uint32_t ev;
		char name[4096], what[128];
		if (limit >= 0 && n >= limit) {
			if (kiln_watch_cancel(c) < 0)
				return fail(c, "watch");
			limit = -1;
		}
		int rc = kiln_watch_next(c, &ev, name, sizeof name);
		if (rc < 0)
			return fail(c, "watch");
		if (rc == 0)
			break;
		event_names(ev, what, sizeof what);
		printf("%s %s\n", what, name);
		fflush(stdout);
		n++;
	}
	kiln_client_free(c);
	return 0;
}

/* ---- system ------------------------------------------------------------- */

static int cmd_ping(const struct target *t, int argc, char **argv)
{
	long count = 1;
	if (argc == 3 && !strcmp(argv[1], "-n"))
		count = (long)num(argv[2], "count");
	struct kiln_client *c = open_client(t);
	for (long i = 0; i < count; i++) {
		int64_t t0 = now_ns(CLOCK_MONOTONIC);
		if (kiln_ping(c) < 0)
			return fail(c, "ping");
		printf("pong in %.1f us\n", (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e3);
	}
	kiln_client_free(c);
	return 0;
}

static int cmd_info(const struct target *t)
{
	struct kiln_client *c = open_client(t);
	struct kiln_info i;
	if (kiln_info(c, &i) < 0)
		return fail(c, "info");
	printf("protocol=%u\nagent=%s\nkernel=%s\nhostname=%s\nidentity=%s\nuptime_ns=%" PRIu64
	       "\ntime_ns=%" PRId64 "\nmem_total=%" PRIu64 "\nmem_avail=%" PRIu64
	       "\nncpu=%u\nnprocs=%u\npid=%u\n", i.version, i.agent, i.kernel, i.hostname,
	       i.identity, i.uptime_ns, i.time_ns, i.mem_total, i.mem_avail, i.ncpu, i.nprocs, i.pid);
	kiln_client_free(c);
	return 0;
}

/* Like nc: stdin goes to the guest's TCP connection, its bytes to stdout;
 * the end of stdin is passed on as a half-close. */
static int cmd_connect(const struct target *t, int argc, char **argv)
{
	if (argc < 2 || argc > 3)
		die("connect wants PORT [HOST]");
	unsigned port = (unsigned)num(argv[1], "port");
	struct kiln_client *c = open_client(t);
	int fd;
	void *early;
	size_t n;
	if (kiln_tcp_connect(c, argc == 3 ? argv[2] : NULL, port) < 0 ||
	    kiln_client_detach(c, &fd, &early, &n) < 0)
		return fail(c, "connect");
	kiln_client_free(c);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	int rc = n ? write_all(STDOUT_FILENO, early, n) : 0;
	free(early);
	bool in_open = true;
	char buf[65536];
	while (rc == 0) {
		struct pollfd pf[2] = { { .fd = in_open ? STDIN_FILENO : -1, .events = POLLIN },
					{ .fd = fd, .events = POLLIN } };
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			rc = -1;
			break;
		}
		if (pf[0].revents) {
			ssize_t r = read(STDIN_FILENO, buf, sizeof buf);
			if (r > 0) {
				rc = write_all(fd, buf, (size_t)r);
			} else {
				shutdown(fd, SHUT_WR);
				in_open = false;
			}
		}
		if (pf[1].revents) {
			ssize_t r = read(fd, buf, sizeof buf);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				rc = r < 0 ? -1 : 1;
				break;
			}
			rc = write_all(STDOUT_FILENO, buf, (size_t)r);
		}
	}
	close(fd);
	return rc < 0 ? 1 : 0;
}

static int cmd_resync(const struct target *t, int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "time", required_argument, NULL, 't' },
		{ "entropy", required_argument, NULL, 'e' },
		{ "hostname", required_argument, NULL, 'h' },
		{ "identity", required_argument, NULL, 'i' },
		{ 0 }
	};
	struct kiln_resync r = { 0 };
	uint8_t seed[4096];
	int opt;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (opt) {
		case 't':
			r.set_time = true;
			r.time_ns = strcmp(optarg, "now") ? (int64_t)strtoll(optarg, NULL, 10)
							  : now_ns(CLOCK_REALTIME);
			break;
		case 'e':
			r.entropy_len = num(optarg, "entropy");
			if (r.entropy_len > sizeof seed)
				die("--entropy: at most %zu bytes", sizeof seed);
			if (getrandom(seed, r.entropy_len, 0) != (ssize_t)r.entropy_len)
				die("getrandom: %s", strerror(errno));
			r.entropy = seed;
			break;
		case 'h': r.hostname = optarg; break;
		case 'i': r.identity = optarg; break;
		default: return 2;
		}
	}
	struct kiln_client *c = open_client(t);
	int rc = kiln_resync(c, &r);
	explicit_bzero(seed, sizeof seed);
	if (rc < 0)
		return fail(c, "resync");
	kiln_client_free(c);
	return 0;
}

static int cmd_poweroff(const struct target *t, int argc, char **argv)
{
	uint32_t flags = argc == 2 && !strcmp(argv[1], "--reboot") ? KILN_POWEROFF_REBOOT : 0;
	struct kiln_client *c = open_client(t);
	if (kiln_poweroff(c, flags) < 0)
		return fail(c, "poweroff");
	kiln_client_free(c);
	return 0;
}

/* ---- bench -------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int cmd_bench_exec(const struct target *t, int argc, char **argv)
{
	long n = 1000;
	bool local = false;
	int i;
	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = (long)num(argv[++i], "-n");
		else if (!strcmp(argv[i], "--local"))
			local = true;
		else
			die("bench-exec: unknown option %s", argv[i]);
	}
	if (i + 1 >= argc || n < 1)
		die("bench-exec wants [-n N] [--local] -- CMD...");
	char **cmd = argv + i + 1;
	int64_t *lat = calloc((size_t)n, sizeof *lat);
	struct kiln_client *c = local ? NULL : open_client(t);
	if (!lat)
		die("out of memory");
	for (long k = 0; k < n; k++) {
		int64_t t0 = now_ns(CLOCK_MONOTONIC);
		if (local) {
			pid_t pid;
			int st;
			if (posix_spawnp(&pid, cmd[0], NULL, NULL, cmd, environ) != 0)
				die("spawn %s: %s", cmd[0], strerror(errno));
			waitpid(pid, &st, 0);
		} else {
			struct kiln_exec_req r = { .argv = (const char *const *)cmd };
			struct kiln_io ev;
			if (kiln_exec_start(c, &r, NULL, NULL) < 0)
				return fail(c, "bench-exec");
			do {
				if (kiln_exec_next(c, &ev) < 0)
					return fail(c, "bench-exec");
			} while (ev.kind != KILN_IO_EXIT);
		}
		lat[k] = now_ns(CLOCK_MONOTONIC) - t0;
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp_i64);
	double sum = 0;
	for (long k = 0; k < n; k++)
		sum += (double)lat[k];
	printf("runs=%ld p50_us=%.1f p99_us=%.1f mean_us=%.1f\n", n,
	       (double)lat[n / 2] / 1e3, (double)lat[(n * 99) / 100 >= n ? n - 1 : (n * 99) / 100] / 1e3,
	       sum / (double)n / 1e3);
	free(lat);
	kiln_client_free(c);
	return 0;
}

int main(int argc, char **argv)
{
	struct target t = { .cid = -1, .port = KILN_VSOCK_PORT, .timeout_ms = -1 };
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_text, stdout);
			return 0;
		}
		if (i + 1 >= argc)
			die("%s needs a value", a);
		if (!strcmp(a, "--vsock"))
			t.vsock = argv[++i];
		else if (!strcmp(a, "--unix"))
			t.unix_path = argv[++i];
		else if (!strcmp(a, "--cid"))
			t.cid = (long)num(argv[++i], "--cid");
		else if (!strcmp(a, "--port"))
			t.port = (unsigned)num(argv[++i], "--port");
		else if (!strcmp(a, "--timeout"))
			t.timeout_ms = (int)(strtod(argv[++i], NULL) * 1000);
		else if (!strcmp(a, "--wait"))
			t.wait_ms = (int)(strtod(argv[++i], NULL) * 1000);
		else
			die("unknown option %s (see --help)", a);
	}
	if (i >= argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	const char *cmd = argv[i];
	int cargc = argc - i;
	char **cargv = argv + i;
	bool needs_target = strcmp(cmd, "bench-exec") != 0;
	if (needs_target && (!!t.vsock + !!t.unix_path + (t.cid >= 0)) != 1)
		die("give exactly one of --vsock, --unix or --cid");
	signal(SIGPIPE, SIG_IGN);

	if (!strcmp(cmd, "ping")) return cmd_ping(&t, cargc, cargv);
	if (!strcmp(cmd, "info")) return cmd_info(&t);
	if (!strcmp(cmd, "exec")) return cmd_exec(&t, cargc, cargv, false);
	if (!strcmp(cmd, "pty")) return cmd_exec(&t, cargc, cargv, true);
	if (!strcmp(cmd, "attach")) return cmd_attach(&t, cargc, cargv);
	if (!strcmp(cmd, "ps")) return cmd_ps(&t);
	if (!strcmp(cmd, "kill")) return cmd_kill(&t, cargc, cargv);
	if (!strcmp(cmd, "cp")) return cmd_cp(&t, cargc, cargv);
	if (!strcmp(cmd, "cat")) {
		char *av[] = { "cp", NULL, "-", NULL };
		char src[4200];
		if (cargc != 2)
			die("cat wants one path");
		snprintf(src, sizeof src, ":%s", cargv[1]);
		av[1] = src;
		return cmd_cp(&t, 3, av);
	}
	if (!strcmp(cmd, "ls")) return cmd_ls(&t, cargc, cargv);
	if (!strcmp(cmd, "stat")) return cmd_stat(&t, cargc, cargv);
	if (!strcmp(cmd, "mkdir")) return cmd_mkdir(&t, cargc, cargv);
	if (!strcmp(cmd, "rm")) return cmd_rm(&t, cargc, cargv);
	if (!strcmp(cmd, "mv")) return cmd_mv(&t, cargc, cargv);
	if (!strcmp(cmd, "chmod")) return cmd_chmod(&t, cargc, cargv);
	if (!strcmp(cmd, "watch")) return cmd_watch(&t, cargc, cargv);
	if (!strcmp(cmd, "resync")) return cmd_resync(&t, cargc, cargv);
	if (!strcmp(cmd, "poweroff")) return cmd_poweroff(&t, cargc, cargv);
	if (!strcmp(cmd, "connect")) return cmd_connect(&t, cargc, cargv);
	if (!strcmp(cmd, "bench-exec")) return cmd_bench_exec(&t, cargc, cargv);
	die("unknown command %s (see --help)", cmd);
}
