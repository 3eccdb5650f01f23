/*
 * ws: the WebSocket protocol (RFC 6455) over an upgraded HTTP connection,
 * server side: the handshake's accept key, reading masked client frames
 * (bounded: 1 MiB a frame, control frames 125 bytes, a text message 64
 * KiB) and writing unmasked frames.
 */
#ifndef KILN_API_WS_H
#define KILN_API_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WS_FRAME_MAX   (1u << 20)
#define WS_TEXT_MAX    (64u << 10)

enum {
	WS_CONT = 0x0, WS_TEXT = 0x1, WS_BINARY = 0x2,
	WS_CLOSE = 0x8, WS_PING = 0x9, WS_PONG = 0xa,
};

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key; -EINVAL if the key is not
 * 16 bytes in base64. */
int ws_accept_key(const char *key, char out[29]);

struct ws_reader {
	uint8_t *buf;			/* received bytes: WS_FRAME_MAX + 14 */
	size_t len;
	uint8_t *out;			/* the payload handed out: WS_FRAME_MAX */
	uint8_t text[WS_TEXT_MAX];	/* a text message being reassembled */
	size_t text_len;
	bool in_text;
};

int ws_reader_init(struct ws_reader *r);
void ws_reader_free(struct ws_reader *r);
/* Add bytes read from the socket. -EMSGSIZE if they do not fit. */
int ws_reader_feed(struct ws_reader *r, const void *p, size_t n);
/* The next complete message piece: 1 with *op (WS_BINARY for binary data,
 * also continuations; WS_TEXT for a whole text message; control opcodes)
 * and the payload (valid until the next call), 0 if more bytes are
 * needed, or -EPROTO / -EMSGSIZE (close the connection: 1002 / 1009). */
int ws_next(struct ws_reader *r, int *op, const uint8_t **data, size_t *len);

/* Send one frame (blocking). */
int ws_send(int fd, int op, const void *data, size_t len);
/* Send a close frame with a status code and reason. */
int ws_close(int fd, unsigned code, const char *reason);

#endif
