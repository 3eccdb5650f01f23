#include "vmm/zygote.h"
#include "vmm/child.h"
#include "vmm/ctl.h"
#include "vmm/snapshot.h"
#include "vmm/vmm.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct zygote {
	uint8_t *payload;
	size_t len;
	struct snap_info info;
	struct snap_volumes vols;
	int kvm_max_vcpus;
	unsigned spawned;
};

/* The control socket hands handlers a struct vm; the zygote has one that
 * only holds its loop, config and memory, and points here. */
static struct zygote zy;

/* A spawn whose child has not reported yet; the zygote serves other
 * requests meanwhile. */
struct spawn_wait {
	struct vm *vm;
	struct ctl_pending *pending;
	struct ev_handler *h;
	int fd;
	pid_t mid;		/* the intermediate process, reaped at the report */
	double held_ms;		/* this loop's time in the spawn (the forks) */
	char buf[CHILD_REPORT_MAX];
	size_t got;
};

/* The reply's members for a child that reported ready. */
static void spawned(char *out, size_t cap, const struct child_result *res, double held_ms)
{
	zy.spawned++;
	snprintf(out, cap, ",\"pid\":%d,\"ready_ms\":%.2f,\"held_ms\":%.2f", (int)res->pid, res->ready_ms,
		 held_ms);
}

static void spawn_event(void *opaque, uint32_t events)
{
	(void)events;
	struct spawn_wait *w = opaque;
	ssize_t k = read(w->fd, w->buf + w->got, sizeof w->buf - 1 - w->got);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k > 0)
		w->got += (size_t)k;
	struct child_result res;
	int rc = child_parse(w->buf, w->got, k <= 0, &res);
	if (rc == 0)
		return;
	if (rc < 0)
		child_discard(&res);
	child_reap(w->mid);	/* it ended after its "pid" line or its error */
	char members[128] = "";
	if (rc > 0)
		spawned(members, sizeof members, &res, w->held_ms);
	ctl_finish(w->pending, rc > 0 ? 0 : rc, members);
	ev_del(&w->vm->loop, w->h);
	close(w->fd);
	free(w);
}

static int cmd_spawn(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)r;
	uint64_t t0 = now_ns();
	struct vmm_config cfg = *vm->cfg;
	cfg.zygote_dir = NULL;
	cfg.restore_dir = "(zygote)";
	int rc = ctl_child_config(vm, req, &cfg);
	if (rc == 0)
		rc = config_from_snapshot(&cfg, &zy.info, &zy.vols);
	if (rc == 0)
		rc = config_check(&cfg, zy.kvm_max_vcpus);
	int fd = -1;
	pid_t mid = -1;
	if (rc == 0 && (fd = child_start(&vm->mem, &cfg, zy.payload, zy.len, t0, NULL, &mid)) < 0)
		rc = fd;
	double held_ms = (double)(now_ns() - t0) / 1e6;
	if (cfg.tap_fd >= 0)
		close(cfg.tap_fd);        /* the child has its own copy */
	if (cfg.stderr_fd >= 0)
		close(cfg.stderr_fd);
	if (rc < 0)
		return rc;
	/* Answer when the child is ready; spawn the next meanwhile. */
	struct spawn_wait *w = calloc(1, sizeof *w);
	if (w)
		w->pending = ctl_defer(vm, req);
	if (w && w->pending) {
		w->vm = vm;
		w->fd = fd;
		w->mid = mid;
		w->held_ms = held_ms;
		w->h = ev_add(&vm->loop, EV_CONTROL, fd, EPOLLIN, spawn_event, w);
		if (w->h)
			return CTL_DEFERRED;
		/* Cannot watch it: wait for it here instead. */
		struct child_result res;
		char members[128] = "";
		rc = child_wait(fd, &res);
		child_reap(mid);
		if (rc == 0)
			spawned(members, sizeof members, &res, held_ms);
		ctl_finish(w->pending, rc, members);
		free(w);
		return CTL_DEFERRED;
	}
	free(w);
	struct child_result res;
	rc = child_wait(fd, &res);
	child_reap(mid);
	if (rc < 0)
		return rc;
	char members[128];
	spawned(members, sizeof members, &res, held_ms);
	strbuf_printf(r, "%s", members);
	return 0;
}

