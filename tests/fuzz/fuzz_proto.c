/*
 * libFuzzer target over everything that parses bytes from a peer: the
 * streaming frame decoder, the field parser and its accessors, the
 * client's reply decoders, and the kernel command-line parser.
 *
 * The first input byte picks how the rest is cut into reads, so that the
 * decoder sees frames split at every possible point; every frame found is
 * parsed as its own type, re-encoded field by field and parsed again,
 * which must give the same fields.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/kiln_client.h"
#include "common/proto.h"
#include "guest/boot.h"

static void exercise(const struct kiln_msg *m)
{
	char s[64];
	uint32_t pos, len;
	const uint8_t *v;

	for (unsigned tag = 0; tag < KT_TAG_COUNT + 2; tag++) {
		(void)kiln_msg_u32(m, tag, 1);
		(void)kiln_msg_u64(m, tag, 2);
		(void)kiln_msg_i64(m, tag, 3);
		(void)kiln_msg_bytes(m, tag, &len);
		(void)kiln_msg_str(m, tag, s, sizeof s);
		free(kiln_msg_strdup(m, tag));
		pos = 0;
		while (kiln_msg_iter(m, tag, &pos, &v, &len) == 1)
			if (v < m->p || v + len > m->p + m->len)
				abort();
	}
	struct kiln_stat *st = malloc(sizeof *st);
	struct kiln_info info;
	struct kiln_proc_info pi;
	struct kiln_io ev;
	char msg[128];
	int err;
	kiln_decode_stat(m, st);
	kiln_decode_info(m, &info);
	kiln_decode_proc(m, &pi);
	kiln_decode_exit(m, &ev);
	kiln_decode_error(m, &err, msg, sizeof msg);
	if (err < 1 || err > 4095 || strlen(msg) >= sizeof msg)
		abort();
	free(st);
}

/* Rebuild the message from its fields and check the copy parses alike. */
static void reencode(const struct kiln_msg *m)
{
	struct buf b = { 0 };
	struct kiln_fb fb;
	struct kiln_msg m2;
	struct kiln_hdr h;
	const uint8_t *p;
	char err[128];

	kiln_fb_begin(&fb, &b, 4u << 20, m->type);
	if (kiln_type_is_raw(m->type)) {
		kiln_fb_raw(&fb, m->p, m->len);
	} else {
		for (unsigned tag = 1; tag < KT_TAG_COUNT; tag++) {
			uint32_t pos = 0, len;
			const uint8_t *v;
			while (kiln_msg_iter(m, tag, &pos, &v, &len) == 1)
				kiln_fb_bytes(&fb, (uint16_t)tag, v, len);
		}
	}
	if (kiln_fb_end(&fb) == 0) {
		if (kiln_frame_peek(&b, KILN_FRAME_MAX, &h, &p) != 1)
			abort();
		if (kiln_msg_parse(&m2, h.type, p, h.len, err, sizeof err) != 0)
			abort();
		for (unsigned tag = 1; tag < KT_TAG_COUNT; tag++) {
			if (m->f[tag].count != m2.f[tag].count || m->f[tag].len != m2.f[tag].len)
				abort();
			if (m->f[tag].count && memcmp(m->p + m->f[tag].off, m2.p + m2.f[tag].off, m->f[tag].len))
				abort();
		}
	}
	buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = 1 + data[0] % 97;
	data++;
	size--;

	struct buf in = { 0 };
	size_t fed = 0;
	int frames = 0;
	while (fed < size) {
		size_t n = size - fed < step ? size - fed : step;
		if (buf_append(&in, data + fed, n, KILN_HDR_SIZE + KILN_FRAME_MAX + 4096) < 0)
			break;
		fed += n;
		for (;;) {
			struct kiln_hdr h;
			const uint8_t *p;
			int rc = kiln_frame_peek(&in, KILN_FRAME_MAX, &h, &p);
			if (rc <= 0) {
				if (rc < 0)
					fed = size;	/* the stream is dead */
				break;
			}
			struct kiln_msg m;
			char err[256];
			if (kiln_msg_parse(&m, h.type, p, h.len, err, sizeof err) == 0) {
				exercise(&m);
				reencode(&m);
			} else if (!memchr(err, 0, sizeof err)) {
				abort();
			}
			buf_consume(&in, KILN_HDR_SIZE + h.len);
			frames++;
		}
	}
	buf_free(&in);

	/* The whole input as one payload of a few types. */
	static const uint8_t types[] = { KILN_EXEC, KILN_STAT_REPLY, KILN_ERROR, KILN_EXIT, KILN_INFO_REPLY };
	struct kiln_msg m;
	char err[256];
	uint32_t len = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	if (kiln_msg_parse(&m, types[size ? data[0] % sizeof types : 0], data, len, err, sizeof err) == 0)
		exercise(&m);

	/* And as a kernel command line. */
	char *line = malloc(size + 1);
	if (line) {
		struct boot_cfg cfg;
		memcpy(line, data, size);
		line[size] = 0;
		cmdline_parse(line, &cfg, err, sizeof err);
		if (!memchr(cfg.root, 0, sizeof cfg.root) || !memchr(cfg.hostname, 0, sizeof cfg.hostname))
			abort();
		free(line);
	}
	return 0;
}
