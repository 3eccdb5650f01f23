/*
 * A byte pipe between the host's agent connection and a TCP connection in
 * the guest, after CONNECT (connect.c). Bytes go both ways unchanged; the
 * end of one direction is passed on as a half-close (shutdown SHUT_WR)
 * once everything before it was delivered, so a client may send its
 * request, shut down, and still read the whole answer. The pipe ends when
 * both directions have ended, or at once when either socket fails.
 *
 * Each direction has one bounded buffer: while it holds PIPE_BUF_MAX
 * bytes, its source is not read, so a fast sender meets the slow
 * receiver's backpressure instead of growing the guest's memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest/agent.h"

#define PIPE_BUF_MAX	(256u << 10)	/* per direction */
#define PIPE_READ	(64u << 10)

/* Side 0 is the agent connection (the host), side 1 the TCP connection. */
struct pipe {
	struct agent *a;
	int fd[2];
	struct buf q[2];	/* q[i]: read from fd[i], to be written to fd[!i] */
	bool eof[2];		/* fd[i] has no more to send */
	bool shut[2];		/* fd[i] was shut down for writing */
	struct pipe *prev, *next;
};

static void pipe_io(struct loop *l, int fd, uint32_t events, void *ctx);

static void pipe_end(struct pipe *p)
{
	struct agent *a = p->a;
	for (int i = 0; i < 2; i++) {
		loop_del(&a->loop, p->fd[i]);
		close(p->fd[i]);
		buf_free(&p->q[i]);
	}
	if (p->prev)
		p->prev->next = p->next;
	else
		a->pipes = p->next;
	if (p->next)
		p->next->prev = p->prev;
	free(p);
	agent_conn_gone(a);
}

/* Write what fd[i] takes of q[!i]. 0 or -errno. */
static int pipe_flush(struct pipe *p, int i)
{
	struct buf *b = &p->q[!i];
	int rc = buf_send(b, p->fd[i]);
	if (rc == 0 && buf_used(b) == 0)
		buf_shrink(b, 0);	/* an idle pipe keeps no buffers */
	return rc;
}

/* Read what fd[i] has, within q[i]'s room. 0 or -errno. */
static int pipe_read(struct pipe *p, int i)
{
	struct buf *b = &p->q[i];
	size_t room = PIPE_BUF_MAX - buf_used(b);
	if (room == 0 || p->eof[i])
		return 0;
	if (room > PIPE_READ)
		room = PIPE_READ;
	int rc = buf_reserve(b, room, PIPE_BUF_MAX);
	if (rc < 0)
		return rc;
	ssize_t n = recv(p->fd[i], buf_tail(b), room, MSG_DONTWAIT);
	if (n == 0) {
		p->eof[i] = true;
		return 0;
	}
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	b->len += (size_t)n;
	/* Pass it on now if the other side takes it: one loop turn less. */
	return pipe_flush(p, !i);
}

/* Pass on ends of input, end the pipe when both directions are done, and
 * wait for what each side can do next. */
static void pipe_update(struct pipe *p)
{
	for (int i = 0; i < 2; i++) {
		if (p->eof[!i] && !buf_used(&p->q[!i]) && !p->shut[i]) {
			shutdown(p->fd[i], SHUT_WR);
			p->shut[i] = true;
		}
	}
	if (p->shut[0] && p->shut[1]) {
		pipe_end(p);
		return;
	}
	for (int i = 0; i < 2; i++) {
		uint32_t ev = 0;
		if (!p->eof[i] && buf_used(&p->q[i]) < PIPE_BUF_MAX)
			ev |= EPOLLIN;
		if (buf_used(&p->q[!i]))
			ev |= EPOLLOUT;
		/* Nothing to do on this side (it ended, and nothing is
		 * queued for it): out of the epoll set, so that its hang-up
		 * does not wake the loop until the other side moves. */
		loop_mod(&p->a->loop, p->fd[i], ev);
	}
}

static void pipe_io(struct loop *l, int fd, uint32_t events, void *ctx)
{
	struct pipe *p = ctx;
	int i = fd == p->fd[0] ? 0 : 1;
	(void)l;

	if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && buf_used(&p->q[!i]) &&
	    pipe_flush(p, i) < 0) {
		pipe_end(p);	/* the receiver is gone: nothing left to do */
		return;
	}
	if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) && pipe_read(p, i) < 0) {
		pipe_end(p);
		return;
	}
	pipe_update(p);
}

int pipe_start(struct agent *a, int conn_fd, struct buf *in, struct buf *out, int tcp_fd)
{
	struct pipe *p = calloc(1, sizeof *p);
	int rc = -ENOMEM;
	if (!p)
		goto fail;
	p->a = a;
	p->fd[0] = conn_fd;
	p->fd[1] = tcp_fd;
	p->q[0] = *in;		/* sent early by the host: for the TCP side */
	p->q[1] = *out;		/* the OK frame, not yet sent */
	rc = loop_add(&a->loop, conn_fd, 0, pipe_io, p);
	if (rc == 0) {
		rc = loop_add(&a->loop, tcp_fd, 0, pipe_io, p);
		if (rc < 0)
			loop_del(&a->loop, conn_fd);
	}
	if (rc < 0) {
		free(p);
		goto fail;
	}
	p->next = a->pipes;
	if (a->pipes)
		a->pipes->prev = p;
	a->pipes = p;
	/* Start with what is already there (OK, early bytes). */
	if (pipe_flush(p, 0) < 0 || pipe_flush(p, 1) < 0) {
		pipe_end(p);
		return -EPIPE;
	}
	pipe_update(p);
	return 0;
fail:
	agent_log("CONNECT: cannot start the pipe: %s", strerror(-rc));
	close(conn_fd);
	close(tcp_fd);
	buf_free(in);
	buf_free(out);
	agent_conn_gone(a);
	return rc;
}

void pipe_free_all(struct agent *a)
{
	while (a->pipes)
		pipe_end(a->pipes);
}
