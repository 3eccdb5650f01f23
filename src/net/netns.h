/*
 * netns: what net.c does to the host without a child process: nft rule
 * sets through libnftables, network namespaces made and removed the way
 * ip-netns(8) does, and a sysctl written inside a namespace. In the
 * emulated KVM host a process costs a fifth of a second or more (fork,
 * exec, the dynamic loader, all under TCG), and a sandbox's network took
 * about fifteen of them to make and remove (session 31: 204 ip and nft
 * runs for one e2e file of ten sandboxes); these take microseconds on any
 * host. Internal to src/net: the rest of kiln goes through net.h.
 */
#ifndef KILN_NET_NETNS_H
#define KILN_NET_NETNS_H

/* nft_apply: the nft(8) script applied as one transaction, in the network
 * namespace bound at netns_path (NULL: the host's). 0, or -errno with
 * nft's own message ("nft: Error: ..."). */
int nft_apply(const char *netns_path, const char *script);

/* netns_add: a new network namespace bound at path (in /run/netns, which
 * is made a shared mount as ip-netns(8) makes it, so that a namespace
 * removed here is gone from every mount namespace too). The file is
 * created exclusively first: -EEXIST when another creator has the name. */
int netns_add(const char *path);

/* netns_del: the namespace bound at path unmounted and its file removed
 * (the namespace itself goes with its last user: its links and TAPs go
 * with it). 0 when it was not there. */
int netns_del(const char *path);

/* netns_sysctl: VALUE written to /proc/sys/KEY (e.g. "net/ipv4/ip_forward")
 * as seen inside the namespace bound at netns_path. */
int netns_sysctl(const char *netns_path, const char *key, const char *value);

/* link_del: the host's link NAME deleted (a veth: both its ends) over
 * rtnetlink, as `ip link del NAME`. 0 when there is no such link. */
int link_del(const char *name);

#endif
