/*
 * cmd_events: kiln events, the workspace's event stream (GET /v1/events,
 * docs/api.md "Events"): one line a lifecycle, exec or TTL event as it
 * happens (--json: the event's JSON with its id and kind), until the
 * stream ends, ^C, or --limit events.
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct follow {
	const struct opts *o;
	long long left;			/* events still to print; -1: no limit */
};

/* What a line says beside time, type and sandbox: the fields a type adds. */
static void event_detail(json_t *d)
{
	static const char *const keys[] = { "state", "parent_id", "child", "error", "ended", "exec", "cmd",
					    "exit_code", "signal", "duration_ms", "action", "due_at" };
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		json_t *v = json_object_get(d, keys[k]);
		if (!v || json_is_null(v))
			continue;
		if (json_is_string(v)) {
			printf("  %s=%s", keys[k], json_string_value(v));
		} else {
			char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			printf("  %s=%s", keys[k], s ? s : "?");
			free(s);
		}
	}
}

static int on_event(const char *event, const char *data, void *arg)
{
	struct follow *f = arg;
	if (!strcmp(event, "usage") && !f->o->json)
		return 0;	/* samples every few seconds: --json shows them */
	if (!strcmp(event, "resync")) {
		/* The id given is not in the server's window (or is from before
		 * a restart): what happened meanwhile is lost; list again. */
		if (f->o->json)
			printf("{\"event\":\"resync\"}\n");
		else
			fprintf(stderr, "kiln: resync: events after that id are no longer kept; list the "
					"sandboxes again (kiln ls)\n");
	} else {
		json_t *d = json_loads(data, 0, NULL);
		if (!d)
			return 0;
		if (f->o->json) {
			json_object_set_new(d, "event", json_string(event));
			if (sse_event_id()[0])
				json_object_set_new(d, "event_id", json_string(sse_event_id()));
			print_json_line(d);
		} else {
			printf("%s  %s  %-12s %s", str(d, "at"), sse_event_id()[0] ? sse_event_id() : "-",
			       str(d, "type"), str(d, "id"));
			event_detail(d);
			printf("\n");
		}
		json_decref(d);
	}
	fflush(stdout);
	if (f->left > 0 && --f->left == 0)
		return 1;
	return 0;
}

int cmd_events(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 0, 0);
	if (o->sandbox && !is_id(o->sandbox, "sbx_"))
		usage_error(cmd, "--sandbox: '%s' is not a sandbox id (sbx_...)", o->sandbox);
	char header[128] = "Accept: text/event-stream\r\n";
	if (o->last_event_id) {
		/* An id as kilnd writes them (EPOCH-SEQ); nothing that could end the header. */
		const char *v = o->last_event_id;
		if (!v[0] || strlen(v) > 63 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v))
			usage_error(cmd, "--last-event-id: '%s' is not an event id (what kiln events prints, "
					 "as mio2k3x1-42)", v);
		snprintf(header + strlen(header), sizeof header - strlen(header), "Last-Event-ID: %s\r\n", v);
	}
	struct query q = { 0 };
	if (o->sandbox)
		query_add(&q, "sandbox", o->sandbox);
	char *path = query_path("/v1/events", &q);
	struct httpc c;
	get_stream(&c, path, header);
	struct follow f = { o, o->limit > 0 ? o->limit : -1 };
	int rc = sse_read(&c, on_event, &f);
	httpc_close(&c);
	if (rc < 0)
		die("the event stream broke: %s", c.error);
	return 0;
}
