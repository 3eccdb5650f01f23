/*
 * hostif_remote: hostif.h over HTTP to a cluster's host agents
 * (hostif_remote.h). Each call looks up where the sandbox lives (the
 * placements table), then makes one JSON call to that host (libcurl) or,
 * for guest access, one relay connection; the answers are the host's own
 * records and errors (hostif_wire.h), so front ends cannot tell this from
 * the local implementation except by what a down host cannot do.
 */
#include "hostif/hostif_remote.h"
#include "hostif/remote_int.h"
#include "hostif/hostif_wire.h"
#include "hostif/placement.h"
#include "hostif/relay_link.h"
#include "common/log.h"
#include "common/metrics.h"
#include "host/guest_conn.h"
#include "store/cluster.h"
#include "store/sbx_state.h"
#include "common/err.h"
#include "common/randid.h"
#include "common/periodic.h"
#include "common/strbuf.h"
#include "host/host_events.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX (16 << 20)		/* a list of many sandboxes */
#define CONNECT_TIMEOUT_S 5
#define RELAY_WAIT_MS 120000		/* a relay's enter may wake a hibernated sandbox */
#define RELAY_HEAD_MAX 8192
/* A relayed guest connection: each wait for the guest's answer (or for
 * room to send it a request) through the host; a host that stalls past
 * it ends the request with an error, never holds it. Streams (exec,
 * PTY, follow, watch) wait on their own terms. */
#define RELAY_CALL_MS 120000
/* Leaving a connection that holds a process: the wait for the host to
 * say its agent has closed the other end (guest_close_wait). */
#define RELAY_LEAVE_MS 10000
#define LOG_MAX (64 << 20)
/* A sandbox's delete that did not reach its host: tries more, and how
 * soon the first must have failed for them (r_delete). */
#define DELETE_RETRIES 2
#define DELETE_RETRY_WITHIN_MS 10000


static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/* ---- calls ------------------------------------------------------------------------- */

bool remote_host_down(const struct host_row *h)
{
	return strcmp(h->health, "up") != 0 || !strcmp(h->admin, "revoked");
}

int remote_down_error(const struct host_row *h)
{
	return errf(EHOSTDOWN, "its host %s is %s%s%s", h->name, !strcmp(h->admin, "revoked") ? "revoked" : "down",
		    h->reason[0] ? ": " : "", h->reason);
}

struct answer {
	char *data;
	size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
	struct answer *a = ctx;
	size_t add = size * n;
	if (a->len + add > ANSWER_MAX)
		return 0;
	char *d = realloc(a->data, a->len + add + 1);
	if (!d)
		return 0;
	memcpy(d + a->len, p, add);
	a->len += add;
	d[a->len] = 0;
	a->data = d;
	return add;
}

/* What every call to host h sets on c: its URL (h->url + path), the
 * API's key and the headers given (NULL-ended), the method, the time
 * limits, the protocols and the CA. The header list, which the caller
 * frees after the transfer (curl_slist_free_all), or NULL: no memory. */
static struct curl_slist *call_setup(struct remote *rm, CURL *c, const struct host_row *h, const char *method,
				     const char *path, const char *const *headers, long timeout_s,
				     char cerr[CURL_ERROR_SIZE])
{
	char url[1024], auth[128];
	snprintf(url, sizeof url, "%s%s", h->url, path);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", h->api_key);
	struct curl_slist *hd = curl_slist_append(NULL, auth);
	for (int i = 0; hd && headers[i]; i++) {
		struct curl_slist *more = curl_slist_append(hd, headers[i]);
		if (!more) {
			curl_slist_free_all(hd);
			return NULL;
		}
		hd = more;
	}
	if (!hd)
		return NULL;
	cerr[0] = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);	/* curl keeps copies of strings */
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (rm->cfg.ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, rm->cfg.ca_file);
	return hd;
}

int remote_call(struct remote *rm, const struct host_row *h, const char *method, const char *path,
		json_t *body, long timeout_s, json_t **out, struct ws_caps_report *report)
{
	if (out)
		*out = NULL;
	if (remote_host_down(h)) {
		json_decref(body);
		return remote_down_error(h);
	}
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	CURL *c = curl_easy_init();
	if ((body && !text) || !c) {
		free(text);
		curl_easy_cleanup(c);
		return errf(ENOMEM, "out of memory");
	}
	static const char *const json_type[] = { "Content-Type: application/json", NULL };
	char cerr[CURL_ERROR_SIZE];
	struct curl_slist *hd = call_setup(rm, c, h, method, path, json_type, timeout_s, cerr);
	if (!hd) {
		free(text);
		curl_easy_cleanup(c);
		return errf(ENOMEM, "out of memory");
	}
	struct answer a = { 0 };
	if (text)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
	CURLcode cc = curl_easy_perform(c);
	long status = 0;
	int rc = 0;
	if (cc != CURLE_OK)
		rc = errf(EHOSTDOWN, "host %s (%s) did not answer: %s", h->name, h->url,
			  cerr[0] ? cerr : curl_easy_strerror(cc));
	else
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	json_t *j = rc == 0 && a.data && a.len ? json_loads(a.data, 0, NULL) : NULL;
	if (rc == 0 && (status < 200 || status > 299)) {
		rc = j ? wire_error_parse(j, report)
		       : errf(EPROTO, "host %s answered HTTP %ld to %s %s", h->name, status, method, path);
		if (rc == -EPROTO && status == 401)
			rc = errf(EACCES, "host %s refused the API's key (rejoin it)", h->name);
		json_decref(j);
		j = NULL;
	}
	if (out)
		*out = j;
	else
		json_decref(j);
	free(a.data);
	free(text);
	curl_slist_free_all(hd);
	curl_easy_cleanup(c);
	return rc;
}

/* remote_call_file's transfer: the body read from in_fd, a 2xx answer's
 * written to out_fd, any other's kept (the host's JSON error). */
struct xfer {
	CURL *c;
	int in_fd, out_fd;
	off_t in_off;
	bool write_err;
	struct answer a;
	struct remote_hdrs *hd;
};

static size_t xfer_read(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	ssize_t got = pread(x->in_fd, p, size * n, x->in_off);
	if (got < 0)
		return CURL_READFUNC_ABORT;
	x->in_off += got;
	return (size_t)got;
}

static size_t xfer_write(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	long status = 0;
	curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &status);
	if (x->out_fd < 0 || status < 200 || status > 299)
		return on_data(p, size, n, &x->a);
	size_t len = size * n, done = 0;
	while (done < len) {
		ssize_t w = write(x->out_fd, p + done, len - done);
		if (w <= 0) {
			x->write_err = true;
			return 0;
		}
		done += (size_t)w;
	}
	if (x->hd)
		x->hd->bytes += len;
	return len;
}

static size_t xfer_header(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	size_t len = size * n;
	char line[256];
	if (!x->hd || len >= sizeof line)
		return len;
	memcpy(line, p, len);
	line[len] = 0;
	line[strcspn(line, "\r\n")] = 0;
	if (!strncasecmp(line, "X-Kiln-Sha256: ", 15))
		snprintf(x->hd->sha256, sizeof x->hd->sha256, "%.64s", line + 15);
	else if (!strncasecmp(line, "X-Kiln-Version: ", 16))
		x->hd->version = atoi(line + 16);
	else if (!strncasecmp(line, "X-Kiln-Running: ", 16))
		x->hd->running = line[16] == '1';
	return len;
}

