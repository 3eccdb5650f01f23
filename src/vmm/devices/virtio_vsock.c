/*
 * virtio-vsock (virtio 1.2 §5.10) in userspace, bridged to Unix sockets
 * the way Firecracker does it (docs/vmm.md):
 *
 *   host-initiated:  connect to PATH, send "CONNECT <port>\n", read
 *                    "OK <hostport>\n"; then the stream is the guest's.
 *   guest-initiated: the guest connects to (CID 2, port P); we connect to
 *                    the Unix socket PATH_P, or reset the connection.
 *
 * Flow control is virtio-vsock's credit scheme in both directions. Towards
 * the host we advertise CONN_BUF bytes per connection and buffer at most
 * that much when the Unix socket is slow; a guest that sends beyond its
 * credit is reset. Towards the guest we send no more than the guest's
 * advertised free space, and read from a Unix socket only when we have
 * both credit and a free receive buffer, so a fast host writer is slowed
 * by the socket's own backpressure and nothing grows without bound.
 *
 * Runs on the main thread with vm->dev_lock held.
 */
#include "vmm/devices/virtio_devices.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/vmm.h"
#include "common/err.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#define VIRTIO_ID_VSOCK 19
#define RXQ 0
#define TXQ 1
#define EVQ 2
#define QUEUE_SIZE 256

#define HOST_CID 2
#define TYPE_STREAM 1
enum { OP_REQUEST = 1, OP_RESPONSE, OP_RST, OP_SHUTDOWN, OP_RW, OP_CREDIT_UPDATE, OP_CREDIT_REQUEST };
#define SHUT_RCV_FLAG  1
#define SHUT_SEND_FLAG 2

#define MAX_CONNS      1023
#define CONN_BUF       (256 * 1024)       /* credit we give the guest, per connection */
#define MAX_PKT_DATA   (64 * 1024)
#define RX_BATCH       32                 /* guest receive buffers one readv fills */
#define RX_READ_MAX    (128 * 1024)       /* what one readv asks for */
#define RX_IOV         256
#define CONNECT_LINE_MAX 32
#define TIMEOUT_NS     (2 * 1000000000ULL)
#define DRAIN_NS       (120 * 1000000000ULL)   /* a closed connection's host reader must read by then */
#define LOCAL_PORT_FIRST (1u << 30)
#define LOCAL_PORT_LAST  ((1u << 31) - 1)
#define NBUCKETS 256
#define RST_RING 64
#define RESET_ACK_NS   (10 * 1000000000ULL)

struct vsock_hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port;
	uint32_t len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));

_Static_assert(sizeof(struct vsock_hdr) == 44, "virtio_vsock_hdr is 44 bytes");

enum conn_state {
	CONN_AWAIT_CONNECT,   /* host side connected, CONNECT line not read yet */
	CONN_REQUESTED,       /* REQUEST sent to the guest, awaiting RESPONSE */
	CONN_OPEN,
};

/* Control packets a connection still owes the guest. */
#define PEND_REQUEST  1
#define PEND_RESPONSE 2
#define PEND_CREDIT   4
#define PEND_SHUTDOWN 8
#define PEND_RST      16

struct conn {
	struct vsock *vs;
	int fd;
	struct ev_handler *h;
	uint32_t events;             /* what we poll the Unix socket for */
	enum conn_state state;
	uint32_t local_port, peer_port;
	uint64_t deadline_ns;

	uint32_t peer_buf_alloc, peer_fwd_cnt;
	uint32_t tx_cnt;             /* bytes sent to the guest */
	uint32_t rx_cnt;             /* bytes received from the guest */
	uint32_t fwd_cnt;            /* of those, bytes written to the Unix socket */
	uint32_t fwd_cnt_sent;       /* fwd_cnt as last told to the guest */

	uint8_t *pending;            /* guest->host bytes the socket did not take */
	uint32_t pending_head, pending_len;

	char line[CONNECT_LINE_MAX];
	size_t line_len;

	unsigned owed;               /* PEND_* */
	uint32_t shutdown_flags;
	bool host_eof;               /* the Unix side will send no more */
	bool peer_shut_send;         /* the guest will send no more */
	bool readable;               /* in the ready list: socket may have data */
	bool draining;               /* the guest is done; only pending is left to write */

	struct conn *hnext;          /* hash bucket, or the draining list */
	struct conn *rnext;          /* ready or owing list */
	bool in_owed_list;
};

