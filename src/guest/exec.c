/*
 * Processes: EXEC, ATTACH, PROCS, SIGNAL and INPUT, and the streaming of a
 * process's stdin, stdout and stderr.
 *
 * A process is attached to at most one connection. While attached, its
 * output goes straight into that connection's output buffer, and reading
 * stops while the buffer is above the high-water mark, so a slow client
 * slows the process down (its pipe fills and its write blocks). A
 * foreground process is killed (SIGKILL to its process group) when its
 * connection goes away. A background process keeps running; it also keeps
 * the tail of its combined output (stdout and stderr in order) in a
 * bounded ring, attached or not, so that ATTACH can replay it: output that
 * was in flight to a client that vanished is not lost. A detached process
 * never blocks on output; the oldest bytes fall off the ring instead, and
 * ATTACH says how many (DROPPED, the position of the first replayed byte
 * in the combined output).
 *
 * Exit is reported only after the output the process wrote before exiting
 * has been sent: at reap time the agent notes how many bytes are still in
 * each pipe (FIONREAD) and sends exactly those, so a grandchild that keeps
 * the pipe open cannot hold the exit back.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "guest/agent.h"
#include "guest/spawn.h"

#define ENV_MAX		4096	/* environment entries per EXEC */
#define PIPE_SIZE	(256u << 10)
#define DEFAULT_PATH	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

enum { OUT = 1, ERR = 2 };	/* output streams, as in fd numbers */

struct chunk {
	struct chunk *next;
	uint8_t stream;
	uint32_t len;
	uint8_t data[];
};

struct proc {
	struct agent *a;
	uint32_t id;
	pid_t pid;
	uint32_t flags;		/* KILN_EXEC_* */
	int in_fd;		/* stdin pipe, or the pty master */
	int out_fd;		/* stdout pipe, or the pty master */
	int err_fd;
	bool pty;
	struct buf pending;	/* stdin bytes the pipe has not taken yet */
	bool eof_pending;	/* close stdin once pending is written */
	bool out_paused;
	bool exited;		/* reaped */
	bool orphan;		/* foreground whose client left: killed */
	bool reattached;	/* its client came by ATTACH (not the EXEC's) */
	bool timed_out;
	int status;
	uint64_t tail[3];	/* after exit: bytes still to read per stream */
	int64_t deadline_ms;	/* CLOCK_MONOTONIC, 0 = none */
	int64_t start_ns;
	struct conn *conn;	/* attached client */
	struct chunk *ring_head, *ring_tail;
	size_t ring_bytes, ring_cap;
	uint64_t dropped;	/* output bytes that fell off the ring */
	struct chunk *replay;	/* next ring chunk for an attaching client */
	char cmd[256];		/* command line summary for PROCS */
	char cg[160];		/* its cgroup, "" without cgroups */
	struct proc *prev, *next;
};

static void proc_update(struct proc *p);
static void proc_check_done(struct proc *p);
static void proc_io(struct loop *l, int fd, uint32_t events, void *ctx);

static int64_t now_ms(void)
{
	return sys_now_ns(CLOCK_MONOTONIC) / 1000000;
}

/* ---- the process table ---------------------------------------------- */

static struct proc *proc_find(struct agent *a, uint32_t id)
{
	for (struct proc *p = a->procs; p; p = p->next)
		if (p->id == id && !p->orphan)
			return p;
	return NULL;
}

static void close_fd(struct proc *p, int *fd)
{
	if (*fd < 0)
		return;
	loop_del(&p->a->loop, *fd);
	close(*fd);
	*fd = -1;
}

/* SIGKILL for everything the command started: its process group, and its
 * cgroup, which also holds what left the group (setsid, daemons). */
static void kill_all(struct proc *p)
{
	kill(-p->pid, SIGKILL);
	cg_kill(p->cg);
}

static void ring_clear(struct proc *p)
{
	while (p->ring_head) {
		struct chunk *ch = p->ring_head;
		p->ring_head = ch->next;
		free(ch);
	}
	p->ring_tail = NULL;
	p->ring_bytes = 0;
}

static void proc_free(struct proc *p)
{
	struct agent *a = p->a;

	if (p->pty)
		p->out_fd = -1;	/* the same descriptor as in_fd */
	close_fd(p, &p->in_fd);
	close_fd(p, &p->out_fd);
	close_fd(p, &p->err_fd);
	ring_clear(p);
	buf_free(&p->pending);
	if (p->cg[0])
		cg_release(a, p->id);
	if (p->prev)
		p->prev->next = p->next;
	else
		a->procs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	a->nprocs--;
	free(p);
}

