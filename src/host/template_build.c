/*
 * template_build: `kilnd template build NAME`. A build makes the next
 * version directory DATA/templates/NAME/vN in steps:
 *
 *   image     the root image: a prebuilt BIN/guest/rootfs-NAME.ext4, or
 *             --image FILE, or the builder images/build-rootfs-NAME, or
 *             --oci REF: the OCI image unpacked (oci.h) into vN/oci-root,
 *             made ready for the guest and written by mke2fs (rootfs.h);
 *             its config is kept in the manifest; or --dockerfile DIR:
 *             the Dockerfile's steps run in a build VM of their own
 *             (dfbuild.h) and the result written out as a raw image
 *   boot      a VM boots on it (with its own writable layer) until the
 *             guest agent answers
 *   warm      the template's warm-up command runs (its page cache is then
 *             part of the snapshot), and the root is checked
 *   snapshot  memory and device state are saved and the VM is killed at
 *             once, so its layer stays exactly as the snapshot saw it
 *   verify    a sandbox is made from the new version (through a zygote)
 *             and runs a command
 *   activate  `current` is switched to vN atomically
 *
 * The symlink `build` names the version in progress. A build that fails
 * leaves `current` alone, so the previous version stays in service, and
 * running the command again resumes: steps listed in vN/progress are not
 * redone (the image step can take minutes). --restart starts over.
 */
#include "host/template_build.h"
#include "host/netpool.h"
#include "host/dfbuild.h"
#include "host/disk.h"
#include "host/guest_conn.h"
#include "host/host_int.h"
#include "host/net.h"
#include "host/oci.h"
#include "host/rootfs.h"
#include "net/net.h"
#include "host/proc.h"
#include "host/template.h"
#include "host/vmm.h"
#include "common/strbuf.h"
#include "common/err.h"
#include "host/host_config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const steps[] = { "image", "boot", "warm", "snapshot", "verify", "activate" };
#define NSTEPS 6

struct build {
	const struct host_config *cfg;
	const struct build_opts *o;
	const struct template_def *def;
	struct tmpl t;			/* the version being made */
	char tdir[VM_DIR_MAX - 16];	/* DATA/templates/NAME */
	char vmdir[PATH_MAX];		/* the build VM's directory */
	pid_t vm_pid;
	int64_t vm_start;
	int step;
	bool tty;
	int64_t t0;
	struct net_lease net;		/* the build VM's network (slot 0: none) */
	int net_hold;			/* its claim, held (netclaim_make); -1: none */
};

/* ---- progress ----------------------------------------------------------------------- */

static void progress(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(struct build *b, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	double secs = (double)(mono_ms() - b->t0) / 1000;
	if (b->tty) {
		char bar[NSTEPS * 4 + 1];
		int fill = b->step * 4;
		for (int i = 0; i < NSTEPS * 4; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[NSTEPS * 4] = 0;
		fprintf(stderr, "\r\033[K[%s] %d/%d %s: %.60s (%.0fs)", bar, b->step + 1, NSTEPS,
			steps[b->step], msg, secs);
	} else {
		fprintf(stderr, "template %s [%d/%d] %s: %s (%.1fs)\n", b->def->name, b->step + 1, NSTEPS,
			steps[b->step], msg, secs);
	}
	fflush(stderr);
}

static bool step_done(struct build *b, const char *step)
{
	char path[PATH_MAX + 16], line[64];
	snprintf(path, sizeof path, "%s/progress", b->t.dir);
	FILE *f = fopen(path, "re");
	bool done = false;
	while (f && fgets(line, sizeof line, f))
		if (strcspn(line, "\n") == strlen(step) && !strncmp(line, step, strlen(step)))
			done = true;
	if (f)
		fclose(f);
	return done;
}

static int mark_done(struct build *b, const char *step)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/progress", b->t.dir);
	FILE *f = fopen(path, "ae");
	if (!f)
		return errf_sys("open %s", path);
	fprintf(f, "%s\n", step);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		fclose(f);
		return errf_sys("write %s", path);
	}
	fclose(f);
	return 0;
}

/* ---- the version directory ------------------------------------------------------------- */

static int next_version(const char *tdir)
{
	int max = 0;
	DIR *d = opendir(tdir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] == 'v' && atoi(e->d_name + 1) > max)
			max = atoi(e->d_name + 1);
	if (d)
		closedir(d);
	return max + 1;
}

/* The version in progress (resumed) or a new one; discard: not that one,
 * whatever it is (its settings differ from what the build asks). */
static int open_version(struct build *b, bool discard)
{
	b->t.volume_slots = TEMPLATE_VOLUME_SLOTS;	/* every version built from now on */
	char link[PATH_MAX + 8], target[16];
	snprintf(link, sizeof link, "%s/build", b->tdir);
	ssize_t n = readlink(link, target, sizeof target - 1);
	if (n > 0) {
		target[n] = 0;
		snprintf(b->t.dir, sizeof b->t.dir, "%s/%s", b->tdir, target);
		if (discard || b->o->restart || atoi(target + 1) < b->o->first_version) {
			rmtree(b->t.dir);
			unlink(link);
		} else if (access(b->t.dir, F_OK) == 0) {
			b->t.version = atoi(target + 1);
			fprintf(stderr, "template %s: resuming the build of version %d\n", b->def->name,
				b->t.version);
			return 0;
		}
	}
	b->t.version = next_version(b->tdir);
	if (b->t.version < b->o->first_version)
		b->t.version = (int)b->o->first_version;
	snprintf(b->t.dir, sizeof b->t.dir, "%s/v%d", b->tdir, b->t.version);
	if (mkdir(b->t.dir, 0700) < 0)
		return errf_sys("mkdir %s", b->t.dir);
	char tmp[PATH_MAX + 16];
	snprintf(tmp, sizeof tmp, "%s/build.tmp", b->tdir);
	snprintf(target, sizeof target, "v%d", b->t.version);
	unlink(tmp);
	if (symlink(target, tmp) < 0 || rename(tmp, link) < 0)
		return errf_sys("symlink %s", link);
	return 0;
}

/* ---- steps ------------------------------------------------------------------------------ */

/* The last non-empty line of a log, its newline dropped (out unchanged
 * if there is none). */
static void last_line(const char *log, char *out, size_t cap)
{
	FILE *f = fopen(log, "re");
	if (!f)
		return;
	char tmp[400];
	while (fgets(tmp, sizeof tmp, f))
		if (tmp[0] != '\n' && cap) {
			size_t n = strlen(tmp) < cap ? strlen(tmp) : cap - 1;
			memcpy(out, tmp, n);
			out[n] = 0;
		}
	fclose(f);
	out[strcspn(out, "\n")] = 0;
}

