/*
 * dfbuild: a template's root image from a Dockerfile (see dfbuild.h).
 * This file: FROM, opening the build (the Dockerfile, the context, the
 * cache's lock) and the run that drives the steps over the cache and the
 * build VM (dfbuild_int.h names the other files).
 */
#include "host/dfbuild_int.h"
#include "host/disk.h"
#include "host/fsutil.h"
#include "host/host_config.h"
#include "host/proc.h"
#include "host/template.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void df_note(struct dfbuild *d, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (d->progress)
		d->progress(d->pctx, msg);
}

/* A path built from parts; too long: -ENAMETOOLONG. */
int df_pathf(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? errf(ENAMETOOLONG, "path too long: %.100s...", out) : 0;
}

/* ---- FROM ------------------------------------------------------------------------------ */

int dfbuild_from(const char *image, char *kind, const char **rest)
{
	if (!strncmp(image, "kiln/", 5) && image[5]) {
		*kind = 't';
		*rest = image + 5;
		return 0;
	}
	if (!strncmp(image, "oci:", 4) && image[4]) {
		*kind = 'o';
		*rest = image + 4;
		return 0;
	}
	if (!strncmp(image, "debian:", 7)) {
		*kind = 'd';
		*rest = image + 7;
		return dfbuild_suite_ok(*rest) ? 0 : errf(EINVAL, "FROM %.200s: not a Debian suite (a codename "
				"such as bookworm or trixie: a-z, then a-z, 0-9 or '-', at most %d)", image, DF_SUITE_MAX);
	}
	return errf(EINVAL, "FROM %.200s: kiln builds FROM kiln/TEMPLATE (a template's image, e.g. "
			    "kiln/minimal), oci:PATH[:TAG] (an OCI layout or archive in the build "
			    "context) or debian:SUITE (built with mmdebstrap); images are not pulled from a "
			    "registry", image);
}

/* A suite name goes on the builder's command line and into a sed
 * expression there: only a codename's characters. */
