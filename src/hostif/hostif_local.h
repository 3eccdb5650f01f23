/*
 * hostif_local: the host interface over the host agent of this process
 * (src/host/host.h), for the one-box kilnd. Each call finds the sandbox
 * by workspace and id, runs the agent's operation and drops its
 * reference before returning, so no caller ever holds one.
 */
#ifndef KILN_HOSTIF_HOSTIF_LOCAL_H
#define KILN_HOSTIF_HOSTIF_LOCAL_H

#include "hostif/hostif.h"

struct host;

/* Fill *out to call h (host_open's, which stays the caller's to close
 * after the last call). */
void hostif_local(struct hostif *out, struct host *h);

#endif