static int wait_builder(struct build *b, pid_t pid, const char *log)
{
	int64_t last = 0;
	for (;;) {
		int st;
		pid_t p = waitpid(pid, &st, WNOHANG);
		if (p == pid)
			return WIFEXITED(st) && WEXITSTATUS(st) == 0
				? 0 : errf(EIO, "the image builder failed; see %s", log);
		if (p < 0 && errno != EINTR)
			return errf_sys("waitpid");
		if (mono_ms() - last >= (b->tty ? 1000 : 15000)) {
			/* The builder's last line says where it is. */
			char line[160] = "building";
			last_line(log, line, sizeof line);
			progress(b, "%s", line);
			last = mono_ms();
		}
		usleep(200000);
	}
}

/* Run an image builder (argv[0]), its output to log, and wait for it. */
static int run_builder(struct build *b, char *const argv[], const char *log)
{
	progress(b, "running %s (log: %s)", argv[0], log);
	/* Not detached: a build interrupted with ^C takes its builder along. */
	pid_t pid = fork();
	if (pid < 0)
		return errf_sys("fork");
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		/* kilnd ignores SIGPIPE; the builder's pipelines want it back.
		 * And no descriptor of ours: mmdebstrap hands apt the next
		 * free one as `cat >&N`, which dash refuses past 9 ("Bad fd
		 * number"), and kilnd holds many. */
		signal(SIGPIPE, SIG_DFL);
		syscall(SYS_close_range, 3, ~0U, 0);
		execv(argv[0], argv);
		_exit(127);
	}
	return wait_builder(b, pid, log);
}

/* Copy a root image, keeping holes (a 4 GiB image holds 0.5 GiB). */
static int copy_image(const char *src, const char *dst)
{
	char *argv[] = { "cp", "--sparse=always", "--reflink=auto", (char *)src, (char *)dst, NULL };
	int rc = proc_run(argv, "/dev/null");
	if (rc != 0)
		return rc < 0 ? rc : errf(EIO, "copying %s to %s: exit status %d", src, dst, rc);
	return 0;
}

/* The image's config as the manifest keeps it (template.h). */
static json_t *image_json(const struct oci_config *c, const char *ref)
{
	json_t *j = json_pack("{s:s}", "source", ref);
	if (!j)
		return NULL;
	json_t *env = c->env ? json_loads(c->env, 0, NULL) : NULL;
	json_object_set_new(j, "env", env ? env : json_object());
	if (c->workdir)
		json_object_set_new(j, "workdir", json_string(c->workdir));
	if (c->user)
		json_object_set_new(j, "user", json_string(c->user));
	if (c->cmd)
		json_object_set_new(j, "cmd", json_loads(c->cmd, 0, NULL));
	if (c->entrypoint)
		json_object_set_new(j, "entrypoint", json_loads(c->entrypoint, 0, NULL));
	return j;
}

/* The OCI image ref unpacked and written as a raw root image at out;
 * its config into *image. */
/* disk_mib: the image's size (--oci --disk), 0: its content and
 * ROOTFS_HEADROOM_MIB free. */
static int oci_root(struct build *b, const char *ref, const char *out, int64_t disk_mib, json_t **image)
{
	char root[PATH_MAX + 16], scratch[PATH_MAX + 16], log[PATH_MAX + 16];
	snprintf(root, sizeof root, "%s/oci-root", b->t.dir);
	snprintf(scratch, sizeof scratch, "%s/oci-scratch", b->t.dir);
	snprintf(log, sizeof log, "%s/image.log", b->t.dir);
	rmtree(root);
	rmtree(scratch);
	if (mkdir(root, 0755) < 0 || mkdir(scratch, 0700) < 0)
		return errf_sys("mkdir %s", root);
	progress(b, "unpacking %s", ref);
	struct oci_config cfg;
	struct oci_stats st;
	uint64_t max = b->o->max_unpacked ? b->o->max_unpacked : BUILD_MAX_UNPACKED;
	int rc = oci_unpack(ref, root, scratch, max, &cfg, &st);
	rmtree(scratch);
	if (rc == 0) {
		progress(b, "%d layers, %ld entries, %llu MiB%s", st.layers, st.entries,
			 (unsigned long long)(st.bytes >> 20), st.devices_skipped ? " (device nodes skipped)" : "");
		rc = rootfs_for_guest(root, cfg.workdir);
	}
	if (rc == 0) {
		progress(b, "mke2fs (log: %s)", log);
		rc = rootfs_make_ext4(root, out, st.bytes, st.entries, (uint64_t)disk_mib, log);
	}
	if (rc == 0 && disk_mib)
		progress(b, "the root filesystem takes the whole disk: %lld MiB", (long long)disk_mib);
	if (rc == 0 && !(*image = image_json(&cfg, ref)))
		rc = errf(ENOMEM, "out of memory");
	oci_config_free(&cfg);
	rmtree(root);
	return rc;
}

static int step_image_oci(struct build *b, const char *out)
{
	json_t *image = NULL;
	int rc = oci_root(b, b->o->oci, out, b->o->disk_mib, &image);
	if (rc == 0) {
		json_decref(b->t.image);
		b->t.image = image;
		snprintf(b->t.description, sizeof b->t.description, "OCI image %s", b->o->oci);
	}
	return rc;
}

static void df_progress(void *ctx, const char *msg)
{
	progress(ctx, "%s", msg);
}

/* FROM oci: in a Dockerfile: unpacked once into the step cache,
 * .cache/FROMKEY.ext4 with its config beside it (.json). */
static int df_oci_base(struct build *b, struct dfbuild *d)
{
	char ext4[PATH_MAX], js[PATH_MAX], tmp[PATH_MAX + 8];
	snprintf(ext4, sizeof ext4, "%.4000s/%s.ext4", d->cache, d->from_key);
	snprintf(js, sizeof js, "%.4000s/%s.json", d->cache, d->from_key);
	snprintf(tmp, sizeof tmp, "%s.tmp", ext4);
	int rc = 0;
	if (access(ext4, F_OK) < 0) {
		json_t *image = NULL;
		unlink(tmp);
		rc = oci_root(b, d->from_oci, tmp, 0, &image);
		if (rc == 0 && json_dump_file(image, js, 0) < 0)
			rc = errf(EIO, "writing %s", js);
		if (rc == 0 && (chmod(tmp, 0444) < 0 || rename(tmp, ext4) < 0))
			rc = errf_sys("rename %s", tmp);
		json_decref(image);
		if (rc < 0) {
			unlink(tmp);
			return rc;
		}
	} else {
		progress(b, "FROM oci:%s: unpacked before (cached)", d->from_oci);
	}
	snprintf(d->base, sizeof d->base, "%s", ext4);
	d->base_image = json_load_file(js, 0, NULL);
	return 0;
}

