/*
 * Internals shared by the client library's files (not part of the API).
 */
#ifndef KILN_CLIENT_INT_H
#define KILN_CLIENT_INT_H

#include "client/kiln_client.h"
#include "common/buf.h"
#include "common/proto.h"

#define CL_IN_LIMIT	(KILN_HDR_SIZE + KILN_FRAME_MAX + 65536)
#define CL_OUT_LIMIT	(4 * (size_t)KILN_FRAME_MAX)

struct kiln_client {
	int fd;
	int timeout_ms;
	struct buf in, out;
	size_t consume;		/* the frame last returned; dropped on the next receive */
	bool broken;		/* the stream cannot be trusted any more */
	char *fs_user;		/* file requests act as this user; NULL: the agent's */
	char err[1024];
};

/* Set the error message and return -err. */
int cl_fail(struct kiln_client *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* As cl_fail, and the connection is unusable from now on. */
int cl_break(struct kiln_client *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Fails if the client is not connected or broken. */
int cl_usable(struct kiln_client *c);

void cl_begin(struct kiln_client *c, struct kiln_fb *fb, uint8_t type);
/* Finish the frame and queue it. */
int cl_queue(struct kiln_client *c, struct kiln_fb *fb);
/* Finish, queue and send it (blocking). */
int cl_send(struct kiln_client *c, struct kiln_fb *fb);
/* The next frame: 1 with the frame (valid until the next receive), 0 if
 * none is buffered and block is false, or -errno. */
int cl_recv(struct kiln_client *c, bool block, struct kiln_hdr *h, const uint8_t **p);
/* Parse a received frame's fields. An ERROR frame gives the agent's
 * -errno with its message set; a malformed one breaks the connection. */
int cl_parse(struct kiln_client *c, const struct kiln_hdr *h, const uint8_t *p,
	     struct kiln_msg *m);
/* Receive one frame that must be of type `want` (or ERROR). */
int cl_expect(struct kiln_client *c, uint8_t want, struct kiln_msg *m);
/* Copy a str field with a NUL, truncated to fit; "" when absent. */
void cl_copy_str(const struct kiln_msg *m, unsigned tag, char *out, size_t outlen);
/* The agent sent something the protocol does not allow here. */
int cl_unexpected(struct kiln_client *c, uint8_t type, const char *during);

#endif
