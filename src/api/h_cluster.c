/*
 * h_cluster: the API's side of joining hosts (docs/cluster.md).
 *
 *   POST /v1/cluster/join        a host trades a join token for its own credential
 *   POST /v1/cluster/heartbeat   a host, by its credential, says it lives and what it has
 *
 * Neither takes an API key: a join shows a token an operator made
 * (`kilnd cluster token create`), a heartbeat the host's credential
 * (`Authorization: Bearer kiln_node_...`). A refusal tells the caller
 * only "refused" and logs why (expired, revoked, used up, unknown) with
 * the caller's address, for the operator. A secret is kept only as its
 * SHA-256, as API keys are (keys.h).
 *
 * The monitor thread marks hosts down whose heartbeats stopped
 * (HOST_DOWN_MS: the bound docs/cluster.md promises).
 */
#include "api/api.h"
#include "api/cluster.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/keys.h"
#include "hostif/hostif.h"
#include "hostif/hostif_wire.h"
#include "ops/validate.h"
#include "store/cluster.h"
#include "common/err.h"
#include "common/periodic.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int refused(struct req *r, const char *what)
{
	char addr[64];
	req_client_addr(r, addr, sizeof addr);
	log_warn("cluster: %s from %s refused: %s", what, addr, errmsg());
	return reply_error(r, 401, "unauthorized", "%s refused", what);
}

/* The capacity fields a join and a heartbeat both carry. */
struct capacity {
	int64_t vcpus, memory_mib, disk_mib, sandboxes;
	const char *version;
	char *templates;		/* JSON text (malloc'd) or NULL */
};

static int parse_capacity(const json_t *b, struct capacity *c)
{
	memset(c, 0, sizeof *c);
	int rc = v_int(b, "vcpus", true, 1, 4096, &c->vcpus);
	rc = rc ?: v_int(b, "memory_mib", true, 1, INT64_C(1) << 32, &c->memory_mib);
	rc = rc ?: v_int(b, "disk_mib", false, 0, INT64_C(1) << 40, &c->disk_mib);
	rc = rc ?: v_int(b, "sandboxes", false, 0, 1 << 20, &c->sandboxes);
	rc = rc ?: v_str(b, "version", false, 63, &c->version);
	const json_t *t = json_object_get(b, "templates");
	if (rc == 0 && t && !json_is_array(t))
		rc = errf(EINVAL, "field 'templates' must be an array of {\"name\", \"version\"}");
	if (rc == 0 && t && json_array_size(t) > 256)
		rc = errf(EINVAL, "field 'templates': at most 256");
	if (rc == 0 && t && !(c->templates = json_dumps(t, JSON_COMPACT)))
		rc = errf(ENOMEM, "out of memory");
	if (rc == 0 && c->templates && strlen(c->templates) > 64 * 1024)
		rc = errf(EINVAL, "field 'templates' is longer than 64 KiB");
	if (rc < 0) {
		free(c->templates);
		c->templates = NULL;
	}
	return rc;
}

/* A secret's hash, or -EACCES for one of the wrong shape. */
static int secret_hash(const char *s, const char *prefix, char hash[KEY_HASH_LEN])
{
	size_t n = s ? strlen(s) : 0;
	if (!secret_well_formed(s, n, prefix))
		return errf(EACCES, "malformed %s", prefix);
	key_hash(s, n, hash);
	return 0;
}

/* A host's name: what a DNS name may hold. */
static bool v_is_host_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63 || s[0] == '-' || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

static bool url_ok(const char *u)
{
	return !strncmp(u, "http://", 7) || !strncmp(u, "https://", 8);
}

