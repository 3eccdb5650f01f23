/*
 * The tar built-ins (builtin.h): a directory tree to a ustar stream and a
 * tar stream into a directory. POSIX ustar with pax extended records for
 * what ustar cannot hold (names over its 255 bytes, sizes of 8 GiB on),
 * and on reading the GNU long-name records as well, which is what GNU
 * tar, bsdtar and Python's tarfile write.
 *
 * Extraction takes the stream as hostile. Every entry is created through
 * directory descriptors opened one name at a time from DIR with
 * O_NOFOLLOW, so no name can leave DIR: not with "..", not as an absolute
 * path, and not through a symlink an earlier entry made (the classic
 * "symlink, then write through it"). Device nodes and unknown types are
 * refused. Every length read from the stream is bounded. The first bad
 * entry stops the extraction with EINVAL and its name; what came before
 * it stays.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "guest/builtin.h"

#define BLOCK		512
#define TAR_MAX_DEPTH	256
#define TAR_MAX_ENTRIES	1000000
#define TAR_MAX_PAX	(1u << 20)	/* one pax or GNU long-name record */
#define TAR_NAME_MAX	4096

struct ustar {
	char name[100], mode[8], uid[8], gid[8], size[12], mtime[12], chksum[8];
	char typeflag, linkname[100], magic[6], version[2], uname[32], gname[32];
	char devmajor[8], devminor[8], prefix[155], pad[12];
};
_Static_assert(sizeof(struct ustar) == BLOCK, "ustar header");

/* ---- output --------------------------------------------------------- */

struct out {
	char buf[65536];
	size_t used;
	int err;
};

