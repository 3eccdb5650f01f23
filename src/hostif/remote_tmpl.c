/*
 * remote_tmpl: templates through a cluster's API (docs/cluster.md
 * "Templates"). A workspace's template is built once, on the host
 * placement_builder picks, and copied to every other host:
 *
 *   build    POST /v1/host/templates/{name} on the builder, the context
 *            tar streamed as it came
 *   state    every up host is asked; the build's own (building, or the
 *            latest started) answers, else the newest version in service
 *   log      the builder's, fetched whole on each open (a follower opens
 *            again for what came since)
 *   copy     every TSYNC_MS each replica reads the hosts' heartbeats: a
 *            workspace's template whose newest version some up host
 *            lacks is exported from one that has it (GET .../export, a
 *            tar and its sha256) into a file here and sent to the one
 *            without (PUT .../import?sha256=), which checks the digest,
 *            boots the version's zygote and only then serves it. One
 *            replica copies a version to a host: the one whose claim
 *            the store took (template_copies), a lease it renews while
 *            the copy runs (tclaim.h: one that dies mid-copy holds it
 *            no longer than TCLAIM_MS); a failed copy drops it. So a
 *            finished build reaches the other hosts within a heartbeat
 *            and a copy, and a host that was down or joins later gets
 *            it at its first heartbeat.
 *   delete   recorded in the store first (template_deletions: the name
 *            and the newest version any host had, up or down), then
 *            DELETE on every up host, in turn; a host that refuses (a
 *            sandbox of it there: 409) stops it, the record goes, and
 *            the hosts that had removed it are copied it again. While
 *            the record stands, every replica copies the name nowhere
 *            and removes it from a host that comes back with that
 *            version or an older one; a new build of the name drops it,
 *            and its versions start above every one deleted
 *            (template_versions), which are copied nowhere after.
 *
 * Only a workspace's templates (ops/template.h's w<hex>_ names) are
 * copied: the compiled-in ones and an operator's are each host's own.
 */
#include "hostif/remote_int.h"
#include "hostif/hostif_wire.h"
#include "hostif/placement.h"
#include "hostif/tclaim.h"
#include "host/template.h"
#include "common/err.h"
#include "common/log.h"
#include "common/strbuf.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define TSYNC_MS 2000
#define TSYNC_RETRY_MS 30000		/* a copy that failed is tried again after this */
#define TPUSHED_MS 60000		/* a copy made: not made again before the heartbeat says so */
/* A replica's claim to copy a version to a host (template_copies, and
 * tclaim.h): a lease this long, renewed every third of it while the copy
 * runs, so that another replica takes over from one that died mid-copy
 * within this (and a round), not after the longest a copy may take. */
#define TCLAIM_MS 30000

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/* ops/template.h's name of a workspace's template: w, 10 hex digits, _. */
static bool user_template(const char *name)
{
	return placement_workspace_template(name);
}

static int name_check(const char *name)
{
	if (!template_name_ok(name) || template_def_find(name))
		return errf(EINVAL, "template '%.64s' cannot be built or copied through the cluster", name);
	return 0;
}

/* ---- the hosts ---------------------------------------------------------------------- */

struct hostlist {
	struct host_row *h;
	int n, cap;
	bool active_only;
};

static int add_host(void *ctx, const struct host_row *r)
{
	struct hostlist *l = ctx;
	if (remote_host_down(r) || (l->active_only && strcmp(r->admin, "active")))
		return 0;
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 8;
		struct host_row *h = realloc(l->h, (size_t)cap * sizeof *h);
		if (!h)
			return errf(ENOMEM, "out of memory");
		l->h = h, l->cap = cap;
	}
	l->h[l->n] = *r;
	l->h[l->n].templates = r->templates ? strdup(r->templates) : NULL;
	l->n++;
	return 0;
}

static void hostlist_free(struct hostlist *l)
{
	for (int i = 0; i < l->n; i++)
		host_row_clear(&l->h[i]);
	free(l->h);
	memset(l, 0, sizeof *l);
}

/* Up hosts (not revoked); active_only: those placement may use. */
static int hosts_up(struct remote *rm, bool active_only, struct hostlist *l)
{
	memset(l, 0, sizeof *l);
	l->active_only = active_only;
	int rc = store_host_each(rm->cfg.store, add_host, l);
	if (rc < 0)
		hostlist_free(l);
	return rc;
}

