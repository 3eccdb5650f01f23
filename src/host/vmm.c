#include "host/dns.h"
#include "host/vmm.h"
#include "common/failpoint.h"
#include "host/jail.h"
#include "net/net.h"
#include "host/proc.h"
#include "common/err.h"
#include "host/host_config.h"
#include "host/host_types.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CTL_REPLY_MAX (64 * 1024)

void vm_path(char *out, size_t cap, const char *dir, const char *name)
{
	snprintf(out, cap, "%s/%s", dir, name);
}

void vmm_last_line(const char *dir, char *out, size_t cap)
{
	char path[PATH_MAX], buf[4096];
	out[0] = 0;
	vm_path(path, sizeof path, dir, "vmm.log");
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	ssize_t n = 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == geteuid()) {
		off_t off = st.st_size > (off_t)sizeof buf ? st.st_size - (off_t)sizeof buf : 0;
		n = pread(fd, buf, sizeof buf, off);
	}
	close(fd);
	if (n <= 0)
		return;
	size_t end = (size_t)n;
	while (end && (buf[end - 1] == '\n' || buf[end - 1] == '\r' || buf[end - 1] == ' '))
		end--;
	size_t start = end;
	while (start && buf[start - 1] != '\n')
		start--;
	size_t k = 0;
	for (size_t i = start; i < end && k + 1 < cap; i++)
		out[k++] = buf[i] >= 0x20 && buf[i] < 0x7f ? buf[i] : '?';
	out[k] = 0;
}

int vmm_launch(const struct host_config *cfg, const struct vm_spec *s, pid_t *pid)
{
	char vsock[PATH_MAX], ctl[PATH_MAX], console[PATH_MAX], log[PATH_MAX], pidf[PATH_MAX];
	char mem[16], vcpus[16], append[320], uid[16], reserve[16], slots[16];
	char vols[HOST_VOLUMES_MAX][32];
	if (s->nvol < 0 || s->nvol > HOST_VOLUMES_MAX)
		return errf(EINVAL, "at most %d volumes", HOST_VOLUMES_MAX);
	vm_path(vsock, sizeof vsock, s->dir, "vsock.sock");
	vm_path(ctl, sizeof ctl, s->dir, "ctl.sock");
	vm_path(console, sizeof console, s->dir, "console.log");
	vm_path(log, sizeof log, s->dir, "vmm.log");
	vm_path(pidf, sizeof pidf, s->dir, "vmm.pid");

	char *argv[72 + 2 * HOST_VOLUMES_MAX];
	int n = 0;
	argv[n++] = (char *)cfg->vmm;
	if (s->restore) {
		argv[n++] = "--restore";
		argv[n++] = (char *)s->restore;
		if (failpoint_hit(FP_RESTORE_DIES))
			argv[n++] = "--test-triple-fault";
	} else {
		snprintf(mem, sizeof mem, "%d", s->memory_mib);
		snprintf(vcpus, sizeof vcpus, "%d", s->vcpus);
		int len = snprintf(append, sizeof append, "kiln.root=/dev/vda kiln.hostname=%s",
				   s->hostname ? s->hostname : "kiln");
		if (s->tap) {
			/* Every guest has the same address (docs/network.md): a
			 * snapshot of this boot serves all its clones. */
			struct net_config nc;
			net_default_config(&nc);
			len += snprintf(append + len, sizeof append - len, " kiln.ip=%s/%d kiln.gw=%s",
					nc.guest_ip, nc.tap_bits, nc.gateway_ip);
			/* Its resolver, written by kiln-init at boot (a template's
			 * build); creates, forks and wakes write it again. */
			char dns[DNS_LIST_MAX];
			if (s->dns)
				snprintf(dns, sizeof dns, "%s", s->dns);
			else
				dns_servers(cfg, dns);
			if (dns[0] && len < (int)sizeof append)
				snprintf(append + len, sizeof append - len, " kiln.dns=%s", dns);
		}
		argv[n++] = "--kernel";
		argv[n++] = (char *)cfg->kernel;
		argv[n++] = "--initrd";
		argv[n++] = (char *)cfg->initrd;
		argv[n++] = "--mem";
		argv[n++] = mem;
		argv[n++] = "--vcpus";
		argv[n++] = vcpus;
		argv[n++] = "--append";
		argv[n++] = append;
		if (s->volume_slots > 0) {
			snprintf(slots, sizeof slots, "%d", s->volume_slots);
			argv[n++] = "--volume-slots";
			argv[n++] = slots;
		}
	}
	/* Each volume's descriptor becomes the VMM's 3 + i (proc_spawn_keep). */
	for (int i = 0; i < s->nvol; i++) {
		snprintf(vols[i], sizeof vols[i], "%d:%d%s", s->vol_slot[i], 3 + i, s->vol_ro[i] ? ":ro" : "");
		argv[n++] = "--volume";
		argv[n++] = vols[i];
	}
	argv[n++] = "--disk";
	argv[n++] = (char *)s->disk;
	snprintf(reserve, sizeof reserve, "%d", cfg->reserve_disk_mib);
	argv[n++] = "--disk-reserve";
	argv[n++] = reserve;
	argv[n++] = "--vsock";
	argv[n++] = vsock;
	argv[n++] = "--ctl";
	argv[n++] = ctl;
	argv[n++] = "--console";
	argv[n++] = console;
	if (s->tap) {
		argv[n++] = "--net";
		argv[n++] = (char *)s->tap;
	}
	if (s->restore && s->hostname) {
		argv[n++] = "--hostname";
		argv[n++] = (char *)s->hostname;
	}
	bool jailed = s->jail && s->jail->on;
	if (jailed)
		vmm_jail_argv(s->jail, argv, &n, uid, sizeof uid);
	argv[n] = NULL;

	/* A jailed VMM joins its namespace itself; an unjailed one starts
	 * in it. */
	int rc = proc_spawn_keep(argv, log, jailed ? NULL : s->netns, s->vol_fd, s->nvol, pid);
	if (rc < 0)
		return rc;
	/* The start time is read right away: the process cannot have been
	 * reaped (it is our child), so its pid is still its own. */
	return pidfile_write(pidf, *pid, proc_start_time(*pid));
}

