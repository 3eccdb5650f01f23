#include "host/guest_conn.h"
#include "host/proc.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client/kiln_client.h"

struct guest {
	struct kiln_client *c;
	char cwd[256];			/* exec's directory when a command names none */
	bool holds;			/* a background process started or attached here */
};

/* The library's message becomes ours (errmsg()). */
static int gfail(struct guest *g, int rc, const char *what)
{
	const char *m = g && g->c ? kiln_client_error(g->c) : "";
	return errf(-rc, "%s: %s", what, m[0] ? m : strerror(-rc));
}

int guest_open(const char *vsock, int timeout_ms, pid_t vmm_pid, struct guest **out)
{
	struct guest *g = calloc(1, sizeof *g);
	if (!g || !(g->c = kiln_client_new())) {
		free(g);
		return errf(ENOMEM, "out of memory");
	}
	int64_t deadline = mono_ms() + timeout_ms;
	for (;;) {
		int64_t left = deadline - mono_ms();
		kiln_client_set_timeout(g->c, (int)(left < 2000 ? (left > 0 ? left : 1) : 2000));
		int rc = kiln_connect_bridge(g->c, vsock, KILN_VSOCK_PORT);
		if (rc == 0)
			break;
		if (vmm_pid > 0 && !proc_alive(vmm_pid, 0)) {
			rc = errf(ECHILD, "the VMM exited before the guest agent answered");
			guest_close(g);
			return rc;
		}
		if (mono_ms() >= deadline) {
			rc = gfail(g, -ETIMEDOUT, "guest agent did not answer in time");
			guest_close(g);
			return rc;
		}
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	kiln_client_set_timeout(g->c, -1);
	*out = g;
	return 0;
}

void guest_close(struct guest *g)
{
	if (!g)
		return;
	kiln_client_free(g->c);
	free(g);
}

int guest_wait_ready(const char *vsock, int timeout_ms, pid_t vmm_pid, struct guest **out)
{
	int64_t deadline = mono_ms() + timeout_ms;
	for (;;) {
		int64_t left = deadline - mono_ms();
		struct guest *g;
		int rc = guest_open(vsock, (int)(left > 0 ? left : 1), vmm_pid, &g);
		if (rc < 0)
			return rc;
		guest_set_timeout(g, (int)(left < 2000 ? (left > 0 ? left : 1) : 2000));
		if ((rc = guest_ping(g)) == 0) {
			guest_set_timeout(g, -1);
			*out = g;
			return 0;
		}
		guest_close(g);
		if (mono_ms() >= deadline || rc == -ECHILD)
			return rc;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

void guest_set_timeout(struct guest *g, int ms)
{
	kiln_client_set_timeout(g->c, ms);
}

int guest_ping(struct guest *g)
{
	int rc = kiln_ping(g->c);
	return rc < 0 ? gfail(g, rc, "guest ping") : 0;
}

int guest_resync(struct guest *g, const char *hostname, const char *identity)
{
	unsigned char seed[64];
	if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
		return errf_sys("getrandom");
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct kiln_resync r = {
		.set_time = true,
		.time_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec,
		.entropy = seed,
		.entropy_len = sizeof seed,
		.hostname = hostname,
		.identity = identity,
	};
	int rc = kiln_resync(g->c, &r);
	return rc < 0 ? gfail(g, rc, "guest resync") : 0;
}

int guest_tcp_connect(struct guest *g, unsigned port, int *fd, void **early, size_t *n)
{
	int rc = kiln_tcp_connect(g->c, NULL, port);
	if (rc == 0)
		rc = kiln_client_detach(g->c, fd, early, n);
	return rc < 0 ? gfail(g, rc, "guest connect") : 0;
}

void guest_set_default_cwd(struct guest *g, const char *cwd)
{
	snprintf(g->cwd, sizeof g->cwd, "%s", cwd && strlen(cwd) < sizeof g->cwd ? cwd : "");
}

const char *guest_default_cwd(const struct guest *g)
{
	return g->cwd;
}

int guest_adopt(int fd, const void *early, size_t n, const char *cwd, int wait_ms, struct guest **out)
{
	struct guest *g = calloc(1, sizeof *g);
	if (!g || !(g->c = kiln_client_new())) {
		free(g);
		close(fd);
		return errf(ENOMEM, "out of memory");
	}
	int rc = kiln_client_adopt(g->c, fd, early, n);
	if (rc < 0) {
		rc = gfail(g, rc, "guest relay");
		guest_close(g);
		return rc;
	}
	guest_set_default_cwd(g, cwd);
	kiln_client_set_timeout(g->c, wait_ms);
	*out = g;
	return 0;
}

bool guest_holds_process(const struct guest *g)
{
	return g && g->holds;
}

int guest_close_wait(struct guest *g, int wait_ms)
{
	int fd = -1, rc = 0;
	void *early = NULL;
	size_t n = 0;
	if (!g)
		return 0;
	if (kiln_client_detach(g->c, &fd, &early, &n) < 0 || fd < 0) {
		guest_close(g);	/* broken already: nothing to wait for */
		return 0;
	}
	free(early);
	guest_close(g);
	/* Our end of sending; then whatever comes until the other end's,
	 * which a relay's host sends once the agent has closed its side. */
	shutdown(fd, SHUT_WR);
	int64_t deadline = mono_ms() + wait_ms;
	char buf[4096];
	for (;;) {
		int64_t left = deadline - mono_ms();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int k = left > 0 ? poll(&p, 1, (int)left) : 0;
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0) {
			rc = errf(ETIMEDOUT, "the guest connection's other end did not close within %d ms", wait_ms);
			break;
		}
		ssize_t r = k > 0 ? recv(fd, buf, sizeof buf, MSG_DONTWAIT) : -1;
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			break;	/* its end (or it reset: ended as well) */
	}
	close(fd);
	return rc;
}

int guest_release(struct guest *g, int *fd, void **early, size_t *n)
{
	int rc = kiln_client_detach(g->c, fd, early, n);
	return rc < 0 ? gfail(g, rc, "guest relay") : 0;
}

int guest_exec_start(struct guest *g, struct guest_cmd *cmd)
{
	struct kiln_exec_req r = {
		.argv = cmd->argv,
		.shell = cmd->shell,
		.env = cmd->env,
		.cwd = cmd->cwd ? cmd->cwd : g->cwd[0] ? g->cwd : NULL,
		.user = cmd->user,
		.timeout_ms = cmd->timeout_ms,
		.flags = (cmd->stdin_pipe ? KILN_EXEC_STDIN : 0) | (cmd->pty ? KILN_EXEC_PTY : 0) |
			 (cmd->background ? KILN_EXEC_BACKGROUND : 0) |
			 (cmd->builtin ? KILN_EXEC_BUILTIN : 0),
		.rows = cmd->rows,
		.cols = cmd->cols,
	};
	int rc = kiln_exec_start(g->c, &r, &cmd->id, &cmd->pid);
	if (rc == 0 && cmd->background)
		g->holds = true;
	return rc < 0 ? gfail(g, rc, "exec") : 0;
}

int guest_exec_detach(struct guest *g)
{
	int rc = kiln_exec_cancel(g->c);
	return rc < 0 ? gfail(g, rc, "detach") : 0;
}

int guest_attach(struct guest *g, uint32_t id, uint32_t *pid, uint64_t *dropped)
{
	int rc = kiln_attach(g->c, id, pid, dropped);
	if (rc == 0)
		g->holds = true;
	return rc < 0 ? gfail(g, rc, "attach") : 0;
}

struct procs_ctx {
	guest_proc_fn *fn;
	void *ctx;
};

static int one_proc(void *ctx, const struct kiln_proc_info *k)
{
	struct procs_ctx *pc = ctx;
	struct guest_proc p = {
		.id = k->id, .pid = k->pid, .exited = k->state == KILN_PROC_EXITED,
		.code = k->signal ? 128 + k->signal : k->code, .signal = k->signal,
		.start_ns = k->start_ns, .dropped = k->dropped,
	};
	memcpy(p.cmd, k->cmd, sizeof p.cmd);
	return pc->fn(pc->ctx, &p);
}

int guest_procs(struct guest *g, guest_proc_fn *fn, void *ctx)
{
	struct procs_ctx pc = { fn, ctx };
	int rc = kiln_procs(g->c, one_proc, &pc);
	return rc < 0 ? gfail(g, rc, "processes") : rc;
}

int guest_signal(struct guest *g, uint32_t id, int sig)
{
	int rc = kiln_signal(g->c, id, sig, 0);
	return rc < 0 ? gfail(g, rc, "signal") : 0;
}

int guest_proc_input(struct guest *g, uint32_t id, const void *p, size_t n, bool eof)
{
	const uint8_t *d = p;
	do {
		size_t part = n < KILN_INPUT_MAX ? n : KILN_INPUT_MAX;
		bool last = part == n;
		int rc = kiln_input(g->c, id, d, part, last && eof ? KILN_INPUT_EOF : 0);
		if (rc < 0)
			return gfail(g, rc, "stdin");
		d += part;
		n -= part;
	} while (n);
	return 0;
}

static void convert(const struct kiln_io *io, struct guest_ev *ev)
{
	memset(ev, 0, sizeof *ev);
	switch (io->kind) {
	case KILN_IO_STDOUT: ev->kind = GEV_STDOUT; break;
	case KILN_IO_STDERR: ev->kind = GEV_STDERR; break;
	default: ev->kind = GEV_EXIT; break;
	}
	ev->data = io->data;
	ev->len = io->len;
	ev->signal = io->signal;
	ev->code = io->signal ? 128 + io->signal : io->code;
	ev->timed_out = io->timed_out;
}

/* Wait until the agent's connection has something for us (1, after
 * kiln_client_io), deadline passes (0; deadline 0: none), or watch_fd
 * hangs up (-ECONNABORTED). */
static int wait_agent(struct guest *g, int watch_fd, int64_t deadline, const char *what)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = kiln_client_fd(g->c), .events = kiln_client_events(g->c) },
			{ .fd = watch_fd, .events = POLLRDHUP },
		};
		int left = -1;
		if (deadline) {
			left = (int)(deadline - mono_ms());
			if (left < 0)
				left = 0;
		}
		int n = poll(p, watch_fd >= 0 ? 2 : 1, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errf_sys("poll");
		if (n == 0)
			return 0;
		if (watch_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return errf(ECONNABORTED, "the client went away");
		int rc;
		if (p[0].revents && (rc = kiln_client_io(g->c, p[0].revents)) < 0)
			return gfail(g, rc, what);
		return 1;
	}
}