static void out_flush(struct out *o)
{
	size_t off = 0;
	while (off < o->used && !o->err) {
		ssize_t n = write(1, o->buf + off, o->used - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			o->err = n < 0 ? errno : EIO;
		else
			off += (size_t)n;
	}
	o->used = 0;
}

static void out_put(struct out *o, const void *p, size_t n)
{
	while (n && !o->err) {
		size_t k = sizeof o->buf - o->used < n ? sizeof o->buf - o->used : n;
		memcpy(o->buf + o->used, p, k);
		o->used += k, p = (const char *)p + k, n -= k;
		if (o->used == sizeof o->buf)
			out_flush(o);
	}
}

static void out_zero(struct out *o, size_t n)
{
	static const char zero[BLOCK];
	while (n) {
		size_t k = n < BLOCK ? n : BLOCK;
		out_put(o, zero, k);
		n -= k;
	}
}

/* An octal field of len bytes (len-1 digits and a NUL); false if v does
 * not fit. */
static bool octal(char *f, size_t len, uint64_t v)
{
	if (len < 12 && v >> (3 * (len - 1)))
		return false;
	if (len >= 12 && v >> 33)
		return false;
	snprintf(f, len, "%0*llo", (int)len - 1, (unsigned long long)v);
	return true;
}

static void header_sum(struct ustar *h)
{
	unsigned sum = 0;
	memset(h->chksum, ' ', sizeof h->chksum);
	for (size_t i = 0; i < BLOCK; i++)
		sum += ((unsigned char *)h)[i];
	snprintf(h->chksum, sizeof h->chksum, "%06o", sum);
	h->chksum[7] = ' ';
}

/* One pax record, "LEN key=value\n", LEN counting itself. */
static int pax_record(char *dst, size_t cap, const char *key, const char *val)
{
	size_t body = strlen(key) + strlen(val) + 3;	/* ' ', '=', '\n' */
	size_t len = body + 1;
	while (len != body + (size_t)snprintf(NULL, 0, "%zu", len))
		len = body + (size_t)snprintf(NULL, 0, "%zu", len);
	int n = snprintf(dst, cap, "%zu %s=%s\n", len, key, val);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

static void put_header(struct out *o, const char *name, const struct stat *st, char type,
		       const char *link, uint64_t size)
{
	struct ustar h;
	char pax[2 * TAR_NAME_MAX + 128];
	size_t paxlen = 0, nl = strlen(name);
	bool name_ok = false;

	memset(&h, 0, sizeof h);
	if (nl <= sizeof h.name) {
		memcpy(h.name, name, nl);
		name_ok = true;
	} else {
		/* Split into prefix/name at a slash, as ustar allows. */
		for (size_t i = nl - 1 < sizeof h.prefix ? nl - 1 : sizeof h.prefix; i > 0; i--) {
			if (name[i] == '/' && nl - i - 1 <= sizeof h.name && nl - i - 1 > 0) {
				memcpy(h.prefix, name, i);
				memcpy(h.name, name + i + 1, nl - i - 1);
				name_ok = true;
				break;
			}
		}
	}
	if (!name_ok) {
		int n = pax_record(pax + paxlen, sizeof pax - paxlen, "path", name);
		paxlen += n > 0 ? (size_t)n : 0;
		memset(h.prefix, 0, sizeof h.prefix);
		snprintf(h.name, sizeof h.name, "%.99s", name);
	}
	if (link && strlen(link) > sizeof h.linkname) {
		int n = pax_record(pax + paxlen, sizeof pax - paxlen, "linkpath", link);
		paxlen += n > 0 ? (size_t)n : 0;
	} else if (link) {
		memcpy(h.linkname, link, strlen(link));
	}
	if (!octal(h.size, sizeof h.size, size)) {
		char v[32];
		snprintf(v, sizeof v, "%llu", (unsigned long long)size);
		int n = pax_record(pax + paxlen, sizeof pax - paxlen, "size", v);
		paxlen += n > 0 ? (size_t)n : 0;
		octal(h.size, sizeof h.size, 0);
	}
	if (paxlen) {
		struct ustar x;
		memset(&x, 0, sizeof x);
		snprintf(x.name, sizeof x.name, "PaxHeaders/%.80s", h.name);
		octal(x.mode, sizeof x.mode, 0644);
		octal(x.uid, sizeof x.uid, 0);
		octal(x.gid, sizeof x.gid, 0);
		octal(x.size, sizeof x.size, paxlen);
		octal(x.mtime, sizeof x.mtime, 0);
		x.typeflag = 'x';
		memcpy(x.magic, "ustar", 6);
		memcpy(x.version, "00", 2);
		header_sum(&x);
		out_put(o, &x, BLOCK);
		out_put(o, pax, paxlen);
		out_zero(o, (BLOCK - paxlen % BLOCK) % BLOCK);
	}
	octal(h.mode, sizeof h.mode, st->st_mode & 07777);
	if (!octal(h.uid, sizeof h.uid, st->st_uid))
		octal(h.uid, sizeof h.uid, 0);
	if (!octal(h.gid, sizeof h.gid, st->st_gid))
		octal(h.gid, sizeof h.gid, 0);
	octal(h.mtime, sizeof h.mtime, st->st_mtim.tv_sec > 0 ? (uint64_t)st->st_mtim.tv_sec : 0);
	h.typeflag = type;
	memcpy(h.magic, "ustar", 6);
	memcpy(h.version, "00", 2);
	header_sum(&h);
	out_put(o, &h, BLOCK);
}

struct walker {
	struct out o;
	dev_t dev;
	char rel[TAR_NAME_MAX + 256];
};

static int file_body(struct walker *w, int fd, uint64_t size)
{
	char buf[65536];
	uint64_t left = size;
	while (left && !w->o.err) {
		ssize_t n = read(fd, buf, left < sizeof buf ? (size_t)left : sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return builtin_fail(errno, "tar %s: read: %s", w->rel, strerror(errno));
		if (n == 0) {
			out_zero(&w->o, (size_t)left);	/* it shrank: keep the size promised */
			left = 0;
			break;
		}
		out_put(&w->o, buf, (size_t)n);
		left -= (uint64_t)n;
	}
	out_zero(&w->o, (BLOCK - size % BLOCK) % BLOCK);
	return 0;
}

static int walk(struct walker *w, int dfd, int depth)
{
	if (depth > TAR_MAX_DEPTH)
		return builtin_fail(ELOOP, "tar %s: nested more than %d directories deep", w->rel,
				    TAR_MAX_DEPTH);
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = errno;
		close(dfd);
		return builtin_fail(e, "tar %s: %s", w->rel, strerror(e));
	}
	size_t base = strlen(w->rel);
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && !w->o.err && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int n = snprintf(w->rel + base, sizeof w->rel - base, "%s", de->d_name);
		if (n < 0 || (size_t)n >= sizeof w->rel - base - 2 || base + (size_t)n >= TAR_NAME_MAX) {
			w->rel[base] = 0;
			rc = builtin_fail(ENAMETOOLONG, "tar %s: a name below it is too long", w->rel);
			break;
		}
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* removed while we looked */
		if (S_ISDIR(st.st_mode)) {
			strcat(w->rel, "/");
			put_header(&w->o, w->rel, &st, '5', NULL, 0);
			if (st.st_dev != w->dev)
				continue;	/* a mount point: the directory only */
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				rc = builtin_fail(errno, "tar %s: %s", w->rel, strerror(errno));
			else
				rc = walk(w, sub, depth + 1);
		} else if (S_ISLNK(st.st_mode)) {
			char target[TAR_NAME_MAX];
			ssize_t k = readlinkat(dirfd(d), de->d_name, target, sizeof target - 1);
			if (k < 0)
				continue;
			target[k] = 0;
			put_header(&w->o, w->rel, &st, '2', target, 0);
		} else if (S_ISFIFO(st.st_mode)) {
			put_header(&w->o, w->rel, &st, '6', NULL, 0);
		} else if (S_ISREG(st.st_mode)) {
			int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
			if (fd < 0) {
				rc = builtin_fail(errno, "tar %s: %s", w->rel, strerror(errno));
				break;
			}
			put_header(&w->o, w->rel, &st, '0', NULL, (uint64_t)st.st_size);
			rc = file_body(w, fd, (uint64_t)st.st_size);
			close(fd);
		}
		/* device nodes and sockets: left out */
		w->rel[base] = 0;
	}
	if (rc == 0 && errno && !w->o.err)
		rc = builtin_fail(errno, "tar %s: %s", w->rel, strerror(errno));
	closedir(d);
	return rc;
}

int builtin_tar_create(int argc, char *const *argv)
{
	if (argc != 2)
		return builtin_fail(EINVAL, "usage: tar-create DIR");
	struct walker *w = calloc(1, sizeof *w);
	if (!w)
		return builtin_fail(ENOMEM, "tar: out of memory");
	int fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return builtin_fail(errno, "tar %s: %s", argv[1], strerror(errno));
	w->dev = st.st_dev;
	int rc = walk(w, fd, 0);
	if (rc == 0) {
		out_zero(&w->o, 2 * BLOCK);
		out_flush(&w->o);
	}
	if (rc == 0 && w->o.err)
		rc = builtin_fail(w->o.err, "tar %s: write: %s", argv[1], strerror(w->o.err));
	free(w);
	return rc;
}

/* ---- extraction ----------------------------------------------------- */

struct in {
	uint64_t off;		/* bytes read so far, for messages */
};

/* Read exactly n bytes; 0, or -1 at the end of the input (EOF), -errno. */
static int in_read(struct in *in, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(0, (char *)p + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return got ? -EINVAL : -1;
		got += (size_t)k;
	}
	in->off += n;
	return 0;
}

static int in_skip(struct in *in, uint64_t n)
{
	char buf[65536];
	while (n) {
		size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
		int rc = in_read(in, buf, k);
		if (rc)
			return rc < 0 && rc != -1 ? rc : -EINVAL;
		n -= k;
	}
	return 0;
}

/* A numeric field: octal text, or GNU base-256 (high bit set). */
static bool parse_num(const char *f, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	if ((unsigned char)f[0] & 0x80) {
		if (f[0] != (char)0x80)
			return false;	/* negative or too large */
		for (size_t i = 1; i < len; i++) {
			if (v >> 55)
				return false;
			v = v << 8 | (unsigned char)f[i];
		}
		*out = v;
		return true;
	}
	size_t i = 0;
	while (i < len && f[i] == ' ')
		i++;
	bool any = false;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return false;
		v = v * 8 + (uint64_t)(f[i] - '0');
		any = true;
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != 0)
			return false;
	*out = v;
	return any || f[0] == 0 || f[0] == ' ';
}

