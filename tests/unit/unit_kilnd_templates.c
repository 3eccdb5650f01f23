/*
 * The template registry with operator-built templates (src/host/template.c):
 * a template built from an image exists once a version is in `current`,
 * with the vCPUs, memory, description and image config of its manifest;
 * the compiled-in ones stay; names are checked; the image's Env goes under
 * a create's env and its WorkingDir is exec's default directory. No VM:
 * the version directories are written here as a build leaves them.
 */
#include "host/template.h"
#include "host/build_context.h"
#include "host/template_build.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"

static struct host_config cfg;
static struct templates *ts;

static int put_version(const char *name, int v, int vcpus, int mem, const char *image)
{
	char dir[512], path[600], link[600], target[16];
	snprintf(dir, sizeof dir, "%s/templates/%s", cfg.data_dir, name);
	mkdir(dir, 0700);
	snprintf(path, sizeof path, "%s/v%d", dir, v);
	mkdir(path, 0700);
	struct tmpl t = { .version = v, .vcpus = vcpus, .memory_mib = mem };
	snprintf(t.name, sizeof t.name, "%s", name);
	snprintf(t.dir, sizeof t.dir, "%s", path);
	snprintf(t.root, sizeof t.root, "%s/root.ext4", path);
	snprintf(t.base, sizeof t.base, "%s/layer", path);
	snprintf(t.snapdir, sizeof t.snapdir, "%s/snapshot", path);
	snprintf(t.description, sizeof t.description, "OCI image /srv/%s", name);
	t.image = image ? json_loads(image, 0, NULL) : NULL;
	int rc = tmpl_save_manifest(&t);
	tmpl_clear(&t);
	snprintf(link, sizeof link, "%s/current", dir);
	snprintf(target, sizeof target, "v%d", v);
	unlink(link);
	return rc ?: symlink(target, link);
}

static int names(void)
{
	T_ASSERT(template_name_ok("python-3_12") && template_name_ok("a") && template_name_ok("9lives"), "good");
	const char *bad[] = { "", "A", "-x", "_x", "a/b", "..", ".x", "a b", "abcdefghijklmnopqrstuvwxyz0123456", NULL };
	for (int i = 0; bad[i]; i++)
		T_ASSERT(!template_name_ok(bad[i]), "'%s' accepted", bad[i]);
	struct tmpl *t;
	T_ASSERT(templates_get(ts, "../etc", &t) == -EINVAL, "../etc");
	T_ASSERT(templates_get(ts, "nope", &t) == -EINVAL && strstr(errmsg(), "unknown template 'nope'"), "%s",
		 errmsg());
	T_ASSERT(templates_get(ts, "minimal", &t) == -EAGAIN && strstr(errmsg(), "is not built"), "%s", errmsg());
	return 0;
}

struct seen {
	char list[256];
	int myapp_vcpus, myapp_mem;
	char myapp_desc[160];
};

static int collect(void *ctx, const struct template_def *d, const struct tmpl *t)
{
	struct seen *s = ctx;
	size_t n = strlen(s->list);
	snprintf(s->list + n, sizeof s->list - n, "%s%s:%s", n ? " " : "", d->name, t ? "built" : "-");
	if (!strcmp(d->name, "myapp")) {
		s->myapp_vcpus = d->vcpus;
		s->myapp_mem = d->memory_mib;
		snprintf(s->myapp_desc, sizeof s->myapp_desc, "%s", d->description);
	}
	return 0;
}

