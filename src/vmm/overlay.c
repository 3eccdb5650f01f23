#include "vmm/overlay.h"
#include "common/err.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CLUSTER ((uint64_t)1 << OVERLAY_CLUSTER_BITS)
#define HEADER_SIZE 4096
#define BASE_MAX 3000

struct header {
	char magic[8];
	uint32_t version;
	uint32_t cluster_bits;
	uint64_t size;
	uint64_t map_offset;
	uint64_t map_entries;
	uint64_t data_offset;
	uint32_t depth;
	uint32_t flags;
	uint32_t base_len;
	uint32_t reserved;
	char base[BASE_MAX];
};

#define FLAG_SEALED 1

_Static_assert(sizeof(struct header) <= HEADER_SIZE, "overlay header fits its block");

static int full_pread(int fd, void *buf, size_t n, uint64_t off)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = pread(fd, p, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0) {
			memset(p, 0, n);       /* past the end of a file: zeros */
			return 0;
		}
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int full_pwrite(int fd, const void *buf, size_t n, uint64_t off)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t r = pwrite(fd, p, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

bool overlay_is(int fd)
{
	char m[8];
	return pread(fd, m, 8, 0) == 8 && memcmp(m, OVERLAY_MAGIC, 8) == 0;
}

static int read_header(int fd, const char *path, struct header *h)
{
	if (full_pread(fd, h, sizeof *h, 0) < 0)
		return errf_sys("overlay %s", path);
	if (memcmp(h->magic, OVERLAY_MAGIC, 8) != 0)
		return errf(EINVAL, "overlay %s: bad magic", path);
	if (h->version != 1 || h->cluster_bits != OVERLAY_CLUSTER_BITS)
		return errf(EINVAL, "overlay %s: version %u / cluster bits %u not supported",
			    path, h->version, h->cluster_bits);
	if (h->size == 0 || h->size & 511 || h->map_offset != HEADER_SIZE ||
	    h->map_entries != (h->size + CLUSTER - 1) / CLUSTER ||
	    h->data_offset < h->map_offset + h->map_entries * 8 || h->data_offset % CLUSTER ||
	    h->base_len == 0 || h->base_len >= BASE_MAX || h->base[h->base_len] != 0 ||
	    h->depth == 0 || h->depth > 64)
		return errf(EINVAL, "overlay %s: damaged header", path);
	return 0;
}

/* resolve: a base path relative to the overlay's own directory. */
static void resolve(const char *overlay, const char *base, char *out, size_t n)
{
	if (base[0] == '/') {
		snprintf(out, n, "%s", base);
		return;
	}
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s", overlay);
	snprintf(out, n, "%s/%s", dirname(tmp), base);
}

/* base_info: the size and depth of a would-be base. */
static int base_info(const char *path, uint64_t *size, uint32_t *depth)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("base %s", path);
	int rc = 0;
	if (overlay_is(fd)) {
		struct header h = { 0 };
		rc = read_header(fd, path, &h);
		*size = h.size;
		*depth = h.depth;
	} else {
		struct stat st;
		if (fstat(fd, &st) < 0)
			rc = errf_sys("base %s", path);
		*size = (uint64_t)st.st_size & ~511ULL;
		*depth = 0;
		if (rc == 0 && *size == 0)
			rc = errf(EINVAL, "base %s is empty", path);
	}
	close(fd);
	return rc;
}