static bool checksum_ok(const struct ustar *h)
{
	uint64_t want;
	if (!parse_num(h->chksum, sizeof h->chksum, &want))
		return false;
	unsigned sum = 0;
	const unsigned char *p = (const unsigned char *)h;
	for (size_t i = 0; i < BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : p[i];
	return sum == want;
}

/* Directories whose mode and time are set at the end, so that a
 * read-only directory can still be filled first. */
struct dirfix {
	char *name;
	mode_t mode;
	struct timespec mtime;
};

struct extract {
	struct in in;
	int root;			/* DIR */
	const char *dir;
	uint64_t entries;
	struct dirfix *fix;
	size_t nfix, capfix;
	char name[TAR_NAME_MAX + 1];	/* the entry now extracted, cleaned */
	char link[TAR_NAME_MAX + 1];
	char long_name[TAR_NAME_MAX + 1], long_link[TAR_NAME_MAX + 1];
	bool have_long_name, have_long_link;
	uint64_t pax_size;
	bool have_pax_size;
};

#define BAD(x, ...) builtin_fail(EINVAL, __VA_ARGS__)

/* Check and normalise an entry name in place: no absolute names, no
 * "..", no empty result (except the top directory itself, ""). */
static int clean_name(struct extract *x, char *name, const char *what)
{
	if (name[0] == '/')
		return builtin_fail(EINVAL, "tar entry '%s': an absolute %s; names must be relative to "
				    "the directory", name, what);
	char out[TAR_NAME_MAX + 1];
	size_t ol = 0;
	const char *p = name;
	while (*p) {
		size_t cl = strcspn(p, "/");
		if (cl == 2 && p[0] == '.' && p[1] == '.')
			return builtin_fail(EINVAL, "tar entry '%s': '..' in its %s", name, what);
		if (cl && !(cl == 1 && p[0] == '.')) {
			if (ol)
				out[ol++] = '/';
			memcpy(out + ol, p, cl);
			ol += cl;
		}
		p += cl;
		while (*p == '/')
			p++;
	}
	out[ol] = 0;
	(void)x;
	memcpy(name, out, ol + 1);
	return 0;
}

/* Open the directory that holds `name` (below DIR), making missing
 * directories on the way and refusing any symlink on it. *base gets the
 * last name. Returns the fd or -1 after builtin_fail (its code in *err). */
static int open_parent(struct extract *x, const char *name, const char **base, int *err)
{
	char path[TAR_NAME_MAX + 1];
	snprintf(path, sizeof path, "%s", name);
	char *slash = strrchr(path, '/');
	*base = slash ? name + (slash - path) + 1 : name;
	int fd = dup(x->root);
	if (fd < 0) {
		*err = builtin_fail(errno, "tar: %s", strerror(errno));
		return -1;
	}
	if (!slash)
		return fd;
	*slash = 0;
	for (char *comp = path, *next; comp; comp = next) {
		next = strchr(comp, '/');
		if (next)
			*next++ = 0;
		if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
			*err = builtin_fail(errno, "tar entry '%s': mkdir %s: %s", name, comp, strerror(errno));
			close(fd);
			return -1;
		}
		int sub = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			int e = errno;
			struct stat st;
			/* O_NOFOLLOW with O_DIRECTORY says ENOTDIR for a symlink. */
			bool link = e == ELOOP || (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
						   S_ISLNK(st.st_mode));
			if (e == ELOOP || e == ENOTDIR)
				*err = builtin_fail(EINVAL, "tar entry '%s': its path goes through '%s', "
						    "which is %s", name, comp,
						    link ? "a symlink (refused)" : "not a directory");
			else
				*err = builtin_fail(e, "tar entry '%s': %s: %s", name, comp, strerror(e));
			close(fd);
			return -1;
		}
		close(fd);
		fd = sub;
	}
	return fd;
}

