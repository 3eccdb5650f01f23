/*
 * The VMM's seccomp allowlist (src/vmm/jail.c), loaded in forked children
 * that then try what a VMM taken over by its guest might: what the VMM
 * itself does must work (threads, fork, a TAP ioctl), and a terminal
 * ioctl it never makes (TIOCSTI), a clone into new namespaces, unshare
 * of any namespace but a user one (a fork's own uid), setns, or clone3
 * must not. A refused call kills the child with 128 + SIGSYS (the
 * filter's handler), or fails with ENOSYS for clone3. Signals: a vCPU
 * kick (a timer aimed at a thread of its own) and SIGKILL of a child it
 * started work; tgkill of anything, kill with another signal, of a
 * process group or of -1 are refused, and another uid's process cannot
 * be killed at all (the jail's uid; the kernel's part).
 */
#include "vmm/jail.h"
#include "vmm/overlay.h"
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/if_tun.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* under_filter_as: run fn in a child under the VMM's filter, alone in a
 * process group of its own, as uid `uid` (0: as the caller); its exit
 * status, or 128 + signal. */
static int under_filter_as(uid_t uid, int (*fn)(void))
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		if (setpgid(0, 0) < 0 || (uid && setresuid(uid, uid, uid) < 0))
			_exit(98);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || jail_seccomp() < 0)
			_exit(99);
		_exit(fn());
	}
	int st;
	if (p < 0 || waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int under_filter(int (*fn)(void))
{
	return under_filter_as(0, fn);
}

static void *nothing(void *arg)
{
	return arg;
}

static int make_thread(void)
{
	pthread_t t;
	return pthread_create(&t, NULL, nothing, NULL) == 0 && pthread_join(t, NULL) == 0 ? 0 : 1;
}

static int do_fork(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(7);
	int st;
	return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : 1;
}

static int tap_ioctl(void)
{
	int hdr = 12;
	/* stdin is no TAP: the kernel answers, the filter let it through. */
	return ioctl(0, TUNSETVNETHDRSZ, &hdr) < 0 && errno != ENOSYS ? 0 : 1;
}

static int tiocsti(void)
{
	char c = 'x';
	ioctl(0, TIOCSTI, &c);
	return 0;	/* reached only if the filter let it through */
}

static int clone_newuser(void)
{
	long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
	if (r == 0)
		_exit(0);
	return 0;
}

/* A live fork's own uid (vmm/own_uid.h): a user namespace alone, made
 * by unshare, is allowed; with any other namespace, or joined by setns,
 * it is not. */
static int unshare_user(void)
{
	return unshare(CLONE_NEWUSER) == 0 ? 0 : 1;
}

static int unshare_user_and_mounts(void)
{
	unshare(CLONE_NEWUSER | CLONE_NEWNS);
	return 0;
}

static int own_limits(void)
{
	struct rlimit r;
	return getrlimit(RLIMIT_NOFILE, &r) == 0 && setrlimit(RLIMIT_NOFILE, &r) == 0 ? 0 : 1;
}

static int others_limits(void)
{
	struct rlimit r;
	syscall(SYS_prlimit64, getppid(), RLIMIT_NOFILE, NULL, &r);
	return 0;
}

static int setns_call(void)
{
	setns(0, CLONE_NEWUSER);
	return 0;
}

static int clone3_call(void)
{
	long r = syscall(SYS_clone3, NULL, 0);
	return r < 0 && errno == ENOSYS ? 0 : 1;
}

/* A process outside the filter for the filtered child to aim at: it
 * sleeps in its own process group, as uid `uid` (0: root's), until
 * victim_end. */
static pid_t victim;

static void victim_start(uid_t uid)
{
	fflush(stdout);
	victim = fork();
	if (victim == 0) {
		setpgid(0, 0);
		if (uid && setresuid(uid, uid, uid) < 0)
			_exit(98);
		for (;;)
			pause();
	}
	setpgid(victim, victim);
}

/* Still there, and not dead and waiting to be reaped. */
static bool victim_alive(void)
{
	int st;
	return victim > 0 && waitpid(victim, &st, WNOHANG) == 0;
}

static void victim_end(void)
{
	kill(victim, SIGKILL);
	waitpid(victim, NULL, 0);
	victim = -1;
}

static atomic_int kicks;

static void on_kick(int sig)
{
	(void)sig;
	atomic_fetch_add(&kicks, 1);
}

static void *kicked_thread(void *arg)
{
	timer_t *t = arg;
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGUSR1 };
	sev._sigev_un._tid = gettid();
	if (timer_create(CLOCK_MONOTONIC, &sev, t) < 0)
		return NULL;
	for (int i = 0; i < 2000 && !atomic_load(&kicks); i++)
		usleep(1000);
	return NULL;
}

