/*
 * dockerfile: the parser (dockerfile.h has the supported subset). The text
 * is read one physical line at a time into a logical instruction
 * (continuations joined, comment and blank lines inside it dropped, as
 * Docker does); each instruction is then split into its keyword, flags and
 * arguments by one lexer that knows quotes, escapes and variables.
 */
#include "host/dockerfile.h"
#include "common/err.h"
#include "common/strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
	[DF_FROM] = "FROM", [DF_RUN] = "RUN", [DF_COPY] = "COPY", [DF_ADD] = "ADD",
	[DF_ENV] = "ENV", [DF_ARG] = "ARG", [DF_WORKDIR] = "WORKDIR", [DF_USER] = "USER",
	[DF_EXPOSE] = "EXPOSE", [DF_CMD] = "CMD", [DF_ENTRYPOINT] = "ENTRYPOINT", [DF_LABEL] = "LABEL",
};
#define NKINDS ((int)(sizeof kind_names / sizeof kind_names[0]))
#define SUPPORTED "FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, EXPOSE, CMD, ENTRYPOINT, LABEL"
#define MAX_VARS 256
#define MAX_NEST 8		/* ${A:-${B:-${C}}} */

const char *df_kind_name(enum df_kind k)
{
	return (int)k >= 0 && (int)k < NKINDS ? kind_names[k] : "?";
}

struct var {
	char *name, *value;
};

struct vars {
	int n;
	struct var v[MAX_VARS];
};

struct words {
	int n, cap;
	char **v;
};

struct parser {
	int line;			/* of the instruction being parsed */
	bool from_seen;
	const char *const *build_args;
	struct vars global;		/* ARGs before FROM */
	struct vars args, env;		/* after FROM */
	struct dockerfile *df;
	size_t expanded;		/* bytes made by the lexer for this instruction */
};

/* ---- small helpers ---------------------------------------------------------------------- */

static int perr(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct parser *p, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return errf(EINVAL, "line %d: %s", p->line, msg);
}

static void words_free(struct words *w)
{
	for (int i = 0; i < w->n; i++)
		free(w->v[i]);
	free(w->v);
	memset(w, 0, sizeof *w);
}

/* Takes s (may be NULL: an ARG without a value). */
static int words_push(struct parser *p, struct words *w, char *s)
{
	if (w->n >= DF_MAX_WORDS) {
		free(s);
		return perr(p, "more than %d arguments", DF_MAX_WORDS);
	}
	if (w->n == w->cap) {
		int cap = w->cap ? w->cap * 2 : 8;
		char **v = realloc(w->v, (size_t)cap * sizeof *v);
		if (!v) {
			free(s);
			return errf(ENOMEM, "out of memory");
		}
		w->v = v;
		w->cap = cap;
	}
	w->v[w->n++] = s;
	return 0;
}

static void vars_free(struct vars *vs)
{
	for (int i = 0; i < vs->n; i++) {
		free(vs->v[i].name);
		free(vs->v[i].value);
	}
	vs->n = 0;
}

static const char *vars_get(const struct vars *vs, const char *name, size_t len)
{
	for (int i = vs->n - 1; i >= 0; i--)
		if (strlen(vs->v[i].name) == len && !memcmp(vs->v[i].name, name, len))
			return vs->v[i].value;
	return NULL;
}

static int vars_set(struct parser *p, struct vars *vs, const char *name, const char *value)
{
	char *v = strdup(value ? value : "");
	if (!v)
		return errf(ENOMEM, "out of memory");
	for (int i = 0; i < vs->n; i++)
		if (!strcmp(vs->v[i].name, name)) {
			free(vs->v[i].value);
			vs->v[i].value = v;
			return 0;
		}
	if (vs->n >= MAX_VARS) {
		free(v);
		return perr(p, "more than %d variables", MAX_VARS);
	}
	if (!(vs->v[vs->n].name = strdup(name))) {
		free(v);
		return errf(ENOMEM, "out of memory");
	}
	vs->v[vs->n++].value = v;
	return 0;
}

/* A variable's value for substitution: ENV first, then ARG; before FROM
 * only the global ARGs exist. NULL: unset. */
