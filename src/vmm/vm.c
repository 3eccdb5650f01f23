/*
 * vm: the life of one VM. vm_build() creates it in the order KVM and the
 * devices need (VM and irqchip, memory, devices, kernel and ACPI tables,
 * vCPUs); vm_run() runs the event loop until the guest powers off or
 * something ends it; vm_teardown() undoes whatever was built, also after a
 * partial build, so that a failure leaves no socket, TAP or thread behind.
 */
#include "vmm/vmm.h"
#include "vmm/ctl.h"
#include "vmm/devices/serial.h"
#include "vmm/devices/virtio_devices.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/jail.h"
#include "vmm/resync.h"
#include "vmm/snapshot.h"
#include "vmm/volume.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void vm_request_exit(struct vm *vm, int code, const char *fmt, ...)
{
	int expected = -1;
	if (!atomic_compare_exchange_strong(&vm->exit_code, &expected, code))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(vm->exit_reason, sizeof vm->exit_reason, fmt, ap);
	va_end(ap);
	uint64_t one = 1;
	if (write(vm->exit_efd, &one, sizeof one) < 0) {
		/* the main loop also checks exit_code on every round */
	}
}

int vm_pause(struct vm *vm)
{
	pthread_mutex_lock(&vm->pause_lock);
	if (vm->paused) {
		pthread_mutex_unlock(&vm->pause_lock);
		return 0;
	}
	vm->pause_requested = true;
	pthread_mutex_unlock(&vm->pause_lock);
	vcpus_kick(vm);
	pthread_mutex_lock(&vm->pause_lock);
	while (vm->vcpus_parked < vm->vcpus_running)
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	vm->paused = true;
	pthread_mutex_unlock(&vm->pause_lock);
	return 0;
}

void vm_resume(struct vm *vm)
{
	pthread_mutex_lock(&vm->pause_lock);
	vm->pause_requested = false;
	vm->paused = false;
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
}

static void on_exit_event(void *opaque, uint32_t events)
{
	(void)events;
	struct vm *vm = opaque;
	uint64_t n;
	if (read(vm->exit_efd, &n, sizeof n) < 0) {
		/* nothing to do: exit_code is what the loop checks */
	}
}

static void on_signal(void *opaque, uint32_t events)
{
	(void)events;
	struct vm *vm = opaque;
	struct signalfd_siginfo si;
	int fd = -1;
	for (struct ev_handler *h = vm->loop.handlers; h; h = h->next)
		if (h->opaque == vm && h->fn == on_signal)
			fd = h->fd;
	if (fd >= 0 && read(fd, &si, sizeof si) == sizeof si)
		vm_request_exit(vm, EXIT_POWEROFF, "stopped by signal %u", si.ssi_signo);
}

static int open_console(const char *spec)
{
	if (!spec)
		return -1;
	if (strcmp(spec, "-") == 0)
		return dup(STDOUT_FILENO);
	/* Appended: a sandbox's console log runs on across hibernate and
	 * wake (a restored VMM opens it again). */
	int fd = open(spec, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf_sys("--console %s", spec);
	return fd;
}

/* vm_build: everything up to a VM that is ready to run. Returns 0, or the
 * exit status to use on failure (2 for bad input, 1 for a failing host). */
/* setup_loop: the event loop, the exit eventfd and signal handling. */
static int setup_loop(struct vm *vm)
{
	vm->exit_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->exit_efd < 0 || ev_init(&vm->loop) < 0)
		return errf_sys("eventfd/epoll");
	if (!ev_add(&vm->loop, EV_CONTROL, vm->exit_efd, EPOLLIN, on_exit_event, vm))
		return -1;
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || !ev_add(&vm->loop, EV_CONTROL, sfd, EPOLLIN, on_signal, vm))
		return errf_sys("signalfd");
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* setup_devices: every device the configuration asks for, in a fixed
 * order, so that a restore gets the MMIO slots and GSIs the snapshot had.
 * Returns 0 or an exit status. */
