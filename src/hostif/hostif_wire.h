/*
 * hostif_wire: the host interface's calls as JSON, for the cluster
 * (docs/cluster.md "Agent protocol"): the API's remote implementation
 * (hostif_remote.c) encodes what the local one takes, the host agent's
 * routes (api/h_host.c) decode it and answer in kind. One file says both
 * directions, so the two ends cannot drift.
 *
 * A failure travels as {"errno": N, "message": "...", "report": {...}}
 * and comes back out as the same -errno with the same errmsg(): what a
 * front end maps to a status is the agent's own error.
 */
#ifndef KILN_HOSTIF_HOSTIF_WIRE_H
#define KILN_HOSTIF_HOSTIF_WIRE_H

#include <jansson.h>

#include "hostif/hostif.h"

/* A sandbox record, whole (every field round-trips). */
json_t *wire_row(const struct sbx_row *r);
/* Into *out (sbx_row_clear it; zeroed on failure): -EPROTO for a record
 * of the wrong shape. */
int wire_row_parse(const json_t *j, struct sbx_row *out);

/* A create: the request, its workspace caps included. */
json_t *wire_create(const struct create_req *req);
/* The strings of a parsed create stay in j: keep j while req is used.
 * caps, report and the volumes point into the storage given. */
int wire_create_parse(const json_t *j, struct create_req *req, struct ws_caps *caps,
		      struct ws_caps_report *report, struct create_volume vols[HOST_VOLUMES_MAX]);

json_t *wire_caps(const struct ws_caps *c);
int wire_caps_parse(const json_t *j, struct ws_caps *c);
json_t *wire_report(const struct ws_caps_report *r);
void wire_report_parse(const json_t *j, struct ws_caps_report *r);

/* The error rc (< 0) with errmsg(), and the report when a cap refused. */
json_t *wire_error(int rc, const struct ws_caps_report *report);
/* The error an answer carries, as -errno with errmsg() set (report, if
 * not NULL, filled from it); -EPROTO if the answer says none. */
int wire_error_parse(const json_t *j, struct ws_caps_report *report);

/* A snapshot's record and an hour of a sandbox's usage, as a host sends
 * them to its API (docs/cluster.md "Records"). */
json_t *wire_snap(const struct snap_row *r);
int wire_snap_parse(const json_t *j, struct snap_row *r);
json_t *wire_usage(const struct usage_hour *u);
int wire_usage_parse(const json_t *j, struct usage_hour *u);
/* A notice (store.h struct notice_row; saved_ms stays the sender's): a
 * TTL warning only, of a known state and action, or -EPROTO. */
json_t *wire_notice(const struct notice_row *n);
int wire_notice_parse(const json_t *j, struct notice_row *n);

/* A volume's record, and an attachment of it (docs/api.md "Volumes"):
 * -EPROTO for one without its ids. */
json_t *wire_vol(const struct vol_row *r);
int wire_vol_parse(const json_t *j, struct vol_row *r);
json_t *wire_att(const struct vol_att *a);
int wire_att_parse(const json_t *j, struct vol_att *a);

json_t *wire_template(const struct hostif_template *t);
int wire_template_parse(const json_t *j, struct hostif_template *t);
/* A template build's state (GET /v1/host/templates/{name}). */
json_t *wire_tbuild_state(const struct tbuild_state *s);
int wire_tbuild_state_parse(const json_t *j, struct tbuild_state *s);

#endif