int remote_call_file(struct remote *rm, const struct host_row *h, const char *method, const char *path,
		     int in_fd, int out_fd, long timeout_s, json_t **out, struct remote_hdrs *hd)
{
	if (out)
		*out = NULL;
	if (hd)
		memset(hd, 0, sizeof *hd);
	if (remote_host_down(h))
		return remote_down_error(h);
	struct stat st;
	if (in_fd >= 0 && fstat(in_fd, &st) < 0)
		return errf_sys("fstat");
	struct xfer x = { .c = curl_easy_init(), .in_fd = in_fd, .out_fd = out_fd, .hd = hd };
	if (!x.c)
		return errf(ENOMEM, "out of memory");
	/* No "Expect: 100-continue" wait before an upload. */
	static const char *const upload[] = { "Expect:", "Content-Type: application/x-tar", NULL };
	static const char *const download[] = { "Expect:", NULL };
	char cerr[CURL_ERROR_SIZE];
	struct curl_slist *hdl = call_setup(rm, x.c, h, method, path, in_fd >= 0 ? upload : download, timeout_s, cerr);
	if (!hdl) {
		curl_easy_cleanup(x.c);
		return errf(ENOMEM, "out of memory");
	}
	if (in_fd >= 0) {
		curl_easy_setopt(x.c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(x.c, CURLOPT_READFUNCTION, xfer_read);
		curl_easy_setopt(x.c, CURLOPT_READDATA, &x);
		curl_easy_setopt(x.c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
	}
	curl_easy_setopt(x.c, CURLOPT_WRITEFUNCTION, xfer_write);
	curl_easy_setopt(x.c, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(x.c, CURLOPT_HEADERFUNCTION, xfer_header);
	curl_easy_setopt(x.c, CURLOPT_HEADERDATA, &x);
	CURLcode cc = curl_easy_perform(x.c);
	long status = 0;
	int rc = 0;
	if (x.write_err)
		rc = errf(EIO, "writing what host %s sent to %s %s failed", h->name, method, path);
	else if (cc != CURLE_OK)
		rc = errf(EHOSTDOWN, "host %s (%s) did not answer: %s", h->name, h->url,
			  cerr[0] ? cerr : curl_easy_strerror(cc));
	else
		curl_easy_getinfo(x.c, CURLINFO_RESPONSE_CODE, &status);
	json_t *j = rc == 0 && x.a.data && x.a.len ? json_loads(x.a.data, 0, NULL) : NULL;
	if (rc == 0 && (status < 200 || status > 299)) {
		rc = j ? wire_error_parse(j, NULL)
		       : errf(EPROTO, "host %s answered HTTP %ld to %s %s", h->name, status, method, path);
		json_decref(j);
		j = NULL;
	}
	if (out)
		*out = j;
	else
		json_decref(j);
	free(x.a.data);
	curl_slist_free_all(hdl);
	curl_easy_cleanup(x.c);
	return rc;
}

static int answer_row(int rc, json_t *a, struct sbx_row *out)
{
	if (rc == 0 && out)
		rc = wire_row_parse(a, out);
	json_decref(a);
	return rc;
}

/* Ids go into the paths of calls to hosts: letters, digits and '_' only
 * (what kiln makes), whatever the front end checked. */
static bool plain_id(const char *s)
{
	if (!s || !*s || strlen(s) >= ID_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

/* Where the workspace's sandbox (or snapshot) id lives. */
static int where(struct remote *rm, const char *ws, const char *id, struct host_row *h)
{
	bool ended = false;
	memset(h, 0, sizeof *h);
	if (!plain_id(ws) || !plain_id(id))
		return errf(ENOENT, "sandbox %.64s not found", id ? id : "");
	int rc = store_placement_host(rm->cfg.store, ws, id, h, &ended);
	if (rc == -ENOENT || (rc == 0 && ended)) {
		host_row_clear(h);
		return errf(ENOENT, "sandbox %s not found", id);
	}
	return rc;
}

/* What the API answers for a sandbox on a host that is down. */
static void lost_row(const char *ws, const char *id, const struct host_row *h, struct sbx_row *r)
{
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", id);
	snprintf(r->workspace, sizeof r->workspace, "%s", ws);
	r->state = SBX_LOST;
	remote_down_error(h);
	snprintf(r->error, sizeof r->error, "%s", errmsg());
}

static int sbx_path(char *p, size_t n, const char *ws, const char *id, const char *tail);

/* What this replica did to a sandbox, told to its own listeners at once
 * (state NULL: the record's), as one-box kilnd tells every move: the
 * look at the database each second (events_poll) misses the states that
 * last less than it (creating, deleting, a pause resumed at once), and
 * the SDKs' event tests want each (created, ready, resumed, deleting:
 * tests/cluster/sdk.sh). The event log tells a state it has already
 * seen once only, so the look finding the same record later adds none.
 * The other replicas hear of it from the database, as before. */
static void tell(const struct sbx_row *r, const char *state)
{
	struct host_event e = { r->workspace, r->id, state ? state : sbx_state_name(r->state), r->cpu_seconds,
				r->rss_bytes, r->parent, r->error, r->ended, NULL, 0, NULL };
	host_events_emit(&e);
}


/* A call about the sandbox on host h ended in rc. An ENOENT ends its
 * placement (the API sees it ended) only when the host says the sandbox
 * itself is gone (a GET of it: 404, or its record deleted): a call's
 * ENOENT may be about something else (a volume not attached, a process,
 * a snapshot), and ending the placement then lost a running sandbox
 * from the API: every later call "not found" while it ran on (the
 * Python SDK's volumes test against a cluster, tests/cluster/sdk.sh).
 * rc and its message are kept. */
static int gone(struct remote *rm, const struct host_row *h, const char *ws, const char *id, int rc)
{
	if (rc != -ENOENT)
		return rc;
	char why[512], path[256];
	snprintf(why, sizeof why, "%s", errmsg());
	sbx_path(path, sizeof path, ws, id, NULL);
	json_t *a = NULL;
	struct sbx_row row;
	int st = remote_call(rm, h, "GET", path, NULL, CALL_TIMEOUT_S, &a, NULL);
	st = answer_row(st, a, &row);
	if (st == -ENOENT || (st == 0 && row.state == SBX_DELETED))
		store_placement_end(rm->cfg.store, id);
	if (st == 0)
		sbx_row_clear(&row);
	return errf(ENOENT, "%s", why);
}

/* ---- sandboxes -------------------------------------------------------------------- */

struct choose {
	struct placement_rule rule;
	struct placement p;		/* the chosen template's size lands here */
	int64_t copying;		/* -EAGAIN: the version on its way to a host with room */
};

static int choose_host(void *ctx, const struct host_load *hosts, int n)
{
	struct choose *c = ctx;
	int rc = placement_choose(&c->rule, hosts, n, &c->p.vcpus, &c->p.memory_mib);
	c->copying = rc == -EAGAIN ? placement_copy_pending(&c->rule, hosts, n) : 0;
	return rc;
}

/* When a create refused for a copy on its way may try again: what this
 * replica's copies took on average (export, transfer, import and the
 * version's zygote booted), else COPY_RETRY_MS; at least a copying round. */
#define COPY_RETRY_MS 10000
static int64_t copy_retry_ms(struct remote *rm)
{
	pthread_mutex_lock(&rm->tlock);
	int64_t ms = rm->tships ? rm->tship_ns / rm->tships / 1000000 : COPY_RETRY_MS;
	pthread_mutex_unlock(&rm->tlock);
	return ms < 2000 ? 2000 : ms > 120000 ? 120000 : ms;
}

/* The workspace's caps as the cluster counts them (store_place): over
 * every host, where each host counts only its own. */
static const struct place_caps *caps_of(const struct ws_caps *c, struct place_caps *pc)
{
	if (!c)
		return NULL;
	*pc = (struct place_caps){ c->running, c->creates, c->window_ms };
	return pc;
}

/* What the cluster's count says, as the host's report would have. */
static void report_of(const struct place_count *pc, struct ws_caps_report *r)
{
	if (!r)
		return;
	snprintf(r->limit, sizeof r->limit, "%s", pc->limit);
	r->value = pc->value;
	r->retry_after_ms = pc->retry_after_ms;
	r->creates_used = (int)pc->creates_used;
	r->reset_ms = pc->reset_ms;
}

static void caps_remember(struct remote *rm, const char *ws, const struct ws_caps *c)
{
	pthread_mutex_lock(&rm->caps_lock);
	int slot = 0;
	for (int i = 0; i < (int)(sizeof rm->caps / sizeof rm->caps[0]); i++) {
		if (!strcmp(rm->caps[i].ws, ws)) {
			slot = i;
			break;
		}
		if (rm->caps[i].seen_ms < rm->caps[slot].seen_ms)
			slot = i;
	}
	snprintf(rm->caps[slot].ws, sizeof rm->caps[slot].ws, "%s", ws);
	rm->caps[slot].running = c ? c->running : 0;
	rm->caps[slot].seen_ms = wall_ms();
	pthread_mutex_unlock(&rm->caps_lock);
}

static int64_t caps_running(struct remote *rm, const char *ws)
{
	int64_t cap = 0;
	pthread_mutex_lock(&rm->caps_lock);
	for (int i = 0; i < (int)(sizeof rm->caps / sizeof rm->caps[0]); i++)
		if (!strcmp(rm->caps[i].ws, ws))
			cap = rm->caps[i].running;
	pthread_mutex_unlock(&rm->caps_lock);
	return cap;
}

/* Before anything that may wake sandbox id on host h (a wake; a relay
 * into a sandbox the records say is hibernated): hold it as running
 * against the workspace's cap over every host. 1: held (store_wake_done
 * when it is over), 0: nothing to hold, or -EDQUOT. asleep (NULL: not
 * asked) gets whether the record says hibernated or paused (a relay
 * into it starts its guest again: woken or resumed), read once here
 * with or without a cap; a paused one counts as running already, so
 * it is not held. */
static int wake_hold(struct remote *rm, const char *ws, const char *id, const struct host_row *h, bool *asleep)
{
	int64_t cap = caps_running(rm, ws);
	bool was_asleep = false, was_paused = false;
	if (cap || asleep) {
		struct sbx_row row;
		/* No record yet: not asleep, its host counts it. */
		if (store_sandbox_load(rm->cfg.store, id, &row) == 0) {
			was_asleep = row.state == SBX_HIBERNATED;
			was_paused = row.state == SBX_PAUSED;
			sbx_row_clear(&row);
		}
	}
	if (asleep)
		*asleep = was_asleep || was_paused;
	if (!cap || !was_asleep)
		return 0;
	struct place_caps pc = { .running = cap };
	struct place_count count = { 0 };
	struct placement p = { .workspace = ws, .kind = "wake", .n = 1, .host_id = h->id, .caps = &pc,
			       .count = &count, .wake_of = id };
	char res[1][ID_MAX];
	struct host_row none;
	int rc = store_place(rm->cfg.store, &p, NULL, NULL, res, &none);
	if (rc == -EDQUOT)
		return errf(EDQUOT, "waking it would make %lld sandboxes of this workspace running or starting; "
			    "its limit is %lld (delete or hibernate one first)", (long long)count.running + 1,
			    (long long)cap);
	return rc < 0 ? rc : 1;
}

/* Reserve n on a host (chosen by placement, or h_fixed's: a fork, a
 * create from a snapshot) and count the workspace's caps; *h the host. */
static int reserve(struct remote *rm, struct choose *c, const struct ws_caps *caps,
		   struct ws_caps_report *report, const struct host_row *h_fixed, int n,
		   char (*res)[ID_MAX], struct host_row *h)
{
	struct place_caps pcaps;
	struct place_count count = { 0 };
	caps_remember(rm, c->p.workspace, caps);
	c->p.n = n;
	c->p.caps = caps_of(caps, &pcaps);
	c->p.count = &count;
	c->p.host_id = h_fixed ? h_fixed->id : NULL;
	int64_t t0 = mono_ns();
	int rc = store_place(rm->cfg.store, &c->p, choose_host, c, res, h);
	if (!h_fixed && rc == 0) {
		__atomic_add_fetch(&rm->place_ns, mono_ns() - t0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&rm->placed, 1, __ATOMIC_RELAXED);
	}
	if (caps)
		report_of(&count, report);
	return rc;
}

/* Where volume id of ws lives: -ENOENT "volume ID not found". */
static int vol_where(struct remote *rm, const char *ws, const char *id, struct host_row *h)
{
	int rc = where(rm, ws, id, h);
	return rc == -ENOENT ? errf(ENOENT, "volume %s not found", id) : rc;
}

/* A create's volumes live on one host (their files are there): the
 * sandbox goes there, as a fork goes where its parent is (no room check
 * of the cluster's; the host refuses past its own). *h that host. */
static int volumes_host(struct remote *rm, const struct create_req *req, struct host_row *h)
{
	memset(h, 0, sizeof *h);
	if (req->snapshot)
		return errf(EINVAL, "volumes cannot be attached to a sandbox made from a snapshot at its create: "
				   "attach them once it runs (POST /v1/sandboxes/{id}/volumes)");
	for (int i = 0; i < req->nvolumes; i++) {
		struct host_row vh;
		int rc = vol_where(rm, req->workspace, req->volumes[i].id, &vh);
		if (rc < 0) {
			host_row_clear(h);
			return rc;
		}
		if (i > 0 && strcmp(vh.id, h->id)) {
			rc = errf(EINVAL, "volumes '%s' and '%s' are on different hosts (%s, %s): a sandbox's volumes "
					  "must share one (docs/cluster.md \"Volumes\")", req->volumes[0].name,
				  req->volumes[i].name, h->name, vh.name);
			host_row_clear(&vh);
			host_row_clear(h);
			return rc;
		}
		host_row_clear(h);
		*h = vh;
	}
	if (remote_host_down(h)) {
		remote_down_error(h);
		int rc = errf(EHOSTDOWN, "volume '%s' is on host %s, which cannot take a sandbox now: %s",
			      req->volumes[0].name, h->name, errmsg());
		host_row_clear(h);
		return rc;
	}
	return 0;
}

/* A create or fork child the host was asked for, timed from the call's
 * start (placement, the host's create, the record): the replica's
 * kiln_sandbox_create_seconds, as one-box kilnd's host times its own. */
static void create_timed(struct remote *rm, int64_t t0, int n, bool ok)
{
	if (!rm->cfg.metrics)
		return;
	double s = (double)(mono_ns() - t0) / 1e9;
	for (int i = 0; i < n; i++)
		metrics_create(rm->cfg.metrics, s, ok);
}

static int r_create(void *ctx, const struct create_req *req, struct sbx_row *out)
{
	struct remote *rm = ctx;
	struct host_row h, snap_host;
	char res[1][ID_MAX];
	int rc;
	int64_t t0 = mono_ns();
	memset(out, 0, sizeof *out);
	struct choose c = {
		{ .policy = rm->cfg.policy, .vcpu_overcommit = rm->cfg.vcpu_overcommit, .template = req->template },
		{ .workspace = req->workspace, .kind = "sandbox" },
		0,
	};
	/* A workspace's template: its newest version, never one from
	 * before the name was deleted (placement.h). */
	if (req->template && placement_workspace_template(req->template)) {
		c.rule.newest = true;
		if ((rc = store_template_version_floor(rm->cfg.store, req->template, &c.rule.min_version)) < 0)
			return rc;
		c.rule.min_version++;
	}
	if (req->snapshot) {
		/* From a snapshot: where the snapshot is (docs/cluster.md). */
		if ((rc = where(rm, req->workspace, req->snapshot, &snap_host)) < 0)
			return rc == -ENOENT ? errf(ENOENT, "snapshot %s not found", req->snapshot) : rc;
		rc = reserve(rm, &c, req->caps, req->report, &snap_host, 1, res, &h);
		host_row_clear(&h);
		h = snap_host;
	} else if (req->nvolumes > 0) {
		struct host_row vol_host;
		if ((rc = volumes_host(rm, req, &vol_host)) < 0)
			return rc;
		rc = reserve(rm, &c, req->caps, req->report, &vol_host, 1, res, &h);
		host_row_clear(&h);
		h = vol_host;
	} else {
		rc = reserve(rm, &c, req->caps, req->report, NULL, 1, res, &h);
	}
	if (rc < 0) {
		/* The new version's copy to a host with room is on its way:
		 * the caller is told when to try again (Retry-After). */
		if (rc == -EAGAIN && c.copying && req->report)
			req->report->retry_after_ms = copy_retry_ms(rm);
		host_row_clear(&h);
		return rc;
	}
	/* The host counts its own share of the caps too; the cluster's
	 * count, taken above, is the one the caller sees. */
	struct ws_caps_report cluster = req->report ? *req->report : (struct ws_caps_report){ 0 };
	json_t *a = NULL;
	rc = remote_call(rm, &h, "POST", "/v1/host/sandboxes", wire_create(req), SLOW_TIMEOUT_S, &a, req->report);
	rc = answer_row(rc, a, out);
	if (rc == 0) {
		if (req->report)
			*req->report = cluster;
		rc = store_placement_rename(rm->cfg.store, res[0], out->id, out->vcpus, out->memory_mib);
		if (rc == 0)
			tell(out, "creating");	/* before its record: the look then finds a move */
		/* Its record at once, for what counts creates (plans). */
		rc = rc ?: store_sandbox_save(rm->cfg.store, out);
		if (rc == 0)
			tell(out, NULL);
		if (rc < 0) {
			/* Made, but the API cannot find it again: undo it. */
			char why[512];
			snprintf(why, sizeof why, "%s", errmsg());
			char path[256];
			snprintf(path, sizeof path, "/v1/host/sandboxes/%s/%s", req->workspace, out->id);
			remote_call(rm, &h, "DELETE", path, NULL, CALL_TIMEOUT_S, NULL, NULL);
			sbx_row_clear(out);
			memset(out, 0, sizeof *out);
			rc = errf(EAGAIN, "the sandbox's placement could not be recorded: %s", why);
		}
	} else {
		store_placement_drop(rm->cfg.store, res[0]);
	}
	create_timed(rm, t0, 1, rc == 0);
	host_row_clear(&h);
	return rc;
}

static int sbx_path(char *p, size_t n, const char *ws, const char *id, const char *tail)
{
	return snprintf(p, n, "/v1/host/sandboxes/%s/%s%s", ws, id, tail ? tail : "");
}

static int r_get(void *ctx, const char *ws, const char *id, bool touch, struct sbx_row *out)
{
	struct remote *rm = ctx;
	struct host_row h;
	int rc = where(rm, ws, id, &h);
	if (rc < 0)
		return rc;
	if (remote_host_down(&h)) {
		if (out)
			lost_row(ws, id, &h, out);
		host_row_clear(&h);
		return 0;
	}
	char path[256];
	sbx_path(path, sizeof path, ws, id, touch ? "?touch=1" : "");
	json_t *a = NULL;
	struct sbx_row tmp;
	rc = remote_call(rm, &h, "GET", path, NULL, CALL_TIMEOUT_S, &a, NULL);
	rc = answer_row(rc, a, &tmp);
	if (rc == 0 && tmp.state == SBX_DELETED)
		store_placement_end(rm->cfg.store, id);
	if (rc == 0 && out)
		*out = tmp;
	else if (rc == 0)
		sbx_row_clear(&tmp);
	host_row_clear(&h);
	if (rc == -ENOENT)	/* the host no longer has it: the API sees it ended */
		store_placement_end(rm->cfg.store, id);
	return rc;
}

/* Each: the placements, then each host's list once, then the records in
 * the placements' order. */
struct placed_ref {
	char id[ID_MAX], ws[ID_MAX];
	int host;			/* index into hosts */
};

struct each_walk {
	struct placed_ref *p;
	size_t n, cap;
	struct host_row *hosts;
	json_t **lists;			/* per host: {id: row} or NULL (down) */
	int nhosts;
};

static int collect(void *ctx, const char *id, const char *ws, const struct host_row *h)
{
	struct each_walk *w = ctx;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		struct placed_ref *p = realloc(w->p, cap * sizeof *p);
		if (!p)
			return errf(ENOMEM, "out of memory");
		w->p = p, w->cap = cap;
	}
	int k = 0;
	while (k < w->nhosts && strcmp(w->hosts[k].id, h->id))
		k++;
	if (k == w->nhosts) {
		struct host_row *hs = realloc(w->hosts, (size_t)(k + 1) * sizeof *hs);
		if (!hs)
			return errf(ENOMEM, "out of memory");
		w->hosts = hs;
		hs[k] = *h;
		hs[k].templates = NULL;	/* not needed here */
		w->nhosts++;
	}
	struct placed_ref *r = &w->p[w->n++];
	snprintf(r->id, sizeof r->id, "%s", id);
	snprintf(r->ws, sizeof r->ws, "%s", ws);
	r->host = k;
	return 0;
}

static int r_each(void *ctx, const char *ws, hostif_row_fn *fn, void *fctx)
{
	struct remote *rm = ctx;
	struct each_walk w = { 0 };
	int rc = store_placement_each(rm->cfg.store, ws, "sandbox", collect, &w);
	if (rc == 0 && w.nhosts && !(w.lists = calloc((size_t)w.nhosts, sizeof *w.lists)))
		rc = errf(ENOMEM, "out of memory");
	for (int k = 0; rc == 0 && k < w.nhosts; k++) {
		if (remote_host_down(&w.hosts[k]))
			continue;
		char path[256];
		snprintf(path, sizeof path, "/v1/host/sandboxes%s%s", ws ? "?workspace=" : "", ws ? ws : "");
		json_t *a = NULL;
		rc = remote_call(rm, &w.hosts[k], "GET", path, NULL, CALL_TIMEOUT_S, &a, NULL);
		if (rc == -EHOSTDOWN) {	/* stopped answering since its last heartbeat: lost */
			snprintf(w.hosts[k].health, sizeof w.hosts[k].health, "down");
			snprintf(w.hosts[k].reason, sizeof w.hosts[k].reason, "did not answer");
			rc = 0;
			continue;
		}
		json_t *byid = json_object();
		size_t i;
		json_t *e;
		json_array_foreach(json_object_get(a, "sandboxes"), i, e) {
			const char *id = json_string_value(json_object_get(e, "id"));
			if (id && byid)
				json_object_set(byid, id, e);
		}
		json_decref(a);
		w.lists[k] = byid;
	}
	for (size_t i = 0; rc == 0 && i < w.n; i++) {
		struct placed_ref *p = &w.p[i];
		struct sbx_row row;
		if (!w.lists[p->host]) {
			lost_row(p->ws, p->id, &w.hosts[p->host], &row);
		} else {
			json_t *e = json_object_get(w.lists[p->host], p->id);
			if (!e) {	/* ended on its host (a TTL, say) */
				store_placement_end(rm->cfg.store, p->id);
				continue;
			}
			if (wire_row_parse(e, &row) < 0)
				continue;
		}
		rc = fn(fctx, &row);
		sbx_row_clear(&row);
	}
	for (int k = 0; k < w.nhosts; k++)
		json_decref(w.lists ? w.lists[k] : NULL);
	free(w.lists);
	free(w.hosts);
	free(w.p);
	return rc;
}

/* POST (or DELETE) tail on the sandbox's host; the record after it. */
static int on_sandbox(struct remote *rm, const char *method, const char *ws, const char *id,
		      const char *tail, json_t *body, long timeout_s, struct sbx_row *out)
{
	struct host_row h;
	int rc = where(rm, ws, id, &h);
	if (rc < 0) {
		json_decref(body);
		return rc;
	}
	char path[256];
	sbx_path(path, sizeof path, ws, id, tail);
	json_t *a = NULL;
	rc = remote_call(rm, &h, method, path, body, timeout_s, &a, NULL);
	rc = answer_row(rc, a, out);
	/* The change is the database's at once, not a heartbeat later: the
	 * other replicas' reads and events see it. */
	if (rc == 0 && out && !strcmp(out->id, id) && !strcmp(out->workspace, ws)) {
		store_sandbox_save(rm->cfg.store, out);
		tell(out, NULL);
	}
	rc = gone(rm, &h, ws, id, rc);
	host_row_clear(&h);
	return rc;
}

/* The sandbox's record says it was deleted at once, not a heartbeat
 * later: a GET of it right after (on any replica) answers 404
 * sandbox_ended with when and why, as one-box kilnd does, not "not
 * found" (the SDKs' ended_sandbox tests against a cluster). */
static void record_deleted(struct remote *rm, const char *id, bool failed)
{
	struct sbx_row row;
	if (store_sandbox_load(rm->cfg.store, id, &row) < 0)
		return;
	if (row.state != SBX_DELETED) {
		/* One that had failed ended by failing, whatever removed it
		 * (as its host and one-box kilnd say: sandbox_delete_why). */
		failed = failed || row.state == SBX_FAILED;
		row.state = SBX_DELETED;
		row.rev++;	/* past a heartbeat's copy of the record it read */
		if (!row.deleted_ms)
			row.deleted_ms = wall_ms();
		if (failed)
			snprintf(row.ended, sizeof row.ended, "failed");
		else if (!row.ended[0])
			snprintf(row.ended, sizeof row.ended, "deleted");
		store_sandbox_save(rm->cfg.store, &row);
		tell(&row, NULL);
	}
	sbx_row_clear(&row);
}

static int r_delete(void *ctx, const char *ws, const char *id)
{
	struct remote *rm = ctx;
	struct host_row h;
	int rc = where(rm, ws, id, &h);
	if (rc < 0)
		return rc;
	bool down = remote_host_down(&h), failed = false;
	host_row_clear(&h);
	if (!down) {
		/* The host's own record first: one that failed a moment ago,
		 * which the database has not heard of yet (its next heartbeat),
		 * is recorded as ended by failing, as one-box kilnd answers. */
		struct sbx_row was;
		int got = r_get(rm, ws, id, false, &was);
		if (got < 0)
			got = store_sandbox_load(rm->cfg.store, id, &was);
		if (got == 0) {
			failed = was.state == SBX_FAILED;
			tell(&was, "deleting");
			sbx_row_clear(&was);
		}
		int64_t t0 = mono_ns();
		rc = on_sandbox(rm, "DELETE", ws, id, NULL, NULL, SLOW_TIMEOUT_S, NULL);
		/* A call that failed at once without reaching its host (a
		 * connection reset or refused, an empty reply) is made twice
		 * more: a delete is idempotent, and the callers that clean up
		 * (an app's remake that did not come up, a remake another
		 * replica won: src/ops/app.c) have no later try, so the sandbox
		 * ran on, placed, with nothing to end it (session 34's CI: an
		 * app's spare left on host-a by "Recv failure: Connection reset
		 * by peer"). A repeat that finds it gone (ENOENT) means the one
		 * before went through and its answer was lost. Not after a
		 * slow failure: a timeout is SLOW_TIMEOUT_S long. */
		for (int i = 0; rc == -EHOSTDOWN && i < DELETE_RETRIES &&
				mono_ns() - t0 < DELETE_RETRY_WITHIN_MS * INT64_C(1000000); i++) {
			log_warn("cluster: deleting %s: %s: once more", id, errmsg());
			sleep(1 + i);
			if ((rc = on_sandbox(rm, "DELETE", ws, id, NULL, NULL, SLOW_TIMEOUT_S, NULL)) == -ENOENT)
				rc = 0;
		}
	}
	/* Down: deleted now; its host ends it when back (reconciliation). */
	if (rc == 0) {
		record_deleted(rm, id, failed);
		rc = store_placement_end(rm->cfg.store, id);
	}
	return rc;
}

/* The end of a relayed operation reaches its host a moment after its
 * client saw it: the host's hibernate waits for it (host_hibernate). */
static int r_hibernate(void *ctx, const char *ws, const char *id, bool now, struct sbx_row *out)
{
	return on_sandbox(ctx, "POST", ws, id, "/hibernate", now ? json_pack("{s:b}", "now", 1) : NULL,
			  SLOW_TIMEOUT_S, out);
}

static int r_wake(void *ctx, const char *ws, const char *id, struct sbx_row *out)
{
	struct remote *rm = ctx;
	struct host_row h;
	int rc = where(rm, ws, id, &h);
	int held = rc < 0 || remote_host_down(&h) ? 0 : wake_hold(rm, ws, id, &h, NULL);
	host_row_clear(&h);
	if (held < 0)
		return held;
	rc = on_sandbox(ctx, "POST", ws, id, "/wake", NULL, SLOW_TIMEOUT_S, out);
	if (held)
		store_wake_done(rm->cfg.store, id);	/* its record says it runs now */
	return rc;
}

static int r_pause(void *ctx, const char *ws, const char *id, bool pause, struct sbx_row *out)
{
	return on_sandbox(ctx, "POST", ws, id, pause ? "/pause" : "/resume", NULL, CALL_TIMEOUT_S, out);
}

static int r_set_lifecycle(void *ctx, const char *ws, const char *id, const struct lifecycle_change *lc,
			   struct sbx_row *out)
{
	json_t *j = json_object();
	if (j && lc->set_ttl)
		json_object_set_new(j, "ttl_seconds", json_integer(lc->ttl_seconds));
	if (j && lc->set_idle) {
		json_object_set_new(j, "idle_hibernate", json_boolean(lc->idle_hibernate));
		json_object_set_new(j, "retention_seconds", json_integer(lc->retention_seconds));
	}
	if (j && lc->set_pause)
		json_object_set_new(j, "idle_pause_seconds", json_integer(lc->idle_pause_seconds));
	return on_sandbox(ctx, "POST", ws, id, "/ttl", j, CALL_TIMEOUT_S, out);
}

static int r_set_network(void *ctx, const char *ws, const char *id, const char *policy, struct sbx_row *out)
{
	return on_sandbox(ctx, "POST", ws, id, "/network", json_pack("{s:s?}", "policy", policy), CALL_TIMEOUT_S,
			  out);
}

static int r_snapshot(void *ctx, const char *ws, const char *id, char snap[ID_MAX])
{
	struct remote *rm = ctx;
	struct host_row h;
	int rc = where(rm, ws, id, &h);
	if (rc < 0)
		return rc;
	char path[256];
	sbx_path(path, sizeof path, ws, id, "/snapshot");
	json_t *a = NULL;
	rc = remote_call(rm, &h, "POST", path, NULL, SLOW_TIMEOUT_S, &a, NULL);
	const char *s = json_string_value(json_object_get(a, "snapshot"));
	if (rc == 0 && (!s || strlen(s) >= ID_MAX))
		rc = errf(EPROTO, "host %s made a snapshot and did not say its id", h.name);
	if (rc == 0) {
		snprintf(snap, ID_MAX, "%s", s);
		struct placement p = { .workspace = ws, .kind = "snapshot" };
		rc = store_placement_add(rm->cfg.store, snap, h.id, &p);
		/* The API answers from its own records (the heartbeats keep
		 * them after this). */
		struct snap_row sr;
		if (rc == 0 && wire_snap_parse(json_object_get(a, "record"), &sr) == 0) {
			if (!strcmp(sr.id, snap) && !strcmp(sr.workspace, ws))
				rc = store_snapshot_save(rm->cfg.store, &sr);
			snap_row_clear(&sr);
		}
	}
	json_decref(a);
	rc = gone(rm, &h, ws, id, rc);
	host_row_clear(&h);
	return rc;
}

static int r_snapshot_delete(void *ctx, const char *ws, const char *snap)
{
	struct remote *rm = ctx;
	struct host_row h;
	int rc = where(rm, ws, snap, &h);
	if (rc < 0)
		return errf(ENOENT, "snapshot %s not found", snap);
	char path[256];
	snprintf(path, sizeof path, "/v1/host/snapshots/%s/%s", ws, snap);
	rc = remote_call(rm, &h, "DELETE", path, NULL, CALL_TIMEOUT_S, NULL, NULL);
	/* Its record says deleted at once, not a heartbeat later: a GET of
	 * it right after answered 200 with the deleted snapshot (the SDKs'
	 * snapshot test against a cluster). */
	if (rc == 0 || rc == -ENOENT) {
		store_placement_end(rm->cfg.store, snap);
		store_snapshot_delete(rm->cfg.store, snap, ws);
	}
	host_row_clear(&h);
	return rc;
}

/* Sandbox id, hibernated or paused in the records, was started again by
 * its host for a call made here (a relay into it, a fork of it): the
 * record says running at once (its host's comes with the next
 * heartbeat), and this replica's stream tells of it at once, woken or
 * resumed, before what the call itself tells. */
static void told_running(struct remote *rm, const char *id)
{
	struct sbx_row row;
	if (store_sandbox_load(rm->cfg.store, id, &row) == 0) {
		row.state = SBX_RUNNING;
		row.rev++;	/* the host's next save has it too (store_sandbox_keep) */
		store_sandbox_save(rm->cfg.store, &row);
		tell(&row, NULL);
		sbx_row_clear(&row);
	}
}

static int r_fork(void *ctx, const struct hostif_fork *req, struct sbx_row *children, int *made)
{
	struct remote *rm = ctx;
	struct host_row h, none;
	int64_t t0 = mono_ns();
	*made = 0;
	if (req->count < 1 || req->count > HOST_FORK_MAX)
		return errf(EINVAL, "count must be from 1 to %d", HOST_FORK_MAX);
	int rc = where(rm, req->workspace, req->id, &h);
	if (rc < 0)
		return rc;
	/* Children stay on their parent's host (docs/cluster.md), reserved
	 * there against the workspace's caps first. A tree is made whole or
	 * not at all; separate forks are made while the caps have room, as
	 * on one host, and the refusal comes after the children made. */
	struct choose c = { { 0 }, { .workspace = req->workspace, .kind = "sandbox" }, 0 };
	char res[HOST_FORK_MAX][ID_MAX];
	int n = req->count;
	rc = reserve(rm, &c, req->caps, req->report, &h, n, res, &none);
	struct ws_caps_report refusal = req->report ? *req->report : (struct ws_caps_report){ 0 };
	char why[512] = "";
	if (rc == -EDQUOT && !req->tree) {
		snprintf(why, sizeof why, "%s", errmsg());
		while (rc == -EDQUOT && --n > 0)
			rc = reserve(rm, &c, req->caps, req->report, &h, n, res, &none);
		if (rc == -EDQUOT || n == 0)
			rc = errf(EDQUOT, "%s", why);
	}
	if (rc < 0) {
		if (req->report && rc == -EDQUOT)
			*req->report = refusal;
		host_row_clear(&h);
		return rc;
	}
	struct ws_caps_report cluster = req->report ? *req->report : (struct ws_caps_report){ 0 };
	json_t *b = json_pack("{s:i,s:b}", "count", n, "tree", req->tree);
	if (b && req->caps)
		json_object_set_new(b, "caps", wire_caps(req->caps));
	char path[256];
	sbx_path(path, sizeof path, req->workspace, req->id, "/fork");
	/* A paused parent is resumed by its host first: told before its
	 * children, as one-box (e2e 85-kilnd-pause events_lifecycle). */
	struct sbx_row parent;
	bool paused = false;
	if (store_sandbox_load(rm->cfg.store, req->id, &parent) == 0) {
		paused = parent.state == SBX_PAUSED;
		sbx_row_clear(&parent);
	}
	json_t *a = NULL;
	rc = remote_call(rm, &h, "POST", path, b, SLOW_TIMEOUT_S, &a, NULL);
	size_t i;
	json_t *e;
	if (paused && json_array_size(json_object_get(a, "children")) > 0)
		told_running(rm, req->id);
	json_array_foreach(json_object_get(a, "children"), i, e) {
		if (*made >= n)
			break;
		struct sbx_row *ch = &children[*made];
		if (wire_row_parse(e, ch) < 0)
			continue;
		if (store_placement_rename(rm->cfg.store, res[*made], ch->id, ch->vcpus, ch->memory_mib) < 0 ||
		    (tell(ch, "creating"), store_sandbox_save(rm->cfg.store, ch)) < 0) {
			sbx_row_clear(ch);
			memset(ch, 0, sizeof *ch);	/* exists, not findable: skipped */
		} else {
			tell(ch, NULL);
		}
		(*made)++;
	}
	for (int k = *made; k < n; k++)
		store_placement_drop(rm->cfg.store, res[k]);	/* not made: no create */
	create_timed(rm, t0, *made, true);
	create_timed(rm, t0, n - *made, false);
	const json_t *err = json_object_get(a, "error");
	if (rc == 0 && err)
		rc = wire_error_parse(err, req->report);
	else if (req->report)
		*req->report = cluster;
	if (rc == 0 && n < req->count) {
		if (req->report)
			*req->report = refusal;
		rc = errf(EDQUOT, "%s", why);
	}
	json_decref(a);
	host_row_clear(&h);
	return rc;
}

/* ---- relays ------------------------------------------------------------------------ */

/* Open a relay of kind ("guest", "log") to the sandbox: the socket past
 * the host's "OK" line, whose rest (the guest's directory) goes to ok. */
static int relay_open(struct remote *rm, const char *ws, const char *id, const char *kind, char *ok,
		      size_t okcap)
{
	struct host_row h;
	int rc = where(rm, ws, id, &h);
	if (rc < 0)
		return rc;
	if (remote_host_down(&h)) {
		rc = remote_down_error(&h);
		host_row_clear(&h);
		return rc;
	}
	/* A guest relay wakes a hibernated sandbox: held to the cap first,
	 * and told as the wake it is, cap or none (below). */
	bool asleep = false;
	int held = !strcmp(kind, "guest") ? wake_hold(rm, ws, id, &h, &asleep) : 0;
	if (held < 0) {
		host_row_clear(&h);
		return held;
	}
	struct relay_link *l;
	rc = link_open(h.url, h.name, rm->cfg.ca_file, RELAY_WAIT_MS, &l);
	if (rc < 0) {
		if (held)
			store_wake_done(rm->cfg.store, id);
		host_row_clear(&h);
		return rc;
	}
	char head[RELAY_HEAD_MAX];
	int n = snprintf(head, sizeof head,
			 "GET /v1/host/sandboxes/%s/%s/%s HTTP/1.1\r\nHost: kiln-host\r\n"
			 "Authorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: kiln-guest\r\n\r\n",
			 ws, id, kind, h.api_key);
	if ((n = link_send(l, head, (size_t)n)) < 0)
		rc = errf(EHOSTDOWN, "host %s: sending a relay request: %s", h.name, strerror(-n));
	if (rc == 0 && (n = link_read_until(l, head, sizeof head, "\r\n\r\n")) < 0)
		rc = errf(EHOSTDOWN, "host %s: no relay answer: %s", h.name, strerror(-n));
	if (rc == 0 && strncmp(head, "HTTP/1.1 101", 12) != 0) {
		/* Refused before the upgrade: the error is in a JSON body,
		 * which the status says enough of here. */
		int status = atoi(head + 9);
		rc = status == 404 ? errf(ENOENT, "sandbox %s not found", id)
				   : errf(EPROTO, "host %s refused the relay: HTTP %d", h.name, status);
	}
	char line[640];
	if (rc == 0 && (n = link_read_until(l, line, sizeof line, "\n")) < 0)
		rc = errf(EHOSTDOWN, "host %s: the relay ended before it began: %s", h.name, strerror(-n));
	if (rc == 0) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "OK", 2)) {
			const char *rest = line[2] == ' ' ? line + 3 : "";
			size_t k = strlen(rest) < okcap ? strlen(rest) : okcap - 1;
			memcpy(ok, rest, k);
			ok[k] = 0;
		} else if (!strncmp(line, "ERR ", 4)) {
			char *msg = NULL;
			long e = strtol(line + 4, &msg, 10);
			rc = errf(e > 0 && e < 4096 ? (int)e : EPROTO, "%s", msg && *msg == ' ' ? msg + 1 : line);
		} else {
			rc = errf(EPROTO, "host %s: a relay line that is neither OK nor ERR", h.name);
		}
	}
	rc = gone(rm, &h, ws, id, rc);
	host_row_clear(&h);
	/* Entered: it runs now, told before the exec's own events (an exec
	 * that woke it: e2e 61 events_one_sandbox against a cluster; one
	 * that resumed a paused one: 85-kilnd-pause events_lifecycle, told
	 * a heartbeat later, after the next exec had started). */
	if (asleep && rc == 0)
		told_running(rm, id);
	if (held)
		store_wake_done(rm->cfg.store, id);	/* the hold goes */
	if (rc < 0) {
		link_close(l);
		return rc;
	}
	return link_take(l);
}

static int r_enter(void *ctx, const char *ws, const char *id, struct hostif_guest *out)
{
	memset(out, 0, sizeof *out);
	char cwd[300] = "";
	int fd = relay_open(ctx, ws, id, "guest", cwd, sizeof cwd);
	if (fd < 0)
		return fd;
	struct guest *g;
	int rc = guest_adopt(fd, NULL, 0, cwd, RELAY_CALL_MS, &g);
	if (rc < 0)
		return rc;
	out->g = g;
	snprintf(out->workspace, sizeof out->workspace, "%s", ws);
	snprintf(out->id, sizeof out->id, "%s", id);
	out->entered = true;
	return 0;
}

static int r_touch(void *ctx, const char *ws, const char *id)
{
	char keep[512];	/* touching is never the error reported */
	snprintf(keep, sizeof keep, "%s", errmsg());
	struct host_row h;
	int rc = where(ctx, ws, id, &h);
	if (rc == 0) {
		char path[256];
		sbx_path(path, sizeof path, ws, id, "/touch");
		rc = remote_call(ctx, &h, "POST", path, NULL, CALL_TIMEOUT_S, NULL, NULL);
		host_row_clear(&h);
	}
	errf(EIO, "%s", keep);
	return rc;
}

/* A proxied WebSocket's operation: counted at its start as activity; the
 * host counts its relay's traffic itself. */
static int r_hold(void *ctx, const char *ws, const char *id, struct hostif_guest *out)
{
	memset(out, 0, sizeof *out);
	struct sbx_row r;
	int rc = r_get(ctx, ws, id, true, &r);
	if (rc < 0)
		return rc;
	if (r.state != SBX_RUNNING)
		rc = errf(EBUSY, "sandbox %s is %s", id, sbx_state_name(r.state));
	sbx_row_clear(&r);
	return rc;
}

static void r_leave(void *ctx, struct hostif_guest *hg)
{
	(void)ctx;
	/* Closing ends the relay; the host then closes its guest connection
	 * and leaves the sandbox (its activity: last_active_at), a moment
	 * later. One-box does both before the request is answered; so does
	 * this, by waiting for the host's end of the relay (bounded). Else
	 * a connection that started or attached a background process was
	 * its client still: a process started here and attached at once
	 * through the next request found it attached ("already has a
	 * client"), and one signalled after an output request had its exit
	 * taken by the closing connection and its record freed ("no process
	 * with id"); and an exec's activity came after its answer: the
	 * next request read last_active_at before it (e2e 85-kilnd-pause
	 * idle_pause_pauses against a replica saw it move 182 ms later). */
	if (hg->g) {
		char keep[512];		/* the leave is never the error reported */
		snprintf(keep, sizeof keep, "%s", errmsg());
		if (guest_close_wait(hg->g, RELAY_LEAVE_MS) < 0)
			log_warn("sandbox %s: %s", hg->id, errmsg());
		errf(EIO, "%s", keep);
	}
	memset(hg, 0, sizeof *hg);
}

/* The console log as the host has it now, in a memory file (h_logs reads
 * it as a file). The host says how much that is ("OK SIZE"); following,
 * the relay goes on with what the log gets later: *more. Not following,
 * the SIZE bytes are the answer, whether or not the host has closed yet:
 * an app's deploy (ops/app.c keep_log) once waited 300 s and more on a
 * log relay its host had sent all of and not ended (session 31). A host
 * that gives no SIZE (older) sends the log to its end and closes. Each
 * wait for the host's bytes is bounded (RELAY_LOG_WAIT_MS). */
#define RELAY_LOG_WAIT_MS 30000
static int r_log_open(void *ctx, const char *ws, const char *id, bool follow, int *out, int *more)
{
	char ok[32] = "";
	int fd = relay_open(ctx, ws, id, follow ? "log?follow=1" : "log", ok, sizeof ok);
	if (fd < 0)
		return fd;
	int mfd = memfd_create("kiln-log", MFD_CLOEXEC);
	if (mfd < 0) {
		close(fd);
		return errf_sys("memfd_create");
	}
	char *end;
	long long size = strtoll(ok, &end, 10);
	bool sized = end != ok && *end == 0 && size >= 0 && size <= LOG_MAX;
	struct timeval tv = { RELAY_LOG_WAIT_MS / 1000, 0 }, none = { 0, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	char buf[65536];
	ssize_t n = 0;
	size_t total = 0, want = sized ? (size_t)size : LOG_MAX;
	while (total < want && (n = recv(fd, buf, want - total < sizeof buf ? want - total : sizeof buf, 0)) > 0) {
		if (write(mfd, buf, (size_t)n) != n)
			break;
		total += (size_t)n;
	}
	int stalled = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
	if (sized && total == want && follow) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);	/* the follower's waits */
		*more = fd;
	} else {
		close(fd);
		if ((sized && total < want) || stalled) {
			close(mfd);
			return stalled ? errf(EHOSTDOWN, "sandbox %s: its host's log relay sent nothing for %d s",
					      id, RELAY_LOG_WAIT_MS / 1000)
				       : errf(EHOSTDOWN, "sandbox %s: its host's log relay ended early", id);
		}
	}
	*out = mfd;
	return 0;
}

