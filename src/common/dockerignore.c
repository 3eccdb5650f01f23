/*
 * dockerignore: see dockerignore.h. Docker compiles each pattern into a
 * regular expression; here a pattern is matched one path component at a
 * time (`*`, `?` and classes never cross a `/`), and `**` components
 * like a `*` over components, with the one-backtrack wildcard algorithm
 * at both levels: the cost is bounded by pattern length times path
 * length, whatever a hostile .dockerignore holds.
 */
#include "common/dockerignore.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- one component -------------------------------------------------------------------- */

/* A `[...]` class at p[*i] against c; *i moves past it. <0: unclosed. */
static int class_match(const char *p, size_t pl, size_t *i, char c)
{
	size_t j = *i + 1;
	bool neg = j < pl && (p[j] == '^' || p[j] == '!'), hit = false;
	if (neg)
		j++;
	bool first = true;
	while (j < pl && (p[j] != ']' || first)) {
		first = false;
		char lo = p[j];
		if (lo == '\\' && j + 1 < pl)
			lo = p[++j];
		char hi = lo;
		if (j + 2 < pl && p[j + 1] == '-' && p[j + 2] != ']') {
			j += 2;
			hi = p[j];
			if (hi == '\\' && j + 1 < pl)
				hi = p[++j];
		}
		if ((unsigned char)c >= (unsigned char)lo && (unsigned char)c <= (unsigned char)hi)
			hit = true;
		j++;
	}
	if (j >= pl)
		return -EINVAL;
	*i = j + 1;
	return hit != neg;
}

/* p (pl bytes, no `/`) against s (sl bytes, no `/`). */
static int comp_match(const char *p, size_t pl, const char *s, size_t sl)
{
	size_t pi = 0, si = 0, star_p = 0, star_s = 0;
	bool star = false;
	while (si < sl) {
		if (pi < pl && p[pi] == '*') {
			while (pi < pl && p[pi] == '*')
				pi++;
			star = true;
			star_p = pi;
			star_s = si;
			continue;
		}
		if (pi < pl) {
			size_t next = pi + 1;
			int ok;
			if (p[pi] == '?') {
				ok = 1;
			} else if (p[pi] == '[') {
				next = pi;
				if ((ok = class_match(p, pl, &next, s[si])) < 0)
					return ok;
			} else if (p[pi] == '\\') {
				if (pi + 1 >= pl)
					return -EINVAL;
				ok = p[pi + 1] == s[si];
				next = pi + 2;
			} else {
				ok = p[pi] == s[si];
			}
			if (ok) {
				pi = next;
				si++;
				continue;
			}
		}
		if (!star)
			return 0;
		pi = star_p;
		si = ++star_s;
	}
	while (pi < pl && p[pi] == '*')
		pi++;
	return pi == pl;
}

/* ---- components ------------------------------------------------------------------------- */

#define MAX_COMPS 256

struct comp {
	const char *s;
	size_t n;
};

static int split(const char *s, struct comp *c, int cap)
{
	int n = 0;
	while (*s) {
		size_t len = strcspn(s, "/");
		if (len) {
			if (n == cap)
				return -ENAMETOOLONG;
			c[n].s = s;
			c[n++].n = len;
		}
		s += len;
		while (*s == '/')
			s++;
	}
	return n;
}

static bool is_dstar(const struct comp *c)
{
	return c->n == 2 && c->s[0] == '*' && c->s[1] == '*';
}

/* Pattern components against path components; `**` any run of them. */
static int comps_match(const struct comp *p, int np, const struct comp *s, int ns)
{
	int pi = 0, si = 0, star_p = 0, star_s = 0;
	bool star = false;
	while (si < ns) {
		if (pi < np && is_dstar(&p[pi])) {
			while (pi < np && is_dstar(&p[pi]))
				pi++;
			star = true;
			star_p = pi;
			star_s = si;
			continue;
		}
		if (pi < np) {
			int ok = comp_match(p[pi].s, p[pi].n, s[si].s, s[si].n);
			if (ok < 0)
				return ok;
			if (ok) {
				pi++;
				si++;
				continue;
			}
		}
		if (!star)
			return 0;
		pi = star_p;
		si = ++star_s;
	}
	while (pi < np && is_dstar(&p[pi]))
		pi++;
	return pi == np;
}

int dign_match(const char *pat, const char *s, bool dstar)
{
	if (!dstar)
		return comp_match(pat, strlen(pat), s, strlen(s));
	struct comp p[MAX_COMPS], c[MAX_COMPS];
	int np = split(pat, p, MAX_COMPS), ns = split(s, c, MAX_COMPS);
	if (np < 0 || ns < 0)
		return np < 0 ? np : 0;
	/* A trailing `**` component after others (Docker's `dir/.*`) wants
	 * something below: the rest matched against a proper prefix. */
	if (np > 1 && is_dstar(&p[np - 1]) && !is_dstar(&p[np - 2])) {
		for (int k = ns - 1; k >= 1; k--) {
			int rc = comps_match(p, np - 1, c, k);
			if (rc)
				return rc;
		}
		return 0;
	}
	return comps_match(p, np, c, ns);
}

/* ---- the file ---------------------------------------------------------------------------- */

