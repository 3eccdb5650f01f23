/*
 * cmd_files: guest files. `kiln cp` copies one way or the other (one side
 * is ID:PATH; -r for a directory tree, both ways), and `kiln fs` lists,
 * stats, removes, makes, watches, copies and moves guest paths and moves
 * trees as tar streams (the .../files routes). -u/--user makes every
 * request act as that guest user (the `user` query parameter).
 */
#include "cli/cli.h"
#include "cli/out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BODY_MAX (64u << 20)
#define PIPE_MAX (1u << 30)

/* ID:PATH: the path, with the id in id; NULL for a local path. */
static const char *remote(const char *arg, char id[48])
{
	const char *colon = strchr(arg, ':');
	if (!colon || colon - arg >= 48)
		return NULL;
	memcpy(id, arg, (size_t)(colon - arg));
	id[colon - arg] = 0;
	return is_id(id, "sbx_") ? colon + 1 : NULL;
}

static const char *fs_user;	/* -u/--user: every files request acts as this user */

static char *files_path(const char *route, const char *id, const char *path, const char *extra)
{
	char base[160];
	snprintf(base, sizeof base, "/v1/sandboxes/%s/%s", id, route);
	struct query q = { 0 };
	if (path)
		query_add(&q, "path", path);
	if (fs_user)
		query_add(&q, "user", fs_user);
	char *p = query_path(base, &q), *full;
	if (asprintf(&full, "%s%s", p, extra ? extra : "") < 0)
		die("out of memory");
	free(p);
	return full;
}

/* The guest path's stat, or NULL if it does not exist. */
static json_t *remote_stat(const char *id, const char *path)
{
	char *p = files_path("files/stat", id, path, NULL);
	struct httpc c;
	char *resp = NULL;
	if (httpc_start(&c, &target, "GET", p, NULL, NULL, 0, -1, 0) < 0 ||
	    httpc_read_all(&c, &resp, NULL, BODY_MAX) < 0)
		die("%s", c.error);
	free(p);
	httpc_close(&c);
	if (c.status == 404) {
		json_t *j = json_loads(resp, 0, NULL);
		const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
		bool file_missing = code && !strcmp(code, "not_found") &&
				    !strstr(str(json_object_get(j, "error"), "message"), "sandbox");
		json_decref(j);
		if (file_missing) {
			free(resp);
			return NULL;
		}
	}
	if (c.status != 200)
		die_response(c.status, resp);
	json_t *j = json_loads(resp, 0, NULL);
	free(resp);
	return j;
}

