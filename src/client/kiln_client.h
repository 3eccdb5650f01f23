/*
 * kiln_client: the host side of the guest agent protocol (docs/protocol.md).
 *
 * One struct kiln_client is one connection to one guest's agent, running
 * one operation at a time (open more clients for parallel work). The
 * library keeps no global state and is thread-compatible: a client must
 * not be used by two threads at once; different clients are independent.
 *
 * Every function returns 0 (or a documented non-negative value) on
 * success and a negative errno on failure; kiln_client_error() then holds
 * a message for humans. When the agent refuses a request, the errno is the
 * agent's (Linux numbering) and the message is the agent's, e.g.
 * "agent: stat /nope: No such file or directory". Everything received is
 * treated as hostile: frames above KILN_FRAME_MAX, malformed fields and
 * unexpected messages fail with -EPROTO or -EBADMSG and a message saying
 * what was wrong; the connection is unusable afterwards.
 *
 * I/O is blocking unless stated otherwise, bounded by the timeout set with
 * kiln_client_set_timeout (per wait, default: none). For interactive use
 * (stdin and output at the same time) use kiln_client_events/_io with
 * poll() and kiln_exec_poll, as kiln-guest's exec does.
 */
#ifndef KILN_CLIENT_H
#define KILN_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/proto.h"	/* message types, flags, KILN_VSOCK_PORT */

struct kiln_client;

/* ---- connection ------------------------------------------------------- */

/* A new, unconnected client; NULL when out of memory. */
struct kiln_client *kiln_client_new(void);
/* Close and free (NULL is fine). */
void kiln_client_free(struct kiln_client *c);
/* The last error's description ("" if none). Valid until the next call. */
const char *kiln_client_error(const struct kiln_client *c);
/* Bound every wait (connect, each frame) to ms milliseconds; -1: none. */
void kiln_client_set_timeout(struct kiln_client *c, int ms);
/* File requests from now on act as this user (NAME, UID or UID:GID:
 * its permissions, and new files are its own); NULL: the agent's own. */
int kiln_client_set_user(struct kiln_client *c, const char *user);

/* A Unix socket on which the agent itself listens (kiln-init --listen). */
int kiln_connect_unix(struct kiln_client *c, const char *path);
/* AF_VSOCK, e.g. to a guest behind QEMU's vhost-vsock. */
int kiln_connect_vsock(struct kiln_client *c, unsigned cid, unsigned port);
/* A VMM's vsock bridge (Firecracker style): connect to the Unix socket,
 * send "CONNECT <port>\n", expect "OK <hostport>\n"; then the stream is
 * the guest connection. */
int kiln_connect_bridge(struct kiln_client *c, const char *uds_path, unsigned port);
/* Take fd, a stream already joined to the agent (a relay of a bridge
 * connection past its "OK", say), with early (n bytes, may be 0) read
 * from it already; the client owns fd from now on, also on failure. */
int kiln_client_adopt(struct kiln_client *c, int fd, const void *early, size_t n);
/* Close the connection; the client can connect again. */
void kiln_close(struct kiln_client *c);

/* ---- guest ------------------------------------------------------------ */

struct kiln_info {
	uint32_t version;		/* protocol version */
	char agent[64];			/* agent build */
	char kernel[128];		/* uname -r */
	char hostname[65];
	char identity[256];
	uint64_t uptime_ns;
	int64_t time_ns;		/* guest wall clock */
	uint64_t mem_total, mem_avail;
	uint32_t ncpu, nprocs, pid;
};

/* Round trip; 0 when the agent answered. */
int kiln_ping(struct kiln_client *c);
int kiln_info(struct kiln_client *c, struct kiln_info *out);

/* RESYNC after a restore or fork. Fields left zero/NULL are not changed. */
struct kiln_resync {
	bool set_time;
	int64_t time_ns;		/* CLOCK_REALTIME to set */
	const void *entropy;		/* 1..4096 bytes credited to the CRNG */
	size_t entropy_len;
	const char *hostname;
	const char *identity;
};
int kiln_resync(struct kiln_client *c, const struct kiln_resync *r);
/* Power the guest off (or reboot with KILN_POWEROFF_REBOOT). */
int kiln_poweroff(struct kiln_client *c, uint32_t flags);

/* ---- processes -------------------------------------------------------- */

