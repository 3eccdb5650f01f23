/*
 * httpc over libcurl (see httpc.h). Requests run on a multi handle so that
 * a body can be read as it arrives: httpc_start pumps until the headers are
 * in, httpc_read pumps until there are body bytes or the transfer is over.
 */
#include "cli/httpc.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void init_once(void)
{
	static bool done;
	if (!done) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		done = true;
	}
}

int httpc_target_env(struct httpc_target *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof *t);
	t->key_env = "KILN_API_KEY";
	t->key_what = "API key";
	const char *url = getenv("KILN_API_URL");
	const char *key = getenv("KILN_API_KEY");
	const char *ca = getenv("KILN_CA_CERT");
	if (!url || !*url)
		url = "http://127.0.0.1:7070";
	const char *h;
	if (!strncmp(url, "http://", 7)) {
		h = url + 7;
	} else if (!strncmp(url, "https://", 8)) {
		h = url + 8;
		t->tls = true;
	} else {
		snprintf(err, errlen, "KILN_API_URL must start with http:// or https://, not '%s'", url);
		return -1;
	}
	const char *end = h + strcspn(h, "/?#");
	if (*end && strcmp(end, "/")) {
		snprintf(err, errlen, "KILN_API_URL is kilnd's address alone (scheme://host[:port]), not '%s'", url);
		return -1;
	}
	/* [v6]:port or host:port */
	const char *hs = h, *he, *colon;
	if (*h == '[') {
		he = memchr(h, ']', (size_t)(end - h));
		if (!he) {
			snprintf(err, errlen, "KILN_API_URL: bad IPv6 address in '%s'", url);
			return -1;
		}
		he++;
		colon = he < end && *he == ':' ? he : NULL;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		he = colon ? colon : end;
	}
	size_t hl = (size_t)(he - hs);
	if (hl == 0 || hl >= sizeof t->host) {
		snprintf(err, errlen, "KILN_API_URL: no host in '%s'", url);
		return -1;
	}
	memcpy(t->host, hs, hl);
	if (colon) {
		size_t pl = (size_t)(end - colon - 1);
		if (pl == 0 || pl >= sizeof t->port || strspn(colon + 1, "0123456789") < pl) {
			snprintf(err, errlen, "KILN_API_URL: bad port in '%s'", url);
			return -1;
		}
		memcpy(t->port, colon + 1, pl);
	} else {
		snprintf(t->port, sizeof t->port, "%s", t->tls ? "443" : "80");
	}
	snprintf(t->base, sizeof t->base, "%s://%s:%s", t->tls ? "https" : "http", t->host, t->port);
	if (key && strlen(key) >= sizeof t->key) {
		snprintf(err, errlen, "KILN_API_KEY is too long to be a key");
		return -1;
	}
	if (key)
		snprintf(t->key, sizeof t->key, "%s", key);
	if (ca && *ca) {
		if (access(ca, R_OK) != 0) {
			snprintf(err, errlen, "KILN_CA_CERT: %s: %s", ca, strerror(errno));
			return -1;
		}
		snprintf(t->ca, sizeof t->ca, "%s", ca);
	}
	return 0;
}

/* What went wrong, in words a user can act on. */
static void explain(char *out, size_t len, const struct httpc_target *t, CURLcode rc, const char *errbuf)
{
	const char *detail = errbuf && *errbuf ? errbuf : curl_easy_strerror(rc);
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
		snprintf(out, len, "cannot reach kilnd at %s: %s (is it running? KILN_API_URL)", t->base, detail);
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
		snprintf(out, len, "TLS with kilnd at %s failed: %s (%s)", t->base, detail,
			 t->ca[0] ? "verified against KILN_CA_CERT" : "a private CA? set KILN_CA_CERT");
		break;
	case CURLE_GOT_NOTHING:
		snprintf(out, len, "kilnd at %s answered nothing: %s%s", t->base, detail,
			 t->tls ? "" : " (does it serve HTTPS? then KILN_API_URL=https://...)");
		break;
	default:
		snprintf(out, len, "kilnd at %s: %s", t->base, detail);
	}
}

