/*
 * WATCH: inotify on a path, events streamed until the client sends CANCEL
 * (or the watched directory goes away).
 *
 * With the recursive flag every directory below the path is watched too,
 * and directories created later are added as their creation is seen. A
 * file created in a new directory before its watch is in place is not
 * reported: inotify cannot close that window, so clients that need every
 * file should LIST a new directory after its CREATE.
 *
 * Events are read only while the client keeps up; if it does not, the
 * kernel queue fills and the client gets an OVERFLOW event, never an
 * unbounded buffer in the agent.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/agent.h"

#define WATCH_MASK (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
		    IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | \
		    IN_EXCL_UNLINK)
#define WATCH_MAX_DEPTH 32
/* The most entries of one new directory told as created (a tree moved in
 * could be any size; past this the client gets one overflow event and
 * lists the directory itself). */
#define WATCH_ANNOUNCE_MAX 4096

struct wdir {
	int wd;
	char *rel;		/* "" for the watched path itself */
};

struct watcher {
	struct conn *c;
	int ifd;
	bool recursive;
	bool paused;
	uint64_t count;
	struct wdir *dirs;
	size_t ndirs, cap;
	char path[4096];
};

static void watcher_free(struct watcher *w)
{
	if (w->ifd >= 0) {
		loop_del(&w->c->a->loop, w->ifd);
		close(w->ifd);
	}
	for (size_t i = 0; i < w->ndirs; i++)
		free(w->dirs[i].rel);
	free(w->dirs);
	free(w);
}

static struct wdir *wdir_find(struct watcher *w, int wd)
{
	for (size_t i = 0; i < w->ndirs; i++)
		if (w->dirs[i].wd == wd)
			return &w->dirs[i];
	return NULL;
}

/* Watch path (full) known to clients as rel. 0 or -errno. */
static int watch_add(struct watcher *w, const char *path, const char *rel)
{
	int wd = inotify_add_watch(w->ifd, path, WATCH_MASK);
	if (wd < 0)
		return -errno;
	if (wdir_find(w, wd))
		return 0;	/* the same directory by another name */
	if (w->ndirs == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		struct wdir *n = realloc(w->dirs, cap * sizeof *n);
		if (!n)
			return -ENOMEM;
		w->dirs = n;
		w->cap = cap;
	}
	char *r = strdup(rel);
	if (!r)
		return -ENOMEM;
	w->dirs[w->ndirs].wd = wd;
	w->dirs[w->ndirs].rel = r;
	w->ndirs++;
	return 0;
}

static int send_event(struct watcher *w, uint32_t bits, const char *name);

/* Watch every directory below path. Stops at the first failure (usually
 * ENOSPC: fs.inotify.max_user_watches). With announce (a directory that
 * appeared while watched), every entry found gets a create event: what
 * was made in it before its watch was added would else never be told;
 * *announce counts down the events left (NULL: none are told). */
static int watch_tree(struct watcher *w, const char *path, const char *rel, int depth, int *announce)
{
	if (depth > WATCH_MAX_DEPTH)
		return 0;
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		bool dir = S_ISDIR(st.st_mode);
		if (!dir && !announce)
			continue;
		/* What this entry is told as: created, or (the budget just
		 * spent) one overflow, then nothing. */
		uint32_t told = 0;
		if (announce && *announce > 0)
			told = KILN_EV_CREATE | (dir ? KILN_EV_ISDIR : 0);
		else if (announce && *announce == 0)
			told = KILN_EV_OVERFLOW;	/* then *announce is -1 */
		char *sub = NULL, *subrel = NULL;
		if (asprintf(&sub, "%s/%s", path, de->d_name) < 0)
			sub = NULL;
		if (asprintf(&subrel, "%s%s%s", rel, *rel ? "/" : "", de->d_name) < 0)
			subrel = NULL;
		if (!sub || !subrel)
			rc = -ENOMEM;
		else if (strlen(sub) >= 4096)
			;	/* beyond PATH_MAX: neither watched nor told */
		else if (told && send_event(w, told, told == KILN_EV_OVERFLOW ? "" : subrel) < 0)
			rc = -EPIPE;
		else if (dir && (rc = watch_add(w, sub, subrel)) == 0)
			rc = watch_tree(w, sub, subrel, depth + 1, announce);
		if (announce && told)
			(*announce)--;
		free(sub);
		free(subrel);
	}
	closedir(d);
	return rc;
}

static uint32_t event_bits(uint32_t mask)
{
	uint32_t b = 0;
	if (mask & IN_CREATE) b |= KILN_EV_CREATE;
	if (mask & IN_MODIFY) b |= KILN_EV_MODIFY;
	if (mask & IN_DELETE) b |= KILN_EV_DELETE;
	if (mask & IN_MOVED_FROM) b |= KILN_EV_MOVED_FROM;
	if (mask & IN_MOVED_TO) b |= KILN_EV_MOVED_TO;
	if (mask & IN_ATTRIB) b |= KILN_EV_ATTRIB;
	if (mask & IN_CLOSE_WRITE) b |= KILN_EV_CLOSE_WRITE;
	if (mask & IN_ISDIR) b |= KILN_EV_ISDIR;
	if (mask & IN_Q_OVERFLOW) b |= KILN_EV_OVERFLOW;
	return b;
}

