/*
 * volume: the operations on named volumes (docs/api.md "Volumes"), and
 * the `volumes` field of a create: names, sizes and mount paths checked
 * here once, the plan's `volumes`, `volume_mib` and `storage_mib` held
 * here; the host agent makes the files and keeps the one-writer rule.
 */
#include "ops/ops.h"
#include "ops/validate.h"
#include "common/err.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ops_volume_name_ok(const char *s)
{
	size_t n = 0;
	if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
		return false;
	for (; *s; s++, n++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-') || n >= OPS_VOLUME_NAME_MAX)
			return false;
	return true;
}

/* A mount path the guest's shell can take as it is: absolute, not "/",
 * [A-Za-z0-9._/-], no "..", no "//", bounded. */
static int path_check(const char *p, const char *at)
{
	size_t n = strlen(p);
	if (p[0] != '/' || n < 2 || n > OPS_VOLUME_PATH_MAX)
		return errf(EINVAL, "%spath must be an absolute path other than / (at most %d bytes)", at,
			    OPS_VOLUME_PATH_MAX);
	if (strstr(p, "..") || strstr(p, "//"))
		return errf(EINVAL, "%spath '%s' may not contain '..' or '//'", at, p);
	for (const char *s = p; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr("/._-", *s)))
			return errf(EINVAL, "%spath '%.64s': only letters, digits and . _ - / are allowed", at, p);
	return 0;
}

const struct field ops_volume_entry_fields[] = {
	{ .name = "name", .type = FIELD_STRING, .required = true, .max = OPS_VOLUME_NAME_MAX,
	  .description = "The volume's name." },
	{ .name = "path", .type = FIELD_STRING, .required = true, .max = OPS_VOLUME_PATH_MAX,
	  .description = "Where to mount it (absolute)." },
	{ .name = "read_only", .type = FIELD_BOOLEAN, .description = "Mount it read-only (default false)." },
	{ .type = FIELD_END }
};

const struct field ops_volume_create_fields[] = {
	{ .name = "name", .type = FIELD_STRING, .required = true, .max = OPS_VOLUME_NAME_MAX,
	  .description = "a-z, 0-9 and '-', starting with a letter or digit; unique in the workspace." },
	{ .name = "size_mib", .type = FIELD_INTEGER, .required = true, .min = 1, .max = OPS_VOLUME_MIB_MAX,
	  .description = "Its size in MiB." },
	{ .type = FIELD_END }
};

/* One {name, path, read_only} (at: "volumes[I]." or "" for messages),
 * checked without the store. */
static int entry_check(const json_t *v, const char *at)
{
	if (!json_is_object(v))
		return errf(EINVAL, "%s must be an object {name, path, read_only}", *at ? at : "the volume");
	int rc = fields_check(ops_volume_entry_fields, v, NULL);
	if (rc < 0)
		return *at ? errf(-rc, "%.*s: %s", (int)strlen(at) - 1, at, errmsg()) : rc;
	const char *name = field_str(v, "name", ""), *path = field_str(v, "path", "");
	if (!ops_volume_name_ok(name))
		return errf(EINVAL, "%sname '%.64s' is not a volume name", at, name);
	return path_check(path, at);
}

/* Entry v (checked) into out's entry i, its name resolved to the
 * caller's volume. */
static int volume_entry(const struct ops_caller *c, const json_t *v, int i, struct ops_volumes *out)
{
	const char *name = field_str(v, "name", ""), *path = field_str(v, "path", "");
	struct vol_row r;
	int rc = c->store ? store_volume_load(c->store, c->workspace, name, true, &r)
			  : errf(ENOSYS, "volumes need the store");
	if (rc < 0)
		return rc;	/* -ENOENT "volume NAME not found" */
	snprintf(out->id[i], sizeof out->id[i], "%s", r.id);
	snprintf(out->name[i], sizeof out->name[i], "%s", name);
	snprintf(out->path[i], sizeof out->path[i], "%s", path);
	out->v[i] = (struct create_volume){ out->id[i], out->name[i], out->path[i], field_bool(v, "read_only", false) };
	return 0;
}