static int operator_templates(void)
{
	T_ASSERT(put_version("myapp", 1, 4, 1024,
			     "{\"env\":{\"A\":\"img\",\"B\":\"img\"},\"workdir\":\"/srv/app\",\"user\":\"1000\","
			     "\"cmd\":[\"run\"]}") == 0, "%s", errmsg());
	T_ASSERT(put_version("zeta", 2, 1, 256, NULL) == 0, "%s", errmsg());
	/* A directory without `current` (a build that never finished) and
	 * a stray name are not templates. */
	char p[600];
	snprintf(p, sizeof p, "%s/templates/unfinished", cfg.data_dir);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/templates/Bad.Name", cfg.data_dir);
	mkdir(p, 0700);
	struct seen s;
	memset(&s, 0, sizeof s);
	T_ASSERT(templates_each(ts, collect, &s) == 0, "each");
	T_ASSERT(!strcmp(s.list, "minimal:- base:- code-interpreter:- postgres:- myapp:built zeta:built"), "listed: %s", s.list);
	T_ASSERT(s.myapp_vcpus == 4 && s.myapp_mem == 1024, "myapp %d vCPUs %d MiB", s.myapp_vcpus, s.myapp_mem);
	T_ASSERT(!strcmp(s.myapp_desc, "OCI image /srv/myapp"), "description '%s'", s.myapp_desc);
	struct tmpl *t;
	T_ASSERT(templates_get(ts, "unfinished", &t) == -EINVAL, "unfinished is a template");
	T_ASSERT(templates_get(ts, "myapp", &t) == 0, "%s", errmsg());
	T_ASSERT(t->vcpus == 4 && t->memory_mib == 1024 && t->version == 1, "myapp");
	/* The image's Env under the create's; WorkingDir. */
	char *env = tmpl_env_merge(t, "{\"B\":\"req\",\"C\":\"req\"}");
	T_ASSERT(env && !strcmp(env, "{\"A\":\"img\",\"B\":\"req\",\"C\":\"req\"}"), "env %s", env ? env : "(null)");
	free(env);
	env = tmpl_env_merge(t, NULL);
	T_ASSERT(env && !strcmp(env, "{\"A\":\"img\",\"B\":\"img\"}"), "env %s", env ? env : "(null)");
	free(env);
	T_ASSERT(tmpl_workdir(t) && !strcmp(tmpl_workdir(t), "/srv/app"), "workdir");
	tmpl_put(ts, t);
	T_ASSERT(templates_get(ts, "zeta", &t) == 0, "%s", errmsg());
	T_ASSERT(tmpl_env_merge(t, NULL) == NULL && tmpl_workdir(t) == NULL, "zeta has no image config");
	env = tmpl_env_merge(t, "{\"X\":\"1\"}");
	T_ASSERT(env && !strcmp(env, "{\"X\":\"1\"}"), "env %s", env ? env : "(null)");
	free(env);
	tmpl_put(ts, t);
	/* A new version in service is picked up. */
	T_ASSERT(put_version("myapp", 2, 8, 2048, NULL) == 0, "%s", errmsg());
	/* With its disk: the base's size rounded up to a MiB, what a create
	 * without disk_mib gets and GET /v1/templates says (v1 had none: 0). */
	snprintf(p, sizeof p, "%s/templates/myapp/v2/layer", cfg.data_dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	T_ASSERT(fd >= 0 && ftruncate(fd, (100 << 20) + 1) == 0, "%s", p);
	close(fd);
	T_ASSERT(templates_get(ts, "myapp", &t) == 0 && t->version == 2 && t->vcpus == 8, "v2 not in service");
	T_ASSERT(t->disk_mib == 101, "v2's disk_mib %lld, want 101", (long long)t->disk_mib);
	tmpl_put(ts, t);
	T_ASSERT(templates_get(ts, "zeta", &t) == 0 && t->disk_mib == 0, "zeta's disk_mib %lld", (long long)t->disk_mib);
	tmpl_put(ts, t);
	return 0;
}

/* `kilnd template build`'s refusals, and the image step of an OCI
 * build for real (the boot step then fails: no VMM is configured here). */
static int build_from_oci(void)
{
	struct build_opts bad[] = {
		{ .name = "Bad.Name", .oci = "/x" },
		{ .name = "newone" },
		{ .name = "newone", .oci = "/x", .image = "/y" },
		{ .name = "newone", .oci = "/x", .vcpus = 9 },
		{ .name = "newone", .oci = "/x", .memory_mib = 64 },
	};
	const char *why[] = { "bad template name 'Bad.Name'", "a new template is built from an image",
			      "--oci, --image and --dockerfile: give one", "--vcpus 9: want 1 to 8", "--memory 64: want 128" };
	for (int i = 0; i < 5; i++) {
		int rc = template_build(&cfg, &bad[i]);
		T_ASSERT(rc == -EINVAL && strstr(errmsg(), why[i]), "case %d: %d %s", i, rc, errmsg());
	}
	/* The fixture script, from build/tests or build/san/tests. */
	char self[4096], fixture[4200], cmd[9000], img[600], ref[700], man[600];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = 0;
	for (int up = 0; up < 3; up++) {
		*strrchr(self, '/') = 0;
		snprintf(fixture, sizeof fixture, "%s/../tests/unit/oci_fixture.py", self);
		if (access(fixture, R_OK) == 0)
			break;
	}
	snprintf(img, sizeof img, "%s/img", cfg.data_dir);
	snprintf(cmd, sizeof cmd, "mkdir -p %s/base/bin && printf '#!/x\n' > %s/base/bin/sh && chmod 755 %s/base/bin/sh && "
		 "python3 %s layout %s --base %s/base", cfg.data_dir, cfg.data_dir, cfg.data_dir, fixture, img,
		 cfg.data_dir);
	T_ASSERT(system(cmd) == 0, "fixture: %s", cmd);
	snprintf(ref, sizeof ref, "%s:v1", img);
	struct build_opts o = { .name = "fromoci", .oci = ref, .vcpus = 3, .memory_mib = 384 };
	int rc = template_build(&cfg, &o);
	T_ASSERT(rc < 0 && strstr(errmsg(), "step boot failed"), "%d %s", rc, errmsg());
	snprintf(man, sizeof man, "%s/templates/fromoci/v1", cfg.data_dir);
	struct tmpl t;
	T_ASSERT(tmpl_load(man, &t) == 0, "%s", errmsg());
	T_ASSERT(t.vcpus == 3 && t.memory_mib == 384, "%d vCPUs %d MiB", t.vcpus, t.memory_mib);
	json_t *env = json_object_get(t.image, "env");
	T_ASSERT(!strcmp(json_string_value(json_object_get(env, "KILN_OCI")), "layered"), "image env");
	T_ASSERT(!strcmp(json_string_value(json_object_get(t.image, "workdir")), "/keep"), "image workdir");
	T_ASSERT(!strncmp(t.description, "OCI image /", 11) && strstr(t.description, "/img:v1"), "%s", t.description);
	tmpl_clear(&t);
	snprintf(cmd, sizeof cmd, "debugfs -R 'cat /etc/new' %s/root.ext4 2>/dev/null | grep -qx new && "
		 "grep -qx image %s/progress", man, man);
	T_ASSERT(system(cmd) == 0, "root.ext4 or progress: %s", cmd);
	/* Resumed with other resources: refused; without: the image step is
	 * not redone. */
	o.vcpus = 2;
	rc = template_build(&cfg, &o);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "version 1 is being built with 3 vCPUs and 384 MiB"), "%s",
		 errmsg());
	o.vcpus = 0;
	o.memory_mib = 0;
	rc = template_build(&cfg, &o);
	T_ASSERT(rc < 0 && strstr(errmsg(), "step boot failed"), "%s", errmsg());
	snprintf(cmd, sizeof cmd, "test $(grep -cx image %s/progress) = 1", man);
	T_ASSERT(system(cmd) == 0, "the image step ran again");
	struct tmpl *tp;
	T_ASSERT(templates_get(ts, "fromoci", &tp) == -EINVAL, "an unfinished build is in service");
	/* A plan's template_mib: a root image taking more fails the image
	 * step, naming the limit (this one takes a few MiB of metadata). */
	struct build_opts small = { .name = "toobig", .oci = ref, .max_root_mib = 1 };
	rc = template_build(&cfg, &small);
	T_ASSERT(rc == -EFBIG && strstr(errmsg(), "step image failed: the root image takes ") &&
		 strstr(errmsg(), "more than its plan allows (template_mib 1)"), "%d %s", rc, errmsg());
	snprintf(cmd, sizeof cmd, "test ! -e %s/templates/toobig/v1/root.ext4 && test ! -e %s/templates/toobig/v1/root.ext4.tmp",
		 cfg.data_dir, cfg.data_dir);
	T_ASSERT(system(cmd) == 0, "the image is left: %s", cmd);
	/* --oci --disk: the root made at that size (mke2fs; no VM grows it),
	 * its filesystem the whole of it; the image of a few KiB would
	 * otherwise be 1 GiB and a little. */
	struct build_opts sized = { .name = "sized", .oci = ref, .disk_mib = 200 };
	rc = template_build(&cfg, &sized);
	T_ASSERT(rc < 0 && strstr(errmsg(), "step boot failed"), "%d %s", rc, errmsg());
	snprintf(cmd, sizeof cmd, "f=%s/templates/sized/v1/root.ext4; test $(stat -c %%s $f) = %d && "
		 "test $(dumpe2fs -h $f 2>/dev/null | sed -n 's/^Block count: *//p') -eq "
		 "$((%d / $(dumpe2fs -h $f 2>/dev/null | sed -n 's/^Block size: *//p'))) && "
		 "debugfs -R 'cat /etc/new' $f 2>/dev/null | grep -qx new",
		 cfg.data_dir, 200 << 20, 200 << 20);
	T_ASSERT(system(cmd) == 0, "the root is not 200 MiB: %s", cmd);
	return 0;
}

