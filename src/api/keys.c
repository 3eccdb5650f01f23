#include "api/keys.h"
#include "common/err.h"

#include <nettle/sha2.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static const char alphabet[] = "abcdefghijkmnpqrstuvwxyz23456789";

int key_generate(char key[KEY_LEN + 1])
{
	unsigned char rnd[KEY_LEN - sizeof KEY_PREFIX + 1];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return errf_sys("getrandom");
	memcpy(key, KEY_PREFIX, sizeof KEY_PREFIX - 1);
	for (size_t i = 0; i < sizeof rnd; i++)
		key[sizeof KEY_PREFIX - 1 + i] = alphabet[rnd[i] & 31];
	key[KEY_LEN] = 0;
	return 0;
}

bool key_well_formed(const char *s, size_t len)
{
	if (len != KEY_LEN || memcmp(s, KEY_PREFIX, sizeof KEY_PREFIX - 1) != 0)
		return false;
	for (size_t i = sizeof KEY_PREFIX - 1; i < len; i++)
		if (!s[i] || !strchr(alphabet, s[i]))
			return false;
	return true;
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
