/*
 * cmd_billing: what the workspace used and what it costs (docs/billing.md):
 * kiln usage (totals, or by hour or day, as a table, CSV or JSON), kiln
 * billing (this month so far) and kiln statements (the monthly statements,
 * or one month's). Money comes from kilnd as integer micro-dollars and is
 * shown as $D.DDDDDD by integer arithmetic, never through a float.
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- kiln usage ------------------------------------------------------------ */

static int usage_totals(struct opts *o)
{
	json_t *r = call("GET", "/v1/usage", NULL);
	if (o->json) {
		print_json(r);
	} else {
		printf("%-22s %.3f\n", "cpu_seconds", json_number_value(json_object_get(r, "cpu_seconds")));
		printf("%-22s %.3f\n", "active_vcpu_seconds",
		       json_number_value(json_object_get(r, "active_vcpu_seconds")));
		printf("%-22s %.6f\n", "memory_gib_hours", json_number_value(json_object_get(r, "memory_gib_hours")));
		printf("%-22s %.6f\n", "working_set_gib_hours",
		       json_number_value(json_object_get(r, "working_set_gib_hours")));
		printf("%-22s %.1f\n", "running_seconds", json_number_value(json_object_get(r, "running_seconds")));
		printf("%-22s %lld (%lld live)\n", "sandboxes",
		       (long long)json_integer_value(json_object_get(r, "sandboxes")),
		       (long long)json_integer_value(json_object_get(r, "live_sandboxes")));
	}
	json_decref(r);
	return 0;
}

/* One bucket (or the total) as a table row; start is its first column. */
static void usage_row(struct table *t, const char *start, json_t *b)
{
	char cpu_s[32], gib_h[32], run_s[32], cpu[32], mem[32], cost[32];
	table_row(t, start, number(b, "active_vcpu_seconds", "%.3f", cpu_s, sizeof cpu_s),
		  number(b, "memory_gib_hours", "%.6f", gib_h, sizeof gib_h),
		  number(b, "running_seconds", "%.1f", run_s, sizeof run_s),
		  dollars(json_object_get(b, "cpu_microdollars"), cpu, sizeof cpu),
		  dollars(json_object_get(b, "memory_microdollars"), mem, sizeof mem),
		  dollars(json_object_get(b, "cost_microdollars"), cost, sizeof cost), NULL);
}

int cmd_usage(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	if (o->by && strcmp(o->by, "hour") && strcmp(o->by, "day"))
		usage_error(cmd, "--by is hour or day, not '%s'", o->by);
	if (o->csv && o->json)
		usage_error(cmd, "--csv and --json exclude each other");
	if (!o->by && !o->from && !o->to && !o->sandbox && !o->csv)
		return usage_totals(o);
	struct query q = { .len = 0 };
	query_add(&q, "granularity", o->by ? o->by : "hour");
	query_add(&q, "from", o->from);
	query_add(&q, "to", o->to);
	query_add(&q, "sandbox", o->sandbox);
	if (o->csv) {
		query_add(&q, "format", "csv");
		char *path = query_path("/v1/usage", &q);
		struct httpc c;
		int rc = httpc_start(&c, &target, "GET", path, NULL, NULL, 0, -1, 0);
		free(path);
		char *text = finish(&c, rc);
		fputs(text ? text : "", stdout);
		free(text);
		return 0;
	}
	char *path = query_path("/v1/usage", &q);
	json_t *r = call("GET", path, NULL);
	free(path);
	if (o->json) {
		print_json(r);
		json_decref(r);
		return 0;
	}
	bool day = !strcmp(str(r, "granularity"), "day");
	struct table t;
	table_init(&t, "START ACTIVE_VCPU_S GIB_HOURS RUNNING_S CPU MEMORY COST");
	size_t i;
	json_t *b;
	json_array_foreach(json_object_get(r, "buckets"), i, b) {
		/* "2026-12-01T05:00:00.000Z": the day, or the day and hour. */
		char start[32];
		snprintf(start, sizeof start, "%s", str(b, "start"));
		if (strlen(start) >= 16) {
			if (day)
				start[10] = '\0';
			else
				snprintf(start + 16, sizeof start - 16, "Z");
		}
		usage_row(&t, start, b);
	}
	usage_row(&t, "total", json_object_get(r, "total"));
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}