/* Keep at most PROC_EXITED_KEEP finished background records, dropping the
 * oldest (the list has the newest first). */
static void evict_exited(struct agent *a)
{
	int kept = 0;
	struct proc *p = a->procs, *next;
	for (; p; p = next) {
		next = p->next;
		if (p->exited && !p->conn && p->out_fd < 0 && p->err_fd < 0 &&
		    ++kept > PROC_EXITED_KEEP)
			proc_free(p);
	}
}

/* ---- output --------------------------------------------------------- */

/* Keep output for a later client. The ring holds the newest bytes; what
 * falls off the front is counted in `dropped`. The allocation overhead
 * counts too, so a process printing one byte at a time cannot make the
 * ring cost more than its cap. No output is read during a replay, so the
 * replay cursor never points at a chunk that falls off. */
static void ring_push(struct proc *p, uint8_t stream, const uint8_t *d, size_t n)
{
	const size_t overhead = sizeof(struct chunk) + 16;
	struct chunk *ch = malloc(sizeof *ch + n);
	if (!ch) {
		p->dropped += n;
		return;
	}
	ch->next = NULL;
	ch->stream = stream;
	ch->len = (uint32_t)n;
	memcpy(ch->data, d, n);
	if (p->ring_tail)
		p->ring_tail->next = ch;
	else
		p->ring_head = ch;
	p->ring_tail = ch;
	p->ring_bytes += n + overhead;
	while (p->ring_bytes > p->ring_cap && p->ring_head != ch) {
		struct chunk *old = p->ring_head;
		p->ring_head = old->next;
		p->ring_bytes -= old->len + overhead;
		p->dropped += old->len;
		free(old);
	}
}

/* Pause or resume reading the process's output. */
static void output_pause(struct proc *p, bool paused)
{
	if (p->out_paused == paused)
		return;
	p->out_paused = paused;
	proc_update(p);
	if (paused && p->conn)
		conn_want_drain(p->conn);
}

static void close_output(struct proc *p, int stream)
{
	if (stream == OUT) {
		if (p->pty) {
			/* The master is also stdin: nothing more goes in. */
			buf_free(&p->pending);
			p->in_fd = -1;
			if (p->conn)
				conn_pause_input(p->conn, false);
		}
		close_fd(p, &p->out_fd);
	} else {
		close_fd(p, &p->err_fd);
	}
}

/* Read one chunk of a stream: into the client's buffer when attached,
 * into the ring otherwise. */
static void read_output(struct proc *p, int stream)
{
	int fd = stream == OUT ? p->out_fd : p->err_fd;
	size_t want = KILN_CHUNK;
	ssize_t n;

	if (fd < 0)
		return;
	if (p->exited) {
		if (p->tail[stream] == 0) {
			close_output(p, stream);
			return;
		}
		if (want > p->tail[stream])
			want = p->tail[stream];
	}
	if (p->conn) {
		/* The replay of the ring comes first, to keep the order. */
		if (!conn_has_room(p->conn) || p->replay) {
			output_pause(p, true);
			return;
		}
		struct kiln_fb fb;
		conn_begin(p->conn, &fb, stream == OUT ? KILN_STDOUT : KILN_STDERR);
		uint8_t *dst = kiln_fb_raw_reserve(&fb, want);
		if (!dst) {
			conn_end(p->conn, &fb);	/* fails: closes the connection */
			return;
		}
		n = read(fd, dst, want);
		if (n > 0) {
			if (p->flags & KILN_EXEC_BACKGROUND)
				ring_push(p, (uint8_t)stream, dst, (size_t)n);
			kiln_fb_raw_commit(&fb, (size_t)n);
			if (conn_end(p->conn, &fb) < 0)
				return;
		} else {
			buf_truncate(fb.b, fb.start);
		}
	} else {
		uint8_t tmp[KILN_CHUNK];
		n = read(fd, tmp, want);
		if (n > 0)
			ring_push(p, (uint8_t)stream, tmp, (size_t)n);
	}
	if (n > 0) {
		if (p->exited) {
			p->tail[stream] -= (uint64_t)n;
			if (p->tail[stream] == 0)
				close_output(p, stream);
		}
		return;
	}
	/* EOF; EIO is how a pty master says the terminal side is closed;
	 * EAGAIN after exit means the rest was never there. */
	if (n == 0 || errno != EAGAIN || p->exited)
		close_output(p, stream);
}

