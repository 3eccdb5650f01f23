/*
 * net: see net.h. The rules are nft(8) scripts applied through
 * libnftables, the namespaces are made and removed and the veths deleted
 * in this process (netns.c: no child process, which cost a fifth of a
 * second each in the emulated host); the links and addresses inside are
 * made by ip(8) batches, run as child processes with an argument vector
 * (no shell) and their script on stdin. Every step is checked and a
 * failure reports nft's or ip's own message.
 */
#include "net/net.h"
#include "net/netns.h"
#include "common/err.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define NETNS_DIR "/run/netns"
#define NS_PREFIX "kiln-n"

/* Private and shared address space no sandbox reaches unless its
 * allow_out names it (docs/network.md): RFC 1918, RFC 6598 (carrier-grade
 * NAT, 100.64/10), and IPv6 unique local and link-local addresses. */
#define PRIVATE_V4 "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10"
#define PRIVATE_V6 "fc00::/7, fe80::/10"

/* The sets of the host's networks (net_host_nets_refresh); a policy
 * names them too, so that it loads on a table made before them. */
#define HOST_NETS_SETS \
	"add set inet kiln host_nets { type ipv4_addr; flags interval; auto-merge; }\n" \
	"add set inet kiln host_nets6 { type ipv6_addr; flags interval; auto-merge; }\n"

/* The Stratum mining-pool ports dropped for every sandbox (docs/network.md). */
#define STRATUM_PORTS "3333, 3334, 3335, 4444, 5555, 5588, 6666, 7777, 8008, 8888, 9999, 14433, 14444, 45560, 45700"

/* The host-side pool, set once at start (net_set_pool) before any
 * namespace is made: every process of a kiln host must agree on it. */
static uint32_t pool_addr = 0x0ac80000;  /* 10.200.0.0 */
static int pool_bits = 16;

int net_set_pool(const char *cidr)
{
	struct net_cidr c;
	int rc = net_parse_cidr(cidr, &c);
	if (rc < 0)
		return rc;
	if (!strchr(cidr, '/') || c.bits < 8 || c.bits > 28)
		return errf(EINVAL, "'%s': the sandbox address pool needs a prefix from /8 to /28 "
				    "(a /30 per sandbox)", cidr);
	pool_addr = c.addr;
	pool_bits = c.bits;
	return 0;
}

void net_default_config(struct net_config *c)
{
	c->pool = pool_addr;
	c->pool_bits = pool_bits;
	c->guest_ip = "172.16.0.2";
	c->gateway_ip = "172.16.0.1";
	c->tap_bits = 30;
	c->gateway_mac = "02:6b:69:6c:6e:01";
}

