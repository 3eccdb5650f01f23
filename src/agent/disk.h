/*
 * disk: the disks of a VM. A template's root image is read-only and shared;
 * each sandbox writes to a layer of its own. Two ways to give it one:
 *
 *  - DISK_OVERLAY: a copy-on-write overlay file made by `kiln-disk create
 *    TOP BASE`; kiln-vmm serves it as /dev/vda, a full read-write root. This
 *    is what snapshots, zygotes and forks need (the guest's view of the disk
 *    is block for block the template's at the moment of the snapshot).
 *  - DISK_UPPER: the root image read-only as /dev/vda and a fresh, sparse
 *    ext4 as /dev/vdb, which kiln-init makes the upper layer of an overlayfs
 *    (kiln.overlay=). Only for cold boots, where no snapshot is involved;
 *    used when kiln-disk is not there.
 *
 * A sandbox's disks are recorded as a chain: JSON {"mode":..., "chain":
 * [base, ..., top]}, where only the top belongs to the sandbox; the others
 * are the template's image or layers frozen by a fork or snapshot, shared.
 */
#ifndef KILN_AGENT_DISK_H
#define KILN_AGENT_DISK_H

#include <limits.h>
#include <stdbool.h>

struct config;

enum disk_mode { DISK_OVERLAY, DISK_UPPER };

#define DISKS_MAX 2

/* What kiln-vmm gets: its --disk arguments and the kernel command line
 * that mounts the root. */
struct disk_plan {
	int n;
	char path[DISKS_MAX][PATH_MAX];
	bool ro[DISKS_MAX];
	char append[96];
};

const char *disk_mode_name(enum disk_mode m);
int disk_mode_parse(const char *s, enum disk_mode *m);
/* DISK_OVERLAY when kiln-disk is installed, else DISK_UPPER. */
enum disk_mode disk_default_mode(const struct config *cfg);

/* Make top, a new writable layer over base. */
int disk_create(const struct config *cfg, enum disk_mode mode, const char *base, const char *top);
/* The plan of a VM running on top over base. */
void disk_plan(enum disk_mode mode, const char *base, const char *top, struct disk_plan *out);
/* Copy a (stopped or paused) layer, keeping holes. */
int disk_copy(const char *src, const char *dst);

#endif
