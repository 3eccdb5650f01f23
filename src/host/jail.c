#include "host/cgroup.h"
#include "host/disk.h"
#include "host/host_int.h"
#include "host/jail.h"
#include "common/err.h"
#include "common/log.h"
#include "host/host_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The lowest uid from --jail-uid that no other linked sandbox's VMM has:
 * no two sandboxes share one (a fork takes its own: fork_uid.h). */
static uid_t pick_uid(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&h->lock);
	uid_t uid = sb->jail_uid;
	for (uid_t cand = (uid_t)h->cfg->jail_uid; !uid; cand++) {
		bool used = false;
		for (struct sandbox *o = h->list; o && !used; o = o->next)
			used = o != sb && o->jail_uid == cand;
		if (!used)
			uid = sb->jail_uid = cand;
	}
	pthread_mutex_unlock(&h->lock);
	return uid;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static int add_ro(struct vmm_jail *j, const char *dir, const char *sandboxes, const char *data)
{
	if (!dir || !dir[0] || under(dir, sandboxes) || strcmp(dir, sandboxes) == 0)
		return 0;
	/* A bind keeps its directory's mode: the VMM, unprivileged once it
	 * runs, must pass through it (not list it) to reopen the layers
	 * inside when it forks. Only kiln's own directories are changed. */
	struct stat st;
	if (under(dir, data) && stat(dir, &st) == 0 && (st.st_mode & 0111) != 0111 &&
	    chmod(dir, (st.st_mode & 07777) | 0111) < 0)
		return errf_sys("jail: chmod %s", dir);
	for (int i = 0; i < j->nro_binds; i++)
		if (strcmp(j->ro_binds[i], dir) == 0)
			return 0;
	if (j->nro_binds == JAIL_BINDS || strlen(dir) >= JAIL_PATH)
		return errf(E2BIG, "jail: too many or too long read-only paths (%s)", dir);
	snprintf(j->ro_binds[j->nro_binds++], JAIL_PATH, "%s", dir);
	return 0;
}

static void dir_of(const char *path, char out[JAIL_PATH])
{
	snprintf(out, JAIL_PATH, "%s", path);
	char *slash = strrchr(out, '/');
	if (slash && slash != out)
		*slash = 0;
}

/* give_file: chown a file in a directory the VMM writes: the file itself,
 * never what a symlink it planted there names (root would hand any host
 * file to the VMM's uid), and only a regular file. */
static int give_file(const char *path, uid_t uid)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("jail: %s", path);
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)
		rc = errf(EPERM, "jail: %s is not a plain file: refused", path);
	else if (fchown(fd, uid, uid) < 0)
		rc = errf_sys("jail: chown %s", path);
	close(fd);
	return rc;
}

static int give_dir(const char *dir, uid_t uid)
{
	/* Only its VMM (and root) may enter it: every VMM sees DATA/sandboxes. */
	if (chown(dir, uid, uid) < 0 || chmod(dir, 0700) < 0)
		return errf_sys("jail: chown %s", dir);
	return 0;
}

/* What of its disk counts against a VMM's memory (cgroup_disk_mib). The
 * size is read from its top layer, whose header a VMM can rewrite: it is
 * capped (64 GiB, above any disk kiln makes), so a forged one buys at
 * most that much RAM, and only where the data directory is in RAM. */
static int disk_charge_mib(const struct host_config *cfg, const char *top)
{
	uint64_t bytes = 0;
	if (!top || disk_size(top, &bytes) < 0)
		return 0;
	if (bytes > (64ULL << 30))
		bytes = 64ULL << 30;
	return cgroup_disk_mib(cfg, bytes);
}

int vmm_jail_prepare(struct host *h, struct sandbox *sb, const char *top, const char *extra,
		     const char *extra2, const char *netns, struct vmm_jail *j)
{
	const struct host_config *cfg = h->cfg;
	memset(j, 0, sizeof *j);
	if (!cfg->jail)
		return 0;
	j->on = true;
	j->uid = pick_uid(h, sb);
	char sandboxes[JAIL_PATH], d[JAIL_PATH];
	snprintf(sandboxes, sizeof sandboxes, "%s/sandboxes", cfg->data_dir);
	snprintf(j->root, sizeof j->root, "%s/jail/%s", cfg->data_dir, sb->row.id);
	snprintf(j->binds[j->nbinds++], JAIL_PATH, "%s", sandboxes);
	if (netns)
		snprintf(j->netns, sizeof j->netns, "%s", netns);
	int rc = 0;
	/* The layers under its overlay: a template's, a snapshot's. */
	char (*chain)[PATH_MAX] = calloc(CHAIN_MAX, PATH_MAX);
	int n = 0;
	if (!chain)
		return errf(ENOMEM, "out of memory");
	if (top && (rc = disk_chain(cfg->data_dir, top, chain, CHAIN_MAX, &n)) < 0)
		n = 0;
	if (rc == -EPERM) {	/* a header names a base outside kiln's directories */
		free(chain);
		return rc;
	}
	rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		dir_of(chain[i], d);
		rc = add_ro(j, d, sandboxes, cfg->data_dir);
		/* A fork reopens the chain under its new layers as the VMM's
		 * uid: the sealed layers below (a template's, a snapshot's,
		 * read-only for good) are made readable to it. Their
		 * directories stay closed to everyone else's jail. */
		struct stat st;
		if (rc == 0 && i > 0 && !under(chain[i], sandboxes) && stat(chain[i], &st) == 0 &&
		    (st.st_mode & 0444) != 0444 && chmod(chain[i], (st.st_mode & 07777) | 0444) < 0)
			rc = errf_sys("jail: chmod %s", chain[i]);
	}
	free(chain);
	if (rc == 0 && extra)
		rc = add_ro(j, extra, sandboxes, cfg->data_dir);
	if (rc == 0 && extra2)
		rc = add_ro(j, extra2, sandboxes, cfg->data_dir);
	if (rc == 0 && mkdir(j->root, 0755) < 0 && errno != EEXIST)
		rc = errf_sys("mkdir %s", j->root);
	if (rc == 0)
		rc = give_dir(sb->dir, j->uid);
	/* Its top layer too: a fork seals it (reopens it to write) as the
	 * VMM's uid. */
	if (rc == 0 && top && under(top, sb->dir))
		rc = give_file(top, j->uid);
	if (rc == 0 && h->cgroups)
		rc = cgroup_make(cfg, sb->row.id, sb->row.vcpus, sb->row.memory_mib,
				 disk_charge_mib(cfg, top), j->cgroup);
	/* A pool member's refill yields to everything else (cgroup.h). */
	if (rc == 0 && h->cgroups && sb->pooled &&
	    cgroup_cpu_weight(cfg, sb->row.id, CGROUP_WEIGHT_POOLED) < 0)
		log_warn("pool: sandbox %s: %s", sb->row.id, errmsg());
	return rc;
}

