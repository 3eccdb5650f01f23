/*
 * host: the sandbox table, capacity and housekeeping of the agent role.
 */
#include "host/cgroup.h"
#include "host/host_events.h"
#include "host/host_int.h"
#include "host/netpool.h"
#include "host/pool.h"
#include "host/proc.h"
#include "host/template.h"
#include "host/vmm.h"
#include "common/metrics.h"
#include "common/err.h"
#include "host/host_config.h"
#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct sandbox *sandbox_alloc(struct host *h, const struct sbx_row *row)
{
	struct sandbox *sb = calloc(1, sizeof *sb);
	if (!sb)
		return NULL;
	if (sbx_row_copy(&sb->row, row) < 0) {
		free(sb);
		return NULL;
	}
	pthread_mutex_init(&sb->lock, NULL);
	pthread_mutex_init(&sb->op, NULL);
	sb->refs = 1;
	sb->pidfd = -1;
	snprintf(sb->dir, sizeof sb->dir, "%s/sandboxes/%s", h->cfg->data_dir, row->id);
	/* The image's WorkingDir, from the template version in service (a
	 * sandbox, fork or snapshot of an older version gets the newer's). */
	struct tmpl *t;
	if (h->tpl && row->template[0] && templates_get(h->tpl, row->template, &t) == 0) {
		const char *wd = tmpl_workdir(t);
		if (wd && strlen(wd) < sizeof sb->workdir)
			snprintf(sb->workdir, sizeof sb->workdir, "%s", wd);
		tmpl_put(h->tpl, t);
	}
	return sb;
}

static void sandbox_free(struct sandbox *sb)
{
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	sbx_row_clear(&sb->row);
	pthread_mutex_destroy(&sb->lock);
	pthread_mutex_destroy(&sb->op);
	free(sb);
}

void sandbox_put(struct host *h, struct sandbox *sb)
{
	if (!sb)
		return;
	pthread_mutex_lock(&h->lock);
	bool last = --sb->refs == 0;
	pthread_mutex_unlock(&h->lock);
	if (last)
		sandbox_free(sb);
}

void host_link(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&h->lock);
	if (!sb->linked) {
		ws_linked(h, sb);
		if (sb->pooled)
			h->pooled++;
		sb->linked = true;
		sb->refs++;
		sb->next = h->list;
		h->list = sb;
	}
	pthread_mutex_unlock(&h->lock);
}

