#include "vmm/disk.h"
#include "common/err.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int disk_open(struct disk *d, const char *path, bool read_only)
{
	return disk_open_over(d, path, read_only, NULL, 0);
}

int disk_open_over(struct disk *d, const char *path, bool read_only, const struct chain *below,
		   int from)
{
	memset(d, 0, sizeof *d);
	snprintf(d->path, sizeof d->path, "%s", path);
	int rc = chain_open_over(&d->chain, path, !read_only, below, from);
	if (rc < 0)
		return rc;
	d->size = d->chain.size;
	d->read_only = read_only;
	return 0;
}

void disk_close(struct disk *d)
{
	chain_close(&d->chain);
}

int64_t disk_readv(struct disk *d, const struct iovec *iov, int n, uint64_t off)
{
	return chain_readv(&d->chain, iov, n, off);
}

int64_t disk_writev(struct disk *d, const struct iovec *iov, int n, uint64_t off)
{
	if (d->read_only)
		return -EROFS;
	return chain_writev(&d->chain, iov, n, off);
}

int disk_flush(struct disk *d)
{
	return chain_flush(&d->chain);
}

int disk_fork(struct disk *d, const char *parent_new, const char *const *child_paths, int n)
{
	return disk_fork_sized(d, parent_new, child_paths, n, 0);
}

int disk_fork_next(struct disk *d, int pid, unsigned n0, const char *const *child_paths, int n)
{
	if (d->read_only)
		return 0;
	char parent_new[sizeof d->path];
	int rc = overlay_fork_name(d->path, pid, n0, parent_new, sizeof parent_new);
	return rc < 0 ? rc : disk_fork(d, parent_new, child_paths, n);
}

int disk_fork_sized(struct disk *d, const char *parent_new, const char *const *child_paths, int n,
		    uint64_t size)
{
	if (d->read_only)
		return 0;
	struct layer *top = &d->chain.layers[0];
	if (top->raw)
		return errf(EINVAL, "disk %s is a raw image: forking needs a copy-on-write overlay "
			    "(kiln-disk create)", d->path);
	int rc = disk_flush(d);
	if (rc < 0)
		return errf(-rc, "disk %s: flush: %s", d->path, strerror(-rc));
	char frozen[PATH_MAX];
	if (!realpath(d->path, frozen))
		return errf_sys("disk %s", d->path);
	if ((rc = overlay_set_sealed(frozen, true)) < 0)
		return rc;
	/* Past the depth limit, fold the chain into one layer over the raw
	 * base first, so reads never walk a long chain. */
	char base[PATH_MAX];
	snprintf(base, sizeof base, "%s", frozen);
	if (top->depth + 1 > OVERLAY_MAX_DEPTH) {
		if ((size_t)snprintf(base, sizeof base, "%s.flat", frozen) >= sizeof base) {
			overlay_set_sealed(frozen, false);
			return errf(ENAMETOOLONG, "disk %s: path too long", frozen);
		}
		if ((rc = overlay_flatten_chain(&d->chain, base)) < 0 || (rc = overlay_set_sealed(base, true)) < 0) {
			overlay_set_sealed(frozen, false);
			return rc;
		}
	}
	int made = 0;
	for (; made < n; made++)
		if ((rc = overlay_create(child_paths[made], base)) < 0)
			break;
	if (rc == 0)
		rc = overlay_create_sized(parent_new, base, size);
	/* The new top's chain reuses the open layers under the sealed one
	 * (those of a forked VM lie in its ancestors' directories, which it
	 * cannot open by path); the sealed one is reopened read-only. */
	struct chain next, sealed = { 0 };
	bool folded = strcmp(base, frozen) != 0;
	if (rc == 0 && !folded)
		rc = chain_open_over(&sealed, frozen, false, &d->chain, 1);
	if (rc == 0 && (rc = chain_open_over(&next, parent_new, true, folded ? NULL : &sealed, 0)) < 0)
		unlink(parent_new);
	chain_close(&sealed);
	if (rc < 0) {
		/* Leave everything as it was: the parent keeps writing its top. */
		for (int i = 0; i < made; i++)
			unlink(child_paths[i]);
		overlay_set_sealed(frozen, false);
		return rc;
	}
	next.reserve = d->chain.reserve;
	chain_close(&d->chain);
	d->chain = next;
	d->size = next.size;
	snprintf(d->path, sizeof d->path, "%s", parent_new);
	return 0;
}
