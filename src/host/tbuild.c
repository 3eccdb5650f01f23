/*
 * tbuild: template builds asked for through the API (tbuild.h).
 *
 * The build runs in a forked child of kilnd that calls template_build
 * and writes the outcome into state.json: a fork rather than an exec of
 * `kilnd template build`, because the host's settings (host_config) are
 * kilnd's in memory, not a command line. The child closes every
 * descriptor kilnd had (listening sockets, the store) but its log and the
 * build's lock, puts the signals back to their defaults and never returns
 * into kilnd's code. A thread of kilnd waits for it (kilnd is a child
 * subreaper, so nothing else would).
 */
#include "host/tbuild.h"
#include "host/build_context.h"
#include "host/fsutil.h"
#include "host/host.h"
#include "host/host_int.h"
#include "host/oci.h"
#include "host/template.h"
#include "host/template_build.h"
#include "common/err.h"
#include "common/log.h"
#include "host/host_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void job_path(const struct host *h, const char *name, const char *leaf, char *out, size_t cap)
{
	snprintf(out, cap, "%s/templates/.builds/%s%s%s", h->cfg->data_dir, name, leaf[0] ? "/" : "", leaf);
}

static int write_state(const char *path, const char *status, const char *error, int64_t started,
		       int64_t finished)
{
	json_t *j = json_pack("{s:s,s:s,s:I,s:I}", "status", status, "error", error ? error : "",
			      "started_ms", (json_int_t)started, "finished_ms", (json_int_t)finished);
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int rc = j && json_dump_file(j, tmp, 0) == 0 && rename(tmp, path) == 0 ? 0 : errf_sys("write %s", path);
	json_decref(j);
	return rc;
}

