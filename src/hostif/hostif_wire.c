/*
 * hostif_wire: hostif's calls as JSON (hostif_wire.h). Decoding trusts
 * nothing: every string is bounded by the field it lands in, a missing or
 * mistyped field reads as its zero, and a record without id, workspace
 * and a known state is refused.
 */
#include "hostif/hostif_wire.h"
#include "store/sbx_state.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIRE_TEXT_MAX (256 * 1024)	/* metadata, env, disks, policy: JSON text */

static void str_to(char *dst, size_t cap, const json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	snprintf(dst, cap, "%s", s && strlen(s) < cap ? s : "");
}

static int64_t int_of(const json_t *j, const char *key)
{
	const json_t *v = json_object_get(j, key);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static double real_of(const json_t *j, const char *key)
{
	const json_t *v = json_object_get(j, key);
	return json_is_number(v) ? json_number_value(v) : 0;
}

static bool bool_of(const json_t *j, const char *key)
{
	return json_is_true(json_object_get(j, key));
}

/* A JSON-text field: NULL when absent; -EPROTO when too long. */
static int text_of(const json_t *j, const char *key, char **out)
{
	const char *s = json_string_value(json_object_get(j, key));
	*out = NULL;
	if (!s)
		return 0;
	if (strlen(s) > WIRE_TEXT_MAX)
		return errf(EPROTO, "field '%s' is longer than %d bytes", key, WIRE_TEXT_MAX);
	return (*out = strdup(s)) ? 0 : errf(ENOMEM, "out of memory");
}

static const char *str_of(const json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

static void set_text(json_t *o, const char *key, const char *s)
{
	if (s)
		json_object_set_new(o, key, json_string(s));
}

json_t *wire_row(const struct sbx_row *r)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:I,s:b,s:b,s:I,s:I,s:I,s:I,s:I,s:f}",
			      "id", r->id, "workspace", r->workspace, "template", r->template, "state",
			      sbx_state_name(r->state), "parent", r->parent, "snapshot", r->snapshot, "vcpus",
			      r->vcpus, "memory_mib", r->memory_mib, "ttl_seconds", (json_int_t)r->ttl_seconds,
			      "ttl_absolute", r->ttl_absolute, "idle_hibernate", r->idle_hibernate,
			      "retention_seconds", (json_int_t)r->retention_seconds, "created_ms",
			      (json_int_t)r->created_ms, "updated_ms", (json_int_t)r->updated_ms, "deleted_ms",
			      (json_int_t)r->deleted_ms, "active_ms", (json_int_t)r->active_ms, "ready_ms",
			      r->ready_ms);
	if (o && r->idle_pause_seconds)
		json_object_set_new(o, "idle_pause_seconds", json_integer(r->idle_pause_seconds));
	if (o && r->disk_mib)
		json_object_set_new(o, "disk_mib", json_integer(r->disk_mib));
	if (o && r->rev)
		json_object_set_new(o, "rev", json_integer(r->rev));
	if (!o)
		return NULL;
	json_t *acc = json_pack("{s:i,s:I,s:f,s:f,s:f,s:f,s:I,s:f,s:f,s:f,s:I,s:I,s:s,s:i,s:s}", "vmm_pid",
				r->vmm_pid, "vmm_start", (json_int_t)r->vmm_start, "cpu_seconds", r->cpu_seconds,
				"cpu_base", r->cpu_base, "mem_mib_seconds", r->mem_mib_seconds, "running_seconds",
				r->running_seconds, "rss_bytes", (json_int_t)r->rss_bytes, "active_cpu_seconds",
				r->active_cpu_seconds, "active_base", r->active_base, "pss_mib_seconds",
				r->pss_mib_seconds, "pss_bytes", (json_int_t)r->pss_bytes, "stored_bytes",
				(json_int_t)r->stored_bytes, "error", r->error,
				"net_slot", r->net_slot, "ended", r->ended);
	if (!acc || json_object_update(o, acc) < 0) {
		json_decref(acc);
		json_decref(o);
		return NULL;
	}
	json_decref(acc);
	set_text(o, "metadata", r->metadata);
	set_text(o, "env", r->env);
	set_text(o, "disks", r->disks);
	set_text(o, "net_policy", r->net_policy);
	return o;
}

