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
 *   manifest.json   name, version, vcpus, memory_mib, disk mode, paths
 *   root.ext4       the root image (raw, read-only)
 *   layer           the template VM's own overlay on it, sealed at the
 *                   snapshot: sandboxes' overlays sit on it
 *   snapshot/       state + memory, if the version has a snapshot
 *   zygote.sock, zygote.pid, zygote.log
 * A version without a snapshot serves creates by booting (slower); it is
 * what `template build --no-snapshot` makes where kiln-vmm cannot snapshot.
 */
#ifndef KILN_HOST_TEMPLATE_H
#define KILN_HOST_TEMPLATE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "host/host_config.h"

struct host_config;
struct vmm_jail;

/* The templates kiln knows how to build. */
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
	int version;
	char dir[VM_DIR_MAX];
	int vcpus, memory_mib;
	char root[PATH_MAX];		/* the read-only image */
	char base[PATH_MAX];		/* what sandbox overlays sit on: layer, or root */
	bool snapshot;
	bool net;			/* its VM has a network device */
	char snapdir[PATH_MAX];
	int64_t built_ms;
	int refs;			/* under the registry lock */
	pthread_mutex_t zlock;		/* starting the zygote */
};

struct templates;

int templates_open(const struct host_config *cfg, struct templates **out);
void templates_close(struct templates *ts);
/* The version in service of a known template (a reference: tmpl_put it).
 * -EINVAL for an unknown name, -EAGAIN when it has not been built. */
int templates_get(struct templates *ts, const char *name, struct tmpl **out);
void tmpl_put(struct templates *ts, struct tmpl *t);

/* Read a version's manifest (for tools and recovery). */
int tmpl_load(const char *dir, struct tmpl *t);
int tmpl_save_manifest(const struct tmpl *t);

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
/* Fork a VM from the zygote: pid and the VMM's own ready time. */
int tmpl_spawn(const struct host_config *cfg, struct tmpl *t, const struct spawn_spec *s,
	       pid_t *pid, double *ready_ms);
/* Stop the version's zygote, if one runs. */
void tmpl_zygote_stop(struct tmpl *t);

#endif