static const char *lookup(const struct parser *p, const char *name, size_t len)
{
	if (!p->from_seen)
		return vars_get(&p->global, name, len);
	const char *v = vars_get(&p->env, name, len);
	return v ? v : vars_get(&p->args, name, len);
}

static bool is_name_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_name_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

static bool valid_name(const char *s)
{
	if (!is_name_start(*s))
		return false;
	while (*++s)
		if (!is_name_char(*s))
			return false;
	return true;
}

/* ---- the lexer: quotes, escapes, variables ------------------------------------------------ */

static int expand_into(struct parser *p, struct strbuf *out, const char *s, size_t len, int depth);

static int put(struct parser *p, struct strbuf *out, const char *s, size_t n)
{
	p->expanded += n;
	if (p->expanded > DF_MAX_LINE)
		return perr(p, "the instruction is over %d bytes once variables are replaced", DF_MAX_LINE);
	strbuf_append(out, s, n);
	return strbuf_failed(out) ? errf(ENOMEM, "out of memory") : 0;
}

/* s points at '$'; *used: how many bytes the reference took. */
static int expand_var(struct parser *p, struct strbuf *out, const char *s, size_t len, size_t *used,
		      int depth)
{
	*used = len;	/* on an error, the rest */
	if (len >= 2 && is_name_start(s[1])) {
		size_t n = 1;
		while (n < len && is_name_char(s[n]))
			n++;
		const char *v = lookup(p, s + 1, n - 1);
		*used = n;
		return v ? put(p, out, v, strlen(v)) : 0;
	}
	if (len < 2 || s[1] != '{') {
		*used = 1;
		return put(p, out, "$", 1);	/* a lone '$' is itself */
	}
	/* ${NAME}, ${NAME:-word}, ${NAME:+word}; the word may hold braces
	 * of its own references. */
	size_t i = 2, level = 1;
	while (i < len && level) {
		if (s[i] == '\\' && i + 1 < len)
			i++;
		else if (s[i] == '{')
			level++;
		else if (s[i] == '}')
			level--;
		i++;
	}
	if (level)
		return perr(p, "unterminated '${' in '%.40s'", s);
	*used = i;
	const char *body = s + 2;
	size_t blen = i - 3, n = 0;
	while (n < blen && is_name_char(body[n]))
		n++;
	if (n == 0 || !is_name_start(body[0]))
		return perr(p, "bad substitution '%.*s'", (int)(i < 60 ? i : 60), s);
	const char *v = lookup(p, body, n);
	if (n == blen)
		return v ? put(p, out, v, strlen(v)) : 0;
	if (blen - n < 2 || body[n] != ':' || (body[n + 1] != '-' && body[n + 1] != '+'))
		return perr(p, "bad substitution '%.*s' (supported: ${NAME}, ${NAME:-word}, ${NAME:+word})",
			    (int)(i < 60 ? i : 60), s);
	if (depth >= MAX_NEST)
		return perr(p, "substitutions nested more than %d deep", MAX_NEST);
	const char *word = body + n + 2;
	size_t wlen = blen - n - 2;
	bool set = v && *v;
	if (body[n + 1] == '-')
		return set ? put(p, out, v, strlen(v)) : expand_into(p, out, word, wlen, depth + 1);
	return set ? expand_into(p, out, word, wlen, depth + 1) : 0;
}

/* The word text of a ${NAME:-word}: variables replaced, escapes kept as
 * the surrounding lexer will see them. */
static int expand_into(struct parser *p, struct strbuf *out, const char *s, size_t len, int depth)
{
	for (size_t i = 0; i < len;) {
		if (s[i] == '\\' && i + 1 < len) {
			int rc = put(p, out, s + i + 1, 1);
			if (rc < 0)
				return rc;
			i += 2;
		} else if (s[i] == '$') {
			size_t used;
			int rc = expand_var(p, out, s + i, len - i, &used, depth);
			if (rc < 0)
				return rc;
			i += used;
		} else {
			int rc = put(p, out, s + i, 1);
			if (rc < 0)
				return rc;
			i++;
		}
	}
	return 0;
}

