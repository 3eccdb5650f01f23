/*
 * The agent, natively: build/kiln-init --listen unix:... serves the
 * protocol here as it does in a guest (only the PID 1 duties are left
 * out), and these cases drive it through the client library or raw
 * frames: exec, stdin, pty, background processes, files, watch,
 * backpressure and malformed input.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/kiln_client.h"
#include "unit.h"

static char dir[64];		/* scratch directory */
static char sock[128];
static pid_t agent_pid;
static bool tmpfs_mounted;

/* ---- fixture ---------------------------------------------------------- */

static const char *find_init(void)
{
	static char path[4200];
	const char *env = getenv("KILN_INIT");
	if (env)
		return env;
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0)
		return "build/kiln-init";
	self[n] = 0;
	*strrchr(self, '/') = 0;	/* .../build[/san]/tests */
	/* build/kiln-init is never sanitized, so a SAN build uses it too */
	for (int up = 1; up <= 2; up++) {
		char *s = strrchr(self, '/');
		if (!s)
			break;
		*s = 0;
		snprintf(path, sizeof path, "%s/kiln-init", self);
		if (access(path, X_OK) == 0)
			return path;
	}
	return "build/kiln-init";
}

static void cleanup(void)
{
	if (agent_pid > 0) {
		kill(agent_pid, SIGKILL);
		waitpid(agent_pid, NULL, 0);
		agent_pid = 0;
	}
	if (tmpfs_mounted) {
		char m[128];
		snprintf(m, sizeof m, "%s/small", dir);
		umount2(m, MNT_DETACH);
	}
	if (dir[0]) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cleanup of %s failed\n", dir);
	}
}

static struct kiln_client *client(void)
{
	struct kiln_client *c = kiln_client_new();
	if (!c)
		return NULL;
	kiln_client_set_timeout(c, 30000);
	if (kiln_connect_unix(c, sock) < 0) {
		fprintf(stderr, "connect: %s\n", kiln_client_error(c));
		kiln_client_free(c);
		return NULL;
	}
	return c;
}

static int start_agent(void)
{
	snprintf(dir, sizeof dir, "/tmp/kiln-unit.XXXXXX");
	T_ASSERT(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	chmod(dir, 0755);	/* other users' processes work here too */
	snprintf(sock, sizeof sock, "%s/agent.sock", dir);
	const char *init = find_init();
	agent_pid = fork();
	T_ASSERT(agent_pid >= 0, "fork");
	if (agent_pid == 0) {
		char addr[160];
		snprintf(addr, sizeof addr, "unix:%s", sock);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);	/* its log lines would confuse the counts */
		/* A sanitized agent: keep freed memory from counting as growth. */
		setenv("ASAN_OPTIONS", "quarantine_size_mb=1", 0);
		execl(init, "kiln-init", "--listen", addr, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		struct kiln_client *c = kiln_client_new();
		kiln_client_set_timeout(c, 2000);
		if (kiln_connect_unix(c, sock) == 0 && kiln_ping(c) == 0) {
			kiln_client_free(c);
			T_NOTE("%s (pid %d)", init, (int)agent_pid);
			return 0;
		}
		kiln_client_free(c);
		usleep(10000);
	}
	T_ASSERT(0, "%s did not come up on %s", init, sock);
}

static int agent_alive(void)
{
	struct kiln_client *c = client();
	int ok = c && kiln_ping(c) == 0;
	kiln_client_free(c);
	return ok;
}

/* Output of a finished process. */
struct run {
	char out[1 << 16], err[1 << 16];
	size_t nout, nerr;
	struct kiln_io exit;
	int switches;		/* stdout/stderr alternations */
};

static int collect(struct kiln_client *c, struct run *r)
{
	int last = 0;
	for (;;) {
		struct kiln_io ev;
		int rc = kiln_exec_next(c, &ev);
		if (rc < 0)
			return rc;
		if (ev.kind == KILN_IO_STDOUT || ev.kind == KILN_IO_STDERR) {
			char *dst = ev.kind == KILN_IO_STDOUT ? r->out : r->err;
			size_t *n = ev.kind == KILN_IO_STDOUT ? &r->nout : &r->nerr;
			size_t k = ev.len < sizeof r->out - 1 - *n ? ev.len : sizeof r->out - 1 - *n;
			memcpy(dst + *n, ev.data, k);
			*n += k;
			dst[*n] = 0;
			if (last && last != (int)ev.kind)
				r->switches++;
			last = ev.kind;
			continue;
		}
		r->exit = ev;
		return 0;
	}
}

static int run_argv(struct run *r, const char *const *argv, uint32_t flags, const char *input)
{
	struct kiln_client *c = client();
	struct kiln_exec_req req = { .argv = argv, .flags = flags };
	memset(r, 0, sizeof *r);
	if (!c)
		return -ENOTCONN;
	int rc = kiln_exec_start(c, &req, NULL, NULL);
	if (rc == 0 && input) {
		rc = kiln_exec_stdin(c, input, strlen(input));
		if (rc == 0)
			rc = kiln_exec_eof(c);
		if (rc == 0)
			rc = kiln_client_flush(c);
	}
	if (rc == 0)
		rc = collect(c, r);
	if (rc < 0)
		snprintf(r->err, sizeof r->err, "%s", kiln_client_error(c));
	kiln_client_free(c);
	return rc;
}

/* ---- exec --------------------------------------------------------------- */

static int test_exit_codes(void)
{
	static struct run r;
	const char *t[] = { "true", NULL }, *f[] = { "sh", "-c", "exit 1", NULL };
	const char *k[] = { "sh", "-c", "kill -9 $$", NULL };
	T_ASSERT(run_argv(&r, t, 0, NULL) == 0 && r.exit.code == 0, "true: code %d %s", r.exit.code, r.err);
	T_ASSERT(run_argv(&r, f, 0, NULL) == 0 && r.exit.code == 1, "exit 1: code %d", r.exit.code);
	T_ASSERT(run_argv(&r, k, 0, NULL) == 0 && r.exit.signal == 9 && r.exit.code == -1,
		 "kill -9: code %d signal %d", r.exit.code, r.exit.signal);
	return 0;
}

static int test_stdin_cat(void)
{
	static struct run r;
	const char *cat[] = { "cat", NULL };
	T_ASSERT(run_argv(&r, cat, KILN_EXEC_STDIN, "line one\nline two\n") == 0, "%s", r.err);
	T_ASSERT(!strcmp(r.out, "line one\nline two\n"), "cat gave '%s'", r.out);
	/* Without the STDIN flag, stdin is /dev/null. */
	T_ASSERT(run_argv(&r, cat, 0, NULL) == 0 && r.nout == 0 && r.exit.code == 0, "cat of /dev/null");
	return 0;
}

static int test_env_cwd_user(void)
{
	static struct run r;
	struct kiln_client *c = client();
	const char *env[] = { "FOO=bar baz", "PATH=/usr/bin:/bin", NULL };
	struct kiln_exec_req req = {
		.shell = "echo \"$FOO|$PATH|$(pwd)|$(id -u):$(id -g)\"",
		.env = env, .cwd = dir, .user = "65534:65534",
	};
	memset(&r, 0, sizeof r);
	T_ASSERT(c && kiln_exec_start(c, &req, NULL, NULL) == 0, "start: %s", c ? kiln_client_error(c) : "");
	T_ASSERT(collect(c, &r) == 0, "%s", kiln_client_error(c));
	char want[256];
	snprintf(want, sizeof want, "bar baz|/usr/bin:/bin|%s|65534:65534\n", dir);
	T_ASSERT(!strcmp(r.out, want), "got '%s' want '%s' (stderr %s)", r.out, want, r.err);
	/* A missing working directory is named in the error. */
	req.cwd = "/no/such/dir";
	req.user = NULL;
	int rc = kiln_exec_start(c, &req, NULL, NULL);
	T_ASSERT(rc == -ENOENT && strstr(kiln_client_error(c), "/no/such/dir"),
		 "rc %d: %s", rc, kiln_client_error(c));
	kiln_client_free(c);
	return 0;
}

static int test_exec_errors(void)
{
	struct kiln_client *c = client();
	const char *nx[] = { "/no/such/program", NULL };
	struct kiln_exec_req req = { .argv = nx };
	int rc = kiln_exec_start(c, &req, NULL, NULL);
	T_ASSERT(rc == -ENOENT && strstr(kiln_client_error(c), "execve /no/such/program"),
		 "rc %d: %s", rc, kiln_client_error(c));
	struct kiln_exec_req none = { 0 };
	rc = kiln_exec_start(c, &none, NULL, NULL);
	T_ASSERT(rc == -EINVAL, "empty EXEC: rc %d", rc);
	const char *badenv[] = { "NOEQUALS", NULL }, *t[] = { "true", NULL };
	struct kiln_exec_req be = { .argv = t, .env = badenv };
	rc = kiln_exec_start(c, &be, NULL, NULL);
	T_ASSERT(rc == -EINVAL && strstr(kiln_client_error(c), "NOEQUALS"), "bad env: %s", kiln_client_error(c));
	struct kiln_exec_req bu = { .argv = t, .user = "no-such-user" };
	rc = kiln_exec_start(c, &bu, NULL, NULL);
	T_ASSERT(rc == -ENOENT, "unknown user: rc %d", rc);
	/* The connection is still good after all that. */
	T_ASSERT(kiln_ping(c) == 0, "ping after errors: %s", kiln_client_error(c));
	kiln_client_free(c);
	return 0;
}

static int test_timeout(void)
{
	struct kiln_client *c = client();
	static struct run r;
	const char *s[] = { "sleep", "30", NULL };
	struct kiln_exec_req req = { .argv = s, .timeout_ms = 300 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&r, 0, sizeof r);
	T_ASSERT(kiln_exec_start(c, &req, NULL, NULL) == 0 && collect(c, &r) == 0, "%s", kiln_client_error(c));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	T_ASSERT(r.exit.timed_out && r.exit.signal == SIGKILL, "timed_out %d signal %d", r.exit.timed_out, r.exit.signal);
	T_ASSERT(secs < 5, "took %.1f s", secs);
	T_NOTE("killed after %.2f s", secs);
	kiln_client_free(c);
	return 0;
}

static int test_sequential_execs(void)
{
	struct kiln_client *c = client();
	const char *t[] = { "true", NULL };
	struct kiln_exec_req req = { .argv = t };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 200; i++) {
		struct kiln_io ev;
		T_ASSERT(kiln_exec_start(c, &req, NULL, NULL) == 0, "exec %d: %s", i, kiln_client_error(c));
		do
			T_ASSERT(kiln_exec_next(c, &ev) == 0, "exec %d: %s", i, kiln_client_error(c));
		while (ev.kind != KILN_IO_EXIT);
		T_ASSERT(ev.code == 0, "exec %d: code %d", i, ev.code);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	T_NOTE("200 execs on one connection, %.0f us each",
	       ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 200 / 1e3);
	kiln_client_free(c);
	return 0;
}

/* FNV-1a, to compare streams without keeping them. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

static int test_big_stdout_and_interleave(void)
{
	struct kiln_client *c = client();
	/* 32 MiB of a known pattern, checked as it streams. */
	const char *big[] = { "sh", "-c", "head -c 33554432 /dev/zero | tr '\\0' 'k'", NULL };
	struct kiln_exec_req req = { .argv = big };
	uint64_t bytes = 0, h = 0xcbf29ce484222325ull, want = 0xcbf29ce484222325ull;
	static char ks[65536];
	memset(ks, 'k', sizeof ks);
	for (int i = 0; i < 512; i++)
		want = fnv(want, ks, sizeof ks);
	T_ASSERT(kiln_exec_start(c, &req, NULL, NULL) == 0, "%s", kiln_client_error(c));
	for (;;) {
		struct kiln_io ev;
		T_ASSERT(kiln_exec_next(c, &ev) == 0, "%s", kiln_client_error(c));
		if (ev.kind == KILN_IO_EXIT) {
			T_ASSERT(ev.code == 0, "code %d", ev.code);
			break;
		}
		T_ASSERT(ev.kind == KILN_IO_STDOUT, "stderr: %.*s", (int)ev.len, ev.data);
		T_ASSERT(ev.len <= KILN_CHUNK, "chunk of %zu", ev.len);
		h = fnv(h, ev.data, ev.len);
		bytes += ev.len;
	}
	T_ASSERT(bytes == 32u << 20 && h == want, "%llu bytes, hash %s", (unsigned long long)bytes,
		 h == want ? "ok" : "wrong");
	kiln_client_free(c);

	/* stdout and stderr written in turns, 10 ms apart: each stream
	 * arrives whole and the chunks alternate. */
	static struct run r;
	const char *alt[] = { "sh", "-c",
		"i=0; while [ $i -lt 60 ]; do echo o$i; echo e$i >&2; sleep 0.01; i=$((i+1)); done", NULL };
	T_ASSERT(run_argv(&r, alt, 0, NULL) == 0, "%s", r.err);
	char wo[2048] = "", we[2048] = "";
	for (int i = 0; i < 60; i++) {
		snprintf(wo + strlen(wo), sizeof wo - strlen(wo), "o%d\n", i);
		snprintf(we + strlen(we), sizeof we - strlen(we), "e%d\n", i);
	}
	T_ASSERT(!strcmp(r.out, wo) && !strcmp(r.err, we), "streams differ: out '%.40s' err '%.40s'", r.out, r.err);
	T_ASSERT(r.switches >= 30, "only %d alternations between stdout and stderr", r.switches);
	T_NOTE("32 MiB intact; 60 line pairs with %d alternations", r.switches);
	return 0;
}

