/*
 * dfbuild: the root image of a template built from a Dockerfile
 * (docs/templates.md "Building from a Dockerfile"); the template build's
 * image step when it is given --dockerfile.
 *
 * FROM names a raw root image: a kiln template's (`kiln/NAME`, the root
 * image of its version in service, or a compiled-in one's prebuilt
 * image), an OCI image in the context (`oci:PATH[:TAG]`, unpacked by
 * the caller into the cache) or a Debian suite (`debian:SUITE`, built by
 * the caller with mmdebstrap through the machine's apt sources, once,
 * into the cache). Each RUN, COPY, ADD and WORKDIR is a step
 * on the disk, done inside one build microVM (no network device unless
 * the build asks for one, under an egress policy: tap; the host keeps
 * the files API and exec over vsock), never on the host. After each step the guest syncs and
 * the VMM seals the disk's top layer and goes on over a new one (the
 * "layer" control command), so every step leaves a sealed overlay in
 * the step cache, DATA/templates/.cache/KEY.layer, KEY being the chain
 * digest of the parent's key, the step's text and its inputs (COPY's
 * file digests, ARG values). A rebuild boots over the last layer it has
 * and redoes only the steps after it. The image is then the last layer's
 * chain written out as a raw image (disk_to_raw), which the template
 * build boots, warms and snapshots as any other.
 */
#ifndef KILN_HOST_DFBUILD_H
#define KILN_HOST_DFBUILD_H

#include "host/build_context.h"
#include "host/dockerfile.h"

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

struct host_config;

#define DF_RUN_TIMEOUT_MS (30 * 60 * 1000)	/* one RUN step */
#define DF_SUITE_MAX 32				/* FROM debian:SUITE */
#define DF_TAIL 240				/* bytes of a failed RUN's output in the error (the log has all) */

struct dfbuild {
	/* the caller's */
	const struct host_config *cfg;
	const char *name;		/* the template (the build VM's hostname) */
	const char *context;		/* the build context directory */
	const char *file;		/* the Dockerfile; NULL: CONTEXT/Dockerfile */
	const char *const *build_args;	/* NAME=VALUE, NULL-ended, or NULL */
	uint64_t max_context;		/* 0: BCTX_MAX_BYTES */
	int64_t deadline_ms;		/* mono_ms the build must end by (a plan's build_seconds); 0: none */
	int vcpus, memory_mib;		/* the build VM's */
	int64_t disk_mib;		/* the root's size (build_opts'); 0: the FROM image's */
	/* The build VM's network (build_opts' build_net, its policy set by
	 * the caller): NULL tap, no network device. */
	const char *tap, *netns, *dns;
	const char *vdir;		/* the version's directory (the build VM's goes there) */
	bool tty;
	void (*progress)(void *pctx, const char *msg);
	void *pctx;

	/* dfbuild_open's */
	struct dockerfile df;
	struct bctx bc;
	char cache[PATH_MAX];		/* DATA/templates/.cache */
	int lock;			/* on the cache */
	char from_oci[PATH_MAX];	/* FROM oci:: the reference (context path[:TAG]), else "" */
	char from_debian[DF_SUITE_MAX + 1];	/* FROM debian:: the suite, else "" */
	char from_key[65];		/* FROM's identity, hashed */
	/* The raw image and its config the steps start from: set by
	 * dfbuild_open for FROM kiln/NAME, by the caller for FROM oci: and
	 * FROM debian: */
	char base[PATH_MAX];
	json_t *base_image;

	/* dfbuild_run's */
	json_t *image;			/* the image config for the manifest */
	char start[1024];		/* the Dockerfile's ENTRYPOINT + CMD as a shell command, or "" */
	int ready_port;			/* its first EXPOSEd TCP port with them, or 0 */
	int steps, run, cached;		/* disk steps: all, done now, taken from the cache */
};

/* Read and parse the Dockerfile, measure the context, resolve FROM, lock
 * the cache. Errors name the line (the parser's) or the limit. */
int dfbuild_open(struct dfbuild *d);
/* Do the steps; write the raw root image at out. */
int dfbuild_run(struct dfbuild *d, const char *out);
void dfbuild_close(struct dfbuild *d);

/* What a FROM says: kind 't' (kiln/NAME: name), 'o' (oci:REF: ref),
 * 'd' (debian:SUITE: suite, checked by dfbuild_suite_ok), or -EINVAL
 * naming what is accepted. */
int dfbuild_from(const char *image, char *kind, const char **rest);
/* A Debian suite's name: a-z, then a-z, 0-9 or '-', 1 to DF_SUITE_MAX. */
bool dfbuild_suite_ok(const char *suite);

/* A WORKDIR or COPY destination p in the guest, joined onto the working
 * directory wd, "." and ".." taken out; a trailing '/' kept. */
void dfbuild_path(const char *wd, const char *p, char *out, size_t cap);

#endif
