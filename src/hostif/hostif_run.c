/*
 * hostif_run: commands and port probes in a sandbox's guest by id
 * (hostif.h "commands by id"), for either implementation: they enter
 * through the table's enter, so a remote host's guest is reached as a
 * local one is.
 */
#include "hostif/hostif.h"
#include "host/guest_conn.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ENTER_RETRY_MS 100

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Errors of a guest that is slow to answer, as opposed to one that refused. */
static bool slow(int rc)
{
	return rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -EAGAIN;
}

/* hostif_enter, tried again while the guest is slow, until until_ms. */
static int enter(struct hostif *hi, const char *ws, const char *id, int64_t until_ms, struct hostif_guest *hg)
{
	for (;;) {
		int rc = hostif_enter(hi, ws, id, hg);
		if (rc == 0 || !slow(rc) || mono_ms() >= until_ms)
			return rc;
		usleep(ENTER_RETRY_MS * 1000);
	}
}

static void keep(struct strbuf *b, size_t max, const struct guest_ev *ev)
{
	if (b->len < max)
		strbuf_append(b, ev->data, ev->len < max - b->len ? ev->len : max - b->len);
}

static int keep_output(void *ctx, const struct guest_ev *ev)
{
	struct hostif_run *r = ctx;
	if (ev->kind == GEV_STDOUT)
		keep(&r->out, r->out_max, ev);
	else
		keep(&r->err, r->err_max, ev);
	return 0;
}

int hostif_run(struct hostif *hi, const char *ws, const char *id, struct hostif_run *r)
{
	strbuf_init(&r->out);
	strbuf_init(&r->err);
	r->code = -1, r->signal = 0, r->timed_out = false;
	struct hostif_guest hg;
	int rc = enter(hi, ws, id, r->enter_until_ms, &hg);
	if (rc < 0)
		return rc;
	struct guest_cmd cmd = { .argv = r->argv, .env = r->env, .timeout_ms = r->timeout_ms,
				 .background = r->background };
	if (r->background) {
		rc = guest_exec_start(hg.g, &cmd);
		rc = rc ?: guest_exec_detach(hg.g);
	} else {
		struct guest_ev ev;
		rc = guest_exec_run(hg.g, &cmd, keep_output, r, -1, r->timeout_ms ? (int)r->timeout_ms + 5000 : -1,
				    &ev);
		r->code = ev.code, r->signal = ev.signal, r->timed_out = ev.timed_out;
		if (rc == 0 && (strbuf_failed(&r->out) || strbuf_failed(&r->err)))
			rc = errf(ENOMEM, "out of memory holding the output of a command in sandbox %s", id);
	}
	hostif_leave(hi, &hg);
	return rc < 0 ? rc : 0;
}

void hostif_run_free(struct hostif_run *r)
{
	strbuf_free(&r->out);
	strbuf_free(&r->err);
}

int hostif_port_listening(struct hostif *hi, const char *ws, const char *id, unsigned port,
			  int64_t enter_until_ms)
{
	struct hostif_guest hg;
	int rc = enter(hi, ws, id, enter_until_ms, &hg);
	if (rc < 0)
		return rc;
	int fd = -1;
	void *early = NULL;
	size_t n = 0;
	rc = guest_tcp_connect(hg.g, port, &fd, &early, &n);
	free(early);
	if (fd >= 0)
		close(fd);
	hostif_leave(hi, &hg);
	return rc == 0 ? 1 : slow(rc) ? 0 : rc;
}