static int write_new(const char *path, const char *base_as_stored, uint64_t size, uint32_t depth)
{
	struct header *h = calloc(1, HEADER_SIZE);
	if (!h)
		return errf(ENOMEM, "out of memory");
	memcpy(h->magic, OVERLAY_MAGIC, 8);
	h->version = 1;
	h->cluster_bits = OVERLAY_CLUSTER_BITS;
	h->size = size;
	h->map_offset = HEADER_SIZE;
	h->map_entries = (size + CLUSTER - 1) / CLUSTER;
	h->data_offset = (HEADER_SIZE + h->map_entries * 8 + CLUSTER - 1) & ~(CLUSTER - 1);
	h->depth = depth;
	h->base_len = (uint32_t)strlen(base_as_stored);
	if (h->base_len == 0 || h->base_len >= BASE_MAX) {
		free(h);
		return errf(ENAMETOOLONG, "overlay %s: base path too long", path);
	}
	memcpy(h->base, base_as_stored, h->base_len + 1);
	/* O_EXCL: never clobber a disk that may be in use. */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int rc = 0;
	if (fd < 0) {
		rc = errf_sys("overlay %s", path);
	} else {
		if (full_pwrite(fd, h, HEADER_SIZE, 0) < 0 ||
		    ftruncate(fd, (off_t)h->data_offset) < 0)
			rc = errf_sys("overlay %s", path);
		if (rc == 0 && fsync(fd) < 0)
			rc = errf_sys("overlay %s", path);
		close(fd);
		if (rc < 0)
			unlink(path);
	}
	free(h);
	return rc;
}

int overlay_create(const char *path, const char *base)
{
	return overlay_create_sized(path, base, 0);
}

int overlay_create_sized(const char *path, const char *base, uint64_t size)
{
	char resolved[PATH_MAX];
	resolve(path, base, resolved, sizeof resolved);
	uint64_t have = 0;
	uint32_t depth = 0;
	int rc = base_info(resolved, &have, &depth);
	if (rc < 0)
		return rc;
	if (!size)
		size = have;	/* overlay_create: its base's size */
	if (size % 512 || size < have)
		return errf(EINVAL, "overlay %s: size %llu: want a multiple of 512, at least its base's %llu", path,
			    (unsigned long long)size, (unsigned long long)have);
	return write_new(path, base, size, depth + 1);
}

/* Whether s[0..n) is <digits>-<digits>. */
static bool fork_suffix(const char *s, size_t n)
{
	size_t dash = 0, i;
	while (dash < n && s[dash] >= '0' && s[dash] <= '9')
		dash++;
	if (dash == 0 || dash >= n || s[dash] != '-')
		return false;
	for (i = dash + 1; i < n && s[i] >= '0' && s[i] <= '9'; i++)
		;
	return i > dash + 1 && i == n;
}

size_t overlay_fork_stem(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t name = slash ? (size_t)(slash - path) + 1 : 0, end = strlen(path);
	for (;;) {
		size_t dot = end;
		while (dot > name && path[dot - 1] != '.')
			dot--;
		/* dot - 1 is the '.'; a name that is all suffix keeps it. */
		if (dot <= name + 1 || !fork_suffix(path + dot, end - dot))
			return end;
		end = dot - 1;
	}
}

int overlay_fork_name(const char *path, int pid, unsigned n0, char *out, size_t cap)
{
	size_t stem = overlay_fork_stem(path);
	for (unsigned n = n0;; n++) {
		int len = snprintf(out, cap, "%.*s.%d-%u", (int)stem, path, pid, n);
		const char *name = len < 0 ? NULL : strrchr(out, '/');
		name = name ? name + 1 : out;
		/* Room for ".flat" too: a later fork may flatten under it. */
		if (len < 0 || (size_t)len + sizeof ".flat" > cap || strlen(name) + strlen(".flat") > NAME_MAX)
			return errf(ENAMETOOLONG, "overlay %s: no room for a fork's name", path);
		/* lstat, not access: this runs in the jailed VMM, whose seccomp
		 * filter allows the stat calls and not access(2). */
		char flat[PATH_MAX + sizeof ".flat"];
		struct stat st;
		snprintf(flat, sizeof flat, "%s.flat", out);
		if (lstat(out, &st) < 0 && errno == ENOENT && lstat(flat, &st) < 0 && errno == ENOENT)
			return 0;
		if (n - n0 > 100000)
			return errf(EEXIST, "overlay %s: every fork name taken", path);
	}
}

