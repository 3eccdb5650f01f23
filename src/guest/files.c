/*
 * READ and WRITE: file content streamed in either direction.
 *
 * READ sends a regular file in KILN_CHUNK pieces, only while the client
 * keeps its buffer below the high-water mark, so a file of any size costs
 * the agent at most a few chunks of memory.
 *
 * WRITE replaces a file atomically: the data goes to a temporary file in
 * the same directory, which is renamed over the target once the client
 * says EOF. A reader sees the old content or the new, never a part. If a
 * write fails midway, the agent answers ERROR at once and then discards
 * the client's remaining DATA until its EOF or CANCEL, so a request always
 * gets exactly one terminal frame.
 *
 * Paths are used exactly as given: no shell, no globbing, no expansion.
 * Relative paths are relative to the agent's working directory, "/" in a
 * guest.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "guest/agent.h"

#define READ_BURST 8	/* chunks per loop turn, for fairness */

bool files_path(struct conn *c, const struct kiln_msg *m, unsigned tag,
		char *out, size_t outlen)
{
	const char *what = tag == KT_TARGET ? "TARGET" : tag == KT_CWD ? "CWD" : "PATH";
	int rc = kiln_msg_str(m, tag, out, outlen);
	if (rc == -ENOENT) {
		conn_error(c, EINVAL, "%s: the %s field is missing", kiln_type_name(m->type), what);
		return false;
	}
	if (rc < 0) {
		conn_error(c, ENAMETOOLONG, "%s: %s is longer than %zu bytes",
			   kiln_type_name(m->type), what, outlen - 1);
		return false;
	}
	if (!out[0]) {
		conn_error(c, ENOENT, "%s: %s is empty", kiln_type_name(m->type), what);
		return false;
	}
	return true;
}

/* ---- READ ----------------------------------------------------------- */

struct reader {
	int fd;
	uint64_t left;		/* bytes still wanted */
	uint64_t sent;
	char path[];
};

static void reader_free(struct reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

static bool is_pseudo_fs(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && (sf.f_type == PROC_SUPER_MAGIC || sf.f_type == SYSFS_MAGIC);
}

static void reader_drain(struct conn *c)
{
	struct reader *r = c->st;
	struct kiln_fb fb;

	for (int i = 0; i < READ_BURST && conn_has_room(c); i++) {
		size_t want = r->left < KILN_CHUNK ? (size_t)r->left : KILN_CHUNK;
		ssize_t n = 0;
		if (want) {
			conn_begin(c, &fb, KILN_FDATA);
			uint8_t *dst = kiln_fb_raw_reserve(&fb, want);
			if (!dst) {
				conn_end(c, &fb);	/* closes the connection */
				return;
			}
			n = read(r->fd, dst, want);
			if (n > 0) {
				kiln_fb_raw_commit(&fb, (size_t)n);
				if (conn_end(c, &fb) < 0)
					return;
				r->sent += (uint64_t)n;
				r->left -= (uint64_t)n;
				continue;
			}
			buf_truncate(fb.b, fb.start);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				int e = errno;
				char path[4096];
				snprintf(path, sizeof path, "%s", r->path);
				/* A file of procfs or sysfs that refuses a plain read
				 * (/proc/self/mem: EIO) is the caller's choice of
				 * file, not a failure of the guest's disk. */
				bool pseudo = is_pseudo_fs(r->fd);
				reader_free(r);
				if (pseudo)
					conn_error(c, EINVAL, "read %s: this file of the kernel cannot be read as a whole (%s)",
						   path, strerror(e));
				else
					conn_error(c, e, "read %s: %s", path, strerror(e));
				return;
			}
		}
		/* End of file, or as much as asked for. */
		conn_begin(c, &fb, KILN_END);
		kiln_fb_u64(&fb, KT_BYTES, r->sent);
		reader_free(r);
		conn_end_op(c, &fb);
		return;
	}
	conn_want_drain(c);
}

static int reader_frame(struct conn *c, uint8_t type, const uint8_t *p, uint32_t len)
{
	struct reader *r = c->st;
	(void)p;
	(void)len;
	if (type != KILN_CANCEL)
		return -EPROTO;
	char path[4096];
	snprintf(path, sizeof path, "%s", r->path);
	reader_free(r);
	conn_error(c, ECANCELED, "read %s: cancelled", path);
	return 0;
}

static void reader_abort(struct conn *c)
{
	reader_free(c->st);
}

static const struct conn_op read_op = {
	.name = "READ",
	.frame = reader_frame,
	.drain = reader_drain,
	.abort = reader_abort,
};

