#include "host/dns.h"
#include "host/host_config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#define DNS_MAX 3	/* as many as a resolv.conf uses */

void dns_from_resolv_conf(const char *path, char out[DNS_LIST_MAX])
{
	out[0] = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[512];
	int n = 0;
	while (n < DNS_MAX && fgets(line, sizeof line, f)) {
		char addr[64];
		struct in_addr a;
		if (sscanf(line, " nameserver %63s", addr) != 1 || inet_pton(AF_INET, addr, &a) != 1)
			continue;	/* comments, options, IPv6 (guests have IPv4 only) */
		if ((ntohl(a.s_addr) >> 24) == 127 || a.s_addr == 0)
			continue;	/* the host's own stub: not the guest's */
		size_t len = strlen(out);
		snprintf(out + len, DNS_LIST_MAX - len, "%s%s", len ? "," : "", addr);
		n++;
	}
	fclose(f);
}

bool dns_list_valid(const char *list)
{
	int n = 0;
	const char *p = list;
	for (;;) {
		size_t len = strcspn(p, ",");
		char addr[INET_ADDRSTRLEN];
		struct in_addr a;
		if (len == 0 || len >= sizeof addr || ++n > DNS_MAX)
			return false;
		memcpy(addr, p, len);
		addr[len] = 0;
		if (inet_pton(AF_INET, addr, &a) != 1)
			return false;
		if (!p[len])
			return strlen(list) < DNS_LIST_MAX;
		p += len + 1;
	}
}

void dns_servers(const struct host_config *cfg, char out[DNS_LIST_MAX])
{
	if (cfg->dns[0]) {
		snprintf(out, DNS_LIST_MAX, "%s", cfg->dns);
		return;
	}
	dns_from_resolv_conf("/etc/resolv.conf", out);
	if (!out[0])
		dns_from_resolv_conf("/run/systemd/resolve/resolv.conf", out);
}

void dns_resolv_conf(const char *servers, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = 0;
	if (!servers[0])
		return;
	len += snprintf(out, cap, "# written by kiln (docs/network.md, DNS)\n");
	const char *p = servers;
	while (*p && len < cap) {
		size_t n = strcspn(p, ",");
		len += snprintf(out + len, cap - len, "nameserver %.*s\n", (int)n, p);
		p += n + (p[n] == ',');
	}
}