/* FROM debian:SUITE in a Dockerfile: built once by build-rootfs-debian
 * (mmdebstrap through the machine's apt sources, as `base` is) into the
 * step cache, .cache/FROMKEY.ext4, which every later build of the suite
 * takes as it is. The builder's log stays beside it (.log). It is given
 * `base`'s prebuilt image as a seed: when that image's own files show it
 * is the suite's image (the builder checks), the cache is seeded with a
 * copy of it and no mmdebstrap runs; its last line, logged, says which. */
static int df_debian_base(struct build *b, struct dfbuild *d)
{
	char ext4[PATH_MAX], log[PATH_MAX], tmp[PATH_MAX + 8], builder[PATH_MAX + 32], seed[PATH_MAX + 32];
	snprintf(ext4, sizeof ext4, "%.4000s/%s.ext4", d->cache, d->from_key);
	snprintf(log, sizeof log, "%.4000s/%s.log", d->cache, d->from_key);
	snprintf(tmp, sizeof tmp, "%s.tmp", ext4);
	if (access(ext4, F_OK) == 0) {
		progress(b, "FROM debian:%s: built before (cached)", d->from_debian);
	} else {
		snprintf(builder, sizeof builder, "%s/build-rootfs-debian", b->cfg->image_builders);
		if (access(builder, X_OK) < 0)
			return errf(ENOENT, "FROM debian:%s: no image builder %s (it comes with kiln's images/)",
				    d->from_debian, builder);
		unlink(tmp);
		snprintf(seed, sizeof seed, "%s/rootfs-base.ext4", b->cfg->images);
		char *argv[6];
		int n = 0;
		argv[n++] = builder;
		if (access(seed, R_OK) == 0) {
			argv[n++] = "--seed";
			argv[n++] = seed;
		}
		argv[n++] = tmp;
		argv[n++] = d->from_debian;
		argv[n] = NULL;
		int rc = run_builder(b, argv, log);
		if (rc < 0) {
			char line[300] = "";
			last_line(log, line, sizeof line);
			unlink(tmp);
			return errf(-rc, "FROM debian:%s: the image builder failed (suite unknown to this machine's "
					 "apt mirrors, or no network?): %s; see %s", d->from_debian, line, log);
		}
		if (chmod(tmp, 0444) < 0 || rename(tmp, ext4) < 0) {
			rc = errf_sys("rename %s", tmp);
			unlink(tmp);
			return rc;
		}
		char line[300] = "";
		last_line(log, line, sizeof line);
		progress(b, "FROM debian:%s: %s", d->from_debian, line);
	}
	snprintf(d->base, sizeof d->base, "%s", ext4);
	return 0;
}

/* --build-net SPEC as a policy (template_build.h). */
static int build_net_policy(const char *spec, struct net_policy *p)
{
	memset(p, 0, sizeof *p);
	p->allow_internet = true;
	if (!strcmp(spec, "internet"))
		return 0;
	char buf[1024];
	if (strlen(spec) >= sizeof buf)
		return errf(EINVAL, "--build-net: too long");
	snprintf(buf, sizeof buf, "%s", spec);
	char *save = NULL;
	for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
		if (p->nallow == NET_MAX_CIDRS)
			return errf(EINVAL, "--build-net: more than %d CIDRs", NET_MAX_CIDRS);
		if (net_parse_cidr(c, &p->allow[p->nallow++]) < 0)
			return errf(EINVAL, "--build-net '%.64s': want none, internet or CIDR[,CIDR...] (a.b.c.d[/n])", c);
	}
	return p->nallow ? 0 : errf(EINVAL, "--build-net: want none, internet or CIDR[,CIDR...]");
}

/* The RUN steps' network: the build's own slot (build_net) under the
 * policy asked for, for the image step only; then the template VM's
 * default policy again. */
static int df_net(struct build *b, struct dfbuild *d, bool on)
{
	const char *spec = b->o->build_net;
	if (!spec || !strcmp(spec, "none"))
		return 0;
	if (!b->net.slot)
		return on ? errf(EINVAL, "--build-net %.64s: this host has no sandbox network (kilnd --no-net)", spec)
			  : 0;
	struct net_config nc;
	struct net_slot ns;
	struct net_policy p = { .allow_internet = true };
	net_default_config(&nc);
	net_slot_info(&nc, b->net.slot, &ns);
	int rc = on ? build_net_policy(spec, &p) : 0;
	if (rc == 0)
		rc = net_set_policy(&nc, &ns, &p);
	if (rc < 0 || !on)
		return rc;
	d->tap = b->net.tap;
	d->netns = b->net.netns;
	dns_servers(b->cfg, b->t.dns);
	d->dns = b->t.dns;
	progress(b, "RUN steps on the network: %s", spec);
	return 0;
}

static int step_image_dockerfile(struct build *b, const char *out)
{
	const struct build_opts *o = b->o;
	struct dfbuild d = { .cfg = b->cfg, .name = b->def->name, .context = o->dockerfile,
			     .deadline_ms = o->max_seconds ? b->t0 + o->max_seconds * 1000 : 0,
			     .file = o->dockerfile_file, .build_args = o->build_args,
			     .max_context = o->max_context, .vcpus = b->t.vcpus, .memory_mib = b->t.memory_mib,
			     .disk_mib = o->disk_mib,
			     .vdir = b->t.dir, .tty = b->tty, .progress = df_progress, .pctx = b };
	progress(b, "reading %s", o->dockerfile);
	int rc = dfbuild_open(&d);
	if (rc == 0 && d.from_oci[0])
		rc = df_oci_base(b, &d);
	else if (rc == 0 && d.from_debian[0])
		rc = df_debian_base(b, &d);
	if (rc == 0)
		rc = df_net(b, &d, true);
	if (rc == 0)
		rc = dfbuild_run(&d, out);
	int rc2 = df_net(b, &d, false);
	rc = rc ?: rc2;
	if (rc == 0) {
		json_decref(b->t.image);
		b->t.image = json_incref(d.image);
		snprintf(b->t.description, sizeof b->t.description, "Dockerfile in %.140s", o->dockerfile);
		/* Its own CMD/ENTRYPOINT runs in the snapshot unless --start
		 * says what does (docs/templates.md). */
		if (!o->start && !o->no_snapshot && d.start[0]) {
			snprintf(b->t.start, sizeof b->t.start, "%s", d.start);
			if (!b->t.ready_port)
				b->t.ready_port = d.ready_port;
			progress(b, "start command from CMD/ENTRYPOINT: %s", d.start);
		}
	}
	dfbuild_close(&d);
	return rc;
}

