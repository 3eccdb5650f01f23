/* Unit tests for kilnd's request handling pieces: route matching,
 * validation, the rate limiter, output rendering, WebSocket framing,
 * errno-to-status mapping and disk chains. */
#include "host/disk.h"
#include "host/dns.h"
#include "host/fsutil.h"
#include "net/netpolicy.h"
#include "host/proc.h"
#include "net/net.h"
#include "api/http.h"
#include "api/inflight.h"
#include "api/ratelimit.h"
#include "api/render.h"
#include "api/routes.h"
#include "ops/validate.h"
#include "api/ws.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The guests' nameservers from a resolv.conf: IPv4, not loopback, 3 at
 * most; an ExecResult has every field even with no output. */
static void dns_servers_from_resolv_conf(void)
{
	char path[] = "/tmp/kiln-unit-resolv.XXXXXX", out[DNS_LIST_MAX];
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	static const char text[] = "# comment\nnameserver 127.0.0.53\nnameserver ::1\noptions edns0\n"
				   "nameserver 192.0.2.53\n  nameserver\t10.0.0.1 # trailing\nnameserver 0.0.0.0\n"
				   "nameserver 10.0.0.2\nnameserver 10.0.0.3\nnameserver 10.0.0.4\n";
	CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
	close(fd);
	dns_from_resolv_conf(path, out);
	CHECK(strcmp(out, "192.0.2.53,10.0.0.1,10.0.0.2") == 0);
	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0 && write(fd, "nameserver 127.0.0.53\n", 22) == 22);
	close(fd);
	dns_from_resolv_conf(path, out);
	CHECK(out[0] == 0);	/* a loopback stub only: nothing for a guest */
	unlink(path);
	dns_from_resolv_conf("/nonexistent/resolv.conf", out);
	CHECK(out[0] == 0);
	CHECK(dns_list_valid("192.0.2.1") && dns_list_valid("1.1.1.1,8.8.8.8,9.9.9.9"));
	CHECK(!dns_list_valid("") && !dns_list_valid("1.1.1.1,") && !dns_list_valid("a.b.c.d") &&
	      !dns_list_valid("1.1.1.1,2.2.2.2,3.3.3.3,4.4.4.4") && !dns_list_valid("::1"));
	char conf[256];
	dns_resolv_conf("192.0.2.53,10.0.0.1", conf, sizeof conf);
	CHECK(strstr(conf, "\nnameserver 192.0.2.53\nnameserver 10.0.0.1\n") != NULL);
	json_t *j = render_exec_result(NULL, 0, NULL, 0, 0, 0, false, 1.5, false);
	CHECK(j && json_object_size(j) == 7 && !strcmp(json_string_value(json_object_get(j, "stdout")), "") &&
	      !strcmp(json_string_value(json_object_get(j, "stderr")), "") &&
	      json_is_null(json_object_get(j, "signal")) && json_is_false(json_object_get(j, "truncated")));
	json_decref(j);
}

static void routes_match_and_capture(void)
{
	char *p[MAX_PATH_PARAMS];
	int n;
	bool known;
	const struct route *r = route_match("POST", "/v1/sandboxes/sbx_abc/exec", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && !strcmp(r->pattern, "/v1/sandboxes/{id}/exec") && n == 1 && !strcmp(p[0], "sbx_abc"));
	while (n > 0)
		free(p[--n]);
	r = route_match("POST", "/v1/sandboxes/sbx_abc/exec/stream", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && r->fn && !strcmp(r->pattern, "/v1/sandboxes/{id}/exec/stream"));
	while (n > 0)
		free(p[--n]);
	CHECK(!route_match("PUT", "/v1/sandboxes", p, MAX_PATH_PARAMS, &n, &known) && known && n == 0);
	CHECK(!route_match("GET", "/v1/nothing", p, MAX_PATH_PARAMS, &n, &known) && !known);
	CHECK(!route_match("GET", "/v1/sandboxes/", p, MAX_PATH_PARAMS, &n, &known));
	CHECK(!route_match("GET", "/v1/sandboxes//files", p, MAX_PATH_PARAMS, &n, &known));
	CHECK(!route_match("GET", "/healthz/x", p, MAX_PATH_PARAMS, &n, &known));
	r = route_match("GET", "/healthz", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && (r->flags & ROUTE_PUBLIC));
	/* Every route has a handler, and only these skip the API key: health,
	 * metrics, the dashboard's files and its sign-in, and the cluster's
	 * join (a join token) and heartbeat (a host's credential). */
	static const char *const public_routes[] = {
		"GET /healthz", "GET /metrics", "GET /", "GET /dashboard/{path}", "POST /v1/session",
		"POST /v1/cluster/join", "POST /v1/cluster/heartbeat", NULL
	};
	int pub = 0;
	for (size_t i = 0; i < nroutes; i++) {
		CHECK(routes[i].fn != NULL);
		if (!(routes[i].flags & ROUTE_PUBLIC))
			continue;
		char name[160];
		snprintf(name, sizeof name, "%s %s", routes[i].method, routes[i].pattern);
		bool listed = false;
		for (int k = 0; public_routes[k]; k++)
			listed |= strcmp(name, public_routes[k]) == 0;
		if (!listed)
			fprintf(stderr, "  route %s is public\n", name);
		CHECK(listed);
		pub++;
	}
	CHECK(pub == 7);
}

