/*
 * host_int: the agent's internals, shared by host.c (table, capacity,
 * housekeeping), sandbox.c (lifecycle), fork.c (forks and snapshots),
 * layers.c (shared disk layers) and recover.c (restart).
 *
 * Lock order: sb->op, then h->lock, then sb->lock. sb->lock guards the
 * row and the runtime fields; h->lock the list, references and capacity.
 */
#ifndef KILN_HOST_HOST_INT_H
#define KILN_HOST_HOST_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "host/disk.h"
#include "host/host.h"
#include "host/host_config.h"
#include "host/meter.h"

struct templates;

struct sandbox {
	struct sbx_row row;
	pthread_mutex_t lock;
	pthread_mutex_t op;		/* one lifecycle operation at a time */
	int refs;			/* h->lock */
	int active;			/* guest operations in flight */
	int pidfd;			/* the VMM's, or -1 */
	bool expect_exit;		/* an operation is stopping the VMM */
	bool vmm_dead;			/* housekeeping saw it exit */
	bool linked;			/* in h->list (h->lock) */
	bool counts_memory;		/* its memory_mib is in h->mem_mib */
	bool ws_pending;		/* counted in its workspace's tally until linked */
	bool pooled;			/* a pool member (pool.h): no workspace, no record (h->lock) */
	bool has_volumes;		/* volume attachments may be recorded for it (volume.c);
					   clear: none are, and nothing asks the store (sb->lock) */
	int64_t ttl_warned;		/* the due time last warned of (check_ttl), or 0 */
	char dir[VM_DIR_MAX];
	char workdir[256];		/* its template's WorkingDir (exec's default), or "" */
	uid_t jail_uid;			/* its VMM's uid (and gid); 0: none yet */
	int64_t sample_ms;		/* monotonic time of the last sample */
	/* Metered since the last save, by the hour (usage_hours): what
	 * sandbox_save has not yet added to the store. */
	struct meter unsaved;
	/* Where its create's time went (sandbox.c step): "name ms, ..." since
	 * at_ns, for the create's log line; at_ns 0 when no create measures.
	 * Its creating thread's (sb->op). */
	struct {
		int64_t at_ns;
		char text[240];
	} steps;
	struct sandbox *next;
};

struct host {
	const struct host_config *cfg;
	struct store *store;
	struct metrics *metrics;
	struct templates *tpl;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a create slot freed, or stop */
	struct sandbox *list;
	int live;			/* linked sandboxes (max_sandboxes), pool members aside */
	int pooled;			/* linked pool members (pool.h) */
	int64_t mem_mib;		/* memory of running and starting VMs */
	int creating;			/* creates in flight (max_creates) */
	/* Held while a layer is made and recorded, and by the collector, so
	 * a layer is never collected between the two; and while a sandbox's
	 * or snapshot's directory is made (layers_mkdir). */
	pthread_mutex_t layers;
	pthread_t housekeeper;
	bool housekeeping, stop;
	struct netpool *net;		/* NULL: --no-net */
	bool cgroups;			/* cgroup v2 limits for VMMs */
	struct ws_tally *tallies;	/* per workspace, for ws_caps (h->lock) */
	struct pool *pool;		/* NULL: --pool 0 */
	pthread_mutex_t volumes;	/* a volume rule's check and its record (volume.c) */
};

/* host.c */
struct sandbox *sandbox_alloc(struct host *h, const struct sbx_row *row);
void host_link(struct host *h, struct sandbox *sb);
void host_unlink(struct host *h, struct sandbox *sb);
/* Reserve n sandboxes and mem_mib of guest memory (and a create slot
 * with slot), waiting up to create_wait_ms for a slot. -EAGAIN when there
 * is no room. Done gives back what was not used, and the slot. */
int host_admit(struct host *h, int n, int64_t mem_mib, bool slot);
void host_admit_done(struct host *h, int n_unused, int64_t mem_unused, bool slot);
/* host_admit for n sandboxes of workspace ws (each vcpus, mem_each MiB)
 * within its caps as well (NULL: none): -EDQUOT with the report filled
 * when one refuses. What it admits counts in the workspace's tally until
 * linked (set sb->ws_pending); host_ws_unused gives back n never made
 * (host_admit_done is still the caller's, as after host_admit). */
int host_admit_ws(struct host *h, const char *ws, const struct ws_caps *caps,
		  struct ws_caps_report *rep, int n, int vcpus, int64_t mem_each);