/* --disk for an image taken as it is: the file made MIB long (sparse:
 * zeros past the image, no space taken), its filesystem grown to it in
 * the template VM (grow_root). Never shrunk. */
static int extend_image(struct build *b, const char *path)
{
	struct stat st;
	uint64_t want = (uint64_t)b->o->disk_mib << 20;
	if (stat(path, &st) < 0)
		return errf_sys("stat %s", path);
	if ((uint64_t)st.st_size > want)
		return errf(EINVAL, "--disk %lld: smaller than the image's %lld MiB (a root is never shrunk)",
			    (long long)b->o->disk_mib, (long long)((st.st_size + (1 << 20) - 1) >> 20));
	if (truncate(path, (off_t)want) < 0)
		return errf_sys("truncate %s", path);
	return 0;
}

static int step_image(struct build *b)
{
	char src[PATH_MAX + 32], tmp[PATH_MAX + 16];
	snprintf(b->t.root, sizeof b->t.root, "%s/root.ext4", b->t.dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", b->t.root);
	if (b->o->image)
		snprintf(src, sizeof src, "%s", b->o->image);
	else
		snprintf(src, sizeof src, "%s/rootfs-%s.ext4", b->cfg->images, b->def->name);
	int rc;
	if (b->o->dockerfile) {
		rc = step_image_dockerfile(b, tmp);
	} else if (b->o->oci) {
		rc = step_image_oci(b, tmp);
	} else if (access(src, R_OK) == 0) {
		progress(b, "copying %s", src);
		rc = copy_image(src, tmp);
		if (rc == 0 && b->o->disk_mib)
			rc = extend_image(b, tmp);
	} else if (b->o->image) {
		return errf_sys("image %s", src);
	} else {
		char builder[PATH_MAX + 32], log[PATH_MAX + 16];
		snprintf(builder, sizeof builder, "%s/build-rootfs-%s", b->cfg->image_builders, b->def->name);
		snprintf(log, sizeof log, "%s/image.log", b->t.dir);
		if (access(builder, X_OK) < 0)
			return errf(ENOENT, "no prebuilt image %s and no builder %s", src, builder);
		char *argv[] = { builder, tmp, NULL };
		rc = run_builder(b, argv, log);
	}
	struct stat st;
	if (rc == 0 && b->o->max_root_mib && stat(tmp, &st) == 0 &&
	    (int64_t)st.st_blocks * 512 > b->o->max_root_mib << 20)
		rc = errf(EFBIG, "the root image takes %lld MiB, more than its plan allows (template_mib %lld)",
			  (long long)((int64_t)st.st_blocks * 512 >> 20), (long long)b->o->max_root_mib);
	if (rc == 0 && chmod(tmp, 0444) < 0)
		rc = errf_sys("chmod %s", tmp);
	if (rc == 0 && rename(tmp, b->t.root) < 0)
		rc = errf_sys("rename %s", tmp);
	if (rc == 0)
		rc = tmpl_save_manifest(&b->t);	/* the image config, for a resumed build */
	if (rc < 0)
		unlink(tmp);
	return rc;
}

static void kill_vm(struct build *b)
{
	if (b->vm_pid > 0)
		proc_kill_wait(b->vm_pid, b->vm_start, 5000);
	b->vm_pid = 0;
}

static int step_boot(struct build *b)
{
	snprintf(b->t.root, sizeof b->t.root, "%s/root.ext4", b->t.dir);
	snprintf(b->vmdir, sizeof b->vmdir, "%s/vm", b->t.dir);
	rmtree(b->vmdir);
	if (mkdir(b->vmdir, 0700) < 0)
		return errf_sys("mkdir %s", b->vmdir);
	snprintf(b->t.base, sizeof b->t.base, "%s/layer", b->t.dir);
	unlink(b->t.base);
	int rc = disk_create(b->t.base, b->t.root);
	if (rc < 0)
		return rc;
	/* Its snapshot has the slots, so every sandbox spawned from it has. */
	b->t.volume_slots = TEMPLATE_VOLUME_SLOTS;
	struct vm_spec s = { .dir = b->vmdir, .vcpus = b->t.vcpus, .memory_mib = b->t.memory_mib,
			     .disk = b->t.base, .hostname = b->def->name,
			     .volume_slots = b->t.volume_slots };
	if (b->net.slot) {
		s.tap = b->net.tap;
		s.netns = b->net.netns;
		/* Kept in the manifest: the resolver its clones start with. */
		dns_servers(b->cfg, b->t.dns);
		s.dns = b->t.dns;
	}
	progress(b, "booting");
	if ((rc = vmm_launch(b->cfg, &s, &b->vm_pid)) < 0)
		return rc;
	b->vm_start = proc_start_time(b->vm_pid);
	char vsock[PATH_MAX];
	vm_path(vsock, sizeof vsock, b->vmdir, "vsock.sock");
	struct guest *g;
	if ((rc = guest_wait_ready(vsock, b->cfg->boot_timeout_ms, b->vm_pid, &g)) < 0) {
		char msg[300];	/* errf must not read the buffer it writes */
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "%s (console: %s/console.log)", msg, b->vmdir);
	}
	guest_close(g);
	return 0;
}

/* Up to 64 KiB of a command's output (both streams). */
static int capture(void *ctx, const struct guest_ev *ev)
{
	struct strbuf *out = ctx;
	if (out->len < 64 * 1024)
		strbuf_append(out, ev->data, ev->len);
	return 0;
}

/* Run cmd in a VM of the build: up to 64 KiB of its output (both
 * streams) into out, its exit status into *code (may be NULL). */
static int run_capture(struct build *b, const char *vmdir, pid_t pid, const char *cmd, struct strbuf *out,
		       int *code)
{
	char vsock[PATH_MAX];
	vm_path(vsock, sizeof vsock, vmdir, "vsock.sock");
	struct guest *g;
	int rc = guest_wait_ready(vsock, b->cfg->boot_timeout_ms, pid, &g);
	if (rc < 0)
		return rc;
	struct guest_cmd c = { .shell = cmd, .timeout_ms = 600000 };
	struct guest_ev ev;
	rc = guest_exec_run(g, &c, capture, out, -1, -1, &ev);
	guest_close(g);
	if (code)
		*code = ev.code;
	return rc;
}