/* ---- stdin ---------------------------------------------------------- */

static void close_stdin(struct proc *p)
{
	buf_free(&p->pending);
	p->eof_pending = false;
	if (p->pty) {
		/* A terminal has no half-close: send its EOF character, as a
		 * user pressing ^D would. */
		struct termios t;
		char eof = 4;
		if (p->in_fd >= 0 && tcgetattr(p->in_fd, &t) == 0 && t.c_cc[VEOF])
			eof = (char)t.c_cc[VEOF];
		if (p->in_fd >= 0 && write(p->in_fd, &eof, 1) < 0) {
			/* nothing more to do: the terminal is gone */
		}
		return;
	}
	close_fd(p, &p->in_fd);
}

/* Write pending stdin bytes. Returns when the pipe is full or empty. */
static void write_stdin(struct proc *p)
{
	while (buf_used(&p->pending) && p->in_fd >= 0) {
		ssize_t n = write(p->in_fd, buf_data(&p->pending), buf_used(&p->pending));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			/* EPIPE: the process closed stdin; drop the rest. */
			buf_free(&p->pending);
			if (!p->pty)
				close_fd(p, &p->in_fd);
			break;
		}
		buf_consume(&p->pending, (size_t)n);
	}
	if (buf_used(&p->pending))
		return;
	buf_free(&p->pending);
	if (p->eof_pending)
		close_stdin(p);
	proc_update(p);
	if (p->conn)
		conn_pause_input(p->conn, false);
}

/* ---- events --------------------------------------------------------- */

static void proc_update(struct proc *p)
{
	struct loop *l = &p->a->loop;
	uint32_t out = p->out_paused ? 0 : EPOLLIN;
	uint32_t in = buf_used(&p->pending) ? EPOLLOUT : 0;

	if (p->pty) {
		if (p->out_fd >= 0)
			loop_mod(l, p->out_fd, out | in);
		return;
	}
	if (p->out_fd >= 0)
		loop_mod(l, p->out_fd, out);
	if (p->err_fd >= 0)
		loop_mod(l, p->err_fd, out);
	if (p->in_fd >= 0)
		loop_mod(l, p->in_fd, in);
}

