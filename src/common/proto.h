/*
 * The kiln agent wire protocol, version 1: framing, message types, field
 * tags and the codec shared by kiln-init (the guest agent), the host-side
 * client library and the fuzzer. docs/protocol.md is the specification;
 * this header is its C rendering and must agree with it.
 *
 * A frame is an 8-byte header and a payload:
 *
 *   u32 LE  payload length (0 .. KILN_FRAME_MAX)
 *   u8      version (KILN_PROTO_VERSION)
 *   u8      message type (enum kiln_type)
 *   u16 LE  flags (none defined in version 1; senders write 0, receivers
 *           ignore them)
 *
 * Data-carrying types (stdin, stdout, stderr, file content) have a raw
 * payload. Every other type carries a sequence of fields:
 *
 *   u16 LE tag, u32 LE length, length bytes of value
 *
 * Each tag has one kind (u32, u64, i64: little-endian, exact length; str:
 * bytes without NUL; bytes: anything). Unknown tags are skipped, so newer
 * peers can add fields.
 */
#ifndef KILN_PROTO_H
#define KILN_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define KILN_PROTO_VERSION	1
#define KILN_HDR_SIZE		8
#define KILN_FRAME_MAX		(1u << 20)	/* largest payload accepted */
#define KILN_CHUNK		(64u << 10)	/* data chunk the agent sends */
#define KILN_VSOCK_PORT		52		/* the agent's default port */
#define KILN_FIELD_HDR		6

enum kiln_type {
	/* requests: client to agent, on an idle connection */
	KILN_PING	= 0x01,
	KILN_INFO	= 0x02,
	KILN_EXEC	= 0x03,
	KILN_ATTACH	= 0x04,
	KILN_PROCS	= 0x05,
	KILN_SIGNAL	= 0x06,
	KILN_INPUT	= 0x07,	/* stdin for a background process, by id */
	KILN_READ	= 0x10,
	KILN_WRITE	= 0x11,
	KILN_STAT	= 0x12,
	KILN_LIST	= 0x13,
	KILN_MKDIR	= 0x14,
	KILN_REMOVE	= 0x15,
	KILN_RENAME	= 0x16,
	KILN_CHMOD	= 0x17,
	KILN_WATCH	= 0x18,
	KILN_RESYNC	= 0x20,
	KILN_POWEROFF	= 0x21,
	KILN_CONNECT	= 0x30,	/* TCP inside the guest; then a raw stream */

	/* client to agent, inside a running operation */
	KILN_DATA	= 0x40,	/* raw: stdin bytes or file content */
	KILN_EOF	= 0x41,
	KILN_RESIZE	= 0x42,
	KILN_KILL	= 0x43,
	KILN_CANCEL	= 0x44,

	/* agent to client */
	KILN_OK		= 0x80,
	KILN_ERROR	= 0x81,
	KILN_PONG	= 0x82,
	KILN_INFO_REPLY	= 0x83,
	KILN_STARTED	= 0x84,
	KILN_STDOUT	= 0x85,	/* raw */
	KILN_STDERR	= 0x86,	/* raw */
	KILN_EXIT	= 0x87,
	KILN_PROC	= 0x88,
	KILN_STAT_REPLY	= 0x89,
	KILN_ENTRY	= 0x8a,
	KILN_FDATA	= 0x8b,	/* raw: file content */
	KILN_EVENT	= 0x8c,
	KILN_END	= 0x8d,
	KILN_ACCEPT	= 0x8e,
};