/* The version of template name host h's last heartbeat listed; 0: none. */
static int beat_version(json_t *list, const char *name)
{
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e)
		if (!strcmp(json_string_value(json_object_get(e, "name")) ?: "", name))
			return (int)json_integer_value(json_object_get(e, "version"));
	return 0;
}

/* ---- builds ------------------------------------------------------------------------- */

static int newest_anywhere(struct remote *rm, const char *name, int64_t *version);

/* Of every up host's state of name's builds, the one that speaks for
 * the template: a build running, else the latest build started, else the
 * newest version in service (a host that only took copies). *host that
 * host (its templates NULL). -ENOENT when no up host knows the name. */
static int the_build(struct remote *rm, const char *name, struct tbuild_state *out, struct host_row *host)
{
	struct hostlist l;
	int rc = hosts_up(rm, false, &l);
	if (rc < 0)
		return rc;
	bool found = false;
	int err = 0;
	for (int i = 0; i < l.n; i++) {
		char path[160];
		snprintf(path, sizeof path, "/v1/host/templates/%s", name);
		json_t *a = NULL;
		struct tbuild_state st;
		rc = remote_call(rm, &l.h[i], "GET", path, NULL, CALL_TIMEOUT_S, &a, NULL);
		if (rc == 0)
			rc = wire_tbuild_state_parse(a, &st);
		json_decref(a);
		if (rc < 0) {
			if (rc != -ENOENT && !err)
				err = rc;	/* a host that did not answer: said if nobody does */
			continue;
		}
		bool better = !found;
		if (found) {
			bool b_run = st.known && !strcmp(st.status, "building");
			bool o_run = out->known && !strcmp(out->status, "building");
			if (b_run != o_run)
				better = b_run;
			else if (st.known != out->known)
				better = st.known;
			else if (st.known)
				better = st.started_ms > out->started_ms;
			else
				better = st.current > out->current;
		}
		if (better) {
			*out = st;
			*host = l.h[i];
			host->templates = NULL;
			found = true;
		}
	}
	hostlist_free(&l);
	if (!found)
		return err ? err : errf(ENOENT, "template %s not found", name);
	return 0;
}

int remote_template_build(void *ctx, const struct tbuild_req *req)
{
	struct remote *rm = ctx;
	int rc = name_check(req->name);
	if (rc < 0)
		return rc;
	struct tbuild_state st;
	struct host_row bh;
	if ((rc = the_build(rm, req->name, &st, &bh)) == 0 && st.known && !strcmp(st.status, "building"))
		return errf(EBUSY, "template %s is building (on host %s); wait for that build to end", req->name,
			    bh.name);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	/* Its version is above any the name had in the cluster, deleted or
	 * listed by a host (down ones too): an old copy a host comes back
	 * with is never taken for the new build's version. */
	int64_t floor = 0, listed = 0;
	if ((rc = store_template_version_floor(rm->cfg.store, req->name, &floor)) < 0 ||
	    (rc = newest_anywhere(rm, req->name, &listed)) < 0)
		return rc;
	/* A new build: a deletion of the name no longer holds (else the
	 * copying would remove what it makes). */
	if ((rc = store_template_deleted_clear(rm->cfg.store, req->name)) < 0)
		return rc;
	struct hostlist l;
	if ((rc = hosts_up(rm, true, &l)) < 0)
		return rc;
	int i = placement_builder(l.h, l.n);
	if (i < 0) {
		hostlist_free(&l);
		return i;
	}
	/* The query as the one-box route takes it. */
	CURL *c = curl_easy_init();
	struct strbuf path;
	strbuf_init(&path);
	strbuf_printf(&path, "/v1/host/templates/%s?first_version=%lld", req->name,
		      (long long)(floor > listed ? floor : listed) + 1);
	char sep = '&';
	if (c && req->dockerfile) {
		char *e = curl_easy_escape(c, req->dockerfile, 0);
		strbuf_printf(&path, "%cdockerfile=%s", sep, e ? e : "");
		curl_free(e);
		sep = '&';
	}
	for (int k = 0; c && req->build_args && req->build_args[k]; k++) {
		char *e = curl_easy_escape(c, req->build_args[k], 0);
		strbuf_printf(&path, "%cbuild_arg=%s", sep, e ? e : "");
		curl_free(e);
		sep = '&';
	}
	if (c && req->group && (req->max_templates || req->max_builds)) {
		char *e = curl_easy_escape(c, req->group, 0);
		strbuf_printf(&path, "%cgroup=%s&max_templates=%lld&max_builds=%lld", sep, e ? e : "",
			      (long long)req->max_templates, (long long)req->max_builds);
		curl_free(e);
		sep = '&';
	}
	if (c && req->build_net) {
		char *e = curl_easy_escape(c, req->build_net, 0);
		strbuf_printf(&path, "%cbuild_net=%s", sep, e ? e : "");
		curl_free(e);
		sep = '&';
	}
	if (c && req->disk_mib) {
		strbuf_printf(&path, "%cdisk_mib=%lld", sep, (long long)req->disk_mib);
		sep = '&';
	}
	if (c && (req->vcpus || req->memory_mib)) {
		strbuf_printf(&path, "%cvcpus=%d&memory_mib=%d", sep, req->vcpus, req->memory_mib);
		sep = '&';
	}
	if (c && (req->max_seconds || req->max_root_mib)) {
		strbuf_printf(&path, "%cmax_seconds=%lld&max_root_mib=%lld", sep, (long long)req->max_seconds,
			      (long long)req->max_root_mib);
		sep = '&';
	}
	curl_easy_cleanup(c);
	rc = c && path.data ? remote_call_file(rm, &l.h[i], "POST", path.data, req->tar_fd, -1, SLOW_TIMEOUT_S,
						 NULL, NULL)
			    : errf(ENOMEM, "out of memory");
	if (rc == 0)
		log_info("template %s: building on host %s (placement)", req->name, l.h[i].name);
	strbuf_free(&path);
	hostlist_free(&l);
	return rc;
}

