/*
 * preview: signed preview URLs, a time-limited way into one exposed port
 * of one sandbox without an API key (POST .../ports/{port}/preview). The
 * token is the expiry and an HMAC-SHA256 of (sandbox, port, expiry) under
 * a key only this kilnd holds (DATA/preview.key, made at first start):
 * nothing is stored per link, and a link cannot be stretched to another
 * port, sandbox or time. Revoking every link at once: delete the key file
 * and restart.
 */
#ifndef KILN_PROXY_PREVIEW_H
#define KILN_PROXY_PREVIEW_H

#include <stdbool.h>
#include <stdint.h>

#define PREVIEW_KEY_BYTES 32
#define PREVIEW_TOKEN_MAX 64
#define PREVIEW_PARAM "kiln_preview"	/* the query parameter and cookie that carry it */

/* Read DATA/preview.key, or make it (0600) the first time. */
int preview_key_load(const char *data_dir, uint8_t key[PREVIEW_KEY_BYTES]);
/* Read the key from path, made by the operator (kilnd --preview-key: the
 * API replicas of a cluster share one, so a link one signs works on all):
 * a plain file of PREVIEW_KEY_BYTES bytes that only its owner may read. */
int preview_key_read(const char *path, uint8_t key[PREVIEW_KEY_BYTES]);
/* "EXPIRY.SIG" (EXPIRY in unix seconds, SIG base64url). */
void preview_token(const uint8_t key[PREVIEW_KEY_BYTES], const char *sandbox, int port, int64_t expiry,
		   char out[PREVIEW_TOKEN_MAX]);
/* Is token one of ours for this sandbox and port, and not expired at now
 * (unix seconds)? *expiry gets its expiry when it is. */
bool preview_valid(const uint8_t key[PREVIEW_KEY_BYTES], const char *sandbox, int port, const char *token,
		   int64_t now, int64_t *expiry);

#endif