static int send_event(struct watcher *w, uint32_t bits, const char *name)
{
	struct kiln_fb fb;
	conn_begin(w->c, &fb, KILN_EVENT);
	kiln_fb_u32(&fb, KT_EVENT, bits);
	kiln_fb_str(&fb, KT_NAME, name);
	w->count++;
	return conn_end(w->c, &fb);
}

/* The watched path itself is gone: say so and end the op. */
static void watch_gone(struct watcher *w)
{
	struct conn *c = w->c;
	struct kiln_fb fb;
	if (send_event(w, KILN_EV_GONE, "") < 0)
		return;
	conn_begin(c, &fb, KILN_END);
	kiln_fb_u64(&fb, KT_COUNT, w->count);
	watcher_free(w);
	conn_end_op(c, &fb);
}

/* Handle one inotify event. Returns false when the op ended. */
static bool handle_event(struct watcher *w, const struct inotify_event *ev)
{
	char rel[4096];
	struct wdir *d = ev->wd >= 0 ? wdir_find(w, ev->wd) : NULL;

	if (ev->mask & IN_Q_OVERFLOW)
		return send_event(w, KILN_EV_OVERFLOW, "") == 0;
	if (!d)
		return true;
	if (ev->mask & IN_IGNORED) {
		bool root = d->rel[0] == 0;
		free(d->rel);
		*d = w->dirs[--w->ndirs];
		if (root) {
			watch_gone(w);
			return false;
		}
		return true;
	}
	if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF))
		return true;	/* the parent reports it; IN_IGNORED follows */
	const char *name = ev->len ? ev->name : "";
	snprintf(rel, sizeof rel, "%s%s%s", d->rel, *d->rel && *name ? "/" : "", name);
	if (send_event(w, event_bits(ev->mask), rel) < 0)
		return false;
	/* A directory made (or moved in) under a recursive watch: watched
	 * from now on, and what is in it already told as created (a file
	 * made between its mkdir and its watch would else be missed; one
	 * made while it is scanned may be told twice). */
	if (w->recursive && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
		char full[8192];
		snprintf(full, sizeof full, "%s/%s", w->path, rel);
		int budget = WATCH_ANNOUNCE_MAX;
		if (watch_add(w, full, rel) == 0 && watch_tree(w, full, rel, 1, &budget) == -EPIPE)
			return false;
	}
	return true;
}

static void watch_pause(struct watcher *w, bool paused)
{
	w->paused = paused;
	loop_mod(&w->c->a->loop, w->ifd, paused ? 0 : EPOLLIN);
	if (paused)
		conn_want_drain(w->c);
}

static void watch_io(struct loop *l, int fd, uint32_t events, void *ctx)
{
	struct watcher *w = ctx;
	_Alignas(struct inotify_event) char buf[16384];
	(void)l;
	(void)events;

	if (!conn_has_room(w->c)) {
		watch_pause(w, true);
		return;
	}
	ssize_t n = read(fd, buf, sizeof buf);
	if (n <= 0)
		return;
	for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
		const struct inotify_event *ev = (const void *)(buf + off);
		off += (ssize_t)sizeof *ev + ev->len;
		if (off > n || !handle_event(w, ev))
			return;
	}
}

static void watch_drain(struct conn *c)
{
	struct watcher *w = c->st;
	if (w->paused)
		watch_pause(w, false);
}

static int watch_frame(struct conn *c, uint8_t type, const uint8_t *p, uint32_t len)
{
	struct watcher *w = c->st;
	struct kiln_fb fb;
	(void)p;
	(void)len;
	if (type != KILN_CANCEL)
		return -EPROTO;
	conn_begin(c, &fb, KILN_END);
	kiln_fb_u64(&fb, KT_COUNT, w->count);
	watcher_free(w);
	conn_end_op(c, &fb);
	return 0;
}

static void watch_abort(struct conn *c)
{
	watcher_free(c->st);
}

static const struct conn_op watch_op = {
	.name = "WATCH",
	.frame = watch_frame,
	.drain = watch_drain,
	.abort = watch_abort,
};

void watch_request(struct conn *c, const struct kiln_msg *m)
{
	struct watcher *w = calloc(1, sizeof *w);
	if (!w) {
		conn_error(c, ENOMEM, "watch: out of memory");
		return;
	}
	w->c = c;
	w->ifd = -1;
	if (!files_path(c, m, KT_PATH, w->path, sizeof w->path)) {
		free(w);
		return;
	}
	w->recursive = kiln_msg_u32(m, KT_FLAGS, 0) & KILN_WATCH_RECURSIVE;
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	int rc = w->ifd < 0 ? -errno : watch_add(w, w->path, "");
	if (rc == 0 && w->recursive)
		rc = watch_tree(w, w->path, "", 1, NULL);
	if (rc == 0)
		rc = loop_add(&c->a->loop, w->ifd, EPOLLIN, watch_io, w);
	if (rc < 0) {
		char path[4096];
		snprintf(path, sizeof path, "%s", w->path);
		if (w->ifd >= 0)
			close(w->ifd);
		w->ifd = -1;
		watcher_free(w);
		conn_error(c, -rc, "watch %s: %s", path,
			   rc == -ENOSPC ? "too many directories for inotify (fs.inotify.max_user_watches)"
					 : strerror(-rc));
		return;
	}
	struct kiln_fb fb;
	conn_begin(c, &fb, KILN_ACCEPT);
	conn_op_start(c, &watch_op, w);
	conn_end(c, &fb);
}
