#include "api/ws.h"
#include "common/err.h"

#include <errno.h>
#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

int ws_accept_key(const char *key, char out[29])
{
	/* A key is 16 random bytes in base64: 24 characters. */
	uint8_t raw[BASE64_DECODE_LENGTH(24)];
	size_t rawlen = sizeof raw;
	struct base64_decode_ctx d;
	if (!key || strlen(key) != 24)
		return -EINVAL;
	base64_decode_init(&d);
	if (!base64_decode_update(&d, &rawlen, raw, 24, key) || !base64_decode_final(&d) || rawlen != 16)
		return -EINVAL;
	struct sha1_ctx c;
	uint8_t digest[SHA1_DIGEST_SIZE];
	sha1_init(&c);
	sha1_update(&c, 24, (const uint8_t *)key);
	sha1_update(&c, sizeof guid - 1, (const uint8_t *)guid);
	sha1_digest(&c, sizeof digest, digest);
	base64_encode_raw(out, sizeof digest, digest);
	out[28] = 0;
	return 0;
}

int ws_reader_init(struct ws_reader *r)
{
	memset(r, 0, sizeof *r);
	r->buf = malloc(WS_FRAME_MAX + 14);
	r->out = malloc(WS_FRAME_MAX);
	if (!r->buf || !r->out) {
		ws_reader_free(r);
		return -ENOMEM;
	}
	return 0;
}

void ws_reader_free(struct ws_reader *r)
{
	free(r->buf);
	free(r->out);
	r->buf = r->out = NULL;
}

int ws_reader_feed(struct ws_reader *r, const void *p, size_t n)
{
	if (r->len + n > WS_FRAME_MAX + 14)
		return -EMSGSIZE;
	memcpy(r->buf + r->len, p, n);
	r->len += n;
	return 0;
}

int ws_next(struct ws_reader *r, int *op, const uint8_t **data, size_t *len)
{
	for (;;) {
		if (r->len < 2)
			return 0;
		uint8_t b0 = r->buf[0], b1 = r->buf[1];
		bool fin = b0 & 0x80;
		int opcode = b0 & 0x0f;
		if ((b0 & 0x70) || !(b1 & 0x80))
			return -EPROTO;	/* reserved bits, or an unmasked client frame */
		uint64_t plen = b1 & 0x7f;
		size_t hdr = 2;
		if (plen == 126) {
			if (r->len < 4)
				return 0;
			plen = (uint64_t)r->buf[2] << 8 | r->buf[3];
			hdr = 4;
		} else if (plen == 127) {
			if (r->len < 10)
				return 0;
			plen = 0;
			for (int i = 0; i < 8; i++)
				plen = plen << 8 | r->buf[2 + i];
			hdr = 10;
		}
		if (plen > WS_FRAME_MAX)
			return -EMSGSIZE;
		if (opcode >= 0x8 && (plen > 125 || !fin))
			return -EPROTO;
		size_t frame = hdr + 4 + plen;
		if (r->len < frame)
			return 0;
		const uint8_t *mask = r->buf + hdr;
		uint8_t *pl = r->buf + hdr + 4;
		for (uint64_t i = 0; i < plen; i++)
			pl[i] ^= mask[i & 3];

		int kind = -1;
		if (opcode == WS_TEXT || (opcode == WS_CONT && r->in_text)) {
			if ((opcode == WS_TEXT && r->in_text) || r->text_len + plen > WS_TEXT_MAX)
				return opcode == WS_TEXT && r->in_text ? -EPROTO : -EMSGSIZE;
			memcpy(r->text + r->text_len, pl, plen);
			r->text_len += plen;
			r->in_text = !fin;
			if (fin)
				kind = WS_TEXT;
		} else if (opcode == WS_BINARY || opcode == WS_CONT || opcode == WS_CLOSE ||
			   opcode == WS_PING || opcode == WS_PONG) {
			kind = opcode == WS_CONT ? WS_BINARY : opcode;
			memcpy(r->out, pl, plen);
		} else {
			return -EPROTO;
		}
		memmove(r->buf, r->buf + frame, r->len - frame);
		r->len -= frame;
		if (kind < 0)
			continue;	/* a text message continues */
		*op = kind;
		if (kind == WS_TEXT) {
			*data = r->text;
			*len = r->text_len;
			r->text_len = 0;
		} else {
			*data = r->out;
			*len = plen;
		}
		return 1;
	}
}

static int send_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w > 0) {
			c += w, n -= w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			if (poll(&p, 1, 30000) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		return -(errno ? errno : EPIPE);
	}
	return 0;
}

int ws_send(int fd, int op, const void *data, size_t len)
{
	uint8_t hdr[10];
	size_t h = 2;
	hdr[0] = 0x80 | (op & 0x0f);
	if (len < 126) {
		hdr[1] = (uint8_t)len;
	} else if (len <= 0xffff) {
		hdr[1] = 126;
		hdr[2] = (uint8_t)(len >> 8);
		hdr[3] = (uint8_t)len;
		h = 4;
	} else {
		hdr[1] = 127;
		for (int i = 0; i < 8; i++)
			hdr[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
		h = 10;
	}
	int rc = send_all(fd, hdr, h);
	return rc ?: send_all(fd, data, len);
}

int ws_close(int fd, unsigned code, const char *reason)
{
	uint8_t p[125];
	size_t n = strlen(reason);
	if (n > sizeof p - 2)
		n = sizeof p - 2;
	p[0] = (uint8_t)(code >> 8);
	p[1] = (uint8_t)code;
	memcpy(p + 2, reason, n);
	return ws_send(fd, WS_CLOSE, p, n + 2);
}
