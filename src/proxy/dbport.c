/*
 * dbport: external access to managed databases (proxy/dbport.h).
 *
 * One thread accepts on every listener (poll); one detached thread per
 * connection relays it (tunnel_run). The table of listeners is kilnd's
 * (lock): dbport_sync changes it, and a listener taken away is shut
 * down there (the port refuses at once) but closed and freed by the
 * accept thread once no connection uses it, so no thread polls or
 * accepts on a descriptor that was closed under it.
 */
#include "proxy/dbport.h"
#include "proxy/tunnel.h"
#include "host/guest_conn.h"
#include "hostif/hostif.h"
#include "ops/database.h"
#include "store/store_databases.h"
#include "common/err.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNS_PER_DB_MAX 256		/* the most conns_max may say */
#define LISTENERS_MAX 1024		/* polled at once */
#define EARLY_WAIT_MS 10000

struct lsn {
	char id[ID_MAX], ws[ID_MAX], sandbox[ID_MAX];
	int port;
	int fd;				/* -1: not open (tried again at the next sync) */
	bool gone;			/* taken away: shut down, closed once unused */
	bool warned;			/* its open failed, and the log said so */
	time_t refused_logged;		/* when a refusal past the limits was last logged */
	int conns;			/* relayed now; their sockets below */
	int cfd[CONNS_PER_DB_MAX][2];	/* client (-1: a free slot), guest (-1 until connected) */
	struct lsn *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t drained = PTHREAD_COND_INITIALIZER;
static struct lsn *list;
static int total;			/* relayed connections, all listeners */
static struct store *store;
static struct hostif *hostif;
static int wake[2] = { -1, -1 };	/* the accept thread's: the table changed */
static pthread_t acceptor;
static bool started, stopping;

static void poke(void)
{
	if (wake[1] >= 0 && write(wake[1], "x", 1) < 0 && errno != EAGAIN)
		log_warn("dbport: waking its thread: %s", strerror(errno));
}

static int conns_max(void)
{
	int n = ops_db_external.conns_max;
	return n < 1 ? 1 : n > CONNS_PER_DB_MAX ? CONNS_PER_DB_MAX : n;
}

/* A listener on the bind address and l's port, or -errno. */
static int open_listener(const struct lsn *l)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, ops_db_external.bind, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)l->port), len = sizeof *a4;
	} else if (inet_pton(AF_INET6, ops_db_external.bind, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)l->port), len = sizeof *a6;
	} else {
		return errf(EINVAL, "--db-external-bind %s is not an IP address", ops_db_external.bind);
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errf_sys("socket");
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
		int rc = errf_sys("listening on %s port %d", ops_db_external.bind, l->port);
		close(fd);
		return rc;
	}
	return fd;
}

/* Taken away: no new connection, and the relayed ones cut (their
 * threads see the end and leave). Under lock. */
static void take_away(struct lsn *l)
{
	if (l->gone)
		return;
	l->gone = true;
	if (l->fd >= 0)
		shutdown(l->fd, SHUT_RDWR);
	for (int i = 0; i < CONNS_PER_DB_MAX; i++)
		for (int k = 0; k < 2; k++)
			if (l->cfd[i][k] >= 0)
				shutdown(l->cfd[i][k], SHUT_RDWR);
	log_info("database %s: external access on port %d closed%s", l->id, l->port,
		 l->conns ? ", its connections cut" : "");
}

/* ---- what the store says ---------------------------------------------------- */

struct want {
	struct db_row *r;
	int n, cap;
};

static int note(void *ctx, const struct db_row *r)
{
	struct want *w = ctx;
	if (r->external_port <= 0 || !r->sandbox[0])
		return 0;
	if (w->n == w->cap) {
		int cap = w->cap ? 2 * w->cap : 16;
		struct db_row *m = realloc(w->r, (size_t)cap * sizeof *m);
		if (!m)
			return errf(ENOMEM, "out of memory");
		w->r = m, w->cap = cap;
	}
	w->r[w->n++] = *r;
	return 0;
}

