#include "vmm/child.h"
#include "vmm/vmm.h"
#include "vmm/devices/virtio_devices.h"
#include "vmm/jail.h"
#include "vmm/overlay.h"
#include "vmm/own_uid.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 120000
#define OWN_UID_TIMEOUT_MS 30000

/* close_inherited: close every descriptor but stdio, the ready pipe and
 * what the caller asked to keep. The parent's KVM, epoll, socket and TAP
 * descriptors must not live on in the child. */
#define KEEP_MAX (24 + VOLUME_SLOTS_MAX + MAX_DISKS * 64)

static void close_inherited(int ready_fd, const int *keep)
{
	int fds[KEEP_MAX + 1], n = 0;
	fds[n++] = ready_fd;
	for (int i = 0; keep && keep[i] >= 0 && n < KEEP_MAX; i++)
		fds[n++] = keep[i];
	for (int i = 1; i < n; i++)          /* sort, so gaps can be closed in ranges */
		for (int k = i; k > 0 && fds[k - 1] > fds[k]; k--) {
			int t = fds[k];
			fds[k] = fds[k - 1];
			fds[k - 1] = t;
		}
	unsigned lo = 3;
	for (int i = 0; i < n; i++) {
		if ((unsigned)fds[i] > lo)
			syscall(SYS_close_range, lo, (unsigned)fds[i] - 1, 0);
		if ((unsigned)fds[i] + 1 > lo)
			lo = (unsigned)fds[i] + 1;
	}
	syscall(SYS_close_range, lo, ~0U, 0);
}

static void __attribute__((noreturn))
child_run(const struct guest_mem *mem, const struct vmm_config *cfg, const uint8_t *payload,
	  size_t len, uint64_t t0, int ready_fd)
{
	static struct vm vm;
	static struct vmm_config own_cfg;
	/* mem may be this very vm's: a VM that a zygote spawned (so runs
	 * here) and now forks. Copy it before vm_init clears vm. The config
	 * is copied too: the fork handler's table of child settings must not
	 * be this VM's own, or its next fork would rewrite it. */
	struct guest_mem inherited = *mem;
	own_cfg = *cfg;
	vm_init(&vm, &own_cfg);
	vm.mem = inherited;
	vm.mem.dirty = NULL;          /* the parent's bitmap is not ours */
	vm.ready_fd = ready_fd;
	vm.ready_from_ns = t0;
	int status = vm_build_restored(&vm, payload, len);
	/* Its disks are open (over its parent's layers): only now may it
	 * leave its parent's uid, whose directories those layers lie in. */
	for (int i = 0; i < own_cfg.ndisks; i++) {
		const struct chain *b = own_cfg.disks[i].below;
		for (int l = own_cfg.disks[i].below_from; b && l < b->n; l++)
			if (b->layers[l].fd >= 0)
				close(b->layers[l].fd);     /* its disk holds copies */
		own_cfg.disks[i].below = NULL;
	}
	if (status == 0 && own_cfg.uid_sock >= 0) {
		int sock = own_cfg.uid_sock;
		own_cfg.uid_sock = -1;
		if (own_uid(sock, own_cfg.uid_index, OWN_UID_TIMEOUT_MS) < 0)
			status = EXIT_CONFIG;
	}
	if (status != 0) {
		dprintf(ready_fd, "error %s\n", errmsg());
		vm_teardown(&vm);
		_exit(status);
	}
	if (own_cfg.test_triple_fault)
		vm_test_triple_fault(&vm);
	status = vm_run(&vm);
	/* It ran and ended before it was ready: its guest died (a triple
	 * fault, a panic, a reboot) or it was stopped. "died", not "error":
	 * nothing of the caller's was set up wrong, so it may try again. */
	if (vm.ready_fd >= 0)
		dprintf(vm.ready_fd, "died %s\n", vm.exit_reason);
	vm_teardown(&vm);
	fprintf(stderr, "kiln-vmm[%d]: %s (exit status %d)\n", (int)getpid(), vm.exit_reason, status);
	_exit(status);
}

/* start_on: fork the intermediate process, which forks the VM; both
 * report on wfd, which this closes. 0, or -errno when the fork failed
 * (said on wfd too, for a reader in another process). With mid NULL it
 * waits for the intermediate to end; else *mid is its pid, the caller's
 * to reap (once the report is read: the intermediate ends after its
 * "pid" line, or its "error"). */
