/*
 * fsutil: a VM's directory tree, removed or measured. Both walk it
 * without following links: the VMM may have written it.
 */
#ifndef KILN_HOST_FSUTIL_H
#define KILN_HOST_FSUTIL_H

#include <stdint.h>

int rmtree(const char *path);
/* Remove everything in dir but the files named disk*. */
int rmtree_except_disks(const char *dir);
/* The disk space dir's regular files take (allocated blocks, so a sparse
 * memory file counts what it holds), at most 4 directories deep and
 * 10000 entries; 0 if it cannot be opened. */
int64_t dir_bytes(const char *dir);

#endif