/* Run cmd in the build VM; its output must contain want (if given). */
static int run_in_vm(struct build *b, const char *vmdir, pid_t pid, const char *cmd, const char *want)
{
	struct strbuf out;
	strbuf_init(&out);
	struct guest_ev ev;
	int rc = run_capture(b, vmdir, pid, cmd, &out, &ev.code);
	strbuf_putc(&out, 0);
	if (rc == 0 && ev.code != 0)
		rc = errf(EIO, "'%s' exited with %d: %.200s", cmd, ev.code, out.data ? out.data : "");
	if (rc == 0 && want && (!out.data || !strstr(out.data, want)))
		rc = errf(EIO, "'%s' printed '%.200s', not '%s'", cmd, out.data ? out.data : "", want);
	strbuf_free(&out);
	return rc;
}

/* The root must be the template's image, not the initramfs: a shell and
 * an /etc/hostname are there. */
#define ROOT_CHECK "test -x /bin/sh && test -s /etc/hostname && echo kiln-root-ok"

/* ---- the start command -------------------------------------------------------- */

#define START_LOG "/var/log/kiln-start.log"
#define START_POLL_MS 200

/* What the start command runs as: its output to START_LOG, the image's
 * Env exported (values quoted; keys that are not shell names skipped)
 * and its WorkingDir, as a sandbox's commands have them, then cmd. */
static void start_script(const struct tmpl *t, const char *cmd, struct strbuf *out)
{
	strbuf_printf(out, "mkdir -p /var/log; exec >" START_LOG " 2>&1 </dev/null\n");
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(t->image, "env"), k, v) {
		bool name = (k[0] == '_' || (k[0] | 32) >= 'a') && (k[0] | 32) <= 'z';
		for (const char *p = k; name && *p; p++)
			name = *p == '_' || ((*p | 32) >= 'a' && (*p | 32) <= 'z') || (*p >= '0' && *p <= '9');
		if (!name || !json_is_string(v))
			continue;
		strbuf_printf(out, "export %s='", k);
		for (const char *p = json_string_value(v); *p; p++)
			if (*p == '\'')
				strbuf_append(out, "'\\''", 4);
			else
				strbuf_putc(out, *p);
		strbuf_append(out, "'\n", 2);
	}
	const char *wd = tmpl_workdir(t);
	if (wd)
		strbuf_printf(out, "cd '%s' || exit 1\n", wd);	/* start_command refuses a quote in it */
	strbuf_printf(out, "%s\n", cmd);
}

struct find_proc {
	uint32_t id;
	bool found, exited;
	int code;
};

static int note_proc(void *ctx, const struct guest_proc *p)
{
	struct find_proc *f = ctx;
	if (p->id == f->id) {
		f->found = true, f->exited = p->exited, f->code = p->code;
		return 1;
	}
	return 0;
}

/* Start the template's start command in the build VM, left running in the
 * background, and wait until it is ready: something accepts connections
 * on ready_port, or (no port) it has run a second without exiting. Its
 * exit, or the time running out, fails the build with its output. */
static int start_command(struct build *b)
{
	char vsock[PATH_MAX];
	vm_path(vsock, sizeof vsock, b->vmdir, "vsock.sock");
	const char *wd = tmpl_workdir(&b->t);
	if (wd && strchr(wd, '\''))
		return errf(EINVAL, "the image's WorkingDir '%.100s' has a quote in it", wd);
	struct strbuf script;
	strbuf_init(&script);
	start_script(&b->t, b->t.start, &script);
	struct guest *g;
	int rc = strbuf_failed(&script) ? errf(ENOMEM, "out of memory")
					: guest_wait_ready(vsock, b->cfg->boot_timeout_ms, b->vm_pid, &g);
	struct guest_cmd c = { .shell = script.data, .background = true };
	if (rc == 0) {
		rc = guest_exec_start(g, &c);
		if (rc == 0)
			rc = guest_exec_detach(g);
		guest_close(g);
	}
	strbuf_free(&script);
	if (rc < 0)
		return rc;
	int limit_s = b->o->ready_timeout_s > 0 ? b->o->ready_timeout_s : TEMPLATE_READY_S;
	int64_t t0 = mono_ms();
	for (;;) {
		struct find_proc f = { .id = c.id };
		if ((rc = guest_open(vsock, 10000, b->vm_pid, &g)) < 0)
			return rc;
		rc = guest_procs(g, note_proc, &f);
		guest_close(g);
		if (rc < 0)
			return rc;
		bool ran = mono_ms() - t0 >= 1000;
		if (f.found && !f.exited && b->t.ready_port) {
			int fd = -1;
			void *early = NULL;
			size_t n = 0;
			if ((rc = guest_open(vsock, 10000, b->vm_pid, &g)) < 0)
				return rc;
			rc = guest_tcp_connect(g, (unsigned)b->t.ready_port, &fd, &early, &n);
			free(early);
			if (fd >= 0)
				close(fd);
			if (rc != 0)
				guest_close(g);	/* connected: the stream was fd, closed above */
			if (rc == 0) {
				progress(b, "the start command listens on port %d (%.1f s)", b->t.ready_port,
					 (double)(mono_ms() - t0) / 1000);
				return 0;
			}
			if (rc != -ECONNREFUSED)
				return rc;
		} else if (f.found && !f.exited && ran) {
			progress(b, "the start command runs");
			return 0;
		}
		const char *why = !f.found ? "is gone" : f.exited ? "exited" : NULL;
		if (why || mono_ms() - t0 >= (int64_t)limit_s * 1000) {
			struct strbuf out;
			strbuf_init(&out);
			run_capture(b, b->vmdir, b->vm_pid, "tail -c 600 " START_LOG, &out, NULL);
			char msg[300];
			if (why && f.found)
				snprintf(msg, sizeof msg, "exited with status %d", f.code);
			else if (why)
				snprintf(msg, sizeof msg, "is gone");
			else
				snprintf(msg, sizeof msg, "did not listen on port %d within %d s", b->t.ready_port,
					 limit_s);
			for (size_t i = 0; i < out.len; i++)
				if (out.data[i] == '\n' || out.data[i] == '\r')
					out.data[i] = ' ';
			rc = errf(EIO, "the start command %s; its output (" START_LOG "): %.*s", msg, (int)out.len,
				  out.data ? out.data : "");
			strbuf_free(&out);
			return rc;
		}
		usleep(START_POLL_MS * 1000);
	}
}

