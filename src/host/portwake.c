/*
 * portwake: a hibernated sandbox that opens TCP ports to its workspace
 * (net/net.h workspace ports: a managed database's 5432) is woken by the
 * next connection to one of them, and that connection is served.
 *
 * While the sandbox runs, its namespace forwards those ports to the
 * guest. When it hibernates (portwake_arm), listeners on the ports are
 * opened in its namespace first, then the namespace stops forwarding, so
 * a connection from then on is accepted there (the host's firewall has
 * let it through as before: only its workspace's sandboxes). The first
 * one wakes the sandbox (host_wake); the wake puts the forwarding back
 * (portwake_disarm: new connections go to the guest again, then the
 * listeners close), and each connection accepted meanwhile is relayed to
 * the guest's port from inside the namespace for as long as it lasts.
 * The client sees a slow connect, not an error. A wake that fails closes
 * the connections it held, and the listeners stay for the next one.
 *
 * One thread per armed sandbox waits on its listeners, in the host's
 * namespace (the wake launches a VMM and runs nft: not from inside the
 * sandbox's); sockets are made in the sandbox's namespace by entering
 * it for the socket() call alone. One thread per relayed connection.
 */
#include "host/host_int.h"
#include "net/net.h"
#include "net/netpolicy.h"
#include "common/err.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_BUF (64 << 10)
#define CONNECT_TIMEOUT_S 30	/* to the guest's port, once it is awake */

struct waker {
	struct host *h;
	char ws[ID_MAX], id[ID_MAX];
	struct net_slot slot;
	struct net_policy p;
	int nsfd;			/* the sandbox's namespace */
	int lfd[NET_WS_PORTS_MAX];
	int stop[2];			/* written by portwake_disarm */
	struct waker *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct waker *armed;

/* A TCP socket made in w's namespace (the calling thread goes back to
 * its own after the call). */
static int ns_socket(struct waker *w)
{
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return errf_sys("own network namespace");
	int fd = -1;
	if (setns(w->nsfd, CLONE_NEWNET) < 0) {
		fd = errf_sys("entering %s", w->slot.netns_path);
	} else {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			fd = errf_sys("socket in %s", w->slot.netns_path);
		if (setns(self, CLONE_NEWNET) < 0) {	/* cannot happen; if it did, this thread is lost */
			log_warn("portwake: back to the host's network namespace: %s", strerror(errno));
			abort();
		}
	}
	close(self);
	return fd;
}

struct relay {
	int a, b;
};

/* Copy what one side sends to the other until both have ended. */
static void *relay_run(void *arg)
{
	struct relay *r = arg;
	char *buf = malloc(RELAY_BUF);
	bool open_a = true, open_b = true;
	while (buf && (open_a || open_b)) {
		/* A side that ended is not polled (its hang-up would wake the
		 * loop until the other side ends too). */
		struct pollfd pf[2] = { { open_a ? r->a : -1, POLLIN, 0 }, { open_b ? r->b : -1, POLLIN, 0 } };
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		bool failed = false;
		for (int i = 0; i < 2 && !failed; i++) {
			int from = i ? r->b : r->a, to = i ? r->a : r->b;
			bool *open = i ? &open_b : &open_a;
			if (!*open || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t n = recv(from, buf, RELAY_BUF, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				*open = false;
				shutdown(to, SHUT_WR);
				failed = n < 0;
				continue;
			}
			for (ssize_t off = 0; off < n && !failed;) {
				ssize_t m = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
				if (m < 0 && errno == EINTR)
					continue;
				failed = m <= 0;
				off += m > 0 ? m : 0;
			}
		}
		if (failed)
			break;
	}
	free(buf);
	close(r->a);
	close(r->b);
	free(r);
	return NULL;
}

/* Connection c, accepted on listener i, to the guest's port. */
static void relay_start(struct waker *w, int i, int c)
{
	int g = ns_socket(w);
	struct net_config nc;
	net_default_config(&nc);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)w->p.ws_ports[i]) };
	inet_pton(AF_INET, nc.guest_ip, &to.sin_addr);
	struct timeval tv = { .tv_sec = CONNECT_TIMEOUT_S };
	if (g >= 0)
		setsockopt(g, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (g >= 0 && connect(g, (struct sockaddr *)&to, sizeof to) < 0) {
		log_warn("sandbox %s: relaying a connection to its port %d: %s", w->id, w->p.ws_ports[i],
			 strerror(errno));
		close(g);
		g = -1;
	}
	struct relay *r = g >= 0 ? malloc(sizeof *r) : NULL;
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (r) {
		r->a = c, r->b = g;
		tv.tv_sec = 0;	/* blocking from here: the relay's sends wait for the slow side */
		setsockopt(g, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		if (pthread_create(&t, &attr, relay_run, r) == 0)
			c = g = -1, r = NULL;
	}
	pthread_attr_destroy(&attr);
	free(r);
	if (g >= 0)
		close(g);
	if (c >= 0)
		close(c);
}

static void close_held(int *held, int n)
{
	for (int i = 0; i < n; i++)
		close(held[i]);
}

static void *waker_run(void *arg)
{
	struct waker *w = arg;
	struct pollfd pf[NET_WS_PORTS_MAX + 1];
	int n = w->p.nws_ports;
	for (;;) {
		for (int i = 0; i < n; i++)
			pf[i] = (struct pollfd){ w->lfd[i], POLLIN, 0 };
		pf[n] = (struct pollfd){ w->stop[0], POLLIN, 0 };
		if (poll(pf, (nfds_t)n + 1, -1) < 0) {
			if (errno != EINTR)
				sleep(1);	/* w stays armed until disarmed: only stop ends this */
			continue;
		}
		if (pf[n].revents)
			break;		/* disarmed: the sandbox runs, or is gone */
		/* Every connection waiting now is held through the wake. */
		int held[64], port_of[64], nh = 0;
		for (int i = 0; i < n; i++)
			for (int c; nh < 64 && (c = accept4(w->lfd[i], NULL, NULL, SOCK_CLOEXEC)) >= 0;)
				held[nh] = c, port_of[nh++] = i;
		if (!nh)
			continue;
		struct sandbox *sb;
		int rc = host_find(w->h, w->ws, w->id, &sb);
		if (rc == 0) {
			log_info("sandbox %s: woken by a connection to its port %d", w->id, w->p.ws_ports[port_of[0]]);
			rc = host_wake(w->h, sb);
			sandbox_put(w->h, sb);
		}
		if (rc < 0) {
			log_warn("sandbox %s: a connection to it could not wake it: %s", w->id, errmsg());
			close_held(held, nh);
			continue;
		}
		/* Those that came during the wake, before the ports went to
		 * the guest again, too. */
		for (int i = 0; i < n; i++)
			for (int c; nh < 64 && (c = accept4(w->lfd[i], NULL, NULL, SOCK_CLOEXEC)) >= 0;)
				held[nh] = c, port_of[nh++] = i;
		for (int k = 0; k < nh; k++)
			relay_start(w, port_of[k], held[k]);
	}
	for (int i = 0; i < n; i++)
		close(w->lfd[i]);
	close(w->stop[0]);
	close(w->nsfd);
	free(w);
	return NULL;
}

/* Listeners on the ports in w's namespace. */
static int listen_all(struct waker *w)
{
	for (int i = 0; i < w->p.nws_ports; i++) {
		int fd = ns_socket(w);
		if (fd < 0)
			return fd;
		w->lfd[i] = fd;
		int one = 1;
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)w->p.ws_ports[i]),
					 .sin_addr.s_addr = htonl(INADDR_ANY) };
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
		    bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0 ||
		    fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
			return errf_sys("listening on port %d in %s", w->p.ws_ports[i], w->slot.netns);
	}
	return 0;
}