int remote_template_state(void *ctx, const char *name, struct tbuild_state *out)
{
	struct host_row h;
	int rc = name_check(name);
	return rc ?: the_build(ctx, name, out, &h);
}

static int count_down(void *ctx, const struct host_row *r)
{
	if (strcmp(r->admin, "revoked") && remote_host_down(r))
		(*(int *)ctx)++;
	return 0;
}

int remote_template_log_open(void *ctx, const char *name, int *fd, bool *running)
{
	struct remote *rm = ctx;
	struct tbuild_state st;
	struct host_row h;
	int rc = name_check(name);
	if (rc == 0 && (rc = the_build(rm, name, &st, &h)) == -ENOENT) {
		/* Not on the hosts that are up: the builder may be one that
		 * missed a heartbeat (a build's VM can starve its host), and a
		 * follower that took this for the build's end would stop
		 * mid-build. Said as the host being away, which it asks again. */
		char why[300];
		snprintf(why, sizeof why, "%s", errmsg());
		int down = 0;
		if (store_host_each(rm->cfg.store, count_down, &down) == 0 && down > 0)
			return errf(EHOSTDOWN, "%s on the hosts that are up (%d host%s down)", why, down,
				    down == 1 ? " is" : "s are");
		return errf(ENOENT, "%s", why);
	}
	if (rc < 0)
		return rc;
	if (!st.known)
		return errf(ENOENT, "template %s has no build log (it was not built through the API)", name);
	int mfd = memfd_create("kiln-tlog", MFD_CLOEXEC);
	if (mfd < 0)
		return errf_sys("memfd_create");
	char path[160];
	snprintf(path, sizeof path, "/v1/host/templates/%s/logs", name);
	struct remote_hdrs hd;
	rc = remote_call_file(rm, &h, "GET", path, -1, mfd, CALL_TIMEOUT_S, NULL, &hd);
	if (rc < 0) {
		close(mfd);
		return rc;
	}
	*fd = mfd;
	*running = hd.running;
	return 0;
}

/* ---- delete ------------------------------------------------------------------------- */

struct newest {
	const char *name;
	int64_t version;
};

static int newest_of_host(void *ctx, const struct host_row *r)
{
	struct newest *n = ctx;
	json_t *beat = r->templates ? json_loads(r->templates, 0, NULL) : NULL;
	int v = beat_version(beat, n->name);
	json_decref(beat);
	if (v > n->version)
		n->version = v;
	return 0;
}

