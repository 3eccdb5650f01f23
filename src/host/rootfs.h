/*
 * rootfs: a root directory (an unpacked OCI image) made into the ext4
 * root image a template boots on. What the guest needs of a root
 * (docs/guest.md "The root switch"): the mount points /dev, /proc, /sys,
 * /tmp and /run, an /etc/hostname, and /bin/sh, through which the guest
 * agent runs shell commands and the template build checks the root.
 */
#ifndef KILN_HOST_ROOTFS_H
#define KILN_HOST_ROOTFS_H

#include <stdint.h>

/* Add the mount points, /etc/hostname ("kiln") and the image's workdir
 * (NULL: none) where missing, without following the image's symlinks;
 * fail, naming it, if there is no executable /bin/sh (symlinks resolved
 * inside dir). */
int rootfs_for_guest(const char *dir, const char *workdir);

/* mke2fs -d: an ext4 image of dir at out, sized for used_bytes of content
 * and entries inodes with headroom (ROOTFS_HEADROOM_MIB free for the
 * sandboxes' writes, sparse on the host), or, size_mib not 0, exactly
 * size_mib MiB (a template build's --disk): EINVAL, naming both, when the
 * content with a quarter more for the filesystem's own does not fit.
 * log: mke2fs's output. */
#define ROOTFS_HEADROOM_MIB 1024
int rootfs_make_ext4(const char *dir, const char *out, uint64_t used_bytes, long entries, uint64_t size_mib,
		     const char *log);

#endif