static int start_on(int wfd, const struct guest_mem *mem, const struct vmm_config *cfg,
		    const uint8_t *payload, size_t len, uint64_t t0, const int *keep_fds, pid_t *mid_out)
{
	pid_t mid = fork();
	if (mid < 0) {
		int e = errno;
		dprintf(wfd, "error fork: %s\n", strerror(e));
		close(wfd);
		return errf(e, "fork: %s", strerror(e));
	}
	if (mid == 0) {
		/* The intermediate process: fork the VM and vanish, so the VM is
		 * nobody's child here and is adopted by the subreaper. A jailed VM
		 * joins its network namespace and cgroup here, opens its TAP in
		 * that namespace, and is born into a new PID namespace. */
		struct vmm_config *c = (struct vmm_config *)cfg;
		if (c->jail.root) {
			if (jail_join(&c->jail) < 0 ||
			    (c->tap && c->tap_fd < 0 && (c->tap_fd = virtio_net_tap_open(c->tap)) < 0) ||
			    (!c->jail.no_pidns && unshare(CLONE_NEWPID) < 0 &&
			     errf_sys("jail: unshare PID namespace") < 0)) {
				dprintf(wfd, "error %s\n", errmsg());
				_exit(1);
			}
		}
		pid_t vmpid = fork();
		if (vmpid < 0) {
			dprintf(wfd, "error fork: %s\n", strerror(errno));
			_exit(1);
		}
		if (vmpid > 0) {
			/* Its pid as we see it: inside a new PID namespace it is 1. */
			dprintf(wfd, "pid %d\n", (int)vmpid);
			_exit(0);
		}
		if (c->stderr_fd >= 0 && c->stderr_fd != STDERR_FILENO) {
			dup2(c->stderr_fd, STDERR_FILENO);
			close(c->stderr_fd);
			c->stderr_fd = -1;
		}
		/* Its own descriptors: KVM, the TAP, and the read-only volumes
		 * a live fork shares with its parent. */
		int keep[3 + VOLUME_SLOTS_MAX] = { c->kvm_fd, c->tap_fd, c->uid_sock }, k = 0;
		for (int i = 0; i < VOLUME_SLOTS_MAX; i++)
			keep[3 + i] = i < c->volume_slots ? c->volumes[i].fd : -1;
		static int all[KEEP_MAX + 1];
		for (int i = 0; keep_fds && keep_fds[i] >= 0 && k < 16; i++)
			all[k++] = keep_fds[i];
		for (int i = 0; i < 3 + VOLUME_SLOTS_MAX; i++)
			if (keep[i] >= 0)
				all[k++] = keep[i];
		/* And the parent's disk layers its own disks sit on. */
		for (int d = 0; d < c->ndisks; d++)
			for (int l = c->disks[d].below ? c->disks[d].below_from : 0;
			     c->disks[d].below && l < c->disks[d].below->n && k < KEEP_MAX; l++)
				if (c->disks[d].below->layers[l].fd >= 0)
					all[k++] = c->disks[d].below->layers[l].fd;
		all[k] = -1;
		close_inherited(wfd, all);
		if (c->jail.root) {
			/* As PID 1 it would ignore signals without a handler. */
			struct sigaction sa = { .sa_handler = jail_noop_handler };
			sigemptyset(&sa.sa_mask);
			if (!c->jail.no_pidns) {
				sigaction(SIGTERM, &sa, NULL);
				sigaction(SIGINT, &sa, NULL);
			}
			if (jail_enter(&c->jail) < 0) {
				dprintf(wfd, "error %s\n", errmsg());
				_exit(EXIT_CONFIG);
			}
		}
		child_run(mem, cfg, payload, len, t0, wfd);
	}
	close(wfd);
	if (mid_out)
		*mid_out = mid;
	else
		child_reap(mid);
	return 0;
}

int child_start(const struct guest_mem *mem, const struct vmm_config *cfg,
		const uint8_t *payload, size_t len, uint64_t t0, const int *keep_fds, pid_t *mid)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return errf_sys("pipe");
	int rc = start_on(p[1], mem, cfg, payload, len, t0, keep_fds, mid);
	if (rc < 0) {
		close(p[0]);
		return rc;
	}
	return p[0];
}

static void close_pipes(const int *r, const int *w, int n)
{
	for (int i = 0; i < n; i++) {
		close(r[i]);
		close(w[i]);
	}
}

