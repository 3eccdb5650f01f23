/*
 * The VMM's seccomp allowlist (src/vmm/jail.c), loaded in forked children
 * that then try what a VMM taken over by its guest might: what the VMM
 * itself does must work (threads, fork, a TAP ioctl), and a terminal
 * ioctl it never makes (TIOCSTI), a clone into new namespaces or clone3
 * must not. A refused call kills the child with 128 + SIGSYS (the
 * filter's handler), or fails with ENOSYS for clone3.
 */
#include "vmm/jail.h"
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/if_tun.h>
#include <unistd.h>

/* under_filter: run fn in a child under the VMM's filter; its exit status,
 * or 128 + signal. */
static int under_filter(int (*fn)(void))
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || jail_seccomp() < 0)
			_exit(99);
		_exit(fn());
	}
	int st;
	if (p < 0 || waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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

static int clone3_call(void)
{
	long r = syscall(SYS_clone3, NULL, 0);
	return r < 0 && errno == ENOSYS ? 0 : 1;
}

static void vmm_filter_allows_what_the_vmm_does(void)
{
	CHECK(under_filter(make_thread) == 0);
	CHECK(under_filter(do_fork) == 0);
	CHECK(under_filter(tap_ioctl) == 0);
	CHECK(under_filter(clone3_call) == 0);
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
}

int main(void)
{
	int failures = 0;
	RUN(vmm_filter_allows_what_the_vmm_does);
	RUN(vmm_filter_kills_the_rest);
	return failures ? 1 : 0;
}