struct vsock {
	struct virtio_dev *dev;
	uint64_t guest_cid;
	char path[108];
	int listen_fd;
	struct ev_handler *listen_h;
	int timer_fd;
	struct ev_handler *timer_h;
	struct conn *buckets[NBUCKETS];
	int nconns;
	uint32_t next_port;
	struct conn *ready;          /* connections with host data to deliver */
	struct conn *owed;           /* connections owing control packets */
	struct conn *draining;       /* closed by the guest, host side still writing */
	struct vsock_hdr rst[RST_RING];  /* resets for unknown connections */
	struct virtq_chain batch[RX_BATCH];   /* send_data's chains after the first */
	int rst_head, rst_len;
	uint8_t config[8];
	/* After a restore, new host connections wait in the listen backlog
	 * until the guest has handled the transport reset: it resets every
	 * connected socket, and would reset one made before it got to the
	 * event too. Its refill of the event queue says it is done. */
	bool held;
	uint16_t evq_avail;          /* the event queue's avail index at the reset */
	uint64_t held_since;
};

static void release_held(struct vsock *vs, bool acked)
{
	if (!vs->held)
		return;
	vs->held = false;
	if (acked)
		fprintf(stderr, "kiln-vmm: vsock: the guest handled the transport reset in %.1f ms\n",
			(double)(now_ns() - vs->held_since) / 1e6);
	else
		fprintf(stderr, "kiln-vmm: vsock: the guest did not handle the transport reset in %llu s; "
			"accepting connections\n", RESET_ACK_NS / 1000000000ULL);
	ev_modify(&vs->dev->vm->loop, vs->listen_h, EPOLLIN);
}

static void conn_destroy(struct conn *c);
static void conn_event(void *opaque, uint32_t events);
static void rx_pump(struct vsock *vs);

static unsigned bucket(uint32_t local, uint32_t peer)
{
	return (local * 2654435761u ^ peer) % NBUCKETS;
}

static struct conn *conn_find(struct vsock *vs, uint32_t local, uint32_t peer)
{
	for (struct conn *c = vs->buckets[bucket(local, peer)]; c; c = c->hnext)
		if (c->local_port == local && c->peer_port == peer)
			return c;
	return NULL;
}

static bool local_port_used(struct vsock *vs, uint32_t port)
{
	for (int i = 0; i < NBUCKETS; i++)
		for (struct conn *c = vs->buckets[i]; c; c = c->hnext)
			if (c->local_port == port)
				return true;
	return false;
}

static void conn_set_events(struct conn *c, uint32_t events)
{
	if (c->events == events || !c->h)
		return;
	c->events = events;
	ev_modify(&c->vs->dev->vm->loop, c->h, events);
}

static void owe(struct conn *c, unsigned what)
{
	c->owed |= what;
	if (!c->in_owed_list) {
		c->in_owed_list = true;
		c->rnext = NULL;
		/* append, so packets go out in the order they were owed */
		struct conn **pp = &c->vs->owed;
		while (*pp)
			pp = &(*pp)->rnext;
		*pp = c;
	}
}

