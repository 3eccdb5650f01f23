/*
 * snapshot: the state of a paused VM as bytes, and back.
 *
 * A snapshot directory holds `state` and `memory`. `state` is a header
 * (magic, format version, payload length, CRC-32 of the payload) followed
 * by tagged records: the VM's shape (memory size, vCPUs, devices), each
 * vCPU's registers in KVM's save order, the irqchips, the PIT, kvmclock,
 * the serial port, and each virtio device's transport and queue state.
 * `memory` is guest RAM as a sparse file (zero runs are holes).
 *
 * The same payload, kept in memory, carries a running VM's state across
 * fork() for zygote spawns and live forks.
 */
#ifndef KILN_VMM_SNAPSHOT_H
#define KILN_VMM_SNAPSHOT_H

#include "common/strbuf.h"
#include <stdbool.h>
#include <stdint.h>

/* Version 2 added the volume slots record; version 1 snapshots (no
 * slots) are still read. */
#define SNAP_VERSION 2
#define SNAP_VERSION_OLDEST 1

struct vm;

/* What a restore must rebuild before the state can be applied. */
struct snap_info {
	uint64_t mem_size;
	uint32_t nvcpus;
	uint32_t ndisks;
	uint8_t disk_ro[8];
	uint8_t rng, net, vsock, pad;
	uint32_t guest_cid;
	uint8_t mac[6];
	uint16_t pad2;
	uint32_t tsc_khz;
};

/* The volume slots (volume.h), one record after the description: how
 * many, and for each whether a volume was attached, its size and whether
 * read-only. The volume itself is not in the snapshot, only what a
 * restore must be given again (--volume SLOT:FD). */
struct snap_volumes {
	uint32_t nslots;
	uint32_t pad;
	struct {
		uint8_t attached, read_only;
		uint8_t pad[6];
		uint64_t size;
	} slot[4];
};

/* A diff snapshot: its memory file holds only the pages in bits (one bit
 * per 4 KiB page), and the rest comes from the parent snapshot. */
struct snap_diff {
	const char *parent;          /* absolute path of the parent snapshot */
	const uint64_t *bits;
	size_t words;
};

/* snapshot_capture: append the state of a paused VM to out; diff (or NULL
 * for a full snapshot) is recorded in it. */
int snapshot_capture(struct vm *vm, struct strbuf *out, const struct snap_diff *diff);
/* snapshot_info: read the shape record of a payload. */
int snapshot_info(const uint8_t *payload, size_t len, struct snap_info *info);
/* snapshot_volumes: its volume slots (none in a snapshot without the
 * record). */
int snapshot_volumes(const uint8_t *payload, size_t len, struct snap_volumes *vols);
/* snapshot_apply: load a payload into a VM built to its shape (devices
 * created, vCPUs created, memory holding the snapshot's RAM). */
int snapshot_apply(struct vm *vm, const uint8_t *payload, size_t len);

/* Files. snapshot_write creates DIR/state and DIR/memory (only the diff's
 * pages if diff is set); snapshot_read checks and returns the payload
 * (malloc'd). */
int snapshot_write(struct vm *vm, const char *dir, const struct strbuf *payload,
		   const struct snap_diff *diff);
int snapshot_read(const char *dir, uint8_t **payload, size_t *len);
/* snapshot_memory: give the VM the snapshot's RAM: DIR/memory mapped
 * MAP_PRIVATE (restores), or read into anonymous memory with huge pages
 * (zygotes, anonymous = true). A diff snapshot's parents come first. */
int snapshot_memory(struct vm *vm, const char *dir, const uint8_t *payload, size_t len,
		    bool anonymous);

/* A bounds-checked reader over a payload; devices use it to load state. */
struct snap_reader {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
};
const void *snap_get(struct snap_reader *r, size_t n);
bool snap_read(struct snap_reader *r, void *dst, size_t n);

#endif
