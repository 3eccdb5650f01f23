/*
 * dfbuild: a template's root image from a Dockerfile (see dfbuild.h).
 */
#include "host/dfbuild.h"
#include "host/disk.h"
#include "host/fsutil.h"
#include "host/guest_conn.h"
#include "host/host_config.h"
#include "host/proc.h"
#include "host/template.h"
#include "host/vmm.h"
#include "common/err.h"
#include "common/strbuf.h"
#include "vmm/overlay.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void note(struct dfbuild *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct dfbuild *d, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (d->progress)
		d->progress(d->pctx, msg);
}

/* A path built from parts; too long: -ENAMETOOLONG. */
static int pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pathf(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? errf(ENAMETOOLONG, "path too long: %.100s...", out) : 0;
}

/* ---- FROM ------------------------------------------------------------------------------ */

int dfbuild_from(const char *image, char *kind, const char **rest)
{
	if (!strncmp(image, "kiln/", 5) && image[5]) {
		*kind = 't';
		*rest = image + 5;
		return 0;
	}
	if (!strncmp(image, "oci:", 4) && image[4]) {
		*kind = 'o';
		*rest = image + 4;
		return 0;
	}
	return errf(EINVAL, "FROM %.200s: kiln builds FROM kiln/TEMPLATE (a template's image, e.g. "
			    "kiln/minimal) or oci:PATH[:TAG] (an OCI layout or archive in the build "
			    "context); images are not pulled from a registry", image);
}

/* The identity of a file for the cache key: where it is and which inode
 * at which size and time (a rebuilt template's root is a new file). */
