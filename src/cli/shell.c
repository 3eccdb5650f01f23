/*
 * shell: `kiln shell ID`, a terminal in a sandbox over the PTY WebSocket
 * (docs/api.md, GET /v1/sandboxes/{id}/pty). The local terminal is put in
 * raw mode; keys go out as binary messages, output comes back as binary
 * messages, and a window size change is sent as a JSON text message.
 */
#include "cli/shell.h"
#include "cli/httpc.h"
#include "cli/args.h"

#include <errno.h>
#include <jansson.h>
#include <nettle/base64.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* The end of piped stdin is typed as ^D once the remote output has been
 * quiet this long (the shell is at its prompt), and again after
 * EOF_AGAIN_MS of quiet for as long as the session lasts. */
#define EOF_QUIET_MS 300
#define EOF_AGAIN_MS 1000

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct termios saved;
static bool raw_mode;

static void restore_tty(void)
{
	if (raw_mode)
		tcsetattr(0, TCSAFLUSH, &saved);
	raw_mode = false;
}

static void make_raw(void)
{
	if (!isatty(0) || tcgetattr(0, &saved) < 0)
		return;
	struct termios t = saved;
	cfmakeraw(&t);
	if (tcsetattr(0, TCSAFLUSH, &t) == 0) {
		raw_mode = true;
		atexit(restore_tty);
	}
}

