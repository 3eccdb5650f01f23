/*
 * Codec for the agent wire protocol: see proto.h and docs/protocol.md.
 * Everything here works on bytes from a peer that may be hostile, so every
 * length is checked against what is actually there before use.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"

static const uint8_t tag_kinds[KT_TAG_COUNT] = {
	[KT_ID] = KK_U32, [KT_PID] = KK_U32, [KT_ARG] = KK_STR,
	[KT_SHELL] = KK_STR, [KT_ENV] = KK_STR, [KT_CWD] = KK_STR,
	[KT_USER] = KK_STR, [KT_TIMEOUT_MS] = KK_U32, [KT_FLAGS] = KK_U32,
	[KT_ROWS] = KK_U32, [KT_COLS] = KK_U32, [KT_SIGNAL] = KK_U32,
	[KT_CODE] = KK_U32, [KT_PATH] = KK_STR, [KT_TARGET] = KK_STR,
	[KT_MODE] = KK_U32, [KT_SIZE] = KK_U64, [KT_OFFSET] = KK_U64,
	[KT_LENGTH] = KK_U64, [KT_DEPTH] = KK_U32, [KT_UID] = KK_U32,
	[KT_GID] = KK_U32, [KT_MTIME_NS] = KK_I64, [KT_LINK] = KK_STR,
	[KT_NAME] = KK_STR, [KT_ERRNO] = KK_U32, [KT_MESSAGE] = KK_STR,
	[KT_EVENT] = KK_U32, [KT_TIME_NS] = KK_I64, [KT_ENTROPY] = KK_BYTES,
	[KT_HOSTNAME] = KK_STR, [KT_IDENTITY] = KK_STR, [KT_VERSION] = KK_U32,
	[KT_AGENT] = KK_STR, [KT_KERNEL] = KK_STR, [KT_UPTIME_NS] = KK_U64,
	[KT_MEM_TOTAL] = KK_U64, [KT_MEM_AVAIL] = KK_U64, [KT_NCPU] = KK_U32,
	[KT_BYTES] = KK_U64, [KT_COUNT] = KK_U64, [KT_DROPPED] = KK_U64,
	[KT_STATE] = KK_U32, [KT_DATA] = KK_BYTES, [KT_RING] = KK_U32,
	[KT_START_NS] = KK_I64, [KT_NLINK] = KK_U64, [KT_INO] = KK_U64,
	[KT_ATIME_NS] = KK_I64, [KT_CTIME_NS] = KK_I64, [KT_NPROCS] = KK_U32,
	[KT_PORT] = KK_U32, [KT_HOST] = KK_STR,
};

static const char *const tag_names[KT_TAG_COUNT] = {
	[KT_ID] = "ID", [KT_PID] = "PID", [KT_ARG] = "ARG", [KT_SHELL] = "SHELL",
	[KT_ENV] = "ENV", [KT_CWD] = "CWD", [KT_USER] = "USER",
	[KT_TIMEOUT_MS] = "TIMEOUT_MS", [KT_FLAGS] = "FLAGS", [KT_ROWS] = "ROWS",
	[KT_COLS] = "COLS", [KT_SIGNAL] = "SIGNAL", [KT_CODE] = "CODE",
	[KT_PATH] = "PATH", [KT_TARGET] = "TARGET", [KT_MODE] = "MODE",
	[KT_SIZE] = "SIZE", [KT_OFFSET] = "OFFSET", [KT_LENGTH] = "LENGTH",
	[KT_DEPTH] = "DEPTH", [KT_UID] = "UID", [KT_GID] = "GID",
	[KT_MTIME_NS] = "MTIME_NS", [KT_LINK] = "LINK", [KT_NAME] = "NAME",
	[KT_ERRNO] = "ERRNO", [KT_MESSAGE] = "MESSAGE", [KT_EVENT] = "EVENT",
	[KT_TIME_NS] = "TIME_NS", [KT_ENTROPY] = "ENTROPY",
	[KT_HOSTNAME] = "HOSTNAME", [KT_IDENTITY] = "IDENTITY",
	[KT_VERSION] = "VERSION", [KT_AGENT] = "AGENT", [KT_KERNEL] = "KERNEL",
	[KT_UPTIME_NS] = "UPTIME_NS", [KT_MEM_TOTAL] = "MEM_TOTAL",
	[KT_MEM_AVAIL] = "MEM_AVAIL", [KT_NCPU] = "NCPU", [KT_BYTES] = "BYTES",
	[KT_COUNT] = "COUNT", [KT_DROPPED] = "DROPPED", [KT_STATE] = "STATE",
	[KT_DATA] = "DATA", [KT_RING] = "RING", [KT_START_NS] = "START_NS",
	[KT_NLINK] = "NLINK", [KT_INO] = "INO", [KT_ATIME_NS] = "ATIME_NS",
	[KT_CTIME_NS] = "CTIME_NS", [KT_NPROCS] = "NPROCS",
	[KT_PORT] = "PORT", [KT_HOST] = "HOST",
};

/* Only argv and the environment may repeat; a second PATH in one message
 * is more likely an attack or a bug than an intent. */
