#include "host/disk.h"
#include "common/err.h"
#include "vmm/overlay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int disk_create(const char *top, const char *base)
{
	if (base[0] != '/' || top[0] != '/')
		return errf(EINVAL, "disk paths must be absolute (%s over %s)", top, base);
	return overlay_create(top, base);
}

int disk_seal(const char *path)
{
	return overlay_set_sealed(path, true);
}

int disk_flatten(const char *top, const char *out)
{
	return overlay_flatten(top, out);
}

/* The base recorded in an overlay's header (docs/disk.md: its length at
 * offset 56, the path at 64), resolved against the overlay's directory.
 * 1 with the base, 0 for a raw image. */
static int base_of(const char *path, char base[PATH_MAX])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("open %s", path);
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

int disk_chain(const char *top, char (*layers)[PATH_MAX], int max, int *n)
{
	*n = 0;
	char cur[PATH_MAX];
	snprintf(cur, sizeof cur, "%s", top);
	for (;;) {
		if (*n == max)
			return errf(ELOOP, "%s: chain deeper than %d layers", top, max);
		snprintf(layers[(*n)++], PATH_MAX, "%s", cur);
		char base[PATH_MAX];
		int rc = base_of(cur, base);
		if (rc <= 0)
			return rc;
		memcpy(cur, base, sizeof cur);
	}
}
