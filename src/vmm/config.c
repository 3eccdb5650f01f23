/*
 * config: parsing and checking kiln-vmm's command line. Everything that can
 * be checked before creating anything is checked here, so that bad input
 * exits with status 2 and leaves no socket, TAP or file behind.
 */
#include "vmm/config.h"
#include "vmm/vmm.h"
#include "vmm/snapshot.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MIN_MEM_MIB 64

static const char usage_text[] =
	"usage: kiln-vmm --kernel VMLINUX [options]\n"
	"  --kernel PATH       ELF vmlinux with a PVH entry (required)\n"
	"  --initrd PATH       initramfs\n"
	"  --disk PATH[,ro]    a virtio-blk disk (repeat for more, at most 8)\n"
	"  --disk-reserve MIB  refuse to grow a disk's file when its filesystem has\n"
	"                      less than this free (the guest gets I/O errors)\n"
	"  --volume-slots N    N empty virtio-blk devices after the disks (0 to 4), for\n"
	"                      volumes attached later (ctl volume_attach)\n"
	"  --volume SLOT:FD[:ro]  start with the open descriptor FD (inherited) as the\n"
	"                      volume in SLOT (needed to restore a snapshot that had one)\n"
	"  --mem MIB           guest memory (default 256)\n"
	"  --vcpus N           vCPUs (default 1)\n"
	"  --vsock PATH        virtio-vsock, bridged to Unix sockets at PATH and PATH_<port>\n"
	"  --cid N             the guest's vsock CID (default 3)\n"
	"  --net TAP           virtio-net on the TAP device TAP (created if missing)\n"
	"  --mac MAC           the guest's MAC address (default 06:00:ac:10:00:02)\n"
	"  --cmdline STR       replace the kernel command line\n"
	"  --append STR        append to the kernel command line\n"
	"  --console FILE|-    guest serial console to FILE or stdout (default: discarded)\n"
	"  --ctl PATH          control socket (JSON lines: status, pause, resume, shutdown)\n"
	"  --no-rng            no virtio-rng device\n"
	"  --restore DIR       start from the snapshot in DIR (shape from the snapshot)\n"
	"  --zygote DIR        load the snapshot in DIR once and serve \"spawn\" on --ctl\n"
	"  --hostname NAME     hostname the guest agent sets after a restore\n"
	"  --identity STR      identity the guest agent keeps after a restore\n"
	"  --no-resync         after a restore, do not resync the guest agent\n"
	"  --jail DIR          run jailed: DIR (empty) becomes the root of a new mount,\n"
	"                      PID and (with --jail-netns) network namespace\n"
	"  --jail-uid N --jail-gid N   the unprivileged ids to run as (required with --jail)\n"
	"  --jail-bind PATH    make PATH visible (read-write) in the jail; repeat\n"
	"  --jail-ro-bind PATH make PATH visible read-only in the jail; repeat\n"
	"  --jail-cgroup DIR   join this cgroup first\n"
	"  --jail-netns PATH   join this network namespace first (the TAP is opened there)\n"
	"  --jail-no-pidns     no PID namespace of its own (live forks outlive it)\n"
	"  --test-triple-fault tests: the restored guest dies before it is ready\n"
	"exit status: 0 guest power-off or shutdown, 1 VMM failure, 2 bad configuration,\n"
	"             3 guest reboot, 4 triple fault or KVM entry failure, 5 guest panic\n";

static int parse_u64(const char *s, const char *what, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return errf(EINVAL, "%s: '%s' is not a number", what, s);
	*out = v;
	return 0;
}

/* parse_volume: --volume SLOT:FD[:ro]. The descriptor is checked later
 * (config_check), the slot against --volume-slots once all are read. */
