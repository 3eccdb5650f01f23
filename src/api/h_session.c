/*
 * h_session: the dashboard's sign-in (session.h says why it is shaped so).
 *
 *   POST   /v1/session  {"api_key":"kiln_..."}  -> 201, Set-Cookie, csrf_token
 *   GET    /v1/session  -> the session's workspace, CSRF token and expiry
 *   DELETE /v1/session  -> 204, the cookie cleared (logout)
 */
#include "api/api.h"
#include "api/auth.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/keys.h"
#include "api/reply_buf.h"
#include "api/session.h"
#include "common/err.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define TOKEN_HEX 64	/* 256 random bits */

struct session {
	bool live;
	char token_hash[KEY_HASH_LEN];	/* SHA-256 of the cookie's token */
	char csrf[TOKEN_HEX + 1];
	char workspace[ID_MAX];
	char key_hash[KEY_HASH_LEN];	/* of the key it came from */
	int64_t created, used;		/* CLOCK_MONOTONIC seconds */
	int64_t expires_wall;		/* wall clock, for the page */
};

static struct session sessions[SESSION_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static int random_hex(char out[TOKEN_HEX + 1])
{
	unsigned char b[TOKEN_HEX / 2];
	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
		return errf_sys("getrandom");
	for (size_t i = 0; i < sizeof b; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	return 0;
}

static bool expired(const struct session *s, int64_t now)
{
	return now - s->used > SESSION_IDLE_S || now - s->created > SESSION_MAX_S;
}

/* Strings of equal length compared in constant time. */
static bool same_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;
	for (size_t i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* The session of r's cookie, copied; -ENOENT if none (or expired). */
static int find(struct req *r, struct session *out, int *slot)
{
	const char *tok = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, SESSION_COOKIE);
	if (!tok || strlen(tok) != TOKEN_HEX)
		return -ENOENT;
	char h[KEY_HASH_LEN];
	key_hash(tok, TOKEN_HEX, h);
	int rc = -ENOENT;
	int64_t now = now_s();
	pthread_mutex_lock(&lock);
	for (int i = 0; i < SESSION_MAX; i++) {
		struct session *s = &sessions[i];
		if (!s->live || strcmp(s->token_hash, h) != 0)
			continue;
		if (expired(s, now)) {
			s->live = false;
			break;
		}
		s->used = now;
		*out = *s, *slot = i, rc = 0;
		break;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static void drop(int slot)
{
	pthread_mutex_lock(&lock);
	sessions[slot].live = false;
	pthread_mutex_unlock(&lock);
}

char *cookie_without_session(const char *value)
{
	char *out = malloc(strlen(value) + 1);
	if (!out)
		return NULL;
	size_t n = 0;
	const char *p = value;
	while (*p) {
		while (*p == ' ' || *p == ';')
			p++;
		const char *e = strchrnul(p, ';');
		/* kiln_* cookies are kilnd's (the session, preview links). */
		if (e > p && strncmp(p, "kiln_", 5) != 0) {
			if (n)
				out[n++] = ';', out[n++] = ' ';
			memcpy(out + n, p, e - p);
			n += e - p;
		}
		p = e;
	}
	out[n] = 0;
	return out;
}

bool req_is_tls(struct req *r)
{
	if (MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_GNUTLS_SESSION))
		return true;
	const char *p = req_header(r, "X-Forwarded-Proto");
	return p && !strcasecmp(p, "https");
}

/* Whether Origin names this server (scheme://Host). */
static bool same_origin(struct req *r, const char *origin)
{
	const char *host = req_header(r, "Host");
	const char *scheme = req_is_tls(r) ? "https://" : "http://";
	size_t sl = strlen(scheme);
	return host && !strncasecmp(origin, scheme, sl) && !strcasecmp(origin + sl, host);
}

int auth_http(struct req *r)
{
	const char *authz = req_header(r, "Authorization");
	if (authz || !MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, SESSION_COOKIE)) {
		int rc = auth_request(r->api, authz, &r->key);
		if (rc == 0)
			snprintf(r->workspace, ID_MAX, "%s", r->key.workspace);
		return rc;
	}
	struct session s;
	int slot;
	if (find(r, &s, &slot) < 0)
		return errf(EACCES, "your dashboard session has ended (signed out, expired or kilnd "
			    "restarted): sign in again");
	int rc = auth_key_hash(r->api, s.key_hash, &r->key);
	if (rc == -EACCES) {
		drop(slot);
		return errf(EACCES, "the API key of this session was revoked or expired: sign in with "
			    "another key");
	}
	if (rc < 0)
		return rc;
	const char *origin = req_header(r, "Origin");
	if (origin && !same_origin(r, origin))
		return errf(EPERM, "a session cookie from origin %s is not accepted here", origin);
	if (!origin && req_header(r, "Upgrade"))
		return errf(EPERM, "a WebSocket signed in by cookie must send its Origin");
	if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) {
		const char *csrf = req_header(r, "X-CSRF-Token");
		if (!csrf || !same_secret(csrf, s.csrf))
			return errf(EPERM, "%s needs the session's CSRF token in X-CSRF-Token",
				    r->method);
	}
	snprintf(r->workspace, ID_MAX, "%s", s.workspace);
	return 0;
}

static void cookie(struct req *r, char *out, size_t len, const char *token, int max_age)
{
	snprintf(out, len, "%s=%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Strict%s", SESSION_COOKIE,
		 token, max_age, req_is_tls(r) ? "; Secure" : "");
}

static char *iso_time(int64_t wall, char out[32])
{
	time_t t = (time_t)wall;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
	return out;
}

static json_t *session_json(const struct session *s)
{
	char when[32];
	return json_pack("{s:s,s:s,s:s,s:i}", "workspace_id", s->workspace, "csrf_token", s->csrf,
			 "expires_at", iso_time(s->expires_wall, when), "idle_timeout_seconds",
			 SESSION_IDLE_S);
}

int h_session_create(struct req *r)
{
	const char *key = NULL;
	if (r->json) {
		const char *k;
		json_t *v;
		json_object_foreach(r->json, k, v) {
			if (strcmp(k, "api_key") != 0)
				return reply_error(r, 400, "invalid_request", "unknown field '%s'", k);
		}
		key = json_string_value(json_object_get(r->json, "api_key"));
	}
	if (!key || !*key)
		return reply_error(r, 400, "invalid_request", "api_key (a workspace's API key) is required");
	size_t len = strlen(key);
	if (len > KEY_LEN + 8)
		return reply_error(r, 401, "unauthorized", "malformed API key");
	char bearer[KEY_LEN + 16];
	snprintf(bearer, sizeof bearer, "Bearer %s", key);
	struct session s = { .live = true };
	struct key_auth who;
	int rc = auth_request(r->api, bearer, &who);
	if (rc == 0)
		snprintf(s.workspace, sizeof s.workspace, "%s", who.workspace);
	if (rc == -EACCES)
		return reply_error(r, 401, "unauthorized", "%s", errmsg());
	if (rc < 0)
		return reply_errno(r, rc);
	char token[TOKEN_HEX + 1];
	if ((rc = random_hex(token)) < 0 || (rc = random_hex(s.csrf)) < 0)
		return reply_errno(r, rc);
	key_hash(token, TOKEN_HEX, s.token_hash);
	const char *k = key;
	while (*k == ' ')
		k++;
	size_t kl = strlen(k);
	while (kl > 0 && k[kl - 1] == ' ')
		kl--;
	key_hash(k, kl, s.key_hash);
	s.created = s.used = now_s();
	s.expires_wall = (int64_t)time(NULL) + SESSION_MAX_S;
	/* A free slot, else the one idle longest. */
	pthread_mutex_lock(&lock);
	int best = 0;
	for (int i = 0; i < SESSION_MAX; i++) {
		if (!sessions[i].live || expired(&sessions[i], s.used)) {
			best = i;
			break;
		}
		if (sessions[i].used < sessions[best].used)
			best = i;
	}
	sessions[best] = s;
	pthread_mutex_unlock(&lock);
	char set[256];
	cookie(r, set, sizeof set, token, SESSION_MAX_S);
	const char *h[][2] = { { "Set-Cookie", set }, { "Cache-Control", "no-store" }, { NULL, NULL } };
	return reply_json_headers(r, 201, h, session_json(&s));
}

int h_session_get(struct req *r)
{
	struct session s;
	int slot;
	if (find(r, &s, &slot) < 0)
		return reply_json_headers(r, 200, (const char *const[][2]){ { "Cache-Control", "no-store" }, { NULL, NULL } },
					  json_pack("{s:s,s:n}", "workspace_id", r->workspace, "csrf_token"));
	const char *h[][2] = { { "Cache-Control", "no-store" }, { NULL, NULL } };
	return reply_json_headers(r, 200, h, session_json(&s));
}

int h_session_delete(struct req *r)
{
	struct session s;
	int slot;
	if (find(r, &s, &slot) == 0)
		drop(slot);
	char set[256];
	cookie(r, set, sizeof set, "", 0);
	const char *h[][2] = { { "Set-Cookie", set }, { NULL, NULL } };
	return reply_buf(r, 204, h, NULL, 0);
}
