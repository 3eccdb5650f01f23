#include "host/disk.h"
#include "common/err.h"
#include "vmm/overlay.h"
#include "host/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int disk_create(const char *top, const char *base)
{
	if (base[0] != '/' || top[0] != '/')
		return errf(EINVAL, "disk paths must be absolute (%s over %s)", top, base);
	return overlay_create(top, base);
}

int disk_create_sized(const char *top, const char *base, uint64_t size)
{
	if (base[0] != '/' || top[0] != '/')
		return errf(EINVAL, "disk paths must be absolute (%s over %s)", top, base);
	return overlay_create_sized(top, base, size);
}

int disk_seal(const char *path)
{
	return overlay_set_sealed(path, true);
}

/* Where a layer below a sandbox's top may be: kiln's template, snapshot
 * and sandbox directories, as real paths. A VMM writes its top layer's
 * header, base path included; kilnd follows a base only into these. */
struct roots {
	char buf[3][PATH_MAX];
	const char *list[4];
};

static const char *const *kiln_roots(const char *data_dir, struct roots *r)
{
	static const char *const names[] = { "templates", "snapshots", "sandboxes" };
	int n = 0;
	for (int i = 0; i < 3; i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s/%s", data_dir, names[i]);
		if (realpath(p, r->buf[n])) {
			r->list[n] = r->buf[n];
			n++;
		}
	}
	r->list[n] = NULL;
	return r->list;
}

int disk_flatten(const char *data_dir, const char *top, const char *out)
{
	struct roots r;
	return overlay_flatten(top, out, kiln_roots(data_dir, &r));
}

int disk_to_raw(const char *data_dir, const char *top, const char *extra_root, const char *out)
{
	char tdir[PATH_MAX], troot[PATH_MAX], xroot[PATH_MAX];
	const char *roots[3] = { NULL, NULL, NULL };
	int nr = 0;
	snprintf(tdir, sizeof tdir, "%s/templates", data_dir);
	if (realpath(tdir, troot))
		roots[nr++] = troot;
	if (extra_root && realpath(extra_root, xroot))
		roots[nr++] = xroot;
	struct chain c;
	int rc = chain_open_within(&c, top, false, roots);
	if (rc < 0)
		return rc;
	struct layer *raw = &c.layers[c.n - 1];
	char *argv[] = { "cp", "--sparse=always", "--reflink=auto", raw->path, (char *)out, NULL };
	unlink(out);
	rc = proc_run(argv, "/dev/null");
	if (rc != 0) {
		chain_close(&c);
		return rc < 0 ? rc : errf(EIO, "copying %s to %s: exit status %d", raw->path, out, rc);
	}
	int fd = open(out, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	uint64_t cl_size = 1ULL << OVERLAY_CLUSTER_BITS, nclusters = (c.size + cl_size - 1) / cl_size;
	uint8_t *buf = malloc(cl_size);
	if (fd < 0 || !buf)
		rc = fd < 0 ? errf_sys("open %s", out) : errf(ENOMEM, "out of memory");
	else if (ftruncate(fd, (off_t)c.size) < 0)
		rc = errf_sys("truncate %s", out);
	for (uint64_t i = 0; rc == 0 && i < nclusters; i++) {
		bool held = false;
		for (int l = 0; !held && l < c.n - 1; l++)
			held = i < c.layers[l].nmap && c.layers[l].map[i];
		if (!held)
			continue;
		uint64_t off = i * cl_size, len = c.size - off < cl_size ? c.size - off : cl_size;
		struct iovec iov = { buf, len };
		int64_t n = chain_readv(&c, &iov, 1, off);
		if (n != (int64_t)len)
			rc = errf(EIO, "reading %s at %llu: %s", top, (unsigned long long)off,
				  n < 0 ? strerror((int)-n) : "short read");
		else if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
			rc = errf_sys("write %s", out);
	}
	if (rc == 0 && fsync(fd) < 0)
		rc = errf_sys("fsync %s", out);
	free(buf);
	if (fd >= 0)
		close(fd);
	chain_close(&c);
	if (rc < 0)
		unlink(out);
	return rc;
}

int disk_size(const char *path, uint64_t *bytes)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errf_sys("open %s", path);
	uint8_t h[24];
	struct stat st;
	int rc = 0;
	if (pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h && memcmp(h, OVERLAY_MAGIC, 8) == 0)
		memcpy(bytes, h + 16, 8);        /* docs/disk.md: the size at offset 16 */
	else if (fstat(fd, &st) == 0)
		*bytes = (uint64_t)st.st_size;
	else
		rc = errf_sys("stat %s", path);
	close(fd);
	return rc;
}

/* The base recorded in an overlay's header (docs/disk.md: its length at
 * offset 56, the path at 64), resolved against the overlay's directory.
 * 1 with the base, 0 for a raw image. */
static int base_of(const char *path, char base[PATH_MAX], const char *const *roots)
{
	int fd = overlay_open_within(path, O_RDONLY, roots);
	if (fd < 0)
		return fd;
	uint8_t h[4096];
	ssize_t n = pread(fd, h, sizeof h, 0);
	close(fd);
	if (n < 64 || memcmp(h, OVERLAY_MAGIC, 8) != 0)
		return 0;
	uint32_t len;
	memcpy(&len, h + 56, 4);
	if (len == 0 || len >= 3000 || 64 + (ssize_t)len > n || h[64 + len] != 0)
		return errf(EINVAL, "%s: bad base path in the overlay header", path);
	const char *b = (const char *)h + 64;
	if (b[0] == '/') {
		snprintf(base, PATH_MAX, "%s", b);
	} else {
		const char *slash = strrchr(path, '/');
		int dl = slash ? (int)(slash - path) : 1;
		if (snprintf(base, PATH_MAX, "%.*s/%s", dl, slash ? path : ".", b) >= PATH_MAX)
			return errf(ENAMETOOLONG, "%s: base path too long", path);
	}
	return 1;
}

int disk_chain(const char *data_dir, const char *top, char (*layers)[PATH_MAX], int max, int *n)
{
	struct roots r;
	const char *const *roots = kiln_roots(data_dir, &r);
	*n = 0;
	char cur[PATH_MAX];
	snprintf(cur, sizeof cur, "%s", top);
	for (;;) {
		if (*n == max)
			return errf(ELOOP, "%s: chain deeper than %d layers", top, max);
		snprintf(layers[(*n)++], PATH_MAX, "%s", cur);
		char base[PATH_MAX];
		/* The top is kilnd's own path; every base comes from a header. */
		int rc = base_of(cur, base, *n == 1 ? NULL : roots);
		if (rc <= 0)
			return rc;
		memcpy(cur, base, sizeof cur);
	}
}