static int cmd_status(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)req;
	strbuf_printf(r, ",\"state\":\"zygote\",\"mem_mib\":%llu,\"vcpus\":%u,\"spawned\":%u,\"pid\":%d,"
		      "\"volume_slots\":%u",
		   (unsigned long long)(vm->mem.size >> 20), zy.info.nvcpus, zy.spawned, (int)getpid(),
		   zy.vols.nslots);
	return 0;
}

static int cmd_shutdown(struct vm *vm, const struct json *req, struct strbuf *r)
{
	(void)req;
	(void)r;
	vm_request_exit(vm, EXIT_POWEROFF, "zygote shut down on request");
	return 0;
}

static const struct ctl_command zygote_commands[] = {
	{ "spawn", cmd_spawn },
	{ "status", cmd_status },
	{ "shutdown", cmd_shutdown },
	{ NULL, NULL },
};

static void on_exit_event(void *opaque, uint32_t events)
{
	(void)events;
	struct vm *vm = opaque;
	uint64_t n;
	if (read(vm->exit_efd, &n, sizeof n) < 0) {
		/* the loop checks exit_code */
	}
}

int zygote_main(struct vmm_config *cfg, int kvm_max_vcpus)
{
	zy.kvm_max_vcpus = kvm_max_vcpus;
	if (snapshot_read(cfg->zygote_dir, &zy.payload, &zy.len) < 0 ||
	    snapshot_info(zy.payload, zy.len, &zy.info) < 0 ||
	    snapshot_volumes(zy.payload, zy.len, &zy.vols) < 0) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		return EXIT_CONFIG;
	}
	/* Every child of a zygote starts with its template's slots empty: a
	 * volume is one sandbox's, and the zygote holds no descriptor for it. */
	for (uint32_t i = 0; i < zy.vols.nslots; i++)
		if (zy.vols.slot[i].attached) {
			fprintf(stderr, "kiln-vmm: the template snapshot has a volume in slot %u: a zygote "
				"cannot spawn from it (detach the volume before the template's snapshot)\n", i);
			return EXIT_CONFIG;
		}
	static struct vm vm;
	vm_init(&vm, cfg);
	/* The zygote never runs a guest, so SIGTERM can simply end it. */
	signal(SIGPIPE, SIG_IGN);
	vm.exit_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm.exit_efd < 0 || ev_init(&vm.loop) < 0 ||
	    !ev_add(&vm.loop, EV_CONTROL, vm.exit_efd, EPOLLIN, on_exit_event, &vm)) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		return EXIT_ERROR;
	}
	uint64_t t0 = now_ns();
	/* Children create their VMs on this /dev/kvm descriptor: a jailed
	 * child has no /dev/kvm of its own. */
	cfg->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (cfg->kvm_fd < 0) {
		fprintf(stderr, "kiln-vmm: cannot open /dev/kvm: %s\n", strerror(errno));
		return EXIT_ERROR;
	}
	static char base[4096];
	if (realpath(cfg->zygote_dir, base))
		cfg->snap_base = base;
	if (snapshot_memory(&vm, cfg->zygote_dir, zy.payload, zy.len, true) < 0) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		return EXIT_CONFIG;
	}
	if (ctl_start(&vm, cfg->ctl_path, zygote_commands) < 0) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		guest_mem_free(&vm.mem);
		return EXIT_CONFIG;
	}
	fprintf(stderr, "kiln-vmm: zygote ready: %llu MiB loaded in %.1f ms\n",
		(unsigned long long)(zy.info.mem_size >> 20), (double)(now_ns() - t0) / 1e6);
	bool never_paused = false;
	while (atomic_load(&vm.exit_code) < 0)
		if (ev_run_once(&vm.loop, 1000, &never_paused) < 0)
			break;
	ctl_stop(&vm);
	ev_close(&vm.loop);
	guest_mem_free(&vm.mem);
	free(zy.payload);
	fprintf(stderr, "kiln-vmm: %s (exit status 0)\n", vm.exit_reason);
	return 0;
}
