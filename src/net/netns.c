/*
 * netns: see netns.h. Work inside another network namespace runs on a
 * thread of its own that enters it (setns and unshare of CLONE_NEWNET act
 * on the calling thread only, and kilnd's other threads must stay in the
 * host's namespace) and ends there, so no thread ever comes back changed.
 */
#include "net/netns.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define NETNS_RUN_DIR "/run/netns"

/* libnftables keeps its state in its context, but older releases kept
 * some globals (the symbol tables it loads): one run at a time. A run is
 * a netlink transaction of microseconds; contexts are not reused, so a
 * failed run leaves nothing behind for the next. */
static pthread_mutex_t nft_lock = PTHREAD_MUTEX_INITIALIZER;

static int nft_here(const char *script)
{
	pthread_mutex_lock(&nft_lock);
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx) {
		pthread_mutex_unlock(&nft_lock);
		return errf(ENOMEM, "nft: cannot make a libnftables context");
	}
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	int rc = 0;
	if (nft_run_cmd_from_buffer(ctx, script) != 0) {
		const char *e = nft_ctx_get_error_buffer(ctx);
		char msg[400];
		snprintf(msg, sizeof msg, "%s", e && *e ? e : "failed");
		msg[strcspn(msg, "\n")] = 0;
		rc = errf(EIO, "nft: %s", msg);
	}
	nft_ctx_free(ctx);
	pthread_mutex_unlock(&nft_lock);
	return rc;
}

/* ---- a thread in another network namespace ------------------------------ */

struct in_ns {
	const char *path;		/* the namespace to enter; NULL: a new one */
	int (*fn)(void *arg);
	void *arg;
	int rc;
	char msg[512];			/* errmsg() is per thread: carried back */
};

static void *in_ns_main(void *p)
{
	struct in_ns *x = p;
	if (x->path) {
		int fd = open(x->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			x->rc = errf_sys("%s", x->path);
		} else {
			if (setns(fd, CLONE_NEWNET) < 0)
				x->rc = errf_sys("enter the network namespace %s", x->path);
			close(fd);
		}
	} else if (unshare(CLONE_NEWNET) < 0) {
		x->rc = errf_sys("a new network namespace");
	}
	if (x->rc == 0)
		x->rc = x->fn(x->arg);
	if (x->rc < 0)
		snprintf(x->msg, sizeof x->msg, "%s", errmsg());
	return NULL;
}

static int in_ns(const char *path, int (*fn)(void *), void *arg)
{
	struct in_ns x = { .path = path, .fn = fn, .arg = arg };
	pthread_t t;
	int e = pthread_create(&t, NULL, in_ns_main, &x);
	if (e)
		return errf(e, "a thread for %s: %s", path ? path : "a new network namespace", strerror(e));
	pthread_join(t, NULL);
	return x.rc < 0 ? errf(-x.rc, "%s", x.msg) : x.rc;
}

static int nft_in(void *script)
{
	return nft_here(script);
}

int nft_apply(const char *netns_path, const char *script)
{
	if (!netns_path)
		return nft_here(script);
	return in_ns(netns_path, nft_in, (void *)script);
}

/* ---- namespaces ------------------------------------------------------------ */

/* As ip-netns(8) does before it binds a namespace: NETNS_RUN_DIR a shared
 * mount (bound onto itself first if it is no mount), so that a namespace
 * unmounted here is unmounted in the mount namespaces made since (the
 * VMMs' jails) and is freed, not pinned by their copies. */
static int run_dir_shared(void)
{
	if (mkdir(NETNS_RUN_DIR, 0755) < 0 && errno != EEXIST)
		return errf_sys("%s", NETNS_RUN_DIR);
	bool bound = false;
	while (mount("", NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL) < 0) {
		if (errno != EINVAL || bound)
			return errf_sys("make %s a shared mount", NETNS_RUN_DIR);
		if (mount(NETNS_RUN_DIR, NETNS_RUN_DIR, "none", MS_BIND | MS_REC, NULL) < 0)
			return errf_sys("bind %s onto itself", NETNS_RUN_DIR);
		bound = true;
	}
	return 0;
}

static int bind_own(void *path)
{
	/* thread-self: /proc/self is the thread group's leader, still in
	 * the host's namespace. */
	if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0)
		return errf_sys("bind the new network namespace at %s", (const char *)path);
	return 0;
}

int netns_add(const char *path)
{
	int rc = run_dir_shared();
	if (rc < 0)
		return rc;
	int fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == EEXIST ? errf(EEXIST, "%s exists", path) : errf_sys("%s", path);
	close(fd);
	if ((rc = in_ns(NULL, bind_own, (void *)path)) < 0)
		unlink(path);
	return rc;
}

int netns_del(const char *path)
{
	/* EINVAL: not a mount point (a file left by a failed add). */
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return errf_sys("unmount %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return errf_sys("%s", path);
	return 0;
}

/* ---- a sysctl inside ---------------------------------------------------- */

struct sysctl_write {
	const char *key, *value;
};

static int write_sysctl(void *p)
{
	/* /proc/sys/net is looked up in the opening thread's namespace. */
	const struct sysctl_write *w = p;
	char path[256];
	snprintf(path, sizeof path, "/proc/sys/%s", w->key);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("%s", path);
	ssize_t n = write(fd, w->value, strlen(w->value));
	close(fd);
	return n == (ssize_t)strlen(w->value) ? 0 : errf_sys("%s", path);
}

int netns_sysctl(const char *netns_path, const char *key, const char *value)
{
	struct sysctl_write w = { key, value };
	return in_ns(netns_path, write_sysctl, &w);
}

/* ---- links ---------------------------------------------------------------- */

int link_del(const char *name)
{
	unsigned idx = if_nametoindex(name);
	if (!idx)
		return 0;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return errf_sys("delete link %s: netlink socket", name);
	struct {
		struct nlmsghdr n;
		struct ifinfomsg i;
	} req = {
		.n = { .nlmsg_len = sizeof req, .nlmsg_type = RTM_DELLINK,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK, .nlmsg_seq = 1 },
		.i = { .ifi_family = AF_UNSPEC, .ifi_index = (int)idx },
	};
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	int rc = 0;
	char buf[1024];
	ssize_t n;
	if (sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
		rc = errf_sys("delete link %s", name);
	} else if ((n = recv(fd, buf, sizeof buf, 0)) < (ssize_t)(sizeof(struct nlmsghdr) + sizeof(struct nlmsgerr))) {
		rc = n < 0 ? errf_sys("delete link %s: its answer", name) : errf(EIO, "delete link %s: a short answer", name);
	} else {
		const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
		const struct nlmsgerr *e = NLMSG_DATA(h);
		/* ENODEV: gone meanwhile (its namespace's end went first). */
		if (h->nlmsg_type == NLMSG_ERROR && e->error && e->error != -ENODEV)
			rc = errf(-e->error, "delete link %s: %s", name, strerror(-e->error));
	}
	close(fd);
	return rc;
}