static void common(CURL *e, const struct httpc_target *t, char *errbuf)
{
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "kiln-cli");
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (t->ca[0]) {
		curl_easy_setopt(e, CURLOPT_CAINFO, t->ca);
		curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
	}
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct httpc *c = arg;
	size_t len = size * n;
	if (len >= 13 && !strncasecmp(p, "Content-Type:", 13)) {
		const char *v = p + 13;
		while (*v == ' ')
			v++;
		size_t vl = len - (size_t)(v - p);
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
			vl--;
		snprintf(c->content_type, sizeof c->content_type, "%.*s", (int)vl, v);
	}
	if ((len == 2 && p[0] == '\r') || (len == 1 && p[0] == '\n')) {
		long code = 0;
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200)	/* not a 100 Continue */
			c->headers_done = true;
		c->status = (int)code;
	}
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct httpc *c = arg;
	size_t len = size * n;
	if (c->off == c->len)
		c->off = c->len = 0;
	if (c->len + len > c->cap) {
		size_t cap = c->cap ? c->cap : 65536;
		while (cap < c->len + len)
			cap *= 2;
		char *b = realloc(c->buf, cap);
		if (!b)
			return 0;	/* an error: the transfer stops */
		c->buf = b;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, p, len);
	c->len += len;
	c->headers_done = true;
	return len;
}

static size_t on_read(char *p, size_t size, size_t n, void *arg)
{
	struct httpc *c = arg;
	for (;;) {
		ssize_t r = read(c->body_fd, p, size * n);
		if (r < 0 && errno == EINTR)
			continue;
		return r < 0 ? CURL_READFUNC_ABORT : (size_t)r;
	}
}

/* Run the transfer until until(c) holds or it is over. */
static int pump(struct httpc *c, bool (*until)(struct httpc *c))
{
	while (!c->done && !until(c)) {
		int running = 0;
		CURLMcode m = curl_multi_perform(c->multi, &running);
		if (m != CURLM_OK) {
			snprintf(c->error, sizeof c->error, "libcurl: %s", curl_multi_strerror(m));
			return -1;
		}
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(c->multi, &left)))
			if (msg->msg == CURLMSG_DONE) {
				c->done = true;
				c->result = msg->data.result;
			}
		if (!running)
			c->done = true;
		if (c->done || until(c))
			break;
		if (curl_multi_poll(c->multi, NULL, 0, 1000, NULL) != CURLM_OK)
			return -1;
	}
	if (c->done && c->result != CURLE_OK) {
		if (c->status && c->result == CURLE_PARTIAL_FILE)
			snprintf(c->error, sizeof c->error, "kilnd closed the connection mid-answer");
		else
			explain(c->error, sizeof c->error, c->t, (CURLcode)c->result, c->errbuf);
		return -1;
	}
	return 0;
}

static bool have_headers(struct httpc *c) { return c->headers_done; }
static bool have_body(struct httpc *c) { return c->off < c->len; }