void files_read(struct conn *c, const struct kiln_msg *m)
{
	char path[4096];
	struct stat st;
	if (!files_path(c, m, KT_PATH, path, sizeof path))
		return;

	/* O_NONBLOCK: opening a FIFO must not hang the agent. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		conn_error(c, errno, "read %s: %s", path, strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		conn_error(c, e, "read %s: %s", path, strerror(e));
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		if (S_ISDIR(st.st_mode))
			conn_error(c, EISDIR, "read %s: %s", path, strerror(EISDIR));
		else
			conn_error(c, EINVAL, "read %s: not a regular file", path);
		return;
	}
	uint64_t off = kiln_msg_u64(m, KT_OFFSET, 0);
	if (off && lseek(fd, (off_t)off, SEEK_SET) < 0) {
		int e = errno;
		close(fd);
		conn_error(c, e, "read %s: seek to %llu: %s", path,
			   (unsigned long long)off, strerror(e));
		return;
	}
	struct reader *r = malloc(sizeof *r + strlen(path) + 1);
	if (!r) {
		close(fd);
		conn_error(c, ENOMEM, "read %s: out of memory", path);
		return;
	}
	r->fd = fd;
	r->left = kiln_msg_u64(m, KT_LENGTH, UINT64_MAX);
	r->sent = 0;
	strcpy(r->path, path);

	struct kiln_fb fb;
	conn_begin(c, &fb, KILN_ACCEPT);
	kiln_fb_u64(&fb, KT_SIZE, (uint64_t)st.st_size);
	kiln_fb_u32(&fb, KT_MODE, st.st_mode);
	conn_op_start(c, &read_op, r);
	if (conn_end(c, &fb) == 0)
		reader_drain(c);
}

/* ---- WRITE ---------------------------------------------------------- */

struct writer {
	int fd;
	bool failed;		/* ERROR sent; discarding until EOF */
	uint32_t flags;
	uint64_t bytes;
	char *tmp;
	char path[];
};

static void writer_free(struct writer *w, bool unlink_tmp)
{
	if (w->fd >= 0)
		close(w->fd);
	if (unlink_tmp && w->tmp)
		unlink(w->tmp);
	free(w->tmp);
	free(w);
}

/* Report a failure now, keep the op to swallow the rest of the data. */
static void writer_fail(struct conn *c, struct writer *w, int err, const char *what)
{
	struct kiln_fb fb;
	char msg[4200];

	snprintf(msg, sizeof msg, "write %s: %s%s%s", w->path, what, *what ? ": " : "", strerror(err));
	close(w->fd);
	w->fd = -1;
	unlink(w->tmp);
	w->failed = true;
	conn_begin(c, &fb, KILN_ERROR);
	kiln_fb_u32(&fb, KT_ERRNO, (uint32_t)err);
	kiln_fb_str(&fb, KT_MESSAGE, msg);
	conn_end(c, &fb);
}

static void writer_finish(struct conn *c, struct writer *w)
{
	const char *what = "";
	int rc = 0;

	if ((w->flags & KILN_WRITE_FSYNC) && fsync(w->fd) < 0) {
		what = "fsync";
		rc = errno;
	}
	if (!rc && close(w->fd) < 0) {
		what = "close";
		rc = errno;
	}
	w->fd = -1;
	if (!rc) {
		what = "rename";
		if (w->flags & KILN_WRITE_NOREPLACE)
			rc = renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->path, RENAME_NOREPLACE) < 0 ? errno : 0;
		else
			rc = rename(w->tmp, w->path) < 0 ? errno : 0;
	}
	if (rc) {
		char path[4096];
		snprintf(path, sizeof path, "%s", w->path);
		writer_free(w, true);
		conn_error(c, rc, "write %s: %s: %s", path, what, strerror(rc));
		return;
	}
	struct kiln_fb fb;
	conn_begin(c, &fb, KILN_OK);
	kiln_fb_u64(&fb, KT_BYTES, w->bytes);
	writer_free(w, false);
	conn_end_op(c, &fb);
}

static int writer_frame(struct conn *c, uint8_t type, const uint8_t *p, uint32_t len)
{
	struct writer *w = c->st;

	switch (type) {
	case KILN_DATA:
		while (len && !w->failed) {
			ssize_t n = write(w->fd, p, len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				writer_fail(c, w, n < 0 ? errno : EIO, "");
				break;
			}
			p += n;
			len -= (uint32_t)n;
			w->bytes += (uint64_t)n;
		}
		return 0;
	case KILN_EOF:
		if (w->failed) {
			writer_free(w, false);
			conn_op_end(c);	/* the ERROR was the reply */
		} else {
			writer_finish(c, w);
		}
		return 0;
	case KILN_CANCEL:
		if (w->failed) {
			writer_free(w, false);
			conn_op_end(c);
		} else {
			char path[4096];
			snprintf(path, sizeof path, "%s", w->path);
			writer_free(w, true);
			conn_error(c, ECANCELED, "write %s: cancelled", path);
		}
		return 0;
	}
	return -EPROTO;
}

