/*
 * tbuild: template builds asked for through the API (tbuild.h).
 *
 * The build runs in a process of its own: a child of kilnd that execs
 * kilnd itself (the binary this process runs, opened before the fork) as
 * `kilnd template build NAME --job FILE`, never kilnd's code after a fork:
 * kilnd has threads, and a lock one of them held at the fork would stay
 * held in the child for ever. The host's settings (host_config) are
 * kilnd's in memory, not a command line, so they go with the build's own
 * in FILE (job.json), written into the build's directory (0700, under
 * DATA: only root writes there). Between fork and exec the child only
 * moves descriptors: the build log onto 1 and 2, the build's lock onto 3
 * (the lock goes with it), nothing else of kilnd's; it puts the signals
 * back to their defaults. A thread of kilnd waits for it (kilnd is a
 * child subreaper, so nothing else would). The build process writes the
 * outcome into state.json (tbuild_job).
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
#include "net/net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
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

/* ---- the job file: the host's settings and the build's ------------------- */

/* host_config's fields, by name in the job file: s a string (char[]),
 * i an int, l an int64_t, b a bool. */
#define HC_FIELD(f, t) { #f, t, offsetof(struct host_config, f), sizeof ((struct host_config *)0)->f }
static const struct hc_field {
	const char *key;
	char type;
	size_t off, size;
} hc_fields[] = {
	HC_FIELD(data_dir, 's'), HC_FIELD(vmm, 's'), HC_FIELD(kernel, 's'), HC_FIELD(initrd, 's'),
	HC_FIELD(images, 's'), HC_FIELD(image_builders, 's'), HC_FIELD(max_sandboxes, 'i'),
	HC_FIELD(max_memory_mib, 'l'), HC_FIELD(max_creates, 'i'), HC_FIELD(create_wait_ms, 'i'),
	HC_FIELD(default_ttl, 'l'), HC_FIELD(sample_ms, 'i'), HC_FIELD(boot_timeout_ms, 'i'),
	HC_FIELD(reap_ms, 'i'), HC_FIELD(net, 'b'), HC_FIELD(net_pool, 'i'), HC_FIELD(pool, 'i'),
	HC_FIELD(jail, 'b'), HC_FIELD(jail_uid, 'i'), HC_FIELD(cgroup, 's'), HC_FIELD(vmm_overhead_mib, 'i'),
	HC_FIELD(vmm_pids, 'i'), HC_FIELD(reserve_disk_mib, 'i'), HC_FIELD(dns, 's'),
};
#define NFIELDS (sizeof hc_fields / sizeof hc_fields[0])

