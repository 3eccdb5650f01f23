/*
 * store_placement: where a cluster's sandboxes and snapshots live
 * (store/cluster.h). A create reserves room on a host in one transaction
 * under the cluster's placement lock, so that API replicas placing at the
 * same moment count each other's reservations; the reservation then takes
 * the id the host gave the sandbox, or is dropped if the create failed.
 */
#include "store/cluster.h"
#include "store/store_int.h"
#include "common/err.h"
#include "common/retry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLACE_HOSTS_MAX 256
/* A reservation older than this belongs to an API that died mid-create
 * (a create takes seconds): it no longer holds room. */
#define RESERVATION_STALE_MS (10 * 60 * 1000)
/* The most creates a workspace's window counts, as a host does
 * (WS_WINDOW_MAX): a creates cap above it is no cap. */
#define PLACE_WINDOW_MAX 4096
/* A wake's hold: longer than any wake takes; a record saying the sandbox
 * runs ends it sooner. */
#define WAKE_STALE_MS (2 * 60 * 1000)

struct loads {
	struct host_load *h;
	int n;
};

static int row_load_host(void *ctx, const struct dbv *c, int n)
{
	struct loads *l = ctx;
	if (l->n >= PLACE_HOSTS_MAX)
		return 0;	/* more hosts than one placement looks at */
	struct host_load *hl = &l->h[l->n];
	memset(hl, 0, sizeof *hl);
	int rc = store_host_fill(&hl->host, c, n);
	if (rc < 0)
		return rc;
	l->n++;
	return 0;
}

static int row_load_use(void *ctx, const struct dbv *c, int n)
{
	struct loads *l = ctx;
	if (n < 4)
		return -EPROTO;
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->h[i].host.id, dbv_text(&c[0]))) {
			l->h[i].vcpus = dbv_int(&c[1]);
			l->h[i].memory_mib = dbv_int(&c[2]);
			l->h[i].sandboxes = dbv_int(&c[3]);
		}
	return 0;
}

struct place_ctx {
	const struct placement *p;
	store_place_fn *fn;
	void *ctx;
	char (*res_ids)[ID_MAX];
	struct host_row *host;
};

/* The creation times of a workspace's window, oldest first. */
struct window {
	int64_t *t;
	int n;
};

static int row_time(void *ctx, const struct dbv *c, int n)
{
	struct window *w = ctx;
	if (n < 1)
		return -EPROTO;
	w->t[w->n++] = dbv_int(&c[0]);
	return w->n == PLACE_WINDOW_MAX;	/* a cap that large is no cap */
}

/* Two integers (a COUNT and a SUM). */
static int row_int2(void *ctx, const struct dbv *c, int n)
{
	int64_t *v = ctx;
	if (n < 2)
		return -EPROTO;
	v[0] = dbv_int(&c[0]), v[1] = dbv_int(&c[1]);
	return 0;
}

/* -EDQUOT with the message, the count naming the cap. */
static int refuse(struct place_count *pc, const char *limit, int64_t value, int64_t retry_ms,
		  const char *fmt, int64_t have)
{
	snprintf(pc->limit, sizeof pc->limit, "%s", limit);
	pc->value = value;
	pc->retry_after_ms = retry_ms;
	return errf(EDQUOT, fmt, (long long)have, (long long)value);
}

/* The workspace's caps over every host, under the placement lock: what
 * its placements not ended hold (a placement whose record says it is
 * hibernated, failed or gone holds no running slot; a reservation
 * does), and the sandboxes placed in the window (a create that failed
 * dropped its reservation, so it was no create). */
