#include "net/netpolicy.h"
#include "common/err.h"
#include "net/net.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A list of CIDRs from key, canonicalized ("10.1.2.3/8" becomes
 * "10.0.0.0/8") into out. */
static int cidr_list(const json_t *body, const char *key, json_t *out, struct net_cidr *parsed,
		     int *n)
{
	json_t *v = json_object_get(body, key);
	*n = 0;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return errf(EINVAL, "'%s' must be an array of CIDRs like \"10.0.0.0/8\"", key);
	if (json_array_size(v) > NET_MAX_CIDRS)
		return errf(EINVAL, "'%s': at most %d CIDRs", key, NET_MAX_CIDRS);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		struct net_cidr c;
		if (!s)
			return errf(EINVAL, "'%s'[%zu] must be a string (a CIDR like \"10.0.0.0/8\")", key, i);
		if (net_parse_cidr(s, &c) < 0) {
			char msg[200];
			snprintf(msg, sizeof msg, "%s", errmsg());
			return errf(EINVAL, "'%s': %s", key, msg);
		}
		char text[24];
		snprintf(text, sizeof text, "%u.%u.%u.%u/%d", c.addr >> 24, (c.addr >> 16) & 255,
			 (c.addr >> 8) & 255, c.addr & 255, c.bits);
		if (json_array_append_new(out, json_string(text)) < 0)
			return errf(ENOMEM, "out of memory");
		if (parsed)
			parsed[*n] = c;
		(*n)++;
	}
	return 0;
}

/* workspace_ports: TCP ports the sandbox's workspace may connect to
 * (net.h); set by kiln's own services (a database), not by a user. */
static int port_list(const json_t *body, json_t *out, struct net_policy *p)
{
	json_t *v = json_object_get(body, "workspace_ports");
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) > NET_WS_PORTS_MAX)
		return errf(EINVAL, "'workspace_ports' must be an array of at most %d TCP ports", NET_WS_PORTS_MAX);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		json_int_t port = json_is_integer(e) ? json_integer_value(e) : 0;
		if (port < 1 || port > 65535)
			return errf(EINVAL, "'workspace_ports'[%zu] must be a TCP port (1 to 65535)", i);
		if (json_array_append_new(out, json_integer(port)) < 0)
			return errf(ENOMEM, "out of memory");
		if (p)
			p->ws_ports[p->nws_ports++] = (int)port;
	}
	return 0;
}

static int build(const json_t *body, json_t **out, struct net_policy *p)
{
	json_t *allow = json_array(), *deny = json_array();
	json_t *ai = json_object_get(body, "allow_internet");
	int rc = allow && deny ? 0 : errf(ENOMEM, "out of memory");
	if (rc == 0 && ai && !json_is_null(ai) && !json_is_boolean(ai))
		rc = errf(EINVAL, "'allow_internet' must be true or false");
	bool internet = !ai || json_is_null(ai) || json_is_true(ai);
	int nallow = 0, ndeny = 0;
	if (rc == 0)
		rc = cidr_list(body, "allow_out", allow, p ? p->allow : NULL, &nallow);
	if (rc == 0)
		rc = cidr_list(body, "deny_out", deny, p ? p->deny : NULL, &ndeny);
	json_t *ports = json_array();
	if (rc == 0)
		rc = ports ? port_list(body, ports, p) : errf(ENOMEM, "out of memory");
	if (rc < 0) {
		json_decref(allow);
		json_decref(deny);
		json_decref(ports);
		return rc;
	}
	if (p) {
		p->allow_internet = internet;
		p->nallow = nallow;
		p->ndeny = ndeny;
	}
	*out = json_pack("{s:b,s:o,s:o}", "allow_internet", internet, "allow_out", allow, "deny_out", deny);
	if (*out && json_array_size(ports))
		json_object_set(*out, "workspace_ports", ports);
	json_decref(ports);
	return *out ? 0 : errf(ENOMEM, "out of memory");
}

int netpolicy_from_request(const json_t *body, char **text)
{
	*text = NULL;
	if (!json_object_get(body, "allow_out") && !json_object_get(body, "deny_out") &&
	    !json_object_get(body, "allow_internet") && !json_object_get(body, "workspace_ports"))
		return 0;
	json_t *j;
	int rc = build(body, &j, NULL);
	if (rc < 0)
		return rc;
	*text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return *text ? 0 : errf(ENOMEM, "out of memory");
}

int netpolicy_parse(const char *text, struct net_policy *out)
{
	memset(out, 0, sizeof *out);
	out->allow_internet = true;
	if (!text)
		return 0;
	json_t *body = json_loads(text, 0, NULL), *j = NULL;
	int rc = body ? build(body, &j, out) : errf(EINVAL, "stored network policy is not JSON");
	json_decref(body);
	json_decref(j);
	return rc;
}

json_t *netpolicy_render(const char *text)
{
	json_t *body = text ? json_loads(text, 0, NULL) : json_object(), *j = NULL;
	if (!body || build(body, &j, NULL) < 0)
		j = NULL;
	json_decref(body);
	return j ? j : json_null();
}
