/*
 * schema: the SQL schema of kilnd's store, the same text for SQLite and
 * PostgreSQL (TEXT, BIGINT and DOUBLE PRECISION only; no AUTOINCREMENT, no
 * SERIAL: ids are random strings made by kilnd). Times are milliseconds
 * since the Unix epoch.
 *
 * schema_sql only creates what is missing (CREATE ... IF NOT EXISTS): it
 * makes a fresh database whole, but adds no column to a table an older
 * kilnd made. So every change to an existing table, even a plain added
 * column, bumps schema_version and adds its step to schema_migrations;
 * store_open runs the steps a database lacks, in one transaction that
 * only one kilnd at a time may run. An index on a new column belongs in
 * its migration too (schema_sql runs before the steps).
 */
#include "store/schema.h"

const int schema_version = 13;

/* The operator's plans (version 11): made by schema_sql and, idempotently,
 * by the migration step that marks the version. */
#define PLANS_TABLE                                 \
	"CREATE TABLE IF NOT EXISTS plans (\n"     \
	"  name TEXT PRIMARY KEY,\n"               \
	"  limits TEXT NOT NULL,\n"                \
	"  updated_ms BIGINT NOT NULL\n"           \
	");\n"

const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS meta (\n"
	"  key TEXT PRIMARY KEY,\n"
	"  value TEXT NOT NULL\n"
	");\n"
	"CREATE TABLE IF NOT EXISTS workspaces (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  name TEXT NOT NULL UNIQUE,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  suspended BIGINT NOT NULL DEFAULT 0,\n"	/* 1: its keys are refused (docs/security.md) */
	"  deleted_ms BIGINT\n"			/* set by the operator: no keys, no sandboxes */
	");\n"
	/* The operator's credentials (/v1/admin/...): secrets like API keys
	 * but of no workspace, kept as the hex SHA-256 of themselves. */
	"CREATE TABLE IF NOT EXISTS operators (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  name TEXT NOT NULL,\n"
	"  hash TEXT NOT NULL UNIQUE,\n"
	"  prefix TEXT NOT NULL,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  revoked_ms BIGINT\n"
	");\n"
	"CREATE TABLE IF NOT EXISTS api_keys (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL REFERENCES workspaces(id),\n"
	"  name TEXT NOT NULL,\n"
	"  hash TEXT NOT NULL UNIQUE,\n"	/* hex SHA-256 of the key */
	"  prefix TEXT NOT NULL,\n"		/* first characters, to tell keys apart */
	"  created_ms BIGINT NOT NULL,\n"
	"  revoked_ms BIGINT,\n"
	"  scope TEXT NOT NULL DEFAULT 'full',\n"	/* full or read */
	"  expires_ms BIGINT,\n"			/* NULL: never */
	"  last_used_ms BIGINT\n"		/* to the minute */
	");\n"
	"CREATE TABLE IF NOT EXISTS sandboxes (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL REFERENCES workspaces(id),\n"
	"  template TEXT NOT NULL,\n"
	"  state TEXT NOT NULL,\n"
	"  parent_id TEXT,\n"
	"  snapshot_id TEXT,\n"
	"  vcpus BIGINT NOT NULL,\n"
	"  memory_mib BIGINT NOT NULL,\n"
	"  ttl_seconds BIGINT NOT NULL,\n"
	"  metadata TEXT,\n"
	"  env TEXT,\n"
	"  disks TEXT,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  updated_ms BIGINT NOT NULL,\n"
	"  deleted_ms BIGINT,\n"
	"  active_ms BIGINT NOT NULL,\n"
	"  ready_ms DOUBLE PRECISION,\n"
	"  vmm_pid BIGINT,\n"
	"  vmm_start BIGINT,\n"
	"  cpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,\n"
	"  cpu_base DOUBLE PRECISION NOT NULL DEFAULT 0,\n"
	"  mem_mib_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,\n"
	"  running_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,\n"
	"  rss_bytes BIGINT NOT NULL DEFAULT 0,\n"
	"  error TEXT,\n"
	"  net_slot BIGINT NOT NULL DEFAULT 0,\n"	/* its network (src/net), 0: none */
	"  net_policy TEXT,\n"			/* egress policy, JSON (docs/network.md) */
	"  ended TEXT,\n"			/* why it ended: deleted, ttl, failed */
	/* Its TTL rule (its plan's, ops/plan.h): counted from creation
	 * rather than from the last activity; hibernated rather than
	 * deleted when idle, then deleted after retention_seconds more. */
	"  ttl_absolute BIGINT NOT NULL DEFAULT 0,\n"
	"  idle_hibernate BIGINT NOT NULL DEFAULT 0,\n"
	"  retention_seconds BIGINT NOT NULL DEFAULT 0,\n"
	/* Metering (docs/billing.md): guest-mode vCPU time, working set. */
	"  active_cpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,\n"
	"  active_base DOUBLE PRECISION NOT NULL DEFAULT 0,\n"
	"  pss_mib_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,\n"
	"  pss_bytes BIGINT NOT NULL DEFAULT 0,\n"
	"  stored_bytes BIGINT NOT NULL DEFAULT 0,\n"
	/* Paused after this many idle seconds (0: never), before its TTL
	 * rule acts (docs/api.md "Persistent sandboxes"). */
	"  idle_pause_seconds BIGINT NOT NULL DEFAULT 0,\n"
	/* The size of its root disk (the template's, or the create's
	 * disk_mib); 0 for a sandbox made before version 12 said it. */
	"  disk_mib BIGINT NOT NULL DEFAULT 0,\n"
	/* The record's revision: its host adds one at every save, and a
	 * save of an older revision than the one kept is dropped (store.h
	 * store_sandbox_save), so a heartbeat's record read before a change
	 * never overwrites the change. */
	"  rev BIGINT NOT NULL DEFAULT 0\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS sandboxes_by_workspace ON sandboxes (workspace_id, state);\n"
	"CREATE INDEX IF NOT EXISTS sandboxes_by_state ON sandboxes (state);\n"
	/* What each sandbox used, by the hour (store.h struct usage_hour):
	 * integers, added to as samples come; the bills are made from it. */
	"CREATE TABLE IF NOT EXISTS usage_hours (\n"
	"  workspace_id TEXT NOT NULL,\n"
	"  sandbox_id TEXT NOT NULL,\n"
	"  hour_ms BIGINT NOT NULL,\n"
	"  cpu_us BIGINT NOT NULL DEFAULT 0,\n"
	"  mem_mib_s BIGINT NOT NULL DEFAULT 0,\n"
	"  run_ms BIGINT NOT NULL DEFAULT 0,\n"
	"  PRIMARY KEY (sandbox_id, hour_ms)\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS usage_hours_by_workspace ON usage_hours (workspace_id, hour_ms);\n"
	/* Notices (store.h struct notice_row): TTL warnings on their way from
	 * a cluster's hosts to its replicas' event streams, kept a day. A new
	 * table, made by schema_sql on any older database: no migration step. */
	"CREATE TABLE IF NOT EXISTS notices (\n"
	"  sandbox_id TEXT NOT NULL,\n"
	"  workspace_id TEXT NOT NULL,\n"
	"  kind TEXT NOT NULL,\n"
	"  state TEXT NOT NULL,\n"
	"  action TEXT NOT NULL,\n"
	"  due_ms BIGINT NOT NULL,\n"
	"  saved_ms BIGINT NOT NULL,\n"
	"  PRIMARY KEY (sandbox_id, kind, due_ms)\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS notices_by_saved ON notices (saved_ms);\n"
	/* Closed months' statements (store.h struct statement_row): written
	 * once when a month is first asked for after it ended, never changed. */
	"CREATE TABLE IF NOT EXISTS statements (\n"
	"  workspace_id TEXT NOT NULL,\n"
	"  month TEXT NOT NULL,\n"		/* 2026-11 */
	"  cpu_us BIGINT NOT NULL,\n"
	"  mem_mib_s BIGINT NOT NULL,\n"
	"  run_ms BIGINT NOT NULL,\n"
	"  vcpu_hour_microdollars BIGINT NOT NULL,\n"
	"  gib_hour_microdollars BIGINT NOT NULL,\n"
	"  cpu_microdollars BIGINT NOT NULL,\n"
	"  memory_microdollars BIGINT NOT NULL,\n"
	"  cost_microdollars BIGINT NOT NULL,\n"
	"  plan TEXT NOT NULL,\n"
	"  credit_microdollars BIGINT NOT NULL,\n"
	"  credit_applied_microdollars BIGINT NOT NULL,\n"
	"  amount_due_microdollars BIGINT NOT NULL,\n"
	"  closed_ms BIGINT NOT NULL,\n"
	"  PRIMARY KEY (workspace_id, month)\n"
	");\n"
	"CREATE TABLE IF NOT EXISTS snapshots (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL REFERENCES workspaces(id),\n"
	"  sandbox_id TEXT NOT NULL,\n"
	"  template TEXT NOT NULL,\n"
	"  vcpus BIGINT NOT NULL,\n"
	"  memory_mib BIGINT NOT NULL,\n"
	"  disks TEXT,\n"
	"  env TEXT,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  deleted_ms BIGINT,\n"
	"  stored_bytes BIGINT NOT NULL DEFAULT 0\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS snapshots_by_workspace ON snapshots (workspace_id);\n"
	/* Named volumes (docs/api.md "Volumes"): a file on the host that made
	 * it, DATA/volumes/<id>.img. A name is unique among a workspace's
	 * live ones; a deleted one's name is free again. */
	"CREATE TABLE IF NOT EXISTS volumes (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL REFERENCES workspaces(id),\n"
	"  name TEXT NOT NULL,\n"
	"  size_mib BIGINT NOT NULL,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  deleted_ms BIGINT\n"
	");\n"
	"CREATE UNIQUE INDEX IF NOT EXISTS volumes_live_name ON volumes (workspace_id, name) "
	"WHERE deleted_ms IS NULL;\n"
	/* Which sandbox has which volume in which slot: a row lives while
	 * the sandbox holds it (running, paused or hibernated), and goes
	 * when it is deleted or fails; the volume stays. */
	"CREATE TABLE IF NOT EXISTS volume_attachments (\n"
	"  volume_id TEXT NOT NULL,\n"
	"  sandbox_id TEXT NOT NULL,\n"
	"  slot BIGINT NOT NULL,\n"
	"  read_only BIGINT NOT NULL,\n"
	"  path TEXT NOT NULL,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  PRIMARY KEY (sandbox_id, slot)\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS volume_attachments_by_volume ON volume_attachments (volume_id);\n"
	/* Guest ports reachable through kilnd's proxy; removed with the
	 * sandbox (unlike its record, nothing needs them afterwards). */
	"CREATE TABLE IF NOT EXISTS ports (\n"
	"  sandbox_id TEXT NOT NULL,\n"
	"  workspace_id TEXT NOT NULL,\n"
	"  port BIGINT NOT NULL,\n"
	"  public BIGINT NOT NULL,\n"		/* 1: no API key needed */
	"  created_ms BIGINT NOT NULL,\n"
	"  PRIMARY KEY (sandbox_id, port)\n"
	");\n"
	/* A workspace's plan (src/ops/plan.h) and its own limits over the
	 * plan's, a JSON object; no row: the server's default plan. */
	"CREATE TABLE IF NOT EXISTS workspace_plans (\n"
	"  workspace_id TEXT PRIMARY KEY REFERENCES workspaces(id),\n"
	"  plan TEXT NOT NULL,\n"
	"  limits TEXT,\n"
	"  updated_ms BIGINT NOT NULL\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS sandboxes_by_created ON sandboxes (workspace_id, created_ms);\n"
	/* The operator's plans (PUT /v1/admin/plans/NAME, ops/plan.h): a
	 * JSON object of limits over the shipped or plans-file plan of that
	 * name, or a plan of its own (its unnamed limits 0). Read at each
	 * use, so that every replica enforces a change at once. */
	PLANS_TABLE
	/* The cluster (docs/cluster.md): tokens an operator makes for hosts
	 * to join with, and the hosts that joined. A secret is kept only as
	 * the hex SHA-256 of itself. uses_left -1: any number of joins. */
	/* Workspaces' templates deleted through a cluster's API (src/hostif/
	 * remote_tmpl.c): the name as the hosts know it and the newest version
	 * any host had then, so that a host that was away and comes back with
	 * that version or an older one has it removed, not copied to the
	 * others; a new build of the name drops the row. A new table, made by
	 * schema_sql on any older database, so no migration step: a replica
	 * of before it copies such a template back as it always did. */
	"CREATE TABLE IF NOT EXISTS template_deletions (\n"
	"  name TEXT PRIMARY KEY,\n"
	"  version BIGINT NOT NULL,\n"
	"  deleted_ms BIGINT NOT NULL\n"
	");\n"
	/* And the highest version of each such name ever deleted, which a
	 * deletion's row above forgets when the name is built again: a new
	 * build's versions start above it, so that an old copy a host comes
	 * back with is never taken for a new version of the same number.
	 * Never dropped (one small row per name). A new table, as above. */
	"CREATE TABLE IF NOT EXISTS template_versions (\n"
	"  name TEXT PRIMARY KEY,\n"
	"  version BIGINT NOT NULL\n"
	");\n"
	/* Which replica copies a template's version to a host (remote_tmpl.c
	 * tsync): one claims it here, the others leave it, so that a version
	 * is sent to a host once, not once per replica. owner is the
	 * replica's random id (a restarted one is another); a claim past
	 * until_ms (the lease its claimer gave, renewed while its copy runs:
	 * hostif/tclaim.h) may be taken over. A new table, as above. */
	"CREATE TABLE IF NOT EXISTS template_copies (\n"
	"  name TEXT NOT NULL,\n"
	"  version BIGINT NOT NULL,\n"
	"  host_id TEXT NOT NULL,\n"
	"  owner TEXT NOT NULL,\n"
	"  until_ms BIGINT NOT NULL,\n"
	"  PRIMARY KEY (name, version, host_id)\n"
	");\n"
	"CREATE TABLE IF NOT EXISTS join_tokens (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  hash TEXT NOT NULL UNIQUE,\n"
	"  prefix TEXT NOT NULL,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  expires_ms BIGINT NOT NULL,\n"
	"  uses_left BIGINT NOT NULL,\n"
	"  revoked_ms BIGINT\n"
	");\n"
	/* admin: active, cordoned (no new sandboxes), draining (cordoned,
	 * and its sandboxes are ending) or revoked (its credential refused);
	 * health: up or down (no heartbeat within the bound), with why. */
	"CREATE TABLE IF NOT EXISTS hosts (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  name TEXT NOT NULL UNIQUE,\n"
	"  credential_hash TEXT NOT NULL UNIQUE,\n"
	"  token_id TEXT NOT NULL,\n"
	"  url TEXT NOT NULL,\n"
	"  admin TEXT NOT NULL,\n"
	"  health TEXT NOT NULL,\n"
	"  reason TEXT,\n"
	"  version TEXT,\n"
	"  vcpus BIGINT NOT NULL DEFAULT 0,\n"
	"  memory_mib BIGINT NOT NULL DEFAULT 0,\n"
	"  disk_mib BIGINT NOT NULL DEFAULT 0,\n"
	"  sandboxes BIGINT NOT NULL DEFAULT 0,\n"
	"  templates TEXT,\n"
	"  joined_ms BIGINT NOT NULL,\n"
	"  heartbeat_ms BIGINT NOT NULL,\n"
	"  revoked_ms BIGINT\n"
	");\n"
	/* The key the API shows a host when it calls it, made at the join
	 * (docs/cluster.md "Trust"); kept whole, as the API must send it. A
	 * table of its own, not a column of hosts: schema_sql makes it on
	 * any database, no migration needed. */
	"CREATE TABLE IF NOT EXISTS host_keys (\n"
	"  host_id TEXT PRIMARY KEY,\n"
	"  api_key TEXT NOT NULL\n"
	");\n"
	/* Where the cluster's sandboxes, snapshots and volumes live
	 * (docs/cluster.md "Placement"): one row per sandbox, snapshot or
	 * volume an API placed on a host, with what it reserved there. A create reserves first (id
	 * "res_..."), then takes the id the host made; ended_ms is set when
	 * the API saw it end, and frees the reservation. */
	"CREATE TABLE IF NOT EXISTS placements (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL,\n"
	"  host_id TEXT NOT NULL,\n"
	"  kind TEXT NOT NULL,\n"
	"  vcpus BIGINT NOT NULL DEFAULT 0,\n"
	"  memory_mib BIGINT NOT NULL DEFAULT 0,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  ended_ms BIGINT\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS placements_by_workspace ON placements (workspace_id, created_ms);\n"
	"CREATE INDEX IF NOT EXISTS placements_by_host ON placements (host_id, ended_ms);\n"
	/* Mutating requests made with keys (docs/security.md), appended
	 * after each is answered; read newest first per workspace. */
	"CREATE TABLE IF NOT EXISTS audit_log (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL,\n"
	"  key_id TEXT NOT NULL,\n"
	"  key_prefix TEXT NOT NULL,\n"
	"  method TEXT NOT NULL,\n"
	"  route TEXT NOT NULL,\n"		/* the route's pattern */
	"  target TEXT,\n"			/* the id the path names, if any */
	"  status BIGINT NOT NULL,\n"
	"  created_ms BIGINT NOT NULL\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS audit_by_workspace ON audit_log (workspace_id, created_ms);\n"
	/* Apps (docs/api.md "Apps", store/store_apps.h): a name is unique
	 * among a workspace's live ones. */
	"CREATE TABLE IF NOT EXISTS apps (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL REFERENCES workspaces(id),\n"
	"  name TEXT NOT NULL,\n"
	"  template TEXT NOT NULL,\n"
	"  snapshot_id TEXT NOT NULL,\n"
	"  source_runs BIGINT NOT NULL,\n"
	"  command TEXT NOT NULL,\n"
	"  env TEXT NOT NULL,\n"
	"  port BIGINT NOT NULL,\n"
	"  restart TEXT NOT NULL,\n"
	"  idle_seconds BIGINT NOT NULL,\n"
	"  sandbox_id TEXT NOT NULL,\n"
	"  retiring_id TEXT NOT NULL,\n"
	"  retire_ms BIGINT NOT NULL,\n"
	"  gen BIGINT NOT NULL,\n"
	"  version BIGINT NOT NULL,\n"
	"  vm_restarts BIGINT NOT NULL,\n"
	"  state TEXT NOT NULL,\n"
	"  reason TEXT NOT NULL,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  updated_ms BIGINT NOT NULL,\n"
	"  deleted_ms BIGINT\n"
	");\n"
	"CREATE UNIQUE INDEX IF NOT EXISTS apps_live_name ON apps (workspace_id, name) "
	"WHERE deleted_ms IS NULL;\n"
	"CREATE INDEX IF NOT EXISTS apps_by_sandbox ON apps (sandbox_id);\n"
	/* An app's lifecycle lines for its logs, numbered per app. */
	"CREATE TABLE IF NOT EXISTS app_events (\n"
	"  app_id TEXT NOT NULL,\n"
	"  seq BIGINT NOT NULL,\n"
	"  ts_ms BIGINT NOT NULL,\n"
	"  text TEXT NOT NULL,\n"
	"  PRIMARY KEY (app_id, seq)\n"
	");\n"
	/* The log lines of an app's earlier sandboxes (store_apps.h
	 * store_app_log_kept): one text per app, bounded by the caller. */
	"CREATE TABLE IF NOT EXISTS app_logs (\n"
	"  app_id TEXT PRIMARY KEY,\n"
	"  text TEXT NOT NULL\n"
	");\n"
	/* Managed databases (docs/databases.md, store/store_databases.h): a
	 * name is unique among a workspace's live ones; their backups are
	 * snapshots, kept past the database. */
	"CREATE TABLE IF NOT EXISTS databases (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL REFERENCES workspaces(id),\n"
	"  name TEXT NOT NULL,\n"
	"  sandbox_id TEXT NOT NULL,\n"
	"  from_backup TEXT NOT NULL,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  deleted_ms BIGINT\n"
	");\n"
	"CREATE UNIQUE INDEX IF NOT EXISTS databases_live_name ON databases (workspace_id, name) "
	"WHERE deleted_ms IS NULL;\n"
	"CREATE TABLE IF NOT EXISTS database_backups (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  database_id TEXT NOT NULL,\n"
	"  workspace_id TEXT NOT NULL,\n"
	"  created_ms BIGINT NOT NULL,\n"
	"  kind TEXT NOT NULL DEFAULT 'manual'\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS database_backups_by_db ON database_backups (workspace_id, database_id);\n"
	/* A database's backup schedule (none: no row): a table of its own,
	 * so no older table changes. */
	"CREATE TABLE IF NOT EXISTS database_schedules (\n"
	"  database_id TEXT PRIMARY KEY,\n"
	"  interval_s BIGINT NOT NULL,\n"
	"  kept BIGINT NOT NULL,\n"
	"  next_ms BIGINT NOT NULL\n"
	");\n"
	/* A database's idle period (store_databases.h store_db_idle): a
	 * table of its own, so no older table changes; none: the default. */
	"CREATE TABLE IF NOT EXISTS database_idle (\n"
	"  database_id TEXT PRIMARY KEY,\n"
	"  idle_seconds BIGINT NOT NULL\n"
	");\n"
	/* A database's external access (store_databases.h
	 * store_db_set_external): the host's TCP port kilnd listens on for
	 * it, one database a port; none: no access from outside. A table of
	 * its own, so no older table changes. */
	"CREATE TABLE IF NOT EXISTS database_external (\n"
	"  database_id TEXT PRIMARY KEY,\n"
	"  port BIGINT NOT NULL UNIQUE\n"
	");\n"
	/* A database's TLS certificate (store_databases.h store_db_tls):
	 * the PEM its server presents, made in its guest with a key that
	 * never leaves it; none: made before TLS. A table of its own, so no
	 * older table changes. */
	"CREATE TABLE IF NOT EXISTS database_tls (\n"
	"  database_id TEXT PRIMARY KEY,\n"
	"  cert TEXT NOT NULL\n"
	");\n"
	/* What happened to a database's VM (its restarts), numbered per
	 * database: a table of its own, so no older table changes. */
	"CREATE TABLE IF NOT EXISTS database_events (\n"
	"  database_id TEXT NOT NULL,\n"
	"  seq BIGINT NOT NULL,\n"
	"  ts_ms BIGINT NOT NULL,\n"
	"  kind TEXT NOT NULL,\n"
	"  text TEXT NOT NULL,\n"
	"  PRIMARY KEY (database_id, seq)\n"
	");\n";

const struct migration schema_migrations[] = {
	/* Version 1 had no network columns. */
	{ 2, "ALTER TABLE sandboxes ADD COLUMN net_slot BIGINT NOT NULL DEFAULT 0;\n"
	     "ALTER TABLE sandboxes ADD COLUMN net_policy TEXT;\n" },
	/* Version 2 did not say why a sandbox ended: rows ended before it
	 * read as "deleted". */
	{ 3, "ALTER TABLE sandboxes ADD COLUMN ended TEXT;\n"
	     "UPDATE sandboxes SET ended = 'deleted' WHERE state = 'deleted';\n" },
	/* Version 3 had one TTL rule, idle time then delete. */
	{ 4, "ALTER TABLE sandboxes ADD COLUMN ttl_absolute BIGINT NOT NULL DEFAULT 0;\n"
	     "ALTER TABLE sandboxes ADD COLUMN idle_hibernate BIGINT NOT NULL DEFAULT 0;\n"
	     "ALTER TABLE sandboxes ADD COLUMN retention_seconds BIGINT NOT NULL DEFAULT 0;\n" },
	/* Version 4's keys could do everything, forever, and said nothing of
	 * their use (the audit log is a new table: schema_sql makes it). */
	{ 5, "ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';\n"
	     "ALTER TABLE api_keys ADD COLUMN expires_ms BIGINT;\n"
	     "ALTER TABLE api_keys ADD COLUMN last_used_ms BIGINT;\n" },
	/* Version 5 metered the VMM's CPU and RSS only (usage_hours is new:
	 * schema_sql makes it). */
	{ 6, "ALTER TABLE sandboxes ADD COLUMN active_cpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0;\n"
	     "ALTER TABLE sandboxes ADD COLUMN active_base DOUBLE PRECISION NOT NULL DEFAULT 0;\n"
	     "ALTER TABLE sandboxes ADD COLUMN pss_mib_seconds DOUBLE PRECISION NOT NULL DEFAULT 0;\n"
	     "ALTER TABLE sandboxes ADD COLUMN pss_bytes BIGINT NOT NULL DEFAULT 0;\n" },
	/* Version 6's workspaces could be neither suspended nor deleted by
	 * an operator (operators is new: schema_sql makes it). */
	{ 7, "ALTER TABLE workspaces ADD COLUMN suspended BIGINT NOT NULL DEFAULT 0;\n"
	     "ALTER TABLE workspaces ADD COLUMN deleted_ms BIGINT;\n" },
	/* Version 7 counted what a workspace keeps, not its bytes. */
	{ 8, "ALTER TABLE sandboxes ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;\n"
	     "ALTER TABLE snapshots ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0;\n" },
	/* Version 8's idle sandboxes were hibernated or deleted, never paused. */
	{ 9, "ALTER TABLE sandboxes ADD COLUMN idle_pause_seconds BIGINT NOT NULL DEFAULT 0;\n" },
	/* Version 9's database backups were all made on demand (kind is
	 * new). The table is made anew rather than altered: a database older
	 * than version 9 had none, and schema_sql, which ran first, made it
	 * with the column already. */
	{ 10, "CREATE TABLE database_backups_v10 (\n"
	      "  id TEXT PRIMARY KEY,\n"
	      "  database_id TEXT NOT NULL,\n"
	      "  workspace_id TEXT NOT NULL,\n"
	      "  created_ms BIGINT NOT NULL,\n"
	      "  kind TEXT NOT NULL DEFAULT 'manual'\n"
	      ");\n"
	      "INSERT INTO database_backups_v10 (id, database_id, workspace_id, created_ms) "
	      "SELECT id, database_id, workspace_id, created_ms FROM database_backups;\n"
	      "DROP TABLE database_backups;\n"
	      "ALTER TABLE database_backups_v10 RENAME TO database_backups;\n"
	      "CREATE INDEX IF NOT EXISTS database_backups_by_db ON database_backups (workspace_id, database_id);\n" },
	/* Version 10 had no operator's plans. The table is new (schema_sql
	 * made it already); the version moves so that an older kilnd, which
	 * would enforce the shipped limits and not the operator's, refuses
	 * this database rather than run beside a newer replica. */
	{ 11, PLANS_TABLE },
	/* Version 11's sandboxes did not say their disk's size. */
	{ 12, "ALTER TABLE sandboxes ADD COLUMN disk_mib BIGINT NOT NULL DEFAULT 0;\n" },
	/* Version 12's records had no revision: a heartbeat's record read
	 * while a sandbox was starting could overwrite its create's. */
	{ 13, "ALTER TABLE sandboxes ADD COLUMN rev BIGINT NOT NULL DEFAULT 0;\n" },
};

const int schema_nmigrations = sizeof schema_migrations / sizeof schema_migrations[0];