void dbport_sync(void)
{
	if (!started)
		return;
	struct want w = { NULL, 0, 0 };
	if (store_db_each(store, NULL, note, &w) < 0) {
		log_warn("dbport: the databases' external ports: %s", errmsg());	/* kept as they are */
		free(w.r);
		return;
	}
	pthread_mutex_lock(&lock);
	for (struct lsn *l = list; l; l = l->next) {
		bool keep = false;
		for (int i = 0; i < w.n && !keep; i++)
			keep = !strcmp(w.r[i].id, l->id) && w.r[i].external_port == l->port;
		if (!keep)
			take_away(l);
	}
	for (int i = 0; i < w.n && !stopping; i++) {
		struct lsn *l = list;
		while (l && (l->gone || strcmp(l->id, w.r[i].id)))
			l = l->next;
		if (!l) {
			if (!(l = calloc(1, sizeof *l)))
				break;
			snprintf(l->id, sizeof l->id, "%s", w.r[i].id);
			snprintf(l->ws, sizeof l->ws, "%s", w.r[i].workspace);
			l->port = (int)w.r[i].external_port;
			l->fd = -1;
			for (int k = 0; k < CONNS_PER_DB_MAX; k++)
				l->cfd[k][0] = l->cfd[k][1] = -1;
			l->next = list;
			list = l;
		}
		snprintf(l->sandbox, sizeof l->sandbox, "%s", w.r[i].sandbox);
		if (l->fd >= 0)
			continue;
		l->fd = open_listener(l);
		if (l->fd >= 0) {
			l->warned = false;
			log_info("database %s: external access on %s port %d", l->id, ops_db_external.bind, l->port);
		} else if (!l->warned) {
			l->warned = true;
			log_warn("database %s: external access: %s (tried again every few seconds)", l->id, errmsg());
		}
	}
	pthread_mutex_unlock(&lock);
	free(w.r);
	poke();
}

/* ---- TLS only ----------------------------------------------------------------
 * A PostgreSQL client that wants TLS opens with an SSLRequest (8 bytes:
 * length 8, code 80877103); the server answers one byte, 'S', and the
 * TLS handshake follows, between the client and the database's server
 * (its own key: docs/databases.md "TLS"). The relay reads that first
 * message: an SSLRequest goes on to the server, whose answer must be
 * 'S'; a GSSAPI encryption request is answered 'N' (no GSSAPI here: the
 * client then asks for TLS); a CancelRequest (16 bytes, clear text in
 * PostgreSQL's protocol, and it carries no password or data) goes on as
 * it is; anything else, a startup message in clear text above all, is
 * answered with the error below and closed, before the database is
 * woken or reached. So no password or row crosses this port in clear. */

#define PG_SSL_REQUEST 80877103u
#define PG_GSSENC_REQUEST 80877104u
#define PG_CANCEL_REQUEST 80877102u
#define HELLO_WAIT_MS 15000		/* a client sends its first message at once */
#define ANSWER_WAIT_MS 60000		/* the server answers the SSLRequest (after a wake) */
#define NO_TLS_MSG "kiln: this database's external port takes TLS connections only: connect with " \
	"sslmode=verify-ca (or verify-full) and sslrootcert= its certificate (tls_certificate of the database; " \
	"docs/databases.md \"TLS\")"
#define SERVER_NO_TLS_MSG "kiln: the database's server does not offer TLS now, so its external port " \
	"refuses the connection"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* n bytes of fd into p within wait_ms: 0, or -1 (closed, cut, failed,
 * too slow). fd may be blocking or not. */
