/*
 * Network setup without external tools: lo up, and when the kernel command
 * line gives kiln.ip, the interface's address, the default route via
 * kiln.gw and /etc/resolv.conf from kiln.dns. Plain ioctls do all of it
 * for IPv4, which is all the sandbox network hands out.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "guest/boot.h"

static int if_up(int s, const char *name)
{
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return ioctl(s, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

static void set_sin(struct sockaddr *sa, in_addr_t a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = a };
	memcpy(sa, &sin, sizeof sin);
}

/* "A.B.C.D/N" into an address and netmask. */
static int parse_cidr(const char *s, struct in_addr *addr, in_addr_t *mask)
{
	char buf[64];
	snprintf(buf, sizeof buf, "%s", s);
	char *slash = strchr(buf, '/');
	unsigned long prefix = 32;
	if (slash) {
		char *end;
		*slash = 0;
		prefix = strtoul(slash + 1, &end, 10);
		if (!slash[1] || *end || prefix > 32)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, buf, addr) != 1)
		return -EINVAL;
	*mask = prefix ? htonl(~0u << (32 - prefix)) : 0;
	return 0;
}

static int write_resolv_conf(const char *dns, char *err, size_t errlen)
{
	char list[256], text[1024];
	size_t used = 0;
	snprintf(list, sizeof list, "%s", dns);
	char *save = NULL;
	for (char *d = strtok_r(list, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
		struct in_addr a;
		if (inet_pton(AF_INET, d, &a) != 1) {
			snprintf(err, errlen, "kiln.dns: '%s' is not an IPv4 address", d);
			return -EINVAL;
		}
		used += (size_t)snprintf(text + used, sizeof text - used, "nameserver %s\n", d);
		if (used >= sizeof text)
			return -E2BIG;
	}
	/* Replace, not write through: the image's resolv.conf may be a
	 * symlink into a resolver daemon's directory. */
	int fd = open("/etc/resolv.conf.kiln", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, used) != (ssize_t)used || close(fd) < 0 ||
	    rename("/etc/resolv.conf.kiln", "/etc/resolv.conf") < 0) {
		int e = errno;
		snprintf(err, errlen, "write /etc/resolv.conf: %s", strerror(e));
		unlink("/etc/resolv.conf.kiln");
		return -e;
	}
	return 0;
}

int net_setup(const struct boot_cfg *cfg, char *err, size_t errlen)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc;

	if (s < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	if ((rc = if_up(s, "lo")) < 0) {
		snprintf(err, errlen, "bring up lo: %s", strerror(-rc));
		goto out;
	}
	if (!cfg->ip[0])
		goto out;

	struct in_addr addr;
	in_addr_t mask;
	if (parse_cidr(cfg->ip, &addr, &mask) < 0) {
		snprintf(err, errlen, "kiln.ip: '%s' is not ADDRESS/PREFIX", cfg->ip);
		rc = -EINVAL;
		goto out;
	}
	/* The NIC's driver may still be probing. */
	char sys[64];
	struct stat st;
	struct timespec tick = { 0, 10 * 1000000 };
	snprintf(sys, sizeof sys, "/sys/class/net/%s", cfg->iface);
	for (int i = 0; i < 300 && stat(sys, &st) < 0; i++)
		nanosleep(&tick, NULL);

	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", cfg->iface);
	set_sin(&ifr.ifr_addr, addr.s_addr);
	if (ioctl(s, SIOCSIFADDR, &ifr) < 0) {
		rc = -errno;
		snprintf(err, errlen, "set address %s on %s: %s", cfg->ip, cfg->iface, strerror(errno));
		goto out;
	}
	set_sin(&ifr.ifr_netmask, mask);
	if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0 || (rc = if_up(s, cfg->iface)) < 0) {
		rc = rc < 0 ? rc : -errno;
		snprintf(err, errlen, "bring up %s: %s", cfg->iface, strerror(-rc));
		goto out;
	}
	if (cfg->gw[0]) {
		struct rtentry rt = { 0 };
		struct in_addr gw;
		if (inet_pton(AF_INET, cfg->gw, &gw) != 1) {
			snprintf(err, errlen, "kiln.gw: '%s' is not an IPv4 address", cfg->gw);
			rc = -EINVAL;
			goto out;
		}
		set_sin(&rt.rt_dst, INADDR_ANY);
		set_sin(&rt.rt_genmask, INADDR_ANY);
		set_sin(&rt.rt_gateway, gw.s_addr);
		rt.rt_flags = RTF_UP | RTF_GATEWAY;
		rt.rt_dev = (char *)cfg->iface;
		if (ioctl(s, SIOCADDRT, &rt) < 0 && errno != EEXIST) {
			rc = -errno;
			snprintf(err, errlen, "default route via %s: %s", cfg->gw, strerror(errno));
			goto out;
		}
	}
	if (cfg->dns[0])
		rc = write_resolv_conf(cfg->dns, err, errlen);
out:
	close(s);
	return rc;
}