int wire_row_parse(const json_t *j, struct sbx_row *r)
{
	memset(r, 0, sizeof *r);
	if (!json_is_object(j))
		return errf(EPROTO, "a sandbox record that is not an object");
	str_to(r->id, sizeof r->id, j, "id");
	str_to(r->workspace, sizeof r->workspace, j, "workspace");
	str_to(r->template, sizeof r->template, j, "template");
	str_to(r->parent, sizeof r->parent, j, "parent");
	str_to(r->snapshot, sizeof r->snapshot, j, "snapshot");
	str_to(r->error, sizeof r->error, j, "error");
	str_to(r->ended, sizeof r->ended, j, "ended");
	if (!r->id[0] || !r->workspace[0])
		return errf(EPROTO, "a sandbox record without id or workspace");
	if (sbx_state_parse(str_of(j, "state"), &r->state) < 0)
		return errf(EPROTO, "a sandbox record: %s", errmsg());
	r->vcpus = (int)int_of(j, "vcpus");
	r->memory_mib = (int)int_of(j, "memory_mib");
	r->ttl_seconds = int_of(j, "ttl_seconds");
	r->ttl_absolute = bool_of(j, "ttl_absolute");
	r->idle_hibernate = bool_of(j, "idle_hibernate");
	r->retention_seconds = int_of(j, "retention_seconds");
	r->idle_pause_seconds = int_of(j, "idle_pause_seconds");
	r->disk_mib = int_of(j, "disk_mib");
	r->rev = int_of(j, "rev");
	if (r->rev < 0)
		return errf(EPROTO, "a sandbox record: field 'rev' is negative");
	r->created_ms = int_of(j, "created_ms");
	r->updated_ms = int_of(j, "updated_ms");
	r->deleted_ms = int_of(j, "deleted_ms");
	r->active_ms = int_of(j, "active_ms");
	r->ready_ms = real_of(j, "ready_ms");
	r->vmm_pid = (int)int_of(j, "vmm_pid");
	r->vmm_start = int_of(j, "vmm_start");
	r->cpu_seconds = real_of(j, "cpu_seconds");
	r->cpu_base = real_of(j, "cpu_base");
	r->mem_mib_seconds = real_of(j, "mem_mib_seconds");
	r->running_seconds = real_of(j, "running_seconds");
	r->rss_bytes = int_of(j, "rss_bytes");
	r->active_cpu_seconds = real_of(j, "active_cpu_seconds");
	r->active_base = real_of(j, "active_base");
	r->pss_mib_seconds = real_of(j, "pss_mib_seconds");
	r->pss_bytes = int_of(j, "pss_bytes");
	r->stored_bytes = int_of(j, "stored_bytes");
	r->net_slot = (int)int_of(j, "net_slot");
	int rc = text_of(j, "metadata", &r->metadata);
	rc = rc ?: text_of(j, "env", &r->env);
	rc = rc ?: text_of(j, "disks", &r->disks);
	rc = rc ?: text_of(j, "net_policy", &r->net_policy);
	if (rc < 0) {
		sbx_row_clear(r);
		memset(r, 0, sizeof *r);
	}
	return rc;
}

json_t *wire_caps(const struct ws_caps *c)
{
	return json_pack("{s:i,s:i,s:I,s:i,s:i}", "running", c->running, "creates", c->creates, "window_ms",
			 (json_int_t)c->window_ms, "vcpus", c->vcpus, "memory_mib", c->memory_mib);
}

int wire_caps_parse(const json_t *j, struct ws_caps *c)
{
	memset(c, 0, sizeof *c);
	if (!json_is_object(j))
		return errf(EPROTO, "caps that are not an object");
	c->running = (int)int_of(j, "running");
	c->creates = (int)int_of(j, "creates");
	c->window_ms = int_of(j, "window_ms");
	c->vcpus = (int)int_of(j, "vcpus");
	c->memory_mib = (int)int_of(j, "memory_mib");
	return 0;
}

