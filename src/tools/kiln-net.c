/*
 * kiln-net: sandbox networks by hand (docs/network.md); kilnd uses the same
 * library. All commands need root.
 *
 *   kiln-net init                      forwarding on, the kiln nftables table
 *   kiln-net create                    a new sandbox network; prints its slot
 *   kiln-net info SLOT                 its names and addresses
 *   kiln-net policy SLOT [--no-internet] [--allow CIDR]... [--deny CIDR]...
 *   kiln-net destroy SLOT
 *   kiln-net list
 *   kiln-net cleanup                   every kiln namespace and the table
 */
#include "net/net.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
	fputs("usage: kiln-net init | create | info SLOT | destroy SLOT | list | cleanup\n"
	      "       kiln-net policy SLOT [--no-internet] [--allow CIDR]... [--deny CIDR]...\n", stderr);
	return 2;
}

static void print_slot(const struct net_slot *s)
{
	printf("slot=%u netns=%s netns_path=%s tap=%s veth=%s host_ip=%s ns_ip=%s\n",
	       s->slot, s->netns, s->netns_path, s->tap, s->veth, s->host_ip, s->ns_ip);
}

static int slot_arg(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (end == s || *end || v == 0 || v > 1u << 30)
		return errf(22, "'%s' is not a slot number", s);
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	struct net_config c;
	net_default_config(&c);
	if (argc < 2)
		return usage();
	const char *cmd = argv[1];
	int rc = 0;
	uint32_t slot = 0;
	struct net_slot s;
	if (!strcmp(cmd, "init") && argc == 2) {
		rc = net_init(&c);
	} else if (!strcmp(cmd, "create") && argc == 2) {
		if ((rc = net_create(&c, &s)) == 0)
			print_slot(&s);
	} else if (!strcmp(cmd, "info") && argc == 3) {
		if ((rc = slot_arg(argv[2], &slot)) == 0) {
			net_slot_info(&c, slot, &s);
			print_slot(&s);
		}
	} else if (!strcmp(cmd, "destroy") && argc == 3) {
		if ((rc = slot_arg(argv[2], &slot)) == 0)
			rc = net_destroy(&c, slot);
	} else if (!strcmp(cmd, "list") && argc == 2) {
		uint32_t slots[4096];
		int n = net_list(slots, 4096);
		for (int i = 0; i < n; i++)
			printf("%u\n", slots[i]);
	} else if (!strcmp(cmd, "cleanup") && argc == 2) {
		rc = net_cleanup(&c);
	} else if (!strcmp(cmd, "policy") && argc >= 3) {
		struct net_policy p = { .allow_internet = true };
		if ((rc = slot_arg(argv[2], &slot)) < 0)
			goto out;
		for (int i = 3; i < argc && rc == 0; i++) {
			if (!strcmp(argv[i], "--no-internet")) {
				p.allow_internet = false;
			} else if ((!strcmp(argv[i], "--allow") || !strcmp(argv[i], "--deny")) && i + 1 < argc) {
				bool allow = argv[i][2] == 'a';
				int *n = allow ? &p.nallow : &p.ndeny;
				if (*n == NET_MAX_CIDRS) {
					rc = errf(7, "at most %d CIDRs each", NET_MAX_CIDRS);
					break;
				}
				rc = net_parse_cidr(argv[++i], allow ? &p.allow[(*n)++] : &p.deny[(*n)++]);
			} else {
				return usage();
			}
		}
		net_slot_info(&c, slot, &s);
		if (rc == 0)
			rc = net_set_policy(&c, &s, &p);
	} else {
		return usage();
	}
out:
	if (rc < 0) {
		fprintf(stderr, "kiln-net: %s\n", errmsg());
		return 1;
	}
	return 0;
}
