#include "host/fork_uid.h"
#include "host/host_int.h"
#include "host/jail.h"
#include "host/proc.h"
#include "common/err.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How often the serving looks up from its socket: it ends when every
 * child has its uid or the fork's reply is in (the fork's own bound,
 * kilnd's boot timeout, limits how long that takes). */
#define POLL_MS 500

/* read_at: a small file under a /proc/PID directory, NUL-ended. */
static ssize_t read_at(int dir, const char *name, char *buf, size_t cap)
{
	int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, cap - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = 0;
	return n;
}

static int write_at(int dir, const char *name, const char *text)
{
	int fd = openat(dir, name, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("fork uid: open %s", name);
	ssize_t n = write(fd, text, strlen(text));
	int rc = n == (ssize_t)strlen(text) ? 0 : errf_sys("fork uid: write %s", name);
	close(fd);
	return rc;
}

/* ids_are: whether a status line "Uid:" (or "Gid:") holds id four times. */
static bool ids_are(const char *status, const char *key, unsigned id)
{
	const char *l = strstr(status, key);
	unsigned a, b, c, d;
	return l && sscanf(l + strlen(key), "%u %u %u %u", &a, &b, &c, &d) == 4 &&
	       a == id && b == id && c == id && d == id;
}

/* check_asker: the process the kernel says sent the question, opened as
 * /proc/PID only while a pidfd shows it is still that process: of the
 * family's uid and gid, in a user namespace that is not ours, with no
 * mapping written yet. Returns the directory's descriptor. */
static int check_asker(const struct fork_uids *fu, pid_t pid)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd < 0)
		return errf_sys("fork uid: process %d", (int)pid);
	char path[64];
	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = dir < 0 ? errf_sys("fork uid: %s", path) : 0;
	/* Opened after the pidfd, checked alive after: the same process. */
	if (rc == 0 && syscall(SYS_pidfd_send_signal, pfd, 0, NULL, 0) < 0)
		rc = errf(ESRCH, "fork uid: process %d ended", (int)pid);
	close(pfd);
	char buf[4096];
	if (rc == 0 && read_at(dir, "status", buf, sizeof buf) <= 0)
		rc = errf(ESRCH, "fork uid: process %d: no status", (int)pid);
	if (rc == 0 && (!ids_are(buf, "\nUid:", fu->family) || !ids_are(buf, "\nGid:", fu->family)))
		rc = errf(EPERM, "fork uid: process %d is not of the forking VMM's uid %u",
			  (int)pid, (unsigned)fu->family);
	int own = rc == 0 ? proc_dir_own_userns(dir) : 0;
	if (own < 0)
		rc = errf(-own, "fork uid: process %d: user namespace: %s", (int)pid, strerror(-own));
	else if (rc == 0 && !own)
		rc = errf(EPERM, "fork uid: process %d made no user namespace", (int)pid);
	if (rc == 0 && (read_at(dir, "uid_map", buf, sizeof buf) != 0 ||
			read_at(dir, "gid_map", buf, sizeof buf) != 0))
		rc = errf(EPERM, "fork uid: process %d's namespace is mapped already", (int)pid);
	if (rc < 0) {
		if (dir >= 0)
			close(dir);
		return rc;
	}
	return dir;
}

/* serve: one question, "uid N\n" with the answer's pipe; 0 when it was
 * one (answered either way), -1 when nothing could be read. */