void host_ws_unused(struct host *h, const char *ws, int n);
/* ws_caps.c: host_link's part (under h->lock), and the tallies' end. */
void ws_linked(struct host *h, struct sandbox *sb);
void ws_tallies_free(struct host *h);
/* Memory accounting of one sandbox's VM (idempotent both ways). */
void sandbox_mem_hold(struct host *h, struct sandbox *sb);
void sandbox_mem_release(struct host *h, struct sandbox *sb);
/* Persist the row (under sb->lock). */
int sandbox_save(struct host *h, struct sandbox *sb);
/* The one way a sandbox's state changes: checks the move is legal
 * (store/sbx_state.h), then persists the row. -EBUSY, nothing changed,
 * for an illegal move. */
int sandbox_set_state(struct host *h, struct sandbox *sb, enum sbx_state state);
bool sandbox_in(struct sandbox *sb, enum sbx_state state);

/* sandbox.c */
/* Take a final accounting sample of the VMM while it still exists. */
void sandbox_sample(struct host *h, struct sandbox *sb);
/* Adopt a started VMM: pid in the row and vmm.pid, pidfd for housekeeping. */
int sandbox_attach_vmm(struct host *h, struct sandbox *sb, pid_t pid, int64_t start);
/* Kill the VMM (if any), release network, remove the directory. The
 * record is not changed. */
void sandbox_teardown(struct host *h, struct sandbox *sb);
/* A persistent sandbox (idle_hibernate) that fails is kept to be started
 * again (host_wake: a cold boot of its disk): its disk layers and its
 * network slot (its address, its policy) stay until it is deleted. */
bool sandbox_restartable(struct sandbox *sb);
/* sandbox_teardown, but a restartable sandbox keeps its network slot. */
void sandbox_stop(struct host *h, struct sandbox *sb);
/* Wait for the guest agent, resync it, and write its resolv.conf unless
 * t, the template it was spawned from (or NULL), gave it the host's. */
int sandbox_wait_ready(struct host *h, struct sandbox *sb, bool resync, const struct tmpl *t);
/* A control request without arguments to the sandbox's VMM ("pause"). */
int sandbox_ctl_cmd(struct sandbox *sb, const char *cmd, int timeout_ms);
/* Metering from now on (what its VMM used before is nobody's). */
void sandbox_meter_reset(struct sandbox *sb);
/* pool.c's half of a create from template t: directory, network, jail
 * and VMM, up to its agent answering (*g, connected) with its resolver
 * written; no resync, no record (sb is pooled). */
int sandbox_prestart(struct host *h, struct sandbox *sb, struct tmpl *t, struct guest **g);
/* A pool member taken by a create becomes its sandbox: row's workspace,
 * lifecycle, metadata and env (swapped into row: clear it after); id,
 * disk, VMM and network stay. pending: admitted against the workspace's
 * caps (host_admit_ws). Still CREATING: the caller moves it on. */
void sandbox_claim(struct host *h, struct sandbox *sb, struct sbx_row *row, bool pending);
/* The sandbox's disk (its overlay, the top of its chain) in the record,
 * kept as JSON {"top": PATH}; snapshots record theirs the same way. */
int sandbox_top(struct sandbox *sb, char top[PATH_MAX]);
int sandbox_set_top(struct sandbox *sb, const char *top);
int disks_json_top(const char *disks, char top[PATH_MAX]);
char *disks_json(const char *top);
/* disk_grow.c: sb's root disk made bytes large (no smaller than it is)
 * while it runs, its root filesystem grown to it by the guest agent. */
int sandbox_grow_disk(struct host *h, struct sandbox *sb, uint64_t bytes);
/* The VMM's control socket path. */
void sandbox_ctl(struct sandbox *sb, char *out, size_t cap);
/* logs.c: keep the end of a failing sandbox's console (before its
 * directory goes), and drop it with the sandbox. (The last line its VMM
 * wrote to stderr: vmm_last_line, host/vmm.h.) */
void sandbox_log_keep(struct host *h, struct sandbox *sb);
void sandbox_log_drop(struct host *h, struct sandbox *sb);
/* ws_caps.c: a wake's place under its workspace's running cap, as of the
 * caps its last create or fork was admitted with (none known: no cap).
 * 1 reserved (release it once the wake is over), 0 no cap, or -EDQUOT. */
