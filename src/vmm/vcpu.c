/*
 * vcpu: creating vCPUs, putting the boot processor in the state the PVH
 * boot protocol asks for, and the per-vCPU thread that runs KVM_RUN and
 * dispatches port and MMIO exits to the device buses.
 *
 * Stopping a vCPU (to pause or to exit) uses KVM's immediate_exit: the
 * kick signal's handler sets it, so a kick that lands just before KVM_RUN
 * is not lost, and the loop clears it only before re-checking its flags.
 *
 * The kick is a POSIX timer of the vCPU's thread (SIGEV_THREAD_ID), not
 * pthread_kill: the kernel lets a timer signal only a thread of its own
 * process, so the VMM needs no tgkill, which names any process by pid.
 * Its seccomp filter allows none (jail.c): a filter cannot hold "my own
 * pid" for the children a VMM forks, which inherit it.
 */
#include "vmm/vmm.h"
#include "vmm/jail.h"
#include "common/err.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#define KICK_SIGNAL SIGUSR1

static __thread struct kvm_run *current_run;

static void kick_handler(int sig)
{
	(void)sig;
	if (current_run)
		current_run->immediate_exit = 1;
}

int vcpu_create(struct vm *vm, int index)
{
	struct vcpu *v = &vm->vcpus[index];
	v->vm = vm;
	v->index = index;
	v->stats_fd = -1;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, index);
	if (v->fd < 0)
		return errf_sys("KVM_CREATE_VCPU %d", index);
	/* Now, before the vCPU runs: a vCPU ioctl waits for the vCPU's mutex,
	 * which KVM_RUN holds for as long as the guest runs or halts, so asked
	 * later from the main thread it could stall the VMM's event loop
	 * until the guest's next exit to us. Reading the file needs no lock.
	 * -1 on kernels before 5.14: `stats` then says so (kvmstats.c). */
	v->stats_fd = ioctl(v->fd, KVM_GET_STATS_FD, NULL);
	v->run = mmap(NULL, (size_t)vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED) {
		v->run = NULL;
		return errf_sys("mmap vCPU %d", index);
	}
	/* A forked child builds its own vCPUs; it must not inherit ours. */
	madvise(v->run, (size_t)vm->run_size, MADV_DONTFORK);
	memset(&v->exits, 0, sizeof v->exits);
	exitlog_enable(v);
	int rc = cpuid_set_vcpu(vm, v);
	if (rc < 0)
		return rc;

	/* Boot MSRs, as Firecracker and kvmtool set them. */
	static const uint32_t zero_msrs[] = {
		0x174, 0x175, 0x176,           /* SYSENTER_CS/ESP/EIP */
		0xc0000081, 0xc0000082, 0xc0000083, 0xc0000084, /* STAR LSTAR CSTAR SFMASK */
		0xc0000102,                    /* KERNEL_GS_BASE */
		0x10,                          /* TSC */
	};
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[16];
	} msrs = { 0 };
	uint32_t n = 0;
	for (size_t i = 0; i < sizeof zero_msrs / sizeof zero_msrs[0]; i++)
		msrs.e[n++] = (struct kvm_msr_entry){ .index = zero_msrs[i], .data = 0 };
	msrs.e[n++] = (struct kvm_msr_entry){ .index = 0x1a0, .data = 1 };           /* MISC_ENABLE: fast strings */
	msrs.e[n++] = (struct kvm_msr_entry){ .index = 0x2ff, .data = (1 << 11) | 6 }; /* MTRRdefType: WB */
	msrs.hdr.nmsrs = n;
	if (ioctl(v->fd, KVM_SET_MSRS, &msrs) != (int)n)
		return errf(EINVAL, "KVM_SET_MSRS on vCPU %d: not every boot MSR was accepted", index);

	struct kvm_fpu fpu = { .fcw = 0x37f, .mxcsr = 0x1f80 };
	if (ioctl(v->fd, KVM_SET_FPU, &fpu) < 0)
		return errf_sys("KVM_SET_FPU");

	/* LINT0 delivers the legacy PIC (ExtINT), LINT1 NMIs. */
	struct kvm_lapic_state lapic;
	if (ioctl(v->fd, KVM_GET_LAPIC, &lapic) < 0)
		return errf_sys("KVM_GET_LAPIC");
	uint32_t *lvt0 = (uint32_t *)&lapic.regs[0x350];
	uint32_t *lvt1 = (uint32_t *)&lapic.regs[0x360];
	*lvt0 = (*lvt0 & ~0x700u) | (7u << 8);
	*lvt1 = (*lvt1 & ~0x700u) | (4u << 8);
	if (ioctl(v->fd, KVM_SET_LAPIC, &lapic) < 0)
		return errf_sys("KVM_SET_LAPIC");
	return 0;
}

static uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit)
{
	return (((uint64_t)base & 0xff000000) << 32) | (((uint64_t)flags & 0xf0ff) << 40) |
	       (((uint64_t)limit & 0xf0000) << 32) | (((uint64_t)base & 0xffffff) << 16) |
	       ((uint64_t)limit & 0xffff);
}

static struct kvm_segment segment(uint64_t desc, uint16_t selector)
{
	uint32_t limit = (uint32_t)((desc & 0xffff) | ((desc >> 32) & 0xf0000));
	if ((desc >> 55) & 1)                 /* 4 KiB granularity: KVM wants bytes */
		limit = (limit << 12) | 0xfff;
	return (struct kvm_segment){
		.base = ((desc >> 16) & 0xffffff) | ((desc >> 32) & 0xff000000),
		.limit = limit,
		.selector = selector,
		.type = (desc >> 40) & 0xf,
		.present = (desc >> 47) & 1,
		.dpl = (desc >> 45) & 3,
		.db = (desc >> 54) & 1,
		.s = (desc >> 44) & 1,
		.l = (desc >> 53) & 1,
		.g = (desc >> 55) & 1,
	};
}

/* vcpu_setup_boot: the PVH entry state. 32-bit flat protected mode, paging
 * off, %ebx pointing at hvm_start_info. Only the boot processor gets it;
 * the others wait for INIT/SIPI in the in-kernel LAPIC. */
int vcpu_setup_boot(struct vcpu *v, uint32_t entry, uint32_t start_info)
{
	uint64_t gdt[4] = {
		0,
		gdt_entry(0xc09b, 0, 0xfffff),    /* 0x08: code, 32-bit, 4 GiB */
		gdt_entry(0xc093, 0, 0xfffff),    /* 0x10: data */
		gdt_entry(0x008b, 0, 0x67),       /* 0x18: TSS */
	};
	void *g = gpa_ptr(&v->vm->mem, GDT_ADDR, sizeof gdt);
	if (!g)
		return errf(EINVAL, "no guest memory for the GDT");
	memcpy(g, gdt, sizeof gdt);

	struct kvm_sregs sregs;
	if (ioctl(v->fd, KVM_GET_SREGS, &sregs) < 0)
		return errf_sys("KVM_GET_SREGS");
	sregs.cs = segment(gdt[1], 0x08);
	sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = segment(gdt[2], 0x10);
	sregs.tr = segment(gdt[3], 0x18);
	sregs.gdt.base = GDT_ADDR;
	sregs.gdt.limit = sizeof gdt - 1;
	sregs.idt.base = 0;
	sregs.idt.limit = 0;
	sregs.cr0 = 0x11;                 /* PE | ET */
	sregs.cr3 = 0;
	sregs.cr4 = 0;
	sregs.efer = 0;
	if (ioctl(v->fd, KVM_SET_SREGS, &sregs) < 0)
		return errf_sys("KVM_SET_SREGS");

	struct kvm_regs regs = { .rip = entry, .rbx = start_info, .rflags = 2 };
	if (ioctl(v->fd, KVM_SET_REGS, &regs) < 0)
		return errf_sys("KVM_SET_REGS");
	return 0;
}

static void handle_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	bool out = run->io.direction == KVM_EXIT_IO_OUT;
	pthread_mutex_lock(&v->vm->dev_lock);
	for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size)
		bus_access(&v->vm->pio, run->io.port, data, run->io.size, out);
	pthread_mutex_unlock(&v->vm->dev_lock);
}

static void handle_mmio(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	pthread_mutex_lock(&v->vm->dev_lock);
	bus_access(&v->vm->mmio, run->mmio.phys_addr, run->mmio.data,
		   run->mmio.len > 8 ? 8 : run->mmio.len, run->mmio.is_write);
	pthread_mutex_unlock(&v->vm->dev_lock);
}

