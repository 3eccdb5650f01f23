/*
 * volume: named volumes on this host (docs/api.md "Volumes"). A volume
 * is a raw ext4 image, DATA/volumes/<id>.img, that root makes (sparse,
 * mkfs.ext4) in a directory only root can enter. A sandbox gets it in
 * one of its template's empty volume slots (docs/vmm.md "Volume slots"):
 * root opens the file (never a path a VMM could have written) and hands
 * the VMM the descriptor, then mounts the disk in the guest through the
 * guest agent, finding it by the serial the VMM gives each slot.
 *
 * The rules live here, under h->volumes so a check and its record are
 * one step: one writer at a time (a volume attached read-write is the
 * sandbox's alone; read-only ones share), none deleted while attached,
 * no fork that would make a second writer, no snapshot (its data is not
 * part of one). The attachment records go with their sandbox when it
 * ends (sandbox_set_state), the volume stays.
 *
 * Most sandboxes have no volumes: sb->has_volumes, set before a record
 * of them is written (a create's, a fork's, an attach's) or when a
 * restart finds some, spares them a query of the store at every delete,
 * wake, fork and snapshot.
 */
#include "host/host_int.h"
#include "host/guest_conn.h"
#include "host/proc.h"
#include "host/template.h"
#include "host/vmm.h"
#include "common/err.h"
#include "common/log.h"
#include "common/randid.h"
#include "common/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The guest's wait for a slot to show its new size, and for its mounts. */
#define GUEST_MOUNT_MS 20000

