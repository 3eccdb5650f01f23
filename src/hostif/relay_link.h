/*
 * relay_link: the byte stream a relay to a cluster's host runs on
 * (hostif_remote.c, docs/cluster.md "Agent protocol"): plain TCP to an
 * http:// host, or TLS to an https:// one (libcurl's, the certificate
 * checked against the system's authorities or the given CA), with the
 * few calls the relay's handshake needs; then link_take hands the stream
 * on as one socket, whatever carries it.
 */
#ifndef KILN_HOSTIF_RELAY_LINK_H
#define KILN_HOSTIF_RELAY_LINK_H

#include <stddef.h>

struct relay_link;

/* Connect to url ("http://HOST:PORT" or "https://HOST:PORT", a path is
 * ignored); name says which host in errors. -EHOSTDOWN when it does not
 * answer (or its certificate does not verify), with errmsg(). */
int link_open(const char *url, const char *name, const char *ca_file, int wait_ms, struct relay_link **out);
/* All of p, or -errno. */
int link_send(struct relay_link *l, const void *p, size_t n);
/* Up to and including the bytes `end`, never past them (what follows is
 * the stream): the length, or -errno (-EMSGSIZE: not within cap). */
int link_read_until(struct relay_link *l, char *buf, size_t cap, const char *end);
/* The stream as a socket the caller owns: the TCP socket itself, or one
 * end of a socket pair whose other end a thread pumps through TLS until
 * either side ends. l is freed either way; -errno if no thread. */
int link_take(struct relay_link *l);
void link_close(struct relay_link *l);

#endif