static bool tag_repeats(unsigned tag)
{
	return tag == KT_ARG || tag == KT_ENV;
}

const char *kiln_type_name(unsigned type)
{
	switch (type) {
	case KILN_PING: return "PING";
	case KILN_INFO: return "INFO";
	case KILN_EXEC: return "EXEC";
	case KILN_ATTACH: return "ATTACH";
	case KILN_PROCS: return "PROCS";
	case KILN_SIGNAL: return "SIGNAL";
	case KILN_INPUT: return "INPUT";
	case KILN_READ: return "READ";
	case KILN_WRITE: return "WRITE";
	case KILN_STAT: return "STAT";
	case KILN_LIST: return "LIST";
	case KILN_MKDIR: return "MKDIR";
	case KILN_REMOVE: return "REMOVE";
	case KILN_RENAME: return "RENAME";
	case KILN_CHMOD: return "CHMOD";
	case KILN_WATCH: return "WATCH";
	case KILN_RESYNC: return "RESYNC";
	case KILN_POWEROFF: return "POWEROFF";
	case KILN_CONNECT: return "CONNECT";
	case KILN_DATA: return "DATA";
	case KILN_EOF: return "EOF";
	case KILN_RESIZE: return "RESIZE";
	case KILN_KILL: return "KILL";
	case KILN_CANCEL: return "CANCEL";
	case KILN_OK: return "OK";
	case KILN_ERROR: return "ERROR";
	case KILN_PONG: return "PONG";
	case KILN_INFO_REPLY: return "INFO_REPLY";
	case KILN_STARTED: return "STARTED";
	case KILN_STDOUT: return "STDOUT";
	case KILN_STDERR: return "STDERR";
	case KILN_EXIT: return "EXIT";
	case KILN_PROC: return "PROC";
	case KILN_STAT_REPLY: return "STAT_REPLY";
	case KILN_ENTRY: return "ENTRY";
	case KILN_FDATA: return "FDATA";
	case KILN_EVENT: return "EVENT";
	case KILN_END: return "END";
	case KILN_ACCEPT: return "ACCEPT";
	}
	return "unknown";
}

bool kiln_type_is_raw(unsigned type)
{
	return type == KILN_DATA || type == KILN_STDOUT ||
	       type == KILN_STDERR || type == KILN_FDATA;
}

enum kiln_kind kiln_tag_kind(unsigned tag)
{
	return tag < KT_TAG_COUNT ? tag_kinds[tag] : KK_NONE;
}

void kiln_hdr_encode(uint8_t out[KILN_HDR_SIZE], uint8_t type, uint32_t len)
{
	kiln_put_le32(out, len);
	out[4] = KILN_PROTO_VERSION;
	out[5] = type;
	kiln_put_le16(out + 6, 0);
}

int kiln_frame_peek(const struct buf *in, uint32_t max, struct kiln_hdr *h,
		    const uint8_t **payload)
{
	size_t have = buf_used(in);
	const uint8_t *p = buf_data(in);

	if (have < KILN_HDR_SIZE)
		return 0;
	h->len = kiln_le32(p);
	h->version = p[4];
	h->type = p[5];
	h->flags = kiln_le16(p + 6);
	if (h->version != KILN_PROTO_VERSION)
		return -EPROTO;
	if (h->len > max)
		return -EMSGSIZE;
	if (have - KILN_HDR_SIZE < h->len)
		return 0;
	*payload = p + KILN_HDR_SIZE;
	return 1;
}