int overlay_set_sealed(const char *path, bool sealed)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("overlay %s", path);
	struct header h;
	int rc = read_header(fd, path, &h);
	if (rc == 0) {
		h.flags = sealed ? h.flags | FLAG_SEALED : h.flags & ~(uint32_t)FLAG_SEALED;
		if (full_pwrite(fd, &h.flags, 4, offsetof(struct header, flags)) < 0 || fsync(fd) < 0)
			rc = errf_sys("overlay %s", path);
	}
	close(fd);
	return rc;
}

int overlay_set_base(const char *path, const char *base)
{
	size_t len = strlen(base);
	if (len == 0 || len >= BASE_MAX)
		return errf(ENAMETOOLONG, "overlay %s: base path too long", path);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("overlay %s", path);
	struct header h;
	char resolved[PATH_MAX];
	uint64_t size;
	uint32_t depth;
	int rc = read_header(fd, path, &h);
	if (rc == 0) {
		resolve(path, base, resolved, sizeof resolved);
		rc = base_info(resolved, &size, &depth);
	}
	if (rc == 0 && (size > h.size || depth + 1 != h.depth))
		rc = errf(EINVAL, "overlay %s: base %s is not one it can sit on (size %llu, depth %u; "
			  "want at most %llu, depth %u)", path, base, (unsigned long long)size, depth,
			  (unsigned long long)h.size, h.depth - 1);
	if (rc == 0) {
		memset(h.base, 0, sizeof h.base);
		memcpy(h.base, base, len + 1);
		h.base_len = (uint32_t)len;
		if (full_pwrite(fd, &h, sizeof h, 0) < 0 || fsync(fd) < 0)
			rc = errf_sys("overlay %s", path);
	}
	close(fd);
	return rc;
}

/* ---- chains ------------------------------------------------------------- */

static bool below(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return n && strncmp(path, dir, n) == 0 && path[n] == '/';
}

int overlay_open_within(const char *path, int flags, const char *const *roots)
{
	if (!roots) {
		int fd = open(path, flags | O_CLOEXEC);
		return fd < 0 ? errf_sys("disk %s", path) : fd;
	}
	char real[PATH_MAX];
	if (!realpath(path, real))
		return errf_sys("disk %s", path);
	bool inside = false;
	for (int i = 0; roots[i] && !inside; i++)
		inside = below(real, roots[i]);
	if (!inside)
		return errf(EPERM, "disk layer %s (%s) is outside kiln's template, snapshot and "
			    "sandbox directories: refused", path, real);
	/* The check and the open must name the same file: no symlink may be
	 * followed on the way (a VMM can swap one into its own directory). */
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK),
				.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, real, &how, sizeof how);
	if (fd < 0 && errno == ENOSYS)
		fd = open(real, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errf_sys("disk %s", real);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return errf(EPERM, "disk layer %s is not a regular file: refused", real);
	}
	return fd;
}

static int open_layer(struct layer *l, const char *path, bool writable, const char *const *roots)
{
	memset(l, 0, sizeof *l);
	snprintf(l->path, sizeof l->path, "%s", path);
	l->fd = overlay_open_within(path, writable ? O_RDWR : O_RDONLY, roots);
	if (l->fd < 0)
		return l->fd;
	if (!overlay_is(l->fd)) {
		struct stat st;
		if (fstat(l->fd, &st) < 0)
			return errf_sys("disk %s", path);
		l->raw = true;
		l->file_size = (uint64_t)st.st_size;
		if (S_ISBLK(st.st_mode)) {
			off_t end = lseek(l->fd, 0, SEEK_END);
			l->file_size = end > 0 ? (uint64_t)end : 0;
		}
		return 0;
	}
	struct header h;
	int rc = read_header(l->fd, path, &h);
	if (rc < 0)
		return rc;
	l->nmap = h.map_entries;
	l->depth = h.depth;
	l->size = h.size;
	l->sealed = h.flags & FLAG_SEALED;
	char next[PATH_MAX];
	resolve(path, h.base, next, sizeof next);
	if (!(l->base = strdup(next)))
		return errf(ENOMEM, "out of memory");
	l->map = calloc(l->nmap, 8);
	if (!l->map)
		return errf(ENOMEM, "out of memory");
	if (full_pread(l->fd, l->map, l->nmap * 8, h.map_offset) < 0)
		return errf_sys("overlay %s", path);
	struct stat st;
	if (fstat(l->fd, &st) < 0)
		return errf_sys("overlay %s", path);
	l->file_size = (uint64_t)st.st_size;
	l->data_end = ((uint64_t)st.st_size + CLUSTER - 1) & ~(CLUSTER - 1);
	if (l->data_end < h.data_offset)
		l->data_end = h.data_offset;
	for (uint64_t i = 0; i < l->nmap; i++)
		if (l->map[i] && (l->map[i] % CLUSTER || l->map[i] < h.data_offset ||
				  l->map[i] + CLUSTER > l->data_end))
			return errf(EINVAL, "overlay %s: cluster %llu points outside the file",
				    path, (unsigned long long)i);
	return 0;
}