static json_t *js(const char *s)
{
	return json_loads(s, 0, NULL);
}

static void validation_is_strict(void)
{
	static const char *const keys[] = { "template", "ttl_seconds", "env", "argv", NULL };
	json_t *j = js("{\"template\":\"base\",\"ttl_seconds\":5}");
	const char *s = NULL;
	int64_t n = 0;
	CHECK(v_known_keys(j, keys) == 0);
	CHECK(v_str(j, "template", true, 16, &s) == 0 && !strcmp(s, "base"));
	CHECK(v_int(j, "ttl_seconds", false, 0, 10, &n) == 0 && n == 5);
	CHECK(v_int(j, "ttl_seconds", false, 0, 4, &n) == -EINVAL);
	CHECK(v_str(j, "template", true, 3, &s) == -EINVAL);	/* too long */
	CHECK(v_str(j, "missing", true, 3, &s) == -EINVAL);
	CHECK(v_str(j, "missing", false, 3, &s) == 0);
	json_decref(j);
	j = js("{\"template\":\"base\",\"bogus\":1}");
	CHECK(v_known_keys(j, keys) == -EINVAL && strstr(errmsg(), "bogus"));
	json_decref(j);
	j = js("{\"ttl_seconds\":\"5\",\"template\":7}");	/* wrong types */
	CHECK(v_int(j, "ttl_seconds", false, 0, 10, &n) == -EINVAL);
	CHECK(v_str(j, "template", false, 10, &s) == -EINVAL);
	json_decref(j);
	j = js("{\"ttl_seconds\":1.5,\"template\":null}");	/* a real is not an integer; null is absent */
	s = "kept";
	CHECK(v_int(j, "ttl_seconds", false, 0, 10, &n) == -EINVAL);
	CHECK(v_str(j, "template", false, 10, &s) == 0 && !strcmp(s, "kept"));
	json_decref(j);
	json_t *m = NULL;
	j = js("{\"env\":{\"A_1\":\"x\",\"_b\":\"\"}}");
	CHECK(v_str_map(j, "env", 4, 8, 8, true, &m) == 0 && json_object_size(m) == 2);
	json_decref(j);
	j = js("{\"env\":{\"1A\":\"x\"}}");
	CHECK(v_str_map(j, "env", 4, 8, 8, true, &m) == -EINVAL);
	json_decref(j);
	j = js("{\"env\":{\"A\":1}}");
	CHECK(v_str_map(j, "env", 4, 8, 8, true, &m) == -EINVAL);
	json_decref(j);
	j = js("{\"env\":{\"A\":\"x\",\"B\":\"y\",\"C\":\"z\"}}");
	CHECK(v_str_map(j, "env", 2, 8, 8, true, &m) == -EINVAL);	/* too many */
	json_decref(j);
	const char **argv = NULL;
	j = js("{\"argv\":[\"ls\",\"-la\"]}");
	CHECK(v_str_array(j, "argv", 4, 16, &argv) == 0 && argv && !strcmp(argv[1], "-la") && !argv[2]);
	free(argv);
	json_decref(j);
	j = js("{\"argv\":[]}");
	CHECK(v_str_array(j, "argv", 4, 16, &argv) == -EINVAL);
	json_decref(j);
	j = js("{\"argv\":[\"ls\",3]}");
	CHECK(v_str_array(j, "argv", 4, 16, &argv) == -EINVAL);
	json_decref(j);
	CHECK(v_known_keys(NULL, keys) == 0);	/* an empty body is {} */
}