static void proc_io(struct loop *l, int fd, uint32_t events, void *ctx)
{
	struct proc *p = ctx;
	(void)l;

	if (fd == p->in_fd && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) &&
	    buf_used(&p->pending))
		write_stdin(p);
	if (fd == p->out_fd && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		read_output(p, OUT);
	else if (fd == p->err_fd && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		read_output(p, ERR);
	proc_check_done(p);
}

static void send_exit(struct proc *p)
{
	struct conn *c = p->conn;
	struct kiln_fb fb;

	conn_begin(c, &fb, KILN_EXIT);
	kiln_fb_u32(&fb, KT_ID, p->id);
	if (WIFSIGNALED(p->status))
		kiln_fb_u32(&fb, KT_SIGNAL, (uint32_t)WTERMSIG(p->status));
	else
		kiln_fb_u32(&fb, KT_CODE, (uint32_t)WEXITSTATUS(p->status));
	kiln_fb_u32(&fb, KT_FLAGS, p->timed_out ? KILN_EXIT_TIMEOUT : 0);
	p->conn = NULL;
	conn_end_op(c, &fb);
}

/* Finish a process whose exit and output have all been seen. May free p. */
static void proc_check_done(struct proc *p)
{
	if (!p->exited || p->out_fd >= 0 || p->err_fd >= 0)
		return;
	if (p->conn && p->replay)
		return;		/* the replay still runs */
	if (!p->pty)
		close_fd(p, &p->in_fd);
	p->in_fd = -1;
	buf_free(&p->pending);
	if (p->conn) {
		/* A background process's exit read by the client that started
		 * it is not the end of it: that client may be closing (a start
		 * that detaches once STARTED arrived races a short command), and
		 * the output is for whoever ATTACHes. An ATTACHed client's
		 * read is: then the record goes. */
		bool keep = (p->flags & KILN_EXEC_BACKGROUND) && !p->reattached;
		send_exit(p);
		if (keep)
			evict_exited(p->a);
		else
			proc_free(p);
	} else if (!(p->flags & KILN_EXEC_BACKGROUND) || p->orphan) {
		proc_free(p);
	} else {
		evict_exited(p->a);
	}
}

void exec_reaped(struct agent *a, pid_t pid, int status)
{
	struct proc *p;
	for (p = a->procs; p; p = p->next)
		if (p->pid == pid && !p->exited)
			break;
	if (!p) {
		/* An orphan the guest left to PID 1: perhaps the last
		 * process of a finished command's cgroup. */
		cg_sweep(a);
		return;
	}
	p->exited = true;
	p->status = status;
	p->deadline_ms = 0;
	if (p->orphan) {
		proc_free(p);
		return;
	}
	/* Everything written before the exit is in the pipes now; count it,
	 * so that a grandchild holding them open cannot delay the end. */
	int fds[3] = { -1, p->out_fd, p->err_fd };
	for (int s = OUT; s <= ERR; s++) {
		int n = 0;
		if (fds[s] >= 0 && ioctl(fds[s], FIONREAD, &n) < 0)
			n = 0;
		p->tail[s] = n > 0 ? (uint64_t)n : 0;
		if (fds[s] >= 0 && p->tail[s] == 0)
			close_output(p, s);
	}
	proc_check_done(p);
}

int exec_timeouts(struct agent *a)
{
	int64_t now = 0, next = -1;
	struct proc *p, *pn;
	for (p = a->procs; p; p = pn) {
		pn = p->next;
		if (p->orphan && p->exited) {
			proc_free(p);
			continue;
		}
		if (!p->deadline_ms || p->exited)
			continue;
		if (!now)
			now = now_ms();
		if (now >= p->deadline_ms) {
			kill_all(p);
			p->timed_out = true;
			p->deadline_ms = 0;
			continue;
		}
		if (next < 0 || p->deadline_ms - now < next)
			next = p->deadline_ms - now;
	}
	return next < 0 ? -1 : (int)(next > 60000 ? 60000 : next);
}

void exec_free_all(struct agent *a)
{
	while (a->procs)
		proc_free(a->procs);
}

/* ---- the EXEC op ---------------------------------------------------- */

static int proc_frame(struct conn *c, uint8_t type, const uint8_t *d, uint32_t len)
{
	struct proc *p = c->st;
	struct kiln_msg m;

	switch (type) {
	case KILN_DATA:
		/* Input for a process without stdin, or after it closed
		 * stdin, is dropped, as a pipe to a dead reader would. */
		if (p->in_fd < 0 || p->eof_pending || len == 0)
			return 0;
		if (!buf_used(&p->pending)) {
			ssize_t n = write(p->in_fd, d, len);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				if (!p->pty)
					close_fd(p, &p->in_fd);
				return 0;
			}
			if (n > 0) {
				d += n;
				len -= (uint32_t)n;
			}
		}
		if (len) {
			if (buf_append(&p->pending, d, len, 2 * KILN_FRAME_MAX) < 0)
				return -ENOMEM;
			/* Hold further frames back until the process reads:
			 * the client's sends block, not our memory. */
			conn_pause_input(c, true);
			proc_update(p);
		}
		return 0;
	case KILN_EOF:
		if (buf_used(&p->pending))
			p->eof_pending = true;
		else if (p->in_fd >= 0)
			close_stdin(p);
		return 0;
	case KILN_RESIZE: {
		if (kiln_msg_parse(&m, type, d, len, NULL, 0) < 0)
			return -EBADMSG;
		struct winsize ws = {
			.ws_row = (unsigned short)kiln_msg_u32(&m, KT_ROWS, 24),
			.ws_col = (unsigned short)kiln_msg_u32(&m, KT_COLS, 80),
		};
		if (p->pty && p->in_fd >= 0)
			ioctl(p->in_fd, TIOCSWINSZ, &ws);
		return 0;
	}
	case KILN_KILL: {
		if (kiln_msg_parse(&m, type, d, len, NULL, 0) < 0)
			return -EBADMSG;
		uint32_t sig = kiln_msg_u32(&m, KT_SIGNAL, SIGKILL);
		if (!p->exited && sig > 0 && sig < (uint32_t)NSIG)
			kill(-p->pid, (int)sig);
		return 0;
	}
	case KILN_CANCEL:
		if (p->flags & KILN_EXEC_BACKGROUND) {
			struct kiln_fb fb;
			p->conn = NULL;
			p->replay = NULL;
			output_pause(p, false);
			conn_begin(c, &fb, KILN_END);
			conn_end_op(c, &fb);
			proc_check_done(p);
		} else if (!p->exited) {
			kill_all(p);
		}
		return 0;
	}
	return -EPROTO;
}

