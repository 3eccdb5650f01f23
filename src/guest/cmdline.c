/*
 * The kiln.* kernel command-line parameters: see docs/guest.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest/boot.h"

static int set_str(char *dst, size_t size, const char *v, const char *key,
		   char *err, size_t errlen)
{
	if (strlen(v) >= size) {
		snprintf(err, errlen, "%s: value longer than %zu bytes", key, size - 1);
		return -1;
	}
	strcpy(dst, v);
	return 0;
}

static int set_uint(unsigned *dst, const char *v, unsigned max, const char *key,
		    char *err, size_t errlen)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (!*v || *end || errno || n > max) {
		snprintf(err, errlen, "%s: '%s' is not a number up to %u", key, v, max);
		return -1;
	}
	*dst = (unsigned)n;
	return 0;
}

/* One "key" or "key=value" word. */
static int apply(struct boot_cfg *c, const char *key, const char *v, char *err, size_t errlen)
{
	if (strncmp(key, "kiln.", 5) != 0)
		return 0;
	key += 5;
	if (!strcmp(key, "ro")) {
		c->ro = true;
		return 0;
	}
	if (!v) {
		snprintf(err, errlen, "kiln.%s needs a value", key);
		return -1;
	}
#define STR(name, field) if (!strcmp(key, name)) return set_str(c->field, sizeof c->field, v, "kiln." name, err, errlen)
#define UINT(name, field, max) if (!strcmp(key, name)) return set_uint(&c->field, v, max, "kiln." name, err, errlen)
	STR("root", root);
	STR("rootfstype", rootfstype);
	STR("overlay", overlay);
	STR("hostname", hostname);
	STR("iface", iface);
	STR("ip", ip);
	STR("gw", gw);
	STR("dns", dns);
	UINT("port", port, 0xffffffffu - 1);
	UINT("pids_max", pids_max, 4194304);
	UINT("mem_reserve_mb", mem_reserve_mb, 1u << 20);
	UINT("root_wait_ms", root_wait_ms, 600000);
#undef STR
#undef UINT
	snprintf(err, errlen, "unknown parameter kiln.%s", key);
	return -1;
}

int cmdline_parse(const char *line, struct boot_cfg *c, char *err, size_t errlen)
{
	char word[512];
	int bad = 0;

	memset(c, 0, sizeof *c);
	strcpy(c->rootfstype, "ext4");
	strcpy(c->iface, "eth0");
	c->port = 52;
	c->pids_max = 8192;
	c->mem_reserve_mb = 32;
	c->root_wait_ms = 5000;
	if (err && errlen)
		err[0] = 0;

	const char *p = line;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (!*p)
			break;
		/* A word ends at a blank outside double quotes; the quotes
		 * themselves are dropped, as the kernel does. */
		size_t n = 0;
		bool quoted = false, toolong = false;
		for (; *p && (quoted || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
			if (*p == '"') {
				quoted = !quoted;
				continue;
			}
			if (n + 1 < sizeof word)
				word[n++] = *p;
			else
				toolong = true;
		}
		word[n] = 0;
		if (toolong)
			continue;
		char *eq = strchr(word, '=');
		if (eq)
			*eq = 0;
		if (apply(c, word, eq ? eq + 1 : NULL, err, errlen) < 0)
			bad++;
	}
	return bad;
}
