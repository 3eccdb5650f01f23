/*
 * OCI images into a root tree (src/host/oci.c) and that tree into an ext4
 * root image (src/host/rootfs.c), for real: tests/unit/oci_fixture.py
 * writes each image with real sha256 digests, oci_unpack unpacks it, and
 * the tree is checked file by file. The hostile images must each be
 * refused with a message naming what is wrong, and leave nothing outside
 * the root (a directory "outside" the layers aim at stays empty).
 */
#include "host/oci.h"
#include "host/rootfs.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

static char fixture[4200], tmp[256], outside[300];

static void find_fixture(void)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = 0;
	/* From build/tests or build/san/tests. */
	for (int up = 0; up < 3; up++) {
		char *s = strrchr(self, '/');
		if (s)
			*s = 0;
		snprintf(fixture, sizeof fixture, "%s/../tests/unit/oci_fixture.py", self);
		if (access(fixture, R_OK) == 0)
			return;
	}
	snprintf(fixture, sizeof fixture, "tests/unit/oci_fixture.py");
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A fresh root, scratch and image for one case. */
static int make_case(const char *kind, char *image, size_t cap)
{
	sh("rm -rf %s/root %s/scratch %s/img*", tmp, tmp, tmp);
	snprintf(image, cap, "%s/img-%s", tmp, kind);
	char root[300], scratch[300];
	snprintf(root, sizeof root, "%s/root", tmp);
	snprintf(scratch, sizeof scratch, "%s/scratch", tmp);
	mkdir(root, 0755);
	mkdir(scratch, 0700);
	return sh("python3 %s %s %s --outside %s", fixture, kind, image, outside);
}

static int unpack(const char *image, uint64_t max, struct oci_config *cfg, struct oci_stats *st)
{
	char root[300], scratch[300];
	snprintf(root, sizeof root, "%s/root", tmp);
	snprintf(scratch, sizeof scratch, "%s/scratch", tmp);
	return oci_unpack(image, root, scratch, max, cfg, st);
}

static char buf[4096];

/* The file's content ("" and errno set if none). */
static const char *content(const char *rel)
{
	char p[600];
	snprintf(p, sizeof p, "%s/root/%s", tmp, rel);
	buf[0] = 0;
	int fd = open(p, O_RDONLY | O_NOFOLLOW);
	if (fd < 0)
		return buf;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fd);
	return buf;
}

static int lstat_rel(const char *rel, struct stat *sb)
{
	char p[600];
	snprintf(p, sizeof p, "%s/root/%s", tmp, rel);
	return lstat(p, sb);
}

static bool exists(const char *rel)
{
	struct stat sb;
	return lstat_rel(rel, &sb) == 0;
}

static bool outside_empty(void)
{
	return sh("test -z \"$(ls -A %s)\"", outside) == 0;
}

#define GB (1ULL << 30)