/* The client read some output: replay the ring, then read live again. */
static void proc_drain(struct conn *c)
{
	struct proc *p = c->st;

	while (p->replay && conn_has_room(c)) {
		struct chunk *ch = p->replay;
		struct kiln_fb fb;
		conn_begin(c, &fb, ch->stream == OUT ? KILN_STDOUT : KILN_STDERR);
		kiln_fb_raw(&fb, ch->data, ch->len);
		p->replay = ch->next;
		if (conn_end(c, &fb) < 0)
			return;
	}
	if (p->replay) {
		conn_want_drain(c);
		return;
	}
	output_pause(p, false);
	proc_check_done(p);
}

/* The client went away mid-stream. */
static void proc_abort(struct conn *c)
{
	struct proc *p = c->st;

	p->conn = NULL;
	p->replay = NULL;
	if (p->flags & KILN_EXEC_BACKGROUND) {
		output_pause(p, false);
		return;
	}
	/* A foreground process lives as long as its client. It is freed
	 * when reaped. */
	if (!p->exited)
		kill_all(p);
	p->orphan = true;
	if (p->pty)
		p->out_fd = -1;
	close_fd(p, &p->in_fd);
	close_fd(p, &p->out_fd);
	close_fd(p, &p->err_fd);
	ring_clear(p);
	buf_free(&p->pending);
	/* An exited orphan is freed by exec_timeouts on the next turn: the
	 * caller may still hold p. */
}

static const struct conn_op exec_op = {
	.name = "EXEC",
	.frame = proc_frame,
	.drain = proc_drain,
	.abort = proc_abort,
};

/* ---- starting ------------------------------------------------------- */

static void free_strv(char **v)
{
	if (!v)
		return;
	for (char **s = v; *s; s++)
		free(*s);
	free(v);
}

/* Set NAME=VALUE in env (n entries, room for more), replacing NAME. */
static int env_set(char **env, size_t *n, const char *kv, size_t kvlen)
{
	const char *eq = memchr(kv, '=', kvlen);
	if (!eq || eq == kv)
		return -EINVAL;
	size_t keylen = (size_t)(eq - kv) + 1;
	char *s = strndup(kv, kvlen);
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++) {
		if (strncmp(env[i], kv, keylen) == 0) {
			free(env[i]);
			env[i] = s;
			return 0;
		}
	}
	env[(*n)++] = s;
	return 0;
}

static char **build_env(const struct kiln_msg *m, const struct user_info *u,
			bool pty, char *err, size_t errlen)
{
	uint32_t count = m->f[KT_ENV].count;
	uint32_t flags = kiln_msg_u32(m, KT_FLAGS, 0);
	size_t n = 0;

	if (count > ENV_MAX) {
		snprintf(err, errlen, "%u environment entries; at most %u", count, ENV_MAX);
		return NULL;
	}
	char **env = calloc(count + 8, sizeof *env);
	if (!env) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (!(flags & KILN_EXEC_CLEARENV)) {
		char line[512];
		const char *defaults[6];
		int nd = 0;
		defaults[nd++] = "PATH=" DEFAULT_PATH;
		defaults[nd++] = pty ? "TERM=xterm-256color" : NULL;
		for (int i = 0; i < nd; i++)
			if (defaults[i] && env_set(env, &n, defaults[i], strlen(defaults[i])) < 0)
				goto nomem;
		snprintf(line, sizeof line, "HOME=%s", u->home);
		if (env_set(env, &n, line, strlen(line)) < 0)
			goto nomem;
		if (u->name[0]) {
			snprintf(line, sizeof line, "USER=%s", u->name);
			if (env_set(env, &n, line, strlen(line)) < 0)
				goto nomem;
			snprintf(line, sizeof line, "LOGNAME=%s", u->name);
			if (env_set(env, &n, line, strlen(line)) < 0)
				goto nomem;
		}
		snprintf(line, sizeof line, "SHELL=%s", u->shell);
		if (env_set(env, &n, line, strlen(line)) < 0)
			goto nomem;
	}
	uint32_t pos = 0, len;
	const uint8_t *v;
	while (kiln_msg_iter(m, KT_ENV, &pos, &v, &len)) {
		int rc = env_set(env, &n, (const char *)v, len);
		if (rc == -EINVAL) {
			snprintf(err, errlen, "environment entry '%.*s' is not NAME=VALUE",
				 (int)(len > 64 ? 64 : len), (const char *)v);
			free_strv(env);
			return NULL;
		}
		if (rc < 0)
			goto nomem;
	}
	return env;
nomem:
	snprintf(err, errlen, "out of memory");
	free_strv(env);
	return NULL;
}

