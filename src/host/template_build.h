#ifndef KILN_HOST_TEMPLATE_BUILD_H
#define KILN_HOST_TEMPLATE_BUILD_H

#include <stdbool.h>

struct host_config;

struct build_opts {
	const char *name;
	const char *image;	/* a root image to use instead of the default */
	bool no_snapshot;	/* a boot-only version (no zygote) */
	bool restart;		/* discard a build in progress */
};

/* `kilnd template build` (see template_build.c). */
int template_build(const struct host_config *cfg, const struct build_opts *o);

#endif