/* Split s into words (split) or make it one word (!split, blanks kept),
 * removing quotes and escapes and, with expand, replacing variables. */
static int lex(struct parser *p, const char *s, bool expand, bool split, struct words *w)
{
	struct strbuf cur;
	strbuf_init(&cur);
	bool have = false;	/* a word is open (even an empty "" one) */
	char quote = 0;
	int rc = 0;
	for (size_t i = 0, len = strlen(s); i < len && rc == 0;) {
		char c = s[i];
		if (!quote && split && (c == ' ' || c == '\t')) {
			if (have) {
				strbuf_putc(&cur, 0);
				if (strbuf_failed(&cur))
					rc = errf(ENOMEM, "out of memory");
				else
					rc = words_push(p, w, cur.data);
				strbuf_init(&cur);
				have = false;
			}
			i++;
			continue;
		}
		have = true;
		if (quote != '\'' && c == '\\' && i + 1 < len) {
			char n = s[i + 1];
			/* In double quotes only \" \\ \$ are escapes, as in sh. */
			if (quote == '"' && n != '"' && n != '\\' && n != '$')
				rc = put(p, &cur, s + i, 2);
			else
				rc = put(p, &cur, s + i + 1, 1);
			i += 2;
		} else if (!quote && (c == '\'' || c == '"')) {
			quote = c;
			i++;
		} else if (quote && c == quote) {
			quote = 0;
			i++;
		} else if (expand && quote != '\'' && c == '$') {
			size_t used;
			rc = expand_var(p, &cur, s + i, len - i, &used, 0);
			i += used;
		} else {
			rc = put(p, &cur, s + i, 1);
			i++;
		}
	}
	if (rc == 0 && quote)
		rc = perr(p, "unterminated %c quote", quote);
	if (rc == 0 && have) {
		strbuf_putc(&cur, 0);
		if (strbuf_failed(&cur))
			rc = errf(ENOMEM, "out of memory");
		else {
			rc = words_push(p, w, cur.data);
			strbuf_init(&cur);
		}
	}
	strbuf_free(&cur);
	return rc;
}

/* A JSON array of strings (the exec form). */
static int json_words(struct parser *p, const char *kw, const char *s, struct words *w)
{
	json_error_t e;
	json_t *a = json_loads(s, JSON_REJECT_DUPLICATES, &e);
	if (!a || !json_is_array(a)) {
		json_decref(a);
		return a ? perr(p, "%s: the exec form must be a JSON array of strings", kw)
			 : perr(p, "%s: bad JSON array: %s (column %d)", kw, e.text, e.column);
	}
	size_t i;
	json_t *v;
	int rc = 0;
	json_array_foreach(a, i, v) {
		const char *str = json_string_value(v);
		if (!str) {
			rc = perr(p, "%s: element %zu of the JSON array is not a string", kw, i + 1);
			break;
		}
		char *dup = strdup(str);
		if (!dup) {
			rc = errf(ENOMEM, "out of memory");
			break;
		}
		if ((rc = words_push(p, w, dup)) < 0)
			break;
	}
	json_decref(a);
	return rc;
}

/* ---- instructions ---------------------------------------------------------------------------- */

static void step_free(struct df_step *st)
{
	for (int j = 0; j < st->nargs; j++)
		free(st->args[j]);
	free(st->args);
	free(st->as);
	free(st->chown);
	free(st->chmod);
	free(st->text);
}

static int kind_of(const char *kw, size_t n)
{
	for (int k = 0; k < NKINDS; k++)
		if (strlen(kind_names[k]) == n && !strncasecmp(kind_names[k], kw, n))
			return k;
	return -1;
}

/* Leading --flag[=value] words. */
static const char *take_flag(const char *rest, char *flag, size_t cap)
{
	size_t n = strcspn(rest, " \t");
	snprintf(flag, cap, "%.*s", (int)n, rest);
	rest += n;
	while (*rest == ' ' || *rest == '\t')
		rest++;
	return rest;
}

