/*
 * out: tables, times, colour and the progress line (see out.h).
 */
#include "cli/out.h"
#include "cli/cli.h"

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

void table_init(struct table *t, const char *head)
{
	memset(t, 0, sizeof *t);
	char *dup = strdup(head), *save = NULL;
	for (char *w = strtok_r(dup, " ", &save); w && t->ncols < TABLE_COLS; w = strtok_r(NULL, " ", &save))
		t->head[t->ncols++] = strdup(w);
	free(dup);
}

void table_row(struct table *t, ...)
{
	if (t->rows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cells = realloc(t->cells, t->cap * (size_t)t->ncols * sizeof *t->cells);
		if (!t->cells)
			die("out of memory");
	}
	va_list ap;
	va_start(ap, t);
	for (int c = 0; c < t->ncols; c++) {
		const char *s = va_arg(ap, const char *);
		t->cells[t->rows * (size_t)t->ncols + (size_t)c] = strdup(s ? s : "-");
	}
	va_end(ap);
	t->rows++;
}

/* Width on the screen: escape sequences take none, UTF-8 continuation
 * bytes none. */
static size_t width(const char *s)
{
	size_t w = 0;
	while (*s) {
		if (*s == '\033') {
			while (*s && *s != 'm')
				s++;
			if (*s)
				s++;
			continue;
		}
		if ((*s & 0xc0) != 0x80)
			w++;
		s++;
	}
	return w;
}

void table_print(struct table *t, FILE *f)
{
	size_t w[TABLE_COLS] = { 0 };
	for (int c = 0; c < t->ncols; c++) {
		w[c] = width(t->head[c]);
		for (size_t r = 0; r < t->rows; r++) {
			size_t x = width(t->cells[r * (size_t)t->ncols + (size_t)c]);
			if (x > w[c])
				w[c] = x;
		}
	}
	for (size_t r = 0; r <= t->rows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			const char *s = r == 0 ? t->head[c] : t->cells[(r - 1) * (size_t)t->ncols + (size_t)c];
			fputs(s, f);
			if (c + 1 < t->ncols)
				fprintf(f, "%*s", (int)(w[c] - width(s) + 2), "");
		}
		fputc('\n', f);
	}
	for (size_t i = 0; i < t->rows * (size_t)t->ncols; i++)
		free(t->cells[i]);
	for (int c = 0; c < t->ncols; c++)
		free(t->head[c]);
	free(t->cells);
	memset(t, 0, sizeof *t);
}

int rfc3339_seconds(const char *s, long long *t)
{
	struct tm tm = { 0 };
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return -1;
	*t = (long long)timegm(&tm);
	return 0;
}

const char *ago(const char *s, char *buf, size_t len)
{
	long long t;
	if (rfc3339_seconds(s, &t) < 0) {
		snprintf(buf, len, "%s", s ? s : "-");
		return buf;
	}
	long long d = (long long)time(NULL) - t;
	bool future = d < 0;
	unsigned long long a = (unsigned long long)(future ? -d : d);
	char n[24];
	if (a < 60)
		snprintf(n, sizeof n, "%llus", a);
	else if (a < 3600)
		snprintf(n, sizeof n, "%llum", a / 60);
	else if (a < 86400 * 2)
		snprintf(n, sizeof n, "%lluh", a / 3600);
	else
		snprintf(n, sizeof n, "%llud", a / 86400);
	snprintf(buf, len, future ? "in %s" : "%s ago", n);
	return buf;
}

const char *dollars(json_t *v, char *buf, size_t len)
{
	if (!json_is_integer(v))
		return "-";
	long long m = (long long)json_integer_value(v);
	unsigned long long a = m < 0 ? 0ULL - (unsigned long long)m : (unsigned long long)m;
	snprintf(buf, len, "%s$%llu.%06llu", m < 0 ? "-" : "", a / 1000000, a % 1000000);
	return buf;
}

