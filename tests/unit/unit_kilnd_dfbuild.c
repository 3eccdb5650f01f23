/*
 * A Dockerfile build's parts that need no VM (src/host/build_context.c,
 * src/host/dfbuild*.c, disk_to_raw in src/host/disk.c): source paths
 * cleaned and `..` refused, a source symlink followed inside the context and
 * refused out of it, the walk's order and names, the context's size
 * limit named, COPY digests and step keys changing exactly when what
 * they cover changes, FROM forms, and a chain of overlays written out as
 * a raw image byte for byte. The steps in a VM: tests/e2e/88.
 */
#include "host/build_context.h"
#include "host/dfbuild.h"
#include "host/disk.h"
#include "host/host_config.h"
#include "vmm/overlay.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"

static char dir[256];

static void put(const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static int clean_paths(void)
{
	char out[256];
	T_ASSERT(bctx_clean("./a//b/./c", out, sizeof out) == 0 && !strcmp(out, "a/b/c"), "%s", out);
	T_ASSERT(bctx_clean("/app.py", out, sizeof out) == 0 && !strcmp(out, "app.py"), "%s", out);
	T_ASSERT(bctx_clean(".", out, sizeof out) == 0 && !strcmp(out, "."), "%s", out);
	T_ASSERT(bctx_clean("a/../../etc", out, sizeof out) == -EINVAL && strstr(errmsg(), "leads out"), "%s",
		 errmsg());
	T_ASSERT(bctx_clean("..", out, sizeof out) == -EINVAL, "'..' accepted");
	T_ASSERT(bctx_clean("a/b", out, 3) == -ENAMETOOLONG, "a long path fits 3 bytes");
	return 0;
}

struct seen {
	char names[1024];
	long files;
};

static int note(void *ctx, const struct bctx_entry *e)
{
	struct seen *s = ctx;
	size_t n = strlen(s->names);
	snprintf(s->names + n, sizeof s->names - n, "%s[%s]%c%s%s ", e->rel, e->sub,
		 S_ISDIR(e->mode) ? 'd' : S_ISLNK(e->mode) ? 'l' : 'f', e->link ? ">" : "", e->link ? e->link : "");
	s->files += e->fd >= 0;
	return 0;
}

static int walk_and_symlinks(void)
{
	struct bctx c;
	T_ASSERT(bctx_open(dir, 0, &c) == 0, "%s", errmsg());
	struct seen s = { .files = 0 };
	T_ASSERT(bctx_walk(&c, "src", note, &s) == 0, "%s", errmsg());
	/* Below the source a symlink is given as one, its target as read. */
	T_ASSERT(!strcmp(s.names, "src[]d src/a.txt[a.txt]f src/in[in]l>../top src/sub[sub]d src/sub/z[sub/z]f "),
		 "walk: %s", s.names);
	T_ASSERT(s.files == 2, "%ld files open", s.files);
	/* A source that is a symlink is followed inside the context; one out
	 * of it is refused. */
	int fd = bctx_openat(&c, "src/in", O_RDONLY);
	T_ASSERT(fd >= 0, "%s", errmsg());
	char buf[16] = "";
	T_ASSERT(read(fd, buf, sizeof buf) == 4 && !memcmp(buf, "top\n", 4), "read '%s' through the link", buf);
	close(fd);
	T_ASSERT(bctx_openat(&c, "out", O_RDONLY) == -EXDEV && strstr(errmsg(), "leads out of the build context"),
		 "%s", errmsg());
	memset(&s, 0, sizeof s);
	int rc = bctx_walk(&c, "out", note, &s);
	T_ASSERT(rc == -EXDEV && strstr(errmsg(), "'out' leads out"), "a source linking out: %d %s", rc, errmsg());
	/* A directory holding a link out: the link is kept as a link, and
	 * nothing outside is read (its target's size is not the entry's). */
	memset(&s, 0, sizeof s);
	rc = bctx_walk(&c, "bad", note, &s);
	T_ASSERT(rc == 0 && !strcmp(s.names, "bad[]d bad/passwd[passwd]l>/etc/passwd ") && s.files == 0,
		 "a dir holding a link out: %d %s", rc, s.names);
	/* The digest covers a link's target: repointing it changes the key. */
	char d1[65], d2[65], lp[512];
	const char *bad[] = { "bad" };
	T_ASSERT(bctx_digest(&c, bad, 1, d1) == 0, "%s", errmsg());
	snprintf(lp, sizeof lp, "%s/bad/passwd", dir);
	unlink(lp);
	T_ASSERT(symlink("/etc/shadow", lp) == 0, "symlink");
	T_ASSERT(bctx_digest(&c, bad, 1, d2) == 0 && strcmp(d1, d2), "the digest ignores the link's target");
	unlink(lp);
	T_ASSERT(symlink("/etc/passwd", lp) == 0, "symlink");
	T_ASSERT(bctx_walk(&c, "missing", note, &s) == -ENOENT && strstr(errmsg(), "not in the build context"),
		 "%s", errmsg());
	memset(&s, 0, sizeof s);
	T_ASSERT(bctx_walk(&c, "src/a.txt", note, &s) == 0 && !strcmp(s.names, "src/a.txt[]f "), "%s", s.names);
	bctx_close(&c);
	return 0;
}

static int size_limit(void)
{
	struct bctx c;
	int rc = bctx_open(dir, 4, &c);	/* 4 bytes: the context holds more */
	T_ASSERT(rc == -EFBIG && strstr(errmsg(), "holds more than 0 MiB (the limit"), "%d %s", rc, errmsg());
	T_ASSERT(bctx_open(dir, 1 << 20, &c) == 0 && c.bytes > 4 && c.entries >= 7, "%s", errmsg());
	bctx_close(&c);
	T_ASSERT(bctx_open("/nonexistent-ctx", 0, &c) == -ENOENT, "a missing context opened");
	return 0;
}

static int digests_and_keys(void)
{
	struct bctx c;
	T_ASSERT(bctx_open(dir, 0, &c) == 0, "%s", errmsg());
	const char *srcs[] = { "src" }, *one[] = { "top" };
	char d1[65], d2[65], d3[65], d4[65];
	T_ASSERT(bctx_digest(&c, srcs, 1, d1) == 0 && bctx_digest(&c, srcs, 1, d2) == 0 && !strcmp(d1, d2),
		 "the same tree, two digests");
	put("src/sub/z", "changed\n");
	T_ASSERT(bctx_digest(&c, srcs, 1, d3) == 0 && strcmp(d1, d3), "a changed file, the same digest");
	char p[512];
	snprintf(p, sizeof p, "%s/src/sub/z", dir);
	chmod(p, 0700);
	T_ASSERT(bctx_digest(&c, srcs, 1, d4) == 0 && strcmp(d3, d4), "a changed mode, the same digest");
	T_ASSERT(bctx_digest(&c, one, 1, d4) == 0 && strcmp(d3, d4), "two sources, one digest");
	bctx_close(&c);
	/* Keys chain: a changed parent, text or input changes the key. */
	char k0[65], k1[65], k2[65], k3[65], k4[65];
	bctx_step_key("", "FROM kiln/minimal", "id", k0);
	bctx_step_key(k0, "RUN echo a", NULL, k1);
	bctx_step_key(k0, "RUN echo b", NULL, k2);
	bctx_step_key(k1, "RUN echo b", NULL, k3);
	bctx_step_key(k0, "RUN echo a", "x", k4);
	T_ASSERT(strlen(k1) == 64 && strcmp(k1, k2) && strcmp(k2, k3) && strcmp(k1, k4), "keys collide");
	bctx_step_key(k0, "RUN echo a", NULL, k2);
	T_ASSERT(!strcmp(k1, k2), "the same step, two keys");
	/* Length-prefixed: moving the boundary between text and input changes it. */
	bctx_step_key(k0, "ab", "c", k3);
	bctx_step_key(k0, "a", "bc", k4);
	T_ASSERT(strcmp(k3, k4), "'ab'+'c' and 'a'+'bc' have one key");
	return 0;
}

static int from_forms(void)
{
	char kind = 0;
	const char *rest = NULL;
	T_ASSERT(dfbuild_from("kiln/minimal", &kind, &rest) == 0 && kind == 't' && !strcmp(rest, "minimal"), "kiln/");
	T_ASSERT(dfbuild_from("oci:./img.tar:v1", &kind, &rest) == 0 && kind == 'o' && !strcmp(rest, "./img.tar:v1"),
		 "oci:");
	T_ASSERT(dfbuild_from("debian:bookworm", &kind, &rest) == 0 && kind == 'd' && !strcmp(rest, "bookworm"),
		 "debian:");
	T_ASSERT(dfbuild_from("debian:trixie-backports", &kind, &rest) == 0 && kind == 'd', "a suite with '-'");
	/* The suite reaches a command line and a sed expression: a codename's characters only. */
	static const char *const bad[] = { "debian:", "debian:Bookworm", "debian:../x", "debian:a b", "debian:-x",
					   "debian:b/w", "debian:$(id)", "debian:a\\b",
					   "debian:abcdefghijklmnopqrstuvwxyz0123456", NULL };
	for (int i = 0; bad[i]; i++)
		T_ASSERT(dfbuild_from(bad[i], &kind, &rest) == -EINVAL && strstr(errmsg(), "not a Debian suite"),
			 "%s: %s", bad[i], errmsg());
	T_ASSERT(dfbuild_from("ubuntu:noble", &kind, &rest) == -EINVAL && strstr(errmsg(), "not pulled") &&
		 strstr(errmsg(), "debian:SUITE"), "%s", errmsg());
	T_ASSERT(dfbuild_from("kiln/", &kind, &rest) == -EINVAL, "kiln/ alone");
	return 0;
}

static int guest_paths(void)
{
	char out[256];
	static const char *const cases[][3] = {
		{ "/app", "./", "/app/" }, { "/app", "x/../y", "/app/y" }, { "/", "srv", "/srv" },
		{ "/a/b", "/abs//p/.", "/abs/p" }, { "/a", "../../..", "/" }, { "/a", "d/", "/a/d/" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		dfbuild_path(cases[i][0], cases[i][1], out, sizeof out);
		T_ASSERT(!strcmp(out, cases[i][2]), "%s + %s: '%s', not '%s'", cases[i][0], cases[i][1], out,
			 cases[i][2]);
	}
	return 0;
}

static struct host_config cfg;

/* dfbuild_open: the Dockerfile's refusals carry its line, FROM's name
 * what is accepted, and a missing template is named. */
static int open_errors(void)
{
	struct dfbuild d = { .cfg = &cfg, .name = "t", .context = dir, .vdir = dir };
	put("Dockerfile", "FROM kiln/minimal\nRUN true\nHEALTHCHECK CMD true\n");
	int rc = dfbuild_open(&d);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "line 3") && strstr(errmsg(), "HEALTHCHECK"), "%s", errmsg());
	dfbuild_close(&d);
	put("Dockerfile", "FROM python:3.12\n");
	memset(&d, 0, sizeof d);
	d = (struct dfbuild){ .cfg = &cfg, .name = "t", .context = dir, .vdir = dir };
	rc = dfbuild_open(&d);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "line 1") && strstr(errmsg(), "kiln/TEMPLATE"), "%s", errmsg());
	dfbuild_close(&d);
	put("Dockerfile", "FROM kiln/nosuch\n");
	d = (struct dfbuild){ .cfg = &cfg, .name = "t", .context = dir, .vdir = dir };
	rc = dfbuild_open(&d);
	T_ASSERT(rc == -ENOENT && strstr(errmsg(), "no such template"), "%d %s", rc, errmsg());
	dfbuild_close(&d);
	put("Dockerfile", "FROM oci:../img\n");
	d = (struct dfbuild){ .cfg = &cfg, .name = "t", .context = dir, .vdir = dir };
	rc = dfbuild_open(&d);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "leads out"), "%d %s", rc, errmsg());
	dfbuild_close(&d);
	/* FROM a compiled-in template not built: its prebuilt image. */
	put("Dockerfile", "FROM kiln/minimal\nENV A=1\n");
	char img[512];
	snprintf(img, sizeof img, "%s/rootfs-minimal.ext4", cfg.images);
	put("../rootfs-minimal.ext4", "raw");
	d = (struct dfbuild){ .cfg = &cfg, .name = "t", .context = dir, .vdir = dir };
	rc = dfbuild_open(&d);
	T_ASSERT(rc == 0 && strstr(d.base, "rootfs-minimal.ext4") && strlen(d.from_key) == 64, "%d %s %s", rc,
		 errmsg(), d.base);
	dfbuild_close(&d);
	return 0;
}