/* ---- building ------------------------------------------------------- */

void kiln_fb_begin(struct kiln_fb *f, struct buf *b, size_t limit, uint8_t type)
{
	f->b = b;
	f->limit = limit;
	f->start = buf_used(b);
	f->err = buf_reserve(b, KILN_HDR_SIZE, limit);
	if (f->err == 0) {
		kiln_hdr_encode(buf_tail(b), type, 0);
		b->len += KILN_HDR_SIZE;
	}
}

/* Bytes of payload so far. */
static size_t fb_payload(const struct kiln_fb *f)
{
	return buf_used(f->b) - f->start - KILN_HDR_SIZE;
}

static uint8_t *fb_grow(struct kiln_fb *f, size_t n)
{
	if (f->err)
		return NULL;
	if (n > KILN_FRAME_MAX || fb_payload(f) > KILN_FRAME_MAX - n) {
		f->err = -EMSGSIZE;
		return NULL;
	}
	f->err = buf_reserve(f->b, n, f->limit);
	if (f->err)
		return NULL;
	uint8_t *p = buf_tail(f->b);
	f->b->len += n;
	return p;
}

static uint8_t *fb_field(struct kiln_fb *f, uint16_t tag, size_t n)
{
	if (n > UINT32_MAX - KILN_FIELD_HDR) {
		if (!f->err)
			f->err = -EMSGSIZE;
		return NULL;
	}
	uint8_t *p = fb_grow(f, KILN_FIELD_HDR + n);
	if (!p)
		return NULL;
	kiln_put_le16(p, tag);
	kiln_put_le32(p + 2, (uint32_t)n);
	return p + KILN_FIELD_HDR;
}

void kiln_fb_u32(struct kiln_fb *f, uint16_t tag, uint32_t v)
{
	uint8_t *p = fb_field(f, tag, 4);
	if (p)
		kiln_put_le32(p, v);
}

void kiln_fb_u64(struct kiln_fb *f, uint16_t tag, uint64_t v)
{
	uint8_t *p = fb_field(f, tag, 8);
	if (p)
		kiln_put_le64(p, v);
}

void kiln_fb_i64(struct kiln_fb *f, uint16_t tag, int64_t v)
{
	kiln_fb_u64(f, tag, (uint64_t)v);
}

void kiln_fb_str(struct kiln_fb *f, uint16_t tag, const char *s)
{
	kiln_fb_bytes(f, tag, s, strlen(s));
}

void kiln_fb_bytes(struct kiln_fb *f, uint16_t tag, const void *src, size_t n)
{
	uint8_t *p = fb_field(f, tag, n);
	if (p && n)
		memcpy(p, src, n);
}

void kiln_fb_raw(struct kiln_fb *f, const void *src, size_t n)
{
	uint8_t *p = fb_grow(f, n);
	if (p && n)
		memcpy(p, src, n);
}

uint8_t *kiln_fb_raw_reserve(struct kiln_fb *f, size_t n)
{
	uint8_t *p = fb_grow(f, n);
	if (p)
		f->b->len -= n;	/* not data until committed */
	return p;
}

void kiln_fb_raw_commit(struct kiln_fb *f, size_t used)
{
	if (!f->err)
		f->b->len += used;
}

int kiln_fb_end(struct kiln_fb *f)
{
	if (f->err) {
		buf_truncate(f->b, f->start);
		return f->err;
	}
	kiln_put_le32(buf_data(f->b) + f->start, (uint32_t)fb_payload(f));
	return 0;
}

/* ---- parsing -------------------------------------------------------- */