int vmm_jail_inherit(struct host *h, struct sandbox *parent, struct sandbox *child)
{
	if (!h->cfg->jail)
		return 0;
	pthread_mutex_lock(&h->lock);
	uid_t family = parent->jail_uid;
	pthread_mutex_unlock(&h->lock);
	if (!family)
		return 0;	/* the parent runs unjailed (started with --no-jail) */
	/* Its own uid, taken by its VMM as the fork starts it (fork_uid.h);
	 * until then the directory is its parent's VMM's, which makes the
	 * child's first files there. */
	pick_uid(h, child);
	char top[PATH_MAX];
	int rc = give_dir(child->dir, family);
	int disk_mib = sandbox_top(parent, top) == 0 ? disk_charge_mib(h->cfg, top) : 0;
	if (rc == 0 && h->cgroups) {
		char cgroup[PATH_MAX];
		rc = cgroup_make(h->cfg, child->row.id, child->row.vcpus, child->row.memory_mib,
				 disk_mib, cgroup);
	}
	return rc;
}

int vmm_jail_adopt(struct sandbox *child, uid_t from, uid_t uid)
{
	/* The directory first: from then on its parent's VMM can put
	 * nothing more in it. Then the files that VMM made there (its disk
	 * layer, a console log): plain files only, each opened without
	 * following a link (give_file); sockets stay as they are (made open
	 * to all, reached only through the directory), and kilnd's own files
	 * (vmm.log) stay root's. */
	int rc = give_dir(child->dir, uid);
	DIR *d = rc == 0 ? opendir(child->dir) : NULL;
	if (rc == 0 && !d)
		rc = errf_sys("jail: %s", child->dir);
	struct dirent *e;
	while (d && rc == 0 && (e = readdir(d))) {
		struct stat st;
		char path[PATH_MAX];
		if (e->d_name[0] == '.' ||
		    (size_t)snprintf(path, sizeof path, "%s/%s", child->dir, e->d_name) >= sizeof path)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == from)
			rc = give_file(path, uid);
	}
	if (d)
		closedir(d);
	return rc;
}

void vmm_jail_release(struct host *h, struct sandbox *sb)
{
	char root[PATH_MAX];
	snprintf(root, sizeof root, "%s/jail/%s", h->cfg->data_dir, sb->row.id);
	rmdir(root);
	if (h->cgroups)
		cgroup_remove(h->cfg, sb->row.id);
}

void vmm_jail_argv(struct vmm_jail *j, char **argv, int *n, char *uidbuf, size_t cap)
{
	if (!j->on)
		return;
	snprintf(uidbuf, cap, "%u", (unsigned)j->uid);
	argv[(*n)++] = "--jail";
	argv[(*n)++] = j->root;
	argv[(*n)++] = "--jail-uid";
	argv[(*n)++] = uidbuf;
	argv[(*n)++] = "--jail-gid";
	argv[(*n)++] = uidbuf;
	argv[(*n)++] = "--jail-no-pidns";
	if (j->cgroup[0]) {
		argv[(*n)++] = "--jail-cgroup";
		argv[(*n)++] = j->cgroup;
	}
	if (j->netns[0]) {
		argv[(*n)++] = "--jail-netns";
		argv[(*n)++] = j->netns;
	}
	for (int i = 0; i < j->nbinds; i++) {
		argv[(*n)++] = "--jail-bind";
		argv[(*n)++] = j->binds[i];
	}
	for (int i = 0; i < j->nro_binds; i++) {
		argv[(*n)++] = "--jail-ro-bind";
		argv[(*n)++] = j->ro_binds[i];
	}
}

json_t *vmm_jail_json(const struct vmm_jail *j)
{
	json_t *binds = json_array(), *ro = json_array();
	for (int i = 0; i < j->nbinds; i++)
		json_array_append_new(binds, json_string(j->binds[i]));
	for (int i = 0; i < j->nro_binds; i++)
		json_array_append_new(ro, json_string(j->ro_binds[i]));
	json_t *o = json_pack("{s:s,s:i,s:i,s:o,s:o,s:b}", "root", j->root, "uid", (int)j->uid,
			      "gid", (int)j->uid, "binds", binds, "ro_binds", ro, "pidns", 0);
	if (o && j->cgroup[0])
		json_object_set_new(o, "cgroup", json_string(j->cgroup));
	if (o && j->netns[0])
		json_object_set_new(o, "netns", json_string(j->netns));
	return o;
}