static int send_frame(struct httpc_ws *w, int op, const void *data, size_t len)
{
	uint8_t hdr[14], mask[4];
	size_t h = 2;
	if (getrandom(mask, sizeof mask, 0) != (ssize_t)sizeof mask)
		return -1;
	hdr[0] = 0x80 | (uint8_t)op;
	if (len < 126) {
		hdr[1] = 0x80 | (uint8_t)len;
	} else if (len <= 0xffff) {
		hdr[1] = 0x80 | 126;
		hdr[2] = (uint8_t)(len >> 8);
		hdr[3] = (uint8_t)len;
		h = 4;
	} else {
		hdr[1] = 0x80 | 127;
		for (int i = 0; i < 8; i++)
			hdr[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
		h = 10;
	}
	memcpy(hdr + h, mask, 4);
	h += 4;
	uint8_t *frame = malloc(h + len);
	if (!frame)
		return -1;
	memcpy(frame, hdr, h);
	const uint8_t *d = data;
	for (size_t i = 0; i < len; i++)
		frame[h + i] = d[i] ^ mask[i & 3];
	int rc = httpc_ws_send(w, frame, h + len);
	free(frame);
	return rc;
}

static void send_size(struct httpc_ws *w)
{
	struct winsize ws;
	if (!isatty(0) || ioctl(0, TIOCGWINSZ, &ws) < 0 || !ws.ws_row)
		return;
	char msg[96];
	int n = snprintf(msg, sizeof msg, "{\"type\":\"resize\",\"cols\":%u,\"rows\":%u}", ws.ws_col, ws.ws_row);
	send_frame(w, 0x1, msg, (size_t)n);
}

/* Frames from the server (unmasked). Returns the exit code once the
 * session ended, -1 to keep going, or -2 on an error. */
static int frames(uint8_t *buf, size_t *len, struct httpc_ws *w)
{
	size_t off = 0;
	int result = -1;
	while (*len - off >= 2) {
		uint8_t *p = buf + off;
		int op = p[0] & 0x0f;
		uint64_t plen = p[1] & 0x7f;
		size_t h = 2;
		if (plen == 126) {
			if (*len - off < 4)
				break;
			plen = (uint64_t)p[2] << 8 | p[3];
			h = 4;
		} else if (plen == 127) {
			if (*len - off < 10)
				break;
			plen = 0;
			for (int i = 0; i < 8; i++)
				plen = plen << 8 | p[2 + i];
			h = 10;
		}
		if (plen > (1u << 20))
			return -2;
		if (*len - off < h + plen)
			break;
		const uint8_t *d = p + h;
		if (op == 0x2 || op == 0x0) {
			size_t w = 0;
			while (w < plen) {
				ssize_t n = write(1, d + w, plen - w);
				if (n <= 0 && errno != EINTR)
					break;
				if (n > 0)
					w += (size_t)n;
			}
		} else if (op == 0x1) {
			json_t *j = json_loadb((const char *)d, plen, 0, NULL);
			const char *type = json_string_value(json_object_get(j, "type"));
			if (type && !strcmp(type, "exit"))
				result = (int)json_integer_value(json_object_get(j, "exit_code"));
			else if (type && !strcmp(type, "error")) {
				restore_tty();
				fprintf(stderr, "kiln: %s\n", json_string_value(json_object_get(j, "message")));
				result = EXIT_KILN;
			}
			json_decref(j);
		} else if (op == 0x8) {
			if (result < 0)
				result = 0;
		} else if (op == 0x9) {
			send_frame(w, 0xa, d, plen);
		}
		off += h + plen;
	}
	memmove(buf, buf + off, *len - off);
	*len -= off;
	return result;
}

int shell_run(const struct httpc_target *t, const char *id, const char *cmd)
{
	uint8_t rnd[16];
	char key[32], path[8192];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return EXIT_KILN;
	base64_encode_raw(key, sizeof rnd, rnd);
	key[24] = 0;
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	if (isatty(0))
		ioctl(0, TIOCGWINSZ, &ws);
	char *esc = cmd ? httpc_escape(cmd) : NULL;
	snprintf(path, sizeof path, "/v1/sandboxes/%s/pty?rows=%u&cols=%u%s%s", id, ws.ws_row ? ws.ws_row : 24,
		 ws.ws_col ? ws.ws_col : 80, esc ? "&cmd=" : "", esc ? esc : "");
	free(esc);
	struct httpc_ws w;
	if (httpc_ws_open(&w, t, path, key) < 0) {
		fprintf(stderr, "kiln: %s\n", w.error);
		httpc_ws_close(&w);
		return EXIT_KILN;
	}
	if (w.status != 101) {
		json_t *j = w.body ? json_loads(w.body, 0, NULL) : NULL;
		const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
		if (w.status == 401)
			fprintf(stderr, "kiln: %s: %s\n", t->key[0] ? "kilnd refused the API key in KILN_API_KEY"
							  : "no API key: set KILN_API_KEY", m ? m : "unauthorized");
		else
			fprintf(stderr, "kiln: %s (HTTP %d)\n", m ? m : "the server refused the terminal", w.status);
		json_decref(j);
		httpc_ws_close(&w);
		return EXIT_KILN;
	}
	make_raw();
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGWINCH);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	size_t cap = (1u << 20) + 64, len = w.extra_len;
	uint8_t *buf = malloc(cap);
	int result = -1;
	if (!buf)
		result = EXIT_KILN;
	else
		memcpy(buf, w.extra, len);	/* frames that came with the 101 */
	bool in_open = true;
	char last = 0;
	/* After the end of piped stdin: when to type the next ^D (ms on the
	 * monotonic clock), 0 while stdin is open. */
	int64_t eof_at = 0;
	while (result < 0) {
		if ((result = frames(buf, &len, &w)) != -1)
			break;
		/* Drain what TLS holds before polling the socket. */
		long n = len < cap ? httpc_ws_recv(&w, buf + len, cap - len) : -2;
		if (n >= 0 || n == -1) {
			if (n <= 0) {
				restore_tty();
				fprintf(stderr, "kiln: the terminal's connection ended before its command did%s%s\n",
					n < 0 ? ": " : "", n < 0 ? w.error : "");
				result = EXIT_KILN;
				break;
			}
			len += (size_t)n;
			if (eof_at)
				eof_at = now_ms() + EOF_QUIET_MS;	/* still talking: wait */
			continue;
		}
		struct pollfd p[3] = {
			{ .fd = w.fd, .events = POLLIN },
			{ .fd = in_open ? 0 : -1, .events = POLLIN },
			{ .fd = sfd, .events = POLLIN },
		};
		int timeout = -1;
		if (eof_at) {
			int64_t left = eof_at - now_ms();
			timeout = left > 0 ? (int)left : 0;
		}
		int pr = poll(p, 3, timeout);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			result = EXIT_KILN;
			break;
		}
		if (pr == 0 && eof_at) {
			/* Quiet since: the remote side waits for input. A ^D at
			 * the start of a line is the terminal's end of input; a
			 * shell whose line editor dropped it gets another later. */
			send_frame(&w, 0x2, "\x04", 1);
			eof_at = now_ms() + EOF_AGAIN_MS;
		}
		if (p[1].revents) {
			char in[4096];
			ssize_t n = read(0, in, sizeof in);
			if (n > 0) {
				send_frame(&w, 0x2, in, (size_t)n);
				last = in[n - 1];
			} else if (n == 0 || errno != EINTR) {
				/* The end of piped input: the terminal has no EOF
				 * of its own, so type one, ^D at the start of a line
				 * (a terminal's stdin never ends: ^D is read as a key). */
				in_open = false;
				if (last != '\n' && last != 0)
					send_frame(&w, 0x2, "\n", 1);
				eof_at = now_ms() + EOF_QUIET_MS;
			}
		}
		if (p[2].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) > 0)
				;
			send_size(&w);
		}
	}
	if (result == -2) {
		restore_tty();
		fprintf(stderr, "kiln: bad frame from the server\n");
		result = EXIT_KILN;
	}
	restore_tty();
	free(buf);
	if (sfd >= 0)
		close(sfd);
	httpc_ws_close(&w);
	return result;
}
