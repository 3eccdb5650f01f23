/*
 * The agent server: listening socket, connections, framing and request
 * dispatch. The operations themselves live in exec.c, files.c, watch.c
 * and system.c; see agent.h for the model.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/epoll.h>
#include <sys/fsuid.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "guest/agent.h"
#include "guest/spawn.h"

#define READ_CHUNK (64u << 10)

static void conn_process(struct conn *c);
static void conn_update(struct conn *c);
static void conn_io(struct loop *l, int fd, uint32_t events, void *ctx);

void agent_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	/* One write per line, so lines from concurrent writers don't mix. */
	dprintf(STDERR_FILENO, "kiln-init: %s\n", line);
}

/* ---- listening ------------------------------------------------------ */

int agent_listen(const char *addr, int *out, char *err, size_t errlen)
{
	int fd = -1;

	if (strncmp(addr, "vsock:", 6) == 0) {
		char *end;
		unsigned long port = strtoul(addr + 6, &end, 10);
		if (!addr[6] || *end || port > UINT32_MAX) {
			snprintf(err, errlen, "bad vsock port in '%s'", addr);
			return -EINVAL;
		}
		struct sockaddr_vm sa = {
			.svm_family = AF_VSOCK,
			.svm_cid = VMADDR_CID_ANY,
			.svm_port = (unsigned)port,
		};
		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
			goto fail;
	} else if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		const char *path = addr + 5;
		struct stat st;
		if (!*path || strlen(path) >= sizeof sa.sun_path) {
			snprintf(err, errlen, "bad unix socket path in '%s'", addr);
			return -EINVAL;
		}
		strcpy(sa.sun_path, path);
		/* Replace a stale socket, but never any other kind of file. */
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
			goto fail;
	} else {
		snprintf(err, errlen, "unknown listen address '%s' (want vsock:PORT or unix:PATH)", addr);
		return -EINVAL;
	}
	if (listen(fd, 128) < 0)
		goto fail;
	*out = fd;
	return 0;
fail:;
	int e = errno;
	snprintf(err, errlen, "listen on %s: %s", addr, strerror(e));
	if (fd >= 0)
		close(fd);
	return -e;
}

static void on_accept(struct loop *l, int fd, uint32_t events, void *ctx);

/* vsock's receive buffer (256 KiB by default) is also the sender's credit:
 * a larger one keeps more data in flight, which is most of the throughput
 * of an upload. Not a vsock socket: nothing happens. */
static void vsock_buffer(int fd)
{
	unsigned long long size = 2u << 20;
	setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_MAX_SIZE, &size, sizeof size);
	setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_SIZE, &size, sizeof size);
}

static void listen_pause(struct agent *a, bool paused)
{
	loop_mod(&a->loop, a->listen_fd, paused ? 0 : EPOLLIN);
}

static void on_accept(struct loop *l, int fd, uint32_t events, void *ctx)
{
	struct agent *a = ctx;
	(void)l;
	(void)events;
	for (int i = 0; i < 64; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM ||
			    errno == ENOBUFS) {
				/* Out of descriptors: stop accepting until a
				 * connection closes, rather than spin on the
				 * listener's readiness. */
				agent_log("accept: %s; pausing new connections", strerror(errno));
				listen_pause(a, true);
				a->accept_paused = true;
			}
			return;
		}
		struct conn *c = a->nconns < CONN_MAX ? calloc(1, sizeof *c) : NULL;
		if (!c) {
			close(cfd);
			continue;
		}
		c->a = a;
		c->fd = cfd;
		vsock_buffer(cfd);
		if (loop_add(&a->loop, cfd, EPOLLIN, conn_io, c) < 0) {
			close(cfd);
			free(c);
			continue;
		}
		c->next = a->conns;
		if (a->conns)
			a->conns->prev = c;
		a->conns = c;
		a->nconns++;
	}
}

/* ---- output --------------------------------------------------------- */

bool conn_has_room(const struct conn *c)
{
	return !c->dead && buf_used(&c->out) < CONN_OUT_HIGH;
}

/* Write what the socket takes now. 0, or -errno when the peer is gone. */
static int conn_flush(struct conn *c)
{
	int rc = buf_send(&c->out, c->fd);
	if (rc < 0)
		return rc;
	/* An idle connection keeps no buffer: 512 of them must not pin
	 * megabytes of a small guest's memory. */
	if (buf_used(&c->out) == 0)
		buf_shrink(&c->out, 0);
	return 0;
}