json_t *wire_report(const struct ws_caps_report *r)
{
	return json_pack("{s:s,s:I,s:I,s:i,s:I}", "limit", r->limit, "value", (json_int_t)r->value,
			 "retry_after_ms", (json_int_t)r->retry_after_ms, "creates_used", r->creates_used,
			 "reset_ms", (json_int_t)r->reset_ms);
}

void wire_report_parse(const json_t *j, struct ws_caps_report *r)
{
	memset(r, 0, sizeof *r);
	str_to(r->limit, sizeof r->limit, j, "limit");
	r->value = int_of(j, "value");
	r->retry_after_ms = int_of(j, "retry_after_ms");
	r->creates_used = (int)int_of(j, "creates_used");
	r->reset_ms = int_of(j, "reset_ms");
}

json_t *wire_create(const struct create_req *q)
{
	json_t *o = json_pack("{s:s,s:I,s:I,s:b,s:b,s:I}", "workspace", q->workspace, "ttl_seconds",
			      (json_int_t)q->ttl_seconds, "ttl_cap", (json_int_t)q->ttl_cap, "ttl_absolute",
			      q->ttl_absolute, "idle_hibernate", q->idle_hibernate, "retention_seconds",
			      (json_int_t)q->retention_seconds);
	if (!o)
		return NULL;
	if (q->idle_pause_seconds)
		json_object_set_new(o, "idle_pause_seconds", json_integer(q->idle_pause_seconds));
	if (q->disk_mib)
		json_object_set_new(o, "disk_mib", json_integer(q->disk_mib));
	set_text(o, "template", q->template);
	set_text(o, "snapshot", q->snapshot);
	set_text(o, "metadata", q->metadata);
	set_text(o, "env", q->env);
	set_text(o, "net_policy", q->net_policy);
	if (q->caps)
		json_object_set_new(o, "caps", wire_caps(q->caps));
	if (q->nvolumes > 0) {
		json_t *a = json_array();
		for (int i = 0; a && i < q->nvolumes; i++) {
			const struct create_volume *v = &q->volumes[i];
			json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:b}", "id", v->id, "name", v->name, "path",
							   v->path, "read_only", v->read_only));
		}
		if (!a || json_array_size(a) != (size_t)q->nvolumes) {
			json_decref(a);
			json_decref(o);
			return NULL;
		}
		json_object_set_new(o, "volumes", a);
	}
	return o;
}

/* A create's volumes: the host checks each against its own records
 * (host/volume.c); here only their shape. */
static int volumes_parse(const json_t *j, struct create_req *q, struct create_volume *vols)
{
	const json_t *a = json_object_get(j, "volumes");
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > HOST_VOLUMES_MAX)
		return errf(EINVAL, "a create's volumes must be an array of at most %d", HOST_VOLUMES_MAX);
	size_t i;
	const json_t *v;
	json_array_foreach(a, i, v) {
		struct create_volume *c = &vols[i];
		c->id = str_of(v, "id");
		c->name = str_of(v, "name");
		c->path = str_of(v, "path");
		c->read_only = bool_of(v, "read_only");
		if (!c->id || !c->name || !c->path || strlen(c->id) >= ID_MAX || strlen(c->name) >= NAME_MAX_LEN ||
		    strlen(c->path) >= VOL_PATH_MAX)
			return errf(EINVAL, "a create's volumes[%zu] lacks id, name or path, or one is too long", i);
	}
	q->volumes = vols;
	q->nvolumes = (int)json_array_size(a);
	return 0;
}

