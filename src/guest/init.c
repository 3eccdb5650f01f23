/*
 * kiln-init: PID 1 of every kiln guest, and the guest agent.
 *
 * As PID 1 (from the initramfs) it boots the guest: kernel file systems,
 * the virtio and vsock modules, the root disk, hostname and network (all
 * driven by the kiln.* kernel parameters in docs/guest.md). Then it serves
 * the agent protocol (docs/protocol.md) on vsock port 52, reaps every
 * orphan in the guest, and powers off when asked to.
 *
 * Started as any other process it only serves the protocol, on the
 * address given with --listen, so that the agent can be tested natively:
 *
 *   kiln-init --listen unix:/tmp/agent.sock [--resync]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "guest/agent.h"
#include "guest/boot.h"

static void usage(void)
{
	fprintf(stderr,
		"usage: kiln-init --listen ADDRESS [--resync]\n"
		"  ADDRESS is unix:PATH or vsock:PORT.\n"
		"  --resync lets RESYNC set the clock and hostname (always allowed as PID 1).\n"
		"As PID 1 kiln-init boots the guest and listens on vsock port %u\n"
		"(kiln.port=); see docs/guest.md.\n", KILN_VSOCK_PORT);
}

/* Descriptors 0-2 must be open, or the first pipes and sockets would take
 * their numbers and a child's dup2 onto 0-2 would go wrong. */
static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) < 0) {
			int n = open("/dev/null", O_RDWR);
			if (n >= 0 && n != fd) {
				dup2(n, fd);
				close(n);
			}
		}
	}
}

static int serve_only(int argc, char **argv)
{
	const char *addr = NULL;
	bool allow_resync = false;
	char err[256];
	struct agent a;
	int fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			addr = argv[++i];
		} else if (!strcmp(argv[i], "--resync")) {
			allow_resync = true;
		} else {
			usage();
			return 2;
		}
	}
	if (!addr) {
		usage();
		return 2;
	}
	ensure_stdio();
	if (agent_listen(addr, &fd, err, sizeof err) < 0) {
		agent_log("%s", err);
		return 1;
	}
	int rc = agent_init(&a, fd, false);
	if (rc < 0) {
		agent_log("start: %s", strerror(-rc));
		return 1;
	}
	a.allow_resync = allow_resync;
	sys_protect(&a);
	agent_log("ready (listening on %s, pid %d)", addr, (int)getpid());
	rc = agent_run(&a);
	agent_free(&a);
	if (!strncmp(addr, "unix:", 5))
		unlink(addr + 5);
	return rc < 0 ? 1 : 0;
}

static void read_cmdline(char *buf, size_t len)
{
	buf[0] = 0;
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
}

static double uptime_seconds(void)
{
	return (double)sys_now_ns(CLOCK_BOOTTIME) / 1e9;
}

int main(int argc, char **argv)
{
	char line[4096], err[512], addr[32];
	struct boot_cfg cfg;
	struct agent a;
	int fd, rc;

	if (getpid() != 1)
		return serve_only(argc, argv);

	boot_early();
	read_cmdline(line, sizeof line);
	if (cmdline_parse(line, &cfg, err, sizeof err) > 0)
		agent_log("kernel command line: %s", err);
	/* ctrl-alt-del becomes SIGINT to us, handled as a reboot request. */
	reboot(RB_DISABLE_CAD);

	int modules = boot_modules();
	if (boot_root(&cfg, err, sizeof err) < 0)
		agent_log("root: %s; staying in the initramfs", err);
	boot_mounts();
	boot_hostname(&cfg);
	if (net_setup(&cfg, err, sizeof err) < 0)
		agent_log("network: %s", err);
	umask(022);

	snprintf(addr, sizeof addr, "vsock:%u", cfg.port);
	rc = agent_listen(addr, &fd, err, sizeof err);
	if (rc < 0 || (rc = agent_init(&a, fd, true)) < 0) {
		/* Without the agent nothing can reach this guest; keep
		 * reaping so it at least stays consistent. */
		agent_log("agent: %s", rc == -ENOMEM ? "out of memory" : err);
		agent_log("ready (modules %s, uptime %.3f s, NO AGENT)",
			  modules == 0 ? "loaded" : "FAILED", uptime_seconds());
		for (;;)
			pause();
	}
	a.pids_max = cfg.pids_max;
	a.mem_reserve = (uint64_t)cfg.mem_reserve_mb << 20;
	sys_protect(&a);
	agent_log("ready (modules %s, uptime %.3f s, vsock port %u, root %s)",
		  modules == 0 ? "loaded" : "FAILED", uptime_seconds(), cfg.port,
		  cfg.root[0] ? cfg.root : "initramfs");
	rc = agent_run(&a);
	boot_shutdown(rc == RB_AUTOBOOT ? RB_AUTOBOOT : RB_POWER_OFF);
}
