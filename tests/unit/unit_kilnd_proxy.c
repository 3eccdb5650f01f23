/* Unit tests for the proxy to exposed ports: its routes, port and domain
 * checks, and upstream.c reading guest HTTP responses (well-formed ones
 * in every body framing, and the malformed ones a hostile guest sends). */
#include "api/http.h"
#include "api/routes.h"
#include "proxy/preview.h"
#include "proxy/tunnel.h"
#include "proxy/upstream.h"
#include "ops/validate.h"
#include "test.h"

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void proxy_routes(void)
{
	char *p[MAX_PATH_PARAMS];
	int n;
	bool known;
	const char *methods[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS" };
	for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
		const struct route *r = route_match(methods[i], "/v1/sandboxes/sbx_a/proxy/8080/x/y", p,
						    MAX_PATH_PARAMS, &n, &known);
		CHECK(r && (r->flags & ROUTE_PROXY) && r->body == BODY_STREAM && n == 3 &&
		      !strcmp(p[0], "sbx_a") && !strcmp(p[1], "8080") && !strcmp(p[2], "x/y"));
		while (n > 0)
			free(p[--n]);
	}
	/* No slash after the port: matched, so that it can be redirected. */
	const struct route *r = route_match("GET", "/v1/sandboxes/sbx_a/proxy/8080", p, MAX_PATH_PARAMS,
					    &n, &known);
	CHECK(r && (r->flags & ROUTE_PROXY) && n == 3 && !strcmp(p[2], ""));
	while (n > 0)
		free(p[--n]);
	r = route_match("GET", "/v1/sandboxes/sbx_a/proxy/8080/", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && n == 3 && !strcmp(p[2], ""));
	while (n > 0)
		free(p[--n]);
	CHECK(!route_match("GET", "/v1/sandboxes/sbx_a/proxy", p, MAX_PATH_PARAMS, &n, &known));
	r = route_match("DELETE", "/v1/sandboxes/sbx_a/ports/8080", p, MAX_PATH_PARAMS, &n, &known);
	CHECK(r && n == 2 && !strcmp(p[1], "8080") && !(r->flags & ROUTE_PROXY));
	while (n > 0)
		free(p[--n]);
	CHECK(route_match("POST", "/v1/sandboxes/sbx_a/ports", p, MAX_PATH_PARAMS, &n, &known) && n == 1);
	while (n > 0)
		free(p[--n]);
}

static void ports_and_domains(void)
{
	CHECK(v_port("1") == 1 && v_port("8080") == 8080 && v_port("65535") == 65535);
	CHECK(!v_port("0") && !v_port("65536") && !v_port("08080") && !v_port("-1") && !v_port("") &&
	      !v_port("80x") && !v_port("+80") && !v_port("99999999999") && !v_port(NULL));
	CHECK(v_is_domain("sandboxes.example.com") && v_is_domain("localhost") && v_is_domain("a-b.c9"));
	CHECK(!v_is_domain("") && !v_is_domain(".example.com") && !v_is_domain("example.com.") &&
	      !v_is_domain("a..b") && !v_is_domain("-a.b") && !v_is_domain("a-.b") &&
	      !v_is_domain("Example.com") && !v_is_domain("a_b.c") && !v_is_domain("a b"));
}

/* A response as a guest would write it, read back through upstream.c. */
struct exchange {
	int status;
	char body[512];
	long nbody;
	int head_rc;
	long body_rc;
};