/* ---- what the hosts show --------------------------------------------------------------- */

struct host_gauges {
	int up, down, cordoned;
	int64_t sandboxes;
};

static int count_host(void *ctx, const struct host_row *r)
{
	struct host_gauges *g = ctx;
	if (!strcmp(r->admin, "revoked"))
		return 0;
	if (remote_host_down(r))
		g->down++;
	else if (strcmp(r->admin, "active"))
		g->cordoned++;
	else
		g->up++;
	g->sandboxes += r->sandboxes;
	return 0;
}

static void r_metrics(void *ctx, struct strbuf *b)
{
	struct remote *rm = ctx;
	struct host_gauges g = { 0 };
	if (store_host_each(rm->cfg.store, count_host, &g) < 0)
		return;
	/* One-box kilnd's gauge (src/host/host.c), over the cluster: what
	 * the database has of every sandbox, as GET /v1/sandboxes answers,
	 * so a scrape of any replica reads the same as one of kilnd. */
	int64_t count[SBX_NSTATES];
	if (store_sandbox_states(rm->cfg.store, count) == 0) {
		strbuf_printf(b, "# HELP kiln_sandboxes Sandboxes of the cluster, by state (its database's records).\n"
				 "# TYPE kiln_sandboxes gauge\n");
		for (int i = 0; i < SBX_NSTATES; i++)
			if (i != SBX_DELETED)
				strbuf_printf(b, "kiln_sandboxes{state=\"%s\"} %lld\n", sbx_state_name(i),
					      (long long)count[i]);
	}
	strbuf_printf(b, "# HELP kiln_cluster_hosts Hosts of the cluster by state.\n"
			  "# TYPE kiln_cluster_hosts gauge\n"
			  "kiln_cluster_hosts{state=\"up\"} %d\nkiln_cluster_hosts{state=\"down\"} %d\n"
			  "kiln_cluster_hosts{state=\"cordoned\"} %d\n"
			  "# HELP kiln_cluster_sandboxes Sandboxes the hosts said they run at their last heartbeat.\n"
			  "# TYPE kiln_cluster_sandboxes gauge\nkiln_cluster_sandboxes %lld\n",
		       g.up, g.down, g.cordoned, (long long)g.sandboxes);
	strbuf_printf(b, "# HELP kiln_cluster_placements_total Sandboxes this API placed.\n"
			 "# TYPE kiln_cluster_placements_total counter\nkiln_cluster_placements_total %lld\n"
			 "# HELP kiln_cluster_placement_seconds_total Time those placements took (choice and reservation).\n"
			 "# TYPE kiln_cluster_placement_seconds_total counter\nkiln_cluster_placement_seconds_total %.6f\n",
		       (long long)__atomic_load_n(&rm->placed, __ATOMIC_RELAXED),
		       __atomic_load_n(&rm->place_ns, __ATOMIC_RELAXED) / 1e9);
	remote_tmpl_metrics(rm, b);
}

