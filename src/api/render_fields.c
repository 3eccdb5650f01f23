/*
 * render_fields: the JSON objects the API answers with (docs/api.md), one
 * field table each (ops/fields.h): every key the renderer writes, its
 * type, whether it is always there (required) and whether it may be null.
 * The MCP tools' outputSchemas are made from these (fields_out_schema),
 * so a tool's result and the REST answer are described once;
 * tests/unit/unit_kilnd_fields.c renders each object and checks its keys
 * against the table, both ways.
 *
 * A key a renderer gains is a line here: until then the schema refuses it.
 */
#include "api/render.h"

#define STR(n) { .name = n, .type = FIELD_STRING, .required = true }
#define STR_NULL(n) { .name = n, .type = FIELD_STRING, .required = true, .nullable = true }
#define INT(n) { .name = n, .type = FIELD_INTEGER, .required = true }
#define INT_NULL(n) { .name = n, .type = FIELD_INTEGER, .required = true, .nullable = true }
#define NUM(n) { .name = n, .type = FIELD_NUMBER, .required = true }
#define BOOL(n) { .name = n, .type = FIELD_BOOLEAN, .required = true }
#define END { .type = FIELD_END }

static const char *const counts_from[] = { "creation", "last_activity", NULL };
static const char *const when_idle[] = { "hibernate", "delete", NULL };

static const struct field ttl_rule[] = {
	{ .name = "counts_from", .type = FIELD_STRING, .required = true, .choices = counts_from },
	{ .name = "when_idle", .type = FIELD_STRING, .required = true, .choices = when_idle },
	INT("hibernated_retention_seconds"), END
};

static const struct field usage[] = {
	NUM("cpu_seconds"), INT("memory_bytes"), NUM("memory_mib_seconds"), NUM("running_seconds"),
	NUM("active_vcpu_seconds"), NUM("overhead_cpu_seconds"), INT("working_set_bytes"),
	NUM("working_set_gib_hours"), INT("stored_bytes"), END
};

/* render_sandbox */
const struct field render_sandbox_fields[] = {
	STR("id"),
	STR("status"),
	STR("template"),
	INT("vcpus"),
	INT("memory_mib"),
	INT_NULL("disk_mib"),
	STR_NULL("created_at"),
	{ .name = "ready_ms", .type = FIELD_NUMBER, .required = true, .nullable = true },
	INT("ttl_seconds"),
	STR_NULL("last_active_at"),
	STR_NULL("expires_at"),
	{ .name = "ttl_rule", .type = FIELD_OBJECT, .required = true, .items = ttl_rule },
	BOOL("persistent"),
	INT("idle_pause_seconds"),
	STR_NULL("parent_id"),
	STR_NULL("from_snapshot"),
	{ .name = "metadata", .type = FIELD_MAP, .required = true },
	{ .name = "usage", .type = FIELD_OBJECT, .required = true, .items = usage },
	/* the egress policy, as PUT .../network takes it (net/netpolicy.h) */
	{ .name = "network", .type = FIELD_OBJECT, .required = true, .nullable = true },
	{ .name = "error", .type = FIELD_STRING, .description = "Why it failed (status failed)." },
	END
};

/* render_snapshot */
const struct field render_snapshot_fields[] = {
	STR("id"), STR("sandbox_id"), STR("template"), INT("vcpus"), INT("memory_mib"), STR_NULL("created_at"),
	INT("stored_bytes"), END
};

/* render_exec_result */
const struct field render_exec_result_fields[] = {
	STR("stdout"), STR("stderr"), INT("exit_code"), INT_NULL("signal"), BOOL("timed_out"), NUM("duration_ms"),
	BOOL("truncated"), END
};

static const struct field attachment[] = {
	STR("sandbox_id"), STR("path"), BOOL("read_only"), INT("slot"), END
};

/* ops_volume_json, created_at for created_ms */
const struct field render_volume_fields[] = {
	STR("id"), STR("name"), INT("size_mib"), STR_NULL("created_at"),
	{ .name = "attached_to", .type = FIELD_OBJECTS, .required = true, .nullable = true, .items = attachment,
	  .description = "null when its host could not say (error says why)." },
	{ .name = "error", .type = FIELD_STRING },
	END
};

static const char *const restarts[] = { "always", "on-failure", "never", NULL };

