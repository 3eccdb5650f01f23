/*
 * vsock_sh: a guest-side command server for kiln-vmm's own tests (static):
 * each connection to vsock port PORT sends one line, a shell command; the
 * reply is its combined output, then the connection closes. It lets the
 * VMM tests run commands in forked and restored guests without depending
 * on the guest agent.
 */
#include <linux/vm_sockets.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned port = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
	int s = socket(AF_VSOCK, SOCK_STREAM, 0);
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port };
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(s, 64) < 0) {
		perror("vsock_sh: listen");
		return 1;
	}
	printf("vsock_sh: listening on %u\n", port);
	fflush(stdout);
	signal(SIGCHLD, SIG_IGN);
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0)
			continue;
		if (fork() == 0) {
			char cmd[4096];
			size_t n = 0;
			while (n < sizeof cmd - 1) {
				ssize_t k = read(c, cmd + n, 1);
				if (k <= 0 || cmd[n] == '\n')
					break;
				n++;
			}
			cmd[n] = 0;
			dup2(c, 1);
			dup2(c, 2);
			close(c);
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
			_exit(127);
		}
		close(c);
	}
}