void conn_begin(struct conn *c, struct kiln_fb *fb, uint8_t type)
{
	kiln_fb_begin(fb, &c->out, CONN_OUT_LIMIT, type);
}

int conn_end(struct conn *c, struct kiln_fb *fb)
{
	int rc = kiln_fb_end(fb);
	if (c->dead)
		return -EPIPE;
	if (rc < 0) {
		agent_log("connection %d: cannot queue a frame: %s", c->fd, strerror(-rc));
		conn_close(c);
		return rc;
	}
	rc = conn_flush(c);
	if (rc < 0) {
		conn_close(c);
		return rc;
	}
	conn_update(c);
	return 0;
}

/* The op is over (its state already released by the caller): from here on
 * a close must not call its abort. */
static void op_clear(struct conn *c)
{
	c->op = NULL;
	c->st = NULL;
	c->want_drain = false;
}

int conn_end_op(struct conn *c, struct kiln_fb *fb)
{
	/* Clear the op first: a close caused by this very send must not
	 * abort it, and the next pipelined request is taken only once the
	 * terminal frame is queued, so replies keep their order. */
	op_clear(c);
	int rc = conn_end(c, fb);
	if (rc == 0)
		conn_pause_input(c, false);
	return rc;
}

void conn_error(struct conn *c, int err, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	struct kiln_fb fb;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	conn_begin(c, &fb, KILN_ERROR);
	kiln_fb_u32(&fb, KT_ERRNO, (uint32_t)(err < 0 ? -err : err));
	kiln_fb_str(&fb, KT_MESSAGE, msg);
	conn_end_op(c, &fb);
}

void conn_ok(struct conn *c)
{
	struct kiln_fb fb;
	conn_begin(c, &fb, KILN_OK);
	conn_end_op(c, &fb);
}

