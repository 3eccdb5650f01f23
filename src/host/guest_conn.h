/*
 * guest_conn: kilnd's side of a guest agent connection (docs/protocol.md),
 * through the VMM's vsock bridge. It wraps the agent client library
 * (src/client/) so that the rest of kilnd speaks in its own small types,
 * and turns the library's errors into errmsg() messages.
 *
 * One struct guest is one connection running one operation at a time;
 * kilnd opens one per request (connections are cheap: a Unix socket).
 */
#ifndef KILN_HOST_GUEST_CONN_H
#define KILN_HOST_GUEST_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct guest;

/* Connect to the agent behind the vsock bridge at vsock, retrying while it
 * does not listen yet, for up to timeout_ms. If vmm_pid > 0, give up as
 * soon as that process is gone. */
int guest_open(const char *vsock, int timeout_ms, pid_t vmm_pid, struct guest **out);
void guest_close(struct guest *g);
/* Open and PING until the agent answers on a connection that stays up:
 * right after a restore or fork, kiln-vmm reports ready while the guest may
 * still be handling the vsock transport reset, which drops a connection
 * made too early. */
int guest_wait_ready(const char *vsock, int timeout_ms, pid_t vmm_pid, struct guest **out);
/* Bound each later wait on this connection (-1: none). */
void guest_set_timeout(struct guest *g, int ms);
/* The directory of commands that name none (a template's WorkingDir);
 * NULL or "": the agent's default. */
void guest_set_default_cwd(struct guest *g, const char *cwd);

const char *guest_default_cwd(const struct guest *g);

/* A relay of a guest connection (the cluster's API, hostif_remote.c): a
 * stream joined to the agent (fd, owned from here on; early: n bytes
 * read from it already) becomes a struct guest, with the directory of
 * commands that name none. Its peer is a host across a network, which
 * can stall: each wait for an answer or for room to send is bounded by
 * wait_ms (-1: none; streams' waits are their callers' own). */
int guest_adopt(int fd, const void *early, size_t n, const char *cwd, int wait_ms, struct guest **out);
/* Whether a background process was started or attached through g: the
 * agent keeps g as its client (who gets its exit; no other may ATTACH)
 * until g ends. */
bool guest_holds_process(const struct guest *g);
/* Close g and wait, up to wait_ms, for its other end to close too. A
 * relay's host closes it once the agent has closed its connection, so a
 * request after this one finds what a local close leaves (the process
 * free to attach, its exit kept); a plain close would end the agent's
 * side only later, racing that request. 0, or -ETIMEDOUT (errmsg());
 * g is freed either way. */
int guest_close_wait(struct guest *g, int wait_ms);
/* The other end of such a relay (the host agent): hand over the
 * connection's stream (*fd, the caller closes it) and the bytes read
 * from it already (*early, malloc'd, *n); g keeps no connection. */
int guest_release(struct guest *g, int *fd, void **early, size_t *n);

int guest_ping(struct guest *g);
/* After a restore or fork: wall clock, fresh entropy, hostname, identity. */
int guest_resync(struct guest *g, const char *hostname, const char *identity);

/* CONNECT to a TCP port on the guest's loopback (docs/protocol.md). On
 * success the agent connection becomes a byte stream to it: *fd gets the
 * socket (non-blocking; the caller closes it; g keeps no connection) and
 * *early, *n the bytes already read from it (malloc'd, NULL if none).
 * -ECONNREFUSED when nothing listens on the port. */
int guest_tcp_connect(struct guest *g, unsigned port, int *fd, void **early, size_t *n);

/* ---- processes ------------------------------------------------------------ */

struct guest_cmd {
	const char *const *argv;	/* or NULL and shell */
	const char *shell;
	const char *const *env;		/* NAME=VALUE, NULL-terminated, or NULL */
	const char *cwd;
	uint32_t timeout_ms;		/* 0: none */
	bool stdin_pipe;		/* feed stdin with guest_exec_stdin */
	bool pty;
	unsigned rows, cols;
	const char *user;		/* NAME, UID or UID:GID; NULL: root */
	bool background;		/* survives this connection (guest_exec_detach) */
	bool builtin;			/* argv[0] names a built-in of the agent (below) */
	uint32_t id, pid;		/* out: the agent's process id, the guest pid */
};

