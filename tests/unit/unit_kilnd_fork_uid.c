/*
 * A live fork's own uid, both halves on this machine with no VM: kilnd's
 * (src/host/fork_uid.c) serving a fork's children, and the VMM's
 * (src/vmm/own_uid.c) run by a process that plays a forked child: the
 * forking VMM's uid, no_new_privs and the VMM's seccomp filter. It must
 * come out as the uid kilnd picked for it, with no capability, its
 * directory its own and its parent's closed to it; and the host must
 * refuse a question from another uid, a second one for the same child,
 * one that names no child, and one from a process that made no user
 * namespace, and must not chown what a link planted in the child's
 * directory names.
 */
#include "host/fork_uid.h"
#include "host/host_int.h"
#include "vmm/jail.h"
#include "vmm/own_uid.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FAMILY 990101u     /* the forking VMM's uid */
#define KID_UID 990102u    /* the one kilnd picked for its child */
#define OTHER 990103u

static char top[64];
static char parent_dir[128], kid_dir[128], kid_disk[160], parent_disk[160], host_file[160];

static void make_tree(void)
{
	snprintf(top, sizeof top, "/tmp/kiln-fork-uid.XXXXXX");
	if (!mkdtemp(top))
		abort();
	chmod(top, 0755);
	snprintf(parent_dir, sizeof parent_dir, "%s/parent", top);
	snprintf(kid_dir, sizeof kid_dir, "%s/kid", top);
	snprintf(parent_disk, sizeof parent_disk, "%s/disk", parent_dir);
	snprintf(kid_disk, sizeof kid_disk, "%s/disk", kid_dir);
	snprintf(host_file, sizeof host_file, "%s/host-file", top);
	mkdir(parent_dir, 0700);
	mkdir(kid_dir, 0700);
	int fd = open(parent_disk, O_CREAT | O_WRONLY, 0600);
	close(fd);
	fd = open(kid_disk, O_CREAT | O_WRONLY, 0600);
	close(fd);
	fd = open(host_file, O_CREAT | O_WRONLY, 0600);
	close(fd);
	/* As a fork leaves them: both directories the family's. */
	if (chown(parent_dir, FAMILY, FAMILY) < 0 || chown(parent_disk, FAMILY, FAMILY) < 0 ||
	    chown(kid_dir, FAMILY, FAMILY) < 0 || chown(kid_disk, FAMILY, FAMILY) < 0)
		abort();
	/* And what a VMM taken over might plant there. */
	char link[200];
	snprintf(link, sizeof link, "%s/planted", kid_dir);
	if (symlink(host_file, link) < 0)
		abort();
}

static int remove_tree(void)
{
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", top);
	return system(cmd);
}

/* become: the forking VMM as its child starts: its uid and gid, no
 * groups, no_new_privs, the VMM's filter. */
static void become(uid_t uid)
{
	if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || jail_seccomp() < 0)
		_exit(98);
}

/* A forked child: own_uid, then what it can reach. Exit 0 when all is as
 * it should be, else a code saying what was not. */
static int kid_main(int sock, int index)
{
	become(FAMILY);
	if (own_uid(sock, index, 10000) < 0) {
		printf("  own_uid: %s\n", errmsg());
		return 2;
	}
	int fd = open(kid_disk, O_RDWR);
	if (fd < 0)
		return 3;           /* its own disk */
	close(fd);
	fd = open(parent_disk, O_RDONLY);
	if (fd >= 0 || errno != EACCES)
		return 4;           /* its parent's, closed to it now */
	return 0;
}

static pid_t start_kid(int sock, int index)
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0)
		_exit(kid_main(sock, index));
	return p;
}