int ws_wake_reserve(struct host *h, const char *ws);
void ws_wake_release(struct host *h, const char *ws);
/* Wake a hibernated sandbox; the caller holds sb->op. */
int wake_locked(struct host *h, struct sandbox *sb);
/* pause.c, with sb->op held: resume a paused sandbox (running: nothing
 * to do); ready_locked wakes a hibernated one or resumes a paused one,
 * for what needs its guest. */
int resume_locked(struct host *h, struct sandbox *sb);
int ready_locked(struct host *h, struct sandbox *sb);
/* host_delete, recording why it ended ("deleted", "ttl"; "failed" if it
 * had failed) for the answers about it afterwards. */
int sandbox_delete_why(struct host *h, struct sandbox *sb, const char *why);
/* Failure of a sandbox under construction: teardown and "deleted". */
void sandbox_abort(struct host *h, struct sandbox *sb, const char *why);
/* A VM that died: teardown and "failed" with why. */
void sandbox_fail(struct host *h, struct sandbox *sb, const char *why);
/* -EBUSY "sandbox X is STATE, not want" (-ENOENT once deleted). */
int sandbox_state_error(struct sandbox *sb, const char *want);
/* Wait for the sandbox's operations to end (pause, hibernate), polling
 * every 20 ms for up to max_ms, while it is in one of `states` (a mask of
 * 1 << SBX_*) with its VMM up: otherwise there is nothing to wait for.
 * The caller holds sb->op, so no operation starts through sandbox_enter
 * meanwhile, and reads the outcome itself under sb->lock. */
void sandbox_drain(struct sandbox *sb, unsigned states, int max_ms);

/* portwake.c: a hibernated sandbox with workspace ports (a database) is
 * woken by a connection to one; arm when it has hibernated, disarm when
 * it runs again or goes (both idempotent, best effort: logged). */
void portwake_arm(struct host *h, struct sandbox *sb);
void portwake_disarm(struct host *h, struct sandbox *sb);

/* volume.c (docs/api.md "Volumes"). Before a create from t is admitted:
 * the template has the slots, and no volume is held against the rules
 * (-EBUSY naming the sandbox that holds it). */
int volumes_check(struct host *h, const struct create_req *req, const struct tmpl *t);
/* After its guest is ready (sb->op held): the rules again and the
 * records as one step, each volume into slot i, mounted in the guest.
 * On failure the caller ends the sandbox (its records go with it). */
int volumes_attach(struct host *h, struct sandbox *sb, const struct create_req *req);
/* Before a delete's teardown: unmount in the guest (best effort) and
 * detach from the VMM (which fdatasyncs). The records go with the state
 * (sandbox_set_state: failed, deleted): volumes_forget. */
void volumes_detach(struct host *h, struct sandbox *sb);
void volumes_forget(struct host *h, struct sandbox *sb);
/* A restart: sb->has_volumes from the store's records (set when they
 * cannot be read: the store is asked as before). */
void volumes_recover(struct host *h, struct sandbox *sb);
/* A wake's descriptors: the sandbox's attached volumes, opened by root. */
struct vol_fds {
	int fd[HOST_VOLUMES_MAX], slot[HOST_VOLUMES_MAX];
	bool ro[HOST_VOLUMES_MAX];
	int n;
};
int volumes_open(struct host *h, struct sandbox *sb, struct vol_fds *out);
void volumes_close(struct vol_fds *v);
/* Forks: -EBUSY if the parent has a read-write volume; the children get
 * its read-only ones (the VMM shares them): recorded here. */
int volumes_fork_check(struct host *h, struct sandbox *parent);
int volumes_fork_record(struct host *h, struct sandbox *parent, struct sandbox *child);
/* -EBUSY: a sandbox with volumes is not snapshotted. */
int volumes_snapshot_check(struct host *h, struct sandbox *sb);

/* layers.c: remove the disk layers and directories nothing uses. */
#define CHAIN_MAX 64
void layers_gc(struct host *h);
/* mkdir of a directory the collector sweeps (DATA/sandboxes/ID of a
 * sandbox already linked, DATA/snapshots/ID), under h->layers: one made
 * while a collection runs would be taken for a deleted one's. exist_ok:
 * EEXIST is no error. */
int layers_mkdir(struct host *h, const char *dir, bool exist_ok);

/* recover.c */
int host_recover(struct host *h);

#include "host/fsutil.h"

#endif
