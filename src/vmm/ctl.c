#include "vmm/ctl.h"
#include "vmm/vmm.h"
#include "vmm/config.h"
#include "vmm/fork.h"
#include "vmm/kvmstats.h"
#include "vmm/snapshot.h"
#include "vmm/volume.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CLIENTS 16
#define MAX_LINE    (64 * 1024)

#define CTL_MAX_FDS 16

struct ctl_client {
	int fd;
	int fds[CTL_MAX_FDS];       /* received with SCM_RIGHTS, for the next request */
	int nfds;
	struct ev_handler *h;
	struct strbuf in;
	struct ctl *ctl;
};

struct ctl_pending {
	struct ctl *ctl;
	struct ctl_client *client;   /* NULL once the client is gone */
	bool has_id;
	double id;
	struct ctl_pending *next;
};

struct ctl {
	struct vm *vm;
	struct ctl_pending *pending;
	struct ctl_client *current;   /* the client whose request is being handled */
	const struct ctl_command *commands;
	int listen_fd;
	struct ev_handler *h;
	char path[108];
	struct ctl_client *clients[MAX_CLIENTS];
};

static int cmd_status(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)req;
	strbuf_printf(r, ",\"state\":\"%s\",\"ready\":%s,\"vcpus\":%d,\"mem_mib\":%llu,\"pid\":%d,\"uptime_ms\":%llu",
		   vm->paused ? "paused" : "running", vm->ready ? "true" : "false", vm->nvcpus,
		   (unsigned long long)vm->cfg->mem_mib, (int)getpid(),
		   (unsigned long long)((now_ns() - vm->start_ns) / 1000000));
	volume_status(vm, r);
	return 0;
}

/* stats: KVM's counters for the VM's vCPUs, summed, and the exits that
 * came to us (kvmstats.h). bench/counts reads them before and after an
 * operation. */
static int cmd_stats(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)req;
	return kvmstats_json(vm, r);
}

/* snapshot_to: pause, capture, write DIR, and resume unless it was paused.
 * A diff snapshot holds only the pages changed since the snapshot the VM's
 * memory is tracked against (the last one taken, or the one it was
 * restored from). */
static int snapshot_to(struct vm *vm, const struct json *req, struct strbuf *r, bool stay_paused)
{
	const char *dir = json_get_str(req, "dir");
	bool diff = false;
	if (!dir || !dir[0])
		return errf(EINVAL, "\"dir\" (a string) is required");
	struct json *d = json_get(req, "diff");
	if (d && !json_get_bool(req, "diff", &diff))
		return errf(EINVAL, "\"diff\" must be true or false");
	if (diff && !vm->snap_base[0])
		return errf(EINVAL, "no snapshot to diff against: take a full snapshot first");
	uint64_t t0 = now_ns();
	bool was_paused = vm->paused;
	int rc = vm_pause(vm);
	if (rc < 0)
		return rc;
	size_t words = (vm->mem.size / 4096 + 63) / 64;
	uint64_t *bits = calloc(words, 8);
	struct strbuf payload;
	strbuf_init(&payload);
	struct snap_diff sd = { .parent = vm->snap_base, .bits = bits, .words = words };
	rc = bits ? 0 : errf(ENOMEM, "out of memory");
	if (rc == 0)
		rc = vm_flush_disks(vm);
	if (rc == 0 && vm->dirty_logging)
		rc = kvm_collect_dirty(vm, bits);
	if (rc == 0)
		rc = snapshot_capture(vm, &payload, diff ? &sd : NULL);
	if (rc == 0)
		rc = snapshot_write(vm, dir, &payload, diff ? &sd : NULL);
	if (rc == 0) {
		/* This snapshot is the new base; track changes against it. */
		char abs[4096];
		if (realpath(dir, abs))
			snprintf(vm->snap_base, sizeof vm->snap_base, "%s", abs);
		rc = kvm_dirty_logging(vm, true);
	} else if (bits && vm->mem.dirty) {
		/* Nothing was written: those pages still differ from the base. */
		for (size_t i = 0; i < words; i++)
			vm->mem.dirty[i] |= bits[i];
	}
	free(bits);
	strbuf_free(&payload);
	if (!was_paused && !stay_paused)
		vm_resume(vm);
	if (rc < 0)
		return rc;
	strbuf_printf(r, ",\"ms\":%.1f,\"diff\":%s", (double)(now_ns() - t0) / 1e6, diff ? "true" : "false");
	return 0;
}

