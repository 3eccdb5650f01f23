/*
 * randid: random names (randid.h).
 */
#include "common/randid.h"
#include "common/err.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

int randid_make(char *out, size_t cap, const char *prefix, size_t n)
{
	static const char alphabet[] = RANDID_ALPHABET;
	unsigned char rnd[64];
	size_t plen = strlen(prefix);
	if (n > sizeof rnd || plen + n + 1 > cap)
		return errf(EINVAL, "a name of %zu + %zu characters does not fit in %zu", plen, n, cap);
	if (getrandom(rnd, n, 0) != (ssize_t)n)
		return errf_sys("getrandom");
	memcpy(out, prefix, plen);
	for (size_t i = 0; i < n; i++)
		out[plen + i] = alphabet[rnd[i] & 31];
	out[plen + n] = 0;
	return 0;
}

bool randid_is(const char *s, size_t len, const char *prefix, size_t n)
{
	size_t plen = strlen(prefix);
	if (!s || len != plen + n || memcmp(s, prefix, plen) != 0)
		return false;
	for (size_t i = plen; i < len; i++)
		if (!s[i] || !strchr(RANDID_ALPHABET, s[i]))
			return false;
	return true;
}