/* vcpu.c's kick: a timer of the target thread, armed by another. */
static int timer_kick(void)
{
	signal(SIGUSR1, on_kick);
	timer_t t;
	pthread_t th;
	if (pthread_create(&th, NULL, kicked_thread, &t) != 0)
		return 1;
	usleep(50000);
	struct itimerspec soon = { .it_value = { .tv_nsec = 1 } };
	int rc = timer_settime(t, 0, &soon, NULL);
	pthread_join(th, NULL);
	return rc == 0 && atomic_load(&kicks) == 1 ? 0 : 1;
}

/* child.c's child_discard: SIGKILL to a VM it started. */
static int kill_own_child(void)
{
	pid_t p = fork();
	if (p == 0)
		for (;;)
			usleep(100000);
	int st;
	return p > 0 && kill(p, SIGKILL) == 0 && waitpid(p, &st, 0) == p && WIFSIGNALED(st) &&
	       WTERMSIG(st) == SIGKILL ? 0 : 1;
}

static int tgkill_victim(void)
{
	syscall(SYS_tgkill, victim, victim, SIGTERM);
	return 0;	/* reached only if the filter let it through */
}

static int tgkill_self(void)
{
	syscall(SYS_tgkill, getpid(), gettid(), SIGUSR2);
	return 0;
}

static int kill_victim_sigterm(void)
{
	kill(victim, SIGTERM);
	return 0;
}

static int kill_victim_group(void)
{
	kill(-victim, SIGKILL);
	return 0;
}

/* As the jail runs it, as a uid of its own: SIGKILL passes the filter;
 * the kernel refuses it for a process of another uid. */
static int kill_other_uid(void)
{
	return kill(victim, SIGKILL) < 0 && errno == EPERM ? 0 : 1;
}

/* A live fork names the parent's new top inside the jail, under the
 * filter (vmm/overlay.c overlay_fork_name: it first used access(2),
 * which the filter kills). */
static char fork_dir[] = "/tmp/kiln-unit-seccomp.XXXXXX";

static int fork_name(void)
{
	char top[256], out[4096];
	snprintf(top, sizeof top, "%s/disk.12-3", fork_dir);
	return overlay_fork_name(top, 77, 0, out, sizeof out) == 0 && strstr(out, "/disk.77-0") ? 0 : 1;
}

static void vmm_filter_allows_what_the_vmm_does(void)
{
	CHECK(mkdtemp(fork_dir) != NULL);
	CHECK(under_filter(fork_name) == 0);
	rmdir(fork_dir);
	CHECK(under_filter(make_thread) == 0);
	CHECK(under_filter(do_fork) == 0);
	CHECK(under_filter(tap_ioctl) == 0);
	CHECK(under_filter(clone3_call) == 0);
	CHECK(under_filter(timer_kick) == 0);
	CHECK(under_filter(kill_own_child) == 0);
	CHECK(under_filter_as(990111, unshare_user) == 0);
	CHECK(under_filter(own_limits) == 0);
}

/* What a VMM taken over by its guest might aim at another process. */
static void vmm_filter_signals_only_its_own(void)
{
	static const struct {
		const char *what;
		int (*fn)(void);
	} refused[] = {
		{ "tgkill(another process, SIGTERM)", tgkill_victim },
		{ "tgkill(itself)", tgkill_self },
		{ "kill(another process, SIGTERM)", kill_victim_sigterm },
		{ "kill(-its process group, SIGKILL)", kill_victim_group },
	};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		victim_start(0);
		int st = under_filter(refused[i].fn);
		if (st != 128 + SIGSYS)
			printf("  %s under the filter: status %d, wanted %d\n", refused[i].what, st,
			       128 + SIGSYS);
		CHECK(st == 128 + SIGSYS);
		CHECK(victim_alive());
		victim_end();
	}
	victim_start(65533);
	int st = under_filter_as(65534, kill_other_uid);
	if (st != 0)
		printf("  kill(another uid's process, SIGKILL): status %d, wanted 0 (EPERM)\n", st);
	CHECK(st == 0);
	CHECK(victim_alive());
	victim_end();
}

static void vmm_filter_kills_the_rest(void)
{
	int st = under_filter(tiocsti);
	if (st != 128 + SIGSYS)
		printf("  TIOCSTI under the filter: status %d, wanted %d\n", st, 128 + SIGSYS);
	CHECK(st == 128 + SIGSYS);
	st = under_filter(clone_newuser);
	if (st != 128 + SIGSYS)
		printf("  clone(CLONE_NEWUSER) under the filter: status %d, wanted %d\n", st, 128 + SIGSYS);
	CHECK(st == 128 + SIGSYS);
	CHECK(under_filter(unshare_user_and_mounts) == 128 + SIGSYS);
	CHECK(under_filter(setns_call) == 128 + SIGSYS);
	CHECK(under_filter(others_limits) == 128 + SIGSYS);
}

int main(void)
{
	int failures = 0;
	RUN(vmm_filter_allows_what_the_vmm_does);
	RUN(vmm_filter_kills_the_rest);
	RUN(vmm_filter_signals_only_its_own);
	return failures ? 1 : 0;
}
