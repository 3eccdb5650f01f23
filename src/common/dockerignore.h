/*
 * dockerignore: a build context's .dockerignore, with Docker's rules
 * (moby/patternmatcher): one pattern a line, `#` lines and blank lines
 * skipped, each pattern trimmed and cleaned (`.` and repeated slashes
 * dropped, a leading and a trailing `/` removed); `*` is any run of
 * characters but `/`, `?` one of them, `[...]` a class (`^` negates),
 * `\` quotes the next character, `**` (a whole path component) any
 * number of directories, also none (elsewhere, as in `a**b`, it is a `*`:
 * Docker's regular expression would let that one cross a `/`). A path is ignored when the last pattern that matches it or one
 * of its parent directories is not a `!` exception: patterns are read in
 * order, an exception re-including what an earlier pattern excluded.
 * Paths are relative to the context ("a/b.txt"), cleaned by the caller.
 */
#ifndef KILN_COMMON_DOCKERIGNORE_H
#define KILN_COMMON_DOCKERIGNORE_H

#include <stdbool.h>
#include <stddef.h>

#define DIGN_MAX_BYTES    (1 << 20)	/* a .dockerignore's size */
#define DIGN_MAX_PATTERNS 4096

struct dign_pat {
	char *pat;
	bool exception;			/* `!PATTERN` */
};

struct dign {
	struct dign_pat *p;
	int n;
	bool exceptions;		/* any `!` pattern (an ignored directory may hold kept files) */
};

/* Parse the text of a .dockerignore (len bytes); -EINVAL naming the line
 * of a bad pattern (an unclosed `[`), -EFBIG over the limits. */
int dign_parse(const char *text, size_t len, struct dign *out);
void dign_free(struct dign *d);

/* Is rel (cleaned, relative to the context) ignored? "." never is. */
bool dign_ignored(const struct dign *d, const char *rel);

/* One pattern against a whole string: the rules above, `**` only where
 * dstar (a .dockerignore pattern); without it, fnmatch(3) of one path
 * component as COPY's wildcards take it. 1: matches, 0: not, <0: a bad
 * pattern. */
int dign_match(const char *pat, const char *s, bool dstar);

#endif
