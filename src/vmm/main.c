/*
 * kiln-vmm: one microVM per process, directly on KVM.
 *
 * main() parses and checks the configuration, then hands over to vm.c.
 * Exit statuses are listed in vmm.h and docs/vmm.md.
 */
#include "vmm/vmm.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
	if (config_check(&cfg, max_vcpus > 0 ? max_vcpus : 1) < 0) {
		fprintf(stderr, "kiln-vmm: %s\n", errmsg());
		return EXIT_CONFIG;
	}

	static struct vm vm;
	vm_init(&vm, &cfg);
	int status = vm_build(&vm);
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
