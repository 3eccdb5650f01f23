/*
 * tship: a template's version carried between hosts (tship.h). GNU tar
 * makes and reads the archive (--sparse: a 256 MiB memory file that is
 * mostly holes travels as what it holds); the digest is checked here
 * before tar sees a byte, and tar runs with RLIMIT_FSIZE so no file it
 * writes passes the bound.
 */
#include "host/tship.h"
#include "host/fsutil.h"
#include "host/host_int.h"
#include "host/template.h"
#include "vmm/overlay.h"
#include "common/err.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* tar with in_fd as its stdin and out_fd as its stdout (-1: /dev/null),
 * nothing else open; its exit status, or -errno. */
static int run_tar(char *const argv[], int in_fd, int out_fd)
{
	pid_t p = fork();
	if (p < 0)
		return errf_sys("fork for tar");
	if (p == 0) {
		int null = open("/dev/null", O_RDWR);
		if (dup2(in_fd >= 0 ? in_fd : null, 0) < 0 || dup2(out_fd >= 0 ? out_fd : null, 1) < 0 ||
		    dup2(null, 2) < 0)
			_exit(126);
		syscall(SYS_close_range, 3, ~0U, 0);
		struct rlimit rl = { TSHIP_MAX_BYTES, TSHIP_MAX_BYTES };
		setrlimit(RLIMIT_FSIZE, &rl);
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR)
			return errf_sys("waitpid tar");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int sha256_fd(int fd, char hex[TSHIP_SHA_HEX])
{
	struct sha256_ctx c;
	sha256_init(&c);
	static __thread char buf[1 << 16];
	ssize_t n;
	off_t off = 0;
	while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
		sha256_update(&c, (size_t)n, (const uint8_t *)buf);
		off += n;
	}
	if (n < 0)
		return errf_sys("reading the archive");
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(&c, sizeof d, d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return 0;
}

/* The version in service of name (DATA/templates/NAME/current), or 0. */
static int current_version(const char *tdir)
{
	char link[PATH_MAX], target[32];
	snprintf(link, sizeof link, "%s/current", tdir);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n < 2 || target[0] != 'v')
		return 0;
	target[n] = 0;
	return atoi(target + 1);
}

static int name_check(const char *name)
{
	if (!template_name_ok(name))
		return errf(EINVAL, "bad template name '%.64s'", name);
	if (template_def_find(name))
		return errf(EPERM, "template %s is built in: every host builds its own", name);
	return 0;
}

int tship_export(struct host *h, const char *name, int *fd, uint64_t *size, int *version,
		 char sha[TSHIP_SHA_HEX])
{
	*fd = -1;
	int rc = name_check(name);
	if (rc < 0)
		return rc;
	char tdir[PATH_MAX], tmp[PATH_MAX], vname[16];
	snprintf(tdir, sizeof tdir, "%s/templates/%s", h->cfg->data_dir, name);
	int v = current_version(tdir);
	if (!v)
		return errf(ENOENT, "template %s has no version in service here", name);
	snprintf(vname, sizeof vname, "v%d", v);
	snprintf(tmp, sizeof tmp, "%s/tmp", h->cfg->data_dir);
	int out = open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (out < 0)
		return errf_sys("an export file in %s", tmp);
	char *argv[] = { "tar", "--create", "--sparse", "--format=gnu", "--file=-", "--directory", tdir,
			 "--exclude=zygote.*", "--exclude=vm", vname, NULL };
	rc = run_tar(argv, -1, out);
	if (rc > 0)
		rc = errf(EIO, "tar of template %s %s exited %d", name, vname, rc);
	struct stat st;
	if (rc == 0 && fstat(out, &st) < 0)
		rc = errf_sys("fstat");
	rc = rc ?: sha256_fd(out, sha);
	if (rc == 0 && lseek(out, 0, SEEK_SET) < 0)
		rc = errf_sys("lseek");
	if (rc < 0) {
		close(out);
		return rc;
	}
	*fd = out;
	*size = (uint64_t)st.st_size;
	*version = v;
	return 0;
}

