/*
 * db_url: a store URL's pool size and password (see db_url.h). URLs are
 * libpq's: postgresql://[user[:password]@][host][:port][/dbname][?k=v&...].
 */
#include "store/db_url.h"
#include "common/err.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The password's [start, end) in url, or false when it has none. The
 * authority ends at the first '/' or '?' after "://"; its last '@' ends
 * the user information (an '@' in a password must be written %40, but a
 * literal one still stays hidden). */
static bool userinfo_password(const char *url, size_t *start, size_t *end)
{
	const char *auth = strstr(url, "://");
	if (!auth)
		return false;
	auth += 3;
	size_t alen = strcspn(auth, "/?");
	const char *at = NULL;
	for (const char *p = auth; p < auth + alen; p++)
		if (*p == '@')
			at = p;
	if (!at)
		return false;
	const char *colon = memchr(auth, ':', (size_t)(at - auth));
	if (!colon)
		return false;
	*start = (size_t)(colon + 1 - url);
	*end = (size_t)(at - url);
	return true;
}

/* The value of "password=" in the query: [start, end). */
static bool query_password(const char *url, size_t *start, size_t *end)
{
	const char *q = strchr(url, '?');
	while (q) {
		q++;
		if (strncmp(q, "password=", 9) == 0) {
			*start = (size_t)(q + 9 - url);
			*end = *start + strcspn(q + 9, "&");
			return true;
		}
		q = strchr(q, '&');
	}
	return false;
}

static void append(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
	if (*len + 1 >= cap)
		return;
	if (n > cap - 1 - *len)
		n = cap - 1 - *len;
	memcpy(out + *len, s, n);
	*len += n;
	out[*len] = 0;
}

void db_url_redact(const char *url, char *out, size_t cap)
{
	if (!cap)
		return;
	out[0] = 0;
	size_t len = 0, from = 0, s, e;
	/* At most two passwords, in order: user information, then query. */
	if (userinfo_password(url, &s, &e)) {
		append(out, cap, &len, url, s);
		append(out, cap, &len, "***", 3);
		from = e;
	}
	if (query_password(url + from, &s, &e)) {
		append(out, cap, &len, url + from, s);
		append(out, cap, &len, "***", 3);
		from += e;
	}
	append(out, cap, &len, url + from, strlen(url + from));
}

/* Every copy of pw in msg becomes "***"; the result is cut to cap. */
static void scrub_one(char *msg, size_t cap, const char *pw, size_t n)
{
	if (n == 0 || !memmem(msg, strlen(msg), pw, n))
		return;
	char out[1024];
	size_t len = 0;
	if (cap > sizeof out)
		cap = sizeof out;
	out[0] = 0;
	for (const char *p = msg; *p;) {
		if (strncmp(p, pw, n) == 0) {
			append(out, cap, &len, "***", 3);
			p += n;
		} else {
			append(out, cap, &len, p++, 1);
		}
	}
	memcpy(msg, out, len + 1);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The password as written and percent-decoded: libpq may quote either. */
static void scrub_range(char *msg, size_t cap, const char *pw, size_t n)
{
	char dec[DB_URL_MAX];
	size_t d = 0;
	if (n >= sizeof dec)
		n = sizeof dec - 1;
	for (size_t i = 0; i < n; i++) {
		if (pw[i] == '%' && i + 2 < n && hexval(pw[i + 1]) >= 0 && hexval(pw[i + 2]) >= 0) {
			dec[d++] = (char)(hexval(pw[i + 1]) * 16 + hexval(pw[i + 2]));
			i += 2;
		} else {
			dec[d++] = pw[i];
		}
	}
	scrub_one(msg, cap, pw, n);
	scrub_one(msg, cap, dec, d);
}

void db_url_scrub(const char *url, char *msg, size_t cap)
{
	size_t s, e;
	if (strlen(url) >= DB_URL_MAX)
		return;
	if (userinfo_password(url, &s, &e))
		scrub_range(msg, cap, url + s, e - s);
	if (query_password(url, &s, &e))
		scrub_range(msg, cap, url + s, e - s);
}

int db_url_take_pool(const char *url, char **conninfo, int *pool)
{
	size_t n = strlen(url);
	if (n >= DB_URL_MAX)
		return errf(EINVAL, "store URL longer than %d bytes", DB_URL_MAX);
	char *out = malloc(n + 1);
	if (!out)
		return errf(ENOMEM, "out of memory");
	*pool = DB_POOL_DEFAULT;
	const char *q = strchr(url, '?');
	size_t len = q ? (size_t)(q - url) : n;
	memcpy(out, url, len);
	char sep = '?';
	while (q) {
		const char *k = q + 1;
		const char *next = strchr(k, '&');
		size_t klen = next ? (size_t)(next - k) : strlen(k);
		if (klen >= 5 && strncmp(k, "pool=", 5) == 0) {
			char num[8] = "";
			char *end;
			long v = -1;
			if (klen - 5 < sizeof num) {
				memcpy(num, k + 5, klen - 5);
				num[klen - 5] = 0;
				v = strtol(num, &end, 10);
				if (*end || end == num)
					v = -1;
			}
			if (v < 1 || v > DB_POOL_MAX) {
				free(out);
				return errf(EINVAL, "store URL: pool=%.*s: want a number of connections, 1 to %d",
					    (int)(klen - 5 > 16 ? 16 : klen - 5), k + 5, DB_POOL_MAX);
			}
			*pool = (int)v;
		} else if (klen > 0) {
			out[len++] = sep;
			memcpy(out + len, k, klen);
			len += klen;
			sep = '&';
		}
		q = next;
	}
	out[len] = 0;
	*conninfo = out;
	return 0;
}