/* guest_exec_next, and what the agent's event was (*io_kind, KILN_IO_*):
 * a detach (END) reads as an exit to guest_exec_next's callers. */
static int exec_next(struct guest *g, struct guest_ev *ev, int watch_fd, int wait_ms, int *io_kind)
{
	int64_t deadline = wait_ms >= 0 ? mono_ms() + wait_ms : 0;
	for (;;) {
		struct kiln_io io;
		int rc = kiln_exec_poll(g->c, &io);
		if (rc < 0)
			return gfail(g, rc, "exec");
		if (rc > 0) {
			convert(&io, ev);
			*io_kind = (int)io.kind;
			return 1;
		}
		if ((rc = wait_agent(g, watch_fd, deadline, "exec")) <= 0)
			return rc;
	}
}

int guest_exec_next(struct guest *g, struct guest_ev *ev, int watch_fd, int wait_ms)
{
	int io_kind;
	return exec_next(g, ev, watch_fd, wait_ms, &io_kind);
}

int guest_exec_run(struct guest *g, struct guest_cmd *cmd, guest_out_fn *out, void *ctx, int watch_fd,
		   int wait_ms, struct guest_ev *exit)
{
	memset(exit, 0, sizeof *exit);
	exit->code = -1;
	int rc = guest_exec_start(g, cmd);
	return rc < 0 ? rc : guest_exec_wait(g, out, ctx, watch_fd, wait_ms, exit);
}