int h_cluster_join(struct req *r)
{
	static const char *const keys[] = { "token", "name", "url", "vcpus", "memory_mib", "disk_mib",
					    "sandboxes", "version", "templates", NULL };
	const json_t *b = r->json ? r->json : json_object();
	const char *token = NULL, *name = NULL, *url = NULL;
	struct capacity cap = { 0 };
	int rc = v_known_keys(b, keys);
	rc = rc ?: v_str(b, "token", true, 64, &token);
	rc = rc ?: v_str(b, "name", true, NAME_MAX_LEN - 1, &name);
	rc = rc ?: v_str(b, "url", true, 255, &url);
	if (rc == 0 && !v_is_host_name(name))
		rc = errf(EINVAL, "field 'name' wants letters, digits, '-' and '.', at most 63");
	if (rc == 0 && !url_ok(url))
		rc = errf(EINVAL, "field 'url' must be an http:// or https:// URL");
	rc = rc ?: parse_capacity(b, &cap);
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	char thash[KEY_HASH_LEN], cred[SECRET_MAX], chash[KEY_HASH_LEN], id[ID_MAX], hkey[SECRET_MAX];
	if (secret_hash(token, JOIN_TOKEN_PREFIX, thash) < 0) {
		free(cap.templates);
		return refused(r, "join");
	}
	/* Two secrets: the host's credential, which the API keeps only as its
	 * hash, and the key the API shows when it calls the host, which the
	 * API must keep whole to send (docs/cluster.md "Trust"). */
	rc = secret_generate(NODE_CRED_PREFIX, cred);
	rc = rc ?: secret_generate(HOST_KEY_PREFIX, hkey);
	if (rc == 0) {
		key_hash(cred, strlen(cred), chash);
		struct host_join j = {
			.token_hash = thash, .credential_hash = chash, .name = name, .url = url,
			.api_key = hkey, .version = cap.version, .templates = cap.templates, .vcpus = cap.vcpus,
			.memory_mib = cap.memory_mib, .disk_mib = cap.disk_mib,
		};
		rc = store_host_join(r->api->store, &j, id);
	}
	free(cap.templates);
	if (rc == -EACCES)
		return refused(r, "join");
	if (rc < 0)
		return reply_errno(r, rc);
	char addr[64];
	req_client_addr(r, addr, sizeof addr);
	log_info("cluster: host %s (%s) joined from %s, serving %s", name, id, addr, url);
	return reply_json(r, 201, json_pack("{s:s,s:s,s:s,s:s,s:I}", "host_id", id, "name", name,
					    "credential", cred, "api_key", hkey, "heartbeat_ms",
					    (json_int_t)HOST_BEAT_MS));
}

/* The records a host sends with its heartbeat (docs/cluster.md
 * "Records"): its sandboxes', snapshots' and usage's, each kept only if
 * the API placed that id, of that workspace, on this host: a host writes
 * nothing of another host's or of a sandbox no API made. */
#define RECORDS_MAX 4096

static int keep_records(struct store *st, const struct host_row *h, const json_t *rec)
{
	const json_t *sb = json_object_get(rec, "sandboxes"), *sn = json_object_get(rec, "snapshots"),
		     *us = json_object_get(rec, "usage"), *no = json_object_get(rec, "notices");
	if (!json_is_object(rec) ||
	    json_array_size(sb) + json_array_size(sn) + json_array_size(us) + json_array_size(no) > RECORDS_MAX)
		return errf(EINVAL, "field 'records': {sandboxes, snapshots, usage, notices}, at most %d in all",
			    RECORDS_MAX);
	int refused = 0, rc = 0;
	size_t i;
	json_t *e;
	json_array_foreach(sb, i, e) {
		struct sbx_row row;
		if (wire_row_parse(e, &row) < 0) {
			refused++;
			continue;
		}
		if (store_placement_is(st, row.id, row.workspace, h->id) == 0) {
			/* 1: the database has a newer revision (an answer of
			 * the host saved after this heartbeat read its store):
			 * this record is old news, and acts on nothing below. */
			rc = store_sandbox_keep(st, &row);
			/* Deleted on its host (its TTL, an idle retention):
			 * it no longer holds room there. */
			if (rc == 0 && row.state == SBX_DELETED)
				rc = store_placement_end(st, row.id);
			/* Running again (or gone): a wake's hold on it is over. */
			if (rc == 0 && row.state != SBX_HIBERNATED)
				rc = store_wake_done(st, row.id);
			if (rc == 1)
				rc = 0;
		} else
			refused++;
		sbx_row_clear(&row);
		if (rc < 0)
			return rc;
	}
	json_array_foreach(sn, i, e) {
		struct snap_row s;
		if (wire_snap_parse(e, &s) < 0) {
			refused++;
			continue;
		}
		if (store_placement_is(st, s.id, s.workspace, h->id) == 0)
			rc = store_snapshot_save(st, &s);
		else
			refused++;
		snap_row_clear(&s);
		if (rc < 0)
			return rc;
	}
	json_array_foreach(us, i, e) {
		struct usage_hour u;
		if (wire_usage_parse(e, &u) < 0 || store_placement_is(st, u.sandbox, u.workspace, h->id) < 0) {
			refused++;
			continue;
		}
		if ((rc = store_usage_set(st, &u)) < 0)
			return rc;
	}
	/* TTL warnings, for the replicas' event streams (docs/cluster.md
	 * "Events"). */
	json_array_foreach(no, i, e) {
		struct notice_row n;
		if (wire_notice_parse(e, &n) < 0 || store_placement_is(st, n.sandbox, n.workspace, h->id) < 0) {
			refused++;
			continue;
		}
		if ((rc = store_notice_add(st, &n)) < 0)
			return rc;
	}
	if (refused)
		log_warn("cluster: host %s sent %d records of nothing placed on it: not kept", h->name, refused);
	return 0;
}

