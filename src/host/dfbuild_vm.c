/*
 * dfbuild_vm: the build microVM (no network device) and the disk steps
 * done in it, RUN, COPY/ADD and WORKDIR, over the guest agent; after
 * each, the checkpoint that seals the disk's top as the step's layer.
 */
#include "host/dfbuild_int.h"
#include "host/fsutil.h"
#include "host/guest_conn.h"
#include "host/oci.h"
#include "host/host_config.h"
#include "host/proc.h"
#include "host/vmm.h"
#include "common/err.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int dfvm_boot(struct dfbuild *d, struct vm *v, const char *disk)
{
	snprintf(v->dir, sizeof v->dir, "%s/dfvm", d->vdir);
	rmtree(v->dir);
	if (mkdir(v->dir, 0700) < 0)
		return errf_sys("mkdir %s", v->dir);
	/* No network device unless the build gave one (under its egress
	 * policy): without, a RUN reaches nothing outside its VM. */
	struct vm_spec s = { .dir = v->dir, .vcpus = d->vcpus, .memory_mib = d->memory_mib, .disk = disk,
			     .hostname = d->name, .tap = d->tap, .netns = d->tap ? d->netns : NULL,
			     .dns = d->tap ? d->dns : NULL };
	df_note(d, "booting the build VM");
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

void dfvm_kill(struct vm *v)
{
	if (v->pid > 0)
		proc_kill_wait(v->pid, v->start, 5000);
	v->pid = 0;
}

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

int dfvm_run(struct vm *v, const struct state *s, const struct df_step *st, struct out *o)
{
	char **env = env_of(s);
	if (!env)
		return errf(ENOMEM, "out of memory");
	/* A plan's build_seconds: the RUN gets what is left of it. */
	int64_t timeout = DF_RUN_TIMEOUT_MS, left = o->deadline_ms ? o->deadline_ms - mono_ms() : timeout;
	if (left < timeout)
		timeout = left;
	if (timeout <= 0) {
		strv_free(env);
		return errf(ETIME, "step %d/%d (line %d, RUN): the build has run as long as its plan allows "
			    "(build_seconds)", o->step, o->steps, st->line);
	}
	struct guest_cmd c = { .env = (const char *const *)env, .cwd = s->workdir, .timeout_ms = (int)timeout,
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
		return errf(EIO, "step %d/%d (line %d, RUN) %s %d%s; the end of its output: %s", o->step, o->steps,
			    st->line, timed_out ? "timed out after" : "exited with status",
			    timed_out ? (int)(timeout / 1000) : code,
			    timed_out && timeout < DF_RUN_TIMEOUT_MS ? " s (what was left of its plan's build_seconds)"
			    : timed_out ? " s" : "", tail[0] ? tail : "(none)");
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

/* A symlink made in the guest as target -> link: the files API has no
 * symlink call, so a one-entry tar (written by libarchive) goes to the
 * agent's tar-extract built-in in target's directory, which makes it
 * through O_NOFOLLOW opens and replaces what was there. The link's text
 * is only copied: the host never follows it. */
static int guest_symlink(struct guest *g, const char *target, const char *link)
{
	char dir[PATH_MAX], base[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", target);
	snprintf(base, sizeof base, "%s", target);
	const char *parent = dirname(dir), *name = basename(base);
	int fd = memfd_create("kiln-symlink", MFD_CLOEXEC);
	if (fd < 0)
		return errf_sys("memfd");
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();
	int rc = 0;
	if (!a || !ae || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		rc = errf(ENOMEM, "a tar for symlink %.200s: %s", target, a ? archive_error_string(a) : "no memory");
	} else {
		archive_entry_set_pathname(ae, name);
		archive_entry_set_filetype(ae, AE_IFLNK);
		archive_entry_set_perm(ae, 0777);
		archive_entry_set_symlink(ae, link);
		if (archive_write_header(a, ae) != ARCHIVE_OK || archive_write_close(a) != ARCHIVE_OK)
			rc = errf(EIO, "a tar for symlink %.200s: %s", target, archive_error_string(a));
	}
	if (ae)
		archive_entry_free(ae);
	if (a)
		archive_write_free(a);
	if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0)
		rc = errf_sys("seek");
	if (rc == 0) {
		const char *argv[] = { "tar-extract", parent, NULL };
		rc = guest_builtin_run(g, argv, NULL, fd, -1);
	}
	close(fd);
	return rc;
}

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
	if (S_ISLNK(e->mode)) {
		rc = guest_symlink(c->g, target, e->link);	/* no --chmod: a link has no mode */
		c->files++;
	} else if (S_ISDIR(e->mode)) {
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

/* ADD of a local tar archive (plain, gzip, bzip2, xz, zstd): unpacked on
 * the host into a scratch directory by the OCI unpacker (no absolute
 * names, no `..`, no entry through a symlink, only files, directories
 * and symlinks, the bytes bounded by the context's limit), then written
 * into the destination directory through the guest's files API as a
 * COPY of that directory is (its symlinks made as symlinks).
 * 1: it was an archive, unpacked; 0: not one (copied as a file). */
static int add_archive(struct dfbuild *d, struct vm *v, struct copy *c, const char *src)
{
	int fd = bctx_ignored(&d->bc, src) ? -1 : bctx_openat(&d->bc, src, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return 0;	/* the walk says why */
	struct stat st;
	int is = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? oci_tar_probe(fd) : 0;
	if (is <= 0) {
		close(fd);
		return is;
	}
	char scratch[PATH_MAX];
	if (df_pathf(scratch, sizeof scratch, "%s/add.XXXXXX", v->dir) < 0 || !mkdtemp(scratch)) {
		close(fd);
		return errf_sys("a scratch directory for ADD %.200s", src);
	}
	chmod(scratch, 0755);	/* the destination a walk of it makes: Docker's mode, not mkdtemp's */
	char what[PATH_MAX + 16];
	snprintf(what, sizeof what, "ADD archive %s", src);
	long entries = 0;
	uint64_t max = d->max_context ? d->max_context : BCTX_MAX_BYTES;
	int rc = oci_extract_tar(fd, scratch, what, max, &entries);
	close(fd);
	struct bctx ac;
	if (rc == 0 && (rc = bctx_open_flags(scratch, max, BCTX_NO_IGNORE, &ac)) == 0) {
		struct copy sub = *c;
		sub.src = ".";
		sub.into = false;	/* its contents go into dest */
		rc = bctx_walk(&ac, ".", copy_entry, &sub);
		c->bytes = sub.bytes;
		c->files = sub.files;
		bctx_close(&ac);
		if (rc < 0) {
			char msg[400];
			snprintf(msg, sizeof msg, "%s", errmsg());
			rc = errf(-rc, "ADD archive %.200s: %s", src, msg);
		}
	}
	rmtree(scratch);
	return rc < 0 ? rc : 1;
}

static bool chown_ok(const char *s)
{
	for (; *s; s++)
		if (!(*s == ':' || *s == '_' || *s == '-' || *s == '.' || (*s >= '0' && *s <= '9') ||
		      ((*s | 32) >= 'a' && (*s | 32) <= 'z')))
			return false;
	return true;
}

int dfvm_copy(struct dfbuild *d, struct vm *v, const struct state *s, const struct df_step *st,
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
	char **srcs = NULL;
	int nsrc_all = 0;
	int rc = df_sources(d, st, &srcs, &nsrc_all);
	if (rc < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "step %d/%d (line %d, %s): %s", o->step, o->steps, st->line, kw, msg);
	}
	struct copy c = { .d = d, .dest = dest, .chmod = chmod, .made = json_array() };
	size_t dl = strlen(dest);
	bool dir_dest = dest[dl - 1] == '/' || nsrc_all > 1;
	while (dl > 1 && dest[dl - 1] == '/')
		dest[--dl] = 0;
	rc = guest_open(v->vsock, 10000, v->pid, &c.g);
	if (rc < 0) {
		bctx_sources_free(srcs);
		json_decref(c.made);
		return rc;
	}
	if (!dir_dest) {
		/* COPY file /existing-dir: into it, as Docker does. */
		struct guest_stat gs;
		if (guest_stat(c.g, dest, &gs) == 0 && S_ISDIR(gs.mode))
			dir_dest = true;
	}
	for (int i = 0; rc == 0 && i < nsrc_all; i++) {
		c.src = srcs[i];
		c.into = dir_dest;
		int unpack = st->kind == DF_ADD ? add_archive(d, v, &c, srcs[i]) : 0;
		if (unpack == 0)
			rc = bctx_walk(&d->bc, srcs[i], copy_entry, &c);
		else if (unpack < 0)
			rc = unpack;
	}
	bctx_sources_free(srcs);
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

int dfvm_workdir(struct vm *v, const struct state *s, const struct df_step *st, struct out *o)
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

int dfvm_grow(struct dfbuild *d, struct vm *v)
{
	char said[200];
	int rc = guest_grow_root(v->vsock, v->pid, "the build VM", (long long)d->disk_mib, said, sizeof said);
	if (rc < 0)
		return rc;
	df_note(d, "the root filesystem takes the whole disk: %lld MiB (%s)", (long long)d->disk_mib, said);
	return 0;
}

/* The guest's writes onto the disk, then the disk's top sealed as the
 * step's layer and a new top at next. */
int dfvm_checkpoint(struct vm *v, const char *next)
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
