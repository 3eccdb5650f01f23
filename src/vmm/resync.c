/*
 * resync: see resync.h. The agent is reached the way any host client
 * reaches it, through this VM's own vsock bridge socket, by a short-lived
 * thread using the client library (blocking calls, bounded by timeouts);
 * the main loop learns the outcome from an eventfd.
 */
#include "vmm/resync.h"
#include "vmm/vmm.h"
#include "client/kiln_client.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The agent may still be reconnecting: attempts 100 ms apart, each call
 * bounded, all of them within DEADLINE_MS, well inside the 120 s a spawner
 * waits for the ready line (so a stuck guest ends in an error, not a
 * timeout on the other side). */
#define TIMEOUT_MS  5000
#define DEADLINE_MS 60000

struct resync {
	struct vm *vm;
	int efd;
	struct ev_handler *h;
	pthread_t thread;
	int rc;
	char error[256];
	char hostname[65];
	char identity[256];
};

static struct resync rs;     /* one per VM process */

static void *resync_thread(void *arg)
{
	struct resync *r = arg;
	struct kiln_client *c = kiln_client_new();
	r->rc = -ENOMEM;
	snprintf(r->error, sizeof r->error, "out of memory");
	uint64_t deadline = now_ns() + (uint64_t)DEADLINE_MS * 1000000;
	while (c && now_ns() < deadline) {
		uint64_t left_ms = (deadline - now_ns()) / 1000000;
		kiln_client_set_timeout(c, left_ms < TIMEOUT_MS ? (int)left_ms + 1 : TIMEOUT_MS);
		int rc = kiln_connect_bridge(c, r->vm->cfg->vsock_path, KILN_VSOCK_PORT);
		if (rc == 0) {
			uint8_t entropy[64];
			struct timespec now;
			if (getrandom(entropy, sizeof entropy, 0) != sizeof entropy) {
				rc = -EIO;
				snprintf(r->error, sizeof r->error, "getrandom failed");
				break;
			}
			clock_gettime(CLOCK_REALTIME, &now);
			struct kiln_resync req = {
				.set_time = true,
				.time_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec,
				.entropy = entropy,
				.entropy_len = sizeof entropy,
				.hostname = r->hostname,
				.identity = r->identity,
			};
			rc = kiln_resync(c, &req);
			explicit_bzero(entropy, sizeof entropy);
			if (rc == 0) {
				r->rc = 0;
				break;
			}
		}
		r->rc = rc;
		snprintf(r->error, sizeof r->error, "%s", kiln_client_error(c));
		kiln_close(c);
		usleep(100 * 1000);
	}
	kiln_client_free(c);
	uint64_t one = 1;
	if (write(r->efd, &one, sizeof one) < 0) {
		/* the main loop would wait forever: nothing sensible to do */
	}
	return NULL;
}

static void resync_done(void *opaque, uint32_t events)
{
	(void)events;
	struct resync *r = opaque;
	uint64_t n;
	if (read(r->efd, &n, sizeof n) < 0)
		return;
	pthread_join(r->thread, NULL);
	ev_del(&r->vm->loop, r->h);
	close(r->efd);
	if (r->rc < 0) {
		/* A restored guest whose entropy was not refreshed shares its
		 * RNG state with its siblings: it must not be handed out. */
		vm_request_exit(r->vm, EXIT_ERROR, "guest agent did not resync: %s", r->error);
		return;
	}
	vm_set_ready(r->vm);
}

void resync_start(struct vm *vm)
{
	rs.vm = vm;
	/* Without a name from the caller, a unique one: the VMM's pid is
	 * unique on this host, and the random part across hosts. */
	uint32_t rnd = 0;
	if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
		rnd = (uint32_t)now_ns();
	if (vm->cfg->hostname)
		snprintf(rs.hostname, sizeof rs.hostname, "%s", vm->cfg->hostname);
	else
		snprintf(rs.hostname, sizeof rs.hostname, "kiln-%08x", rnd);
	snprintf(rs.identity, sizeof rs.identity, "%s", vm->cfg->identity ? vm->cfg->identity : rs.hostname);
	rs.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rs.efd < 0 || !(rs.h = ev_add(&vm->loop, EV_CONTROL, rs.efd, EPOLLIN, resync_done, &rs))) {
		vm_request_exit(vm, EXIT_ERROR, "resync: %s", strerror(errno));
		return;
	}
	int rc = pthread_create(&rs.thread, NULL, resync_thread, &rs);
	if (rc != 0)
		vm_request_exit(vm, EXIT_ERROR, "resync: cannot start a thread: %s", strerror(rc));
}