static bool id_ok(const char *id)
{
	if (strncmp(id, "vol_", 4) != 0 || strlen(id) < 5 || strlen(id) > 40)
		return false;
	for (const char *p = id + 4; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

static void vol_path(struct host *h, const char *id, char *out, size_t cap)
{
	snprintf(out, cap, "%s/volumes/%s.img", h->cfg->data_dir, id);
}

/* Root's own descriptor of the volume file: never through a link, only a
 * regular root-owned file with one name (the directory is root's alone:
 * this is a second look, not the only one). */
static int vol_open(struct host *h, const char *id, bool ro)
{
	if (!id_ok(id))
		return errf(EINVAL, "bad volume id '%.64s'", id);
	char path[PATH_MAX];
	vol_path(h, id, path, sizeof path);
	int fd = open(path, (ro ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("volume %s: open %s", id, path);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_nlink != 1) {
		close(fd);
		return errf(EPERM, "volume %s: %s is not a regular root-owned file", id, path);
	}
	return fd;
}

int host_volume_create(struct host *h, const char *ws, const char *name, int64_t size_mib,
		       struct vol_row *out)
{
	struct vol_row r = { 0 };
	if (size_mib < 1 || size_mib > (int64_t)1 << 24)
		return errf(EINVAL, "size_mib %lld is out of bounds", (long long)size_mib);
	if (store_volume_load(h->store, ws, name, true, &r) == 0)
		return errf(EEXIST, "a volume named '%s' exists (%s)", name, r.id);
	int rc = make_id(r.id, "vol_");
	if (rc < 0)
		return rc;
	snprintf(r.workspace, sizeof r.workspace, "%s", ws);
	snprintf(r.name, sizeof r.name, "%s", name);
	r.size_mib = size_mib;
	r.created_ms = wall_ms();
	char dir[PATH_MAX], path[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/volumes", h->cfg->data_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errf_sys("mkdir %s", dir);
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return errf(EPERM, "%s is not kilnd's own directory", dir);
	if ((st.st_mode & 077) && chmod(dir, 0700) < 0)
		return errf_sys("chmod %s", dir);
	vol_path(h, r.id, path, sizeof path);
	/* Sparse: a volume takes what its guest writes, not its size. */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf_sys("create %s", path);
	rc = ftruncate(fd, size_mib << 20) < 0 ? errf_sys("size %s", path) : 0;
	close(fd);
	if (rc == 0) {
		char *argv[] = { "mkfs.ext4", "-F", "-q", "-L", "kiln-volume", path, NULL };
		int st = proc_run(argv, NULL);
		if (st != 0)
			rc = st < 0 ? st : errf(EIO, "mkfs.ext4 %s exited with %d", path, st);
	}
	if (rc == 0)
		rc = store_volume_insert(h->store, &r);
	if (rc < 0) {
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		unlink(path);
		return errf(-rc, "%s", msg);
	}
	log_info("volume %s (%s, %lld MiB) made for workspace %s", r.id, r.name, (long long)size_mib, ws);
	if (out)
		*out = r;
	return 0;
}

/* The first attachment of volume id, other than sandbox self's: *busy
 * gets its sandbox and read_only. */
struct first_att {
	const char *self;
	struct vol_att a;
	bool found;
};

static int first_att(void *ctx, const struct vol_att *a)
{
	struct first_att *f = ctx;
	if (f->self && strcmp(a->sandbox, f->self) == 0)
		return 0;
	/* A writer names itself first: it is what refuses everything. */
	if (!f->found || (a->read_only == false && f->a.read_only)) {
		f->a = *a;
		f->found = true;
	}
	return 0;
}

/* The one-writer rule for volume v (name for messages) wanted by self. */
static int rule_check(struct host *h, const char *id, const char *name, bool ro, const char *self)
{
	struct first_att f = { .self = self };
	int rc = store_volume_attachments(h->store, id, NULL, first_att, &f);
	if (rc < 0 || !f.found)
		return rc;
	if (!f.a.read_only)
		return errf(EBUSY, "volume '%s' is attached read-write to sandbox %s (one writer at a time: "
				   "delete that sandbox first)", name, f.a.sandbox);
	if (!ro)
		return errf(EBUSY, "volume '%s' is attached read-only to sandbox %s: a writer needs it alone "
				   "(attach it read-only, or delete that sandbox first)", name, f.a.sandbox);
	return 0;
}

int volumes_check(struct host *h, const struct create_req *req, const struct tmpl *t)
{
	if (req->nvolumes <= 0)
		return 0;
	if (req->snapshot)
		return errf(EINVAL, "volumes cannot be attached to a sandbox made from a snapshot at its create: "
				   "attach them once it runs (POST /v1/sandboxes/{id}/volumes)");
	if (t->volume_slots <= 0)
		return errf(EBUSY, "template '%s' (version %d) was built without volume slots: rebuild it "
				   "(kilnd template build %s) to attach volumes", t->name, t->version, t->name);
	if (req->nvolumes > t->volume_slots)
		return errf(EINVAL, "template '%s' takes at most %d volumes (%d asked)", t->name,
			    t->volume_slots, req->nvolumes);
	for (int i = 0; i < req->nvolumes; i++) {
		const struct create_volume *v = &req->volumes[i];
		int rc = rule_check(h, v->id, v->name, v->read_only, NULL);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The first KiB or so of a command's output, for a message. */
static int keep_output(void *ctx, const struct guest_ev *ev)
{
	struct strbuf *out = ctx;
	if (out->len < 1024)
		strbuf_append(out, ev->data, ev->len < 1024 ? ev->len : 1024);
	return 0;
}

/* Run script as root in sb's guest, connecting within connect_ms; its
 * output in the error. */
static int guest_sh(struct sandbox *sb, const char *script, int connect_ms, int timeout_ms)
{
	char vsock[PATH_MAX];
	vm_path(vsock, sizeof vsock, sb->dir, "vsock.sock");
	struct guest *g;
	int rc = guest_open(vsock, connect_ms, sb->row.vmm_pid, &g);
	if (rc < 0)
		return rc;
	struct guest_cmd c = { .shell = script, .timeout_ms = (uint32_t)timeout_ms };
	struct strbuf out;
	strbuf_init(&out);
	struct guest_ev ev;
	rc = guest_exec_run(g, &c, keep_output, &out, -1, timeout_ms + 1000, &ev);
	guest_close(g);
	strbuf_putc(&out, 0);
	if (rc == 0 && ev.code != 0)
		rc = errf(EIO, "exited with %d: %.300s", ev.code, out.data ? out.data : "");
	strbuf_free(&out);
	return rc;
}

/* A path the guest's shell takes as it is (ops validated it: absolute,
 * these characters, no ".."); checked again, as it goes into a script. */
static bool path_ok(const char *p)
{
	if (p[0] != '/' || strlen(p) < 2 || strlen(p) >= VOL_PATH_MAX || strstr(p, ".."))
		return false;
	for (; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      strchr("/._-", *p)))
			return false;
	return true;
}

/* The guest's half: for each slot, the virtio-blk disk whose serial is
 * kiln-vol-SLOT (the VMM's GET_ID answer), waited for until its size is
 * not 0 (the attach's config change reaches the driver asynchronously),
 * then mounted. v[i] is in slot[i] (slot NULL: in slot i). */
static int guest_mount(struct host *h, struct sandbox *sb, const struct create_volume *v, const int *slot, int n)
{
	struct strbuf s;
	strbuf_init(&s);
	strbuf_printf(&s, "set -e\n"
			  "dev() { for f in /sys/block/vd*/serial; do [ \"$(cat \"$f\" 2>/dev/null)\" = \"$1\" ] && "
			  "{ echo \"${f%%/serial}\"; return; }; done; true; }\n"
			  "wait_dev() { i=0; while [ $i -lt 400 ]; do d=$(dev \"$1\"); "
			  "[ -n \"$d\" ] && [ \"$(cat \"$d/size\")\" != 0 ] && return 0; i=$((i+1)); sleep 0.05; done; "
			  "echo \"no disk with serial $1 and a size appeared\" >&2; return 1; }\n");
	for (int i = 0; i < n; i++) {
		if (!path_ok(v[i].path)) {
			strbuf_free(&s);
			return errf(EINVAL, "bad mount path '%.64s'", v[i].path);
		}
		strbuf_printf(&s, "wait_dev kiln-vol-%d\nmkdir -p '%s'\nmount -t ext4 -o %s \"/dev/${d##*/}\" '%s'\n",
			      slot ? slot[i] : i, v[i].path, v[i].read_only ? "ro,noload" : "rw", v[i].path);
	}
	strbuf_putc(&s, 0);
	int rc = s.data ? guest_sh(sb, s.data, h->cfg->boot_timeout_ms, GUEST_MOUNT_MS) : errf(ENOMEM, "out of memory");
	strbuf_free(&s);
	return rc;
}

/* A mount the guest's script refused (it exited non-zero: -EIO) is the
 * request's to mend (a path the guest cannot mount at, such as one under
 * /proc): -EINVAL, a 400, not an internal error. */
static int mount_errno(int rc)
{
	return rc == -EIO ? EINVAL : -rc;
}

/* The sandbox may have attachment records: set before one is written,
 * never cleared (an extra query is the price of a mistake, not a volume
 * left held). */
static void mark_volumes(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	sb->has_volumes = true;
	pthread_mutex_unlock(&sb->lock);
}

static bool has_volumes(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	bool yes = sb->has_volumes;
	pthread_mutex_unlock(&sb->lock);
	return yes;
}

/* The VMM's side of slot: the volume's descriptor in (v), or out (v
 * NULL: flushed and closed); the one place that speaks volume_attach and
 * volume_detach. Neither waits on the guest (its mounts are guest_sh's,
 * bounded there). An attach only sets a size and raises an interrupt:
 * 5 s. A detach fdatasyncs the file, which waits on the host's disk for
 * all that the guest's sync just wrote: 10 s, a delete's too (a detach
 * cut short still runs in the VMM, and a live one would then keep the
 * record of a slot the VMM has emptied). */
static int vmm_volume(struct host *h, struct sandbox *sb, int slot, const struct create_volume *v)
{
	char ctl[PATH_MAX];
	sandbox_ctl(sb, ctl, sizeof ctl);
	json_t *reply = NULL, *q;
	int rc;
	if (v) {
		int fd = vol_open(h, v->id, v->read_only);
		if (fd < 0)
			return fd;
		q = json_pack("{s:s,s:i,s:b,s:i}", "cmd", "volume_attach", "slot", slot, "read_only", v->read_only,
			      "fd", 0);
		rc = q ? vmm_ctl_fds(ctl, q, &fd, 1, &reply, 5000) : errf(ENOMEM, "out of memory");
		close(fd);
	} else {
		q = json_pack("{s:s,s:i}", "cmd", "volume_detach", "slot", slot);
		rc = q ? vmm_ctl(ctl, q, &reply, 10000) : errf(ENOMEM, "out of memory");
	}
	json_decref(q);
	json_decref(reply);
	return rc;
}

int volumes_attach(struct host *h, struct sandbox *sb, const struct create_req *req)
{
	if (req->nvolumes <= 0)
		return 0;
	mark_volumes(sb);
	/* The check again, and the records, as one step: two creates that
	 * each passed volumes_check cannot both become writers. */
	pthread_mutex_lock(&h->volumes);
	int rc = 0;
	for (int i = 0; i < req->nvolumes && rc == 0; i++)
		rc = rule_check(h, req->volumes[i].id, req->volumes[i].name, req->volumes[i].read_only,
				sb->row.id);
	for (int i = 0; i < req->nvolumes && rc == 0; i++) {
		struct vol_att a = { .slot = i, .read_only = req->volumes[i].read_only, .created_ms = wall_ms() };
		snprintf(a.volume, sizeof a.volume, "%s", req->volumes[i].id);
		snprintf(a.sandbox, sizeof a.sandbox, "%s", sb->row.id);
		snprintf(a.path, sizeof a.path, "%s", req->volumes[i].path);
		rc = store_volume_attach(h->store, &a);
	}
	pthread_mutex_unlock(&h->volumes);
	for (int i = 0; i < req->nvolumes && rc == 0; i++)
		if ((rc = vmm_volume(h, sb, i, &req->volumes[i])) < 0)
			rc = errf(-rc, "volume '%s': %s", req->volumes[i].name, errmsg());
	if (rc == 0 && (rc = guest_mount(h, sb, req->volumes, NULL, req->nvolumes)) < 0)
		rc = errf(mount_errno(rc), "mounting the volumes in the guest: %s", errmsg());
	/* On failure the caller ends the sandbox, and its records with it. */
	return rc;
}

/* The sandbox's attachments, collected. */
struct att_list {
	struct vol_att a[HOST_VOLUMES_MAX];
	int n;
};

static int att_add(void *ctx, const struct vol_att *a)
{
	struct att_list *l = ctx;
	if (l->n < HOST_VOLUMES_MAX)
		l->a[l->n++] = *a;
	return 0;
}

static int atts_of(struct host *h, const char *sandbox, struct att_list *l)
{
	l->n = 0;
	return store_volume_attachments(h->store, NULL, sandbox, att_add, l);
}

void volumes_detach(struct host *h, struct sandbox *sb)
{
	struct att_list l;
	if (!has_volumes(sb) || atts_of(h, sb->row.id, &l) < 0 || l.n == 0)
		return;
	pid_t pid = sb->row.vmm_pid;
	if (pid <= 0 || sb->vmm_dead)
		return;
	/* The guest's dirty pages first (best effort: it may be hung or
	 * paused), then the VMM's detach, which fdatasyncs the file. */
	if (sandbox_in(sb, SBX_RUNNING)) {
		struct strbuf s;
		strbuf_init(&s);
		strbuf_printf(&s, "sync");
		for (int i = 0; i < l.n; i++)
			if (path_ok(l.a[i].path))
				strbuf_printf(&s, "; umount '%s'", l.a[i].path);
		strbuf_putc(&s, 0);
		/* A hung guest holds a delete up 8 s at most here. */
		if (s.data && guest_sh(sb, s.data, 2000, 5000) < 0)
			log_debug("sandbox %s: unmounting its volumes: %s", sb->row.id, errmsg());
		strbuf_free(&s);
	}
	for (int i = 0; i < l.n; i++)
		if (vmm_volume(h, sb, l.a[i].slot, NULL) < 0)
			log_warn("sandbox %s: detaching volume %s: %s", sb->row.id, l.a[i].volume, errmsg());
}

void volumes_forget(struct host *h, struct sandbox *sb)
{
	if (has_volumes(sb) && store_volume_detach_sandbox(h->store, sb->row.id) < 0)
		log_warn("sandbox %s: removing its volume attachments: %s", sb->row.id, errmsg());
}

void volumes_recover(struct host *h, struct sandbox *sb)
{
	struct att_list l;
	int rc = atts_of(h, sb->row.id, &l);
	if (rc < 0)
		log_warn("sandbox %s: reading its volume attachments: %s", sb->row.id, errmsg());
	if (rc < 0 || l.n > 0)	/* unknown: as if it had some (asked again when needed) */
		mark_volumes(sb);
}

int volumes_open(struct host *h, struct sandbox *sb, struct vol_fds *out)
{
	struct att_list l;
	out->n = 0;
	if (!has_volumes(sb))
		return 0;
	int rc = atts_of(h, sb->row.id, &l);
	for (int i = 0; i < l.n && rc == 0; i++) {
		int fd = vol_open(h, l.a[i].volume, l.a[i].read_only);
		if (fd < 0) {
			rc = fd;
			break;
		}
		out->fd[out->n] = fd;
		out->slot[out->n] = l.a[i].slot;
		out->ro[out->n] = l.a[i].read_only;
		out->n++;
	}
	if (rc < 0)
		volumes_close(out);
	return rc;
}

void volumes_close(struct vol_fds *v)
{
	for (int i = 0; i < v->n; i++)
		close(v->fd[i]);
	v->n = 0;
}

/* A volume's name for a message (its id if it is gone). */
static void vol_name(struct host *h, const char *id, char *out, size_t cap)
{
	struct vol_row r;
	snprintf(out, cap, "%s", store_volume_load(h->store, NULL, id, false, &r) == 0 ? r.name : id);
}

int volumes_fork_check(struct host *h, struct sandbox *parent)
{
	struct att_list l;
	if (!has_volumes(parent))
		return 0;
	int rc = atts_of(h, parent->row.id, &l);
	for (int i = 0; i < l.n && rc == 0; i++)
		if (!l.a[i].read_only) {
			char name[NAME_MAX_LEN];
			vol_name(h, l.a[i].volume, name, sizeof name);
			rc = errf(EBUSY, "sandbox %s has volume '%s' attached read-write: a fork would be a "
					 "second writer (forks share read-only volumes only)", parent->row.id, name);
		}
	return rc;
}

int volumes_fork_record(struct host *h, struct sandbox *parent, struct sandbox *child)
{
	struct att_list l;
	if (!has_volumes(parent))
		return 0;
	int rc = atts_of(h, parent->row.id, &l);
	if (rc == 0 && l.n > 0)
		mark_volumes(child);
	pthread_mutex_lock(&h->volumes);
	for (int i = 0; i < l.n && rc == 0; i++) {
		struct vol_att a = l.a[i];
		snprintf(a.sandbox, sizeof a.sandbox, "%s", child->row.id);
		a.created_ms = wall_ms();
		rc = store_volume_attach(h->store, &a);
	}
	pthread_mutex_unlock(&h->volumes);
	return rc;
}

int volumes_snapshot_check(struct host *h, struct sandbox *sb)
{
	struct att_list l;
	if (!has_volumes(sb))
		return 0;
	int rc = atts_of(h, sb->row.id, &l);
	if (rc == 0 && l.n > 0) {
		char name[NAME_MAX_LEN];
		vol_name(h, l.a[0].volume, name, sizeof name);
		rc = errf(EBUSY, "volumes are not part of a snapshot; sandbox %s has volume '%s' attached "
				 "(hibernate it instead, or snapshot a sandbox without volumes)", sb->row.id, name);
	}
	return rc;
}

int host_volume_delete(struct host *h, const char *ws, const char *id)
{
	struct vol_row r;
	pthread_mutex_lock(&h->volumes);
	int rc = store_volume_load(h->store, ws, id, false, &r);
	struct first_att f = { 0 };
	if (rc == 0)
		rc = store_volume_attachments(h->store, id, NULL, first_att, &f);
	if (rc == 0 && f.found)
		rc = errf(EBUSY, "volume '%s' is attached to sandbox %s: delete the sandbox first", r.name,
			  f.a.sandbox);
	if (rc == 0)
		rc = store_volume_delete(h->store, ws, id);
	pthread_mutex_unlock(&h->volumes);
	if (rc < 0)
		return rc;
	char path[PATH_MAX];
	vol_path(h, r.id, path, sizeof path);
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("volume %s: unlink %s: %s", r.id, path, strerror(errno));
	log_info("volume %s (%s) deleted", r.id, r.name);
	return 0;
}

/* id NULL: the attachments of all ws's volumes in one query (a list's;
 * out unused), each volume's as they would come one by one. */
int host_volume_get(struct host *h, const char *ws, const char *id, struct vol_row *out, store_att_fn *fn,
		    void *fctx)
{
	if (!id)
		return fn ? store_volume_attachments_ws(h->store, ws, fn, fctx) : 0;
	struct vol_row r;
	int rc = store_volume_load(h->store, ws, id, false, &r);
	if (rc == 0 && fn)
		rc = store_volume_attachments(h->store, id, NULL, fn, fctx);
	if (rc == 0 && out)
		*out = r;
	return rc;
}

/* ---- attach and detach on a live sandbox -------------------------------------- */

/* How many volume slots sb's VMM has, as it says (bounded: a VMM's
 * answer is not trusted further). */
static int vmm_slots(struct sandbox *sb, int *n)
{
	char ctl[PATH_MAX];
	sandbox_ctl(sb, ctl, sizeof ctl);
	json_t *q = json_pack("{s:s}", "cmd", "status"), *reply = NULL;
	int rc = q ? vmm_ctl(ctl, q, &reply, 5000) : errf(ENOMEM, "out of memory");
	json_decref(q);
	size_t k = json_array_size(json_object_get(reply, "volume_slots"));
	json_decref(reply);
	*n = k > HOST_VOLUMES_MAX ? HOST_VOLUMES_MAX : (int)k;
	return rc;
}

int host_volume_attach(struct host *h, struct sandbox *sb, const struct create_volume *v)
{
	pthread_mutex_lock(&sb->op);
	/* The guest mounts it: a hibernated one wakes, a paused one resumes. */
	struct vol_row vr;
	int rc = store_volume_load(h->store, sb->row.workspace, v->id, false, &vr), slots = 0, slot = -1;
	rc = rc ?: ready_locked(h, sb);
	if (rc == 0 && !sandbox_in(sb, SBX_RUNNING))
		rc = sandbox_state_error(sb, "running");
	rc = rc ?: vmm_slots(sb, &slots);
	struct att_list l;
	rc = rc ?: atts_of(h, sb->row.id, &l);
	bool used[HOST_VOLUMES_MAX] = { 0 };
	for (int i = 0; rc == 0 && i < l.n; i++) {
		if (!strcmp(l.a[i].volume, v->id))
			rc = errf(EBUSY, "volume '%s' is attached to sandbox %s already (at %s)", v->name, sb->row.id,
				  l.a[i].path);
		else if (!strcmp(l.a[i].path, v->path))
			rc = errf(EBUSY, "sandbox %s has a volume mounted at %s already", sb->row.id, v->path);
		else if (l.a[i].slot >= 0 && l.a[i].slot < HOST_VOLUMES_MAX)
			used[l.a[i].slot] = true;
	}
	for (int i = 0; rc == 0 && i < slots && slot < 0; i++)
		if (!used[i])
			slot = i;
	if (rc == 0 && slot < 0)
		rc = slots ? errf(EBUSY, "sandbox %s has no free volume slot (its %d are in use: detach one first)",
				  sb->row.id, slots)
			   : errf(EBUSY, "sandbox %s has no volume slots (its template was built without them: "
					 "rebuild it with kilnd template build)", sb->row.id);
	if (!path_ok(v->path) && rc == 0)
		rc = errf(EINVAL, "bad mount path '%.64s'", v->path);
	/* The one-writer rule and the record, as one step (volumes_attach). */
	if (rc == 0) {
		mark_volumes(sb);
		pthread_mutex_lock(&h->volumes);
		rc = rule_check(h, v->id, v->name, v->read_only, sb->row.id);
		struct vol_att a = { .slot = slot, .read_only = v->read_only, .created_ms = wall_ms() };
		snprintf(a.volume, sizeof a.volume, "%s", v->id);
		snprintf(a.sandbox, sizeof a.sandbox, "%s", sb->row.id);
		snprintf(a.path, sizeof a.path, "%s", v->path);
		rc = rc ?: store_volume_attach(h->store, &a);
		pthread_mutex_unlock(&h->volumes);
	}
	bool recorded = rc == 0, in_vmm = false;
	if (rc == 0 && (rc = vmm_volume(h, sb, slot, v)) < 0)
		rc = errf(-rc, "volume '%s': %s", v->name, errmsg());
	in_vmm = recorded && rc == 0;
	if (rc == 0 && (rc = guest_mount(h, sb, v, &slot, 1)) < 0)
		rc = errf(mount_errno(rc), "mounting volume '%s' in the guest: %s", v->name, errmsg());
	if (rc < 0 && recorded) {
		/* Undone: the slot empty again, the record gone. */
		char why[512];
		snprintf(why, sizeof why, "%s", errmsg());
		if (in_vmm && vmm_volume(h, sb, slot, NULL) < 0)
			log_warn("sandbox %s: detaching volume %s after a failed attach: %s", sb->row.id, v->id, errmsg());
		store_volume_detach_slot(h->store, sb->row.id, slot);
		errf(-rc, "%s", why);
	}
	if (rc == 0) {
		sandbox_touch(sb);
		log_info("sandbox %s: volume %s (%s) attached in slot %d at %s%s", sb->row.id, v->id, v->name, slot,
			 v->path, v->read_only ? ", read-only" : "");
	}
	pthread_mutex_unlock(&sb->op);
	return rc;
}

int host_volume_detach(struct host *h, struct sandbox *sb, const char *volume, bool force)
{
	pthread_mutex_lock(&sb->op);
	struct att_list l;
	int rc = atts_of(h, sb->row.id, &l), at = -1;
	for (int i = 0; rc == 0 && i < l.n; i++)
		if (!strcmp(l.a[i].volume, volume))
			at = i;
	if (rc == 0 && at < 0)
		rc = errf(ENOENT, "volume %s is not attached to sandbox %s", volume, sb->row.id);
	/* A hibernated sandbox's volumes are only records (its VMM is gone;
	 * a wake opens what they say): nothing to wake it for. */
	bool live = rc == 0 && !sandbox_in(sb, SBX_HIBERNATED);
	if (live && (rc = resume_locked(h, sb)) == 0 && !sandbox_in(sb, SBX_RUNNING))
		rc = sandbox_state_error(sb, "running");
	if (live && rc == 0) {
		/* Its dirty pages first; a mount still in use is the guest's
		 * to let go of (never pulled from under its processes): the
		 * error names who holds it. Forced, they are killed first
		 * (SIGKILL), and what they wrote is synced before the unmount.
		 * The guest's busybox has no fuser: held() looks through /proc
		 * (cwd, root, exe, open files, mapped files) as fuser -m does. */
		char script[VOL_PATH_MAX + 1024];
		snprintf(script, sizeof script,
			 "m='%s'; sync; umount \"$m\" 2>/dev/null && exit 0\n"
			 "held() { for p in /proc/[0-9]*; do i=${p#/proc/}; [ \"$i\" = 1 ] || [ \"$i\" = $$ ] && continue\n"
			 "  for l in $p/cwd $p/root $p/exe $p/fd/*; do\n"
			 "    case $(readlink $l 2>/dev/null) in \"$m\"|\"$m\"/*) echo $i; continue 2;; esac; done\n"
			 "  grep -q \" $m/\" $p/maps 2>/dev/null && echo $i; done; }\n"
			 "%s",
			 l.a[at].path,
			 force ? "for t in 1 2 3 4 5 6 7 8 9 10; do h=$(held); [ -n \"$h\" ] && kill -9 $h 2>/dev/null\n"
				 "  sleep 0.1; sync; umount \"$m\" 2>/dev/null && exit 0; done\n"
				 "umount \"$m\" 2>&1; exit 1"
			       : "umount \"$m\" 2>&1 && exit 0\n"
				 "echo \"in use by:\" $(for i in $(held); do echo \"$i ($(cat /proc/$i/comm 2>/dev/null))\"; done); exit 1");
		if (!path_ok(l.a[at].path))
			rc = errf(EINVAL, "bad mount path '%.64s'", l.a[at].path);
		else if ((rc = guest_sh(sb, script, h->cfg->boot_timeout_ms, GUEST_MOUNT_MS)) < 0)
			rc = errf(EBUSY, "unmounting %s in sandbox %s: %s (%s)", l.a[at].path, sb->row.id, errmsg(),
				  force ? "still in use after killing what used it" : "stop what uses it, then detach, "
				  "or detach with force to kill it");
		if (rc == 0 && (rc = vmm_volume(h, sb, l.a[at].slot, NULL)) < 0)
			rc = errf(-rc, "sandbox %s: detaching volume %s: %s", sb->row.id, volume, errmsg());
	}
	if (rc == 0) {
		pthread_mutex_lock(&h->volumes);
		rc = store_volume_detach_slot(h->store, sb->row.id, l.a[at].slot);
		pthread_mutex_unlock(&h->volumes);
		sandbox_touch(sb);
		log_info("sandbox %s: volume %s detached from slot %d%s", sb->row.id, volume, l.a[at].slot,
			 force ? " (forced)" : "");
	}
	pthread_mutex_unlock(&sb->op);
	return rc;
}