/* Events in a cluster (docs/cluster.md "Events"): the hosts' records
 * reach the database with their heartbeats; every replica with listeners
 * looks at those saved in the last minute each second and tells of each
 * record it has not seen in that shape (a state change, a usage sample),
 * so a change shows on every replica within a heartbeat and a second. */
#define EVENTS_LOOK_MS 1000
#define EVENTS_WINDOW_MS 60000

struct look {
	json_t *seen, *now;
	bool tell;
};

static int look_row(void *ctx, struct sbx_row *r)
{
	struct look *l = ctx;
	json_t *was = json_object_get(l->seen, r->id);
	if (l->tell && (!was || json_integer_value(was) != r->updated_ms)) {
		struct host_event e = { r->workspace, r->id, sbx_state_name(r->state), r->cpu_seconds, r->rss_bytes,
					r->parent, r->error, r->ended, NULL, 0, NULL };
		host_events_emit(&e);
	}
	json_object_set_new(l->now, r->id, json_integer(r->updated_ms));
	sbx_row_clear(r);
	return 0;
}

/* A TTL warning a host sent (store_notice_add, h_cluster.c): told once,
 * keyed by sandbox and due time among the seen. */
static int look_notice(void *ctx, const struct notice_row *n)
{
	struct look *l = ctx;
	char key[ID_MAX + 32];
	snprintf(key, sizeof key, "ttl:%s:%lld", n->sandbox, (long long)n->due_ms);
	if (l->tell && !json_object_get(l->seen, key)) {
		struct host_event e = { n->workspace, n->sandbox, n->state, 0, 0, "", "", "", n->kind, n->due_ms,
					n->action };
		host_events_emit(&e);
	}
	json_object_set_new(l->now, key, json_integer(n->saved_ms));
	return 0;
}