static int recv_all(int fd, uint8_t *p, size_t n, int wait_ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t got = 0; got < n;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = wait_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		struct pollfd pf = { fd, POLLIN, 0 };
		if (left <= 0)
			return -1;
		int r = poll(&pf, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t k = recv(fd, p + got, n - got, MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

/* A FATAL ErrorResponse (SQLSTATE 28000, as a refusal by pg_hba is)
 * with msg, which libpq shows its user, to the client. */
static void pg_refuse(int fd, const char *msg)
{
	uint8_t b[512];
	size_t n = 5;
	const char *f[][2] = { { "S", "FATAL" }, { "V", "FATAL" }, { "C", "28000" }, { "M", msg } };
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		size_t l = strlen(f[i][1]) + 1;
		if (n + 1 + l + 1 > sizeof b)
			break;
		b[n++] = (uint8_t)f[i][0][0];
		memcpy(b + n, f[i][1], l);
		n += l;
	}
	b[n++] = 0;
	b[0] = 'E';
	uint32_t len = (uint32_t)(n - 1);
	b[1] = (uint8_t)(len >> 24), b[2] = (uint8_t)(len >> 16), b[3] = (uint8_t)(len >> 8), b[4] = (uint8_t)len;
	tunnel_send_all(fd, b, n, 2000);
}

/* The client's first message, to go on to the server (hello, *n bytes),
 * or -1 when the connection is refused (answered already, or gone). */
static int first_message(const char *id, int client, uint8_t hello[16], size_t *n)
{
	for (int tries = 0; tries < 2; tries++) {
		if (recv_all(client, hello, 8, HELLO_WAIT_MS) < 0)
			return -1;
		uint32_t len = be32(hello), code = be32(hello + 4);
		if (len == 8 && code == PG_SSL_REQUEST) {
			*n = 8;
			return 0;
		}
		if (len == 16 && code == PG_CANCEL_REQUEST) {
			*n = 16;
			return recv_all(client, hello + 8, 8, HELLO_WAIT_MS);
		}
		if (len == 8 && code == PG_GSSENC_REQUEST && tries == 0) {
			if (tunnel_send_all(client, "N", 1, 2000) < 0)
				return -1;
			continue;
		}
		break;
	}
	static time_t logged;	/* a flood of them is one line each 10 s (a race here costs a line) */
	time_t now = time(NULL);
	if (now - logged >= 10) {
		logged = now;
		log_info("database %s: a connection without TLS to its external port refused", id);
	}
	pg_refuse(client, NO_TLS_MSG);
	return -1;
}

/* ---- a connection ---------------------------------------------------------- */

struct conn {
	struct lsn *l;
	int slot;			/* in l->cfd */
	char ws[ID_MAX], sandbox[ID_MAX];
};

/* Its slot's sockets closed and forgotten; the listener freed by the
 * accept thread if it was the last user of a gone one. */
static void conn_end(struct conn *c)
{
	pthread_mutex_lock(&lock);
	struct lsn *l = c->l;
	for (int k = 0; k < 2; k++) {
		if (l->cfd[c->slot][k] >= 0)
			close(l->cfd[c->slot][k]);
		l->cfd[c->slot][k] = -1;
	}
	l->conns--;
	total--;
	if (!total)
		pthread_cond_broadcast(&drained);
	bool reap_it = l->gone && !l->conns;	/* l is the accept thread's to free from here */
	pthread_mutex_unlock(&lock);
	if (reap_it)
		poke();
}

static void *conn_run(void *arg)
{
	struct conn *c = arg;
	int client;
	pthread_mutex_lock(&lock);
	client = c->l->cfd[c->slot][0];
	pthread_mutex_unlock(&lock);
	uint8_t hello[16];
	size_t hn = 0;
	if (first_message(c->l->id, client, hello, &hn) < 0) {	/* not TLS: refused before it is woken */
		conn_end(c);
		free(c);
		return NULL;
	}
	struct hostif_guest hg;
	int rc = hostif_enter(hostif, c->ws, c->sandbox, &hg);	/* wakes it if it hibernates */
	int g = -1;
	void *early = NULL;
	size_t n = 0;
	if (rc == 0)
		rc = guest_tcp_connect(hg.g, DB_PORT, &g, &early, &n);
	if (rc < 0) {
		log_warn("database %s: an external connection could not reach its server: %s", c->l->id, errmsg());
	} else {
		pthread_mutex_lock(&lock);
		bool cut = c->l->gone;
		c->l->cfd[c->slot][1] = g;
		pthread_mutex_unlock(&lock);
		/* The SSLRequest's answer ('S', else no TLS: refused), then
		 * whatever followed it, then the relay. The guest's bytes
		 * are read one at a time here: no more than that. */
		uint8_t answer = 'S';
		uint8_t *e = early;
		if (!cut && tunnel_send_all(g, hello, hn, EARLY_WAIT_MS) < 0)
			cut = true;
		if (!cut && hn == 8) {
			if (n)
				answer = e[0], e++, n--;
			else if (recv_all(g, &answer, 1, ANSWER_WAIT_MS) < 0)
				cut = true;
			if (!cut && answer != 'S') {
				log_warn("database %s: its server answered TLS with 0x%02x: the external connection refused",
					 c->l->id, answer);
				pg_refuse(client, SERVER_NO_TLS_MSG);
				cut = true;
			}
			if (!cut && tunnel_send_all(client, "S", 1, EARLY_WAIT_MS) < 0)
				cut = true;
		}
		if (!cut && (!n || tunnel_send_all(client, e, n, EARLY_WAIT_MS) == 0))
			tunnel_run(client, g, -1, NULL, NULL);
	}
	free(early);
	hostif_leave(hostif, &hg);
	conn_end(c);
	free(c);
	return NULL;
}

/* ---- the accept thread ------------------------------------------------------ */

/* A connection on l (under lock): relayed, or closed at once when l's
 * database, or kilnd, has as many as it may. */
static void admit(struct lsn *l, int fd)
{
	int slot = -1;
	for (int i = 0; i < CONNS_PER_DB_MAX && slot < 0; i++)
		if (l->cfd[i][0] < 0)
			slot = i;
	struct conn *c = NULL;
	if (l->conns >= conns_max() || total >= DBPORT_CONNS_MAX || slot < 0 || !(c = calloc(1, sizeof *c))) {
		time_t now = time(NULL);
		if (now - l->refused_logged >= 10) {	/* a flood of them is one line each 10 s */
			l->refused_logged = now;
			log_warn("database %s: an external connection refused: %d of its %d, %d of kilnd's %d open",
				 l->id, l->conns, conns_max(), total, DBPORT_CONNS_MAX);
		}
		close(fd);
		return;
	}
	c->l = l, c->slot = slot;
	snprintf(c->ws, sizeof c->ws, "%s", l->ws);
	snprintf(c->sandbox, sizeof c->sandbox, "%s", l->sandbox);
	l->cfd[slot][0] = fd;
	l->conns++;
	total++;
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, conn_run, c) != 0) {
		log_warn("database %s: no thread for an external connection", l->id);
		l->cfd[slot][0] = -1;
		l->conns--;
		total--;
		close(fd);
		free(c);
	}
	pthread_attr_destroy(&attr);
}

