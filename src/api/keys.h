/*
 * keys: API keys. A key is "kiln_" followed by 32 random base32 characters
 * (160 bits). Only its SHA-256 is stored: keys are long random strings, not
 * passwords, so a fast hash is enough (nothing to brute-force), and the
 * lookup by hash means the server never compares secrets byte by byte.
 */
#ifndef KILN_API_KEYS_H
#define KILN_API_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#define KEY_PREFIX     "kiln_"
#define KEY_LEN        37	/* "kiln_" + 32 */
#define KEY_HASH_LEN   65	/* hex SHA-256 + NUL */
#define KEY_SHOWN_LEN  13	/* "kiln_" + 8: printed to tell keys apart */

/* A fresh key. */
int key_generate(char key[KEY_LEN + 1]);
/* Whether s has the shape of a key (length, prefix, alphabet). */
bool key_well_formed(const char *s, size_t len);
/* Hex SHA-256 of the key. */
void key_hash(const char *key, size_t len, char hash[KEY_HASH_LEN]);
/* The shown prefix of a key. */
void key_shown(const char *key, char out[KEY_SHOWN_LEN + 1]);

/* Other secrets of the same make (a prefix, then 32 random base32
 * characters): join tokens and host credentials (api/cluster.h). */
#define SECRET_MAX 48
int secret_generate(const char *prefix, char out[SECRET_MAX]);
bool secret_well_formed(const char *s, size_t len, const char *prefix);

#endif
