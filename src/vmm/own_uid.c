#include "vmm/own_uid.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The answer: "ok\n", or "error MESSAGE\n". */
static int await_answer(int fd, int timeout_ms)
{
	char buf[300];
	size_t got = 0;
	while (got < sizeof buf - 1 && !memchr(buf, '\n', got)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, timeout_ms);
		if (n == 0)
			return errf(ETIMEDOUT, "own uid: no answer from the host in %d ms", timeout_ms);
		if (n < 0 && errno == EINTR)
			continue;
		ssize_t k = n < 0 ? -1 : read(fd, buf + got, sizeof buf - 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errf_sys("own uid: read the answer");
		if (k == 0)
			break;
		got += (size_t)k;
	}
	buf[got] = 0;
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	if (strcmp(buf, "ok") == 0)
		return 0;
	if (strncmp(buf, "error ", 6) == 0)
		return errf(EPERM, "own uid: the host refused: %s", buf + 6);
	return errf(EPROTO, "own uid: the host did not answer (%s)", got ? "a bad answer" : "it closed");
}

int own_uid_ask(int sock, int index, int pipe_w)
{
	char text[32];
	int len = snprintf(text, sizeof text, "uid %d\n", index);
	struct iovec iov = { text, (size_t)len };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof u.buf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pipe_w, sizeof(int));
	for (;;) {
		ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
		if (n == len)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return errf_sys("own uid: ask the host");
	}
}

int own_uid(int sock, int index, int timeout_ms)
{
	int p[2] = { -1, -1 };
	int rc = 0;
	if (unshare(CLONE_NEWUSER) < 0)
		rc = errf_sys("own uid: a user namespace");
	if (rc == 0 && pipe2(p, O_CLOEXEC) < 0)
		rc = errf_sys("own uid: pipe");
	if (rc == 0)
		rc = own_uid_ask(sock, index, p[1]);
	close(sock);
	if (p[1] >= 0)
		close(p[1]);          /* the host holds its own copy */
	if (rc == 0)
		rc = await_answer(p[0], timeout_ms);
	if (p[0] >= 0)
		close(p[0]);
	if (rc < 0)
		return rc;
	/* uid and gid 1 here are the child's own outside (the host mapped
	 * nothing else). Then no capability is left, in this namespace or
	 * any: a uid change from one that is not the namespace's root keeps
	 * them, so they are cleared by hand. */
	if (setresgid(1, 1, 1) < 0 || setresuid(1, 1, 1) < 0)
		return errf_sys("own uid: become the mapped uid");
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) < 0)
		return errf_sys("own uid: drop capabilities");
	if (getuid() != 1 || geteuid() != 1 || getgid() != 1)
		return errf(EPERM, "own uid: still uid %u", (unsigned)getuid());
	return 0;
}