/* A Dockerfile with no disk step boots no VM: the root is FROM's image
 * copied, the config is the Dockerfile's, and its ENTRYPOINT + CMD (and
 * first TCP port) the start command. */
static int config_only(void)
{
	put("Dockerfile", "FROM kiln/minimal\nENV A=1 B=\"x y\"\nUSER 1000\nEXPOSE 53/udp 8000\n"
			  "LABEL k=v\nENTRYPOINT [\"/bin/serve\"]\nCMD [\"--name\", \"it's\"]\n");
	struct dfbuild d = { .cfg = &cfg, .name = "t", .context = dir, .vdir = dir };
	char out[512];
	snprintf(out, sizeof out, "%s/root.out", dir);
	int rc = dfbuild_open(&d);
	T_ASSERT(rc == 0, "%s", errmsg());
	rc = dfbuild_run(&d, out);
	T_ASSERT(rc == 0, "%s", errmsg());
	char *j = json_dumps(d.image, JSON_SORT_KEYS | JSON_COMPACT);
	const char *want = "{\"cmd\":[\"--name\",\"it's\"],\"entrypoint\":[\"/bin/serve\"],\"env\":{\"A\":\"1\","
			   "\"B\":\"x y\"},\"expose\":[\"53/udp\",\"8000/tcp\"],\"labels\":{\"k\":\"v\"},\"source\":"
			   "\"Dockerfile in ";
	int same = j && !strncmp(j, want, strlen(want)) && strstr(j, "/ctx\",\"user\":\"1000\",\"workdir\":\"/\"}");
	T_ASSERT(same, "image %s", j ? j : "(null)");
	free(j);
	T_ASSERT(!strcmp(d.start, "exec '/bin/serve' '--name' 'it'\\''s'") && d.ready_port == 8000,
		 "start '%s' port %d", d.start, d.ready_port);
	T_ASSERT(d.steps == 0 && d.run == 0 && d.cached == 0, "%d steps", d.steps);
	dfbuild_close(&d);
	char got[8] = "";
	FILE *f = fopen(out, "r");
	T_ASSERT(f && fread(got, 1, 3, f) == 3 && !memcmp(got, "raw", 3), "root '%s'", got);
	fclose(f);
	return 0;
}