static int admit(struct store *tx, const struct placement *p, int n, int64_t now)
{
	const struct place_caps *c = p->caps;
	struct place_count *pc = p->count;
	memset(pc, 0, sizeof *pc);
	int64_t running[2] = { 0, 0 };	/* creating or running; of them starting */
	int rc = 0;
	/* A wake in flight counts as running, but not the one of the sandbox
	 * this wake starts (two wakes of one sandbox start one sandbox). */
	char own_wake[ID_MAX + 8];
	snprintf(own_wake, sizeof own_wake, "wake_%s", p->wake_of ? p->wake_of : "");
	if (c->running)
		/* The parameters in the order of their first use (SQLite numbers
		 * $N by it). */
		rc = RUN(tx, "WITH held AS (SELECT p.kind, s.state FROM placements p LEFT JOIN sandboxes s "
			     "ON s.id = p.id WHERE p.workspace_id = $1 AND p.ended_ms IS NULL AND ((p.kind = 'sandbox' "
			     "AND (s.state IS NULL OR s.state IN ($2, $3, $4))) OR (p.kind = 'wake' AND p.id <> $5))) "
			     "SELECT COUNT(*), COALESCE(SUM(CASE WHEN kind = 'wake' OR state IS NULL OR state = $2 "
			     "THEN 1 ELSE 0 END), 0) FROM held",
			 row_int2, running, NULL, DBV_S(p->workspace),
			 DBV_S(sbx_state_name(SBX_CREATING)), DBV_S(sbx_state_name(SBX_RUNNING)),
			 DBV_S(sbx_state_name(SBX_PAUSED)),	/* paused holds its memory */
			 DBV_S(own_wake));
	pc->running = running[0];
	struct window w = { NULL, 0 };
	bool wake = !strcmp(p->kind, "wake");
	if (rc >= 0 && c->window_ms > 0 && !wake) {
		if (!(w.t = calloc(PLACE_WINDOW_MAX, sizeof *w.t)))
			return errf(ENOMEM, "out of memory");
		rc = RUN(tx, "SELECT created_ms FROM placements WHERE workspace_id = $1 AND kind = 'sandbox' "
			     "AND created_ms > $2 ORDER BY created_ms",
			 row_time, &w, NULL, DBV_S(p->workspace), DBV_I(now - c->window_ms));
	}
	if (rc < 0) {
		free(w.t);
		return rc;
	}
	rc = 0;	/* a reader that stopped early is no error */
	pc->creates_used = w.n;
	pc->reset_ms = w.n ? w.t[0] + c->window_ms : 0;
	if (c->running && running[0] + n > c->running) {
		/* A reservation (no record yet), a wake, a record creating: starting. */
		rc = refuse(pc, "running", c->running, retry_running_ms(running[1]),
			    "%lld sandboxes of this workspace are running or starting; its limit is %lld",
			    running[0]);
	} else if (c->creates && c->window_ms > 0 && !wake && w.n + n > c->creates) {
		/* Room for n once the oldest n - (cap - count) have left. */
		int k = (int)(w.n + n - c->creates - 1);
		int64_t at = k < w.n ? w.t[k] + c->window_ms : now;
		rc = refuse(pc, "creates", c->creates, at > now ? at - now : 1,
			    "%lld sandboxes were made in this workspace in the window; its limit is %lld", w.n);
	} else if (c->window_ms > 0 && !wake) {
		pc->creates_used = w.n + n;
		pc->reset_ms = (w.n ? w.t[0] : now) + c->window_ms;
	}
	free(w.t);
	return rc;
}

static int place_tx(struct store *tx, void *ctx)
{
	struct place_ctx *pc = ctx;
	const struct placement *p = pc->p;
	int n = p->n > 0 ? p->n : 1;
	struct loads l = { NULL, 0 };
	int64_t now = wall_ms();
	int rc = store_tx_lock(tx, "kiln placement");
	rc = rc ?: RUN(tx, "DELETE FROM placements WHERE id LIKE 'res_%' AND created_ms < $1", NULL, NULL,
		       NULL, DBV_I(now - RESERVATION_STALE_MS));
	rc = rc ?: RUN(tx, "DELETE FROM placements WHERE kind = 'wake' AND created_ms < $1", NULL, NULL,
		       NULL, DBV_I(now - WAKE_STALE_MS));
	if (rc == 0 && p->caps)
		rc = admit(tx, p, n, now);
	const char *host_id = p->host_id;
	if (rc == 0 && !host_id) {
		if (!(l.h = calloc(PLACE_HOSTS_MAX, sizeof *l.h)))
			return errf(ENOMEM, "out of memory");
		rc = store_run(tx, "SELECT " HOST_COLS " FROM hosts WHERE admin = 'active' AND health = 'up' "
				   "ORDER BY joined_ms", NULL, 0, row_load_host, &l, NULL);
		rc = rc ?: store_run(tx, "SELECT host_id, SUM(vcpus), SUM(memory_mib), COUNT(*) FROM placements "
					 "WHERE ended_ms IS NULL AND kind = 'sandbox' GROUP BY host_id",
				     NULL, 0, row_load_use, &l, NULL);
		int pick = rc;
		if (rc == 0)
			pick = l.n ? pc->fn(pc->ctx, l.h, l.n)
				   : errf(EAGAIN, "no host can take a sandbox: none is up and active (kilnd cluster hosts)");
		if (pick < 0) {
			rc = pick;
		} else if (pick >= l.n) {
			rc = errf(EINVAL, "placement chose host %d of %d", pick, l.n);
		} else {
			*pc->host = l.h[pick].host;
			l.h[pick].host.templates = NULL;	/* moved to *host */
			host_id = pc->host->id;
		}
	}
	if (rc == 0 && p->wake_of) {
		/* One hold per sandbox: another wake's of it becomes this one. */
		snprintf(pc->res_ids[0], ID_MAX, "wake_%.34s", p->wake_of);
		rc = RUN(tx, "DELETE FROM placements WHERE id = $1", NULL, NULL, NULL, DBV_S(pc->res_ids[0]));
		rc = rc ?: RUN(tx, "INSERT INTO placements (id, workspace_id, host_id, kind, created_ms) "
				   "VALUES ($1, $2, $3, 'wake', $4)",
			       NULL, NULL, NULL, DBV_S(pc->res_ids[0]), DBV_S(p->workspace), DBV_S(host_id),
			       DBV_I(now));
		n = 0;
	}
	for (int i = 0; rc == 0 && i < n; i++) {
		rc = make_id(pc->res_ids[i], "res_");
		rc = rc ?: RUN(tx, "INSERT INTO placements (id, workspace_id, host_id, kind, vcpus, memory_mib, "
				   "created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
			       NULL, NULL, NULL, DBV_S(pc->res_ids[i]), DBV_S(p->workspace), DBV_S(host_id),
			       DBV_S(p->kind), DBV_I(p->vcpus), DBV_I(p->memory_mib), DBV_I(now));
	}
	for (int i = 0; i < l.n; i++)
		host_row_clear(&l.h[i].host);
	free(l.h);
	return rc;
}