/* Make room for a new entry at base: a file, symlink or FIFO there goes;
 * a directory stays and is an error. */
static int clear_slot(int pfd, const char *base, const char *name)
{
	struct stat st;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISDIR(st.st_mode))
		return builtin_fail(EISDIR, "tar entry '%s': a directory is in its place", name);
	if (unlinkat(pfd, base, 0) < 0)
		return builtin_fail(errno, "tar entry '%s': replace: %s", name, strerror(errno));
	return 0;
}

static int write_body(struct extract *x, int fd, uint64_t size)
{
	char buf[65536];
	while (size) {
		size_t k = size < sizeof buf ? (size_t)size : sizeof buf;
		int rc = in_read(&x->in, buf, k);
		if (rc)
			return rc == -1 || rc == -EINVAL
				? BAD(0, "tar entry '%s': the input ends inside its data", x->name)
				: builtin_fail(-rc, "tar: read: %s", strerror(-rc));
		for (size_t off = 0; off < k;) {
			ssize_t n = write(fd, buf + off, k - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return builtin_fail(n < 0 ? errno : EIO, "tar entry '%s': write: %s", x->name,
						    strerror(n < 0 ? errno : EIO));
			off += (size_t)n;
		}
		size -= k;
	}
	return 0;
}

/* A pax extended header's records: path, linkpath and size matter. */
static int parse_pax(struct extract *x, char *p, size_t n, const char *hname)
{
	while (n) {
		char *end;
		unsigned long len = strtoul(p, &end, 10);
		if (end == p || *end != ' ' || len > n || len < 5 || p[len - 1] != '\n')
			return BAD(0, "tar entry '%.100s': a malformed pax record", hname);
		char *kv = end + 1, *eq = memchr(kv, '=', (size_t)(p + len - 1 - kv));
		if (!eq)
			return BAD(0, "tar entry '%.100s': a malformed pax record", hname);
		*eq = 0;
		p[len - 1] = 0;
		const char *val = eq + 1;
		if (!strcmp(kv, "path") || !strcmp(kv, "linkpath")) {
			if (strlen(val) > TAR_NAME_MAX)
				return BAD(0, "tar entry '%.100s': a %s of more than %d bytes", hname, kv,
					   TAR_NAME_MAX);
			bool path = kv[0] == 'p';
			strcpy(path ? x->long_name : x->long_link, val);
			*(path ? &x->have_long_name : &x->have_long_link) = true;
		} else if (!strcmp(kv, "size")) {
			char *e2;
			errno = 0;
			unsigned long long v = strtoull(val, &e2, 10);
			if (errno || e2 == val || *e2)
				return BAD(0, "tar entry '%.100s': a bad pax size", hname);
			x->pax_size = v;
			x->have_pax_size = true;
		}
		p += len;
		n -= len;
	}
	return 0;
}

/* Read a record's data (a pax header, a GNU long name) into a buffer. */
static int read_record(struct extract *x, uint64_t size, char **out, const char *hname)
{
	if (size > TAR_MAX_PAX)
		return BAD(0, "tar entry '%.100s': an extended header of %llu bytes (the limit is %u)",
			   hname, (unsigned long long)size, TAR_MAX_PAX);
	char *b = malloc((size_t)size + 1);
	if (!b)
		return builtin_fail(ENOMEM, "tar: out of memory");
	int rc = in_read(&x->in, b, (size_t)size);
	if (rc == 0)
		rc = in_skip(&x->in, (BLOCK - size % BLOCK) % BLOCK);
	if (rc) {
		free(b);
		return BAD(0, "tar entry '%.100s': the input ends inside it", hname);
	}
	b[size] = 0;
	*out = b;
	return 0;
}

static int add_fix(struct extract *x, const struct ustar *h, uint64_t mode)
{
	if (x->nfix == x->capfix) {
		size_t cap = x->capfix ? x->capfix * 2 : 64;
		struct dirfix *f = realloc(x->fix, cap * sizeof *f);
		if (!f)
			return builtin_fail(ENOMEM, "tar: out of memory");
		x->fix = f, x->capfix = cap;
	}
	uint64_t mt = 0;
	parse_num(h->mtime, sizeof h->mtime, &mt);
	struct dirfix *f = &x->fix[x->nfix];
	if (!(f->name = strdup(x->name)))
		return builtin_fail(ENOMEM, "tar: out of memory");
	f->mode = (mode_t)(mode & 07777);
	f->mtime.tv_sec = (time_t)mt;
	f->mtime.tv_nsec = 0;
	x->nfix++;
	return 0;
}

static int extract_entry(struct extract *x, const struct ustar *h, char type, uint64_t size)
{
	uint64_t mode = 0644, mt = 0;
	parse_num(h->mode, sizeof h->mode, &mode);
	parse_num(h->mtime, sizeof h->mtime, &mt);
	int rc = clean_name(x, x->name, "name");
	if (rc)
		return rc;
	if (!x->name[0]) {
		if (type == '5')
			return 0;	/* "./": DIR itself */
		return BAD(0, "tar entry '%.100s': an empty name", h->name);
	}
	if (++x->entries > TAR_MAX_ENTRIES)
		return BAD(0, "tar: more than %d entries", TAR_MAX_ENTRIES);
	const char *base;
	int err = 0;
	int pfd = open_parent(x, x->name, &base, &err);
	if (pfd < 0)
		return err;
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { (time_t)mt, 0 } };
	switch (type) {
	case '0': case '\0': case '7': {
		rc = clear_slot(pfd, base, x->name);
		if (rc)
			break;
		int fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = builtin_fail(errno, "tar entry '%s': create: %s", x->name, strerror(errno));
			break;
		}
		rc = write_body(x, fd, size);
		if (rc == 0 && in_skip(&x->in, (BLOCK - size % BLOCK) % BLOCK))
			rc = BAD(0, "tar entry '%s': the input ends inside its padding", x->name);
		if (rc == 0) {
			fchmod(fd, (mode_t)(mode & 07777));
			futimens(fd, ts);
		}
		if (close(fd) < 0 && rc == 0)
			rc = builtin_fail(errno, "tar entry '%s': %s", x->name, strerror(errno));
		size = 0;
		break;
	}
	case '5': {
		struct stat st;
		if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
			rc = clear_slot(pfd, base, x->name);
		if (rc == 0 && mkdirat(pfd, base, 0700) < 0 && errno != EEXIST)
			rc = builtin_fail(errno, "tar entry '%s': mkdir: %s", x->name, strerror(errno));
		if (rc == 0)
			rc = add_fix(x, h, mode);
		break;
	}
	case '2':
		rc = clear_slot(pfd, base, x->name);
		if (rc == 0 && symlinkat(x->link, pfd, base) < 0)
			rc = builtin_fail(errno, "tar entry '%s': symlink: %s", x->name, strerror(errno));
		if (rc == 0)
			utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
		break;
	case '1': {
		/* A hard link to an earlier entry: its name is checked as
		 * strictly as the entry's own. */
		rc = clean_name(x, x->link, "link target");
		if (rc)
			break;
		const char *tbase;
		char saved[TAR_NAME_MAX + 1];
		memcpy(saved, x->name, sizeof saved);
		int tfd = open_parent(x, x->link, &tbase, &err);
		if (tfd < 0) {
			rc = err;
			break;
		}
		rc = clear_slot(pfd, base, x->name);
		if (rc == 0 && linkat(tfd, tbase, pfd, base, 0) < 0)
			rc = builtin_fail(errno, "tar entry '%s': link to '%s': %s", saved, x->link,
					  strerror(errno));
		close(tfd);
		break;
	}
	case '6':
		rc = clear_slot(pfd, base, x->name);
		if (rc == 0 && mkfifoat(pfd, base, (mode_t)(mode & 07777)) < 0)
			rc = builtin_fail(errno, "tar entry '%s': mkfifo: %s", x->name, strerror(errno));
		break;
	case '3': case '4':
		rc = BAD(0, "tar entry '%s': a device node; these are refused", x->name);
		break;
	default:
		rc = BAD(0, "tar entry '%s': entry type '%c' is not supported", x->name,
			 type >= 32 && type < 127 ? type : '?');
	}
	close(pfd);
	if (rc == 0 && size && in_skip(&x->in, size + (BLOCK - size % BLOCK) % BLOCK))
		rc = BAD(0, "tar entry '%s': the input ends inside its data", x->name);
	return rc;
}