/* Is the lock held by a build (another open file description)? */
static bool locked(const char *lockp)
{
	int fd = open(lockp, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

bool tbuild_running(struct host *h, const char *name)
{
	char lockp[PATH_MAX];
	job_path(h, name, "lock", lockp, sizeof lockp);
	return locked(lockp);
}

static void *reap(void *arg)
{
	pid_t pid = (pid_t)(intptr_t)arg;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return NULL;
}

/* The child: build, say how it went, exit. Never returns. */
static void run_build(struct host *h, const struct tbuild_req *r, const char *ctx, const char *file,
		      int logfd, int lockfd, const char *statep, int64_t started)
{
	setsid();
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	sigset_t none;
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	int null = open("/dev/null", O_RDONLY);
	dup2(null, 0);
	dup2(logfd, 1);
	dup2(logfd, 2);
	/* Keep the lock (its fd as 3) and nothing else of kilnd's. */
	if (dup2(lockfd, 3) < 0)
		_exit(1);
	syscall(SYS_close_range, 4U, ~0U, 0U);
	struct build_opts o = { .name = r->name, .dockerfile = ctx, .dockerfile_file = file,
				.build_args = r->build_args, .max_context = r->max_context };
	int rc = template_build(h->cfg, &o);
	if (rc < 0)
		fprintf(stderr, "kilnd: %s\n", errmsg());
	fflush(stderr);
	write_state(statep, rc < 0 ? "failed" : "ready", rc < 0 ? errmsg() : NULL, started, wall_ms());
	_exit(rc < 0 ? 1 : 0);
}

int tbuild_start(struct host *h, const struct tbuild_req *r)
{
	if (!template_name_ok(r->name) || template_def_find(r->name))
		return errf(EINVAL, "template name '%.64s': not one a build can take", r->name);
	char dir[PATH_MAX], lockp[PATH_MAX], ctx[PATH_MAX], logp[PATH_MAX], statep[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/templates", h->cfg->data_dir);
	mkdir(dir, 0700);
	job_path(h, "", "", dir, sizeof dir);
	mkdir(dir, 0700);
	job_path(h, r->name, "", dir, sizeof dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errf_sys("mkdir %s", dir);
	job_path(h, r->name, "lock", lockp, sizeof lockp);
	job_path(h, r->name, "context", ctx, sizeof ctx);
	job_path(h, r->name, "build.log", logp, sizeof logp);
	job_path(h, r->name, "state.json", statep, sizeof statep);
	int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0)
		return errf_sys("open %s", lockp);
	if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
		close(lock);
		return errf(EBUSY, "a build of template %s is running; wait for it to end", r->name);
	}
	/* One from the command line holds the template's own lock. */
	char tlock[PATH_MAX + 16];
	snprintf(tlock, sizeof tlock, "%s/templates/%s/.lock", h->cfg->data_dir, r->name);
	if (locked(tlock)) {
		close(lock);
		return errf(EBUSY, "a build of template %s is running (kilnd template build); wait for it to end",
			    r->name);
	}
	rmtree(ctx);
	int rc = mkdir(ctx, 0700) < 0 ? errf_sys("mkdir %s", ctx) : 0;
	if (rc == 0 && lseek(r->tar_fd, 0, SEEK_SET) < 0)
		rc = errf_sys("rewinding the context");
	long entries = 0;
	uint64_t max = r->max_context ? r->max_context : BCTX_MAX_BYTES;
	rc = rc ?: oci_extract_tar(r->tar_fd, ctx, "the build context", max, &entries);
	if (rc == -EPERM || rc == -ENOENT || rc == -ENOTDIR || rc == -ENAMETOOLONG || rc == -EIO)
		rc = errf(EINVAL, "%s", errmsg());	/* what was sent is wrong: a 400 */
	/* The Dockerfile: a regular file in the context, reached through no
	 * symlink (the build opens it by its path). */
	const char *df = r->dockerfile ? r->dockerfile : "Dockerfile";
	char file[PATH_MAX * 2];
	if (rc == 0) {
		int dfd = open(ctx, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
					.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
		int fd = dfd < 0 ? -1 : (int)syscall(SYS_openat2, dfd, df, &how, sizeof how);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
			rc = errf(EINVAL, "the build context has no Dockerfile '%.200s' (a regular file, reached "
					  "through no symlink; %ld entries unpacked)", df, entries);
		if (fd >= 0)
			close(fd);
		if (dfd >= 0)
			close(dfd);
		snprintf(file, sizeof file, "%s/%s", ctx, df);
	}
	int logfd = rc == 0 ? open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600) : -1;
	if (rc == 0 && logfd < 0)
		rc = errf_sys("open %s", logp);
	int64_t started = wall_ms();
	if (rc == 0)
		rc = write_state(statep, "building", NULL, started, 0);
	if (rc < 0) {
		/* Refused: nothing of it stays (a name never built leaves no
		 * directory; one built before keeps its log and state). */
		if (access(statep, F_OK) == 0)
			rmtree(ctx);
		else
			rmtree(dir);
		if (logfd >= 0)
			close(logfd);
		close(lock);
		return rc;
	}
	dprintf(logfd, "template build %s: %ld entries in the context, Dockerfile %s\n", r->name, entries, df);
	pid_t pid = fork();
	if (pid == 0)
		run_build(h, r, ctx, file, logfd, lock, statep, started);
	close(logfd);
	close(lock);	/* the child holds it now */
	if (pid < 0) {
		rc = errf_sys("fork");
		write_state(statep, "failed", errmsg(), started, wall_ms());
		return rc;
	}
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, reap, (void *)(intptr_t)pid) != 0)
		log_warn("template %s: no thread to wait for build process %d", r->name, (int)pid);
	pthread_attr_destroy(&a);
	log_info("template %s: building from an uploaded context (process %d)", r->name, (int)pid);
	return 0;
}

