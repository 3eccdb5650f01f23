/*
 * layers: disk layers shared by several sandboxes. A fork freezes the
 * parent's writable layer (parent and children get new overlays on it) and
 * a snapshot copies it; both kinds live in DATA/layers, outside any
 * sandbox's directory, because they outlive the sandbox that made them.
 * A layer is kept while the disk chain of a live sandbox or snapshot names
 * it; the collector removes the rest.
 */
#include "agent/host_int.h"
#include "common/err.h"
#include "kilnd/config.h"
#include "kilnd/log.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int layer_path(struct host *h, const char *name, char out[PATH_MAX])
{
	if (snprintf(out, PATH_MAX, "%s/layers/%s", h->cfg->data_dir, name) >= PATH_MAX)
		return errf(ENAMETOOLONG, "layer path too long");
	return 0;
}

struct refs {
	char **paths;
	size_t n, cap;
};

static void refs_add_chain(struct refs *r, const char *disks)
{
	json_t *j = disks ? json_loads(disks, 0, NULL) : NULL;
	json_t *a = json_object_get(j, "chain");
	for (size_t i = 0; i < json_array_size(a); i++) {
		const char *p = json_string_value(json_array_get(a, i));
		if (!p)
			continue;
		if (r->n == r->cap) {
			size_t cap = r->cap ? r->cap * 2 : 64;
			char **np = realloc(r->paths, cap * sizeof *np);
			if (!np)
				break;
			r->paths = np, r->cap = cap;
		}
		if ((r->paths[r->n] = strdup(p)))
			r->n++;
	}
	json_decref(j);
}

static int snap_refs(void *ctx, struct snap_row *s)
{
	refs_add_chain(ctx, s->disks);
	snap_row_clear(s);
	return 0;
}

static bool referenced(const struct refs *r, const char *path)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->paths[i], path) == 0)
			return true;
	return false;
}

void layers_gc(struct host *h)
{
	struct refs r = { 0 };
	pthread_mutex_lock(&h->layers);
	pthread_mutex_lock(&h->lock);
	for (struct sandbox *sb = h->list; sb; sb = sb->next) {
		pthread_mutex_lock(&sb->lock);
		refs_add_chain(&r, sb->row.disks);
		pthread_mutex_unlock(&sb->lock);
	}
	pthread_mutex_unlock(&h->lock);
	/* If the store cannot be read, collect nothing rather than too much. */
	bool ok = store_snapshot_each_live(h->store, snap_refs, &r) == 0;
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/layers", h->cfg->data_dir);
	DIR *d = ok ? opendir(dir) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
			continue;
		if (!referenced(&r, path)) {
			log_debug("layer %s: no longer used, removed", e->d_name);
			unlink(path);
		}
	}
	if (d)
		closedir(d);
	pthread_mutex_unlock(&h->layers);
	for (size_t i = 0; i < r.n; i++)
		free(r.paths[i]);
	free(r.paths);
}