static int set_flag(struct parser *p, char **dst, const char *flag, const char *kw)
{
	const char *eq = strchr(flag, '=');
	if (*dst)
		return perr(p, "%s: %.*s given twice", kw, (int)(eq - flag), flag);
	if (!eq[1])
		return perr(p, "%s: %s needs a value", kw, flag);
	struct words w = { 0 };
	int rc = lex(p, eq + 1, true, false, &w);
	if (rc == 0 && (w.n != 1 || !*w.v[0]))
		rc = perr(p, "%s: %s needs a value", kw, flag);
	if (rc == 0) {
		*dst = w.v[0];
		w.n = 0;
	}
	words_free(&w);
	return rc;
}

static bool has_dotdot(const char *path)
{
	for (const char *s = path; (s = strstr(s, "..")); s += 2)
		if ((s == path || s[-1] == '/') && (s[2] == 0 || s[2] == '/'))
			return true;
	return false;
}

static int parse_copy(struct parser *p, struct df_step *st, const char *rest, struct words *w)
{
	const char *kw = kind_names[st->kind];
	char flag[128];
	while (rest[0] == '-' && rest[1] == '-') {
		rest = take_flag(rest, flag, sizeof flag);
		int rc;
		if (!strncmp(flag, "--chown=", 8))
			rc = set_flag(p, &st->chown, flag, kw);
		else if (!strncmp(flag, "--chmod=", 8))
			rc = set_flag(p, &st->chmod, flag, kw);
		else
			rc = perr(p, "%s %.*s is not supported (supported: --chown, --chmod)", kw,
				  (int)strcspn(flag, "="), flag);
		if (rc < 0)
			return rc;
	}
	int rc = rest[0] == '[' ? json_words(p, kw, rest, w) : lex(p, rest, true, true, w);
	if (rc < 0)
		return rc;
	if (w->n < 2)
		return perr(p, "%s needs at least one source and a destination", kw);
	for (int i = 0; i < w->n; i++) {
		if (!*w->v[i])
			return perr(p, "%s: an empty path", kw);
		if (i == w->n - 1)
			break;
		if (st->kind == DF_ADD && (strstr(w->v[i], "://") || !strncmp(w->v[i], "git@", 4)))
			return perr(p, "ADD of a URL is not supported (only local files): '%.100s'", w->v[i]);
		if (has_dotdot(w->v[i]))
			return perr(p, "%s source '%.100s' leaves the build context", kw, w->v[i]);
	}
	return 0;
}

/* ENV and LABEL: KEY=VALUE pairs; ENV also the old `ENV KEY VALUE`. */
static int parse_pairs(struct parser *p, struct df_step *st, const char *rest, struct words *w)
{
	const char *kw = kind_names[st->kind];
	size_t first = strcspn(rest, " \t=");
	if (st->kind == DF_ENV && rest[first] != '=') {
		/* ENV KEY VALUE: the value is the rest of the line. */
		char key[256];
		if (first >= sizeof key)
			return perr(p, "ENV: the name is too long");
		snprintf(key, sizeof key, "%.*s", (int)first, rest);
		const char *val = rest + first;
		while (*val == ' ' || *val == '\t')
			val++;
		if (!*val)
			return perr(p, "ENV needs a value for '%s' (ENV NAME=VALUE)", key);
		struct words v = { 0 };
		int rc = lex(p, val, true, false, &v);
		char *k = strdup(key);
		if (rc == 0 && !k)
			rc = errf(ENOMEM, "out of memory");
		if (rc == 0) {
			rc = words_push(p, w, k);
			k = NULL;
		}
		if (rc == 0) {
			rc = words_push(p, w, v.n ? v.v[0] : strdup(""));
			if (v.n)
				v.n = 0;
		}
		free(k);
		words_free(&v);
		if (rc == 0 && !valid_name(w->v[0]))
			rc = perr(p, "ENV: bad variable name '%.60s'", w->v[0]);
		return rc;
	}
	struct words raw = { 0 };
	int rc = lex(p, rest, true, true, &raw);
	for (int i = 0; rc == 0 && i < raw.n; i++) {
		char *eq = strchr(raw.v[i], '=');
		if (!eq || eq == raw.v[i]) {
			rc = perr(p, "%s wants KEY=VALUE pairs, not '%.60s'", kw, raw.v[i]);
			break;
		}
		*eq = 0;
		if (st->kind == DF_ENV && !valid_name(raw.v[i])) {
			rc = perr(p, "ENV: bad variable name '%.60s'", raw.v[i]);
			break;
		}
		char *k = strdup(raw.v[i]), *v = strdup(eq + 1);
		if (!k || !v) {
			free(k);
			free(v);
			rc = errf(ENOMEM, "out of memory");
			break;
		}
		rc = words_push(p, w, k);
		if (rc == 0)
			rc = words_push(p, w, v);
		else
			free(v);
	}
	words_free(&raw);
	return rc;
}

