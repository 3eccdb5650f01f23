#include "host/template.h"
#include "common/failpoint.h"
#include "host/disk.h"
#include "host/fsutil.h"
#include "host/jail.h"
#include "host/net.h"
#include "host/proc.h"
#include "host/vmm.h"
#include "common/err.h"
#include "host/host_config.h"
#include "common/log.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

const struct template_def template_defs[] = {
	{ "minimal", "busybox on a small ext4 root", 1, 256, NULL },
	{ "base", "Debian 12 (bookworm) with python3, pip, git, curl, ca-certificates, build-essential",
	  2, 512,
	  /* Warm the page cache the snapshot keeps: every sandbox starts with
	   * python3 and the shell already read from disk. */
	  "python3 -c 'import json, os, subprocess, ssl, urllib.request' && git --version >/dev/null" },
	{ "code-interpreter", "base with numpy, pandas and matplotlib, and the code interpreter running",
	  2, 1024,
	  /* The code interpreter (src/guest/interp, put in the image by the
	   * Makefile) runs in the snapshot with its default context's worker
	   * up and the modules of its kiln_interp.preload (numpy, pandas,
	   * matplotlib) imported: a sandbox's first run_code starts nothing
	   * (the server daemonizes; `start` returns once it is ready). */
	  "python3 /usr/lib/kiln/kiln_interp.py start" },
	{ "postgres", "base with PostgreSQL 15 (server and psql), its cluster made: managed databases (docs/databases.md)",
	  1, 512,
	  /* The server's and psql's files in the page cache the snapshot keeps. */
	  "psql --version >/dev/null && /usr/lib/postgresql/15/bin/postgres --version >/dev/null" },
};
const int ntemplate_defs = sizeof template_defs / sizeof template_defs[0];

const struct template_def *template_def_find(const char *name)
{
	for (int i = 0; i < ntemplate_defs; i++)
		if (strcmp(template_defs[i].name, name) == 0)
			return &template_defs[i];
	return NULL;
}

bool template_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 31 || !(islower((unsigned char)name[0]) || isdigit((unsigned char)name[0])))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!islower((unsigned char)name[i]) && !isdigit((unsigned char)name[i]) && name[i] != '-' &&
		    name[i] != '_')
			return false;
	return true;
}

/* The registry keeps the version in service of each template, reloaded
 * whenever `current` points elsewhere (a build ran in another process). */
struct templates {
	const struct host_config *cfg;
	pthread_mutex_t lock;
	struct tmpl *cur[TEMPLATES_MAX];	/* by name; NULL: a free slot */
	struct tmpl *retired;	/* replaced versions someone still holds */
};

int templates_open(const struct host_config *cfg, struct templates **out)
{
	struct templates *ts = calloc(1, sizeof *ts);
	if (!ts)
		return errf(ENOMEM, "out of memory");
	ts->cfg = cfg;
	pthread_mutex_init(&ts->lock, NULL);
	*out = ts;
	return 0;
}

void tmpl_clear(struct tmpl *t)
{
	json_decref(t->image);
	t->image = NULL;
}

static void tmpl_free(struct tmpl *t)
{
	tmpl_clear(t);
	pthread_mutex_destroy(&t->zlock);
	free(t);
}

void templates_close(struct templates *ts)
{
	if (!ts)
		return;
	for (int i = 0; i < TEMPLATES_MAX; i++)
		if (ts->cur[i] && --ts->cur[i]->refs == 0)
			tmpl_free(ts->cur[i]);
	pthread_mutex_destroy(&ts->lock);
	free(ts);
}

int tmpl_save_manifest(const struct tmpl *t)
{
	char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/manifest.json", t->dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	json_t *j = json_pack("{s:s,s:i,s:i,s:i,s:s,s:s,s:b,s:s,s:I}", "name", t->name,
			      "version", t->version, "vcpus", t->vcpus, "memory_mib", t->memory_mib,
			      "root", t->root, "base", t->base,
			      "snapshot", t->snapshot, "snapshot_dir", t->snapdir,
			      "built_ms", (json_int_t)t->built_ms);
	if (j) {
		json_object_set_new(j, "net", json_boolean(t->net));
		json_object_set_new(j, "volume_slots", json_integer(t->volume_slots));
		json_object_set_new(j, "dns", json_string(t->dns));
		json_object_set_new(j, "description", json_string(t->description));
		if (t->start[0]) {
			json_object_set_new(j, "start", json_string(t->start));
			json_object_set_new(j, "ready_port", json_integer(t->ready_port));
		}
		if (t->image)
			json_object_set(j, "image", t->image);
	}
	if (!j)
		return errf(ENOMEM, "out of memory");
	int rc = json_dump_file(j, tmp, JSON_INDENT(2));
	json_decref(j);
	if (rc < 0)
		return errf(EIO, "writing %s", tmp);
	if (rename(tmp, path) < 0)
		return errf_sys("rename %s", tmp);
	return 0;
}

