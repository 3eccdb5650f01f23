/*
 * config: kiln-vmm's command line, parsed and checked before anything is
 * created, so that bad input costs nothing and leaves nothing behind.
 */
#ifndef KILN_VMM_CONFIG_H
#define KILN_VMM_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm/jail.h"
#include "vmm/volume.h"

#define MAX_DISKS 8

struct chain;

struct disk_config {
	const char *path;
	bool read_only;
	/* A forked VM's disk: its top at path sits on layer below_from of
	 * its parent's open chain below, whose layers it takes over
	 * (overlay.h chain_open_over). NULL: opened by path. */
	const struct chain *below;
	int below_from;
};

/* A volume given at start (--volume SLOT:FD[:ro]): an inherited
 * descriptor, never a path (volume.h). fd -1: the slot starts empty. */
struct volume_config {
	int fd;
	bool read_only;
	uint64_t want_size;         /* a restore: the size the snapshot recorded */
};

struct vmm_config {
	const char *kernel;
	const char *initrd;
	const char *cmdline;        /* replaces the default command line */
	const char *cmdline_extra;  /* appended to it */
	struct disk_config disks[MAX_DISKS];
	int ndisks;
	int volume_slots;           /* empty virtio-blk devices after the disks */
	bool volume_slots_set;      /* --volume-slots was given */
	struct volume_config volumes[VOLUME_SLOTS_MAX];
	uint64_t mem_mib;
	uint64_t disk_reserve_mib;  /* writable disks stop growing below this free */
	int vcpus;
	const char *vsock_path;
	uint32_t guest_cid;
	const char *tap;
	const char *mac;            /* guest MAC, "02:..." */
	const char *console;        /* file path, "-" for stdout, NULL for none */
	const char *ctl_path;
	bool rng;
	const char *restore_dir;    /* --restore: start from a snapshot */
	const char *zygote_dir;     /* --zygote: serve spawns of a snapshot */
	const char *hostname;       /* given to the guest agent on resync */
	const char *identity;       /* likewise (e.g. the sandbox id) */
	const char *snap_base;      /* the snapshot this VM's memory started from */
	bool resync;                /* resync the guest agent after a restore */
	bool test_triple_fault;     /* tests: the restored guest dies before ready (vm.c) */
	bool test_exit_after_ready; /* tests: the VMM ends right after its ready (vm.c) */
	char mac_buf[18];
	struct jail_config jail;
	bool jailed;                /* already inside the jail (a fork of a jailed VMM) */
	int kvm_fd;                 /* /dev/kvm, opened before the jail (-1: open it) */
	int tap_fd;                 /* the TAP, opened before the jail (-1: open by name) */
	int stderr_fd;              /* a spawned or forked child's stderr (-1: inherited) */
	/* A live fork of a jailed VMM takes a uid of its own from the host
	 * before its guest runs (child.c own_uid): the socket it asks on
	 * (-1: it keeps its parent's uid), and its place in the fork. */
	int uid_sock;
	int uid_index;
};

/* config_parse: fill cfg from argv. Returns 0, or -1 with errmsg() set
 * (exit status 2), or 1 when --help was printed. */
int config_parse(struct vmm_config *cfg, int argc, char **argv);
/* config_check: validate against this host (files, limits) before use. */
int config_check(const struct vmm_config *cfg, int kvm_max_vcpus);

/* config_from_snapshot: take the VM's shape from a snapshot and check that
 * the command line gives it what it needs (disks, TAP, vsock path). */
struct snap_info;
struct snap_volumes;
int config_from_snapshot(struct vmm_config *cfg, const struct snap_info *info,
			 const struct snap_volumes *vols);

#endif
