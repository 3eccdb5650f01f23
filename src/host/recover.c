/*
 * recover: what a starting kilnd does with what the last one left. The
 * records in the store are the truth about which sandboxes exist; VMMs
 * survive kilnd (they are detached, with no pipe to it), so a sandbox
 * that was running is re-attached if its VMM is the same process and its
 * agent answers, and otherwise marked failed and cleaned up. A create or a
 * delete that was cut short is finished as a deletion. Directories and VMMs
 * no record owns (a crash between making them and recording them) are
 * removed, and so are unreferenced disk layers.
 */
#include "host/guest_conn.h"
#include "host/host_int.h"
#include "host/jail.h"
#include "host/proc.h"
#include "host/vmm.h"
#include "common/err.h"
#include "host/host_config.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct rows {
	struct sbx_row *r;
	size_t n, cap;
};

static int collect(void *ctx, struct sbx_row *r)
{
	struct rows *rows = ctx;
	if (rows->n == rows->cap) {
		size_t cap = rows->cap ? rows->cap * 2 : 64;
		struct sbx_row *nr = realloc(rows->r, cap * sizeof *nr);
		if (!nr) {
			sbx_row_clear(r);
			return errf(ENOMEM, "out of memory");
		}
		rows->r = nr, rows->cap = cap;
	}
	rows->r[rows->n++] = *r;	/* takes over its strings */
	return 0;
}

/* Is the VMM of a running sandbox still the one recorded, and does its
 * agent answer? */
static int reattach(struct host *h, struct sandbox *sb)
{
	pid_t pid = sb->row.vmm_pid;
	int64_t start = sb->row.vmm_start;
	if (pid <= 0 || !proc_alive(pid, start))
		return errf(ESRCH, "its VMM was gone after a kilnd restart");
	int rc = sandbox_attach_vmm(h, sb, pid, start);
	if (rc < 0)
		return rc;
	if (sb->row.state == SBX_PAUSED) {
		/* Its guest cannot answer until resumed: its VMM's control
		 * socket must (the resume goes there). */
		if ((rc = sandbox_ctl_cmd(sb, "status", 5000)) < 0) {
			char msg[300];
			snprintf(msg, sizeof msg, "%s", errmsg());
			return errf(-rc, "its paused VMM did not answer after a kilnd restart: %s", msg);
		}
		return 0;
	}
	char vsock[PATH_MAX];
	vm_path(vsock, sizeof vsock, sb->dir, "vsock.sock");
	struct guest *g = NULL;
	rc = guest_wait_ready(vsock, 5000, pid, &g);
	if (rc == 0)
		guest_close(g);
	if (rc < 0) {
		char msg[300];	/* errf must not read the buffer it writes */
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "its agent did not answer after a kilnd restart: %s", msg);
	}
	return 0;
}

static void recover_one(struct host *h, struct sandbox *sb)
{
	enum sbx_state state = sb->row.state;
	int rc;
	char why[300];
	struct stat st;
	/* Its VMM's uid is its directory's owner (jail.c). */
	if (lstat(sb->dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid != 0)
		sb->jail_uid = st.st_uid;
	if (state == SBX_CREATING || state == SBX_DELETING) {
		bool was_creating = state == SBX_CREATING;
		sandbox_teardown(h, sb);
		if (was_creating)
			snprintf(sb->row.error, sizeof sb->row.error,
				 "create interrupted by a kilnd restart");
		if (!sb->row.ended[0])
			snprintf(sb->row.ended, sizeof sb->row.ended, "%s", was_creating ? "failed" : "deleted");
		sandbox_set_state(h, sb, SBX_DELETED);
		log_info("sandbox %s: %s cut short by a restart; cleaned up", sb->row.id,
			 was_creating ? "create" : "delete");
		return;
	}
	pthread_mutex_lock(&h->lock);
	h->live++;
	pthread_mutex_unlock(&h->lock);
	host_link(h, sb);
	if (state == SBX_RUNNING || state == SBX_PAUSED) {	/* its VMM kept running (paused) */
		if ((rc = reattach(h, sb)) == 0) {
			sandbox_mem_hold(h, sb);
			log_info("sandbox %s: re-attached to its VMM (pid %d)", sb->row.id, sb->row.vmm_pid);
			return;
		}
		snprintf(why, sizeof why, "%s", errmsg());
		log_warn("sandbox %s: %s; marked failed", sb->row.id, why);
		sandbox_fail(h, sb, why);
		return;
	}
	if (state == SBX_HIBERNATED) {
		char dir[PATH_MAX];
		struct stat st;
		snprintf(dir, sizeof dir, "%s/hibernate", sb->dir);
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
			portwake_arm(h, sb);
			return;
		}
		sandbox_fail(h, sb, "its hibernation snapshot was gone after a kilnd restart");
		return;
	}
	/* failed: make sure nothing of it is left running (a persistent one
	 * keeps its disk and slot, to be started again). */
	sandbox_stop(h, sb);
	sandbox_save(h, sb);
}