/* A violation that leaves the stream unusable: say why, then close. */
static void conn_fatal(struct conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void conn_fatal(struct conn *c, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	struct kiln_fb fb;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (c->op && c->op->abort)
		c->op->abort(c);
	c->op = NULL;
	c->st = NULL;
	kiln_fb_begin(&fb, &c->out, CONN_OUT_LIMIT, KILN_ERROR);
	kiln_fb_u32(&fb, KT_ERRNO, (uint32_t)err);
	kiln_fb_str(&fb, KT_MESSAGE, msg);
	if (kiln_fb_end(&fb) == 0)
		conn_flush(c);
	conn_close(c);
}

/* Take a live connection out of the list and the loop; it is freed after
 * this loop turn (handlers later in the batch may still hold it). */
static void conn_unlink(struct conn *c)
{
	struct agent *a = c->a;

	c->dead = true;
	loop_del(&a->loop, c->fd);
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		a->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = NULL;
	c->next = a->graveyard;
	a->graveyard = c;
}

void conn_close(struct conn *c)
{
	if (c->dead)
		return;
	if (c->op && c->op->abort)
		c->op->abort(c);
	c->op = NULL;
	c->st = NULL;
	int fd = c->fd;
	conn_unlink(c);
	close(fd);
	agent_conn_gone(c->a);
}

int conn_detach(struct conn *c, struct buf *in, struct buf *out)
{
	if (c->dead)
		return -EPIPE;
	int fd = c->fd;
	c->op = NULL;
	c->st = NULL;
	*in = c->in;
	*out = c->out;
	memset(&c->in, 0, sizeof c->in);
	memset(&c->out, 0, sizeof c->out);
	conn_unlink(c);
	return fd;
}

void agent_conn_gone(struct agent *a)
{
	a->nconns--;
	listen_pause(a, false);
}

/* ---- ops ------------------------------------------------------------ */

void conn_op_start(struct conn *c, const struct conn_op *op, void *st)
{
	c->op = op;
	c->st = st;
	c->want_drain = false;
}

void conn_op_end(struct conn *c)
{
	op_clear(c);
	conn_pause_input(c, false);
}

void conn_pause_input(struct conn *c, bool paused)
{
	if (c->dead || c->in_paused == paused)
		return;
	c->in_paused = paused;
	conn_update(c);
	/* Frames may already be waiting in the input buffer. */
	if (!paused)
		conn_process(c);
}

void conn_want_drain(struct conn *c)
{
	c->want_drain = true;
	conn_update(c);
}

static void conn_update(struct conn *c)
{
	if (c->dead)
		return;
	/* Paused input still watches for the peer going away, or a client
	 * that vanished while its stdin was held back would go unnoticed. */
	uint32_t ev = c->in_paused ? EPOLLRDHUP : EPOLLIN;
	if (buf_used(&c->out) || c->want_drain)
		ev |= EPOLLOUT;
	loop_mod(&c->a->loop, c->fd, ev);
}

bool conn_parse(struct conn *c, struct kiln_msg *m, uint8_t type,
		const uint8_t *p, uint32_t len)
{
	char err[256];
	if (kiln_msg_parse(m, type, p, len, err, sizeof err) < 0) {
		conn_error(c, EBADMSG, "%s", err);
		return false;
	}
	return true;
}

/* ---- input ---------------------------------------------------------- */

static bool is_request(uint8_t type)
{
	return type < KILN_DATA;
}

/* ---- files as a user ------------------------------------------------ */

/*
 * A file request with USER runs with that user's file-system identity:
 * fsuid, fsgid and supplementary groups, so the kernel checks the user's
 * permissions and new files are the user's. Leaving fsuid 0 drops the
 * file capabilities (CAP_DAC_OVERRIDE, CAP_CHOWN, ...) from the effective
 * set and returning to 0 restores them (setfsuid(2)). The agent is single
 * threaded, so the identity is taken around each call into the request's
 * handler and its op (a READ's open, a LIST's walk, a WRITE's rename at
 * EOF) and given back before anything else runs.
 */
static bool is_file_request(uint8_t type)
{
	return type >= KILN_READ && type <= KILN_WATCH;
}

static gid_t agent_groups[USER_MAX_GROUPS];
static int agent_ngroups = -1;

static int creds_enter(const struct user_info *u)
{
	if (agent_ngroups < 0)
		agent_ngroups = getgroups(USER_MAX_GROUPS, agent_groups);
	if (agent_ngroups < 0)
		agent_ngroups = 0;
	if (setgroups((size_t)u->ngroups, u->groups) < 0)
		return -errno;
	setfsgid(u->gid);
	setfsuid(u->uid);
	if ((uid_t)setfsuid((uid_t)-1) != u->uid || (gid_t)setfsgid((gid_t)-1) != u->gid)
		return -EPERM;
	return 0;
}

static void creds_leave(void)
{
	setfsuid(geteuid());
	setfsgid(getegid());
	if (setgroups((size_t)agent_ngroups, agent_groups) < 0)
		agent_log("restoring the agent's groups: %s", strerror(errno));
}

static void fs_user_drop(struct conn *c)
{
	free(c->fs_user);
	c->fs_user = NULL;
}

/* Take USER of a file request: false after answering ERROR. */
static bool fs_user_take(struct conn *c, const struct kiln_msg *m)
{
	char spec[256], err[300];
	fs_user_drop(c);
	if (!kiln_msg_has(m, KT_USER))
		return true;
	if (kiln_msg_str(m, KT_USER, spec, sizeof spec) < 0) {
		conn_error(c, EINVAL, "%s: the USER field is too long", kiln_type_name(m->type));
		return false;
	}
	struct user_info *u = malloc(sizeof *u);
	if (!u) {
		conn_error(c, ENOMEM, "%s: out of memory", kiln_type_name(m->type));
		return false;
	}
	int rc = user_lookup(spec, u, err, sizeof err);
	if (rc < 0) {
		free(u);
		/* EINVAL, not ENOENT: the request is wrong, not a path. */
		conn_error(c, EINVAL, "%s: %s", kiln_type_name(m->type), err);
		return false;
	}
	if (u->uid == geteuid() && u->gid == getegid()) {
		free(u);	/* the agent's own identity: nothing to switch */
		return true;
	}
	rc = creds_enter(u);
	creds_leave();
	if (rc < 0) {
		free(u);
		conn_error(c, -rc, "%s: act as user '%s': %s", kiln_type_name(m->type), spec, strerror(-rc));
		return false;
	}
	c->fs_user = u;
	return true;
}

static void dispatch_request(struct conn *c, uint8_t type, const uint8_t *p, uint32_t len)
{
	struct kiln_msg m;
	if (!conn_parse(c, &m, type, p, len))
		return;
	if (is_file_request(type)) {
		if (!fs_user_take(c, &m))
			return;
		if (c->fs_user && creds_enter(c->fs_user) < 0) {
			creds_leave();
			conn_error(c, EPERM, "%s: cannot act as the user", kiln_type_name(type));
			return;
		}
	} else {
		/* A connection's next request is not a file request's user:
		 * an EXEC's stdin frames run as the agent. */
		fs_user_drop(c);
	}
	switch (type) {
	case KILN_PING: sys_ping(c, &m); break;
	case KILN_INFO: sys_info(c, &m); break;
	case KILN_EXEC: exec_request(c, &m); break;
	case KILN_ATTACH: exec_attach(c, &m); break;
	case KILN_PROCS: exec_procs(c, &m); break;
	case KILN_SIGNAL: exec_signal(c, &m); break;
	case KILN_INPUT: exec_input(c, &m); break;
	case KILN_READ: files_read(c, &m); break;
	case KILN_WRITE: files_write(c, &m); break;
	case KILN_STAT: files_stat(c, &m); break;
	case KILN_LIST: files_list(c, &m); break;
	case KILN_MKDIR: files_mkdir(c, &m); break;
	case KILN_REMOVE: files_remove(c, &m); break;
	case KILN_RENAME: files_rename(c, &m); break;
	case KILN_CHMOD: files_chmod(c, &m); break;
	case KILN_WATCH: watch_request(c, &m); break;
	case KILN_RESYNC: sys_resync(c, &m); break;
	case KILN_POWEROFF: sys_poweroff(c, &m); break;
	case KILN_CONNECT: connect_request(c, &m); break;
	default:
		conn_error(c, EOPNOTSUPP, "unknown request type 0x%02x", type);
	}
	if (is_file_request(type) && c->fs_user)
		creds_leave();
}

static void dispatch(struct conn *c, uint8_t type, const uint8_t *p, uint32_t len)
{
	if (c->op) {
		if (is_request(type)) {
			conn_fatal(c, EPROTO, "%s request while %s is running",
				   kiln_type_name(type), c->op->name);
			return;
		}
		bool as_user = c->fs_user && creds_enter(c->fs_user) == 0;
		int rc = c->op->frame(c, type, p, len);
		if (as_user)
			creds_leave();
		if (rc < 0 && !c->dead)
			conn_fatal(c, EPROTO, "%s: unexpected %s frame",
				   c->op ? c->op->name : "op", kiln_type_name(type));
		return;
	}
	if (is_request(type)) {
		dispatch_request(c, type, p, len);
		return;
	}
	/* DATA, EOF, KILL, RESIZE and CANCEL can race with the end of the
	 * op they were meant for; on an idle connection they are dropped. */
	if (type <= KILN_CANCEL)
		return;
	conn_error(c, EOPNOTSUPP, "%s (0x%02x) is not a request", kiln_type_name(type), type);
}

static void conn_process(struct conn *c)
{
	/* A nested call (an op ending inside dispatch) must not handle the
	 * frame the outer call is still looking at; the outer loop goes on
	 * with the rest. The work per call is bounded by what one read
	 * brought in. */
	if (c->processing)
		return;
	c->processing = true;
	while (!c->dead && !c->in_paused) {
		struct kiln_hdr h;
		const uint8_t *p;
		int rc = kiln_frame_peek(&c->in, KILN_FRAME_MAX, &h, &p);
		if (rc == 0)
			break;
		if (rc < 0) {
			if (rc == -EMSGSIZE)
				conn_fatal(c, EMSGSIZE, "frame of %u bytes exceeds the maximum of %u",
					   h.len, KILN_FRAME_MAX);
			else
				conn_fatal(c, EPROTO, "unsupported protocol version %u (this agent speaks %u)",
					   h.version, KILN_PROTO_VERSION);
			break;
		}
		dispatch(c, h.type, p, h.len);
		buf_consume(&c->in, KILN_HDR_SIZE + h.len);
	}
	c->processing = false;
	if (!c->dead && buf_used(&c->in) == 0)
		buf_shrink(&c->in, 0);
}

static void conn_read(struct conn *c)
{
	int rc = buf_reserve(&c->in, READ_CHUNK, CONN_IN_LIMIT);
	if (rc < 0) {
		conn_fatal(c, -rc, "input buffer: %s", strerror(-rc));
		return;
	}
	ssize_t n = recv(c->fd, buf_tail(&c->in), READ_CHUNK, MSG_DONTWAIT);
	if (n == 0) {
		conn_close(c);
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(c);
		return;
	}
	c->in.len += (size_t)n;
	conn_process(c);
}

static void conn_io(struct loop *l, int fd, uint32_t events, void *ctx)
{
	struct conn *c = ctx;
	(void)l;
	(void)fd;

	if (c->in_paused && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
		conn_close(c);
		return;
	}
	if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
		if (conn_flush(c) < 0) {
			conn_close(c);
			return;
		}
	}
	if (!c->dead && !c->in_paused && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		conn_read(c);
	if (!c->dead && c->want_drain && conn_has_room(c)) {
		c->want_drain = false;
		if (c->op && c->op->drain) {
			bool as_user = c->fs_user && creds_enter(c->fs_user) == 0;
			c->op->drain(c);
			if (as_user)
				creds_leave();
		}
	}
	conn_update(c);
}

/* ---- signals -------------------------------------------------------- */

static void on_signal(struct loop *l, int fd, uint32_t events, void *ctx)
{
	struct agent *a = ctx;
	struct signalfd_siginfo si[16];
	(void)l;
	(void)events;

	ssize_t n = read(fd, si, sizeof si);
	if (n <= 0)
		return;
	for (size_t i = 0; i < (size_t)n / sizeof si[0]; i++) {
		switch (si[i].ssi_signo) {
		case SIGCHLD:
			break;
		case SIGINT:	/* ctrl-alt-del, with RB_DISABLE_CAD */
			if (a->pid1)
				a->shutdown = RB_AUTOBOOT;
			else
				a->stop = true;
			break;
		case SIGTERM:
			if (!a->pid1)
				a->stop = true;
			break;
		case SIGPWR:
			if (a->pid1)
				a->shutdown = RB_POWER_OFF;
			break;
		}
	}
	/* One SIGCHLD may stand for many children; reap them all. As PID 1
	 * this also collects every orphan in the guest. */
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		exec_reaped(a, pid, status);
}

/* ---- the server ----------------------------------------------------- */

int agent_init(struct agent *a, int listen_fd, bool pid1)
{
	sigset_t set;
	int rc;

	memset(a, 0, sizeof *a);
	a->listen_fd = listen_fd;
	a->sig_fd = -1;
	a->pid1 = pid1;
	a->next_id = 1;
	a->mem_reserve = 32u << 20;
	a->pids_max = 8192;
	getrlimit(RLIMIT_NOFILE, &a->child_nofile);

	rc = loop_init(&a->loop);
	if (rc < 0)
		return rc;
	/* The signals are taken through a signalfd; children unblock them
	 * again before exec (see exec.c). */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGPWR);
	sigprocmask(SIG_BLOCK, &set, NULL);
	a->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (a->sig_fd < 0)
		return -errno;
	rc = loop_add(&a->loop, a->sig_fd, EPOLLIN, on_signal, a);
	if (rc == 0)
		rc = loop_add(&a->loop, listen_fd, EPOLLIN, on_accept, a);
	return rc;
}