int store_place(struct store *st, const struct placement *p, store_place_fn *fn, void *ctx,
		char (*res_ids)[ID_MAX], struct host_row *host)
{
	memset(host, 0, sizeof *host);
	for (int i = 0; i < (p->n > 0 ? p->n : 1); i++)
		res_ids[i][0] = 0;
	struct place_ctx pc = { p, fn, ctx, res_ids, host };
	int rc = store_tx(st, place_tx, &pc);
	if (rc < 0) {
		host_row_clear(host);
		memset(host, 0, sizeof *host);
		for (int i = 0; i < (p->n > 0 ? p->n : 1); i++)
			res_ids[i][0] = 0;	/* rolled back */
	}
	return rc;
}

int store_placement_add(struct store *st, const char *id, const char *host_id, const struct placement *p)
{
	return RUN(st, "INSERT INTO placements (id, workspace_id, host_id, kind, vcpus, memory_mib, created_ms) "
		       "VALUES ($1, $2, $3, $4, $5, $6, $7)",
		   NULL, NULL, NULL, DBV_S(id), DBV_S(p->workspace), DBV_S(host_id), DBV_S(p->kind),
		   DBV_I(p->vcpus), DBV_I(p->memory_mib), DBV_I(wall_ms()));
}

int store_placement_rename(struct store *st, const char *from, const char *to, int64_t vcpus,
			   int64_t memory_mib)
{
	int64_t changes = 0;
	int rc = RUN(st, "UPDATE placements SET id = $1, vcpus = $2, memory_mib = $3 WHERE id = $4", NULL, NULL,
		     &changes, DBV_S(to), DBV_I(vcpus), DBV_I(memory_mib), DBV_S(from));
	if (rc == 0 && !changes)
		rc = errf(ENOENT, "no placement %s (stale, and taken back?)", from);
	return rc;
}

int store_placement_drop(struct store *st, const char *id)
{
	return RUN(st, "DELETE FROM placements WHERE id = $1", NULL, NULL, NULL, DBV_S(id));
}

int store_wake_done(struct store *st, const char *id)
{
	char hold[ID_MAX + 8];
	snprintf(hold, sizeof hold, "wake_%s", id);
	return RUN(st, "DELETE FROM placements WHERE id = $1", NULL, NULL, NULL, DBV_S(hold));
}

int store_placement_end(struct store *st, const char *id)
{
	int rc = RUN(st, "UPDATE placements SET ended_ms = $1 WHERE id = $2 AND ended_ms IS NULL", NULL, NULL,
		     NULL, DBV_I(wall_ms()), DBV_S(id));
	/* A sandbox's exposed ports go with it, as its host drops them from
	 * its own database (host.c sandbox_set_state): a public port's
	 * record outlived its sandbox deleted through a replica, answering
	 * 404 for the missing sandbox where 401 was due (e2e 69-kilnd-ports
	 * against the cluster, issue 12). */
	return rc ?: store_port_delete_all(st, id);
}

struct where {
	char host_id[ID_MAX];
	bool found, ended;
};

static int row_where(void *ctx, const struct dbv *c, int n)
{
	struct where *w = ctx;
	if (n < 2)
		return -EPROTO;
	copy_str(w->host_id, sizeof w->host_id, dbv_text(&c[0]));
	w->ended = c[1].type != DBV_NULL;
	w->found = true;
	return 1;
}

