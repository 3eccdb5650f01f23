/*
 * vsock_echo: a guest-side helper for kiln-vmm's vsock tests (static).
 *   vsock_echo listen PORT           echo every connection back, forever
 *   vsock_echo connect CID PORT N    send N pseudo-random bytes, check that
 *                                    the same bytes come back, print "ok"
 *   vsock_echo give PORT N           to every connection: write N
 *                                    pseudo-random bytes, then close at once
 *                                    (the guest ends the connection while
 *                                    the host may not have read them yet)
 */
#include <errno.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static uint8_t byte_at(uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ULL;
	return (uint8_t)(x >> 56 ^ x >> 17);
}

static void echo(int fd)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));
			if (w <= 0)
				return;
			off += w;
		}
	}
}

/* serve: listen on port; every connection gets its own process running
 * fn(fd, arg), then is closed. Returns only on failure. */
static int serve(unsigned port, const char *what, void (*fn)(int, uint64_t), uint64_t arg)
{
	int s = socket(AF_VSOCK, SOCK_STREAM, 0);
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port };
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(s, 64) < 0) {
		perror("vsock_echo: listen");
		return 1;
	}
	printf("vsock_echo: %s on %u\n", what, port);
	fflush(stdout);
	signal(SIGCHLD, SIG_IGN);
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0)
			continue;
		if (fork() == 0) {
			fn(c, arg);
			close(c);
			_exit(0);
		}
		close(c);
	}
}

static void echo_conn(int fd, uint64_t unused)
{
	(void)unused;
	echo(fd);
}

static void give(int fd, uint64_t total)
{
	uint8_t buf[65536];
	for (uint64_t sent = 0; sent < total;) {
		size_t k = total - sent < sizeof buf ? (size_t)(total - sent) : sizeof buf;
		for (size_t i = 0; i < k; i++)
			buf[i] = byte_at(sent + i);
		ssize_t w = write(fd, buf, k);
		if (w <= 0)
			return;
		sent += (uint64_t)w;
	}
}

static int do_connect(unsigned cid, unsigned port, uint64_t total)
{
	int s = socket(AF_VSOCK, SOCK_STREAM, 0);
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port };
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
		perror("vsock_echo: connect");
		return 1;
	}
	uint64_t sent = 0, got = 0;
	uint8_t buf[65536];
	while (got < total) {
		struct pollfd p = { .fd = s, .events = POLLIN | (sent < total ? POLLOUT : 0) };
		if (poll(&p, 1, 10000) <= 0) {
			fprintf(stderr, "vsock_echo: stalled at sent %llu got %llu\n",
				(unsigned long long)sent, (unsigned long long)got);
			return 1;
		}
		if ((p.revents & POLLOUT) && sent < total) {
			size_t k = total - sent < sizeof buf ? (size_t)(total - sent) : sizeof buf;
			for (size_t i = 0; i < k; i++)
				buf[i] = byte_at(sent + i);
			ssize_t w = write(s, buf, k);
			if (w < 0 && errno != EAGAIN) {
				perror("vsock_echo: write");
				return 1;
			}
			if (w > 0)
				sent += (uint64_t)w;
		}
		if (p.revents & (POLLIN | POLLHUP)) {
			ssize_t n = read(s, buf, sizeof buf);
			if (n <= 0) {
				fprintf(stderr, "vsock_echo: connection closed after %llu bytes\n",
					(unsigned long long)got);
				return 1;
			}
			for (ssize_t i = 0; i < n; i++)
				if (buf[i] != byte_at(got + (uint64_t)i)) {
					fprintf(stderr, "vsock_echo: byte %llu differs\n",
						(unsigned long long)(got + (uint64_t)i));
					return 1;
				}
			got += (uint64_t)n;
		}
	}
	printf("vsock_echo: ok %llu\n", (unsigned long long)got);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "listen") == 0)
		return serve((unsigned)atoi(argv[2]), "listening", echo_conn, 0);
	if (argc == 4 && strcmp(argv[1], "give") == 0)
		return serve((unsigned)atoi(argv[2]), "giving", give, strtoull(argv[3], NULL, 10));
	if (argc == 5 && strcmp(argv[1], "connect") == 0)
		return do_connect((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]),
				  strtoull(argv[4], NULL, 10));
	fprintf(stderr, "usage: vsock_echo listen PORT | give PORT BYTES | connect CID PORT BYTES\n");
	return 2;
}