int kiln_msg_parse(struct kiln_msg *m, uint8_t type, const uint8_t *p,
		   uint32_t len, char *err, size_t errlen)
{
	memset(m, 0, sizeof *m);
	m->type = type;
	m->p = p;
	m->len = len;
	if (kiln_type_is_raw(type))
		return 0;

	uint32_t pos = 0;
	while (pos < len) {
		if (len - pos < KILN_FIELD_HDR) {
			snprintf(err, errlen, "%s: truncated field header at byte %u",
				 kiln_type_name(type), pos);
			return -EBADMSG;
		}
		uint16_t tag = kiln_le16(p + pos);
		uint32_t flen = kiln_le32(p + pos + 2);
		pos += KILN_FIELD_HDR;
		if (flen > len - pos) {
			snprintf(err, errlen, "%s: field %u claims %u bytes, %u left",
				 kiln_type_name(type), tag, flen, len - pos);
			return -EBADMSG;
		}
		enum kiln_kind kind = kiln_tag_kind(tag);
		const uint8_t *v = p + pos;
		bool bad = false;
		switch (kind) {
		case KK_NONE:
			pos += flen;	/* unknown: skip, for newer peers */
			continue;
		case KK_U32:
			bad = flen != 4;
			break;
		case KK_U64:
		case KK_I64:
			bad = flen != 8;
			break;
		case KK_STR:
			bad = memchr(v, 0, flen) != NULL;
			break;
		case KK_BYTES:
			break;
		}
		if (bad) {
			snprintf(err, errlen, "%s: field %s has a bad value (%u bytes)",
				 kiln_type_name(type), tag_names[tag], flen);
			return -EBADMSG;
		}
		struct kiln_field *fd = &m->f[tag];
		if (fd->count && !tag_repeats(tag)) {
			snprintf(err, errlen, "%s: field %s given twice",
				 kiln_type_name(type), tag_names[tag]);
			return -EBADMSG;
		}
		if (fd->count++ == 0) {
			fd->off = pos;
			fd->len = flen;
		}
		pos += flen;
	}
	return 0;
}

uint32_t kiln_msg_u32(const struct kiln_msg *m, unsigned tag, uint32_t def)
{
	if (!kiln_msg_has(m, tag) || kiln_tag_kind(tag) != KK_U32)
		return def;
	return kiln_le32(m->p + m->f[tag].off);
}

uint64_t kiln_msg_u64(const struct kiln_msg *m, unsigned tag, uint64_t def)
{
	enum kiln_kind k = kiln_tag_kind(tag);
	if (!kiln_msg_has(m, tag) || (k != KK_U64 && k != KK_I64))
		return def;
	return kiln_le64(m->p + m->f[tag].off);
}

int64_t kiln_msg_i64(const struct kiln_msg *m, unsigned tag, int64_t def)
{
	return (int64_t)kiln_msg_u64(m, tag, (uint64_t)def);
}

const uint8_t *kiln_msg_bytes(const struct kiln_msg *m, unsigned tag, uint32_t *len)
{
	enum kiln_kind k = kiln_tag_kind(tag);
	if (!kiln_msg_has(m, tag) || (k != KK_STR && k != KK_BYTES)) {
		*len = 0;
		return NULL;
	}
	*len = m->f[tag].len;
	return m->p + m->f[tag].off;
}

int kiln_msg_str(const struct kiln_msg *m, unsigned tag, char *out, size_t outlen)
{
	uint32_t n;
	const uint8_t *v = kiln_msg_bytes(m, tag, &n);
	if (!v)
		return -ENOENT;
	if (n >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, v, n);
	out[n] = 0;
	return 0;
}

char *kiln_msg_strdup(const struct kiln_msg *m, unsigned tag)
{
	uint32_t n;
	const uint8_t *v = kiln_msg_bytes(m, tag, &n);
	if (!v)
		return NULL;
	char *s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	memcpy(s, v, n);
	s[n] = 0;
	return s;
}

int kiln_msg_iter(const struct kiln_msg *m, unsigned tag, uint32_t *pos,
		  const uint8_t **val, uint32_t *len)
{
	/* The payload was validated by kiln_msg_parse, so the walk only
	 * needs to step over fields. */
	while (*pos + KILN_FIELD_HDR <= m->len) {
		uint16_t t = kiln_le16(m->p + *pos);
		uint32_t flen = kiln_le32(m->p + *pos + 2);
		uint32_t voff = *pos + KILN_FIELD_HDR;
		if (flen > m->len - voff)
			return 0;
		*pos = voff + flen;
		if (t == tag) {
			*val = m->p + voff;
			*len = flen;
			return 1;
		}
	}
	return 0;
}
