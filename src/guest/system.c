/*
 * Requests about the guest as a whole (PING, INFO, RESYNC, POWEROFF) and
 * the agent's self-protection.
 *
 * RESYNC exists for restored and forked sandboxes: a snapshot resumes with
 * the wall clock of the moment it was taken and with the random state its
 * siblings share, so the host hands in the time and fresh entropy and the
 * agent sets the clock, credits the entropy (RNDADDENTROPY) and forces the
 * kernel CRNG to reseed (RNDRESEEDCRNG) before it answers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <linux/random.h>

#include "guest/agent.h"

#define AGENT_VERSION	"kiln-init 0.1"
#define ENTROPY_MAX	4096

int64_t sys_now_ns(int clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sys_ping(struct conn *c, const struct kiln_msg *m)
{
	struct kiln_fb fb;
	uint32_t n;
	const uint8_t *data = kiln_msg_bytes(m, KT_DATA, &n);

	conn_begin(c, &fb, KILN_PONG);
	kiln_fb_u32(&fb, KT_VERSION, KILN_PROTO_VERSION);
	if (data)
		kiln_fb_bytes(&fb, KT_DATA, data, n);
	conn_end(c, &fb);
}

/* A "Name:   123 kB" value from /proc/meminfo, in bytes (0 if absent). */
static uint64_t meminfo(const char *name)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	size_t len = strlen(name);
	uint64_t v = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, name, len) == 0 && line[len] == ':') {
			v = strtoull(line + len + 1, NULL, 10) * 1024;
			break;
		}
	}
	fclose(f);
	return v;
}

void sys_info(struct conn *c, const struct kiln_msg *m)
{
	struct kiln_fb fb;
	struct utsname u;
	(void)m;

	uname(&u);
	conn_begin(c, &fb, KILN_INFO_REPLY);
	kiln_fb_u32(&fb, KT_VERSION, KILN_PROTO_VERSION);
	kiln_fb_str(&fb, KT_AGENT, AGENT_VERSION);
	kiln_fb_str(&fb, KT_KERNEL, u.release);
	kiln_fb_str(&fb, KT_HOSTNAME, u.nodename);
	kiln_fb_str(&fb, KT_IDENTITY, c->a->identity);
	kiln_fb_u64(&fb, KT_UPTIME_NS, (uint64_t)sys_now_ns(CLOCK_BOOTTIME));
	kiln_fb_i64(&fb, KT_TIME_NS, sys_now_ns(CLOCK_REALTIME));
	kiln_fb_u64(&fb, KT_MEM_TOTAL, meminfo("MemTotal"));
	kiln_fb_u64(&fb, KT_MEM_AVAIL, meminfo("MemAvailable"));
	kiln_fb_u32(&fb, KT_NCPU, (uint32_t)sysconf(_SC_NPROCESSORS_ONLN));
	kiln_fb_u32(&fb, KT_NPROCS, (uint32_t)c->a->nprocs);
	kiln_fb_u32(&fb, KT_PID, (uint32_t)getpid());
	conn_end(c, &fb);
}