int ops_volumes_check(const json_t *args)
{
	const json_t *a = json_object_get(args, "volumes");
	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return errf(EINVAL, "'volumes' must be an array, not %s", v_type_name(a));
	if (json_array_size(a) > HOST_VOLUMES_MAX)
		return errf(EINVAL, "'volumes' has %zu entries, at most %d", json_array_size(a), HOST_VOLUMES_MAX);
	size_t i;
	const json_t *v;
	json_array_foreach(a, i, v) {
		char at[32];
		snprintf(at, sizeof at, "volumes[%zu].", i);
		int rc = entry_check(v, at);
		if (rc < 0)
			return rc;
		const char *name = field_str(v, "name", ""), *path = field_str(v, "path", "");
		for (size_t j = 0; j < i; j++) {
			const json_t *w = json_array_get(a, j);
			if (!strcmp(field_str(w, "name", ""), name))
				return errf(EINVAL, "volume '%s' is named twice in 'volumes'", name);
			if (!strcmp(field_str(w, "path", ""), path))
				return errf(EINVAL, "path '%s' is given twice in 'volumes'", path);
		}
	}
	return 0;
}

int ops_volumes_parse(const struct ops_caller *c, const json_t *args, struct ops_volumes *out)
{
	memset(out, 0, sizeof *out);
	int rc = ops_volumes_check(args);
	const json_t *a = json_object_get(args, "volumes");
	if (rc < 0 || !json_is_array(a))
		return rc;
	size_t i;
	const json_t *v;
	json_array_foreach(a, i, v) {
		if ((rc = volume_entry(c, v, (int)i, out)) < 0)
			return rc;
		out->n++;
	}
	return 0;
}

/* refused: -EDQUOT naming the plan's limit (c->quota says which). */
static int refused(const struct ops_caller *c, const struct plan *p, const char *limit, int64_t value)
{
	ops_quota_note(c, p, true);
	if (c->quota) {
		snprintf(c->quota->report.limit, sizeof c->quota->report.limit, "%s", limit);
		c->quota->report.value = value;
	}
	return -EDQUOT;
}

int ops_volume_create(const struct ops_caller *c, const json_t *args, struct vol_row *out)
{
	int rc = ops_fields_check(c, ops_volume_create_fields, args, NULL);
	const char *name = field_str(args, "name", "");
	int64_t size = field_int(args, "size_mib", 0);
	if (rc == 0 && !ops_volume_name_ok(name))
		rc = errf(EINVAL, "'name' must be 1 to %d of a-z, 0-9 and '-', starting with a letter or digit",
			  OPS_VOLUME_NAME_MAX);
	struct plan p;
	rc = rc ?: ops_workspace_plan(c, &p);
	if (rc < 0)
		return rc;
	const struct plan_limits *l = &p.limits;
	if (l->volume_mib && size > l->volume_mib) {
		refused(c, &p, "volume_mib", l->volume_mib);
		return errf(EDQUOT, "a volume of %lld MiB is over plan %s's limit (volume_mib %lld)",
			    (long long)size, p.name, (long long)l->volume_mib);
	}
	if (l->volumes || l->storage_mib) {
		struct ops_kept k;
		if ((rc = ops_kept(c, &k)) < 0)
			return rc;
		if (l->volumes && k.volumes >= l->volumes) {
			refused(c, &p, "volumes", l->volumes);
			return errf(EDQUOT, "this workspace keeps %lld volumes, the most plan %s allows (volumes %lld): "
					    "delete one first", (long long)k.volumes, p.name, (long long)l->volumes);
		}
		/* A volume's size is known before it is made: held to the
		 * cap whole (its file is sparse, but it may fill). */
		if (l->storage_mib && k.stored_bytes + (size << 20) > l->storage_mib << 20) {
			refused(c, &p, "storage_mib", l->storage_mib);
			return errf(EDQUOT, "this workspace's snapshots, hibernated sandboxes and volumes take %lld MiB; "
					    "%lld more is over plan %s's storage_mib %lld: delete something first",
				    (long long)(k.stored_bytes >> 20), (long long)size, p.name,
				    (long long)l->storage_mib);
		}
	}
	return hostif_volume_create(c->hostif, c->workspace, name, size, out);
}

int ops_volume_get(const struct ops_caller *c, const char *id, struct vol_row *out)
{
	if (!v_is_id(id, "vol_") || !c->store)
		return errf(ENOENT, "volume %.64s not found", id);
	return store_volume_load(c->store, c->workspace, id, false, out);
}

static int add_att(void *ctx, const struct vol_att *a)
{
	json_t *j = json_pack("{s:s,s:s,s:b,s:i}", "sandbox_id", a->sandbox, "path", a->path, "read_only",
			      a->read_only, "slot", a->slot);
	return j ? json_array_append_new(ctx, j) : -ENOMEM;
}

/* The volume's JSON, attached_to [] for its attachments to fill. */
static json_t *vol_json(const struct vol_row *r)
{
	return json_pack("{s:s,s:s,s:I,s:I,s:[]}", "id", r->id, "name", r->name, "size_mib",
			 (json_int_t)r->size_mib, "created_ms", (json_int_t)r->created_ms, "attached_to");
}

