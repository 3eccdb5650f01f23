#include "ops/app.h"
#include "ops/database.h"
#include "ops/template.h"
#include "api/render.h"
#include "hostif/hostif.h"
#include "net/netpolicy.h"

#include <nettle/base64.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

json_t *render_time(int64_t ms)
{
	if (ms <= 0)
		return json_null();
	char out[40];
	time_t s = ms / 1000;
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, sizeof out - n, ".%03dZ", (int)(ms % 1000));
	return json_string(out);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	unsigned cp = c & (0xff >> (len + 1));
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

int utf8_valid(const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq(s + i, n - i);
		if (!l)
			return 0;
		i += l;
	}
	return 1;
}

json_t *render_text(const void *p, size_t n)
{
	const unsigned char *s = p;
	if (utf8_valid(s, n))
		return json_stringn((const char *)s, n);
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq(s + i, n - i);
		if (l) {
			memcpy(out + o, s + i, l);
			o += l, i += l;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);	/* U+FFFD */
			o += 3, i++;
		}
	}
	json_t *j = json_stringn(out, o);
	free(out);
	return j;
}

char *base64_of(const void *p, size_t n)
{
	char *out = malloc(BASE64_ENCODE_RAW_LENGTH(n) + 1);
	if (!out)
		return NULL;
	base64_encode_raw(out, n, p);
	out[BASE64_ENCODE_RAW_LENGTH(n)] = 0;
	return out;
}

static json_t *json_or_empty(const char *text)
{
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;
	return j ? j : json_object();
}

json_t *render_sandbox(const struct sbx_row *r)
{
	json_t *j = json_object();
	if (!j)
		return NULL;
	json_object_set_new(j, "id", json_string(r->id));
	json_object_set_new(j, "status", json_string(sbx_state_name(r->state)));
	/* A workspace's own template by the name it gave (ops/template.h). */
	json_object_set_new(j, "template", json_string(ops_template_short(r->template)));
	json_object_set_new(j, "vcpus", json_integer(r->vcpus));
	json_object_set_new(j, "memory_mib", json_integer(r->memory_mib));
	/* 0: made before the store kept it (schema version 12). */
	json_object_set_new(j, "disk_mib", r->disk_mib > 0 ? json_integer(r->disk_mib) : json_null());
	json_object_set_new(j, "created_at", render_time(r->created_ms));
	json_object_set_new(j, "ready_ms", r->ready_ms > 0 ? json_real(r->ready_ms) : json_null());
	json_object_set_new(j, "ttl_seconds", json_integer(r->ttl_seconds));
	json_object_set_new(j, "last_active_at", render_time(r->active_ms));
	/* When the TTL rule acts next (docs/billing.md): deleted, or with
	 * idle_hibernate hibernated, then deleted after the retention. */
	int64_t expires = 0;
	if (r->ttl_seconds > 0 && r->ttl_absolute)
		expires = r->created_ms + r->ttl_seconds * 1000;
	else if (r->ttl_seconds > 0 && !(r->idle_hibernate && r->state == SBX_HIBERNATED))
		expires = r->active_ms + r->ttl_seconds * 1000;
	else if (r->ttl_seconds > 0 && r->retention_seconds > 0)
		expires = r->active_ms + (r->ttl_seconds + r->retention_seconds) * 1000;
	json_object_set_new(j, "expires_at", expires ? render_time(expires) : json_null());
	json_object_set_new(j, "ttl_rule", json_pack("{s:s,s:s,s:I}", "counts_from",
		r->ttl_absolute ? "creation" : "last_activity", "when_idle",
		r->idle_hibernate ? "hibernate" : "delete", "hibernated_retention_seconds",
		(json_int_t)r->retention_seconds));
	/* Persistent: its TTL hibernates it and nothing deletes it but a
	 * request (docs/api.md "Persistent sandboxes"). */
	json_object_set_new(j, "persistent", json_boolean(!r->ttl_absolute && r->idle_hibernate &&
							   r->retention_seconds == 0));
	json_object_set_new(j, "idle_pause_seconds", json_integer(r->idle_pause_seconds));
	json_object_set_new(j, "parent_id", r->parent[0] ? json_string(r->parent) : json_null());
	json_object_set_new(j, "from_snapshot", r->snapshot[0] ? json_string(r->snapshot) : json_null());
	json_object_set_new(j, "metadata", json_or_empty(r->metadata));
	/* cpu_seconds and memory_*: the VMM process (RSS); active_vcpu_seconds
	 * and working_set_*: what is billed (docs/billing.md). */
	double overhead = r->cpu_seconds - r->active_cpu_seconds;
	/* stored_bytes: the disk space it keeps while hibernated (0 running),
	 * held against the plan's storage_mib. */
	json_object_set_new(j, "usage", json_pack("{s:f,s:I,s:f,s:f,s:f,s:f,s:I,s:f,s:I}",
		"cpu_seconds", r->cpu_seconds, "memory_bytes", (json_int_t)r->rss_bytes,
		"memory_mib_seconds", r->mem_mib_seconds, "running_seconds", r->running_seconds,
		"active_vcpu_seconds", r->active_cpu_seconds, "overhead_cpu_seconds",
		overhead > 0 ? overhead : 0, "working_set_bytes", (json_int_t)r->pss_bytes,
		"working_set_gib_hours", r->pss_mib_seconds / 1024 / 3600, "stored_bytes",
		(json_int_t)r->stored_bytes));
	json_object_set_new(j, "network", netpolicy_render(r->net_policy));
	if (r->error[0])
		json_object_set_new(j, "error", json_string(r->error));
	return j;
}