static int wait_status(pid_t p)
{
	int st;
	if (waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A process that asks without making a namespace, or as another uid:
 * what own_uid sends, by hand. Returns the host's answer's first word. */
static int ask_raw(int sock, int index, bool newns, uid_t as, char *answer, size_t cap)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	fflush(stdout);
	pid_t k = fork();
	if (k == 0) {
		close(p[0]);
		become(as);
		if (newns && unshare(CLONE_NEWUSER) < 0)
			_exit(97);
		int q[2];
		if (pipe2(q, 0) < 0)
			_exit(96);
		if (own_uid_ask(sock, index, q[1]) < 0)
			_exit(95);
		close(q[1]);
		char buf[300];
		ssize_t n = read(q[0], buf, sizeof buf - 1);
		if (n > 0 && write(p[1], buf, (size_t)n) < 0)
			_exit(94);
		_exit(0);
	}
	close(p[1]);
	ssize_t n = read(p[0], answer, cap - 1);
	close(p[0]);
	answer[n > 0 ? n : 0] = 0;
	return wait_status(k);
}

static unsigned owner(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 ? (unsigned)st.st_uid : 0;
}

static void fork_child_takes_own_uid(void)
{
	make_tree();
	static struct sandbox kid, kid2;
	snprintf(kid.dir, sizeof kid.dir, "%s", kid_dir);
	kid.jail_uid = KID_UID;
	kid2 = kid;
	snprintf(kid2.dir, sizeof kid2.dir, "%s/none", top);
	kid2.jail_uid = KID_UID + 10;
	struct sandbox *kids[2] = { &kid, &kid2 };
	struct fork_uids fu;
	int end = -1;
	CHECK(fork_uids_start(&fu, FAMILY, kids, 2, &end) == 0);
	char answer[300];

	/* Refused: another uid; a process with no namespace of its own; a
	 * child that is not in this fork. Nothing given for them. */
	CHECK(ask_raw(end, 0, true, OTHER, answer, sizeof answer) == 0);
	if (strncmp(answer, "error ", 6) != 0 || !strstr(answer, "not of the forking VMM's uid"))
		printf("  another uid got: %s\n", answer);
	CHECK(strstr(answer, "not of the forking VMM's uid") != NULL);
	CHECK(ask_raw(end, 0, false, FAMILY, answer, sizeof answer) == 0);
	CHECK(strstr(answer, "made no user namespace") != NULL);
	CHECK(ask_raw(end, 7, true, FAMILY, answer, sizeof answer) == 0);
	CHECK(strstr(answer, "names no child") != NULL);
	CHECK(owner(kid_dir) == FAMILY);

	/* The child: its uid, its directory and disk; the host file the
	 * planted link names is left as it was. */
	pid_t p = start_kid(end, 0);
	int st = wait_status(p);
	if (st != 0)
		printf("  the child ended with %d\n", st);
	CHECK(st == 0);
	CHECK(owner(kid_dir) == KID_UID);
	CHECK(owner(kid_disk) == KID_UID);
	CHECK(owner(host_file) == 0);
	CHECK(owner(parent_dir) == FAMILY);

	/* Asked again for child 0: refused, whoever asks. */
	CHECK(ask_raw(end, 0, true, FAMILY, answer, sizeof answer) == 0);
	CHECK(strstr(answer, "has its uid already") != NULL);
	fork_uids_stop(&fu);
	close(end);
	CHECK(remove_tree() == 0);
}

/* The uid it runs as is the one kilnd mapped, with no capability, as the
 * kernel sees it from outside (/proc/PID/status): a child that sleeps
 * after own_uid, read from here. */
static void fork_child_has_no_capability(void)
{
	make_tree();
	static struct sandbox kid;
	snprintf(kid.dir, sizeof kid.dir, "%s", kid_dir);
	kid.jail_uid = KID_UID;
	struct sandbox *kids[1] = { &kid };
	struct fork_uids fu;
	int end = -1;
	CHECK(fork_uids_start(&fu, FAMILY, kids, 1, &end) == 0);
	int go[2];
	CHECK(pipe(go) == 0);
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		close(go[0]);
		become(FAMILY);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rc = own_uid(end, 0, 10000);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		char line[64];
		int len = snprintf(line, sizeof line, "%c%.3f", rc == 0 ? 'y' : 'n',
				   (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
		if (write(go[1], line, (size_t)len) < 0)
			_exit(3);
		pause();
		_exit(0);
	}
	close(go[1]);
	char took[64] = "";
	ssize_t got = read(go[0], took, sizeof took - 1);
	CHECK(got > 0 && took[0] == 'y');
	took[got > 0 ? got : 0] = 0;
	printf("  own_uid took %s ms (ask, the host's checks, chown and maps, the switch)\n", took + 1);
	close(go[0]);
	char path[64], buf[4096] = "";
	snprintf(path, sizeof path, "/proc/%d/status", (int)p);
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	char want_uid[64], want_gid[64];
	snprintf(want_uid, sizeof want_uid, "Uid:\t%u\t%u\t%u\t%u", KID_UID, KID_UID, KID_UID, KID_UID);
	snprintf(want_gid, sizeof want_gid, "Gid:\t%u\t%u\t%u\t%u", KID_UID, KID_UID, KID_UID, KID_UID);
	CHECK(strstr(buf, want_uid) != NULL);
	CHECK(strstr(buf, want_gid) != NULL);
	CHECK(strstr(buf, "CapPrm:\t0000000000000000") != NULL);
	CHECK(strstr(buf, "CapEff:\t0000000000000000") != NULL);
	CHECK(strstr(buf, "NoNewPrivs:\t1") != NULL);
	CHECK(strstr(buf, "Seccomp:\t2") != NULL);
	kill(p, SIGKILL);
	wait_status(p);
	fork_uids_stop(&fu);
	close(end);
	CHECK(remove_tree() == 0);
}

/* With no host answering (the fork's serving ended), a child gets no uid
 * and says so: it never runs its guest as its parent's. */
static void fork_child_without_answer_fails(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		close(sv[0]);
		become(FAMILY);
		_exit(own_uid(sv[1], 0, 300) == -ETIMEDOUT ? 0 : 1);
	}
	close(sv[1]);
	CHECK(wait_status(p) == 0);
	close(sv[0]);
}

int main(void)
{
	int failures = 0;
	if (geteuid() != 0) {
		printf("FAIL fork_uid: needs root (user namespaces mapped by root)\n");
		return 1;
	}
	RUN(fork_child_takes_own_uid);
	RUN(fork_child_has_no_capability);
	RUN(fork_child_without_answer_fails);
	return failures ? 1 : 0;
}