static json_t *host_config_json(const struct host_config *cfg)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < NFIELDS; i++) {
		const struct hc_field *f = &hc_fields[i];
		const char *p = (const char *)cfg + f->off;
		json_t *v = f->type == 's' ? json_string(p)
			  : f->type == 'i' ? json_integer(*(const int *)p)
			  : f->type == 'l' ? json_integer(*(const int64_t *)p)
					   : json_boolean(*(const bool *)p);
		if (json_object_set_new(o, f->key, v) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static int host_config_from(const json_t *o, struct host_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct hc_field *f = &hc_fields[i];
		const json_t *v = json_object_get(o, f->key);
		char *p = (char *)cfg + f->off;
		if (f->type == 's' && json_is_string(v) && strlen(json_string_value(v)) < f->size)
			memcpy(p, json_string_value(v), strlen(json_string_value(v)) + 1);
		else if (f->type == 'i' && json_is_integer(v))
			*(int *)p = (int)json_integer_value(v);
		else if (f->type == 'l' && json_is_integer(v))
			*(int64_t *)p = json_integer_value(v);
		else if (f->type == 'b' && json_is_boolean(v))
			*(bool *)p = json_is_true(v);
		else
			return errf(EINVAL, "the build's job file: no valid host setting '%s'", f->key);
	}
	return 0;
}

/* The job file of a build (tbuild_job reads it); started: state.json's. */
static int job_write(const struct host *h, const struct tbuild_req *r, const char *path, const char *ctx,
		     const char *file, int64_t started)
{
	struct net_config nc;
	net_default_config(&nc);
	char range[32];
	snprintf(range, sizeof range, "%u.%u.%u.%u/%d", nc.pool >> 24, (nc.pool >> 16) & 255, (nc.pool >> 8) & 255,
		 nc.pool & 255, nc.pool_bits);
	json_t *args = json_array();
	for (size_t i = 0; args && r->build_args && r->build_args[i]; i++)
		json_array_append_new(args, json_string(r->build_args[i]));
	json_t *j = json_pack("{s:s,s:s,s:s,s:o*,s:I,s:I,s:s?,s:i,s:i,s:I,s:I,s:I,s:I,s:b,s:s,s:o*}", "name", r->name,
			      "context", ctx, "dockerfile_file", file, "build_args", args, "max_context",
			      (json_int_t)r->max_context, "disk_mib", (json_int_t)r->disk_mib, "build_net", r->build_net,
			      "vcpus", r->vcpus, "memory_mib", r->memory_mib,
			      "max_seconds", (json_int_t)r->max_seconds, "max_root_mib", (json_int_t)r->max_root_mib,
			      "first_version", (json_int_t)r->first_version, "started_ms", (json_int_t)started, "verbose", log_verbose, "net_range", range, "host",
			      host_config_json(h->cfg));
	int rc = 0;
	if (!j || !json_is_object(json_object_get(j, "host")) || !json_is_array(json_object_get(j, "build_args")))
		rc = errf(ENOMEM, "out of memory");
	int fd = rc < 0 ? -1 : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (rc == 0 && fd < 0)
		rc = errf_sys("open %s", path);
	if (rc == 0 && json_dumpfd(j, fd, 0) < 0)
		rc = errf_sys("write %s", path);
	if (fd >= 0)
		close(fd);
	json_decref(j);
	return rc;
}

int tbuild_job(const char *path, const char *name)
{
	signal(SIGPIPE, SIG_IGN);
	/* state.json is beside the job file; whatever goes wrong is told there. */
	char statep[PATH_MAX];
	const char *slash = strrchr(path, '/');
	snprintf(statep, sizeof statep, "%.*sstate.json", slash ? (int)(slash - path + 1) : 0, path);
	json_error_t e;
	json_t *j = json_load_file(path, 0, &e);
	unlink(path);	/* read once: a later build writes its own */
	int64_t started = json_integer_value(json_object_get(j, "started_ms"));
	if (!j) {
		errf(EINVAL, "the build's job file %s: %s", path, e.text);
		fprintf(stderr, "kilnd: %s\n", errmsg());
		write_state(statep, "failed", errmsg(), wall_ms(), wall_ms());
		return 1;
	}
	struct host_config cfg;
	const char *ctx = json_string_value(json_object_get(j, "context"));
	const char *file = json_string_value(json_object_get(j, "dockerfile_file"));
	const char *range = json_string_value(json_object_get(j, "net_range"));
	const json_t *args = json_object_get(j, "build_args");
	const char *argv[TBUILD_ARGS_MAX + 1] = { NULL };
	int rc = host_config_from(json_object_get(j, "host"), &cfg);
	if (rc == 0 && (!ctx || !file || !range || !json_is_array(args) || json_array_size(args) > TBUILD_ARGS_MAX ||
			strcmp(json_string_value(json_object_get(j, "name")) ?: "", name)))
		rc = errf(EINVAL, "the build's job file %s is not one for template %s", path, name);
	for (size_t i = 0; rc == 0 && i < json_array_size(args); i++)
		if (!(argv[i] = json_string_value(json_array_get(args, i))))
			rc = errf(EINVAL, "the build's job file %s: a build argument that is not a string", path);
	rc = rc ?: net_set_pool(range);
	if (rc < 0) {
		fprintf(stderr, "kilnd: %s\n", errmsg());
		write_state(statep, "failed", errmsg(), started, wall_ms());
		json_decref(j);
		return 1;
	}
	log_verbose = json_is_true(json_object_get(j, "verbose"));
	struct build_opts o = { .name = name, .dockerfile = ctx, .dockerfile_file = file,
				.build_args = json_array_size(args) ? argv : NULL,
				.max_context = (uint64_t)json_integer_value(json_object_get(j, "max_context")),
				.disk_mib = json_integer_value(json_object_get(j, "disk_mib")),
				.build_net = json_string_value(json_object_get(j, "build_net")),
				.vcpus = (int)json_integer_value(json_object_get(j, "vcpus")),
				.memory_mib = (int)json_integer_value(json_object_get(j, "memory_mib")),
				.max_seconds = json_integer_value(json_object_get(j, "max_seconds")),
				.max_root_mib = json_integer_value(json_object_get(j, "max_root_mib")),
				.first_version = json_integer_value(json_object_get(j, "first_version")) };
	rc = template_build(&cfg, &o);
	if (rc < 0)
		fprintf(stderr, "kilnd: %s\n", errmsg());
	fflush(stderr);
	write_state(statep, rc < 0 ? "failed" : "ready", rc < 0 ? errmsg() : NULL, started, wall_ms());
	json_decref(j);
	return rc < 0 ? 1 : 0;
}

/* ---- starting one ------------------------------------------------------------ */

/* The child, between fork and exec: only async-signal-safe calls (kilnd's
 * other threads' locks may be held). Never returns. */
static void exec_build(int exe, char *const argv[], int logfd, int lockfd)
{
	setsid();
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Out of the way of 0 to 4 first, then into place: the log on 1 and
	 * 2, the lock on 3 (without close-on-exec: the build process holds
	 * it), the binary on 4 (with it); nothing else stays. */
	int log2 = fcntl(logfd, F_DUPFD_CLOEXEC, 10), lock2 = fcntl(lockfd, F_DUPFD_CLOEXEC, 10),
	    exe2 = fcntl(exe, F_DUPFD_CLOEXEC, 10), null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null >= 0 && null < 10) {
		int n10 = fcntl(null, F_DUPFD_CLOEXEC, 10);
		close(null);
		null = n10;
	}
	if (log2 < 0 || lock2 < 0 || exe2 < 0 || null < 0 || dup2(null, 0) < 0 || dup2(log2, 1) < 0 ||
	    dup2(log2, 2) < 0 || dup2(lock2, 3) < 0 || dup2(exe2, 4) < 0 || fcntl(4, F_SETFD, FD_CLOEXEC) < 0)
		_exit(126);
	syscall(SYS_close_range, 5U, ~0U, 0U);
	extern char **environ;
	syscall(SYS_execveat, 4, "", argv, environ, AT_EMPTY_PATH);
	static const char msg[] = "kilnd: the build process could not start kilnd (execveat)\n";
	ssize_t w = write(2, msg, sizeof msg - 1);
	(void)w;
	_exit(127);
}

