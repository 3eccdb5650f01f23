/*
 * agent_link: a host's link to its cluster's API (kilnd/cluster.h): the
 * join, once, and the heartbeats after it.
 *
 * The credential the API hands out on join is this host's identity from
 * then on: it is written to DATA/cluster.json (0600, through a temporary
 * file and rename, so a crash leaves the old file or the new one) before
 * the first heartbeat, and a restart uses it instead of the token (which
 * may have been single-use, or expired since). A heartbeat the API
 * refuses (401: the host was revoked) is logged each time; heartbeats go
 * on, so that an operator sees the refusals in both logs until the host
 * is stopped.
 */
#include "kilnd/cluster.h"
#include "api/cluster.h"
#include "hostif/hostif.h"
#include "hostif/hostif_wire.h"
#include "host/host_events.h"
#include "store/store.h"
#include "common/err.h"
#include "common/periodic.h"
#include "common/log.h"
#include "common/version.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#define REPLY_MAX (64 * 1024)
#define REQUEST_TIMEOUT_S 10

static struct {
	struct agent_link_config cfg;
	char cred_path[4200];
	char credential[64], host_id[ID_MAX];
	char api_key[64];		/* what the API calls this host with */
	bool api_places;		/* the API places sandboxes here: it wants records */
	int64_t records_since;		/* wall ms: records saved since go with the next beat */
	struct periodic beater;
} link_;

struct reply {
	char *data;
	size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
	struct reply *r = ctx;
	size_t add = size * n;
	if (r->len + add > REPLY_MAX)
		return 0;	/* a reply this big is not the API's: stop */
	char *d = realloc(r->data, r->len + add + 1);
	if (!d)
		return 0;
	memcpy(d + r->len, p, add);
	r->len += add;
	d[r->len] = 0;
	r->data = d;
	return add;
}

/* POST body (JSON, stolen) to the API's path; *status and the parsed
 * answer (NULL if it was not JSON). -errno for a failed transfer. */
static int post(const char *path, const char *bearer, json_t *body, long *status, json_t **answer)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	*answer = NULL;
	CURL *c = curl_easy_init();
	if (!text || !c) {
		free(text);
		curl_easy_cleanup(c);
		return errf(ENOMEM, "out of memory");
	}
	char url[1024], auth[128];
	snprintf(url, sizeof url, "%s%s", link_.cfg.api_url, path);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (bearer) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
		h = curl_slist_append(h, auth);
	}
	struct reply r = { 0 };
	char cerr[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)REQUEST_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (link_.cfg.ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, link_.cfg.ca_file);
	CURLcode cc = curl_easy_perform(c);
	int rc = 0;
	if (cc != CURLE_OK)
		rc = errf(ECONNREFUSED, "%s: %s", url, cerr[0] ? cerr : curl_easy_strerror(cc));
	else
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (rc == 0 && r.data)
		*answer = json_loads(r.data, 0, NULL);
	free(r.data);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	free(text);
	return rc;
}

static const char *answer_message(json_t *a)
{
	const char *m = json_string_value(json_object_get(json_object_get(a, "error"), "message"));
	return m ? m : "(no message)";
}

static int add_template(void *ctx, const struct hostif_template *t)
{
	if (t->built)
		json_array_append_new(ctx, json_pack("{s:s,s:i,s:i,s:i}", "name", t->name, "version", t->version,
						     "vcpus", t->vcpus, "memory_mib", t->memory_mib));
	return 0;
}

/* What this host has now, as a join and a heartbeat say it: what it
 * offers (the machine's, or --offer-vcpus/--offer-memory), and the
 * templates built here, which placement matches creates against. */
static json_t *capacity(void)
{
	struct sysinfo si;
	struct statvfs vfs;
	int64_t mem = sysinfo(&si) == 0 ? (int64_t)si.totalram * si.mem_unit / (1024 * 1024) : 1;
	int64_t disk = statvfs(link_.cfg.data_dir, &vfs) == 0
		? (int64_t)((uint64_t)vfs.f_bavail * vfs.f_frsize / (1024 * 1024)) : 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int64_t live = 0;
	if (link_.cfg.store)
		store_sandboxes_live(link_.cfg.store, &live);
	if (link_.cfg.offer_vcpus > 0)
		cpus = (long)link_.cfg.offer_vcpus;
	if (link_.cfg.offer_memory_mib > 0)
		mem = link_.cfg.offer_memory_mib;
	json_t *tmpl = json_array();
	if (tmpl && link_.cfg.hostif)
		hostif_templates(link_.cfg.hostif, add_template, tmpl);
	return json_pack("{s:I,s:I,s:I,s:I,s:s,s:o*}", "vcpus", (json_int_t)(cpus > 0 ? cpus : 1), "memory_mib",
			 (json_int_t)(mem > 0 ? mem : 1), "disk_mib", (json_int_t)disk, "sandboxes",
			 (json_int_t)live, "version", KILN_VERSION, "templates", tmpl);
}

