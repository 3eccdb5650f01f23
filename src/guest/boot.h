/*
 * PID 1's boot and shutdown: the kernel command line (the kiln.*
 * parameters documented in docs/guest.md), kernel file systems, modules,
 * the root disk and the move into it, hostname and network.
 */
#ifndef KILN_BOOT_H
#define KILN_BOOT_H

#include <stdbool.h>
#include <stddef.h>

struct boot_cfg {
	char root[128];		/* kiln.root: block device of the root fs */
	char rootfstype[16];	/* kiln.rootfstype (ext4) */
	bool ro;		/* kiln.ro: mount the root read-only */
	char overlay[128];	/* kiln.overlay: "tmpfs" or a block device */
	char hostname[65];	/* kiln.hostname */
	char iface[16];		/* kiln.iface (eth0) */
	char ip[64];		/* kiln.ip: ADDRESS/PREFIX */
	char gw[64];		/* kiln.gw */
	char dns[256];		/* kiln.dns: comma-separated servers */
	unsigned port;		/* kiln.port (52) */
	unsigned pids_max;	/* kiln.pids_max (8192) */
	unsigned mem_reserve_mb;/* kiln.mem_reserve_mb (32) */
	unsigned root_wait_ms;	/* kiln.root_wait_ms (5000) */
};

/* Parse a kernel command line. Unknown words are ignored (they belong to
 * the kernel); a bad kiln.* value is reported in err and the default kept.
 * Returns the number of bad values. */
int cmdline_parse(const char *line, struct boot_cfg *cfg, char *err, size_t errlen);

/* Stage 1, from the initramfs: /dev, the console, /proc, /sys. */
void boot_early(void);
/* Load the modules listed in /lib/modules/kiln.order. 0 or -EIO. */
int boot_modules(void);
/* Mount the root disk (and its overlay) and make it "/", keeping this
 * process as PID 1. Without kiln.root, the initramfs stays the root. */
int boot_root(const struct boot_cfg *cfg, char *err, size_t errlen);
/* The mounts that belong in the final root: /dev/pts, /dev/shm, /tmp, /run. */
void boot_mounts(void);
void boot_hostname(const struct boot_cfg *cfg);
/* lo, and the configured interface with address, route and DNS. */
int net_setup(const struct boot_cfg *cfg, char *err, size_t errlen);
/* Stop every process, sync, and power off or reboot (RB_* value). */
void boot_shutdown(int how) __attribute__((noreturn));

#endif