static void events_poll(void *ctx)
{
	struct remote *rm = ctx;
	struct look l = { rm->seen, json_object(), rm->seen != NULL };
	if (!l.now)
		return;
	/* The first look only learns what is there: no replay of history. */
	int64_t since = wall_ms() - EVENTS_WINDOW_MS;
	if (store_sandbox_each_since(rm->cfg.store, since, look_row, &l) < 0 ||
	    store_notice_each_since(rm->cfg.store, since, look_notice, &l) < 0) {
		json_decref(l.now);
		return;
	}
	json_decref(rm->seen);
	rm->seen = l.now;
}

static int r_subscribe(void *ctx, host_event_fn *fn, void *fctx)
{
	struct remote *rm = ctx;
	int rc = host_events_subscribe(fn, fctx);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&rm->ev_lock);
	if (++rm->listeners == 1 && !rm->polling) {
		rc = periodic_start(&rm->poller, "events", EVENTS_LOOK_MS, events_poll, rm);
		rm->polling = rc == 0;
	}
	pthread_mutex_unlock(&rm->ev_lock);
	if (rc < 0)
		host_events_unsubscribe(fn, fctx);
	return rc;
}

static void r_unsubscribe(void *ctx, host_event_fn *fn, void *fctx)
{
	struct remote *rm = ctx;
	host_events_unsubscribe(fn, fctx);
	pthread_mutex_lock(&rm->ev_lock);
	rm->listeners--;
	pthread_mutex_unlock(&rm->ev_lock);
	/* The poller runs on while the process does (a look a second on an
	 * idle replica); stopping it here could race a new listener. */
}