static void file_identity(const char *path, const struct stat *st, char *out, size_t cap)
{
	snprintf(out, cap, "%s %llu %llu %lld.%09ld", path, (unsigned long long)st->st_ino,
		 (unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

static int from_template(struct dfbuild *d, const char *name, int line)
{
	if (!template_name_ok(name) && !template_def_find(name))
		return errf(EINVAL, "line %d: FROM kiln/%.64s: not a template name", line, name);
	char link[PATH_MAX], dir[PATH_MAX];
	snprintf(link, sizeof link, "%s/templates/%s/current", d->cfg->data_dir, name);
	if (realpath(link, dir)) {
		struct tmpl t;
		int rc = tmpl_load(dir, &t);
		if (rc < 0)
			return errf(-rc, "line %d: FROM kiln/%s: %s", line, name, errmsg());
		snprintf(d->base, sizeof d->base, "%s", t.root);
		d->base_image = t.image ? json_deep_copy(t.image) : NULL;
		tmpl_clear(&t);
	} else if (template_def_find(name)) {
		if (pathf(d->base, sizeof d->base, "%s/rootfs-%s.ext4", d->cfg->images, name) < 0)
			return -ENAMETOOLONG;
	} else {
		return errf(ENOENT, "line %d: FROM kiln/%.64s: no such template (build it first)", line, name);
	}
	char real[PATH_MAX];
	struct stat st;
	if (!realpath(d->base, real) || stat(real, &st) < 0 || !S_ISREG(st.st_mode))
		return errf(ENOENT, "line %d: FROM kiln/%s: its root image %s is missing", line, name, d->base);
	snprintf(d->base, sizeof d->base, "%s", real);
	char id[PATH_MAX + 100];
	file_identity(real, &st, id, sizeof id);
	bctx_step_key("", "template", id, d->from_key);
	return 0;
}

/* FROM oci:PATH[:TAG]: PATH inside the context. Its key hashes what the
 * image is: an archive's bytes, or a layout's index.json (which names
 * everything else by digest, and the unpacking checks every digest). */
static int from_oci(struct dfbuild *d, const char *ref, int line)
{
	char path[PATH_MAX], clean[PATH_MAX];
	snprintf(path, sizeof path, "%s", ref);
	char *tag = strrchr(path, ':');
	if (tag && strchr(tag, '/'))
		tag = NULL;
	if (tag)
		*tag++ = 0;
	int rc = bctx_clean(path, clean, sizeof clean);
	int fd = rc < 0 ? rc : bctx_openat(&d->bc, clean, O_RDONLY);
	if (fd < 0)
		return errf(-fd, "line %d: FROM oci:%.200s: %s", line, ref, errmsg());
	struct stat st;
	fstat(fd, &st);
	close(fd);
	const char *hashed = clean;
	char index[PATH_MAX + 16];
	if (S_ISDIR(st.st_mode)) {
		snprintf(index, sizeof index, "%s/index.json", clean);
		hashed = index;
	}
	const char *srcs[] = { hashed };
	char digest[65];
	if ((rc = bctx_digest(&d->bc, srcs, 1, digest)) < 0)
		return errf(-rc, "line %d: FROM oci:%.200s: %s", line, ref, errmsg());
	char id[200];
	snprintf(id, sizeof id, "%s %s", digest, tag ? tag : "");
	bctx_step_key("", "oci", id, d->from_key);
	if (tag)
		return pathf(d->from_oci, sizeof d->from_oci, "%s/%s:%s", d->bc.dir, clean, tag);
	return pathf(d->from_oci, sizeof d->from_oci, "%s/%s", d->bc.dir, clean);
}

/* ---- open ------------------------------------------------------------------------------ */

int dfbuild_open(struct dfbuild *d)
{
	d->lock = -1;
	d->bc.dirfd = -1;
	int rc = bctx_open(d->context, d->max_context, &d->bc);
	if (rc < 0)
		return rc;
	/* The Dockerfile: named on the command line (the operator's), or
	 * the context's own, read through the context's rules. */
	int fd = d->file ? open(d->file, O_RDONLY | O_CLOEXEC) : bctx_openat(&d->bc, "Dockerfile", O_RDONLY);
	if (fd < 0)
		return d->file ? errf_sys("%s", d->file) : errf(-fd, "%s", errmsg());
	char *text = malloc(DF_MAX_TEXT + 1);
	ssize_t n = text ? read(fd, text, DF_MAX_TEXT + 1) : -1;
	close(fd);
	if (n < 0) {
		free(text);
		return errf(ENOMEM, "reading the Dockerfile");
	}
	if (n > DF_MAX_TEXT) {
		free(text);
		return errf(EFBIG, "the Dockerfile is over %d bytes", DF_MAX_TEXT);
	}
	rc = dockerfile_parse(text, (size_t)n, d->build_args, &d->df);
	free(text);
	if (rc < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "Dockerfile: %s", msg);
	}
	const struct df_step *from = NULL;
	for (int i = 0; i < d->df.nsteps && !from; i++)
		if (d->df.steps[i].kind == DF_FROM)
			from = &d->df.steps[i];
	if (!from)
		return errf(EINVAL, "Dockerfile: no FROM");
	char kind;
	const char *rest;
	if ((rc = dfbuild_from(from->args[0], &kind, &rest)) < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(EINVAL, "Dockerfile line %d: %s", from->line, msg);
	}
	snprintf(d->cache, sizeof d->cache, "%s/templates/.cache", d->cfg->data_dir);
	if (mkdir(d->cache, 0700) < 0 && errno != EEXIST)
		return errf_sys("mkdir %s", d->cache);
	char lockp[PATH_MAX + 8];
	snprintf(lockp, sizeof lockp, "%s/.lock", d->cache);
	/* One build at a time uses the cache: two would write one layer. */
	d->lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock < 0 || flock(d->lock, LOCK_EX) < 0)
		return errf_sys("lock %s", lockp);
	return kind == 't' ? from_template(d, rest, from->line) : from_oci(d, rest, from->line);
}

void dfbuild_close(struct dfbuild *d)
{
	dockerfile_free(&d->df);
	bctx_close(&d->bc);
	if (d->lock >= 0)
		close(d->lock);
	d->lock = -1;
	json_decref(d->base_image);
	json_decref(d->image);
	d->base_image = d->image = NULL;
}

/* ---- the state the steps build ----------------------------------------------------------- */

struct state {
	json_t *env;			/* the image's Env, ENV added */
	json_t *args;			/* ARG values in effect: name -> value */
	char workdir[4096];
	char user[256];
	json_t *cmd, *entrypoint;	/* arrays or NULL */
	json_t *expose, *labels;
	bool own_cmd;			/* CMD/ENTRYPOINT come from this Dockerfile */
	bool from_seen;
};

static void state_init(struct state *s, const json_t *image)
{
	memset(s, 0, sizeof *s);
	json_t *env = json_object_get(image, "env");
	s->env = json_is_object(env) ? json_deep_copy(env) : json_object();
	s->args = json_object();
	s->expose = json_array();
	s->labels = json_object();
	const char *wd = json_string_value(json_object_get(image, "workdir"));
	snprintf(s->workdir, sizeof s->workdir, "%s", wd && wd[0] == '/' ? wd : "/");
	const char *user = json_string_value(json_object_get(image, "user"));
	snprintf(s->user, sizeof s->user, "%s", user ? user : "");
	json_t *c = json_object_get(image, "cmd"), *e = json_object_get(image, "entrypoint");
	s->cmd = json_is_array(c) ? json_deep_copy(c) : NULL;
	s->entrypoint = json_is_array(e) ? json_deep_copy(e) : NULL;
}

static void state_free(struct state *s)
{
	json_decref(s->env);
	json_decref(s->args);
	json_decref(s->cmd);
	json_decref(s->entrypoint);
	json_decref(s->expose);
	json_decref(s->labels);
}

/* p joined onto the working directory wd, as WORKDIR and COPY do, with
 * "." and ".." taken out lexically (a guest path: the guest's own files,
 * nothing of the host). A trailing '/' is kept: COPY reads it. */
void dfbuild_path(const char *wd, const char *p, char *out, size_t cap)
{
	char joined[2 * PATH_MAX + 2];
	snprintf(joined, sizeof joined, "%s/%s", p[0] == '/' ? "" : wd, p);
	size_t n = 0;
	out[0] = 0;
	for (char *c = joined; *c;) {
		while (*c == '/')
			c++;
		size_t len = strcspn(c, "/");
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--;
		} else if (len && !(len == 1 && c[0] == '.') && n + len + 2 < cap) {
			out[n++] = '/';
			memcpy(out + n, c, len);
			n += len;
		}
		c += len;
	}
	if (n == 0)
		out[n++] = '/';
	size_t pl = strlen(p);
	if (pl && p[pl - 1] == '/' && out[n - 1] != '/' && n + 1 < cap)
		out[n++] = '/';
	out[n] = 0;
}

