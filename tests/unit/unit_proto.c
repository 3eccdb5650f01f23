/*
 * The wire codec (src/common/proto.c), the client's decoders and the
 * kernel command-line parser, on crafted bytes.
 */
#include <errno.h>
#include <stdlib.h>

#include "client/kiln_client.h"
#include "common/proto.h"
#include "guest/boot.h"
#include "unit.h"

static struct buf b;

static int frame_of(uint8_t type)
{
	buf_free(&b);
	struct kiln_fb fb;
	kiln_fb_begin(&fb, &b, 1u << 24, type);
	kiln_fb_u32(&fb, KT_ID, 7);
	kiln_fb_u64(&fb, KT_SIZE, 0x1122334455667788ull);
	kiln_fb_i64(&fb, KT_MTIME_NS, -5);
	kiln_fb_str(&fb, KT_PATH, "/a b/c");
	kiln_fb_str(&fb, KT_ARG, "one");
	kiln_fb_str(&fb, KT_ARG, "");
	kiln_fb_str(&fb, KT_ARG, "three");
	kiln_fb_bytes(&fb, KT_ENTROPY, "\0\1\2", 3);
	return kiln_fb_end(&fb);
}

static int test_roundtrip(void)
{
	T_ASSERT(frame_of(KILN_EXEC) == 0, "building failed");
	struct kiln_hdr h;
	const uint8_t *p;
	T_ASSERT(kiln_frame_peek(&b, KILN_FRAME_MAX, &h, &p) == 1, "no frame");
	T_ASSERT(h.type == KILN_EXEC && h.version == KILN_PROTO_VERSION, "header %u/%u", h.type, h.version);
	T_ASSERT(h.len == buf_used(&b) - KILN_HDR_SIZE, "length %u", h.len);
	struct kiln_msg m;
	char err[128], s[64];
	T_ASSERT(kiln_msg_parse(&m, h.type, p, h.len, err, sizeof err) == 0, "%s", err);
	T_ASSERT(kiln_msg_u32(&m, KT_ID, 0) == 7, "ID");
	T_ASSERT(kiln_msg_u64(&m, KT_SIZE, 0) == 0x1122334455667788ull, "SIZE");
	T_ASSERT(kiln_msg_i64(&m, KT_MTIME_NS, 0) == -5, "MTIME");
	T_ASSERT(kiln_msg_str(&m, KT_PATH, s, sizeof s) == 0 && !strcmp(s, "/a b/c"), "PATH '%s'", s);
	T_ASSERT(kiln_msg_str(&m, KT_PATH, s, 4) == -ENAMETOOLONG, "short buffer accepted");
	T_ASSERT(kiln_msg_str(&m, KT_CWD, s, sizeof s) == -ENOENT, "absent CWD found");
	T_ASSERT(kiln_msg_u32(&m, KT_FLAGS, 99) == 99, "default");
	T_ASSERT(m.f[KT_ARG].count == 3, "ARG count %u", m.f[KT_ARG].count);
	const char *want[] = { "one", "", "three" };
	uint32_t pos = 0, len;
	const uint8_t *v;
	for (int i = 0; i < 3; i++) {
		T_ASSERT(kiln_msg_iter(&m, KT_ARG, &pos, &v, &len) == 1, "ARG %d missing", i);
		T_ASSERT(len == strlen(want[i]) && !memcmp(v, want[i], len), "ARG %d wrong", i);
	}
	T_ASSERT(kiln_msg_iter(&m, KT_ARG, &pos, &v, &len) == 0, "extra ARG");
	uint32_t n;
	const uint8_t *e = kiln_msg_bytes(&m, KT_ENTROPY, &n);
	T_ASSERT(e && n == 3 && e[0] == 0 && e[2] == 2, "ENTROPY");
	return 0;
}

static int test_partial_and_bad_headers(void)
{
	T_ASSERT(frame_of(KILN_PING) == 0, "build");
	struct buf part = { 0 };
	struct kiln_hdr h;
	const uint8_t *p;
	/* Every strict prefix is "need more". */
	for (size_t i = 0; i < buf_used(&b); i++) {
		buf_free(&part);
		buf_append(&part, buf_data(&b), i, 1u << 20);
		T_ASSERT(kiln_frame_peek(&part, KILN_FRAME_MAX, &h, &p) == 0, "prefix %zu decoded", i);
	}
	uint8_t hdr[KILN_HDR_SIZE];
	kiln_hdr_encode(hdr, KILN_PING, KILN_FRAME_MAX + 1);
	buf_free(&part);
	buf_append(&part, hdr, sizeof hdr, 64);
	T_ASSERT(kiln_frame_peek(&part, KILN_FRAME_MAX, &h, &p) == -EMSGSIZE, "oversize accepted");
	hdr[4] = 2;
	kiln_put_le32(hdr, 0);
	buf_free(&part);
	buf_append(&part, hdr, sizeof hdr, 64);
	T_ASSERT(kiln_frame_peek(&part, KILN_FRAME_MAX, &h, &p) == -EPROTO, "version 2 accepted");
	buf_free(&part);
	return 0;
}

