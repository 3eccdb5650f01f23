/*
 * The agent server inside kiln-init: one single-threaded event loop serving
 * every connection (vsock in a guest, a Unix socket for native tests).
 *
 * A connection is idle or runs one operation at a time: a request frame
 * starts it (EXEC, READ, LIST, ...), the operation may exchange further
 * frames, and it ends with exactly one terminal frame (OK, ERROR, EXIT or
 * END). Many connections run side by side; clients wanting parallelism
 * open more connections.
 *
 * Flow control is by watermark: producers (process output, file reads,
 * directory walks, watch events) add to a connection's output buffer only
 * while it holds less than CONN_OUT_HIGH bytes, and are woken up by the
 * op's drain callback once the peer has read it down. Nothing is buffered
 * without bound: a process writing faster than its client reads ends up
 * blocked on a full pipe.
 */
#ifndef KILN_AGENT_H
#define KILN_AGENT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "common/buf.h"
#include "common/proto.h"
#include "guest/loop.h"

#define CONN_OUT_HIGH	(256u << 10)	/* producers stop above this */
#define CONN_OUT_LIMIT	(CONN_OUT_HIGH + KILN_FRAME_MAX + 4096)
#define CONN_IN_LIMIT	(KILN_HDR_SIZE + KILN_FRAME_MAX + 65536)
#define CONN_MAX	512		/* concurrent connections */
#define PROC_MAX	1024		/* processes tracked at once */
#define PROC_EXITED_KEEP 64		/* finished background records kept */
#define RING_DEFAULT	(256u << 10)	/* background output kept, bytes */
#define RING_MAX	(16u << 20)
#define CG_PENDING_MAX	4096		/* exec cgroups waiting to be removed */

struct conn;
struct proc;
struct pipe;
struct user_info;

/* What a running operation does with the frames and events it gets. */
struct conn_op {
	const char *name;
	/* A frame arrived for this op. 0 to go on; -errno for a protocol
	 * violation, after which the connection is closed. */
	int (*frame)(struct conn *c, uint8_t type, const uint8_t *p, uint32_t len);
	/* The output buffer went below CONN_OUT_HIGH: produce more. */
	void (*drain)(struct conn *c);
	/* The connection is closing mid-op: release the op's state. */
	void (*abort)(struct conn *c);
};

struct conn {
	struct agent *a;
	int fd;
	struct buf in, out;
	const struct conn_op *op;	/* NULL when idle */
	void *st;			/* the op's state */
	bool in_paused;			/* the op holds further frames back */
	bool want_drain;		/* the op has more to send */
	bool dead;			/* closed; freed after this loop turn */
	bool processing;		/* inside conn_process */
	struct user_info *fs_user;	/* file request as this user, or NULL */
	struct conn *prev, *next;
};

struct agent {
	struct loop loop;
	int listen_fd;
	int sig_fd;
	struct conn *conns;
	struct conn *graveyard;		/* closed, freed after the loop turn */
	int nconns;			/* connections and pipes */
	struct pipe *pipes;		/* CONNECT byte pipes */
	struct proc *procs;
	int nprocs;
	uint32_t next_id;
	bool pid1;
	bool allow_resync;		/* clock and hostname may be set */
	int shutdown;			/* 0, or RB_POWER_OFF / RB_AUTOBOOT */
	bool stop;			/* leave the loop (not PID 1) */
	bool accept_paused;		/* accept failed for lack of fds */
	char cgroup[128];		/* user processes' cgroup, "" if none */
	uint32_t cg_pending[CG_PENDING_MAX];	/* exec cgroups not yet empty */
	int ncg_pending;
	struct rlimit child_nofile;	/* NOFILE limit to give children */
	uint64_t mem_reserve;		/* bytes kept from user processes */
	uint32_t pids_max;		/* user processes' pids.max */
	char identity[256];		/* set by RESYNC */
};

/* agent.c: server and connections */
int agent_init(struct agent *a, int listen_fd, bool pid1);
/* Serve until a POWEROFF request (or, not as PID 1, until stopped).
 * Returns the requested shutdown (0, RB_POWER_OFF or RB_AUTOBOOT). */
int agent_run(struct agent *a);
void agent_free(struct agent *a);
/* Open the listening socket for an address "vsock:PORT" or "unix:PATH". */
int agent_listen(const char *addr, int *fd, char *err, size_t errlen);

void conn_begin(struct conn *c, struct kiln_fb *fb, uint8_t type);
/* Finish a frame started with conn_begin and send it as soon as the peer
 * takes it. A frame that cannot be queued breaks the stream, so the
 * connection is closed; returns -errno then. */
