/*
 * context: a template's build context as the CLI sends it. The files of
 * DIR that its .dockerignore keeps (Docker's rules, common/dockerignore.h,
 * the same code kilnd's builder applies), in sorted order, plus the
 * Dockerfile and .dockerignore always (the builder reads them whatever
 * .dockerignore says, as Docker's does), packed by tar(1) into an unlinked
 * temporary file. What .dockerignore hides never leaves this machine: a
 * node_modules, a .git or an .env is neither sent nor counted against
 * kilnd's context limit.
 */
#include "cli/context.h"
#include "cli/cli.h"
#include "common/dockerignore.h"
#include "common/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CONTEXT_DEPTH 64	/* kilnd's own bound on a context's depth */

struct walk {
	const char *dir;
	const char *dockerfile;	/* relative to DIR */
	struct dign ign;
	struct context_list *out;
};

static void add(struct context_list *l, const char *rel)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		if (!(l->paths = realloc(l->paths, l->cap * sizeof *l->paths)))
			die("out of memory");
	}
	if (!(l->paths[l->n++] = strdup(rel)))
		die("out of memory");
}

/* The files the builder reads whatever .dockerignore says. */
static bool always_sent(const struct walk *w, const char *rel)
{
	return !strcmp(rel, ".dockerignore") || !strcmp(rel, w->dockerfile);
}

/* Is the Dockerfile below the directory rel (walked even if ignored)? */
static bool holds_dockerfile(const struct walk *w, const char *rel)
{
	size_t n = strlen(rel);
	return !strncmp(w->dockerfile, rel, n) && w->dockerfile[n] == '/';
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of the directory open at fd, sorted (closes fd). */
static char **entries(int fd, const char *rel, size_t *n)
{
	DIR *d = fdopendir(fd);
	if (!d)
		die("%s: cannot read the directory: %s", *rel ? rel : ".", strerror(errno));
	char **v = NULL;
	size_t cap = 0;
	*n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*n == cap && !(v = realloc(v, (cap = cap ? cap * 2 : 32) * sizeof *v)))
			die("out of memory");
		if (!(v[(*n)++] = strdup(de->d_name)))
			die("out of memory");
	}
	closedir(d);
	qsort(v, *n, sizeof *v, by_name);
	return v;
}

/* The directory open at fd, rel its path in the context ("" for the
 * root). An ignored directory is not walked unless a `!` pattern may
 * keep something below it or it holds the Dockerfile; then only what is
 * kept is listed. */
static void walk_dir(struct walk *w, int fd, const char *rel, int depth)
{
	if (depth > CONTEXT_DEPTH)
		die("%s/%s: more than %d directory levels (kilnd refuses a deeper context)", w->dir, rel,
		    CONTEXT_DEPTH);
	size_t n;
	char **names = entries(fd, rel, &n);
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		if ((size_t)snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", names[i]) >= sizeof path)
			die("%s/%s/%s: path too long", w->dir, rel, names[i]);
		bool ignored = dign_ignored(&w->ign, path) && !always_sent(w, path);
		struct stat st;
		char full[8192];
		snprintf(full, sizeof full, "%s/%s", w->dir, path);
		if (lstat(full, &st) < 0)
			die("%s: %s", full, strerror(errno));
		if (S_ISDIR(st.st_mode) && (!ignored || w->ign.exceptions || holds_dockerfile(w, path))) {
			if (!ignored)
				add(w->out, path);
			int sub = open(full, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				die("%s: %s", full, strerror(errno));
			walk_dir(w, sub, path, depth + 1);
		} else if (ignored) {
			w->out->left_out++;
		} else {
			add(w->out, path);
		}
		free(names[i]);
	}
	free(names);
}

/* DIR/.dockerignore, parsed (none: no patterns). */
static void read_ignore(const char *dir, struct dign *ign)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/.dockerignore", dir);
	memset(ign, 0, sizeof *ign);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return;
		die("%s: %s", path, strerror(errno));
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		die("%s: not a regular file", path);
	if (st.st_size > DIGN_MAX_BYTES)
		die("%s: over %d bytes", path, DIGN_MAX_BYTES);
	char *text = malloc((size_t)st.st_size + 1);
	ssize_t got = text ? read(fd, text, (size_t)st.st_size) : -1;
	close(fd);
	if (got != st.st_size)
		die("%s: cannot read it", path);
	if (dign_parse(text, (size_t)got, ign) < 0)
		die("%s: %s", dir, errmsg());
	free(text);
}

void context_list(const char *dir, const char *dockerfile, struct context_list *out)
{
	memset(out, 0, sizeof *out);
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		die("%s: not a directory (the build context)", dir);
	struct walk w = { .dir = dir, .dockerfile = dockerfile && *dockerfile ? dockerfile : "Dockerfile", .out = out };
	while (!strncmp(w.dockerfile, "./", 2))
		w.dockerfile += 2;
	read_ignore(dir, &w.ign);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die("%s: %s", dir, strerror(errno));
	walk_dir(&w, fd, "", 0);
	dign_free(&w.ign);
}

void context_list_free(struct context_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->paths[i]);
	free(l->paths);
	memset(l, 0, sizeof *l);
}

int context_tar(const char *dir, const struct context_list *l, off_t *size)
{
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/kiln-context-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(path);
	if (fd < 0)
		die("%s: cannot make a temporary file", path);
	unlink(path);
	int list[2];
	if (pipe2(list, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		dup2(list[0], 0);
		dup2(fd, 1);
		/* The list names every file and directory kept; tar must not
		 * add what a kept directory holds on its own. */
		execlp("tar", "tar", "-C", dir, "--null", "--no-recursion", "-T", "-", "-czf", "-", (char *)NULL);
		_exit(127);
	}
	close(list[0]);
	FILE *f = pid > 0 ? fdopen(list[1], "w") : NULL;
	if (f) {
		fputs(".", f);
		fputc(0, f);
		for (size_t i = 0; i < l->n; i++) {
			fprintf(f, "./%s", l->paths[i]);
			fputc(0, f);
		}
		fclose(f);
	}
	int status = 0;
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		die("tar of %s failed (exit status %d)", dir, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	*size = lseek(fd, 0, SEEK_END);
	lseek(fd, 0, SEEK_SET);
	return fd;
}
