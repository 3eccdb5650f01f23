#include "vmm/jail.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <linux/if_tun.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KVMIO_TYPE  0xae00    /* the ioctl "type" byte of KVM requests */

/* The ioctls of type 'T' the VMM makes: the TAP's (virtio_net.c), and
 * TCGETS (stdio asks whether stderr is a terminal). Not TIOCSTI, not any
 * other terminal request. */
static const unsigned long tty_tun_requests[] = {
	TUNSETIFF, TUNGETIFF, TUNSETVNETHDRSZ, TUNSETOFFLOAD, TCGETS,
};

/* clone(2) flags the VMM uses: glibc's pthread_create (vCPU and resync
 * threads), and fork() (live forks and zygote spawns, src/vmm/fork.c and
 * child.c). Anything else (new namespaces, CLONE_PARENT, a shared mm that
 * is not a thread...) is refused; clone3, whose flags seccomp cannot read,
 * fails with ENOSYS so glibc falls back to clone, as with Firecracker. */
#define THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | \
		      CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)
#define FORK_FLAGS (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD)

static int mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int rc = mkdir(path, 0755);
		*p = '/';
		if (rc < 0 && errno != EEXIST)
			return -errno;
	}
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int bind_into(const char *root, const char *src, bool ro)
{
	char dst[PATH_MAX];
	if (src[0] != '/' || (size_t)snprintf(dst, sizeof dst, "%s%s", root, src) >= sizeof dst)
		return errf(EINVAL, "jail bind %s: must be an absolute path", src);
	if (mkdir_p(dst) < 0)
		return errf_sys("jail: mkdir %s", dst);
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return errf_sys("jail: bind %s", src);
	if (ro && mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		return errf_sys("jail: read-only %s", src);
	if (!ro && mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) < 0)
		return errf_sys("jail: remount %s", src);
	return 0;
}

static int join_cgroup(const char *dir)
{
	/* cgroup v2 and v1 both take the pid in cgroup.procs. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("jail: cgroup %s", dir);
	char pid[32];
	int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	int rc = write(fd, pid, (size_t)n) == n ? 0 : errf_sys("jail: join cgroup %s", dir);
	close(fd);
	return rc;
}

int jail_join(const struct jail_config *j)
{
	if (!j->root)
		return 0;
	if (j->uid == 0 || j->gid == 0)
		return errf(EINVAL, "jail: the VMM must run as an unprivileged uid and gid, not 0");
	int rc;
	if (j->netns) {
		int fd = open(j->netns, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return errf_sys("jail: network namespace %s", j->netns);
		rc = setns(fd, CLONE_NEWNET);
		close(fd);
		if (rc < 0)
			return errf_sys("jail: join network namespace %s", j->netns);
	}
	if (j->cgroup && (rc = join_cgroup(j->cgroup)) < 0)
		return rc;
	return 0;
}

int jail_enter(const struct jail_config *j)
{
	if (!j->root)
		return 0;
	int rc;
	if (unshare(CLONE_NEWNS) < 0)
		return errf_sys("jail: unshare mount namespace");
	/* Nothing we mount may leak back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return errf_sys("jail: make / private");
	if (mount("tmpfs", j->root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=0755") < 0)
		return errf_sys("jail: tmpfs on %s", j->root);
	for (int i = 0; i < j->nro_binds; i++)
		if ((rc = bind_into(j->root, j->ro_binds[i], true)) < 0)
			return rc;
	for (int i = 0; i < j->nbinds; i++)
		if ((rc = bind_into(j->root, j->binds[i], false)) < 0)
			return rc;
	char old[PATH_MAX];
	snprintf(old, sizeof old, "%s/.old-root", j->root);
	if (mkdir(old, 0700) < 0 && errno != EEXIST)
		return errf_sys("jail: mkdir %s", old);
	if (syscall(SYS_pivot_root, j->root, old) < 0)
		return errf_sys("jail: pivot_root %s", j->root);
	if (chdir("/") < 0 || umount2("/.old-root", MNT_DETACH) < 0 || rmdir("/.old-root") < 0)
		return errf_sys("jail: drop the old root");
	/* Read-only from here on: the VMM writes only into its binds. */
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return errf_sys("jail: remount / read-only");

	/* The sockets it binds now, as root, it must still connect to once it
	 * is unprivileged (the vsock bridge resyncs the guest through its own
	 * socket): they are made open to all, and kept private by the
	 * directory they are in, which belongs to the jail's uid alone. */
	umask(0);
	struct rlimit nofile = { 4096, 4096 }, core = { 0, 0 }, nproc = { 256, 256 };
	if (setrlimit(RLIMIT_NOFILE, &nofile) < 0 || setrlimit(RLIMIT_CORE, &core) < 0)
		return errf_sys("jail: setrlimit");
	(void)nproc;   /* RLIMIT_NPROC counts the uid's processes; the pids cgroup bounds us */
	return 0;
}