struct kiln_exec_req {
	const char *const *argv;	/* NULL-terminated; or NULL and shell */
	const char *shell;		/* run with /bin/sh -c */
	const char *const *env;		/* NAME=VALUE, NULL-terminated; may be NULL */
	const char *cwd;		/* NULL: the user's home */
	const char *user;		/* NAME, UID or UID:GID; NULL: root */
	uint32_t timeout_ms;		/* 0: none */
	uint32_t flags;			/* KILN_EXEC_* */
	uint32_t rows, cols;		/* pty size; 0: 24x80 */
	uint32_t ring;			/* background output kept, bytes; 0: default */
};

enum kiln_io_kind {
	KILN_IO_STDOUT = 1,
	KILN_IO_STDERR,
	KILN_IO_EXIT,		/* terminal */
	KILN_IO_DETACHED,	/* terminal: CANCEL of a background process */
};

struct kiln_io {
	enum kiln_io_kind kind;
	const uint8_t *data;	/* STDOUT/STDERR: valid until the next call */
	size_t len;
	int code;		/* EXIT: exit code, or -1 when killed by a signal */
	int signal;		/* EXIT: the signal, or 0 */
	bool timed_out;		/* EXIT: killed because the timeout passed */
};

/* Start a process. On success the connection streams its output; read it
 * with kiln_exec_next (or kiln_exec_poll) until KILN_IO_EXIT. */
int kiln_exec_start(struct kiln_client *c, const struct kiln_exec_req *r,
		    uint32_t *id, uint32_t *pid);
/* Re-attach to a background process: its kept output is replayed first. */
int kiln_attach(struct kiln_client *c, uint32_t id, uint32_t *pid, uint64_t *dropped);
/* The next event, blocking. */
int kiln_exec_next(struct kiln_client *c, struct kiln_io *ev);
/* Non-blocking: 1 and an event if one is buffered, 0 if not. */
int kiln_exec_poll(struct kiln_client *c, struct kiln_io *ev);
/* Queue stdin bytes (the process needs KILN_EXEC_STDIN or a pty). They
 * are sent by kiln_client_io / kiln_client_flush; see kiln_client_pending
 * to bound what is queued. */
int kiln_exec_stdin(struct kiln_client *c, const void *p, size_t n);
int kiln_exec_eof(struct kiln_client *c);
int kiln_exec_resize(struct kiln_client *c, unsigned rows, unsigned cols);
int kiln_exec_kill(struct kiln_client *c, int sig);
/* Background: detach (ends with KILN_IO_DETACHED). Foreground: kill. */
int kiln_exec_cancel(struct kiln_client *c);

struct kiln_proc_info {
	uint32_t id, pid, state, flags;	/* KILN_PROC_*, KILN_EXEC_* | KILN_PROC_ATTACHED */
	int code, signal;		/* when exited, as in struct kiln_io */
	int64_t start_ns;
	uint64_t dropped;
	char cmd[256];
};
typedef int kiln_proc_fn(void *ctx, const struct kiln_proc_info *p);
/* Every process the agent tracks; fn returning non-zero stops the walk
 * (the rest is read and dropped) and is returned. */
int kiln_procs(struct kiln_client *c, kiln_proc_fn *fn, void *ctx);
/* Signal a process (its process group unless KILN_SIGNAL_PROCESS). */
int kiln_signal(struct kiln_client *c, uint32_t id, int sig, uint32_t flags);
/* Stdin for a process started with KILN_EXEC_STDIN (or a pty), from any
 * connection: n bytes (at most KILN_INPUT_MAX), then the end of stdin with
 * KILN_INPUT_EOF. -EAGAIN: the process is not reading (too much waits);
 * -EPIPE: its stdin is closed or was never open. */
#define KILN_INPUT_MAX (KILN_FRAME_MAX - 64)
int kiln_input(struct kiln_client *c, uint32_t id, const void *p, size_t n, uint32_t flags);

/* ---- files ------------------------------------------------------------ */

struct kiln_stat {
	char name[4096];		/* LIST: path relative to the listed dir */
	uint32_t mode;			/* st_mode, with the S_IFMT type bits */
	uint64_t size;
	uint32_t uid, gid;
	int64_t mtime_ns, atime_ns, ctime_ns;
	uint64_t nlink, ino;
	char link[4096];		/* symlink target, "" otherwise */
};

/* Receives file data; return 0, or -errno to abort the transfer. */
typedef int kiln_sink_fn(void *ctx, const void *data, size_t len);
/* Supplies file data: bytes written to buf (at most cap), 0 at the end,
 * or -errno to abort. */
typedef ssize_t kiln_source_fn(void *ctx, void *buf, size_t cap);
typedef int kiln_entry_fn(void *ctx, const struct kiln_stat *e);

