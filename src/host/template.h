/*
 * template: what a sandbox is made from. A template is a read-only root
 * image plus, normally, a snapshot of a VM booted on it, which a zygote
 * (`kiln-vmm --zygote`) holds in memory and forks for every create.
 *
 * On disk, DATA/templates/NAME/ holds numbered versions v1, v2, ... and a
 * symlink `current` to the one in service; `kilnd template build NAME`
 * makes a new version in `build/` and swaps `current` only when it
 * is complete and verified, so a failed build leaves the previous one in
 * service. A version directory:
 *   manifest.json   name, version, description, vcpus, memory_mib, disk
 *                   mode, paths, and for a template built from an OCI
 *                   image its config ("image": env, workdir, user, cmd,
 *                   entrypoint; docs/templates.md)
 *   root.ext4       the root image (raw, read-only)
 *   layer           the template VM's own overlay on it, sealed at the
 *                   snapshot: sandboxes' overlays sit on it
 *   snapshot/       state + memory, if the version has a snapshot
 *   zygote.sock, zygote.pid, zygote.log
 * A version without a snapshot serves creates by booting (slower); it is
 * what `template build --no-snapshot` makes where kiln-vmm cannot snapshot.
 *
 * Names: the compiled-in templates (template_defs) and the ones an
 * operator builds from an image (`kilnd template build NAME --oci REF` or
 * `--image FILE`): any name template_name_ok accepts. An operator-built
 * template is defined by its version in service: the manifest says its
 * vCPUs, memory, description and image config, so it exists once a
 * version is in `current`, and `rm -r DATA/templates/NAME` (with no
 * sandbox of it left) removes it.
 *
 * Resources: the vCPUs and memory of a version are fixed by its snapshot
 * (one saved state per vCPU, a memory file of memory_mib): every sandbox
 * of the version has exactly them. Another shape is another template (or
 * a new version built with --vcpus/--memory).
 */
#ifndef KILN_HOST_TEMPLATE_H
#define KILN_HOST_TEMPLATE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "host/dns.h"
#include "host/host_config.h"

#include <jansson.h>

struct host_config;

#define TEMPLATE_VCPUS_MAX 8
#define TEMPLATE_MEMORY_MIN_MIB 128
#define TEMPLATE_MEMORY_MAX_MIB 65536
#define TEMPLATE_DISK_MIN_MIB 64		/* --disk: a Dockerfile build's root (template_build.h) */
#define TEMPLATE_DISK_MAX_MIB (1 << 20)	/* 1 TiB, sparse: a plan's template_mib bounds what it holds */
#define TEMPLATES_MAX 64
/* The volume slots a template is built with (docs/api.md "Volumes"). */
#define TEMPLATE_VOLUME_SLOTS 2		/* templates in service at once */

/* [a-z0-9][a-z0-9_-]{0,30}: a directory name and a JSON field as is. */
bool template_name_ok(const char *name);
struct vmm_jail;

/* The templates kiln knows how to build. */
#define TEMPLATE_START_MAX 1024
#define TEMPLATE_READY_S 120	/* a start command's default time to listen */

struct template_def {
	const char *name;
	const char *description;
	int vcpus, memory_mib;
	const char *warmup;		/* run once before the snapshot, or NULL */
};

const struct template_def *template_def_find(const char *name);
extern const struct template_def template_defs[];
extern const int ntemplate_defs;