/* A Dockerfile FROM an OCI image in its context, with config steps only
 * (the disk steps need a VM: tests/e2e/88): the image step unpacks it
 * into the step cache once, the manifest has the OCI config with the
 * Dockerfile's ENV over it, and a second build takes the cached image. */
static int build_dockerfile_from_oci(void)
{
	char cmd[2000], man[600];
	snprintf(cmd, sizeof cmd, "mkdir -p %s/ctx && cp -r %s/img %s/ctx/img && printf 'FROM oci:img:v1\\n"
		 "ENV EXTRA=1 KILN_OCI=over\\nLABEL a=b\\n' > %s/ctx/Dockerfile", cfg.data_dir, cfg.data_dir,
		 cfg.data_dir, cfg.data_dir);
	T_ASSERT(system(cmd) == 0, "%s", cmd);
	char ctx[600];
	snprintf(ctx, sizeof ctx, "%s/ctx", cfg.data_dir);
	struct build_opts o = { .name = "fromdf", .dockerfile = ctx };
	int rc = template_build(&cfg, &o);
	T_ASSERT(rc < 0 && strstr(errmsg(), "step boot failed"), "%d %s", rc, errmsg());
	snprintf(man, sizeof man, "%s/templates/fromdf/v1", cfg.data_dir);
	struct tmpl t;
	T_ASSERT(tmpl_load(man, &t) == 0, "%s", errmsg());
	json_t *env = json_object_get(t.image, "env");
	T_ASSERT(!strcmp(json_string_value(json_object_get(env, "KILN_OCI")), "over") &&
		 !strcmp(json_string_value(json_object_get(env, "EXTRA")), "1"), "image env");
	T_ASSERT(!strcmp(json_string_value(json_object_get(t.image, "workdir")), "/keep"), "image workdir");
	T_ASSERT(!strcmp(json_string_value(json_object_get(json_object_get(t.image, "labels"), "a")), "b"), "label");
	T_ASSERT(strstr(t.description, "Dockerfile in ") && !t.start[0], "%s / start '%s'", t.description, t.start);
	tmpl_clear(&t);
	snprintf(cmd, sizeof cmd, "debugfs -R 'cat /etc/new' %s/root.ext4 2>/dev/null | grep -qx new && "
		 "test $(ls %s/templates/.cache/*.ext4 | wc -l) = 1", man, cfg.data_dir);
	T_ASSERT(system(cmd) == 0, "root.ext4 or the cache: %s", cmd);
	/* Again from the start: the unpacked image comes from the cache. */
	o.restart = true;
	char log[700];
	snprintf(log, sizeof log, "%s/df2.log", cfg.data_dir);
	fflush(stderr);
	int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 2);
	rc = template_build(&cfg, &o);
	dup2(saved, 2);
	close(saved);
	close(fd);
	T_ASSERT(rc < 0 && strstr(errmsg(), "step boot failed"), "%d %s", rc, errmsg());
	snprintf(cmd, sizeof cmd, "grep -q 'unpacked before (cached)' %s && ! grep -q unpacking %s", log, log);
	T_ASSERT(system(cmd) == 0, "the OCI image was unpacked again");
	/* --disk: an --image file's is grown in the template VM, so not with
	 * --no-snapshot, and never below the image (a sparse 128 MiB one
	 * here); at least 64 MiB, never below the FROM image (the OCI root
	 * here is over 1 GiB), and grown only in a build VM, which a
	 * config-only Dockerfile never boots (tests/e2e/88 grows both for
	 * real). */
	char big_img[600];
	snprintf(big_img, sizeof big_img, "%s/big.img", cfg.data_dir);
	snprintf(cmd, sizeof cmd, "truncate -s 128M %s", big_img);
	T_ASSERT(system(cmd) == 0, "%s", cmd);
	struct build_opts bad[] = {
		{ .name = "disk1", .image = "/x", .disk_mib = 512, .no_snapshot = true },
		{ .name = "disk1", .dockerfile = ctx, .disk_mib = 10 },
		{ .name = "disk1", .dockerfile = ctx, .disk_mib = 4096 },
		{ .name = "disk2", .dockerfile = ctx, .disk_mib = 100 },
		{ .name = "disk3", .image = big_img, .disk_mib = 64 },
	};
	const char *why[] = { "--disk with --image or a compiled-in image grows the root filesystem in the template "
			      "VM, which --no-snapshot discards", "--disk 10: want 64 to ",
			      "--disk 4096: the root is grown in the build VM, which a RUN, COPY, ADD or WORKDIR step "
			      "boots; this Dockerfile has none",
			      "--disk 100: smaller than the FROM image's ",
			      "--disk 64: smaller than the image's 128 MiB (a root is never shrunk)" };
	for (int i = 0; i < 5; i++) {
		if (i == 3) {
			snprintf(cmd, sizeof cmd, "printf 'FROM oci:img:v1\\nRUN true\\n' > %s/Dockerfile", ctx);
			T_ASSERT(system(cmd) == 0, "%s", cmd);
		}
		rc = template_build(&cfg, &bad[i]);
		T_ASSERT(rc == -EINVAL && strstr(errmsg(), why[i]), "case %d: %d %s", i, rc, errmsg());
	}
	return 0;
}

