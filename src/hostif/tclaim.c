/*
 * tclaim: a copy's claim, renewed while the copy runs (tclaim.h).
 */
#include "hostif/tclaim.h"
#include "common/err.h"
#include "common/log.h"

#include <stdio.h>
#include <string.h>

static void renew(void *ctx)
{
	struct tclaim *c = ctx;
	/* periodic calls at once: the claim was just taken. */
	if (!c->renewals++)
		return;
	int rc = store_template_copy_claim(c->st, c->name, c->version, c->host_id, c->owner, c->lease_ms);
	if (rc == 0 && !c->lost) {
		c->lost = true;
		log_warn("template %s v%lld: the claim to copy it to host %s passed to another replica while this "
			 "one copied (it renewed too late)", c->name, (long long)c->version, c->host_id);
	} else if (rc < 0) {
		/* The store away for a moment: the next renewal tries again
		 * (a lease is three renewals long). */
		log_warn("template %s v%lld: renewing the claim to copy it to host %s: %s", c->name,
			 (long long)c->version, c->host_id, errmsg());
	}
}

int tclaim_take(struct tclaim *c, struct store *st, const char *name, int64_t version, const char *host_id,
		const char *owner, int64_t lease_ms)
{
	memset(c, 0, sizeof *c);
	c->st = st;
	snprintf(c->name, sizeof c->name, "%s", name);
	snprintf(c->host_id, sizeof c->host_id, "%s", host_id);
	snprintf(c->owner, sizeof c->owner, "%s", owner);
	c->version = version;
	c->lease_ms = lease_ms;
	int rc = store_template_copy_claim(st, name, version, host_id, owner, lease_ms);
	if (rc <= 0)
		return rc;
	int period = (int)(lease_ms / 3 > 0 ? lease_ms / 3 : 1);
	if ((rc = periodic_start(&c->renew, "template copy claim", period, renew, c)) < 0) {
		store_template_copy_release(st, name, version, host_id, owner);
		return rc;
	}
	c->renewing = true;
	return 1;
}

int tclaim_end(struct tclaim *c, int64_t keep_ms)
{
	if (c->renewing)
		periodic_stop(&c->renew);
	c->renewing = false;
	if (c->lost)
		return -1;
	if (keep_ms > 0)
		store_template_copy_claim(c->st, c->name, c->version, c->host_id, c->owner, keep_ms);
	else
		store_template_copy_release(c->st, c->name, c->version, c->host_id, c->owner);
	return 0;
}