static const char *build_arg(const struct parser *p, const char *name)
{
	size_t n = strlen(name);
	for (const char *const *a = p->build_args; a && *a; a++)
		if (!strncmp(*a, name, n) && (*a)[n] == '=')
			return *a + n + 1;
	return NULL;
}

static int parse_arg(struct parser *p, const char *rest, struct words *w)
{
	struct words raw = { 0 };
	int rc = lex(p, rest, true, true, &raw);
	for (int i = 0; rc == 0 && i < raw.n; i++) {
		char *eq = strchr(raw.v[i], '=');
		if (eq)
			*eq = 0;
		if (!valid_name(raw.v[i])) {
			rc = perr(p, "ARG: bad name '%.60s'", raw.v[i]);
			break;
		}
		/* The value: a build argument, else the default, else (after
		 * FROM) the global ARG's. */
		const char *val = build_arg(p, raw.v[i]);
		if (!val)
			val = eq ? eq + 1 : NULL;
		if (!val && p->from_seen)
			val = vars_get(&p->global, raw.v[i], strlen(raw.v[i]));
		char *k = strdup(raw.v[i]), *v = val ? strdup(val) : NULL;
		if (!k || (val && !v)) {
			free(k);
			free(v);
			rc = errf(ENOMEM, "out of memory");
			break;
		}
		if ((rc = words_push(p, w, k)) < 0) {
			free(v);
			break;
		}
		if ((rc = words_push(p, w, v)) < 0)
			break;
		/* An ARG without any value is declared, and unset. */
		if (val)
			rc = vars_set(p, p->from_seen ? &p->args : &p->global, k, val);
	}
	words_free(&raw);
	return rc;
}

static int parse_expose(struct parser *p, const char *rest, struct words *w)
{
	struct words raw = { 0 };
	int rc = lex(p, rest, true, true, &raw);
	for (int i = 0; rc == 0 && i < raw.n; i++) {
		char *end, *port = raw.v[i], *proto = strchr(port, '/');
		if (proto)
			*proto++ = 0;
		long n = strtol(port, &end, 10);
		if (!isdigit((unsigned char)*port) || *end || n < 1 || n > 65535 ||
		    (proto && strcasecmp(proto, "tcp") && strcasecmp(proto, "udp"))) {
			if (proto)
				proto[-1] = '/';
			rc = perr(p, "EXPOSE: bad port '%.40s' (PORT, PORT/tcp or PORT/udp)", raw.v[i]);
			break;
		}
		char buf[16];
		snprintf(buf, sizeof buf, "%ld/%s", n, proto && !strcasecmp(proto, "udp") ? "udp" : "tcp");
		char *d = strdup(buf);
		rc = d ? words_push(p, w, d) : errf(ENOMEM, "out of memory");
	}
	words_free(&raw);
	return rc;
}

