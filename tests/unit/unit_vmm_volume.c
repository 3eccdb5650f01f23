/*
 * Unit tests for volume slots' parts that need no KVM: which descriptors
 * can back a volume, the bounds on what a guest may read and write, the
 * --volume option, and the snapshot's volume slots record (a damaged one
 * is refused). The guest-visible behaviour is tests/integration/17.
 */
#include "vmm/config.h"
#include "vmm/snapshot.h"
#include "vmm/volume.h"
#include "common/crc32.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/kiln-unit-vol.XXXXXX";

static int file_of(const char *name, off_t size, int flags)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, size) < 0)
		return -1;
	close(fd);
	return open(path, flags);
}

static void volume_check_refuses_bad_descriptors(void)
{
	uint64_t size = 0;
	int fd;
	CHECK(volume_check(-1, false, 0, &size) == -EBADF);
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(volume_check(fd, true, 2, &size) == -EINVAL && strstr(errmsg(), "slot 2") &&
	      strstr(errmsg(), "directory"));
	close(fd);
	fd = file_of("zero", 0, O_RDWR);
	CHECK(volume_check(fd, false, 1, &size) == -EINVAL && strstr(errmsg(), "slot 1"));
	close(fd);
	fd = file_of("odd", 1000, O_RDWR);
	CHECK(volume_check(fd, false, 0, &size) == -EINVAL);
	close(fd);
	fd = file_of("ro", 1 << 20, O_RDONLY);
	CHECK(volume_check(fd, false, 3, &size) == -EACCES && strstr(errmsg(), "slot 3"));
	CHECK(volume_check(fd, true, 3, &size) == 0 && size == 1 << 20);
	close(fd);
	fd = file_of("wo", 1 << 20, O_WRONLY);
	CHECK(volume_check(fd, true, 0, &size) == -EACCES);
	close(fd);
	fd = file_of("ok", 1 << 20, O_RDWR);
	size = 0;
	CHECK(volume_check(fd, false, 0, &size) == 0 && size == 1 << 20);
	close(fd);
}

static void volume_io_is_bounded(void)
{
	struct volume v = { .fd = file_of("io", 64 * 1024, O_RDWR), .size = 64 * 1024 };
	char a[1000], b[24], back[1024];
	memset(a, 'a', sizeof a);
	memset(b, 'b', sizeof b);
	struct iovec w[2] = { { a, sizeof a }, { b, sizeof b } };
	CHECK(volume_writev(&v, w, 2, 4096) == 1024);
	struct iovec r[1] = { { back, sizeof back } };
	CHECK(volume_readv(&v, r, 1, 4096) == 1024);
	CHECK(memcmp(back, a, sizeof a) == 0 && memcmp(back + 1000, b, sizeof b) == 0);
	/* The last sector is in range; one byte past it, or a wrapping
	 * offset, is not. */
	CHECK(volume_readv(&v, r, 1, 63 * 1024) == 1024);
	CHECK(volume_readv(&v, r, 1, 63 * 1024 + 512) == -EIO);
	CHECK(volume_writev(&v, w, 2, 64 * 1024) == -EIO);
	CHECK(volume_readv(&v, r, 1, UINT64_MAX - 100) == -EIO);
	/* A file root shrank behind our back reads zeros past its end. */
	CHECK(ftruncate(v.fd, 4096 + 512) == 0);
	memset(back, 'x', sizeof back);
	CHECK(volume_readv(&v, r, 1, 4096) == 1024);
	CHECK(back[0] == 'a' && back[511] == 'a' && back[512] == 0 && back[1023] == 0);
	CHECK(volume_flush(&v) == 0);
	/* Read-only: writes refused, reads fine. */
	v.read_only = true;
	CHECK(volume_writev(&v, w, 2, 0) == -EROFS);
	CHECK(volume_readv(&v, r, 1, 0) == 1024);
	v.read_only = false;
	CHECK(volume_close(&v) == 0 && v.fd == -1 && v.size == 0);
	/* An empty slot answers errors. */
	CHECK(volume_readv(&v, r, 1, 0) == -EIO);
	CHECK(volume_writev(&v, w, 2, 0) == -EIO);
	CHECK(volume_flush(&v) == 0);
}

static int parse(struct vmm_config *cfg, const char *const *args)
{
	char *argv[32];
	int argc = 0;
	static char store[32][128];
	argv[argc++] = "kiln-vmm";
	for (int i = 0; args[i]; i++) {
		snprintf(store[i], sizeof store[i], "%s", args[i]);
		argv[argc++] = store[i];
	}
	argv[argc] = NULL;
	return config_parse(cfg, argc, argv);
}