static int row_host(void *ctx, const struct dbv *c, int n)
{
	int rc = store_host_fill(ctx, c, n);
	return rc < 0 ? rc : 1;
}

/* The host of this id; -ENOENT "host ... is gone" if its row went. */
static int host_by_id(struct store *st, const char *id, struct host_row *host)
{
	memset(host, 0, sizeof *host);
	int rc = RUN(st, "SELECT " HOST_COLS " FROM hosts WHERE id = $1", row_host, host, NULL, DBV_S(id));
	if (rc < 0)
		return rc;
	return host->id[0] ? 0 : errf(ENOENT, "host %s is not in the cluster", id);
}

int store_placement_host(struct store *st, const char *ws, const char *id, struct host_row *host,
			 bool *ended)
{
	struct where w = { 0 };
	memset(host, 0, sizeof *host);
	int rc = RUN(st, "SELECT host_id, ended_ms FROM placements WHERE id = $1 AND workspace_id = $2",
		     row_where, &w, NULL, DBV_S(id), DBV_S(ws));
	if (rc < 0)
		return rc;
	if (!w.found)
		return errf(ENOENT, "%s not found", id);
	if (ended)
		*ended = w.ended;
	return host_by_id(st, w.host_id, host);
}

struct placed {
	char id[ID_MAX], ws[ID_MAX], host_id[ID_MAX];
};

struct placed_list {
	struct placed *p;
	size_t n, cap;
};

static int row_placed(void *ctx, const struct dbv *c, int n)
{
	struct placed_list *l = ctx;
	if (n < 3)
		return -EPROTO;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct placed *p = realloc(l->p, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		l->p = p, l->cap = cap;
	}
	struct placed *p = &l->p[l->n++];
	copy_str(p->id, sizeof p->id, dbv_text(&c[0]));
	copy_str(p->ws, sizeof p->ws, dbv_text(&c[1]));
	copy_str(p->host_id, sizeof p->host_id, dbv_text(&c[2]));
	return 0;
}

static int row_yes(void *ctx, const struct dbv *c, int n)
{
	(void)c, (void)n;
	*(bool *)ctx = true;
	return 1;
}

int store_placement_is(struct store *st, const char *id, const char *ws, const char *host_id)
{
	bool yes = false;
	int rc = RUN(st, "SELECT 1 FROM placements WHERE id = $1 AND workspace_id = $2 AND host_id = $3", row_yes,
		     &yes, NULL, DBV_S(id), DBV_S(ws), DBV_S(host_id));
	return rc < 0 ? rc : yes ? 0 : -ENOENT;
}

struct ids {
	store_id_fn *fn;
	void *ctx;
};

static int row_id(void *ctx, const struct dbv *c, int n)
{
	struct ids *i = ctx;
	return n < 1 ? -EPROTO : i->fn(i->ctx, dbv_text(&c[0]));
}

int store_placement_ids(struct store *st, const char *host_id, store_id_fn *fn, void *ctx)
{
	struct ids i = { fn, ctx };
	return RUN(st, "SELECT id FROM placements WHERE host_id = $1 AND ended_ms IS NULL AND kind = 'sandbox' "
		       "AND id NOT LIKE 'res_%'", row_id, &i, NULL, DBV_S(host_id));
}

int store_placement_each(struct store *st, const char *ws, const char *kind, store_placed_fn *fn,
			 void *ctx)
{
	struct placed_list l = { 0 };
	int rc = ws ? RUN(st, "SELECT id, workspace_id, host_id FROM placements WHERE ended_ms IS NULL "
			      "AND kind = $1 AND workspace_id = $2 AND id NOT LIKE 'res_%' ORDER BY created_ms",
			  row_placed, &l, NULL, DBV_S(kind), DBV_S(ws))
		    : RUN(st, "SELECT id, workspace_id, host_id FROM placements WHERE ended_ms IS NULL "
			      "AND kind = $1 AND id NOT LIKE 'res_%' ORDER BY created_ms",
			  row_placed, &l, NULL, DBV_S(kind));
	/* Rows are read first, then handed out: fn may call the store. */
	struct host_row h = { 0 };
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		if (strcmp(h.id, l.p[i].host_id)) {
			host_row_clear(&h);
			if ((rc = host_by_id(st, l.p[i].host_id, &h)) < 0)
				break;
		}
		rc = fn(ctx, l.p[i].id, l.p[i].ws, &h);
	}
	host_row_clear(&h);
	free(l.p);
	return rc;
}