/* Its host could not say (errmsg() says why): attached_to null. */
static void vol_unknown(json_t *j)
{
	json_object_set_new(j, "attached_to", json_null());
	json_object_set_new(j, "error", json_string(errmsg()));
}

json_t *ops_volume_json(const struct ops_caller *c, const struct vol_row *r)
{
	/* Which sandboxes have it is its host's to say (in a cluster, a
	 * call to that host): when it cannot, the volume is still shown,
	 * with attached_to null and why. */
	json_t *j = vol_json(r), *att = json_object_get(j, "attached_to");
	int rc = j ? hostif_volume_get(c->hostif, r->workspace, r->id, NULL, add_att, att) : -ENOMEM;
	if (rc == -ENOMEM) {
		json_decref(j);
		return NULL;
	}
	if (rc < 0)
		vol_unknown(j);
	return j;
}

/* The rows first, then their attachments: a store query may not run
 * inside another's row callback (one connection). */
struct list {
	struct vol_row *r;
	size_t n, cap;
};

static int add_vol(void *ctx, const struct vol_row *r)
{
	struct list *l = ctx;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct vol_row *nr = realloc(l->r, cap * sizeof *nr);
		if (!nr)
			return errf(ENOMEM, "out of memory");
		l->r = nr;
		l->cap = cap;
	}
	l->r[l->n++] = *r;
	return 0;
}

/* An attachment of the list's volume i, into its JSON (a[i]). */
static int listed_att(void *ctx, size_t i, const struct vol_att *a)
{
	json_t *j = json_array_get(ctx, i), *att = json_object_get(j, "attached_to");
	if (!a)
		vol_unknown(j);
	else if (json_is_array(att))	/* not once its host could not say */
		return add_att(att, a);
	return 0;
}

int ops_volume_list(const struct ops_caller *c, json_t **out)
{
	struct list l = { 0 };
	json_t *a = json_array();
	int rc = !a ? errf(ENOMEM, "out of memory")
	       : c->store ? store_volume_each(c->store, c->workspace, add_vol, &l) : 0;
	for (size_t i = 0; i < l.n && rc == 0; i++) {
		json_t *j = vol_json(&l.r[i]);
		rc = j ? json_array_append_new(a, j) : errf(ENOMEM, "out of memory");
	}
	/* All their attachments in one look (hostif_volume_attachments),
	 * not one look a volume. */
	if (rc == 0 && l.n > 0)
		rc = hostif_volume_attachments(c->hostif, c->workspace, l.r, l.n, listed_att, a);
	if (rc == -ENOMEM)
		rc = errf(ENOMEM, "out of memory");
	free(l.r);
	if (rc < 0) {
		json_decref(a);
		return rc;
	}
	*out = a;
	return 0;
}

int ops_volume_delete(const struct ops_caller *c, const char *id)
{
	if (!v_is_id(id, "vol_"))
		return errf(ENOENT, "volume %.64s not found", id);
	return hostif_volume_delete(c->hostif, c->workspace, id);
}

int ops_volume_attach(const struct ops_caller *c, const char *sandbox, const json_t *args, struct vol_row *out)
{
	struct ops_volumes vs;
	memset(&vs, 0, sizeof vs);
	/* The sandbox first: a request about one that is not the caller's
	 * is 404 whatever its body. */
	if (!v_is_id(sandbox, "sbx_"))
		return errf(ENOENT, "sandbox %.64s not found", sandbox);
	int rc = hostif_get(c->hostif, c->workspace, sandbox, false, NULL);
	rc = rc ?: entry_check(args, "");
	rc = rc ?: volume_entry(c, args, 0, &vs);
	rc = rc ?: hostif_volume_attach(c->hostif, c->workspace, sandbox, &vs.v[0]);
	return rc ?: store_volume_load(c->store, c->workspace, vs.id[0], false, out);
}

int ops_volume_detach(const struct ops_caller *c, const char *sandbox, const char *volume, bool force)
{
	struct vol_row r;
	if (!v_is_id(sandbox, "sbx_"))
		return errf(ENOENT, "sandbox %.64s not found", sandbox);
	bool by_id = v_is_id(volume, "vol_");
	if (!by_id && !ops_volume_name_ok(volume))
		return errf(ENOENT, "volume %.64s not found", volume);
	int rc = c->store ? store_volume_load(c->store, c->workspace, volume, !by_id, &r)
			  : errf(ENOSYS, "volumes need the store");
	return rc ?: hostif_volume_detach(c->hostif, c->workspace, sandbox, r.id, force);
}