static int parse_volume(const char *arg, struct vmm_config *cfg)
{
	char buf[64];
	snprintf(buf, sizeof buf, "%s", arg);
	char *fd_s = strchr(buf, ':');
	char *ro_s = fd_s ? strchr(fd_s + 1, ':') : NULL;
	if (!fd_s)
		return errf(EINVAL, "--volume %s: want SLOT:FD[:ro]", arg);
	*fd_s++ = 0;
	if (ro_s)
		*ro_s++ = 0;
	uint64_t slot, fd;
	if (parse_u64(buf, "--volume slot", &slot) < 0 || parse_u64(fd_s, "--volume descriptor", &fd) < 0)
		return -EINVAL;
	if (slot >= VOLUME_SLOTS_MAX)
		return errf(EINVAL, "--volume %s: slot %llu is not a volume slot (0 to %d)", arg,
			    (unsigned long long)slot, VOLUME_SLOTS_MAX - 1);
	if (fd < 3 || fd > 1 << 20)
		return errf(EINVAL, "--volume %s: %llu is not an inherited descriptor (3 and up)", arg,
			    (unsigned long long)fd);
	if (ro_s && strcmp(ro_s, "ro") != 0 && strcmp(ro_s, "rw") != 0)
		return errf(EINVAL, "--volume %s: want SLOT:FD[:ro]", arg);
	if (cfg->volumes[slot].fd >= 0)
		return errf(EINVAL, "--volume: slot %llu is given twice", (unsigned long long)slot);
	cfg->volumes[slot].fd = (int)fd;
	cfg->volumes[slot].read_only = ro_s && strcmp(ro_s, "ro") == 0;
	return 0;
}