void chain_close(struct chain *c)
{
	for (int i = 0; i < c->n; i++) {
		if (c->layers[i].fd >= 0)
			close(c->layers[i].fd);
		free(c->layers[i].map);
		free(c->layers[i].base);
	}
	free(c->layers);
	free(c->scratch);
	memset(c, 0, sizeof *c);
}

int chain_open(struct chain *c, const char *path, bool writable)
{
	return chain_open_within(c, path, writable, NULL);
}

/* layer_copy: l as a copy of an open layer of another chain: its own
 * descriptor (a dup) and map, the same file. */
static int layer_copy(struct layer *l, const struct layer *from)
{
	*l = *from;
	l->map = NULL;
	l->base = NULL;
	l->unsynced = 0;
	l->fd = fcntl(from->fd, F_DUPFD_CLOEXEC, 0);
	if (l->fd < 0)
		return errf_sys("disk %s: dup", from->path);
	if (from->base && !(l->base = strdup(from->base)))
		return errf(ENOMEM, "out of memory");
	if (from->nmap) {
		if (!(l->map = malloc(from->nmap * 8)))
			return errf(ENOMEM, "out of memory");
		memcpy(l->map, from->map, from->nmap * 8);
	}
	return 0;
}

int chain_open_over(struct chain *c, const char *path, bool writable, const struct chain *below,
		    int from)
{
	if (!below || from < 0 || from >= below->n)
		return chain_open(c, path, writable);
	if (below->writable && from == 0)
		return errf(EINVAL, "disk %s: a writable top cannot be shared as a base", path);
	memset(c, 0, sizeof *c);
	int n = 1 + below->n - from;
	if (!(c->layers = calloc((size_t)n, sizeof *c->layers)))
		return errf(ENOMEM, "out of memory");
	int rc = open_layer(&c->layers[0], path, writable, NULL);
	c->n = 1;
	const struct layer *top = &c->layers[0];
	if (rc == 0 && (top->raw || !top->base || strcmp(top->base, below->layers[from].path) != 0)) {
		/* Not a layer over that chain (or named another way): open it
		 * as its header says. */
		chain_close(c);
		return chain_open(c, path, writable);
	}
	/* Every layer's slot counts once tried: chain_close frees what a
	 * failed copy got (a failed dup leaves fd -1). */
	for (int i = from; rc == 0 && i < below->n; i++)
		rc = layer_copy(&c->layers[c->n++], &below->layers[i]);
	if (rc == 0 && !below->layers[from].raw && below->layers[from].size > top->size)
		rc = errf(EINVAL, "disk %s: layer %s is larger than the layer above it", path,
			  below->layers[from].path);
	c->size = top->size;
	if (rc == 0 && writable && top->sealed)
		rc = errf(EROFS, "disk %s is a sealed overlay (a base for others): open it read-only", path);
	if (rc == 0 && !(c->scratch = malloc(CLUSTER)))
		rc = errf(ENOMEM, "out of memory");
	if (rc < 0) {
		chain_close(c);
		return rc;
	}
	c->writable = writable;
	return 0;
}

