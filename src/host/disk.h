/*
 * disk: the disks of sandboxes, as copy-on-write overlays (docs/disk.md,
 * src/vmm/overlay.c, linked in: no process is started for a disk). A
 * template's root image is raw and read-only; the template VM's own layer
 * is an overlay on it, sealed after the snapshot; every sandbox writes to
 * an overlay of its own on top. A live fork (done by kiln-vmm) seals the
 * parent's top and gives parent and children new overlays on it, so
 * layers come to be shared; layers.c removes them once nothing uses them.
 *
 * kilnd always passes absolute paths, and an overlay records its base as
 * given, so a layer's chain does not depend on where it is read from.
 */
#ifndef KILN_HOST_DISK_H
#define KILN_HOST_DISK_H

#include <limits.h>
#include <stdint.h>

/* Make top, a new empty overlay over base. */
int disk_create(const char *top, const char *base);
/* The same, the disk size bytes (at least base's: overlay_create_sized). */
int disk_create_sized(const char *top, const char *base, uint64_t size);
/* Seal an overlay: read-only from now on, a base for others. */
int disk_seal(const char *path);
/* A depth-1 overlay at out with the content of top's chain, over the same
 * raw base (a copy of what the sandbox changed, and its template's); its
 * layers are confined as for disk_chain. */
int disk_flatten(const char *data_dir, const char *top, const char *out);
/* A raw image at out (created, sparse) with the content of top's chain:
 * its raw base copied, then every cluster an overlay of the chain holds
 * written over it. The layers below top must lie under DATA/templates
 * (data_dir is DATA) or under extra_root (NULL: none), as for disk_chain.
 * How a template's root image is made from a Dockerfile build's layers. */
int disk_to_raw(const char *data_dir, const char *top, const char *extra_root, const char *out);
/* The size of the disk an overlay (or raw image) describes. The header
 * of a sandbox's top layer is the VMM's to write: callers bound what
 * they do with the number. */
int disk_size(const char *path, uint64_t *bytes);
/* The layers of top's chain, top first, raw base last; at most max.
 * A header is the VMM's to write: every base must be a regular file
 * reached without symlinks under DATA/templates, DATA/snapshots or
 * DATA/sandboxes (data_dir is DATA), or the chain is refused (-EPERM),
 * and nothing outside them is opened. */
int disk_chain(const char *data_dir, const char *top, char (*layers)[PATH_MAX], int max, int *n);

#endif
