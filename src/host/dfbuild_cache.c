/*
 * dfbuild_cache: the step cache, DATA/templates/.cache (dfbuild.h): each
 * step's key (the chain digest of its parent's, its text and its inputs)
 * and whether a step's sealed layer is there, complete, to resume over.
 */
#include "host/dfbuild_int.h"
#include "common/err.h"
#include "common/strbuf.h"
#include "vmm/overlay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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