/* The root filesystem of an image taken as it is grown to its --disk
 * (extend_image made the disk that large): the agent's grow-fs /, online,
 * written to the template's layer, which the snapshot keeps. */
static int grow_root(struct build *b)
{
	char vsock[PATH_MAX], said[200];
	vm_path(vsock, sizeof vsock, b->vmdir, "vsock.sock");
	int rc = guest_grow_root(vsock, b->vm_pid, "the template VM", (long long)b->o->disk_mib, said, sizeof said);
	if (rc < 0)
		return rc;
	progress(b, "the root filesystem takes the whole disk: %lld MiB (%s)", (long long)b->o->disk_mib, said);
	return 0;
}

static int step_warm(struct build *b)
{
	int rc = run_in_vm(b, b->vmdir, b->vm_pid, ROOT_CHECK, "kiln-root-ok");
	if (rc == 0 && b->o->disk_mib && !b->o->dockerfile && !b->o->oci)
		rc = grow_root(b);
	if (rc == 0 && b->def->warmup) {
		progress(b, "%s", b->def->warmup);
		rc = run_in_vm(b, b->vmdir, b->vm_pid, b->def->warmup, NULL);
	}
	if (rc == 0)
		rc = run_in_vm(b, b->vmdir, b->vm_pid, "sync", NULL);
	/* Last: what it starts runs in the snapshot as it is then. */
	if (rc == 0 && b->t.start[0]) {
		progress(b, "starting: %s", b->t.start);
		rc = start_command(b);
	}
	return rc;
}

static int step_snapshot(struct build *b)
{
	snprintf(b->t.snapdir, sizeof b->t.snapdir, "%s/snapshot", b->t.dir);
	if (b->o->no_snapshot) {
		/* Boot-only: sandboxes boot on the root with a layer of their own. */
		kill_vm(b);
		unlink(b->t.base);
		snprintf(b->t.base, sizeof b->t.base, "%s", b->t.root);
		b->t.snapshot = false;
		return 0;
	}
	rmtree(b->t.snapdir);
	/* Let the guest finish closing the agent connections of the warm-up
	 * first: a connection still half-closed in the snapshot lives on in
	 * every sandbox, and a new connection that reuses its host port (the
	 * restored VMM numbers them from the start again) is then refused or
	 * never answered. */
	usleep(500 * 1000);
	char ctl[PATH_MAX];
	vm_path(ctl, sizeof ctl, b->vmdir, "ctl.sock");
	json_t *req = json_pack("{s:s,s:s,s:b}", "cmd", "snapshot", "dir", b->t.snapdir, "diff", 0), *reply;
	int rc = req ? vmm_ctl(ctl, req, &reply, 300000) : errf(ENOMEM, "out of memory");
	json_decref(req);
	/* Killed right away: the layer must stay as the snapshot saw it, and
	 * sealed it is a base for the sandboxes' overlays. */
	kill_vm(b);
	if (rc == 0)
		rc = disk_seal(b->t.base);
	if (rc == -ENOTSUP) {
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(ENOTSUP, "%s; build a boot-only template with --no-snapshot", msg);
	}
	if (rc < 0)
		return rc;
	progress(b, "saved in %.0f ms", json_number_value(json_object_get(reply, "ms")));
	json_decref(reply);
	b->t.snapshot = true;
	return 0;
}