static void writer_abort(struct conn *c)
{
	writer_free(c->st, true);
}

static const struct conn_op write_op = {
	.name = "WRITE",
	.frame = writer_frame,
	.abort = writer_abort,
};

/* mkdir -p of the directory part of path. 0 or -errno, with the
 * directory that failed in err. */
static int make_parents(const char *path, char *err, size_t errlen)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = 0;
	for (char *s = dir + 1; ; s++) {
		if (*s != '/' && *s)
			continue;
		char saved = *s;
		*s = 0;
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			int e = errno;
			snprintf(err, errlen, "mkdir %s", dir);
			return -e;
		}
		*s = saved;
		if (!saved)
			return 0;
	}
}

void files_write(struct conn *c, const struct kiln_msg *m)
{
	char path[4096], err[4200] = "";
	uint32_t flags = kiln_msg_u32(m, KT_FLAGS, 0);
	mode_t mode = kiln_msg_u32(m, KT_MODE, 0644) & 07777;

	if (!files_path(c, m, KT_PATH, path, sizeof path))
		return;
	size_t plen = strlen(path);
	if (path[plen - 1] == '/') {
		conn_error(c, EISDIR, "write %s: %s", path, strerror(EISDIR));
		return;
	}
	if (flags & KILN_WRITE_MKDIRS) {
		int rc = make_parents(path, err, sizeof err);
		if (rc < 0) {
			conn_error(c, -rc, "write %s: %s: %s", path, err, strerror(-rc));
			return;
		}
	}
	struct stat st;
	if ((flags & KILN_WRITE_NOREPLACE) && lstat(path, &st) == 0) {
		conn_error(c, EEXIST, "write %s: %s", path, strerror(EEXIST));
		return;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		conn_error(c, EISDIR, "write %s: %s", path, strerror(EISDIR));
		return;
	}
	/* Refused as a read is: the rename below would replace a device node,
	 * FIFO or socket (/dev/null) with a plain file. */
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		conn_error(c, EINVAL, "write %s: not a regular file", path);
		return;
	}

	/* The temporary file sits next to the target, so the rename stays
	 * within one filesystem and is atomic. */
	struct writer *w = calloc(1, sizeof *w + plen + 1);
	if (!w) {
		conn_error(c, ENOMEM, "write %s: out of memory", path);
		return;
	}
	memcpy(w->path, path, plen + 1);
	w->flags = flags;
	w->fd = -1;
	const char *base = strrchr(path, '/');
	int dirlen = base ? (int)(base - path + 1) : 0;
	base = base ? base + 1 : path;
	uint32_t rnd = 0;
	if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd)
		rnd = (uint32_t)getpid() ^ (uint32_t)c->fd;
	if (asprintf(&w->tmp, "%.*s.%.200s.kiln-%08x", dirlen, path, base, rnd) < 0) {
		w->tmp = NULL;
		writer_free(w, false);
		conn_error(c, ENOMEM, "write %s: out of memory", path);
		return;
	}
	w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (w->fd < 0) {
		int e = errno;
		free(w->tmp);
		w->tmp = NULL;
		writer_free(w, false);
		conn_error(c, e, "write %s: %s", path, strerror(e));
		return;
	}
	/* fchmod, not the open mode: the umask must not change what the
	 * client asked for. */
	int e = 0;
	if (fchmod(w->fd, mode) < 0)
		e = errno;
	if (!e && (kiln_msg_has(m, KT_UID) || kiln_msg_has(m, KT_GID)) &&
	    fchown(w->fd, kiln_msg_has(m, KT_UID) ? kiln_msg_u32(m, KT_UID, 0) : (uid_t)-1,
		   kiln_msg_has(m, KT_GID) ? kiln_msg_u32(m, KT_GID, 0) : (gid_t)-1) < 0)
		e = errno;
	if (e) {
		writer_free(w, true);
		conn_error(c, e, "write %s: set mode/owner: %s", path, strerror(e));
		return;
	}

	struct kiln_fb fb;
	conn_begin(c, &fb, KILN_ACCEPT);
	conn_op_start(c, &write_op, w);
	conn_end(c, &fb);
}
