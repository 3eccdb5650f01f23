/* Unit tests for the host protocol's records (src/hostif/hostif_wire.c):
 * a snapshot's record as a host sends it to its API replica comes out
 * with every field, the disk space it takes included (the replica saves
 * what it parsed, and the plan's storage_mib counts that: e2e
 * 80-kilnd-plans storage_limit against a cluster found it lost), and a
 * record of the wrong shape is refused. A sandbox's record keeps its
 * revision, which decides whether the replica keeps it
 * (store_sandbox_keep). */
#include "hostif/hostif_wire.h"
#include "store/store.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void snapshot_record_round_trips(void)
{
	struct snap_row in = {
		.id = "snap_abc", .workspace = "ws_1", .sandbox = "sbx_2", .template = "minimal",
		.vcpus = 2, .memory_mib = 512, .created_ms = 1765000000123, .deleted_ms = 0,
		.stored_bytes = 72122368, .disks = "[{\"name\":\"root\"}]", .env = "{\"A\":\"b\"}",
	};
	json_t *j = wire_snap(&in);
	CHECK(j != NULL);
	struct snap_row out;
	CHECK(wire_snap_parse(j, &out) == 0);
	CHECK(!strcmp(out.id, in.id) && !strcmp(out.workspace, in.workspace));
	CHECK(!strcmp(out.sandbox, in.sandbox) && !strcmp(out.template, in.template));
	CHECK(out.vcpus == 2 && out.memory_mib == 512);
	CHECK(out.created_ms == in.created_ms && out.deleted_ms == 0);
	CHECK(out.stored_bytes == 72122368);
	CHECK(out.disks && !strcmp(out.disks, in.disks));
	CHECK(out.env && !strcmp(out.env, in.env));
	snap_row_clear(&out);
	json_decref(j);
}

static void snapshot_record_refused(void)
{
	struct snap_row out;
	json_t *j = json_pack("{s:s,s:s,s:I}", "id", "snap_abc", "workspace", "ws_1", "stored_bytes",
			      (json_int_t)-1);
	CHECK(wire_snap_parse(j, &out) == -EPROTO);
	CHECK(strstr(errmsg(), "stored_bytes") != NULL);
	json_decref(j);
	j = json_pack("{s:s}", "id", "snap_abc");
	CHECK(wire_snap_parse(j, &out) == -EPROTO);
	json_decref(j);
	/* Absent (an older host): none counted, not refused. */
	j = json_pack("{s:s,s:s}", "id", "snap_abc", "workspace", "ws_1");
	CHECK(wire_snap_parse(j, &out) == 0 && out.stored_bytes == 0);
	snap_row_clear(&out);
	json_decref(j);
}

static void sandbox_record_keeps_revision(void)
{
	struct sbx_row in = { .id = "sbx_1", .workspace = "ws_1", .template = "minimal", .state = SBX_RUNNING,
			      .vcpus = 1, .memory_mib = 256, .rev = 41, .disk_mib = 1024 };
	json_t *j = wire_row(&in);
	CHECK(j != NULL);
	struct sbx_row out;
	CHECK(wire_row_parse(j, &out) == 0);
	CHECK(out.rev == 41 && out.state == SBX_RUNNING && out.disk_mib == 1024);
	sbx_row_clear(&out);
	json_object_set_new(j, "rev", json_integer(-1));
	CHECK(wire_row_parse(j, &out) == -EPROTO && strstr(errmsg(), "rev"));
	/* Absent (an older host): revision 0. */
	json_object_del(j, "rev");
	CHECK(wire_row_parse(j, &out) == 0 && out.rev == 0);
	sbx_row_clear(&out);
	json_decref(j);
}

int main(void)
{
	int failures = 0;
	RUN(snapshot_record_round_trips);
	RUN(snapshot_record_refused);
	RUN(sandbox_record_keeps_revision);
	return failures ? 1 : 0;
}