int config_parse(struct vmm_config *cfg, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "kernel", required_argument, 0, 'k' },
		{ "initrd", required_argument, 0, 'i' },
		{ "disk", required_argument, 0, 'd' },
		{ "mem", required_argument, 0, 'm' },
		{ "disk-reserve", required_argument, 0, 'D' },
		{ "volume-slots", required_argument, 0, 'V' },
		{ "volume", required_argument, 0, 'W' },
		{ "vcpus", required_argument, 0, 'c' },
		{ "vsock", required_argument, 0, 'v' },
		{ "cid", required_argument, 0, 'C' },
		{ "net", required_argument, 0, 'n' },
		{ "mac", required_argument, 0, 'M' },
		{ "cmdline", required_argument, 0, 'L' },
		{ "append", required_argument, 0, 'a' },
		{ "console", required_argument, 0, 'o' },
		{ "ctl", required_argument, 0, 's' },
		{ "no-rng", no_argument, 0, 'R' },
		{ "restore", required_argument, 0, 'r' },
		{ "zygote", required_argument, 0, 'z' },
		{ "hostname", required_argument, 0, 'H' },
		{ "identity", required_argument, 0, 'I' },
		{ "no-resync", no_argument, 0, 'S' },
		{ "jail", required_argument, 0, 'J' },
		{ "jail-uid", required_argument, 0, 'U' },
		{ "jail-gid", required_argument, 0, 'G' },
		{ "jail-bind", required_argument, 0, 'B' },
		{ "jail-ro-bind", required_argument, 0, 'O' },
		{ "jail-cgroup", required_argument, 0, 'X' },
		{ "jail-netns", required_argument, 0, 'N' },
		{ "jail-no-pidns", no_argument, 0, 'P' },
		{ "test-triple-fault", no_argument, 0, 'T' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	memset(cfg, 0, sizeof *cfg);
	cfg->mem_mib = 256;
	cfg->vcpus = 1;
	cfg->guest_cid = 3;
	cfg->rng = true;
	cfg->resync = true;
	cfg->kvm_fd = cfg->tap_fd = cfg->stderr_fd = cfg->uid_sock = -1;
	for (int i = 0; i < VOLUME_SLOTS_MAX; i++)
		cfg->volumes[i].fd = -1;
	cfg->mac = "06:00:ac:10:00:02";
	opterr = 0;
	optind = 1;
	int c, rc;
	uint64_t v;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'k': cfg->kernel = optarg; break;
		case 'i': cfg->initrd = optarg; break;
		case 'd': {
			if (cfg->ndisks == MAX_DISKS)
				return errf(EINVAL, "--disk: at most %d disks", MAX_DISKS);
			struct disk_config *d = &cfg->disks[cfg->ndisks++];
			char *comma = strrchr(optarg, ',');
			d->path = optarg;
			if (comma && strcmp(comma, ",ro") == 0) {
				*comma = 0;
				d->read_only = true;
			} else if (comma && strcmp(comma, ",rw") == 0) {
				*comma = 0;
			}
			break;
		}
		case 'T':
			cfg->test_triple_fault = true;
			break;
		case 'V':
			if ((rc = parse_u64(optarg, "--volume-slots", &v)) < 0)
				return rc;
			if (v > VOLUME_SLOTS_MAX)
				return errf(EINVAL, "--volume-slots: at most %d", VOLUME_SLOTS_MAX);
			cfg->volume_slots = (int)v;
			cfg->volume_slots_set = true;
			break;
		case 'W':
			if ((rc = parse_volume(optarg, cfg)) < 0)
				return rc;
			break;
		case 'D':
			if ((rc = parse_u64(optarg, "--disk-reserve", &cfg->disk_reserve_mib)) < 0)
				return rc;
			break;
		case 'm':
			if ((rc = parse_u64(optarg, "--mem", &cfg->mem_mib)) < 0)
				return rc;
			break;
		case 'c':
			if ((rc = parse_u64(optarg, "--vcpus", &v)) < 0)
				return rc;
			if (v < 1 || v > 4096)
				return errf(EINVAL, "--vcpus: %s is out of range", optarg);
			cfg->vcpus = (int)v;
			break;
		case 'v': cfg->vsock_path = optarg; break;
		case 'C':
			if ((rc = parse_u64(optarg, "--cid", &v)) < 0)
				return rc;
			if (v < 3 || v > 0xfffffffeULL)
				return errf(EINVAL, "--cid: %s is not a guest CID (3 and up)", optarg);
			cfg->guest_cid = (uint32_t)v;
			break;
		case 'n': cfg->tap = optarg; break;
		case 'M': cfg->mac = optarg; break;
		case 'L': cfg->cmdline = optarg; break;
		case 'a': cfg->cmdline_extra = optarg; break;
		case 'o': cfg->console = optarg; break;
		case 's': cfg->ctl_path = optarg; break;
		case 'R': cfg->rng = false; break;
		case 'r': cfg->restore_dir = optarg; break;
		case 'z': cfg->zygote_dir = optarg; break;
		case 'H': cfg->hostname = optarg; break;
		case 'I': cfg->identity = optarg; break;
		case 'S': cfg->resync = false; break;
		case 'J': cfg->jail.root = optarg; break;
		case 'U':
		case 'G':
			if ((rc = parse_u64(optarg, c == 'U' ? "--jail-uid" : "--jail-gid", &v)) < 0)
				return rc;
			if (v == 0 || v > 0xfffffffe)
				return errf(EINVAL, "%s: %s is not an unprivileged id", c == 'U' ? "--jail-uid" : "--jail-gid", optarg);
			if (c == 'U')
				cfg->jail.uid = (uid_t)v;
			else
				cfg->jail.gid = (gid_t)v;
			break;
		case 'B':
		case 'O': {
			int *n = c == 'B' ? &cfg->jail.nbinds : &cfg->jail.nro_binds;
			const char **list = c == 'B' ? cfg->jail.binds : cfg->jail.ro_binds;
			if (*n == JAIL_MAX_BINDS)
				return errf(EINVAL, "at most %d --jail-bind/--jail-ro-bind each", JAIL_MAX_BINDS);
			if (optarg[0] != '/')
				return errf(EINVAL, "%s: must be an absolute path", optarg);
			list[(*n)++] = optarg;
			break;
		}
		case 'X': cfg->jail.cgroup = optarg; break;
		case 'N': cfg->jail.netns = optarg; break;
		case 'P': cfg->jail.no_pidns = true; break;
		case 'h':
			fputs(usage_text, stdout);
			return 1;
		default:
			if (optopt)
				return errf(EINVAL, "option -%c is unknown (see --help)", optopt);
			return errf(EINVAL, "option %s is unknown or lacks its value (see --help)",
				    argv[optind - 1]);
		}
	}
	if (optind < argc)
		return errf(EINVAL, "unexpected argument '%s' (see --help)", argv[optind]);
	if (cfg->restore_dir && cfg->zygote_dir)
		return errf(EINVAL, "--restore and --zygote exclude each other");
	if ((cfg->restore_dir || cfg->zygote_dir) && (cfg->kernel || cfg->initrd))
		return errf(EINVAL, "a snapshot brings its own kernel: drop --kernel/--initrd");
	if ((cfg->restore_dir || cfg->zygote_dir) && cfg->volume_slots_set)
		return errf(EINVAL, "a snapshot brings its own volume slots: drop --volume-slots");
	for (int i = 0; i < VOLUME_SLOTS_MAX; i++) {
		if (cfg->volumes[i].fd < 0)
			continue;
		if (cfg->zygote_dir)
			return errf(EINVAL, "--volume: a zygote's children start with empty slots");
		if (!cfg->restore_dir && i >= cfg->volume_slots)
			return errf(EINVAL, "--volume: slot %d is not a volume slot (--volume-slots %d)",
				    i, cfg->volume_slots);
	}
	if (cfg->zygote_dir && !cfg->ctl_path)
		return errf(EINVAL, "--zygote needs --ctl (spawns are requested there)");
	if (!cfg->kernel && !cfg->restore_dir && !cfg->zygote_dir)
		return errf(EINVAL, "--kernel is required (see --help)");
	if (cfg->hostname && (strlen(cfg->hostname) > 63 || !cfg->hostname[0]))
		return errf(EINVAL, "--hostname: 1 to 63 characters");
	if (cfg->identity && (strlen(cfg->identity) > 255 || !cfg->identity[0]))
		return errf(EINVAL, "--identity: 1 to 255 characters");
	if (cfg->jail.root && (!cfg->jail.uid || !cfg->jail.gid))
		return errf(EINVAL, "--jail needs --jail-uid and --jail-gid (unprivileged)");
	if (!cfg->jail.root && (cfg->jail.uid || cfg->jail.gid || cfg->jail.nbinds || cfg->jail.nro_binds ||
				cfg->jail.cgroup || cfg->jail.netns || cfg->jail.no_pidns))
		return errf(EINVAL, "--jail-* options need --jail DIR");
	return 0;
}