/* The newest version of name that any host's last heartbeat listed, the
 * hosts that are down included (their copy is what must not come back). */
static int newest_anywhere(struct remote *rm, const char *name, int64_t *version)
{
	struct newest n = { name, 0 };
	int rc = store_host_each(rm->cfg.store, newest_of_host, &n);
	*version = n.version;
	return rc < 0 ? rc : 0;
}

/* A copy made before is no reason not to copy a new build later. */
static void forget_pushed_all(struct remote *rm, const char *name)
{
	pthread_mutex_lock(&rm->tlock);
	for (int i = 0; i < (int)(sizeof rm->pushed / sizeof rm->pushed[0]); i++)
		if (!strcmp(rm->pushed[i].name, name))
			rm->pushed[i].name[0] = 0;
	pthread_mutex_unlock(&rm->tlock);
}

int remote_template_delete(void *ctx, const char *name)
{
	struct remote *rm = ctx;
	int rc = name_check(name);
	if (rc < 0)
		return rc;
	struct hostlist l;
	if ((rc = hosts_up(rm, false, &l)) < 0)
		return rc;
	/* First every host is asked whether it may go (a build running, a
	 * sandbox of it): a refusal leaves it everywhere. */
	char path[160];
	snprintf(path, sizeof path, "/v1/host/templates/%s", name);
	for (int i = 0; i < l.n; i++) {
		json_t *a = NULL;
		struct tbuild_state st;
		if (remote_call(rm, &l.h[i], "GET", path, NULL, CALL_TIMEOUT_S, &a, NULL) == 0 &&
		    wire_tbuild_state_parse(a, &st) == 0 && st.known && !strcmp(st.status, "building")) {
			json_decref(a);
			rc = errf(EBUSY, "template %s is building (on host %s); wait for the build to end", name,
				  l.h[i].name);
			hostlist_free(&l);
			return rc;
		}
		json_decref(a);
	}
	/* Recorded before any host deletes, so that no replica's copying
	 * round sends it back to a host that already did. */
	int64_t version = 0;
	rc = newest_anywhere(rm, name, &version);
	if (rc == 0 && version > 0)
		rc = store_template_deleted_set(rm->cfg.store, name, version);
	if (rc < 0) {
		hostlist_free(&l);
		return rc;
	}
	forget_pushed_all(rm, name);
	int removed = 0, first_err = 0;
	for (int i = 0; i < l.n && !first_err; i++) {
		rc = remote_call(rm, &l.h[i], "DELETE", path, NULL, CALL_TIMEOUT_S, NULL, NULL);
		if (rc == 0)
			removed++;
		else if (rc != -ENOENT)
			first_err = rc;	/* a sandbox of it there (409): stop */
	}
	hostlist_free(&l);
	if (first_err) {
		/* Refused: it stays. A host that removed it before the refusal
		 * is copied it again by the next round (tsync). */
		if (version > 0 && store_template_deleted_clear(rm->cfg.store, name) < 0)
			log_warn("template %s: its delete was refused, but its record of deletion stays: %s",
				 name, errmsg());
		return first_err;
	}
	/* Only a host that is down has it: it goes when that host is back. */
	if (removed || version > 0) {
		log_info("template %s: deleted (version %lld and older: removed from any host that comes back "
			 "with it)", name, (long long)version);
		return 0;
	}
	return errf(ENOENT, "template %s not found", name);
}

/* ---- a host's own calls --------------------------------------------------------------- */

int remote_template_export(void *ctx, const char *name, struct hostif_tarchive *out)
{
	(void)ctx, (void)name, (void)out;
	return errf(ENOTSUP, "a cluster's API copies templates between its hosts itself (docs/cluster.md "
			     "\"Templates\")");
}

int remote_template_import(void *ctx, const char *name, int fd, const char *sha256, int *version, int *had)
{
	(void)fd, (void)sha256, (void)version, (void)had;
	return remote_template_export(ctx, name, NULL);
}

/* ---- the list ------------------------------------------------------------------------- */

struct seen {
	hostif_template_fn *fn;
	void *fctx;
	json_t *names;			/* {name: true} told */
};