static int check_tree(void)
{
	struct stat sb;
	/* Layer 2's whiteouts: etc/old and del/ are gone, opq/ holds only c. */
	T_ASSERT(!exists("etc/old"), "etc/old survived its whiteout");
	T_ASSERT(!exists("del"), "del/ survived .wh.del");
	T_ASSERT(!exists("opq/a") && !exists("opq/sub"), "opq/ kept lower entries under an opaque marker");
	T_ASSERT(!strcmp(content("opq/c"), "c\n"), "opq/c: '%s'", buf);
	T_ASSERT(!exists("etc/.wh.old") && !exists(".wh.del") && !exists("opq/.wh..wh..opq") &&
		 !exists("keep/.wh.nothing"), "a whiteout marker was written");
	/* Replaced, added and kept files. */
	T_ASSERT(!strcmp(content("etc/over"), "two\n"), "etc/over: '%s'", buf);
	T_ASSERT(!strcmp(content("etc/new"), "new\n"), "etc/new: '%s'", buf);
	T_ASSERT(!strcmp(content("keep/k"), "kept\n"), "keep/k: '%s'", buf);
	T_ASSERT(lstat_rel("bin/tool", &sb) == 0 && (sb.st_mode & 07777) == 0755, "bin/tool mode %o",
		 sb.st_mode & 07777);
	T_ASSERT(sb.st_mtime == 1700000000, "bin/tool mtime %ld", (long)sb.st_mtime);
	/* A symlink, a hard link, a FIFO; the device is not made. */
	char target[64] = "";
	char p[600];
	snprintf(p, sizeof p, "%s/root/link", tmp);
	ssize_t n = readlink(p, target, sizeof target - 1);
	target[n > 0 ? n : 0] = 0;
	T_ASSERT(!strcmp(target, "keep/k"), "link -> '%s'", target);
	struct stat k;
	T_ASSERT(lstat_rel("hard", &sb) == 0 && lstat_rel("keep/k", &k) == 0 && sb.st_ino == k.st_ino,
		 "hard is not a hard link of keep/k");
	T_ASSERT(lstat_rel("fifo", &sb) == 0 && S_ISFIFO(sb.st_mode), "fifo");
	T_ASSERT(lstat_rel("dev", &sb) == 0 && !exists("dev/null"), "dev/null was created");
	T_ASSERT(lstat_rel("empty", &sb) == 0 && S_ISDIR(sb.st_mode), "empty/");
	return 0;
}

static int check_config(const struct oci_config *cfg)
{
	T_ASSERT(cfg->env && strstr(cfg->env, "\"KILN_OCI\":\"layered\"") && strstr(cfg->env, "\"EMPTY\":\"\""),
		 "env %s", cfg->env ? cfg->env : "(null)");
	T_ASSERT(cfg->workdir && !strcmp(cfg->workdir, "/keep"), "workdir");
	T_ASSERT(cfg->user && !strcmp(cfg->user, "0:0"), "user");
	T_ASSERT(cfg->cmd && !strcmp(cfg->cmd, "[\"echo hello from oci\"]"), "cmd %s", cfg->cmd);
	T_ASSERT(cfg->entrypoint && !strcmp(cfg->entrypoint, "[\"/bin/sh\",\"-c\"]"), "entrypoint %s",
		 cfg->entrypoint);
	return 0;
}

static int layout_two_layers(void)
{
	char image[400];
	T_ASSERT(make_case("layout", image, sizeof image) == 0, "fixture");
	struct oci_config cfg;
	struct oci_stats st;
	T_ASSERT(unpack(image, GB, &cfg, &st) == 0, "%s", errmsg());
	T_ASSERT(st.layers == 2 && st.devices_skipped == 1, "layers %d devices %ld", st.layers,
		 st.devices_skipped);
	int rc = check_tree() ?: check_config(&cfg);
	oci_config_free(&cfg);
	if (rc)
		return rc;
	long entries = st.entries;
	unsigned long long bytes = st.bytes;
	/* By its tag, too; a wrong tag names the ones there are. */
	char ref[500];
	sh("rm -rf %s/root && mkdir %s/root", tmp, tmp);
	snprintf(ref, sizeof ref, "%s:v1", image);
	T_ASSERT(unpack(ref, GB, &cfg, &st) == 0, "%s", errmsg());
	oci_config_free(&cfg);
	snprintf(ref, sizeof ref, "%s:nope", image);
	T_ASSERT(unpack(ref, GB, &cfg, &st) == -ENOENT && strstr(errmsg(), "no image tagged 'nope' (tags: v1)"),
		 "%s", errmsg());
	T_NOTE("%ld entries, %llu bytes counted", entries, bytes);
	return 0;
}

/* The image of kind, by ref IMAGE + tag, unpacks to the two layers' tree. */
static int whole_image(const char *kind, const char *tag)
{
	char image[400], ref[500];
	T_ASSERT(make_case(kind, image, sizeof image) == 0, "fixture");
	struct oci_config cfg;
	struct oci_stats st;
	snprintf(ref, sizeof ref, "%s%s", image, tag);
	T_ASSERT(unpack(ref, GB, &cfg, &st) == 0, "%s", errmsg());
	int rc = check_tree() ?: check_config(&cfg);
	oci_config_free(&cfg);
	return rc;
}