/* Read fd whole (a pipe, a FIFO, process substitution: no length known). */
static char *slurp(int fd, const char *name, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);
	for (;;) {
		if (!b)
			die("out of memory");
		if (n == cap) {
			if (cap >= PIPE_MAX)
				die("%s: larger than %u bytes", name, PIPE_MAX);
			b = realloc(b, cap *= 2);
			continue;
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("%s: %s", name, strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return b;
}

/* Upload one local file (fd) to id:path. */
static void put_file(int fd, const char *name, const char *id, const char *path, unsigned mode)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		die("%s: %s", name, strerror(errno));
	char extra[32];
	snprintf(extra, sizeof extra, "&mode=%04o", mode & 07777);
	char *p = files_path("files", id, path, extra);
	struct httpc c;
	int rc;
	if (S_ISREG(st.st_mode)) {
		rc = httpc_start(&c, &target, "PUT", p, NULL, NULL, 0, fd, st.st_size);
	} else {
		size_t len;
		char *in = slurp(fd, name, &len);
		rc = httpc_start(&c, &target, "PUT", p, NULL, in, len, -1, 0);
		free(in);
	}
	free(p);
	free(finish(&c, rc));
}

/* GET ROUTE of id:path (a file, or a tree as tar) into fd; name is fd's
 * in messages, what the stream's in the message when it breaks off. */
static void download(const char *route, const char *id, const char *path, int fd, const char *name,
		     const char *what)
{
	char *p = files_path(route, id, path, NULL);
	struct httpc c;
	get_stream(&c, p, NULL);
	char buf[65536];
	long n;
	while ((n = httpc_read(&c, buf, sizeof buf)) > 0)
		if (write_all(fd, buf, (size_t)n) < 0)
			die("%s: %s", name, strerror(errno));
	if (n < 0)
		die("%s broke off: %s", what, c.error);
	httpc_close(&c);
}

/* Download id:path into fd. */
static void get_file(const char *id, const char *path, int fd, const char *name)
{
	download("files", id, path, fd, name, "the download");
}

static void remote_mkdir(const char *id, const char *path)
{
	char *p = files_path("files/mkdir", id, path, "&parents=true");
	json_decref(call("POST", p, NULL));
	free(p);
}

static char *join(const char *dir, const char *name)
{
	char *p;
	size_t n = strlen(dir);
	if (asprintf(&p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name) < 0)
		die("out of memory");
	return p;
}

/* Upload the tree at local dir to id:dst (made if missing). */
static void put_tree(const char *dir, const char *id, const char *dst)
{
	remote_mkdir(id, dst);
	DIR *d = opendir(dir);
	if (!d)
		die("%s: %s", dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *src = join(dir, e->d_name), *to = join(dst, e->d_name);
		struct stat st;
		if (lstat(src, &st) < 0)
			die("%s: %s", src, strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			put_tree(src, id, to);
		} else if (S_ISREG(st.st_mode)) {
			int fd = open(src, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				die("%s: %s", src, strerror(errno));
			put_file(fd, src, id, to, st.st_mode);
			close(fd);
		} else {
			fprintf(stderr, "kiln: %s: skipped (not a file or directory)\n", src);
		}
		free(src);
		free(to);
	}
	closedir(d);
}

/* Download the tree at id:src into local dir dst (made if missing). */
static void get_tree(const char *id, const char *src, const char *dst)
{
	if (mkdir(dst, 0755) < 0 && errno != EEXIST)
		die("%s: %s", dst, strerror(errno));
	char *p = files_path("files/list", id, src, "&depth=64");
	json_t *r = call("GET", p, NULL);
	free(p);
	if (json_is_true(json_object_get(r, "truncated")))
		die("%s has more than 10000 entries; copy it in parts", src);
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(r, "entries"), i, e) {	/* parents come first */
		const char *name = str(e, "name"), *type = str(e, "type");
		if (strstr(name, "..") && (name[0] == '.' || strstr(name, "/..")))
			die("the guest listed '%s', a path that leaves the tree", name);
		char *to = join(dst, name), *from = join(src, name);
		if (!strcmp(type, "dir")) {
			if (mkdir(to, 0755) < 0 && errno != EEXIST)
				die("%s: %s", to, strerror(errno));
		} else if (!strcmp(type, "file")) {
			unsigned mode = (unsigned)strtoul(str(e, "mode"), NULL, 8) & 0777;
			int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode ? mode : 0644);
			if (fd < 0)
				die("%s: %s", to, strerror(errno));
			get_file(id, from, fd, to);
			if (close(fd) < 0)
				die("%s: %s", to, strerror(errno));
		} else {
			fprintf(stderr, "kiln: %s:%s: skipped (%s)\n", id, from, type);
		}
		free(to);
		free(from);
	}
	json_decref(r);
}

static const char *base_name(const char *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s", p);
	return basename(buf);
}