static int cmd_snapshot(struct vm *vm, const struct json *req, struct strbuf *r)
{
	return snapshot_to(vm, req, r, false);
}

static int cmd_hibernate(struct vm *vm, const struct json *req, struct strbuf *r)
{
	int rc = snapshot_to(vm, req, r, true);
	if (rc == 0)
		vm_request_exit(vm, EXIT_POWEROFF, "hibernated to %s", json_get_str(req, "dir"));
	return rc;
}

static int cmd_pause(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)req;
	int rc = vm_pause(vm);
	if (rc < 0)
		return rc;
	strbuf_printf(r, ",\"state\":\"paused\"");
	return 0;
}

static int cmd_resume(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)req;
	vm_resume(vm);
	strbuf_printf(r, ",\"state\":\"running\"");
	return 0;
}

static int cmd_shutdown(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)req;
	(void)r;
	vm_request_exit(vm, EXIT_POWEROFF, "shutdown requested on the control socket");
	return 0;
}

/* debug_exec: only with KILN_VMM_TEST_HOOKS=1 in the environment, try an
 * execve, which the jail's seccomp filter must answer by killing us. */
static int cmd_debug_exec(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)vm;
	(void)req;
	(void)r;
	const char *hooks = getenv("KILN_VMM_TEST_HOOKS");
	if (!hooks || strcmp(hooks, "1") != 0)
		return errf(EPERM, "test hooks are off");
	char *const argv[] = { "true", NULL };
	execve("/bin/true", argv, argv + 1);
	return errf_sys("execve");
}

const struct ctl_command ctl_vm_commands[] = {
	{ "status", cmd_status },
	{ "stats", cmd_stats },
	{ "pause", cmd_pause },
	{ "resume", cmd_resume },
	{ "shutdown", cmd_shutdown },
	{ "snapshot", cmd_snapshot },
	{ "hibernate", cmd_hibernate },
	{ "fork", cmd_fork },
	{ "layer", cmd_layer },
	{ "volume_attach", cmd_volume_attach },
	{ "volume_detach", cmd_volume_detach },
	{ "debug_exec", cmd_debug_exec },
	{ NULL, NULL },
};

/* parse_jail: {"root":D,"uid":N,"gid":N,"cgroup":D,"netns":P,
 * "binds":[P...],"ro_binds":[P...],"pidns":BOOL} (see jail.h). */
static int parse_jail(const struct json *j, struct jail_config *out)
{
	if (!j || j->type == JSON_NULL)
		return 0;
	if (j->type != JSON_OBJECT)
		return errf(EINVAL, "\"jail\" must be an object");
	struct jail_config jc = { 0 };
	int64_t uid = 0, gid = 0;
	const char *root = json_get_str(j, "root");
	if (!root || root[0] != '/' || !json_get_int(j, "uid", &uid) || !json_get_int(j, "gid", &gid) ||
	    uid <= 0 || gid <= 0 || uid > 0xfffffffe || gid > 0xfffffffe)
		return errf(EINVAL, "\"jail\" needs an absolute \"root\" and unprivileged \"uid\" and \"gid\"");
	jc.uid = (uid_t)uid;
	jc.gid = (gid_t)gid;
	if (!(jc.root = strdup(root)))
		return errf(ENOMEM, "out of memory");
	const char *keys[] = { "cgroup", "netns" };
	const char **dst[] = { &jc.cgroup, &jc.netns };
	for (int i = 0; i < 2; i++) {
		const char *v = json_get_str(j, keys[i]);
		if (json_get(j, keys[i]) && (!v || v[0] != '/'))
			return errf(EINVAL, "jail \"%s\" must be an absolute path", keys[i]);
		if (v && !(*dst[i] = strdup(v)))
			return errf(ENOMEM, "out of memory");
	}
	const char *lists[] = { "binds", "ro_binds" };
	const char **arrays[] = { jc.binds, jc.ro_binds };
	int *counts[] = { &jc.nbinds, &jc.nro_binds };
	for (int i = 0; i < 2; i++) {
		struct json *a = json_get(j, lists[i]);
		if (!a)
			continue;
		if (a->type != JSON_ARRAY)
			return errf(EINVAL, "jail \"%s\" must be an array of absolute paths", lists[i]);
		for (struct json *e = a->child; e; e = e->next) {
			if (e->type != JSON_STRING || e->string[0] != '/' || *counts[i] == JAIL_MAX_BINDS)
				return errf(EINVAL, "jail \"%s\": at most %d absolute paths", lists[i], JAIL_MAX_BINDS);
			if (!(arrays[i][(*counts[i])++] = strdup(e->string)))
				return errf(ENOMEM, "out of memory");
		}
	}
	bool pidns;
	if (json_get_bool(j, "pidns", &pidns))
		jc.no_pidns = !pidns;
	*out = jc;
	return 0;
}