/* complete_io: KVM finishes the instruction of an I/O or MMIO exit (the
 * value read into RAX, RIP past it) only on the next KVM_RUN. Do that now,
 * with immediate_exit so that no further guest instruction runs, as
 * Firecracker does before a snapshot: state read with the exit pending
 * would have the instruction half done, and a restored or forked guest
 * would run it a second time. */
static void complete_io(struct vcpu *v)
{
	for (int i = 0; i < 64 && v->io_pending; i++) {
		v->run->immediate_exit = 1;
		int rc = ioctl(v->fd, KVM_RUN, 0);
		v->run->immediate_exit = 0;
		/* A string instruction may need another round of I/O. */
		if (rc == 0 && v->run->exit_reason == KVM_EXIT_IO)
			handle_io(v);
		else if (rc == 0 && v->run->exit_reason == KVM_EXIT_MMIO)
			handle_mmio(v);
		else
			v->io_pending = false;
	}
	v->io_pending = false;
}

/* park: wait while a pause is requested, I/O completed first. Returns
 * false when stopping. */
static bool park(struct vcpu *v)
{
	struct vm *vm = v->vm;
	pthread_mutex_lock(&vm->pause_lock);
	while (vm->pause_requested && !atomic_load(&vm->stopping) && v->io_pending) {
		pthread_mutex_unlock(&vm->pause_lock);
		complete_io(v);
		pthread_mutex_lock(&vm->pause_lock);
	}
	if (vm->pause_requested && !atomic_load(&vm->stopping)) {
		vm->vcpus_parked++;
		pthread_cond_broadcast(&vm->pause_cond);
		while (vm->pause_requested && !atomic_load(&vm->stopping))
			pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
		vm->vcpus_parked--;
		pthread_cond_broadcast(&vm->pause_cond);
	}
	pthread_mutex_unlock(&vm->pause_lock);
	return !atomic_load(&vm->stopping);
}

static void *vcpu_loop(struct vcpu *v);

/* The kick's timer: a signal to this thread alone. Kicks before it is
 * made need no signal: the thread has not reached KVM_RUN, and park()
 * sees why it was kicked. It lives as long as the process (a forked
 * child, which inherits no timer, makes its own). */
static int make_kick_timer(struct vcpu *v)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = KICK_SIGNAL };
	sev._sigev_un._tid = gettid();	/* sigev_notify_thread_id, which glibc 2.36 does not name */
	if (timer_create(CLOCK_MONOTONIC, &sev, &v->kick_timer) < 0)
		return errf_sys("timer_create");
	atomic_store(&v->kick_ready, true);
	return 0;
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	int rc = make_kick_timer(v);
	if (rc == 0 && (v->vm->cfg->jail.root || v->vm->cfg->jailed))
		rc = jail_vcpu_thread();
	if (rc < 0)
		vm_request_exit(v->vm, EXIT_ERROR, "vCPU %d: %s", v->index, errmsg());
	else
		vcpu_loop(v);
	/* A vCPU that is gone no longer counts towards a pause. */
	pthread_mutex_lock(&v->vm->pause_lock);
	v->vm->vcpus_running--;
	pthread_cond_broadcast(&v->vm->pause_cond);
	pthread_mutex_unlock(&v->vm->pause_lock);
	return NULL;
}