static int ctl_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path)
		return errf(ENAMETOOLONG, "control socket %s: path too long", path);
	/* Its directory is the VMM's to write: connect to the socket there,
	 * never through a symlink to another service's (kilnd is root). The
	 * O_PATH fd pins what was checked; connect goes through its link. */
	int pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (pfd < 0)
		return errf_sys("connect %s", path);
	if (fstat(pfd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(pfd);
		return errf(ENOTSOCK, "connect %s: not a socket", path);
	}
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d", pfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		close(pfd);
		return errf_sys("socket");
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errf_sys("connect %s", path);
		close(fd);
		close(pfd);
		return e;
	}
	close(pfd);
	return fd;
}

static int wait_fd(int fd, short ev, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = ev };
	for (;;) {
		int left = (int)(deadline - mono_ms());
		if (left <= 0)
			return -ETIMEDOUT;
		int n = poll(&p, 1, left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

int vmm_ctl(const char *sock, json_t *req, json_t **reply, int timeout_ms)
{
	return vmm_ctl_fds(sock, req, NULL, 0, reply, timeout_ms);
}

/* The first bytes of the request carry the descriptors (SCM_RIGHTS):
 * kiln-vmm keeps what arrives with a line for that line. */
static ssize_t send_fds(int fd, const char *text, size_t len, const int *fds, int nfds)
{
	struct iovec iov = { (void *)text, len };
	union {
		char buf[CMSG_SPACE(sizeof(int) * VMM_CTL_FDS_MAX)];
		struct cmsghdr align;
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds > 0) {
		memset(&u, 0, sizeof u);
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	return sendmsg(fd, &m, MSG_NOSIGNAL);
}

int vmm_ctl_fds(const char *sock, json_t *req, const int *fds, int nfds, json_t **reply,
		int timeout_ms)
{
	if (nfds < 0 || nfds > VMM_CTL_FDS_MAX)
		return errf(EINVAL, "at most %d descriptors with a control request", VMM_CTL_FDS_MAX);
	*reply = NULL;
	char *text = json_dumps(req, JSON_COMPACT);
	if (!text)
		return errf(ENOMEM, "out of memory");
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	int64_t deadline = mono_ms() + timeout_ms;
	int fd = ctl_connect(sock);
	if (fd < 0) {
		free(text);
		return fd;
	}
	size_t len = strlen(text);
	text[len++] = '\n';	/* json_dumps left room: its NUL */
	size_t off = 0;
	int rc = 0;
	while (off < len && rc == 0) {
		ssize_t w = off == 0 ? send_fds(fd, text, len, fds, nfds)
				     : send(fd, text + off, len - off, MSG_NOSIGNAL);
		if (w > 0)
			off += w;
		else if (errno != EINTR)
			rc = errf_sys("control socket %s: send", sock);
	}
	free(text);
	char *buf = NULL;
	size_t got = 0;
	while (rc == 0) {
		if ((rc = wait_fd(fd, POLLIN, deadline)) < 0) {
			rc = errf(-rc, "control socket %s: no reply to %s within %d ms", sock,
				  cmd ? cmd : "?", timeout_ms);
			break;
		}
		char *nb = realloc(buf, got + 4096 + 1);
		if (!nb) {
			rc = errf(ENOMEM, "out of memory");
			break;
		}
		buf = nb;
		ssize_t r = recv(fd, buf + got, 4096, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = errf(ECONNRESET, "control socket %s: closed without a reply to %s", sock,
				  cmd ? cmd : "?");
			break;
		}
		got += r;
		buf[got] = 0;
		if (memchr(buf, '\n', got))
			break;
		if (got > CTL_REPLY_MAX)
			rc = errf(EPROTO, "control socket %s: reply too long", sock);
	}
	close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	json_error_t e;
	json_t *j = json_loadb(buf, strcspn(buf, "\n"), 0, &e);
	free(buf);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		return errf(EPROTO, "control socket %s: reply is not a JSON object", sock);
	}
	if (!json_is_true(json_object_get(j, "ok"))) {
		const char *err = json_string_value(json_object_get(j, "error"));
		/* ECHILD: a new VM's guest died before it was ready (nothing
		 * of the request was wrong: the caller may start it again). */
		rc = err && strncmp(err, "unknown command", 15) == 0
			? errf(ENOTSUP, "kiln-vmm does not support '%s' yet (%s)", cmd ? cmd : "?", err)
			: errf(json_is_true(json_object_get(j, "guest_died")) ? ECHILD : EIO, "kiln-vmm %s: %s",
			       cmd ? cmd : "?", err ? err : "failed");
		json_decref(j);
		return rc;
	}
	*reply = j;
	return 0;
}