static uint32_t peer_credit(const struct conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;
	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

static void fill_hdr(struct vsock *vs, struct conn *c, struct vsock_hdr *h, uint16_t op)
{
	memset(h, 0, sizeof *h);
	h->src_cid = HOST_CID;
	h->dst_cid = vs->guest_cid;
	h->src_port = c->local_port;
	h->dst_port = c->peer_port;
	h->type = TYPE_STREAM;
	h->op = op;
	h->buf_alloc = CONN_BUF;
	h->fwd_cnt = c->fwd_cnt;
	c->fwd_cnt_sent = c->fwd_cnt;
}

static struct conn *conn_new(struct vsock *vs, int fd, uint32_t local, uint32_t peer,
			     enum conn_state state)
{
	if (vs->nconns >= MAX_CONNS)
		return NULL;
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->vs = vs;
	c->fd = fd;
	c->local_port = local;
	c->peer_port = peer;
	c->state = state;
	c->deadline_ns = now_ns() + TIMEOUT_NS;
	c->h = ev_add(&vs->dev->vm->loop, EV_DEVICE, fd, 0, conn_event, c);
	if (!c->h) {
		free(c);
		return NULL;
	}
	unsigned b = bucket(local, peer);
	c->hnext = vs->buckets[b];
	vs->buckets[b] = c;
	vs->nconns++;
	return c;
}

static void list_remove(struct conn **head, struct conn *c)
{
	for (struct conn **pp = head; *pp; pp = &(*pp)->rnext)
		if (*pp == c) {
			*pp = c->rnext;
			return;
		}
}

/* Take c off the hnext chain it is on: its port bucket, or the draining list. */
static void chain_unlink(struct conn *c)
{
	struct vsock *vs = c->vs;
	struct conn **head = c->draining ? &vs->draining : &vs->buckets[bucket(c->local_port, c->peer_port)];
	for (struct conn **pp = head; *pp; pp = &(*pp)->hnext)
		if (*pp == c) {
			*pp = c->hnext;
			break;
		}
}

static void conn_destroy(struct conn *c)
{
	struct vsock *vs = c->vs;
	chain_unlink(c);
	if (c->readable)
		list_remove(&vs->ready, c);
	if (c->in_owed_list)
		list_remove(&vs->owed, c);
	ev_del(&vs->dev->vm->loop, c->h);
	close(c->fd);
	free(c->pending);
	free(c);
	vs->nconns--;
}

/* conn_reset: tell the guest the connection is gone, and forget it once
 * the RST has gone out. */
static void conn_reset(struct conn *c)
{
	if (c->state == CONN_AWAIT_CONNECT) {
		conn_destroy(c);
		return;
	}
	c->owed = 0;
	owe(c, PEND_RST);
	conn_set_events(c, 0);
	if (c->readable) {
		list_remove(&c->vs->ready, c);
		c->readable = false;
	}
}

static void queue_rst(struct vsock *vs, const struct vsock_hdr *in)
{
	if (vs->rst_len == RST_RING)
		return;                          /* the guest will time out instead */
	struct vsock_hdr *h = &vs->rst[(vs->rst_head + vs->rst_len++) % RST_RING];
	memset(h, 0, sizeof *h);
	h->src_cid = HOST_CID;
	h->dst_cid = vs->guest_cid;
	h->src_port = in->dst_port;
	h->dst_port = in->src_port;
	h->type = TYPE_STREAM;
	h->op = OP_RST;
}

/* conn_drain: the guest is done with c (it closed, or reset after closing)
 * but the host reader has not yet taken all the guest sent before that.
 * The guest gets its RST now if it still waits for one; the socket leaves
 * the port table and stays open only to write the rest, then closes, so
 * the reader sees every byte and then EOF. A reader that takes nothing
 * for DRAIN_NS loses the rest (the timer). Dropping it at once, as a reset
 * did, cut off a slow reader's last bytes: an exec whose output ended
 * while its client was behind lost its tail and its exit status. */
static void conn_drain(struct conn *c, bool tell_guest)
{
	struct vsock *vs = c->vs;
	if (tell_guest) {
		struct vsock_hdr from = { .src_port = c->peer_port, .dst_port = c->local_port };
		queue_rst(vs, &from);
	}
	chain_unlink(c);
	if (c->readable)
		list_remove(&vs->ready, c);
	if (c->in_owed_list)
		list_remove(&vs->owed, c);
	c->readable = c->in_owed_list = false;
	c->owed = 0;
	c->draining = true;
	c->deadline_ns = now_ns() + DRAIN_NS;
	c->hnext = vs->draining;
	vs->draining = c;
	conn_set_events(c, EPOLLOUT);
}

/* conn_close_from_guest: the guest has ended c; flush, then drain what the
 * socket did not take, or reset when nothing is left (or the reader is
 * gone). */
static bool flush_pending(struct conn *c);
static void conn_close_from_guest(struct conn *c, bool tell_guest)
{
	if (flush_pending(c) && c->pending_len)
		conn_drain(c, tell_guest);
	else if (tell_guest)
		conn_reset(c);
	else
		conn_destroy(c);
}

/* ---- host -> guest ----------------------------------------------------- */

static bool put_packet(struct vsock *vs, const struct vsock_hdr *h, struct virtq_chain *ch)
{
	struct virtio_dev *d = vs->dev;
	if (buf_to_iov(ch->iov + ch->n_out, ch->n_in, 0, h, sizeof *h) != sizeof *h) {
		virtq_push(d, &d->q[RXQ], ch->head, 0);
		return false;
	}
	virtq_push(d, &d->q[RXQ], ch->head, (uint32_t)(sizeof *h + h->len));
	return true;
}

/* send_owed: one control packet from c, in a fixed order. */
static void send_owed(struct vsock *vs, struct conn *c, struct virtq_chain *ch)
{
	struct vsock_hdr h;
	unsigned what;
	if (c->owed & PEND_RST) what = PEND_RST;
	else if (c->owed & PEND_REQUEST) what = PEND_REQUEST;
	else if (c->owed & PEND_RESPONSE) what = PEND_RESPONSE;
	else if (c->owed & PEND_CREDIT) what = PEND_CREDIT;
	else what = PEND_SHUTDOWN;
	static const uint16_t ops[] = { [PEND_RST] = OP_RST, [PEND_REQUEST] = OP_REQUEST,
					[PEND_RESPONSE] = OP_RESPONSE, [PEND_CREDIT] = OP_CREDIT_UPDATE,
					[PEND_SHUTDOWN] = OP_SHUTDOWN };
	fill_hdr(vs, c, &h, ops[what]);
	if (what == PEND_SHUTDOWN)
		h.flags = c->shutdown_flags;
	c->owed &= ~what;
	put_packet(vs, &h, ch);
	if (what == PEND_RST) {
		conn_destroy(c);
		return;
	}
	if (!c->owed) {
		list_remove(&vs->owed, c);
		c->in_owed_list = false;
	}
}

/* send_data: read what the Unix socket has, within the guest's credit,
 * straight into the guest's receive buffers: into first, the chain
 * rx_pump popped, and while the credit allows more than the chains so far
 * hold, into the next ones, all in one readv. Linux posts 4 KiB receive
 * buffers, so a readv per chain cost a syscall (and, through the pump's
 * rounds, more) per 4 KiB moved. Returns the chains used; with 0, first is
 * the caller's to give back (the others this popped it gives back). */
static int send_data(struct vsock *vs, struct conn *c, struct virtq_chain *first)
{
	struct virtio_dev *d = vs->dev;
	struct virtq *q = &d->q[RXQ];
	struct iovec data[RX_IOV];
	struct virtq_chain *chs[RX_BATCH];
	size_t room[RX_BATCH];
	uint32_t credit = peer_credit(c);
	size_t want = credit < RX_READ_MAX ? credit : RX_READ_MAX;
	size_t total = 0;
	int nch = 0, niov = 0, popped = 1;
	chs[0] = first;
	while (total < want) {
		/* The part of chain nch after its header. */
		struct virtq_chain *ch = chs[nch];
		size_t r = ch->in_len > sizeof(struct vsock_hdr) ? ch->in_len - sizeof(struct vsock_hdr) : 0;
		if (r > want - total)
			r = want - total;
		if (r > MAX_PKT_DATA)
			r = MAX_PKT_DATA;
		int n = r ? iov_slice(ch->iov + ch->n_out, ch->n_in, sizeof(struct vsock_hdr), r,
				      data + niov, RX_IOV - niov) : -1;
		if (n <= 0)
			break;                /* it holds no data: it goes back unused */
		room[nch++] = r;
		niov += n;
		total += r;
		if (total >= want || nch == RX_BATCH || niov == RX_IOV ||
		    virtq_pop(d, q, &vs->batch[nch]) != 1)
			break;
		chs[nch] = &vs->batch[nch];
		popped++;
	}
	bool done_reading = false;
	ssize_t got = 0;
	if (total == 0) {
		done_reading = true;      /* no credit: wait for a credit update */
	} else {
		got = readv(c->fd, data, niov);
		if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
			done_reading = true;
			got = -1;
			conn_set_events(c, c->events | EPOLLIN);
		} else if (got <= 0) {
			/* EOF or error from the host side: no more data from it. */
			done_reading = true;
			c->host_eof = true;
			if (got < 0 || c->peer_shut_send) {
				q->last_avail -= (uint16_t)(popped - 1);
				if (got < 0)
					conn_reset(c);
				else
					conn_close_from_guest(c, true);   /* both directions are done */
				return 0;
			}
			/* Half-close: the guest reads EOF, and may still write. */
			c->shutdown_flags = SHUT_SEND_FLAG;
			owe(c, PEND_SHUTDOWN);
		} else if ((size_t)got < total) {
			/* The socket had less than there was room for: read again
			 * when it says it has more (rather than find it empty). */
			done_reading = true;
			conn_set_events(c, c->events | EPOLLIN);
		}
	}
	if (done_reading) {
		list_remove(&vs->ready, c);
		c->readable = false;
		if (want == 0 && !c->host_eof)
			conn_set_events(c, c->events & ~EPOLLIN);   /* credit update re-arms */
	}
	int used = 0;
	for (size_t left = got > 0 ? (size_t)got : 0; left; used++) {
		struct vsock_hdr h;
		fill_hdr(vs, c, &h, OP_RW);
		h.len = (uint32_t)(left < room[used] ? left : room[used]);
		left -= h.len;
		c->tx_cnt += h.len;
		put_packet(vs, &h, chs[used]);
	}
	/* The chains popped and not used go back; with none used, first is
	 * the caller's. */
	q->last_avail -= (uint16_t)(popped - (used > 0 ? used : 1));
	return used;
}

