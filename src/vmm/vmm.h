/*
 * vmm.h: the state of one microVM, shared by every part of kiln-vmm.
 *
 * Threads: the main thread runs the event loop (devices' queue work, the
 * control socket, TAP and vsock sockets); each vCPU has its own thread that
 * sits in KVM_RUN and handles port and MMIO exits. Device state is touched
 * by both, so every device access happens under vm->dev_lock.
 */
#ifndef KILN_VMM_H
#define KILN_VMM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "vmm/bus.h"
#include "vmm/config.h"
#include "vmm/evloop.h"
#include "vmm/exitlog.h"
#include "vmm/memory.h"

#define MAX_VCPUS      32
#define MAX_VIRTIO     16

/* Guest-physical layout (see docs/vmm.md). */
#define GDT_ADDR        0x500
#define START_INFO_ADDR 0x6000
#define MODLIST_ADDR    0x6040
#define MEMMAP_ADDR     0x7000
#define CMDLINE_ADDR    0x20000
#define CMDLINE_MAX     4096
#define LOW_RAM_END     0x9fc00
#define ACPI_BASE       0xe0000     /* RSDP here, other tables after it */
#define ACPI_END        0x100000
#define HIMEM_START     0x100000
#define MMIO_HOLE       0xc0000000ULL   /* 3 GiB: RAM stops here, resumes at 4 GiB */
#define MMIO_HOLE_END   0x100000000ULL
#define VIRTIO_MMIO_BASE 0xd0000000ULL
#define VIRTIO_MMIO_SIZE 0x1000
#define PVPANIC_ADDR    0xd0f00000ULL
#define IOAPIC_ADDR     0xfec00000
#define LAPIC_ADDR      0xfee00000
#define TSS_ADDR        0xfffbd000
#define IDMAP_ADDR      0xfffbc000

/* Legacy interrupt lines and the first GSI handed to virtio devices. */
#define GSI_I8042   1
#define GSI_SERIAL  4
#define GSI_VIRTIO_FIRST 5
#define GSI_VIRTIO_LAST  23

/* I/O ports of the hardware-reduced ACPI sleep and reset registers. */
#define PORT_ACPI_SLEEP_CTL 0x3c0
#define PORT_ACPI_SLEEP_STS 0x3c1
#define PORT_ACPI_RESET     0x3c2
#define ACPI_RESET_VALUE    0x01

/* Exit statuses of kiln-vmm (docs/vmm.md). */
enum vmm_exit {
	EXIT_POWEROFF = 0,     /* guest powered off, or shutdown on request */
	EXIT_ERROR = 1,        /* the VMM failed while running */
	EXIT_CONFIG = 2,       /* bad configuration: nothing was started */
	EXIT_REBOOT = 3,       /* guest asked for a reboot */
	EXIT_TRIPLE_FAULT = 4, /* guest triple-faulted, or KVM refused to run it */
	EXIT_PANIC = 5,        /* guest kernel panicked (pvpanic) */
};

struct vm;

struct vcpu {
	struct vm *vm;
	int index;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;
	bool io_pending;             /* an I/O exit KVM completes on the next KVM_RUN */
	struct exitlog exits;        /* the last exits, for a post-mortem */
	int stats_fd;                /* KVM's statistics (kvmstats.c), or -1 */
	timer_t kick_timer;          /* signals this vCPU's thread alone (vcpus_kick) */
	atomic_bool kick_ready;      /* kick_timer is made */
};

struct serial;
struct virtio_dev;
struct ctl;

struct vm {
	const struct vmm_config *cfg;
	int kvm_fd, vm_fd;
	int run_size;
	struct guest_mem mem;
	struct kvm_cpuid2 *cpuid;      /* supported CPUID, before per-vCPU edits */
	struct vcpu vcpus[MAX_VCPUS];
	int nvcpus;

	struct bus pio, mmio;
	pthread_mutex_t dev_lock;
	struct evloop loop;

	struct serial *serial;
	struct ctl *ctl;
	struct virtio_dev *virtio[MAX_VIRTIO];
	int nvirtio;
	/* The volume slots (volume.h), also in virtio[]: slots[i] is slot i. */
	struct virtio_dev *slots[VOLUME_SLOTS_MAX];
	int nslots;

	/* How the VM ends: the first reason recorded wins; writing exit_efd
	 * wakes the main loop, which stops the vCPUs. */
	atomic_int exit_code;          /* -1 while running */
	int exit_efd;
	char exit_reason[256];

	/* Pausing: vCPU threads park on pause_cond while paused is set. */
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	bool pause_requested;
	int vcpus_parked;
	int vcpus_running;
	bool paused;
	atomic_bool stopping;
	bool ready;                    /* booted, or restored and resynced */
	bool restored;                 /* built from a snapshot or a fork */
	int ready_fd;                  /* a spawner waits here for "ready PID MS" */
	uint64_t ready_from_ns;        /* ready time is measured from here */
	unsigned forks;                /* live forks so far, to name disk layers */
	/* The snapshot that guest memory is tracked against: a diff snapshot
	 * holds the pages changed since it. Empty until there is one. */
	char snap_base[4096];
	bool dirty_logging;

	uint64_t start_ns;
};

/* vm.c: the VM's life. vm_build returns 0 or the exit status to use. */
void vm_init(struct vm *vm, const struct vmm_config *cfg);
int vm_build(struct vm *vm);
/* vm_build_restored: the same from a snapshot payload, with guest memory
 * already in vm->mem. */
int vm_build_restored(struct vm *vm, const uint8_t *payload, size_t len);
/* Tests: make the restored guest triple-fault at its first event. */
void vm_test_triple_fault(struct vm *vm);
int vm_run(struct vm *vm);
void vm_teardown(struct vm *vm);

/* vm_request_exit: record why the VM ends (first caller wins). Safe from
 * any thread. */
void vm_request_exit(struct vm *vm, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* vm_flush_disks: make every disk write the guest completed durable. */
int vm_flush_disks(struct vm *vm);
/* vm_set_ready: the VM is usable; tell whoever waits. */
void vm_set_ready(struct vm *vm);

/* Pause and resume every vCPU; both return once all vCPUs have stopped or
 * been released. Called from the main thread only. */
int vm_pause(struct vm *vm);
void vm_resume(struct vm *vm);

/* kvm.c */
int kvm_open_vm(struct vm *vm);
int kvm_set_memory(struct vm *vm);
int kvm_irq_line(struct vm *vm, int gsi, int level);
int kvm_dirty_logging(struct vm *vm, bool on);
int kvm_collect_dirty(struct vm *vm, uint64_t *bits);

/* cpuid.c */
int cpuid_init(struct vm *vm);
int cpuid_set_vcpu(struct vm *vm, struct vcpu *v);

/* vcpu.c */
int vcpu_create(struct vm *vm, int index);
int vcpu_setup_boot(struct vcpu *v, uint32_t entry, uint32_t start_info);
int vcpu_start(struct vcpu *v);
void vcpus_kick(struct vm *vm);

/* boot.c */
int boot_load(struct vm *vm, uint32_t *entry);

/* acpi.c */
int acpi_build(struct vm *vm);

uint64_t now_ns(void);

#endif