static int load_credential(void)
{
	json_error_t e;
	json_t *j = json_load_file(link_.cred_path, 0, &e);
	if (!j)
		return -ENOENT;
	const char *api = json_string_value(json_object_get(j, "api"));
	const char *cred = json_string_value(json_object_get(j, "credential"));
	const char *id = json_string_value(json_object_get(j, "host_id"));
	const char *key = json_string_value(json_object_get(j, "api_key"));
	int rc = 0;
	if (!api || !cred || !id || !key || strlen(cred) >= sizeof link_.credential || strlen(id) >= ID_MAX ||
	    strlen(key) >= sizeof link_.api_key)
		rc = errf(EINVAL, "%s: not a credential this kilnd wrote", link_.cred_path);
	else if (strcmp(api, link_.cfg.api_url))
		rc = errf(EEXIST, "this host joined the cluster at %s (%s); remove it to join %s", api,
			  link_.cred_path, link_.cfg.api_url);
	if (rc == 0) {
		snprintf(link_.credential, sizeof link_.credential, "%s", cred);
		snprintf(link_.host_id, sizeof link_.host_id, "%s", id);
		snprintf(link_.api_key, sizeof link_.api_key, "%s", key);
	}
	json_decref(j);
	return rc;
}

static int save_credential(void)
{
	char tmp[sizeof link_.cred_path + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", link_.cred_path);
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf_sys("%s", tmp);
	json_t *j = json_pack("{s:s,s:s,s:s,s:s}", "api", link_.cfg.api_url, "host_id", link_.host_id,
			      "credential", link_.credential, "api_key", link_.api_key);
	char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	size_t n = text ? strlen(text) : 0;
	int rc = text && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0 ? 0 : errf_sys("writing %s", tmp);
	free(text);
	close(fd);
	if (rc == 0 && rename(tmp, link_.cred_path) < 0)
		rc = errf_sys("rename %s", tmp);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static int join(void)
{
	if (!link_.cfg.join_token)
		return errf(EINVAL, "no --join-token, and no credential in %s from an earlier join",
			    link_.cred_path);
	char host[256];
	const char *name = link_.cfg.name;
	if (!name) {
		if (gethostname(host, sizeof host) < 0)
			return errf_sys("gethostname");
		host[sizeof host - 1] = 0;
		name = host;
	}
	json_t *b = capacity();
	json_object_set_new(b, "token", json_string(link_.cfg.join_token));
	json_object_set_new(b, "name", json_string(name));
	json_object_set_new(b, "url", json_string(link_.cfg.advertise));
	long status = 0;
	json_t *a;
	int rc = post("/v1/cluster/join", NULL, b, &status, &a);
	if (rc == 0 && status != 201)
		rc = errf(status == 401 ? EACCES : EIO, "joining %s: HTTP %ld: %s", link_.cfg.api_url, status,
			  answer_message(a));
	const char *cred = json_string_value(json_object_get(a, "credential"));
	const char *id = json_string_value(json_object_get(a, "host_id"));
	const char *key = json_string_value(json_object_get(a, "api_key"));
	if (rc == 0 && (!cred || !id || !key || strlen(cred) >= sizeof link_.credential || strlen(id) >= ID_MAX ||
			strlen(key) >= sizeof link_.api_key))
		rc = errf(EPROTO, "joining %s: the answer has no credential", link_.cfg.api_url);
	if (rc == 0) {
		snprintf(link_.api_key, sizeof link_.api_key, "%s", key);
		snprintf(link_.credential, sizeof link_.credential, "%s", cred);
		snprintf(link_.host_id, sizeof link_.host_id, "%s", id);
		rc = save_credential();
	}
	json_decref(a);
	if (rc == 0)
		log_info("cluster: joined %s as %s (%s)", link_.cfg.api_url, name, link_.host_id);
	return rc;
}

/* Reconciliation (docs/cluster.md): the sandboxes this host runs that
 * its API does not list as this host's, ready for longer than the grace
 * (the API records a create as soon as the host answers it), are
 * deleted: deleted through the API while this host was away, or made for
 * an API that died before it recorded them. The grace is
 * link_.cfg.orphan_grace_ms (--orphan-grace). */

struct strays {
	const json_t *keep;		/* {id: true} */
	int64_t now;
	char (*ids)[ID_MAX * 2 + 2];	/* "workspace id" */
	int n, cap;
};

static int find_stray(void *ctx, const struct sbx_row *r)
{
	struct strays *s = ctx;
	if (json_object_get(s->keep, r->id))
		return 0;
	if (r->created_ms + (int64_t)r->ready_ms + link_.cfg.orphan_grace_ms > s->now || r->state == SBX_CREATING)
		return 0;
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 16;
		void *p = realloc(s->ids, (size_t)cap * sizeof *s->ids);
		if (!p)
			return -ENOMEM;
		s->ids = p, s->cap = cap;
	}
	snprintf(s->ids[s->n++], sizeof s->ids[0], "%s %s", r->workspace, r->id);
	return 0;
}

static void reconcile(const json_t *list)
{
	json_t *keep = json_object();
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e)
		if (json_is_string(e))
			json_object_set_new(keep, json_string_value(e), json_true());
	struct strays s = { keep, wall_ms(), NULL, 0, 0 };
	if (keep && link_.cfg.hostif && hostif_each(link_.cfg.hostif, NULL, find_stray, &s) == 0) {
		for (int k = 0; k < s.n; k++) {
			char *id = strchr(s.ids[k], ' ');
			*id++ = 0;
			int rc = hostif_delete(link_.cfg.hostif, s.ids[k], id);
			if (rc == 0)
				log_warn("cluster: sandbox %s is not the cluster's (deleted while this host was away, "
					 "or its API died creating it): deleted", id);
			else if (rc != -ENOENT)
				log_warn("cluster: sandbox %s is not the cluster's; deleting it: %s", id, errmsg());
		}
	}
	free(s.ids);
	json_decref(keep);
}