static char **build_argv(const struct kiln_msg *m, char *err, size_t errlen)
{
	uint32_t count = m->f[KT_ARG].count;
	bool shell = kiln_msg_has(m, KT_SHELL);
	char **argv;

	if (!count == !shell) {
		snprintf(err, errlen, "EXEC wants either ARG fields or a SHELL field");
		return NULL;
	}
	argv = calloc(shell ? 4 : (size_t)count + 1, sizeof *argv);
	if (!argv)
		goto nomem;
	if (shell) {
		argv[0] = strdup("/bin/sh");
		argv[1] = strdup("-c");
		argv[2] = kiln_msg_strdup(m, KT_SHELL);
		if (!argv[0] || !argv[1] || !argv[2])
			goto nomem;
		return argv;
	}
	uint32_t pos = 0, len, i = 0;
	const uint8_t *v;
	while (i < count && kiln_msg_iter(m, KT_ARG, &pos, &v, &len)) {
		argv[i] = strndup((const char *)v, len);
		if (!argv[i++])
			goto nomem;
	}
	if (!argv[0][0]) {
		snprintf(err, errlen, "EXEC: the program name (first ARG) is empty");
		free_strv(argv);
		return NULL;
	}
	return argv;
nomem:
	snprintf(err, errlen, "out of memory");
	free_strv(argv);
	return NULL;
}