/* path (in a manifest) was under the builder's DATA/templates/NAME/vN:
 * the same file under vdir. */
static int rebase(char *path, size_t cap, const char *vname, const char *vdir)
{
	char mark[24];
	snprintf(mark, sizeof mark, "/%s", vname);
	char *at = NULL, *p = path;
	while ((p = strstr(p, mark))) {
		if (p[strlen(mark)] == '/' || p[strlen(mark)] == 0)
			at = p;
		p++;
	}
	if (!at)
		return errf(EINVAL, "manifest path %.200s is not in its version's directory", path);
	char rest[PATH_MAX];
	snprintf(rest, sizeof rest, "%s", at + strlen(mark));
	if (strstr(rest, "/.."))
		return errf(EINVAL, "manifest path %.200s climbs out", path);
	if ((size_t)snprintf(path, cap, "%s%s", vdir, rest) >= cap)
		return errf(ENAMETOOLONG, "manifest path too long");
	return 0;
}

/* The one entry vN the archive unpacked into dir: N, or -errno. */
static int unpacked_version(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errf_sys("opendir %s", dir);
	struct dirent *e;
	int v = 0, n = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			n++;
			if (e->d_name[0] == 'v' && atoi(e->d_name + 1) > 0)
				v = atoi(e->d_name + 1);
		}
	closedir(d);
	if (n != 1 || v <= 0)
		return errf(EINVAL, "the archive holds %d entries, not one version directory vN", n);
	return v;
}

/* vN is in place and its zygote answers: make it the version in service
 * (a newer one there stays). */
static int switch_current(struct host *h, const char *name, const char *tdir, int v)
{
	if (current_version(tdir) >= v)
		return 0;
	char tmp[PATH_MAX], cur[PATH_MAX], target[16];
	snprintf(target, sizeof target, "v%d", v);
	snprintf(tmp, sizeof tmp, "%s/current.import", tdir);
	snprintf(cur, sizeof cur, "%s/current", tdir);
	unlink(tmp);
	if (symlink(target, tmp) < 0)
		return errf_sys("symlink %s", tmp);
	if (rename(tmp, cur) < 0) {
		int rc = errf_sys("rename %s", tmp);
		unlink(tmp);
		return rc;
	}
	struct tmpl *t;
	if (templates_get(h->tpl, name, &t) == 0)	/* in service now: the old zygote stops */
		tmpl_put(h->tpl, t);
	return 0;
}