static json_t *argv_json(const struct df_step *st)
{
	json_t *a = json_array();
	if (!st->exec_form) {
		json_array_append_new(a, json_string("/bin/sh"));
		json_array_append_new(a, json_string("-c"));
	}
	for (int i = 0; i < st->nargs; i++)
		json_array_append_new(a, json_string(st->args[i]));
	return a;
}

/* What a step does to the state (the disk aside). */
static void apply(struct state *s, const struct df_step *st)
{
	switch (st->kind) {
	case DF_FROM:
		s->from_seen = true;
		break;
	case DF_ENV:
		for (int i = 0; i + 1 < st->nargs; i += 2)
			json_object_set_new(s->env, st->args[i], json_string(st->args[i + 1]));
		break;
	case DF_ARG:
		for (int i = 0; s->from_seen && i + 1 < st->nargs; i += 2)
			if (st->args[i + 1])
				json_object_set_new(s->args, st->args[i], json_string(st->args[i + 1]));
		break;
	case DF_LABEL:
		for (int i = 0; i + 1 < st->nargs; i += 2)
			json_object_set_new(s->labels, st->args[i], json_string(st->args[i + 1]));
		break;
	case DF_WORKDIR: {
		char wd[4096];
		dfbuild_path(s->workdir, st->args[0], wd, sizeof wd);
		snprintf(s->workdir, sizeof s->workdir, "%s", wd);
		break;
	}
	case DF_USER:
		snprintf(s->user, sizeof s->user, "%s", st->args[0]);
		break;
	case DF_EXPOSE:
		for (int i = 0; i < st->nargs; i++)
			json_array_append_new(s->expose, json_string(st->args[i]));
		break;
	case DF_CMD:
		json_decref(s->cmd);
		s->cmd = argv_json(st);
		s->own_cmd = true;
		break;
	case DF_ENTRYPOINT:
		json_decref(s->entrypoint);
		s->entrypoint = argv_json(st);
		/* Docker: an ENTRYPOINT drops the CMD the base image had. */
		if (!s->own_cmd) {
			json_decref(s->cmd);
			s->cmd = NULL;
		}
		s->own_cmd = true;
		break;
	default:
		break;
	}
}

static bool disk_step(enum df_kind k)
{
	return k == DF_RUN || k == DF_COPY || k == DF_ADD || k == DF_WORKDIR;
}

/* ---- the build VM ----------------------------------------------------------------------- */

struct vm {
	char dir[PATH_MAX];
	char vsock[PATH_MAX];
	pid_t pid;
	int64_t start;
};

