/*
 * http_get: fetch http://IPV4:PORT/PATH and print the body (static; the
 * busybox wget of the test guest needs a resolver it does not have).
 * Exit 1 if it cannot connect within 4 s or the answer is not HTTP 200.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: http_get IPV4 PORT\n");
		return 2;
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "http_get: bad address %s\n", argv[1]);
		return 2;
	}
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS)
		return 1;
	struct pollfd p = { .fd = s, .events = POLLOUT };
	int err = 0;
	socklen_t len = sizeof err;
	if (poll(&p, 1, 4000) != 1 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		return 1;
	fcntl(s, F_SETFL, 0);
	struct timeval tv = { 4, 0 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	static const char req[] = "GET / HTTP/1.0\r\n\r\n";
	if (write(s, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
		return 1;
	static char buf[1 << 16];
	size_t got = 0;
	for (ssize_t n; got < sizeof buf - 1 && (n = read(s, buf + got, sizeof buf - 1 - got)) > 0;)
		got += (size_t)n;
	buf[got] = 0;
	char *body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 9, "200", 3) != 0 || !body)
		return 1;
	fputs(body + 4, stdout);
	return 0;
}