static int test_merge(void)
{
	static struct run r;
	const char *s[] = { "sh", "-c", "echo a; echo b >&2; echo c", NULL };
	T_ASSERT(run_argv(&r, s, KILN_EXEC_MERGE, NULL) == 0, "%s", r.err);
	T_ASSERT(!strcmp(r.out, "a\nb\nc\n") && r.nerr == 0, "merged '%s' err '%s'", r.out, r.err);
	return 0;
}

/* ---- concurrency ---------------------------------------------------------- */

static void *one_exec(void *arg)
{
	long n = (long)arg;
	static struct run runs[64];
	char num[16];
	snprintf(num, sizeof num, "%ld", n);
	const char *argv[] = { "sh", "-c", "sleep 0.3; echo $0", num, NULL };
	struct run *r = &runs[n];
	if (run_argv(r, argv, 0, NULL) < 0)
		return (void *)1;
	char want[32];
	snprintf(want, sizeof want, "%ld\n", n);
	return (void *)(intptr_t)(strcmp(r->out, want) != 0 || r->exit.code != 0);
}

static int test_64_concurrent(void)
{
	pthread_t th[64];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < 64; i++)
		T_ASSERT(pthread_create(&th[i], NULL, one_exec, (void *)i) == 0, "thread %ld", i);
	int bad = 0;
	for (int i = 0; i < 64; i++) {
		void *res;
		pthread_join(th[i], &res);
		bad += res != NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	T_ASSERT(bad == 0, "%d of 64 failed", bad);
	/* Serial would take 64 * 0.3 s. */
	T_ASSERT(secs < 10, "took %.1f s: not concurrent", secs);
	T_NOTE("64 clients, each sleep 0.3 + echo, in %.2f s", secs);
	return 0;
}

/* ---- pty ------------------------------------------------------------------ */

static int test_pty(void)
{
	static struct run r;
	const char *tty[] = { "tty", NULL }, *size[] = { "stty", "size", NULL };
	T_ASSERT(run_argv(&r, tty, KILN_EXEC_PTY, NULL) == 0, "%s", r.err);
	T_ASSERT(!strncmp(r.out, "/dev/pts/", 9) && r.exit.code == 0, "tty printed '%s'", r.out);
	T_ASSERT(run_argv(&r, size, KILN_EXEC_PTY, NULL) == 0 && !strcmp(r.out, "24 80\r\n"),
		 "stty size printed '%s'", r.out);

	/* Resize while it runs: the shell reports the new size on SIGWINCH. */
	struct kiln_client *c = client();
	const char *w[] = { "sh", "-c", "trap 'stty size; exit 0' WINCH; echo ready; "
			    "i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; exit 3", NULL };
	struct kiln_exec_req req = { .argv = w, .flags = KILN_EXEC_PTY | KILN_EXEC_STDIN, .rows = 30, .cols = 100 };
	char out[512] = "";
	size_t n = 0;
	bool resized = false;
	struct kiln_io ev;
	T_ASSERT(kiln_exec_start(c, &req, NULL, NULL) == 0, "%s", kiln_client_error(c));
	for (;;) {
		T_ASSERT(kiln_exec_next(c, &ev) == 0, "%s", kiln_client_error(c));
		if (ev.kind == KILN_IO_EXIT)
			break;
		size_t k = ev.len < sizeof out - 1 - n ? ev.len : sizeof out - 1 - n;
		memcpy(out + n, ev.data, k);
		out[n += k] = 0;
		if (!resized && strstr(out, "ready")) {
			resized = true;
			T_ASSERT(kiln_exec_resize(c, 40, 132) == 0, "%s", kiln_client_error(c));
		}
	}
	T_ASSERT(ev.code == 0 && strstr(out, "40 132"), "code %d, output '%s'", ev.code, out);

	/* Input through the terminal. */
	const char *rd[] = { "sh", "-c", "read x; echo got:$x", NULL };
	T_ASSERT(run_argv(&r, rd, KILN_EXEC_PTY | KILN_EXEC_STDIN, "hello\n") == 0, "%s", r.err);
	T_ASSERT(strstr(r.out, "got:hello"), "read via pty: '%s'", r.out);
	kiln_client_free(c);
	return 0;
}

