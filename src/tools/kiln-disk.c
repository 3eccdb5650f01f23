/*
 * kiln-disk: make and inspect kiln's copy-on-write disk overlays
 * (docs/disk.md).
 *
 *   kiln-disk create OVERLAY BASE   a new empty overlay over BASE
 *   kiln-disk info DISK             the chain below DISK, layer by layer
 *   kiln-disk flatten DISK OUT      one overlay over the raw base, same content
 *   kiln-disk seal|unseal OVERLAY   mark read-only (a base for others) or not
 */
#include "vmm/overlay.h"
#include "common/err.h"

#include <stdio.h>
#include <string.h>

static int usage(void)
{
	fputs("usage: kiln-disk create OVERLAY BASE | info DISK | flatten DISK OUT | seal OVERLAY | unseal OVERLAY\n",
	      stderr);
	return 2;
}

static int info(const char *path)
{
	struct chain c;
	if (chain_open(&c, path, false) < 0)
		return -1;
	printf("size %llu\n", (unsigned long long)c.size);
	for (int i = 0; i < c.n; i++) {
		struct layer *l = &c.layers[i];
		if (l->raw) {
			printf("layer %d raw %s\n", i, l->path);
			continue;
		}
		unsigned long long used = 0;
		for (uint64_t k = 0; k < l->nmap; k++)
			used += l->map[k] != 0;
		printf("layer %d overlay %s depth %u clusters %llu%s\n", i, l->path, l->depth, used,
		       l->sealed ? " sealed" : "");
	}
	chain_close(&c);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;
	if (argc == 4 && strcmp(argv[1], "create") == 0)
		rc = overlay_create(argv[2], argv[3]);
	else if (argc == 3 && strcmp(argv[1], "info") == 0)
		rc = info(argv[2]);
	else if (argc == 4 && strcmp(argv[1], "flatten") == 0)
		rc = overlay_flatten(argv[2], argv[3], NULL);
	else if (argc == 3 && strcmp(argv[1], "seal") == 0)
		rc = overlay_set_sealed(argv[2], true);
	else if (argc == 3 && strcmp(argv[1], "unseal") == 0)
		rc = overlay_set_sealed(argv[2], false);
	else
		return usage();
	if (rc < 0) {
		fprintf(stderr, "kiln-disk: %s\n", errmsg());
		return 1;
	}
	return 0;
}