static int vm_boot(struct dfbuild *d, struct vm *v, const char *disk)
{
	snprintf(v->dir, sizeof v->dir, "%s/dfvm", d->vdir);
	rmtree(v->dir);
	if (mkdir(v->dir, 0700) < 0)
		return errf_sys("mkdir %s", v->dir);
	/* No network device: a RUN reaches nothing outside its VM. */
	struct vm_spec s = { .dir = v->dir, .vcpus = d->vcpus, .memory_mib = d->memory_mib, .disk = disk,
			     .hostname = d->name };
	note(d, "booting the build VM");
	int rc = vmm_launch(d->cfg, &s, &v->pid);
	if (rc < 0)
		return rc;
	v->start = proc_start_time(v->pid);
	vm_path(v->vsock, sizeof v->vsock, v->dir, "vsock.sock");
	struct guest *g;
	if ((rc = guest_wait_ready(v->vsock, d->cfg->boot_timeout_ms, v->pid, &g)) < 0) {
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "the build VM: %s (console: %s/console.log)", msg, v->dir);
	}
	guest_close(g);
	return 0;
}

static void vm_kill(struct vm *v)
{
	if (v->pid > 0)
		proc_kill_wait(v->pid, v->start, 5000);
	v->pid = 0;
}

/* A step's output, line by line to the build log, its tail kept. */
struct out {
	int step, steps;
	bool tty;
	char line[512];
	size_t n;
	char tail[DF_TAIL];
	size_t tn;			/* bytes in tail (a ring once full) */
	uint64_t total;
};

static void out_line(struct out *o)
{
	fprintf(stderr, "%sstep %d/%d | %.*s\n", o->tty ? "\r\033[K" : "", o->step, o->steps, (int)o->n, o->line);
	o->n = 0;
}

static void out_add(struct out *o, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		o->tail[o->total++ % DF_TAIL] = (char)p[i];
		char c = (char)p[i];
		if (c == '\n' || o->n == sizeof o->line) {
			out_line(o);
			if (c == '\n')
				continue;
		}
		o->line[o->n++] = (c == '\r' || c == '\t' || (unsigned char)c >= 32) ? c : '?';
	}
	fflush(stderr);
}

/* The last bytes of the output, in order, newlines as " | ". */
static void out_tail(const struct out *o, char *buf, size_t cap)
{
	size_t n = o->total < DF_TAIL ? (size_t)o->total : DF_TAIL, j = 0;
	uint64_t from = o->total - n;
	for (size_t i = 0; i < n && j + 4 < cap; i++) {
		char c = o->tail[(from + i) % DF_TAIL];
		if (c == '\n' && i + 1 < n) {
			memcpy(buf + j, " | ", 3);
			j += 3;
		} else if (c != '\n') {
			buf[j++] = (unsigned char)c < 32 ? ' ' : c;
		}
	}
	buf[j] = 0;
}

static int out_event(void *ctx, const struct guest_ev *ev)
{
	out_add(ctx, ev->data, ev->len);
	return 0;
}

/* Run a command in the VM, its output to the log; the exit status into *code. */
static int vm_exec(struct vm *v, struct guest_cmd *c, struct out *o, int *code, bool *timed_out)
{
	struct guest *g;
	int rc = guest_open(v->vsock, 10000, v->pid, &g);
	if (rc < 0)
		return rc;
	struct guest_ev ev;
	rc = guest_exec_run(g, c, o ? out_event : NULL, o, -1, -1, &ev);
	guest_close(g);
	if (o && o->n)
		out_line(o);
	*code = ev.code;
	if (timed_out)
		*timed_out = ev.timed_out;
	return rc;
}