static int oci_archive(void) { return whole_image("archive", ""); }
static int docker_save_archive(void) { return whole_image("docker", ":v1"); }

static int two_images_need_a_tag(void)
{
	char image[400], ref[500];
	T_ASSERT(make_case("two-tags", image, sizeof image) == 0, "fixture");
	struct oci_config cfg;
	struct oci_stats st;
	int rc = unpack(image, GB, &cfg, &st);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "holds 2 images: name one as PATH:TAG (tags: v1, "
					 "example.com/img:v2)"), "%d %s", rc, errmsg());
	snprintf(ref, sizeof ref, "%s:v2", image);
	T_ASSERT(unpack(ref, GB, &cfg, &st) == 0, "%s", errmsg());
	T_ASSERT(!strcmp(content("which"), "two\n"), "which: %s", buf);
	oci_config_free(&cfg);
	return 0;
}

/* A hostile image is refused with want in the message, nothing outside. */
static int refused(const char *kind, uint64_t max, const char *want)
{
	char image[400];
	T_ASSERT(make_case(kind, image, sizeof image) == 0, "fixture %s", kind);
	struct oci_config cfg;
	struct oci_stats st;
	int rc = unpack(image, max, &cfg, &st);
	T_ASSERT(rc < 0, "%s: accepted", kind);
	T_ASSERT(strstr(errmsg(), want), "%s: message '%s' lacks '%s'", kind, errmsg(), want);
	T_ASSERT(outside_empty(), "%s: something was written outside the root", kind);
	T_ASSERT(sh("test ! -e %s/escaped && test ! -e %s/../escaped", tmp, tmp) == 0, "%s: escaped", kind);
	T_ASSERT(cfg.env == NULL, "config kept after a failure");
	return 0;
}

static int hostile_dotdot(void) { return refused("dotdot", GB, "entry 'a/../../escaped': '..' in the path"); }
static int hostile_absolute(void) { return refused("absolute", GB, "': an absolute path"); }
static int hostile_symlink(void) { return refused("symlink-escape", GB, "layer 2 (sha256:") ?: refused("symlink-escape", GB, "entry 'evil/pwned' goes through a symlink"); }
static int hostile_hardlink(void) { return refused("hardlink-escape", GB, "'..' in the path"); }
static int hostile_whiteout(void) { return refused("whiteout-escape", GB, "whiteout 'keep/.wh..': a bad name"); }
static int hostile_digest(void) { return refused("digest", GB, "layer 1 (sha256:") ?: refused("digest", GB, ": digest mismatch (its content hashes to sha256:"); }
static int hostile_size(void) { return refused("size", GB, "bytes, the manifest says"); }
static int hostile_truncated(void) { return refused("truncated", GB, "layer 1 (sha256:") ?: refused("truncated", GB, "truncated or corrupt"); }
static int hostile_truncated_archive(void) { return refused("truncated-archive", GB, "truncated or corrupt"); }
static int hostile_device_in_archive(void) { return refused("device-in-archive", GB, "only files, directories and symlinks may be in an image archive"); }
static int hostile_big(void) { return refused("big", 2 << 20, "the image unpacks to more than 2 MiB (the limit)"); }

/* The tree made ready for the guest and written into an ext4 image,
 * read back with debugfs. */
