/*
 * oci: unpack an OCI image layout, OCI archive or `docker save` archive
 * (oci.h has the rules this keeps).
 *
 * Why libarchive in C and not umoci or skopeo: the unpacking must hold
 * kiln's own rules on a host where it runs as root (no entry through a
 * symlink, a byte budget over the whole image, devices never created),
 * and every one of them has to be checked at the moment a file is
 * created, relative to a directory descriptor (openat2 with
 * RESOLVE_NO_SYMLINKS and O_NOFOLLOW|O_EXCL), which no command-line tool
 * lets us do; umoci has no size bound and `docker save` archives would
 * need skopeo as well. libarchive is used only to read tar streams (plain,
 * gzip, zstd: compiled-in decoders, never an external program); every
 * file system operation is ours.
 */
#include "host/oci.h"
#include "common/err.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_JSON (4 << 20)
#define MAX_LAYERS 256

enum mode { LAYER, ARCHIVE };

struct unpack {
	int rootfd;
	enum mode mode;
	const char *what;		/* "layer 2 (sha256:...)" for messages */
	uint64_t max, *used;
	struct oci_stats *st;
	bool root;			/* running as root: owners are set */
	bool parents;			/* an entry's missing directories are made (any order) */
};

/* ---- safe paths ------------------------------------------------------------------------------------ */

static int open_beneath(int dirfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .resolve = resolve };
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	return fd < 0 ? -errno : fd;
}

/* An entry name: "./a/b/" -> "a/b"; "" is the root itself. Refuses
 * absolute names, ".." and names too deep. */
static int clean_name(const struct unpack *u, const char *name, char *out, size_t cap)
{
	if (name[0] == '/')
		return errf(EPERM, "%s: entry '%.200s': an absolute path", u->what, name);
	size_t n = 0;
	int depth = 0;
	for (const char *s = name; *s;) {
		size_t len = strcspn(s, "/");
		if (len == 2 && s[0] == '.' && s[1] == '.')
			return errf(EPERM, "%s: entry '%.200s': '..' in the path", u->what, name);
		if (len && !(len == 1 && s[0] == '.')) {
			if (n + len + 2 > cap)
				return errf(ENAMETOOLONG, "%s: entry '%.200s': name too long", u->what, name);
			if (++depth > OCI_MAX_DEPTH)
				return errf(ENAMETOOLONG, "%s: entry '%.200s': more than %d levels deep",
					    u->what, name, OCI_MAX_DEPTH);
			if (n)
				out[n++] = '/';
			memcpy(out + n, s, len);
			n += len;
		}
		s += len;
		while (*s == '/')
			s++;
	}
	out[n] = 0;
	return 0;
}

/* The directory an entry goes in, opened without following any symlink
 * (ELOOP: the path goes through one). *base: the last component. */
static int open_parent(const struct unpack *u, char *path, const char *orig, const char **base)
{
	char *slash = strrchr(path, '/');
	if (!slash) {
		*base = path;
		int fd = fcntl(u->rootfd, F_DUPFD_CLOEXEC, 0);
		return fd < 0 ? errf_sys("dup") : fd;
	}
	*slash = 0;
	*base = slash + 1;
	int fd = open_beneath(u->rootfd, path, O_RDONLY | O_DIRECTORY,
			      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
	*slash = '/';
	if (fd == -ELOOP)
		return errf(EPERM, "%s: entry '%.200s' goes through a symlink", u->what, orig);
	if (fd == -ENOTDIR)
		return errf(ENOTDIR, "%s: entry '%.200s': a parent is not a directory", u->what, orig);
	if (fd == -ENOENT)
		return -ENOENT;
	if (fd < 0)
		return errf(-fd, "%s: entry '%.200s': %s", u->what, orig, strerror(-fd));
	return fd;
}

static int remove_at(int dirfd, const char *name, int depth);

/* Remove what dirfd holds (an opaque directory; a tree being removed). */
static int empty_dir(int dirfd, int depth)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc = remove_at(dirfd, e->d_name, depth);
	closedir(d);
	return rc;
}

/* Remove name in dirfd, a tree or not, never following a symlink. */
static int remove_at(int dirfd, const char *name, int depth)
{
	struct stat sb;
	if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(sb.st_mode))
		return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
	if (depth > OCI_MAX_DEPTH + 8)
		return -ELOOP;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = empty_dir(fd, depth + 1);
	close(fd);
	if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		rc = -errno;
	return rc;
}

