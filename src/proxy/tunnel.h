/*
 * tunnel: join two connected sockets (an upgraded HTTP client and a guest
 * connection) until both directions end, passing each end on as a
 * half-close. One bounded buffer per direction; blocking, for the calling
 * connection's own thread.
 */
#ifndef KILN_PROXY_TUNNEL_H
#define KILN_PROXY_TUNNEL_H

#include <stddef.h>

typedef void tunnel_tick_fn(void *ctx);

/* Pump bytes between a and b. tick (may be NULL) is called after each
 * transfer, so the caller can count the traffic as activity. Returns when
 * both sides have ended or either fails. a_peer: -1, or the network
 * socket behind a when a TLS layer pumps a for it without passing on the
 * peer's end of sending (http.h http_upgrade_fn): the tunnel watches it
 * and ends a's direction itself, once what came before has arrived; and
 * as the layer passes on no half-close of a either, it returns when b
 * has ended (the caller's close ends the connection). */
void tunnel_run(int a, int b, int a_peer, tunnel_tick_fn *tick, void *ctx);

/* All n bytes of p to fd, which may be non-blocking (MHD makes client
 * sockets so): 0, or -1 when it fails or stays full for wait_ms. */
int tunnel_send_all(int fd, const void *p, size_t n, int wait_ms);

#endif
