/*
 * guest_exec_run (src/host/guest_conn.c), a command run to its exit,
 * against an agent played from a script on the other end of a socket
 * pair: the frames a real agent sends, and those a hostile one could.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/proto.h"
#include "host/guest_conn.h"
#include "unit.h"

/* Frames the agent sends, in order, into one buffer. */
static struct buf script;

static void frame(uint8_t type, uint32_t code, bool with_code)
{
	struct kiln_fb fb;
	kiln_fb_begin(&fb, &script, 1u << 20, type);
	if (type == KILN_STARTED) {
		kiln_fb_u32(&fb, KT_ID, 1);
		kiln_fb_u32(&fb, KT_PID, 42);
	}
	if (with_code)
		kiln_fb_u32(&fb, KT_CODE, code);
	kiln_fb_end(&fb);
}

static void output(uint8_t type, const char *s)
{
	struct kiln_fb fb;
	kiln_fb_begin(&fb, &script, 1u << 20, type);
	kiln_fb_raw(&fb, s, strlen(s));
	kiln_fb_end(&fb);
}

struct seen {
	char text[256];
	size_t n;
	int events;
};

static int take(void *ctx, const struct guest_ev *ev)
{
	struct seen *s = ctx;
	size_t k = ev->len < sizeof s->text - 1 - s->n ? ev->len : sizeof s->text - 1 - s->n;
	memcpy(s->text + s->n, ev->data, k);
	s->n += k;
	s->text[s->n] = 0;
	s->events++;
	return 0;
}

/* Play the script (then, if hang_up, the end of the stream) and run a
 * command against it: guest_exec_run's result. */
static int play(bool hang_up, int wait_ms, struct seen *s, struct guest_ev *exit)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return -errno;
	ssize_t w = write(sv[1], script.p + script.off, buf_used(&script));
	buf_free(&script);
	if (w < 0)
		return -errno;
	if (hang_up)
		shutdown(sv[1], SHUT_WR);
	struct guest *g;
	int rc = guest_adopt(sv[0], NULL, 0, NULL, -1, &g);
	if (rc == 0) {
		struct guest_cmd c = { .shell = "true" };
		memset(s, 0, sizeof *s);
		rc = guest_exec_run(g, &c, take, s, -1, wait_ms, exit);
		guest_close(g);
	}
	close(sv[1]);
	return rc;
}

static int test_output_then_exit(void)
{
	frame(KILN_STARTED, 0, false);
	output(KILN_STDOUT, "hello ");
	output(KILN_STDERR, "world");
	frame(KILN_EXIT, 3, true);
	struct seen s;
	struct guest_ev ev;
	int rc = play(false, -1, &s, &ev);
	T_ASSERT(rc == 0, "rc %d: %s", rc, errmsg());
	T_ASSERT(ev.kind == GEV_EXIT && ev.code == 3, "exit kind %d code %d", ev.kind, ev.code);
	T_ASSERT(s.events == 2 && !strcmp(s.text, "hello world"), "%d events: '%s'", s.events, s.text);
	return 0;
}

static int test_closed_before_exit(void)
{
	frame(KILN_STARTED, 0, false);
	output(KILN_STDOUT, "partial");
	struct seen s;
	struct guest_ev ev;
	int rc = play(true, -1, &s, &ev);
	T_ASSERT(rc < 0, "a stream closed before its exit passed: code %d", ev.code);
	T_ASSERT(ev.code == -1, "exit code %d set", ev.code);
	T_ASSERT(!strcmp(s.text, "partial"), "output '%s'", s.text);
	T_NOTE("%s", errmsg());
	return 0;
}

static int test_end_is_no_exit(void)
{
	/* END is a detach's answer, not a foreground command's: a guest that
	 * sends it instead of EXIT must not pass for a command that ran. */
	frame(KILN_STARTED, 0, false);
	frame(KILN_END, 0, false);
	struct seen s;
	struct guest_ev ev;
	int rc = play(false, -1, &s, &ev);
	T_ASSERT(rc == -EIO, "rc %d (%s), code %d", rc, errmsg(), ev.code);
	T_NOTE("%s", errmsg());
	return 0;
}