static char **env_of(const struct state *s)
{
	size_t n = json_object_size(s->args) + json_object_size(s->env), i = 0;
	char **env = calloc(n + 1, sizeof *env);
	const char *k;
	json_t *val;
	/* ARG first: an ENV of the same name wins (the agent keeps the last). */
	json_object_foreach(s->args, k, val)
		if (env && asprintf(&env[i], "%s=%s", k, json_string_value(val)) > 0)
			i++;
	json_object_foreach(s->env, k, val)
		if (env && json_is_string(val) && asprintf(&env[i], "%s=%s", k, json_string_value(val)) > 0)
			i++;
	return env;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int step_run(struct vm *v, const struct state *s, const struct df_step *st, struct out *o)
{
	char **env = env_of(s);
	if (!env)
		return errf(ENOMEM, "out of memory");
	struct guest_cmd c = { .env = (const char *const *)env, .cwd = s->workdir, .timeout_ms = DF_RUN_TIMEOUT_MS,
			       .user = s->user[0] ? s->user : NULL };
	/* The exec form's array, NULL-ended for the agent. */
	const char **argv = st->exec_form ? calloc((size_t)st->nargs + 1, sizeof *argv) : NULL;
	if (st->exec_form && (!argv || !st->nargs)) {
		strv_free(env);
		free(argv);
		return errf(EINVAL, "line %d: RUN []: an empty command", st->line);
	}
	for (int i = 0; argv && i < st->nargs; i++)
		argv[i] = st->args[i];
	if (argv)
		c.argv = argv;
	else
		c.shell = st->args[0];
	int code = -1;
	bool timed_out = false;
	int rc = vm_exec(v, &c, o, &code, &timed_out);
	strv_free(env);
	free(argv);
	if (rc < 0)
		return rc;
	if (code != 0) {
		char tail[DF_TAIL * 2];
		out_tail(o, tail, sizeof tail);
		return errf(EIO, "step %d/%d (line %d, RUN) %s %d; the end of its output: %s", o->step, o->steps,
			    st->line, timed_out ? "timed out after" : "exited with status",
			    timed_out ? DF_RUN_TIMEOUT_MS / 1000 : code, tail[0] ? tail : "(none)");
	}
	return 0;
}

/* A COPY's files and directories, written through the guest's files API. */
struct copy {
	struct dfbuild *d;
	struct guest *g;
	const char *dest;		/* where the source goes (a directory or the file) */
	bool into;			/* dest is a directory the source goes into */
	const char *src;		/* the source as cleaned */
	int chmod;			/* -1: the context's modes */
	json_t *made;			/* paths written (for --chown) */
	uint64_t bytes;
	long files;
};

static int copy_entry(void *ctx, const struct bctx_entry *e)
{
	struct copy *c = ctx;
	char target[PATH_MAX];
	const char *base = strrchr(c->src, '/') ? strrchr(c->src, '/') + 1 : c->src;
	if (S_ISDIR(e->mode) || !e->sub[0]) {
		/* A directory source's contents go into dest; a file source
		 * goes to dest, or into it. */
		if (!e->sub[0] && !S_ISDIR(e->mode) && c->into)
			snprintf(target, sizeof target, "%s/%s", c->dest, base);
		else if (!e->sub[0])
			snprintf(target, sizeof target, "%s", c->dest);
		else
			snprintf(target, sizeof target, "%s/%s", c->dest, e->sub);
	} else {
		snprintf(target, sizeof target, "%s/%s", c->dest, e->sub);
	}
	uint32_t mode = c->chmod >= 0 ? (uint32_t)c->chmod : (uint32_t)(e->mode & 07777);
	int rc;
	if (S_ISDIR(e->mode)) {
		rc = guest_mkdir(c->g, target, mode, true);
		if (rc == -EEXIST)
			rc = 0;
		if (rc == 0 && c->chmod >= 0)
			rc = guest_chmod(c->g, target, mode);
	} else {
		uint64_t n = 0;
		rc = guest_write_file(c->g, target, mode, true, e->fd, &n);
		c->bytes += n;
		c->files++;
	}
	if (rc < 0)
		return errf(-rc, "%s -> %s: %s", e->rel, target, errmsg());
	json_array_append_new(c->made, json_string(target));
	return 0;
}

static bool chown_ok(const char *s)
{
	for (; *s; s++)
		if (!(*s == ':' || *s == '_' || *s == '-' || *s == '.' || (*s >= '0' && *s <= '9') ||
		      ((*s | 32) >= 'a' && (*s | 32) <= 'z')))
			return false;
	return true;
}

static int step_copy(struct dfbuild *d, struct vm *v, const struct state *s, const struct df_step *st,
		     struct out *o)
{
	const char *kw = df_kind_name(st->kind);
	int nsrc = st->nargs - 1;
	char dest[PATH_MAX];
	dfbuild_path(s->workdir, st->args[nsrc], dest, sizeof dest);
	int chmod = -1;
	if (st->chmod) {
		char *end;
		long m = strtol(st->chmod, &end, 8);
		if (*end || m < 0 || m > 07777)
			return errf(EINVAL, "line %d: %s --chmod=%.20s: want octal permission bits", st->line, kw,
				    st->chmod);
		chmod = (int)m;
	}
	if (st->chown && (!st->chown[0] || !chown_ok(st->chown)))
		return errf(EINVAL, "line %d: %s --chown=%.40s: want USER[:GROUP] (names or ids)", st->line, kw,
			    st->chown);
	struct copy c = { .d = d, .dest = dest, .chmod = chmod, .made = json_array() };
	size_t dl = strlen(dest);
	bool dir_dest = dest[dl - 1] == '/' || nsrc > 1;
	while (dl > 1 && dest[dl - 1] == '/')
		dest[--dl] = 0;
	int rc = guest_open(v->vsock, 10000, v->pid, &c.g);
	if (rc < 0) {
		json_decref(c.made);
		return rc;
	}
	if (!dir_dest) {
		/* COPY file /existing-dir: into it, as Docker does. */
		struct guest_stat gs;
		if (guest_stat(c.g, dest, &gs) == 0 && S_ISDIR(gs.mode))
			dir_dest = true;
	}
	for (int i = 0; rc == 0 && i < nsrc; i++) {
		char src[PATH_MAX];
		if ((rc = bctx_clean(st->args[i], src, sizeof src)) < 0)
			break;
		c.src = src;
		c.into = dir_dest;
		rc = bctx_walk(&d->bc, src, copy_entry, &c);
	}
	guest_close(c.g);
	if (rc < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", errmsg());
		json_decref(c.made);
		return errf(-rc, "step %d/%d (line %d, %s): %s", o->step, o->steps, st->line, kw, msg);
	}
	fprintf(stderr, "%sstep %d/%d | %ld files, %llu bytes to %s\n", o->tty ? "\r\033[K" : "", o->step,
		o->steps, c.files, (unsigned long long)c.bytes, dest);
	/* --chown: chown -h on what was written, a bounded batch at a time. */
	for (size_t at = 0; rc == 0 && st->chown && at < json_array_size(c.made); at += 64) {
		const char *argv[64 + 5] = { "chown", "-h", st->chown, "--" };
		int n = 4;
		for (size_t j = at; j < json_array_size(c.made) && j < at + 64; j++)
			argv[n++] = json_string_value(json_array_get(c.made, j));
		argv[n] = NULL;
		struct guest_cmd gc = { .argv = argv, .timeout_ms = 60000 };
		int code = -1;
		o->total = 0;
		if ((rc = vm_exec(v, &gc, o, &code, NULL)) == 0 && code != 0) {
			char tail[DF_TAIL * 2];
			out_tail(o, tail, sizeof tail);
			rc = errf(EIO, "step %d/%d (line %d, %s --chown=%s): chown exited with %d: %s", o->step,
				  o->steps, st->line, kw, st->chown, code, tail);
		}
	}
	json_decref(c.made);
	return rc;
}

static int step_workdir(struct vm *v, const struct state *s, const struct df_step *st, struct out *o)
{
	struct guest *g;
	int rc = guest_open(v->vsock, 10000, v->pid, &g);
	if (rc < 0)
		return rc;
	rc = guest_mkdir(g, s->workdir, 0755, true);
	guest_close(g);
	if (rc == -EEXIST)
		rc = 0;
	return rc < 0 ? errf(-rc, "step %d/%d (line %d, WORKDIR %s): %s", o->step, o->steps, st->line,
			     s->workdir, errmsg()) : 0;
}

/* The guest's writes onto the disk, then the disk's top sealed as the
 * step's layer and a new top at next. */
static int checkpoint(struct vm *v, const char *next)
{
	int code = -1;
	const char *argv[] = { "sync", NULL };
	struct guest_cmd c = { .argv = argv, .timeout_ms = 300000 };
	int rc = vm_exec(v, &c, NULL, &code, NULL);
	if (rc == 0 && code != 0)
		rc = errf(EIO, "sync in the build VM exited with %d", code);
	if (rc < 0)
		return rc;
	char ctl[PATH_MAX];
	vm_path(ctl, sizeof ctl, v->dir, "ctl.sock");
	json_t *req = json_pack("{s:s,s:s}", "cmd", "layer", "path", next), *reply = NULL;
	rc = req ? vmm_ctl(ctl, req, &reply, 120000) : errf(ENOMEM, "out of memory");
	json_decref(req);
	json_decref(reply);
	return rc;
}

/* ---- run ---------------------------------------------------------------------------------- */

static void cache_path(const struct dfbuild *d, const char *key, const char *ext, char *out, size_t cap)
{
	pathf(out, cap, "%s/%.64s.%s", d->cache, key, ext);	/* the cache's path is short */
}

/* A layer in the cache that is complete (its .ok written after its seal)
 * and whose chain still opens down to its raw base. */
static bool cached(const struct dfbuild *d, const char *key)
{
	char ok[PATH_MAX], layer[PATH_MAX];
	cache_path(d, key, "ok", ok, sizeof ok);
	cache_path(d, key, "layer", layer, sizeof layer);
	if (access(ok, F_OK) < 0)
		return false;
	struct chain c;
	if (chain_open(&c, layer, false) < 0)
		return false;
	bool sealed = !c.layers[0].raw && c.layers[0].sealed;
	chain_close(&c);
	return sealed;
}

/* The key of every step (keys[i], 65 bytes each): the parent's, the
 * step's text, and its inputs. */
static int plan(struct dfbuild *d, char (*keys)[65])
{
	char prev[65];
	snprintf(prev, sizeof prev, "%s", d->from_key);
	for (int i = 0; i < d->df.nsteps; i++) {
		const struct df_step *st = &d->df.steps[i];
		struct strbuf in;
		strbuf_init(&in);
		if (st->kind == DF_ARG) {
			for (int j = 0; j + 1 < st->nargs; j += 2)
				strbuf_printf(&in, "%s=%s\n", st->args[j], st->args[j + 1] ? st->args[j + 1] : "(unset)");
		} else if (st->kind == DF_COPY || st->kind == DF_ADD) {
			for (int j = 0; j + 1 < st->nargs; j++)
				if (strpbrk(st->args[j], "*?[")) {
					strbuf_free(&in);
					return errf(EINVAL, "Dockerfile line %d: %s %.100s: wildcards in sources are "
							    "not supported (name the files or a directory)", st->line,
						    df_kind_name(st->kind), st->args[j]);
				}
			char digest[65];
			int rc = bctx_digest(&d->bc, (const char *const *)st->args, st->nargs - 1, digest);
			if (rc < 0) {
				char msg[300];
				snprintf(msg, sizeof msg, "%s", errmsg());
				strbuf_free(&in);
				return errf(-rc, "Dockerfile line %d: %s: %s", st->line, df_kind_name(st->kind), msg);
			}
			strbuf_printf(&in, "%s chown=%s chmod=%s", digest, st->chown ? st->chown : "",
				      st->chmod ? st->chmod : "");
		}
		if (strbuf_failed(&in)) {
			strbuf_free(&in);
			return errf(ENOMEM, "out of memory");
		}
		bctx_step_key(prev, st->text ? st->text : "", in.data, keys[i]);
		strbuf_free(&in);
		memcpy(prev, keys[i], 65);
	}
	return 0;
}

static int write_ok(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf_sys("create %s", path);
	fsync(fd);
	close(fd);
	return 0;
}

/* ENTRYPOINT + CMD as one shell command, each word quoted. */
static void start_of(const struct state *s, char *out, size_t cap)
{
	struct strbuf b;
	strbuf_init(&b);
	json_t *parts[2] = { s->entrypoint, s->cmd };
	for (int p = 0; p < 2; p++) {
		size_t i;
		json_t *w;
		json_array_foreach(parts[p], i, w) {
			if (b.len)
				strbuf_putc(&b, ' ');
			strbuf_putc(&b, '\'');
			for (const char *c = json_string_value(w); c && *c; c++)
				if (*c == '\'')
					strbuf_append(&b, "'\\''", 4);
				else
					strbuf_putc(&b, *c);
			strbuf_putc(&b, '\'');
		}
	}
	if (!strbuf_failed(&b) && b.len && b.len < cap)
		snprintf(out, cap, "exec %.*s", (int)b.len, b.data);
	else
		out[0] = 0;
	strbuf_free(&b);
}

static json_t *image_of(const struct dfbuild *d, const struct state *s)
{
	json_t *j = json_pack("{s:s+,s:O,s:s,s:O,s:O}", "source", "Dockerfile in ", d->context, "env", s->env,
			      "workdir", s->workdir, "expose", s->expose, "labels", s->labels);
	if (!j)
		return NULL;
	if (s->user[0])
		json_object_set_new(j, "user", json_string(s->user));
	if (s->cmd)
		json_object_set(j, "cmd", s->cmd);
	if (s->entrypoint)
		json_object_set(j, "entrypoint", s->entrypoint);
	return j;
}

int dfbuild_run(struct dfbuild *d, const char *out)
{
	int n = d->df.nsteps, rc;
	char (*keys)[65] = calloc((size_t)n + 1, sizeof *keys);
	if (!keys)
		return errf(ENOMEM, "out of memory");
	if ((rc = plan(d, keys)) < 0) {
		free(keys);
		return rc;
	}
	/* The last step whose layer is cached: everything up to it is. */
	int last = -1, resume = -1;
	d->steps = 0;
	for (int i = 0; i < n; i++)
		if (disk_step(d->df.steps[i].kind)) {
			d->steps++;
			last = i;
		}
	for (int i = last; i >= 0 && resume < 0; i--)
		if (disk_step(d->df.steps[i].kind) && cached(d, keys[i]))
			resume = i;
	struct state s;
	state_init(&s, d->base_image);
	struct vm v = { .pid = 0 };
	struct out o = { .steps = n, .tty = d->tty };
	char top[PATH_MAX] = "", step_layer[PATH_MAX] = "";
	d->cached = d->run = 0;
	rc = 0;
	for (int i = 0; rc == 0 && i < n; i++) {
		const struct df_step *st = &d->df.steps[i];
		apply(&s, st);
		o.step = i + 1;
		if (!disk_step(st->kind)) {
			continue;
		}
		if (i <= resume) {
			d->cached++;
			note(d, "step %d/%d (line %d) cached: %.120s", i + 1, n, st->line, st->text);
			cache_path(d, keys[i], "layer", top, sizeof top);
			continue;
		}
		cache_path(d, keys[i], "layer", step_layer, sizeof step_layer);
		if (!v.pid) {
			/* The first step not cached: a VM over what is. */
			const char *parent = top[0] ? top : d->base;
			unlink(step_layer);
			if ((rc = disk_create(step_layer, parent)) < 0 || (rc = vm_boot(d, &v, step_layer)) < 0)
				break;
		}
		note(d, "step %d/%d (line %d): %.160s", i + 1, n, st->line, st->text);
		o.total = 0;
		o.n = 0;
		switch (st->kind) {
		case DF_RUN: rc = step_run(&v, &s, st, &o); break;
		case DF_COPY:
		case DF_ADD: rc = step_copy(d, &v, &s, st, &o); break;
		case DF_WORKDIR: rc = step_workdir(&v, &s, st, &o); break;
		default: break;
		}
		if (rc < 0)
			break;
		/* The next step's layer goes on over this one (the last's
		 * is the VM's own, thrown away with it). */
		char next[PATH_MAX];
		int j = i + 1;
		while (j < n && !disk_step(d->df.steps[j].kind))
			j++;
		if (j < n)
			cache_path(d, keys[j], "layer", next, sizeof next);
		else
			pathf(next, sizeof next, "%s/rest.layer", v.dir);
		unlink(next);
		if ((rc = checkpoint(&v, next)) < 0)
			break;
		char ok[PATH_MAX];
		cache_path(d, keys[i], "ok", ok, sizeof ok);
		if ((rc = write_ok(ok)) < 0)
			break;
		snprintf(top, sizeof top, "%s", step_layer);
		step_layer[0] = 0;
		d->run++;
	}
	vm_kill(&v);
	if (rc < 0 && step_layer[0])
		unlink(step_layer);	/* the failed step's half-written layer */
	if (v.dir[0])
		rmtree(v.dir);
	if (rc == 0) {
		note(d, "%d steps: %d cached, %d run; writing the root image", d->steps, d->cached, d->run);
		char base_dir[PATH_MAX];
		snprintf(base_dir, sizeof base_dir, "%s", d->base);
		if (top[0]) {
			rc = disk_to_raw(d->cfg->data_dir, top, dirname(base_dir), out);
		} else {
			char *argv[] = { "cp", "--sparse=always", "--reflink=auto", d->base, (char *)out, NULL };
			rc = proc_run(argv, "/dev/null");
			if (rc > 0)
				rc = errf(EIO, "copying %s: exit status %d", d->base, rc);
		}
	}
	if (rc == 0) {
		d->image = image_of(d, &s);
		if (!d->image)
			rc = errf(ENOMEM, "out of memory");
		if (s.own_cmd)
			start_of(&s, d->start, sizeof d->start);
		for (size_t i = 0; s.own_cmd && !d->ready_port && i < json_array_size(s.expose); i++) {
			const char *p = json_string_value(json_array_get(s.expose, i));
			if (p && strstr(p, "/tcp"))
				d->ready_port = atoi(p);
		}
	}
	state_free(&s);
	free(keys);
	return rc;
}