int httpc_start(struct httpc *c, const struct httpc_target *t, const char *method,
		const char *path, const char *extra_headers, const void *body, size_t len,
		int body_fd, int64_t body_fd_len)
{
	init_once();
	memset(c, 0, sizeof *c);
	c->t = t;
	c->body_fd = body_fd;
	CURL *e = curl_easy_init();
	c->easy = e;
	c->multi = curl_multi_init();
	if (!e || !c->multi) {
		snprintf(c->error, sizeof c->error, "libcurl: out of memory");
		return -1;
	}
	common(e, t, c->errbuf);
	char *url;
	if (asprintf(&url, "%s%s", t->base, path) < 0)
		return -1;
	curl_easy_setopt(e, CURLOPT_URL, url);
	free(url);
	struct curl_slist *h = NULL;
	h = curl_slist_append(h, "Expect:");	/* no 100-continue round trip */
	if (t->key[0]) {
		char auth[160];
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", t->key);
		h = curl_slist_append(h, auth);
	}
	if (extra_headers) {
		char *dup = strdup(extra_headers), *save = NULL;
		for (char *l = strtok_r(dup, "\r\n", &save); l; l = strtok_r(NULL, "\r\n", &save))
			h = curl_slist_append(h, l);
		free(dup);
	}
	c->headers = h;
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	if (body_fd >= 0) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, c);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body_fd_len);
	} else if (body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, len ? body : "");
	}
	if (strcmp(method, "GET") || body || body_fd >= 0)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_multi_add_handle(c->multi, e);
	if (pump(c, have_headers) < 0)
		return -1;
	if (!c->status) {
		long code = 0;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
		c->status = (int)code;
	}
	return 0;
}

long httpc_read(struct httpc *c, void *p, size_t n)
{
	if (c->off == c->len && pump(c, have_body) < 0)
		return -1;
	size_t have = c->len - c->off;
	if (have == 0)
		return 0;
	if (n > have)
		n = have;
	memcpy(p, c->buf + c->off, n);
	c->off += n;
	return (long)n;
}