/* Parse hand-made field bytes; returns kiln_msg_parse's result. */
static int parse_fields(const uint8_t *f, size_t n, struct kiln_msg *m)
{
	char err[128];
	return kiln_msg_parse(m, KILN_STAT, f, (uint32_t)n, err, sizeof err);
}

static int test_malformed_fields(void)
{
	struct kiln_msg m;
	/* PATH claiming 10 bytes with 3 present */
	const uint8_t trunc[] = { KT_PATH, 0, 10, 0, 0, 0, 'a', 'b', 'c' };
	T_ASSERT(parse_fields(trunc, sizeof trunc, &m) == -EBADMSG, "truncated value accepted");
	/* 4 bytes: not even a field header */
	const uint8_t shorthdr[] = { KT_PATH, 0, 0, 0 };
	T_ASSERT(parse_fields(shorthdr, sizeof shorthdr, &m) == -EBADMSG, "short header accepted");
	/* u32 field of 3 bytes */
	const uint8_t width[] = { KT_MODE, 0, 3, 0, 0, 0, 1, 2, 3 };
	T_ASSERT(parse_fields(width, sizeof width, &m) == -EBADMSG, "3-byte u32 accepted");
	/* NUL inside a str */
	const uint8_t nul[] = { KT_PATH, 0, 3, 0, 0, 0, 'a', 0, 'b' };
	T_ASSERT(parse_fields(nul, sizeof nul, &m) == -EBADMSG, "NUL in a path accepted");
	/* PATH twice */
	const uint8_t twice[] = { KT_PATH, 0, 1, 0, 0, 0, 'a', KT_PATH, 0, 1, 0, 0, 0, 'b' };
	T_ASSERT(parse_fields(twice, sizeof twice, &m) == -EBADMSG, "PATH twice accepted");
	/* An unknown tag is skipped. */
	const uint8_t unknown[] = { 0xee, 0x7f, 2, 0, 0, 0, 9, 9, KT_PATH, 0, 1, 0, 0, 0, 'x' };
	T_ASSERT(parse_fields(unknown, sizeof unknown, &m) == 0, "unknown tag rejected");
	T_ASSERT(kiln_msg_has(&m, KT_PATH), "field after unknown tag lost");
	/* A huge length must not wrap the bounds check. */
	const uint8_t huge[] = { KT_DATA, 0, 0xff, 0xff, 0xff, 0xff, 1 };
	T_ASSERT(parse_fields(huge, sizeof huge, &m) == -EBADMSG, "4 GiB field accepted");
	return 0;
}

static int test_builder_limits(void)
{
	struct buf out = { 0 };
	struct kiln_fb fb;
	static char big[KILN_FRAME_MAX];
	memset(big, 'x', sizeof big);
	kiln_fb_begin(&fb, &out, 4u << 20, KILN_DATA);
	kiln_fb_raw(&fb, big, sizeof big);
	kiln_fb_raw(&fb, "y", 1);
	T_ASSERT(kiln_fb_end(&fb) == -EMSGSIZE, "frame over KILN_FRAME_MAX built");
	T_ASSERT(buf_used(&out) == 0, "failed frame left %zu bytes", buf_used(&out));
	/* The buffer limit holds too, and an earlier frame survives. */
	kiln_fb_begin(&fb, &out, 64, KILN_PING);
	T_ASSERT(kiln_fb_end(&fb) == 0, "empty frame");
	kiln_fb_begin(&fb, &out, 64, KILN_STAT);
	kiln_fb_bytes(&fb, KT_PATH, big, 100);
	T_ASSERT(kiln_fb_end(&fb) == -ENOBUFS, "buffer limit ignored");
	T_ASSERT(buf_used(&out) == KILN_HDR_SIZE, "first frame damaged (%zu bytes)", buf_used(&out));
	buf_free(&out);
	return 0;
}