int conn_end(struct conn *c, struct kiln_fb *fb);
/* Send a terminal frame started with conn_begin and end the running op.
 * The op's state must be released (or handed over) by the caller. */
int conn_end_op(struct conn *c, struct kiln_fb *fb);
/* Terminal replies: they end the running op, if any. */
void conn_error(struct conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void conn_ok(struct conn *c);
void conn_op_start(struct conn *c, const struct conn_op *op, void *st);
void conn_op_end(struct conn *c);
/* True while producers may add more output. */
bool conn_has_room(const struct conn *c);
/* Stop or resume taking frames from the peer (stdin backpressure). */
void conn_pause_input(struct conn *c, bool paused);
/* Ask for the op's drain callback once the socket can take more. */
void conn_want_drain(struct conn *c);
void conn_close(struct conn *c);
/* Hand the connection's socket over (CONNECT): returns the fd, or -errno
 * if the connection is already closed. The bytes received but not yet
 * parsed and those queued but not yet sent move to *in and *out. The
 * socket still counts against CONN_MAX until agent_conn_gone. */
int conn_detach(struct conn *c, struct buf *in, struct buf *out);
/* A connection (or a pipe made of one) has ended: accept again. */
void agent_conn_gone(struct agent *a);
/* Parse a request's fields, answering ERROR for a malformed one.
 * Returns false when the request was answered. */
bool conn_parse(struct conn *c, struct kiln_msg *m, uint8_t type,
		const uint8_t *p, uint32_t len);

/* exec.c: processes */
void exec_request(struct conn *c, const struct kiln_msg *m);
void exec_attach(struct conn *c, const struct kiln_msg *m);
void exec_procs(struct conn *c, const struct kiln_msg *m);
void exec_signal(struct conn *c, const struct kiln_msg *m);
void exec_input(struct conn *c, const struct kiln_msg *m);
/* A child was reaped (any child: orphans are reaped here too). */
void exec_reaped(struct agent *a, pid_t pid, int status);
/* Milliseconds until the next process timeout, or -1. Kills processes
 * whose timeout passed. */
int exec_timeouts(struct agent *a);
void exec_free_all(struct agent *a);

/* files.c */
void files_read(struct conn *c, const struct kiln_msg *m);
void files_write(struct conn *c, const struct kiln_msg *m);
void files_stat(struct conn *c, const struct kiln_msg *m);
void files_list(struct conn *c, const struct kiln_msg *m);
void files_mkdir(struct conn *c, const struct kiln_msg *m);
void files_remove(struct conn *c, const struct kiln_msg *m);
void files_rename(struct conn *c, const struct kiln_msg *m);
void files_chmod(struct conn *c, const struct kiln_msg *m);
/* Take the PATH (or another str field) of a request: false after
 * answering ERROR when it is missing or too long. */
bool files_path(struct conn *c, const struct kiln_msg *m, unsigned tag,
		char *out, size_t outlen);

/* connect.c: CONNECT, a TCP connection inside the guest */
void connect_request(struct conn *c, const struct kiln_msg *m);

/* pipe.c: after CONNECT, the agent connection and the TCP connection
 * joined as one byte stream. Takes both sockets and the bytes already
 * read from (in) or queued for (out) the agent connection. 0, or -errno
 * after closing both. */
int pipe_start(struct agent *a, int conn_fd, struct buf *in, struct buf *out, int tcp_fd);
void pipe_free_all(struct agent *a);

/* watch.c */
void watch_request(struct conn *c, const struct kiln_msg *m);

/* system.c */
void sys_ping(struct conn *c, const struct kiln_msg *m);
void sys_info(struct conn *c, const struct kiln_msg *m);
void sys_resync(struct conn *c, const struct kiln_msg *m);
void sys_poweroff(struct conn *c, const struct kiln_msg *m);
/* Shield the agent from what guest processes do: OOM score, fd limit and
 * (as PID 1) a cgroup for everything it starts. Messages go to the log. */
void sys_protect(struct agent *a);
int64_t sys_now_ns(int clock);

/* cgroup.c: kiln-user and a child cgroup per EXEC (PID 1 only; without
 * cgroups these do nothing and paths are ""). */
void cg_setup(struct agent *a, uint64_t mem_total);
int cg_create(struct agent *a, uint32_t id, char *path, size_t len);
void cg_kill(const char *path);
void cg_release(struct agent *a, uint32_t id);
void cg_sweep(struct agent *a);

/* Log a line on the console ("kiln-init: ..."). */
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