static void volume_options_parse(void)
{
	struct vmm_config cfg;
	CHECK(parse(&cfg, (const char *[]){ "--kernel", "k", "--volume-slots", "2", "--volume", "1:7:ro", NULL }) == 0);
	CHECK(cfg.volume_slots == 2 && cfg.volumes[1].fd == 7 && cfg.volumes[1].read_only &&
	      cfg.volumes[0].fd == -1);
	CHECK(parse(&cfg, (const char *[]){ "--kernel", "k", "--volume-slots", "5", NULL }) < 0);
	CHECK(parse(&cfg, (const char *[]){ "--kernel", "k", "--volume-slots", "1", "--volume", "1:7", NULL }) < 0 &&
	      strstr(errmsg(), "slot 1 is not a volume slot"));
	CHECK(parse(&cfg, (const char *[]){ "--kernel", "k", "--volume-slots", "1", "--volume", "0:1", NULL }) < 0);
	CHECK(parse(&cfg, (const char *[]){ "--kernel", "k", "--volume-slots", "1", "--volume", "0", NULL }) < 0);
	CHECK(parse(&cfg, (const char *[]){ "--kernel", "k", "--volume-slots", "1", "--volume", "0:7:rx", NULL }) < 0);
	CHECK(parse(&cfg, (const char *[]){ "--kernel", "k", "--volume-slots", "2", "--volume", "0:7",
					    "--volume", "0:8", NULL }) < 0);
	CHECK(parse(&cfg, (const char *[]){ "--zygote", "d", "--ctl", "c", "--volume", "0:7", NULL }) < 0);
	CHECK(parse(&cfg, (const char *[]){ "--restore", "d", "--volume-slots", "1", NULL }) < 0);
	/* A restore's slots come from the snapshot: --volume is matched there. */
	CHECK(parse(&cfg, (const char *[]){ "--restore", "d", "--volume", "3:9", NULL }) == 0);
}

/* A payload of one volume slots record (tag 10) and the end. */
static size_t payload_of(uint8_t *out, const struct snap_volumes *v, uint32_t len)
{
	uint32_t tag = 10, end = 0xff, zero = 0;
	memcpy(out, &tag, 4);
	memcpy(out + 4, &len, 4);
	memcpy(out + 8, v, sizeof *v);
	memcpy(out + 8 + len, &end, 4);
	memcpy(out + 12 + len, &zero, 4);
	return 16 + len;
}

static void snapshot_volumes_record(void)
{
	uint8_t p[256];
	struct snap_volumes v = { .nslots = 2 }, got;
	v.slot[1].attached = 1;
	v.slot[1].size = 1 << 20;
	size_t n = payload_of(p, &v, sizeof v);
	CHECK(snapshot_volumes(p, n, &got) == 0 && got.nslots == 2 && got.slot[1].attached &&
	      got.slot[1].size == 1 << 20);
	/* Old snapshots have no record: no slots. */
	uint32_t end[2] = { 0xff, 0 };
	CHECK(snapshot_volumes((const uint8_t *)end, sizeof end, &got) == 0 && got.nslots == 0);
	/* Damaged: too many slots, an attached slot beyond them, a bad size. */
	struct snap_volumes bad = v;
	bad.nslots = 9;
	n = payload_of(p, &bad, sizeof bad);
	CHECK(snapshot_volumes(p, n, &got) == -EINVAL);
	bad = v;
	bad.slot[3].attached = 1;
	bad.slot[3].size = 512;
	n = payload_of(p, &bad, sizeof bad);
	CHECK(snapshot_volumes(p, n, &got) == -EINVAL);
	bad = v;
	bad.slot[1].size = 1000;
	n = payload_of(p, &bad, sizeof bad);
	CHECK(snapshot_volumes(p, n, &got) == -EINVAL);
	n = payload_of(p, &v, sizeof v - 8);
	CHECK(snapshot_volumes(p, n, &got) == -EINVAL);
}

/* state_file: a state file of version v holding payload, in DIR/snap. */
static void state_file(uint32_t v, const void *payload, uint32_t len)
{
	char path[256];
	snprintf(path, sizeof path, "%s/snap", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/snap/state", dir);
	struct {
		char magic[8];
		uint32_t version, header_size;
		uint64_t payload_len;
		uint32_t crc, reserved;
	} h = { .version = v, .header_size = 32, .payload_len = len, .crc = crc32(payload, len) };
	memcpy(h.magic, "KILNSNAP", 8);
	FILE *f = fopen(path, "w");
	fwrite(&h, sizeof h, 1, f);
	fwrite(payload, len, 1, f);
	fclose(f);
}

/* Version 1 snapshots (before the slots record) are still read; an
 * unknown version is refused by its number. */
static void snapshot_versions_read(void)
{
	uint32_t end[2] = { 0xff, 0 };
	char path[256];
	uint8_t *p = NULL;
	size_t len = 0;
	snprintf(path, sizeof path, "%s/snap", dir);
	for (uint32_t v = 1; v <= 2; v++) {
		state_file(v, end, sizeof end);
		CHECK(snapshot_read(path, &p, &len) == 0 && len == sizeof end);
		free(p);
		p = NULL;
	}
	state_file(3, end, sizeof end);
	CHECK(snapshot_read(path, &p, &len) == -EINVAL && strstr(errmsg(), "format version 3"));
}

int main(void)
{
	int failures = 0;
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(volume_check_refuses_bad_descriptors);
	RUN(volume_io_is_bounded);
	RUN(volume_options_parse);
	RUN(snapshot_volumes_record);
	RUN(snapshot_versions_read);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	return failures ? 1 : 0;
}