void jail_noop_handler(int sig)
{
	(void)sig;
}

/* ---- seccomp ------------------------------------------------------------ */

static char *syscall_names[512];

static void sigsys(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	int nr = si->si_syscall;
	const char *name = nr >= 0 && nr < 512 && syscall_names[nr] ? syscall_names[nr] : "?";
	char msg[160];
	/* Ends like kiln-vmm's other last lines, "(exit status N)": kilnd
	 * reads such a line as why a VMM that is not its child ended. */
	int n = snprintf(msg, sizeof msg, "kiln-vmm: seccomp: forbidden system call %s (%d); killed (exit status %d)\n",
			 name, nr, 128 + SIGSYS);
	if (write(2, msg, (size_t)n) < 0) {
		/* nothing more to do */
	}
	syscall(SYS_exit_group, 128 + SIGSYS);
}

static int install_sigsys(void)
{
	for (int nr = 0; nr < 512; nr++)
		if (!syscall_names[nr])
			syscall_names[nr] = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
	struct sigaction sa = { .sa_sigaction = sigsys, .sa_flags = SA_SIGINFO };
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGSYS, &sa, NULL) < 0 ? errf_sys("sigaction SIGSYS") : 0;
}

static const char *const common_calls[] = {
	"read", "write", "readv", "writev", "close", "futex", "rt_sigreturn", "rt_sigprocmask",
	"clock_gettime", "gettimeofday", "exit", "exit_group", "mmap", "munmap", "mprotect",
	"madvise", "brk", "getpid", "gettid", "sched_yield", "restart_syscall",
	"epoll_ctl", "nanosleep", "clock_nanosleep", "rseq", "set_robust_list", "timer_settime",
};

static const char *const main_calls[] = {
	"pread64", "pwrite64", "preadv", "pwritev", "close_range", "openat", "open", "fstat",
	"newfstatat", "statx", "lstat", "stat", "lseek", "mremap", "fsync", "fdatasync",
	"ftruncate", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat",
	"rmdir", "readlink", "readlinkat", "getcwd", "fcntl", "poll", "ppoll", "epoll_create1",
	"epoll_wait", "epoll_pwait", "eventfd2", "timerfd_create", "timerfd_settime",
	"signalfd4", "bind", "listen", "accept4", "connect", "sendto", "sendmsg", "recvfrom",
	"recvmsg", "shutdown", "setsockopt", "getsockopt", "getsockname",
	"wait4", "getrandom", "dup", "dup2", "dup3", "pipe2", "rt_sigaction", "sigaltstack",
	"sched_getaffinity", "uname", "sysinfo", "membarrier", "timer_create",
	"copy_file_range", "fallocate", "sync_file_range", "fadvise64", "fstatfs",
};

static const char *const own_uid_calls[] = { "setresuid", "setresgid", "capset", "getuid", "geteuid", "getgid" };

static int add_calls(scmp_filter_ctx ctx, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;                 /* not on this architecture */
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		if (rc < 0)
			return errf(-rc, "seccomp: allow %s", names[i]);
	}
	return 0;
}

/* Signals. A filter holds constants, and one loaded in a VMM that forks
 * (a live fork, child.c) is inherited by every child: "tgkill only of my
 * own pid" would be the parent's pid in each child, whose own kicks it
 * would then refuse, and filters cannot be widened. So the VMM is built
 * to need no pid-naming signal of its own: a vCPU is kicked by a timer of
 * its thread (vcpu.c), which the kernel lets signal only its own process,
 * so tgkill (and tkill, rt_tgsigqueueinfo) are refused outright; an
 * abort() ends through sigsys() too (exit status 159). kill stays for
 * one use, child_discard's SIGKILL of a child VM that failed to start
 * (child.c): only SIGKILL, only to one process (no process group, no -1
 * broadcast). Which processes that reaches the
 * kernel decides by uid: the jail's uid is the sandbox's own, shared
 * only with the VMs it forked, so a VMM taken over by its guest can kill
 * no process but its own family (Firecracker's VMM, which never forks,
 * allows no kill at all). */