int ctl_child_config(struct vm *cfg_vm_for_fds, const struct json *req, struct vmm_config *cfg)
{
	struct json *disks = json_get(req, "disks");
	cfg->ndisks = 0;
	if (disks && disks->type != JSON_ARRAY)
		return errf(EINVAL, "\"disks\" must be an array of paths");
	for (struct json *d = disks ? disks->child : NULL; d; d = d->next) {
		if (d->type != JSON_STRING || !d->string[0])
			return errf(EINVAL, "\"disks\" must be an array of paths");
		if (cfg->ndisks == MAX_DISKS)
			return errf(EINVAL, "at most %d disks", MAX_DISKS);
		char *path = strdup(d->string);
		if (!path)
			return errf(ENOMEM, "out of memory");
		struct disk_config *dc = &cfg->disks[cfg->ndisks++];
		char *comma = strrchr(path, ',');
		dc->read_only = false;
		dc->below = NULL;
		dc->below_from = 0;
		if (comma && strcmp(comma, ",ro") == 0) {
			*comma = 0;
			dc->read_only = true;
		}
		dc->path = path;
	}
	int64_t reserve;
	if (json_get_int(req, "disk_reserve_mib", &reserve)) {
		if (reserve < 0)
			return errf(EINVAL, "\"disk_reserve_mib\" must be a number of MiB");
		cfg->disk_reserve_mib = (uint64_t)reserve;
	}
	static const char *const keys[] = { "vsock", "ctl", "tap", "hostname", "identity", "console" };
	const char **fields[] = { &cfg->vsock_path, &cfg->ctl_path, &cfg->tap, &cfg->hostname,
				  &cfg->identity, &cfg->console };
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		struct json *v = json_get(req, keys[i]);
		*fields[i] = NULL;
		if (!v || v->type == JSON_NULL)
			continue;
		if (v->type != JSON_STRING || !v->string[0])
			return errf(EINVAL, "\"%s\" must be a non-empty string", keys[i]);
		if (!(*fields[i] = strdup(v->string)))
			return errf(ENOMEM, "out of memory");
	}
	bool resync;
	if (json_get_bool(req, "resync", &resync))
		cfg->resync = resync;
	bool die;
	cfg->test_triple_fault = json_get_bool(req, "test_triple_fault", &die) && die;
	cfg->test_exit_after_ready = json_get_bool(req, "test_exit_after_ready", &die) && die;
	int64_t idx;
	if (json_get(req, "tap_fd")) {
		/* A TAP opened by the caller (in the child's network namespace)
		 * and passed with SCM_RIGHTS; "tap" names it for messages. */
		if (!json_get_int(req, "tap_fd", &idx))
			return errf(EINVAL, "\"tap_fd\" must be the index of a passed descriptor");
		int fd = ctl_claim_fd(cfg_vm_for_fds, idx);
		if (fd < 0)
			return fd;
		cfg->tap_fd = fd;
		if (!cfg->tap)
			cfg->tap = "(passed)";
	}
	cfg->stderr_fd = -1;
	if (json_get(req, "stderr_fd")) {
		/* Where the child's own messages go (its final line says why it
		 * ended), instead of its parent's or zygote's log, which it
		 * would otherwise share with every other child. */
		if (!json_get_int(req, "stderr_fd", &idx))
			return errf(EINVAL, "\"stderr_fd\" must be the index of a passed descriptor");
		int fd = ctl_claim_fd(cfg_vm_for_fds, idx);
		if (fd < 0)
			return fd;
		cfg->stderr_fd = fd;
	}
	return parse_jail(json_get(req, "jail"), &cfg->jail);
}

/* An error reply; "guest_died" when a new VM's guest died before it was
 * ready (ECHILD, child.c): nothing the caller asked for was wrong, so it
 * may ask again. */
static void reply_error(struct strbuf *r, int rc, const char *msg)
{
	strbuf_reset(r);
	strbuf_printf(r, "{\"ok\":false,\"error\":");
	strbuf_json_str(r, msg);
	if (rc == -ECHILD)
		strbuf_printf(r, ",\"guest_died\":true");
}