static int extract(struct extract *x)
{
	struct ustar h;
	for (;;) {
		int rc = in_read(&x->in, &h, BLOCK);
		if (rc == -1)
			return 0;	/* no end blocks: tolerated */
		if (rc < 0)
			return rc == -EINVAL ? BAD(0, "tar: the input ends inside a header")
					     : builtin_fail(-rc, "tar: read: %s", strerror(-rc));
		static const struct ustar zero;
		if (!memcmp(&h, &zero, BLOCK))
			return 0;	/* end of archive; what follows is padding */
		char hname[101];
		snprintf(hname, sizeof hname, "%.100s", h.name);
		if (!checksum_ok(&h))
			return BAD(0, "tar: the header at byte %llu ('%s') has a bad checksum: not a tar "
				   "stream, or a corrupt one", (unsigned long long)(x->in.off - BLOCK), hname);
		uint64_t size;
		if (!parse_num(h.size, sizeof h.size, &size))
			return BAD(0, "tar entry '%s': a bad size field", hname);
		if (x->have_pax_size) {
			size = x->pax_size;
			x->have_pax_size = false;
		}
		char type = h.typeflag;
		if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
			char *rec = NULL;
			rc = read_record(x, size, &rec, hname);
			if (rc)
				return rc;
			if (type == 'x')
				rc = parse_pax(x, rec, size, hname);
			else if (type == 'L' || type == 'K') {
				size_t n = strnlen(rec, size);
				if (n > TAR_NAME_MAX)
					rc = BAD(0, "tar entry '%s': a long name of more than %d bytes", hname,
						 TAR_NAME_MAX);
				else {
					memcpy(type == 'L' ? x->long_name : x->long_link, rec, n);
					(type == 'L' ? x->long_name : x->long_link)[n] = 0;
					*(type == 'L' ? &x->have_long_name : &x->have_long_link) = true;
				}
			}
			free(rec);
			if (rc)
				return rc;
			continue;
		}
		if (x->have_long_name) {
			strcpy(x->name, x->long_name);
		} else if (!memcmp(h.magic, "ustar", 6) && h.prefix[0]) {
			snprintf(x->name, sizeof x->name, "%.155s/%.100s", h.prefix, h.name);
		} else {
			snprintf(x->name, sizeof x->name, "%.100s", h.name);
		}
		if (x->have_long_link)
			strcpy(x->link, x->long_link);
		else
			snprintf(x->link, sizeof x->link, "%.100s", h.linkname);
		x->have_long_name = x->have_long_link = false;
		rc = extract_entry(x, &h, type, size);
		if (rc)
			return rc;
	}
}