static int step_verify(struct build *b)
{
	char dir[VM_DIR_MAX + 8], top[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/check", b->t.dir);
	snprintf(top, sizeof top, "%s/disk", dir);
	rmtree(dir);
	if (mkdir(dir, 0700) < 0)
		return errf_sys("mkdir %s", dir);
	pid_t pid = 0;
	int rc = disk_create(top, b->t.base);
	if (rc == 0 && b->t.snapshot) {
		progress(b, "starting the zygote");
		struct spawn_spec s = { .dir = dir, .disk = top, .hostname = "kiln-check" };
		if (b->t.net) {
			s.tap = b->net.tap;
			s.netns = b->net.netns;
		}
		double ms;
		rc = tmpl_spawn(b->cfg, &b->t, &s, &pid, &ms, NULL);
	} else if (rc == 0) {
		struct vm_spec s = { .dir = dir, .vcpus = b->t.vcpus, .memory_mib = b->t.memory_mib,
				     .disk = top, .hostname = "kiln-check", .volume_slots = b->t.volume_slots };
		if (b->t.net) {
			s.tap = b->net.tap;
			s.netns = b->net.netns;
		}
		rc = vmm_launch(b->cfg, &s, &pid);
	}
	int64_t start = pid > 0 ? proc_start_time(pid) : 0;
	if (rc == 0) {
		progress(b, "running a command in a new sandbox");
		rc = run_in_vm(b, dir, pid, ROOT_CHECK, "kiln-root-ok");
	}
	/* What the start command listens on answers in a sandbox at once:
	 * it came with the snapshot, nothing started it. */
	if (rc == 0 && b->t.snapshot && b->t.ready_port) {
		char vsock[PATH_MAX];
		vm_path(vsock, sizeof vsock, dir, "vsock.sock");
		struct guest *g;
		int fd = -1;
		void *early = NULL;
		size_t n = 0;
		rc = guest_open(vsock, 10000, pid, &g);
		if (rc == 0 && (rc = guest_tcp_connect(g, (unsigned)b->t.ready_port, &fd, &early, &n)) < 0)
			guest_close(g);
		free(early);
		if (fd >= 0)
			close(fd);
		if (rc < 0)
			rc = errf(-rc, "port %d does not answer in a new sandbox: %s", b->t.ready_port, errmsg());
		else
			progress(b, "port %d answers in a new sandbox", b->t.ready_port);
	}
	if (pid > 0)
		proc_kill_wait(pid, start, 5000);
	if (rc < 0 && b->t.snapshot)
		tmpl_zygote_stop(&b->t);	/* a version that failed serves nothing */
	rmtree(dir);
	return rc;
}

static int step_activate(struct build *b)
{
	char cur[PATH_MAX + 16], tmp[PATH_MAX + 16], target[32], link[PATH_MAX + 16];
	snprintf(cur, sizeof cur, "%s/current", b->tdir);
	snprintf(tmp, sizeof tmp, "%s/current.tmp", b->tdir);
	snprintf(link, sizeof link, "%s/build", b->tdir);
	snprintf(target, sizeof target, "v%d", b->t.version);
	unlink(tmp);
	if (symlink(target, tmp) < 0 || rename(tmp, cur) < 0)
		return errf_sys("switching %s", cur);
	unlink(link);
	return 0;
}

/* The build VM gets a network of its own, as a sandbox does, so its
 * snapshot has a network device and the guest's address (kiln.ip) is up
 * in every clone. It is claimed for DATA like kilnd's (netpool.h), so a
 * kilnd that starts after a killed build removes it, and held while the
 * build runs, so that a kilnd starting meanwhile (on the same data
 * directory: `kilnd template build` beside a starting daemon) does not. */
static int build_net(struct build *b)
{
	struct net_config nc;
	struct net_slot ns;
	net_default_config(&nc);
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/net", b->cfg->data_dir);
	mkdir(dir, 0700);
	int rc = net_init(&nc);
	if (rc == 0)
		rc = netclaim_make(b->cfg->data_dir, &nc, &ns, &b->net_hold);
	if (rc < 0) {
		char msg[300];
		snprintf(msg, sizeof msg, "%s", errmsg());
		return errf(-rc, "the build VM's network: %s (build with --no-net on a host without "
				 "nftables)", msg);
	}
	net_lease_of(ns.slot, &b->net);
	return 0;
}

static void build_net_drop(struct build *b)
{
	struct net_config nc;
	net_default_config(&nc);
	netclaim_drop(b->cfg->data_dir, &nc, b->net.slot);
	b->net.slot = 0;
	if (b->net_hold >= 0)
		close(b->net_hold);
	b->net_hold = -1;
}

/* The settings of the version: a new one's from the template and the
 * options, a resumed one's from the manifest written when it started
 * (options that differ from it are refused: --restart changes them). */
static int version_settings(struct build *b)
{
	const struct build_opts *o = b->o;
	struct tmpl saved;
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/manifest.json", b->t.dir);
	snprintf(b->t.base, sizeof b->t.base, "%s", b->t.root);
	snprintf(b->t.snapdir, sizeof b->t.snapdir, "%s/snapshot", b->t.dir);
	if (access(path, F_OK) == 0) {
		int rc = tmpl_load(b->t.dir, &saved);
		if (rc < 0)
			return rc;
		if ((o->start && strcmp(o->start, saved.start)) || (o->ready_port && o->ready_port != saved.ready_port)) {
			rc = errf(EINVAL, "version %d is being built with start command '%.200s' (port %d): resume "
					  "it without --start/--ready-port, or start over with --restart",
				  b->t.version, saved.start, saved.ready_port);
			tmpl_clear(&saved);
			return rc;
		}
		snprintf(b->t.start, sizeof b->t.start, "%s", saved.start);
		b->t.ready_port = saved.ready_port;
		if ((o->vcpus && o->vcpus != saved.vcpus) || (o->memory_mib && o->memory_mib != saved.memory_mib)) {
			/* A Dockerfile's build (the API's) starts over instead: its
			 * steps come back from the step cache. */
			if (o->dockerfile)
				rc = errf(ESTALE, "version %d was begun with %d vCPUs and %d MiB", b->t.version,
					  saved.vcpus, saved.memory_mib);
			else
				rc = errf(EINVAL, "version %d is being built with %d vCPUs and %d MiB: resume it "
						  "without --vcpus/--memory, or start over with --restart",
					  b->t.version, saved.vcpus, saved.memory_mib);
			tmpl_clear(&saved);
			return rc;
		}
		b->t.vcpus = saved.vcpus;
		b->t.memory_mib = saved.memory_mib;
		snprintf(b->t.description, sizeof b->t.description, "%s", saved.description);
		b->t.image = saved.image;	/* taken over */
		saved.image = NULL;
		if (step_done(b, "snapshot")) {
			b->t.snapshot = saved.snapshot;
			b->t.net = saved.net;
			b->t.volume_slots = saved.volume_slots;	/* what its snapshot has */
			memcpy(b->t.dns, saved.dns, sizeof b->t.dns);
			snprintf(b->t.base, sizeof b->t.base, "%s", saved.base);
			snprintf(b->t.snapdir, sizeof b->t.snapdir, "%s", saved.snapdir);
		}
		return 0;
	}
	b->t.vcpus = o->vcpus ? o->vcpus : b->def->vcpus;
	b->t.memory_mib = o->memory_mib ? o->memory_mib : b->def->memory_mib;
	snprintf(b->t.start, sizeof b->t.start, "%s", o->start ? o->start : "");
	b->t.ready_port = o->ready_port;
	if (o->dockerfile)
		snprintf(b->t.description, sizeof b->t.description, "Dockerfile in %.140s", o->dockerfile);
	else if (o->oci)
		snprintf(b->t.description, sizeof b->t.description, "OCI image %s", o->oci);
	else if (o->image && !template_def_find(o->name))
		snprintf(b->t.description, sizeof b->t.description, "root image %s", o->image);
	else
		snprintf(b->t.description, sizeof b->t.description, "%s", b->def->description);
	return tmpl_save_manifest(&b->t);
}

static int check_opts(const struct build_opts *o)
{
	if (!template_def_find(o->name) && !template_name_ok(o->name))
		return errf(EINVAL, "bad template name '%.64s' (want 1 to 31 of a-z, 0-9, '-' and '_', "
				    "starting with a letter or digit)", o->name);
	if (!template_def_find(o->name) && !o->oci && !o->image && !o->dockerfile)
		return errf(EINVAL, "unknown template '%s': a new template is built from an image, "
				    "--oci PATH[:TAG], --image FILE or --dockerfile DIR (compiled in: minimal, base)",
			    o->name);
	if (!!o->oci + !!o->image + !!o->dockerfile > 1)
		return errf(EINVAL, "--oci, --image and --dockerfile: give one");
	if ((o->dockerfile_file || (o->build_args && o->build_args[0]) || o->max_context || o->build_net) &&
	    !o->dockerfile)
		return errf(EINVAL, "--file, --build-arg, --max-context and --build-net are about --dockerfile: "
				    "give it");
	/* An --image file, or a compiled-in template's image, is grown in the
	 * template VM (step_warm), whose layer the snapshot keeps. */
	if (o->disk_mib && o->no_snapshot && !o->dockerfile && !o->oci)
		return errf(EINVAL, "--disk with --image or a compiled-in image grows the root filesystem in the "
				    "template VM, which --no-snapshot discards: give one of them");
	struct net_policy np;
	if (o->build_net && strcmp(o->build_net, "none") && build_net_policy(o->build_net, &np) < 0)
		return -EINVAL;
	if (o->disk_mib && (o->disk_mib < TEMPLATE_DISK_MIN_MIB || o->disk_mib > TEMPLATE_DISK_MAX_MIB))
		return errf(EINVAL, "--disk %lld: want %d to %d MiB", (long long)o->disk_mib, TEMPLATE_DISK_MIN_MIB,
			    TEMPLATE_DISK_MAX_MIB);
	if (o->start && (!o->start[0] || strlen(o->start) >= TEMPLATE_START_MAX))
		return errf(EINVAL, "--start: a command of 1 to %d bytes", TEMPLATE_START_MAX - 1);
	if ((o->ready_port || o->ready_timeout_s) && !o->start)
		return errf(EINVAL, "--ready-port and --ready-timeout are about the --start command: give it");
	if (o->ready_port < 0 || o->ready_port > 65535)
		return errf(EINVAL, "--ready-port %d: want 1 to 65535", o->ready_port);
	if (o->start && o->no_snapshot)
		return errf(EINVAL, "--start needs the snapshot (what it starts runs in it): not with --no-snapshot");
	if (o->vcpus && (o->vcpus < 1 || o->vcpus > TEMPLATE_VCPUS_MAX))
		return errf(EINVAL, "--vcpus %d: want 1 to %d", o->vcpus, TEMPLATE_VCPUS_MAX);
	if (o->memory_mib && (o->memory_mib < TEMPLATE_MEMORY_MIN_MIB || o->memory_mib > TEMPLATE_MEMORY_MAX_MIB))
		return errf(EINVAL, "--memory %d: want %d to %d MiB", o->memory_mib, TEMPLATE_MEMORY_MIN_MIB,
			    TEMPLATE_MEMORY_MAX_MIB);
	return 0;
}

int template_build(const struct host_config *cfg, const struct build_opts *o)
{
	struct build b = { .cfg = cfg, .o = o, .tty = isatty(2), .t0 = mono_ms(), .net_hold = -1 };
	int rc = check_opts(o);
	if (rc < 0)
		return rc;
	/* An operator's template: no warm-up, 1 vCPU and 256 MiB unless told. */
	struct template_def own = { .name = o->name, .description = "", .vcpus = 1, .memory_mib = 256 };
	b.def = template_def_find(o->name);
	if (!b.def)
		b.def = &own;
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/templates", cfg->data_dir);
	mkdir(cfg->data_dir, 0700);
	mkdir(path, 0700);
	snprintf(b.tdir, sizeof b.tdir, "%s/templates/%s", cfg->data_dir, o->name);
	if (mkdir(b.tdir, 0700) < 0 && errno != EEXIST)
		return errf_sys("mkdir %s", b.tdir);
	char lockp[PATH_MAX + 8];
	snprintf(lockp, sizeof lockp, "%s/.lock", b.tdir);
	int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0) {
		if (lock >= 0)
			close(lock);
		return errf(EBUSY, "another build of template %s is running", o->name);
	}
	rc = open_version(&b, false);
	snprintf(b.t.name, sizeof b.t.name, "%s", o->name);
	pthread_mutex_init(&b.t.zlock, NULL);
	snprintf(b.t.root, sizeof b.t.root, "%s/root.ext4", b.t.dir);
	if (rc == 0)
		rc = version_settings(&b);
	if (rc == -ESTALE) {	/* another shape than the version in progress's */
		fprintf(stderr, "template %s: %s, asked for another: starting over\n", o->name, errmsg());
		rc = open_version(&b, true);
		snprintf(b.t.root, sizeof b.t.root, "%s/root.ext4", b.t.dir);
		if (rc == 0)
			rc = version_settings(&b);
	}
	if (rc == 0)	/* the shape its sandboxes get, in the build's log */
		fprintf(stderr, "template %s: version %d: %d vCPUs and %d MiB\n", o->name, b.t.version, b.t.vcpus,
			b.t.memory_mib);
	if (rc == 0 && !step_done(&b, "snapshot"))
		b.t.net = cfg->net;
	if (rc == 0 && b.t.net)
		rc = build_net(&b);
	for (b.step = 0; rc == 0 && b.step < NSTEPS; b.step++) {
		const char *name = steps[b.step];
		/* boot, warm and snapshot are one unit: the VM does not survive. */
		if (step_done(&b, b.step >= 1 && b.step <= 3 ? "snapshot" : name)) {
			progress(&b, "done before");
			continue;
		}
		if (o->max_seconds && mono_ms() - b.t0 >= o->max_seconds * 1000) {
			rc = errf(ETIME, "the build ran %lld s, as long as its plan allows (build_seconds %lld)",
				  (long long)((mono_ms() - b.t0) / 1000), (long long)o->max_seconds);
			break;
		}
		progress(&b, "starting");
		switch (b.step) {
		case 0: rc = step_image(&b); break;
		case 1: rc = step_boot(&b); break;
		case 2: rc = step_warm(&b); break;
		case 3:
			rc = step_snapshot(&b);
			b.t.built_ms = wall_ms();
			if (rc == 0)
				rc = tmpl_save_manifest(&b.t);
			break;
		case 4: rc = step_verify(&b); break;
		case 5: rc = step_activate(&b); break;
		}
		if (rc < 0)
			break;
		if (b.step != 1 && b.step != 2)
			rc = mark_done(&b, name);
	}
	/* Why it failed, before the cleanup's own failures (a network piece
	 * already gone, which it ignores) overwrite the message. */
	char msg[400] = "";
	if (rc < 0)
		snprintf(msg, sizeof msg, "%s", errmsg());
	kill_vm(&b);
	if (b.vmdir[0])
		rmtree(b.vmdir);
	if (b.net.slot)
		build_net_drop(&b);
	if (b.tty)
		fputc('\n', stderr);
	if (rc == 0)
		fprintf(stderr, "template %s: version %d in service (%s), %.1f s\n", o->name, b.t.version,
			b.t.snapshot ? "snapshot served by a zygote" : "boot-only",
			(double)(mono_ms() - b.t0) / 1000);
	else {
		rc = errf(-rc, "template %s: step %s failed: %s (run the command again to resume; "
			       "the version in service is unchanged)", o->name,
			  steps[b.step < NSTEPS ? b.step : NSTEPS - 1], msg);
	}
	tmpl_clear(&b.t);
	pthread_mutex_destroy(&b.t.zlock);
	close(lock);
	return rc;
}
