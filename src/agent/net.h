/*
 * net: the network of a sandbox. Issue 7 builds it (a network namespace
 * per sandbox, a TAP for the guest, a veth pair, NAT, the kiln nftables
 * table, egress rules, a warm pool). Until then this is the one place the
 * sandbox lifecycle calls for it: a lease is taken before the VM starts and
 * released after it is gone, also when kilnd restarts and cleans up, and a
 * lease with no TAP means a VM without a network device (as the templates
 * are built today).
 */
#ifndef KILN_AGENT_NET_H
#define KILN_AGENT_NET_H

struct config;

struct net_lease {
	char tap[16];		/* "" : no network device */
	char netns[32];		/* "" : the host's namespace */
};

int net_acquire(const struct config *cfg, const char *sandbox_id, struct net_lease *out);
/* Idempotent: releasing a lease twice, or one never fully set up, is fine. */
void net_release(const struct config *cfg, const char *sandbox_id);

#endif