/* ---- background ------------------------------------------------------------ */

struct find { uint32_t id; struct kiln_proc_info p; bool found; };

static int find_proc(void *ctx, const struct kiln_proc_info *p)
{
	struct find *f = ctx;
	if (p->id == f->id) {
		f->p = *p;
		f->found = true;
	}
	return 0;
}

static int test_background_reattach(void)
{
	struct kiln_client *c = client();
	const char *s[] = { "sh", "-c", "echo start; sleep 1; echo end; exit 7", NULL };
	struct kiln_exec_req req = { .argv = s, .flags = KILN_EXEC_BACKGROUND };
	uint32_t id, pid;
	struct kiln_io ev;
	T_ASSERT(kiln_exec_start(c, &req, &id, &pid) == 0, "%s", kiln_client_error(c));
	/* Walk away without a word. */
	kiln_client_free(c);

	c = client();
	struct find f = { .id = id };
	T_ASSERT(kiln_procs(c, find_proc, &f) == 0, "%s", kiln_client_error(c));
	T_ASSERT(f.found && f.p.state == KILN_PROC_RUNNING && (f.p.flags & KILN_EXEC_BACKGROUND) &&
		 f.p.pid == pid, "ps: found %d state %u", f.found, f.p.state);
	T_ASSERT(kill((pid_t)pid, 0) == 0, "the process is gone");
	uint64_t dropped;
	T_ASSERT(kiln_attach(c, id, NULL, &dropped) == 0, "%s", kiln_client_error(c));
	static struct run r;
	memset(&r, 0, sizeof r);
	T_ASSERT(collect(c, &r) == 0, "%s", kiln_client_error(c));
	T_ASSERT(!strcmp(r.out, "start\nend\n") && r.exit.code == 7 && dropped == 0,
		 "attach gave '%s' code %d dropped %llu", r.out, r.exit.code, (unsigned long long)dropped);
	/* Collected: the record is gone. */
	f.found = false;
	T_ASSERT(kiln_procs(c, find_proc, &f) == 0 && !f.found, "still listed after its exit was delivered");
	T_ASSERT(kiln_attach(c, id, NULL, NULL) == -ESRCH, "attach to a collected process");

	/* Detach with CANCEL, then signal it from another connection. */
	const char *sl[] = { "sleep", "30", NULL };
	struct kiln_exec_req r2 = { .argv = sl, .flags = KILN_EXEC_BACKGROUND };
	T_ASSERT(kiln_exec_start(c, &r2, &id, &pid) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_exec_cancel(c) == 0 && kiln_exec_next(c, &ev) == 0 && ev.kind == KILN_IO_DETACHED,
		 "detach: %s", kiln_client_error(c));
	T_ASSERT(kiln_signal(c, id, SIGTERM, 0) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_attach(c, id, NULL, NULL) == 0 && kiln_exec_next(c, &ev) == 0 &&
		 ev.kind == KILN_IO_EXIT && ev.signal == SIGTERM, "after SIGTERM: kind %d signal %d", ev.kind, ev.signal);
	kiln_client_free(c);
	return 0;
}

static int test_foreground_dies_with_client(void)
{
	struct kiln_client *c = client();
	const char *s[] = { "sleep", "30", NULL };
	struct kiln_exec_req req = { .argv = s };
	uint32_t pid;
	T_ASSERT(kiln_exec_start(c, &req, NULL, &pid) == 0, "%s", kiln_client_error(c));
	kiln_client_free(c);
	for (int i = 0; i < 300 && kill((pid_t)pid, 0) == 0; i++)
		usleep(10000);
	T_ASSERT(kill((pid_t)pid, 0) < 0, "pid %u still runs after its client left", pid);
	return 0;
}

static int test_client_gone_while_stdin_held(void)
{
	struct kiln_client *c = client();
	const char *s[] = { "sleep", "30", NULL };
	struct kiln_exec_req req = { .argv = s, .flags = KILN_EXEC_STDIN };
	uint32_t pid;
	static char junk[1 << 20];
	T_ASSERT(kiln_exec_start(c, &req, NULL, &pid) == 0, "%s", kiln_client_error(c));
	/* More than the pipe holds: the agent keeps the rest and stops
	 * reading this connection. */
	for (int i = 0; i < 2; i++)
		T_ASSERT(kiln_exec_stdin(c, junk, sizeof junk) == 0, "%s", kiln_client_error(c));
	for (int i = 0; i < 50 && kiln_client_pending(c); i++) {
		struct pollfd p = { kiln_client_fd(c), POLLOUT, 0 };
		if (poll(&p, 1, 20) > 0)
			kiln_client_io(c, p.revents);
	}
	kiln_client_free(c);
	for (int i = 0; i < 300 && kill((pid_t)pid, 0) == 0; i++)
		usleep(10000);
	T_ASSERT(kill((pid_t)pid, 0) < 0, "pid %u still runs after its client left", pid);
	return 0;
}

/* ---- backpressure -------------------------------------------------------------- */

static long proc_field(pid_t pid, const char *file, const char *key)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	FILE *f = fopen(path, "r");
	long v = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return v;
}

static int test_backpressure(void)
{
	struct kiln_client *c = client();
	const char *y[] = { "yes", "0123456789abcdef0123456789abcdef", NULL };
	struct kiln_exec_req req = { .argv = y };
	uint32_t pid;
	long rss0 = proc_field(agent_pid, "status", "VmRSS:");
	T_ASSERT(kiln_exec_start(c, &req, NULL, &pid) == 0, "%s", kiln_client_error(c));
	/* Read nothing for a while. */
	usleep(1000 * 1000);
	long w1 = proc_field((pid_t)pid, "io", "wchar: ");
	usleep(500 * 1000);
	long w2 = proc_field((pid_t)pid, "io", "wchar: ");
	long rss = proc_field(agent_pid, "status", "VmRSS:");
	T_ASSERT(w1 > 0 && w2 == w1, "yes kept writing: %ld then %ld bytes", w1, w2);
	T_ASSERT(w2 < 32l << 20, "yes wrote %ld bytes with no reader", w2);
	/* Growth, not size: a sanitized agent starts larger. */
	T_ASSERT(rss0 > 0 && rss > 0 && rss - rss0 < 16 * 1024, "agent RSS grew from %ld to %ld kB", rss0, rss);
	/* Now read: it flows again; then kill it. */
	struct kiln_io ev;
	uint64_t got = 0;
	while (got < (64u << 20)) {
		T_ASSERT(kiln_exec_next(c, &ev) == 0 && ev.kind == KILN_IO_STDOUT, "%s", kiln_client_error(c));
		got += ev.len;
	}
	T_ASSERT(kiln_exec_kill(c, SIGKILL) == 0, "%s", kiln_client_error(c));
	do
		T_ASSERT(kiln_exec_next(c, &ev) == 0, "%s", kiln_client_error(c));
	while (ev.kind != KILN_IO_EXIT);
	T_ASSERT(ev.signal == SIGKILL, "signal %d", ev.signal);
	T_NOTE("blocked writer after %ld bytes, agent RSS %ld -> %ld kB", w2, rss0, rss);
	kiln_client_free(c);
	return 0;
}

/* ---- files ----------------------------------------------------------------------- */

struct mem { uint8_t *p; size_t len, off; };

static ssize_t mem_source(void *ctx, void *buf, size_t cap)
{
	struct mem *m = ctx;
	size_t n = m->len - m->off < cap ? m->len - m->off : cap;
	memcpy(buf, m->p + m->off, n);
	m->off += n;
	return (ssize_t)n;
}

static int mem_sink(void *ctx, const void *d, size_t n)
{
	struct mem *m = ctx;
	if (m->off + n > m->len)
		return -EFBIG;
	memcpy(m->p + m->off, d, n);
	m->off += n;
	return 0;
}

static int count_entry(void *ctx, const struct kiln_stat *e)
{
	(*(int *)ctx)++;
	return strstr(e->name, ".kiln-") ? -EEXIST : 0;	/* temp file left over */
}