int wire_create_parse(const json_t *j, struct create_req *q, struct ws_caps *caps,
		      struct ws_caps_report *report, struct create_volume vols[HOST_VOLUMES_MAX])
{
	memset(q, 0, sizeof *q);
	memset(report, 0, sizeof *report);
	if (!json_is_object(j))
		return errf(EINVAL, "a create that is not an object");
	q->workspace = str_of(j, "workspace");
	if (!q->workspace || !q->workspace[0] || strlen(q->workspace) >= ID_MAX)
		return errf(EINVAL, "a create without a workspace");
	q->template = str_of(j, "template");
	q->snapshot = str_of(j, "snapshot");
	if (!q->template == !q->snapshot)
		return errf(EINVAL, "a create names a template or a snapshot, one of them");
	q->metadata = str_of(j, "metadata");
	q->env = str_of(j, "env");
	q->net_policy = str_of(j, "net_policy");
	q->ttl_seconds = int_of(j, "ttl_seconds");
	q->ttl_cap = int_of(j, "ttl_cap");
	q->ttl_absolute = bool_of(j, "ttl_absolute");
	q->idle_hibernate = bool_of(j, "idle_hibernate");
	q->retention_seconds = int_of(j, "retention_seconds");
	q->idle_pause_seconds = int_of(j, "idle_pause_seconds");
	q->disk_mib = int_of(j, "disk_mib");
	if (q->disk_mib < 0 || q->disk_mib > (INT64_MAX >> 20))
		return errf(EINVAL, "a create's disk_mib %lld is out of range", (long long)q->disk_mib);
	int vrc = volumes_parse(j, q, vols);
	if (vrc < 0)
		return vrc;
	const json_t *c = json_object_get(j, "caps");
	if (c) {
		int rc = wire_caps_parse(c, caps);
		if (rc < 0)
			return rc;
		q->caps = caps;
		q->report = report;
	}
	return 0;
}

json_t *wire_error(int rc, const struct ws_caps_report *report)
{
	json_t *o = json_pack("{s:i,s:s}", "errno", -rc, "message", errmsg());
	if (o && rc == -EDQUOT && report)
		json_object_set_new(o, "report", wire_report(report));
	return o;
}

int wire_error_parse(const json_t *j, struct ws_caps_report *report)
{
	int64_t e = int_of(j, "errno");
	const char *m = str_of(j, "message");
	if (report && json_object_get(j, "report"))
		wire_report_parse(json_object_get(j, "report"), report);
	if (e <= 0 || e > 4095)
		return errf(EPROTO, "the host answered an error without errno%s%.200s", m ? ": " : "",
			    m ? m : "");
	return errf((int)e, "%.900s", m ? m : strerror((int)e));
}

json_t *wire_snap(const struct snap_row *r)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:I,s:I,s:I}", "id", r->id, "workspace", r->workspace,
			      "sandbox", r->sandbox, "template", r->template, "vcpus", r->vcpus, "memory_mib",
			      r->memory_mib, "created_ms", (json_int_t)r->created_ms, "deleted_ms",
			      (json_int_t)r->deleted_ms, "stored_bytes", (json_int_t)r->stored_bytes);
	if (o) {
		set_text(o, "disks", r->disks);
		set_text(o, "env", r->env);
	}
	return o;
}

int wire_snap_parse(const json_t *j, struct snap_row *r)
{
	memset(r, 0, sizeof *r);
	if (!json_is_object(j))
		return errf(EPROTO, "a snapshot record that is not an object");
	str_to(r->id, sizeof r->id, j, "id");
	str_to(r->workspace, sizeof r->workspace, j, "workspace");
	str_to(r->sandbox, sizeof r->sandbox, j, "sandbox");
	str_to(r->template, sizeof r->template, j, "template");
	if (!r->id[0] || !r->workspace[0])
		return errf(EPROTO, "a snapshot record without id or workspace");
	r->vcpus = (int)int_of(j, "vcpus");
	r->memory_mib = (int)int_of(j, "memory_mib");
	r->created_ms = int_of(j, "created_ms");
	r->deleted_ms = int_of(j, "deleted_ms");
	/* What the plan's storage_mib counts (ops/keep.c): without it a
	 * replica saved 0 and a cluster's snapshots took no room. */
	r->stored_bytes = int_of(j, "stored_bytes");
	if (r->stored_bytes < 0)
		return errf(EPROTO, "a snapshot record with a negative stored_bytes");
	int rc = text_of(j, "disks", &r->disks);
	rc = rc ?: text_of(j, "env", &r->env);
	if (rc < 0) {
		snap_row_clear(r);
		memset(r, 0, sizeof *r);
	}
	return rc;
}