/* Records (docs/cluster.md "Records"): what this host's store saved
 * since the last heartbeat the API took, less a margin for saves that
 * were under way then (the API keeps them idempotently). */
#define RECORDS_SLACK_MS 5000
#define RECORDS_PER_BEAT 600	/* about 700 KiB: under the API's JSON limit */
#define HOUR_MS 3600000

struct records {
	json_t *sandboxes, *snapshots, *usage, *notices;
	int n;
};

static int rec_sandbox(void *ctx, struct sbx_row *r)
{
	struct records *rc = ctx;
	if (rc->n++ < RECORDS_PER_BEAT)
		json_array_append_new(rc->sandboxes, wire_row(r));
	sbx_row_clear(r);
	return 0;
}

static int rec_snapshot(void *ctx, struct snap_row *r)
{
	struct records *rc = ctx;
	if (rc->n++ < RECORDS_PER_BEAT)
		json_array_append_new(rc->snapshots, wire_snap(r));
	snap_row_clear(r);
	return 0;
}

static int rec_usage(void *ctx, const struct usage_hour *u)
{
	struct records *rc = ctx;
	if (rc->n++ < RECORDS_PER_BEAT)
		json_array_append_new(rc->usage, wire_usage(u));
	return 0;
}

static int rec_notice(void *ctx, const struct notice_row *n)
{
	struct records *rc = ctx;
	if (rc->n++ < RECORDS_PER_BEAT)
		json_array_append_new(rc->notices, wire_notice(n));
	return 0;
}

/* TTL warnings (docs/cluster.md "Events"): heard from the host's events,
 * where a callback may only copy and return, so queued here; the next
 * beat keeps them in this host's store, from which they go with the
 * records (and again, should that beat's records not reach the API). */
#define NOTICES_QUEUED 64

static struct {
	pthread_mutex_t lock;
	struct notice_row q[NOTICES_QUEUED];
	int n, dropped;
} notices_ = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void on_host_event(void *ctx, const struct host_event *e)
{
	(void)ctx;
	if (!e->kind || strcmp(e->kind, "ttl_warning") || !e->workspace || !e->workspace[0] || !e->id)
		return;
	pthread_mutex_lock(&notices_.lock);
	if (notices_.n < NOTICES_QUEUED) {
		struct notice_row *n = &notices_.q[notices_.n++];
		memset(n, 0, sizeof *n);
		snprintf(n->sandbox, sizeof n->sandbox, "%s", e->id);
		snprintf(n->workspace, sizeof n->workspace, "%s", e->workspace);
		snprintf(n->kind, sizeof n->kind, "%s", e->kind);
		snprintf(n->state, sizeof n->state, "%s", e->state ? e->state : "");
		snprintf(n->action, sizeof n->action, "%s", e->ttl_action ? e->ttl_action : "delete");
		n->due_ms = e->due_ms;
	} else
		notices_.dropped++;
	pthread_mutex_unlock(&notices_.lock);
}