static int test_files_roundtrip(void)
{
	struct kiln_client *c = client();
	size_t size = (16u << 20) + 12345;
	struct mem src = { malloc(size), size, 0 }, dst = { malloc(size), size, 0 };
	char path[128];
	uint64_t bytes, fsize;
	uint32_t mode;
	T_ASSERT(src.p && dst.p, "malloc");
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < size; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		src.p[i] = (uint8_t)x;
	}
	snprintf(path, sizeof path, "%s/new/dir/data.bin", dir);
	T_ASSERT(kiln_write_file(c, path, 0640, 0, mem_source, &src, &bytes) == -ENOENT,
		 "write into a missing directory: %s", kiln_client_error(c));
	src.off = 0;
	T_ASSERT(kiln_write_file(c, path, 0640, KILN_WRITE_MKDIRS, mem_source, &src, &bytes) == 0,
		 "%s", kiln_client_error(c));
	T_ASSERT(bytes == size, "wrote %llu", (unsigned long long)bytes);
	T_ASSERT(kiln_read_file(c, path, 0, UINT64_MAX, mem_sink, &dst, &fsize, &mode, &bytes) == 0,
		 "%s", kiln_client_error(c));
	T_ASSERT(bytes == size && fsize == size && !memcmp(src.p, dst.p, size), "content differs");
	T_ASSERT((mode & 07777) == 0640 && S_ISREG(mode), "mode %o", mode);
	/* A range. */
	dst.off = 0;
	T_ASSERT(kiln_read_file(c, path, 1000, 5000, mem_sink, &dst, NULL, NULL, &bytes) == 0 &&
		 bytes == 5000 && !memcmp(dst.p, src.p + 1000, 5000), "range read");
	/* Replace: same path, new content, no temp file left behind. */
	src.len = 10;
	src.off = 0;
	T_ASSERT(kiln_write_file(c, path, 0600, 0, mem_source, &src, &bytes) == 0, "%s", kiln_client_error(c));
	struct kiln_stat st;
	T_ASSERT(kiln_stat(c, path, 0, &st) == 0 && st.size == 10 && (st.mode & 0777) == 0600,
		 "after replace: size %llu mode %o", (unsigned long long)st.size, st.mode);
	int n = 0;
	char d[128];
	snprintf(d, sizeof d, "%s/new/dir", dir);
	T_ASSERT(kiln_list(c, d, 1, count_entry, &n, NULL) == 0 && n == 1, "%d entries: %s", n, kiln_client_error(c));
	/* NOREPLACE */
	src.off = 0;
	T_ASSERT(kiln_write_file(c, path, 0600, KILN_WRITE_NOREPLACE, mem_source, &src, NULL) == -EEXIST,
		 "NOREPLACE over an existing file");
	/* Errors name the path. */
	T_ASSERT(kiln_read_file(c, d, 0, UINT64_MAX, mem_sink, &dst, NULL, NULL, NULL) == -EISDIR &&
		 strstr(kiln_client_error(c), d), "read of a directory: %s", kiln_client_error(c));
	T_ASSERT(kiln_read_file(c, "/no/such", 0, UINT64_MAX, mem_sink, &dst, NULL, NULL, NULL) == -ENOENT &&
		 strstr(kiln_client_error(c), "/no/such"), "read missing: %s", kiln_client_error(c));
	/* A sink that gives up cancels the transfer; the connection lives on. */
	dst.len = 100000;
	dst.off = 0;
	src.len = size;
	src.off = 0;
	T_ASSERT(kiln_write_file(c, path, 0600, 0, mem_source, &src, NULL) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_read_file(c, path, 0, UINT64_MAX, mem_sink, &dst, NULL, NULL, NULL) == -EFBIG, "sink error");
	T_ASSERT(kiln_ping(c) == 0, "after cancel: %s", kiln_client_error(c));
	free(src.p);
	free(dst.p);
	kiln_client_free(c);
	return 0;
}

static int test_write_enospc_midway(void)
{
	struct kiln_client *c = client();
	char m[128], path[160];
	snprintf(m, sizeof m, "%s/small", dir);
	mkdir(m, 0755);
	T_ASSERT(mount("tmpfs", m, "tmpfs", 0, "size=1m") == 0, "mount a 1 MiB tmpfs: %s", strerror(errno));
	tmpfs_mounted = true;
	snprintf(path, sizeof path, "%s/f", m);
	size_t size = 8u << 20;
	struct mem src = { calloc(1, size), size, 0 };
	int rc = kiln_write_file(c, path, 0644, 0, mem_source, &src, NULL);
	T_ASSERT(rc == -ENOSPC && strstr(kiln_client_error(c), path), "rc %d: %s", rc, kiln_client_error(c));
	T_ASSERT(src.off < size, "the client sent all %zu bytes despite the early error", size);
	T_ASSERT(kiln_ping(c) == 0, "after ENOSPC: %s", kiln_client_error(c));
	int n = 0;
	T_ASSERT(kiln_list(c, m, 1, count_entry, &n, NULL) == 0 && n == 0, "%d files left in the full tmpfs", n);
	free(src.p);
	umount2(m, MNT_DETACH);
	tmpfs_mounted = false;
	kiln_client_free(c);
	return 0;
}

static int test_fs_ops(void)
{
	struct kiln_client *c = client();
	char a[128], b[128], f[160];
	struct kiln_stat st;
	int rc;

	snprintf(a, sizeof a, "%s/ops/x/y/z", dir);
	T_ASSERT(kiln_mkdir(c, a, 0755, 0) == -ENOENT, "mkdir without -p of a deep path");
	T_ASSERT(kiln_mkdir(c, a, 0700, KILN_MKDIR_PARENTS) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_mkdir(c, a, 0700, KILN_MKDIR_PARENTS) == 0, "mkdir -p of an existing dir");
	T_ASSERT(kiln_mkdir(c, a, 0700, 0) == -EEXIST, "mkdir of an existing dir");
	T_ASSERT(kiln_stat(c, a, 0, &st) == 0 && S_ISDIR(st.mode) && (st.mode & 0777) == 0700,
		 "mode %o (umask must not apply)", st.mode);
	snprintf(f, sizeof f, "%s/file", a);
	struct mem src = { (uint8_t *)"hi", 2, 0 };
	T_ASSERT(kiln_write_file(c, f, 0644, 0, mem_source, &src, NULL) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_chmod(c, f, 0600) == 0 && kiln_stat(c, f, 0, &st) == 0 && (st.mode & 0777) == 0600, "chmod");
	int n = 0;
	snprintf(b, sizeof b, "%s/ops", dir);
	T_ASSERT(kiln_list(c, b, 1, count_entry, &n, NULL) == 0 && n == 1, "depth 1: %d", n);
	n = 0;
	T_ASSERT(kiln_list(c, b, 10, count_entry, &n, NULL) == 0 && n == 4, "depth 10: %d", n);
	T_ASSERT(kiln_list(c, f, 1, count_entry, &n, NULL) == -ENOTDIR, "list of a file");
	/* rename, like rename(2) */
	char g[160];
	snprintf(g, sizeof g, "%s/renamed", b);
	T_ASSERT(kiln_rename(c, f, g, 0) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_stat(c, f, 0, &st) == -ENOENT && strstr(kiln_client_error(c), f), "old name: %s", kiln_client_error(c));
	T_ASSERT(kiln_stat(c, g, 0, &st) == 0 && st.size == 2, "new name");
	T_ASSERT(kiln_rename(c, f, g, 0) == -ENOENT, "rename of a missing file");
	/* symlinks are reported, not followed, with NOFOLLOW */
	char l[160];
	snprintf(l, sizeof l, "%s/link", b);
	T_ASSERT(symlink("renamed", l) == 0, "symlink");
	T_ASSERT(kiln_stat(c, l, KILN_STAT_NOFOLLOW, &st) == 0 && S_ISLNK(st.mode) && !strcmp(st.link, "renamed"),
		 "lstat: mode %o link '%s'", st.mode, st.link);
	T_ASSERT(kiln_stat(c, l, 0, &st) == 0 && S_ISREG(st.mode), "stat follows");
	/* remove, like rm / rm -r / rm -f */
	snprintf(a, sizeof a, "%s/ops/x", dir);
	rc = kiln_remove(c, a, 0);
	T_ASSERT(rc == -ENOTEMPTY && strstr(kiln_client_error(c), a), "rm of a full dir: %d %s", rc, kiln_client_error(c));
	T_ASSERT(kiln_remove(c, a, KILN_REMOVE_RECURSIVE) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_stat(c, a, 0, &st) == -ENOENT, "still there after rm -r");
	T_ASSERT(kiln_remove(c, a, 0) == -ENOENT && strstr(kiln_client_error(c), a), "rm missing: %s", kiln_client_error(c));
	T_ASSERT(kiln_remove(c, a, KILN_REMOVE_FORCE) == 0, "rm -f missing");
	T_ASSERT(kiln_remove(c, l, 0) == 0 && kiln_stat(c, g, 0, &st) == 0, "rm of a symlink removed its target");
	/* paths are literal: no globbing, no expansion */
	T_ASSERT(kiln_stat(c, "/tm*", 0, &st) == -ENOENT, "glob expanded");
	T_ASSERT(kiln_stat(c, "$HOME", 0, &st) == -ENOENT, "variable expanded");
	kiln_client_free(c);
	return 0;
}

/* ---- built-ins (copy, tar), files as a user ------------------------------------ */