/* The prices and the usage lines that billing and a statement share. */
static void print_prices_usage(json_t *p, json_t *u)
{
	char a[32], b[32];
	printf("prices               %s a vCPU-hour, %s a GiB-hour\n",
	       dollars(json_object_get(p, "vcpu_hour_microdollars"), a, sizeof a),
	       dollars(json_object_get(p, "gib_hour_microdollars"), b, sizeof b));
	printf("active vCPU-seconds  %s\n", number(u, "active_vcpu_seconds", "%.3f", a, sizeof a));
	printf("working set GiB-h    %s\n", number(u, "memory_gib_hours", "%.6f", a, sizeof a));
}

/* ---- kiln billing ------------------------------------------------------------ */

int cmd_billing(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	json_t *r = call("GET", "/v1/billing", NULL);
	if (o->json) {
		print_json(r);
		json_decref(r);
		return 0;
	}
	json_t *u = json_object_get(r, "usage"), *p = json_object_get(r, "prices");
	json_t *period = json_object_get(r, "period");
	char a[32], b[32];
	printf("plan                 %s\n", str(r, "plan"));
	printf("period               %s to %s\n", str(period, "from"), str(period, "to"));
	print_prices_usage(p, u);
	printf("cost so far          %s\n", dollars(json_object_get(r, "cost_microdollars"), a, sizeof a));
	printf("projected            %s\n", dollars(json_object_get(r, "projected_microdollars"), a, sizeof a));
	json_t *credit = json_object_get(r, "credit_microdollars");
	if (json_integer_value(credit)) {
		printf("credit               %s (%s left)%s\n", dollars(credit, a, sizeof a),
		       dollars(json_object_get(r, "credit_left_microdollars"), b, sizeof b),
		       json_is_true(json_object_get(r, "credit_exhausted")) ? ", spent: nothing runs until next month" : "");
	} else {
		printf("credit               none\n");
	}
	json_decref(r);
	return 0;
}

/* ---- kiln statements ---------------------------------------------------------- */

/* "2026-11" and nothing else (kilnd checks too; this spares a request). */
static bool is_month(const char *s)
{
	if (strlen(s) != 7 || s[4] != '-')
		return false;
	for (int i = 0; i < 7; i++)
		if (i != 4 && (s[i] < '0' || s[i] > '9'))
			return false;
	int m = (s[5] - '0') * 10 + (s[6] - '0');
	return m >= 1 && m <= 12;
}

static void statement_print(json_t *s)
{
	json_t *u = json_object_get(s, "usage"), *p = json_object_get(s, "prices");
	char a[32], b[32];
	printf("month                %s (%s)\n", str(s, "month"), str(s, "status"));
	printf("plan                 %s\n", str(s, "plan"));
	print_prices_usage(p, u);
	printf("cpu                  %s\n", dollars(json_object_get(s, "cpu_microdollars"), a, sizeof a));
	printf("memory               %s\n", dollars(json_object_get(s, "memory_microdollars"), a, sizeof a));
	printf("cost                 %s\n", dollars(json_object_get(s, "cost_microdollars"), a, sizeof a));
	printf("credit               %s (%s applied)\n", dollars(json_object_get(s, "credit_microdollars"), a, sizeof a),
	       dollars(json_object_get(s, "credit_applied_microdollars"), b, sizeof b));
	printf("amount due           %s\n", dollars(json_object_get(s, "amount_due_microdollars"), a, sizeof a));
	printf("closed               %s\n", json_is_string(json_object_get(s, "closed_at")) ? str(s, "closed_at")
										: "no: so far");
}

int cmd_statements(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 1);
	if (o->npos == 1) {
		if (!is_month(o->pos[0]))
			usage_error(cmd, "'%s' is not a month: YYYY-MM (2026-11)", o->pos[0]);
		char path[64];
		snprintf(path, sizeof path, "/v1/statements/%s", o->pos[0]);
		json_t *r = call("GET", path, NULL);
		if (o->json)
			print_json(r);
		else
			statement_print(r);
		json_decref(r);
		return 0;
	}
	json_t *r = call("GET", "/v1/statements", NULL);
	if (o->json) {
		print_json(r);
		json_decref(r);
		return 0;
	}
	struct table t;
	table_init(&t, "MONTH STATUS PLAN COST CREDIT_APPLIED AMOUNT_DUE");
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(r, "statements"), i, s) {
		char cost[32], credit[32], due[32];
		table_row(&t, str(s, "month"), str(s, "status"), str(s, "plan"),
			  dollars(json_object_get(s, "cost_microdollars"), cost, sizeof cost),
			  dollars(json_object_get(s, "credit_applied_microdollars"), credit, sizeof credit),
			  dollars(json_object_get(s, "amount_due_microdollars"), due, sizeof due), NULL);
	}
	table_print(&t, stdout);
	json_decref(r);
	return 0;
}