static void keep_notices(struct store *st)
{
	struct notice_row q[NOTICES_QUEUED];
	pthread_mutex_lock(&notices_.lock);
	int n = notices_.n, dropped = notices_.dropped;
	memcpy(q, notices_.q, (size_t)n * sizeof q[0]);
	notices_.n = notices_.dropped = 0;
	pthread_mutex_unlock(&notices_.lock);
	for (int i = 0; i < n; i++)
		if (store_notice_add(st, &q[i]) < 0)
			log_warn("cluster: keeping a TTL warning of sandbox %s: %s", q[i].sandbox, errmsg());
	if (dropped)
		log_warn("cluster: %d TTL warnings came faster than the heartbeats: not told", dropped);
}

/* The records to send, or NULL; *whole: all of them fit. */
static json_t *records(int64_t since, bool *whole)
{
	struct store *st = link_.cfg.store;
	struct records r = { json_array(), json_array(), json_array(), json_array(), 0 };
	int64_t from = since > RECORDS_SLACK_MS ? since - RECORDS_SLACK_MS : 0;
	keep_notices(st);
	int rc = store_sandbox_each_since(st, from, rec_sandbox, &r);
	rc = rc ?: store_snapshot_each_since(st, from, rec_snapshot, &r);
	rc = rc ?: store_usage_each_since(st, from - from % HOUR_MS - HOUR_MS, rec_usage, &r);
	rc = rc ?: store_notice_each_since(st, from, rec_notice, &r);
	*whole = rc == 0 && r.n <= RECORDS_PER_BEAT;
	json_t *o = rc == 0 ? json_pack("{s:O,s:O,s:O,s:O}", "sandboxes", r.sandboxes, "snapshots", r.snapshots,
					"usage", r.usage, "notices", r.notices)
			    : NULL;
	json_decref(r.sandboxes);
	json_decref(r.snapshots);
	json_decref(r.usage);
	json_decref(r.notices);
	return o;
}

static void beat(void *ctx)
{
	(void)ctx;
	long status = 0;
	json_t *a, *body = capacity();
	int64_t started = wall_ms();
	bool whole = false;
	json_t *rec = link_.api_places && link_.cfg.store ? records(link_.records_since, &whole) : NULL;
	if (body && rec)
		json_object_set_new(body, "records", rec);
	int rc = post("/v1/cluster/heartbeat", link_.credential, body, &status, &a);
	if (rc == 0 && status == 200 && rec && whole)
		link_.records_since = started;
	if (rc < 0)
		log_warn("cluster: heartbeat: %s", errmsg());
	else if (status == 401)
		log_warn("cluster: heartbeat refused by %s: this host's credential is revoked or unknown",
			 link_.cfg.api_url);
	else if (status != 200)
		log_warn("cluster: heartbeat: HTTP %ld: %s", status, answer_message(a));
	else if ((link_.api_places = json_is_array(json_object_get(a, "sandboxes"))))
		reconcile(json_object_get(a, "sandboxes"));
	json_decref(a);
}

int agent_link_start(const struct agent_link_config *cfg)
{
	link_.cfg = *cfg;
	if (link_.cfg.orphan_grace_ms <= 0)
		link_.cfg.orphan_grace_ms = AGENT_ORPHAN_GRACE_MS;
	if (!cfg->api_url || (strncmp(cfg->api_url, "http://", 7) && strncmp(cfg->api_url, "https://", 8)))
		return errf(EINVAL, "--api wants the cluster API's http:// or https:// URL");
	if (!cfg->advertise)
		return errf(EINVAL, "--advertise wants the URL the API reaches this host at");
	snprintf(link_.cred_path, sizeof link_.cred_path, "%s/cluster.json", cfg->data_dir);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = load_credential();
	if (rc == -ENOENT)
		rc = join();
	if (rc < 0)
		return rc;
	if ((rc = host_events_subscribe(on_host_event, NULL)) < 0)
		return rc;
	rc = periodic_start(&link_.beater, "heartbeat", HOST_BEAT_MS, beat, NULL);
	if (rc < 0)
		host_events_unsubscribe(on_host_event, NULL);
	return rc;
}

const char *agent_link_api_key(void)
{
	return link_.api_key;
}

void agent_link_stop(void)
{
	periodic_stop(&link_.beater);
	host_events_unsubscribe(on_host_event, NULL);
}
