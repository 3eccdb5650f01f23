/*
 * oci: an OCI image (or a `docker save` archive) into a root directory.
 * An image is untrusted input and kilnd runs this as root, so (oci.c):
 *   - every blob (index, manifest, config, layer) is checked against the
 *     sha256 digest and size its descriptor names before it is used
 *     (`docker save` layers: against the config's diff_ids);
 *   - entry names are checked: no absolute names, no `..`, at most
 *     OCI_MAX_DEPTH components; an entry whose parent path goes through a
 *     symlink is refused, the entry itself is created without following
 *     one (openat2 RESOLVE_NO_SYMLINKS, O_NOFOLLOW, O_EXCL), so nothing is
 *     written outside the root whatever the layers plant;
 *   - character and block devices are not created (the guest's /dev is a
 *     devtmpfs), FIFOs are, with mknodat in the root;
 *   - the bytes unpacked (file data plus OCI_ENTRY_COST per entry, for
 *     inodes) are bounded by max_bytes, archives included;
 *   - JSON documents are at most 4 MiB; only tar (plain, gzip, zstd,
 *     bzip2, xz: libarchive's built-in decoders) is read.
 * Layers are applied in order; `.wh.NAME` removes NAME of the layers
 * below, `.wh..wh..opq` empties its directory of them.
 */
#ifndef KILN_HOST_OCI_H
#define KILN_HOST_OCI_H

#include <stdint.h>

#define OCI_MAX_DEPTH 128
#define OCI_ENTRY_COST 512

/* What the image config says, carried into the template. */
struct oci_config {
	char *env;		/* JSON object text {"NAME":"VALUE",...}, or NULL */
	char *workdir;		/* or NULL */
	char *user;		/* or NULL */
	char *cmd;		/* JSON array text, or NULL */
	char *entrypoint;	/* JSON array text, or NULL */
};

struct oci_stats {
	int layers;
	uint64_t bytes;		/* counted against max_bytes */
	long entries, devices_skipped;
};

/* Unpack the image ref into root (an existing, empty directory).
 * ref: an OCI image layout directory, or an OCI archive or `docker save`
 * tar; `:TAG` after either picks the image by its ref name or repo tag
 * (needed when the index holds more than one). scratch: an empty
 * directory an archive is extracted into. On an error the message names
 * the blob or entry and what is wrong; root then holds a partial tree
 * for the caller to remove. */
int oci_unpack(const char *ref, const char *root, const char *scratch, uint64_t max_bytes,
	       struct oci_config *cfg, struct oci_stats *st);
void oci_config_free(struct oci_config *c);

/* A tar (plain or compressed) read from fd's start into the existing
 * directory dir, with the checks above (names, links; only files,
 * directories and symlinks; the bytes bounded by max_bytes: -EFBIG);
 * owners are not set. Entries may come in any order: a directory not yet
 * listed is made (0755) when an entry below it comes, never through a
 * symlink. what names it in messages ("the build context"). *entries:
 * how many it made. */
int oci_extract_tar(int fd, const char *dir, const char *what, uint64_t max_bytes, long *entries);

/* Does fd (a regular file) hold a tar stream, plain or compressed (its
 * first header reads)? 1 or 0; fd is left at its start. ADD unpacks
 * such a source, as Docker does. */
int oci_tar_probe(int fd);

#endif