int guest_exec_wait(struct guest *g, guest_out_fn *out, void *ctx, int watch_fd, int wait_ms,
		    struct guest_ev *exit)
{
	memset(exit, 0, sizeof *exit);
	exit->code = -1;
	for (;;) {
		int rc;
		struct guest_ev ev;
		int io_kind = 0;
		if ((rc = exec_next(g, &ev, watch_fd, wait_ms, &io_kind)) < 0)
			return rc;
		if (rc == 0)
			return errf(ETIMEDOUT, "the command sent nothing for %d ms", wait_ms);
		if (ev.kind == GEV_EXIT && io_kind != KILN_IO_EXIT)
			return errf(EIO, "the command's stream ended before its exit");
		if (ev.kind == GEV_EXIT) {
			*exit = ev;
			return 0;
		}
		if (out && (rc = out(ctx, &ev)) < 0)
			return rc;
	}
}

int guest_exec_stdin(struct guest *g, const void *p, size_t n)
{
	int rc = kiln_exec_stdin(g->c, p, n);
	return rc < 0 ? gfail(g, rc, "exec stdin") : 0;
}

int guest_exec_eof(struct guest *g)
{
	int rc = kiln_exec_eof(g->c);
	return rc < 0 ? gfail(g, rc, "exec stdin") : 0;
}