static int setup_devices(struct vm *vm)
{
	const struct vmm_config *cfg = vm->cfg;
	int console = open_console(cfg->console);
	if (cfg->console && console < 0)
		return EXIT_CONFIG;
	if (serial_add(vm, console) < 0 || i8042_add(vm) < 0 || acpi_pm_add(vm) < 0 ||
	    pvpanic_add(vm) < 0)
		return EXIT_ERROR;
	for (int i = 0; i < cfg->ndisks; i++)
		if (virtio_blk_add(vm, &cfg->disks[i], i, cfg->disk_reserve_mib << 20) < 0)
			return EXIT_CONFIG;
	/* Volume slots right after the disks: part of the device set, so a
	 * snapshot's children and restores have them where the guest saw
	 * them. A volume given at start (config_check looked at it) is
	 * attached before the guest runs. */
	for (int i = 0; i < cfg->volume_slots; i++) {
		const struct volume_config *vc = &cfg->volumes[i];
		uint64_t size;
		if (virtio_blk_add_slot(vm, i, cfg->ndisks + i, &vm->slots[i]) < 0)
			return EXIT_ERROR;
		vm->nslots = i + 1;
		if (vc->fd < 0)
			continue;
		if (volume_check(vc->fd, vc->read_only, i, &size) < 0 ||
		    virtio_blk_attach(vm->slots[i], vc->fd, size, vc->read_only) < 0)
			return EXIT_CONFIG;
	}
	if (cfg->rng && virtio_rng_add(vm) < 0)
		return EXIT_ERROR;
	if (cfg->tap && virtio_net_add(vm, cfg->tap, cfg->mac) < 0)
		return EXIT_CONFIG;
	if (cfg->vsock_path && virtio_vsock_add(vm, cfg->guest_cid, cfg->vsock_path) < 0)
		return EXIT_CONFIG;
	return 0;
}

int vm_build(struct vm *vm)
{
	const struct vmm_config *cfg = vm->cfg;
	int status;
	if (setup_loop(vm) < 0 || kvm_open_vm(vm) < 0 ||
	    guest_mem_alloc(&vm->mem, cfg->mem_mib << 20) < 0 ||
	    kvm_set_memory(vm) < 0 || cpuid_init(vm) < 0)
		return EXIT_ERROR;
	if ((status = setup_devices(vm)) != 0)
		return status;

	uint32_t entry;
	if (boot_load(vm, &entry) < 0)
		return EXIT_CONFIG;
	vm->nvcpus = cfg->vcpus;
	if (acpi_build(vm) < 0)
		return EXIT_ERROR;
	for (int i = 0; i < vm->nvcpus; i++)
		if (vcpu_create(vm, i) < 0)
			return EXIT_ERROR;
	if (vcpu_setup_boot(&vm->vcpus[0], entry, START_INFO_ADDR) < 0)
		return EXIT_ERROR;
	if (cfg->ctl_path && ctl_start(vm, cfg->ctl_path, NULL) < 0)
		return EXIT_CONFIG;
	return 0;
}

/* For tests (a spawn request's "test_triple_fault", kiln-vmm
 * --test-triple-fault): empty vCPU 0's interrupt table, so that the first
 * interrupt or exception the restored guest takes cannot be delivered and
 * the CPU shuts down (KVM_EXIT_SHUTDOWN): a guest death before ready by
 * the same path as a real one. */
void vm_test_triple_fault(struct vm *vm)
{
	struct kvm_sregs s;
	if (vm->nvcpus < 1 || ioctl(vm->vcpus[0].fd, KVM_GET_SREGS, &s) < 0)
		return;
	s.idt.limit = 0;
	ioctl(vm->vcpus[0].fd, KVM_SET_SREGS, &s);
}

int vm_build_restored(struct vm *vm, const uint8_t *payload, size_t len)
{
	const struct vmm_config *cfg = vm->cfg;
	int status;
	/* Guest memory is already in place (mapped from the snapshot, or
	 * inherited across fork). Memory that came from a snapshot on disk is
	 * tracked against it, so the next snapshot can be a diff. */
	if (cfg->snap_base)
		snprintf(vm->snap_base, sizeof vm->snap_base, "%s", cfg->snap_base);
	if (setup_loop(vm) < 0 || kvm_open_vm(vm) < 0 || kvm_set_memory(vm) < 0 ||
	    cpuid_init(vm) < 0 || (cfg->snap_base && kvm_dirty_logging(vm, true) < 0))
		return EXIT_ERROR;
	if ((status = setup_devices(vm)) != 0)
		return status;
	vm->nvcpus = cfg->vcpus;
	vm->restored = true;
	for (int i = 0; i < vm->nvcpus; i++)
		if (vcpu_create(vm, i) < 0)
			return EXIT_ERROR;
	if (snapshot_apply(vm, payload, len) < 0)
		return EXIT_CONFIG;
	if (cfg->ctl_path && ctl_start(vm, cfg->ctl_path, NULL) < 0)
		return EXIT_CONFIG;
	return 0;
}