static void *vcpu_loop(struct vcpu *v)
{
	struct vm *vm = v->vm;
	current_run = v->run;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	for (;;) {
		v->run->immediate_exit = 0;
		if (!park(v))
			break;
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR)
				v->io_pending = false;   /* KVM completed it before it returned */
			if (errno == EINTR || errno == EAGAIN)
				continue;
			vm_request_exit(vm, EXIT_ERROR, "KVM_RUN on vCPU %d: %s", v->index, strerror(errno));
			break;
		}
		struct kvm_run *run = v->run;
		v->io_pending = false;
		exitlog_record(v);
		switch (run->exit_reason) {
		case KVM_EXIT_IO:
			handle_io(v);
			v->io_pending = true;
			break;
		case KVM_EXIT_MMIO:
			handle_mmio(v);
			v->io_pending = true;
			break;
		case KVM_EXIT_HLT:
		case KVM_EXIT_INTR:
		case KVM_EXIT_IRQ_WINDOW_OPEN:
			break;
		case KVM_EXIT_SHUTDOWN: {
			struct kvm_regs regs = { 0 };
			struct kvm_sregs sregs = { 0 };
			ioctl(v->fd, KVM_GET_REGS, &regs);
			ioctl(v->fd, KVM_GET_SREGS, &sregs);
			/* On AMD, KVM INITs the vCPU on a shutdown intercept (the
			 * VMCB is undefined after one): what it reads back then is
			 * the reset state, not where the guest faulted. */
			bool reset = regs.rip == 0xfff0 && sregs.cr0 == 0x10 && sregs.efer == 0;
			exitlog_dump(vm, "guest triple fault (KVM_EXIT_SHUTDOWN)");
			vm_request_exit(vm, EXIT_TRIPLE_FAULT,
					"guest triple fault on vCPU %d (%s rip 0x%llx rsp 0x%llx cr0 0x%llx cr3 0x%llx cr4 0x%llx efer 0x%llx)",
					v->index, reset ? "KVM reset the vCPU, so where it faulted is lost;" : "at",
					(unsigned long long)regs.rip, (unsigned long long)regs.rsp,
					(unsigned long long)sregs.cr0, (unsigned long long)sregs.cr3,
					(unsigned long long)sregs.cr4, (unsigned long long)sregs.efer);
			return NULL;
		}
		case KVM_EXIT_SYSTEM_EVENT:
			switch (run->system_event.type) {
			case KVM_SYSTEM_EVENT_RESET:
				vm_request_exit(vm, EXIT_REBOOT, "guest reboot");
				break;
			case KVM_SYSTEM_EVENT_CRASH:
				exitlog_dump(vm, "guest crash (KVM_SYSTEM_EVENT_CRASH)");
				vm_request_exit(vm, EXIT_PANIC, "guest crash");
				break;
			default:
				vm_request_exit(vm, EXIT_POWEROFF, "guest power-off");
			}
			return NULL;
		case KVM_EXIT_FAIL_ENTRY:
			exitlog_dump(vm, "KVM_EXIT_FAIL_ENTRY");
			vm_request_exit(vm, EXIT_TRIPLE_FAULT, "KVM could not enter the guest on vCPU %d (reason 0x%llx)",
					v->index, (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
			return NULL;
		case KVM_EXIT_INTERNAL_ERROR: {
			char why[160];
			int len = snprintf(why, sizeof why, "KVM internal error %u on vCPU %d, data",
					   run->internal.suberror, v->index);
			for (uint32_t k = 0; k < run->internal.ndata && k < 8 && len > 0 && len < (int)sizeof why; k++)
				len += snprintf(why + len, sizeof why - (size_t)len, " 0x%llx",
						(unsigned long long)run->internal.data[k]);
			exitlog_dump(vm, why);
			vm_request_exit(vm, EXIT_TRIPLE_FAULT, "KVM internal error %u on vCPU %d",
					run->internal.suberror, v->index);
			return NULL;
		}
		default:
			vm_request_exit(vm, EXIT_ERROR, "unexpected KVM exit %u on vCPU %d",
					run->exit_reason, v->index);
			return NULL;
		}
	}
	return NULL;
}

int vcpu_start(struct vcpu *v)
{
	static bool handler_installed;
	if (!handler_installed) {
		struct sigaction sa = { .sa_handler = kick_handler };
		sigemptyset(&sa.sa_mask);
		if (sigaction(KICK_SIGNAL, &sa, NULL) < 0)
			return errf_sys("sigaction");
		handler_installed = true;
	}
	/* vCPU threads need little stack; keep the VMM's footprint small. */
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_mutex_lock(&v->vm->pause_lock);
	v->vm->vcpus_running++;
	pthread_mutex_unlock(&v->vm->pause_lock);
	int rc = pthread_create(&v->thread, &attr, vcpu_thread, v);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pthread_mutex_lock(&v->vm->pause_lock);
		v->vm->vcpus_running--;
		pthread_mutex_unlock(&v->vm->pause_lock);
		return errf(rc, "cannot start the thread of vCPU %d", v->index);
	}
	v->started = true;
	return 0;
}

void vcpus_kick(struct vm *vm)
{
	for (int i = 0; i < vm->nvcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		if (!v->started)
			continue;
		v->run->immediate_exit = 1;
		atomic_thread_fence(memory_order_seq_cst);
		if (atomic_load(&v->kick_ready)) {
			struct itimerspec soon = { .it_value = { .tv_nsec = 1 } };
			timer_settime(v->kick_timer, 0, &soon, NULL);
		}
	}
}