static int serve(struct fork_uids *fu)
{
	char text[64];
	struct iovec iov = { text, sizeof text - 1 };
	union {
		char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof u.buf };
	ssize_t n = recvmsg(fu->sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n <= 0)
		return -1;
	text[n] = 0;
	struct ucred cred = { .pid = 0 };
	int answer = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len == CMSG_LEN(sizeof cred))
			memcpy(&cred, CMSG_DATA(c), sizeof cred);
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
				if (answer < 0)
					answer = fd;
				else
					close(fd);
			}
		}
	}
	int idx = -1, rc = 0, dir = -1;
	struct stat st;
	if (answer < 0 || fstat(answer, &st) < 0 || !S_ISFIFO(st.st_mode))
		rc = errf(EPROTO, "fork uid: a question without a pipe to answer on");
	else if (sscanf(text, "uid %d\n", &idx) != 1 || idx < 0 || idx >= fu->n)
		rc = errf(EPROTO, "fork uid: a question that names no child of this fork");
	else if (fu->given[idx])
		rc = errf(EPERM, "fork uid: child %d has its uid already", idx);
	else if (cred.pid <= 0)
		rc = errf(EPROTO, "fork uid: no credentials with the question");
	else if ((dir = check_asker(fu, cred.pid)) < 0)
		rc = dir;
	uid_t uid = 0;
	if (rc == 0) {
		struct sandbox *kid = fu->kids[idx];
		uid = kid->jail_uid;
		char map[64];
		snprintf(map, sizeof map, "1 %u 1\n", (unsigned)uid);
		if (!uid || uid == fu->family)
			rc = errf(EINVAL, "fork uid: child %d has no uid of its own", idx);
		if (rc == 0)
			rc = vmm_jail_adopt(kid, fu->family, uid);
		if (rc == 0)
			rc = write_at(dir, "gid_map", map);
		if (rc == 0)
			rc = write_at(dir, "uid_map", map);
		if (rc == 0) {
			fu->given[idx] = true;
			fu->ngiven++;
		}
	}
	if (dir >= 0)
		close(dir);
	if (rc < 0)
		log_warn("%s", errmsg());
	if (answer >= 0) {
		char reply[300];
		int len = rc == 0 ? snprintf(reply, sizeof reply, "ok\n")
				  : snprintf(reply, sizeof reply, "error %.250s\n", errmsg());
		if (write(answer, reply, (size_t)len) < 0) {
			/* the child is gone: the fork reports it */
		}
		close(answer);
	}
	return 0;
}

static void *serve_thread(void *arg)
{
	struct fork_uids *fu = arg;
	while (fu->ngiven < fu->n) {
		struct pollfd p[2] = { { .fd = fu->sock, .events = POLLIN }, { .fd = fu->stop[0], .events = POLLIN } };
		int k = poll(p, 2, POLL_MS);
		if (k < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents & POLLIN)
			serve(fu);
		else if (p[0].revents)
			break;
	}
	return NULL;
}

int fork_uids_start(struct fork_uids *fu, uid_t family, struct sandbox **kids, int n, int *child_end)
{
	memset(fu, 0, sizeof *fu);
	fu->sock = fu->stop[0] = fu->stop[1] = -1;
	if (n < 1 || n > FORK_UID_MAX)
		return errf(EINVAL, "fork uid: %d children", n);
	fu->family = family;
	fu->kids = kids;
	fu->n = n;
	int sv[2], one = 1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return errf_sys("fork uid: socketpair");
	fu->sock = sv[0];
	*child_end = sv[1];
	int rc = 0;
	if (setsockopt(fu->sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0)
		rc = errf_sys("fork uid: SO_PASSCRED");
	if (rc == 0 && pipe2(fu->stop, O_CLOEXEC) < 0)
		rc = errf_sys("fork uid: pipe");
	if (rc == 0 && (rc = -pthread_create(&fu->thread, NULL, serve_thread, fu)) < 0)
		rc = errf(-rc, "fork uid: thread: %s", strerror(-rc));
	if (rc < 0) {
		close(sv[1]);
		*child_end = -1;
		fork_uids_stop(fu);
		return rc;
	}
	fu->running = true;
	return 0;
}

void fork_uids_stop(struct fork_uids *fu)
{
	if (fu->running) {
		if (write(fu->stop[1], "x", 1) < 0) {
			/* the thread still ends at its next poll: the pipe is ours */
		}
		pthread_join(fu->thread, NULL);
		fu->running = false;
	}
	int *fds[] = { &fu->sock, &fu->stop[0], &fu->stop[1] };
	for (int i = 0; i < 3; i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}