static int test_buf(void)
{
	struct buf x = { 0 };
	T_ASSERT(buf_append(&x, "abcdef", 6, 8) == 0, "append");
	T_ASSERT(buf_append(&x, "ghi", 3, 8) == -ENOBUFS, "limit ignored");
	buf_consume(&x, 4);
	T_ASSERT(buf_append(&x, "ghijkl", 6, 8) == 0, "room after consume");
	T_ASSERT(buf_used(&x) == 8 && !memcmp(buf_data(&x), "efghijkl", 8), "content");
	buf_free(&x);
	return 0;
}

static int test_client_decoders(void)
{
	struct kiln_msg m;
	struct buf x = { 0 };
	struct kiln_fb fb;
	char err[128], msg[16];
	int e;

	kiln_fb_begin(&fb, &x, 1u << 20, KILN_ERROR);
	kiln_fb_u32(&fb, KT_ERRNO, 100000);
	kiln_fb_str(&fb, KT_MESSAGE, "a rather long message that does not fit");
	T_ASSERT(kiln_fb_end(&fb) == 0, "build");
	T_ASSERT(kiln_msg_parse(&m, KILN_ERROR, buf_data(&x) + 8, (uint32_t)buf_used(&x) - 8, err, sizeof err) == 0, "%s", err);
	kiln_decode_error(&m, &e, msg, sizeof msg);
	T_ASSERT(e == EIO, "errno 100000 passed through as %d", e);
	T_ASSERT(strlen(msg) == sizeof msg - 1, "message not truncated: '%s'", msg);

	struct kiln_io ev;
	buf_free(&x);
	kiln_fb_begin(&fb, &x, 1u << 20, KILN_EXIT);
	kiln_fb_u32(&fb, KT_SIGNAL, 9);
	kiln_fb_u32(&fb, KT_FLAGS, KILN_EXIT_TIMEOUT);
	kiln_fb_end(&fb);
	kiln_msg_parse(&m, KILN_EXIT, buf_data(&x) + 8, (uint32_t)buf_used(&x) - 8, err, sizeof err);
	T_ASSERT(kiln_decode_exit(&m, &ev) == 0 && ev.signal == 9 && ev.code == -1 && ev.timed_out,
		 "EXIT decoded as code %d signal %d", ev.code, ev.signal);
	kiln_msg_parse(&m, KILN_EXIT, NULL, 0, err, sizeof err);
	T_ASSERT(kiln_decode_exit(&m, &ev) == -EBADMSG, "EXIT without status accepted");
	struct kiln_stat st;
	T_ASSERT(kiln_decode_stat(&m, &st) == -EBADMSG, "STAT without MODE accepted");
	buf_free(&x);
	return 0;
}

static int test_cmdline(void)
{
	struct boot_cfg c;
	char err[128];
	int bad = cmdline_parse("console=ttyS0 kiln.root=/dev/vda kiln.ro kiln.ip=10.0.0.2/24 "
				"kiln.gw=10.0.0.1 kiln.dns=1.1.1.1,8.8.8.8 kiln.hostname=\"box one\" "
				"kiln.port=1234 quiet", &c, err, sizeof err);
	T_ASSERT(bad == 0, "%s", err);
	T_ASSERT(!strcmp(c.root, "/dev/vda") && c.ro, "root '%s' ro %d", c.root, c.ro);
	T_ASSERT(!strcmp(c.ip, "10.0.0.2/24") && !strcmp(c.gw, "10.0.0.1"), "ip/gw");
	T_ASSERT(!strcmp(c.dns, "1.1.1.1,8.8.8.8"), "dns '%s'", c.dns);
	T_ASSERT(!strcmp(c.hostname, "box one"), "quoted hostname '%s'", c.hostname);
	T_ASSERT(c.port == 1234 && !strcmp(c.rootfstype, "ext4") && !strcmp(c.iface, "eth0"), "defaults");
	bad = cmdline_parse("kiln.port=x kiln.bogus=1 kiln.root", &c, err, sizeof err);
	T_ASSERT(bad == 3, "%d bad values counted", bad);
	T_ASSERT(c.port == 52, "bad port replaced the default: %u", c.port);
	char longword[700];
	memset(longword, 'a', sizeof longword - 1);
	longword[sizeof longword - 1] = 0;
	memcpy(longword, "kiln.root=", 10);
	bad = cmdline_parse(longword, &c, err, sizeof err);
	T_ASSERT(c.root[0] == 0, "over-long word taken");
	return 0;
}

int main(void)
{
	T_RUN(test_roundtrip);
	T_RUN(test_partial_and_bad_headers);
	T_RUN(test_malformed_fields);
	T_RUN(test_builder_limits);
	T_RUN(test_buf);
	T_RUN(test_client_decoders);
	T_RUN(test_cmdline);
	buf_free(&b);
	return t_failed ? 1 : 0;
}
