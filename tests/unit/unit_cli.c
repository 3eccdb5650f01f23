/*
 * The kiln CLI's command line, with no kilnd: `kiln help` and docs/cli.md
 * agree (each command's usage is in the docs word for word), `kiln CMD
 * --help` is `kiln help CMD`, usage errors exit 2 naming the option and
 * the value, options are read after the sandbox id while what follows --
 * is not, and kiln's own failures exit 125. KILN_API_URL points at a port
 * nobody listens on, so a command that gets past its parsing fails to
 * connect (125) instead of being refused (2).
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

static char kiln[4200], docs[4200];
static char out[65536];

static void find_paths(void)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = 0;
	char *s = strrchr(self, '/');
	if (s)
		*s = 0;			/* .../build/tests */
	snprintf(kiln, sizeof kiln, "%s/../kiln", self);
	snprintf(docs, sizeof docs, "%s/../../docs/cli.md", self);
	if (access(docs, R_OK) != 0)
		snprintf(docs, sizeof docs, "docs/cli.md");
}

/* Run kiln ARGS (a shell fragment), stdout and stderr into out; its status. */
static int run(const char *args)
{
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "KILN_API_URL=http://127.0.0.1:1 KILN_API_KEY=kiln_x '%s' %s 2>&1 </dev/null",
		 kiln, args);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* The command names `kiln help` lists: "  NAME  summary" lines between
 * the first blank line and the next. */
static int commands(char names[][16], int max)
{
	run("help");
	int n = 0;
	char *p = strstr(out, "\n\n");
	char *end = p ? strstr(p + 2, "\n\n") : NULL;
	if (!p || !end)
		return 0;
	*end = 0;
	for (char *line = strtok(p + 2, "\n"); line && n < max; line = strtok(NULL, "\n"))
		if (sscanf(line, " %15s", names[n]) == 1)
			n++;
	return n;
}

static int help_matches_docs(void)
{
	char names[64][16];
	int n = commands(names, 64);
	T_ASSERT(n >= 20, "kiln help listed %d commands", n);
	char *d = read_file(docs);
	T_ASSERT(d, "%s cannot be read", docs);
	char *doc = strdup(d);
	for (int i = 0; i < n; i++) {
		char args[64];
		snprintf(args, sizeof args, "help %s", names[i]);
		int st = run(args);
		T_ASSERT(st == 0, "kiln help %s: exit %d: %s", names[i], st, out);
		T_ASSERT(strstr(doc, out), "docs/cli.md lacks the usage of %s, word for word:\n%s", names[i], out);
	}
	T_ASSERT(strstr(doc, "| 125 |") && strstr(doc, "| 2 |"), "docs/cli.md has no exit status table");
	free(doc);
	T_NOTE("%d commands, each one's usage in docs/cli.md", n);
	return 0;
}

static int dash_dash_help(void)
{
	char names[64][16], help[65536];
	int n = commands(names, 64);
	for (int i = 0; i < n; i++) {
		if (!strcmp(names[i], "help"))
			continue;
		char args[64];
		snprintf(args, sizeof args, "help %s", names[i]);
		run(args);
		snprintf(help, sizeof help, "%s", out);
		snprintf(args, sizeof args, "%s --help", names[i]);
		int st = run(args);
		T_ASSERT(st == 0 && !strcmp(out, help), "kiln %s --help (exit %d) differs:\n%s", names[i], st, out);
	}
	T_ASSERT(run("help nosuch") == 2 && strstr(out, "nosuch"), "kiln help nosuch: %s", out);
	T_ASSERT(run("nosuch") == 2 && strstr(out, "unknown command 'nosuch'"), "kiln nosuch: %s", out);
	T_ASSERT(run("") == 2, "kiln alone: %s", out);
	T_ASSERT(run("--help") == 0 && strstr(out, "exit status"), "kiln --help: %s", out);
	return 0;
}

