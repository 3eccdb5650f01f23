/*
 * cluster_cmd: `kilnd cluster ...`, an operator's commands on the
 * cluster's records (kilnd/cluster.h). Like `kilnd keys`, they work on the
 * store directly, so they run wherever the database can be reached, with
 * or without a kilnd serving.
 */
#include "kilnd/cluster.h"
#include "api/cluster.h"
#include "api/keys.h"
#include "store/cluster.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOKEN_EXPIRES_DEFAULT 3600
#define TOKEN_EXPIRES_MAX (30 * 86400)

static void fail(const char *fmt, const char *arg) __attribute__((noreturn));
static void fail(const char *fmt, const char *arg)
{
	fputs("kilnd: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

static const char *when(int64_t ms, char *buf, size_t len)
{
	if (!ms)
		return "-";
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

static int print_token(void *ctx, const struct join_token_row *t)
{
	int64_t now = *(int64_t *)ctx;
	char uses[24], exp[32];
	if (t->uses_left < 0)
		snprintf(uses, sizeof uses, "any");
	else
		snprintf(uses, sizeof uses, "%lld", (long long)t->uses_left);
	const char *state = t->revoked_ms ? "revoked" : t->expires_ms <= now ? "expired"
			  : t->uses_left == 0 ? "used" : "active";
	printf("%-24s %-14s %-8s %-5s %s\n", t->id, t->prefix, state, uses, when(t->expires_ms, exp, sizeof exp));
	return 0;
}

static int token_cmd(struct store *st, const struct cluster_opts *o, int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "create") && argc == 1) {
		int64_t expires = o->expires_s ? o->expires_s : TOKEN_EXPIRES_DEFAULT;
		int64_t uses = o->uses ? o->uses : 1;
		char token[SECRET_MAX], hash[KEY_HASH_LEN], prefix[TOKEN_PREFIX_LEN + 1], id[ID_MAX];
		int rc = secret_generate(JOIN_TOKEN_PREFIX, token);
		if (rc == 0) {
			key_hash(token, strlen(token), hash);
			snprintf(prefix, sizeof prefix, "%s", token);
			rc = store_join_token_add(st, hash, prefix, wall_ms() + expires * 1000, uses, id);
		}
		if (rc < 0)
			fail("%s", errmsg());
		printf("%s\n", token);
		fprintf(stderr, "kilnd: join token %s (%s...), %s use%s, expires in %lld s; it is shown only once\n",
			id, prefix, uses < 0 ? "any number of" : uses == 1 ? "one" : "several",
			uses == 1 ? "" : "s", (long long)expires);
		return 0;
	}
	if (argc == 1 && !strcmp(argv[0], "list")) {
		int64_t now = wall_ms();
		printf("%-24s %-14s %-8s %-5s %s\n", "ID", "PREFIX", "STATE", "USES", "EXPIRES");
		if (store_join_token_each(st, print_token, &now) < 0)
			fail("%s", errmsg());
		return 0;
	}
	if (argc == 2 && !strcmp(argv[0], "revoke")) {
		if (store_join_token_revoke(st, argv[1]) < 0)
			fail("%s", errmsg());
		fprintf(stderr, "kilnd: join token %s revoked\n", argv[1]);
		return 0;
	}
	fail("%s", "cluster token wants create [--expires SECONDS] [--uses N|any], list, or revoke ID");
}

/* The state an operator reads: revoked > down > draining > cordoned > up. */
static const char *host_state(const struct host_row *h)
{
	if (!strcmp(h->admin, "revoked"))
		return "revoked";
	if (!strcmp(h->health, "down"))
		return "down";
	if (!strcmp(h->admin, "active"))
		return "up";
	return h->admin;
}

static int print_host(void *ctx, const struct host_row *h)
{
	int64_t now = *(int64_t *)ctx;
	char beat[32], mem[24];
	snprintf(beat, sizeof beat, "%llds ago", (long long)((now - h->heartbeat_ms) / 1000));
	snprintf(mem, sizeof mem, "%lld", (long long)h->memory_mib);
	printf("%-26s %-16s %-9s %5lld %8s %5lld %-12s %-10s %s%s%s\n", h->id, h->name, host_state(h),
	       (long long)h->vcpus, mem, (long long)h->sandboxes, h->version[0] ? h->version : "-", beat,
	       h->url, h->reason[0] ? "  " : "", h->reason);
	return 0;
}

static int hosts_cmd(struct store *st, int argc, char **argv)
{
	if (argc == 0 || (argc == 1 && !strcmp(argv[0], "list"))) {
		int64_t now = wall_ms();
		printf("%-26s %-16s %-9s %5s %8s %5s %-12s %-10s %s\n", "ID", "NAME", "STATE", "VCPUS",
		       "MEM_MIB", "SBXS", "VERSION", "HEARTBEAT", "URL");
		if (store_host_each(st, print_host, &now) < 0)
			fail("%s", errmsg());
		return 0;
	}
	static const struct { const char *verb, *admin, *done; } verbs[] = {
		{ "cordon", "cordoned", "cordoned: no new sandboxes" },
		{ "uncordon", "active", "active again" },
		{ "drain", "draining", "draining: no new sandboxes, and its sandboxes are left to end" },
		{ "revoke", "revoked", "revoked: its credential is refused from now on" },
	};
	for (size_t i = 0; argc == 2 && i < sizeof verbs / sizeof verbs[0]; i++)
		if (!strcmp(argv[0], verbs[i].verb)) {
			if (store_host_set_admin(st, argv[1], verbs[i].admin) < 0)
				fail("%s", errmsg());
			fprintf(stderr, "kilnd: host %s %s\n", argv[1], verbs[i].done);
			return 0;
		}
	fail("%s", "cluster hosts wants list, or cordon|uncordon|drain|revoke HOST (its id or name)");
}

int cluster_cmd(struct store *st, const struct cluster_opts *o, int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "token"))
		return token_cmd(st, o, argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "hosts"))
		return hosts_cmd(st, argc - 1, argv + 1);
	fail("%s", "cluster wants 'token create|list|revoke' or 'hosts [list|cordon|uncordon|drain|revoke H]'");
}
