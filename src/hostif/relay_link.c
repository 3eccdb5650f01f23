/*
 * relay_link: a relay's stream to a host over TCP or TLS (relay_link.h).
 * TLS is libcurl's CONNECT_ONLY connection, which gives no socket a
 * client could read the guest protocol from directly: a thread pumps
 * between it and a socket pair, draining what TLS has decrypted before
 * it waits on the network socket again.
 */
#include "hostif/relay_link.h"
#include "common/err.h"
#include "common/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_S 5
#define PUMP_BUF 65536

struct relay_link {
	int fd;				/* plain TCP; -1 with TLS */
	CURL *c;			/* TLS */
	curl_socket_t tls_fd;		/* TLS: the network socket, to wait on */
	int wait_ms;
	char name[64];
};

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int r = poll(&p, 1, ms);
	return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -errno;
}

static int open_plain(struct relay_link *l, const char *url)
{
	char hostport[256], *port;
	snprintf(hostport, sizeof hostport, "%s", url + 7);
	hostport[strcspn(hostport, "/")] = 0;
	port = strrchr(hostport, ':');
	if (!port)
		return errf(EINVAL, "host %s: URL %s has no port", l->name, url);
	*port++ = 0;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int e = getaddrinfo(hostport, port, &hints, &ai);
	if (e)
		return errf(EHOSTDOWN, "host %s: %s: %s", l->name, hostport, gai_strerror(e));
	l->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval ctv = { CONNECT_TIMEOUT_S, 0 }, tv = { l->wait_ms / 1000, 0 };
	int rc = 0;
	if (l->fd < 0 || setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &ctv, sizeof ctv) < 0 ||
	    connect(l->fd, ai->ai_addr, ai->ai_addrlen) < 0)
		rc = errf(EHOSTDOWN, "host %s (%s) did not answer: %s", l->name, url, strerror(errno));
	freeaddrinfo(ai);
	if (rc == 0 && (setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
			setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0))
		rc = errf_sys("setsockopt");
	return rc;
}