enum kiln_tag {
	KT_ID = 1,		/* u32  process handle given by the agent */
	KT_PID = 2,		/* u32  guest process id */
	KT_ARG = 3,		/* str* argv element, repeated in order */
	KT_SHELL = 4,		/* str  command for /bin/sh -c */
	KT_ENV = 5,		/* str* NAME=VALUE, repeated */
	KT_CWD = 6,		/* str  working directory */
	KT_USER = 7,		/* str  user name, UID or UID:GID */
	KT_TIMEOUT_MS = 8,	/* u32  kill the process after this long */
	KT_FLAGS = 9,		/* u32  per-message flag bits */
	KT_ROWS = 10,		/* u32  terminal rows */
	KT_COLS = 11,		/* u32  terminal columns */
	KT_SIGNAL = 12,		/* u32  signal number */
	KT_CODE = 13,		/* u32  exit code */
	KT_PATH = 14,		/* str  a path, taken literally */
	KT_TARGET = 15,		/* str  second path (rename destination) */
	KT_MODE = 16,		/* u32  st_mode or permission bits */
	KT_SIZE = 17,		/* u64  size in bytes */
	KT_OFFSET = 18,		/* u64  */
	KT_LENGTH = 19,		/* u64  */
	KT_DEPTH = 20,		/* u32  */
	KT_UID = 21,		/* u32  */
	KT_GID = 22,		/* u32  */
	KT_MTIME_NS = 23,	/* i64  nanoseconds since the epoch */
	KT_LINK = 24,		/* str  symlink target */
	KT_NAME = 25,		/* str  entry name, relative */
	KT_ERRNO = 26,		/* u32  Linux errno value */
	KT_MESSAGE = 27,	/* str  human-readable error */
	KT_EVENT = 28,		/* u32  watch event bits */
	KT_TIME_NS = 29,	/* i64  wall clock, ns since the epoch */
	KT_ENTROPY = 30,	/* bytes random seed material */
	KT_HOSTNAME = 31,	/* str  */
	KT_IDENTITY = 32,	/* str  sandbox identity */
	KT_VERSION = 33,	/* u32  protocol version */
	KT_AGENT = 34,		/* str  agent build string */
	KT_KERNEL = 35,		/* str  kernel release */
	KT_UPTIME_NS = 36,	/* u64  */
	KT_MEM_TOTAL = 37,	/* u64  bytes */
	KT_MEM_AVAIL = 38,	/* u64  bytes */
	KT_NCPU = 39,		/* u32  */
	KT_BYTES = 40,		/* u64  bytes transferred */
	KT_COUNT = 41,		/* u64  items transferred */
	KT_DROPPED = 42,	/* u64  output bytes dropped while detached */
	KT_STATE = 43,		/* u32  enum kiln_proc_state */
	KT_DATA = 44,		/* bytes opaque (ping payload) */
	KT_RING = 45,		/* u32  output kept while detached, bytes */
	KT_START_NS = 46,	/* i64  wall clock at process start */
	KT_NLINK = 47,		/* u64  */
	KT_INO = 48,		/* u64  */
	KT_ATIME_NS = 49,	/* i64  */
	KT_CTIME_NS = 50,	/* i64  */
	KT_NPROCS = 51,		/* u32  processes the agent tracks */
	KT_PORT = 52,		/* u32  TCP port (CONNECT) */
	KT_HOST = 53,		/* str  numeric IPv4 or IPv6 address (CONNECT) */
	KT_TAG_COUNT		/* one past the highest tag */
};

enum kiln_kind { KK_NONE, KK_U32, KK_U64, KK_I64, KK_STR, KK_BYTES };

/* EXEC flags (KT_FLAGS); PROC reports them too. */
#define KILN_EXEC_STDIN		0x01	/* stdin is fed by DATA frames */
#define KILN_EXEC_PTY		0x02	/* run on a pseudo-terminal */
#define KILN_EXEC_BACKGROUND	0x04	/* survives its connection */
#define KILN_EXEC_MERGE		0x08	/* stderr goes to stdout */
#define KILN_EXEC_CLEARENV	0x10	/* only the given environment */
#define KILN_EXEC_BUILTIN	0x20	/* ARG[0] names a built-in of the agent */
#define KILN_EXEC_MASK		0x3f
#define KILN_PROC_ATTACHED	0x100	/* PROC only: a client is attached */

/* EXIT flags */
#define KILN_EXIT_TIMEOUT	0x01

/* SIGNAL flags */
#define KILN_SIGNAL_PROCESS	0x01	/* the process only, not its group */

/* INPUT flags */
#define KILN_INPUT_EOF		0x01	/* close stdin after these bytes */

/* WRITE flags */
#define KILN_WRITE_MKDIRS	0x01	/* create missing parent directories */
#define KILN_WRITE_FSYNC	0x02	/* fsync before the rename */
#define KILN_WRITE_NOREPLACE	0x04	/* fail with EEXIST if PATH exists */

/* STAT flags */
#define KILN_STAT_NOFOLLOW	0x01

/* MKDIR flags */
#define KILN_MKDIR_PARENTS	0x01

/* REMOVE flags */
#define KILN_REMOVE_RECURSIVE	0x01
#define KILN_REMOVE_FORCE	0x02	/* a missing path is not an error */

/* RENAME flags */
#define KILN_RENAME_NOREPLACE	0x01

/* WATCH flags */
#define KILN_WATCH_RECURSIVE	0x01

/* POWEROFF flags */
#define KILN_POWEROFF_REBOOT	0x01

/* EVENT bits */
#define KILN_EV_CREATE		0x001
#define KILN_EV_MODIFY		0x002
#define KILN_EV_DELETE		0x004
#define KILN_EV_MOVED_FROM	0x008
#define KILN_EV_MOVED_TO	0x010
#define KILN_EV_ATTRIB		0x020
#define KILN_EV_CLOSE_WRITE	0x040
#define KILN_EV_ISDIR		0x100
#define KILN_EV_OVERFLOW	0x200	/* events were lost */
#define KILN_EV_GONE		0x400	/* the watched directory went away */

enum kiln_proc_state { KILN_PROC_RUNNING = 1, KILN_PROC_EXITED = 2 };

/* Frame header. */
struct kiln_hdr {
	uint32_t len;
	uint8_t version;
	uint8_t type;
	uint16_t flags;
};