static void ip4(uint32_t a, char out[16])
{
	snprintf(out, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

int net_parse_cidr(const char *s, struct net_cidr *out)
{
	char buf[32];
	if (strlen(s) >= sizeof buf)
		return errf(EINVAL, "'%s' is not an IPv4 address or CIDR", s);
	strcpy(buf, s);
	int bits = 32;
	char *slash = strchr(buf, '/');
	if (slash) {
		char *end;
		long b = strtol(slash + 1, &end, 10);
		if (end == slash + 1 || *end || b < 0 || b > 32)
			return errf(EINVAL, "'%s': bad prefix length", s);
		bits = (int)b;
		*slash = 0;
	}
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return errf(EINVAL, "'%s' is not an IPv4 address or CIDR", s);
	uint32_t addr = ntohl(a.s_addr);
	uint32_t mask = bits ? ~0u << (32 - bits) : 0;
	out->addr = addr & mask;
	out->bits = bits;
	return 0;
}

/* run: argv with input on stdin; 0, or -1 with the tail of its stderr. */
static int run(const char *const argv[], const char *input)
{
	int in[2], err[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		return errf_sys("pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, err[1], 2);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(err[1]);
	if (rc != 0) {
		close(in[1]);
		close(err[0]);
		return errf(rc, "cannot run %s: %s", argv[0], strerror(rc));
	}
	if (input) {
		size_t n = strlen(input), off = 0;
		while (off < n) {
			ssize_t w = write(in[1], input + off, n - off);
			if (w <= 0)
				break;
			off += (size_t)w;
		}
	}
	close(in[1]);
	char msg[512];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(err[0], msg + got, sizeof msg - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof msg - 1)
			got = 0;                /* keep the end of a long message */
	}
	msg[got] = 0;
	close(err[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	msg[strcspn(msg, "\n")] = 0;
	return errf(EIO, "%s %s: %s", argv[0], argv[1] ? argv[1] : "", msg[0] ? msg : "failed");
}

/* nft: SCRIPT applied in namespace NETNS (NULL: the host's). */
static int nft(const char *netns, const char *script)
{
	if (!netns)
		return nft_apply(NULL, script);
	char path[128];
	snprintf(path, sizeof path, NETNS_DIR "/%s", netns);
	return nft_apply(path, script);
}

static int ip_batch(const char *netns, const char *script)
{
	if (!netns) {
		const char *argv[] = { "ip", "-batch", "-", NULL };
		return run(argv, script);
	}
	const char *argv[] = { "ip", "-n", netns, "-batch", "-", NULL };
	return run(argv, script);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("%s", path);
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : errf_sys("%s", path);
}

int net_init(const struct net_config *c)
{
	int rc = write_file("/proc/sys/net/ipv4/ip_forward", "1\n");
	if (rc < 0)
		return rc;
	char pool[16], script[4096];
	ip4(c->pool, pool);
	snprintf(script, sizeof script,
		 "add table inet kiln\n"
		 "add chain inet kiln forward { type filter hook forward priority 0; policy accept; }\n"
		 "add chain inet kiln input { type filter hook input priority 0; policy accept; }\n"
		 "add chain inet kiln postrouting { type nat hook postrouting priority 100; policy accept; }\n"
		 "add map inet kiln egress { type ifname : verdict; }\n"
		 "add map inet kiln ws_member { type ifname : mark; }\n"
		 "add map inet kiln ws_in { type ipv4_addr : verdict; }\n"
		 HOST_NETS_SETS
		 "flush chain inet kiln forward\n"
		 "flush chain inet kiln input\n"
		 "flush chain inet kiln postrouting\n"
		 "add rule inet kiln forward ct state established,related accept\n"
		 /* A member of a workspace to a port one of its sandboxes
		  * opened to it (net.h); a lookup that misses ends the rule. */
		 "add rule inet kiln forward iifname \"kv*\" oifname \"kv*\" meta mark set iifname map @ws_member "
		 "ip daddr vmap @ws_in\n"
		 "add rule inet kiln forward iifname \"kv*\" oifname \"kv*\" drop comment \"sandbox to sandbox\"\n"
		 "add rule inet kiln forward iifname \"kv*\" ip daddr 169.254.0.0/16 drop comment \"cloud metadata\"\n"
		 "add rule inet kiln forward iifname \"kv*\" tcp dport { " STRATUM_PORTS " } drop comment \"stratum mining\"\n"
		 "add rule inet kiln forward iifname \"kv*\" iifname vmap @egress\n"
		 "add rule inet kiln input iifname \"kv*\" ct state established,related accept\n"
		 "add rule inet kiln input iifname \"kv*\" drop comment \"the host itself\"\n"
		 "add rule inet kiln postrouting ip saddr %s/%d oifname != \"kv*\" masquerade\n",
		 pool, c->pool_bits);
	rc = nft(NULL, script);
	return rc < 0 ? rc : net_host_nets_refresh(c);
}

/* One address of the host as the network it is on, "a.b.c.d/n" (or
 * IPv6), appended to list; false if it is none of the host's networks a
 * sandbox could reach otherwise: loopback, IPv6 link-local (dropped
 * anyway), the sandboxes' own pool. */
static bool host_net(const struct net_config *c, const struct ifaddrs *ifa, char *list, size_t n)
{
	if (!ifa->ifa_addr || !ifa->ifa_netmask || (ifa->ifa_flags & IFF_LOOPBACK) ||
	    strncmp(ifa->ifa_name, "kv", 2) == 0)
		return false;
	char a[INET6_ADDRSTRLEN];
	int bits = 0;
	if (ifa->ifa_addr->sa_family == AF_INET) {
		uint32_t addr = ntohl(((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr.s_addr);
		uint32_t mask = ntohl(((const struct sockaddr_in *)ifa->ifa_netmask)->sin_addr.s_addr);
		uint32_t pool_mask = c->pool_bits ? ~0u << (32 - c->pool_bits) : 0;
		if ((addr & pool_mask) == c->pool)
			return false;
		for (uint32_t m = mask; m & 0x80000000u; m <<= 1)
			bits++;
		ip4(addr & mask, a);
	} else if (ifa->ifa_addr->sa_family == AF_INET6) {
		struct in6_addr addr = ((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
		const struct in6_addr *mask = &((const struct sockaddr_in6 *)ifa->ifa_netmask)->sin6_addr;
		if (IN6_IS_ADDR_LINKLOCAL(&addr) || IN6_IS_ADDR_LOOPBACK(&addr))
			return false;
		for (int i = 0; i < 16; i++) {
			addr.s6_addr[i] &= mask->s6_addr[i];
			for (unsigned m = mask->s6_addr[i]; m & 0x80; m = (m << 1) & 0xff)
				bits++;
		}
		inet_ntop(AF_INET6, &addr, a, sizeof a);
	} else {
		return false;
	}
	size_t len = strlen(list);
	char one[INET6_ADDRSTRLEN + 8];
	int k = snprintf(one, sizeof one, "%s%s/%d", len ? ", " : "", a, bits);
	if (len + (size_t)k >= n)
		return false;	/* thousands of addresses: the first ones */
	memcpy(list + len, one, (size_t)k + 1);
	return true;
}

/* The host's networks as last written to the sets, so that a refresh
 * that finds them unchanged runs no nft. */
static pthread_mutex_t host_nets_lock = PTHREAD_MUTEX_INITIALIZER;
static char host_nets_last[8192 + 256];

int net_host_nets_refresh(const struct net_config *c)
{
	struct ifaddrs *all;
	if (getifaddrs(&all) < 0)
		return errf_sys("getifaddrs");
	static char v4[4096], v6[4096], script[sizeof host_nets_last];
	pthread_mutex_lock(&host_nets_lock);
	v4[0] = v6[0] = 0;
	for (struct ifaddrs *ifa = all; ifa; ifa = ifa->ifa_next)
		if (ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET6)
			host_net(c, ifa, v6, sizeof v6);
		else
			host_net(c, ifa, v4, sizeof v4);
	freeifaddrs(all);
	snprintf(script, sizeof script, "flush set inet kiln host_nets\n%s%s%s"
		 "flush set inet kiln host_nets6\n%s%s%s",
		 v4[0] ? "add element inet kiln host_nets { " : "", v4, v4[0] ? " }\n" : "",
		 v6[0] ? "add element inet kiln host_nets6 { " : "", v6, v6[0] ? " }\n" : "");
	int rc = 0;
	if (strcmp(script, host_nets_last) != 0) {
		rc = nft(NULL, script);
		snprintf(host_nets_last, sizeof host_nets_last, "%s", rc == 0 ? script : "");
	}
	pthread_mutex_unlock(&host_nets_lock);
	return rc;
}

void net_slot_info(const struct net_config *c, uint32_t slot, struct net_slot *out)
{
	memset(out, 0, sizeof *out);
	out->slot = slot;
	snprintf(out->netns, sizeof out->netns, NS_PREFIX "%u", slot);
	snprintf(out->netns_path, sizeof out->netns_path, NETNS_DIR "/" NS_PREFIX "%u", slot);
	snprintf(out->tap, sizeof out->tap, "tap0");
	snprintf(out->veth, sizeof out->veth, "kv%u", slot);
	ip4(c->pool + slot * 4 + 1, out->host_ip);
	ip4(c->pool + slot * 4 + 2, out->ns_ip);
}

int net_list(uint32_t *slots, int max)
{
	DIR *d = opendir(NETNS_DIR);
	int n = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		char *end;
		if (strncmp(e->d_name, NS_PREFIX, strlen(NS_PREFIX)) != 0)
			continue;
		unsigned long v = strtoul(e->d_name + strlen(NS_PREFIX), &end, 10);
		if (*end == 0 && end != e->d_name + strlen(NS_PREFIX))
			slots[n++] = (uint32_t)v;
	}
	closedir(d);
	return n;
}

static int setup_slot(const struct net_config *c, const struct net_slot *s)
{
	char script[2048];
	snprintf(script, sizeof script,
		 "link add %s type veth peer name vn netns %s\n"
		 "addr add %s/30 dev %s\n"
		 "link set %s up\n",
		 s->veth, s->netns, s->host_ip, s->veth, s->veth);
	int rc = ip_batch(NULL, script);
	if (rc < 0)
		return rc;
	snprintf(script, sizeof script,
		 "link set lo up\n"
		 "addr add %s/30 dev vn\n"
		 "link set vn up\n"
		 "route add default via %s\n"
		 "tuntap add dev %s mode tap\n"
		 "link set %s address %s\n"
		 "addr add %s/%d dev %s\n"
		 "link set %s up\n",
		 s->ns_ip, s->host_ip, s->tap, s->tap, c->gateway_mac, c->gateway_ip, c->tap_bits,
		 s->tap, s->tap);
	if ((rc = ip_batch(s->netns, script)) < 0)
		return rc;
	if ((rc = netns_sysctl(s->netns_path, "net/ipv4/ip_forward", "1\n")) < 0)
		return rc;
	/* Inside: the guests' shared address leaves as the veth's. */
	snprintf(script, sizeof script,
		 "table ip kiln {\n"
		 "\tchain post {\n"
		 "\t\ttype nat hook postrouting priority 100; policy accept;\n"
		 "\t\toifname \"vn\" masquerade\n"
		 "\t}\n"
		 "}\n");
	if ((rc = nft(s->netns, script)) < 0)
		return rc;
	struct net_policy open_policy = { .allow_internet = true };
	return net_set_policy(c, s, &open_policy);
}

uint32_t net_slot_max(const struct net_config *c)
{
	return (1u << (32 - c->pool_bits)) / 4;
}

int net_create_slot(const struct net_config *c, uint32_t slot, struct net_slot *out)
{
	if (!slot || slot >= net_slot_max(c))
		return errf(EINVAL, "network slot %u is outside the pool (1-%u)", slot, net_slot_max(c) - 1);
	net_slot_info(c, slot, out);
	/* The namespace's file is made exclusively: when another creator
	 * got here first, that is how a slot is claimed on the host. */
	int rc = netns_add(out->netns_path);
	if (rc == -EEXIST)
		return errf(EEXIST, "network slot %u is taken", slot);
	if (rc < 0)
		return rc;
	rc = setup_slot(c, out);
	if (rc < 0) {
		char why[512];
		snprintf(why, sizeof why, "%s", errmsg());
		net_destroy(c, slot);
		return errf(-rc, "network for slot %u: %s", slot, why);
	}
	return 0;
}

int net_create(const struct net_config *c, struct net_slot *out)
{
	uint32_t max = net_slot_max(c);
	for (uint32_t slot = 1; slot < max; slot++) {
		char owner[64];
		snprintf(owner, sizeof owner, NET_OWNER_DIR "/%u", slot);
		struct stat st;
		if (lstat(owner, &st) == 0)
			continue;	/* a kilnd's, maybe not made yet */
		int rc = net_create_slot(c, slot, out);
		if (rc != -EEXIST)
			return rc;
	}
	return errf(ENOSPC, "no free network slot (pool of %u)", max);
}

static int append_set(char *buf, size_t n, const struct net_cidr *list, int count)
{
	size_t len = strlen(buf);
	len += (size_t)snprintf(buf + len, n - len, "{ ");
	for (int i = 0; i < count && len < n; i++) {
		char a[16];
		ip4(list[i].addr, a);
		len += (size_t)snprintf(buf + len, n - len, "%s%s/%d", i ? ", " : "", a, list[i].bits);
	}
	if (len < n)
		len += (size_t)snprintf(buf + len, n - len, " }");
	return len < n ? 0 : errf(E2BIG, "policy too large");
}

/* p's workspace ports as an nft set's elements ("5432, 8080"); "" for none. */
#define WS_PORTS_LIST (NET_WS_PORTS_MAX * 8 + 8)
static void ws_ports_list(const struct net_policy *p, char out[WS_PORTS_LIST])
{
	out[0] = 0;
	for (int i = 0; i < p->nws_ports && i < NET_WS_PORTS_MAX; i++)
		snprintf(out + strlen(out), WS_PORTS_LIST - strlen(out), "%s%d", i ? ", " : "", p->ws_ports[i]);
}

int net_set_policy(const struct net_config *c, const struct net_slot *s, const struct net_policy *p)
{
	(void)c;
	if (p->nallow > NET_MAX_CIDRS || p->ndeny > NET_MAX_CIDRS)
		return errf(EINVAL, "at most %d CIDRs in each of allow_out and deny_out", NET_MAX_CIDRS);
	/* One nft run is one transaction: the old rules are replaced, never
	 * absent, so a policy change cannot open a window. */
	char script[8192];
	snprintf(script, sizeof script, HOST_NETS_SETS
		 "add chain inet kiln sbx%u\n"
		 "flush chain inet kiln sbx%u\n", s->slot, s->slot);
	int rc = 0;
	if (p->ndeny) {
		snprintf(script + strlen(script), sizeof script - strlen(script),
			 "add rule inet kiln sbx%u ip daddr ", s->slot);
		rc = append_set(script, sizeof script, p->deny, p->ndeny);
		strncat(script, " drop\n", sizeof script - strlen(script) - 1);
	}
	if (rc == 0 && !p->allow_internet) {
		snprintf(script + strlen(script), sizeof script - strlen(script),
			 "add rule inet kiln sbx%u drop\n", s->slot);
	} else if (rc == 0 && p->nallow) {
		snprintf(script + strlen(script), sizeof script - strlen(script),
			 "add rule inet kiln sbx%u ip daddr ", s->slot);
		rc = append_set(script, sizeof script, p->allow, p->nallow);
		snprintf(script + strlen(script), sizeof script - strlen(script),
			 " accept\nadd rule inet kiln sbx%u drop\n", s->slot);
	} else if (rc == 0) {
		/* The internet, not the host's private networks: its LAN, its
		 * gateway and resolvers, other services in the data centre;
		 * nor the networks of the host's own addresses, whatever their
		 * range (a public uplink's neighbours; the set is kept by
		 * net_host_nets_refresh). An allow_out list that names them
		 * lets them through. */
		snprintf(script + strlen(script), sizeof script - strlen(script),
			 "add rule inet kiln sbx%u ip daddr { " PRIVATE_V4 " } drop comment \"private\"\n"
			 "add rule inet kiln sbx%u ip6 daddr { " PRIVATE_V6 " } drop comment \"private\"\n"
			 "add rule inet kiln sbx%u ip daddr @host_nets drop comment \"the host's networks\"\n"
			 "add rule inet kiln sbx%u ip6 daddr @host_nets6 drop comment \"the host's networks\"\n",
			 s->slot, s->slot, s->slot, s->slot);
	}
	if (rc < 0)
		return rc;
	snprintf(script + strlen(script), sizeof script - strlen(script),
		 "add element inet kiln egress { \"%s\" : jump sbx%u }\n", s->veth, s->slot);
	/* Inbound from its workspace: the slot's chain in ws_in (empty, so
	 * nothing is accepted, unless it opens ports), and its membership. */
	snprintf(script + strlen(script), sizeof script - strlen(script),
		 "add chain inet kiln in%u\n"
		 "flush chain inet kiln in%u\n", s->slot, s->slot);
	char ports[WS_PORTS_LIST];
	ws_ports_list(p, ports);
	if (p->workspace && ports[0])
		snprintf(script + strlen(script), sizeof script - strlen(script),
			 "add rule inet kiln in%u meta mark 0x%08x tcp dport { %s } accept\n", s->slot, p->workspace,
			 ports);
	snprintf(script + strlen(script), sizeof script - strlen(script),
		 "add element inet kiln ws_in { %s : jump in%u }\n", s->ns_ip, s->slot);
	if (p->workspace)
		snprintf(script + strlen(script), sizeof script - strlen(script),
			 "add element inet kiln ws_member { \"%s\" : 0x%08x }\n", s->veth, p->workspace);
	if (strlen(script) >= sizeof script - 1)
		return errf(E2BIG, "policy too large");
	if ((rc = nft(NULL, script)) < 0 || !ports[0])
		return rc;
	return net_ws_forward(c, s, p, true);
}

int net_ws_forward(const struct net_config *c, const struct net_slot *s, const struct net_policy *p, bool to_guest)
{
	char ports[WS_PORTS_LIST], script[512];
	ws_ports_list(p, ports);
	if (!ports[0])
		return 0;
	/* In the namespace: the ports to the guest, or (not to_guest) to
	 * whatever listens in the namespace itself. */
	snprintf(script, sizeof script,
		 "add chain ip kiln pre { type nat hook prerouting priority -100; policy accept; }\n"
		 "flush chain ip kiln pre\n");
	if (to_guest)
		snprintf(script + strlen(script), sizeof script - strlen(script),
			 "add rule ip kiln pre iifname \"vn\" tcp dport { %s } dnat to %s\n", ports, c->guest_ip);
	return nft(s->netns, script);
}

uint32_t net_workspace_mark(const char *workspace)
{
	uint32_t h = 2166136261u;	/* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)workspace; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h ? h : 1;
}

int net_join_workspace(const struct net_config *c, const struct net_slot *s, uint32_t ws)
{
	(void)c;
	char script[160];
	snprintf(script, sizeof script, "add element inet kiln ws_member { \"%s\" : 0x%08x }\n", s->veth, ws);
	return nft(NULL, script);
}

int net_destroy(const struct net_config *c, uint32_t slot)
{
	struct net_slot s;
	net_slot_info(c, slot, &s);
	char script[256], keep[512];
	/* Each piece may already be gone: try them one by one, and leave the
	 * message of the caller's failure (a destroy is often its cleanup)
	 * as it was. */
	snprintf(keep, sizeof keep, "%s", errmsg());
	snprintf(script, sizeof script, "delete element inet kiln egress { \"%s\" }\n", s.veth);
	nft(NULL, script);
	snprintf(script, sizeof script, "delete chain inet kiln sbx%u\n", slot);
	nft(NULL, script);
	/* Its membership first: the slot's next sandbox may be another
	 * workspace's. */
	snprintf(script, sizeof script, "delete element inet kiln ws_member { \"%s\" }\n", s.veth);
	nft(NULL, script);
	snprintf(script, sizeof script, "delete element inet kiln ws_in { %s }\n", s.ns_ip);
	nft(NULL, script);
	snprintf(script, sizeof script, "delete chain inet kiln in%u\n", slot);
	nft(NULL, script);
	/* The veth at once (the namespace's end goes with it), not when the
	 * kernel gets to freeing the namespace below. */
	link_del(s.veth);
	errf(EIO, "%s", keep);
	/* The namespace takes the TAP with it. */
	return netns_del(s.netns_path);
}

int net_cleanup(const struct net_config *c)
{
	uint32_t slots[4096];
	int n = net_list(slots, 4096);
	int rc = 0;
	for (int i = 0; i < n; i++)
		if (net_destroy(c, slots[i]) < 0)
			rc = -1;
	if (nft(NULL, "list table inet kiln\n") == 0 && nft(NULL, "delete table inet kiln\n") < 0)
		rc = -1;
	return rc;
}