/* volumes_from_snapshot: the snapshot's slots, and a descriptor for each
 * one that had a volume (the same read-only flag, its size checked later
 * by config_check). A slot it had empty cannot take one at the restore:
 * the guest's driver knows it as empty; attach it afterwards. */
static int volumes_from_snapshot(struct vmm_config *cfg, const struct snap_volumes *vols)
{
	cfg->volume_slots = (int)vols->nslots;
	for (int i = 0; i < VOLUME_SLOTS_MAX; i++) {
		struct volume_config *vc = &cfg->volumes[i];
		bool had = i < (int)vols->nslots && vols->slot[i].attached;
		if (vc->fd >= 0 && i >= (int)vols->nslots)
			return errf(EINVAL, "slot %d is not a volume slot (the snapshot has %u)", i,
				    vols->nslots);
		if (vc->fd >= 0 && !had)
			return errf(EINVAL, "slot %d was empty in the snapshot: drop --volume %d:... and "
				    "attach it with volume_attach once restored", i, i);
		if (!had)
			continue;
		bool ro = vols->slot[i].read_only != 0;
		if (vc->fd < 0)
			return errf(EINVAL, "slot %d had a volume attached in the snapshot: give its "
				    "descriptor with --volume %d:FD%s", i, i, ro ? ":ro" : "");
		if (vc->read_only != ro)
			return errf(EINVAL, "slot %d's volume was %s in the snapshot", i,
				    ro ? "read-only (add :ro)" : "read-write (drop :ro)");
		vc->want_size = vols->slot[i].size;
	}
	return 0;
}

int config_from_snapshot(struct vmm_config *cfg, const struct snap_info *info,
			 const struct snap_volumes *vols)
{
	if ((uint32_t)cfg->ndisks != info->ndisks)
		return errf(EINVAL, "the snapshot has %u disk(s); give --disk %u time(s), not %d",
			    info->ndisks, info->ndisks, cfg->ndisks);
	for (int i = 0; i < cfg->ndisks; i++)
		if (cfg->disks[i].read_only != (info->disk_ro[i] != 0))
			return errf(EINVAL, "disk %d was %s in the snapshot", i,
				    info->disk_ro[i] ? "read-only (add ,ro)" : "read-write (drop ,ro)");
	if (info->net && !cfg->tap)
		return errf(EINVAL, "the snapshot has a network device: give --net TAP");
	if (!info->net && cfg->tap)
		return errf(EINVAL, "the snapshot has no network device: drop --net");
	if (info->vsock && !cfg->vsock_path)
		return errf(EINVAL, "the snapshot has a vsock device: give --vsock PATH");
	if (!info->vsock && cfg->vsock_path)
		return errf(EINVAL, "the snapshot has no vsock device: drop --vsock");
	int rc = volumes_from_snapshot(cfg, vols);
	if (rc < 0)
		return rc;
	cfg->mem_mib = info->mem_size >> 20;
	cfg->vcpus = (int)info->nvcpus;
	cfg->rng = info->rng != 0;
	cfg->guest_cid = info->guest_cid;
	snprintf(cfg->mac_buf, sizeof cfg->mac_buf, "%02x:%02x:%02x:%02x:%02x:%02x",
		 info->mac[0], info->mac[1], info->mac[2], info->mac[3], info->mac[4], info->mac[5]);
	cfg->mac = cfg->mac_buf;
	return 0;
}