int guest_exec_resize(struct guest *g, unsigned rows, unsigned cols)
{
	int rc = kiln_exec_resize(g->c, rows, cols);
	return rc < 0 ? gfail(g, rc, "resize") : 0;
}

size_t guest_exec_pending(struct guest *g)
{
	return kiln_client_pending(g->c);
}

int guest_poll_fd(struct guest *g, short *events)
{
	*events = kiln_client_events(g->c);
	return kiln_client_fd(g->c);
}

int guest_exec_io(struct guest *g, short revents)
{
	int rc = kiln_client_io(g->c, revents);
	return rc < 0 ? gfail(g, rc, "exec") : 0;
}

/* ---- files ------------------------------------------------------------------ */

struct sink_ctx {
	int fd;
	uint64_t total, max;
};

static int sink_fd(void *ctx, const void *data, size_t len)
{
	struct sink_ctx *s = ctx;
	s->total += len;
	if (s->total > s->max)
		return -EFBIG;
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(s->fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -(errno ? errno : EIO);
		p += w, len -= w;
	}
	return 0;
}

int guest_read_file(struct guest *g, const char *path, int out_fd, uint64_t max, uint64_t *size)
{
	struct sink_ctx s = { out_fd, 0, max };
	uint64_t fsize = 0, bytes = 0;
	uint32_t mode;
	int rc = kiln_read_file(g->c, path, 0, UINT64_MAX, sink_fd, &s, &fsize, &mode, &bytes);
	if (rc == -EFBIG)
		return errf(EFBIG, "%s is larger than the limit of %llu bytes", path,
			    (unsigned long long)max);
	if (rc < 0)
		return gfail(g, rc, "read");
	*size = bytes;
	return 0;
}

static ssize_t source_fd(void *ctx, void *buf, size_t cap)
{
	int fd = *(int *)ctx;
	for (;;) {
		ssize_t n = read(fd, buf, cap);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -errno;
	}
}

int guest_write_file(struct guest *g, const char *path, uint32_t mode, bool mkdirs, int in_fd,
		     uint64_t *bytes)
{
	int rc = kiln_write_file(g->c, path, mode, mkdirs ? KILN_WRITE_MKDIRS : 0, source_fd, &in_fd,
				 bytes);
	return rc < 0 ? gfail(g, rc, "write") : 0;
}

static void stat_of(const struct kiln_stat *k, struct guest_stat *st)
{
	memcpy(st->name, k->name, sizeof st->name);
	st->mode = k->mode;
	st->size = k->size;
	st->uid = k->uid;
	st->gid = k->gid;
	st->mtime_ns = k->mtime_ns;
	memcpy(st->link, k->link, sizeof st->link);
}