static int strict_numbers(void)
{
	static const struct { const char *args, *want; } cases[] = {
		{ "create --ttl abc", "--ttl: 'abc'" },
		{ "create minimal --ttl 10x", "--ttl: '10x'" },
		{ "create --ttl -1", "--ttl: '-1'" },
		{ "ttl sbx_a abc", "'abc'" },
		{ "exec -t abc sbx_a -- true", "-t/--timeout: 'abc'" },
		{ "exec sbx_a -t '' -- true", "-t/--timeout: ''" },
		{ "fork sbx_a -n abc", "-n/--count: 'abc'" },
		{ "fork sbx_a -n 65", "-n/--count: '65'" },
		{ "ls --limit 0", "--limit: '0'" },
		{ "logs sbx_a -n 1e3", "-n/--lines: '1e3'" },
		{ "expose sbx_a 99999", "PORT: '99999'" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int st = run(cases[i].args);
		T_ASSERT(st == 2 && strstr(out, cases[i].want), "kiln %s: exit %d: %s", cases[i].args, st, out);
	}
	T_NOTE("%zu bad numbers, each exit 2 naming the option and value", sizeof cases / sizeof cases[0]);
	return 0;
}

static int options_anywhere(void)
{
	/* An option after the id is read as one: a bad one is named... */
	T_ASSERT(run("fork sbx_a --json --bogus") == 2 && strstr(out, "--bogus"), "%s", out);
	T_ASSERT(run("expose sbx_a 8080 --public --bogus") == 2 && strstr(out, "--bogus"), "%s", out);
	/* ...and good ones get as far as connecting. */
	static const char *const good[] = {
		"fork sbx_a -n 2 --tree --json", "fork sbx_a --json", "expose sbx_a 8080 --public",
		"exec -e X=1 sbx_a -- env", "exec sbx_a -e X=1 -- env", "exec sbx_a -- ls --bogus -x",
		"create minimal --ttl 60 --json", "create --json minimal", "ls --json --status running",
		"cp -r sbx_a:/tmp /tmp/kiln-unit-never", "logs sbx_a -f -n 3", "rm sbx_a snap_b",
		"network sbx_a --no-internet --deny-out 10.0.0.0/8", "fs ls sbx_a:/", "shell sbx_a -- echo -n hi",
		"preview sbx_a 8080 --ttl 120", "events --sandbox sbx_a --last-event-id mio2k3x1-42 --limit 2 --json",
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		int st = run(good[i]);
		T_ASSERT(st == 125 && strstr(out, "cannot reach kilnd"), "kiln %s: exit %d: %s", good[i], st, out);
	}
	/* Options are refused where the command does not take them, and
	 * something between the id and -- is not the command. */
	T_ASSERT(run("exec sbx_a ls -l") == 2 && strstr(out, "put the command after --"), "%s", out);
	T_ASSERT(run("exec sbx_a ls -- -l") == 2 && strstr(out, "before --"), "%s", out);
	T_ASSERT(run("ls --tree") == 2 && strstr(out, "--tree"), "%s", out);
	T_ASSERT(run("create minimal base") == 2 && strstr(out, "'base'"), "%s", out);
	T_ASSERT(run("create minimal --template base") == 2, "%s", out);
	T_ASSERT(run("get nosuch") == 2 && strstr(out, "not a sandbox id"), "%s", out);
	/* An id that could end the Last-Event-ID header, or another option's value. */
	T_ASSERT(run("events --last-event-id 'x\r\nX-Evil: 1'") == 2 && strstr(out, "not an event id"), "%s", out);
	T_ASSERT(run("events --sandbox vol_a") == 2 && strstr(out, "'vol_a' is not a sandbox id"), "%s", out);
	T_ASSERT(run("events --limit 0") == 2 && strstr(out, "--limit"), "%s", out);
	T_ASSERT(run("preview sbx_a 0") == 2 && strstr(out, "PORT"), "%s", out);
	T_NOTE("%zu forms parsed, 10 refused", sizeof good / sizeof good[0]);
	return 0;
}

static int exit_statuses(void)
{
	T_ASSERT(run("ls") == 125 && strstr(out, "kiln: cannot reach kilnd"), "%s", out);
	T_ASSERT(run("exec sbx_a -- true") == 125, "%s", out);
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "KILN_API_URL=ftp://x '%s' ls 2>&1", kiln);
	FILE *p = popen(cmd, "r");
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = 0;
	int st = pclose(p);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 125 && strstr(out, "KILN_API_URL"), "ftp://: %s", out);
	return 0;
}

int main(void)
{
	find_paths();
	T_RUN(help_matches_docs);
	T_RUN(dash_dash_help);
	T_RUN(strict_numbers);
	T_RUN(options_anywhere);
	T_RUN(exit_statuses);
	return t_failed ? 1 : 0;
}