static int check_file(const char *what, const char *path, int mode)
{
	int fd = open(path, mode | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("%s %s", what, path);
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = errf_sys("%s %s", what, path);
	else if (S_ISDIR(st.st_mode))
		rc = errf(EISDIR, "%s %s is a directory", what, path);
	close(fd);
	return rc;
}

/* check_socket_path: the path must be free, or a stale socket nobody
 * listens on (left by a VMM that was killed), which we may replace. */
static int check_socket_path(const char *what, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) + 8 >= sizeof sa.sun_path)   /* room for "_<port>" */
		return errf(ENAMETOOLONG, "%s %s: path too long for a Unix socket", what, path);
	char dir[sizeof sa.sun_path];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = 0;
		struct stat st;
		if (dir[0] && (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)))
			return errf(ENOENT, "%s %s: directory %s does not exist", what, path, dir);
	}
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode))
		return errf(EEXIST, "%s %s exists and is not a socket", what, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	strcpy(sa.sun_path, path);
	int live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	if (fd >= 0)
		close(fd);
	if (live)
		return errf(EADDRINUSE, "%s %s is in use by a running process", what, path);
	return 0;
}

static uint64_t host_mem_mib(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kib = 0;
	if (f) {
		if (fscanf(f, "MemTotal: %llu kB", &kib) != 1)
			kib = 0;
		fclose(f);
	}
	return kib / 1024;
}

int config_check(const struct vmm_config *cfg, int kvm_max_vcpus)
{
	int rc;
	if (cfg->kernel && (rc = check_file("kernel", cfg->kernel, O_RDONLY)) < 0)
		return rc;
	if (cfg->initrd && (rc = check_file("initrd", cfg->initrd, O_RDONLY)) < 0)
		return rc;
	for (int i = 0; i < cfg->ndisks; i++)
		if ((rc = check_file("disk", cfg->disks[i].path,
				     cfg->disks[i].read_only ? O_RDONLY : O_RDWR)) < 0)
			return rc;
	for (int i = 0; i < cfg->volume_slots; i++) {
		const struct volume_config *vc = &cfg->volumes[i];
		uint64_t size;
		if (vc->fd < 0)
			continue;
		if ((rc = volume_check(vc->fd, vc->read_only, i, &size)) < 0)
			return rc;
		if (vc->want_size && size != vc->want_size)
			return errf(EINVAL, "slot %d: the volume is %llu bytes; the snapshot had %llu", i,
				    (unsigned long long)size, (unsigned long long)vc->want_size);
	}
	if (cfg->mem_mib < MIN_MEM_MIB)
		return errf(EINVAL, "--mem %llu: at least %d MiB is needed",
			    (unsigned long long)cfg->mem_mib, MIN_MEM_MIB);
	uint64_t host = host_mem_mib();
	if (host && cfg->mem_mib > host)
		return errf(EINVAL, "--mem %llu: more than this host's %llu MiB",
			    (unsigned long long)cfg->mem_mib, (unsigned long long)host);
	int max = kvm_max_vcpus < MAX_VCPUS ? kvm_max_vcpus : MAX_VCPUS;
	if (cfg->vcpus > max)
		return errf(EINVAL, "--vcpus %d: at most %d are supported", cfg->vcpus, max);
	if (cfg->tap && (strlen(cfg->tap) >= IFNAMSIZ || !cfg->tap[0] || strchr(cfg->tap, '/')))
		return errf(EINVAL, "--net %s: not a valid interface name", cfg->tap);
	unsigned mac[6];
	char tail;
	if (cfg->tap && sscanf(cfg->mac, "%x:%x:%x:%x:%x:%x%c", &mac[0], &mac[1], &mac[2],
			       &mac[3], &mac[4], &mac[5], &tail) != 6)
		return errf(EINVAL, "--mac %s: not a MAC address", cfg->mac);
	if (cfg->vsock_path && (rc = check_socket_path("--vsock", cfg->vsock_path)) < 0)
		return rc;
	if (cfg->ctl_path && (rc = check_socket_path("--ctl", cfg->ctl_path)) < 0)
		return rc;
	if (cfg->console && strcmp(cfg->console, "-") != 0) {
		struct stat st;
		if (stat(cfg->console, &st) == 0 && S_ISDIR(st.st_mode))
			return errf(EISDIR, "--console %s is a directory", cfg->console);
	}
	return 0;
}
