/*
 * tship: a template's version in service carried from one host to
 * another (docs/cluster.md "Templates"): the builder exports it, the
 * cluster's API relays the bytes, every other host imports them. The
 * archive is a GNU tar (sparse files kept sparse: a snapshot's memory
 * file and the disk images are mostly holes) of vN/ as it lies in
 * DATA/templates/NAME/, without the zygote's own files (zygote.sock,
 * .pid, .log): manifest.json, root.ext4, layer, snapshot/. Its sha256
 * (hex) goes with it, and an import checks it before it unpacks a byte.
 */
#ifndef KILN_HOST_TSHIP_H
#define KILN_HOST_TSHIP_H

#include <stdint.h>

struct host;

#define TSHIP_SHA_HEX 65
/* What an import may unpack to (the disk its files take). */
#define TSHIP_MAX_BYTES (64ULL << 30)

/* The version in service of template name as an archive: *fd an
 * unlinked file read from its start, *size its bytes, *version the
 * version, sha its sha256. -ENOENT when the name has no version in
 * service here; -EPERM for a compiled-in template (each host builds its
 * own). */
int tship_export(struct host *h, const char *name, int *fd, uint64_t *size, int *version,
		 char sha[TSHIP_SHA_HEX]);

/* Take an archive made by tship_export (fd, from its start) as template
 * name's version: its sha256 must be sha (-EBADMSG otherwise, with
 * nothing written); it is unpacked into a directory of its own under
 * DATA/templates/.imports (at most TSHIP_MAX_BYTES: -EFBIG), its
 * manifest and disk layer pointed at their new place, its zygote
 * started, and only then moved to DATA/templates/NAME/vN and made the
 * version in service (if it is newer than the one there). On any error
 * nothing of it is left. *version the version taken; *had true when
 * this host had that version already (nothing done). */
int tship_import(struct host *h, const char *name, int fd, const char *sha, int *version, int *had);

#endif
