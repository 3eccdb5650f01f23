#include "host/netpool.h"
#include "common/err.h"
#include "host/host_config.h"
#include "host/proc.h"
#include "common/log.h"
#include "net/net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <unistd.h>

#define POOL_MAX 256
#define RECENT_MAX 256		/* takes remembered, for the target */
#define RECENT_MS 60000		/* what "recent" is */
#define HOST_NETS_MS 30000	/* refresh_host_nets while idle */

struct netpool {
	const struct host_config *cfg;
	struct net_config nc;
	char dir[DATA_DIR_MAX + 8];	/* DATA/net: one file per claimed slot */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a slot was taken, or stop */
	uint32_t ready[POOL_MAX];
	int nready;
	int64_t recent[RECENT_MAX];	/* monotonic ms of the last takes (a ring) */
	unsigned ntakes;
	bool stop, filling;
	pthread_t filler;
};

/* The claim file of slot in data_dir/net, by its real path: what the
 * slot's owner record (NET_OWNER_DIR/SLOT) points to. */
static int claim_of(const char *data_dir, uint32_t slot, char out[PATH_MAX])
{
	char dir[PATH_MAX], real[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/net", data_dir);
	if (!realpath(dir, real))
		return errf_sys("%s", dir);
	if (snprintf(out, PATH_MAX, "%s/%u", real, slot) >= PATH_MAX)
		return errf(ENAMETOOLONG, "%s: path too long", real);
	return 0;
}

static void owner_path(uint32_t slot, char out[64])
{
	snprintf(out, 64, NET_OWNER_DIR "/%u", slot);
}

/* Whose slot is: 1 this data directory's (its owner record names our
 * claim), -1 another's, 0 no record (none yet, or a kilnd that kept no
 * records made it). */
static int owner_of(const char *claim, uint32_t slot)
{
	char rec[64], target[PATH_MAX];
	owner_path(slot, rec);
	ssize_t n = readlink(rec, target, sizeof target - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	return strcmp(target, claim) == 0 ? 1 : -1;
}

/* An owner record whose data directory's net directory is gone (that
 * kilnd's data was removed; nothing will ever drop it): free to take
 * once its namespace is gone too. */
static bool owner_gone(uint32_t slot, const struct net_slot *s)
{
	char rec[64], target[PATH_MAX];
	owner_path(slot, rec);
	ssize_t n = readlink(rec, target, sizeof target - 1);
	if (n <= 0 || access(s->netns_path, F_OK) == 0)
		return false;
	target[n] = 0;
	char *slash = strrchr(target, '/');
	if (!slash || slash == target)
		return false;
	*slash = 0;
	struct stat st;
	return stat(target, &st) < 0 && errno == ENOENT;
}

/*
 * A slot is claimed in three steps, each undone in the reverse order:
 *   1. the owner record NET_OWNER_DIR/SLOT -> DATA/net/SLOT, a symbolic
 *      link: made atomically, and seen by every kilnd on the host, which
 *      then leaves the slot alone;
 *   2. the claim file DATA/net/SLOT (the slots kilnd lists at start);
 *   3. the namespace kiln-nSLOT and its rules.
 * So a namespace never exists without a record naming its owner, and a
 * kill at any point leaves what the next kilnd of the same data directory
 * finds and removes, and nothing another kilnd may remove. A namespace
 * made first and claimed after could not be told from another kilnd's
 * (which is why startup once removed every kiln-n namespace on the host,
 * and two kilnds on one host took each other's networks).
 */
int netclaim_make(const char *data_dir, const struct net_config *nc, struct net_slot *out, int *hold)
{
	if (hold)
		*hold = -1;
	char claim[PATH_MAX];
	int rc = claim_of(data_dir, 0, claim);
	if (rc < 0)
		return rc;
	if (mkdir(NET_OWNER_DIR, 0755) < 0 && errno != EEXIST)
		return errf_sys("mkdir " NET_OWNER_DIR);
	uint32_t max = net_slot_max(nc);
	for (uint32_t slot = 1; slot < max; slot++) {
		char rec[64];
		net_slot_info(nc, slot, out);
		if (access(out->netns_path, F_OK) == 0)
			continue;
		owner_path(slot, rec);
		claim_of(data_dir, slot, claim);
		if (symlink(claim, rec) < 0) {
			if (errno != EEXIST || !owner_gone(slot, out) || unlink(rec) < 0 ||
			    symlink(claim, rec) < 0)
				continue;	/* another kilnd's */
		}
		int fd = open(claim, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = errf_sys("claim %s", claim);
			unlink(rec);
			return rc;
		}
		if (hold && flock(fd, LOCK_EX | LOCK_NB) == 0)
			*hold = fd;
		else
			close(fd);
		rc = net_create_slot(nc, slot, out);
		if (rc == 0)
			return 0;
		if (hold && *hold >= 0) {
			close(*hold);
			*hold = -1;
		}
		unlink(claim);
		unlink(rec);
		if (rc != -EEXIST)	/* else made by a kilnd that keeps no records */
			return rc;
	}
	return errf(ENOSPC, "no free network slot (pool of %u)", max);
}

bool netclaim_drop(const char *data_dir, const struct net_config *nc, uint32_t slot)
{
	if (!slot)
		return false;
	char claim[PATH_MAX], rec[64];
	if (claim_of(data_dir, slot, claim) < 0) {
		log_warn("network slot %u: %s", slot, errmsg());
		return false;
	}
	owner_path(slot, rec);
	int owner = owner_of(claim, slot);
	/* Another kilnd's record: our claim is stale (made by hand, or by
	 * a copy of this data directory), the namespace is theirs. No
	 * record: a slot claimed before records were kept, ours. */
	if (owner >= 0 && net_destroy(nc, slot) < 0)
		log_warn("network slot %u: %s", slot, errmsg());
	unlink(claim);
	if (owner > 0)
		unlink(rec);
	return owner >= 0;
}

/* A slot made and claimed. */
static int make_slot(struct netpool *p, uint32_t *slot)
{
	struct net_slot s;
	int rc = netclaim_make(p->cfg->data_dir, &p->nc, &s, NULL);
	if (rc == 0)
		*slot = s.slot;
	return rc;
}

void netpool_drop(struct netpool *p, uint32_t slot)
{
	netclaim_drop(p->cfg->data_dir, &p->nc, slot);
}

bool netpool_exists(struct netpool *p, uint32_t slot)
{
	struct net_slot s;
	net_slot_info(&p->nc, slot, &s);
	return access(s.netns_path, F_OK) == 0;
}

int netpool_open(const struct host_config *cfg, struct netpool **out)
{
	struct netpool *p = calloc(1, sizeof *p);
	if (!p)
		return errf(ENOMEM, "out of memory");
	p->cfg = cfg;
	net_default_config(&p->nc);
	snprintf(p->dir, sizeof p->dir, "%s/net", cfg->data_dir);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	int rc = mkdir(p->dir, 0700) < 0 && errno != EEXIST ? errf_sys("mkdir %s", p->dir) : 0;
	if (rc == 0 && (rc = net_init(&p->nc)) < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", errmsg());
		rc = errf(-rc, "sandbox networks: %s (run with --no-net on a host without nftables)", msg);
	}
	if (rc < 0) {
		pthread_cond_destroy(&p->cond);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* How many networks to keep ready: --net-pool, raised to the number of
 * takes of the last minute, at most --max-creates (kilnd admits no more
 * creates at once): a burst as large as the recent ones finds its
 * networks made (creates that make their own wait for ip(8) and nft(8):
 * 8 creates at once spent 602 ms p50 there with 4 ready, 0 alone). Spare
 * networks cost kernel objects, no guest memory. Under p->lock. */
static int target(const struct netpool *p)
{
	int floor = p->cfg->net_pool, cap = p->cfg->max_creates;
	if (cap < floor)
		cap = floor;
	if (cap > POOL_MAX)
		cap = POOL_MAX;
	int64_t since = mono_ms() - RECENT_MS;
	int n = 0;
	for (unsigned i = 0; i < RECENT_MAX && i < p->ntakes; i++)
		if (p->recent[i] >= since)
			n++;
	return n < floor ? floor : n > cap ? cap : n;
}

/* The sets of the host's networks (net.h), which every sandbox's default
 * policy drops, follow its addresses: at start (net_init), at each take
 * (a create), and every HOST_NETS_MS while the filler waits. An address
 * added in between is reachable from sandboxes until then. */
static void refresh_host_nets(struct netpool *p)
{
	if (net_host_nets_refresh(&p->nc) < 0)
		log_warn("the host's networks for the egress policy: %s", errmsg());
}

static void *fill(void *arg)
{
	struct netpool *p = arg;
	/* Refilling is background work: its ip(8) and nft(8) runs (which
	 * inherit this thread's nice value) yield to the creates. */
	setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		if (p->nready >= target(p)) {
			/* Idle: every 30 s, the host's addresses may have moved. */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += HOST_NETS_MS / 1000;
			if (pthread_cond_timedwait(&p->cond, &p->lock, &until) == ETIMEDOUT) {
				pthread_mutex_unlock(&p->lock);
				refresh_host_nets(p);
				pthread_mutex_lock(&p->lock);
			}
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		uint32_t slot;
		int rc = make_slot(p, &slot);
		if (rc < 0)
			log_warn("network pool: %s", errmsg());
		pthread_mutex_lock(&p->lock);
		if (rc == 0 && p->stop) {
			pthread_mutex_unlock(&p->lock);
			netpool_drop(p, slot);
			pthread_mutex_lock(&p->lock);
		} else if (rc == 0) {
			p->ready[p->nready++] = slot;
		} else {
			/* Not in a tight loop: try again in a second. */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 1;
			pthread_cond_timedwait(&p->cond, &p->lock, &until);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static bool slot_listed(const uint32_t *slots, int n, uint32_t slot)
{
	for (int i = 0; i < n; i++)
		if (slots[i] == slot)
			return true;
	return false;
}

/* Whether a live process holds slot's claim file locked (netclaim_make's
 * hold: a template build beside this kilnd, in its data directory). */
static bool claim_held(const char *data_dir, uint32_t slot)
{
	char claim[PATH_MAX];
	if (claim_of(data_dir, slot, claim) < 0)
		return false;
	int fd = open(claim, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);	/* and with it the lock, if this took it */
	return held;
}

void netpool_start(struct netpool *p, const uint32_t *keep, int nkeep)
{
	/* This data directory's slots (netclaim_make): its claim files and
	 * the owner records naming them (a kill between the two leaves a
	 * record alone). Those no sandbox holds go; every other kiln-n
	 * namespace on the host is another kilnd's, and stays. */
	enum { MAX_SLOTS = 8192 };
	static uint32_t slots[MAX_SLOTS];
	int n = 0;
	const char *dirs[] = { p->dir, NET_OWNER_DIR };
	char claim[PATH_MAX];
	for (int k = 0; k < 2; k++) {
		DIR *d = opendir(dirs[k]);
		struct dirent *e;
		while (d && (e = readdir(d)) && n < MAX_SLOTS) {
			char *end;
			unsigned long slot = strtoul(e->d_name, &end, 10);
			if (*end || end == e->d_name || !slot || slot > UINT32_MAX ||
			    slot_listed(slots, n, (uint32_t)slot))
				continue;
			if (k == 1 && (claim_of(p->cfg->data_dir, (uint32_t)slot, claim) < 0 ||
				       owner_of(claim, (uint32_t)slot) <= 0))
				continue;
			slots[n++] = (uint32_t)slot;
		}
		if (d)
			closedir(d);
	}
	int removed = 0;
	for (int i = 0; i < n; i++) {
		if (slot_listed(keep, nkeep, slots[i]))
			continue;
		if (claim_held(p->cfg->data_dir, slots[i])) {
			log_info("network slot %u: held by a template build in this data directory: kept",
				 slots[i]);
			continue;
		}
		if (netclaim_drop(p->cfg->data_dir, &p->nc, slots[i]))
			removed++;
	}
	if (removed)
		log_info("removed %d sandbox networks no sandbox holds", removed);
	int size = p->cfg->net_pool < POOL_MAX ? p->cfg->net_pool : POOL_MAX;
	if (size > 0 && pthread_create(&p->filler, NULL, fill, p) == 0)
		p->filling = true;
}

int netpool_take(struct netpool *p, uint32_t *slot)
{
	pthread_mutex_lock(&p->lock);
	bool have = p->nready > 0;
	if (have)
		*slot = p->ready[--p->nready];
	p->recent[p->ntakes++ % RECENT_MAX] = mono_ms();
	pthread_cond_broadcast(&p->cond);	/* the filler makes another */
	pthread_mutex_unlock(&p->lock);
	refresh_host_nets(p);
	return have ? 0 : make_slot(p, slot);
}

int netpool_ready(struct netpool *p)
{
	pthread_mutex_lock(&p->lock);
	int n = p->nready;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void netpool_close(struct netpool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (p->filling)
		pthread_join(p->filler, NULL);
	for (int i = 0; i < p->nready; i++)
		netpool_drop(p, p->ready[i]);
	p->nready = 0;
	uint32_t any[1];
	if (net_list(any, 1) == 0) {
		/* No sandbox network is left on the host (ours or another
		 * kilnd's): the table goes too. */
		net_cleanup(&p->nc);
		rmdir(p->dir);
	}
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
