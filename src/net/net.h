/*
 * net: the network of each sandbox (docs/network.md).
 *
 * Every sandbox gets its own network namespace "kiln-n<slot>" holding the
 * guest's TAP (tap0, gateway address and MAC the same in every sandbox, so
 * a template's baked-in guest address works in all its clones) and one end
 * of a veth pair; the other end, kv<slot>, is on the host with an address
 * from a pool of /30s. Guest traffic is masqueraded twice: to the veth
 * address inside the namespace, then out of the host's uplink.
 *
 * The host firewall is one nftables table, "inet kiln", created and
 * removed whole. It drops sandbox-to-sandbox traffic, cloud metadata
 * (169.254.0.0/16), anything addressed to the host itself, and Stratum
 * mining ports; each sandbox's egress policy is a chain of its own, reached
 * through a verdict map keyed by its veth, replaced atomically.
 *
 * One exception to sandbox-to-sandbox: a sandbox may open TCP ports to
 * the other sandboxes of its workspace (a managed database's 5432,
 * docs/databases.md). Every sandbox's veth is a member of its workspace
 * (map ws_member: veth -> the workspace's mark, net_workspace_mark), and
 * each slot has a chain in<slot>, reached through map ws_in by its
 * namespace's address, that accepts its ports from that mark alone;
 * inside such a slot's namespace the ports are forwarded to the guest.
 * Whatever is not accepted there falls through to the drop.
 *
 * Setting a namespace up takes a few runs of ip(8) and nft(8); callers keep
 * a warm pool of ready slots so that creates do not wait for them.
 */
#ifndef KILN_NET_H
#define KILN_NET_H

#include <stdbool.h>
#include <stdint.h>

#define NET_MAX_CIDRS 32
#define NET_WS_PORTS_MAX 4

struct net_config {
	uint32_t pool;           /* first address of the host-side pool, host order */
	int pool_bits;           /* its prefix length (16: 16384 sandboxes) */
	const char *guest_ip;    /* the guests' address, e.g. 172.16.0.2 */
	const char *gateway_ip;  /* the TAP's address, the guests' gateway */
	int tap_bits;            /* prefix length of that link (30) */
	const char *gateway_mac; /* the TAP's MAC, the same in every sandbox */
};

/* net_default_config: 10.200.0.0/16 (or what net_set_pool said), guest
 * 172.16.0.2/30 via 172.16.0.1. */
void net_default_config(struct net_config *c);
/* net_set_pool: the host-side address pool, e.g. "10.200.0.0/16"; one /30
 * per sandbox. Call before anything else here. */
int net_set_pool(const char *cidr);

struct net_slot {
	uint32_t slot;
	char netns[32];          /* kiln-n<slot> */
	char netns_path[64];     /* /run/netns/kiln-n<slot> */
	char tap[16];            /* tap0, inside netns */
	char veth[16];           /* kv<slot>, on the host */
	char host_ip[16];        /* the host's end of the veth */
	char ns_ip[16];          /* the namespace's end */
};

struct net_cidr {
	uint32_t addr;           /* host order */
	int bits;
};

struct net_policy {
	bool allow_internet;     /* false: nothing leaves (allow_out is ignored) */
	struct net_cidr allow[NET_MAX_CIDRS];   /* non-empty: only these */
	int nallow;
	struct net_cidr deny[NET_MAX_CIDRS];    /* never these */
	int ndeny;
	/* Inbound, and not a policy's user-given part: the sandbox's
	 * workspace (net_workspace_mark; 0: none, no membership), and TCP
	 * ports the workspace's other sandboxes may connect to. */
	uint32_t workspace;
	int ws_ports[NET_WS_PORTS_MAX];
	int nws_ports;
};

/* A workspace id as the 32-bit mark of its sandboxes' traffic (a hash;
 * never 0). */
uint32_t net_workspace_mark(const char *workspace);
/* Make slot s a member of workspace ws (its traffic carries ws's mark,
 * so it reaches the ports the workspace's sandboxes open to it).
 * net_set_policy with p->workspace does the same. */
int net_join_workspace(const struct net_config *c, const struct net_slot *s, uint32_t ws);

/* net_parse_cidr: "a.b.c.d[/n]". */
int net_parse_cidr(const char *s, struct net_cidr *out);

/* net_init: IP forwarding on, the kiln table in place (idempotent), and
 * net_host_nets_refresh. */
int net_init(const struct net_config *c);
/* net_host_nets_refresh: the sets of the host's networks (every address
 * of its interfaces, but loopback, the kv* veths and the pool, as the
 * network it is on) made what the interfaces hold now. A sandbox with
 * the default policy reaches none of them. Cheap when nothing changed
 * (no nft run); thread-safe. */
int net_host_nets_refresh(const struct net_config *c);
/* Where a kilnd records which slots are its own: NET_OWNER_DIR/SLOT, a
 * symbolic link to the claim file in its data directory, made before the
 * namespace (host/netpool.h). net_create leaves such slots alone. */
#define NET_OWNER_DIR "/run/kiln-net"
/* net_create: a namespace for a free slot, with the default policy
 * (internet allowed, nothing denied). */
int net_create(const struct net_config *c, struct net_slot *out);
/* net_create_slot: the same for slot itself; -EEXIST when its namespace
 * exists (another creator has it). */
int net_create_slot(const struct net_config *c, uint32_t slot, struct net_slot *out);
/* One more than the highest slot of c's pool. */
uint32_t net_slot_max(const struct net_config *c);
/* net_slot_info: the names and addresses of slot n. */
void net_slot_info(const struct net_config *c, uint32_t slot, struct net_slot *out);
int net_set_policy(const struct net_config *c, const struct net_slot *s, const struct net_policy *p);
/* The workspace ports of p (ws_ports) in slot s's namespace: forwarded
 * to the guest (to_guest, as net_set_policy leaves them), or left to
 * what listens in the namespace itself (host/portwake.c, while the
 * sandbox hibernates). */
int net_ws_forward(const struct net_config *c, const struct net_slot *s, const struct net_policy *p, bool to_guest);
/* net_destroy: the namespace (the veth goes with it) and its rules;
 * idempotent. */
int net_destroy(const struct net_config *c, uint32_t slot);
/* net_cleanup: every kiln namespace and the table itself. */
int net_cleanup(const struct net_config *c);
/* net_list: slots that exist, up to max; returns the count. */
int net_list(uint32_t *slots, int max);

#endif
