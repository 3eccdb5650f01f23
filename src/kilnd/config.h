/*
 * config: kilnd's settings, from the command line (defaults below). Both
 * roles read the same struct; it is filled once in main and read-only after.
 */
#ifndef KILN_KILND_CONFIG_H
#define KILN_KILND_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "host/host_config.h"	/* DATA_DIR_MAX */

struct config {
	char listen[128];		/* 127.0.0.1:7070 */
	char data_dir[DATA_DIR_MAX + 1];	/* /var/lib/kiln */
	char store[PATH_MAX];		/* "" : sqlite:DATA/kilnd.db */
	char role[8];			/* all (api and agent: later) */
	char bin_dir[PATH_MAX];		/* kiln-vmm, kiln-disk, guest/ */
	char vmm[PATH_MAX];		/* BIN/kiln-vmm */
	char disk_tool[PATH_MAX];	/* BIN/kiln-disk */
	char kernel[PATH_MAX];		/* BIN/guest/vmlinux */
	char initrd[PATH_MAX];		/* BIN/guest/initramfs.cpio */
	char images[PATH_MAX];		/* BIN/guest: prebuilt rootfs-NAME.ext4 */
	char image_builders[PATH_MAX];	/* BIN/../images: build-rootfs-NAME scripts */
	char web_dir[PATH_MAX];		/* BIN/web: the dashboard's files */

	int max_sandboxes;		/* live (not deleted), all workspaces */
	int64_t max_memory_mib;		/* sum of running sandboxes' memory */
	int max_creates;		/* creates in flight at once */
	int create_wait_ms;		/* how long a create waits for a slot */
	int64_t default_ttl;		/* seconds; 0: none */
	int64_t max_ttl;
	int rate_per_sec, rate_burst;	/* per workspace; 0: no limit */
	int anon_rate_per_sec, anon_rate_burst;	/* per client address without a key; 0: none */
	uint64_t max_json_bytes, max_file_bytes, max_exec_output;
	int max_connections;
	int max_inflight, max_uploads;	/* per workspace under way at once; 0: no cap */
	int max_tunnels;		/* WebSockets per workspace open at once; 0: no cap */
	int64_t max_exec_buffer;	/* bytes of exec output one workspace holds; 0: no cap */
	char domain[254];		/* host routing PORT-ID.DOMAIN; "" : off */
	char tls_cert[PATH_MAX];	/* PEM certificate chain: serve HTTPS; "" : HTTP */
	char tls_key[PATH_MAX];		/* its PEM private key */
	char mcp_origins[1024];		/* Origins allowed on MCP besides loopback, comma-separated */
	int sample_ms;			/* accounting period */
	int boot_timeout_ms;		/* guest agent must answer within */
	int reap_ms;			/* TTL check period */
	bool verbose;

	/* Isolation (docs/network.md, docs/kilnd.md "Isolation"). */
	bool net;			/* a network per sandbox (--no-net: none) */
	int net_pool;			/* namespaces kept ready for creates */
	int pool;			/* VMs spawned ahead, per template (pool.h) */
	char dns[128];			/* guests' nameservers, "A.B.C.D,..." ("": the host's) */
	bool jail;			/* jail every VMM (--no-jail: for debugging) */
	int jail_uid;			/* first uid (and gid) of the VMMs */
	char cgroup[PATH_MAX];		/* parent of the sandboxes' cgroups */
	int vmm_overhead_mib;		/* memory.max = 2 x guest memory + this */
	int vmm_pids;			/* pids.max */
	int reserve_disk_mib;		/* free space on DATA's filesystem no sandbox takes */
};

void config_defaults(struct config *c);
/* Fill the paths derived from bin_dir and data_dir that were not given. */
int config_finish(struct config *c);
/* The host agent's part of the settings (after config_finish). */
void config_host(const struct config *c, struct host_config *h);
struct api_config;
/* The API's part of the settings (after config_finish). */
void config_api(const struct config *c, struct api_config *a);

#endif