static bool name_seen(char **v, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v[i], name))
			return true;
	return false;
}

/* A plan's limits on r->group (r->name not counted): its templates, a
 * name counted once whether it has versions (DATA/templates/NAME, also
 * one copied from another host), build files (.builds/NAME: building or
 * failed) or both, and which of those build now. */
static int group_limits(struct host *h, const struct tbuild_req *r)
{
	if (!r->group || !r->group[0] || (!r->max_templates && !r->max_builds))
		return 0;
	size_t gl = strlen(r->group);
	char *names[512];
	int n = 0;
	int64_t building = 0;
	for (int pass = 0; pass < 2; pass++) {
		char dir[PATH_MAX];
		if (pass == 0)
			snprintf(dir, sizeof dir, "%s/templates", h->cfg->data_dir);
		else
			job_path(h, "", "", dir, sizeof dir);
		DIR *d = opendir(dir);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (!strncmp(de->d_name, r->group, gl) && de->d_name[gl] && strcmp(de->d_name, r->name) &&
			    !name_seen(names, n, de->d_name) && n < (int)(sizeof names / sizeof names[0]) &&
			    (names[n] = strdup(de->d_name)))
				n++;
		if (d)
			closedir(d);
	}
	for (int i = 0; i < n; i++) {
		building += tbuild_running(h, names[i]);
		free(names[i]);
	}
	if (r->max_templates && n + 1 > r->max_templates)
		return errf(EDQUOT, "this workspace has %d templates, the most its plan allows (templates %lld): "
			    "delete one first", n, (long long)r->max_templates);
	if (r->max_builds && building + 1 > r->max_builds)
		return errf(EDQUOT, "this workspace has %lld template builds running, the most its plan allows at "
			    "once (template_builds %lld): wait for one to end", (long long)building,
			    (long long)r->max_builds);
	return 0;
}

/* The workspace's count and this build's lock at once: two requests do
 * not both take the last place. dir gets the build's job directory (made
 * here), *lock its lock, held (-1 on failure). */
static int take_place(struct host *h, const struct tbuild_req *r, char *dir, size_t cap, int *lock)
{
	static pthread_mutex_t counting = PTHREAD_MUTEX_INITIALIZER;
	char lockp[PATH_MAX];
	int fd = -1;
	*lock = -1;
	pthread_mutex_lock(&counting);
	int rc = group_limits(h, r);
	if (rc < 0)
		goto out;
	job_path(h, r->name, "", dir, cap);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = errf_sys("mkdir %s", dir);
		goto out;
	}
	job_path(h, r->name, "lock", lockp, sizeof lockp);
	if ((fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		rc = errf_sys("open %s", lockp);
		goto out;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		rc = errf(EBUSY, "a build of template %s is running; wait for it to end", r->name);
		goto out;
	}
	*lock = fd;
out:
	pthread_mutex_unlock(&counting);
	return rc;
}

int tbuild_start(struct host *h, const struct tbuild_req *r)
{
	if (!template_name_ok(r->name) || template_def_find(r->name))
		return errf(EINVAL, "template name '%.64s': not one a build can take", r->name);
	char dir[PATH_MAX], ctx[PATH_MAX], logp[PATH_MAX], statep[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/templates", h->cfg->data_dir);
	mkdir(dir, 0700);
	job_path(h, "", "", dir, sizeof dir);
	mkdir(dir, 0700);
	int lock;
	int qrc = take_place(h, r, dir, sizeof dir, &lock);
	if (qrc < 0)
		return qrc;
	job_path(h, r->name, "context", ctx, sizeof ctx);
	job_path(h, r->name, "build.log", logp, sizeof logp);
	job_path(h, r->name, "state.json", statep, sizeof statep);
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
	/* Everything the child needs, made before the fork. */
	char jobp[PATH_MAX];
	job_path(h, r->name, "job.json", jobp, sizeof jobp);
	char *const argv[] = { "kilnd", "template", "build", (char *)r->name, "--job", jobp, NULL };
	int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	rc = exe < 0 ? errf_sys("open /proc/self/exe") : job_write(h, r, jobp, ctx, file, started);
	pid_t pid = rc < 0 ? -1 : fork();
	if (pid == 0)
		exec_build(exe, argv, logfd, lock);
	if (exe >= 0)
		close(exe);
	close(logfd);
	close(lock);	/* the child holds it now */
	if (pid < 0) {
		rc = rc < 0 ? rc : errf_sys("fork");
		unlink(jobp);
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