int guest_stat(struct guest *g, const char *path, struct guest_stat *st)
{
	struct kiln_stat *k = calloc(1, sizeof *k);
	if (!k)
		return errf(ENOMEM, "out of memory");
	int rc = kiln_stat(g->c, path, KILN_STAT_NOFOLLOW, k);
	if (rc < 0)
		rc = gfail(g, rc, "stat");
	else
		stat_of(k, st);
	free(k);
	return rc;
}

struct list_ctx {
	guest_entry_fn *fn;
	void *ctx;
	struct guest_stat st;
};

static int list_entry(void *ctx, const struct kiln_stat *e)
{
	struct list_ctx *l = ctx;
	stat_of(e, &l->st);
	return l->fn(l->ctx, &l->st);
}

int guest_list(struct guest *g, const char *path, unsigned depth, guest_entry_fn *fn, void *ctx)
{
	struct list_ctx *l = calloc(1, sizeof *l);
	if (!l)
		return errf(ENOMEM, "out of memory");
	l->fn = fn;
	l->ctx = ctx;
	uint64_t count;
	int rc = kiln_list(g->c, path, depth, list_entry, l, &count);
	free(l);
	if (rc > 0)
		return rc;	/* fn stopped the walk */
	return rc < 0 ? gfail(g, rc, "list") : 0;
}

int guest_remove(struct guest *g, const char *path, bool recursive)
{
	int rc = kiln_remove(g->c, path, recursive ? KILN_REMOVE_RECURSIVE : 0);
	return rc < 0 ? gfail(g, rc, "remove") : 0;
}

int guest_mkdir(struct guest *g, const char *path, uint32_t mode, bool parents)
{
	int rc = kiln_mkdir(g->c, path, mode, parents ? KILN_MKDIR_PARENTS : 0);
	return rc < 0 ? gfail(g, rc, "mkdir") : 0;
}

int guest_watch_start(struct guest *g, const char *path, bool recursive)
{
	int rc = kiln_watch_start(g->c, path, recursive ? KILN_WATCH_RECURSIVE : 0);
	return rc < 0 ? gfail(g, rc, "watch") : 0;
}

int guest_watch_next(struct guest *g, uint32_t *events, char *name, size_t namelen, int watch_fd,
		     int wait_ms)
{
	int64_t deadline = mono_ms() + (wait_ms > 0 ? wait_ms : 0);
	for (;;) {
		int rc = kiln_watch_poll(g->c, events, name, namelen);
		if (rc < 0)
			return gfail(g, rc, "watch");
		if (rc == 1)
			return 1;
		if (rc == 0)
			return 2;	/* the watch ended (GONE came before) */
		if ((rc = wait_agent(g, watch_fd, deadline, "watch")) <= 0)
			return rc;
	}
}

int guest_watch_cancel(struct guest *g)
{
	int rc = kiln_watch_cancel(g->c);
	return rc < 0 ? gfail(g, rc, "watch") : 0;
}

int guest_rename(struct guest *g, const char *from, const char *to, bool replace)
{
	int rc = kiln_rename(g->c, from, to, replace ? 0 : KILN_RENAME_NOREPLACE);
	return rc < 0 ? gfail(g, rc, "rename") : 0;
}

int guest_chmod(struct guest *g, const char *path, uint32_t mode)
{
	int rc = kiln_chmod(g->c, path, mode);
	return rc < 0 ? gfail(g, rc, "chmod") : 0;
}

/* ---- files as a user, built-ins ------------------------------------------------ */

int guest_set_user(struct guest *g, const char *user)
{
	int rc = kiln_client_set_user(g->c, user);
	return rc < 0 ? gfail(g, rc, "user") : 0;
}

int guest_builtin_start(struct guest *g, const char *const *argv, const char *user, bool stdin_pipe)
{
	struct guest_cmd cmd = {
		.argv = argv,
		.cwd = "/",
		.user = user,
		.stdin_pipe = stdin_pipe,
		.builtin = true,
	};
	int rc = guest_exec_start(g, &cmd);
	if (rc == -EINVAL && strstr(errmsg(), "no built-in"))
		return errf(EOPNOTSUPP, "this sandbox's guest agent is older than the %s built-in "
			    "(rebuild its template)", argv[0]);
	return rc;
}

