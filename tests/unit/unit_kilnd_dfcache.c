/*
 * The step cache's collection (src/host/dfbuild_cache.c dfcache_trim)
 * on a real directory of entries (KEY.layer of known sizes, KEY.ok with
 * known times): nothing goes while under the cap and young; a layer never
 * completed goes; one unused for the age limit goes whatever the size;
 * over the cap the least recently used go first, until under it; a hit
 * (dfcache_touch) makes an entry young again; files that are not entries
 * (.lock, others) are never touched. The builds that call it: e2e 88.
 */
#include "host/dfbuild_int.h"
#include "common/err.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"

static char dir[256];
static time_t now;	/* the real clock: dfcache_touch sets it */

static void key_of(int i, char out[65])
{
	for (int j = 0; j < 64; j++)
		out[j] = "0123456789abcdef"[(i + j) % 16];
	out[0] = "abcdefghij"[i % 10];
	out[64] = 0;
}

/* Entry i: a layer of mib MiB (written, so its blocks count) and, if
 * used is not 0, its .ok at that time. */
static void entry(int i, int mib, time_t used)
{
	char key[65], path[512];
	key_of(i, key);
	snprintf(path, sizeof path, "%s/%s.layer", dir, key);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	static char buf[1 << 20];
	memset(buf, 'x', sizeof buf);
	for (int m = 0; m < mib; m++)
		if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
			break;
	close(fd);
	if (!used)
		return;
	snprintf(path, sizeof path, "%s/%s.ok", dir, key);
	close(open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600));
	struct timespec ts[2] = { { used, 0 }, { used, 0 } };
	utimensat(AT_FDCWD, path, ts, 0);
}

static bool has(int i)
{
	char key[65], path[512];
	key_of(i, key);
	snprintf(path, sizeof path, "%s/%s.layer", dir, key);
	return access(path, F_OK) == 0;
}

static int reset(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
	return system(cmd);
}

static int under_cap_kept(void)
{
	reset();
	entry(0, 2, now - 100);
	entry(1, 2, now - 50);
	uint64_t freed;
	int rc = dfcache_trim(dir, 8 << 20, now, 3600, &freed);
	T_ASSERT(rc == 0 && freed == 0 && has(0) && has(1), "rc %d freed %llu", rc, (unsigned long long)freed);
	return 0;
}

static int incomplete_and_old_go(void)
{
	reset();
	entry(0, 1, 0);			/* never completed */
	entry(1, 1, now - 7200);	/* unused for 2 h, limit 1 h */
	entry(2, 1, now - 10);
	uint64_t freed;
	int rc = dfcache_trim(dir, 64 << 20, now, 3600, &freed);
	T_ASSERT(rc == 2 && !has(0) && !has(1) && has(2), "rc %d: %d %d %d", rc, has(0), has(1), has(2));
	T_ASSERT(freed >= 2 << 20, "freed %llu", (unsigned long long)freed);
	return 0;
}

static int lru_over_cap(void)
{
	reset();
	for (int i = 0; i < 5; i++)
		entry(i, 2, now - 100 + i * 10);	/* 0 the oldest */
	uint64_t freed;
	/* 10 MiB and a bit of .ok in all; a cap of 6.5 MiB keeps the 3 newest. */
	int rc = dfcache_trim(dir, (13 << 20) / 2, now, 86400, &freed);
	T_ASSERT(rc == 2 && !has(0) && !has(1) && has(2) && has(3) && has(4), "rc %d: %d %d %d %d %d", rc, has(0),
		 has(1), has(2), has(3), has(4));
	return 0;
}

static int touch_makes_young(void)
{
	reset();
	entry(0, 2, now - 100);
	entry(1, 2, now - 50);
	char key[65], ok[512];
	key_of(0, key);
	snprintf(ok, sizeof ok, "%s/%s.ok", dir, key);
	dfcache_touch(ok);	/* the real clock: later than `now` */
	uint64_t freed;
	int rc = dfcache_trim(dir, 3 << 20, time(NULL), 86400, &freed);
	T_ASSERT(rc == 1 && has(0) && !has(1), "rc %d: %d %d", rc, has(0), has(1));
	return 0;
}

static int others_untouched(void)
{
	reset();
	char p[512];
	snprintf(p, sizeof p, "%s/.lock", dir);
	close(open(p, O_WRONLY | O_CREAT, 0600));
	snprintf(p, sizeof p, "%s/notes.layer", dir);
	close(open(p, O_WRONLY | O_CREAT, 0600));
	entry(0, 1, now - 999999);
	uint64_t freed;
	int rc = dfcache_trim(dir, 0, now, 1, &freed);
	snprintf(p, sizeof p, "%s/.lock", dir);
	bool lock = access(p, F_OK) == 0;
	snprintf(p, sizeof p, "%s/notes.layer", dir);
	T_ASSERT(rc == 1 && !has(0) && lock && access(p, F_OK) == 0, "rc %d lock %d", rc, lock);
	T_ASSERT(dfcache_cap(dir) >= DFCACHE_MIN_CAP, "cap %llu", (unsigned long long)dfcache_cap(dir));
	return 0;
}

int main(void)
{
	char tmpl[] = "/tmp/unit-dfcache-XXXXXX";
	if (!mkdtemp(tmpl))
		return 1;
	snprintf(dir, sizeof dir, "%s/cache", tmpl);
	now = time(NULL) - 5;	/* a touch is later than every time below */
	T_RUN(under_cap_kept);
	T_RUN(incomplete_and_old_go);
	T_RUN(lru_over_cap);
	T_RUN(touch_makes_young);
	T_RUN(others_untouched);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
	if (system(cmd) != 0)
		return 1;
	return t_failed ? 1 : 0;
}