static int test_silence_times_out(void)
{
	frame(KILN_STARTED, 0, false);
	struct seen s;
	struct guest_ev ev;
	int rc = play(false, 100, &s, &ev);
	T_ASSERT(rc == -ETIMEDOUT, "rc %d (%s)", rc, errmsg());
	T_NOTE("%s", errmsg());
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A relay's host that took the request and went silent (the cluster's
 * PTY that upgraded and then sent nothing for 10 minutes, session 31):
 * the start ends with ETIMEDOUT at the relay's bound. Before the bound,
 * guest_exec_start waited for STARTED forever, and so did this test. */
static int test_relay_silent_host_times_out(void)
{
	int sv[2];
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	struct guest *g;
	int rc = guest_adopt(sv[0], NULL, 0, NULL, 300, &g);
	T_ASSERT(rc == 0, "adopt: %s", errmsg());
	struct guest_cmd c = { .shell = "exec sh -l", .pty = true, .stdin_pipe = true };
	int64_t t0 = now_ms();
	rc = guest_exec_start(g, &c);
	int64_t took = now_ms() - t0;
	guest_close(g);
	close(sv[1]);
	T_ASSERT(rc == -ETIMEDOUT, "rc %d (%s) after %lld ms", rc, errmsg(), (long long)took);
	T_ASSERT(took >= 250 && took < 5000, "timed out after %lld ms, the bound is 300", (long long)took);
	T_NOTE("%s (%lld ms)", errmsg(), (long long)took);
	return 0;
}

/* The host side of a relay: read (and drop) until the API's end, wait
 * linger_ms (the host closing its guest connection), then close; with
 * linger_ms < 0 never close (a stalled host). The child's pid. */
static pid_t host_side(int fd, int linger_ms)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	char b[4096];
	while (read(fd, b, sizeof b) > 0)
		;
	if (linger_ms < 0)
		pause();
	poll(NULL, 0, linger_ms);
	(void)!write(fd, "x", 1);	/* what the guest still sent: dropped */
	close(fd);
	_exit(0);
}

/* A connection that started a background process is the process's
 * client until the agent sees it end: leaving waits for the other end
 * (a relay's host closes once its agent has), or a request after it
 * races the close. */
static int test_close_wait_waits_for_the_other_end(void)
{
	frame(KILN_STARTED, 0, false);
	int sv[2];
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	ssize_t w = write(sv[1], script.p + script.off, buf_used(&script));
	buf_free(&script);
	T_ASSERT(w > 0, "script");
	struct guest *g;
	T_ASSERT(guest_adopt(sv[0], NULL, 0, NULL, 2000, &g) == 0, "adopt: %s", errmsg());
	T_ASSERT(!guest_holds_process(g), "holds a process before any");
	struct guest_cmd c = { .shell = "sleep 100", .background = true };
	T_ASSERT(guest_exec_start(g, &c) == 0, "start: %s", errmsg());
	T_ASSERT(guest_holds_process(g), "a background start does not hold its process");
	pid_t pid = host_side(sv[1], 300);
	close(sv[1]);
	int64_t t0 = now_ms();
	int rc = guest_close_wait(g, 5000);
	int64_t took = now_ms() - t0;
	int st;
	waitpid(pid, &st, 0);
	T_ASSERT(rc == 0, "rc %d (%s)", rc, errmsg());
	T_ASSERT(took >= 250, "returned after %lld ms, before the other end closed (300 ms)", (long long)took);
	T_NOTE("the other end closed after %lld ms", (long long)took);
	return 0;
}

static int test_close_wait_is_bounded(void)
{
	int sv[2];
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	struct guest *g;
	T_ASSERT(guest_adopt(sv[0], NULL, 0, NULL, 2000, &g) == 0, "adopt: %s", errmsg());
	pid_t pid = host_side(sv[1], -1);
	int64_t t0 = now_ms();
	int rc = guest_close_wait(g, 300);
	int64_t took = now_ms() - t0;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(sv[1]);
	T_ASSERT(rc == -ETIMEDOUT, "rc %d (%s)", rc, errmsg());
	T_ASSERT(took >= 250 && took < 5000, "gave up after %lld ms, the bound is 300", (long long)took);
	T_NOTE("%s", errmsg());
	return 0;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	T_RUN(test_output_then_exit);
	T_RUN(test_closed_before_exit);
	T_RUN(test_end_is_no_exit);
	T_RUN(test_silence_times_out);
	T_RUN(test_relay_silent_host_times_out);
	T_RUN(test_close_wait_waits_for_the_other_end);
	T_RUN(test_close_wait_is_bounded);
	return t_failed ? 1 : 0;
}
