#ifndef KILN_HOST_TEMPLATE_BUILD_H
#define KILN_HOST_TEMPLATE_BUILD_H

#include <stdbool.h>
#include <stdint.h>

struct host_config;

/* The unpacked size of an OCI image, unless build_opts says otherwise. */
#define BUILD_MAX_UNPACKED (16ULL << 30)

struct build_opts {
	const char *name;	/* compiled-in, or a new name with oci or image */
	const char *image;	/* a root image to use instead of the default */
	const char *oci;	/* or an OCI layout/archive, PATH[:TAG] (oci.h) */
	int vcpus, memory_mib;	/* 0: the template's (or the build in progress's) */
	uint64_t max_unpacked;	/* 0: BUILD_MAX_UNPACKED */
	bool no_snapshot;	/* a boot-only version (no zygote) */
	/* A command started before the snapshot, so it runs in every sandbox
	 * the moment it is created (a server, an interpreter); ready once
	 * something listens on ready_port (0: once it has run a second
	 * without exiting), within ready_timeout_s (0: TEMPLATE_READY_S). */
	const char *start;
	int ready_port, ready_timeout_s;
	bool restart;		/* discard a build in progress */
	/* Or a Dockerfile build (dfbuild.h): the context directory, the
	 * Dockerfile if not DIR/Dockerfile, ARG values (NAME=VALUE, NULL-ended),
	 * the context's size limit (0: BCTX_MAX_BYTES). */
	const char *dockerfile, *dockerfile_file;
	const char *const *build_args;
	uint64_t max_context;
	/* The root's size in MiB (0: the FROM image's): the build VM's disk
	 * is made this large and its ext4 grown online before the steps, so
	 * RUN has the room and the template's root is this size. */
	int64_t disk_mib;
	/* The network of a Dockerfile's RUN steps (--build-net): NULL or
	 * "none", no network device; "internet", a sandbox's default policy
	 * (the internet, not the host's networks); or CIDR[,CIDR...], only
	 * those (as a sandbox's allow_out). Needs the host's network. */
	const char *build_net;
	/* A plan's (tbuild.h; 0: none): the build fails once it has run
	 * max_seconds (checked before each step, and each RUN's timeout cut
	 * to what is left), or when its root image takes more than
	 * max_root_mib allocated (checked after the image step). */
	int64_t max_seconds, max_root_mib;
	/* The new version's number is at least this (0: one above the
	 * highest here); a build in progress below it is discarded. A
	 * cluster's API sets it, so that a name deleted and built again
	 * never reuses a version an old copy may still carry. */
	int64_t first_version;
};

/* `kilnd template build` (see template_build.c). */
int template_build(const struct host_config *cfg, const struct build_opts *o);

#endif
