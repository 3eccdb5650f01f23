#include "api/keys.h"
#include "common/err.h"
#include "common/randid.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <string.h>

int key_generate(char key[KEY_LEN + 1])
{
	return randid_make(key, KEY_LEN + 1, KEY_PREFIX, KEY_LEN - (sizeof KEY_PREFIX - 1));
}

bool key_well_formed(const char *s, size_t len)
{
	return randid_is(s, len, KEY_PREFIX, KEY_LEN - (sizeof KEY_PREFIX - 1));
}

void key_hash(const char *key, size_t len, char hash[KEY_HASH_LEN])
{
	struct sha256_ctx ctx;
	unsigned char d[SHA256_DIGEST_SIZE];
	sha256_init(&ctx);
	sha256_update(&ctx, len, (const unsigned char *)key);
	sha256_digest(&ctx, sizeof d, d);
	for (size_t i = 0; i < sizeof d; i++)
		snprintf(hash + 2 * i, 3, "%02x", d[i]);
}

void key_shown(const char *key, char out[KEY_SHOWN_LEN + 1])
{
	snprintf(out, KEY_SHOWN_LEN + 1, "%s", key);
}

int secret_generate(const char *prefix, char out[SECRET_MAX])
{
	return randid_make(out, SECRET_MAX, prefix, 32);
}

bool secret_well_formed(const char *s, size_t len, const char *prefix)
{
	return randid_is(s, len, prefix, 32);
}
