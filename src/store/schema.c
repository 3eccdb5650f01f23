/*
 * schema: the SQL schema of kilnd's store, the same text for SQLite and
 * PostgreSQL (TEXT, BIGINT and DOUBLE PRECISION only; no AUTOINCREMENT, no
 * SERIAL: ids are random strings made by kilnd). Times are milliseconds
 * since the Unix epoch. A change that is not a plain addition bumps
 * schema_version and adds a migration in store.c.
 */
#include "store/schema.h"

const int schema_version = 4;

const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS meta (\n"
	"  key TEXT PRIMARY KEY,\n"
	"  value TEXT NOT NULL\n"
	");\n"
	"CREATE TABLE IF NOT EXISTS workspaces (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  name TEXT NOT NULL UNIQUE,\n"
	"  created_ms BIGINT NOT NULL\n"
	");\n"
	"CREATE TABLE IF NOT EXISTS api_keys (\n"
	"  id TEXT PRIMARY KEY,\n"
	"  workspace_id TEXT NOT NULL REFERENCES workspaces(id),\n"
	"  name TEXT NOT NULL,\n"
	"  hash TEXT NOT NULL UNIQUE,\n"	/* hex SHA-256 of the key */
	"  prefix TEXT NOT NULL,\n"		/* first characters, to tell keys apart */
	"  created_ms BIGINT NOT NULL,\n"
	"  revoked_ms BIGINT\n"
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
	"  retention_seconds BIGINT NOT NULL DEFAULT 0\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS sandboxes_by_workspace ON sandboxes (workspace_id, state);\n"
	"CREATE INDEX IF NOT EXISTS sandboxes_by_state ON sandboxes (state);\n"
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
	"  deleted_ms BIGINT\n"
	");\n"
	"CREATE INDEX IF NOT EXISTS snapshots_by_workspace ON snapshots (workspace_id);\n"
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
	"CREATE INDEX IF NOT EXISTS sandboxes_by_created ON sandboxes (workspace_id, created_ms);\n";