enum guest_ev_kind { GEV_STDOUT = 1, GEV_STDERR, GEV_EXIT };

struct guest_ev {
	enum guest_ev_kind kind;
	const uint8_t *data;		/* STDOUT/STDERR, valid until the next call */
	size_t len;
	int code;			/* EXIT: the exit code, or 128 + signal */
	int signal;			/* EXIT: the signal that killed it, or 0 */
	bool timed_out;
};

int guest_exec_start(struct guest *g, struct guest_cmd *cmd);
/* Background processes (cmd.background): leave one running (the
 * connection is then free for nothing else: close it), come back to one
 * (its kept output first, *dropped: bytes it could not keep; then
 * guest_exec_next as for exec), list them, signal one. */
int guest_exec_detach(struct guest *g);
int guest_attach(struct guest *g, uint32_t id, uint32_t *pid, uint64_t *dropped);
struct guest_proc {
	uint32_t id, pid;
	bool exited;
	int code, signal;		/* when exited, as struct guest_ev */
	int64_t start_ns;		/* guest CLOCK_BOOTTIME-based start, ns */
	uint64_t dropped;
	char cmd[256];
};
typedef int guest_proc_fn(void *ctx, const struct guest_proc *p);
int guest_procs(struct guest *g, guest_proc_fn *fn, void *ctx);
int guest_signal(struct guest *g, uint32_t id, int sig);
/* Stdin for a background process started with stdin_pipe, by id (any
 * connection); eof closes it after the bytes. -EAGAIN: it is not reading;
 * -EPIPE: its stdin is closed or was never open; -ESRCH: no such process
 * or it has ended. */
int guest_proc_input(struct guest *g, uint32_t id, const void *p, size_t n, bool eof);
/* The next event, feeding queued stdin meanwhile. Waits up to wait_ms
 * (-1: no limit) and returns 1 with an event, 0 when the time passed.
 * If watch_fd >= 0 hangs up (the HTTP client went away), -ECONNABORTED. */
int guest_exec_next(struct guest *g, struct guest_ev *ev, int watch_fd, int wait_ms);
/* A command run to its exit (guest_exec_start, then guest_exec_next until
 * the EXIT event), for callers that only take its output: each output
 * event (GEV_STDOUT or GEV_STDERR; its data valid during the call) goes to
 * out if given (a negative return ends the run with that error), the exit
 * event into *exit. wait_ms bounds each wait for the next event (-1: no
 * limit): -ETIMEDOUT when it passes; watch_fd as for guest_exec_next. A
 * stream that ends before the exit event (the connection closed, or a
 * guest that ends the command without one) is an error, never an exit:
 * a guest must not be able to pass for a command that ran. */
typedef int guest_out_fn(void *ctx, const struct guest_ev *ev);
int guest_exec_run(struct guest *g, struct guest_cmd *cmd, guest_out_fn *out, void *ctx, int watch_fd,
		   int wait_ms, struct guest_ev *exit);
/* The same for a command the caller started itself (guest_exec_start,
 * then its stdin queued): output and exit as guest_exec_run has them,
 * queued stdin fed meanwhile. */
int guest_exec_wait(struct guest *g, guest_out_fn *out, void *ctx, int watch_fd, int wait_ms,
		    struct guest_ev *exit);
/* Queue stdin bytes / the end of stdin / a terminal size. */
int guest_exec_stdin(struct guest *g, const void *p, size_t n);
int guest_exec_eof(struct guest *g);
int guest_exec_resize(struct guest *g, unsigned rows, unsigned cols);
/* Bytes of stdin queued but not yet sent. */
size_t guest_exec_pending(struct guest *g);
/* For callers with their own poll loop: the fd and the events to wait for,
 * then guest_exec_io with what poll reported. */
int guest_poll_fd(struct guest *g, short *events);
int guest_exec_io(struct guest *g, short revents);

