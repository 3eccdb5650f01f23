/*
 * A build context's .dockerignore, COPY/ADD's source wildcards and the
 * tar reading behind ADD of an archive and the API's uploaded context
 * (src/host/dockerignore.c, build_context.c, oci.c's oci_extract_tar and
 * oci_tar_probe), without a VM: Docker's pattern rules one by one, what
 * a walk, a digest and the size limit see of an ignored file, wildcard
 * matches sorted, bounded and kept in the context, and tars whose files
 * come before their directories unpacked while hostile entries are
 * refused. The steps in a build VM: tests/e2e/88.
 */
#include "host/build_context.h"
#include "host/dfbuild_int.h"
#include "common/dockerignore.h"
#include "host/oci.h"
#include "common/err.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"

static char base[256], ctx[300];

static void put(const char *rel, const char *text)
{
	char p[700];
	snprintf(p, sizeof p, "%s/%s", ctx, rel);
	char *slash = strrchr(p, '/');
	*slash = 0;
	char cmd[800];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
	if (system(cmd) != 0)
		return;
	*slash = '/';
	FILE *f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* ---- the patterns ---- */

static int ign(const char *file, const char *path)
{
	struct dign d;
	if (dign_parse(file, strlen(file), &d) < 0)
		return -1;
	int r = dign_ignored(&d, path);
	dign_free(&d);
	return r;
}

static int patterns(void)
{
	static const struct { const char *file, *path; int want; } cases[] = {
		{ "*.pyc", "a.pyc", 1 },
		{ "*.pyc", "dir/a.pyc", 0 },		/* `*` stays in its directory */
		{ "**/*.pyc", "dir/sub/a.pyc", 1 },
		{ "**/*.pyc", "a.pyc", 1 },		/* `**` is also no directory */
		{ "a/**/b", "a/b", 1 },
		{ "a/**/b", "a/x/y/b", 1 },
		{ "a/**", "a/x", 1 },
		{ "a/**", "a", 0 },			/* Docker's `a/.*`: what is in it */
		{ "secrets", "secrets/key", 1 },	/* a directory: all below it */
		{ "/secrets/", "secrets", 1 },		/* slashes cleaned */
		{ "./x/../secrets", "secrets", 1 },
		{ "?.txt", "a.txt", 1 },
		{ "?.txt", "ab.txt", 0 },
		{ "[a-c].txt", "b.txt", 1 },
		{ "[^a-c].txt", "b.txt", 0 },
		{ "[^a-c].txt", "d.txt", 1 },
		{ "\\*.txt", "*.txt", 1 },
		{ "\\*.txt", "a.txt", 0 },
		{ "# a comment\n\n  *.md  \n", "README.md", 1 },
		{ "# *.md\n", "README.md", 0 },
		{ "*.md\n!README.md\n", "README.md", 0 },	/* an exception re-includes */
		{ "*.md\n!README.md\n", "CHANGES.md", 1 },
		{ "*.md\n!README.md\nREADME*\n", "README.md", 1 },	/* the last match wins */
		{ "docs\n!docs/keep.txt\n", "docs/keep.txt", 0 },
		{ "docs\n!docs/keep.txt\n", "docs/other.txt", 1 },
		{ "\xef\xbb\xbf" "bom\n", "bom", 1 },
		{ "*", "anything/below", 1 },
		{ "*\n!.", ".", 0 },			/* the context itself never is */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		T_ASSERT(ign(cases[i].file, cases[i].path) == cases[i].want, "'%s' on '%s': want %d",
			 cases[i].file, cases[i].path, cases[i].want);
	struct dign d;
	T_ASSERT(dign_parse("ok\n[abc\n", 8, &d) == -EINVAL && strstr(errmsg(), "line 2") &&
		 strstr(errmsg(), "unclosed"), "%s", errmsg());
	T_ASSERT(dign_parse("!\n", 2, &d) == -EINVAL && strstr(errmsg(), "line 1"), "%s", errmsg());
	/* Hostile: many stars against a long name stays fast (no backtracking blow-up). */
	char pat[600], name[300];
	memset(name, 'a', sizeof name - 1);
	name[sizeof name - 1] = 0;
	strcpy(pat, "");
	for (int i = 0; i < 40; i++)
		strcat(pat, "*a");
	strcat(pat, "*b");
	T_ASSERT(dign_match(pat, name, true) == 0 && dign_match(pat, name, false) == 0, "matched");
	for (int i = 0; i < 60; i++)
		strcat(pat, "/**");
	T_ASSERT(dign_match(pat, "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t", true) == 0, "matched");
	return 0;
}

/* ---- the context ---- */

struct seen {
	char names[2048];
};

static int note(void *c, const struct bctx_entry *e)
{
	struct seen *s = c;
	size_t n = strlen(s->names);
	snprintf(s->names + n, sizeof s->names - n, "%s%c ", e->rel, S_ISDIR(e->mode) ? '/' : ' ');
	return 0;
}

static int context_ignored(void)
{
	put(".dockerignore", "# build outputs\n*.log\nsecret\ndocs\n!docs/keep.txt\n");
	put("app.py", "print(1)\n");
	put("run.log", "a big log\n");
	put("secret", "password\n");
	put("docs/keep.txt", "kept\n");
	put("docs/drop.txt", "dropped\n");
	put("sub/x.log", "log\n");
	put("sub/x.py", "x\n");
	struct bctx c;
	T_ASSERT(bctx_open(ctx, 0, &c) == 0, "%s", errmsg());
	uint64_t bytes = c.bytes;
	struct seen s = { "" };
	T_ASSERT(bctx_walk(&c, ".", note, &s) == 0, "%s", errmsg());
	/* `*.log` is the root's only (sub/x.log stays), as in Docker. */
	T_ASSERT(!strcmp(s.names, "./ .dockerignore  app.py  docs/keep.txt  sub/ sub/x.log  sub/x.py  "), "walk: %s",
		 s.names);
	/* An ignored source alone: refused by name. */
	memset(&s, 0, sizeof s);
	T_ASSERT(bctx_walk(&c, "secret", note, &s) == -ENOENT && strstr(errmsg(), "'secret' is excluded by "
		 ".dockerignore"), "%s", errmsg());
	T_ASSERT(bctx_walk(&c, "docs", note, &s) == 0 && !strcmp(s.names, "docs/keep.txt  "), "%s", s.names);
	const char *all[] = { "." };
	char d1[65], d2[65];
	T_ASSERT(bctx_digest(&c, all, 1, d1) == 0, "%s", errmsg());
	bctx_close(&c);
	/* Changing an ignored file changes neither the digest nor the size. */
	put("run.log", "a much bigger log than before, by many bytes\n");
	put("docs/drop.txt", "changed\n");
	T_ASSERT(bctx_open(ctx, 0, &c) == 0 && bctx_digest(&c, all, 1, d2) == 0, "%s", errmsg());
	T_ASSERT(!strcmp(d1, d2), "an ignored file's change changed the digest");
	T_ASSERT(c.bytes == bytes, "ignored bytes counted: %llu then %llu", (unsigned long long)bytes,
		 (unsigned long long)c.bytes);
	bctx_close(&c);
	put("app.py", "print(2)\n");
	T_ASSERT(bctx_open(ctx, 0, &c) == 0 && bctx_digest(&c, all, 1, d2) == 0 && strcmp(d1, d2),
		 "a kept file's change kept the digest");
	bctx_close(&c);
	/* The size limit: an ignored big file does not count. */
	char p[700];
	snprintf(p, sizeof p, "%s/big.log", ctx);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	T_ASSERT(fd >= 0 && ftruncate(fd, 8 << 20) == 0, "big.log");
	close(fd);
	T_ASSERT(bctx_open(ctx, 1 << 20, &c) == 0, "an ignored 8 MiB file counted: %s", errmsg());
	bctx_close(&c);
	char slash[400];
	snprintf(slash, sizeof slash, "%s//", ctx);	/* the context named with trailing slashes */
	T_ASSERT(bctx_open(slash, 1 << 20, &c) == 0, "%s: an ignored 8 MiB file counted: %s", slash, errmsg());
	bctx_close(&c);
	put(".dockerignore", "*.py\n");
	int rc = bctx_open(ctx, 1 << 20, &c);
	T_ASSERT(rc == -EFBIG, "8 MiB not ignored, under a 1 MiB limit: %d", rc);
	unlink(p);
	put(".dockerignore", "[bad\n");
	T_ASSERT(bctx_open(ctx, 0, &c) == -EINVAL && strstr(errmsg(), ".dockerignore line 1"), "%s", errmsg());
	return 0;
}

static int wildcards(void)
{
	put(".dockerignore", "src/b/conf.d\n");
	put("src/a/conf.d/1.conf", "1\n");
	put("src/b/conf.d/2.conf", "2\n");
	put("src/c/conf.d/3.conf", "3\n");
	put("src/c/other", "o\n");
	put("w/z.py", "z\n");
	put("w/a.py", "a\n");
	put("w/m.txt", "m\n");
	char p[700];
	snprintf(p, sizeof p, "%s/w/out.py", ctx);
	struct bctx c;
	T_ASSERT(bctx_open(ctx, 0, &c) == 0, "%s", errmsg());
	char **v = NULL;
	int n = 0;
	const char *s1[] = { "w/*.py", "./src/*/conf.d/" };
	T_ASSERT(bctx_sources(&c, s1, 2, &v, &n) == 0, "%s", errmsg());
	T_ASSERT(n == 4 && !strcmp(v[0], "w/a.py") && !strcmp(v[1], "w/z.py") && !strcmp(v[2], "src/a/conf.d") &&
		 !strcmp(v[3], "src/c/conf.d") && !v[4], "matched %d: %s %s %s", n, v[0], n > 1 ? v[1] : "",
		 n > 2 ? v[2] : "");
	bctx_sources_free(v);
	const char *s2[] = { "w/[mn].t?t", "app.py" };
	T_ASSERT(bctx_sources(&c, s2, 2, &v, &n) == 0 && n == 2 && !strcmp(v[0], "w/m.txt") &&
		 !strcmp(v[1], "app.py"), "%s", errmsg());
	bctx_sources_free(v);
	const char *s3[] = { "w/*.rs" };
	T_ASSERT(bctx_sources(&c, s3, 1, &v, &n) == -ENOENT && strstr(errmsg(), "'w/*.rs' matches no file"),
		 "%s", errmsg());
	const char *s4[] = { "src/b/*" };
	T_ASSERT(bctx_sources(&c, s4, 1, &v, &n) == -ENOENT && strstr(errmsg(), "excluded by .dockerignore"),
		 "%s", errmsg());
	const char *s5[] = { "../*" };
	T_ASSERT(bctx_sources(&c, s5, 1, &v, &n) == -EINVAL && strstr(errmsg(), "leads out"), "%s", errmsg());
	/* A match that is a symlink out of the context: refused by name. */
	T_ASSERT(symlink("/etc/passwd", p) == 0, "symlink");
	const char *s6[] = { "w/*.py" };
	T_ASSERT(bctx_sources(&c, s6, 1, &v, &n) == -EXDEV && strstr(errmsg(), "w/out.py"), "%s", errmsg());
	unlink(p);
	bctx_close(&c);
	/* Bounded: more matches than BCTX_MAX_MATCHES are refused. */
	snprintf(p, sizeof p, "%s/many", ctx);
	mkdir(p, 0755);
	for (int i = 0; i <= BCTX_MAX_MATCHES; i++) {
		char f[800];
		snprintf(f, sizeof f, "%s/many/%05d", ctx, i);
		close(open(f, O_WRONLY | O_CREAT, 0644));
	}
	T_ASSERT(bctx_open(ctx, 0, &c) == 0, "%s", errmsg());
	const char *s7[] = { "many/*" };
	T_ASSERT(bctx_sources(&c, s7, 1, &v, &n) == -E2BIG && strstr(errmsg(), "matches more than"), "%s", errmsg());
	/* More than one source: the destination must be a directory ('/'). */
	struct dockerfile df;
	const char *text = "FROM kiln/minimal\nCOPY w/*.py /app\nCOPY w/*.py /app/\nCOPY w/a*.py /app.py\n";
	T_ASSERT(dockerfile_parse(text, strlen(text), NULL, &df) == 0, "%s", errmsg());
	struct dfbuild d = { .bc = c };
	T_ASSERT(df_sources(&d, &df.steps[1], &v, &n) == -EINVAL && strstr(errmsg(), "trailing '/'"), "%s",
		 errmsg());
	T_ASSERT(df_sources(&d, &df.steps[2], &v, &n) == 0 && n == 2, "%s", errmsg());
	bctx_sources_free(v);
	T_ASSERT(df_sources(&d, &df.steps[3], &v, &n) == 0 && n == 1, "%s", errmsg());
	bctx_sources_free(v);
	dockerfile_free(&df);
	bctx_close(&c);
	char cmd[800];
	snprintf(cmd, sizeof cmd, "rm -rf %s/many", ctx);
	return system(cmd) == 0 ? 0 : 1;
}

/* ---- tars ---- */

struct ent {
	const char *name;
	char type;		/* f d l (symlink) h (hard link) p (fifo) */
	const char *data;	/* a file's content, a link's target */
};

/* A tar of ents at path, filtered by filter (ARCHIVE_FILTER_*). */
static int make_tar(const char *path, int filter, const struct ent *ents, int n)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter(a, filter);
	if (archive_write_open_filename(a, path) != ARCHIVE_OK)
		return -1;
	for (int i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, ents[i].name);
		archive_entry_set_perm(e, ents[i].type == 'd' ? 0755 : 0644);
		size_t len = 0;
		switch (ents[i].type) {
		case 'f': archive_entry_set_filetype(e, AE_IFREG); len = strlen(ents[i].data); break;
		case 'd': archive_entry_set_filetype(e, AE_IFDIR); break;
		case 'l': archive_entry_set_filetype(e, AE_IFLNK); archive_entry_set_symlink(e, ents[i].data); break;
		case 'h': archive_entry_set_filetype(e, AE_IFREG); archive_entry_set_hardlink(e, ents[i].data); break;
		case 'p': archive_entry_set_filetype(e, AE_IFIFO); break;
		}
		archive_entry_set_size(e, (la_int64_t)len);
		archive_write_header(a, e);
		if (len)
			archive_write_data(a, ents[i].data, len);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	return 0;
}

/* Unpack the tar at path into a fresh directory out. */
static int extract(const char *path, const char *out, uint64_t max, long *entries)
{
	char cmd[800];
	snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", out, out);
	if (system(cmd) != 0)
		return -EIO;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	int rc = oci_extract_tar(fd, out, "the test tar", max, entries);
	close(fd);
	return rc;
}

static const char *slurp(const char *path)
{
	static char buf[256];
	buf[0] = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
	return buf;
}

static int tars_any_order(void)
{
	char tar[400], out[400], p[500];
	snprintf(tar, sizeof tar, "%s/ctx.tar", base);
	snprintf(out, sizeof out, "%s/out", base);
	/* Files first, their directories later (or never): made as needed. */
	const struct ent ents[] = { { "a/b/c.txt", 'f', "deep\n" }, { "Dockerfile", 'f', "FROM kiln/minimal\n" },
				    { "a/b", 'd', NULL }, { "x/y/", 'd', NULL }, { "a/link", 'h', "a/b/c.txt" } };
	long entries = 0;
	T_ASSERT(make_tar(tar, ARCHIVE_FILTER_NONE, ents, 5) == 0, "make_tar");
	T_ASSERT(extract(tar, out, 1 << 20, &entries) == 0, "%s", errmsg());
	snprintf(p, sizeof p, "%s/a/b/c.txt", out);
	T_ASSERT(!strcmp(slurp(p), "deep\n"), "a/b/c.txt: '%s'", slurp(p));
	snprintf(p, sizeof p, "%s/a/link", out);
	T_ASSERT(!strcmp(slurp(p), "deep\n"), "a/link: '%s'", slurp(p));
	struct stat st;
	snprintf(p, sizeof p, "%s/x/y", out);
	T_ASSERT(stat(p, &st) == 0 && S_ISDIR(st.st_mode), "x/y not made");
	T_ASSERT(entries == 5, "%ld entries", entries);
	/* The directories made count against the limit too. */
	T_ASSERT(extract(tar, out, 600, &entries) == -EFBIG, "1 KiB of entries under a 600-byte limit");
	/* Compressed: each of libarchive's decoders, and the probe that says
	 * an ADD source is an archive. */
	static const int filters[] = { ARCHIVE_FILTER_GZIP, ARCHIVE_FILTER_BZIP2, ARCHIVE_FILTER_XZ };
	for (int i = 0; i < 3; i++) {
		T_ASSERT(make_tar(tar, filters[i], ents, 2) == 0, "make_tar %d", i);
		T_ASSERT(extract(tar, out, 1 << 20, &entries) == 0 && entries == 2, "filter %d: %s", filters[i],
			 errmsg());
		int fd = open(tar, O_RDONLY);
		T_ASSERT(oci_tar_probe(fd) == 1 && lseek(fd, 0, SEEK_CUR) == 0, "filter %d: not a tar", filters[i]);
		close(fd);
	}
	snprintf(p, sizeof p, "%s/plain.txt", base);
	FILE *f = fopen(p, "w");
	fputs("just text, not a tar\n", f);
	fclose(f);
	int fd = open(p, O_RDONLY);
	T_ASSERT(oci_tar_probe(fd) == 0, "a text file taken for a tar");
	close(fd);
	return 0;
}

static int tars_hostile(void)
{
	char tar[400], out[400], p[500];
	snprintf(tar, sizeof tar, "%s/bad.tar", base);
	snprintf(out, sizeof out, "%s/out", base);
	static const struct { struct ent e[2]; int n; const char *want; } cases[] = {
		{ { { "ok/../../escaped", 'f', "x" } }, 1, "'..' in the path" },
		{ { { "/etc/evil", 'f', "x" } }, 1, "an absolute path" },
		/* A link out, then a file through it (its parent made or not). */
		{ { { "lnk", 'l', "/tmp" }, { "lnk/pwned", 'f', "x" } }, 2, "goes through a symlink" },
		{ { { "lnk", 'l', "/tmp" }, { "lnk/deeper/pwned", 'f', "x" } }, 2, "goes through a symlink" },
		{ { { "h", 'h', "../../etc/passwd" } }, 1, "'..' in the path" },
		{ { { "fifo", 'p', NULL } }, 1, "only files, directories and symlinks" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		T_ASSERT(make_tar(tar, ARCHIVE_FILTER_GZIP, cases[i].e, cases[i].n) == 0, "make_tar");
		long entries = 0;
		int rc = extract(tar, out, 1 << 20, &entries);
		T_ASSERT(rc < 0 && strstr(errmsg(), cases[i].want), "case %zu: %d %s", i, rc, errmsg());
	}
	snprintf(p, sizeof p, "%s/escaped", base);
	T_ASSERT(access(p, F_OK) < 0 && access("/tmp/pwned", F_OK) < 0 && access("/tmp/deeper", F_OK) < 0,
		 "something was written outside");
	return 0;
}

int main(void)
{
	char tmpl[] = "/tmp/unit-dockerignore-XXXXXX";
	if (!mkdtemp(tmpl))
		return 1;
	snprintf(base, sizeof base, "%s", tmpl);
	snprintf(ctx, sizeof ctx, "%s/ctx", tmpl);
	mkdir(ctx, 0755);

	t_run("dockerignore_patterns", patterns);
	t_run("dockerignore_context", context_ignored);
	t_run("dockerignore_wildcards", wildcards);
	t_run("dockerignore_tars_any_order", tars_any_order);
	t_run("dockerignore_tars_hostile", tars_hostile);

	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
	if (system(cmd) != 0)
		return 1;
	return t_failed ? 1 : 0;
}