json_t *wire_usage(const struct usage_hour *u)
{
	return json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}", "workspace", u->workspace, "sandbox", u->sandbox, "hour_ms",
			 (json_int_t)u->hour_ms, "cpu_us", (json_int_t)u->cpu_us, "mem_mib_s",
			 (json_int_t)u->mem_mib_s, "run_ms", (json_int_t)u->run_ms);
}

int wire_usage_parse(const json_t *j, struct usage_hour *u)
{
	memset(u, 0, sizeof *u);
	str_to(u->workspace, sizeof u->workspace, j, "workspace");
	str_to(u->sandbox, sizeof u->sandbox, j, "sandbox");
	if (!u->workspace[0] || !u->sandbox[0])
		return errf(EPROTO, "a usage record without workspace or sandbox");
	u->hour_ms = int_of(j, "hour_ms");
	u->cpu_us = int_of(j, "cpu_us");
	u->mem_mib_s = int_of(j, "mem_mib_s");
	u->run_ms = int_of(j, "run_ms");
	if (u->hour_ms < 0 || u->cpu_us < 0 || u->mem_mib_s < 0 || u->run_ms < 0)
		return errf(EPROTO, "a usage record with a negative count");
	return 0;
}

json_t *wire_notice(const struct notice_row *n)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:I}", "sandbox", n->sandbox, "workspace", n->workspace, "kind",
			 n->kind, "state", n->state, "action", n->action, "due_ms", (json_int_t)n->due_ms);
}

int wire_notice_parse(const json_t *j, struct notice_row *n)
{
	memset(n, 0, sizeof *n);
	str_to(n->sandbox, sizeof n->sandbox, j, "sandbox");
	str_to(n->workspace, sizeof n->workspace, j, "workspace");
	str_to(n->kind, sizeof n->kind, j, "kind");
	str_to(n->state, sizeof n->state, j, "state");
	str_to(n->action, sizeof n->action, j, "action");
	n->due_ms = int_of(j, "due_ms");
	enum sbx_state st;
	if (!n->sandbox[0] || !n->workspace[0])
		return errf(EPROTO, "a notice without sandbox or workspace");
	if (strcmp(n->kind, "ttl_warning"))
		return errf(EPROTO, "a notice of kind '%s' (only ttl_warning)", n->kind);
	if (sbx_state_parse(n->state, &st) < 0 || (strcmp(n->action, "hibernate") && strcmp(n->action, "delete")))
		return errf(EPROTO, "a ttl_warning with state '%s' and action '%s'", n->state, n->action);
	if (n->due_ms <= 0)
		return errf(EPROTO, "a ttl_warning without its due time");
	return 0;
}

json_t *wire_vol(const struct vol_row *r)
{
	return json_pack("{s:s,s:s,s:s,s:I,s:I}", "id", r->id, "workspace", r->workspace, "name", r->name,
			 "size_mib", (json_int_t)r->size_mib, "created_ms", (json_int_t)r->created_ms);
}

int wire_vol_parse(const json_t *j, struct vol_row *r)
{
	memset(r, 0, sizeof *r);
	str_to(r->id, sizeof r->id, j, "id");
	str_to(r->workspace, sizeof r->workspace, j, "workspace");
	str_to(r->name, sizeof r->name, j, "name");
	r->size_mib = int_of(j, "size_mib");
	r->created_ms = int_of(j, "created_ms");
	if (!r->id[0] || !r->workspace[0] || !r->name[0] || r->size_mib <= 0)
		return errf(EPROTO, "a volume record without id, workspace, name or size");
	return 0;
}