static int list_host(struct remote *rm, const struct host_row *h, struct seen *s)
{
	json_t *a = NULL;
	int rc = remote_call(rm, h, "GET", "/v1/host/templates", NULL, CALL_TIMEOUT_S, &a, NULL);
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(a, "templates"), i, e) {
		struct hostif_template t;
		if (rc == 0 && wire_template_parse(e, &t) == 0 && !json_object_get(s->names, t.name) &&
		    (t.built || !user_template(t.name))) {
			json_object_set_new(s->names, t.name, json_true());
			rc = s->fn(s->fctx, &t);
		}
	}
	json_decref(a);
	return rc;
}

/* The first up, active host's templates; then those of a workspace that
 * another host's heartbeat lists and the first has not (yet: a copy on
 * its way), from that host. In a settled cluster, one call. */
int remote_templates(void *ctx, hostif_template_fn *fn, void *fctx)
{
	struct remote *rm = ctx;
	struct hostlist l;
	int rc = hosts_up(rm, true, &l);
	if (rc < 0)
		return rc;
	/* No host to ask is not "no templates": a create would answer 404
	 * unknown template (seen when both hosts' heartbeats were late). Nor
	 * is it a guest's error (EHOSTDOWN: 502 guest_error): the cluster
	 * has no room now, 503 no_capacity, as one-box kilnd answers for a
	 * template not built (the SDKs' retries test against a replica of
	 * a cluster with no host, tests/cluster/sdk.sh). */
	if (l.n == 0) {
		hostlist_free(&l);
		return errf(EAGAIN, "no host is up and active to list the templates of (kilnd cluster hosts)");
	}
	struct seen s = { fn, fctx, json_object() };
	if (!s.names) {
		hostlist_free(&l);
		return errf(ENOMEM, "out of memory");
	}
	for (int i = 0; i < l.n && rc == 0; i++) {
		bool more = i == 0;
		json_t *beat = l.h[i].templates ? json_loads(l.h[i].templates, 0, NULL) : NULL;
		size_t k;
		json_t *e;
		json_array_foreach(beat, k, e) {
			const char *n = json_string_value(json_object_get(e, "name"));
			if (n && user_template(n) && !json_object_get(s.names, n))
				more = true;
		}
		json_decref(beat);
		if (more)
			rc = list_host(rm, &l.h[i], &s);
		if (rc > 0)
			break;		/* fn stopped it */
	}
	json_decref(s.names);
	hostlist_free(&l);
	return rc;
}

/* ---- copies ----------------------------------------------------------------------------- */

/* Was version v of name sent to host lately (or did that fail lately)? */
static bool pushed_lately(struct remote *rm, const char *name, const char *host, int v)
{
	bool yes = false;
	int64_t now = now_ms();
	pthread_mutex_lock(&rm->tlock);
	for (int i = 0; i < (int)(sizeof rm->pushed / sizeof rm->pushed[0]); i++) {
		typeof(rm->pushed[0]) *p = &rm->pushed[i];
		if (p->name[0] && !strcmp(p->name, name) && !strcmp(p->host, host) && p->version == v &&
		    now - p->at_ms < (p->failed ? TSYNC_RETRY_MS : TPUSHED_MS))
			yes = true;
	}
	pthread_mutex_unlock(&rm->tlock);
	return yes;
}

static void forget_pushed(struct remote *rm, const char *name, const char *host)
{
	pthread_mutex_lock(&rm->tlock);
	for (int i = 0; i < (int)(sizeof rm->pushed / sizeof rm->pushed[0]); i++)
		if (!strcmp(rm->pushed[i].name, name) && !strcmp(rm->pushed[i].host, host) && !rm->pushed[i].failed)
			rm->pushed[i].name[0] = 0;
	pthread_mutex_unlock(&rm->tlock);
}

static void note_pushed(struct remote *rm, const char *name, const char *host, int v, bool failed)
{
	pthread_mutex_lock(&rm->tlock);
	int slot = 0;
	for (int i = 0; i < (int)(sizeof rm->pushed / sizeof rm->pushed[0]); i++)
		if (rm->pushed[i].at_ms < rm->pushed[slot].at_ms)
			slot = i;
	typeof(rm->pushed[0]) *p = &rm->pushed[slot];
	snprintf(p->name, sizeof p->name, "%.31s", name);
	snprintf(p->host, sizeof p->host, "%s", host);
	p->version = v;
	p->at_ms = now_ms();
	p->failed = failed;
	pthread_mutex_unlock(&rm->tlock);
}

