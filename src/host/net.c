/*
 * net: see net.h. The nftables and ip(8) work is src/net's; this file
 * decides which slot a sandbox has and keeps the record true.
 */
#include "host/host_int.h"
#include "host/net.h"
#include "net/netpolicy.h"
#include "host/netpool.h"
#include "common/err.h"
#include "host/host_config.h"
#include "common/log.h"
#include "net/net.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void net_lease_of(uint32_t slot, struct net_lease *out)
{
	struct net_config nc;
	struct net_slot s;
	net_default_config(&nc);
	net_slot_info(&nc, slot, &s);
	memset(out, 0, sizeof *out);
	out->slot = slot;
	snprintf(out->tap, sizeof out->tap, "%s", s.tap);
	snprintf(out->netns, sizeof out->netns, "%s", s.netns_path);
}

/* The policy, with the sandbox's workspace membership (net/net.h). */
static int apply(uint32_t slot, const char *policy, const char *workspace)
{
	struct net_policy p;
	int rc = netpolicy_parse(policy, &p);
	if (rc < 0)
		return rc;
	p.workspace = workspace[0] ? net_workspace_mark(workspace) : 0;
	struct net_config nc;
	struct net_slot s;
	net_default_config(&nc);
	net_slot_info(&nc, slot, &s);
	return net_set_policy(&nc, &s, &p);
}

int net_acquire(struct host *h, struct sandbox *sb, bool want, struct net_lease *out)
{
	memset(out, 0, sizeof *out);
	if (!want)
		return 0;
	if (!h->net)
		return errf(ENOTSUP, "this VM has a network device but kilnd runs with --no-net "
				     "(rebuild the template with --no-net, or turn networking on)");
	pthread_mutex_lock(&sb->lock);
	uint32_t slot = (uint32_t)sb->row.net_slot;
	char *policy = sb->row.net_policy ? strdup(sb->row.net_policy) : NULL;
	char workspace[ID_MAX];
	snprintf(workspace, sizeof workspace, "%s", sb->row.workspace);
	pthread_mutex_unlock(&sb->lock);
	int rc = 0;
	if (slot && !netpool_exists(h->net, slot)) {
		log_warn("sandbox %s: its network (slot %u) was gone; making another", sb->row.id, slot);
		netpool_drop(h->net, slot);
		slot = 0;
	}
	bool fresh = !slot;
	if (fresh)
		rc = netpool_take(h->net, &slot);
	/* The policy is in force before the VM runs: a guest never sees a
	 * moment of the open default. A fresh slot has the open policy
	 * already (net_create): only its workspace to join. */
	if (rc == 0 && fresh && !policy && workspace[0]) {
		struct net_config nc;
		struct net_slot s;
		net_default_config(&nc);
		net_slot_info(&nc, slot, &s);
		if ((rc = net_join_workspace(&nc, &s, net_workspace_mark(workspace))) < 0)
			netpool_drop(h->net, slot);
	} else if (rc == 0 && !(fresh && !policy) && (rc = apply(slot, policy, workspace)) < 0 && fresh) {
		netpool_drop(h->net, slot);
	}
	free(policy);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&sb->lock);
	sb->row.net_slot = (int)slot;
	pthread_mutex_unlock(&sb->lock);
	net_lease_of(slot, out);
	return 0;
}

void net_release(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	uint32_t slot = (uint32_t)sb->row.net_slot;
	sb->row.net_slot = 0;
	pthread_mutex_unlock(&sb->lock);
	if (slot && h->net)
		netpool_drop(h->net, slot);
}

int net_change_policy(struct host *h, struct sandbox *sb, const char *policy)
{
	pthread_mutex_lock(&sb->lock);
	uint32_t slot = (uint32_t)sb->row.net_slot;
	char workspace[ID_MAX];
	snprintf(workspace, sizeof workspace, "%s", sb->row.workspace);
	pthread_mutex_unlock(&sb->lock);
	int rc = slot && h->net ? apply(slot, policy, workspace) : 0;
	if (rc < 0)
		return rc;
	char *copy = policy ? strdup(policy) : NULL;
	if (policy && !copy)
		return errf(ENOMEM, "out of memory");
	pthread_mutex_lock(&sb->lock);
	free(sb->row.net_policy);
	sb->row.net_policy = copy;
	pthread_mutex_unlock(&sb->lock);
	return sandbox_save(h, sb);
}

/* ---- a TAP from another namespace ----------------------------------------------------- */

struct tap_job {
	const char *netns, *tap;
	int fd;
	char why[300];		/* errmsg() is per thread */
};

/* setns() changes the calling thread's namespace only: a thread of its
 * own does it, and the namespace ends with the thread. The descriptor of
 * /dev/net/tun belongs to the namespace it was opened in. */
static void tap_open_here(struct tap_job *j);

static void *tap_thread(void *arg)
{
	struct tap_job *j = arg;
	tap_open_here(j);
	if (j->fd < 0)
		snprintf(j->why, sizeof j->why, "%s", errmsg());
	return NULL;
}

static void tap_open_here(struct tap_job *j)
{
	int ns = open(j->netns, O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		j->fd = errf_sys("network namespace %s", j->netns);
		return;
	}
	if (unshare(CLONE_FS) < 0 || setns(ns, CLONE_NEWNET) < 0) {
		j->fd = errf_sys("join network namespace %s", j->netns);
		close(ns);
		return;
	}
	close(ns);
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		j->fd = errf_sys("/dev/net/tun");
		return;
	}
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", j->tap);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		j->fd = errf_sys("open TAP %s in %s", j->tap, j->netns);
		close(fd);
		return;
	}
	j->fd = fd;
}

int net_tap_open(const char *netns, const char *tap)
{
	struct tap_job j = { .netns = netns, .tap = tap, .fd = -EIO };
	pthread_t t;
	if (pthread_create(&t, NULL, tap_thread, &j) != 0)
		return errf(EAGAIN, "cannot start a thread");
	pthread_join(t, NULL);
	return j.fd < 0 ? errf(-j.fd, "%s", j.why) : j.fd;
}