/* Run a built-in with binary stdin; r gets its output and exit. */
static int run_builtin(struct run *r, const char *const *argv, const void *in, size_t inlen)
{
	struct kiln_client *c = client();
	struct kiln_exec_req req = { .argv = argv, .flags = KILN_EXEC_BUILTIN | (in ? KILN_EXEC_STDIN : 0) };
	memset(r, 0, sizeof *r);
	if (!c)
		return -ENOTCONN;
	int rc = kiln_exec_start(c, &req, NULL, NULL);
	if (rc == 0 && in) {
		rc = inlen ? kiln_exec_stdin(c, in, inlen) : 0;
		if (rc == 0)
			rc = kiln_exec_eof(c);
	}
	if (rc == 0)
		rc = collect(c, r);
	if (rc < 0)
		snprintf(r->err, sizeof r->err, "%s", kiln_client_error(c));
	kiln_client_free(c);
	return rc;
}

/* A tar member header (ustar), with data padded to a block. */
static size_t tar_member(uint8_t *out, const char *name, char type, const char *link, const char *data)
{
	size_t len = data ? strlen(data) : 0;
	memset(out, 0, 512);
	memcpy(out, name, strlen(name));
	snprintf((char *)out + 100, 8, "%07o", 0644);
	snprintf((char *)out + 108, 8, "%07o", 0);
	snprintf((char *)out + 116, 8, "%07o", 0);
	snprintf((char *)out + 124, 12, "%011zo", len);
	snprintf((char *)out + 136, 12, "%011o", 0);
	out[156] = (uint8_t)type;
	if (link)
		memcpy(out + 157, link, strlen(link));
	memcpy(out + 257, "ustar", 6);
	memcpy(out + 263, "00", 2);
	memset(out + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += out[i];
	snprintf((char *)out + 148, 8, "%06o", sum);
	size_t n = 512;
	if (len) {
		memset(out + n, 0, (len + 511) / 512 * 512);
		memcpy(out + n, data, len);
		n += (len + 511) / 512 * 512;
	}
	return n;
}

static int test_builtin_copy(void)
{
	static struct run r;
	char src[128], dst[128], into[160], cmd[600];
	snprintf(src, sizeof src, "%s/cp-src", dir);
	snprintf(dst, sizeof dst, "%s/cp-dst", dir);
	snprintf(cmd, sizeof cmd, "mkdir -p %s/sub && printf hello > %s/a && chmod 640 %s/a && "
		 "printf deep > %s/sub/b && ln -s a %s/link", src, src, src, src, src);
	T_ASSERT(system(cmd) == 0, "fixture");
	const char *cp[] = { "copy", src, dst, "1", "0", NULL };
	T_ASSERT(run_builtin(&r, cp, NULL, 0) == 0 && r.exit.code == 0, "copy: %d %s", r.exit.code, r.err);
	char p[200], buf[16] = "";
	struct stat st;
	snprintf(p, sizeof p, "%s/a", dst);
	FILE *f = fopen(p, "r");
	T_ASSERT(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "hello"), "content '%s'", buf);
	fclose(f);
	T_ASSERT(stat(p, &st) == 0 && (st.st_mode & 0777) == 0640, "mode %o", st.st_mode);
	snprintf(p, sizeof p, "%s/link", dst);
	T_ASSERT(lstat(p, &st) == 0 && S_ISLNK(st.st_mode), "symlink kept");
	snprintf(p, sizeof p, "%s/sub/b", dst);
	T_ASSERT(stat(p, &st) == 0 && st.st_size == 4, "sub/b");
	/* errors: exists, into itself, missing source, a directory without recursive */
	T_ASSERT(run_builtin(&r, cp, NULL, 0) == 0 && r.exit.code == EEXIST && strstr(r.err, "exists"),
		 "exists: %d %s", r.exit.code, r.err);
	snprintf(into, sizeof into, "%s/sub/again", src);
	const char *self[] = { "copy", src, into, "1", "0", NULL };
	T_ASSERT(run_builtin(&r, self, NULL, 0) == 0 && r.exit.code == EINVAL && strstr(r.err, "into itself"),
		 "into itself: %d %s", r.exit.code, r.err);
	const char *missing[] = { "copy", "/no/such/src", into, "1", "0", NULL };
	T_ASSERT(run_builtin(&r, missing, NULL, 0) == 0 && r.exit.code == ENOENT, "missing: %d %s", r.exit.code, r.err);
	const char *norec[] = { "copy", src, into, "0", "0", NULL };
	T_ASSERT(run_builtin(&r, norec, NULL, 0) == 0 && r.exit.code == EISDIR, "not recursive: %d", r.exit.code);
	/* replace swaps the whole tree in */
	snprintf(cmd, sizeof cmd, "printf changed > %s/a", src);
	T_ASSERT(system(cmd) == 0, "change");
	const char *rep[] = { "copy", src, dst, "1", "1", NULL };
	T_ASSERT(run_builtin(&r, rep, NULL, 0) == 0 && r.exit.code == 0, "replace: %s", r.err);
	snprintf(p, sizeof p, "%s/a", dst);
	T_ASSERT(stat(p, &st) == 0 && st.st_size == 7, "replaced size %ld", (long)st.st_size);
	const char *unknown[] = { "no-such-builtin", NULL };
	T_ASSERT(run_builtin(&r, unknown, NULL, 0) == -EINVAL, "unknown built-in");
	return 0;
}

