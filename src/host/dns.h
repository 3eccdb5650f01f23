/*
 * dns: the resolver a sandbox's guest uses (docs/network.md, DNS). kiln
 * writes the guest's /etc/resolv.conf itself: at template build (the
 * kernel command line's kiln.dns) and on every create, fork and wake (the
 * agent writes the file), because the host's resolver can change and a
 * template's copy would go stale. The servers are kilnd's --dns list, or
 * else the host's own: the IPv4 nameservers of /etc/resolv.conf that are
 * not loopback (a sandbox reaches the host's upstream through its NAT, not
 * the host's 127.0.0.53), or, when it names only loopback ones (a local
 * stub such as systemd-resolved), those of /run/systemd/resolve/resolv.conf.
 */
#ifndef KILN_HOST_DNS_H
#define KILN_HOST_DNS_H

#include <stdbool.h>
#include <stddef.h>

struct host_config;

#define DNS_LIST_MAX 128	/* "A.B.C.D,A.B.C.D,A.B.C.D" and room */

/* The IPv4 nameservers of a resolv.conf-format file that are not
 * loopback, comma-separated, at most 3; "" if none (or no file). */
void dns_from_resolv_conf(const char *path, char out[DNS_LIST_MAX]);
/* A --dns list: 1 to 3 IPv4 addresses, comma-separated. */
bool dns_list_valid(const char *list);
/* The servers for guests now (see above); "" if there are none. */
void dns_servers(const struct host_config *cfg, char out[DNS_LIST_MAX]);
/* The guest's resolv.conf for servers ("" if servers is ""). */
void dns_resolv_conf(const char *servers, char *out, size_t cap);

#endif