static int parse_instruction(struct parser *p, const char *text)
{
	const char *s = text;
	size_t kwlen = 0;
	while (s[kwlen] && s[kwlen] != ' ' && s[kwlen] != '\t')
		kwlen++;
	int kind = kind_of(s, kwlen);
	if (kind < 0) {
		char kw[40];
		size_t n = 0;
		for (size_t i = 0; i < kwlen && n < sizeof kw - 1; i++)
			kw[n++] = isprint((unsigned char)s[i]) ? (char)toupper((unsigned char)s[i]) : '?';
		kw[n] = 0;
		return perr(p, "%s%s is not supported (supported: " SUPPORTED ")", kw,
			    kwlen > n ? "..." : "");
	}
	const char *kw = kind_names[kind];
	const char *rest = s + kwlen;
	while (*rest == ' ' || *rest == '\t')
		rest++;
	if (!*rest && kind != DF_CMD && kind != DF_ENTRYPOINT)
		return perr(p, "%s needs arguments", kw);
	if (!*rest)
		return perr(p, "%s needs a command (a JSON array or a shell command)", kw);
	if (kind != DF_FROM && kind != DF_ARG && !p->from_seen)
		return perr(p, "%s before FROM (a Dockerfile starts with FROM, after optional ARGs)", kw);
	if (kind == DF_FROM && p->from_seen)
		return perr(p, "a second FROM: multi-stage builds are not supported");
	if (p->df->nsteps >= DF_MAX_STEPS)
		return perr(p, "more than %d instructions", DF_MAX_STEPS);

	struct df_step st = { .kind = kind, .line = p->line };
	struct words w = { 0 };
	int rc = 0;
	p->expanded = 0;
	switch (kind) {
	case DF_FROM: {
		if (rest[0] == '-' && rest[1] == '-') {
			char flag[128];
			take_flag(rest, flag, sizeof flag);
			rc = perr(p, "FROM %.*s is not supported", (int)strcspn(flag, "="), flag);
			break;
		}
		rc = lex(p, rest, true, true, &w);
		if (rc == 0 && w.n == 3 && !strcasecmp(w.v[1], "as")) {
			st.as = w.v[2];
			free(w.v[1]);
			w.n = 1;
		}
		if (rc == 0 && (w.n != 1 || !*w.v[0]))
			rc = perr(p, "FROM wants one image (FROM IMAGE [AS NAME])");
		break;
	}
	case DF_RUN:
	case DF_CMD:
	case DF_ENTRYPOINT:
		if (kind == DF_RUN && rest[0] == '-' && rest[1] == '-') {
			char flag[128];
			take_flag(rest, flag, sizeof flag);
			rc = perr(p, "RUN %.*s is not supported", (int)strcspn(flag, "="), flag);
			break;
		}
		if (rest[0] == '[') {
			st.exec_form = true;
			rc = json_words(p, kw, rest, &w);
			if (rc == 0 && kind == DF_RUN && w.n == 0)
				rc = perr(p, "RUN: an empty command");
		} else {
			char *cmd = strdup(rest);
			rc = cmd ? words_push(p, &w, cmd) : errf(ENOMEM, "out of memory");
		}
		break;
	case DF_COPY:
	case DF_ADD:
		rc = parse_copy(p, &st, rest, &w);
		break;
	case DF_ENV:
	case DF_LABEL:
		rc = parse_pairs(p, &st, rest, &w);
		for (int i = 0; rc == 0 && kind == DF_ENV && i + 1 < w.n; i += 2)
			rc = vars_set(p, &p->env, w.v[i], w.v[i + 1]);
		break;
	case DF_ARG:
		rc = parse_arg(p, rest, &w);
		break;
	case DF_WORKDIR:
		rc = lex(p, rest, true, false, &w);
		if (rc == 0 && (w.n != 1 || !*w.v[0]))
			rc = perr(p, "WORKDIR needs a directory");
		break;
	case DF_USER:
		rc = lex(p, rest, true, true, &w);
		if (rc == 0 && (w.n != 1 || !*w.v[0]))
			rc = perr(p, "USER wants one USER[:GROUP]");
		break;
	case DF_EXPOSE:
		rc = parse_expose(p, rest, &w);
		break;
	}
	if (rc == 0 && !(st.text = strdup(text)))
		rc = errf(ENOMEM, "out of memory");
	st.nargs = w.n;
	st.args = w.v;
	if (rc < 0) {
		step_free(&st);
		return rc;
	}
	if (kind == DF_FROM)
		p->from_seen = true;
	if (p->df->nsteps % 16 == 0) {
		struct df_step *n = realloc(p->df->steps, (size_t)(p->df->nsteps + 16) * sizeof *n);
		if (!n) {
			step_free(&st);
			return errf(ENOMEM, "out of memory");
		}
		p->df->steps = n;
	}
	p->df->steps[p->df->nsteps++] = st;
	return 0;
}