bool dfbuild_suite_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > DF_SUITE_MAX || s[0] < 'a' || s[0] > 'z')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* The identity of a file for the cache key: where it is and which inode
 * at which size and time (a rebuilt template's root is a new file). */
static void file_identity(const char *path, const struct stat *st, char *out, size_t cap)
{
	snprintf(out, cap, "%s %llu %llu %lld.%09ld", path, (unsigned long long)st->st_ino,
		 (unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

static int from_template(struct dfbuild *d, const char *name, int line)
{
	if (!template_name_ok(name) && !template_def_find(name))
		return errf(EINVAL, "line %d: FROM kiln/%.64s: not a template name", line, name);
	char link[PATH_MAX], dir[PATH_MAX];
	snprintf(link, sizeof link, "%s/templates/%s/current", d->cfg->data_dir, name);
	if (realpath(link, dir)) {
		struct tmpl t;
		int rc = tmpl_load(dir, &t);
		if (rc < 0)
			return errf(-rc, "line %d: FROM kiln/%s: %s", line, name, errmsg());
		snprintf(d->base, sizeof d->base, "%s", t.root);
		d->base_image = t.image ? json_deep_copy(t.image) : NULL;
		tmpl_clear(&t);
	} else if (template_def_find(name)) {
		if (df_pathf(d->base, sizeof d->base, "%s/rootfs-%s.ext4", d->cfg->images, name) < 0)
			return -ENAMETOOLONG;
	} else {
		return errf(ENOENT, "line %d: FROM kiln/%.64s: no such template (build it first)", line, name);
	}
	char real[PATH_MAX];
	struct stat st;
	if (!realpath(d->base, real) || stat(real, &st) < 0 || !S_ISREG(st.st_mode))
		return errf(ENOENT, "line %d: FROM kiln/%s: its root image %s is missing", line, name, d->base);
	snprintf(d->base, sizeof d->base, "%s", real);
	char id[PATH_MAX + 100];
	file_identity(real, &st, id, sizeof id);
	bctx_step_key("", "template", id, d->from_key);
	return 0;
}

/* FROM oci:PATH[:TAG]: PATH inside the context. Its key hashes what the
 * image is: an archive's bytes, or a layout's index.json (which names
 * everything else by digest, and the unpacking checks every digest). */
static int from_oci(struct dfbuild *d, const char *ref, int line)
{
	char path[PATH_MAX], clean[PATH_MAX];
	snprintf(path, sizeof path, "%s", ref);
	char *tag = strrchr(path, ':');
	if (tag && strchr(tag, '/'))
		tag = NULL;
	if (tag)
		*tag++ = 0;
	int rc = bctx_clean(path, clean, sizeof clean);
	if (rc == 0 && bctx_ignored(&d->bc, clean))
		rc = errf(ENOENT, "'%.200s' is excluded by .dockerignore", clean);
	int fd = rc < 0 ? rc : bctx_openat(&d->bc, clean, O_RDONLY);
	if (fd < 0)
		return errf(-fd, "line %d: FROM oci:%.200s: %s", line, ref, errmsg());
	struct stat st;
	fstat(fd, &st);
	close(fd);
	const char *hashed = clean;
	char index[PATH_MAX + 16];
	if (S_ISDIR(st.st_mode)) {
		snprintf(index, sizeof index, "%s/index.json", clean);
		hashed = index;
	}
	const char *srcs[] = { hashed };
	char digest[65];
	if ((rc = bctx_digest(&d->bc, srcs, 1, digest)) < 0)
		return errf(-rc, "line %d: FROM oci:%.200s: %s", line, ref, errmsg());
	char id[200];
	snprintf(id, sizeof id, "%s %s", digest, tag ? tag : "");
	bctx_step_key("", "oci", id, d->from_key);
	if (tag)
		return df_pathf(d->from_oci, sizeof d->from_oci, "%s/%s:%s", d->bc.dir, clean, tag);
	return df_pathf(d->from_oci, sizeof d->from_oci, "%s/%s", d->bc.dir, clean);
}

/* FROM debian:SUITE: the caller builds it (once: the cache keeps it by
 * this key) through the machine's apt sources. */
static void from_debian(struct dfbuild *d, const char *suite)
{
	snprintf(d->from_debian, sizeof d->from_debian, "%s", suite);
	bctx_step_key("", "debian", suite, d->from_key);
}

/* ---- open ------------------------------------------------------------------------------ */

int dfbuild_open(struct dfbuild *d)
{
	d->lock = -1;
	d->bc.dirfd = -1;
	int rc = bctx_open(d->context, d->max_context, &d->bc);
	if (rc < 0)
		return rc;
	/* The Dockerfile: named on the command line (the operator's), or
	 * the context's own, read through the context's rules. */
	int fd = d->file ? open(d->file, O_RDONLY | O_CLOEXEC) : bctx_openat(&d->bc, "Dockerfile", O_RDONLY);
	if (fd < 0)
		return d->file ? errf_sys("%s", d->file) : errf(-fd, "%s", errmsg());
	char *text = malloc(DF_MAX_TEXT + 1);
	ssize_t n = text ? read(fd, text, DF_MAX_TEXT + 1) : -1;
	close(fd);
	if (n < 0) {
		free(text);
		return errf(ENOMEM, "reading the Dockerfile");
	}
	if (n > DF_MAX_TEXT) {
		free(text);
		return errf(EFBIG, "the Dockerfile is over %d bytes", DF_MAX_TEXT);
	}
	rc = dockerfile_parse(text, (size_t)n, d->build_args, &d->df);
	free(text);
	if (rc < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "Dockerfile: %s", msg);
	}
	const struct df_step *from = NULL;
	for (int i = 0; i < d->df.nsteps && !from; i++)
		if (d->df.steps[i].kind == DF_FROM)
			from = &d->df.steps[i];
	if (!from)
		return errf(EINVAL, "Dockerfile: no FROM");
	char kind;
	const char *rest;
	if ((rc = dfbuild_from(from->args[0], &kind, &rest)) < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(EINVAL, "Dockerfile line %d: %s", from->line, msg);
	}
	snprintf(d->cache, sizeof d->cache, "%s/templates/.cache", d->cfg->data_dir);
	if (mkdir(d->cache, 0700) < 0 && errno != EEXIST)
		return errf_sys("mkdir %s", d->cache);
	char lockp[PATH_MAX + 8];
	snprintf(lockp, sizeof lockp, "%s/.lock", d->cache);
	/* One build at a time uses the cache: two would write one layer. */
	d->lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock < 0 || flock(d->lock, LOCK_EX) < 0)
		return errf_sys("lock %s", lockp);
	if (kind == 'd') {
		from_debian(d, rest);
		return 0;
	}
	return kind == 't' ? from_template(d, rest, from->line) : from_oci(d, rest, from->line);
}

void dfbuild_close(struct dfbuild *d)
{
	dockerfile_free(&d->df);
	bctx_close(&d->bc);
	if (d->lock >= 0)
		close(d->lock);
	d->lock = -1;
	json_decref(d->base_image);
	json_decref(d->image);
	d->base_image = d->image = NULL;
}

/* ---- run ---------------------------------------------------------------------------------- */

int dfbuild_run(struct dfbuild *d, const char *out)
{
	int n = d->df.nsteps, rc;
	char (*keys)[65] = calloc((size_t)n + 1, sizeof *keys);
	if (!keys)
		return errf(ENOMEM, "out of memory");
	if ((rc = dfcache_plan(d, keys)) < 0) {
		free(keys);
		return rc;
	}
	/* The last step whose layer is cached: everything up to it is. */
	int last = -1, resume = -1;
	d->steps = 0;
	for (int i = 0; i < n; i++)
		if (df_disk_step(d->df.steps[i].kind)) {
			d->steps++;
			last = i;
		}
	for (int i = last; i >= 0 && resume < 0; i--)
		if (df_disk_step(d->df.steps[i].kind) && dfcache_has(d, keys[i]))
			resume = i;
	/* --disk: the root is grown in the build VM, which only a disk step
	 * boots; and never shrunk. */
	uint64_t from_size = 0;
	if (d->disk_mib && (rc = disk_size(d->base, &from_size)) == 0) {
		if (!d->steps)
			rc = errf(EINVAL, "--disk %lld: the root is grown in the build VM, which a RUN, COPY, ADD or "
					  "WORKDIR step boots; this Dockerfile has none", (long long)d->disk_mib);
		else if ((uint64_t)d->disk_mib << 20 < from_size)
			rc = errf(EINVAL, "--disk %lld: smaller than the FROM image's %llu MiB (a root is never shrunk)",
				  (long long)d->disk_mib, (unsigned long long)(from_size >> 20));
	}
	if (rc < 0) {
		free(keys);
		return rc;
	}
	struct state s;
	dfstate_init(&s, d->base_image);
	struct vm v = { .pid = 0 };
	struct out o = { .steps = n, .tty = d->tty, .deadline_ms = d->deadline_ms };
	char top[PATH_MAX] = "", step_layer[PATH_MAX] = "";
	d->cached = d->run = 0;
	rc = 0;
	for (int i = 0; rc == 0 && i < n; i++) {
		const struct df_step *st = &d->df.steps[i];
		dfstate_apply(&s, st);
		o.step = i + 1;
		if (!df_disk_step(st->kind)) {
			continue;
		}
		if (i <= resume) {
			char ok[PATH_MAX];
			d->cached++;
			df_note(d, "step %d/%d (line %d) cached: %.120s", i + 1, n, st->line, st->text);
			dfcache_path(d, keys[i], "layer", top, sizeof top);
			dfcache_path(d, keys[i], "ok", ok, sizeof ok);
			dfcache_touch(ok);
			continue;
		}
		dfcache_path(d, keys[i], "layer", step_layer, sizeof step_layer);
		if (!v.pid) {
			/* The first step not cached: a VM over what is, its
			 * disk as large as --disk says and the root grown to
			 * it (a cached layer is that size already: the keys
			 * hold it). */
			const char *parent = top[0] ? top : d->base;
			unlink(step_layer);
			rc = d->disk_mib ? disk_create_sized(step_layer, parent, (uint64_t)d->disk_mib << 20)
					 : disk_create(step_layer, parent);
			if (rc < 0 || (rc = dfvm_boot(d, &v, step_layer)) < 0 ||
			    (d->disk_mib && (rc = dfvm_grow(d, &v)) < 0))
				break;
		}
		df_note(d, "step %d/%d (line %d): %.160s", i + 1, n, st->line, st->text);
		o.total = 0;
		o.n = 0;
		switch (st->kind) {
		case DF_RUN: rc = dfvm_run(&v, &s, st, &o); break;
		case DF_COPY:
		case DF_ADD: rc = dfvm_copy(d, &v, &s, st, &o); break;
		case DF_WORKDIR: rc = dfvm_workdir(&v, &s, st, &o); break;
		default: break;
		}
		if (rc < 0)
			break;
		/* The next step's layer goes on over this one (the last's
		 * is the VM's own, thrown away with it). */
		char next[PATH_MAX];
		int j = i + 1;
		while (j < n && !df_disk_step(d->df.steps[j].kind))
			j++;
		if (j < n)
			dfcache_path(d, keys[j], "layer", next, sizeof next);
		else
			df_pathf(next, sizeof next, "%s/rest.layer", v.dir);
		unlink(next);
		if ((rc = dfvm_checkpoint(&v, next)) < 0)
			break;
		char ok[PATH_MAX];
		dfcache_path(d, keys[i], "ok", ok, sizeof ok);
		if ((rc = dfcache_mark_ok(ok)) < 0)
			break;
		snprintf(top, sizeof top, "%s", step_layer);
		step_layer[0] = 0;
		d->run++;
	}
	dfvm_kill(&v);
	if (rc < 0 && step_layer[0])
		unlink(step_layer);	/* the failed step's half-written layer */
	if (v.dir[0])
		rmtree(v.dir);
	if (rc == 0) {
		df_note(d, "%d steps: %d cached, %d run; writing the root image", d->steps, d->cached, d->run);
		char base_dir[PATH_MAX];
		snprintf(base_dir, sizeof base_dir, "%s", d->base);
		if (top[0]) {
			rc = disk_to_raw(d->cfg->data_dir, top, dirname(base_dir), out);
		} else {
			char *argv[] = { "cp", "--sparse=always", "--reflink=auto", d->base, (char *)out, NULL };
			rc = proc_run(argv, "/dev/null");
			if (rc > 0)
				rc = errf(EIO, "copying %s: exit status %d", d->base, rc);
		}
	}
	if (rc == 0) {
		d->image = dfstate_image(d, &s);
		if (!d->image)
			rc = errf(ENOMEM, "out of memory");
		if (s.own_cmd)
			dfstate_start(&s, d->start, sizeof d->start);
		for (size_t i = 0; s.own_cmd && !d->ready_port && i < json_array_size(s.expose); i++) {
			const char *p = json_string_value(json_array_get(s.expose, i));
			if (p && strstr(p, "/tcp"))
				d->ready_port = atoi(p);
		}
	}
	dfstate_free(&s);
	free(keys);
	/* The cache is collected after each build, under its lock. */
	uint64_t freed;
	int gone = dfcache_trim(d->cache, dfcache_cap(d->cache), time(NULL), DFCACHE_MAX_AGE_S, &freed);
	if (gone > 0)
		df_note(d, "step cache: %d entries removed (%llu MiB): unused for %d days, never completed, or "
			   "the least recently used over %llu MiB", gone, (unsigned long long)(freed >> 20),
			DFCACHE_MAX_AGE_S / 86400, (unsigned long long)(dfcache_cap(d->cache) >> 20));
	return rc;
}
