/*
 * remote_int: what hostif_remote.c shares with the other files of the
 * remote implementation (remote_tmpl.c): its state and its one call.
 */
#ifndef KILN_HOSTIF_REMOTE_INT_H
#define KILN_HOSTIF_REMOTE_INT_H

#include "hostif/hostif_remote.h"
#include "store/cluster.h"
#include "common/periodic.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define CALL_TIMEOUT_S 30
#define SLOW_TIMEOUT_S 300		/* create, fork, wake, snapshot: boots and restores */

struct remote {
	struct remote_config cfg;
	/* Placements made, and the time they took (the store's transaction
	 * and the choice): /metrics, bench/cluster. */
	int64_t placed, place_ns;
	/* Events: while anyone listens, the records the hosts' heartbeats
	 * brought are looked at every second (events_poll). */
	pthread_mutex_t ev_lock;
	int listeners;
	bool polling;
	struct periodic poller;
	json_t *seen;			/* {id: updated_ms} of the last look */
	/* The running cap each workspace's last create or fork was admitted
	 * with, which its wakes are held to (a wake request carries no plan:
	 * as a host does, ws_caps.c). A small table; the oldest goes. */
	pthread_mutex_t caps_lock;
	struct { char ws[ID_MAX]; int64_t running, seen_ms; } caps[64];
	/* Templates (remote_tmpl.c): the copying to hosts that lack the
	 * newest version, every TSYNC_MS; what it pushed (so a host is not
	 * sent a version twice before its heartbeat says it has it). What
	 * was deleted is in the store (template_deletions), for every
	 * replica. */
	struct periodic tsync;
	bool tsyncing;
	pthread_mutex_t tlock;
	struct { char name[32], host[ID_MAX]; int version; int64_t at_ms; bool failed; } pushed[64];
	/* This replica's random id: the owner of the copies it claims in the
	 * store (template_copies), one replica per version and host. */
	char replica[24];
	int64_t tship_bytes, tship_ns, tships;	/* imports done: /metrics */
};

bool remote_host_down(const struct host_row *h);
/* -EHOSTDOWN naming h and why. */
int remote_down_error(const struct host_row *h);

/* METHOD h's path with body (stolen; NULL: none). 2xx: 0 and *out the
 * answer (NULL if it had none; may be NULL: not wanted). Else the host's
 * error as -errno (report filled if given), or -EHOSTDOWN when the host
 * did not answer. */
int remote_call(struct remote *rm, const struct host_row *h, const char *method, const char *path,
		json_t *body, long timeout_s, json_t **out, struct ws_caps_report *report);

/* What remote_call_file's answer said besides its body. */
struct remote_hdrs {
	char sha256[65];		/* X-Kiln-Sha256 */
	int version;			/* X-Kiln-Version */
	bool running;			/* X-Kiln-Running: 1 */
	uint64_t bytes;			/* the body's, as written to out_fd */
};
/* As remote_call, with the bytes of in_fd (from its start; -1: none) as
 * the body, and a 2xx answer's body written to out_fd (-1: parsed as
 * JSON into *out, as remote_call does); hd (may be NULL) the headers. */
int remote_call_file(struct remote *rm, const struct host_row *h, const char *method, const char *path,
		     int in_fd, int out_fd, long timeout_s, json_t **out, struct remote_hdrs *hd);

/* remote_tmpl.c: the template calls of hostif.h, and the copying. */
int remote_template_build(void *ctx, const struct tbuild_req *req);
int remote_template_state(void *ctx, const char *name, struct tbuild_state *out);
int remote_template_log_open(void *ctx, const char *name, int *fd, bool *running);
int remote_template_delete(void *ctx, const char *name);
int remote_template_export(void *ctx, const char *name, struct hostif_tarchive *out);
int remote_template_import(void *ctx, const char *name, int fd, const char *sha256, int *version, int *had);
int remote_templates(void *ctx, hostif_template_fn *fn, void *fctx);
void remote_tmpl_metrics(struct remote *rm, struct strbuf *b);
int remote_tsync_start(struct remote *rm);
void remote_tsync_stop(struct remote *rm);

#endif