static int test_builtin_tar(void)
{
	static struct run r, r2;
	static uint8_t t[16384];
	char src[128], out[128], cmd[700];
	snprintf(src, sizeof src, "%s/cp-src", dir);	/* from test_builtin_copy */
	snprintf(out, sizeof out, "%s/untar/deep", dir);
	const char *create[] = { "tar-create", src, NULL };
	T_ASSERT(run_builtin(&r, create, NULL, 0) == 0 && r.exit.code == 0, "tar-create: %s", r.err);
	T_ASSERT(r.nout >= 1024 && r.nout % 512 == 0, "tar of %zu bytes", r.nout);
	/* tar itself can read it */
	char tf[160];
	snprintf(tf, sizeof tf, "%s/x.tar", dir);
	FILE *f = fopen(tf, "w");
	T_ASSERT(f && fwrite(r.out, 1, r.nout, f) == r.nout, "write tar");
	fclose(f);
	snprintf(cmd, sizeof cmd, "tar -tf %s | sort | tr '\\n' ' '", tf);
	f = popen(cmd, "r");
	char list[256] = "";
	T_ASSERT(f && fgets(list, sizeof list, f), "tar -t");
	pclose(f);
	T_ASSERT(!strcmp(list, "a link sub/ sub/b "), "tar -t: '%s'", list);
	/* and back: extracted into a new directory (made with parents) */
	const char *extract[] = { "tar-extract", out, NULL };
	T_ASSERT(run_builtin(&r2, extract, r.out, r.nout) == 0 && r2.exit.code == 0, "extract: %s", r2.err);
	snprintf(cmd, sizeof cmd, "diff -r %s %s && test -L %s/link && test \"$(stat -c %%a %s/a)\" = 640",
		 src, out, out, out);
	T_ASSERT(system(cmd) == 0, "the extracted tree differs");
	/* hostile input: each refused with the entry named, nothing outside */
	struct { const char *name; char type; const char *link; const char *name2; const char *want; } bad[] = {
		{ "../escape", '0', NULL, NULL, "'..'" },
		{ "/etc/escape", '0', NULL, NULL, "absolute" },
		{ "lnk", '2', "/tmp", "lnk/escape", "symlink" },
		{ "dev", '3', NULL, NULL, "device" },
		{ "a/../../escape", '5', NULL, NULL, "'..'" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		size_t n = tar_member(t, bad[i].name, bad[i].type, bad[i].link, bad[i].type == '0' ? "x" : NULL);
		if (bad[i].name2)
			n += tar_member(t + n, bad[i].name2, '0', NULL, "pwned");
		memset(t + n, 0, 1024);
		n += 1024;
		T_ASSERT(run_builtin(&r2, extract, t, n) == 0, "run %zu", i);
		T_ASSERT(r2.exit.code == EINVAL && strstr(r2.err, bad[i].want), "case %zu (%s): %d '%s'", i,
			 bad[i].name, r2.exit.code, r2.err);
	}
	T_ASSERT(access("/tmp/escape", F_OK) < 0 && access("/etc/escape", F_OK) < 0, "escaped");
	snprintf(cmd, sizeof cmd, "%s/untar/escape", dir);
	T_ASSERT(access(cmd, F_OK) < 0, "escaped to the parent");
	/* not a tar at all; a truncated one */
	T_ASSERT(run_builtin(&r2, extract, "hello world", 11) == 0 && r2.exit.code == EINVAL, "garbage: %d", r2.exit.code);
	memset(t, 'x', 512);
	T_ASSERT(run_builtin(&r2, extract, t, 512) == 0 && r2.exit.code == EINVAL && strstr(r2.err, "checksum"),
		 "bad checksum: %d %s", r2.exit.code, r2.err);
	size_t n = tar_member(t, "big", '0', NULL, "0123456789");
	T_ASSERT(run_builtin(&r2, extract, t, n - 512) == 0 && r2.exit.code == EINVAL && strstr(r2.err, "ends"),
		 "truncated: %d %s", r2.exit.code, r2.err);
	return 0;
}

static int test_files_as_user(void)
{
	struct kiln_client *c = client();
	char priv[128], pub[128], f[200];
	struct kiln_stat st;
	uint8_t buf[16];
	snprintf(priv, sizeof priv, "%s/private", dir);
	snprintf(pub, sizeof pub, "%s/public", dir);
	T_ASSERT(mkdir(priv, 0700) == 0 && mkdir(pub, 0777) == 0 && chmod(pub, 0777) == 0, "fixture");
	snprintf(f, sizeof f, "%s/secret", priv);
	struct mem src = { (uint8_t *)"s3cret", 6, 0 };
	T_ASSERT(kiln_write_file(c, f, 0600, 0, mem_source, &src, NULL) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_client_set_user(c, "65534:65534") == 0, "set user");
	struct mem sink = { buf, sizeof buf, 0 };
	int rc = kiln_read_file(c, f, 0, UINT64_MAX, mem_sink, &sink, NULL, NULL, NULL);
	T_ASSERT(rc == -EACCES, "read of a root-only file as nobody: %d %s", rc, kiln_client_error(c));
	snprintf(f, sizeof f, "%s/mine", pub);
	src.off = 0;
	T_ASSERT(kiln_write_file(c, f, 0644, 0, mem_source, &src, NULL) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_stat(c, f, 0, &st) == 0 && st.uid == 65534 && st.gid == 65534, "owner %u:%u", st.uid, st.gid);
	snprintf(f, sizeof f, "%s/newdir", priv);
	T_ASSERT(kiln_mkdir(c, f, 0755, 0) == -EACCES, "mkdir in a root-only directory");
	T_ASSERT(kiln_client_set_user(c, "no-such-user") == 0, "set user");
	rc = kiln_stat(c, pub, 0, &st);
	T_ASSERT(rc == -EINVAL && strstr(kiln_client_error(c), "no-such-user"), "unknown user: %d %s", rc,
		 kiln_client_error(c));
	/* back to the agent's own identity: root reads it again */
	T_ASSERT(kiln_client_set_user(c, NULL) == 0, "unset");
	snprintf(f, sizeof f, "%s/secret", priv);
	sink.off = 0;
	T_ASSERT(kiln_read_file(c, f, 0, UINT64_MAX, mem_sink, &sink, NULL, NULL, NULL) == 0, "%s", kiln_client_error(c));
	/* the agent's identity was restored for other connections too */
	struct kiln_client *c2 = client();
	T_ASSERT(kiln_stat(c2, f, 0, &st) == 0, "%s", kiln_client_error(c2));
	kiln_client_free(c2);
	kiln_client_free(c);
	return 0;
}

/* ---- watch ----------------------------------------------------------------------- */

static int test_watch(void)
{
	struct kiln_client *c = client(), *w = client();
	char d[128], cmd[512];
	snprintf(d, sizeof d, "%s/watched", dir);
	mkdir(d, 0755);
	mkdir(strcat(strcpy(cmd, d), "/sub"), 0755);
	T_ASSERT(kiln_watch_start(w, d, KILN_WATCH_RECURSIVE) == 0, "%s", kiln_client_error(w));
	static struct run r;
	snprintf(cmd, sizeof cmd, "cd %s && echo a > f && echo b >> f && rm f && echo c > sub/g && mkdir new && sleep 0.2 && echo d > new/h", d);
	const char *argv[] = { "sh", "-c", cmd, NULL };
	T_ASSERT(run_argv(&r, argv, 0, NULL) == 0 && r.exit.code == 0, "%s", r.err);
	bool created = false, modified = false, deleted = false, sub = false, newdir = false;
	int order_ok = 1;
	for (int i = 0; i < 64 && !(created && modified && deleted && sub && newdir); i++) {
		uint32_t ev;
		char name[256];
		int rc = kiln_watch_next(w, &ev, name, sizeof name);
		T_ASSERT(rc == 1, "watch_next: %d %s", rc, kiln_client_error(w));
		if (!strcmp(name, "f")) {
			if (ev & KILN_EV_CREATE)
				created = true;
			if (ev & KILN_EV_MODIFY)
				modified = true, order_ok &= created;
			if (ev & KILN_EV_DELETE)
				deleted = true, order_ok &= modified;
		}
		if (!strcmp(name, "sub/g") && (ev & KILN_EV_CREATE))
			sub = true;
		if (!strcmp(name, "new/h") && (ev & KILN_EV_CREATE))
			newdir = true;
	}
	T_ASSERT(created && modified && deleted, "create %d modify %d delete %d", created, modified, deleted);
	T_ASSERT(order_ok, "events out of order");
	T_ASSERT(sub && newdir, "recursive: sub/g %d new/h %d", sub, newdir);
	T_ASSERT(kiln_watch_cancel(w) == 0, "%s", kiln_client_error(w));
	uint32_t ev;
	char name[256];
	int rc;
	while ((rc = kiln_watch_next(w, &ev, name, sizeof name)) == 1)
		;
	T_ASSERT(rc == 0 && kiln_ping(w) == 0, "after cancel: %s", kiln_client_error(w));
	T_ASSERT(kiln_watch_start(w, "/no/such/dir", 0) == -ENOENT && strstr(kiln_client_error(w), "/no/such/dir"),
		 "watch of a missing dir: %s", kiln_client_error(w));
	kiln_client_free(c);
	kiln_client_free(w);
	return 0;
}

/* ---- system ---------------------------------------------------------------------- */

static int test_info_resync(void)
{
	struct kiln_client *c = client();
	struct kiln_info info;
	T_ASSERT(kiln_info(c, &info) == 0, "%s", kiln_client_error(c));
	T_ASSERT(info.version == KILN_PROTO_VERSION && info.pid == (uint32_t)agent_pid && info.ncpu > 0 &&
		 info.mem_total > 0, "info: version %u pid %u", info.version, info.pid);
	struct kiln_resync r = { .identity = "sbx-1234" };
	T_ASSERT(kiln_resync(c, &r) == 0, "%s", kiln_client_error(c));
	T_ASSERT(kiln_info(c, &info) == 0 && !strcmp(info.identity, "sbx-1234"), "identity '%s'", info.identity);
	struct kiln_resync t = { .set_time = true, .time_ns = 1 };
	T_ASSERT(kiln_resync(c, &t) == -EPERM, "setting the clock outside a guest was allowed");
	uint8_t big[5000] = { 0 };
	struct kiln_resync e = { .entropy = big, .entropy_len = sizeof big };
	T_ASSERT(kiln_resync(c, &e) == -EINVAL, "5000 bytes of entropy accepted");
	kiln_client_free(c);
	return 0;
}

/* ---- malformed input ----------------------------------------------------------------- */

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	strcpy(sa.sun_path, sock);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read one frame within 5 s: its type (and ERRNO for ERROR), 0 on EOF,
 * -1 on timeout. */
static int raw_reply(int fd, uint32_t *err)
{
	/* Two replies can arrive in one read (an ACCEPT and the ERROR after
	 * it): what follows the frame returned is kept for the next call on
	 * the same connection. */
	static uint8_t pending[4096];
	static size_t npending;
	static int pending_fd = -1;
	uint8_t buf[4096];
	size_t have = 0;
	if (fd == pending_fd) {
		memcpy(buf, pending, npending);
		have = npending;
	}
	npending = 0;
	pending_fd = fd;
	for (;;) {
		if (have >= KILN_HDR_SIZE) {
			uint32_t len = kiln_le32(buf);
			if (len > sizeof buf - KILN_HDR_SIZE)
				return -2;
			if (have >= KILN_HDR_SIZE + len) {
				struct kiln_msg m;
				kiln_msg_parse(&m, buf[5], buf + KILN_HDR_SIZE, len, NULL, 0);
				*err = kiln_msg_u32(&m, KT_ERRNO, 0);
				npending = have - (KILN_HDR_SIZE + len);
				memcpy(pending, buf + KILN_HDR_SIZE + len, npending);
				return buf[5];
			}
		}
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 5000) <= 0)
			return -1;
		ssize_t n = read(fd, buf + have, sizeof buf - have);
		if (n <= 0)
			return 0;
		have += (size_t)n;
	}
}

