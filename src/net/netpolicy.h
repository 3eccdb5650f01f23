/*
 * netpolicy: a sandbox's egress policy (docs/network.md) as the API takes
 * it, as the store keeps it (canonical JSON text) and as src/net applies
 * it. Pure functions: no network is touched here.
 *
 *   {"allow_internet": true, "allow_out": ["CIDR"...], "deny_out": ["CIDR"...]}
 *
 * and, for kiln's own services (a database; not a create's field),
 * "workspace_ports": [PORT...], TCP ports of the sandbox its workspace's
 * other sandboxes may connect to (net/net.h).
 */
#ifndef KILN_NET_NETPOLICY_H
#define KILN_NET_NETPOLICY_H

#include <jansson.h>

struct net_policy;

/* The policy fields of a request body (allow_out, deny_out,
 * allow_internet; absent ones take the open defaults). -EINVAL with a
 * message naming the bad field or value; *text (malloc'd) is the
 * canonical JSON, or NULL when the request names no policy field. */
int netpolicy_from_request(const json_t *body, char **text);
/* Stored text (NULL: the open policy) to what net_set_policy applies. */
int netpolicy_parse(const char *text, struct net_policy *out);
/* For the API: the policy as an object (a new reference). */
json_t *netpolicy_render(const char *text);

#endif