/* ---- the file ----------------------------------------------------------------------------------- */

static bool blank_or_comment(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i == n || s[i] == '#';
}

int dockerfile_parse(const char *text, size_t len, const char *const *build_args,
		     struct dockerfile *out)
{
	memset(out, 0, sizeof *out);
	if (len > DF_MAX_TEXT)
		return errf(EINVAL, "the Dockerfile is over %d bytes", DF_MAX_TEXT);
	struct parser *p = calloc(1, sizeof *p);
	if (!p)
		return errf(ENOMEM, "out of memory");
	p->df = out;
	p->build_args = build_args;
	struct strbuf ins;		/* the logical instruction */
	strbuf_init(&ins);
	int rc = 0, start = 0;		/* its first line; 0: none open */
	bool any = false;		/* an instruction was seen */
	int ln = 0;
	for (size_t pos = 0; pos < len && rc == 0;) {
		const char *s = text + pos;
		const char *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;
		pos += n + (nl != NULL);
		ln++;
		p->line = start ? start : ln;
		if (memchr(s, 0, n)) {
			p->line = ln;
			rc = perr(p, "a NUL byte");
			break;
		}
		if (n && s[n - 1] == '\r')
			n--;
		if (blank_or_comment(s, n)) {
			/* A parser directive is a comment before anything else. */
			size_t i = strspn(s, " \t");
			if (!any && !start && i < n && s[i] == '#') {
				const char *d = s + i + 1;
				d += strspn(d, " \t");
				if (!strncasecmp(d, "escape", 6) && d[6 + strspn(d + 6, " \t")] == '=') {
					p->line = ln;
					rc = perr(p, "the escape parser directive is not supported");
				}
			}
			continue;	/* also inside a continuation, as Docker drops them */
		}
		/* A trailing backslash (blanks after it allowed) continues. */
		size_t end = n;
		while (end && (s[end - 1] == ' ' || s[end - 1] == '\t'))
			end--;
		bool cont = end && s[end - 1] == '\\';
		if (!start) {
			start = ln;
			size_t i = strspn(s, " \t");
			s += i;
			n -= i;
			end -= i;
		}
		strbuf_append(&ins, s, cont ? end - 1 : n);
		if (ins.len > DF_MAX_LINE) {
			p->line = start;
			rc = perr(p, "the instruction is over %d bytes", DF_MAX_LINE);
			break;
		}
		if (cont && pos < len)
			continue;
		/* The instruction is complete: trailing blanks off. */
		while (ins.len && (ins.data[ins.len - 1] == ' ' || ins.data[ins.len - 1] == '\t'))
			ins.len--;
		strbuf_putc(&ins, 0);
		if (strbuf_failed(&ins)) {
			rc = errf(ENOMEM, "out of memory");
			break;
		}
		p->line = start;
		rc = parse_instruction(p, ins.data);
		any = true;
		strbuf_reset(&ins);
		start = 0;
	}
	if (rc == 0 && start) {
		/* Only a continuation's blank/comment lines followed its last
		 * line: the instruction still counts. */
		strbuf_putc(&ins, 0);
		p->line = start;
		rc = strbuf_failed(&ins) ? errf(ENOMEM, "out of memory") : parse_instruction(p, ins.data);
	}
	if (rc == 0 && !p->from_seen)
		rc = errf(EINVAL, "no FROM: a Dockerfile needs one FROM");
	strbuf_free(&ins);
	vars_free(&p->global);
	vars_free(&p->args);
	vars_free(&p->env);
	free(p);
	if (rc < 0)
		dockerfile_free(out);
	return rc;
}

void dockerfile_free(struct dockerfile *df)
{
	for (int i = 0; i < df->nsteps; i++)
		step_free(&df->steps[i]);
	free(df->steps);
	memset(df, 0, sizeof *df);
}