/* Volume id's own path at its host's agent (GET, DELETE). */
static void volume_path(char *out, size_t cap, const char *ws, const char *id)
{
	snprintf(out, cap, "/v1/host/volumes/%s/%s", ws, id);
}

/* A new volume's host: the up, active one with the most free disk
 * that holds size_mib whole (its file is sparse, but may fill). */
struct disk_pick {
	int64_t size_mib;
	struct host_row h;
	bool found;
};

static int most_disk(void *ctx, const struct host_row *r)
{
	struct disk_pick *p = ctx;
	if (remote_host_down(r) || strcmp(r->admin, "active") || r->disk_mib < p->size_mib)
		return 0;
	if (!p->found || r->disk_mib > p->h.disk_mib) {
		p->h = *r;
		p->h.templates = NULL;
		p->found = true;
	}
	return 0;
}

static int r_volume_create(void *ctx, const char *ws, const char *name, int64_t size_mib,
			   struct vol_row *out)
{
	struct remote *rm = ctx;
	struct vol_row r;
	if (!plain_id(ws))
		return errf(EINVAL, "bad workspace id");
	/* The cluster's names first: the host knows only its own. */
	if (store_volume_load(rm->cfg.store, ws, name, true, &r) == 0)
		return errf(EEXIST, "a volume named '%s' exists (%s)", name, r.id);
	struct disk_pick p = { .size_mib = size_mib };
	int rc = store_host_each(rm->cfg.store, most_disk, &p);
	if (rc < 0)
		return rc;
	if (!p.found)
		return errf(EAGAIN, "no host that is up has %lld MiB of disk free for the volume (kilnd cluster hosts)",
			    (long long)size_mib);
	json_t *a = NULL;
	rc = remote_call(rm, &p.h, "POST", "/v1/host/volumes",
		  json_pack("{s:s,s:s,s:I}", "workspace", ws, "name", name, "size_mib", (json_int_t)size_mib),
		  SLOW_TIMEOUT_S, &a, NULL);
	if (rc == 0)
		rc = wire_vol_parse(a, &r);
	json_decref(a);
	if (rc == 0 && (!plain_id(r.id) || strcmp(r.workspace, ws) || strcmp(r.name, name)))
		rc = errf(EPROTO, "host %s made a volume and answered another's record", p.h.name);
	if (rc < 0)
		return rc;
	/* Where it is, then its record: a name taken meanwhile through
	 * another replica loses here, and the host's file goes again. */
	struct placement pl = { .workspace = ws, .kind = "volume" };
	rc = store_placement_add(rm->cfg.store, r.id, p.h.id, &pl);
	rc = rc ?: store_volume_insert(rm->cfg.store, &r);
	if (rc < 0) {
		char why[512], path[256];
		snprintf(why, sizeof why, "%s", errmsg());
		volume_path(path, sizeof path, ws, r.id);
		remote_call(rm, &p.h, "DELETE", path, NULL, CALL_TIMEOUT_S, NULL, NULL);
		store_placement_end(rm->cfg.store, r.id);
		return errf(-rc, "%s", why);
	}
	if (out)
		*out = r;
	return 0;
}