/* ---- one tar stream ------------------------------------------------------------------------------------ */

static int charge(struct unpack *u, uint64_t n, const char *name)
{
	*u->used += n;
	u->st->bytes = *u->used;
	if (*u->used > u->max)
		return errf(EFBIG, "%s: entry '%.200s': the image unpacks to more than %llu MiB (the limit)",
			    u->what, name, (unsigned long long)(u->max >> 20));
	return 0;
}

static int set_meta(struct unpack *u, int fd, struct archive_entry *e, bool dir)
{
	mode_t mode = archive_entry_perm(e) & 07777;
	if (dir && !u->root)
		mode |= 0700;	/* not root: we must still write into it */
	if (u->root && fchown(fd, archive_entry_uid(e), archive_entry_gid(e)) < 0)
		return -errno;
	if (fchmod(fd, mode) < 0)
		return -errno;
	struct timespec ts[2] = { { archive_entry_mtime(e), 0 }, { archive_entry_mtime(e), 0 } };
	futimens(fd, ts);
	return 0;
}

static int write_file(struct unpack *u, struct archive *a, int pfd, const char *base,
		      struct archive_entry *e, const char *name)
{
	int64_t size = archive_entry_size(e);
	int rc = charge(u, size > 0 ? (uint64_t)size : 0, name);
	if (rc < 0)
		return rc;
	int fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errf_sys("%s: entry '%.200s'", u->what, name);
	const void *buf;
	size_t len;
	la_int64_t off;
	int64_t end = 0;
	int r;
	while ((r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
		if (off + (int64_t)len > size) {
			rc = errf(EFBIG, "%s: entry '%.200s': more data than its size", u->what, name);
			break;
		}
		if (pwrite(fd, buf, len, off) != (ssize_t)len) {
			rc = errf_sys("%s: writing '%.200s'", u->what, name);
			break;
		}
		end = off + (int64_t)len;
	}
	if (rc == 0 && r != ARCHIVE_EOF)
		rc = errf(EIO, "%s: entry '%.200s': truncated or corrupt: %s", u->what, name,
			  archive_error_string(a) ? archive_error_string(a) : "read error");
	if (rc == 0 && end < size && ftruncate(fd, size) < 0)	/* a sparse tail */
		rc = errf_sys("%s: '%.200s'", u->what, name);
	if (rc == 0 && (rc = set_meta(u, fd, e, false)) < 0)
		rc = errf(-rc, "%s: entry '%.200s': setting owner and mode: %s", u->what, name, strerror(-rc));
	close(fd);
	return rc;
}

/* Make room for a new entry: a directory that is there stays (entries
 * merge into it), anything else is replaced. */
static int clear_for(int pfd, const char *base, bool want_dir, bool *exists_dir)
{
	struct stat sb;
	*exists_dir = false;
	if (fstatat(pfd, base, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (want_dir && S_ISDIR(sb.st_mode)) {
		*exists_dir = true;
		return 0;
	}
	return remove_at(pfd, base, 0);
}

/* The directories path's entry goes in, made where missing (a tar that
 * lists a file before its directory): one component at a time from the
 * root, never through a symlink, each charged as an entry. */
static int make_parents(struct unpack *u, const char *path, const char *name)
{
	int fd = fcntl(u->rootfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return errf_sys("dup");
	const char *p = path;
	int rc = 0;
	for (;;) {
		size_t len = strcspn(p, "/");
		if (!p[len])
			break;	/* the last component: the entry itself */
		char comp[NAME_MAX + 1];
		if (len > NAME_MAX) {
			rc = errf(ENAMETOOLONG, "%s: entry '%.200s': a name too long", u->what, name);
			break;
		}
		memcpy(comp, p, len);
		comp[len] = 0;
		int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT) {
			if ((rc = charge(u, OCI_ENTRY_COST, name)) < 0)
				break;
			if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
				rc = errf_sys("%s: entry '%.200s': mkdir", u->what, name);
				break;
			}
			next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0) {
			rc = errno == ELOOP || errno == ENOTDIR
				? errf(EPERM, "%s: entry '%.200s' goes through a symlink or a file", u->what, name)
				: errf_sys("%s: entry '%.200s'", u->what, name);
			break;
		}
		close(fd);
		fd = next;
		p += len + 1;
	}
	close(fd);
	return rc;
}

static int make_entry(struct unpack *u, struct archive *a, struct archive_entry *e, char *path,
		      const char *name)
{
	mode_t type = archive_entry_filetype(e);
	const char *hardlink = archive_entry_hardlink(e);
	if (!path[0])
		return 0;	/* the root itself: ours, as made */
	if (u->mode == ARCHIVE && !hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return errf(EPERM, "%s: entry '%.200s': only files, directories and symlinks may be in an "
				   "image archive", u->what, name);
	if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
		u->st->devices_skipped++;	/* never created on the host */
		return 0;
	}
	const char *base;
	int pfd = open_parent(u, path, name, &base);
	if (pfd == -ENOENT && u->parents) {
		int rc = make_parents(u, path, name);
		if (rc < 0)
			return rc;
		pfd = open_parent(u, path, name, &base);
	}
	if (pfd == -ENOENT)
		return errf(ENOENT, "%s: entry '%.200s': its directory is not in the image", u->what, name);
	if (pfd < 0)
		return pfd;
	int rc = charge(u, OCI_ENTRY_COST, name);
	bool is_dir = false;
	if (rc == 0 && (rc = clear_for(pfd, base, !hardlink && type == AE_IFDIR, &is_dir)) < 0)
		rc = errf(-rc, "%s: entry '%.200s': replacing what is there: %s", u->what, name, strerror(-rc));
	if (rc < 0)
		goto out;
	if (hardlink) {
		char target[PATH_MAX];
		const char *tbase;
		if ((rc = clean_name(u, hardlink, target, sizeof target)) < 0)
			goto out;
		int tfd = target[0] ? open_parent(u, target, hardlink, &tbase) : -EISDIR;
		if (tfd < 0) {
			rc = tfd == -ENOENT || tfd == -EISDIR
				? errf(ENOENT, "%s: hard link '%.200s' to '%.200s': no such file", u->what, name,
				       hardlink) : tfd;
			goto out;
		}
		struct stat sb;
		if (fstatat(tfd, tbase, &sb, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(sb.st_mode))
			rc = errf(ENOENT, "%s: hard link '%.200s' to '%.200s': not a file in the image", u->what,
				  name, hardlink);
		else if (linkat(tfd, tbase, pfd, base, 0) < 0)
			rc = errf_sys("%s: hard link '%.200s'", u->what, name);
		close(tfd);
	} else if (type == AE_IFREG) {
		rc = write_file(u, a, pfd, base, e, name);
	} else if (type == AE_IFDIR) {
		if (!is_dir && mkdirat(pfd, base, 0700) < 0) {
			rc = errf_sys("%s: mkdir '%.200s'", u->what, name);
			goto out;
		}
		int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || (rc = set_meta(u, fd, e, true)) < 0)
			rc = errf(fd < 0 ? errno : -rc, "%s: directory '%.200s': %s", u->what, name,
				  strerror(fd < 0 ? errno : -rc));
		if (fd >= 0)
			close(fd);
	} else if (type == AE_IFLNK) {
		const char *target = archive_entry_symlink(e);
		if (!target || !*target || strlen(target) >= PATH_MAX)
			rc = errf(EINVAL, "%s: symlink '%.200s': a bad target", u->what, name);
		else if (symlinkat(target, pfd, base) < 0)
			rc = errf_sys("%s: symlink '%.200s'", u->what, name);
		else if (u->root && fchownat(pfd, base, archive_entry_uid(e), archive_entry_gid(e),
					     AT_SYMLINK_NOFOLLOW) < 0)
			rc = errf_sys("%s: chown symlink '%.200s'", u->what, name);
	} else if (type == AE_IFIFO) {
		if (mknodat(pfd, base, S_IFIFO | 0600, 0) < 0)
			rc = errf_sys("%s: fifo '%.200s'", u->what, name);
		else {
			int fd = openat(pfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			char proc[64];
			snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
			if (fd < 0 || chmod(proc, archive_entry_perm(e) & 0777) < 0)
				rc = errf_sys("%s: fifo '%.200s'", u->what, name);
			if (fd >= 0)
				close(fd);
		}
	} else {
		rc = errf(EINVAL, "%s: entry '%.200s': unknown type 0%o", u->what, name, (unsigned)type);
	}
out:
	close(pfd);
	return rc;
}

/* A whiteout, in the first pass over a layer: what it hides of the
 * layers below goes before this layer's own entries are made. */
static int apply_whiteout(struct unpack *u, char *path, const char *name)
{
	const char *slash = strrchr(path, '/');
	const char *hidden = (slash ? slash + 1 : path) + 4;
	bool opaque = !strcmp(hidden, ".wh..opq");
	if (!opaque && (!*hidden || !strcmp(hidden, ".") || !strcmp(hidden, "..")))
		return errf(EPERM, "%s: whiteout '%.200s': a bad name", u->what, name);
	const char *base;
	int pfd = open_parent(u, path, name, &base);
	if (pfd == -ENOENT)
		return 0;	/* nothing below to hide */
	if (pfd < 0)
		return pfd;
	int rc = opaque ? empty_dir(pfd, 0) : remove_at(pfd, hidden, 0);
	close(pfd);
	if (rc < 0)
		rc = errf(-rc, "%s: whiteout '%.200s': %s", u->what, name, strerror(-rc));
	return rc;
}

static bool is_whiteout(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return !strncmp(base, ".wh.", 4);
}

/* tar_reader: fd rewound and a reader for it (*out, not yet opened) of
 * tar, plain or compressed with the decoders libarchive has built in
 * (never an external program). */
static int tar_reader(int fd, struct archive **out)
{
	if (lseek(fd, 0, SEEK_SET) < 0)
		return errf_sys("lseek");
	struct archive *a = archive_read_new();
	if (!a)
		return errf(ENOMEM, "out of memory");
	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	*out = a;
	return 0;
}

int oci_tar_probe(int fd)
{
	struct archive *a;
	int rc = tar_reader(fd, &a);
	if (rc < 0)
		return rc;
	struct archive_entry *e;
	int is = archive_read_open_fd(a, fd, 65536) == ARCHIVE_OK && archive_read_next_header(a, &e) == ARCHIVE_OK;
	archive_read_free(a);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return errf_sys("lseek");
	return is;
}

/* One pass over a tar stream read from fd (rewound). whiteouts: apply
 * them only; else make every other entry. */
static int tar_pass(struct unpack *u, int fd, bool whiteouts)
{
	struct archive *a;
	int rc = tar_reader(fd, &a);
	if (rc < 0)
		return rc;
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		rc = errf(EINVAL, "%s: not a readable tar stream (truncated or corrupt): %s", u->what,
			  archive_error_string(a));
		archive_read_free(a);
		return rc;
	}
	struct archive_entry *e;
	char path[PATH_MAX];
	int r;
	uint64_t declared = *u->used;	/* the whiteout pass reads all: bound it too */
	while (rc == 0 && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		if (whiteouts) {
			int64_t size = archive_entry_size(e);
			declared += OCI_ENTRY_COST + (size > 0 ? (uint64_t)size : 0);
			if (declared > u->max) {
				rc = errf(EFBIG, "%s: the image unpacks to more than %llu MiB (the limit)", u->what,
					  (unsigned long long)(u->max >> 20));
				break;
			}
		}
		const char *name = archive_entry_pathname(e);
		if (!name) {
			rc = errf(EINVAL, "%s: an entry without a name", u->what);
			break;
		}
		if ((rc = clean_name(u, name, path, sizeof path)) < 0)
			break;
		bool wh = u->mode == LAYER && is_whiteout(path);
		if (whiteouts) {
			if (wh)
				rc = apply_whiteout(u, path, name);
			continue;
		}
		if (wh)
			continue;
		u->st->entries++;
		rc = make_entry(u, a, e, path, name);
	}
	if (rc == 0 && r != ARCHIVE_EOF)
		rc = errf(EIO, "%s: truncated or corrupt: %s", u->what,
			  archive_error_string(a) ? archive_error_string(a) : "read error");
	archive_read_free(a);
	return rc;
}

/* ---- blobs: digests ------------------------------------------------------------------------------------ */

static bool sha256_hex_ok(const char *hex)
{
	if (strlen(hex) != 64)
		return false;
	for (int i = 0; i < 64; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
			return false;
	return true;
}

/* sha256 of fd from its start; *size: its length. */
static int hash_fd(int fd, char hex[65], uint64_t *size)
{
	struct sha256_ctx c;
	sha256_init(&c);
	uint8_t buf[65536], d[SHA256_DIGEST_SIZE];
	*size = 0;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		sha256_update(&c, (size_t)n, buf);
		*size += (uint64_t)n;
	}
	sha256_digest(&c, sizeof d, d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	return 0;
}

struct image {
	int dirfd;			/* the layout (or extracted archive) */
	const char *ref;		/* for messages */
};

/* Open a file of the image without leaving it (symlinks in an
 * archive, as `docker save` makes, resolve inside it). */
static int image_open(const struct image *im, const char *path)
{
	int fd = open_beneath(im->dirfd, path, O_RDONLY,
			      RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
	if (fd < 0)
		return errf(-fd, "%s: %s: %s", im->ref, path, strerror(-fd));
	struct stat sb;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return errf(EINVAL, "%s: %s is not a regular file", im->ref, path);
	}
	return fd;
}

/* Open the blob a descriptor names and check its digest and size. */
static int blob_open(const struct image *im, json_t *desc, const char *what, int *out)
{
	const char *digest = json_string_value(json_object_get(desc, "digest"));
	json_t *jsize = json_object_get(desc, "size");
	if (!digest || strncmp(digest, "sha256:", 7) || !sha256_hex_ok(digest + 7))
		return errf(EINVAL, "%s: %s: a bad or unsupported digest '%.80s' (sha256 only)", im->ref,
			    what, digest ? digest : "(none)");
	if (!json_is_integer(jsize) || json_integer_value(jsize) < 0)
		return errf(EINVAL, "%s: %s (%.19s): no size", im->ref, what, digest);
	char path[96], hex[65];
	snprintf(path, sizeof path, "blobs/sha256/%s", digest + 7);
	int fd = image_open(im, path);
	if (fd < 0)
		return fd;
	uint64_t size;
	int rc = hash_fd(fd, hex, &size);
	if (rc < 0)
		rc = errf(-rc, "%s: reading %s: %s", im->ref, path, strerror(-rc));
	else if (size != (uint64_t)json_integer_value(jsize))
		rc = errf(EINVAL, "%s: %s (%.19s): %llu bytes, the manifest says %lld (truncated or replaced)",
			  im->ref, what, digest, (unsigned long long)size, (long long)json_integer_value(jsize));
	else if (strcmp(hex, digest + 7))
		rc = errf(EINVAL, "%s: %s (%.19s): digest mismatch (its content hashes to sha256:%.12s)",
			  im->ref, what, digest, hex);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

static int read_json_fd(const struct image *im, int fd, const char *what, json_t **out)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return errf_sys("%s: %s", im->ref, what);
	if (sb.st_size > MAX_JSON)
		return errf(EFBIG, "%s: %s is over %d bytes", im->ref, what, MAX_JSON);
	char *buf = malloc((size_t)sb.st_size + 1);
	if (!buf)
		return errf(ENOMEM, "out of memory");
	ssize_t n = pread(fd, buf, (size_t)sb.st_size, 0);
	if (n != sb.st_size) {
		free(buf);
		return errf(EIO, "%s: reading %s", im->ref, what);
	}
	json_error_t e;
	*out = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &e);
	free(buf);
	if (!*out || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return errf(EINVAL, "%s: %s is not a JSON object%s%s", im->ref, what, e.text[0] ? ": " : "",
			    e.text);
	}
	return 0;
}

static int blob_json(const struct image *im, json_t *desc, const char *what, json_t **out)
{
	int fd, rc = blob_open(im, desc, what, &fd);
	if (rc < 0)
		return rc;
	rc = read_json_fd(im, fd, what, out);
	close(fd);
	return rc;
}

static int file_json(const struct image *im, const char *path, json_t **out)
{
	int fd = image_open(im, path);
	if (fd < 0)
		return fd;
	int rc = read_json_fd(im, fd, path, out);
	close(fd);
	return rc;
}

/* ---- the image config -------------------------------------------------------------------------------- */

static char *dump_or_null(json_t *j)
{
	return j ? json_dumps(j, JSON_COMPACT) : NULL;
}

static int take_config(const struct image *im, json_t *config, struct oci_config *cfg)
{
	json_t *c = json_object_get(config, "config");
	if (!c || json_is_null(c))
		return 0;
	if (!json_is_object(c))
		return errf(EINVAL, "%s: the image config's 'config' is not an object", im->ref);
	json_t *env = json_object_get(c, "Env");
	if (json_is_array(env) && json_array_size(env)) {
		json_t *o = json_object();
		size_t i;
		json_t *v;
		json_array_foreach(env, i, v) {
			const char *s = json_string_value(v), *eq = s ? strchr(s, '=') : NULL;
			if (!eq || eq == s)
				continue;	/* "NAME" alone sets nothing */
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)(eq - s), s);
			json_object_set_new(o, name, json_string(eq + 1));
		}
		cfg->env = dump_or_null(o);
		json_decref(o);
	}
	const char *wd = json_string_value(json_object_get(c, "WorkingDir"));
	const char *user = json_string_value(json_object_get(c, "User"));
	if (wd && *wd)
		cfg->workdir = strdup(wd);
	if (user && *user)
		cfg->user = strdup(user);
	json_t *cmd = json_object_get(c, "Cmd"), *ep = json_object_get(c, "Entrypoint");
	if (json_is_array(cmd))
		cfg->cmd = dump_or_null(cmd);
	if (json_is_array(ep))
		cfg->entrypoint = dump_or_null(ep);
	return 0;
}