static void rx_pump(struct vsock *vs)
{
	struct virtio_dev *d = vs->dev;
	struct virtq *q = &d->q[RXQ];
	struct virtq_chain ch;
	bool any = false;
	while (virtio_active(d) && (vs->rst_len || vs->owed || vs->ready)) {
		if (virtq_pop(d, q, &ch) != 1)
			break;
		bool used = true;
		if (vs->rst_len) {
			put_packet(vs, &vs->rst[vs->rst_head], &ch);
			vs->rst_head = (vs->rst_head + 1) % RST_RING;
			vs->rst_len--;
		} else if (vs->owed) {
			send_owed(vs, vs->owed, &ch);
		} else {
			used = send_data(vs, vs->ready, &ch) > 0;
		}
		if (!used)
			q->last_avail--;            /* give the unused chain back */
		any |= used;
	}
	if (any)
		virtio_notify_queue(d, q);
}

/* ---- guest -> host ----------------------------------------------------- */

static bool flush_pending(struct conn *c)
{
	while (c->pending_len) {
		uint32_t first = CONN_BUF - c->pending_head;
		if (first > c->pending_len)
			first = c->pending_len;
		ssize_t n = send(c->fd, c->pending + c->pending_head, first, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		if (n <= 0)
			return false;
		c->pending_head = (c->pending_head + (uint32_t)n) % CONN_BUF;
		c->pending_len -= (uint32_t)n;
		c->fwd_cnt += (uint32_t)n;
	}
	return true;
}

static void maybe_credit_update(struct conn *c)
{
	/* Tell the guest about freed space before it runs dry. */
	if (c->state == CONN_OPEN && c->fwd_cnt - c->fwd_cnt_sent >= CONN_BUF / 4)
		owe(c, PEND_CREDIT);
}

static void after_host_write(struct conn *c)
{
	if (c->pending_len)
		conn_set_events(c, c->events | EPOLLOUT);
	else
		conn_set_events(c, c->events & ~EPOLLOUT);
	if (!c->pending_len && c->peer_shut_send)
		shutdown(c->fd, SHUT_WR);
	maybe_credit_update(c);
}

static void deliver_to_host(struct conn *c, const struct virtq_chain *ch, uint32_t len)
{
	if (c->rx_cnt - c->fwd_cnt + len > CONN_BUF) {
		conn_reset(c);                    /* beyond the credit we gave */
		return;
	}
	c->rx_cnt += len;
	size_t skip = sizeof(struct vsock_hdr);
	if (!c->pending_len) {
		/* Fast path: straight from guest memory to the socket. */
		struct iovec v[VIRTQ_MAX_SEGS];
		int n = iov_slice(ch->iov, ch->n_out, skip, len, v, VIRTQ_MAX_SEGS);
		struct msghdr mh = { .msg_iov = v, .msg_iovlen = n > 0 ? (size_t)n : 0 };
		ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			conn_reset(c);
			return;
		}
		if (w < 0)
			w = 0;
		c->fwd_cnt += (uint32_t)w;
		skip = sizeof(struct vsock_hdr) + (size_t)w;
		len -= (uint32_t)w;
	}
	if (len) {
		if (!c->pending && !(c->pending = malloc(CONN_BUF))) {
			conn_reset(c);
			return;
		}
		/* Into the ring, in at most two pieces (the credit check above
		 * keeps it from overflowing). */
		while (len) {
			uint32_t tail = (c->pending_head + c->pending_len) % CONN_BUF;
			uint32_t k = CONN_BUF - tail < len ? CONN_BUF - tail : len;
			iov_to_buf(ch->iov, ch->n_out, skip, c->pending + tail, k);
			c->pending_len += k;
			skip += k;
			len -= k;
		}
	}
	after_host_write(c);
}