static void summarize(char *out, size_t outlen, char *const *argv)
{
	size_t used = 0;
	out[0] = 0;
	for (int i = 0; argv[i] && used + 1 < outlen; i++) {
		int n = snprintf(out + used, outlen - used, "%s%s", i ? " " : "", argv[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

static void send_started(struct conn *c, struct proc *p)
{
	struct kiln_fb fb;
	conn_begin(c, &fb, KILN_STARTED);
	kiln_fb_u32(&fb, KT_ID, p->id);
	kiln_fb_u32(&fb, KT_PID, (uint32_t)p->pid);
	kiln_fb_u64(&fb, KT_DROPPED, p->dropped);
	conn_end(c, &fb);
}

void exec_request(struct conn *c, const struct kiln_msg *m)
{
	struct agent *a = c->a;
	char err[512] = "";
	char cwd[4096], user[256];
	struct user_info u;
	uint32_t flags = kiln_msg_u32(m, KT_FLAGS, 0);
	uint32_t rows = kiln_msg_u32(m, KT_ROWS, 24), cols = kiln_msg_u32(m, KT_COLS, 80);
	uint32_t ring = kiln_msg_u32(m, KT_RING, RING_DEFAULT);
	bool has_user = kiln_msg_has(m, KT_USER);
	char **argv = NULL, **env = NULL;
	int rc;

	if (flags & ~KILN_EXEC_MASK) {
		conn_error(c, EINVAL, "EXEC: unknown flags 0x%x", flags & ~KILN_EXEC_MASK);
		return;
	}
	if (!rows || !cols || rows > 0xffff || cols > 0xffff) {
		conn_error(c, EINVAL, "EXEC: bad terminal size %ux%u", rows, cols);
		return;
	}
	if (a->nprocs >= PROC_MAX) {
		conn_error(c, EAGAIN, "EXEC: the agent already tracks %d processes", a->nprocs);
		return;
	}
	rc = kiln_msg_str(m, KT_USER, user, sizeof user);
	if (rc == -ENAMETOOLONG) {
		conn_error(c, ENAMETOOLONG, "EXEC: user name too long");
		return;
	}
	if (!has_user)
		snprintf(user, sizeof user, "%u", (unsigned)geteuid());
	rc = user_lookup(user, &u, err, sizeof err);
	if (rc < 0) {
		conn_error(c, -rc, "EXEC: %s", err);
		return;
	}
	if (kiln_msg_has(m, KT_CWD)) {
		if (!files_path(c, m, KT_CWD, cwd, sizeof cwd))
			return;
	} else {
		struct stat st;
		/* Like a login: the user's home, if it is there. */
		snprintf(cwd, sizeof cwd, "%s", stat(u.home, &st) == 0 && S_ISDIR(st.st_mode) ? u.home : "/");
	}
	argv = build_argv(m, err, sizeof err);
	if (argv)
		env = build_env(m, &u, flags & KILN_EXEC_PTY, err, sizeof err);
	if (!argv || !env) {
		free_strv(argv);
		conn_error(c, EINVAL, "EXEC: %s", err);
		return;
	}

	builtin_fn *builtin = NULL;
	if ((flags & KILN_EXEC_BUILTIN) && !(builtin = builtin_find(argv[0]))) {
		conn_error(c, EINVAL, "EXEC: the agent has no built-in named '%.64s'", argv[0]);
		free_strv(argv);
		free_strv(env);
		return;
	}

	struct proc *p = calloc(1, sizeof *p);
	if (!p) {
		free_strv(argv);
		free_strv(env);
		conn_error(c, ENOMEM, "EXEC: out of memory");
		return;
	}
	p->id = a->next_id++;
	if (!a->next_id)
		a->next_id = 1;
	rc = cg_create(a, p->id, p->cg, sizeof p->cg);
	if (rc < 0) {
		free(p);
		free_strv(argv);
		free_strv(env);
		conn_error(c, -rc, "EXEC: create its cgroup: %s", strerror(-rc));
		return;
	}
	struct spawn_req r = {
		.argv = argv,
		.builtin = builtin,
		.envp = env,
		.cwd = cwd,
		.user = has_user ? &u : NULL,
		.pty = flags & KILN_EXEC_PTY,
		.rows = (unsigned short)rows,
		.cols = (unsigned short)cols,
		.want_stdin = flags & KILN_EXEC_STDIN,
		.merge = flags & KILN_EXEC_MERGE,
		.cgroup = p->cg[0] ? p->cg : NULL,
		.nofile = a->child_nofile,
		.pipe_size = PIPE_SIZE,
	};
	struct spawn_io io;
	rc = spawn(&r, &p->pid, &io, err, sizeof err);
	summarize(p->cmd, sizeof p->cmd, argv);
	free_strv(argv);
	free_strv(env);
	if (rc < 0) {
		if (p->cg[0])
			rmdir(p->cg);
		free(p);
		conn_error(c, -rc, "EXEC: %s", err);
		return;
	}

	p->a = a;
	p->flags = flags;
	p->pty = r.pty;
	p->in_fd = p->pty ? io.pty_fd : io.in_fd;
	p->out_fd = p->pty ? io.pty_fd : io.out_fd;
	p->err_fd = io.err_fd;
	p->start_ns = sys_now_ns(CLOCK_REALTIME);
	p->ring_cap = ring < KILN_CHUNK ? KILN_CHUNK : ring > RING_MAX ? RING_MAX : ring;
	uint32_t timeout = kiln_msg_u32(m, KT_TIMEOUT_MS, 0);
	if (timeout)
		p->deadline_ms = now_ms() + timeout;
	p->next = a->procs;
	if (a->procs)
		a->procs->prev = p;
	a->procs = p;
	a->nprocs++;

	int fds[3] = { p->out_fd, p->err_fd, p->pty ? -1 : p->in_fd };
	for (int i = 0; i < 3; i++) {
		if (fds[i] >= 0 && loop_add(&a->loop, fds[i], i < 2 ? EPOLLIN : 0, proc_io, p) < 0) {
			kill(-p->pid, SIGKILL);
			p->orphan = true;
			conn_error(c, ENOMEM, "EXEC: cannot watch the process's pipes");
			return;
		}
	}
	p->conn = c;
	conn_op_start(c, &exec_op, p);
	send_started(c, p);
}

void exec_attach(struct conn *c, const struct kiln_msg *m)
{
	uint32_t id = kiln_msg_u32(m, KT_ID, 0);
	struct proc *p = proc_find(c->a, id);

	if (!p) {
		conn_error(c, ESRCH, "ATTACH: no process with id %u", id);
		return;
	}
	if (!(p->flags & KILN_EXEC_BACKGROUND)) {
		conn_error(c, EINVAL, "ATTACH: process %u is not a background process", id);
		return;
	}
	if (p->conn) {
		conn_error(c, EBUSY, "ATTACH: process %u already has a client", id);
		return;
	}
	p->conn = c;
	p->reattached = true;
	p->replay = p->ring_head;
	conn_op_start(c, &exec_op, p);
	send_started(c, p);
	if (!c->dead)
		proc_drain(c);
}

void exec_procs(struct conn *c, const struct kiln_msg *m)
{
	uint64_t count = 0;
	struct kiln_fb fb;
	(void)m;

	for (struct proc *p = c->a->procs; p && !c->dead; p = p->next) {
		if (p->orphan)
			continue;
		conn_begin(c, &fb, KILN_PROC);
		kiln_fb_u32(&fb, KT_ID, p->id);
		kiln_fb_u32(&fb, KT_PID, (uint32_t)p->pid);
		kiln_fb_u32(&fb, KT_STATE, p->exited ? KILN_PROC_EXITED : KILN_PROC_RUNNING);
		kiln_fb_u32(&fb, KT_FLAGS, p->flags | (p->conn ? KILN_PROC_ATTACHED : 0));
		if (p->exited && WIFSIGNALED(p->status))
			kiln_fb_u32(&fb, KT_SIGNAL, (uint32_t)WTERMSIG(p->status));
		else if (p->exited)
			kiln_fb_u32(&fb, KT_CODE, (uint32_t)WEXITSTATUS(p->status));
		kiln_fb_i64(&fb, KT_START_NS, p->start_ns);
		kiln_fb_u64(&fb, KT_DROPPED, p->dropped);
		kiln_fb_str(&fb, KT_NAME, p->cmd);
		conn_end(c, &fb);
		count++;
	}
	if (c->dead)
		return;
	conn_begin(c, &fb, KILN_END);
	kiln_fb_u64(&fb, KT_COUNT, count);
	conn_end(c, &fb);
}

void exec_signal(struct conn *c, const struct kiln_msg *m)
{
	uint32_t id = kiln_msg_u32(m, KT_ID, 0);
	uint32_t sig = kiln_msg_u32(m, KT_SIGNAL, SIGKILL);
	uint32_t flags = kiln_msg_u32(m, KT_FLAGS, 0);
	struct proc *p = proc_find(c->a, id);

	if (!p) {
		conn_error(c, ESRCH, "SIGNAL: no process with id %u", id);
		return;
	}
	if (p->exited) {
		conn_error(c, ESRCH, "SIGNAL: process %u (pid %d) has exited", id, (int)p->pid);
		return;
	}
	if (sig >= (uint32_t)NSIG) {
		conn_error(c, EINVAL, "SIGNAL: bad signal number %u", sig);
		return;
	}
	pid_t target = flags & KILN_SIGNAL_PROCESS ? p->pid : -p->pid;
	if (kill(target, (int)sig) < 0) {
		conn_error(c, errno, "SIGNAL: kill %d: %s", (int)target, strerror(errno));
		return;
	}
	conn_ok(c);
}

/* Stdin for a process by id, from any connection: a client reading a
 * background process's output (attached) and one feeding it need not be
 * the same. The bytes join what the pipe has not taken yet; past
 * 2 * KILN_FRAME_MAX of those the process is not reading, and the sender
 * is told so (EAGAIN) rather than the agent holding more. */
void exec_input(struct conn *c, const struct kiln_msg *m)
{
	uint32_t id = kiln_msg_u32(m, KT_ID, 0);
	uint32_t flags = kiln_msg_u32(m, KT_FLAGS, 0);
	uint32_t len = 0;
	const uint8_t *d = kiln_msg_bytes(m, KT_DATA, &len);
	struct proc *p = proc_find(c->a, id);

	if (!p) {
		conn_error(c, ESRCH, "INPUT: no process with id %u", id);
		return;
	}
	if (p->exited) {
		conn_error(c, ESRCH, "INPUT: process %u (pid %d) has exited", id, (int)p->pid);
		return;
	}
	if (p->in_fd < 0 || p->eof_pending || !(p->flags & (KILN_EXEC_STDIN | KILN_EXEC_PTY))) {
		conn_error(c, EPIPE, "INPUT: process %u has no stdin open (started without stdin, "
			   "or it was closed)", id);
		return;
	}
	if (buf_used(&p->pending) + len > 2 * KILN_FRAME_MAX) {
		conn_error(c, EAGAIN, "INPUT: process %u is not reading its stdin (%zu bytes "
			   "wait for it)", id, buf_used(&p->pending));
		return;
	}
	if (d && len) {
		if (!buf_used(&p->pending)) {
			ssize_t n = write(p->in_fd, d, len);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				conn_error(c, EPIPE, "INPUT: process %u closed its stdin", id);
				if (!p->pty)
					close_fd(p, &p->in_fd);
				return;
			}
			if (n > 0) {
				d += n;
				len -= (uint32_t)n;
			}
		}
		if (len && buf_append(&p->pending, d, len, 2 * KILN_FRAME_MAX) < 0) {
			conn_error(c, ENOMEM, "INPUT: process %u: out of memory for %u bytes of stdin",
				   id, len);
			return;
		}
	}
	if (flags & KILN_INPUT_EOF) {
		if (buf_used(&p->pending))
			p->eof_pending = true;
		else
			close_stdin(p);
	}
	proc_update(p);
	conn_ok(c);
}