int guest_builtin_status(const struct guest_ev *exit, const char *err, size_t errlen)
{
	/* The agent's message, one line, bounded: the guest is not trusted
	 * to keep it short. */
	char msg[1024];
	size_t n = errlen < sizeof msg - 1 ? errlen : sizeof msg - 1;
	memcpy(msg, err, n);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		n--;
	msg[n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)msg[i] < 0x20)
			msg[i] = ' ';
	if (exit->signal)
		return errf(EIO, "%s killed by signal %d%s%s", "the agent's built-in", exit->signal,
			    n ? ": " : "", msg);
	if (exit->code == 0)
		return 0;
	return errf(exit->code, "%s", n ? msg : strerror(exit->code));
}

/* guest_builtin_run, keeping the first cap - 1 bytes of its stdout in
 * out (NUL-terminated) when out is not NULL, the rest read and dropped:
 * the guest says what it likes, the host keeps a bounded line of it. */
static int builtin_run(struct guest *g, const char *const *argv, const char *user, int in_fd, int watch_fd,
		       char *out, size_t cap)
{
	int rc = guest_builtin_start(g, argv, user, in_fd >= 0);
	if (rc < 0)
		return rc;
	char err[1024], buf[65536];
	size_t errlen = 0, outlen = 0;
	if (out && cap)
		out[0] = 0;
	bool fed = in_fd < 0;
	for (;;) {
		/* Keep up to 1 MiB queued for its stdin: memory stays bounded
		 * however large the input. */
		while (!fed && guest_exec_pending(g) < (1u << 20)) {
			ssize_t n = read(in_fd, buf, sizeof buf);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return errf_sys("read the upload");
			rc = n ? guest_exec_stdin(g, buf, (size_t)n) : guest_exec_eof(g);
			if (rc < 0)
				return rc;
			fed = n == 0;
		}
		struct guest_ev ev;
		rc = guest_exec_next(g, &ev, watch_fd, fed ? -1 : 200);
		if (rc < 0)
			return rc;
		if (rc == 0)
			continue;
		if (ev.kind == GEV_STDERR) {
			size_t k = ev.len < sizeof err - errlen ? ev.len : sizeof err - errlen;
			memcpy(err + errlen, ev.data, k);
			errlen += k;
		} else if (ev.kind == GEV_STDOUT && out && outlen + 1 < cap) {
			size_t k = ev.len < cap - 1 - outlen ? ev.len : cap - 1 - outlen;
			for (size_t i = 0; i < k; i++) {
				unsigned char c = ((const unsigned char *)ev.data)[i];
				out[outlen + i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
			}
			outlen += k;
			out[outlen] = 0;
		} else if (ev.kind == GEV_EXIT) {
			while (outlen && out[outlen - 1] == ' ')
				out[--outlen] = 0;
			return guest_builtin_status(&ev, err, errlen);
		}
	}
}

int guest_builtin_run(struct guest *g, const char *const *argv, const char *user, int in_fd,
		      int watch_fd)
{
	return builtin_run(g, argv, user, in_fd, watch_fd, NULL, 0);
}

int guest_builtin_said(struct guest *g, const char *const *argv, char *out, size_t cap)
{
	return builtin_run(g, argv, NULL, -1, -1, out, cap);
}

int guest_grow_root(const char *vsock, pid_t vmm_pid, const char *what, long long mib, char *said, size_t cap)
{
	struct guest *g;
	int rc = guest_open(vsock, 10000, vmm_pid, &g);
	if (rc < 0)
		return rc;
	const char *argv[] = { "grow-fs", "/", NULL };
	rc = guest_builtin_said(g, argv, said, cap);
	guest_close(g);
	if (rc < 0) {
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "growing the root to %lld MiB (--disk) in %s: %s", mib, what, msg);
	}
	return 0;
}
