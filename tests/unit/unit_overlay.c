/*
 * Unit tests for the copy-on-write overlay format (src/vmm/overlay.c):
 * random writes through a chain agree with a plain in-memory model, the
 * base never changes, sealed layers refuse writes, flattening keeps the
 * content, and damaged files are refused. A disk forked many times keeps
 * a short top name.
 */
#include "vmm/disk.h"
#include "vmm/overlay.h"
#include "common/err.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIZE (4 << 20)
static char dir[] = "/tmp/kiln-unit-overlay.XXXXXX";
static uint8_t model[SIZE], got[SIZE];

static const char *path(const char *name)
{
	static char p[8][256];
	static int i;
	i = (i + 1) % 8;
	snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
	return p[i];
}

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245 + 12345;
	return rnd_state >> 8;
}

static void make_base(void)
{
	for (int i = 0; i < SIZE; i++)
		model[i] = (uint8_t)(i * 7 + i / 4096);
	int fd = open(path("base.img"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, model, SIZE) == SIZE);
	close(fd);
}

static bool same_as_model(struct chain *c)
{
	struct iovec v = { got, SIZE };
	return chain_readv(c, &v, 1, 0) == SIZE && memcmp(got, model, SIZE) == 0;
}

static void random_writes(struct chain *c, int count)
{
	static uint8_t data[200000];
	for (int k = 0; k < count; k++) {
		uint32_t len = 1 + rnd() % 150000, off = rnd() % (SIZE - len);
		for (uint32_t i = 0; i < len; i++)
			data[i] = (uint8_t)rnd();
		/* split into two iovecs to exercise the walk */
		uint32_t a = len / 3;
		struct iovec v[2] = { { data, a }, { data + a, len - a } };
		CHECK(chain_writev(c, v, 2, off) == len);
		memcpy(model + off, data, len);
	}
}

static void overlay_follows_model(void)
{
	make_base();
	uint8_t *base_copy = malloc(SIZE);
	memcpy(base_copy, model, SIZE);
	CHECK(overlay_create(path("o1"), "base.img") == 0);     /* relative base */
	struct chain c;
	CHECK(chain_open(&c, path("o1"), true) == 0);
	CHECK(c.size == SIZE && c.n == 2);
	CHECK(same_as_model(&c));
	random_writes(&c, 200);
	CHECK(same_as_model(&c));
	CHECK(chain_flush(&c) == 0);
	chain_close(&c);
	/* Reopened, the same content; the base is untouched. */
	CHECK(chain_open(&c, path("o1"), false) == 0);
	CHECK(same_as_model(&c));
	struct iovec v = { got, 16 };
	CHECK(chain_writev(&c, &v, 1, 0) == -EROFS);
	chain_close(&c);
	CHECK(chain_open(&c, path("base.img"), false) == 0);
	struct iovec all = { got, SIZE };
	CHECK(chain_readv(&c, &all, 1, 0) == SIZE && memcmp(got, base_copy, SIZE) == 0);
	CHECK(chain_readv(&c, &all, 1, 512) == -ERANGE);        /* past the end */
	chain_close(&c);
	free(base_copy);
}

static void fork_chain_is_copy_on_write(void)
{
	/* o1 (from the previous test) is sealed; two children branch off. */
	uint8_t *snapshot = malloc(SIZE);
	memcpy(snapshot, model, SIZE);
	struct disk d;
	CHECK(disk_open(&d, path("o1"), false) == 0);
	const char *kids[1] = { path("child") };
	CHECK(disk_fork(&d, path("parent2"), kids, 1) == 0);
	CHECK(strcmp(d.path, path("parent2")) == 0);
	/* The parent writes after the fork; the child does not see it. */
	random_writes(&d.chain, 50);
	struct chain child;
	CHECK(chain_open(&child, path("child"), true) == 0);
	struct iovec v = { got, SIZE };
	CHECK(chain_readv(&child, &v, 1, 0) == SIZE && memcmp(got, snapshot, SIZE) == 0);
	CHECK(same_as_model(&d.chain));
	/* The frozen layer is sealed: nobody may write it any more. */
	struct chain frozen;
	CHECK(chain_open(&frozen, path("o1"), true) == -EROFS);
	chain_close(&child);
	disk_close(&d);
	free(snapshot);
}