/* ops_app_json, created_at and updated_at for created_ms and updated_ms */
const struct field render_app_fields[] = {
	STR("id"), STR("name"), STR_NULL("url"), INT("port"), STR_NULL("template"), STR_NULL("from_snapshot"),
	STR_NULL("command"), { .name = "env", .type = FIELD_MAP, .required = true },
	{ .name = "restart", .type = FIELD_STRING, .required = true, .choices = restarts },
	INT("idle_seconds"), STR_NULL("sandbox_id"), STR("status"), INT("version"), INT("vm_restarts"),
	STR_NULL("reason"), STR_NULL("created_at"), STR_NULL("updated_at"), END
};

static const struct field db_event[] = { INT("ts_ms"), STR("kind"), STR("text"), END };

/* ops_db_json, created_at for created_ms */
const struct field render_database_fields[] = {
	STR("id"), STR("name"), STR("status"), STR("sandbox_id"), STR("host"), INT("port"), STR("user"),
	{ .name = "password", .type = FIELD_STRING, .description = "Given by create and reset_password only." },
	STR("database"), STR("url"), STR_NULL("from_backup"), INT("backup_interval_seconds"), INT("backups_kept"),
	INT_NULL("next_backup_ms"), INT("idle_seconds"), BOOL("external_access"), STR_NULL("external_host"),
	INT_NULL("external_port"), STR_NULL("external_url"), STR_NULL("tls_certificate"),
	STR_NULL("tls_certificate_sha256"), INT("vm_restarts"),
	{ .name = "events", .type = FIELD_OBJECTS, .required = true, .items = db_event },
	STR_NULL("created_at"), END
};

static const char *const backup_kinds[] = { "manual", "scheduled", NULL };

/* ops_db_backup_json */
const struct field render_db_backup_fields[] = {
	{ .name = "id", .type = FIELD_STRING, .required = true,
	  .description = "The backup (a snapshot, snap_...): create_database's from_backup." },
	STR("database_id"),
	{ .name = "kind", .type = FIELD_STRING, .required = true, .choices = backup_kinds },
	INT("created_ms"), END
};

/* h_ports.c's port_json */
const struct field render_port_fields[] = {
	INT("port"), BOOL("public"), STR("url"), STR_NULL("host_url"), STR_NULL("created_at"), END
};

static const char *const proc_status[] = { "running", "exited", NULL };

/* h_procs.c's proc_json */
const struct field render_process_fields[] = {
	INT("id"), INT("pid"), STR("command"),
	{ .name = "status", .type = FIELD_STRING, .required = true, .choices = proc_status },
	STR_NULL("started_at"), INT_NULL("exit_code"), INT_NULL("signal"), INT("output_dropped"), END
};

/* proc_output's */
const struct field render_process_output_fields[] = {
	INT("id"), INT("pid"),
	{ .name = "status", .type = FIELD_STRING, .required = true, .choices = proc_status },
	STR("stdout"), STR("stderr"), INT_NULL("exit_code"), INT_NULL("signal"), INT("output_dropped"),
	BOOL("truncated"), END
};

static const char *const tmpl_status[] = { "ready", "not_built", NULL };

/* h_system.c's add_template */
const struct field render_template_fields[] = {
	STR("name"), STR("description"), INT("vcpus"), INT("memory_mib"),
	{ .name = "status", .type = FIELD_STRING, .required = true, .choices = tmpl_status },
	INT_NULL("version"), STR_NULL("built_at"), BOOL("snapshot"), STR_NULL("start"), INT_NULL("ready_port"), INT_NULL("disk_mib"), END
};

/* code.c's execution of a cell (run_code) */
const struct field render_code_execution_fields[] = {
	STR("stdout"), STR("stderr"),
	{ .name = "results", .type = FIELD_OBJECTS, .required = true,
	  .description = "What the cell displayed or evaluated to, one object per result (its MIME types)." },
	{ .name = "error", .type = FIELD_OBJECT, .required = true, .nullable = true,
	  .description = "The exception: name, value, traceback." },
	INT("execution_count"), BOOL("truncated"), NUM("duration_ms"), END
};

/* h_files.c's stat_json(st, "name", ...): a directory's entry */
const struct field render_dir_entry_fields[] = {
	STR("name"), STR("type"), INT("size"), STR("mode"), INT("uid"), INT("gid"), STR_NULL("modified_at"),
	{ .name = "link", .type = FIELD_STRING, .description = "A symlink's target." },
	{ .name = "name_b64", .type = FIELD_STRING, .description = "The name's bytes when they are not UTF-8." },
	END
};
