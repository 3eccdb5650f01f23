/*
 * pool: sandboxes spawned ahead of their creates (kilnd --pool N). For
 * each template in service a background thread keeps a few VMs spawned by
 * the template's zygote, their agent answered and their resolver
 * written, then paused: no vCPU runs, and their memory is the zygote's,
 * copy-on-write. A create of that template takes one: its egress policy
 * in force, resumed, resynced (clock, entropy, hostname, identity; the
 * same resync a spawned sandbox gets), so what it does is a control
 * request and one agent request instead of a spawn.
 *
 * A member already has its final id, directory, disk, jail, cgroup and
 * network: it is a linked sandbox (so jail uids, the layer collector and
 * restart cleanup see it) marked pooled, with no workspace and no record
 * in the store. It never counts against a workspace nor against the
 * host's admission (h->live, h->mem_mib); the pool fills only within what
 * admission would allow and gives members back when memory runs short.
 *
 * How many: per template, 1 + its creates in the last 60 seconds, at
 * most N. Members of a version no longer in service are removed. A
 * template whose member cannot be made is tried again after 2 s, then
 * 4, 8, ... at most 60 s (a new version or a member made starts over);
 * the templates after it are filled meanwhile.
 */
#ifndef KILN_HOST_POOL_H
#define KILN_HOST_POOL_H

#include <stdint.h>

struct host;
struct pool;
struct sandbox;
struct strbuf;
struct tmpl;

/* Start the filler when h->cfg->pool > 0; *out NULL otherwise. */
int pool_open(struct host *h, struct pool **out);
/* Stop the filler and destroy every member (a restart would remove them:
 * they have no record). Safe with NULL. */
void pool_close(struct pool *p);

/* A ready member of t's version in service, with policy (netpolicy.h
 * text, NULL: open) in force, resumed and resynced; still marked pooled
 * (the caller claims it: sandbox_claim). NULL when none is ready or the
 * one taken failed to wake (it is destroyed): the create spawns its own.
 * Every call counts as a create of t for the sizing. */
struct sandbox *pool_take(struct pool *p, struct tmpl *t, const char *policy);

/* kiln_pool_ready{template}, kiln_pool_takes_total{result},
 * kiln_pool_member_failures_total{template}. */
void pool_metrics(struct pool *p, struct strbuf *b);

#endif