static void ids_names_and_paths(void)
{
	CHECK(v_is_id("sbx_abc123", "sbx_"));
	CHECK(!v_is_id("sbx_", "sbx_") && !v_is_id("sbx_ABC", "sbx_") && !v_is_id("snap_a", "sbx_"));
	CHECK(!v_is_id("sbx_../../etc", "sbx_") && !v_is_id("sbx_a/b", "sbx_"));
	CHECK(!v_is_id("sbx_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "sbx_"));	/* 33 characters */
	CHECK(v_is_name("base") && v_is_name("my-tmpl2") && !v_is_name("-x") && !v_is_name("Base"));
	CHECK(!v_is_name("a234567890abcdefg") && !v_is_name("") && !v_is_name("../x"));
	CHECK(v_guest_path("/etc/passwd", "path") == 0);
	CHECK(v_guest_path("/../../etc/passwd", "path") == 0);	/* a guest path, literal */
	CHECK(v_guest_path("etc/passwd", "path") == -EINVAL);
	CHECK(v_guest_path("", "path") == -EINVAL && v_guest_path(NULL, "path") == -EINVAL);
	char *long_path = malloc(5000);
	memset(long_path, 'a', 4999);
	long_path[0] = '/';
	long_path[4999] = 0;
	CHECK(v_guest_path(long_path, "path") == -EINVAL);
	free(long_path);
}

static void rate_limits_per_key(void)
{
	struct ratelimit *rl = ratelimit_new(1, 3);
	int retry;
	CHECK(ratelimit_take(rl, "ws_a", &retry) && ratelimit_take(rl, "ws_a", &retry) &&
	      ratelimit_take(rl, "ws_a", &retry));
	CHECK(!ratelimit_take(rl, "ws_a", &retry) && retry > 0 && retry <= 1001);
	CHECK(ratelimit_take(rl, "ws_b", &retry));	/* another workspace has its own bucket */
	ratelimit_free(rl);
	rl = ratelimit_new(0, 0);	/* no limit */
	for (int i = 0; i < 1000; i++)
		CHECK(ratelimit_take(rl, "ws_a", &retry));
	ratelimit_free(rl);
}

static void inflight_caps_per_key(void)
{
	struct inflight *t = inflight_new(2);
	bool c1, c2, c3, cb;
	CHECK(inflight_enter(t, "ws_a", &c1) && c1 && inflight_enter(t, "ws_a", &c2) && c2);
	CHECK(!inflight_enter(t, "ws_a", &c3) && !c3);	/* the third waits */
	CHECK(inflight_enter(t, "ws_b", &cb) && cb);	/* another workspace has its own */
	inflight_leave(t, "ws_a");
	CHECK(inflight_count(t, "ws_a") == 1 && inflight_enter(t, "ws_a", &c3) && c3);
	inflight_leave(t, "ws_a");
	inflight_leave(t, "ws_a");
	inflight_leave(t, "ws_b");
	CHECK(inflight_count(t, "ws_a") == 0 && inflight_count(t, "ws_b") == 0);
	/* A full table lets a new key through uncounted. */
	char key[32];
	for (int i = 0; i < 1024; i++) {
		snprintf(key, sizeof key, "ws_%d", i);
		CHECK(inflight_enter(t, key, &c1) && c1);
	}
	CHECK(inflight_enter(t, "ws_late", &c1) && !c1);
	inflight_free(t);
	t = inflight_new(0);	/* no cap */
	for (int i = 0; i < 1000; i++)
		CHECK(inflight_enter(t, "ws_a", &c1) && !c1);
	inflight_free(t);
	/* Amounts: bytes held, up to the cap, given back as counted. */
	t = inflight_new(1000);
	CHECK(inflight_take(t, "ws_a", 600, &c1) == 600 && c1);
	CHECK(inflight_take(t, "ws_a", 600, &c2) == 400 && c2);	/* what is left */
	CHECK(inflight_take(t, "ws_a", 1, &c3) == 0);
	CHECK(inflight_take(t, "ws_b", 1000, &cb) == 1000);
	inflight_give(t, "ws_a", 600);
	CHECK(inflight_count(t, "ws_a") == 400 && inflight_take(t, "ws_a", 700, &c3) == 600);
	inflight_give(t, "ws_a", 1000);
	CHECK(inflight_count(t, "ws_a") == 0 && inflight_count(t, "ws_b") == 1000);
	inflight_free(t);
}

static void output_becomes_valid_json(void)
{
	CHECK(utf8_valid("h\xc3\xa9llo", 6) && utf8_valid("a\0b", 3));
	CHECK(!utf8_valid("\xff", 1) && !utf8_valid("\xc3", 1) && !utf8_valid("\xed\xa0\x80", 3));
	CHECK(!utf8_valid("\xc0\xaf", 2));	/* overlong */
	json_t *j = render_text("a\xff" "b", 3);
	CHECK(j && !strcmp(json_string_value(j), "a\xef\xbf\xbd" "b"));
	json_decref(j);
	char *b = base64_of("hi!", 3);
	CHECK(b && !strcmp(b, "aGkh"));
	free(b);
	j = render_time(1700000000123LL);
	CHECK(j && !strcmp(json_string_value(j), "2023-11-14T22:13:20.123Z"));
	json_decref(j);
}

static void errno_maps_to_status(void)
{
	const char *code;
	CHECK(errno_status(-ENOENT, &code) == 404 && !strcmp(code, "not_found"));
	CHECK(errno_status(-EINVAL, &code) == 400);
	CHECK(errno_status(-EBUSY, &code) == 409 && !strcmp(code, "conflict"));
	CHECK(errno_status(-EAGAIN, &code) == 503 && !strcmp(code, "no_capacity"));
	CHECK(errno_status(-EFBIG, &code) == 413);
	CHECK(errno_status(-ENOTSUP, &code) == 501);
	CHECK(errno_status(-ETIMEDOUT, &code) == 504);
	CHECK(errno_status(-ECONNRESET, &code) == 502);
	CHECK(errno_status(-EIO, &code) == 500);
}

/* A client frame: masked. */
static size_t client_frame(uint8_t *out, int op, bool fin, const char *data, size_t n)
{
	static const uint8_t mask[4] = { 1, 2, 3, 4 };
	size_t h = 0;
	out[h++] = (fin ? 0x80 : 0) | op;
	if (n < 126) {
		out[h++] = 0x80 | n;
	} else {
		out[h++] = 0x80 | 126;
		out[h++] = n >> 8;
		out[h++] = n & 0xff;
	}
	memcpy(out + h, mask, 4);
	h += 4;
	for (size_t i = 0; i < n; i++)
		out[h + i] = data[i] ^ mask[i & 3];
	return h + n;
}

static void websocket_frames(void)
{
	char acc[29];
	/* RFC 6455, section 1.3. */
	CHECK(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", acc) == 0 &&
	      !strcmp(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
	CHECK(ws_accept_key("short", acc) < 0 && ws_accept_key(NULL, acc) < 0);
	struct ws_reader r;
	CHECK(ws_reader_init(&r) == 0);
	uint8_t f[600];
	size_t n = client_frame(f, WS_BINARY, true, "abc", 3);
	n += client_frame(f + n, WS_TEXT, false, "{\"type\":", 8);
	n += client_frame(f + n, WS_PING, true, "p", 1);	/* control frames interleave */
	n += client_frame(f + n, WS_CONT, true, "\"resize\"}", 9);
	/* Fed in two pieces: a frame split across reads. */
	CHECK(ws_reader_feed(&r, f, 5) == 0);
	int op;
	const uint8_t *d;
	size_t len;
	CHECK(ws_next(&r, &op, &d, &len) == 0);
	CHECK(ws_reader_feed(&r, f + 5, n - 5) == 0);
	CHECK(ws_next(&r, &op, &d, &len) == 1 && op == WS_BINARY && len == 3 && !memcmp(d, "abc", 3));
	CHECK(ws_next(&r, &op, &d, &len) == 1 && op == WS_PING && len == 1);
	CHECK(ws_next(&r, &op, &d, &len) == 1 && op == WS_TEXT && len == 17 && !memcmp(d, "{\"type\":\"resize\"}", 17));
	CHECK(ws_next(&r, &op, &d, &len) == 0);
	/* An unmasked client frame is a protocol error. */
	uint8_t bad[] = { 0x82, 0x01, 'x' };
	CHECK(ws_reader_feed(&r, bad, sizeof bad) == 0 && ws_next(&r, &op, &d, &len) == -EPROTO);
	ws_reader_free(&r);
	CHECK(ws_reader_init(&r) == 0);
	uint8_t huge[] = { 0x82, 0xff, 0, 0, 0, 0, 0x7f, 0, 0, 0, 1, 2, 3, 4 };
	CHECK(ws_reader_feed(&r, huge, sizeof huge) == 0 && ws_next(&r, &op, &d, &len) == -EMSGSIZE);
	ws_reader_free(&r);
}

/* dir_bytes counts the blocks of the regular files below a VM's
 * directory, a sparse file by what it holds, and nothing a link points
 * at (the VMM may have planted one to a large host file). */
static void dir_bytes_counts_own_blocks(void)
{
	char d[] = "/tmp/kiln-bytes.XXXXXX", p[256];
	CHECK(mkdtemp(d) != NULL);
	snprintf(p, sizeof p, "%s/sub", d);
	CHECK(mkdir(p, 0700) == 0);
	char buf[65536];
	memset(buf, 7, sizeof buf);
	snprintf(p, sizeof p, "%s/sub/mem", d);
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 512 << 20) == 0);	/* 512 MiB sparse */
	for (int i = 0; i < 16; i++)	/* 1 MiB written */
		CHECK(pwrite(fd, buf, sizeof buf, (off_t)i * (32 << 20)) == (ssize_t)sizeof buf);
	close(fd);
	snprintf(p, sizeof p, "%s/disk", d);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	for (int i = 0; i < 32; i++)	/* 2 MiB */
		CHECK(write(fd, buf, sizeof buf) == (ssize_t)sizeof buf);
	close(fd);
	int64_t own = dir_bytes(d);
	CHECK(own >= (3 << 20) && own < (4 << 20));
	/* Links to a big file and to a directory outside: not counted. */
	char big[] = "/tmp/kiln-bytes-big.XXXXXX";
	fd = mkstemp(big);
	for (int i = 0; fd >= 0 && i < 64; i++)
		CHECK(write(fd, buf, sizeof buf) == (ssize_t)sizeof buf);
	if (fd >= 0)
		close(fd);
	snprintf(p, sizeof p, "%s/link", d);
	CHECK(symlink(big, p) == 0);
	snprintf(p, sizeof p, "%s/dirlink", d);
	CHECK(symlink("/usr", p) == 0);
	CHECK(dir_bytes(d) == own);
	CHECK(dir_bytes(big) == 0 && dir_bytes("/nonexistent/kiln") == 0);
	unlink(big);
	CHECK(rmtree(d) == 0);
}

static void disk_chains_follow_headers(void)
{
	char dir[] = "/tmp/kiln-unit-disk.XXXXXX", base[256], a[256], b[256], t[64];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(t, sizeof t, "%s/templates", dir);
	CHECK(mkdir(t, 0755) == 0);
	snprintf(base, sizeof base, "%s/root.raw", t);
	snprintf(a, sizeof a, "%s/a", t);
	snprintf(b, sizeof b, "%s/b", t);
	FILE *f = fopen(base, "w");
	CHECK(f && ftruncate(fileno(f), 1 << 20) == 0);
	if (f)
		fclose(f);
	CHECK(disk_create(a, base) == 0);
	CHECK(disk_seal(a) == 0);
	CHECK(disk_create(b, a) == 0);
	CHECK(disk_create(b, a) < 0);		/* exists */
	CHECK(disk_create("rel", base) < 0);	/* relative paths are refused */
	char chain[4][PATH_MAX];
	int n = 0;
	CHECK(disk_chain(dir, b, chain, 4, &n) == 0 && n == 3);
	CHECK(n == 3 && !strcmp(chain[0], b) && !strcmp(chain[1], a) && !strcmp(chain[2], base));
	CHECK(disk_chain(dir, b, chain, 2, &n) == -ELOOP);

	/* A header is the VMM's to write (issue 15): a base outside kiln's
	 * directories, or reached through a symlink, is refused, and so is
	 * flattening such a chain. */
	char out[256], link[256], c[256], flat[256];
	snprintf(out, sizeof out, "%s/outside.raw", dir);
	snprintf(link, sizeof link, "%s/link.raw", t);
	snprintf(c, sizeof c, "%s/c", t);
	snprintf(flat, sizeof flat, "%s/flat", t);
	f = fopen(out, "w");
	CHECK(f && ftruncate(fileno(f), 1 << 20) == 0);
	if (f)
		fclose(f);
	CHECK(disk_create(c, out) == 0);
	CHECK(disk_chain(dir, c, chain, 4, &n) == -EPERM);
	CHECK(disk_flatten(dir, c, flat) == -EPERM && access(flat, F_OK) < 0);
	unlink(c);
	CHECK(symlink(out, link) == 0);
	CHECK(disk_create(c, link) == 0);
	CHECK(disk_chain(dir, c, chain, 4, &n) == -EPERM);
	CHECK(disk_flatten(dir, b, flat) == 0);	/* confined chains still flatten */
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

/* Egress policies: canonical text, defaults, and bad values named. */
static void net_policies(void)
{
	char *text = NULL;
	json_t *b = json_loads("{\"template\":\"minimal\"}", 0, NULL);
	CHECK(netpolicy_from_request(b, &text) == 0 && text == NULL);	/* no policy given */
	json_decref(b);
	b = json_loads("{\"allow_out\":[\"10.1.2.3/8\",\"192.0.2.7\"],\"deny_out\":null}", 0, NULL);
	CHECK(netpolicy_from_request(b, &text) == 0 && text &&
	      !strcmp(text, "{\"allow_internet\":true,\"allow_out\":[\"10.0.0.0/8\",\"192.0.2.7/32\"],\"deny_out\":[]}"));
	struct net_policy p;
	CHECK(netpolicy_parse(text, &p) == 0 && p.allow_internet && p.nallow == 2 && p.ndeny == 0 &&
	      p.allow[0].addr == 0x0a000000 && p.allow[0].bits == 8 && p.allow[1].bits == 32);
	free(text);
	json_decref(b);
	CHECK(netpolicy_parse(NULL, &p) == 0 && p.allow_internet && p.nallow == 0);
	static const char *const bad[][2] = {
		{ "{\"allow_out\":[\"10.0.0.300/8\"]}", "10.0.0.300/8" },
		{ "{\"deny_out\":[\"1.2.3.4/33\"]}", "1.2.3.4/33" },
		{ "{\"deny_out\":\"10.0.0.0/8\"}", "deny_out" },
		{ "{\"allow_out\":[42]}", "allow_out" },
		{ "{\"allow_internet\":\"no\"}", "allow_internet" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		b = json_loads(bad[i][0], 0, NULL);
		text = NULL;
		int rc = netpolicy_from_request(b, &text);
		CHECK(rc == -EINVAL && !text && strstr(errmsg(), bad[i][1]));
		json_decref(b);
	}
	json_t *r = netpolicy_render("{\"allow_internet\":false}");
	CHECK(json_is_false(json_object_get(r, "allow_internet")) &&
	      json_array_size(json_object_get(r, "allow_out")) == 0 && !json_object_get(r, "workspace_ports"));
	json_decref(r);
	/* A database's inbound ports (net/net.h): kept in the canonical
	 * text, parsed, bounded; a policy without them has none. */
	b = json_loads("{\"workspace_ports\":[5432]}", 0, NULL);
	CHECK(netpolicy_from_request(b, &text) == 0 && text &&
	      !strcmp(text, "{\"allow_internet\":true,\"allow_out\":[],\"deny_out\":[],\"workspace_ports\":[5432]}"));
	CHECK(netpolicy_parse(text, &p) == 0 && p.nws_ports == 1 && p.ws_ports[0] == 5432 && p.workspace == 0);
	free(text);
	json_decref(b);
	CHECK(netpolicy_parse("{\"allow_internet\":true}", &p) == 0 && p.nws_ports == 0);
	static const char *const bad_ports[] = { "{\"workspace_ports\":[0]}", "{\"workspace_ports\":[70000]}",
						 "{\"workspace_ports\":\"5432\"}", "{\"workspace_ports\":[1,2,3,4,5]}" };
	for (size_t i = 0; i < sizeof bad_ports / sizeof bad_ports[0]; i++) {
		b = json_loads(bad_ports[i], 0, NULL);
		text = NULL;
		CHECK(netpolicy_from_request(b, &text) == -EINVAL && !text && strstr(errmsg(), "workspace_ports"));
		json_decref(b);
	}
	/* Workspaces' marks: never 0, and two workspaces' differ. */
	CHECK(net_workspace_mark("ws_a") != 0 && net_workspace_mark("ws_a") != net_workspace_mark("ws_b") &&
	      net_workspace_mark("ws_a") == net_workspace_mark("ws_a"));
}

/* Metering's readings of a real process (host/proc.h): CPU time it burnt,
 * no guest time without a vCPU, and its proportional set size: 64 MiB
 * of its own pages count in full, and in half each once a forked child
 * shares them untouched. */
static pid_t toucher(int ready[2], int go[2], bool fork_one)
{
	pid_t p = fork();
	if (p == 0) {
		size_t n = 64 << 20;
		char *m = malloc(n);
		if (!m)
			_exit(1);
		memset(m, 7, n);
		for (volatile unsigned long i = 0; i < 300000000UL; i++)
			;		/* some CPU time */
		pid_t c = fork_one ? fork() : 1;
		if (c == 0) {
			pause();
			_exit(0);
		}
		char b = (char)(c > 0 ? 'r' : 'e');
		if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) < 0)
			_exit(1);
		if (c > 1)
			kill(c, SIGKILL), waitpid(c, NULL, 0);
		_exit(m[n / 2] == 7 ? 0 : 1);
	}
	return p;
}

static void metering_reads_a_process(void)
{
	for (int shared = 0; shared < 2; shared++) {
		int ready[2], go[2];
		CHECK(pipe(ready) == 0 && pipe(go) == 0);
		pid_t p = toucher(ready, go, shared);
		char b = 0;
		CHECK(read(ready[0], &b, 1) == 1 && b == 'r');
		struct proc_usage u;
		int64_t pss = 0;
		CHECK(proc_usage(p, &u) == 0 && proc_pss(p, &pss) == 0);
		CHECK(u.cpu_seconds > 0.05 && u.guest_seconds == 0);
		CHECK(u.rss_bytes >= (int64_t)64 << 20);
		int64_t want = shared ? 32LL << 20 : 64LL << 20;
		if (pss < want * 9 / 10 || pss > want + (8 << 20))
			printf("  pss %lld bytes, want about %lld (shared: %d)\n", (long long)pss, (long long)want, shared);
		CHECK(pss >= want * 9 / 10 && pss <= want + (8 << 20));
		CHECK(write(go[1], "g", 1) == 1);
		int st = -1;
		CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
		CHECK(proc_usage(p, &u) == -ESRCH && proc_pss(p, &pss) == -ESRCH);
	}
}

int main(void)
{
	int failures = 0;
	RUN(routes_match_and_capture);
	RUN(net_policies);
	RUN(validation_is_strict);
	RUN(ids_names_and_paths);
	RUN(rate_limits_per_key);
	RUN(inflight_caps_per_key);
	RUN(output_becomes_valid_json);
	RUN(errno_maps_to_status);
	RUN(websocket_frames);
	RUN(disk_chains_follow_headers);
	RUN(dir_bytes_counts_own_blocks);
	RUN(dns_servers_from_resolv_conf);
	RUN(metering_reads_a_process);
	return failures ? 1 : 0;
}