static int add_id(void *ctx, const char *id)
{
	return json_array_append_new(ctx, json_string(id)) == 0 ? 0 : -ENOMEM;
}

int h_cluster_heartbeat(struct req *r)
{
	static const char *const keys[] = { "vcpus", "memory_mib", "disk_mib", "sandboxes", "version",
					    "templates", "records", NULL };
	const char *auth = req_header(r, "Authorization");
	char chash[KEY_HASH_LEN];
	if (!auth || strncmp(auth, "Bearer ", 7) || secret_hash(auth + 7, NODE_CRED_PREFIX, chash) < 0) {
		errf(EACCES, "no host credential (Authorization: Bearer %s...)", NODE_CRED_PREFIX);
		return refused(r, "heartbeat");
	}
	struct host_row h;
	int rc = store_host_auth(r->api->store, chash, &h);
	if (rc == -EACCES)
		return refused(r, "heartbeat");
	if (rc < 0)
		return reply_errno(r, rc);
	host_row_clear(&h);
	const json_t *b = r->json ? r->json : json_object();
	struct capacity cap;
	rc = v_known_keys(b, keys);
	rc = rc ?: parse_capacity(b, &cap);
	if (rc < 0)
		return reply_error(r, 400, "invalid_request", "%s", errmsg());
	struct host_beat beat = {
		.vcpus = cap.vcpus, .memory_mib = cap.memory_mib, .disk_mib = cap.disk_mib,
		.sandboxes = cap.sandboxes, .version = cap.version, .templates = cap.templates,
	};
	bool was_down = !strcmp(h.health, "down");
	rc = store_host_beat(r->api->store, h.id, &beat);
	free(cap.templates);
	if (rc == -EACCES)
		return refused(r, "heartbeat");
	if (rc < 0)
		return reply_errno(r, rc);
	if (was_down)
		log_info("cluster: host %s (%s) is up again", h.name, h.id);
	const json_t *rec = json_object_get(b, "records");
	if (rec && (rc = keep_records(r->api->store, &h, rec)) < 0)
		return reply_errno(r, rc);
	json_t *a = json_pack("{s:s,s:s,s:I}", "host_id", h.id, "admin", h.admin, "heartbeat_ms",
			      (json_int_t)HOST_BEAT_MS);
	/* An API that places sandboxes on hosts (--role api) says which are
	 * this host's: the host ends any other (docs/cluster.md
	 * "Reconciliation"). Said only when the list is whole. */
	json_t *ids = !strcmp(r->api->hostif->ops->name, "remote") ? json_array() : NULL;
	if (ids && store_placement_ids(r->api->store, h.id, add_id, ids) < 0) {
		json_decref(ids);
		ids = NULL;
	}
	if (a && ids)
		json_object_set_new(a, "sandboxes", ids);
	return reply_json(r, 200, a);
}

/* ---- the monitor ------------------------------------------------------------- */

static struct {
	struct periodic thread;
	struct store *store;
	int64_t down_ms;
	char reason[96];
} mon;

static void monitor(void *ctx)
{
	(void)ctx;
	int marked = 0;
	if (store_hosts_mark_down(mon.store, wall_ms() - mon.down_ms, mon.reason, &marked) < 0)
		log_warn("cluster: marking silent hosts down: %s", errmsg());
	else if (marked)
		log_warn("cluster: %d host%s marked down (%s)", marked, marked == 1 ? "" : "s", mon.reason);
}

int cluster_monitor_start(struct store *st, int64_t down_ms)
{
	mon.store = st;
	mon.down_ms = down_ms;
	snprintf(mon.reason, sizeof mon.reason, "no heartbeat for %lld s", (long long)(down_ms / 1000));
	return periodic_start(&mon.thread, "cluster monitor", 1000, monitor, NULL);
}

void cluster_monitor_stop(void)
{
	periodic_stop(&mon.thread);
}