int chain_open_within(struct chain *c, const char *path, bool writable,
		      const char *const *roots)
{
	memset(c, 0, sizeof *c);
	const char *cur = path;
	for (;;) {
		if (c->n == 64) {
			chain_close(c);
			return errf(ELOOP, "disk %s: chain deeper than 64 layers", path);
		}
		struct layer *nl = realloc(c->layers, (size_t)(c->n + 1) * sizeof *nl);
		if (!nl) {
			chain_close(c);
			return errf(ENOMEM, "out of memory");
		}
		c->layers = nl;
		struct layer *l = &c->layers[c->n++];
		int rc = open_layer(l, cur, writable && c->n == 1, c->n == 1 ? NULL : roots);
		if (rc < 0) {
			chain_close(c);            /* frees what open_layer got */
			return rc;
		}
		/* A layer may be smaller than the one above it (a disk grown
		 * over it: overlay_create_sized), never larger: past its end
		 * lookup falls through to layers that end there too, and the
		 * raw base reads zeros past its file. */
		if (c->n == 1)
			c->size = l->raw ? l->file_size & ~511ULL : l->size;
		else if (!l->raw && l->size > c->layers[c->n - 2].size) {
			chain_close(c);
			return errf(EINVAL, "disk %s: layer %s is larger than the layer above it", path, l->path);
		}
		if (l->raw)
			break;
		cur = l->base;
	}
	if (c->size == 0) {
		chain_close(c);
		return errf(EINVAL, "disk %s is smaller than one 512-byte sector", path);
	}
	if (writable && !c->layers[0].raw && c->layers[0].sealed) {
		chain_close(c);
		return errf(EROFS, "disk %s is a sealed overlay (a base for others): open it read-only", path);
	}
	if (!(c->scratch = malloc(CLUSTER))) {
		chain_close(c);
		return errf(ENOMEM, "out of memory");
	}
	c->writable = writable;
	return 0;
}

/* lookup: which layer holds cluster k, and where in its file. */
static struct layer *lookup(struct chain *c, uint64_t k, uint64_t *where)
{
	for (int i = 0; i < c->n; i++) {
		struct layer *l = &c->layers[i];
		if (l->raw) {
			*where = k * CLUSTER;
			return l;
		}
		if (k < l->nmap && l->map[k]) {
			*where = l->map[k];
			return l;
		}
	}
	return NULL;
}

/* read_range: [off, off+len) within one cluster, into p. */
static int read_range(struct chain *c, uint64_t off, uint8_t *p, size_t len)
{
	uint64_t where;
	struct layer *l = lookup(c, off / CLUSTER, &where);
	uint64_t in = off % CLUSTER;
	if (!l) {
		memset(p, 0, len);
		return 0;
	}
	if (l->raw) {
		/* The raw base may be shorter than the disk: zeros past its end. */
		uint64_t at = where + in;
		if (at >= l->file_size) {
			memset(p, 0, len);
			return 0;
		}
		size_t have = at + len > l->file_size ? (size_t)(l->file_size - at) : len;
		int rc = full_pread(l->fd, p, have, at);
		memset(p + have, 0, len - have);
		return rc;
	}
	return full_pread(l->fd, p, len, where + in);
}

/* for_each_piece: walk an iovec and a disk range together, cluster by
 * cluster, calling fn on each (host pointer, disk offset, length). */
static int64_t for_each_piece(struct chain *c, const struct iovec *iov, int n, uint64_t off,
			      int (*fn)(struct chain *, uint64_t, uint8_t *, size_t))
{
	uint64_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (off > c->size || total > c->size - off)
		return -ERANGE;
	for (int i = 0; i < n; i++) {
		uint8_t *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;
		while (left) {
			size_t k = (size_t)(CLUSTER - off % CLUSTER);
			if (k > left)
				k = left;
			int rc = fn(c, off, p, k);
			if (rc < 0)
				return rc;
			p += k;
			off += k;
			left -= k;
		}
	}
	return (int64_t)total;
}