void vm_teardown(struct vm *vm)
{
	atomic_store(&vm->stopping, true);
	pthread_mutex_lock(&vm->pause_lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->pause_lock);
	vcpus_kick(vm);
	for (int i = 0; i < vm->nvcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		if (v->started)
			pthread_join(v->thread, NULL);
		v->started = false;
	}
	ctl_stop(vm);
	serial_destroy(vm);
	virtio_mmio_destroy_all(vm);
	for (int i = 0; i < vm->nvcpus; i++) {
		if (vm->vcpus[i].run)
			munmap(vm->vcpus[i].run, (size_t)vm->run_size);
		if (vm->vcpus[i].fd > 0)
			close(vm->vcpus[i].fd);
		if (vm->vcpus[i].stats_fd >= 0)
			close(vm->vcpus[i].stats_fd);
	}
	ev_close(&vm->loop);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	guest_mem_free(&vm->mem);
	free(vm->cpuid);
}

void vm_init(struct vm *vm, const struct vmm_config *cfg)
{
	memset(vm, 0, sizeof *vm);
	vm->cfg = cfg;
	vm->kvm_fd = vm->vm_fd = vm->exit_efd = vm->ready_fd = -1;
	vm->loop.ep[0] = vm->loop.ep[1] = -1;
	atomic_init(&vm->exit_code, -1);
	pthread_mutex_init(&vm->dev_lock, NULL);
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	vm->start_ns = vm->ready_from_ns = now_ns();
}

int vm_flush_disks(struct vm *vm)
{
	for (int i = 0; i < vm->nvirtio; i++) {
		struct virtio_dev *d = vm->virtio[i];
		int rc = d->ops->flush ? d->ops->flush(d) : 0;
		if (rc < 0)
			return errf(-rc, "flushing %s: %s", d->ops->name, strerror(-rc));
	}
	return 0;
}

void vm_set_ready(struct vm *vm)
{
	if (vm->ready)
		return;
	vm->ready = true;
	double ms = (double)(now_ns() - vm->ready_from_ns) / 1e6;
	if (vm->ready_fd >= 0) {
		dprintf(vm->ready_fd, "ready %d %.3f\n", (int)getpid(), ms);
		close(vm->ready_fd);
		vm->ready_fd = -1;
	}
	if (vm->restored)
		fprintf(stderr, "kiln-vmm: ready in %.1f ms\n", ms);
	/* Tests (a spawn request's "test_exit_after_ready"): a guest that
	 * dies after this ready, before its agent answers kilnd, stood in
	 * for by the VMM ending as it does on a triple fault. */
	if (vm->cfg && vm->cfg->test_exit_after_ready)
		vm_request_exit(vm, EXIT_TRIPLE_FAULT, "guest triple fault (a test's, right after the VMM's ready)");
}

int vm_run(struct vm *vm)
{
	/* The last wall: unprivileged, seccomp, before any guest code runs. */
	if (jail_lock(&vm->cfg->jail) < 0) {
		vm_request_exit(vm, EXIT_ERROR, "%s", errmsg());
		return EXIT_ERROR;
	}
	for (int i = 0; i < vm->nvcpus; i++)
		if (vcpu_start(&vm->vcpus[i]) < 0) {
			vm_request_exit(vm, EXIT_ERROR, "%s", errmsg());
			break;
		}
	/* A restored guest's clock, entropy and name are stale until its agent
	 * resyncs; a booted one is ready now. */
	if (vm->restored && vm->cfg->resync && vm->cfg->vsock_path)
		resync_start(vm);
	else
		vm_set_ready(vm);
	while (atomic_load(&vm->exit_code) < 0)
		if (ev_run_once(&vm->loop, 1000, &vm->paused) < 0) {
			vm_request_exit(vm, EXIT_ERROR, "event loop: %s", errmsg());
			break;
		}
	return atomic_load(&vm->exit_code);
}