json_t *wire_att(const struct vol_att *a)
{
	return json_pack("{s:s,s:s,s:i,s:b,s:s,s:I}", "volume", a->volume, "sandbox", a->sandbox, "slot", a->slot,
			 "read_only", a->read_only, "path", a->path, "created_ms", (json_int_t)a->created_ms);
}

int wire_att_parse(const json_t *j, struct vol_att *a)
{
	memset(a, 0, sizeof *a);
	str_to(a->volume, sizeof a->volume, j, "volume");
	str_to(a->sandbox, sizeof a->sandbox, j, "sandbox");
	str_to(a->path, sizeof a->path, j, "path");
	a->slot = (int)int_of(j, "slot");
	a->read_only = bool_of(j, "read_only");
	a->created_ms = int_of(j, "created_ms");
	if (!a->volume[0] || !a->sandbox[0] || !a->path[0] || a->slot < 0 || a->slot >= HOST_VOLUMES_MAX)
		return errf(EPROTO, "a volume attachment without volume, sandbox, path or a slot in bounds");
	return 0;
}

json_t *wire_template(const struct hostif_template *t)
{
	return json_pack("{s:s,s:s,s:i,s:i,s:I,s:b,s:i,s:I,s:b,s:s,s:i}", "name", t->name, "description",
			 t->description, "vcpus", t->vcpus, "memory_mib", t->memory_mib, "disk_mib",
			 (json_int_t)t->disk_mib, "built", t->built, "version", t->version, "built_ms",
			 (json_int_t)t->built_ms, "snapshot", t->snapshot, "start", t->start, "ready_port",
			 t->ready_port);
}

int wire_template_parse(const json_t *j, struct hostif_template *t)
{
	memset(t, 0, sizeof *t);
	str_to(t->name, sizeof t->name, j, "name");
	if (!t->name[0])
		return errf(EPROTO, "a template without a name");
	str_to(t->description, sizeof t->description, j, "description");
	t->vcpus = (int)int_of(j, "vcpus");
	t->memory_mib = (int)int_of(j, "memory_mib");
	t->disk_mib = int_of(j, "disk_mib");	/* absent from an older agent: 0, not known */
	if (t->disk_mib < 0)
		t->disk_mib = 0;
	t->built = bool_of(j, "built");
	t->version = (int)int_of(j, "version");
	t->built_ms = int_of(j, "built_ms");
	t->snapshot = bool_of(j, "snapshot");
	str_to(t->start, sizeof t->start, j, "start");	/* absent from an older agent: "" */
	t->ready_port = (int)int_of(j, "ready_port");
	return 0;
}

json_t *wire_tbuild_state(const struct tbuild_state *s)
{
	json_t *v = json_array();
	for (int i = 0; v && i < s->nversions; i++)
		json_array_append_new(v, json_integer(s->versions[i]));
	return json_pack("{s:b,s:s,s:s,s:I,s:I,s:o*,s:i,s:I,s:I}", "known", s->known, "status", s->status,
			 "error", s->error, "started_ms", (json_int_t)s->started_ms, "finished_ms",
			 (json_int_t)s->finished_ms, "versions", v, "current", s->current, "built_ms",
			 (json_int_t)s->built_ms, "bytes", (json_int_t)s->bytes);
}

int wire_tbuild_state_parse(const json_t *j, struct tbuild_state *s)
{
	memset(s, 0, sizeof *s);
	if (!json_is_object(j))
		return errf(EPROTO, "a template build's state that is not an object");
	s->known = bool_of(j, "known");
	str_to(s->status, sizeof s->status, j, "status");
	str_to(s->error, sizeof s->error, j, "error");
	s->started_ms = int_of(j, "started_ms");
	s->finished_ms = int_of(j, "finished_ms");
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(j, "versions"), i, e)
		if (s->nversions < (int)(sizeof s->versions / sizeof s->versions[0]))
			s->versions[s->nversions++] = (int)json_integer_value(e);
	s->current = (int)int_of(j, "current");
	s->built_ms = int_of(j, "built_ms");
	s->bytes = int_of(j, "bytes");
	return 0;
}
