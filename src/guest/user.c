/*
 * Who a process runs as. kiln-init is static, and glibc's getpwnam in a
 * static binary wants to dlopen NSS modules that a guest image may not
 * have, so /etc/passwd and /etc/group are read directly: the files every
 * image has, parsed with bounded lines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest/spawn.h"

/* Split a colon-separated line into at most n fields, in place. */
static int split(char *line, char **f, int n)
{
	int i = 0;
	f[i++] = line;
	for (char *p = line; *p && i < n; p++) {
		if (*p == ':') {
			*p = 0;
			f[i++] = p + 1;
		}
	}
	return i;
}

static int parse_id(const char *s, unsigned *out)
{
	char *end;
	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (*end || errno || v >= 0xffffffffUL)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* Read one line without its newline into buf. Returns 1 for a line, 0 at
 * the end; a line that does not fit is skipped whole, so that its tail
 * is never taken for an entry of its own. */
static int read_line(FILE *f, char *buf, size_t size)
{
	while (fgets(buf, (int)size, f)) {
		size_t n = strcspn(buf, "\n");
		if (buf[n] == '\n' || feof(f)) {
			buf[n] = 0;
			return 1;
		}
		int ch;
		while ((ch = fgetc(f)) != EOF && ch != '\n')
			;
	}
	return 0;
}

/* Find the passwd entry whose name is `name` (or, with name NULL, whose
 * uid is `uid`). 1 when found, 0 when not. */
static int passwd_find(const char *name, uid_t uid, struct user_info *u)
{
	FILE *f = fopen("/etc/passwd", "re");
	char line[1024];
	int found = 0;

	if (!f)
		return 0;
	while (!found && read_line(f, line, sizeof line)) {
		char *fl[7];
		if (split(line, fl, 7) < 7)
			continue;
		unsigned pu, pg;
		if (parse_id(fl[2], &pu) < 0 || parse_id(fl[3], &pg) < 0)
			continue;
		if (name ? strcmp(fl[0], name) != 0 : pu != uid)
			continue;
		if (strlen(fl[0]) >= sizeof u->name || strlen(fl[5]) >= sizeof u->home ||
		    strlen(fl[6]) >= sizeof u->shell)
			continue;
		u->uid = pu;
		u->gid = pg;
		strcpy(u->name, fl[0]);
		strcpy(u->home, fl[5]);
		strcpy(u->shell, fl[6]);
		found = 1;
	}
	fclose(f);
	return found;
}

/* Supplementary groups: every /etc/group entry listing the user. */
static void groups_find(struct user_info *u)
{
	FILE *f = fopen("/etc/group", "re");
	char line[4096];

	u->groups[0] = u->gid;
	u->ngroups = 1;
	if (!f || !u->name[0]) {
		if (f)
			fclose(f);
		return;
	}
	while (u->ngroups < USER_MAX_GROUPS && read_line(f, line, sizeof line)) {
		char *fl[4];
		unsigned gid;
		if (split(line, fl, 4) < 4 || parse_id(fl[2], &gid) < 0 || gid == u->gid)
			continue;
		char *save = NULL;
		for (char *m = strtok_r(fl[3], ",", &save); m; m = strtok_r(NULL, ",", &save)) {
			if (strcmp(m, u->name) == 0) {
				u->groups[u->ngroups++] = gid;
				break;
			}
		}
	}
	fclose(f);
}

int user_lookup(const char *spec, struct user_info *u, char *err, size_t errlen)
{
	memset(u, 0, sizeof *u);
	strcpy(u->home, "/");
	strcpy(u->shell, "/bin/sh");

	if (!spec || !*spec)
		spec = "root";

	char *colon = strchr(spec, ':');
	unsigned uid, gid;
	if (colon) {
		/* "UID:GID": numbers, taken as given. */
		char ubuf[16];
		size_t ulen = (size_t)(colon - spec);
		if (ulen >= sizeof ubuf)
			goto bad;
		memcpy(ubuf, spec, ulen);
		ubuf[ulen] = 0;
		if (parse_id(ubuf, &uid) < 0 || parse_id(colon + 1, &gid) < 0)
			goto bad;
		if (!passwd_find(NULL, uid, u))
			u->name[0] = 0;
		u->uid = uid;
		u->gid = gid;
		u->groups[0] = gid;
		u->ngroups = 1;
		return 0;
	}
	if (parse_id(spec, &uid) == 0) {
		if (!passwd_find(NULL, uid, u)) {
			u->uid = uid;
			u->gid = uid;
		}
		groups_find(u);
		return 0;
	}
	if (!passwd_find(spec, 0, u)) {
		if (strcmp(spec, "root") == 0) {
			/* An image without /etc/passwd still has root. */
			strcpy(u->name, "root");
			strcpy(u->home, "/root");
			u->groups[0] = 0;
			u->ngroups = 1;
			return 0;
		}
		snprintf(err, errlen, "user '%s' is not in /etc/passwd", spec);
		return -ENOENT;
	}
	groups_find(u);
	return 0;
bad:
	snprintf(err, errlen, "bad user '%s' (want NAME, UID or UID:GID)", spec);
	return -EINVAL;
}