/* connect_guest_initiated: the guest asked for host port P. */
static void connect_guest_initiated(struct vsock *vs, const struct vsock_hdr *h)
{
	char path[sizeof vs->path + 16];
	snprintf(path, sizeof path, "%s_%u", vs->path, h->dst_port);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = -1;
	if (strlen(path) < sizeof sa.sun_path) {
		strcpy(sa.sun_path, path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
			close(fd);
			fd = -1;
		}
	}
	struct conn *c = fd >= 0 ? conn_new(vs, fd, h->dst_port, h->src_port, CONN_OPEN) : NULL;
	if (!c) {
		if (fd >= 0)
			close(fd);
		queue_rst(vs, h);
		return;
	}
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
	owe(c, PEND_RESPONSE);
	conn_set_events(c, EPOLLIN);
}

static void handle_tx_packet(struct vsock *vs, const struct virtq_chain *ch)
{
	struct vsock_hdr h;
	if (iov_to_buf(ch->iov, ch->n_out, 0, &h, sizeof h) != sizeof h)
		return;
	if (h.src_cid != vs->guest_cid || h.dst_cid != HOST_CID || h.type != TYPE_STREAM) {
		if (h.op != OP_RST)
			queue_rst(vs, &h);
		return;
	}
	uint32_t len = h.len;
	if (len > ch->out_len - sizeof h)
		len = 0;                            /* lying about its length */
	struct conn *c = conn_find(vs, h.dst_port, h.src_port);
	if (!c) {
		if (h.op == OP_REQUEST)
			connect_guest_initiated(vs, &h);
		else if (h.op != OP_RST)
			queue_rst(vs, &h);
		return;
	}
	c->peer_buf_alloc = h.buf_alloc;
	c->peer_fwd_cnt = h.fwd_cnt;
	/* New credit may unblock host->guest data. */
	if (c->state == CONN_OPEN && !c->host_eof && !c->readable && peer_credit(c))
		conn_set_events(c, c->events | EPOLLIN);

	switch (h.op) {
	case OP_RESPONSE:
		if (c->state == CONN_REQUESTED) {
			char ok[32];
			int n = snprintf(ok, sizeof ok, "OK %u\n", c->local_port);
			if (send(c->fd, ok, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
				conn_reset(c);
				return;
			}
			c->state = CONN_OPEN;
			conn_set_events(c, EPOLLIN);
		}
		break;
	case OP_RW:
		if (c->state == CONN_OPEN)
			deliver_to_host(c, ch, len);
		break;
	case OP_CREDIT_REQUEST:
		owe(c, PEND_CREDIT);
		break;
	case OP_CREDIT_UPDATE:
		break;                           /* handled above */
	case OP_SHUTDOWN:
		if (h.flags & SHUT_SEND_FLAG) {
			c->peer_shut_send = true;
			if (!c->pending_len)
				shutdown(c->fd, SHUT_WR);
		}
		if ((h.flags & (SHUT_SEND_FLAG | SHUT_RCV_FLAG)) == (SHUT_SEND_FLAG | SHUT_RCV_FLAG) ||
		    ((h.flags & SHUT_SEND_FLAG) && c->host_eof)) {
			/* The guest closed: finish with RST once the reader has it all. */
			conn_close_from_guest(c, true);
		}
		break;
	case OP_RST:
		/* After a close of its own, a guest that waited long enough for
		 * our RST resets: what it sent before still goes to the reader. */
		if (c->peer_shut_send)
			conn_close_from_guest(c, false);
		else
			conn_destroy(c);
		break;
	case OP_REQUEST:
		conn_reset(c);                   /* a duplicate of a live connection */
		break;
	}
}

static void tx_process(struct vsock *vs)
{
	struct virtio_dev *d = vs->dev;
	struct virtq *q = &d->q[TXQ];
	struct virtq_chain ch;
	bool any = false;
	while (virtq_pop(d, q, &ch) == 1) {
		handle_tx_packet(vs, &ch);
		virtq_push(d, q, ch.head, 0);
		any = true;
	}
	if (any)
		virtio_notify_queue(d, q);
}

/* ---- Unix socket side -------------------------------------------------- */

/* read_connect_line: "CONNECT <port>\n", case-insensitive, as Firecracker. */
static void read_connect_line(struct conn *c)
{
	struct vsock *vs = c->vs;
	while (c->line_len < sizeof c->line - 1) {
		ssize_t n = recv(c->fd, c->line + c->line_len, 1, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			conn_destroy(c);
			return;
		}
		if (c->line[c->line_len++] != '\n')
			continue;
		c->line[c->line_len] = 0;
		unsigned long port;
		char *end;
		if (strncasecmp(c->line, "CONNECT ", 8) != 0 ||
		    (port = strtoul(c->line + 8, &end, 10), end == c->line + 8) ||
		    (*end != '\n' && *end != '\r') || port > 0xffffffffUL) {
			static const char msg[] = "ERR expected CONNECT <port>\n";
			send(c->fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			conn_destroy(c);
			return;
		}
		/* Now that we know the guest port, rehash under (local, peer). */
		struct conn **pp = &vs->buckets[bucket(c->local_port, c->peer_port)];
		for (; *pp; pp = &(*pp)->hnext)
			if (*pp == c) {
				*pp = c->hnext;
				break;
			}
		c->peer_port = (uint32_t)port;
		unsigned b = bucket(c->local_port, c->peer_port);
		c->hnext = vs->buckets[b];
		vs->buckets[b] = c;
		c->state = CONN_REQUESTED;
		c->deadline_ns = now_ns() + TIMEOUT_NS;
		c->peer_buf_alloc = 0;
		conn_set_events(c, 0);
		owe(c, PEND_REQUEST);
		rx_pump(vs);
		return;
	}
	conn_destroy(c);                         /* line too long */
}

static void conn_event(void *opaque, uint32_t events)
{
	struct conn *c = opaque;
	struct vsock *vs = c->vs;
	pthread_mutex_lock(&vs->dev->vm->dev_lock);
	if (c->draining) {
		if (!flush_pending(c) || !c->pending_len)
			conn_destroy(c);          /* all written (EOF follows it), or the reader left */
		goto out;
	}
	if (c->state == CONN_AWAIT_CONNECT) {
		read_connect_line(c);
		goto out;
	}
	if (events & EPOLLOUT) {
		if (!flush_pending(c)) {
			conn_reset(c);
			goto out;
		}
		after_host_write(c);
	}
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && (c->events & EPOLLIN) && !c->readable) {
		/* Deliver from the pump, which knows when the guest has room. */
		conn_set_events(c, c->events & ~EPOLLIN);
		c->readable = true;
		c->rnext = NULL;
		struct conn **pp = &vs->ready;
		while (*pp)
			pp = &(*pp)->rnext;
		*pp = c;
	}
	rx_pump(vs);
out:
	pthread_mutex_unlock(&vs->dev->vm->dev_lock);
}

static void accept_event(void *opaque, uint32_t events)
{
	(void)events;
	struct vsock *vs = opaque;
	int fd = accept4(vs->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	pthread_mutex_lock(&vs->dev->vm->dev_lock);
	uint32_t port = 0;
	for (uint32_t tries = 0; tries < 1u << 16; tries++) {
		uint32_t p = vs->next_port++;
		if (vs->next_port > LOCAL_PORT_LAST)
			vs->next_port = LOCAL_PORT_FIRST;
		if (!local_port_used(vs, p)) {
			port = p;
			break;
		}
	}
	/* The peer port is unknown until the CONNECT line: 0 for now. */
	struct conn *c = port ? conn_new(vs, fd, port, 0, CONN_AWAIT_CONNECT) : NULL;
	if (!c)
		close(fd);
	else
		conn_set_events(c, EPOLLIN);
	pthread_mutex_unlock(&vs->dev->vm->dev_lock);
}

static void timer_event(void *opaque, uint32_t events)
{
	(void)events;
	struct vsock *vs = opaque;
	uint64_t n;
	if (read(vs->timer_fd, &n, sizeof n) < 0)
		return;
	pthread_mutex_lock(&vs->dev->vm->dev_lock);
	uint64_t now = now_ns();
	if (vs->held && now - vs->held_since > RESET_ACK_NS)
		release_held(vs, false);
	for (int i = 0; i < NBUCKETS; i++) {
		struct conn *c = vs->buckets[i];
		while (c) {
			struct conn *next = c->hnext;
			if (c->state != CONN_OPEN && now > c->deadline_ns && !(c->owed & PEND_RST))
				conn_reset(c);
			c = next;
		}
	}
	for (struct conn *c = vs->draining, *next; c; c = next) {
		next = c->hnext;
		if (now > c->deadline_ns)
			conn_destroy(c);
	}
	rx_pump(vs);
	pthread_mutex_unlock(&vs->dev->vm->dev_lock);
}

/* ---- device ops -------------------------------------------------------- */

static void vsock_notify(struct virtio_dev *d, int qi)
{
	struct vsock *vs = d->priv;
	if (qi == EVQ && vs->held && virtq_avail_idx(&d->q[EVQ]) != vs->evq_avail)
		release_held(vs, true);       /* an event buffer came back: reset done */
	if (qi == TXQ)
		tx_process(vs);
	rx_pump(vs);                              /* new rx buffers, or replies owed */
}

static void vsock_config_read(struct virtio_dev *d, uint32_t off, uint8_t *data, uint32_t len)
{
	struct vsock *vs = d->priv;
	if (off < sizeof vs->config && len <= sizeof vs->config - off)
		memcpy(data, vs->config + off, len);
}

static void drop_all(struct vsock *vs)
{
	for (int i = 0; i < NBUCKETS; i++)
		while (vs->buckets[i])
			conn_destroy(vs->buckets[i]);
	while (vs->draining)
		conn_destroy(vs->draining);
	vs->rst_len = 0;
}

static void vsock_reset(struct virtio_dev *d)
{
	drop_all(d->priv);
}

static void vsock_destroy(struct virtio_dev *d)
{
	struct vsock *vs = d->priv;
	if (vs->dev)
		drop_all(vs);
	if (vs->listen_fd >= 0) {
		close(vs->listen_fd);
		unlink(vs->path);
	}
	if (vs->timer_fd >= 0)
		close(vs->timer_fd);
	free(vs);
}

/* After a restore the guest's connections point at peers that no longer
 * exist: the transport-reset event makes it drop them (listeners stay)
 * and re-read its CID. */
static void vsock_restored(struct virtio_dev *d)
{
	struct virtq *q = &d->q[EVQ];
	struct virtq_chain ch;
	if (virtq_pop(d, q, &ch) != 1)
		return;
	uint32_t id = 0;                          /* VIRTIO_VSOCK_EVENT_TRANSPORT_RESET */
	size_t n = buf_to_iov(ch.iov + ch.n_out, ch.n_in, 0, &id, sizeof id);
	struct vsock *vs = d->priv;
	/* Linux refills the event queue and kicks it once it has handled the
	 * event; with EVENT_IDX it kicks only if asked to. */
	vs->evq_avail = virtq_kick_on_next(d, q);
	vs->held = true;
	vs->held_since = now_ns();
	ev_modify(&d->vm->loop, vs->listen_h, 0);
	virtq_push(d, q, ch.head, (uint32_t)n);
	virtio_notify_queue(d, q);
}

static const struct virtio_dev_ops vsock_ops = {
	.name = "virtio-vsock",
	.device_id = VIRTIO_ID_VSOCK,
	.num_queues = 3,
	.queue_max = QUEUE_SIZE,
	.features = VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX,
	.config_read = vsock_config_read,
	.queue_notify = vsock_notify,
	.reset = vsock_reset,
	.destroy = vsock_destroy,
	.restored = vsock_restored,
};

int virtio_vsock_add(struct vm *vm, uint32_t guest_cid, const char *uds_path)
{
	struct vsock *vs = calloc(1, sizeof *vs);
	if (!vs)
		return errf(ENOMEM, "out of memory");
	vs->guest_cid = guest_cid;
	vs->next_port = LOCAL_PORT_FIRST;
	vs->listen_fd = vs->timer_fd = -1;
	memcpy(vs->config, &vs->guest_cid, 8);
	snprintf(vs->path, sizeof vs->path, "%s", uds_path);
	int rc = virtio_mmio_add(vm, &vsock_ops, vs, &vs->dev);
	if (rc < 0)
		return rc;

	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", uds_path);
	vs->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (vs->listen_fd < 0)
		return errf_sys("--vsock %s", uds_path);
	unlink(uds_path);   /* config_check made sure it is free or stale */
	if (bind(vs->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		rc = errf_sys("--vsock %s", uds_path);
		close(vs->listen_fd);
		vs->listen_fd = -1;
		return rc;
	}
	if (listen(vs->listen_fd, 128) < 0)
		return errf_sys("--vsock %s", uds_path);
	vs->listen_h = ev_add(&vm->loop, EV_DEVICE, vs->listen_fd, EPOLLIN, accept_event, vs);
	vs->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!vs->listen_h || vs->timer_fd < 0)
		return errf_sys("--vsock: timer");
	struct itimerspec its = { .it_interval = { 0, 500000000 }, .it_value = { 0, 500000000 } };
	timerfd_settime(vs->timer_fd, 0, &its, NULL);
	vs->timer_h = ev_add(&vm->loop, EV_DEVICE, vs->timer_fd, EPOLLIN, timer_event, vs);
	return vs->timer_h ? 0 : -1;
}