int cmd_cp(const struct command *cmd, struct opts *o)
{
	fs_user = o->user;
	need_args(cmd, o, 2, 2);
	const char *a = o->pos[0], *b = o->pos[1];
	char sid[48], did[48], tmp[PATH_MAX];
	const char *src = remote(a, sid), *dst = remote(b, did);
	if (!!src == !!dst)
		usage_error(cmd, "exactly one side must be ID:PATH");
	if (dst) {			/* upload */
		if (!*dst)
			usage_error(cmd, "'%s' names no guest path", b);
		int fd = 0;
		struct stat st;
		if (strcmp(a, "-")) {
			if (stat(a, &st) < 0)
				die("%s: %s", a, strerror(errno));
			if (S_ISDIR(st.st_mode)) {
				if (!o->recursive)
					usage_error(cmd, "%s is a directory (use cp -r)", a);
				json_t *ds = remote_stat(did, dst);
				char *to = ds && !strcmp(str(ds, "type"), "dir")
					   ? join(dst, base_name(a, tmp, sizeof tmp)) : strdup(dst);
				json_decref(ds);
				put_tree(a, did, to);
				free(to);
				return 0;
			}
			fd = open(a, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				die("%s: %s", a, strerror(errno));
		}
		if (fstat(fd, &st) < 0)
			die("%s: %s", a, strerror(errno));
		char *to = NULL;
		size_t dl = strlen(dst);
		if (dst[dl - 1] == '/') {
			if (fd == 0)
				usage_error(cmd, "stdin has no name: give the guest file's name, not a directory");
			to = join(dst, base_name(a, tmp, sizeof tmp));
		} else if (fd != 0) {
			json_t *ds = remote_stat(did, dst);
			if (ds && !strcmp(str(ds, "type"), "dir"))
				to = join(dst, base_name(a, tmp, sizeof tmp));
			json_decref(ds);
		}
		put_file(fd, fd ? a : "stdin", did, to ? to : dst,
			 S_ISREG(st.st_mode) ? (unsigned)st.st_mode : 0644u);
		free(to);
		if (fd)
			close(fd);
		return 0;
	}
	if (!*src)			/* download */
		usage_error(cmd, "'%s' names no guest path", a);
	json_t *ss = remote_stat(sid, src);
	if (!ss)
		die("%s: no such file in %s", src, sid);
	bool dir = !strcmp(str(ss, "type"), "dir");
	json_decref(ss);
	struct stat st;
	bool local_dir = strcmp(b, "-") && stat(b, &st) == 0 && S_ISDIR(st.st_mode);
	char *to = local_dir ? join(b, base_name(src, tmp, sizeof tmp)) : strdup(b);
	if (dir) {
		if (!o->recursive)
			usage_error(cmd, "%s:%s is a directory (use cp -r)", sid, src);
		if (!strcmp(b, "-"))
			usage_error(cmd, "a directory cannot go to stdout");
		get_tree(sid, src, to);
		free(to);
		return 0;
	}
	int fd = strcmp(b, "-") ? open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : 1;
	if (fd < 0)
		die("%s: %s", to, strerror(errno));
	get_file(sid, src, fd, to);
	if (fd != 1 && close(fd) < 0)
		die("%s: %s", to, strerror(errno));
	free(to);
	return 0;
}

/* fs ls|stat|rm|mkdir ID:PATH (or ID PATH) */
static const char *fs_target(const struct command *cmd, struct opts *o, char id[48])
{
	const char *p;
	if (o->npos == 2 && (p = remote(o->pos[1], id)) && *p)
		return p;
	if (o->npos == 3 && is_id(o->pos[1], "sbx_")) {
		snprintf(id, 48, "%s", o->pos[1]);
		return o->pos[2];
	}
	usage_error(cmd, "fs %s wants ID:PATH (or ID PATH)", o->npos ? o->pos[0] : "");
}

/* One event of a watch: "TYPE NAME" lines (a rename: "rename-from" and
 * "rename-to"; a directory's name ends in /), or the JSON with --json. */
static int watch_event(const char *event, const char *data, void *arg)
{
	struct opts *o = arg;
	json_t *j = json_loads(data, 0, NULL);
	int stop = 0;
	if (!strcmp(event, "fs") && j) {
		if (o->json) {
			print_json_line(j);
		} else {
			const char *moved = json_string_value(json_object_get(j, "moved"));
			printf("%s%s%s %s%s\n", str(j, "type"), moved ? "-" : "", moved ? moved : "", str(j, "name"),
			       json_is_true(json_object_get(j, "dir")) ? "/" : "");
		}
		fflush(stdout);
	} else if (!strcmp(event, "overflow")) {
		fprintf(stderr, "kiln: the guest dropped events (they came faster than they were read)\n");
	} else if (!strcmp(event, "gone")) {
		fprintf(stderr, "kiln: the watched path was deleted or moved\n");
		stop = 1;
	} else if (!strcmp(event, "error")) {
		fprintf(stderr, "kiln: %s\n", str(j, "message"));
		stop = 2;
	}
	json_decref(j);
	return stop;
}

/* kiln fs watch [-r] ID:PATH: changes until the path goes or ^C. */
static int fs_watch(const char *id, const char *path, struct opts *o)
{
	char *p = files_path("files/watch", id, path, o->recursive ? "&recursive=true" : NULL);
	struct httpc c;
	int rc = httpc_start(&c, &target, "GET", p, "Accept: text/event-stream\r\n", NULL, 0, -1, 0);
	free(p);
	if (rc < 0)
		die("%s", c.error);
	if (c.status != 200)
		free(finish(&c, 0));
	rc = sse_read(&c, watch_event, o);
	httpc_close(&c);
	if (rc < 0)
		die("the watch broke%s%s", c.error[0] ? ": " : "", c.error);
	return rc == 2 ? EXIT_KILN : 0;
}

/* fs cp|mv ID:FROM TO: TO is a guest path of the same sandbox, or ID:TO. */
static int fs_copy_move(const struct command *cmd, struct opts *o, bool copy)
{
	char id[48], id2[48];
	const char *from = o->npos == 3 ? remote(o->pos[1], id) : NULL;
	if (!from || !*from)
		usage_error(cmd, "fs %s wants ID:FROM TO", o->pos[0]);
	const char *to = remote(o->pos[2], id2);
	if (to && strcmp(id, id2))
		usage_error(cmd, "fs %s works inside one sandbox (kiln cp copies between a sandbox and here)",
			    o->pos[0]);
	if (!to)
		to = o->pos[2];
	if (copy ? false : o->recursive)
		usage_error(cmd, "fs mv takes no -r (it moves trees as they are)");
	char *p = files_path(copy ? "files/copy" : "files/rename", id, NULL, NULL);
	json_t *body = json_pack("{s:s,s:s,s:b}", "from", from, "to", to, "replace", o->replace);
	if (copy)
		json_object_set_new(body, "recursive", json_boolean(o->recursive));
	json_t *r = call("POST", p, body);
	free(p);
	if (o->json)
		print_json(r);
	json_decref(r);
	return 0;
}

/* fs tar ID:DIR: the tree as a tar stream on stdout. */
static int fs_tar(const char *id, const char *path)
{
	if (isatty(1))
		die("fs tar writes a tar stream: send stdout to a file or a pipe (> x.tar, | tar -x)");
	download("files/archive", id, path, 1, "stdout", "the tar stream");
	return 0;
}

/* fs untar ID:DIR: a tar stream from stdin into DIR. */
static int fs_untar(const char *id, const char *path, struct opts *o)
{
	if (isatty(0))
		die("fs untar reads a tar stream from stdin (< x.tar, tar -c ... |)");
	char *p = files_path("files/archive", id, path, NULL);
	struct stat st;
	struct httpc c;
	int rc;
	if (fstat(0, &st) == 0 && S_ISREG(st.st_mode)) {
		rc = httpc_start(&c, &target, "PUT", p, "Content-Type: application/x-tar\r\n", NULL, 0, 0,
				 st.st_size);
	} else {
		size_t len;
		char *in = slurp(0, "stdin", &len);
		rc = httpc_start(&c, &target, "PUT", p, "Content-Type: application/x-tar\r\n", in, len, -1, 0);
		free(in);
	}
	free(p);
	char *resp = finish(&c, rc);
	if (o->json)
		printf("%s\n", resp);
	free(resp);
	return 0;
}

int cmd_fs(const struct command *cmd, struct opts *o)
{
	if (o->npos < 1)
		usage_error(cmd, "fs wants ls, stat, rm, mkdir, watch, cp, mv, tar or untar");
	const char *what = o->pos[0];
	char id[48];
	fs_user = o->user;
	if (o->replace && strcmp(what, "cp") && strcmp(what, "mv"))
		usage_error(cmd, "--replace is for fs cp and fs mv");
	if (!strcmp(what, "cp") || !strcmp(what, "mv")) {
		return fs_copy_move(cmd, o, what[0] == 'c');
	} else if (!strcmp(what, "tar")) {
		const char *path = fs_target(cmd, o, id);
		return fs_tar(id, path);
	} else if (!strcmp(what, "untar")) {
		const char *path = fs_target(cmd, o, id);
		return fs_untar(id, path, o);
	} else if (!strcmp(what, "ls")) {
		const char *path = fs_target(cmd, o, id);
		char *p = files_path("files/list", id, path, NULL);
		json_t *r = call("GET", p, NULL);
		free(p);
		if (o->json) {
			print_json(r);
		} else {
			struct table t;
			table_init(&t, "MODE SIZE MODIFIED NAME");
			size_t i;
			json_t *e;
			json_array_foreach(json_object_get(r, "entries"), i, e) {
				char size[24], when[32], name[4200];
				snprintf(size, sizeof size, "%lld", (long long)json_integer_value(json_object_get(e, "size")));
				const char *type = str(e, "type");
				snprintf(name, sizeof name, "%s%s%s%s", str(e, "name"), !strcmp(type, "dir") ? "/" : "",
					 json_object_get(e, "link") ? " -> " : "",
					 json_object_get(e, "link") ? str(e, "link") : "");
				table_row(&t, str(e, "mode"), size, ago(str(e, "modified_at"), when, sizeof when), name,
					  NULL);
			}
			table_print(&t, stdout);
		}
		json_decref(r);
	} else if (!strcmp(what, "stat")) {
		const char *path = fs_target(cmd, o, id);
		json_t *r = remote_stat(id, path);
		if (!r)
			die("%s: no such file in %s", path, id);
		if (o->json) {
			print_json(r);
		} else {
			char when[32];
			printf("path      %s\ntype      %s\nsize      %lld\nmode      %s\nowner     %lld:%lld\nmodified  %s (%s)\n",
			       str(r, "path"), str(r, "type"), (long long)json_integer_value(json_object_get(r, "size")),
			       str(r, "mode"), (long long)json_integer_value(json_object_get(r, "uid")),
			       (long long)json_integer_value(json_object_get(r, "gid")), str(r, "modified_at"),
			       ago(str(r, "modified_at"), when, sizeof when));
			if (json_object_get(r, "link"))
				printf("link      %s\n", str(r, "link"));
		}
		json_decref(r);
	} else if (!strcmp(what, "rm")) {
		const char *path = fs_target(cmd, o, id);
		char *p = files_path("files", id, path, o->recursive ? "&recursive=true" : NULL);
		json_decref(call("DELETE", p, NULL));
		free(p);
	} else if (!strcmp(what, "mkdir")) {
		const char *path = fs_target(cmd, o, id);
		remote_mkdir(id, path);
	} else if (!strcmp(what, "watch")) {
		const char *path = fs_target(cmd, o, id);
		return fs_watch(id, path, o);
	} else {
		usage_error(cmd, "fs: unknown subcommand '%s' (ls, stat, rm, mkdir, watch, cp, mv, tar, untar)", what);
	}
	return 0;
}