/* Whether the build logged in DATA/LOG.log took suite's image from the
 * cache and ran no builder (cmd: the check, for the failure message). */
static bool from_cache(const char *suite, const char *log, char *cmd, size_t cap)
{
	snprintf(cmd, cap, "grep -q 'FROM debian:%s: built before (cached)' %s/%s.log && "
		 "! grep -q 'running ' %s/%s.log", suite, cfg.data_dir, log, cfg.data_dir, log);
	return system(cmd) == 0;
}

/* Run a template build with its log (stderr) into DATA/NAME.log. */
static int build_logged(struct build_opts *o, const char *name)
{
	char log[700];
	snprintf(log, sizeof log, "%s/%s.log", cfg.data_dir, name);
	fflush(stderr);
	int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 2);
	int rc = template_build(&cfg, o);
	dup2(saved, 2);
	close(saved);
	close(fd);
	return rc;
}

/* A Dockerfile FROM debian:SUITE with config steps only. Quick: without
 * an image builder the build says so; a suite built before is taken from
 * the step cache (.cache/KEY.ext4, put there as a build leaves it), no
 * builder run. Full tier (network, minutes): images/build-rootfs-debian
 * for real, trixie through this machine's (bookworm) apt sources, once:
 * the second build takes the cache. */
static int build_dockerfile_from_debian(void)
{
	char cmd[3000], ctx[600], man[600], key[65], builders[600];
	snprintf(ctx, sizeof ctx, "%s/debctx", cfg.data_dir);
	snprintf(cmd, sizeof cmd, "mkdir -p %s && printf 'FROM debian:bookworm\nENV DEB=1\n' > %s/Dockerfile", ctx, ctx);
	T_ASSERT(system(cmd) == 0, "%s", cmd);
	char saved[sizeof cfg.image_builders];
	memcpy(saved, cfg.image_builders, sizeof saved);
	snprintf(builders, sizeof builders, "%s/no-builders", cfg.data_dir);
	mkdir(builders, 0700);
	snprintf(cfg.image_builders, sizeof cfg.image_builders, "%s", builders);
	struct build_opts o = { .name = "fromdeb", .dockerfile = ctx };
	int rc = build_logged(&o, "deb0");
	T_ASSERT(rc == -ENOENT && strstr(errmsg(), "FROM debian:bookworm: no image builder ") &&
		 strstr(errmsg(), "/build-rootfs-debian"), "%d %s", rc, errmsg());
	/* The suite's image as a build of it leaves it in the cache. */
	bctx_step_key("", "debian", "bookworm", key);
	snprintf(cmd, sizeof cmd, "mkdir -p %s/suite/bin %s/suite/etc && printf '#!/x\n' > %s/suite/bin/sh && "
		 "chmod 755 %s/suite/bin/sh && echo VERSION_CODENAME=bookworm > %s/suite/etc/os-release && "
		 "mke2fs -q -t ext4 -d %s/suite %s/templates/.cache/%s.ext4 8M >/dev/null && chmod 444 %s/templates/.cache/%s.ext4",
		 cfg.data_dir, cfg.data_dir, cfg.data_dir, cfg.data_dir, cfg.data_dir, cfg.data_dir, cfg.data_dir, key,
		 cfg.data_dir, key);
	T_ASSERT(system(cmd) == 0, "%s", cmd);
	o.restart = true;
	rc = build_logged(&o, "deb1");
	T_ASSERT(rc < 0 && strstr(errmsg(), "step boot failed"), "%d %s", rc, errmsg());
	T_ASSERT(from_cache("bookworm", "deb1", cmd, sizeof cmd), "not taken from the cache: %s", cmd);
	snprintf(man, sizeof man, "%s/templates/fromdeb/v1", cfg.data_dir);
	struct tmpl t;
	T_ASSERT(tmpl_load(man, &t) == 0, "%s", errmsg());
	T_ASSERT(!strcmp(json_string_value(json_object_get(json_object_get(t.image, "env"), "DEB")), "1"), "env");
	tmpl_clear(&t);
	snprintf(cmd, sizeof cmd, "debugfs -R 'cat /etc/os-release' %s/root.ext4 2>/dev/null | "
		 "grep -qx VERSION_CODENAME=bookworm", man);
	T_ASSERT(system(cmd) == 0, "root.ext4 is not the suite's image: %s", cmd);
	memcpy(cfg.image_builders, saved, sizeof saved);

	if (!getenv("KILN_TEST_FULL") || strcmp(getenv("KILN_TEST_FULL"), "1")) {
		printf("SKIP build_dockerfile_from_debian (mmdebstrap of trixie): the full tier (KILN_TEST_FULL=1) "
		       "runs it; it needs this machine's apt mirrors\n");
		return 0;
	}
	/* images/, beside build/ (or build/san). */
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = 0;
	for (int up = 0; up < 3; up++) {
		*strrchr(self, '/') = 0;
		snprintf(cfg.image_builders, sizeof cfg.image_builders, "%s/../images", self);
		snprintf(cmd, sizeof cmd, "%s/build-rootfs-debian", cfg.image_builders);
		if (access(cmd, X_OK) == 0)
			break;
	}
	snprintf(cmd, sizeof cmd, "printf 'FROM debian:trixie\nENV DEB=2\n' > %s/Dockerfile", ctx);
	T_ASSERT(system(cmd) == 0, "%s", cmd);
	struct build_opts o2 = { .name = "fromtrixie", .dockerfile = ctx };
	rc = build_logged(&o2, "trixie1");
	if (rc < 0) {	/* the builder's log says why */
		snprintf(cmd, sizeof cmd, "grep -v '^I: ' %s/templates/.cache/*.log | tail -25 >&2", cfg.data_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "(no builder log)\n");
	}
	T_ASSERT(rc < 0 && strstr(errmsg(), "step boot failed"), "%d %s", rc, errmsg());
	snprintf(man, sizeof man, "%s/templates/fromtrixie/v1", cfg.data_dir);
	bctx_step_key("", "debian", "trixie", key);
	snprintf(cmd, sizeof cmd, "debugfs -R 'cat /usr/lib/os-release' %s/root.ext4 2>/dev/null | grep -qx "
		 "VERSION_CODENAME=trixie && debugfs -R 'stat /usr/bin/python3' %s/root.ext4 2>/dev/null | grep -q Inode && "
		 "test -s %s/templates/.cache/%s.ext4 && grep -q 'running .*build-rootfs-debian' %s/trixie1.log",
		 man, man, cfg.data_dir, key, cfg.data_dir);
	T_ASSERT(system(cmd) == 0, "trixie's image: %s", cmd);
	o2.restart = true;
	rc = build_logged(&o2, "trixie2");
	T_ASSERT(rc < 0 && strstr(errmsg(), "step boot failed"), "%d %s", rc, errmsg());
	T_ASSERT(from_cache("trixie", "trixie2", cmd, sizeof cmd), "built again: %s", cmd);
	/* A suite the mirrors do not have: the builder's failure, its log named. */
	snprintf(cmd, sizeof cmd, "printf 'FROM debian:nosuchsuite\n' > %s/Dockerfile", ctx);
	T_ASSERT(system(cmd) == 0, "%s", cmd);
	struct build_opts o3 = { .name = "fromnone", .dockerfile = ctx };
	rc = build_logged(&o3, "none");
	T_ASSERT(rc < 0 && strstr(errmsg(), "FROM debian:nosuchsuite: the image builder failed") &&
		 strstr(errmsg(), ".log"), "%d %s", rc, errmsg());
	bctx_step_key("", "debian", "nosuchsuite", key);
	snprintf(cmd, sizeof cmd, "test ! -e %s/templates/.cache/%s.ext4 && test ! -e %s/templates/.cache/%s.ext4.tmp",
		 cfg.data_dir, key, cfg.data_dir, key);
	T_ASSERT(system(cmd) == 0, "a failed suite left an image: %s", cmd);
	memcpy(cfg.image_builders, saved, sizeof saved);
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/kiln-tmpl-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", dir);
	cfg.net = false;
	char p[600];
	snprintf(p, sizeof p, "%s/templates", dir);
	mkdir(p, 0700);
	if (templates_open(&cfg, &ts) < 0)
		return 1;
	T_RUN(names);
	T_RUN(operator_templates);
	T_RUN(build_from_oci);
	T_RUN(build_dockerfile_from_oci);
	T_RUN(build_dockerfile_from_debian);
	templates_close(ts);
	snprintf(p, sizeof p, "rm -rf %s", dir);
	if (system(p) != 0)
		return 1;
	return t_failed ? 1 : 0;
}