int ctl_fail(struct strbuf *r, int rc, const char *members)
{
	reply_error(r, rc, errmsg());
	strbuf_printf(r, "%s", members);
	return CTL_FAILED;
}

static void handle_line(struct ctl *c, const char *line, size_t len, struct strbuf *r)
{
	strbuf_reset(r);
	struct json *req = json_parse(line, len);
	if (!req) {
		reply_error(r, 0, errmsg());
		goto out;
	}
	const char *cmd = json_get_str(req, "cmd");
	if (req->type != JSON_OBJECT || !cmd) {
		reply_error(r, 0, "request must be a JSON object with a string \"cmd\"");
		goto out;
	}
	size_t i;
	for (i = 0; c->commands[i].name; i++)
		if (strcmp(c->commands[i].name, cmd) == 0)
			break;
	if (!c->commands[i].name) {
		char msg[160];
		snprintf(msg, sizeof msg, "unknown command \"%.100s\"", cmd);
		reply_error(r, 0, msg);
		goto out;
	}
	strbuf_printf(r, "{\"ok\":true");
	int rc = c->commands[i].fn(c->vm, req, r);
	if (rc == CTL_DEFERRED) {
		strbuf_reset(r);               /* the answer comes with ctl_finish */
		json_free(req);
		return;
	}
	if (rc < 0)
		reply_error(r, rc, errmsg());   /* CTL_FAILED: r holds the error already */
out:
	if (req) {
		struct json *id = json_get(req, "id");
		if (id && id->type == JSON_NUMBER)
			strbuf_printf(r, ",\"id\":%.0f", id->number);
	}
	strbuf_printf(r, "}\n");
	json_free(req);
}

static void drop_fds(struct ctl_client *cl)
{
	for (int i = 0; i < cl->nfds; i++)
		if (cl->fds[i] >= 0)
			close(cl->fds[i]);
	cl->nfds = 0;
}

int ctl_claim_fd(struct vm *vm, int64_t index)
{
	struct ctl_client *cl = vm->ctl ? vm->ctl->current : NULL;
	if (!cl || index < 0 || index >= cl->nfds || cl->fds[index] < 0)
		return errf(EBADF, "no descriptor %lld was passed with this request", (long long)index);
	int fd = cl->fds[index];
	cl->fds[index] = -1;
	return fd;
}

static bool send_all(int fd, const char *p, size_t n);

struct ctl_pending *ctl_defer(struct vm *vm, const struct json *req)
{
	struct ctl *c = vm->ctl;
	struct ctl_pending *p = c ? calloc(1, sizeof *p) : NULL;
	if (!p)
		return NULL;
	p->ctl = c;
	p->client = c->current;
	struct json *id = json_get(req, "id");
	if (id && id->type == JSON_NUMBER) {
		p->has_id = true;
		p->id = id->number;
	}
	p->next = c->pending;
	c->pending = p;
	return p;
}

