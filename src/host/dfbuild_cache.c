/*
 * dfbuild_cache: the step cache, DATA/templates/.cache (dfbuild.h): each
 * step's key (the chain digest of its parent's, its text and its inputs)
 * and whether a step's sealed layer is there, complete, to resume over;
 * and its collection: least recently used entries first, beyond a size.
 */
#include "host/dfbuild_int.h"
#include "common/err.h"
#include "common/strbuf.h"
#include "vmm/overlay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

void dfcache_path(const struct dfbuild *d, const char *key, const char *ext, char *out, size_t cap)
{
	df_pathf(out, cap, "%s/%.64s.%s", d->cache, key, ext);	/* the cache's path is short */
}

/* A layer in the cache that is complete (its .ok written after its seal)
 * and whose chain still opens down to its raw base. */
bool dfcache_has(const struct dfbuild *d, const char *key)
{
	char ok[PATH_MAX], layer[PATH_MAX];
	dfcache_path(d, key, "ok", ok, sizeof ok);
	dfcache_path(d, key, "layer", layer, sizeof layer);
	if (access(ok, F_OK) < 0)
		return false;
	struct chain c;
	if (chain_open(&c, layer, false) < 0)
		return false;
	bool sealed = !c.layers[0].raw && c.layers[0].sealed;
	chain_close(&c);
	return sealed;
}

/* The key of every step (keys[i], 65 bytes each): the parent's, the
 * step's text, and its inputs. */
int dfcache_plan(struct dfbuild *d, char (*keys)[65])
{
	char prev[65];
	snprintf(prev, sizeof prev, "%s", d->from_key);
	/* A root grown to another size is another chain (the default's keys
	 * stay what they were). */
	if (d->disk_mib) {
		char size[32];
		snprintf(size, sizeof size, "%lld", (long long)d->disk_mib);
		bctx_step_key(d->from_key, "disk", size, prev);
	}
	for (int i = 0; i < d->df.nsteps; i++) {
		const struct df_step *st = &d->df.steps[i];
		struct strbuf in;
		strbuf_init(&in);
		if (st->kind == DF_ARG) {
			for (int j = 0; j + 1 < st->nargs; j += 2)
				strbuf_printf(&in, "%s=%s\n", st->args[j], st->args[j + 1] ? st->args[j + 1] : "(unset)");
		} else if (st->kind == DF_COPY || st->kind == DF_ADD) {
			char **srcs = NULL, digest[65];
			int nsrc = 0;
			int rc = df_sources(d, st, &srcs, &nsrc);
			if (rc == 0)
				rc = bctx_digest(&d->bc, (const char *const *)srcs, nsrc, digest);
			bctx_sources_free(srcs);
			if (rc < 0) {
				char msg[300];
				snprintf(msg, sizeof msg, "%s", errmsg());
				strbuf_free(&in);
				return errf(-rc, "Dockerfile line %d: %s: %s", st->line, df_kind_name(st->kind), msg);
			}
			strbuf_printf(&in, "%s chown=%s chmod=%s", digest, st->chown ? st->chown : "",
				      st->chmod ? st->chmod : "");
		}
		if (strbuf_failed(&in)) {
			strbuf_free(&in);
			return errf(ENOMEM, "out of memory");
		}
		bctx_step_key(prev, st->text ? st->text : "", in.data, keys[i]);
		strbuf_free(&in);
		memcpy(prev, keys[i], 65);
	}
	return 0;
}

int df_sources(const struct dfbuild *d, const struct df_step *st, char ***srcs, int *n)
{
	int rc = bctx_sources(&d->bc, (const char *const *)st->args, st->nargs - 1, srcs, n);
	if (rc < 0)
		return rc;
	const char *dest = st->args[st->nargs - 1];
	size_t dl = strlen(dest);
	bool dir = dest[dl - 1] == '/' || !strcmp(dest, ".") || (dl >= 2 && !strcmp(dest + dl - 2, "/."));
	if (*n > 1 && !dir) {
		bctx_sources_free(*srcs);
		*srcs = NULL;
		return errf(EINVAL, "%d sources (wildcards matched) go to '%.200s': a destination for more "
				    "than one source is a directory, written with a trailing '/'", *n, dest);
	}
	return 0;
}

int dfcache_mark_ok(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf_sys("create %s", path);
	fsync(fd);
	close(fd);
	return 0;
}

/* ---- collection ------------------------------------------------------------------------- */

struct entry {
	char key[65];
	time_t used;		/* its .ok's mtime: the last build that took it */
	uint64_t bytes;		/* the blocks its files take */
	bool ok;
};

static int by_use(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return x->used < y->used ? -1 : x->used > y->used;
}

static struct entry *find(struct entry *e, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(e[i].key, key))
			return &e[i];
	return NULL;
}

/* Remove every KEY.* file in dir. */
static void drop(const char *dir, const char *key)
{
	static const char *const ext[] = { "layer", "ok" };
	for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s.%s", dir, key, ext[i]);
		unlink(path);
	}
}

void dfcache_touch(const char *ok_path)
{
	utimensat(AT_FDCWD, ok_path, NULL, 0);	/* a hit: the entry is young again */
}

uint64_t dfcache_cap(const char *dir)
{
	struct statvfs fs;
	if (statvfs(dir, &fs) < 0)
		return DFCACHE_MIN_CAP;
	uint64_t cap = (uint64_t)fs.f_blocks * fs.f_frsize / 10;
	return cap < DFCACHE_MIN_CAP ? DFCACHE_MIN_CAP : cap;
}

int dfcache_trim(const char *dir, uint64_t cap, time_t now, int64_t max_age_s, uint64_t *freed)
{
	*freed = 0;
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : errf_sys("opendir %s", dir);
	struct entry *e = NULL;
	size_t n = 0, alloc = 0;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d))) {
		const char *dot = strchr(de->d_name, '.');
		if (!dot || dot - de->d_name != 64 || (strcmp(dot, ".layer") && strcmp(dot, ".ok")))
			continue;	/* .lock and anything else are not entries */
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		char key[65];
		memcpy(key, de->d_name, 64);
		key[64] = 0;
		struct entry *x = find(e, n, key);
		if (!x) {
			if (n == alloc) {
				struct entry *ne = realloc(e, (alloc = alloc ? alloc * 2 : 64) * sizeof *ne);
				if (!ne) {
					rc = errf(ENOMEM, "out of memory");
					break;
				}
				e = ne;
			}
			x = &e[n++];
			memset(x, 0, sizeof *x);
			memcpy(x->key, key, sizeof key);
			x->used = st.st_mtime;
		}
		x->bytes += (uint64_t)st.st_blocks * 512;
		if (!strcmp(dot, ".ok")) {
			x->ok = true;
			x->used = st.st_mtime;
		}
	}
	closedir(d);
	if (rc < 0) {
		free(e);
		return rc;
	}
	qsort(e, n, sizeof *e, by_use);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += e[i].bytes;
	for (size_t i = 0; i < n; i++) {
		/* Oldest first: a layer never completed (its build failed or
		 * was killed; no build runs now, the caller holds the lock),
		 * one unused for max_age_s, then any while over the cap. A
		 * parent is taken with each child that is, so it is never
		 * older than they are. */
		bool old = now - e[i].used > max_age_s;
		if (e[i].ok && !old && total <= cap)
			continue;
		drop(dir, e[i].key);
		total -= e[i].bytes;
		*freed += e[i].bytes;
		rc++;
	}
	free(e);
	return rc;
}