/* Gone listeners that no connection uses: closed and freed. Under lock. */
static void reap(void)
{
	for (struct lsn **p = &list; *p;) {
		struct lsn *l = *p;
		if (!l->gone || l->conns) {
			p = &l->next;
			continue;
		}
		*p = l->next;
		if (l->fd >= 0)
			close(l->fd);
		free(l);
	}
}

static void *accept_run(void *arg)
{
	(void)arg;
	static struct pollfd pf[LISTENERS_MAX + 1];
	static struct lsn *of[LISTENERS_MAX + 1];
	for (;;) {
		pthread_mutex_lock(&lock);
		reap();
		bool done = stopping;	/* what is left is freed with the process */
		int n = 0;
		pf[n++] = (struct pollfd){ wake[0], POLLIN, 0 };
		for (struct lsn *l = list; l && n <= LISTENERS_MAX; l = l->next)
			if (!l->gone && l->fd >= 0)
				of[n] = l, pf[n++] = (struct pollfd){ l->fd, POLLIN, 0 };
		pthread_mutex_unlock(&lock);
		if (done)
			break;
		if (poll(pf, (nfds_t)n, -1) < 0) {
			if (errno != EINTR)
				sleep(1);
			continue;
		}
		if (pf[0].revents) {
			char buf[64];
			while (read(wake[0], buf, sizeof buf) > 0)
				;
		}
		pthread_mutex_lock(&lock);
		for (int i = 1; i < n; i++) {
			if (!pf[i].revents)
				continue;
			/* Still in the table (only this thread frees), and
			 * still this descriptor's owner. */
			struct lsn *l = of[i];
			if (l->gone || l->fd != pf[i].fd)
				continue;
			for (int k = 0; k < 16; k++) {
				int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
				if (fd < 0)
					break;
				admit(l, fd);
			}
		}
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

int dbport_start(struct store *st, struct hostif *hi)
{
	store = st, hostif = hi;
	if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return errf_sys("dbport: pipe");
	int e = pthread_create(&acceptor, NULL, accept_run, NULL);
	if (e) {
		close(wake[0]), close(wake[1]);
		wake[0] = wake[1] = -1;
		return errf(e, "dbport: a thread: %s", strerror(e));
	}
	started = true;
	dbport_sync();
	return 0;
}

void dbport_stop(void)
{
	if (!started)
		return;
	pthread_mutex_lock(&lock);
	stopping = true;
	for (struct lsn *l = list; l; l = l->next)
		take_away(l);
	pthread_mutex_unlock(&lock);
	poke();
	/* The relays end once their sockets are shut down; their threads
	 * use the host interface, which is closed after this. */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&lock);
	while (total && pthread_cond_timedwait(&drained, &lock, &until) == 0)
		;
	pthread_mutex_unlock(&lock);
	poke();
	pthread_join(acceptor, NULL);
	started = false;
	close(wake[0]), close(wake[1]);
	wake[0] = wake[1] = -1;
}