int httpc_read_all(struct httpc *c, char **out, size_t *lenp, size_t max)
{
	size_t cap = 65536, len = 0;
	char *b = malloc(cap + 1);
	for (;;) {
		if (!b) {
			snprintf(c->error, sizeof c->error, "out of memory");
			return -1;
		}
		if (len == cap) {
			if (cap >= max) {
				free(b);
				snprintf(c->error, sizeof c->error, "kilnd's answer is larger than %zu bytes", max);
				return -1;
			}
			cap *= 2;
			b = realloc(b, cap + 1);
			continue;
		}
		long r = httpc_read(c, b + len, cap - len);
		if (r < 0) {
			free(b);
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	b[len] = 0;
	*out = b;
	if (lenp)
		*lenp = len;
	return 0;
}

void httpc_close(struct httpc *c)
{
	if (c->multi && c->easy)
		curl_multi_remove_handle(c->multi, c->easy);
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	curl_slist_free_all(c->headers);
	free(c->buf);
	c->easy = c->multi = c->headers = NULL;
	c->buf = NULL;
}

/* ---- the WebSocket's connection -------------------------------------------------------- */

static int wait_fd(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int r;
	while ((r = poll(&p, 1, 30000)) < 0 && errno == EINTR)
		;
	return r > 0 ? 0 : -1;
}

int httpc_ws_send(struct httpc_ws *w, const void *p, size_t n)
{
	const char *s = p;
	while (n > 0) {
		size_t sent = 0;
		CURLcode rc = curl_easy_send(w->easy, s, n, &sent);
		if (rc == CURLE_AGAIN) {
			if (wait_fd(w->fd, POLLOUT) < 0)
				return -1;
			continue;
		}
		if (rc != CURLE_OK) {
			snprintf(w->error, sizeof w->error, "sending to kilnd: %s", curl_easy_strerror(rc));
			return -1;
		}
		s += sent;
		n -= sent;
	}
	return 0;
}

long httpc_ws_recv(struct httpc_ws *w, void *p, size_t n)
{
	size_t got = 0;
	CURLcode rc = curl_easy_recv(w->easy, p, n, &got);
	if (rc == CURLE_AGAIN)
		return -2;
	if (rc != CURLE_OK) {
		snprintf(w->error, sizeof w->error, "reading from kilnd: %s", curl_easy_strerror(rc));
		return -1;
	}
	return (long)got;
}

int httpc_ws_open(struct httpc_ws *w, const struct httpc_target *t, const char *path, const char *ws_key)
{
	init_once();
	memset(w, 0, sizeof *w);
	w->fd = -1;
	CURL *e = curl_easy_init();
	w->easy = e;
	if (!e) {
		snprintf(w->error, sizeof w->error, "libcurl: out of memory");
		return -1;
	}
	common(e, t, w->errbuf);
	char *url;
	if (asprintf(&url, "%s%s", t->base, path) < 0)
		return -1;
	curl_easy_setopt(e, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
	/* ALPN must not pick HTTP/2: the Upgrade below is HTTP/1.1's. */
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	CURLcode rc = curl_easy_perform(e);
	if (rc != CURLE_OK) {
		explain(w->error, sizeof w->error, t, rc, w->errbuf);
		return -1;
	}
	curl_socket_t s;
	if (curl_easy_getinfo(e, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK || s == CURL_SOCKET_BAD) {
		snprintf(w->error, sizeof w->error, "libcurl gave no socket");
		return -1;
	}
	w->fd = (int)s;
	char req[8192 + 1024];
	int n = snprintf(req, sizeof req,
			 "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: kiln-cli\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n%s%s%s\r\n",
			 path, t->host, t->port, ws_key, t->key[0] ? "Authorization: Bearer " : "", t->key,
			 t->key[0] ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof req) {
		snprintf(w->error, sizeof w->error, "request too long");
		return -1;
	}
	if (httpc_ws_send(w, req, (size_t)n) < 0)
		return -1;
	/* The answer's head, then (101) frames, or (an error) a body. */
	char head[65536];
	size_t len = 0;
	char *end = NULL;
	while (!end) {
		if (len == sizeof head - 1) {
			snprintf(w->error, sizeof w->error, "kilnd's answer head is too long");
			return -1;
		}
		long r = httpc_ws_recv(w, head + len, sizeof head - 1 - len);
		if (r == -2) {
			if (wait_fd(w->fd, POLLIN) < 0) {
				snprintf(w->error, sizeof w->error, "kilnd did not answer the terminal's request");
				return -1;
			}
			continue;
		}
		if (r <= 0) {
			if (r == 0)
				snprintf(w->error, sizeof w->error, "kilnd closed the connection");
			return -1;
		}
		len += (size_t)r;
		head[len] = 0;
		end = strstr(head, "\r\n\r\n");
	}
	if (sscanf(head, "HTTP/1.%*d %d", &w->status) != 1) {
		snprintf(w->error, sizeof w->error, "kilnd's answer is not HTTP");
		return -1;
	}
	size_t used = (size_t)(end + 4 - head), rest = len - used;
	if (w->status == 101) {
		if (rest > sizeof w->extra)
			rest = sizeof w->extra;
		memcpy(w->extra, end + 4, rest);
		w->extra_len = rest;
		return 0;
	}
	/* An error: its body, up to what Content-Length says (or EOF). */
	long want = -1;
	const char *cl = strcasestr(head, "\r\nContent-Length:");
	if (cl && cl < end)
		want = strtol(cl + 17, NULL, 10);
	size_t cap = 65536, bl = rest;
	char *body = malloc(cap + 1);
	if (!body)
		return -1;
	memcpy(body, end + 4, rest < cap ? rest : cap);
	while ((want < 0 || (long)bl < want) && bl < cap) {
		long r = httpc_ws_recv(w, body + bl, cap - bl);
		if (r == -2) {
			if (wait_fd(w->fd, POLLIN) < 0)
				break;
			continue;
		}
		if (r <= 0)
			break;
		bl += (size_t)r;
	}
	body[bl] = 0;
	w->body = body;
	return 0;
}

void httpc_ws_close(struct httpc_ws *w)
{
	if (w->easy)
		curl_easy_cleanup(w->easy);
	free(w->body);
	w->easy = NULL;
	w->body = NULL;
}

char *httpc_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *o = out;
	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    strchr("-_.~/", ch)) {
			*o++ = (char)ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = 0;
	return out;
}