void host_unlink(struct host *h, struct sandbox *sb)
{
	bool drop = false;
	pthread_mutex_lock(&h->lock);
	if (sb->linked) {
		for (struct sandbox **p = &h->list; *p; p = &(*p)->next)
			if (*p == sb) {
				*p = sb->next;
				break;
			}
		sb->linked = false;
		if (sb->pooled)
			h->pooled--;
		else
			h->live--;
		drop = true;
		pthread_cond_broadcast(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
	if (drop)
		sandbox_put(h, sb);
}

/* disk_room: room on the data filesystem for n more sandboxes (or a
 * wake) with mem_mib of guest memory: besides --reserve-disk, which no
 * sandbox takes (the VMM stops growing a disk there, --disk-reserve), each
 * needs room to be hibernated or snapshotted (its memory) and its disk's
 * first writes (64 MiB). A full disk refuses creates with 503 rather
 * than letting them fail later, or fill what kilnd's database needs. */
static int disk_room(const struct host_config *cfg, int n, int64_t mem_mib)
{
	struct statvfs fs;
	if (statvfs(cfg->data_dir, &fs) < 0)
		return 0;	/* cannot tell: the VMMs' reserve still holds */
	int64_t free_mib = (int64_t)((uint64_t)fs.f_bavail * fs.f_frsize >> 20);
	int64_t need = cfg->reserve_disk_mib + mem_mib + 64LL * (n > 0 ? n : 1);
	if (free_mib < need)
		return errf(ENOSPC, "no capacity: %lld MiB free on the data filesystem (%s); this "
			    "needs %lld MiB besides the %d MiB kilnd keeps (--reserve-disk)",
			    (long long)free_mib, cfg->data_dir,
			    (long long)(need - cfg->reserve_disk_mib), cfg->reserve_disk_mib);
	return 0;
}

int host_admit(struct host *h, int n, int64_t mem_mib, bool slot)
{
	const struct host_config *cfg = h->cfg;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += cfg->create_wait_ms / 1000;
	until.tv_nsec += (long)(cfg->create_wait_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&h->lock);
	int rc = 0;
	for (;;) {
		if (h->stop) {
			rc = errf(EAGAIN, "kilnd is shutting down");
			break;
		}
		if (h->live + n > cfg->max_sandboxes) {
			rc = errf(EAGAIN, "no capacity: %d sandboxes exist, the limit is %d", h->live,
				  cfg->max_sandboxes);
			break;
		}
		if ((n > 0 || mem_mib > 0) && (rc = disk_room(cfg, n, mem_mib)) < 0)
			break;
		if (h->mem_mib + mem_mib > cfg->max_memory_mib) {
			rc = errf(EAGAIN, "no capacity: %lld MiB of guest memory in use, the limit is %lld",
				  (long long)h->mem_mib, (long long)cfg->max_memory_mib);
			break;
		}
		if (!slot || h->creating < cfg->max_creates)
			break;
		if (pthread_cond_timedwait(&h->cond, &h->lock, &until) == ETIMEDOUT) {
			rc = errf(EAGAIN, "no capacity: %d creates in flight for %d ms", h->creating,
				  cfg->create_wait_ms);
			break;
		}
	}
	if (rc == 0) {
		h->live += n;
		h->mem_mib += mem_mib;
		if (slot)
			h->creating++;
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

void host_admit_done(struct host *h, int n_unused, int64_t mem_unused, bool slot)
{
	pthread_mutex_lock(&h->lock);
	h->live -= n_unused;
	h->mem_mib -= mem_unused;
	if (slot)
		h->creating--;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

void sandbox_mem_hold(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&h->lock);
	if (!sb->counts_memory) {
		sb->counts_memory = true;
		h->mem_mib += sb->row.memory_mib;
	}
	pthread_mutex_unlock(&h->lock);
}

void sandbox_mem_release(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&h->lock);
	if (sb->counts_memory) {
		sb->counts_memory = false;
		h->mem_mib -= sb->row.memory_mib;
		pthread_cond_broadcast(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
}

/* Add what was metered since the last save to its hours (whole units:
 * the fractions stay for the next save, so nothing is lost to rounding).
 * Under sb->lock. */
static void save_usage(struct host *h, struct sandbox *sb)
{
	if (meter_save(&sb->unsaved, h->store, sb->row.workspace, sb->row.id) < 0)
		log_warn("sandbox %s: saving its usage: %s", sb->row.id, errmsg());	/* kept for the next save */
}

int sandbox_save(struct host *h, struct sandbox *sb)
{
	if (sb->pooled)
		return 0;	/* no record until a create claims it (pool.h) */
	pthread_mutex_lock(&sb->lock);
	save_usage(h, sb);
	/* Each save a new revision: what an API keeps of this record takes
	 * the newest one whichever way it came (store_sandbox_keep). */
	sb->row.rev++;
	int rc = store_sandbox_save(h->store, &sb->row);
	/* The name is a static string: it outlives the lock; what may
	 * change is copied. */
	char error[sizeof sb->row.error], ended[sizeof sb->row.ended];
	snprintf(error, sizeof error, "%s", sb->row.error);
	snprintf(ended, sizeof ended, "%s", sb->row.ended);
	struct host_event ev = { sb->row.workspace, sb->row.id, sbx_state_name(sb->row.state),
				 sb->row.cpu_seconds, sb->row.rss_bytes, sb->row.parent, error, ended,
				 NULL, 0, NULL };
	pthread_mutex_unlock(&sb->lock);
	if (rc < 0)
		log_warn("sandbox %s: saving its record: %s", sb->row.id, errmsg());
	else
		host_events_emit(&ev);	/* id and workspace never change */
	return rc;
}

int sandbox_set_state(struct host *h, struct sandbox *sb, enum sbx_state state)
{
	pthread_mutex_lock(&sb->lock);
	int rc = sbx_state_move(&sb->row.state, state);
	if (rc == 0 && state == SBX_DELETED)
		sb->row.deleted_ms = wall_ms();
	pthread_mutex_unlock(&sb->lock);
	if (rc < 0) {
		/* A bug above: say so, and leave the record as it was. */
		char why[128];
		snprintf(why, sizeof why, "%s", errmsg());
		log_warn("sandbox %s: state change refused: %s", sb->row.id, why);
		return errf(EBUSY, "sandbox %s: %s", sb->row.id, why);
	}
	sandbox_save(h, sb);
	/* Its exposed ports go with it (the record itself is kept). */
	if (state == SBX_DELETED && !sb->pooled && store_port_delete_all(h->store, sb->row.id) < 0)
		log_warn("sandbox %s: removing its exposed ports: %s", sb->row.id, errmsg());
	/* Its volumes are free again once it cannot use them (the volumes
	 * themselves stay). */
	if ((state == SBX_DELETED || state == SBX_FAILED) && !sb->pooled)
		volumes_forget(h, sb);
	return 0;
}

bool sandbox_in(struct sandbox *sb, enum sbx_state state)
{
	pthread_mutex_lock(&sb->lock);
	bool yes = sb->row.state == state;
	pthread_mutex_unlock(&sb->lock);
	return yes;
}

static void check_vmm(struct host *h, struct sandbox *sb);

int host_find(struct host *h, const char *workspace, const char *id, struct sandbox **out)
{
	pthread_mutex_lock(&h->lock);
	struct sandbox *sb = h->list;
	while (sb && strcmp(sb->row.id, id) != 0)
		sb = sb->next;
	/* id and workspace never change, so reading them here is safe. */
	if (sb && strcmp(sb->row.workspace, workspace) != 0)
		sb = NULL;
	if (sb)
		sb->refs++;
	pthread_mutex_unlock(&h->lock);
	if (!sb)
		return errf(ENOENT, "sandbox %s not found", id);
	/* A VMM that died since the last housekeeping round makes the
	 * sandbox failed now, not after this request read it as running. */
	check_vmm(h, sb);
	*out = sb;
	return 0;
}

int sandbox_row(struct sandbox *sb, struct sbx_row *out)
{
	pthread_mutex_lock(&sb->lock);
	int rc = sbx_row_copy(out, &sb->row);
	pthread_mutex_unlock(&sb->lock);
	return rc;
}

/* A snapshot of the list (references), so callbacks run without h->lock. */
static int list_refs(struct host *h, struct sandbox ***out, int *n)
{
	pthread_mutex_lock(&h->lock);
	int count = 0;
	for (struct sandbox *sb = h->list; sb; sb = sb->next)
		count++;
	struct sandbox **a = calloc(count + 1, sizeof *a);
	if (!a) {
		pthread_mutex_unlock(&h->lock);
		return errf(ENOMEM, "out of memory");
	}
	int i = 0;
	for (struct sandbox *sb = h->list; sb; sb = sb->next) {
		sb->refs++;
		a[i++] = sb;
	}
	pthread_mutex_unlock(&h->lock);
	*out = a;
	*n = i;
	return 0;
}

static void list_drop(struct host *h, struct sandbox **a, int n)
{
	for (int i = 0; i < n; i++)
		sandbox_put(h, a[i]);
	free(a);
}

int host_each(struct host *h, const char *workspace, host_row_fn *fn, void *ctx)
{
	struct sandbox **a;
	int n, rc = list_refs(h, &a, &n);
	if (rc < 0)
		return rc;
	/* The list is newest first; callers want oldest first. */
	for (int i = n - 1; i >= 0 && rc == 0; i--) {
		if (workspace && strcmp(a[i]->row.workspace, workspace) != 0)
			continue;
		check_vmm(h, a[i]);
		struct sbx_row r;
		if ((rc = sandbox_row(a[i], &r)) < 0)
			break;
		if (r.state != SBX_DELETED && r.workspace[0])	/* not a pool member */
			rc = fn(ctx, &r);
		sbx_row_clear(&r);
	}
	list_drop(h, a, n);
	return rc;
}

int host_templates(struct host *h, host_tmpl_fn *fn, void *ctx)
{
	return templates_each(h->tpl, fn, ctx);
}

void host_metrics(struct host *h, struct strbuf *b)
{
	/* Deleted ones are not reported. */
	int count[SBX_NSTATES] = { 0 };
	int64_t mem;
	pthread_mutex_lock(&h->lock);
	for (struct sandbox *sb = h->list; sb; sb = sb->next) {
		if (sb->pooled)
			continue;	/* pool_metrics counts them */
		pthread_mutex_lock(&sb->lock);
		if (sb->row.state < SBX_NSTATES)
			count[sb->row.state]++;
		pthread_mutex_unlock(&sb->lock);
	}
	mem = h->mem_mib;
	pthread_mutex_unlock(&h->lock);
	strbuf_printf(b, "# HELP kiln_sandboxes Sandboxes on this host, by state.\n"
		      "# TYPE kiln_sandboxes gauge\n");
	for (int i = 0; i < SBX_NSTATES; i++)
		if (i != SBX_DELETED)
			strbuf_printf(b, "kiln_sandboxes{state=\"%s\"} %d\n", sbx_state_name(i), count[i]);
	strbuf_printf(b, "# HELP kiln_guest_memory_mib Guest memory of running sandboxes.\n"
		      "# TYPE kiln_guest_memory_mib gauge\nkiln_guest_memory_mib %lld\n",
		   (long long)mem);
	pool_metrics(h->pool, b);
}

/* ---- housekeeping ---------------------------------------------------------------- */

/* Did the VMM exit when nobody asked it to? */
static void check_vmm(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	bool watch = sb->pidfd >= 0 && !sb->expect_exit && !sb->vmm_dead &&
		     (sb->row.state == SBX_RUNNING || sb->row.state == SBX_PAUSED);
	struct pollfd p = { .fd = sb->pidfd, .events = POLLIN };
	if (watch && poll(&p, 1, 0) == 1)
		sb->vmm_dead = true;
	bool dead = sb->vmm_dead && !sb->expect_exit;
	pthread_mutex_unlock(&sb->lock);
	if (!dead || pthread_mutex_trylock(&sb->op) != 0)
		return;	/* an operation runs: look again next round */
	if ((sandbox_in(sb, SBX_RUNNING) || sandbox_in(sb, SBX_PAUSED)) && !sb->expect_exit) {
		char why[sizeof sb->row.error];
		/* Read without reaping: the pid stays taken until the sandbox
		 * reads failed, so whoever sees the VMM gone sees that too. */
		int st = proc_exit_status(sb->row.vmm_pid);
		if (h->cgroups && sb->jail_uid && cgroup_oom_killed(h->cfg, sb->row.id))
			snprintf(why, sizeof why, "the VMM went over its memory limit (%d MiB) and was killed",
				 cgroup_memory_max_mib(h->cfg, sb->row.id));
		else if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) > 128)
			/* a jailed VMM's outer process passes on a signal death so */
			snprintf(why, sizeof why, "the VMM was killed by signal %d", WEXITSTATUS(st) - 128);
		else if (st >= 0 && WIFSIGNALED(st))
			snprintf(why, sizeof why, "the VMM was killed by signal %d", WTERMSIG(st));
		else {
			/* kiln-vmm's last stderr line says why it ended (a triple
			 * fault, a panic, a failed KVM_RUN...) and ends "(exit
			 * status N)". A VMM that is not our child (a zygote's,
			 * when the zygote outlived an earlier kilnd) has no wait
			 * status for us: its last line is all there is. */
			char line[512];	/* a triple fault's line is 170 bytes: whole, or
					 * its "(exit status N)" is cut off */
			vmm_last_line(sb->dir, line, sizeof line);
			bool final = strstr(line, "(exit status ") != NULL;
			if (st >= 0 && WIFEXITED(st))
				snprintf(why, sizeof why, "the VMM exited with status %d%s%s%.180s", WEXITSTATUS(st),
					 WEXITSTATUS(st) == 5 ? " (guest kernel panic)" : "",
					 final ? ": " : "", final ? line : "");
			else if (final)
				snprintf(why, sizeof why, "the VMM exited: %.230s", line);
			else if (line[0])
				snprintf(why, sizeof why, "the VMM ended without a last line (killed by a signal?); it last said: %.150s",
					 line);
			else
				snprintf(why, sizeof why, "the VMM ended without a last line (killed by a signal?)");
		}
		pthread_mutex_lock(&sb->lock);
		snprintf(sb->row.error, sizeof sb->row.error, "%s", why);
		pthread_mutex_unlock(&sb->lock);
		sandbox_set_state(h, sb, SBX_FAILED);
		proc_reap(sb->row.vmm_pid);
		log_warn("sandbox %s: %s", sb->row.id, why);
		sandbox_fail(h, sb, why);
		pthread_mutex_unlock(&sb->op);
		layers_gc(h);	/* a failed sandbox keeps its record, not its disk (but a persistent one) */
		return;
	}
	pthread_mutex_unlock(&sb->op);
}

/* The TTL rule (store.h sbx_row), in one place: ttl_due acts on it,
 * ttl_warn tells of it a while ahead. */
enum ttl_action { TTL_KEEP, TTL_DELETE, TTL_HIBERNATE };

/* When the TTL rule next acts on the sandbox (*due_ms, wall clock) and
 * how (*action); false when it will not as things stand: no TTL, a
 * command running, or hibernated and kept for good. Under sb->lock. */
static bool ttl_next(const struct sandbox *sb, int64_t *due_ms, enum ttl_action *action)
{
	const struct sbx_row *r = &sb->row;
	if (r->ttl_seconds <= 0 || r->state == SBX_DELETED || r->state == SBX_CREATING)
		return false;
	int64_t ttl_ms = r->ttl_seconds * 1000;
	*action = TTL_DELETE;
	if (r->ttl_absolute) {	/* from creation, running commands or not */
		*due_ms = r->created_ms + ttl_ms;
		return true;
	}
	if (sb->active)
		return false;
	*due_ms = r->active_ms + ttl_ms;	/* idle for its TTL */
	if (!r->idle_hibernate)
		return true;
	if (r->state == SBX_RUNNING || r->state == SBX_PAUSED) {
		*action = TTL_HIBERNATE;
		return true;
	}
	if (r->state == SBX_HIBERNATED) {	/* then deleted after its retention, if any */
		*due_ms += r->retention_seconds * 1000;
		return r->retention_seconds > 0;
	}
	return true;	/* failed or lost: deleted */
}

/* What to do with the sandbox now. Under sb->lock. */
static enum ttl_action ttl_due(const struct sandbox *sb, int64_t now)
{
	int64_t due;
	enum ttl_action action;
	return ttl_next(sb, &due, &action) && now >= due ? action : TTL_KEEP;
}

/* A TTL warning goes out this long before the rule acts: a minute, or
 * half the TTL when that is shorter (docs/api.md "Events"). */
#define TTL_WARN_MS 60000

/* Tell the event stream once per due time that the TTL rule will act.
 * Of an idle TTL only a running, paused or hibernated sandbox is warned
 * of (a failed or lost one is deleted at its TTL without a warning);
 * of an absolute TTL, any. */
static void ttl_warn(struct sandbox *sb, int64_t now)
{
	pthread_mutex_lock(&sb->lock);
	struct sbx_row *r = &sb->row;
	int64_t ttl_ms = r->ttl_seconds * 1000, warn = ttl_ms / 2 < TTL_WARN_MS ? ttl_ms / 2 : TTL_WARN_MS;
	int64_t due = 0;
	enum ttl_action action = TTL_KEEP;
	bool usable = r->state == SBX_RUNNING || r->state == SBX_PAUSED || r->state == SBX_HIBERNATED;
	bool tell = ttl_next(sb, &due, &action) && (r->ttl_absolute || usable) &&
		    due > now && due - now <= warn && sb->ttl_warned != due && !sb->pooled;
	if (tell)
		sb->ttl_warned = due;
	struct host_event ev = { r->workspace, r->id, sbx_state_name(r->state), 0, 0, "", "", "",
				 "ttl_warning", due, action == TTL_HIBERNATE ? "hibernate" : "delete" };
	pthread_mutex_unlock(&sb->lock);
	if (tell)
		host_events_emit(&ev);	/* id and workspace never change */
}

/* Whether a running sandbox has been idle for its idle_pause_seconds
 * (no request, no command running). Under sb->lock. */
static bool idle_pause_due(const struct sandbox *sb, int64_t now)
{
	const struct sbx_row *r = &sb->row;
	return r->idle_pause_seconds > 0 && r->state == SBX_RUNNING && !sb->vmm_dead && !sb->active &&
	       !sb->pooled && now >= r->active_ms + r->idle_pause_seconds * 1000;
}

static void check_ttl(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	enum ttl_action act = ttl_due(sb, wall_ms());
	bool pause = act == TTL_KEEP && idle_pause_due(sb, wall_ms());
	pthread_mutex_unlock(&sb->lock);
	if (pause && pthread_mutex_trylock(&sb->op) == 0) {	/* not while an operation runs */
		pthread_mutex_unlock(&sb->op);
		log_info("sandbox %s: idle for %llds, pausing", sb->row.id,
			 (long long)sb->row.idle_pause_seconds);
		if (host_pause_idle(h, sb) < 0)
			log_warn("sandbox %s: idle pause: %s", sb->row.id, errmsg());
	}
	if (act == TTL_KEEP) {
		ttl_warn(sb, wall_ms());
		return;
	}
	/* Not while another operation runs on it (that is activity too). */
	if (pthread_mutex_trylock(&sb->op) != 0)
		return;
	pthread_mutex_unlock(&sb->op);
	if (act == TTL_HIBERNATE) {
		log_info("sandbox %s: idle for its TTL, hibernating", sb->row.id);
		if (host_hibernate(h, sb, false) < 0)
			log_warn("sandbox %s: TTL hibernate: %s", sb->row.id, errmsg());
		return;
	}
	log_info("sandbox %s: %s for its TTL, deleting", sb->row.id,
		 sb->row.ttl_absolute ? "alive" : "idle");
	if (sandbox_delete_why(h, sb, "ttl") < 0)
		log_warn("sandbox %s: TTL delete: %s", sb->row.id, errmsg());
}

static void *housekeeper(void *arg)
{
	struct host *h = arg;
	int64_t next_sample = mono_ms() + h->cfg->sample_ms;
	for (;;) {
		pthread_mutex_lock(&h->lock);
		if (!h->stop) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += (long)h->cfg->reap_ms * 1000000;
			until.tv_sec += until.tv_nsec / 1000000000;
			until.tv_nsec %= 1000000000;
			pthread_cond_timedwait(&h->cond, &h->lock, &until);
		}
		bool stop = h->stop;
		pthread_mutex_unlock(&h->lock);
		if (stop)
			return NULL;
		struct sandbox **a;
		int n;
		if (list_refs(h, &a, &n) < 0)
			continue;
		bool sample = mono_ms() >= next_sample;
		if (sample)
			next_sample = mono_ms() + h->cfg->sample_ms;
		for (int i = 0; i < n; i++) {
			check_vmm(h, a[i]);
			check_ttl(h, a[i]);
			/* A paused one too: its memory is billed. */
			if (sample && (sandbox_in(a[i], SBX_RUNNING) || sandbox_in(a[i], SBX_PAUSED))) {
				sandbox_sample(h, a[i]);
				sandbox_save(h, a[i]);
			}
		}
		list_drop(h, a, n);
	}
}

static int make_dirs(const struct host_config *cfg)
{
	static const char *const sub[] = { "", "/sandboxes", "/snapshots", "/layers", "/templates", "/tmp",
					   "/jail", "/logs" };
	for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s%s", cfg->data_dir, sub[i]);
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return errf_sys("mkdir %s", p);
	}
	/* Jailed VMMs see DATA/sandboxes (jail.h): they may pass through it
	 * to their own directory, not list it. (Also with --no-jail: VMMs
	 * jailed by an earlier kilnd may still run.) */
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/sandboxes", cfg->data_dir);
	if (chmod(p, 0711) < 0)
		return errf_sys("chmod %s", p);
	return 0;
}

/* The pool starts once recovery knows which slots sandboxes hold. */
static void start_netpool(struct host *h)
{
	uint32_t *keep = NULL;
	int n = 0, cap = 0;
	pthread_mutex_lock(&h->lock);
	for (struct sandbox *sb = h->list; sb; sb = sb->next)
		cap++;
	keep = calloc(cap ? cap : 1, sizeof *keep);
	for (struct sandbox *sb = h->list; sb && keep; sb = sb->next)
		if (sb->row.net_slot)
			keep[n++] = (uint32_t)sb->row.net_slot;
	pthread_mutex_unlock(&h->lock);
	if (keep)
		netpool_start(h->net, keep, n);
	free(keep);
}

static int start_zygote(void *ctx, const struct template_def *def, const struct tmpl *t)
{
	(void)def;
	if (t && t->snapshot && tmpl_zygote_ensure(ctx, (struct tmpl *)t) < 0)
		log_warn("template %s: %s", t->name, errmsg());
	return 0;
}

int host_open(const struct host_config *cfg, struct store *store, struct metrics *metrics,
	      struct host **out)
{
	struct host *h = calloc(1, sizeof *h);
	if (!h)
		return errf(ENOMEM, "out of memory");
	h->cfg = cfg;
	h->store = store;
	h->metrics = metrics;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->layers, NULL);
	pthread_mutex_init(&h->volumes, NULL);
	pthread_cond_init(&h->cond, NULL);
	/* VMMs forked by zygotes and VMMs are re-parented to us, so we reap
	 * them and learn their exit status. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	int rc = make_dirs(cfg);
	if (rc == 0 && cfg->net)
		rc = netpool_open(cfg, &h->net);
	h->cgroups = cfg->jail && cgroup_setup(cfg);
	if (rc == 0)
		rc = templates_open(cfg, &h->tpl);
	if (rc == 0)
		rc = host_recover(h);
	if (rc == 0 && h->net)
		start_netpool(h);
	if (rc == 0) {
		if (pthread_create(&h->housekeeper, NULL, housekeeper, h) != 0)
			rc = errf(EAGAIN, "cannot start the housekeeping thread");
		else
			h->housekeeping = true;
	}
	if (rc < 0) {
		host_close(h);
		return rc;
	}
	/* Zygotes of the templates in service, so the first create is fast;
	 * then the pool, which spawns from them. */
	templates_each(h->tpl, start_zygote, (void *)cfg);
	if ((rc = pool_open(h, &h->pool)) < 0) {
		host_close(h);
		return rc;
	}
	*out = h;
	return 0;
}

void host_close(struct host *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (h->housekeeping)
		pthread_join(h->housekeeper, NULL);
	pool_close(h->pool);	/* its members unlink themselves */
	while (h->list) {
		struct sandbox *sb = h->list;
		h->list = sb->next;
		sandbox_save(h, sb);
		sandbox_put(h, sb);
	}
	templates_close(h->tpl);
	/* What sandboxes that live on hold stays; the rest goes. */
	netpool_close(h->net);
	if (h->cgroups)
		cgroup_finish(h->cfg);
	char jail[PATH_MAX];
	snprintf(jail, sizeof jail, "%s/jail", h->cfg->data_dir);
	rmdir(jail);
	ws_tallies_free(h);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->layers);
	pthread_mutex_destroy(&h->volumes);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
