/*
 * cmd_net: a sandbox's network: exposed ports (expose, unexpose, ports)
 * and its egress policy (network).
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <stdlib.h>
#include <string.h>

static int port_arg(struct opts *o, int i)
{
	return (int)args_number("PORT", o->pos[i], 1, 65535);
}

/* An answer that has a URL: the URL, or with --json the whole answer. */
static int print_url(json_t *r, const struct opts *o)
{
	if (o->json)
		print_json(r);
	else
		printf("%s\n", str(r, "url"));
	json_decref(r);
	return 0;
}

int cmd_expose(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	char path[160];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/ports", need_id(cmd, o, 0));
	json_t *r = call("POST", path, json_pack("{s:i,s:b}", "port", port_arg(o, 1), "public", o->public));
	return print_url(r, o);
}

int cmd_unexpose(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	char path[160];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/ports/%d", need_id(cmd, o, 0), port_arg(o, 1));
	json_decref(call("DELETE", path, NULL));
	return 0;
}

int cmd_ports(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	char path[160];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/ports", need_id(cmd, o, 0));
	json_t *r = call("GET", path, NULL);
	if (o->json) {
		print_json(r);
	} else {
		struct table t;
		table_init(&t, "PORT PUBLIC URL");
		size_t k;
		json_t *p;
		json_array_foreach(json_object_get(r, "ports"), k, p) {
			char port[16];
			snprintf(port, sizeof port, "%lld", (long long)json_integer_value(json_object_get(p, "port")));
			table_row(&t, port, json_is_true(json_object_get(p, "public")) ? "yes" : "no", str(p, "url"), NULL);
		}
		table_print(&t, stdout);
	}
	json_decref(r);
	return 0;
}

static void print_list(const char *name, json_t *a)
{
	printf("%-15s", name);
	size_t i;
	json_t *v;
	if (!json_array_size(a))
		printf("-");
	json_array_foreach(a, i, v)
		printf("%s%s", i ? " " : "", json_string_value(v));
	printf("\n");
}

/* network ID: show the policy; with any policy option, replace it (PUT:
 * what is not given takes its default, as the API says). */
int cmd_network(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 1, 1);
	const char *id = need_id(cmd, o, 0);
	char path[160];
	json_t *r;
	if (o->allow_out || o->deny_out || o->no_internet || o->internet) {
		json_t *body = json_object();
		if (o->allow_out)
			json_object_set_new(body, "allow_out", o->allow_out);
		if (o->deny_out)
			json_object_set_new(body, "deny_out", o->deny_out);
		if (o->no_internet || o->internet)
			json_object_set_new(body, "allow_internet", json_boolean(o->internet));
		o->allow_out = o->deny_out = NULL;
		snprintf(path, sizeof path, "/v1/sandboxes/%s/network", id);
		r = call("PUT", path, body);
	} else {
		snprintf(path, sizeof path, "/v1/sandboxes/%s", id);
		r = call("GET", path, NULL);
	}
	json_t *net = json_object_get(r, "network");
	if (o->json) {
		print_json(net);
	} else {
		printf("%-15s%s\n", "internet", json_is_false(json_object_get(net, "allow_internet")) ? "no" : "yes");
		print_list("allow_out", json_object_get(net, "allow_out"));
		print_list("deny_out", json_object_get(net, "deny_out"));
	}
	json_decref(r);
	return 0;
}

/* kiln preview ID PORT [--ttl SECONDS]: a signed link to an exposed port
 * (private ones too) that needs no API key until it expires; kilnd
 * checks the TTL (docs/api.md "Preview links"). */
int cmd_preview(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	char path[160];
	snprintf(path, sizeof path, "/v1/sandboxes/%s/ports/%d/preview", need_id(cmd, o, 0), port_arg(o, 1));
	json_t *body = json_object();
	if (!body)
		die("out of memory");
	if (o->ttl >= 0)
		json_object_set_new(body, "ttl_seconds", json_integer(o->ttl));
	json_t *r = call("POST", path, body);
	return print_url(r, o);
}