static int raw_send(int fd, const void *p, size_t n)
{
	return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static int test_malformed_frames(void)
{
	uint8_t f[64];
	uint32_t err = 0;
	int fd, t = 0;

	/* A long-running exec elsewhere must not notice any of this. */
	struct kiln_client *bystander = client();
	const char *s[] = { "sh", "-c", "sleep 1; echo survived", NULL };
	struct kiln_exec_req req = { .argv = s };
	T_ASSERT(kiln_exec_start(bystander, &req, NULL, NULL) == 0, "%s", kiln_client_error(bystander));

	/* Bad fields: ERROR, and the connection goes on. */
	fd = raw_connect();
	kiln_hdr_encode(f, KILN_STAT, 9);
	memcpy(f + 8, (uint8_t[]){ KT_PATH, 0, 200, 0, 0, 0, 'a', 'b', 'c' }, 9);
	T_ASSERT(raw_send(fd, f, 17) == 0 && (t = raw_reply(fd, &err)) == KILN_ERROR && err == EBADMSG,
		 "truncated field: reply %d errno %u", t, err);
	kiln_hdr_encode(f, KILN_PING, 0);
	T_ASSERT(raw_send(fd, f, 8) == 0 && raw_reply(fd, &err) == KILN_PONG, "ping after a bad frame");
	/* Unknown request type. */
	kiln_hdr_encode(f, 0x3f, 0);
	T_ASSERT(raw_send(fd, f, 8) == 0 && raw_reply(fd, &err) == KILN_ERROR && err == EOPNOTSUPP, "unknown type");
	/* Stray DATA on an idle connection is dropped, not answered. */
	kiln_hdr_encode(f, KILN_DATA, 3);
	memcpy(f + 8, "xyz", 3);
	kiln_hdr_encode(f + 11, KILN_PING, 0);
	T_ASSERT(raw_send(fd, f, 19) == 0 && raw_reply(fd, &err) == KILN_PONG, "stray DATA answered");
	/* Oversized: ERROR, then the agent hangs up. */
	kiln_hdr_encode(f, KILN_WRITE, KILN_FRAME_MAX + 1);
	T_ASSERT(raw_send(fd, f, 8) == 0 && raw_reply(fd, &err) == KILN_ERROR && err == EMSGSIZE, "oversized");
	T_ASSERT(raw_reply(fd, &err) == 0, "connection left open after an oversized frame");
	close(fd);
	/* Another version. */
	fd = raw_connect();
	kiln_hdr_encode(f, KILN_PING, 0);
	f[4] = 9;
	T_ASSERT(raw_send(fd, f, 8) == 0 && raw_reply(fd, &err) == KILN_ERROR && err == EPROTO, "version 9");
	T_ASSERT(raw_reply(fd, &err) == 0, "connection left open after version 9");
	close(fd);
	/* A request in the middle of an op. */
	fd = raw_connect();
	struct buf b = { 0 };
	struct kiln_fb fb;
	kiln_fb_begin(&fb, &b, 1 << 20, KILN_WATCH);
	kiln_fb_str(&fb, KT_PATH, dir);
	kiln_fb_end(&fb);
	kiln_fb_begin(&fb, &b, 1 << 20, KILN_PING);
	kiln_fb_end(&fb);
	T_ASSERT(raw_send(fd, buf_data(&b), buf_used(&b)) == 0 && raw_reply(fd, &err) == KILN_ACCEPT, "watch");
	T_ASSERT(raw_reply(fd, &err) == KILN_ERROR && err == EPROTO, "PING during WATCH: errno %u", err);
	buf_free(&b);
	close(fd);
	/* Half a frame, then gone. */
	fd = raw_connect();
	kiln_hdr_encode(f, KILN_STAT, 100);
	T_ASSERT(raw_send(fd, f, 20) == 0, "send");
	close(fd);
	/* 200 connections opened and dropped at once. */
	int fds[200];
	for (int i = 0; i < 200; i++)
		fds[i] = raw_connect();
	for (int i = 0; i < 200; i++)
		if (fds[i] >= 0)
			close(fds[i]);

	static struct run r;
	memset(&r, 0, sizeof r);
	T_ASSERT(collect(bystander, &r) == 0 && !strcmp(r.out, "survived\n"), "bystander: '%s' %s", r.out,
		 kiln_client_error(bystander));
	kiln_client_free(bystander);
	T_ASSERT(agent_alive(), "the agent is gone");
	return 0;
}

/* ---- the VMM's vsock bridge -------------------------------------------------------
 * kiln-vmm has no virtio-vsock yet, so this stands in for its bridge with
 * the same handshake (Firecracker's): a client connects to a Unix socket,
 * sends "CONNECT <port>\n", gets "OK <hostport>\n" and then talks to the
 * guest. Here "the guest" is the real agent on its Unix socket; a port
 * other than 52 gets the connection closed, as a VMM does when nothing
 * listens on that port. */

struct bridge { int lfd; };

static void pump_fds(int a, int b)
{
	struct pollfd p[2] = { { a, POLLIN, 0 }, { b, POLLIN, 0 } };
	char buf[65536];
	for (;;) {
		if (poll(p, 2, -1) < 0)
			return;
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = read(p[i].fd, buf, sizeof buf);
			if (n <= 0)
				return;
			if (write(p[1 - i].fd, buf, (size_t)n) != n)
				return;
		}
	}
}

static void *bridge_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, agent = -1;
	char line[64];
	size_t n = 0;
	while (n + 1 < sizeof line && read(fd, line + n, 1) == 1 && line[n] != '\n')
		n++;
	line[n] = 0;
	unsigned port;
	if (sscanf(line, "CONNECT %u", &port) == 1 && port == KILN_VSOCK_PORT) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		strcpy(sa.sun_path, sock);
		agent = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (agent >= 0 && connect(agent, (struct sockaddr *)&sa, sizeof sa) == 0 &&
		    write(fd, "OK 1073741824\n", 14) == 14)
			pump_fds(fd, agent);
	}
	if (agent >= 0)
		close(agent);
	close(fd);
	return NULL;
}

