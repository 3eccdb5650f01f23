/*
 * kiln-vmm: one microVM per process, directly on KVM.
 *
 * main() parses and checks the configuration, then hands over to vm.c.
 * Exit statuses are listed in vmm.h and docs/vmm.md.
 */
#include "vmm/vmm.h"
#include "vmm/snapshot.h"
#include "vmm/zygote.h"
#include "vmm/jail.h"
#include "vmm/devices/virtio_devices.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* wait_for: the part of a jailed kiln-vmm that stays outside its PID
 * namespace: pass on SIGTERM/SIGINT, then exit as the VMM did. */
static void __attribute__((noreturn)) wait_for(pid_t pid)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (;;) {
		int sig;
		sigwait(&set, &sig);
		if (sig != SIGCHLD) {
			kill(pid, sig);
			continue;
		}
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	}
}

/* enter_jail: /dev/kvm and the TAP first (the jail has neither), then the
 * namespaces; the VMM itself runs as PID 1 of a new PID namespace. */
static int enter_jail(struct vmm_config *cfg)
{
	cfg->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (cfg->kvm_fd < 0)
		return errf_sys("cannot open /dev/kvm");
	int rc = jail_join(&cfg->jail);
	if (rc < 0)
		return rc;
	if (cfg->tap && (cfg->tap_fd = virtio_net_tap_open(cfg->tap)) < 0)
		return cfg->tap_fd;
	if (cfg->jail.no_pidns)
		return jail_enter(&cfg->jail);
	if (unshare(CLONE_NEWPID) < 0)
		return errf_sys("jail: unshare PID namespace");
	pid_t pid = fork();
	if (pid < 0)
		return errf_sys("fork");
	if (pid > 0)
		wait_for(pid);
	/* PID 1 ignores signals it has no handler for; the VMM's signalfd
	 * needs them delivered, so give them one. */
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sa.sa_handler = jail_noop_handler;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	return jail_enter(&cfg->jail);
}

int main(int argc, char **argv)
{
	struct vmm_config cfg;
	int rc = config_parse(&cfg, argc, argv);
	if (rc == 1)
		return 0;
	if (rc < 0) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		return EXIT_CONFIG;
	}

	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		fprintf(stderr, "kiln-vmm: cannot open /dev/kvm: %s\n", strerror(errno));
		return EXIT_ERROR;
	}
	int max_vcpus = ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
	if (max_vcpus <= 0)
		max_vcpus = ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
	close(kvm);
	if (cfg.zygote_dir)
		return zygote_main(&cfg, max_vcpus > 0 ? max_vcpus : 1);

	uint8_t *payload = NULL;
	size_t len = 0;
	struct snap_info info;
	struct snap_volumes vols;
	if (cfg.restore_dir && (snapshot_read(cfg.restore_dir, &payload, &len) < 0 ||
				snapshot_info(payload, len, &info) < 0 ||
				snapshot_volumes(payload, len, &vols) < 0 ||
				config_from_snapshot(&cfg, &info, &vols) < 0)) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		return EXIT_CONFIG;
	}
	if (config_check(&cfg, max_vcpus > 0 ? max_vcpus : 1) < 0) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		return EXIT_CONFIG;
	}

	static char base[4096];
	if (cfg.restore_dir && realpath(cfg.restore_dir, base))
		cfg.snap_base = base;
	if (cfg.jail.root && enter_jail(&cfg) < 0) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		return EXIT_CONFIG;
	}
	static struct vm vm;
	vm_init(&vm, &cfg);
	int status;
	if (!cfg.restore_dir)
		status = vm_build(&vm);
	else if (snapshot_memory(&vm, cfg.restore_dir, payload, len, false) < 0)
		status = EXIT_CONFIG;
	else if ((status = vm_build_restored(&vm, payload, len)) == 0 && cfg.test_triple_fault)
		vm_test_triple_fault(&vm);
	free(payload);
	if (status != 0) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		vm_teardown(&vm);
		return status;
	}
	status = vm_run(&vm);
	vm_teardown(&vm);
	fprintf(stderr, "kiln-vmm: %s (exit status %d)\n", vm.exit_reason, status);
	return status;
}