static void read_answer(const char *text, size_t len, bool head_only, struct exchange *x)
{
	int sv[2];
	struct upstream u;
	struct up_head h;
	memset(x, 0, sizeof *x);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) {
		x->head_rc = -errno;
		return;
	}
	for (size_t off = 0; off < len;) {
		ssize_t w = write(sv[1], text + off, len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	shutdown(sv[1], SHUT_WR);
	up_init(&u, sv[0], -1, NULL, 0);
	x->head_rc = up_read_head(&u, head_only, 1000, &h);
	if (x->head_rc == 0) {
		x->status = h.status;
		long n;
		while ((n = up_read_body(&u, x->body + x->nbody, sizeof x->body - 1 - (size_t)x->nbody)) > 0)
			x->nbody += n;
		x->body_rc = n;
		up_head_free(&h);
	}
	up_free(&u);
	close(sv[0]);
	close(sv[1]);
}

#define ANSWER(s, head_only, x) read_answer((s), sizeof(s) - 1, (head_only), (x))

static void upstream_framings(void)
{
	struct exchange x;
	ANSWER("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhelloEXTRA", false, &x);
	CHECK(x.head_rc == 0 && x.status == 200 && x.body_rc == 0 && x.nbody == 5 &&
	      !strcmp(x.body, "hello"));
	ANSWER("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n"
	       "0\r\nTrailer-A: x\r\n\r\n", false, &x);
	CHECK(x.head_rc == 0 && x.body_rc == 0 && !strcmp(x.body, "hello world"));
	ANSWER("HTTP/1.0 200 OK\nServer: old\n\nabc", false, &x);	/* bare LF, close-delimited */
	CHECK(x.head_rc == 0 && x.body_rc == 0 && !strcmp(x.body, "abc"));
	ANSWER("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", false, &x);
	CHECK(x.head_rc == 0 && x.status == 404 && x.nbody == 0 && x.body_rc == 0);
	ANSWER("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", true, &x);	/* HEAD */
	CHECK(x.head_rc == 0 && x.status == 200 && x.nbody == 0 && x.body_rc == 0);
	ANSWER("HTTP/1.1 204 No Content\r\n\r\n", false, &x);
	CHECK(x.head_rc == 0 && x.status == 204 && x.nbody == 0);
	/* Transfer-Encoding wins over Content-Length (RFC 9112 6.3). */
	ANSWER("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	       false, &x);
	CHECK(x.head_rc == 0 && !strcmp(x.body, "abc"));
}

static void upstream_refuses_bad_answers(void)
{
	struct exchange x;
	ANSWER("SSH-2.0-OpenSSH_9.2\r\n\r\n", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nContent-Le", false, &x);		/* cut in the head */
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nX: a\001b\r\n\r\n", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 99 Low\r\n\r\n", false, &x);
	CHECK(x.head_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false, &x);	/* short body */
	CHECK(x.head_rc == 0 && x.body_rc == -EPROTO && x.nbody == 3);
	ANSWER("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, &x);
	CHECK(x.head_rc == 0 && x.body_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", false, &x);
	CHECK(x.head_rc == 0 && x.body_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n", false, &x);
	CHECK(x.head_rc == 0 && x.body_rc == -EPROTO);
	ANSWER("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", false, &x);
	CHECK(x.head_rc == 0 && x.body_rc == -EPROTO);
	/* A head without end: refused at the limit, not buffered on. */
	size_t big = UP_HEAD_MAX + 4096;
	char *t = malloc(big);
	if (t) {
		memcpy(t, "HTTP/1.1 200 OK\r\nX: ", 20);
		memset(t + 20, 'a', big - 20);
		read_answer(t, big, false, &x);
		CHECK(x.head_rc == -EPROTO);
		free(t);
	}
	/* A head of more headers than kept. */
	char many[8192] = "HTTP/1.1 200 OK\r\n";
	for (int i = 0; i < UP_HEADERS_MAX + 1; i++)
		snprintf(many + strlen(many), sizeof many - strlen(many), "H%d: v\r\n", i);
	strcat(many, "\r\n");
	read_answer(many, strlen(many), false, &x);
	CHECK(x.head_rc == -EPROTO);
}

/* After a 101 the bytes past the head are the new protocol's. */
static void upstream_switch_keeps_bytes(void)
{
	int sv[2];
	struct upstream u;
	struct up_head h;
	const char text[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			    "\r\n\x81\x02hi";
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	CHECK(write(sv[1], text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
	CHECK(up_init(&u, sv[0], -1, NULL, 0) == 0);
	CHECK(up_read_head(&u, false, 1000, &h) == 0 && h.status == 101);
	CHECK(!strcmp(up_header(&h, "upgrade"), "websocket") && up_hop_by_hop("connection"));
	const uint8_t *p;
	size_t n = up_pending(&u, &p);
	CHECK(n == 4 && !memcmp(p, "\x81\x02hi", 4));
	up_head_free(&h);
	up_free(&u);
	close(sv[0]);
	close(sv[1]);
	CHECK(up_list_has("keep-alive, Upgrade", "upgrade") && !up_list_has("keep-alive", "upgrade") &&
	      !up_list_has("upgrades", "upgrade"));
}

/* Preview links: a token opens one port of one sandbox until it expires. */
static void preview_tokens(void)
{
	uint8_t key[PREVIEW_KEY_BYTES], other[PREVIEW_KEY_BYTES];
	memset(key, 7, sizeof key);
	memset(other, 8, sizeof other);
	char tok[PREVIEW_TOKEN_MAX];
	int64_t exp = 0;
	preview_token(key, "sbx_abc", 8080, 2000000000, tok);
	CHECK(preview_valid(key, "sbx_abc", 8080, tok, 1900000000, &exp) && exp == 2000000000);
	CHECK(!preview_valid(key, "sbx_abc", 8081, tok, 1900000000, &exp));	/* another port */
	CHECK(!preview_valid(key, "sbx_abd", 8080, tok, 1900000000, &exp));	/* another sandbox */
	CHECK(!preview_valid(other, "sbx_abc", 8080, tok, 1900000000, &exp));	/* another kilnd */
	CHECK(!preview_valid(key, "sbx_abc", 8080, tok, 2000000001, &exp));	/* expired */
	char longer[PREVIEW_TOKEN_MAX];
	snprintf(longer, sizeof longer, "2100000000%s", strchr(tok, '.'));	/* a later expiry, same sig */
	CHECK(!preview_valid(key, "sbx_abc", 8080, longer, 1900000000, &exp));
	tok[strlen(tok) - 1] ^= 1;
	CHECK(!preview_valid(key, "sbx_abc", 8080, tok, 1900000000, &exp));
	CHECK(!preview_valid(key, "sbx_abc", 8080, "", 0, &exp) && !preview_valid(key, "sbx_abc", 8080, ".x", 0, &exp));
}

/* What of a guest's answer reaches the client, and which Authorization
 * never reaches the guest. */
static void guest_headers_filtered(void)
{
	CHECK(up_answer_header_passes(NULL, "Content-Type", "text/html"));
	CHECK(up_answer_header_passes("close", "X-Secret", "1"));
	CHECK(!up_answer_header_passes("close, X-Secret", "x-secret", "1"));
	CHECK(!up_answer_header_passes(NULL, "Keep-Alive", "timeout=5"));
	CHECK(up_answer_header_passes(NULL, "Set-Cookie", "sid=1; Path=/; HttpOnly"));
	CHECK(!up_answer_header_passes(NULL, "Set-Cookie", "sid=1; Path=/; Domain=example.com"));
	CHECK(!up_answer_header_passes(NULL, "set-cookie", "sid=1;domain=.example.com"));
	CHECK(!up_answer_header_passes(NULL, "Set-Cookie", "sid=1; DOMAIN =x"));
	CHECK(!up_answer_header_passes(NULL, "Set-Cookie", "kiln_session=forged; Path=/"));
	CHECK(!up_answer_header_passes(NULL, "Set-Cookie", " KILN_x=1"));
	CHECK(up_answer_header_passes(NULL, "Set-Cookie", "domainless=1; Path=/domain"));
	CHECK(up_is_kiln_credential("Bearer kiln_0123456789abcdef"));
	CHECK(up_is_kiln_credential("bearer   kiln_unknown"));
	CHECK(!up_is_kiln_credential("Bearer sk-guest-app-token"));
	CHECK(!up_is_kiln_credential("Basic a2lsbl86eA=="));
}

/* ---- tunnel_run and a TLS layer that hides the client's end --------------------------------------
 * As libmicrohttpd's for an upgraded HTTPS connection (http.h): the tunnel
 * reads the client through a socket pair ("layer") and is told nothing
 * when the client's TCP connection ends. Given that socket (peer) it sees
 * the FIN itself: the bytes before it pass, the guest side reads its end,
 * what the guest answers still goes back (a half-close), and the tunnel
 * ends with the guest's end. */
struct tunnel_args {
	int a, b, peer;
};

static void *tunnel_thread(void *arg)
{
	struct tunnel_args *t = arg;
	tunnel_run(t->a, t->b, t->peer, NULL, NULL);
	return NULL;
}

/* A tunnel on a thread: a is one end of layer (the TLS layer's socket
 * pair), b one end of guest, and peer the server's end of a loopback TCP
 * connection whose client end is c. */
struct tunnel_rig {
	int layer[2], guest[2], l, c, s;
	struct tunnel_args t;
	pthread_t th;
};

static int rig_start(struct tunnel_rig *r)
{
	*r = (struct tunnel_rig){ .layer = { -1, -1 }, .guest = { -1, -1 }, .l = -1, .c = -1, .s = -1 };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, r->layer) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, r->guest) < 0 ||
	    (r->l = socket(AF_INET, SOCK_STREAM, 0)) < 0 || bind(r->l, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    listen(r->l, 1) < 0 || getsockname(r->l, (struct sockaddr *)&sa, &sl) < 0 ||
	    (r->c = socket(AF_INET, SOCK_STREAM, 0)) < 0 || connect(r->c, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    (r->s = accept(r->l, NULL, NULL)) < 0)
		return -1;
	r->t = (struct tunnel_args){ .a = r->layer[0], .b = r->guest[0], .peer = r->s };
	return pthread_create(&r->th, NULL, tunnel_thread, &r->t) == 0 ? 0 : -1;
}

/* Whether the tunnel returned within 5 s (a tunnel that never ends fails
 * the test and does not hang the run); closes what is left. */
static bool rig_end(struct tunnel_rig *r)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	bool ended = pthread_timedjoin_np(r->th, NULL, &until) == 0;
	if (!ended) {
		pthread_cancel(r->th);
		pthread_join(r->th, NULL);
	}
	int *fds[] = { &r->layer[0], &r->layer[1], &r->guest[0], &r->guest[1], &r->l, &r->c, &r->s };
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (*fds[i] >= 0)
			close(*fds[i]);
	return ended;
}

/* n bytes from fd within ms, or what came: -1 on timeout. */
static ssize_t read_within(int fd, char *buf, size_t cap, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ms) != 1)
		return -1;
	return recv(fd, buf, cap, 0);
}

static void tunnel_sees_hidden_fin(void)
{
	struct tunnel_rig r;
	bool up = rig_start(&r) == 0;
	CHECK(up);
	if (!up)
		return;
	int *layer = r.layer, *guest = r.guest;
	char buf[64];
	CHECK(send(layer[1], "request", 7, 0) == 7);
	ssize_t n = read_within(guest[1], buf, sizeof buf, 5000);
	CHECK(n == 7 && !memcmp(buf, "request", 7));
	/* The client's last bytes reach the layer with its FIN. */
	close(r.c);
	r.c = -1;
	CHECK(send(layer[1], "tail", 4, 0) == 4);
	n = read_within(guest[1], buf, sizeof buf, 5000);
	CHECK(n == 4 && !memcmp(buf, "tail", 4));
	n = read_within(guest[1], buf, sizeof buf, 5000);
	CHECK(n == 0);	/* the end, passed on */
	CHECK(send(guest[1], "answer", 6, 0) == 6);
	n = read_within(layer[1], buf, sizeof buf, 5000);
	CHECK(n == 6 && !memcmp(buf, "answer", 6));
	close(guest[1]);
	guest[1] = -1;
	n = read_within(layer[1], buf, sizeof buf, 5000);
	CHECK(n == 0);	/* the tunnel has ended */
	CHECK(rig_end(&r));
}

/* The other way: the guest ends (its VMM stopped), and the tunnel ends
 * too, as a half-close of the layer's socket would reach nobody. */
static void tunnel_ends_with_guest(void)
{
	struct tunnel_rig r;
	bool up = rig_start(&r) == 0;
	CHECK(up);
	if (!up)
		return;
	int *layer = r.layer, *guest = r.guest;
	char buf[64];
	CHECK(send(guest[1], "last words", 10, 0) == 10);
	close(guest[1]);
	guest[1] = -1;
	ssize_t n = read_within(layer[1], buf, sizeof buf, 5000);
	CHECK(n == 10 && !memcmp(buf, "last words", 10));
	CHECK(rig_end(&r));	/* with the client still connected */
}

int main(void)
{
	int failures = 0;
	RUN(proxy_routes);
	RUN(ports_and_domains);
	RUN(upstream_framings);
	RUN(upstream_refuses_bad_answers);
	RUN(guest_headers_filtered);
	RUN(preview_tokens);
	RUN(upstream_switch_keeps_bytes);
	RUN(tunnel_sees_hidden_fin);
	RUN(tunnel_ends_with_guest);
	return failures ? 1 : 0;
}