static int copy_field(char *dst, size_t cap, json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	if (!s || strlen(s) >= cap)
		return errf(EINVAL, "manifest: bad or missing '%s'", key);
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

int tmpl_load(const char *dir, struct tmpl *t)
{
	char path[PATH_MAX + 16];
	memset(t, 0, sizeof *t);
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	json_error_t e;
	json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
	if (!j)
		return errf(ENOENT, "%s: %s", path, e.text);
	int rc = 0;
	rc = rc ?: copy_field(t->name, sizeof t->name, j, "name");
	rc = rc ?: copy_field(t->root, sizeof t->root, j, "root");
	rc = rc ?: copy_field(t->base, sizeof t->base, j, "base");
	rc = rc ?: copy_field(t->snapdir, sizeof t->snapdir, j, "snapshot_dir");
	t->version = (int)json_integer_value(json_object_get(j, "version"));
	t->vcpus = (int)json_integer_value(json_object_get(j, "vcpus"));
	t->memory_mib = (int)json_integer_value(json_object_get(j, "memory_mib"));
	t->snapshot = json_is_true(json_object_get(j, "snapshot"));
	t->net = json_is_true(json_object_get(j, "net"));	/* its VM has a network device */
	t->built_ms = json_integer_value(json_object_get(j, "built_ms"));
	t->volume_slots = (int)json_integer_value(json_object_get(j, "volume_slots"));
	if (t->volume_slots < 0 || t->volume_slots > 8)
		t->volume_slots = 0;
	const char *dns = json_string_value(json_object_get(j, "dns"));
	if (dns && strlen(dns) < sizeof t->dns)
		memcpy(t->dns, dns, strlen(dns) + 1);
	const char *desc = json_string_value(json_object_get(j, "description"));
	snprintf(t->description, sizeof t->description, "%s", desc ? desc : "");
	const char *start = json_string_value(json_object_get(j, "start"));
	snprintf(t->start, sizeof t->start, "%s", start ? start : "");
	t->ready_port = (int)json_integer_value(json_object_get(j, "ready_port"));
	json_t *image = json_object_get(j, "image");
	if (json_is_object(image))
		t->image = json_incref(image);
	json_decref(j);
	if (rc == 0 && (t->version <= 0 || t->vcpus <= 0 || t->memory_mib <= 0))
		rc = errf(EINVAL, "%s: bad version, vcpus or memory_mib", path);
	snprintf(t->dir, sizeof t->dir, "%s", dir);
	/* What a sandbox of it gets without a disk_mib (sandbox.c's
	 * disk_wanted reads the same): GET /v1/templates shows it. */
	uint64_t bytes;
	if (rc == 0 && disk_size(t->base, &bytes) == 0)
		t->disk_mib = (int64_t)((bytes + (1 << 20) - 1) >> 20);
	return rc;
}

int templates_get(struct templates *ts, const char *name, struct tmpl **out)
{
	bool builtin = template_def_find(name) != NULL;
	if (!builtin && !template_name_ok(name))
		return errf(EINVAL, "unknown template '%.64s'", name);
	char link[PATH_MAX], target[64], dir[PATH_MAX + 80];
	snprintf(link, sizeof link, "%s/templates/%s/current", ts->cfg->data_dir, name);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n <= 0 && !builtin)
		return errf(EINVAL, "unknown template '%s'", name);
	if (n <= 0)
		return errf(EAGAIN, "template '%s' is not built: run 'kilnd template build %s'", name, name);
	target[n] = 0;
	snprintf(dir, sizeof dir, "%s/templates/%s/%s", ts->cfg->data_dir, name, target);

	pthread_mutex_lock(&ts->lock);
	int idx = -1, free_idx = -1;
	for (int i = 0; i < TEMPLATES_MAX && idx < 0; i++) {
		if (ts->cur[i] && !strcmp(ts->cur[i]->name, name))
			idx = i;
		else if (!ts->cur[i] && free_idx < 0)
			free_idx = i;
	}
	if (idx < 0 && free_idx < 0) {
		pthread_mutex_unlock(&ts->lock);
		return errf(ENOSPC, "more than %d templates in service", TEMPLATES_MAX);
	}
	if (idx < 0)
		idx = free_idx;
	struct tmpl *t = ts->cur[idx];
	if (!t || strcmp(t->dir, dir) != 0) {
		struct tmpl *fresh = calloc(1, sizeof *fresh);
		int rc = fresh ? tmpl_load(dir, fresh) : errf(ENOMEM, "out of memory");
		if (rc == 0 && strcmp(fresh->name, name))
			rc = errf(EINVAL, "%s: the manifest names template '%s'", dir, fresh->name);
		if (rc < 0) {
			pthread_mutex_unlock(&ts->lock);
			if (fresh)
				tmpl_clear(fresh);
			free(fresh);
			return rc;
		}
		pthread_mutex_init(&fresh->zlock, NULL);
		fresh->refs = 1;	/* the registry's */
		if (t) {
			log_info("template %s: version %d now in service (was %d)", name, fresh->version,
				 t->version);
			/* The old version's zygote is no longer needed; sandboxes
			 * forked from it are processes of their own. */
			tmpl_zygote_stop(t);
			if (--t->refs == 0) {
				tmpl_free(t);
			} else {	/* a create or pool member holds it: its files stay */
				t->retired_next = ts->retired;
				ts->retired = t;
			}
		}
		ts->cur[idx] = t = fresh;
	}
	t->refs++;
	pthread_mutex_unlock(&ts->lock);
	*out = t;
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int templates_each(struct templates *ts, tmpl_each_fn *fn, void *ctx)
{
	int rc = 0;
	for (int i = 0; i < ntemplate_defs && rc == 0; i++) {
		struct tmpl *t = NULL;
		if (templates_get(ts, template_defs[i].name, &t) < 0)
			t = NULL;
		rc = fn(ctx, &template_defs[i], t);
		tmpl_put(ts, t);
	}
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/templates", ts->cfg->data_dir);
	struct dirent **names = NULL;
	int n = scandir(dir, &names, NULL, by_name);
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		struct tmpl *t;
		if (rc == 0 && !template_def_find(name) && template_name_ok(name) &&
		    templates_get(ts, name, &t) == 0) {
			struct template_def def = { .name = t->name, .vcpus = t->vcpus,
						    .memory_mib = t->memory_mib,
						    .description = t->description[0] ? t->description
										     : "built by the operator" };
			rc = fn(ctx, &def, t);
			tmpl_put(ts, t);
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

char *tmpl_env_merge(const struct tmpl *t, const char *env)
{
	json_t *img = t ? json_object_get(t->image, "env") : NULL;
	if (!json_is_object(img) || !json_object_size(img))
		return env ? strdup(env) : NULL;
	json_t *merged = json_deep_copy(img), *req = env ? json_loads(env, 0, NULL) : NULL;
	if (merged && json_is_object(req))
		json_object_update(merged, req);	/* the create's values win */
	char *s = merged ? json_dumps(merged, JSON_COMPACT) : NULL;
	json_decref(merged);
	json_decref(req);
	return s;
}

const char *tmpl_workdir(const struct tmpl *t)
{
	const char *wd = t ? json_string_value(json_object_get(t->image, "workdir")) : NULL;
	return wd && wd[0] == '/' ? wd : NULL;
}

void tmpl_put(struct templates *ts, struct tmpl *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&ts->lock);
	bool last = --t->refs == 0;
	for (struct tmpl **p = &ts->retired; last && *p; p = &(*p)->retired_next)
		if (*p == t) {
			*p = t->retired_next;
			break;
		}
	pthread_mutex_unlock(&ts->lock);
	if (last)
		tmpl_free(t);
}

void templates_drop(struct templates *ts, const char *name)
{
	struct tmpl *t = NULL;
	pthread_mutex_lock(&ts->lock);
	for (int i = 0; i < TEMPLATES_MAX && !t; i++)
		if (ts->cur[i] && !strcmp(ts->cur[i]->name, name)) {
			t = ts->cur[i];
			ts->cur[i] = NULL;
		}
	pthread_mutex_unlock(&ts->lock);
	if (!t)
		return;
	tmpl_zygote_stop(t);
	tmpl_put(ts, t);	/* the registry's reference */
}

/* ---- old versions ---------------------------------------------------------------- */

/* Is a version directory held in memory (in service or retired)? */
static bool dir_held(struct templates *ts, const char *dir)
{
	bool held = false;
	pthread_mutex_lock(&ts->lock);
	for (int i = 0; i < TEMPLATES_MAX && !held; i++)
		held = ts->cur[i] && !strcmp(ts->cur[i]->dir, dir);
	for (struct tmpl *t = ts->retired; t && !held; t = t->retired_next)
		held = !strcmp(t->dir, dir);
	pthread_mutex_unlock(&ts->lock);
	return held;
}

/* The version a link in tdir (current, build) names: vN -> N; 0: none. */
static int link_version(const char *tdir, const char *link)
{
	char path[PATH_MAX + 16], target[64];
	snprintf(path, sizeof path, "%s/%s", tdir, link);
	ssize_t n = readlink(path, target, sizeof target - 1);
	if (n <= 1 || target[0] != 'v')
		return 0;
	target[n] = 0;
	return atoi(target + 1);
}

static bool zygote_answers(const char *sock);

static int collect_one(struct templates *ts, const char *name, tmpl_dir_used_fn *used, void *ctx)
{
	char tdir[PATH_MAX];
	if (snprintf(tdir, sizeof tdir, "%s/templates/%s", ts->cfg->data_dir, name) >= (int)sizeof tdir)
		return 0;
	int current = link_version(tdir, "current"), building = link_version(tdir, "build"), removed = 0;
	if (current <= 1)
		return 0;
	DIR *d = opendir(tdir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char *end;
		long v = e->d_name[0] == 'v' ? strtol(e->d_name + 1, &end, 10) : 0;
		if (v <= 0 || *end || v >= current || v == building)
			continue;
		char dir[PATH_MAX + 32], sock[PATH_MAX + 48];
		if (snprintf(dir, sizeof dir, "%s/v%ld", tdir, v) >= (int)sizeof dir)
			continue;
		vm_path(sock, sizeof sock, dir, "zygote.sock");
		if (dir_held(ts, dir) || used(ctx, dir) || zygote_answers(sock))
			continue;
		if (rmtree(dir) < 0) {
			log_warn("template %s: removing version %ld: %s", name, v, errmsg());
			continue;
		}
		log_info("template %s: version %ld removed (version %d in service; no sandbox, snapshot or "
			 "create uses it)", name, v, current);
		removed++;
	}
	if (d)
		closedir(d);
	return removed;
}

int templates_collect(struct templates *ts, tmpl_dir_used_fn *used, void *ctx)
{
	char dir[PATH_MAX], lockp[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/templates", ts->cfg->data_dir);
	/* A Dockerfile build (it holds the step cache's lock) reads its
	 * FROM template's root image by path, without a reference: wait
	 * for the next round. */
	snprintf(lockp, sizeof lockp, "%s/.cache/.lock", dir);
	int lock = open(lockp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0) {
		close(lock);
		return 0;
	}
	DIR *d = opendir(dir);
	int removed = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && (template_def_find(e->d_name) || template_name_ok(e->d_name)))
			removed += collect_one(ts, e->d_name, used, ctx);
	if (d)
		closedir(d);
	if (lock >= 0)
		close(lock);
	return removed;
}

/* ---- zygotes -------------------------------------------------------------------- */

static bool zygote_answers(const char *sock)
{
	json_t *req = json_pack("{s:s}", "cmd", "status"), *reply = NULL;
	int rc = req ? vmm_ctl(sock, req, &reply, 2000) : -ENOMEM;
	json_decref(req);
	json_decref(reply);
	return rc == 0;
}

int tmpl_zygote_ensure(const struct host_config *cfg, struct tmpl *t)
{
	if (!t->snapshot)
		return errf(EINVAL, "template %s v%d has no snapshot", t->name, t->version);
	char sock[PATH_MAX], pidf[PATH_MAX], log[PATH_MAX];
	vm_path(sock, sizeof sock, t->dir, "zygote.sock");
	vm_path(pidf, sizeof pidf, t->dir, "zygote.pid");
	vm_path(log, sizeof log, t->dir, "zygote.log");
	pthread_mutex_lock(&t->zlock);
	int rc = 0;
	pid_t pid;
	int64_t start;
	if (zygote_answers(sock))
		goto out;
	/* A zygote that does not answer is replaced. */
	if (pidfile_read(pidf, &pid, &start) == 0)
		proc_kill_wait(pid, start, 2000);
	char *argv[] = { (char *)cfg->vmm, "--zygote", t->snapdir, "--ctl", sock, NULL };
	if ((rc = proc_spawn(argv, log, &pid)) < 0)
		goto out;
	start = proc_start_time(pid);
	if ((rc = pidfile_write(pidf, pid, start)) < 0)
		goto out;
	int64_t deadline = mono_ms() + cfg->boot_timeout_ms;
	while (!zygote_answers(sock)) {
		if (!proc_alive(pid, start)) {
			proc_reap(pid);
			rc = errf(EIO, "template %s: the zygote exited at start (see %s)", t->name, log);
			goto out;
		}
		if (mono_ms() > deadline) {
			proc_kill_wait(pid, start, 2000);
			rc = errf(ETIMEDOUT, "template %s: the zygote did not answer (see %s)", t->name, log);
			goto out;
		}
		usleep(10000);
	}
	log_info("template %s v%d: zygote %d serving", t->name, t->version, (int)pid);
out:
	pthread_mutex_unlock(&t->zlock);
	return rc;
}

int tmpl_spawn(const struct host_config *cfg, struct tmpl *t, const struct spawn_spec *s,
	       pid_t *pid, double *ready_ms, double *held_ms)
{
	bool die = failpoint_hit(FP_SPAWN_DIES);
	bool die_after = !die && failpoint_hit(FP_READY_DIES);
	char zsock[PATH_MAX], vsock[PATH_MAX], ctl[PATH_MAX], console[PATH_MAX];
	vm_path(zsock, sizeof zsock, t->dir, "zygote.sock");
	vm_path(vsock, sizeof vsock, s->dir, "vsock.sock");
	vm_path(ctl, sizeof ctl, s->dir, "ctl.sock");
	vm_path(console, sizeof console, s->dir, "console.log");
	int rc = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		if ((rc = tmpl_zygote_ensure(cfg, t)) < 0)
			return rc;
		json_t *req = json_pack("{s:s,s:[s],s:s,s:s,s:s,s:s,s:i}", "cmd", "spawn", "disks", s->disk,
					"vsock", vsock, "ctl", ctl, "hostname", s->hostname,
					"console", console, "disk_reserve_mib", cfg->reserve_disk_mib);
		if (!req)
			return errf(ENOMEM, "out of memory");
		if (die)
			json_object_set_new(req, "test_triple_fault", json_true());
		if (die_after)
			json_object_set_new(req, "test_exit_after_ready", json_true());
		/* Its stderr: its own vmm.log (not the zygote's, shared by all
		 * its children), where its final line says why it ended. */
		int fds[2], nfds = 0, tap = -1;
		char logp[PATH_MAX];
		vm_path(logp, sizeof logp, s->dir, "vmm.log");
		int log = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (log >= 0) {
			json_object_set_new(req, "stderr_fd", json_integer(nfds));
			fds[nfds++] = log;
		}
		if (s->jail && s->jail->on) {
			/* The child opens its TAP by name once in its namespace. */
			json_object_set_new(req, "jail", vmm_jail_json(s->jail));
			if (s->tap)
				json_object_set_new(req, "tap", json_string(s->tap));
		} else if (s->tap) {
			/* Unjailed, it stays in the zygote's namespace: it gets
			 * its TAP opened in its own. */
			if ((tap = net_tap_open(s->netns, s->tap)) < 0) {
				if (log >= 0)
					close(log);
				json_decref(req);
				return tap;
			}
			json_object_set_new(req, "tap_fd", json_integer(nfds));
			fds[nfds++] = tap;
		}
		json_t *reply = NULL;
		rc = vmm_ctl_fds(zsock, req, fds, nfds, &reply, cfg->boot_timeout_ms);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		json_decref(req);
		if (rc == 0) {
			*pid = (pid_t)json_integer_value(json_object_get(reply, "pid"));
			*ready_ms = json_number_value(json_object_get(reply, "ready_ms"));
			if (held_ms)
				*held_ms = json_number_value(json_object_get(reply, "held_ms"));
			json_decref(reply);
			if (*pid <= 0)
				return errf(EPROTO, "zygote spawn: no pid in the reply");
			return 0;
		}
		/* A zygote that went away mid-request is restarted once. */
		if (rc != -ECONNRESET && rc != -ECONNREFUSED && rc != -ENOENT)
			return rc;
	}
	return rc;
}

void tmpl_zygote_stop(struct tmpl *t)
{
	char pidf[PATH_MAX];
	pid_t pid;
	int64_t start;
	vm_path(pidf, sizeof pidf, t->dir, "zygote.pid");
	if (pidfile_read(pidf, &pid, &start) == 0) {
		proc_kill_wait(pid, start, 2000);
		unlink(pidf);
	}
}
