/*
 * pool: see pool.h. One thread (common/periodic) fills and trims; creates
 * take members under the pool's lock and wake them on their own thread.
 */
#include "host/guest_conn.h"
#include "host/host_int.h"
#include "host/net.h"
#include "host/pool.h"
#include "host/template.h"
#include "common/err.h"
#include "host/host_config.h"
#include "common/log.h"
#include "host/cgroup.h"
#include "common/periodic.h"
#include "common/strbuf.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define POOL_MEMBERS 256	/* all templates together */
#define POOL_TEMPLATES 32	/* templates whose creates are counted */
#define RATE_TIMES 64		/* creates remembered per template */
#define RATE_WINDOW_MS 60000
/* A template whose members cannot be made (a broken snapshot, a zygote
 * that exits) is tried again after a gap that doubles from the first to
 * the cap: it neither spins nor holds up the templates after it. */
#define BACKOFF_FIRST_MS 2000
#define BACKOFF_MAX_MS 60000
/* Host memory a fill leaves free beyond the member's own guest memory,
 * and the level below which members are given back. */
#define FILL_MARGIN_MIB 1024
#define LOW_MEMORY_MIB 512

struct member {
	struct sandbox *sb;
	struct tmpl *t;		/* its version (a reference) */
	struct guest *g;	/* its agent, connected since it answered */
};

/* Per template (by name): its recent creates, and how its fills fail. */
struct rate {
	char name[32];
	int64_t times[RATE_TIMES];	/* ring of monotonic ms */
	int first, n;
	/* After a failed fill of version fail_version: no fill before
	 * retry_ms (monotonic); gap_ms the gap that set it. A success or
	 * another version in service starts over. */
	int fail_version;
	int64_t retry_ms, gap_ms;
	uint64_t failures;	/* kiln_pool_member_failures_total */
};

struct pool {
	struct host *h;
	pthread_mutex_t lock;
	struct member m[POOL_MEMBERS];
	int n;
	int64_t mem_mib;	/* guest memory of members and the one being made */
	struct rate rates[POOL_TEMPLATES];
	int nrates;
	uint64_t hits, misses;
	bool stop;
	struct periodic filler;	/* every second, and kicked by a take */
};

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
	return now_us() / 1000;
}