static void bury(struct agent *a)
{
	while (a->graveyard) {
		struct conn *c = a->graveyard;
		a->graveyard = c->next;
		buf_free(&c->in);
		buf_free(&c->out);
		free(c->fs_user);
		free(c);
	}
}

static bool output_pending(struct agent *a)
{
	for (struct conn *c = a->conns; c; c = c->next)
		if (buf_used(&c->out))
			return true;
	return false;
}

int agent_run(struct agent *a)
{
	int64_t leave_by = 0;

	for (;;) {
		if (a->stop || a->shutdown) {
			/* Let the POWEROFF reply (and whatever else is
			 * queued) reach the clients, for up to a second. */
			int64_t now = sys_now_ns(CLOCK_MONOTONIC) / 1000000;
			if (!leave_by)
				leave_by = now + 1000;
			if (!output_pending(a) || now >= leave_by)
				break;
		}
		int timeout = exec_timeouts(a);
		if (leave_by || (a->accept_paused && (timeout < 0 || timeout > 100)))
			timeout = a->accept_paused ? 100 : 50;
		int rc = loop_once(&a->loop, timeout);
		bury(a);
		/* Out of descriptors earlier: try accepting again, at most ten
		 * times a second, even if no connection has closed since. */
		if (a->accept_paused) {
			a->accept_paused = false;
			listen_pause(a, false);
		}
		if (rc < 0) {
			agent_log("event loop: %s", strerror(-rc));
			return rc;
		}
	}
	return a->shutdown;
}

void agent_free(struct agent *a)
{
	while (a->conns)
		conn_close(a->conns);
	pipe_free_all(a);
	bury(a);
	exec_free_all(a);
	if (a->sig_fd >= 0)
		close(a->sig_fd);
	if (a->listen_fd >= 0)
		close(a->listen_fd);
	loop_free(&a->loop);
}
