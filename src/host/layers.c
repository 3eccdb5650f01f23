/*
 * layers: disk layers outlive the sandbox that made them. After a fork the
 * parent's sealed old top (DATA/sandboxes/P/disk) is the base of the
 * children's overlays, and a sandbox made from a snapshot sits on the
 * snapshot's disk, so deleting a sandbox or snapshot removes its VM files
 * at once but its disk layers only when no live chain uses them. The
 * collector reads every live sandbox's and snapshot's chain (overlay
 * headers name their bases) and then removes, under DATA/sandboxes and
 * DATA/snapshots, whatever no chain names: the directories of deleted
 * sandboxes and snapshots, and old tops a fork left in live ones; and
 * template versions out of service that no chain sits on
 * (template.h templates_collect).
 *
 * The collector reads the list of sandboxes, then sweeps: a directory
 * that appeared between the two would be swept as a deleted sandbox's
 * (a create's, a pool member's or a fork child's, before it had a disk:
 * its disk then failed with "overlay .../disk: No such file or
 * directory"). So such directories are made only under h->layers, which
 * the collector holds throughout (layers_mkdir), by a sandbox linked
 * before: a directory the sweep sees belongs to a sandbox it read.
 */
#include "host/disk.h"
#include "common/failpoint.h"
#include "host/host_int.h"
#include "host/template.h"
#include "common/err.h"
#include "host/host_config.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct refs {
	char **s;
	size_t n, cap;
};

static void refs_add(struct refs *r, const char *s)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		char **ns = realloc(r->s, cap * sizeof *ns);
		if (!ns)
			return;
		r->s = ns, r->cap = cap;
	}
	if ((r->s[r->n] = strdup(s)))
		r->n++;
}

static bool refs_has(const struct refs *r, const char *s)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->s[i], s) == 0)
			return true;
	return false;
}

static void refs_free(struct refs *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->s[i]);
	free(r->s);
}

struct gc_ctx {
	const char *data_dir;
	struct refs layers, live_snaps;
	bool partial;	/* a chain could not be read whole */
};

/* Every layer of the chain under the disk recorded in disks (JSON). */
static void add_chain(struct gc_ctx *g, const char *disks)
{
	char top[PATH_MAX];
	if (disks_json_top(disks, top) < 0)
		return;
	char (*chain)[PATH_MAX] = calloc(CHAIN_MAX, PATH_MAX);
	int n = 0;
	if (chain && disk_chain(g->data_dir, top, chain, CHAIN_MAX, &n) == 0) {
		for (int i = 0; i < n; i++)
			refs_add(&g->layers, chain[i]);
	} else {
		g->partial = true;
		if (chain)
			refs_add(&g->layers, top);	/* unreadable now: keep at least the top */
	}
	free(chain);
}

static int add_snapshot(void *ctx, struct snap_row *s)
{
	struct gc_ctx *g = ctx;
	add_chain(g, s->disks);
	refs_add(&g->live_snaps, s->id);
	snap_row_clear(s);
	return 0;
}

/* Remove what no chain names in one directory: in a live one only disk
 * layers (disk*), in others everything. */
static void sweep_dir(const char *dir, bool live, const struct refs *layers)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	int left = 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) {
			left++;
			continue;
		}
		bool layer = !strncmp(e->d_name, "disk", 4);
		if (refs_has(layers, path) || (live && !layer)) {
			left++;
			continue;
		}
		log_debug("collector: removing %s", path);
		if (e->d_type == DT_DIR ? rmtree(path) < 0 : unlink(path) < 0)
			left++;
	}
	closedir(d);
	if (!live && left == 0)
		rmdir(dir);
}

static void sweep(const char *root, const struct refs *live, const struct refs *layers)
{
	DIR *d = opendir(root);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char dir[PATH_MAX];
		if (snprintf(dir, sizeof dir, "%s/%s", root, e->d_name) < (int)sizeof dir)
			sweep_dir(dir, refs_has(live, e->d_name), layers);
	}
	closedir(d);
}

/* Does a layer of some chain lie in dir? */
static bool chain_under(void *ctx, const char *dir)
{
	const struct refs *layers = ctx;
	size_t n = strlen(dir);
	for (size_t i = 0; i < layers->n; i++)
		if (!strncmp(layers->s[i], dir, n) && layers->s[i][n] == '/')
			return true;
	return false;
}

void layers_gc(struct host *h)
{
	struct gc_ctx g = { .data_dir = h->cfg->data_dir };
	struct refs live_sbx = { 0 };
	pthread_mutex_lock(&h->layers);
	pthread_mutex_lock(&h->lock);
	for (struct sandbox *sb = h->list; sb; sb = sb->next) {
		pthread_mutex_lock(&sb->lock);
		/* A failed sandbox keeps its record, not its disk, unless
		 * it is persistent: a wake boots that disk again. */
		if (sb->row.state != SBX_FAILED || sb->row.idle_hibernate) {
			add_chain(&g, sb->row.disks);
			refs_add(&live_sbx, sb->row.id);
		}
		pthread_mutex_unlock(&sb->lock);
	}
	pthread_mutex_unlock(&h->lock);
	/* If the snapshots cannot be read, remove nothing rather than too much. */
	if (store_snapshot_each_live(h->store, add_snapshot, &g) == 0) {
		if (failpoint_hit(FP_GC_SLOW))
			sleep(1);
		char root[PATH_MAX];
		snprintf(root, sizeof root, "%s/sandboxes", h->cfg->data_dir);
		sweep(root, &live_sbx, &g.layers);
		snprintf(root, sizeof root, "%s/snapshots", h->cfg->data_dir);
		sweep(root, &g.live_snaps, &g.layers);
		/* Old template versions only when every chain was read: a
		 * chain known only by its top may sit on one. */
		if (!g.partial && h->tpl)
			templates_collect(h->tpl, chain_under, &g.layers);
	}
	pthread_mutex_unlock(&h->layers);
	refs_free(&g.layers);
	refs_free(&g.live_snaps);
	refs_free(&live_sbx);
}

int layers_mkdir(struct host *h, const char *dir, bool exist_ok)
{
	pthread_mutex_lock(&h->layers);
	int rc = mkdir(dir, 0700) < 0 && !(exist_ok && errno == EEXIST) ? errf_sys("mkdir %s", dir) : 0;
	pthread_mutex_unlock(&h->layers);
	return rc;
}