int children_start(const struct guest_mem *mem, const struct vmm_config *cfgs, int n,
		   const uint8_t *payload, size_t len, uint64_t t0, int *fds, pid_t *seed)
{
	int w[CHILDREN_MAX];
	if (n < 1 || n > CHILDREN_MAX)
		return errf(EINVAL, "children_start: %d children", n);
	for (int i = 0; i < n; i++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0) {
			int rc = errf_sys("pipe");
			close_pipes(fds, w, i);
			return rc;
		}
		fds[i] = p[0];
		w[i] = p[1];
	}
	pid_t s = fork();
	if (s < 0) {
		int rc = errf_sys("fork");
		close_pipes(fds, w, n);
		return rc;
	}
	if (s == 0) {
		/* The seed: this process's memory as it was at the fork, which
		 * every child is started from while the caller runs on. */
		for (int i = 0; i < n; i++)
			close(fds[i]);
		for (int i = 0; i < n; i++)
			start_on(w[i], mem, &cfgs[i], payload, len, t0, NULL, NULL);
		_exit(0);
	}
	for (int i = 0; i < n; i++)
		close(w[i]);
	*seed = s;
	return 0;
}

void child_reap(pid_t pid)
{
	while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int child_parse(const char *buf, size_t n, bool eof, struct child_result *out)
{
	/* "pid N" from the intermediate process, and "ready PID MS", "error
	 * MESSAGE" or "died MESSAGE" from the VM. The two processes write
	 * the same pipe, so the VM's "ready" can come first: on a busy host
	 * the intermediate may not run between its fork and its write for
	 * longer than the VM takes to restore (seen with one host CPU: 6
	 * spawns at once, one "ready" 245 ms in, ahead of its "pid").
	 * Whole lines only; buf is left as it is, for the next call. */
	int pid = -1, inner;
	double ms = 0;
	bool ready = false;
	out->pid = -1;
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(buf + i, '\n', n - i);
		if (!nl)
			break;
		char l[CHILD_REPORT_MAX];
		size_t len = (size_t)(nl - (buf + i));
		if (len >= sizeof l)
			len = sizeof l - 1;
		memcpy(l, buf + i, len);
		l[len] = 0;
		i = (size_t)(nl - buf) + 1;
		if (sscanf(l, "pid %d", &pid) == 1) {
			out->pid = pid;       /* known even if it fails: see child_discard */
			continue;
		}
		if (!ready && sscanf(l, "ready %d %lf", &inner, &ms) == 2) {
			ready = true;
			continue;
		}
		if (strncmp(l, "error ", 6) == 0)
			return errf(EINVAL, "%s", l + 6);
		if (strncmp(l, "died ", 5) == 0)
			return errf(ECHILD, "the guest died before it was ready: %s", l + 5);
		return errf(EIO, "the new VM said '%.100s'", l);
	}
	if (ready && pid > 0) {
		out->ready_ms = ms;
		return 1;
	}
	if (eof || n >= CHILD_REPORT_MAX - 1)
		return errf(EIO, ready ? "the new VM was ready, but its pid never came"
				       : "the new VM exited before it was ready");
	return 0;
}

int child_wait(int fd, struct child_result *out)
{
	char buf[CHILD_REPORT_MAX];
	size_t got = 0;
	int rc = 0;
	uint64_t deadline = now_ns() + (uint64_t)READY_TIMEOUT_MS * 1000000;
	while (rc == 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)((deadline - now_ns()) / 1000000);
		if (left <= 0 || poll(&pfd, 1, left) <= 0) {
			rc = errf(ETIMEDOUT, "the new VM did not report ready in %d s", READY_TIMEOUT_MS / 1000);
			break;
		}
		ssize_t k = read(fd, buf + got, sizeof buf - 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k > 0)
			got += (size_t)k;
		rc = child_parse(buf, got, k <= 0, out);
	}
	close(fd);
	if (rc < 0)
		child_discard(out);
	return rc < 0 ? rc : 0;
}

void child_discard(const struct child_result *res)
{
	if (res->pid > 0)
		kill(res->pid, SIGKILL);
}

int child_spawn(const struct guest_mem *mem, const struct vmm_config *cfg,
		const uint8_t *payload, size_t len, uint64_t t0,
		const int *keep_fds, struct child_result *out)
{
	int fd = child_start(mem, cfg, payload, len, t0, keep_fds, NULL);
	return fd < 0 ? fd : child_wait(fd, out);
}
