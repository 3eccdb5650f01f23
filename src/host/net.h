/*
 * net: the network of a sandbox (docs/network.md). A sandbox whose VM has
 * a network device holds a slot: a namespace kiln-n<slot> with the guest's
 * TAP (tap0, the same address and MAC in every sandbox, so clones of a
 * template need no reconfiguration), a veth to the host, NAT, and its
 * egress chain in the kiln nftables table. The slot comes from the warm
 * pool (netpool.h), is recorded in the sandbox's row, is kept while it
 * hibernates, and is released with the sandbox (delete, failure, or a
 * restart that finds it gone).
 */
#ifndef KILN_HOST_NET_H
#define KILN_HOST_NET_H

#include <stdbool.h>
#include <stdint.h>

struct host;
struct sandbox;

struct net_lease {
	uint32_t slot;		/* 0: no network device */
	char tap[16];		/* the TAP, inside netns */
	char netns[64];		/* /run/netns/kiln-n<slot> */
};

/* The sandbox's network: its recorded slot if that still exists, else a
 * fresh one, with its policy (sb->row.net_policy) applied before it is
 * returned. want: the VM has a network device (its template or snapshot
 * was made with one); without, an empty lease. The slot is recorded in
 * the row (saved by the caller). */
int net_acquire(struct host *h, struct sandbox *sb, bool want, struct net_lease *out);
/* Idempotent: releasing twice, or a sandbox without a network, is fine. */
void net_release(struct host *h, struct sandbox *sb);
/* A new policy (canonical text, see netpolicy.h) on a sandbox: applied
 * at once when it holds a network, then recorded. */
int net_change_policy(struct host *h, struct sandbox *sb, const char *policy);
/* The lease of slot (names only). */
void net_lease_of(uint32_t slot, struct net_lease *out);
/* Open the TAP tap inside the namespace at netns, as kiln-vmm wants a
 * passed one (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR): a descriptor or -errno. */
int net_tap_open(const char *netns, const char *tap);

#endif