static int allow_signals(scmp_filter_ctx ctx)
{
	/* pid < 2^31: no sign bit (a process group, -1), no high bits the
	 * kernel would drop. pid 0, its own process group, reaches no
	 * process that a pid could not: the kernel's uid check is per
	 * process. */
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 2,
				  SCMP_A0(SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)0x7fffffff, 0),
				  SCMP_A1(SCMP_CMP_EQ, SIGKILL));
	return rc < 0 ? errf(-rc, "seccomp: the kill rule") : 0;
}

/* load_filter: everything not allowed traps into sigsys(). ioctl is
 * allowed for KVM requests and the few TUN/terminal ones above; clone
 * with the thread and fork flags above only; signals as allow_signals. */
static int load_filter(bool main_thread)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx)
		return errf(ENOMEM, "seccomp_init");
	int rc = add_calls(ctx, common_calls, sizeof common_calls / sizeof common_calls[0]);
	if (rc == 0 && main_thread)
		rc = add_calls(ctx, main_calls, sizeof main_calls / sizeof main_calls[0]);
	if (rc == 0 && main_thread)
		rc = allow_signals(ctx);
	if (rc == 0 && main_thread)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				      SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	/* vCPU threads load their own filter after the main one is in place. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(seccomp), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				      SCMP_A0(SCMP_CMP_EQ, PR_SET_NO_NEW_PRIVS));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				      SCMP_A0(SCMP_CMP_EQ, PR_SET_SECCOMP));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff00, KVMIO_TYPE));
	for (size_t i = 0; rc == 0 && i < sizeof tty_tun_requests / sizeof tty_tun_requests[0]; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_EQ, tty_tun_requests[i]));
	if (rc == 0 && main_thread)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_EQ, THREAD_FLAGS));
	if (rc == 0 && main_thread)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_EQ, FORK_FLAGS));
	if (rc == 0 && main_thread)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* A live fork's own uid (own_uid.h): a user namespace, and nothing
	 * else, made by unshare; the uid and gid the host mapped in it; its
	 * capabilities dropped. Without capabilities outside it, setresuid
	 * and setresgid only pick among the caller's own ids, and capset
	 * only lowers. A namespace made with no mapping written by the host
	 * lends nothing the filter lets it use: every other namespace, mount
	 * and setns stay forbidden. */
	if (rc == 0 && main_thread)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(unshare), 1,
				      SCMP_A0(SCMP_CMP_EQ, CLONE_NEWUSER));
	if (rc == 0 && main_thread)
		rc = add_calls(ctx, own_uid_calls, sizeof own_uid_calls / sizeof own_uid_calls[0]);
	/* Limits of its own process only (glibc's setrlimit is pid 0): the
	 * creator of a fork's user namespace holds every capability in it,
	 * and could otherwise lower its fork's limits. */
	if (rc == 0 && main_thread)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1, SCMP_A0(SCMP_CMP_EQ, 0));
	if (rc == 0 && (rc = seccomp_load(ctx)) < 0)
		rc = errf(-rc, "seccomp_load: %s", strerror(-rc));
	seccomp_release(ctx);
	return rc;
}

int jail_lock(const struct jail_config *j)
{
	if (!j->root)
		return 0;
	if (setgroups(0, NULL) < 0 || setresgid(j->gid, j->gid, j->gid) < 0 ||
	    setresuid(j->uid, j->uid, j->uid) < 0)
		return errf_sys("jail: drop to uid %u gid %u", (unsigned)j->uid, (unsigned)j->gid);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return errf_sys("jail: prctl");
	int rc = install_sigsys();
	return rc < 0 ? rc : load_filter(true);
}

int jail_vcpu_thread(void)
{
	return load_filter(false);
}

int jail_seccomp(void)
{
	int rc = install_sigsys();
	return rc < 0 ? rc : load_filter(true);
}