static void waker_free(struct waker *w)
{
	for (int i = 0; i < NET_WS_PORTS_MAX; i++)
		if (w->lfd[i] >= 0)
			close(w->lfd[i]);
	if (w->stop[0] >= 0)
		close(w->stop[0]);
	if (w->stop[1] >= 0)
		close(w->stop[1]);
	if (w->nsfd >= 0)
		close(w->nsfd);
	free(w);
}

void portwake_arm(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	uint32_t slot = (uint32_t)sb->row.net_slot;
	struct net_policy p;
	int rc = slot ? netpolicy_parse(sb->row.net_policy, &p) : -ENOENT;
	pthread_mutex_unlock(&sb->lock);
	if (rc < 0 || p.nws_ports <= 0)
		return;		/* no network, or no ports: nothing to wake it */
	struct waker *w = calloc(1, sizeof *w);
	if (!w)
		return;
	w->h = h;
	w->p = p;
	w->stop[0] = w->stop[1] = w->nsfd = -1;
	for (int i = 0; i < NET_WS_PORTS_MAX; i++)
		w->lfd[i] = -1;
	snprintf(w->ws, sizeof w->ws, "%s", sb->row.workspace);
	snprintf(w->id, sizeof w->id, "%s", sb->row.id);
	struct net_config nc;
	net_default_config(&nc);
	net_slot_info(&nc, slot, &w->slot);
	w->nsfd = open(w->slot.netns_path, O_RDONLY | O_CLOEXEC);
	rc = w->nsfd < 0 ? errf_sys("%s", w->slot.netns_path) : 0;
	if (rc == 0 && pipe2(w->stop, O_CLOEXEC) < 0)
		rc = errf_sys("pipe");
	rc = rc ?: listen_all(w);
	/* The listeners first: no connection finds the port closed. */
	rc = rc ?: net_ws_forward(&nc, &w->slot, &w->p, false);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&lock);
	int e = rc == 0 ? pthread_create(&t, &attr, waker_run, w) : 0;
	if (e)
		rc = errf(e, "a thread for its listeners: %s", strerror(e));
	if (rc == 0) {
		w->next = armed;
		armed = w;
	}
	pthread_mutex_unlock(&lock);
	pthread_attr_destroy(&attr);
	if (rc < 0) {
		log_warn("sandbox %s: a connection will not wake it: %s", sb->row.id, errmsg());
		net_ws_forward(&nc, &w->slot, &w->p, true);
		waker_free(w);
		return;
	}
	log_info("sandbox %s: a connection to its port %d wakes it", sb->row.id, p.ws_ports[0]);
}

void portwake_disarm(struct host *h, struct sandbox *sb)
{
	(void)h;
	pthread_mutex_lock(&lock);
	struct waker **pp = &armed, *w = NULL;
	for (; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->id, sb->row.id)) {
			w = *pp;
			*pp = w->next;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (!w)
		return;
	/* New connections to the guest first, then the listeners close (the
	 * waker's thread closes them and frees w once it reads stop). */
	struct net_config nc;
	net_default_config(&nc);
	if (net_ws_forward(&nc, &w->slot, &w->p, true) < 0)
		log_warn("sandbox %s: its ports to its guest again: %s", sb->row.id, errmsg());
	int fd = w->stop[1];
	if (write(fd, "x", 1) < 0)
		log_warn("sandbox %s: stopping its waker: %s", sb->row.id, strerror(errno));
	close(fd);
}
