/*
 * cmd_audit: the workspace's audit log (GET /v1/audit): every call of a
 * route that is not a GET by one of its keys, refused ones too, and the
 * operator's changes to it; newest first. The API filters by count only
 * (?limit=), so that is the one option.
 *
 * Unlike other tables, times are printed as they are (UTC, to the second),
 * not "5m ago": an audit log is read to find out exactly when.
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdlib.h>
#include <string.h>

int cmd_audit(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	struct query q = { .len = 0 };
	char lim[24];
	if (o->limit > 0) {
		snprintf(lim, sizeof lim, "%lld", o->limit);
		query_add(&q, "limit", lim);
	}
	char *path = query_path("/v1/audit", &q);
	json_t *r = get_or_print(o, path);
	free(path);
	if (!r)
		return 0;
	struct table t;
	table_init(&t, "TIME KEY METHOD ROUTE TARGET STATUS");
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(r, "entries"), i, e) {
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
	json_decref(r);
	return 0;
}