/* MemAvailable in MiB (-1: unknown, which never stops a fill). */
static int64_t mem_available_mib(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return -1;
	char line[128];
	long long kb = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

/* ---- sizing ---------------------------------------------------------------------------- */

static struct rate *rate_of(struct pool *p, const char *name, bool add)
{
	for (int i = 0; i < p->nrates; i++)
		if (!strcmp(p->rates[i].name, name))
			return &p->rates[i];
	if (!add || p->nrates == POOL_TEMPLATES)
		return NULL;
	struct rate *r = &p->rates[p->nrates++];
	memset(r, 0, sizeof *r);
	snprintf(r->name, sizeof r->name, "%s", name);
	return r;
}

static void rate_note(struct pool *p, const char *name)
{
	struct rate *r = rate_of(p, name, true);
	if (!r)
		return;
	if (r->n == RATE_TIMES) {
		r->first = (r->first + 1) % RATE_TIMES;
		r->n--;
	}
	r->times[(r->first + r->n++) % RATE_TIMES] = now_ms();
}

/* 1 + the template's creates in the last RATE_WINDOW_MS, at most --pool. */
static int target_of(struct pool *p, const char *name)
{
	struct rate *r = rate_of(p, name, false);
	int recent = 0;
	int64_t since = now_ms() - RATE_WINDOW_MS;
	for (int i = 0; r && i < r->n; i++)
		if (r->times[(r->first + i) % RATE_TIMES] >= since)
			recent++;
	int want = 1 + recent, max = p->h->cfg->pool;
	return want < max ? want : max;
}

/* Whether t's fills wait out a failure (under p->lock). */
static bool backing_off(struct pool *p, const struct tmpl *t)
{
	struct rate *r = rate_of(p, t->name, false);
	return r && r->gap_ms && r->fail_version == t->version && now_ms() < r->retry_ms;
}

/* A fill of t failed: the next waits twice as long as the last (the
 * first gap for a version that had none), and the log says so once per
 * gap, not every round. Under p->lock. */
static void fill_failed(struct pool *p, const struct tmpl *t, const char *why)
{
	struct rate *r = rate_of(p, t->name, true);
	if (!r) {
		log_warn("pool: a sandbox of %s v%d: %s", t->name, t->version, why);
		return;
	}
	if (!r->gap_ms || r->fail_version != t->version)
		r->gap_ms = BACKOFF_FIRST_MS;
	else if ((r->gap_ms *= 2) > BACKOFF_MAX_MS)
		r->gap_ms = BACKOFF_MAX_MS;
	r->fail_version = t->version;
	r->retry_ms = now_ms() + r->gap_ms;
	r->failures++;
	log_warn("pool: a sandbox of %s v%d: %s (failure %llu; tried again in %lld s)", t->name, t->version, why,
		 (unsigned long long)r->failures, (long long)(r->gap_ms / 1000));
}

static void fill_worked(struct pool *p, const struct tmpl *t)
{
	struct rate *r = rate_of(p, t->name, false);
	if (r)
		r->gap_ms = r->retry_ms = 0;
}

static int members_of(struct pool *p, const struct tmpl *t)
{
	int n = 0;
	for (int i = 0; i < p->n; i++)
		n += p->m[i].t == t;
	return n;
}

/* Room on the host for one more member of t (under p->lock): within what
 * admission allows besides the sandboxes there are, and memory to spare. */
static bool room_for(struct pool *p, const struct tmpl *t)
{
	struct host *h = p->h;
	pthread_mutex_lock(&h->lock);
	bool ok = h->live + h->pooled + 1 <= h->cfg->max_sandboxes &&
		  h->mem_mib + p->mem_mib + t->memory_mib <= h->cfg->max_memory_mib;
	pthread_mutex_unlock(&h->lock);
	int64_t avail = ok ? mem_available_mib() : -1;
	return ok && (avail < 0 || avail >= t->memory_mib + FILL_MARGIN_MIB);
}

/* Over what the host allows now (creates came since the members were
 * made), or memory short: one member should go. */
static bool over(struct pool *p)
{
	struct host *h = p->h;
	pthread_mutex_lock(&h->lock);
	bool yes = h->live + h->pooled > h->cfg->max_sandboxes ||
		   h->mem_mib + p->mem_mib > h->cfg->max_memory_mib;
	pthread_mutex_unlock(&h->lock);
	if (!yes && p->n) {
		int64_t avail = mem_available_mib();
		yes = avail >= 0 && avail < LOW_MEMORY_MIB;
	}
	return yes;
}

/* ---- members --------------------------------------------------------------------------- */

static void destroy(struct pool *p, struct member *m, const char *why)
{
	struct host *h = p->h;
	log_debug("pool: sandbox %s of %s v%d removed: %s", m->sb->row.id, m->t->name, m->t->version, why);
	guest_close(m->g);
	sandbox_abort(h, m->sb, why);
	sandbox_put(h, m->sb);
	tmpl_put(h->tpl, m->t);
}

/* Remove m[i] from the array (under p->lock); the caller destroys it. */
static struct member unlist(struct pool *p, int i)
{
	struct member m = p->m[i];
	p->m[i] = p->m[--p->n];
	p->mem_mib -= m.t->memory_mib;
	return m;
}

/* One member of t, made without p->lock (whose mem_mib already counts it). */
static int fill_one(struct pool *p, struct tmpl *t, struct member *out)
{
	struct host *h = p->h;
	struct sbx_row row = { 0 };
	int rc = make_id(row.id, "sbx_");
	if (rc < 0)
		return rc;
	snprintf(row.template, sizeof row.template, "%s", t->name);
	row.vcpus = t->vcpus;
	row.memory_mib = t->memory_mib;
	row.state = SBX_CREATING;
	row.created_ms = row.active_ms = wall_ms();
	struct sandbox *sb = sandbox_alloc(h, &row);
	sbx_row_clear(&row);
	if (!sb)
		return errf(ENOMEM, "out of memory");
	sb->pooled = true;
	host_link(h, sb);
	struct guest *g = NULL;
	int64_t t0 = now_us();
	rc = sandbox_prestart(h, sb, t, &g);
	if (rc == 0)
		log_debug("pool: sandbox %s of %s spawned, agent answered in %.1f ms", sb->row.id, t->name,
			  (now_us() - t0) / 1e3);
	/* Paused: no vCPU runs (no timer ticks, nothing billed to anyone)
	 * until a create resumes it. */
	if (rc == 0)
		rc = sandbox_ctl_cmd(sb, "pause", h->cfg->boot_timeout_ms);
	if (rc < 0) {
		char why[300];
		snprintf(why, sizeof why, "pool: %s", errmsg());
		guest_close(g);
		sandbox_abort(h, sb, why);
		sandbox_put(h, sb);
		/* The message again: the cleanup may have written its own. */
		return errf(rc == -1 ? EIO : -rc, "%s", why + 6);
	}
	*out = (struct member){ .sb = sb, .t = t, .g = g };
	return 0;
}

/* The templates in service, each a reference (tmpl_put them). */
struct in_service {
	struct pool *p;
	struct tmpl *t[POOL_TEMPLATES];
	int n;
};

static int add_in_service(void *ctx, const struct template_def *def, const struct tmpl *t)
{
	(void)def;
	struct in_service *s = ctx;
	struct tmpl *ref;
	if (t && s->n < POOL_TEMPLATES && templates_get(s->p->h->tpl, t->name, &ref) == 0)
		s->t[s->n++] = ref;
	return 0;
}

/* Its VMM exited while it waited (pidfd readable). */
static bool member_dead(const struct member *m)
{
	pthread_mutex_lock(&m->sb->lock);
	struct pollfd pfd = { .fd = m->sb->pidfd, .events = POLLIN };
	bool dead = pfd.fd < 0 || poll(&pfd, 1, 0) != 0;
	pthread_mutex_unlock(&m->sb->lock);
	return dead;
}

static bool serving(const struct in_service *s, const struct tmpl *t)
{
	for (int i = 0; i < s->n; i++)
		if (s->t[i] == t)
			return true;
	return false;
}

/* One round, under p->lock (dropped while a member is made or removed):
 * true when it did something, so the next round follows at once. */
static bool round_once(struct pool *p, struct in_service *s)
{
	/* Members of a version no longer in service or whose VMM died, then
	 * any over room. */
	for (int i = 0; i < p->n; i++) {
		bool dead = member_dead(&p->m[i]);
		if (dead || !serving(s, p->m[i].t)) {
			struct member m = unlist(p, i);
			pthread_mutex_unlock(&p->lock);
			destroy(p, &m, dead ? "its VMM exited" : "its template version is no longer in service");
			pthread_mutex_lock(&p->lock);
			return true;
		}
	}
	if (p->n && over(p)) {
		struct member m = unlist(p, 0);
		pthread_mutex_unlock(&p->lock);
		destroy(p, &m, "the host needs its room");
		pthread_mutex_lock(&p->lock);
		return true;
	}
	for (int i = 0; i < s->n && p->n < POOL_MEMBERS; i++) {
		struct tmpl *t = s->t[i];
		if (members_of(p, t) >= target_of(p, t->name) || backing_off(p, t) || !room_for(p, t))
			continue;
		struct tmpl *ref;	/* the member's own reference */
		if (templates_get(p->h->tpl, t->name, &ref) < 0)
			continue;
		if (ref != t) {
			tmpl_put(p->h->tpl, ref);
			return true;	/* a newer version since the list: the next round sees it */
		}
		p->mem_mib += t->memory_mib;
		pthread_mutex_unlock(&p->lock);
		struct member m;
		int rc = fill_one(p, ref, &m);
		pthread_mutex_lock(&p->lock);
		if (rc < 0) {
			fill_failed(p, t, errmsg());
			tmpl_put(p->h->tpl, ref);
			p->mem_mib -= t->memory_mib;
			if (p->stop)
				return false;
			continue;	/* the next template's turn, in this round */
		}
		fill_worked(p, t);
		if (p->stop) {
			p->mem_mib -= t->memory_mib;
			pthread_mutex_unlock(&p->lock);
			destroy(p, &m, "kilnd is stopping");
			pthread_mutex_lock(&p->lock);
			return false;
		}
		p->m[p->n++] = m;
		return true;
	}
	return false;
}

/* The filler's pass: rounds until one has nothing to do. */
static void fill(void *arg)
{
	struct pool *p = arg;
	/* Background work: the creates come first (nice, like the network
	 * pool's refill; the VMMs are the zygote's children, not ours). */
	setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
	for (bool busy = true; busy;) {
		struct in_service s = { .p = p };
		templates_each(p->h->tpl, add_in_service, &s);
		pthread_mutex_lock(&p->lock);
		busy = !p->stop && round_once(p, &s);
		pthread_mutex_unlock(&p->lock);
		for (int i = 0; i < s.n; i++)
			tmpl_put(p->h->tpl, s.t[i]);
	}
}

/* ---- the interface ----------------------------------------------------------------------- */

int pool_open(struct host *h, struct pool **out)
{
	*out = NULL;
	if (h->cfg->pool <= 0)
		return 0;
	struct pool *p = calloc(1, sizeof *p);
	if (!p)
		return errf(ENOMEM, "out of memory");
	p->h = h;
	pthread_mutex_init(&p->lock, NULL);
	int rc = periodic_start(&p->filler, "the pool's", 1000, fill, p);
	if (rc < 0) {
		pthread_mutex_destroy(&p->lock);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void pool_close(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_mutex_unlock(&p->lock);
	periodic_stop(&p->filler);
	while (p->n) {
		struct member m = unlist(p, p->n - 1);
		destroy(p, &m, "kilnd is stopping");
	}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* Policy in force, vCPUs resumed, and the resync every new sandbox gets
 * (its clock, fresh entropy with the kernel's generator reseeded, its
 * hostname and identity): then nothing tells it from a fresh spawn. */
static int wake(struct pool *p, struct member *m, const char *policy)
{
	struct host *h = p->h;
	int64_t t0 = now_us();
	/* Its full share of the CPU again before it runs (cgroup.h). */
	if (h->cgroups && cgroup_cpu_weight(h->cfg, m->sb->row.id, CGROUP_WEIGHT_DEFAULT) < 0)
		log_warn("pool: sandbox %s: %s", m->sb->row.id, errmsg());
	int rc = policy ? net_change_policy(h, m->sb, policy) : 0;
	int64_t t1 = now_us();
	if (rc == 0)
		rc = sandbox_ctl_cmd(m->sb, "resume", h->cfg->boot_timeout_ms);
	int64_t t2 = now_us();
	if (rc == 0)
		rc = guest_resync(m->g, m->sb->row.id, m->sb->row.id);
	int64_t t3 = now_us();
	if (rc == 0)
		sandbox_meter_reset(m->sb);
	log_debug("pool: sandbox %s woken: policy %.1f ms, resume %.1f ms, resync %.1f ms", m->sb->row.id,
		  (t1 - t0) / 1e3, (t2 - t1) / 1e3, (t3 - t2) / 1e3);
	return rc;
}

struct sandbox *pool_take(struct pool *p, struct tmpl *t, const char *policy)
{
	if (!p)
		return NULL;
	pthread_mutex_lock(&p->lock);
	rate_note(p, t->name);
	int i = 0;
	while (i < p->n && p->m[i].t != t)
		i++;
	bool have = i < p->n;
	struct member m = have ? unlist(p, i) : (struct member){ 0 };
	if (!have)
		p->misses++;
	pthread_mutex_unlock(&p->lock);
	periodic_kick(&p->filler);	/* refill (or grow: the rate rose) */
	if (!have)
		return NULL;
	if (wake(p, &m, policy) < 0) {
		char why[300];
		snprintf(why, sizeof why, "pool: waking it: %s", errmsg());
		log_warn("sandbox %s: %s; this create spawns its own", m.sb->row.id, why + 6);
		destroy(p, &m, why);
		pthread_mutex_lock(&p->lock);
		p->misses++;
		pthread_mutex_unlock(&p->lock);
		return NULL;
	}
	guest_close(m.g);
	tmpl_put(p->h->tpl, m.t);
	pthread_mutex_lock(&p->lock);
	p->hits++;
	pthread_mutex_unlock(&p->lock);
	return m.sb;	/* the pool's reference is now the create's */
}

void pool_metrics(struct pool *p, struct strbuf *b)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	strbuf_printf(b, "# HELP kiln_pool_ready Sandboxes spawned and paused ahead of creates.\n"
		      "# TYPE kiln_pool_ready gauge\n");
	/* One line per template with members (by name: one version each). */
	for (int i = 0; i < p->n; i++) {
		bool first = true;
		for (int j = 0; j < i && first; j++)
			first = strcmp(p->m[j].t->name, p->m[i].t->name) != 0;
		if (!first)
			continue;
		int n = 0;
		for (int j = i; j < p->n; j++)
			n += !strcmp(p->m[j].t->name, p->m[i].t->name);
		strbuf_printf(b, "kiln_pool_ready{template=\"%s\"} %d\n", p->m[i].t->name, n);
	}
	strbuf_printf(b, "# HELP kiln_pool_takes_total Creates from a template, by whether a pooled "
		      "sandbox served them.\n# TYPE kiln_pool_takes_total counter\n"
		      "kiln_pool_takes_total{result=\"hit\"} %llu\n"
		      "kiln_pool_takes_total{result=\"miss\"} %llu\n",
		      (unsigned long long)p->hits, (unsigned long long)p->misses);
	strbuf_printf(b, "# HELP kiln_pool_member_failures_total Pooled sandboxes that could not be made, by "
		      "template.\n# TYPE kiln_pool_member_failures_total counter\n");
	for (int i = 0; i < p->nrates; i++)
		if (p->rates[i].failures)
			strbuf_printf(b, "kiln_pool_member_failures_total{template=\"%s\"} %llu\n", p->rates[i].name,
				      (unsigned long long)p->rates[i].failures);
	pthread_mutex_unlock(&p->lock);
}