/* METHOD on volume id's own path at its host: *out the answer (may be
 * NULL), host the host's name (for messages). */
static int on_volume(struct remote *rm, const char *method, const char *ws, const char *id, json_t **out,
		     char host[NAME_MAX_LEN])
{
	struct host_row h;
	int rc = vol_where(rm, ws, id, &h);
	if (rc < 0)
		return rc;
	char path[256];
	volume_path(path, sizeof path, ws, id);
	snprintf(host, NAME_MAX_LEN, "%s", h.name);
	rc = remote_call(rm, &h, method, path, NULL, CALL_TIMEOUT_S, out, NULL);
	host_row_clear(&h);
	return rc;
}

static int r_volume_delete(void *ctx, const char *ws, const char *id)
{
	struct remote *rm = ctx;
	char host[NAME_MAX_LEN];
	/* Its host says whether a sandbox has it; while that host is down
	 * nobody can, and its file stays: refused (-EHOSTDOWN). */
	int rc = on_volume(rm, "DELETE", ws, id, NULL, host);
	if (rc == -EHOSTDOWN)
		return errf(EHOSTDOWN, "volume %s is on host %s, which is down: delete it when the host is back (%s)",
			    id, host, errmsg());
	if (rc == 0 || rc == -ENOENT) {
		/* Its host has it no more (deleted there, or its data
		 * directory was replaced): the cluster's record goes too
		 * (-ENOENT "volume ID not found" if it had none). */
		rc = store_volume_delete(rm->cfg.store, ws, id);
		store_placement_end(rm->cfg.store, id);
	}
	return rc;
}