/* One built version. */
struct tmpl {
	char name[32];
	char description[160];
	int version;
	char dir[VM_DIR_MAX];
	int vcpus, memory_mib;
	int64_t disk_mib;		/* base's size, rounded up: a create's default disk; 0: unreadable */
	char root[PATH_MAX];		/* the read-only image */
	char base[PATH_MAX];		/* what sandbox overlays sit on: layer, or root */
	bool snapshot;
	bool net;			/* its VM has a network device */
	/* Its VM's empty volume slots (docs/vmm.md "Volume slots"): what
	 * a sandbox of it can attach. 0: built before volumes. */
	int volume_slots;
	/* The servers its snapshot's guest has in /etc/resolv.conf (its
	 * boot's kiln.dns): a create writes the file only when the host's
	 * differ. "": not known (a version built before it was kept). */
	char dns[DNS_LIST_MAX];
	char snapdir[PATH_MAX];
	int64_t built_ms;
	json_t *image;			/* the OCI image's config (owned), or NULL */
	/* The command its snapshot runs (build_opts.start; "" : none) and
	 * the port it listens on (0: none said). */
	char start[TEMPLATE_START_MAX];
	int ready_port;
	int refs;			/* under the registry lock */
	struct tmpl *retired_next;	/* out of service, still referenced */
	pthread_mutex_t zlock;		/* starting the zygote */
};

struct templates;

int templates_open(const struct host_config *cfg, struct templates **out);
void templates_close(struct templates *ts);
/* The version in service of a known template (a reference: tmpl_put it).
 * -EINVAL for an unknown name, -EAGAIN when it has not been built. */
int templates_get(struct templates *ts, const char *name, struct tmpl **out);
void tmpl_put(struct templates *ts, struct tmpl *t);
/* Forget the template (its directory is about to go): its zygote is
 * stopped, the registry's reference dropped. */
void templates_drop(struct templates *ts, const char *name);

/* Old versions go when nothing uses them (docs/templates.md "Versions"):
 * a version older than the one in service (and not one being built) is
 * removed unless used(ctx, dir) says a sandbox's or snapshot's disk
 * chain sits on it, a reference to it is held (a create or a pool member
 * of it), or a zygote answers in it. How many it removed. */
typedef bool tmpl_dir_used_fn(void *ctx, const char *dir);
int templates_collect(struct templates *ts, tmpl_dir_used_fn *used, void *ctx);

/* Every template: the compiled-in ones (t NULL when not built), then
 * the operator-built ones in service, by name. def is the template's own
 * or, for an operator-built one, made from its manifest. */
typedef int tmpl_each_fn(void *ctx, const struct template_def *def, const struct tmpl *t);
int templates_each(struct templates *ts, tmpl_each_fn *fn, void *ctx);

/* Read a version's manifest (for tools and recovery); tmpl_clear frees
 * what it allocated. */
int tmpl_load(const char *dir, struct tmpl *t);
void tmpl_clear(struct tmpl *t);
int tmpl_save_manifest(const struct tmpl *t);

/* The image config's parts a sandbox uses (docs/templates.md): its Env
 * under the create's env (JSON object text; a new string, or NULL for
 * none), and its WorkingDir, the default directory of exec (NULL). */
char *tmpl_env_merge(const struct tmpl *t, const char *env);
const char *tmpl_workdir(const struct tmpl *t);

/* ---- zygotes -------------------------------------------------------------- */

struct spawn_spec {
	const char *dir;		/* the new VM's directory (vmm.h) */
	const char *disk;		/* its overlay */
	const char *tap;		/* NULL: no network device */
	const char *netns;		/* the namespace its TAP is in */
	const char *hostname;
	struct vmm_jail *jail;		/* NULL or off: unjailed */
};

/* Make sure the version's zygote runs (starting it if needed). */
int tmpl_zygote_ensure(const struct host_config *cfg, struct tmpl *t);
/* Fork a VM from the zygote: pid and the VMM's own ready time, and (if
 * held_ms) how long the zygote's loop spent on it, serving no other
 * spawn. -ECHILD: its guest died before it was ready (the caller may start
 * the sandbox over, on a fresh disk: the dead guest may have written to
 * this one). */
int tmpl_spawn(const struct host_config *cfg, struct tmpl *t, const struct spawn_spec *s,
	       pid_t *pid, double *ready_ms, double *held_ms);
/* Stop the version's zygote, if one runs. */
void tmpl_zygote_stop(struct tmpl *t);

#endif
