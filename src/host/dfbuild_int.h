/*
 * dfbuild's parts, between its files (not a contract outside dfbuild):
 *   dfbuild.c        FROM, open and close, and the run that drives the steps
 *   dfbuild_state.c  the image config the steps build (ENV, WORKDIR, CMD...)
 *   dfbuild_cache.c  the step cache: each step's key, its sealed layer
 *   dfbuild_vm.c     the build VM and the steps done in it (RUN, COPY, WORKDIR)
 */
#ifndef KILN_HOST_DFBUILD_INT_H
#define KILN_HOST_DFBUILD_INT_H

#include "host/dfbuild.h"
#include "host/dockerfile.h"

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A line of progress for the caller. */
void df_note(struct dfbuild *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A path built from parts; too long: -ENAMETOOLONG. */
int df_pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- dfbuild_state.c: the state the steps build ---- */

struct state {
	json_t *env;			/* the image's Env, ENV added */
	json_t *args;			/* ARG values in effect: name -> value */
	char workdir[4096];
	char user[256];
	json_t *cmd, *entrypoint;	/* arrays or NULL */
	json_t *expose, *labels;
	bool own_cmd;			/* CMD/ENTRYPOINT come from this Dockerfile */
	bool from_seen;
};

void dfstate_init(struct state *s, const json_t *image);
void dfstate_free(struct state *s);
/* What a step does to the state (the disk aside). */
void dfstate_apply(struct state *s, const struct df_step *st);
/* A step that changes the disk (RUN, COPY, ADD, WORKDIR): one layer each. */
bool df_disk_step(enum df_kind k);
/* ENTRYPOINT + CMD as one shell command (or ""); the image config for the
 * manifest (NULL: out of memory). */
void dfstate_start(const struct state *s, char *out, size_t cap);
json_t *dfstate_image(const struct dfbuild *d, const struct state *s);

/* ---- dfbuild_cache.c: the step cache ---- */

/* DATA/templates/.cache/KEY.EXT */
void dfcache_path(const struct dfbuild *d, const char *key, const char *ext, char *out, size_t cap);
/* A complete layer for key, whose chain opens down to its raw base. */
bool dfcache_has(const struct dfbuild *d, const char *key);
/* The key of every step (keys[i], 65 bytes each). */
int dfcache_plan(struct dfbuild *d, char (*keys)[65]);
/* A COPY/ADD's sources, wildcards expanded (bctx_sources; free with
 * bctx_sources_free); more than one: the destination must end in '/'. */
int df_sources(const struct dfbuild *d, const struct df_step *st, char ***srcs, int *n);
/* The mark that a layer is complete (written after its seal). */
int dfcache_mark_ok(const char *path);
/* A hit: the entry's .ok gets the time now (its recency). */
void dfcache_touch(const char *ok_path);
/* Collection (docs/templates.md "Step cache"), with the cache's lock
 * held: entries (KEY.layer and KEY.ok) removed oldest first, those never
 * completed and those unused for max_age_s whatever the size, then
 * while the cache holds more than cap bytes. How many it removed (and
 * *freed, their bytes), or <0. */
#define DFCACHE_MAX_AGE_S (14 * 86400)
#define DFCACHE_MIN_CAP (1ull << 30)
int dfcache_trim(const char *dir, uint64_t cap, time_t now, int64_t max_age_s, uint64_t *freed);
/* The cap: a tenth of the filesystem holding dir, at least DFCACHE_MIN_CAP. */
uint64_t dfcache_cap(const char *dir);

/* ---- dfbuild_vm.c: the build VM and its steps ---- */

struct vm {
	char dir[PATH_MAX];
	char vsock[PATH_MAX];
	pid_t pid;
	int64_t start;
};

/* A step's output, line by line to the build log, its tail kept. */
struct out {
	int step, steps;
	int64_t deadline_ms;		/* dfbuild's: a RUN's timeout is cut to it */
	bool tty;
	char line[512];
	size_t n;
	char tail[DF_TAIL];
	size_t tn;			/* bytes in tail (a ring once full) */
	uint64_t total;
};

int dfvm_boot(struct dfbuild *d, struct vm *v, const char *disk);
void dfvm_kill(struct vm *v);
int dfvm_run(struct vm *v, const struct state *s, const struct df_step *st, struct out *o);
int dfvm_copy(struct dfbuild *d, struct vm *v, const struct state *s, const struct df_step *st, struct out *o);
int dfvm_workdir(struct vm *v, const struct state *s, const struct df_step *st, struct out *o);
/* The root's ext4 grown online to the whole of the VM's disk (the
 * agent's grow-fs built-in). */
int dfvm_grow(struct dfbuild *d, struct vm *v);
/* The guest's writes onto the disk, then the disk's top sealed as the
 * step's layer and a new top at next. */
int dfvm_checkpoint(struct vm *v, const char *next);

#endif