/* Go's filepath.Clean, then a leading '/' dropped. */
static int clean_pattern(const char *s, size_t len, char *out, size_t cap)
{
	size_t n = 0;
	bool abs = len && s[0] == '/';
	size_t i = 0;
	while (i < len) {
		while (i < len && s[i] == '/')
			i++;
		size_t j = i;
		while (j < len && s[j] != '/')
			j++;
		size_t cl = j - i;
		if (cl == 1 && s[i] == '.') {
			/* dropped */
		} else if (cl == 2 && s[i] == '.' && s[i + 1] == '.') {
			/* pops a name before it; at the start it stays (and matches nothing) */
			size_t k = n;
			while (k > 0 && out[k - 1] != '/')
				k--;
			bool popped = n > 0 && !(n - k == 2 && out[k] == '.' && out[k + 1] == '.');
			if (popped) {
				n = k ? k - 1 : 0;
			} else if (!abs) {
				if (n + 4 > cap)
					return -ENAMETOOLONG;
				if (n)
					out[n++] = '/';
				out[n++] = '.';
				out[n++] = '.';
			}
		} else if (cl) {
			if (n + cl + 2 > cap)
				return -ENAMETOOLONG;
			if (n)
				out[n++] = '/';
			memcpy(out + n, s + i, cl);
			n += cl;
		}
		i = j;
	}
	if (!n)
		out[n++] = '.';
	out[n] = 0;
	return 0;
}

/* Every class closed, no trailing '\'. */
static bool pattern_ok(const char *p)
{
	size_t pl = strlen(p);
	for (size_t i = 0; i < pl;) {
		if (p[i] == '\\') {
			if (i + 1 >= pl)
				return false;
			i += 2;
		} else if (p[i] == '[') {
			size_t j = i;
			if (class_match(p, pl, &j, 'a') < 0)
				return false;
			i = j;
		} else {
			i++;
		}
	}
	return true;
}

int dign_parse(const char *text, size_t len, struct dign *out)
{
	memset(out, 0, sizeof *out);
	if (len > DIGN_MAX_BYTES)
		return errf(EFBIG, ".dockerignore is over %d bytes", DIGN_MAX_BYTES);
	const char *s = text, *end = text + len;
	if (len >= 3 && !memcmp(s, "\xef\xbb\xbf", 3))
		s += 3;	/* a UTF-8 byte order mark */
	int line = 0;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *e = nl ? nl : end;
		line++;
		while (s < e && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\v' || *s == '\f'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\v' || e[-1] == '\f'))
			e--;
		const char *next = nl ? nl + 1 : end;
		if (s == e || *s == '#') {
			s = next;
			continue;
		}
		bool exc = *s == '!';
		if (exc) {
			s++;
			while (s < e && (*s == ' ' || *s == '\t'))
				s++;
			if (s == e) {
				dign_free(out);
				return errf(EINVAL, ".dockerignore line %d: '!' with no pattern", line);
			}
		}
		if (memchr(s, 0, (size_t)(e - s))) {
			dign_free(out);
			return errf(EINVAL, ".dockerignore line %d: a NUL byte", line);
		}
		char pat[4096];
		if (clean_pattern(s, (size_t)(e - s), pat, sizeof pat) < 0) {
			dign_free(out);
			return errf(ENAMETOOLONG, ".dockerignore line %d: pattern too long", line);
		}
		if (!pattern_ok(pat)) {
			dign_free(out);
			return errf(EINVAL, ".dockerignore line %d: '%.200s': a bad pattern (an unclosed '[' or a "
					    "trailing '\\')", line, pat);
		}
		if (out->n == DIGN_MAX_PATTERNS) {
			dign_free(out);
			return errf(EFBIG, ".dockerignore has more than %d patterns", DIGN_MAX_PATTERNS);
		}
		if (out->n % 64 == 0) {
			struct dign_pat *np = realloc(out->p, (size_t)(out->n + 64) * sizeof *np);
			if (!np) {
				dign_free(out);
				return errf(ENOMEM, "out of memory");
			}
			out->p = np;
		}
		if (!(out->p[out->n].pat = strdup(pat))) {
			dign_free(out);
			return errf(ENOMEM, "out of memory");
		}
		out->p[out->n++].exception = exc;
		out->exceptions |= exc;
		s = next;
	}
	return 0;
}

void dign_free(struct dign *d)
{
	for (int i = 0; i < d->n; i++)
		free(d->p[i].pat);
	free(d->p);
	memset(d, 0, sizeof *d);
}

/* The pattern against rel or one of its parent directories (Docker's
 * MatchesOrParentMatches). */
static bool match_or_parent(const char *pat, const char *rel)
{
	if (dign_match(pat, rel, true) > 0)
		return true;
	char buf[4096];
	size_t n = strlen(rel);
	if (n >= sizeof buf)
		return false;
	memcpy(buf, rel, n + 1);
	for (size_t i = 0; i < n; i++) {
		if (buf[i] != '/')
			continue;
		buf[i] = 0;
		bool m = dign_match(pat, buf, true) > 0;
		buf[i] = '/';
		if (m)
			return true;
	}
	return false;
}

bool dign_ignored(const struct dign *d, const char *rel)
{
	if (!d || !d->n || !strcmp(rel, "."))
		return false;
	bool ignored = false;
	for (int i = 0; i < d->n; i++) {
		/* An exception matters only once something is ignored; a
		 * pattern only while nothing is. */
		if (d->p[i].exception != ignored)
			continue;
		if (match_or_parent(d->p[i].pat, rel))
			ignored = !d->p[i].exception;
	}
	return ignored;
}
