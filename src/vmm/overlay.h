/*
 * overlay: kiln's copy-on-write disk format (docs/disk.md). An overlay
 * file holds the 64 KiB clusters written since it was created, and a map
 * from cluster number to where that cluster lives in the file; everything
 * else is read from its base, a raw image or another overlay. Creating an
 * overlay copies no data, so sandbox creates and forks cost no disk I/O.
 *
 * A chain is opened whole (every layer's map in memory); only the top layer
 * is written, and only if it is not sealed. Forking a disk seals the top
 * and puts a fresh overlay over it for each side. Chains deeper than
 * OVERLAY_MAX_DEPTH are flattened into one overlay over the raw base.
 */
#ifndef KILN_VMM_OVERLAY_H
#define KILN_VMM_OVERLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define OVERLAY_MAGIC "KILNCOW1"
#define OVERLAY_CLUSTER_BITS 16
#define OVERLAY_MAX_DEPTH 8
/* Every this many bytes written, the top layer's page cache is written
 * back and dropped (write_range in overlay.c; docs/vmm.md "Disk writes
 * and host memory"). */
#define OVERLAY_WRITEBACK_BYTES (8u << 20)

struct layer {
	int fd;
	bool raw;                 /* a raw image: the bottom of a chain */
	uint64_t file_size;       /* raw: bytes; reads past it are zeros */
	uint64_t *map;            /* overlay: cluster -> file offset, 0 = absent */
	uint64_t nmap;
	uint64_t data_end;        /* overlay: where the next cluster goes */
	bool sealed;
	uint32_t depth;           /* 0 for a raw image */
	uint64_t size;            /* overlay: the disk size it describes */
	char *base;               /* overlay: its base, resolved */
	uint64_t unsynced;        /* bytes written since the last writeback */
	char path[4096];
};

struct chain {
	struct layer *layers;     /* [0] is the top */
	int n;
	uint64_t size;            /* virtual size in bytes */
	bool writable;
	uint8_t *scratch;         /* one cluster, for copy-up */
	uint64_t reserve;         /* bytes the top's filesystem keeps free: growth
				     past it fails with ENOSPC (0: none) */
	uint64_t room;            /* free there at the last look, less growth since */
};

/* overlay_is: whether the file at fd starts with the overlay magic. */
bool overlay_is(int fd);
/* overlay_create: a new empty overlay at path over base (raw or overlay).
 * The base's path is stored as given (relative paths are relative to the
 * overlay's directory). */
int overlay_create(const char *path, const char *base);
/* overlay_create_sized: the same, describing a disk of size bytes (a
 * multiple of 512, at least the base's: -EINVAL otherwise; 0: the
 * base's, as overlay_create); what lies past the base reads as zeros. A
 * disk grown for its filesystem to grow. */
int overlay_create_sized(const char *path, const char *base, uint64_t size);
/* overlay_fork_name: the name a live fork gives a disk's new top
 * (docs/disk.md "Forking a disk"): STEM.<pid>-<n>, STEM being path less
 * the ".<digits>-<digits>" suffixes earlier forks gave it, n the first
 * from n0 for which neither the name nor the name with ".flat" exists. The
 * name stays the same length however often the disk is forked (appending
 * to the top's name outgrew NAME_MAX after about 30 forks of one VM, and
 * every fork after failed). 0, -ENAMETOOLONG, or -EEXIST (every name
 * taken). */
int overlay_fork_name(const char *path, int pid, unsigned n0, char *out, size_t cap);
/* overlay_fork_stem: the length of path's STEM (above). */
size_t overlay_fork_stem(const char *path);
/* overlay_set_sealed: mark an overlay read-only (a base for others), or
 * undo that. */
int overlay_set_sealed(const char *path, bool sealed);
/* overlay_set_base: store base as the overlay's base path, in place (a
 * template version copied to another host's directory: the same base
 * file at its new path). The base must have the depth of the one stored
 * and no more than the overlay's size: -EINVAL otherwise. */
int overlay_set_base(const char *path, const char *base);
/* overlay_flatten: a new overlay at out holding every cluster that top's
 * chain has above its raw base, over that base: depth 1. roots: as for
 * chain_open_within (NULL: any path). */
int overlay_flatten(const char *top, const char *out, const char *const *roots);
/* overlay_flatten_chain: the same from a chain already open (its layers
 * are read, not changed): a VMM flattens its own disk this way, whose
 * lower layers may lie in directories it can no longer open by path. */
int overlay_flatten_chain(struct chain *c, const char *out);

/* overlay_open_within: open path (flags as for open) only if it is a
 * regular file whose real path lies under one of roots (a NULL-ended list
 * of real directory paths), reached without following any symlink: how
 * kilnd, as root, opens the layers of a chain whose headers a VMM could
 * have written. roots NULL: a plain open. An fd or -errno (errf set). */
int overlay_open_within(const char *path, int flags, const char *const *roots);

int chain_open(struct chain *c, const char *path, bool writable);
/* chain_open_over: open the overlay at path whose base is layer from of
 * an open chain below, taking that layer and the ones under it from
 * below (their descriptors duplicated, their maps copied) instead of
 * opening them by path: a forked VM gets its parent's layers this way,
 * the directories they lie in being its parent's and its ancestors',
 * closed to its own uid (docs/security.md, "Forks"). A top whose base
 * is another file is opened by path as chain_open does; below's
 * writable top cannot be shared (-EINVAL). */
int chain_open_over(struct chain *c, const char *path, bool writable, const struct chain *below,
		    int from);
/* chain_open_within: chain_open with every layer below the top opened by
 * overlay_open_within(roots). */
int chain_open_within(struct chain *c, const char *path, bool writable,
		      const char *const *roots);
void chain_close(struct chain *c);
int64_t chain_readv(struct chain *c, const struct iovec *iov, int n, uint64_t off);
int64_t chain_writev(struct chain *c, const struct iovec *iov, int n, uint64_t off);
int chain_flush(struct chain *c);

#endif
