/*
 * h_list: GET /v1/sandboxes, the caller's sandboxes that have not ended,
 * filtered (status, template, metadata.KEY=VALUE) and paged (limit,
 * cursor) in a stable order: oldest first, by created time then id. The
 * cursor names the last sandbox of the page, so a page is the same
 * whatever was created or deleted meanwhile.
 */
#include "hostif/hostif.h"
#include "api/api.h"
#include "api/handlers.h"
#include "api/http.h"
#include "api/render.h"
#include "ops/validate.h"
#include "common/err.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_DEFAULT 100
#define LIST_MAX 1000
#define META_FILTERS 16

struct list_query {
	const char *status, *template;
	const char *meta_key[META_FILTERS], *meta_value[META_FILTERS];
	int nmeta;
	int64_t limit;
	bool after;			/* a cursor was given: rows after (created, id) */
	int64_t after_created;
	char after_id[ID_MAX];
	char bad[300];			/* the first problem, or "" */
};

static const char *const states[] = { "creating", "running", "paused", "hibernated", "failed", "deleting", NULL };

static bool one_of(const char *s, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(s, *set) == 0)
			return true;
	return false;
}

/* A cursor is "<created_ms>.<id>" of the last row of the page before. */
static bool parse_cursor(struct list_query *q, const char *v)
{
	char *end;
	errno = 0;
	long long created = strtoll(v, &end, 10);
	if (errno || end == v || *end != '.' || created < 0 || !v_is_id(end + 1, "sbx_"))
		return false;
	q->after = true;
	q->after_created = created;
	snprintf(q->after_id, sizeof q->after_id, "%s", end + 1);
	return true;
}

static enum MHD_Result take_param(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				  const char *value, size_t value_size)
{
	(void)kind;
	struct list_query *q = cls;
	if (q->bad[0])
		return MHD_NO;
	const char *v = value ? value : "";
	if (strlen(key) != key_size || strlen(v) != value_size) {
		snprintf(q->bad, sizeof q->bad, "query parameter '%.64s' holds a NUL byte", key);
	} else if (strcmp(key, "status") == 0) {
		if (!one_of(v, states))
			snprintf(q->bad, sizeof q->bad, "status '%.32s' is not one of creating, running, paused, "
				 "hibernated, failed, deleting", v);
		q->status = v;
	} else if (strcmp(key, "template") == 0) {
		if (!v_is_name(v))
			snprintf(q->bad, sizeof q->bad, "template '%.64s' is not a template name", v);
		q->template = v;
	} else if (strcmp(key, "limit") == 0) {
		char *end;
		errno = 0;
		long long n = strtoll(v, &end, 10);
		if (errno || end == v || *end || n < 1 || n > LIST_MAX)
			snprintf(q->bad, sizeof q->bad, "limit '%.32s' is not a number from 1 to %d", v,
				 LIST_MAX);
		q->limit = n;
	} else if (strcmp(key, "cursor") == 0) {
		if (!parse_cursor(q, v))
			snprintf(q->bad, sizeof q->bad, "cursor '%.64s' is not one this API gave", v);
	} else if (strncmp(key, "metadata.", 9) == 0) {
		const char *k = key + 9;
		if (!*k || strlen(k) > 64)
			snprintf(q->bad, sizeof q->bad, "query parameter '%.80s': the key after "
				 "'metadata.' must be 1 to 64 characters", key);
		else if (q->nmeta == META_FILTERS)
			snprintf(q->bad, sizeof q->bad, "at most %d metadata filters", META_FILTERS);
		else {
			q->meta_key[q->nmeta] = k;
			q->meta_value[q->nmeta++] = v;
		}
	} else {
		snprintf(q->bad, sizeof q->bad, "unknown query parameter '%.64s' (known: status, "
			 "template, metadata.KEY, limit, cursor)", key);
	}
	return q->bad[0] ? MHD_NO : MHD_YES;
}

struct found {
	struct sbx_row *rows;
	size_t n, cap;
	const struct list_query *q;
};

static bool meta_matches(const struct list_query *q, const char *metadata)
{
	if (q->nmeta == 0)
		return true;
	json_t *m = metadata ? json_loads(metadata, 0, NULL) : NULL;
	bool ok = json_is_object(m);
	for (int i = 0; ok && i < q->nmeta; i++) {
		const char *v = json_string_value(json_object_get(m, q->meta_key[i]));
		ok = v && strcmp(v, q->meta_value[i]) == 0;
	}
	json_decref(m);
	return ok;
}

static int take_row(void *ctx, const struct sbx_row *row)
{
	struct found *f = ctx;
	const struct list_query *q = f->q;
	if ((q->status && strcmp(q->status, sbx_state_name(row->state)) != 0) ||
	    (q->template && strcmp(q->template, row->template) != 0) ||
	    (q->after && (row->created_ms < q->after_created ||
			  (row->created_ms == q->after_created && strcmp(row->id, q->after_id) <= 0))) ||
	    !meta_matches(q, row->metadata))
		return 0;
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 64;
		struct sbx_row *r = realloc(f->rows, cap * sizeof *r);
		if (!r)
			return errf(ENOMEM, "out of memory");
		f->rows = r, f->cap = cap;
	}
	int rc = sbx_row_copy(&f->rows[f->n], row);
	if (rc == 0)
		f->n++;
	return rc;
}

static int oldest_first(const void *a, const void *b)
{
	const struct sbx_row *x = a, *y = b;
	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? -1 : 1;
	return strcmp(x->id, y->id);
}

int h_sandbox_list(struct req *r)
{
	struct list_query q = { .limit = LIST_DEFAULT };
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, take_param, &q);
	if (q.bad[0])
		return reply_error(r, 400, "invalid_request", "%s", q.bad);
	struct found f = { .q = &q };
	int rc = hostif_each(r->api->hostif, r->workspace, take_row, &f);
	json_t *a = rc == 0 ? json_array() : NULL;
	if (a)
		qsort(f.rows, f.n, sizeof *f.rows, oldest_first);
	size_t shown = f.n < (size_t)q.limit ? f.n : (size_t)q.limit;
	for (size_t i = 0; a && i < shown; i++)
		json_array_append_new(a, render_sandbox(&f.rows[i]));
	json_t *next = json_null();
	if (a && shown < f.n) {
		char cur[80];
		snprintf(cur, sizeof cur, "%" PRId64 ".%s", f.rows[shown - 1].created_ms, f.rows[shown - 1].id);
		next = json_string(cur);
	}
	for (size_t i = 0; i < f.n; i++)
		sbx_row_clear(&f.rows[i]);
	free(f.rows);
	if (!a) {
		json_decref(next);
		return reply_error(r, 500, "internal", "listing sandboxes: %s", rc < 0 ? errmsg() : "out of memory");
	}
	return reply_json(r, 200, json_pack("{s:o,s:o}", "sandboxes", a, "next_cursor", next));
}
