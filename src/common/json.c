#include "common/json.h"
#include "common/strbuf.h"
#include "common/err.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct parser {
	const char *p, *end;
	int depth;
};

static struct json *parse_value(struct parser *ps);

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static struct json *node(enum json_type t)
{
	struct json *j = calloc(1, sizeof *j);
	if (j)
		j->type = t;
	return j;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9') v |= c - '0';
		else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
		else return -1;
	}
	*out = v;
	return 0;
}

static void put_utf8(struct strbuf *b, unsigned cp)
{
	if (cp < 0x80) {
		strbuf_putc(b, (char)cp);
	} else if (cp < 0x800) {
		strbuf_putc(b, (char)(0xc0 | cp >> 6));
		strbuf_putc(b, (char)(0x80 | (cp & 0x3f)));
	} else if (cp < 0x10000) {
		strbuf_putc(b, (char)(0xe0 | cp >> 12));
		strbuf_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
		strbuf_putc(b, (char)(0x80 | (cp & 0x3f)));
	} else {
		strbuf_putc(b, (char)(0xf0 | cp >> 18));
		strbuf_putc(b, (char)(0x80 | ((cp >> 12) & 0x3f)));
		strbuf_putc(b, (char)(0x80 | ((cp >> 6) & 0x3f)));
		strbuf_putc(b, (char)(0x80 | (cp & 0x3f)));
	}
}

/* parse_string: ps->p is at the opening quote. Returns a malloc'd string. */
static char *parse_string(struct parser *ps)
{
	struct strbuf b;
	strbuf_init(&b);
	strbuf_reserve(&b, 16);
	ps->p++;
	while (ps->p < ps->end && *ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p;
		if (c < 0x20) {
			errf(EINVAL, "json: control character in string");
			goto bad;
		}
		if (c != '\\') {
			strbuf_putc(&b, (char)c);
			ps->p++;
			continue;
		}
		if (ps->end - ps->p < 2)
			goto truncated;
		char e = ps->p[1];
		ps->p += 2;
		switch (e) {
		case '"': strbuf_putc(&b, '"'); break;
		case '\\': strbuf_putc(&b, '\\'); break;
		case '/': strbuf_putc(&b, '/'); break;
		case 'b': strbuf_putc(&b, '\b'); break;
		case 'f': strbuf_putc(&b, '\f'); break;
		case 'n': strbuf_putc(&b, '\n'); break;
		case 'r': strbuf_putc(&b, '\r'); break;
		case 't': strbuf_putc(&b, '\t'); break;
		case 'u': {
			unsigned cp, lo;
			if (ps->end - ps->p < 4 || hex4(ps->p, &cp) < 0) {
				errf(EINVAL, "json: bad \\u escape");
				goto bad;
			}
			ps->p += 4;
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
				    hex4(ps->p + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff) {
					errf(EINVAL, "json: unpaired surrogate");
					goto bad;
				}
				ps->p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				errf(EINVAL, "json: unpaired surrogate");
				goto bad;
			}
			if (cp == 0) {
				errf(EINVAL, "json: NUL in string");
				goto bad;
			}
			put_utf8(&b, cp);
			break;
		}
		default:
			errf(EINVAL, "json: bad escape \\%c", e);
			goto bad;
		}
	}
	if (ps->p >= ps->end)
		goto truncated;
	ps->p++;
	if (strbuf_failed(&b)) {
		errf(ENOMEM, "json: out of memory");
		goto bad;
	}
	return b.data;
truncated:
	errf(EINVAL, "json: unterminated string");
bad:
	strbuf_free(&b);
	return NULL;
}

static struct json *parse_number(struct parser *ps)
{
	const char *s = ps->p;
	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
		goto bad;
	if (*ps->p == '0')
		ps->p++;
	else
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
			goto bad;
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
			goto bad;
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	}
	char tmp[64];
	size_t n = (size_t)(ps->p - s);
	if (n >= sizeof tmp)
		goto bad;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	struct json *j = node(JSON_NUMBER);
	if (!j) {
		errf(ENOMEM, "json: out of memory");
		return NULL;
	}
	j->number = strtod(tmp, NULL);
	if (!isfinite(j->number)) {
		free(j);
		goto bad;
	}
	return j;