int64_t chain_readv(struct chain *c, const struct iovec *iov, int n, uint64_t off)
{
	return for_each_piece(c, iov, n, off, read_range);
}

/* writeback: keep what the top layer's writes leave in the host's page
 * cache small. That cache is charged to the VMM's memory cgroup, whose
 * limit is sized by the guest's memory, not its disk: a guest writing its
 * disk at full speed would otherwise fill it with dirty pages faster than
 * they can be written and reclaimed, and the kernel kills the VMM. So,
 * every OVERLAY_WRITEBACK_BYTES: wait for the writeback started last time
 * (the guest cannot run ahead of the disk by more than that), start it
 * for what was written since, and drop the pages already on disk. At
 * most about two batches are cached per VMM. On tmpfs these do nothing:
 * there the pages are the file (kilnd sizes the cgroup for them). */
static void writeback(struct layer *top, size_t len)
{
	top->unsynced += len;
	if (top->unsynced < OVERLAY_WRITEBACK_BYTES)
		return;
	top->unsynced = 0;
	sync_file_range(top->fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE);
	posix_fadvise(top->fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* make_room: may the top layer's file grow by a cluster? Not when its
 * filesystem would keep less than the reserve kilnd holds for itself
 * (kilnd --reserve-disk): the guest sees an I/O error for that write,
 * every other tenant and kilnd's database keep their room. Every VMM on
 * the filesystem writes without asking the others, so each looks again
 * after an eighth of what was above the reserve at its last look, and
 * after OVERLAY_ROOM_LOOK at most: N VMMs writing at once can go below the
 * reserve by N times that (1 MiB each), not by what was free when each
 * last looked (this was 64 MiB, and a VMM that looked before a neighbour
 * filled the disk wrote 25 MiB into the reserve). One fstatvfs per MiB
 * of growth, and one per cluster near the end. */
#define OVERLAY_ROOM_LOOK (1u << 20)
static int make_room(struct chain *c, struct layer *top)
{
	if (!c->reserve)
		return 0;
	if (c->room < CLUSTER) {
		struct statvfs fs;
		if (fstatvfs(top->fd, &fs) < 0)
			return -errno;
		uint64_t free_bytes = (uint64_t)fs.f_bavail * fs.f_frsize;
		uint64_t above = free_bytes > c->reserve ? free_bytes - c->reserve : 0;
		if (above < CLUSTER) {
			c->room = 0;
			return -ENOSPC;
		}
		c->room = above / 8;
		if (c->room < CLUSTER)
			c->room = CLUSTER;
		if (c->room > OVERLAY_ROOM_LOOK)
			c->room = OVERLAY_ROOM_LOOK;
	}
	c->room -= CLUSTER;
	return 0;
}

/* copyup_read: a whole cluster as the layers below the top have it, for
 * a copy-up. Where that is a hole of the raw base (free space of the
 * template's filesystem, where most new files go), it is zeros without a
 * read: the read would cost I/O for nothing and leave the base's zero
 * pages in the host's page cache, charged to this VMM's memory cgroup (a
 * guest writing a gigabyte of new files would fill its cgroup with
 * them). One lseek per copy-up, where a read was. */
static int copyup_read(struct chain *c, uint64_t k, uint8_t *cl)
{
	uint64_t where;
	struct layer *l = lookup(c, k, &where);
	if (l && l->raw && where < l->file_size) {
		uint64_t end = where + CLUSTER < l->file_size ? where + CLUSTER : l->file_size;
		off_t data = lseek(l->fd, (off_t)where, SEEK_DATA);
		if ((data < 0 && errno == ENXIO) || (data >= 0 && (uint64_t)data >= end)) {
			memset(cl, 0, CLUSTER);
			return 0;
		}
	}
	return read_range(c, k * CLUSTER, cl, CLUSTER);
}

static int write_cluster(struct chain *c, uint64_t off, uint8_t *p, size_t len)
{
	struct layer *top = &c->layers[0];
	if (top->raw)
		return full_pwrite(top->fd, p, len, off);
	uint64_t k = off / CLUSTER;
	if (k >= top->nmap)
		return -ERANGE;
	if (top->map[k])
		return full_pwrite(top->fd, p, len, top->map[k] + off % CLUSTER);
	/* First write to this cluster here: the file grows by one. */
	int rc = make_room(c, top);
	if (rc < 0)
		return rc;
	/* Copy it up whole, with the new bytes in place, then point the map
	 * at it. Data before map entry, so a crash in between leaves the old
	 * view intact. */
	uint8_t *cl = c->scratch;
	rc = copyup_read(c, k, cl);
	if (rc < 0)
		return rc;
	memcpy(cl + off % CLUSTER, p, len);
	uint64_t where = top->data_end;
	if ((rc = full_pwrite(top->fd, cl, CLUSTER, where)) < 0)
		return rc;
	top->data_end += CLUSTER;
	top->unsynced += CLUSTER - len;   /* the copy-up wrote a whole cluster */
	if ((rc = full_pwrite(top->fd, &where, 8, HEADER_SIZE + k * 8)) < 0)
		return rc;
	top->map[k] = where;
	return 0;
}

static int write_range(struct chain *c, uint64_t off, uint8_t *p, size_t len)
{
	struct layer *top = &c->layers[0];
	int rc = write_cluster(c, off, p, len);
	if (rc == 0)
		writeback(top, len);
	return rc;
}

int64_t chain_writev(struct chain *c, const struct iovec *iov, int n, uint64_t off)
{
	if (!c->writable)
		return -EROFS;
	return for_each_piece(c, iov, n, off, write_range);
}

int chain_flush(struct chain *c)
{
	if (!c->writable)
		return 0;
	return fdatasync(c->layers[0].fd) < 0 ? -errno : 0;
}

int overlay_flatten(const char *top, const char *out, const char *const *roots)
{
	struct chain c;
	int rc = chain_open_within(&c, top, false, roots);
	if (rc < 0)
		return rc;
	rc = overlay_flatten_chain(&c, out);
	chain_close(&c);
	return rc;
}

int overlay_flatten_chain(struct chain *c, const char *out)
{
	const char *top = c->layers[0].path;
	struct layer *raw = &c->layers[c->n - 1];
	if (!raw->raw)
		return errf(EINVAL, "disk %s: chain has no raw base", top);
	/* The new overlay stores the raw base's absolute path. */
	char base[PATH_MAX];
	if (!realpath(raw->path, base))
		return errf_sys("base %s", raw->path);
	int rc = write_new(out, base, c->size, 1);
	struct chain o;
	if (rc == 0)
		rc = chain_open(&o, out, true);
	if (rc < 0)
		return rc;
	uint8_t *cl = malloc(CLUSTER);
	uint64_t nclusters = (c->size + CLUSTER - 1) / CLUSTER;
	for (uint64_t k = 0; rc == 0 && k < nclusters; k++) {
		uint64_t where;
		struct layer *l = lookup(c, k, &where);
		if (!l || l->raw)
			continue;               /* unchanged from the base */
		if (!cl) {
			rc = errf(ENOMEM, "out of memory");
			break;
		}
		size_t len = (size_t)(k * CLUSTER + CLUSTER > c->size ? c->size - k * CLUSTER : CLUSTER);
		if ((rc = full_pread(l->fd, cl, len, where)) == 0)
			rc = write_range(&o, k * CLUSTER, cl, len);
		if (rc < 0)
			rc = errf(-rc, "flattening %s into %s: %s", top, out, strerror(-rc));
	}
	if (rc == 0 && (rc = chain_flush(&o)) < 0)
		rc = errf(-rc, "flattening %s: %s", out, strerror(-rc));
	free(cl);
	chain_close(&o);
	if (rc < 0)
		unlink(out);
	return rc;
}
