/*
 * kiln-vmm: one microVM per process, directly on KVM.
 *
 * main() parses and checks the configuration, then hands over to vm.c.
 * Exit statuses are listed in vmm.h and docs/vmm.md.
 */
#include "vmm/vmm.h"
#include "vmm/snapshot.h"
#include "vmm/zygote.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

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
	if (cfg.restore_dir && (snapshot_read(cfg.restore_dir, &payload, &len) < 0 ||
				snapshot_info(payload, len, &info) < 0 ||
				config_from_snapshot(&cfg, &info) < 0)) {
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
	static struct vm vm;
	vm_init(&vm, &cfg);
	int status;
	if (!cfg.restore_dir)
		status = vm_build(&vm);
	else if (snapshot_memory(&vm, cfg.restore_dir, payload, len, false) < 0)
		status = EXIT_CONFIG;
	else
		status = vm_build_restored(&vm, payload, len);
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
