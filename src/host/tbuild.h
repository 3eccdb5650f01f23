/*
 * tbuild: template builds asked for through the API (POST /v1/templates,
 * docs/templates.md "Building through the API"). The context arrives as
 * a tar (plain or gzip) in a file; it is unpacked here, bounded and
 * without following a link out (oci_extract_tar), into
 * DATA/templates/.builds/NAME/context, and the build runs in a process
 * of its own (`kilnd template build NAME --job FILE`: template_build with
 * the Dockerfile's options, as `kilnd template build NAME --dockerfile
 * DIR` would), so the request answers at once. What a build leaves, in DATA/templates/.builds/NAME:
 *   lock          flock()ed by the build process while it runs: one
 *                 build per name at a time, and "building" survives a
 *                 restart of kilnd (the process goes on)
 *   state.json    {"status": building|ready|failed, "error", "started_ms",
 *                 "finished_ms"}; "building" with the lock free: the
 *                 build process died (reported as failed)
 *   build.log     the build's progress lines and every step's output
 *   job.json      the build process's settings (the host's and the build's)
 * NAME is the template's name on the host (an API's template carries its
 * workspace in it: ops/template.h); this layer takes it as it is.
 */
#ifndef KILN_HOST_TBUILD_H
#define KILN_HOST_TBUILD_H

#include <stdbool.h>
#include <stdint.h>

struct host;

#define TBUILD_ARGS_MAX 32
#define TBUILD_ERROR_MAX 1024

struct tbuild_req {
	const char *name;		/* template_name_ok, not a compiled-in one */
	int tar_fd;			/* the context, a tar (gzip or not), read from its start */
	const char *dockerfile;		/* its path in the context; NULL: "Dockerfile" */
	const char *const *build_args;	/* NAME=VALUE, NULL-ended, or NULL */
	uint64_t max_context;		/* unpacked bytes; 0: BCTX_MAX_BYTES */
	int64_t disk_mib;		/* the root's size (build_opts' --disk); 0: the FROM image's */
	const char *build_net;		/* the RUN steps' network (build_opts' --build-net); NULL: none */
	int vcpus, memory_mib;		/* the template's shape (build_opts'); 0: 1 vCPU, 256 MiB */
	/* A plan's limits (ops/template.c): the templates whose names start
	 * with group (a workspace's "wHEX_") are counted together, as their
	 * build directories say. 0: no limit. */
	const char *group;
	int64_t max_templates;		/* templates of the group, this one included */
	int64_t max_builds;		/* builds of the group running at once, this one included */
	int64_t max_seconds;		/* the build's longest run (build_opts) */
	int64_t max_root_mib;		/* its root image's allocated size (build_opts) */
	/* The lowest version the build may take (build_opts; 0: any): a
	 * cluster's API passes one above every version of the name ever
	 * deleted or listed by a host (remote_template_build). */
	int64_t first_version;
};

/* Unpack the context and start the build. -EBUSY while a build of the
 * name runs; -EDQUOT over max_templates or max_builds, naming the limit
 * ("(templates N)", "(template_builds N)"); -EINVAL (a tar that is not one, an entry climbing out, the
 * Dockerfile missing) and -EFBIG (over max_context) name the problem. */
int tbuild_start(struct host *h, const struct tbuild_req *r);

struct tbuild_state {
	bool known;			/* a build was ever asked for (else the rest is empty) */
	char status[16];		/* building, ready, failed */
	char error[TBUILD_ERROR_MAX];
	int64_t started_ms, finished_ms;
	int versions[16];		/* the version directories there are, ascending */
	int nversions;
	int current;			/* the version in service, or 0 */
	int64_t built_ms;		/* its manifest's */
	int64_t bytes;			/* the disk its directory takes (all versions) */
};

/* The build process (tbuild_start execs `kilnd template build NAME --job
 * FILE`): the host's settings and the build's from FILE, which
 * tbuild_start wrote into the build's directory (only root writes there);
 * the build run with its lock on descriptor 3 and its output on 1 and 2
 * (the build log); its outcome written to state.json. The exit status. */
int tbuild_job(const char *file, const char *name);

/* What is known of the template name's builds and versions; -ENOENT when
 * it was neither built through the API nor has a version directory. */
int tbuild_state(struct host *h, const char *name, struct tbuild_state *out);

/* The build log, open for reading (*fd); *running while its build runs. */
int tbuild_log_open(struct host *h, const char *name, int *fd, bool *running);
/* Is a build of name running now? */
bool tbuild_running(struct host *h, const char *name);

/* Remove the template: -EBUSY while it builds or a sandbox (not deleted)
 * was made from it, naming them; its zygote is stopped, its versions and
 * build files removed. */
int tbuild_delete(struct host *h, const char *name);

#endif