/* ---- layouts and archives -------------------------------------------------------------------------------- */

static int unpack_layer(struct unpack *u, int fd)
{
	int rc = tar_pass(u, fd, true);
	return rc ?: tar_pass(u, fd, false);
}

static bool is_index(const char *mt)
{
	return mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
		      !strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json"));
}

/* From an index's manifests, the one tagged tag (or the only one, or
 * linux/amd64 of a multi-platform index). */
static int pick(const struct image *im, json_t *index, const char *tag, bool nested, json_t **out)
{
	json_t *ms = json_object_get(index, "manifests");
	if (!json_is_array(ms) || !json_array_size(ms))
		return errf(EINVAL, "%s: the index lists no manifest", im->ref);
	size_t i;
	json_t *m;
	char tags[300] = "";
	int found = 0;
	json_array_foreach(ms, i, m) {
		const char *name = json_string_value(
			json_object_get(json_object_get(m, "annotations"), "org.opencontainers.image.ref.name"));
		json_t *plat = json_object_get(m, "platform");
		if (nested) {
			const char *os = json_string_value(json_object_get(plat, "os"));
			const char *arch = json_string_value(json_object_get(plat, "architecture"));
			if (json_array_size(ms) == 1 || (os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64"))) {
				*out = m;
				return 0;
			}
			continue;
		}
		if (name) {
			size_t len = strlen(tags);
			snprintf(tags + len, sizeof tags - len, "%s%s", len ? ", " : "", name);
		}
		if (tag && name && (!strcmp(name, tag) || (strrchr(name, ':') && !strcmp(strrchr(name, ':') + 1, tag)))) {
			*out = m;
			found++;
		}
	}
	if (nested)
		return errf(ENOENT, "%s: no linux/amd64 image in the index", im->ref);
	if (!tag && json_array_size(ms) == 1) {
		*out = json_array_get(ms, 0);
		return 0;
	}
	if (!tag)
		return errf(EINVAL, "%s holds %zu images: name one as PATH:TAG (tags: %s)", im->ref,
			    json_array_size(ms), tags[0] ? tags : "none");
	if (found != 1)
		return errf(ENOENT, "%s: no image tagged '%s' (tags: %s)", im->ref, tag, tags[0] ? tags : "none");
	return 0;
}

static int unpack_layout(const struct image *im, const char *tag, struct unpack *u, struct oci_config *cfg)
{
	json_t *index = NULL, *inner = NULL, *manifest = NULL, *config = NULL, *desc;
	int rc = file_json(im, "index.json", &index);
	if (rc == 0)
		rc = pick(im, index, tag, false, &desc);
	if (rc == 0 && is_index(json_string_value(json_object_get(desc, "mediaType")))) {
		rc = blob_json(im, desc, "image index", &inner);
		if (rc == 0)
			rc = pick(im, inner, NULL, true, &desc);
	}
	if (rc == 0)
		rc = blob_json(im, desc, "manifest", &manifest);
	if (rc == 0 && is_index(json_string_value(json_object_get(manifest, "mediaType"))))
		rc = errf(EINVAL, "%s: an index inside an index inside the layout is not supported", im->ref);
	if (rc == 0)
		rc = blob_json(im, json_object_get(manifest, "config"), "config", &config);
	if (rc == 0)
		rc = take_config(im, config, cfg);
	json_t *layers = json_object_get(manifest, "layers");
	if (rc == 0 && (!json_is_array(layers) || json_array_size(layers) > MAX_LAYERS))
		rc = errf(EINVAL, "%s: the manifest's layers are missing or more than %d", im->ref, MAX_LAYERS);
	size_t i;
	json_t *l;
	json_array_foreach(layers, i, l) {
		if (rc < 0)
			break;
		const char *mt = json_string_value(json_object_get(l, "mediaType"));
		const char *digest = json_string_value(json_object_get(l, "digest"));
		char what[120], layer[32];
		snprintf(what, sizeof what, "layer %zu (%.19s)", i + 1, digest ? digest : "?");
		snprintf(layer, sizeof layer, "layer %zu", i + 1);
		if (!mt || !strstr(mt, "tar") || strstr(mt, "encrypted")) {
			rc = errf(EINVAL, "%s: %s: unsupported media type '%.100s'", im->ref, what,
				  mt ? mt : "(none)");
			break;
		}
		int fd;
		if ((rc = blob_open(im, l, layer, &fd)) < 0)
			break;
		u->what = what;
		rc = unpack_layer(u, fd);
		close(fd);
		u->st->layers++;
	}
	json_decref(index);
	json_decref(inner);
	json_decref(manifest);
	json_decref(config);
	return rc;
}

/* `docker save` before OCI layouts: manifest.json names the config
 * (whose file name is its sha256) and the layer tars, whose sha256 are
 * the config's rootfs.diff_ids. */
static int unpack_docker(const struct image *im, const char *tag, struct unpack *u, struct oci_config *cfg)
{
	json_t *list = NULL, *config = NULL;
	json_error_t e;
	int fd = image_open(im, "manifest.json");
	if (fd < 0)
		return fd;
	char buf[65536];
	ssize_t n = pread(fd, buf, sizeof buf, 0);
	close(fd);
	list = n > 0 ? json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &e) : NULL;
	if (!json_is_array(list) || !json_array_size(list)) {
		json_decref(list);
		return errf(EINVAL, "%s: manifest.json is not a list of images", im->ref);
	}
	json_t *m = NULL;
	size_t i;
	json_t *x;
	json_array_foreach(list, i, x) {
		json_t *tags = json_object_get(x, "RepoTags");
		size_t j;
		json_t *t;
		json_array_foreach(tags, j, t) {
			const char *s = json_string_value(t), *colon = s ? strrchr(s, ':') : NULL;
			if (tag && s && (!strcmp(s, tag) || (colon && !strcmp(colon + 1, tag))))
				m = x;
		}
	}
	int rc = 0;
	if (!tag && json_array_size(list) == 1)
		m = json_array_get(list, 0);
	else if (!m && tag)
		rc = errf(ENOENT, "%s: no image tagged '%s'", im->ref, tag);
	else if (!m)
		rc = errf(EINVAL, "%s: several images: name one as PATH:TAG", im->ref);
	const char *cpath = json_string_value(json_object_get(m, "Config"));
	json_t *layers = json_object_get(m, "Layers");
	char hex[65], chex[65] = "";
	if (rc == 0 && (!cpath || !json_is_array(layers) || json_array_size(layers) > MAX_LAYERS))
		rc = errf(EINVAL, "%s: manifest.json: no Config or Layers", im->ref);
	if (rc == 0) {
		/* The config's name is its digest: "<hex>.json" or "blobs/sha256/<hex>". */
		const char *b = strrchr(cpath, '/');
		b = b ? b + 1 : cpath;
		snprintf(chex, sizeof chex, "%.64s", b);
		uint64_t size;
		if (!sha256_hex_ok(chex))
			rc = errf(EINVAL, "%s: config '%.100s' is not named by its digest", im->ref, cpath);
		else if ((fd = image_open(im, cpath)) < 0)
			rc = fd;
		else {
			rc = hash_fd(fd, hex, &size);
			if (rc == 0 && strcmp(hex, chex))
				rc = errf(EINVAL, "%s: config %.100s: digest mismatch (its content hashes to "
						  "sha256:%.12s)", im->ref, cpath, hex);
			if (rc == 0)
				rc = read_json_fd(im, fd, "the config", &config);
			close(fd);
		}
	}
	json_t *diff_ids = json_object_get(json_object_get(config, "rootfs"), "diff_ids");
	if (rc == 0 && json_array_size(diff_ids) != json_array_size(layers))
		rc = errf(EINVAL, "%s: the config lists %zu diff_ids for %zu layers", im->ref,
			  json_array_size(diff_ids), json_array_size(layers));
	if (rc == 0)
		rc = take_config(im, config, cfg);
	json_array_foreach(layers, i, x) {
		if (rc < 0)
			break;
		const char *path = json_string_value(x);
		const char *want = json_string_value(json_array_get(diff_ids, i));
		char what[160];
		snprintf(what, sizeof what, "layer %zu (%.100s)", i + 1, path ? path : "?");
		if (!path || !want || strncmp(want, "sha256:", 7)) {
			rc = errf(EINVAL, "%s: %s: no path or sha256 diff_id", im->ref, what);
			break;
		}
		if ((fd = image_open(im, path)) < 0) {
			rc = fd;
			break;
		}
		uint64_t size;
		rc = hash_fd(fd, hex, &size);
		if (rc == 0 && strcmp(hex, want + 7))
			rc = errf(EINVAL, "%s: %s: digest mismatch (its content hashes to sha256:%.12s, the "
					  "config says %.19s)", im->ref, what, hex, want);
		u->what = what;
		if (rc == 0)
			rc = unpack_layer(u, fd);
		close(fd);
		u->st->layers++;
	}
	json_decref(list);
	json_decref(config);
	return rc;
}

