/*
 * randid: random names kiln hands out (sandbox and snapshot ids, API keys,
 * join tokens, host credentials): a prefix and random characters of a
 * lower-case base32 alphabet without look-alikes (no 0/o, 1/l), 5 bits of
 * the kernel's randomness each.
 */
#ifndef KILN_COMMON_RANDID_H
#define KILN_COMMON_RANDID_H

#include <stdbool.h>
#include <stddef.h>

#define RANDID_ALPHABET "abcdefghijkmnpqrstuvwxyz23456789"

/* prefix and n random characters into out (cap bytes, NUL included):
 * 0, or -errno (-EINVAL when they do not fit). */
int randid_make(char *out, size_t cap, const char *prefix, size_t n);
/* Whether s (len bytes) is prefix and n characters of the alphabet. */
bool randid_is(const char *s, size_t len, const char *prefix, size_t n);

#endif
