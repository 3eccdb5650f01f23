/*
 * cmd_audit: the workspace's audit log (GET /v1/audit): every call of a
 * route that is not a GET by one of its keys, refused ones too, and the
 * operator's changes to it; newest first.
 *
 *   kiln audit [--limit N] [--key ID|PREFIX] [--cursor C] [--all]
 *
 * One page at a time, as the API gives them: when the page is full, a line
 * on stderr says how to get the next (--cursor). --all follows next_cursor
 * instead, but for PAGES_MAX pages at most: a log kept for months can be
 * long, and a command that seems to hang is worse than one that stops and
 * says where to go on from.
 *
 * Unlike other tables, times are printed as they are (UTC, to the second),
 * not "5m ago": an audit log is read to find out exactly when.
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdlib.h>
#include <string.h>

#define PAGES_MAX 100
#define ALL_PAGE 1000	/* --all's page without --limit: the most the API gives */

/* One page of the entries after cursor (NULL: the newest). */
static json_t *audit_page(const struct opts *o, const char *cursor)
{
	struct query q = { .len = 0 };
	char lim[24];
	long long limit = o->limit > 0 ? o->limit : o->all ? ALL_PAGE : 0;
	if (limit > 0) {
		snprintf(lim, sizeof lim, "%lld", limit);
		query_add(&q, "limit", lim);
	}
	query_add(&q, "key", o->key);
	query_add(&q, "cursor", cursor);
	char *path = query_path("/v1/audit", &q);
	json_t *r = call("GET", path, NULL);
	free(path);
	if (!json_is_array(json_object_get(r, "entries")))
		die("kilnd's audit log answer has no entries");
	return r;
}

/* The first page's answer, with the entries of each page after it added
 * and its next_cursor the last page's: the server's JSON as it is when
 * there is one page. *pages: how many were read. */
static json_t *audit_pages(const struct opts *o, int *pages)
{
	json_t *r = audit_page(o, o->cursor);
	for (*pages = 1; o->all && *pages < PAGES_MAX; ++*pages) {
		const char *next = json_string_value(json_object_get(r, "next_cursor"));
		if (!next)
			break;
		json_t *p = audit_page(o, next);
		json_array_extend(json_object_get(r, "entries"), json_object_get(p, "entries"));
		json_object_set(r, "next_cursor", json_object_get(p, "next_cursor"));
		json_decref(p);
	}
	return r;
}

static void audit_table(json_t *entries)
{
	struct table t;
	table_init(&t, "TIME KEY METHOD ROUTE TARGET STATUS");
	size_t i;
	json_t *e;
	json_array_foreach(entries, i, e) {
		/* "2026-12-01T05:00:00.123Z" without its milliseconds */
		char at[32], status[16];
		snprintf(at, sizeof at, "%s", str(e, "time"));
		if (strlen(at) > 19)
			snprintf(at + 19, sizeof at - 19, "Z");
		snprintf(status, sizeof status, "%lld", (long long)json_integer_value(json_object_get(e, "status")));
		table_row(&t, at, str(e, "key_prefix"), str(e, "method"), str(e, "route"), str(e, "target"),
			  status, NULL);
	}
	table_print(&t, stdout);
}

/* The command that reads on from cursor, as the user would type it. */
static void print_continue(FILE *f, const struct opts *o, const char *cursor)
{
	fprintf(f, "kiln audit%s", o->all ? " --all" : "");
	if (o->limit > 0)
		fprintf(f, " --limit %lld", o->limit);
	if (o->key)
		fprintf(f, " --key %s", o->key);
	fprintf(f, " --cursor %s\n", cursor);
}

int cmd_audit(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	int pages;
	json_t *r = audit_pages(o, &pages);
	if (o->json)
		print_json(r);
	else
		audit_table(json_object_get(r, "entries"));
	fflush(stdout);
	/* A full page has a next_cursor even when nothing is after it: the
	 * API would have to read on to know. */
	const char *next = json_string_value(json_object_get(r, "next_cursor"));
	if (next && o->all) {
		fprintf(stderr, "kiln: stopped after %d pages (%zu entries); the rest: ", pages,
			json_array_size(json_object_get(r, "entries")));
		print_continue(stderr, o, next);
	} else if (next) {
		fputs("more: ", stderr);
		print_continue(stderr, o, next);
	}
	json_decref(r);
	return 0;
}