static int extract_archive(const char *path, const char *scratch, uint64_t max, uint64_t *used,
			   struct oci_stats *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf_sys("%s", path);
	struct stat sb;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return errf(EINVAL, "%s: neither an image layout directory nor an archive file", path);
	}
	int root = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		close(fd);
		return errf_sys("%s", scratch);
	}
	char what[PATH_MAX + 16];
	snprintf(what, sizeof what, "archive %s", path);
	struct oci_stats ast = { 0 };
	struct unpack u = { .rootfd = root, .mode = ARCHIVE, .what = what, .max = max, .used = used,
			    .st = &ast, .root = false };
	int rc = tar_pass(&u, fd, false);
	st->bytes = *used;
	close(root);
	close(fd);
	return rc;
}

int oci_extract_tar(int fd, const char *dir, const char *what, uint64_t max_bytes, long *entries)
{
	int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return errf_sys("%s", dir);
	uint64_t used = 0;
	struct oci_stats st = { 0 };
	struct unpack u = { .rootfd = root, .mode = ARCHIVE, .what = what, .max = max_bytes, .used = &used,
			    .st = &st, .root = false, .parents = true };
	int rc = tar_pass(&u, fd, false);
	close(root);
	if (rc == -EFBIG)
		rc = errf(EFBIG, "%s unpacks to more than %llu MiB (the limit)", what,
			  (unsigned long long)(max_bytes >> 20));
	if (entries)
		*entries = st.entries;
	return rc;
}