static void deep_chains_flatten(void)
{
	struct disk d;
	CHECK(disk_open(&d, path("parent2"), false) == 0);
	char name[64];
	for (int i = 0; i < OVERLAY_MAX_DEPTH + 2; i++) {
		snprintf(name, sizeof name, "gen%d", i);
		const char *kid = path(name);
		snprintf(name, sizeof name, "next%d", i);
		CHECK(disk_fork(&d, path(name), &kid, 1) == 0);
		random_writes(&d.chain, 5);
		CHECK(d.chain.layers[0].depth <= OVERLAY_MAX_DEPTH);
	}
	CHECK(same_as_model(&d.chain));
	/* kiln-disk flatten: one layer over the raw base, same bytes. */
	CHECK(chain_flush(&d.chain) == 0);
	CHECK(overlay_flatten(d.path, path("flat"), NULL) == 0);
	struct chain f;
	CHECK(chain_open(&f, path("flat"), false) == 0);
	CHECK(f.n == 2 && same_as_model(&f));
	chain_close(&f);
	disk_close(&d);
}

/* The parent's new top at a fork is named from the stem of its old one,
 * without the suffixes earlier forks added: appending ".<pid>-<n>" at
 * every fork made the name longer than NAME_MAX after about 30 forks of
 * one VM, and every fork after that failed (bench/soak, 200 forks). */
