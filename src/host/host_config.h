/*
 * host_config: the host agent's settings. kilnd fills it from its own
 * command line (src/kilnd/config.c, config_host) before host_open; the
 * agent reads only this, never kilnd's or the API's configuration, so the
 * agent can run under another front end (a remote agent role) unchanged.
 * Read-only once host_open has it.
 */
#ifndef KILN_HOST_HOST_CONFIG_H
#define KILN_HOST_HOST_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* Unix socket paths are at most 107 bytes; the longest we make is
 * DATA/sandboxes/ID/vsock.sock_PORT, so the data directory is bounded. */
#define DATA_DIR_MAX 48
/* A VM's directory: DATA/sandboxes/ID or DATA/templates/NAME/vN/... */
#define VM_DIR_MAX 160

struct host_config {
	char data_dir[DATA_DIR_MAX + 1];	/* sandboxes/, templates/, net/ */
	char vmm[PATH_MAX];		/* kiln-vmm */
	char kernel[PATH_MAX];		/* guest vmlinux */
	char initrd[PATH_MAX];		/* guest initramfs.cpio */
	char images[PATH_MAX];		/* prebuilt rootfs-NAME.ext4 */
	char image_builders[PATH_MAX];	/* build-rootfs-NAME scripts */

	/* Capacity: a create past these waits up to create_wait_ms, then
	 * fails with -EAGAIN. */
	int max_sandboxes;		/* live (not deleted), all workspaces */
	int64_t max_memory_mib;		/* sum of running sandboxes' memory */
	int max_creates;		/* creates in flight at once */
	int create_wait_ms;
	int64_t default_ttl;		/* seconds; 0: none */

	int sample_ms;			/* accounting period */
	int boot_timeout_ms;		/* guest agent must answer within */
	int reap_ms;			/* TTL and dead-VMM check period */

	/* Isolation (docs/network.md, docs/kilnd.md "Isolation"). */
	bool net;			/* a network per sandbox */
	int net_pool;			/* namespaces kept ready for creates */
	int pool;			/* sandboxes spawned ahead, at most per template (pool.h); 0: none */
	bool jail;			/* jail every VMM */
	int jail_uid;			/* first uid (and gid) of the VMMs */
	char cgroup[PATH_MAX];		/* parent of the sandboxes' cgroups */
	int vmm_overhead_mib;		/* memory.max = 2 x guest memory + this */
	int vmm_pids;			/* pids.max */
	int reserve_disk_mib;		/* free space on DATA's filesystem no sandbox takes */
	char dns[128];			/* guests' nameservers, "A.B.C.D,..." ("": the host's) */
};

#endif