static inline void kiln_put_le16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static inline void kiln_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}
static inline void kiln_put_le64(uint8_t *p, uint64_t v)
{
	kiln_put_le32(p, (uint32_t)v);
	kiln_put_le32(p + 4, (uint32_t)(v >> 32));
}
static inline uint16_t kiln_le16(const uint8_t *p) { return p[0] | p[1] << 8; }
static inline uint32_t kiln_le32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t kiln_le64(const uint8_t *p)
{
	return kiln_le32(p) | (uint64_t)kiln_le32(p + 4) << 32;
}

/* Name of a message type or tag, for messages and logs ("EXEC", "0x7f"). */
const char *kiln_type_name(unsigned type);

/* True for types whose payload is raw bytes rather than fields. */
bool kiln_type_is_raw(unsigned type);

/* Kind of a tag; KK_NONE for tags this version does not know. */
enum kiln_kind kiln_tag_kind(unsigned tag);

void kiln_hdr_encode(uint8_t out[KILN_HDR_SIZE], uint8_t type, uint32_t len);

/*
 * Look for one complete frame at the front of `in`. Returns 1 and fills
 * *h and *payload (pointing into the buffer; consume KILN_HDR_SIZE +
 * h->len bytes when done with it), 0 if more bytes are needed, or a
 * negative errno for a header that can never become valid: -EPROTO for a
 * version other than KILN_PROTO_VERSION, -EMSGSIZE for a length above
 * `max`. After an error the stream cannot be resynchronised.
 */
int kiln_frame_peek(const struct buf *in, uint32_t max, struct kiln_hdr *h,
		    const uint8_t **payload);

/*
 * Frame builder. Fields are appended straight into an output buffer; the
 * first failure (allocation, or the frame growing past KILN_FRAME_MAX or
 * the buffer's limit) is kept and reported by kiln_fb_end, which then
 * removes the partial frame, so callers check once.
 */
struct kiln_fb {
	struct buf *b;
	size_t start;		/* frame start, relative to b->off */
	size_t limit;		/* the buffer's size limit */
	int err;
};

void kiln_fb_begin(struct kiln_fb *f, struct buf *b, size_t limit, uint8_t type);
void kiln_fb_u32(struct kiln_fb *f, uint16_t tag, uint32_t v);
void kiln_fb_u64(struct kiln_fb *f, uint16_t tag, uint64_t v);
void kiln_fb_i64(struct kiln_fb *f, uint16_t tag, int64_t v);
void kiln_fb_str(struct kiln_fb *f, uint16_t tag, const char *s);
void kiln_fb_bytes(struct kiln_fb *f, uint16_t tag, const void *p, size_t n);
/* Raw payload bytes, for data types. */
void kiln_fb_raw(struct kiln_fb *f, const void *p, size_t n);
/* Reserve n raw payload bytes and return where to write them (NULL on
 * failure); kiln_fb_raw_commit then keeps the first `used` of them. */
uint8_t *kiln_fb_raw_reserve(struct kiln_fb *f, size_t n);
void kiln_fb_raw_commit(struct kiln_fb *f, size_t used);
/* Finish the frame: 0, or -ENOMEM / -EMSGSIZE / -ENOBUFS (frame dropped). */
int kiln_fb_end(struct kiln_fb *f);

/*
 * Parsed message. Parsing checks every field's bounds and kind and records
 * the first occurrence of each known tag; repeated tags are walked with
 * kiln_msg_iter. The message points into the payload, which must outlive
 * it.
 */
struct kiln_field {
	uint32_t off;		/* value offset in the payload */
	uint32_t len;
	uint32_t count;		/* occurrences */
};

struct kiln_msg {
	uint8_t type;
	const uint8_t *p;
	uint32_t len;
	struct kiln_field f[KT_TAG_COUNT];
};

/* 0, or -EBADMSG with a message in err naming the problem. */
int kiln_msg_parse(struct kiln_msg *m, uint8_t type, const uint8_t *p,
		   uint32_t len, char *err, size_t errlen);

static inline bool kiln_msg_has(const struct kiln_msg *m, unsigned tag)
{
	return tag < KT_TAG_COUNT && m->f[tag].count > 0;
}
uint32_t kiln_msg_u32(const struct kiln_msg *m, unsigned tag, uint32_t def);
uint64_t kiln_msg_u64(const struct kiln_msg *m, unsigned tag, uint64_t def);
int64_t kiln_msg_i64(const struct kiln_msg *m, unsigned tag, int64_t def);
/* The value of a bytes or str field and its length; NULL when absent. */
const uint8_t *kiln_msg_bytes(const struct kiln_msg *m, unsigned tag, uint32_t *len);
/* Copy a str field with a NUL into out: 0, -ENOENT when absent,
 * -ENAMETOOLONG when it does not fit. */
int kiln_msg_str(const struct kiln_msg *m, unsigned tag, char *out, size_t outlen);
/* A malloc'd NUL-terminated copy, NULL when absent or out of memory. */
char *kiln_msg_strdup(const struct kiln_msg *m, unsigned tag);
/* Walk the occurrences of `tag`: start with *pos = 0; returns 1 with the
 * value for each one, then 0. */
int kiln_msg_iter(const struct kiln_msg *m, unsigned tag, uint32_t *pos,
		  const uint8_t **val, uint32_t *len);

#endif