static void fork_names_stay_short(void)
{
	char out[4096];
	CHECK(overlay_fork_stem("/d/disk") == strlen("/d/disk"));
	CHECK(overlay_fork_stem("/d/disk.12-0.345-17") == strlen("/d/disk"));
	CHECK(overlay_fork_stem("/d/root.kcow.7-1") == strlen("/d/root.kcow"));
	CHECK(overlay_fork_stem("/d/disk.12-x") == strlen("/d/disk.12-x"));	/* not a fork's */
	CHECK(overlay_fork_stem("/d/disk.-1") == strlen("/d/disk.-1"));
	CHECK(overlay_fork_stem("/d.1-2/disk") == strlen("/d.1-2/disk"));	/* a directory's dots */
	CHECK(overlay_fork_stem("/d/.1-2") == strlen("/d/.1-2"));		/* all suffix: kept */
	CHECK(overlay_fork_name(path("x.3-4"), 99, 0, out, sizeof out) == 0 && !strcmp(out, path("x.99-0")));
	/* A name that is taken, or whose ".flat" is, is passed over. */
	int fd = open(path("x.99-0"), O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	close(fd);
	fd = open(path("x.99-1.flat"), O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK(overlay_fork_name(path("x.3-4"), 99, 0, out, sizeof out) == 0 && !strcmp(out, path("x.99-2")));
	/* Forty forks of one disk, a child each, every one asking from 0: the
	 * top's name stays STEM.<pid>-<n>, and the content holds. */
	struct disk d;
	CHECK(disk_open(&d, path("flat"), false) == 0);
	char kidname[64];
	int forks = 0;
	for (int i = 0; i < 40; i++) {
		snprintf(kidname, sizeof kidname, "many-kid%d", i);
		const char *kid = path(kidname);
		if (disk_fork_next(&d, 4242, 0, &kid, 1) < 0) {
			printf("  fork %d: %s\n", i, errmsg());
			break;
		}
		forks++;
		random_writes(&d.chain, 3);
	}
	CHECK(forks == 40);
	CHECK(!strcmp(d.path, path("flat.4242-39")));
	CHECK(d.chain.layers[0].depth <= OVERLAY_MAX_DEPTH);
	CHECK(same_as_model(&d.chain));
	disk_close(&d);
}

/* A line of forks, each the last one's child (a VM forked from a fork),
 * each in a directory of its own that is gone by the next fork: a forked
 * VM cannot open its ancestors' layers by path (their directories are
 * their uids', docs/security.md "Forks"), so its disk takes them open
 * from its parent's chain (disk_open_over), and its own forks and the
 * flattening past OVERLAY_MAX_DEPTH work from the open chain too. */
static void lineage_forks_without_paths(void)
{
	char gen[64], gone[64], kidname[80];
	snprintf(gen, sizeof gen, "line0");
	CHECK(mkdir(path(gen), 0700) == 0);
	snprintf(kidname, sizeof kidname, "line0/disk");
	CHECK(overlay_create(path(kidname), path("base.img")) == 0);
	make_base();
	struct disk d;
	CHECK(disk_open(&d, path(kidname), false) == 0);
	random_writes(&d.chain, 5);
	int done = 0;
	for (int g = 1; g <= 12; g++) {
		snprintf(gen, sizeof gen, "line%d", g);
		CHECK(mkdir(path(gen), 0700) == 0);
		snprintf(kidname, sizeof kidname, "line%d/disk", g);
		const char *kid = path(kidname);
		if (disk_fork_next(&d, 4242, 0, &kid, 1) < 0) {
			printf("  generation %d: fork: %s\n", g, errmsg());
			break;
		}
		struct disk k;
		if (disk_open_over(&k, kid, false, &d.chain, 1) < 0) {
			printf("  generation %d: open: %s\n", g, errmsg());
			break;
		}
		disk_close(&d);
		snprintf(gen, sizeof gen, "line%d", g - 1);
		snprintf(gone, sizeof gone, "line%d.gone", g - 1);
		CHECK(rename(path(gen), path(gone)) == 0);
		d = k;
		CHECK(same_as_model(&d.chain));
		random_writes(&d.chain, 3);
		done = g;
	}
	CHECK(done == 12);
	if (done < 1 || d.chain.n < 1)
		return;
	CHECK(d.chain.layers[0].depth <= OVERLAY_MAX_DEPTH);
	CHECK(same_as_model(&d.chain));
	/* A top over something else than the chain given: opened by path. */
	struct chain c;
	CHECK(chain_open_over(&c, path("base.img"), false, &d.chain, 1) == 0 && c.n == 1);
	chain_close(&c);
	/* The writable top itself is never shared. */
	CHECK(chain_open_over(&c, d.path, false, &d.chain, 0) == -EINVAL);
	disk_close(&d);
}

static void raw_disks_cannot_fork(void)
{
	struct disk d;
	CHECK(disk_open(&d, path("base.img"), false) == 0);
	const char *kid = path("never");
	CHECK(disk_fork(&d, path("never2"), &kid, 1) < 0);
	CHECK(strstr(errmsg(), "raw image") != NULL);
	CHECK(access(path("never"), F_OK) != 0);
	disk_close(&d);
}

static void damaged_overlays_are_refused(void)
{
	CHECK(overlay_create(path("bad"), path("base.img")) == 0);
	int fd = open(path("bad"), O_RDWR);
	uint64_t huge = 1ULL << 40;              /* map entry 0 -> far outside the file */
	CHECK(pwrite(fd, &huge, 8, 4096) == 8);
	close(fd);
	struct chain c;
	CHECK(chain_open(&c, path("bad"), false) < 0);
	CHECK(strstr(errmsg(), "outside the file") != NULL);
	fd = open(path("bad"), O_RDWR);
	uint32_t bits = 12;                      /* cluster bits */
	CHECK(pwrite(fd, &bits, 4, 12) == 4);
	close(fd);
	CHECK(chain_open(&c, path("bad"), false) < 0);
	/* A loop: an overlay whose base is itself. */
	CHECK(overlay_create(path("loop"), path("base.img")) == 0);
	fd = open(path("loop"), O_RDWR);
	char self[] = "loop";
	uint32_t len = 4;
	CHECK(pwrite(fd, &len, 4, 56) == 4 && pwrite(fd, self, 5, 64) == 5);
	close(fd);
	CHECK(chain_open(&c, path("loop"), false) < 0);
	CHECK(overlay_create(path("missing"), path("nonexistent.img")) < 0);
}

/* A copy-up over a hole of a sparse raw base (free space of a template's
 * filesystem) gives zeros around the new bytes without reading the base:
 * the hole's pages stay out of the page cache (which a VMM's memory
 * cgroup is charged for). A cluster half data, half hole, is read. */
static void copyup_over_holes(void)
{
	const size_t cl = (size_t)1 << OVERLAY_CLUSTER_BITS, size = 64 * cl;
	uint8_t *want = calloc(1, size), *have = malloc(size), buf[100];
	int fd = open(path("sparse.img"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)size) == 0);
	memset(want, 0xab, cl);                        /* cluster 0: data */
	memset(want + 5 * cl, 0xcd, cl / 2);           /* cluster 5: half data */
	CHECK(pwrite(fd, want, cl, 0) == (ssize_t)cl);
	CHECK(pwrite(fd, want + 5 * cl, cl / 2, (off_t)(5 * cl)) == (ssize_t)(cl / 2));
	CHECK(fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	CHECK(overlay_create(path("sparse.top"), "sparse.img") == 0);
	struct chain c;
	CHECK(chain_open(&c, path("sparse.top"), true) == 0);
	const uint64_t at[] = { 10, 30 * cl + 7, 5 * cl + cl / 2 + 3, 5 * cl + 1, 63 * cl + cl - 100 };
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		memset(buf, (int)(i + 1), sizeof buf);
		struct iovec v = { buf, sizeof buf };
		CHECK(chain_writev(&c, &v, 1, at[i]) == (int64_t)sizeof buf);
		memcpy(want + at[i], buf, sizeof buf);
	}
	/* Nothing read the holes copied up (clusters 30 and 63) into the
	 * page cache (readahead after the reads of clusters 0 and 5 does
	 * not reach them). */
	uint8_t *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	unsigned char vec[size / 4096 + 1];
	CHECK(m != MAP_FAILED && mincore(m, size, vec) == 0);
	int cached = 0;
	for (size_t pg = 30 * cl / 4096; pg < 31 * cl / 4096; pg++)
		cached += vec[pg] & 1;
	for (size_t pg = 63 * cl / 4096; pg < 64 * cl / 4096; pg++)
		cached += vec[pg] & 1;
	CHECK(cached == 0);
	struct iovec all = { have, size };
	CHECK(chain_readv(&c, &all, 1, 0) == (int64_t)size && memcmp(have, want, size) == 0);
	chain_close(&c);
	munmap(m, size);
	close(fd);
	free(want);
	free(have);
}

/* A disk's growth stops at the reserve its filesystem keeps (kilnd
 * --reserve-disk) even when a neighbour filled the filesystem after this
 * chain last looked: the chain looks again often enough that it goes
 * below the reserve by 1 MiB at most, the write past it fails ENOSPC, and
 * writes go on once there is room again. The filesystem is a 32 MiB tmpfs
 * mounted in a mount namespace of this process's own. */
static bool growth_stops_at_the_reserve(void)
{
	const uint64_t cl = (uint64_t)1 << OVERLAY_CLUSTER_BITS, reserve = 8 << 20;
	const char *small = path("small");
	if (mkdir(small, 0700) != 0 || unshare(CLONE_NEWNS) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", small, "tmpfs", 0, "size=32m") != 0) {
		printf("SKIP growth_stops_at_the_reserve: a small tmpfs needs root (%s)\n", strerror(errno));
		return false;
	}
	int fd = open(path("big.img"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 64 << 20) == 0);
	close(fd);
	char top[300], filler[300];
	snprintf(top, sizeof top, "%s/top", small);
	snprintf(filler, sizeof filler, "%s/filler", small);
	CHECK(overlay_create(top, path("big.img")) == 0);
	struct chain c;
	CHECK(chain_open(&c, top, true) == 0);
	c.reserve = reserve;
	static uint8_t buf[1 << OVERLAY_CLUSTER_BITS];
	memset(buf, 0x5a, sizeof buf);
	struct iovec v = { buf, sizeof buf };
	CHECK(chain_writev(&c, &v, 1, 0) == (int64_t)cl);      /* its look: 24 MiB above */
	/* A neighbour leaves 2 MiB above the reserve. */
	struct statvfs fs;
	CHECK(statvfs(small, &fs) == 0);
	uint64_t free_now = (uint64_t)fs.f_bavail * fs.f_frsize;
	int ff = open(filler, O_RDWR | O_CREAT, 0600);
	CHECK(ff >= 0 && fallocate(ff, 0, 0, (off_t)(free_now - reserve - (2 << 20))) == 0);
	int64_t rc = 0;
	uint64_t k, written = 0;
	for (k = 1; k < 128 && (rc = chain_writev(&c, &v, 1, k * cl)) == (int64_t)cl; k++)
		written += cl;
	CHECK(statvfs(small, &fs) == 0);
	uint64_t left = (uint64_t)fs.f_bavail * fs.f_frsize;
	printf("  %llu KiB written after the neighbour, then %lld; %llu KiB free (reserve %llu)\n",
	       (unsigned long long)(written >> 10), (long long)rc,
	       (unsigned long long)(left >> 10), (unsigned long long)(reserve >> 10));
	CHECK(rc == -ENOSPC && k < 128);
	CHECK(written >= (1 << 20));
	CHECK(left + (1 << 20) >= reserve);
	/* Room again: the next write goes through. */
	CHECK(ftruncate(ff, 0) == 0);
	CHECK(chain_writev(&c, &v, 1, k * cl) == (int64_t)cl);
	close(ff);
	chain_close(&c);
	umount2(small, MNT_DETACH);
	return true;
}

/* A disk made larger than its base (a template build's --disk): the
 * base's bytes, then zeros to the new end, writable there; a layer put
 * over it keeps the size; smaller than the base or not a multiple of
 * 512 is refused. */
static void sized_overlay_grows_the_disk(void)
{
	make_base();
	CHECK(overlay_create_sized(path("small"), path("base.img"), SIZE - 512) == -EINVAL);
	CHECK(overlay_create_sized(path("odd"), path("base.img"), 2 * SIZE + 1) == -EINVAL);
	CHECK(overlay_create_sized(path("big"), path("base.img"), 2 * SIZE) == 0);
	struct chain c;
	CHECK(chain_open(&c, path("big"), true) == 0);
	CHECK(c.size == 2 * SIZE);
	static uint8_t big[2 * SIZE];
	struct iovec all = { big, 2 * SIZE };
	CHECK(chain_readv(&c, &all, 1, 0) == 2 * SIZE);
	CHECK(memcmp(big, model, SIZE) == 0);
	bool zeros = true;
	for (int i = SIZE; i < 2 * SIZE; i++)
		zeros &= big[i] == 0;
	CHECK(zeros);
	struct iovec w = { (void *)"past the base", 13 };
	CHECK(chain_writev(&c, &w, 1, 2 * SIZE - 4096) == 13);
	CHECK(chain_flush(&c) == 0);
	chain_close(&c);
	CHECK(overlay_set_sealed(path("big"), true) == 0);
	CHECK(overlay_create(path("big2"), path("big")) == 0);
	CHECK(chain_open(&c, path("big2"), false) == 0);
	char tail[13];
	struct iovec r = { tail, 13 };
	CHECK(c.size == 2 * SIZE && chain_readv(&c, &r, 1, 2 * SIZE - 4096) == 13 && !memcmp(tail, "past the base", 13));
	chain_close(&c);
}

/* A disk grown over an overlay (a sandbox created with disk_mib: its
 * top sealed, a larger one over it): the chain opens with a lower layer
 * smaller than the disk, reads the sealed top's writes, then the base,
 * then zeros to the new end, and takes writes past the old end. */
static void sized_overlay_over_an_overlay(void)
{
	make_base();
	CHECK(overlay_create(path("mid"), path("base.img")) == 0);
	struct chain c;
	CHECK(chain_open(&c, path("mid"), true) == 0);
	struct iovec w = { (void *)"in the old top", 14 };
	CHECK(chain_writev(&c, &w, 1, 3 * 4096) == 14);
	CHECK(chain_flush(&c) == 0);
	chain_close(&c);
	CHECK(overlay_set_sealed(path("mid"), true) == 0);
	CHECK(overlay_create_sized(path("grown"), path("mid"), 3 * SIZE) == 0);
	CHECK(chain_open(&c, path("grown"), true) == 0);
	CHECK(c.size == 3 * SIZE && c.n == 3);
	static uint8_t all[3 * SIZE], want[SIZE];
	memcpy(want, model, SIZE);
	memcpy(want + 3 * 4096, "in the old top", 14);
	struct iovec r = { all, 3 * SIZE };
	CHECK(chain_readv(&c, &r, 1, 0) == 3 * SIZE);
	CHECK(memcmp(all, want, SIZE) == 0);
	bool zeros = true;
	for (int i = SIZE; i < 3 * SIZE; i++)
		zeros &= all[i] == 0;
	CHECK(zeros);
	struct iovec w2 = { (void *)"past the old end", 16 };
	CHECK(chain_writev(&c, &w2, 1, 2 * SIZE + 512) == 16);
	char back[16];
	struct iovec r2 = { back, 16 };
	CHECK(chain_readv(&c, &r2, 1, 2 * SIZE + 512) == 16 && !memcmp(back, "past the old end", 16));
	chain_close(&c);
}

int main(void)
{
	int failures = 0;
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(overlay_follows_model);
	RUN(fork_chain_is_copy_on_write);
	RUN(deep_chains_flatten);
	RUN(fork_names_stay_short);
	RUN(lineage_forks_without_paths);
	RUN(raw_disks_cannot_fork);
	RUN(damaged_overlays_are_refused);
	RUN(copyup_over_holes);
	RUN(sized_overlay_grows_the_disk);
	RUN(sized_overlay_over_an_overlay);
	test_failed = 0;
	if (growth_stops_at_the_reserve()) {
		printf("%s growth_stops_at_the_reserve\n", test_failed ? "FAIL" : "PASS");
		failures += test_failed;
	}
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	return failures ? 1 : 0;
}