/* ---- files ------------------------------------------------------------------ */

/* The file requests after this one act as user (NAME, UID or UID:GID;
 * NULL: root): the guest checks that user's permissions and new files
 * are its own. An unknown user is -EINVAL. */
int guest_set_user(struct guest *g, const char *user);

/*
 * The agent's built-ins (docs/protocol.md, "Built-ins"): copy, tar-create,
 * tar-extract, run by the agent as a process of their own, as user.
 * guest_builtin_start starts one (an exec: then guest_exec_next, and
 * guest_exec_stdin with stdin_pipe); guest_builtin_status turns its exit
 * and the stderr it wrote into 0 or -errno with its message.
 * guest_builtin_run does all of it for one whose output is not wanted,
 * feeding in_fd (if >= 0) to its stdin from its offset to the end.
 * guest_builtin_said runs one with no stdin and keeps what it printed
 * (grow-fs's line): the first cap - 1 bytes of its stdout in out, control
 * characters as spaces, trailing ones dropped.
 */
int guest_builtin_start(struct guest *g, const char *const *argv, const char *user, bool stdin_pipe);
int guest_builtin_status(const struct guest_ev *exit, const char *err, size_t errlen);
int guest_builtin_run(struct guest *g, const char *const *argv, const char *user, int in_fd,
		      int watch_fd);
int guest_builtin_said(struct guest *g, const char *const *argv, char *out, size_t cap);
/* The agent's grow-fs / in the guest of the VMM at vsock (pid vmm_pid):
 * its root ext4 grown online to the whole disk. what names the VM in the
 * error ("the build VM"), mib the size it was to reach; said gets
 * grow-fs's line ("grow-fs: 16384 -> 131072 blocks of 4096"). */
int guest_grow_root(const char *vsock, pid_t vmm_pid, const char *what, long long mib, char *said, size_t cap);

struct guest_stat {
	char name[4096];		/* list: relative to the listed directory */
	uint32_t mode;			/* with the S_IFMT bits */
	uint64_t size;
	uint32_t uid, gid;
	int64_t mtime_ns;
	char link[4096];
};

/* Copy a guest file into out_fd (at most max bytes: -EFBIG beyond). */
int guest_read_file(struct guest *g, const char *path, int out_fd, uint64_t max, uint64_t *size);
/* Replace a guest file (atomically) with what in_fd holds from its current
 * offset on (rewind a descriptor you wrote). */
int guest_write_file(struct guest *g, const char *path, uint32_t mode, bool mkdirs, int in_fd,
		     uint64_t *bytes);
int guest_stat(struct guest *g, const char *path, struct guest_stat *st);
typedef int guest_entry_fn(void *ctx, const struct guest_stat *e);
int guest_list(struct guest *g, const char *path, unsigned depth, guest_entry_fn *fn, void *ctx);
int guest_remove(struct guest *g, const char *path, bool recursive);
/* A directory (with its missing parents); a move within the guest
 * (replace false: an existing target is EEXIST). */
int guest_mkdir(struct guest *g, const char *path, uint32_t mode, bool parents);
int guest_rename(struct guest *g, const char *from, const char *to, bool replace);
/* chmod(2) of a guest path (symlinks followed), the 07777 bits. */
int guest_chmod(struct guest *g, const char *path, uint32_t mode);
/* Watch a guest path (a directory, or a file; recursive: every directory
 * below it too). Then guest_watch_next: 1 with an event (KILN_EV_* bits,
 * the name relative to the path), 2 when the watch ended (the path went:
 * KILN_EV_GONE came first), 0 when wait_ms passed, -ECONNABORTED when
 * watch_fd (the HTTP client) hung up. The connection is then good for
 * nothing else: close it (guest_watch_cancel first if it may be reused). */
int guest_watch_start(struct guest *g, const char *path, bool recursive);
int guest_watch_next(struct guest *g, uint32_t *events, char *name, size_t namelen, int watch_fd,
		     int wait_ms);
int guest_watch_cancel(struct guest *g);

#endif