int builtin_tar_extract(int argc, char *const *argv)
{
	if (argc != 2)
		return builtin_fail(EINVAL, "usage: tar-extract DIR");
	const char *dir = argv[1];
	/* DIR and its parents, as mkdir -p. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s", dir);
	for (char *s = path + 1; ; s++) {
		if (*s && *s != '/')
			continue;
		char saved = *s;
		*s = 0;
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return builtin_fail(errno, "untar into %s: mkdir %s: %s", dir, path, strerror(errno));
		*s = saved;
		if (!saved)
			break;
	}
	struct extract *x = calloc(1, sizeof *x);
	if (!x)
		return builtin_fail(ENOMEM, "tar: out of memory");
	x->dir = dir;
	x->root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (x->root < 0)
		return builtin_fail(errno, "untar into %s: %s", dir, strerror(errno));
	int rc = extract(x);
	/* Directories' own modes and times, deepest first (they were
	 * recorded parents first). */
	for (size_t i = x->nfix; i-- > 0;) {
		if (rc == 0) {
			const char *base;
			int err;
			int pfd = open_parent(x, x->fix[i].name, &base, &err);
			if (pfd >= 0) {
				struct timespec ts[2] = { { 0, UTIME_OMIT }, x->fix[i].mtime };
				fchmodat(pfd, base, x->fix[i].mode, 0);
				utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
				close(pfd);
			}
		}
		free(x->fix[i].name);
	}
	free(x->fix);
	close(x->root);
	free(x);
	if (rc == 0) {
		/* Whatever follows the end blocks is read, so the sender is
		 * never left blocked on a pipe nobody drains. */
		char buf[65536];
		while (read(0, buf, sizeof buf) > 0)
			;
	}
	return rc;
}