/* An unlinked file for an export in transit. */
static int transit_file(void)
{
	int fd = open("/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		fd = memfd_create("kiln-tship", MFD_CLOEXEC);
	return fd < 0 ? errf_sys("a file for a template's copy") : fd;
}

/* Copy name's version v from host src to host dst; *tfd the export, made
 * at the first copy of a round (kept for the next host). */
static int copy_one(struct remote *rm, const char *name, int v, const struct host_row *src,
		    const struct host_row *dst, int *tfd, struct remote_hdrs *ex)
{
	char path[256];
	int64_t t0 = mono_ns();
	if (*tfd < 0) {
		int fd = transit_file();
		if (fd < 0)
			return fd;
		snprintf(path, sizeof path, "/v1/host/templates/%.31s/export", name);
		int rc = remote_call_file(rm, src, "GET", path, -1, fd, SLOW_TIMEOUT_S, NULL, ex);
		if (rc == 0 && (ex->version != v || strlen(ex->sha256) != 64))
			rc = errf(EPROTO, "host %s exported template %s v%d (sha256 '%s'), not v%d", src->name, name,
				  ex->version, ex->sha256, v);
		if (rc < 0) {
			close(fd);
			return rc;
		}
		*tfd = fd;
	}
	snprintf(path, sizeof path, "/v1/host/templates/%.31s/import?sha256=%.64s", name, ex->sha256);
	json_t *a = NULL;
	int rc = remote_call_file(rm, dst, "PUT", path, *tfd, -1, SLOW_TIMEOUT_S, &a, NULL);
	json_decref(a);
	if (rc < 0)
		return rc;
	int64_t ns = mono_ns() - t0;
	pthread_mutex_lock(&rm->tlock);
	rm->tships++;
	rm->tship_bytes += (int64_t)ex->bytes;
	rm->tship_ns += ns;
	pthread_mutex_unlock(&rm->tlock);
	log_info("template %s v%d copied from host %s to host %s: %llu bytes, %.1f s", name, v, src->name, dst->name,
		 (unsigned long long)ex->bytes, ns / 1e9);
	return 0;
}

struct want {
	char name[32];
	int version, src;
	int64_t deleted;	/* the version it was deleted at; -1: not deleted */
	int64_t floor;		/* store_template_version_floor */
};

struct wants {
	struct want *w;
	int n;
};

/* store_template_marks_each: the deletion and floor of a template a
 * host has. */
static int note_marks(void *ctx, const char *name, int64_t deleted, int64_t floor)
{
	struct wants *ws = ctx;
	for (int j = 0; j < ws->n; j++)
		if (!strcmp(ws->w[j].name, name))
			ws->w[j].deleted = deleted, ws->w[j].floor = floor;
	return 0;
}

static void tsync(void *ctx)
{
	struct remote *rm = ctx;
	struct hostlist l;
	if (hosts_up(rm, false, &l) < 0)
		return;
	json_t **beats = calloc((size_t)l.n + 1, sizeof *beats);
	struct want w[64];
	int nw = 0;
	for (int i = 0; beats && i < l.n; i++) {
		beats[i] = l.h[i].templates ? json_loads(l.h[i].templates, 0, NULL) : NULL;
		size_t k;
		json_t *e;
		json_array_foreach(beats[i], k, e) {
			const char *n = json_string_value(json_object_get(e, "name"));
			int v = (int)json_integer_value(json_object_get(e, "version"));
			if (!n || !user_template(n) || !template_name_ok(n) || v <= 0)
				continue;
			int j = 0;
			while (j < nw && strcmp(w[j].name, n))
				j++;
			if (j == nw) {
				if (nw == (int)(sizeof w / sizeof w[0]))
					continue;
				snprintf(w[nw].name, sizeof w[nw].name, "%s", n);
				w[nw].version = 0;
				w[nw].deleted = -1;
				w[nw].floor = 0;
				nw++;
			}
			if (v > w[j].version)
				w[j].version = v, w[j].src = i;
		}
	}
	/* The deletions and version floors, read once a round: not known
	 * whether one was deleted, nothing is copied. */
	struct wants ws = { w, nw };
	if (nw && store_template_marks_each(rm->cfg.store, note_marks, &ws) < 0)
		nw = 0;
	for (int j = 0; beats && j < nw; j++) {
		int64_t dv = w[j].deleted;
		if (dv >= 0 && w[j].version <= dv) {
			/* Deleted (through any replica) while a host was
			 * away: it goes there too. */
			char path[160];
			snprintf(path, sizeof path, "/v1/host/templates/%.31s", w[j].name);
			for (int i = 0; i < l.n; i++) {
				int hv = beat_version(beats[i], w[j].name);
				if (hv > 0 && hv <= dv &&
				    remote_call(rm, &l.h[i], "DELETE", path, NULL, CALL_TIMEOUT_S, NULL, NULL) == 0)
					log_info("template %s v%d: removed from host %s, which had it after its "
						 "delete", w[j].name, hv, l.h[i].name);
			}
			continue;
		}
		/* A version from before the name was deleted, on a host that
		 * was away, while the name is built again: copied nowhere (the
		 * new build's is, when it is in; placement takes neither). */
		if (w[j].version <= w[j].floor)
			continue;
		int tfd = -1;
		struct remote_hdrs ex;
		memset(&ex, 0, sizeof ex);
		for (int i = 0; i < l.n; i++) {
			if (i == w[j].src)
				continue;
			if (beat_version(beats[i], w[j].name) >= w[j].version) {
				/* Its heartbeat says it has it: should it lose it,
				 * it is sent again. */
				forget_pushed(rm, w[j].name, l.h[i].id);
				continue;
			}
			struct tclaim claim;
			if (pushed_lately(rm, w[j].name, l.h[i].id, w[j].version) ||
			    tclaim_take(&claim, rm->cfg.store, w[j].name, w[j].version, l.h[i].id, rm->replica,
					TCLAIM_MS) <= 0)
				continue;	/* another replica copies it (or the store did not say) */
			int rc = copy_one(rm, w[j].name, w[j].version, &l.h[w[j].src], &l.h[i], &tfd, &ex);
			if (rc < 0)
				log_warn("template %s v%d: copying it from host %s to host %s failed: %s", w[j].name,
					 w[j].version, l.h[w[j].src].name, l.h[i].name, errmsg());
			/* Failed: released, for any replica to try; made: held
			 * until the host's heartbeat lists it, not longer. */
			tclaim_end(&claim, rc < 0 ? 0 : TPUSHED_MS);
			note_pushed(rm, w[j].name, l.h[i].id, w[j].version, rc < 0);
		}
		if (tfd >= 0)
			close(tfd);
	}
	for (int i = 0; beats && i < l.n; i++)
		json_decref(beats[i]);
	free(beats);
	hostlist_free(&l);
}

int remote_tsync_start(struct remote *rm)
{
	int rc = periodic_start(&rm->tsync, "template copies", TSYNC_MS, tsync, rm);
	if (rc == 0)
		rm->tsyncing = true;
	return rc;
}

void remote_tsync_stop(struct remote *rm)
{
	if (rm->tsyncing)
		periodic_stop(&rm->tsync);
	rm->tsyncing = false;
}

void remote_tmpl_metrics(struct remote *rm, struct strbuf *b)
{
	pthread_mutex_lock(&rm->tlock);
	int64_t n = rm->tships, bytes = rm->tship_bytes, ns = rm->tship_ns;
	pthread_mutex_unlock(&rm->tlock);
	strbuf_printf(b, "# HELP kiln_cluster_template_copies_total Template versions this API copied to a host.\n"
			 "# TYPE kiln_cluster_template_copies_total counter\nkiln_cluster_template_copies_total %lld\n"
			 "# HELP kiln_cluster_template_copy_bytes_total Their archives' bytes.\n"
			 "# TYPE kiln_cluster_template_copy_bytes_total counter\n"
			 "kiln_cluster_template_copy_bytes_total %lld\n"
			 "# HELP kiln_cluster_template_copy_seconds_total Time they took (export, transfer, import).\n"
			 "# TYPE kiln_cluster_template_copy_seconds_total counter\n"
			 "kiln_cluster_template_copy_seconds_total %.3f\n",
		       (long long)n, (long long)bytes, ns / 1e9);
}