static int add_entropy(const uint8_t *p, uint32_t n, char *err, size_t errlen)
{
	struct rand_pool_info *info = malloc(sizeof *info + n);
	int rc = 0;

	if (!info) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	info->entropy_count = (int)n * 8;
	info->buf_size = (int)n;
	memcpy(info->buf, p, n);
	int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "open /dev/urandom: %s", strerror(errno));
	} else if (ioctl(fd, RNDADDENTROPY, info) < 0) {
		rc = -errno;
		snprintf(err, errlen, "RNDADDENTROPY: %s", strerror(errno));
	} else if (ioctl(fd, RNDRESEEDCRNG) < 0) {
		rc = -errno;
		snprintf(err, errlen, "RNDRESEEDCRNG: %s", strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	/* The seed must not linger in the agent's heap. */
	explicit_bzero(info->buf, n);
	free(info);
	return rc;
}

void sys_resync(struct conn *c, const struct kiln_msg *m)
{
	struct agent *a = c->a;
	char err[256], host[65], ident[sizeof a->identity];
	uint32_t n;
	const uint8_t *seed = kiln_msg_bytes(m, KT_ENTROPY, &n);
	bool has_time = kiln_msg_has(m, KT_TIME_NS);
	bool has_host = kiln_msg_has(m, KT_HOSTNAME);

	/* Check everything before changing anything. */
	if (seed && (n == 0 || n > ENTROPY_MAX)) {
		conn_error(c, EINVAL, "RESYNC: ENTROPY must be 1 to %d bytes, not %u", ENTROPY_MAX, n);
		return;
	}
	if (has_host && kiln_msg_str(m, KT_HOSTNAME, host, sizeof host) < 0) {
		conn_error(c, EINVAL, "RESYNC: HOSTNAME longer than 64 bytes");
		return;
	}
	if (kiln_msg_has(m, KT_IDENTITY) && kiln_msg_str(m, KT_IDENTITY, ident, sizeof ident) < 0) {
		conn_error(c, EINVAL, "RESYNC: IDENTITY longer than %zu bytes", sizeof ident - 1);
		return;
	}
	if ((has_time || has_host) && !a->pid1 && !a->allow_resync) {
		conn_error(c, EPERM, "RESYNC: setting the clock or hostname is disabled when not PID 1 (start with --resync)");
		return;
	}

	int rc = seed ? add_entropy(seed, n, err, sizeof err) : 0;
	if (rc < 0) {
		conn_error(c, -rc, "RESYNC: %s", err);
		return;
	}
	if (has_time) {
		int64_t t = kiln_msg_i64(m, KT_TIME_NS, 0);
		struct timespec ts = { .tv_sec = t / 1000000000, .tv_nsec = t % 1000000000 };
		if (t < 0 || clock_settime(CLOCK_REALTIME, &ts) < 0) {
			int e = t < 0 ? EINVAL : errno;
			conn_error(c, e, "RESYNC: clock_settime: %s", strerror(e));
			return;
		}
	}
	if (has_host && sethostname(host, strlen(host)) < 0) {
		conn_error(c, errno, "RESYNC: sethostname %s: %s", host, strerror(errno));
		return;
	}
	if (kiln_msg_has(m, KT_IDENTITY)) {
		memcpy(a->identity, ident, sizeof ident);
		/* The first line of a sandbox's own console log (a create is a
		 * restore or fork: the boot's lines are the template's). */
		agent_log("resync: this is %s", ident);
		if (a->pid1) {
			/* Where programs in the guest can read it. */
			mkdir("/run/kiln", 0755);
			int fd = open("/run/kiln/identity.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd >= 0) {
				ssize_t w = write(fd, ident, strlen(ident));
				close(fd);
				if (w >= 0)
					rename("/run/kiln/identity.tmp", "/run/kiln/identity");
			}
		}
	}
	conn_ok(c);
}

void sys_poweroff(struct conn *c, const struct kiln_msg *m)
{
	struct agent *a = c->a;
	bool reboot = kiln_msg_u32(m, KT_FLAGS, 0) & KILN_POWEROFF_REBOOT;

	conn_ok(c);
	if (a->pid1)
		a->shutdown = reboot ? RB_AUTOBOOT : RB_POWER_OFF;
	else
		a->stop = true;
}

void sys_protect(struct agent *a)
{
	struct rlimit nofile = { 65536, 65536 };

	/* The OOM killer must never pick the agent. */
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "-1000", 5) != 5)
		agent_log("oom_score_adj: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	/* Room for many connections and processes, while children get the
	 * usual limit back (see spawn.c). */
	getrlimit(RLIMIT_NOFILE, &a->child_nofile);
	if (setrlimit(RLIMIT_NOFILE, &nofile) < 0) {
		nofile.rlim_cur = nofile.rlim_max = a->child_nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (a->pid1)
		cg_setup(a, meminfo("MemTotal"));
}