const char *number(json_t *o, const char *k, const char *fmt, char *buf, size_t len)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_number(v))
		return "-";
	snprintf(buf, len, fmt, json_number_value(v));
	return buf;
}

int use_colour(int fd)
{
	const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
	return isatty(fd) && !(nc && *nc) && !(term && !strcmp(term, "dumb"));
}

const char *status_word(const char *s)
{
	static char buf[8][64];
	static int next;
	if (!use_colour(1))
		return s;
	const char *c = !strcmp(s, "running") || !strcmp(s, "ready") ? "32"
		      : !strcmp(s, "failed") ? "31"
		      : !strcmp(s, "hibernated") || !strcmp(s, "paused") || !strcmp(s, "building") || !strcmp(s, "creating") ? "33"
		      : NULL;
	if (!c)
		return s;
	char *b = buf[next++ & 7];
	snprintf(b, sizeof buf[0], "\033[%sm%s\033[0m", c, s);
	return b;
}

/* The progress line: a SIGALRM every 100 ms once a second has passed. */
static const char *progress_what;
static struct timespec progress_t0;
static int progress_shown;

static void progress_tick(int sig)
{
	(void)sig;
	static const char spin[] = "|/-\\";
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long ds = (now.tv_sec - progress_t0.tv_sec) * 10 + (now.tv_nsec - progress_t0.tv_nsec) / 100000000;
	char line[160];
	size_t n = 0;
	line[n++] = '\r';
	line[n++] = spin[progress_shown++ & 3];
	line[n++] = ' ';
	for (const char *p = progress_what; *p && n < 120; p++)
		line[n++] = *p;
	line[n++] = ' ';
	char num[24];
	int k = 0;
	long v = ds / 10;
	do
		num[k++] = (char)('0' + v % 10);
	while ((v /= 10) && k < 20);
	while (k)
		line[n++] = num[--k];
	line[n++] = '.';
	line[n++] = (char)('0' + ds % 10);
	line[n++] = 's';
	if (write(2, line, n) < 0)
		return;
}

void progress_start(const struct opts *o, const char *what)
{
	if (o->json || !isatty(2))
		return;
	progress_what = what;
	progress_shown = 0;
	clock_gettime(CLOCK_MONOTONIC, &progress_t0);
	struct sigaction sa = { .sa_handler = progress_tick, .sa_flags = SA_RESTART };
	sigaction(SIGALRM, &sa, NULL);
	/* KILN_PROGRESS_AFTER_MS: how long a request may take before the
	 * line shows (default a second; at least 1 ms, as 0 disarms). */
	long after = 1000;
	const char *env = getenv("KILN_PROGRESS_AFTER_MS");
	if (env && *env) {
		char *end;
		long v = strtol(env, &end, 10);
		if (!*end && v >= 0 && v <= 3600000)
			after = v ? v : 1;
	}
	struct itimerval it = { .it_value = { after / 1000, (after % 1000) * 1000 },
				.it_interval = { 0, 100000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

void progress_end(void)
{
	if (!progress_what)
		return;
	struct itimerval it = { 0 };
	setitimer(ITIMER_REAL, &it, NULL);
	signal(SIGALRM, SIG_IGN);
	if (progress_shown)
		fputs("\r\033[K", stderr);
	progress_what = NULL;
}

void query_add(struct query *q, const char *name, const char *value)
{
	if (!value)
		return;
	char *n = httpc_escape(name), *v = httpc_escape(value);
	int w = snprintf(q->buf + q->len, sizeof q->buf - q->len, "%s%s=%s", q->len ? "&" : "", n, v);
	free(n);
	free(v);
	if (w < 0 || (size_t)w >= sizeof q->buf - q->len)
		die("the query is too long");
	q->len += (size_t)w;
}

char *query_path(const char *base, const struct query *q)
{
	char *p;
	if (asprintf(&p, "%s%s%s", base, q->len ? "?" : "", q->buf) < 0)
		die("out of memory");
	return p;
}