static int ext4_image(void)
{
	char image[400], root[300], ext4[300], log[300];
	T_ASSERT(make_case("layout", image, sizeof image) == 0, "fixture");
	struct oci_config cfg;
	struct oci_stats st;
	T_ASSERT(unpack(image, GB, &cfg, &st) == 0, "%s", errmsg());
	oci_config_free(&cfg);
	snprintf(root, sizeof root, "%s/root", tmp);
	struct stat sb;
	/* No shell: refused with the reason. */
	int rc = rootfs_for_guest(root, NULL);
	T_ASSERT(rc == -ENOENT && strstr(errmsg(), "no executable /bin/sh"), "%s", errmsg());
	T_ASSERT(sh("ln -s tool %s/bin/sh", root) == 0, "ln");
	/* The WorkingDir is made, but not through a symlink. */
	T_ASSERT(sh("ln -s %s %s/out", outside, root) == 0, "ln");
	T_ASSERT(rootfs_for_guest(root, "/srv/app/") == 0, "%s", errmsg());
	T_ASSERT(lstat_rel("srv/app", &sb) == 0 && S_ISDIR(sb.st_mode), "WorkingDir not made");
	T_ASSERT(rootfs_for_guest(root, "/out/sub") == 0 && outside_empty(), "WorkingDir through a symlink");
	rc = rootfs_for_guest(root, "/a/../b");
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "has '..'"), "%s", errmsg());
	unlink(strcat(strcpy(buf, root), "/out"));
	T_ASSERT(!strcmp(content("etc/hostname"), "kiln\n") && exists("proc") && exists("sys") &&
		 exists("run") && exists("tmp"), "mount points or hostname missing");
	T_ASSERT(lstat_rel("tmp", &sb) == 0 && (sb.st_mode & 07777) == 01777, "tmp mode %o", sb.st_mode & 07777);
	/* An /etc that is a symlink is refused, not written through. */
	snprintf(ext4, sizeof ext4, "%s/root.ext4", tmp);
	snprintf(log, sizeof log, "%s/mke2fs.log", tmp);
	/* A --disk too small for the files is refused, naming both sizes. */
	rc = rootfs_make_ext4(root, ext4, 300 << 20, st.entries, 64, log);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "--disk 64: the image's files need 376 MiB (their 300 MiB"), "%d %s",
		 rc, errmsg());
	T_ASSERT(rootfs_make_ext4(root, ext4, st.bytes, st.entries, 0, log) == 0, "%s", errmsg());
	T_ASSERT(sh("debugfs -R 'cat /etc/new' %s 2>/dev/null | grep -qx new", ext4) == 0, "etc/new in the image");
	T_ASSERT(sh("debugfs -R 'cat /opq/c' %s 2>/dev/null | grep -qx c", ext4) == 0, "opq/c in the image");
	T_ASSERT(sh("debugfs -R 'stat /etc/old' %s 2>&1 | grep -q 'File not found'", ext4) == 0,
		 "etc/old in the image");
	T_ASSERT(sh("debugfs -R 'stat /link' %s 2>/dev/null | grep -q 'Fast link dest: \"keep/k\"'", ext4) == 0,
		 "link in the image");
	sh("rm -rf %s/etc && ln -s %s %s/etc", root, outside, root);
	rc = rootfs_for_guest(root, NULL);
	T_ASSERT(rc < 0 && strstr(errmsg(), "the image's /etc: a symlink"), "%s", errmsg());
	T_ASSERT(outside_empty(), "wrote through /etc");
	return 0;
}

int main(void)
{
	find_fixture();
	snprintf(tmp, sizeof tmp, "/tmp/kiln-oci-XXXXXX");
	if (!mkdtemp(tmp))
		return 1;
	snprintf(outside, sizeof outside, "%s/outside", tmp);
	mkdir(outside, 0755);
	T_RUN(layout_two_layers);
	T_RUN(oci_archive);
	T_RUN(docker_save_archive);
	T_RUN(two_images_need_a_tag);
	T_RUN(hostile_dotdot);
	T_RUN(hostile_absolute);
	T_RUN(hostile_symlink);
	T_RUN(hostile_hardlink);
	T_RUN(hostile_whiteout);
	T_RUN(hostile_digest);
	T_RUN(hostile_size);
	T_RUN(hostile_truncated);
	T_RUN(hostile_truncated_archive);
	T_RUN(hostile_device_in_archive);
	T_RUN(hostile_big);
	T_RUN(ext4_image);
	sh("rm -rf %s", tmp);
	return t_failed ? 1 : 0;
}