void ctl_finish(struct ctl_pending *p, int rc, const char *members)
{
	struct ctl *c = p->ctl;
	struct strbuf r;
	strbuf_init(&r);
	if (rc == 0) {
		strbuf_printf(&r, "{\"ok\":true%s", members ? members : "");
	} else {
		reply_error(&r, rc, errmsg());
	}
	if (p->has_id)
		strbuf_printf(&r, ",\"id\":%.0f", p->id);
	strbuf_printf(&r, "}\n");
	if (p->client && !strbuf_failed(&r))
		send_all(p->client->fd, r.data, r.len);
	strbuf_free(&r);
	for (struct ctl_pending **pp = &c->pending; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	free(p);
}

static void client_close(struct ctl_client *cl)
{
	struct ctl *c = cl->ctl;
	drop_fds(cl);
	for (struct ctl_pending *p = c->pending; p; p = p->next)
		if (p->client == cl)
			p->client = NULL;       /* its answer has nobody to go to */
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (c->clients[i] == cl)
			c->clients[i] = NULL;
	ev_del(&c->vm->loop, cl->h);
	close(cl->fd);
	strbuf_free(&cl->in);
	free(cl);
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

static void client_event(void *opaque, uint32_t events)
{
	struct ctl_client *cl = opaque;
	char tmp[4096];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(CTL_MAX_FDS * sizeof(int))];
	} cmsg;
	struct iovec iov = { tmp, sizeof tmp };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &cmsg,
			     .msg_controllen = sizeof cmsg };
	ssize_t n = recvmsg(cl->fd, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* Descriptors (a TAP for a child, say) ride along with a request. */
	for (struct cmsghdr *ch = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; ch; ch = CMSG_NXTHDR(&mh, ch)) {
		if (ch->cmsg_level != SOL_SOCKET || ch->cmsg_type != SCM_RIGHTS)
			continue;
		int count = (int)((ch->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *fds = (int *)CMSG_DATA(ch);
		for (int i = 0; i < count; i++) {
			if (cl->nfds < CTL_MAX_FDS)
				cl->fds[cl->nfds++] = fds[i];
			else
				close(fds[i]);
		}
	}
	if (n <= 0 || (events & (EPOLLERR))) {
		client_close(cl);
		return;
	}
	strbuf_append(&cl->in, tmp, (size_t)n);
	struct strbuf reply;
	strbuf_init(&reply);
	for (;;) {
		char *nl = cl->in.len ? memchr(cl->in.data, '\n', cl->in.len) : NULL;
		if (!nl) {
			if (cl->in.len > MAX_LINE || strbuf_failed(&cl->in)) {
				reply_error(&reply, 0, "request line too long");
				strbuf_printf(&reply, "}\n");
				send_all(cl->fd, reply.data, reply.len);
				strbuf_free(&reply);
				client_close(cl);
				return;
			}
			break;
		}
		size_t len = (size_t)(nl - cl->in.data);
		cl->ctl->current = cl;
		handle_line(cl->ctl, cl->in.data, len, &reply);
		cl->ctl->current = NULL;
		drop_fds(cl);      /* what the request did not take is closed */
		if (!reply.len) {  /* deferred */
			memmove(cl->in.data, nl + 1, cl->in.len - len - 1);
			cl->in.len -= len + 1;
			continue;
		}
		memmove(cl->in.data, nl + 1, cl->in.len - len - 1);
		cl->in.len -= len + 1;
		if (!send_all(cl->fd, reply.data, reply.len)) {
			strbuf_free(&reply);
			client_close(cl);
			return;
		}
	}
	strbuf_free(&reply);
}

static void accept_event(void *opaque, uint32_t events)
{
	(void)events;
	struct ctl *c = opaque;
	int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	int slot = -1;
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (!c->clients[i]) {
			slot = i;
			break;
		}
	struct ctl_client *cl = slot >= 0 ? calloc(1, sizeof *cl) : NULL;
	if (!cl) {
		static const char busy[] = "{\"ok\":false,\"error\":\"too many control clients\"}\n";
		send_all(fd, busy, sizeof busy - 1);
		close(fd);
		return;
	}
	/* Replies are sent with blocking writes; a client that does not read
	 * its replies only stalls itself after the socket buffer fills, so
	 * give it a send timeout. */
	struct timeval tv = { .tv_sec = 2 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	cl->fd = fd;
	cl->ctl = c;
	strbuf_init(&cl->in);
	cl->h = ev_add(&c->vm->loop, EV_CONTROL, fd, EPOLLIN, client_event, cl);
	if (!cl->h) {
		close(fd);
		free(cl);
		return;
	}
	c->clients[slot] = cl;
}

int ctl_start(struct vm *vm, const char *path, const struct ctl_command *commands)
{
	struct ctl *c = calloc(1, sizeof *c);
	if (!c)
		return errf(ENOMEM, "out of memory");
	c->vm = vm;
	c->commands = commands ? commands : ctl_vm_commands;
	snprintf(c->path, sizeof c->path, "%s", path);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->listen_fd < 0) {
		free(c);
		return errf_sys("control socket");
	}
	unlink(path);   /* config_check made sure nobody listens there */
	if (bind(c->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(c->listen_fd, 16) < 0) {
		int rc = errf_sys("control socket %s", path);
		close(c->listen_fd);
		free(c);
		return rc;
	}
	vm->ctl = c;
	c->h = ev_add(&vm->loop, EV_CONTROL, c->listen_fd, EPOLLIN, accept_event, c);
	return c->h ? 0 : -1;
}

void ctl_stop(struct vm *vm)
{
	struct ctl *c = vm->ctl;
	if (!c)
		return;
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (c->clients[i])
			client_close(c->clients[i]);
	while (c->pending) {
		struct ctl_pending *p = c->pending;
		c->pending = p->next;
		free(p);
	}
	ev_del(&vm->loop, c->h);
	close(c->listen_fd);
	unlink(c->path);
	free(c);
	vm->ctl = NULL;
}