static void *bridge_main(void *arg)
{
	struct bridge *b = arg;
	for (;;) {
		int fd = accept4(b->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return NULL;
		pthread_t t;
		if (pthread_create(&t, NULL, bridge_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
}

static int test_vsock_bridge(void)
{
	static struct bridge b;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/vm.sock", dir);
	b.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(b.lfd >= 0 && bind(b.lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(b.lfd, 16) == 0,
		 "bridge socket: %s", strerror(errno));
	pthread_t t;
	T_ASSERT(pthread_create(&t, NULL, bridge_main, &b) == 0, "bridge thread");
	pthread_detach(t);

	struct kiln_client *c = kiln_client_new();
	kiln_client_set_timeout(c, 10000);
	T_ASSERT(kiln_connect_bridge(c, sa.sun_path, KILN_VSOCK_PORT) == 0, "%s", kiln_client_error(c));
	static struct run r;
	const char *e[] = { "echo", "through the bridge", NULL };
	struct kiln_exec_req req = { .argv = e };
	memset(&r, 0, sizeof r);
	T_ASSERT(kiln_exec_start(c, &req, NULL, NULL) == 0 && collect(c, &r) == 0, "%s", kiln_client_error(c));
	T_ASSERT(!strcmp(r.out, "through the bridge\n"), "got '%s'", r.out);
	int rc = kiln_connect_bridge(c, sa.sun_path, 53);
	T_ASSERT(rc == -ECONNREFUSED && strstr(kiln_client_error(c), "port 53"), "port 53: %d %s", rc,
		 kiln_client_error(c));
	rc = kiln_connect_bridge(c, "/no/such.sock", KILN_VSOCK_PORT);
	T_ASSERT(rc == -ENOENT && strstr(kiln_client_error(c), "/no/such.sock"), "missing socket: %s",
		 kiln_client_error(c));
	kiln_client_free(c);
	return 0;
}

/* ---- CONNECT ------------------------------------------------------------ */

/* A TCP server on 127.0.0.1 for one connection, in a thread: mode 'e'
 * echoes until the client's end of input, then closes; mode 'h' sends a
 * banner, half-closes, and then keeps what the client sends until its end. */
struct tcp_peer {
	int lfd;
	unsigned port;
	char mode;
	char got[256];
	size_t ngot;
	bool saw_eof;
	pthread_t th;
};

static void *tcp_peer_main(void *arg)
{
	struct tcp_peer *tp = arg;
	int fd = accept(tp->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	char buf[65536];
	ssize_t n;
	if (tp->mode == 'h') {
		n = write(fd, "banner", 6);
		shutdown(fd, SHUT_WR);
	}
	while ((n = read(fd, buf, sizeof buf)) > 0) {
		if (tp->mode == 'e') {
			for (ssize_t off = 0, w; off < n; off += w)
				if ((w = write(fd, buf + off, (size_t)(n - off))) <= 0)
					goto out;
		} else if (tp->ngot + (size_t)n < sizeof tp->got) {
			memcpy(tp->got + tp->ngot, buf, (size_t)n);
			tp->ngot += (size_t)n;
		}
	}
	tp->saw_eof = n == 0;
out:
	close(fd);
	return NULL;
}

static int tcp_peer_start(struct tcp_peer *tp, char mode)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	memset(tp, 0, sizeof *tp);
	tp->mode = mode;
	tp->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (tp->lfd < 0 || bind(tp->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    listen(tp->lfd, 4) < 0 || getsockname(tp->lfd, (struct sockaddr *)&sa, &len) < 0)
		return -errno;
	tp->port = ntohs(sa.sin_port);
	return pthread_create(&tp->th, NULL, tcp_peer_main, tp) ? -EAGAIN : 0;
}

static void tcp_peer_stop(struct tcp_peer *tp)
{
	pthread_join(tp->th, NULL);
	close(tp->lfd);
}

/* CONNECT, then the socket as a blocking byte stream. */
static int tcp_through_agent(unsigned port, void **early, size_t *n, char *err, size_t errlen)
{
	struct kiln_client *c = client();
	int fd = -1;
	if (!c)
		return -1;
	if (kiln_tcp_connect(c, NULL, port) < 0 || kiln_client_detach(c, &fd, early, n) < 0) {
		snprintf(err, errlen, "%s", kiln_client_error(c));
		fd = -1;
	}
	kiln_client_free(c);
	if (fd >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* Echo 3 MiB through the pipe while reading the echo at the same time
 * (more than the pipe's buffers hold, so backpressure is exercised), then
 * a half-close from our side must reach the server, whose close then
 * reaches us as the end of the stream. */
static void *send_all_then_shut(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static char chunk[65536];
	for (size_t i = 0; i < sizeof chunk; i++)
		chunk[i] = (char)('a' + i % 26);
	for (int i = 0; i < 48; i++)
		for (size_t off = 0; off < sizeof chunk;) {
			ssize_t w = write(fd, chunk + off, sizeof chunk - off);
			if (w <= 0)
				return (void *)1;
			off += (size_t)w;
		}
	shutdown(fd, SHUT_WR);
	return NULL;
}

static int test_connect_echo(void)
{
	struct tcp_peer tp;
	char err[1024] = "";
	void *early;
	size_t n;
	T_ASSERT(tcp_peer_start(&tp, 'e') == 0, "tcp server: %s", strerror(errno));
	int fd = tcp_through_agent(tp.port, &early, &n, err, sizeof err);
	T_ASSERT(fd >= 0, "connect to %u: %s", tp.port, err);
	pthread_t th;
	T_ASSERT(pthread_create(&th, NULL, send_all_then_shut, (void *)(intptr_t)fd) == 0, "thread");
	uint64_t total = n, bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += ((char *)early)[i] != (char)('a' + i % 26);
	free(early);
	char buf[65536];
	ssize_t r;
	while ((r = read(fd, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < r; i++)
			bad += buf[i] != (char)('a' + (total + (uint64_t)i) % 65536 % 26);
		total += (uint64_t)r;
	}
	void *res;
	pthread_join(th, &res);
	close(fd);
	tcp_peer_stop(&tp);
	T_ASSERT(res == NULL, "sending failed");
	T_ASSERT(r == 0 && total == 48u * 65536 && bad == 0, "echo: %llu bytes back (%llu wrong), read %zd",
		 (unsigned long long)total, (unsigned long long)bad, r);
	T_ASSERT(agent_alive(), "agent gone");
	return 0;
}

/* The guest side ends first: we read its banner and the end of the
 * stream, and can still send, which the server receives up to our end. */
static int test_connect_halfclose(void)
{
	struct tcp_peer tp;
	char err[1024] = "", buf[64];
	void *early;
	size_t n;
	T_ASSERT(tcp_peer_start(&tp, 'h') == 0, "tcp server: %s", strerror(errno));
	int fd = tcp_through_agent(tp.port, &early, &n, err, sizeof err);
	T_ASSERT(fd >= 0, "connect to %u: %s", tp.port, err);
	size_t got = n < sizeof buf ? n : sizeof buf - 1;
	memcpy(buf, early ? early : "", got);
	free(early);
	ssize_t r;
	while (got < sizeof buf - 1 && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = 0;
	T_ASSERT(!strcmp(buf, "banner"), "read '%s' before the end", buf);
	T_ASSERT(write(fd, "after your end", 14) == 14, "write after the server's end: %s", strerror(errno));
	shutdown(fd, SHUT_WR);
	tcp_peer_stop(&tp);
	close(fd);
	T_ASSERT(tp.saw_eof && tp.ngot == 14 && !memcmp(tp.got, "after your end", 14),
		 "server got %zu bytes '%.*s', end %d", tp.ngot, (int)tp.ngot, tp.got, tp.saw_eof);
	return 0;
}

/* A port nobody listens on is ERROR ECONNREFUSED, and the connection
 * stays usable; bad requests are EINVAL. */
static int test_connect_errors(void)
{
	struct kiln_client *c = client();
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	T_ASSERT(c && s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 &&
		 getsockname(s, (struct sockaddr *)&sa, &len) == 0, "setup");
	close(s);	/* bound, never listened: refused */
	unsigned port = ntohs(sa.sin_port);
	int rc = kiln_tcp_connect(c, NULL, port);
	T_ASSERT(rc == -ECONNREFUSED && strstr(kiln_client_error(c), "127.0.0.1:"),
		 "closed port: %d %s", rc, kiln_client_error(c));
	T_ASSERT(kiln_ping(c) == 0, "not usable after a refused CONNECT: %s", kiln_client_error(c));
	rc = kiln_tcp_connect(c, "::1", port);
	T_ASSERT(rc == -ECONNREFUSED || rc == -EADDRNOTAVAIL || rc == -ENETUNREACH ||
		 rc == -EAFNOSUPPORT, "[::1]: %d %s", rc, kiln_client_error(c));
	rc = kiln_tcp_connect(c, NULL, 0);
	T_ASSERT(rc == -EINVAL, "port 0: %d %s", rc, kiln_client_error(c));
	rc = kiln_tcp_connect(c, NULL, 70000);
	T_ASSERT(rc == -EINVAL, "port 70000: %d %s", rc, kiln_client_error(c));
	rc = kiln_tcp_connect(c, "localhost", 80);
	T_ASSERT(rc == -EINVAL && strstr(kiln_client_error(c), "numeric"), "a name: %d %s", rc,
		 kiln_client_error(c));
	T_ASSERT(kiln_ping(c) == 0, "not usable after bad CONNECTs: %s", kiln_client_error(c));
	kiln_client_free(c);
	return 0;
}

/* Many pipes opened and dropped mid-stream, or before the server
 * answers: the agent frees them (it would run out of its 512 connection
 * slots otherwise) and keeps serving. */
static int test_connect_many(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	T_ASSERT(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 1024) == 0 &&
		 getsockname(l, (struct sockaddr *)&sa, &len) == 0, "listen: %s", strerror(errno));
	char err[1024] = "";
	for (int i = 0; i < 600; i++) {
		void *early;
		size_t n;
		int fd = tcp_through_agent(ntohs(sa.sin_port), &early, &n, err, sizeof err);
		free(early);
		T_ASSERT(fd >= 0, "pipe %d: %s", i, err);
		if (i % 2 && write(fd, "x", 1) != 1)
			T_ASSERT(0, "write to pipe %d", i);
		int a = accept(l, NULL, NULL);
		close(fd);
		if (a >= 0)
			close(a);
	}
	close(l);
	T_ASSERT(agent_alive(), "agent gone");
	return 0;
}

static int test_poweroff_stops_agent(void)
{
	struct kiln_client *c = client();
	T_ASSERT(kiln_poweroff(c, 0) == 0, "%s", kiln_client_error(c));
	kiln_client_free(c);
	int st = 0;
	for (int i = 0; i < 300; i++) {
		if (waitpid(agent_pid, &st, WNOHANG) == agent_pid) {
			agent_pid = 0;
			T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
			T_ASSERT(access(sock, F_OK) < 0, "socket file left behind");
			return 0;
		}
		usleep(10000);
	}
	T_ASSERT(0, "the agent did not exit");
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	atexit(cleanup);
	t_run("agent_start", start_agent);
	if (t_failed)
		return 1;
	T_RUN(test_exit_codes);
	T_RUN(test_stdin_cat);
	T_RUN(test_env_cwd_user);
	T_RUN(test_exec_errors);
	T_RUN(test_timeout);
	T_RUN(test_sequential_execs);
	T_RUN(test_big_stdout_and_interleave);
	T_RUN(test_merge);
	T_RUN(test_64_concurrent);
	T_RUN(test_pty);
	T_RUN(test_background_reattach);
	T_RUN(test_foreground_dies_with_client);
	T_RUN(test_client_gone_while_stdin_held);
	T_RUN(test_backpressure);
	T_RUN(test_files_roundtrip);
	T_RUN(test_write_enospc_midway);
	T_RUN(test_fs_ops);
	if (geteuid() == 0) {
		T_RUN(test_builtin_copy);
		T_RUN(test_builtin_tar);
		T_RUN(test_files_as_user);
	}
	T_RUN(test_watch);
	T_RUN(test_info_resync);
	T_RUN(test_malformed_frames);
	T_RUN(test_vsock_bridge);
	T_RUN(test_connect_echo);
	T_RUN(test_connect_halfclose);
	T_RUN(test_connect_errors);
	T_RUN(test_connect_many);
	T_RUN(test_poweroff_stops_agent);
	return t_failed ? 1 : 0;
}