json_t *render_snapshot(const struct snap_row *s)
{
	return json_pack("{s:s,s:s,s:s,s:i,s:i,s:o,s:I}", "id", s->id, "sandbox_id", s->sandbox,
			 "template", ops_template_short(s->template), "vcpus", s->vcpus, "memory_mib", s->memory_mib,
			 "created_at", render_time(s->created_ms), "stored_bytes", (json_int_t)s->stored_bytes);
}

json_t *render_exec_result(const void *out, size_t out_len, const void *err, size_t err_len, int exit_code,
			   int signal, bool timed_out, double duration_ms, bool truncated)
{
	/* json_stringn(NULL, 0) is NULL, and a NULL member is silently
	 * dropped: an empty output must still be "". */
	return json_pack("{s:o,s:o,s:i,s:o,s:b,s:f,s:b}",
			 "stdout", render_text(out ? out : "", out ? out_len : 0),
			 "stderr", render_text(err ? err : "", err ? err_len : 0),
			 "exit_code", exit_code, "signal", signal ? json_integer(signal) : json_null(),
			 "timed_out", timed_out, "duration_ms", duration_ms, "truncated", truncated);
}

json_t *render_chunk(const void *p, size_t n)
{
	if (utf8_valid(p, n))
		return json_pack("{s:o}", "data", json_stringn(p, n));
	char *b64 = base64_of(p, n);
	json_t *j = b64 ? json_pack("{s:s}", "data_b64", b64) : NULL;
	free(b64);
	return j;
}

/* ms in j (an operation's object) as the API's time key: created_ms as
 * created_at. */
static void api_time(json_t *j, const char *ms_key, const char *at_key)
{
	json_object_set_new(j, at_key, render_time(json_integer_value(json_object_get(j, ms_key))));
	json_object_del(j, ms_key);
}

json_t *render_volume(json_t *ops_json)
{
	if (ops_json)
		api_time(ops_json, "created_ms", "created_at");
	return ops_json;
}

json_t *render_app(const struct ops_caller *c, const struct app_row *a, const char *url)
{
	json_t *j = ops_app_json(c, a, url);
	if (j) {
		api_time(j, "created_ms", "created_at");
		api_time(j, "updated_ms", "updated_at");
	}
	return j;
}

json_t *render_database(const struct ops_caller *c, const struct db_row *d, const char *password)
{
	json_t *j = ops_db_json(c, d, password);
	if (j)
		api_time(j, "created_ms", "created_at");
	return j;
}

json_t *render_template(const struct hostif_template *t)
{
	json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:s}", "name", t->name, "description", t->description,
			      "vcpus", t->vcpus, "memory_mib", t->memory_mib,
			      "status", t->built ? "ready" : "not_built");
	if (!j)
		return NULL;
	/* Its root disk: a create's default size and least disk_mib; null
	 * before it is built (or from an agent that does not say). */
	json_object_set_new(j, "disk_mib", t->built && t->disk_mib > 0 ? json_integer(t->disk_mib) : json_null());
	json_object_set_new(j, "version", t->built ? json_integer(t->version) : json_null());
	json_object_set_new(j, "built_at", t->built ? render_time(t->built_ms) : json_null());
	json_object_set_new(j, "snapshot", json_boolean(t->built && t->snapshot));
	/* What runs in its snapshot, so in every sandbox at create. */
	json_object_set_new(j, "start", t->start[0] ? json_string(t->start) : json_null());
	json_object_set_new(j, "ready_port", t->ready_port ? json_integer(t->ready_port) : json_null());
	return j;
}