int oci_unpack(const char *ref, const char *root, const char *scratch, uint64_t max_bytes,
	       struct oci_config *cfg, struct oci_stats *st)
{
	memset(cfg, 0, sizeof *cfg);
	memset(st, 0, sizeof *st);
	/* PATH or PATH:TAG (a tag has no '/'). */
	char path[PATH_MAX];
	const char *tag = NULL;
	if (snprintf(path, sizeof path, "%s", ref) >= (int)sizeof path)
		return errf(ENAMETOOLONG, "image path too long");
	char *colon = strrchr(path, ':');
	struct stat sb;
	if (colon && !strchr(colon, '/') && stat(path, &sb) < 0) {
		*colon = 0;
		tag = colon + 1;
		if (!*tag)
			return errf(EINVAL, "%s: an empty tag", ref);
	}
	if (stat(path, &sb) < 0)
		return errf_sys("image %s", path);
	uint64_t used = 0;
	int rc = 0;
	const char *dir = path;
	if (!S_ISDIR(sb.st_mode)) {
		if ((rc = extract_archive(path, scratch, max_bytes, &used, st)) < 0)
			return rc;
		dir = scratch;
	}
	struct image im = { .ref = ref, .dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
	if (im.dirfd < 0)
		return errf_sys("%s", dir);
	struct unpack u = { .mode = LAYER, .max = max_bytes, .used = &used, .st = st,
			    .root = geteuid() == 0, .rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
	if (u.rootfd < 0) {
		close(im.dirfd);
		return errf_sys("%s", root);
	}
	/* The archive's own bytes do not count against the image's. */
	used = 0;
	if (faccessat(im.dirfd, "index.json", F_OK, 0) == 0)
		rc = unpack_layout(&im, tag, &u, cfg);
	else if (faccessat(im.dirfd, "manifest.json", F_OK, 0) == 0)
		rc = unpack_docker(&im, tag, &u, cfg);
	else
		rc = errf(EINVAL, "%s: not an OCI image layout or docker archive (no index.json or manifest.json)",
			  ref);
	close(u.rootfd);
	close(im.dirfd);
	if (rc < 0)
		oci_config_free(cfg);
	return rc;
}

void oci_config_free(struct oci_config *c)
{
	free(c->env);
	free(c->workdir);
	free(c->user);
	free(c->cmd);
	free(c->entrypoint);
	memset(c, 0, sizeof *c);
}
