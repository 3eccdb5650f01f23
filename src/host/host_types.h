/*
 * host_types: the plain data of the host agent's contract, what crosses
 * between the operations above and an agent, in one process (host.h,
 * through hostif_local) or, later, over HTTP to a remote agent: a
 * workspace's caps and what they said, a create request, and a sandbox
 * record's change as the event subscribers hear it. Nothing here points
 * into the agent's memory; a request's pointers are the caller's.
 */
#ifndef KILN_HOST_HOST_TYPES_H
#define KILN_HOST_HOST_TYPES_H

#include <stdbool.h>
#include <stdint.h>

/* A workspace's caps on what it starts, counted exactly by the host (the
 * ops layer's plans set them; 0 is no cap). A refusal is -EDQUOT, with
 * the cap that refused in the report. */
struct ws_caps {
	int running;			/* sandboxes creating or running */
	int creates;			/* sandboxes made (creates, fork children) per window */
	int64_t window_ms;		/* that window, sliding */
	int vcpus, memory_mib;		/* of one sandbox */
};
/* The most creates a workspace's window counts (a creates cap above it
 * is counted as this many at most: a cap that large is no cap). */
#define WS_WINDOW_MAX 4096

struct ws_caps_report {
	char limit[16];			/* -EDQUOT: "running", "creates", "vcpus", "memory_mib",
				   "hibernated", "snapshots"; else "" */
	int64_t value;			/* that cap */
	int64_t retry_after_ms;		/* -EDQUOT, or a cluster's -EAGAIN for a template's copy on
				   its way: when trying again may succeed; 0: unknown */
	int creates_used;		/* in the window, this request's included when admitted */
	int64_t reset_ms;		/* wall ms when the window's oldest create leaves it; 0: none */
};

/* A change of a sandbox's TTL rule (PATCH .../lifecycle): each part is
 * changed only when its set_ flag is. Setting the TTL counts as activity
 * (its idle clock restarts). */
struct lifecycle_change {
	bool set_ttl;
	int64_t ttl_seconds;		/* 0: none */
	bool set_idle;
	bool idle_hibernate;		/* idle: hibernated, not deleted... */
	int64_t retention_seconds;	/* ...and deleted after this much more (0: kept) */
	bool set_pause;
	int64_t idle_pause_seconds;	/* paused after this long idle (0: never) */
};

/* A named volume a create attaches (docs/api.md "Volumes"): the
 * operations layer resolved its name to id; mounted at path in the
 * guest. The i-th goes into the template's volume slot i. */
struct create_volume {
	const char *id, *name, *path;
	bool read_only;
};
/* The most volumes one sandbox has (a template has at most this many
 * slots; today's are built with TEMPLATE_VOLUME_SLOTS). */
#define HOST_VOLUMES_MAX 8

struct create_req {
	const char *workspace;
	const struct ws_caps *caps;	/* NULL: none */
	struct ws_caps_report *report;	/* with caps, or the caller's (may be NULL) */
	const char *template;		/* or NULL with snapshot */
	const char *snapshot;		/* from_snapshot */
	int64_t ttl_seconds;		/* -1: the default */
	int64_t ttl_cap;		/* > 0: the default is at most this */
	bool ttl_absolute, idle_hibernate;	/* the TTL rule (store.h sbx_row) */
	int64_t retention_seconds;
	int64_t idle_pause_seconds;		/* 0: never paused when idle */
	int64_t disk_mib;		/* the root disk's size (no smaller than the template's or
					   snapshot's); 0: theirs */
	const char *metadata, *env;	/* JSON object text, or NULL */
	const char *net_policy;		/* egress policy text (netpolicy.h), or NULL: open */
	int64_t arrival_ns;		/* CLOCK_MONOTONIC, for ready_ms */
	const struct create_volume *volumes;	/* nvolumes of them, or NULL */
	int nvolumes;
};

/* The most children one fork makes. */
#define HOST_FORK_MAX 64

/* A sandbox record was saved (host_events.h): its strings are valid
 * during the callback only. */
struct host_event {
	const char *workspace, *id, *state;
	double cpu_seconds;		/* the sandbox's accounting at this save */
	int64_t rss_bytes;
	/* What the record says besides ("" when it says nothing): */
	const char *parent;		/* forked from */
	const char *error;		/* why it failed */
	const char *ended;		/* deleted: why */
	/* NULL for a record save; "ttl_warning": its TTL rule acts at
	 * due_ms (wall clock) unless it sees activity first, ttl_action
	 * "delete" or "hibernate". */
	const char *kind;
	int64_t due_ms;
	const char *ttl_action;
};
typedef void host_event_fn(void *ctx, const struct host_event *e);

#endif