bad:
	errf(EINVAL, "json: bad number");
	return NULL;
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

static struct json *parse_container(struct parser *ps, bool object)
{
	if (++ps->depth > JSON_MAX_DEPTH) {
		errf(EINVAL, "json: nested deeper than %d", JSON_MAX_DEPTH);
		return NULL;
	}
	struct json *j = node(object ? JSON_OBJECT : JSON_ARRAY);
	if (!j) {
		errf(ENOMEM, "json: out of memory");
		return NULL;
	}
	struct json **tail = &j->child;
	char close = object ? '}' : ']';
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		ps->depth--;
		return j;
	}
	for (;;) {
		char *key = NULL;
		skip_ws(ps);
		if (object) {
			if (ps->p >= ps->end || *ps->p != '"') {
				errf(EINVAL, "json: expected a member name");
				goto bad;
			}
			key = parse_string(ps);
			if (!key)
				goto bad;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				free(key);
				errf(EINVAL, "json: expected ':'");
				goto bad;
			}
			ps->p++;
		}
		struct json *v = parse_value(ps);
		if (!v) {
			free(key);
			goto bad;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			ps->depth--;
			return j;
		}
		errf(EINVAL, "json: expected ',' or '%c'", close);
		goto bad;
	}
bad:
	json_free(j);
	return NULL;
}

static struct json *parse_value(struct parser *ps)
{
	skip_ws(ps);
	if (ps->p >= ps->end) {
		errf(EINVAL, "json: unexpected end of input");
		return NULL;
	}
	struct json *j;
	switch (*ps->p) {
	case '{': return parse_container(ps, true);
	case '[': return parse_container(ps, false);
	case '"': {
		char *s = parse_string(ps);
		if (!s)
			return NULL;
		j = node(JSON_STRING);
		if (!j) {
			free(s);
			errf(ENOMEM, "json: out of memory");
			return NULL;
		}
		j->string = s;
		return j;
	}
	case 't': case 'f': case 'n':
		if (literal(ps, "true") || literal(ps, "false")) {
			j = node(JSON_BOOL);
			if (j)
				j->boolean = ps->p[-1] == 'e' && ps->p[-2] == 'u';
		} else if (literal(ps, "null")) {
			j = node(JSON_NULL);
		} else {
			errf(EINVAL, "json: unknown literal");
			return NULL;
		}
		if (!j)
			errf(ENOMEM, "json: out of memory");
		return j;
	default:
		return parse_number(ps);
	}
}

struct json *json_parse(const char *text, size_t len)
{
	struct parser ps = { text, text + len, 0 };
	struct json *j = parse_value(&ps);
	if (!j)
		return NULL;
	skip_ws(&ps);
	if (ps.p != ps.end) {
		json_free(j);
		errf(EINVAL, "json: trailing data after the value");
		return NULL;
	}
	return j;
}

void json_free(struct json *j)
{
	while (j) {
		struct json *next = j->next;
		json_free(j->child);
		free(j->string);
		free(j->key);
		free(j);
		j = next;
	}
}

struct json *json_get(const struct json *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	struct json *found = NULL;
	for (struct json *m = obj->child; m; m = m->next)
		if (strcmp(m->key, key) == 0)
			found = m; /* the last duplicate wins, as in most parsers */
	return found;
}

const char *json_get_str(const struct json *obj, const char *key)
{
	struct json *v = json_get(obj, key);
	return v && v->type == JSON_STRING ? v->string : NULL;
}

bool json_get_int(const struct json *obj, const char *key, int64_t *out)
{
	struct json *v = json_get(obj, key);
	if (!v || v->type != JSON_NUMBER || v->number != floor(v->number) ||
	    fabs(v->number) > 9007199254740992.0)
		return false;
	*out = (int64_t)v->number;
	return true;
}

bool json_get_bool(const struct json *obj, const char *key, bool *out)
{
	struct json *v = json_get(obj, key);
	if (!v || v->type != JSON_BOOL)
		return false;
	*out = v->boolean;
	return true;
}