/* linked: whether a sandbox of this id is in the host's list. */
static bool linked(struct host *h, const char *id)
{
	bool known = false;
	pthread_mutex_lock(&h->lock);
	for (struct sandbox *sb = h->list; sb && !known; sb = sb->next)
		known = strcmp(sb->row.id, id) == 0;
	pthread_mutex_unlock(&h->lock);
	return known;
}

/* Directories under DATA/sandboxes that no live record owns. */
static void remove_orphans(struct host *h)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/sandboxes", h->cfg->data_dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (strlen(e->d_name) >= ID_MAX || linked(h, e->d_name))
			continue;
		struct sbx_row row = { 0 };
		snprintf(row.id, sizeof row.id, "%s", e->d_name);
		struct sandbox *sb = sandbox_alloc(h, &row);
		if (!sb)
			continue;
		log_info("sandbox directory %s: no record owns it; removed", e->d_name);
		/* Its VMM's uid is its directory's owner (jail.c): only root
		 * changes that, and teardown trusts nothing else the VMM left. */
		struct stat st;
		if (lstat(sb->dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid != 0)
			sb->jail_uid = st.st_uid;
		sandbox_teardown(h, sb);
		sandbox_put(h, sb);
	}
	closedir(d);
}

/* Jail roots and cgroups of sandboxes that are gone (a kill between a
 * delete's steps). Only this kilnd's: other kilnds on the host use the
 * same cgroup parent, so a cgroup goes only if our store knows its id. */
static void remove_orphan_jails(struct host *h)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/jail", h->cfg->data_dir);
	const char *dirs[] = { dir, h->cgroups ? h->cfg->cgroup : NULL };
	for (int k = 0; k < 2; k++) {
		DIR *d = dirs[k] ? opendir(dirs[k]) : NULL;
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (strncmp(e->d_name, "sbx_", 4) != 0 || strlen(e->d_name) >= ID_MAX ||
			    linked(h, e->d_name))
				continue;
			struct sbx_row row;
			if (k == 1 && store_sandbox_load(h->store, e->d_name, &row) < 0)
				continue;
			if (k == 1)
				sbx_row_clear(&row);
			struct sbx_row empty = { 0 };
			snprintf(empty.id, sizeof empty.id, "%s", e->d_name);
			struct sandbox *sb = sandbox_alloc(h, &empty);
			if (sb) {
				vmm_jail_release(h, sb);
				sandbox_put(h, sb);
			}
		}
		if (d)
			closedir(d);
	}
}

int host_recover(struct host *h)
{
	struct rows rows = { 0 };
	/* A sandbox that ended while kilnd died before its attachments went
	 * would hold its volumes for good: let them go first. */
	int64_t freed = 0;
	if (store_volume_detach_ended(h->store, &freed) < 0)
		log_warn("recover: letting go of ended sandboxes' volumes: %s", errmsg());
	else if (freed)
		log_info("recover: %lld volume attachment(s) of ended sandboxes let go", (long long)freed);
	int rc = store_sandbox_each_live(h->store, collect, &rows);
	for (size_t i = 0; i < rows.n; i++) {
		if (rc == 0) {
			struct sandbox *sb = sandbox_alloc(h, &rows.r[i]);
			if (sb) {
				volumes_recover(h, sb);	/* before it can fail or go */
				recover_one(h, sb);
				sandbox_put(h, sb);
			} else {
				rc = errf(ENOMEM, "out of memory");
			}
		}
		sbx_row_clear(&rows.r[i]);
	}
	free(rows.r);
	if (rc < 0)
		return rc;
	remove_orphans(h);
	remove_orphan_jails(h);
	layers_gc(h);
	return 0;
}
