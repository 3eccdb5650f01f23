/*
 * ops/template: templates as a workspace sees them (docs/templates.md
 * "Building through the API"), over the host interface's template calls.
 *
 * Scoping: a template a workspace builds through the API is its own. On
 * the host it is stored as "w" + the first 10 hex digits of the sha256
 * of the workspace's id + "_" + its name (e.g. w3f9a0c12d4_web): a
 * directory name template_name_ok accepts, at most 31 bytes, so the
 * name a workspace gives is 1 to 19 of a-z, 0-9, '-', '_' (starting with
 * a letter or digit). Listing shows a workspace its own under their
 * short names and every other unqualified template (the compiled-in
 * ones, an operator's `kilnd template build`); a qualified name never
 * resolves from a request (another workspace's template is unknown: 404).
 * A name resolves to the workspace's own template first, then a shared
 * one; a workspace cannot take a shared template's name.
 */
#ifndef KILN_OPS_TEMPLATE_H
#define KILN_OPS_TEMPLATE_H

#include "ops/ops.h"
#include "hostif/hostif.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define OPS_TEMPLATE_NAME_MAX 19
/* A build's disk_mib (the host's TEMPLATE_DISK_MIN_MIB and _MAX_MIB, host/template.h:
 * ops may not include it): checked by ops_template_build (the API checks its query before the upload). */
#define OPS_TEMPLATE_DISK_MIN_MIB 64
#define OPS_TEMPLATE_DISK_MAX_MIB (1 << 20)
/* A build's shape (the host's TEMPLATE_VCPUS_MAX, TEMPLATE_MEMORY_MIN_MIB
 * and _MAX_MIB, host/template.h; unit_kilnd_template_scope asserts they agree). */
#define OPS_TEMPLATE_VCPUS_MAX 8
#define OPS_TEMPLATE_MEMORY_MIN_MIB 128
#define OPS_TEMPLATE_MEMORY_MAX_MIB 65536
#define OPS_TEMPLATE_HOST_NAME 32	/* with the workspace's prefix, and its NUL */

/* A workspace's template name: 1 to 19 of [a-z0-9_-], not starting with
 * '-' or '_'. */
bool ops_template_name_ok(const char *name);
/* The host's name of workspace ws's template name (ops_template_name_ok). */
void ops_template_host_name(const char *ws, const char *name, char out[OPS_TEMPLATE_HOST_NAME]);
/* Is a host's name one of a workspace's (any workspace)? */
bool ops_template_qualified(const char *host_name);
/* The name a workspace knows a host's name by (its prefix taken off). */
const char *ops_template_short(const char *host_name);

/* Every mention of workspace ws's template name by its host's name in
 * the NUL-ended msg (a log line, an error) turned into name, in place. */
void ops_template_unqualify(char *msg, const char *ws, const char *name);

/* Every template workspace ws may use (hostif_templates filtered; its
 * own under their short names). */
int ops_templates_each(struct hostif *hi, const char *ws, hostif_template_fn *fn, void *fctx);

/* The host's name of what name means to workspace ws (its own, else a
 * shared one); -ENOENT when neither exists. */
int ops_template_resolve(struct hostif *hi, const char *ws, const char *name, char out[OPS_TEMPLATE_HOST_NAME]);

/* What a build asks for beside its context (POST /v1/templates' query). */
struct ops_build_spec {
	const char *dockerfile;		/* NULL or a relative path in the context */
	const char *const *build_args;	/* K=V, NULL-ended, or NULL */
	int64_t disk_mib;		/* the root's size; 0: the FROM image's */
	const char *build_net;		/* the RUN steps' network: NULL or none, internet, CIDR[,CIDR...] */
	int vcpus, memory_mib;		/* the sandboxes' shape; 0: 1 vCPU, 256 MiB */
};

/* Build workspace c's template name from the context tar in tar_fd, as
 * s asks (NULL: all defaults). -EINVAL naming what is wrong, -EEXIST for
 * a shared template's name, -EBUSY while one builds, -EDQUOT over the
 * plan's templates or template_builds, or for a shape over its vcpus or
 * memory_mib (c->quota says which). */
int ops_template_build(const struct ops_caller *c, const char *name, int tar_fd, const struct ops_build_spec *s);

/* What GET /v1/templates/{name} shows: the listing's record (listed:
 * a version is in service) and, for the workspace's own, its builds. */
struct ops_template_info {
	bool own, listed;
	struct hostif_template t;
	struct tbuild_state b;		/* own */
};
int ops_template_get(const struct ops_caller *c, const char *name, struct ops_template_info *out);
/* Its build log (own templates only). */
int ops_template_log_open(const struct ops_caller *c, const char *name, int *fd, bool *running);
/* Remove the workspace's own template; -EPERM for a shared one. */
int ops_template_delete(const struct ops_caller *c, const char *name);

/* A build argument: NAME=VALUE, NAME an identifier ([A-Za-z_][A-Za-z0-9_]*,
 * at most 128), VALUE at most 4096 bytes. */
bool ops_build_arg_ok(const char *kv);

#endif