/* Two overlays over a raw image, written out raw: what the chain reads. */
static int chain_to_raw(void)
{
	char raw[512], l1[512], l2[512], out[512];
	snprintf(raw, sizeof raw, "%s/templates/raw.img", cfg.data_dir);
	snprintf(l1, sizeof l1, "%s/templates/l1", cfg.data_dir);
	snprintf(l2, sizeof l2, "%s/templates/l2", cfg.data_dir);
	snprintf(out, sizeof out, "%s/templates/out.img", cfg.data_dir);
	int fd = open(raw, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	T_ASSERT(fd >= 0 && ftruncate(fd, 4 << 20) == 0, "raw");
	T_ASSERT(pwrite(fd, "base", 4, 0) == 4 && pwrite(fd, "keep", 4, 3 << 20) == 4, "raw write");
	close(fd);
	T_ASSERT(overlay_create(l1, raw) == 0, "%s", errmsg());
	struct chain c;
	T_ASSERT(chain_open(&c, l1, true) == 0, "%s", errmsg());
	struct iovec a = { "one!", 4 }, b = { "mid", 3 };
	T_ASSERT(chain_writev(&c, &a, 1, 0) == 4 && chain_writev(&c, &b, 1, (1 << 20) + 5) == 3, "write l1");
	chain_flush(&c);
	chain_close(&c);
	T_ASSERT(overlay_set_sealed(l1, true) == 0 && overlay_create(l2, l1) == 0, "%s", errmsg());
	T_ASSERT(chain_open(&c, l2, true) == 0, "%s", errmsg());
	struct iovec z = { "two", 3 };
	T_ASSERT(chain_writev(&c, &z, 1, 1) == 3, "write l2");
	chain_flush(&c);
	chain_close(&c);
	T_ASSERT(disk_to_raw(cfg.data_dir, l2, NULL, out) == 0, "%s", errmsg());
	fd = open(out, O_RDONLY);
	char got[8] = "";
	struct stat st;
	T_ASSERT(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 4 << 20, "size %lld", (long long)st.st_size);
	T_ASSERT(pread(fd, got, 4, 0) == 4 && !memcmp(got, "otwo", 4), "offset 0: '%.4s'", got);
	T_ASSERT(pread(fd, got, 3, (1 << 20) + 5) == 3 && !memcmp(got, "mid", 3), "1 MiB: '%.3s'", got);
	T_ASSERT(pread(fd, got, 4, 3 << 20) == 4 && !memcmp(got, "keep", 4), "3 MiB: '%.4s'", got);
	close(fd);
	/* A layer below the top outside DATA/templates (and no extra root): refused. */
	char outside[512], top[512];
	snprintf(outside, sizeof outside, "%s/l-out", dir);
	snprintf(top, sizeof top, "%s/templates/top", cfg.data_dir);
	T_ASSERT(overlay_create(outside, raw) == 0 && overlay_set_sealed(outside, true) == 0 &&
		 overlay_create(top, outside) == 0, "%s", errmsg());
	unlink(out);
	T_ASSERT(disk_to_raw(cfg.data_dir, top, NULL, out) < 0, "a chain through %s written out", outside);
	T_ASSERT(access(out, F_OK) < 0, "a failed write left %s", out);
	return 0;
}

int main(void)
{
	char tmpl[] = "/tmp/unit-dfbuild-XXXXXX";
	if (!mkdtemp(tmpl))
		return 1;
	snprintf(dir, sizeof dir, "%s/ctx", tmpl);
	mkdir(dir, 0755);
	char p[512];
	snprintf(p, sizeof p, "%s/src", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/src/sub", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/bad", dir);
	mkdir(p, 0755);
	put("top", "top\n");
	put("src/a.txt", "a\n");
	put("src/sub/z", "z\n");
	snprintf(p, sizeof p, "%s/src/in", dir);
	symlink("../top", p);
	snprintf(p, sizeof p, "%s/out", dir);
	symlink("/etc/passwd", p);
	snprintf(p, sizeof p, "%s/bad/passwd", dir);
	symlink("/etc/passwd", p);
	snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s/data", tmpl);
	snprintf(cfg.images, sizeof cfg.images, "%s", tmpl);
	mkdir(cfg.data_dir, 0700);
	snprintf(p, sizeof p, "%s/templates", cfg.data_dir);
	mkdir(p, 0700);

	t_run("dfbuild_clean_paths", clean_paths);
	t_run("dfbuild_walk_and_symlinks", walk_and_symlinks);
	t_run("dfbuild_context_size_limit", size_limit);
	t_run("dfbuild_digests_and_keys", digests_and_keys);
	t_run("dfbuild_from_forms", from_forms);
	t_run("dfbuild_guest_paths", guest_paths);
	t_run("dfbuild_open_errors", open_errors);
	t_run("dfbuild_config_only", config_only);
	t_run("dfbuild_chain_to_raw", chain_to_raw);

	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
	if (system(cmd) != 0)
		return 1;
	return t_failed ? 1 : 0;
}