static int by_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int tbuild_state(struct host *h, const char *name, struct tbuild_state *out)
{
	memset(out, 0, sizeof *out);
	char tdir[PATH_MAX], statep[PATH_MAX], lockp[PATH_MAX];
	snprintf(tdir, sizeof tdir, "%s/templates/%s", h->cfg->data_dir, name);
	job_path(h, name, "state.json", statep, sizeof statep);
	job_path(h, name, "lock", lockp, sizeof lockp);
	json_t *j = json_load_file(statep, 0, NULL);
	if (j) {
		out->known = true;
		snprintf(out->status, sizeof out->status, "%s",
			 json_string_value(json_object_get(j, "status")) ?: "failed");
		snprintf(out->error, sizeof out->error, "%s", json_string_value(json_object_get(j, "error")) ?: "");
		out->started_ms = json_integer_value(json_object_get(j, "started_ms"));
		out->finished_ms = json_integer_value(json_object_get(j, "finished_ms"));
		json_decref(j);
		if (!strcmp(out->status, "building") && !locked(lockp)) {
			snprintf(out->status, sizeof out->status, "failed");
			snprintf(out->error, sizeof out->error, "the build process ended without a word "
								"(killed, or the host restarted): see the log");
		}
	}
	DIR *d = opendir(tdir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] == 'v' && atoi(e->d_name + 1) > 0 && out->nversions < 16)
			out->versions[out->nversions++] = atoi(e->d_name + 1);
	if (d)
		closedir(d);
	qsort(out->versions, (size_t)out->nversions, sizeof out->versions[0], by_int);
	char link[PATH_MAX + 16], target[32];
	snprintf(link, sizeof link, "%s/current", tdir);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n > 1) {
		target[n] = 0;
		out->current = atoi(target + 1);
		char vdir[PATH_MAX + 48];
		snprintf(vdir, sizeof vdir, "%s/%s", tdir, target);
		struct tmpl t = { 0 };
		if (tmpl_load(vdir, &t) == 0)
			out->built_ms = t.built_ms;
		tmpl_clear(&t);
	}
	if (!out->known && !out->nversions && !out->current)
		return errf(ENOENT, "template %s not found", name);
	if (!out->known)
		snprintf(out->status, sizeof out->status, "%s", out->current ? "ready" : "failed");
	out->bytes = d ? dir_bytes(tdir) : 0;
	return 0;
}

int tbuild_log_open(struct host *h, const char *name, int *fd, bool *running)
{
	char logp[PATH_MAX];
	job_path(h, name, "build.log", logp, sizeof logp);
	*fd = open(logp, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return errno == ENOENT ? errf(ENOENT, "template %s has no build log (it was not built through "
						       "the API)", name)
				       : errf_sys("open %s", logp);
	*running = tbuild_running(h, name);
	return 0;
}

struct users {
	const char *name;
	int n;
	char list[200];
};

static int note_user(void *ctx, const struct sbx_row *r)
{
	struct users *u = ctx;
	if (strcmp(r->template, u->name) || r->deleted_ms)
		return 0;
	size_t len = strlen(u->list);
	if (u->n++ < 4)
		snprintf(u->list + len, sizeof u->list - len, "%s%s", len ? ", " : "", r->id);
	return 0;
}

int tbuild_delete(struct host *h, const char *name)
{
	if (template_def_find(name) || !template_name_ok(name))
		return errf(EPERM, "template %s is built in: it cannot be removed", name);
	struct tbuild_state st;
	int rc = tbuild_state(h, name, &st);
	if (rc < 0)
		return rc;
	if (tbuild_running(h, name))
		return errf(EBUSY, "template %s is building; wait for the build to end", name);
	struct users u = { .name = name };
	if ((rc = host_each(h, NULL, note_user, &u)) < 0)
		return rc;
	if (u.n)
		return errf(EBUSY, "template %s is in use by %d sandbox%s (%s%s): delete them first", name, u.n,
			    u.n == 1 ? "" : "es", u.list, u.n > 4 ? ", ..." : "");
	templates_drop(h->tpl, name);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/templates/%s", h->cfg->data_dir, name);
	rc = rmtree(path);
	job_path(h, name, "", path, sizeof path);
	int rc2 = rmtree(path);
	if (rc < 0 || rc2 < 0)
		return errf(EIO, "removing template %s: %s", name, errmsg());
	log_info("template %s removed", name);
	return 0;
}