int tship_import(struct host *h, const char *name, int fd, const char *sha, int *version, int *had)
{
	*version = 0;
	*had = 0;
	int rc = name_check(name);
	if (rc < 0)
		return rc;
	char got[TSHIP_SHA_HEX];
	if (!sha || strlen(sha) != 64)
		return errf(EINVAL, "sha256= must be the archive's sha256, 64 hex digits");
	if ((rc = sha256_fd(fd, got)) < 0)
		return rc;
	if (strcasecmp(got, sha))
		return errf(EBADMSG, "template %s: the archive's sha256 is %s, not %.64s: refused, nothing kept",
			    name, got, sha);
	char imports[PATH_MAX], lockp[PATH_MAX + 16], tmp[PATH_MAX + 32], tdir[PATH_MAX];
	snprintf(imports, sizeof imports, "%s/templates/.imports", h->cfg->data_dir);
	snprintf(tdir, sizeof tdir, "%s/templates/%s", h->cfg->data_dir, name);
	if (mkdir(imports, 0700) < 0 && errno != EEXIST)
		return errf_sys("mkdir %s", imports);
	/* One import of a name at a time (two API replicas may push it). */
	snprintf(lockp, sizeof lockp, "%s/%s.lock", imports, name);
	int lk = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lk < 0 || flock(lk, LOCK_EX) < 0) {
		rc = errf_sys("lock %s", lockp);
		if (lk >= 0)
			close(lk);
		return rc;
	}
	snprintf(tmp, sizeof tmp, "%s/%s.XXXXXX", imports, name);
	if (!mkdtemp(tmp)) {
		rc = errf_sys("mkdtemp %s", tmp);
		close(lk);
		return rc;
	}
	bool made_tdir = false, moved = false;
	char vname[16] = "", vdir[PATH_MAX + 16] = "", src[PATH_MAX + 48];
	struct tmpl t = { 0 };
	bool loaded = false, zlock = false;
	if (lseek(fd, 0, SEEK_SET) < 0) {
		rc = errf_sys("lseek");
		goto out;
	}
	char *argv[] = { "tar", "--extract", "--sparse", "--no-same-owner", "--file=-", "--directory", tmp, NULL };
	rc = run_tar(argv, fd, -1);
	if (rc > 0) {
		rc = errf(EINVAL, "template %s: tar could not unpack the archive (exit %d; or a file over %llu "
				  "bytes)", name, rc, (unsigned long long)TSHIP_MAX_BYTES);
		goto out;
	}
	if (rc < 0)
		goto out;
	int v = unpacked_version(tmp);
	if (v < 0) {
		rc = v;
		goto out;
	}
	if ((uint64_t)dir_bytes(tmp) > TSHIP_MAX_BYTES) {
		rc = errf(EFBIG, "template %s: the archive unpacks to more than %llu bytes", name,
			  (unsigned long long)TSHIP_MAX_BYTES);
		goto out;
	}
	*version = v;
	snprintf(vname, sizeof vname, "v%d", v);
	snprintf(vdir, sizeof vdir, "%s/%s", tdir, vname);
	snprintf(src, sizeof src, "%s/%s", tmp, vname);
	if (access(vdir, F_OK) == 0) {
		*had = 1;
		rc = switch_current(h, name, tdir, v);
		goto out;
	}
	if ((rc = tmpl_load(src, &t)) < 0)
		goto out;
	loaded = true;
	if (strcmp(t.name, name) || t.version != v) {
		rc = errf(EINVAL, "the archive is template %s v%d, not %s %s", t.name, t.version, name, vname);
		goto out;
	}
	/* Its paths are the builder's: point them at this host's vdir. */
	bool layered = strcmp(t.base, t.root) != 0;
	rc = rebase(t.root, sizeof t.root, vname, vdir);
	rc = rc ?: rebase(t.base, sizeof t.base, vname, vdir);
	rc = rc ?: (t.snapdir[0] ? rebase(t.snapdir, sizeof t.snapdir, vname, vdir) : 0);
	if (rc < 0)
		goto out;
	if (mkdir(tdir, 0700) == 0)
		made_tdir = true;
	else if (errno != EEXIST) {
		rc = errf_sys("mkdir %s", tdir);
		goto out;
	}
	if (rename(src, vdir) < 0) {
		rc = errf_sys("rename %s", src);
		goto out;
	}
	moved = true;
	snprintf(t.dir, sizeof t.dir, "%s", vdir);
	if (layered && (rc = overlay_set_base(t.base, t.root)) < 0)
		goto out;
	if ((rc = tmpl_save_manifest(&t)) < 0)
		goto out;
	/* Its zygote first, then it serves. */
	if (t.snapshot) {
		pthread_mutex_init(&t.zlock, NULL);
		zlock = true;
		if ((rc = tmpl_zygote_ensure(h->cfg, &t)) < 0)
			goto out;
	}
	rc = switch_current(h, name, tdir, v);
out:
	if (rc < 0 && moved) {
		if (zlock)
			tmpl_zygote_stop(&t);
		rmtree(vdir);
		if (made_tdir)
			rmtree(tdir);
	}
	if (zlock)
		pthread_mutex_destroy(&t.zlock);
	if (loaded)
		tmpl_clear(&t);
	rmtree(tmp);
	close(lk);	/* the lock file stays: a waiter holds its lock */
	if (rc == 0)
		log_info("template %s: %s %s", name, vname, *had ? "is here already" : "imported, in service");
	return rc;
}