static int open_tls(struct relay_link *l, const char *url, const char *ca_file)
{
	char base[300], err[CURL_ERROR_SIZE] = "";
	snprintf(base, sizeof base, "%s", url);
	char *path = strchr(base + 8, '/');
	if (path)
		*path = 0;
	if (!(l->c = curl_easy_init()))
		return errf(ENOMEM, "out of memory");
	curl_easy_setopt(l->c, CURLOPT_URL, base);
	curl_easy_setopt(l->c, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(l->c, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
	curl_easy_setopt(l->c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(l->c, CURLOPT_ERRORBUFFER, err);
	curl_easy_setopt(l->c, CURLOPT_PROTOCOLS_STR, "https");
	if (ca_file)
		curl_easy_setopt(l->c, CURLOPT_CAINFO, ca_file);
	CURLcode cc = curl_easy_perform(l->c);
	curl_easy_setopt(l->c, CURLOPT_ERRORBUFFER, NULL);
	if (cc != CURLE_OK)
		return errf(EHOSTDOWN, "host %s (%s) did not answer: %s", l->name, url,
			    err[0] ? err : curl_easy_strerror(cc));
	if (curl_easy_getinfo(l->c, CURLINFO_ACTIVESOCKET, &l->tls_fd) != CURLE_OK || l->tls_fd == CURL_SOCKET_BAD)
		return errf(EHOSTDOWN, "host %s: no socket after the TLS handshake", l->name);
	return 0;
}

int link_open(const char *url, const char *name, const char *ca_file, int wait_ms, struct relay_link **out)
{
	struct relay_link *l = calloc(1, sizeof *l);
	if (!l)
		return errf(ENOMEM, "out of memory");
	l->fd = -1;
	l->tls_fd = CURL_SOCKET_BAD;
	l->wait_ms = wait_ms;
	snprintf(l->name, sizeof l->name, "%s", name);
	int rc = !strncmp(url, "http://", 7)	? open_plain(l, url)
		 : !strncmp(url, "https://", 8) ? open_tls(l, url, ca_file)
						: errf(EINVAL, "host %s: URL %.64s is not http:// or https://", name, url);
	if (rc < 0) {
		link_close(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* TLS: one send or receive, waiting on the socket while curl says AGAIN. */
static ssize_t tls_io(struct relay_link *l, bool out, void *p, size_t n, int wait_ms)
{
	for (;;) {
		size_t done = 0;
		CURLcode cc = out ? curl_easy_send(l->c, p, n, &done) : curl_easy_recv(l->c, p, n, &done);
		if (cc == CURLE_OK)
			return (ssize_t)done;	/* receive: 0 is the end */
		if (cc != CURLE_AGAIN)
			return -ECONNRESET;
		int rc = wait_fd(l->tls_fd, out ? POLLOUT : POLLIN, wait_ms);
		if (rc < 0)
			return rc;
	}
}

int link_send(struct relay_link *l, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = l->c ? tls_io(l, true, (void *)c, n, l->wait_ms) : send(l->fd, c, n, MSG_NOSIGNAL);
		if (w < 0 && !l->c && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 && l->c ? (int)w : -(errno ? errno : EPIPE);
		c += w, n -= (size_t)w;
	}
	return 0;
}

int link_read_until(struct relay_link *l, char *buf, size_t cap, const char *end)
{
	size_t n = 0, el = strlen(end);
	while (n + 1 < cap) {
		ssize_t r = l->c ? tls_io(l, false, buf + n, 1, l->wait_ms) : recv(l->fd, buf + n, 1, 0);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0)
			return l->c ? (int)r : -errno;
		n++;
		buf[n] = 0;
		if (n >= el && !memcmp(buf + n - el, end, el))
			return (int)n;
	}
	return -EMSGSIZE;
}

/* The TLS pump: local (the socket pair's end) <-> l (TLS), until either
 * side ends. Decrypted bytes are drained before waiting on the network
 * socket, which would not show them. */
static void *pump(void *arg)
{
	struct relay_link *l = arg;
	int local = l->fd;
	char *buf = malloc(PUMP_BUF);
	bool up = true, down = true;
	while (buf && (up || down)) {
		ssize_t r = down ? tls_io(l, false, buf, PUMP_BUF, 0) : -ETIMEDOUT;
		if (r == 0 || (r < 0 && r != -ETIMEDOUT)) {
			down = false;
			shutdown(local, SHUT_WR);	/* the host ended its side */
			if (!up)
				break;
		} else if (r > 0) {
			const char *p = buf;
			while (r > 0) {
				ssize_t w = send(local, p, (size_t)r, MSG_NOSIGNAL);
				if (w <= 0 && errno != EINTR)
					goto out;
				if (w > 0)
					p += w, r -= w;
			}
			continue;	/* more may be decrypted already */
		}
		struct pollfd pf[2] = { { .fd = local, .events = up ? POLLIN : 0 },
					{ .fd = l->tls_fd, .events = down ? POLLIN : 0 } };
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (!up && (pf[0].revents & (POLLHUP | POLLERR)))
			break;	/* the API closed its end: it waits no more */
		if (up && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = recv(local, buf, PUMP_BUF, 0);
			if (n < 0)
				break;
			if (n == 0) {
				/* The API's side ended its sending: so does the
				 * relay's (TCP's half-close under TLS, which the
				 * host watches for), and the host's end comes
				 * back once its agent has closed (guest_conn.h
				 * guest_close_wait). */
				up = false;
				shutdown(l->tls_fd, SHUT_WR);
				if (!down)
					break;
				continue;
			}
			if (link_send(l, buf, (size_t)n) < 0)
				break;
		}
	}
out:
	free(buf);
	close(local);
	link_close(l);
	return NULL;
}

int link_take(struct relay_link *l)
{
	if (!l->c) {
		int fd = l->fd;
		l->fd = -1;
		link_close(l);
		struct timeval none = { 0, 0 };	/* the stream's waits are its reader's own */
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
		return fd;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		int rc = errf_sys("socketpair");
		link_close(l);
		return rc;
	}
	l->fd = sv[1];
	pthread_attr_t a;
	pthread_t t;
	int e = pthread_attr_init(&a);
	if (e == 0) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		e = pthread_create(&t, &a, pump, l);
		pthread_attr_destroy(&a);
	}
	if (e) {
		close(sv[0]);
		link_close(l);
		return errf(e, "no thread for a TLS relay: %s", strerror(e));
	}
	return sv[0];
}

void link_close(struct relay_link *l)
{
	if (!l)
		return;
	if (l->fd >= 0)
		close(l->fd);
	if (l->c)
		curl_easy_cleanup(l->c);
	free(l);
}
