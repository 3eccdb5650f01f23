/*
 * virtio-net (virtio 1.2 §5.1) on a TAP device. The TAP is opened with
 * IFF_VNET_HDR so frames carry the same 12-byte virtio-net header in both
 * directions, and checksum/TSO offloads pass straight through: we copy
 * frames between the TAP and guest buffers without looking inside them.
 *
 * Receive: while the guest has posted buffers, each readable frame goes
 * into the next buffer chain; when it has none we stop polling the TAP
 * until the guest kicks the receive queue.
 */
#include "vmm/devices/virtio_devices.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/vmm.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define VIRTIO_ID_NET 1
#define VIRTIO_NET_F_CSUM       (1ULL << 0)
#define VIRTIO_NET_F_GUEST_CSUM (1ULL << 1)
#define VIRTIO_NET_F_MAC        (1ULL << 5)
#define VIRTIO_NET_F_GUEST_TSO4 (1ULL << 7)
#define VIRTIO_NET_F_GUEST_TSO6 (1ULL << 8)
#define VIRTIO_NET_F_HOST_TSO4  (1ULL << 11)
#define VIRTIO_NET_F_HOST_TSO6  (1ULL << 12)
#define VIRTIO_NET_F_STATUS     (1ULL << 16)

#define RXQ 0
#define TXQ 1
#define QUEUE_SIZE 256
#define VNET_HDR_LEN 12

struct net {
	int tap_fd;
	struct ev_handler *h;
	bool rx_polling;
	struct virtio_dev *dev;
	uint8_t config[12];          /* mac[6], status u16, max pairs u16, mtu u16 */
};

static void set_rx_polling(struct net *n, bool on)
{
	if (n->rx_polling == on || !n->h)
		return;
	n->rx_polling = on;
	ev_modify(&n->dev->vm->loop, n->h, on ? EPOLLIN : 0);
}

/* receive: move frames from the TAP into guest buffers. dev_lock held. */
static void receive(struct net *n)
{
	struct virtio_dev *d = n->dev;
	struct virtq *q = &d->q[RXQ];
	struct virtq_chain c;
	bool any = false;
	for (;;) {
		if (!virtio_active(d) || !q->ready) {
			set_rx_polling(n, false);
			break;
		}
		int rc = virtq_pop(d, q, &c);
		if (rc != 1) {
			set_rx_polling(n, false);   /* the guest kick turns it back on */
			break;
		}
		if (c.in_len < VNET_HDR_LEN) {
			virtq_push(d, q, c.head, 0);
			any = true;
			continue;
		}
		ssize_t len = readv(n->tap_fd, c.iov + c.n_out, c.n_in);
		if (len < 0) {
			q->last_avail--;             /* nothing read: give the chain back */
			if (errno != EAGAIN && errno != EINTR)
				set_rx_polling(n, false);
			break;
		}
		uint16_t one = 1;                    /* num_buffers */
		buf_to_iov(c.iov + c.n_out, c.n_in, 10, &one, 2);
		virtq_push(d, q, c.head, (uint32_t)len);
		any = true;
	}
	if (any)
		virtio_notify_queue(d, q);
}

static void transmit(struct net *n)
{
	struct virtio_dev *d = n->dev;
	struct virtq *q = &d->q[TXQ];
	struct virtq_chain c;
	bool any = false;
	while (virtq_pop(d, q, &c) == 1) {
		if (c.out_len > VNET_HDR_LEN) {
			/* A full TAP queue drops the frame, as a real NIC would. */
			if (writev(n->tap_fd, c.iov, c.n_out) < 0 && errno != EAGAIN && errno != ENOBUFS &&
			    errno != EIO)
				fprintf(stderr, "kiln-vmm: virtio-net: TAP write: %s\n", strerror(errno));
		}
		virtq_push(d, q, c.head, 0);
		any = true;
	}
	if (any)
		virtio_notify_queue(d, q);
}

static void net_notify(struct virtio_dev *d, int qi)
{
	struct net *n = d->priv;
	if (qi == RXQ) {
		set_rx_polling(n, true);
		receive(n);
	} else if (qi == TXQ) {
		transmit(n);
	}
}

static void tap_event(void *opaque, uint32_t events)
{
	(void)events;
	struct net *n = opaque;
	pthread_mutex_lock(&n->dev->vm->dev_lock);
	receive(n);
	pthread_mutex_unlock(&n->dev->vm->dev_lock);
}