static int r_volume_get(void *ctx, const char *ws, const char *id, struct vol_row *out, store_att_fn *fn,
			void *fctx)
{
	char host[NAME_MAX_LEN];
	json_t *a = NULL;
	int rc = on_volume(ctx, "GET", ws, id, &a, host);
	struct vol_row r;
	if (rc == 0 && (rc = wire_vol_parse(json_object_get(a, "volume"), &r)) == 0 &&
	    (strcmp(r.id, id) || strcmp(r.workspace, ws)))
		rc = errf(EPROTO, "host %s answered another volume's record for %s", host, id);
	if (rc == 0 && out)
		*out = r;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(a, "attachments"), i, e) {
		struct vol_att at;
		if (rc < 0 || !fn || i >= HOST_VOLUMES_MAX * 64)
			break;
		if ((rc = wire_att_parse(e, &at)) == 0 && !strcmp(at.volume, id))
			rc = fn(fctx, &at);
	}
	json_decref(a);
	return rc;
}

/* A listing's: one call per volume, as r_volume_get, each to fn with its
 * index. (One call per host would need an agent route that lists a
 * workspace's attachments; the agent answers only by volume.) */
struct att_of {
	hostif_att_fn *fn;
	void *fctx;
	size_t i;
	int rc;				/* fn's own failure: the listing's */
};

static int att_of(void *ctx, const struct vol_att *a)
{
	struct att_of *o = ctx;
	return o->rc = o->fn(o->fctx, o->i, a);
}

static int r_volume_attachments(void *ctx, const char *ws, const struct vol_row *v, size_t n, hostif_att_fn *fn,
				void *fctx)
{
	for (size_t i = 0; i < n; i++) {
		struct att_of o = { fn, fctx, i, 0 };
		int rc = r_volume_get(ctx, ws ? ws : v[i].workspace, v[i].id, NULL, att_of, &o);
		if (o.rc < 0 || rc == -ENOMEM)
			return o.rc < 0 ? o.rc : rc;
		if (rc < 0 && (rc = fn(fctx, i, NULL)) < 0)
			return rc;
	}
	return 0;
}

/* A volume and a sandbox must share a host: the volume's file is there. */
static int r_volume_attach(void *ctx, const char *ws, const char *id, const struct create_volume *v)
{
	struct remote *rm = ctx;
	struct host_row sh, vh;
	int rc = where(rm, ws, id, &sh);
	if (rc < 0)
		return rc;
	if ((rc = vol_where(rm, ws, v->id, &vh)) == 0 && strcmp(vh.id, sh.id))
		rc = errf(EINVAL, "volume '%s' is on host %s and sandbox %s on host %s: a volume is attached on "
				  "its own host (docs/cluster.md \"Volumes\")", v->name, vh.name, id, sh.name);
	host_row_clear(&vh);
	host_row_clear(&sh);
	if (rc < 0)
		return rc;
	return on_sandbox(rm, "POST", ws, id, "/volume_attach",
			  json_pack("{s:s,s:s,s:s,s:b}", "id", v->id, "name", v->name, "path", v->path, "read_only",
				    v->read_only), SLOW_TIMEOUT_S, NULL);
}

static int r_volume_detach(void *ctx, const char *ws, const char *id, const char *volume, bool force)
{
	return on_sandbox(ctx, "POST", ws, id, "/volume_detach", json_pack("{s:s,s:b}", "volume", volume, "force", force),
			  SLOW_TIMEOUT_S, NULL);
}

static const struct hostif_ops remote_ops = {
	.name = "remote",
	.create = r_create,
	.get = r_get,
	.each = r_each,
	.delete = r_delete,
	.hibernate = r_hibernate,
	.wake = r_wake,
	.pause = r_pause,
	.set_lifecycle = r_set_lifecycle,
	.set_network = r_set_network,
	.snapshot = r_snapshot,
	.snapshot_delete = r_snapshot_delete,
	.volume_create = r_volume_create,
	.volume_delete = r_volume_delete,
	.volume_get = r_volume_get,
	.volume_attachments = r_volume_attachments,
	.volume_attach = r_volume_attach,
	.volume_detach = r_volume_detach,
	.fork = r_fork,
	.enter = r_enter,
	.hold = r_hold,
	.leave = r_leave,
	.touch = r_touch,
	.log_open = r_log_open,
	.templates = remote_templates,
	.template_build = remote_template_build,
	.template_state = remote_template_state,
	.template_log_open = remote_template_log_open,
	.template_delete = remote_template_delete,
	.template_export = remote_template_export,
	.template_import = remote_template_import,
	.metrics = r_metrics,
	.subscribe = r_subscribe,
	.unsubscribe = r_unsubscribe,
};

int hostif_remote(struct hostif *out, const struct remote_config *cfg)
{
	struct remote *rm = calloc(1, sizeof *rm);
	if (!rm)
		return errf(ENOMEM, "out of memory");
	rm->cfg = *cfg;
	int rc = randid_make(rm->replica, sizeof rm->replica, "api_", 16);
	if (rc < 0) {
		free(rm);
		return rc;
	}
	pthread_mutex_init(&rm->ev_lock, NULL);
	pthread_mutex_init(&rm->caps_lock, NULL);
	pthread_mutex_init(&rm->tlock, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	out->ops = &remote_ops;
	out->ctx = rm;
	return remote_tsync_start(rm);
}

void hostif_remote_free(struct hostif *hi)
{
	struct remote *rm = hi->ctx;
	if (rm && rm->polling)
		periodic_stop(&rm->poller);
	if (rm)
		remote_tsync_stop(rm);
	if (rm)
		json_decref(rm->seen);
	free(hi->ctx);
	hi->ctx = NULL;
}