/* Stream a regular file (from offset, at most length bytes; UINT64_MAX:
 * to the end) into sink. size/mode (may be NULL) get the file's. */
int kiln_read_file(struct kiln_client *c, const char *path, uint64_t offset,
		   uint64_t length, kiln_sink_fn *sink, void *ctx,
		   uint64_t *size, uint32_t *mode, uint64_t *bytes);
/* Replace path atomically with what source supplies; flags KILN_WRITE_*. */
int kiln_write_file(struct kiln_client *c, const char *path, uint32_t mode,
		    uint32_t flags, kiln_source_fn *source, void *ctx, uint64_t *bytes);
int kiln_stat(struct kiln_client *c, const char *path, uint32_t flags, struct kiln_stat *st);
/* Entries below path, `depth` levels deep (1: its children), directories
 * before their contents. fn returning non-zero cancels the walk and is
 * returned. count (may be NULL) gets the number of entries. */
int kiln_list(struct kiln_client *c, const char *path, uint32_t depth,
	      kiln_entry_fn *fn, void *ctx, uint64_t *count);
int kiln_mkdir(struct kiln_client *c, const char *path, uint32_t mode, uint32_t flags);
int kiln_remove(struct kiln_client *c, const char *path, uint32_t flags);
int kiln_rename(struct kiln_client *c, const char *from, const char *to, uint32_t flags);
int kiln_chmod(struct kiln_client *c, const char *path, uint32_t mode);

/* Watch path (KILN_WATCH_RECURSIVE for the whole tree). Then call
 * kiln_watch_next: 1 with an event (KILN_EV_* bits and the path relative
 * to the watched one), 0 when the watch ended (after kiln_watch_cancel,
 * or KILN_EV_GONE). */
int kiln_watch_start(struct kiln_client *c, const char *path, uint32_t flags);
int kiln_watch_next(struct kiln_client *c, uint32_t *events, char *name, size_t namelen);
int kiln_watch_cancel(struct kiln_client *c);
/* kiln_watch_next without blocking, for callers with their own poll loop
 * (kiln_client_fd, kiln_client_io): 2 when no event is buffered yet. */
int kiln_watch_poll(struct kiln_client *c, uint32_t *events, char *name, size_t namelen);

/* ---- TCP inside the guest ----------------------------------------------- */

/* CONNECT: the agent opens a TCP connection to host:port inside the guest
 * (host: a numeric IPv4 or IPv6 address; NULL: 127.0.0.1). On success the
 * connection carries no more frames: it is a byte stream to that TCP
 * connection, to be taken with kiln_client_detach. A refused connect is
 * -ECONNREFUSED (the agent's errno) and the client stays usable. */
int kiln_tcp_connect(struct kiln_client *c, const char *host, unsigned port);
/* Take the connection's socket (non-blocking; the caller closes it) and
 * the bytes already received past the last reply (*early, malloc'd, NULL
 * when n is 0: they come before anything read from the socket). The
 * client is left unconnected. */
int kiln_client_detach(struct kiln_client *c, int *fd, void **early, size_t *n);

/* ---- event-loop integration -------------------------------------------- */

/* The connected socket, for poll(). */
int kiln_client_fd(const struct kiln_client *c);
/* What to poll for: POLLIN, and POLLOUT while bytes are queued. */
short kiln_client_events(const struct kiln_client *c);
/* Do the reading and writing poll() reported (revents). 0 or -errno;
 * -ECONNRESET when the agent closed the connection. */
int kiln_client_io(struct kiln_client *c, short revents);
/* Bytes queued but not yet sent. */
size_t kiln_client_pending(const struct kiln_client *c);
/* Send everything queued, blocking. */
int kiln_client_flush(struct kiln_client *c);

/* ---- decoding (exposed for tests and fuzzing) --------------------------- */

/* Each takes a parsed message of the matching type and fills the struct,
 * truncating strings to fit; -EBADMSG when a required field is missing. */
int kiln_decode_stat(const struct kiln_msg *m, struct kiln_stat *st);
int kiln_decode_info(const struct kiln_msg *m, struct kiln_info *info);
int kiln_decode_proc(const struct kiln_msg *m, struct kiln_proc_info *p);
int kiln_decode_exit(const struct kiln_msg *m, struct kiln_io *ev);
/* ERROR: the errno (positive, 1..4095) and the message. */
int kiln_decode_error(const struct kiln_msg *m, int *err, char *msg, size_t msglen);

#endif