static void net_activate(struct virtio_dev *d)
{
	struct net *n = d->priv;
	unsigned off = 0;
	if (d->driver_features & VIRTIO_NET_F_GUEST_CSUM) {
		off |= TUN_F_CSUM;
		if (d->driver_features & VIRTIO_NET_F_GUEST_TSO4)
			off |= TUN_F_TSO4;
		if (d->driver_features & VIRTIO_NET_F_GUEST_TSO6)
			off |= TUN_F_TSO6;
	}
	if (ioctl(n->tap_fd, TUNSETOFFLOAD, off) < 0)
		fprintf(stderr, "kiln-vmm: virtio-net: TUNSETOFFLOAD: %s\n", strerror(errno));
	set_rx_polling(n, true);
}

static void net_reset(struct virtio_dev *d)
{
	set_rx_polling(d->priv, false);
}

static void net_config_read(struct virtio_dev *d, uint32_t off, uint8_t *data, uint32_t len)
{
	struct net *n = d->priv;
	if (off < sizeof n->config && len <= sizeof n->config - off)
		memcpy(data, n->config + off, len);
}

static void net_destroy(struct virtio_dev *d)
{
	struct net *n = d->priv;
	if (n->tap_fd >= 0)
		close(n->tap_fd);   /* a TAP we created disappears with its last fd */
	free(n);
}

static void net_restored(struct virtio_dev *d)
{
	net_activate(d);                          /* offloads on the new TAP, start receiving */
}

static const struct virtio_dev_ops net_ops = {
	.name = "virtio-net",
	.device_id = VIRTIO_ID_NET,
	.num_queues = 2,
	.queue_max = QUEUE_SIZE,
	.features = VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX | VIRTIO_NET_F_MAC |
		    VIRTIO_NET_F_STATUS | VIRTIO_NET_F_CSUM | VIRTIO_NET_F_GUEST_CSUM |
		    VIRTIO_NET_F_GUEST_TSO4 | VIRTIO_NET_F_GUEST_TSO6 |
		    VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_HOST_TSO6,
	.config_read = net_config_read,
	.queue_notify = net_notify,
	.activate = net_activate,
	.reset = net_reset,
	.destroy = net_destroy,
	.restored = net_restored,
};

static int tap_open(const char *name)
{
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("--net %s: /dev/net/tun", name);
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	int hdr = VNET_HDR_LEN;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int rc = errf_sys("--net %s: cannot open the TAP device", name);
		close(fd);
		return rc;
	}
	if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) < 0) {
		int rc = errf_sys("--net %s: TUNSETVNETHDRSZ", name);
		close(fd);
		return rc;
	}
	return fd;
}

/* tap_adopt: a TAP someone else opened (in another network namespace) and
 * passed to us: it must carry virtio-net headers like ours. */
static int tap_adopt(int fd)
{
	struct ifreq ifr = { 0 };
	int hdr = VNET_HDR_LEN;
	if (ioctl(fd, TUNGETIFF, &ifr) < 0)
		return errf_sys("passed TAP descriptor");
	if (!(ifr.ifr_flags & IFF_TAP) || !(ifr.ifr_flags & IFF_NO_PI) || !(ifr.ifr_flags & IFF_VNET_HDR))
		return errf(EINVAL, "passed TAP %s must be opened with IFF_TAP|IFF_NO_PI|IFF_VNET_HDR", ifr.ifr_name);
	if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) < 0)
		return errf_sys("passed TAP %s: TUNSETVNETHDRSZ", ifr.ifr_name);
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return errf_sys("passed TAP %s", ifr.ifr_name);
	return fd;
}

int virtio_net_tap_open(const char *name)
{
	return tap_open(name);
}

int virtio_net_add(struct vm *vm, const char *tap, const char *mac)
{
	struct net *n = calloc(1, sizeof *n);
	if (!n)
		return errf(ENOMEM, "out of memory");
	unsigned m[6];
	if (sscanf(mac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6) {
		free(n);
		return errf(EINVAL, "--mac %s: not a MAC address", mac);
	}
	for (int i = 0; i < 6; i++)
		n->config[i] = (uint8_t)m[i];
	n->config[6] = 1;                         /* VIRTIO_NET_S_LINK_UP */
	n->tap_fd = vm->cfg->tap_fd >= 0 ? tap_adopt(vm->cfg->tap_fd) : tap_open(tap);
	if (n->tap_fd < 0) {
		int rc = n->tap_fd;
		free(n);
		return rc;
	}
	int rc = virtio_mmio_add(vm, &net_ops, n, &n->dev);
	if (rc < 0)
		return rc;
	n->h = ev_add(&vm->loop, EV_DEVICE, n->tap_fd, 0, tap_event, n);
	return n->h ? 0 : -1;
}
