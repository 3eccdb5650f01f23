/*
 * vmm: starting kiln-vmm and talking to its control socket (docs/vmm.md).
 * Each VM has a directory holding its sockets and logs:
 *   vsock.sock   the guest's vsock, bridged (the agent is port 52)
 *   ctl.sock     the control socket
 *   console.log  the guest's serial console
 *   vmm.log      kiln-vmm's own stderr
 *   vmm.pid      "PID START": which process is the VMM
 */
#ifndef KILN_HOST_VMM_H
#define KILN_HOST_VMM_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>


struct host_config;
struct vmm_jail;

struct vm_spec {
	const char *dir;
	int vcpus, memory_mib;
	const char *disk;		/* the root disk: the sandbox's overlay */
	const char *tap;		/* NULL: no network device */
	const char *netns;		/* the namespace it runs in (and its TAP is in) */
	const char *hostname;
	const char *restore;		/* a snapshot directory; NULL: cold boot */
	struct vmm_jail *jail;		/* NULL or off: unjailed */
	const char *dns;		/* a cold boot's kiln.dns; NULL: the host's servers now */
	int volume_slots;		/* a cold boot's empty volume slots (docs/vmm.md) */
	/* A restore's attached volumes: nvol descriptors (the caller's,
	 * inherited by the VMM as --volume SLOT:FD[:ro]). */
	int nvol;
	const int *vol_fd, *vol_slot;
	const bool *vol_ro;
};

/* Paths inside a VM directory. */
void vm_path(char *out, size_t cap, const char *dir, const char *name);

/* The last non-empty line of the VM's vmm.log (kiln-vmm writes the reason
 * it ended there last), printable ASCII only, into out; "" if there is
 * none. The directory may be the jailed VMM's to write: a log that is not
 * the regular, singly linked, root-owned file kilnd created reads as "". */
void vmm_last_line(const char *dir, char *out, size_t cap);

/* Start kiln-vmm for spec (detached, see proc.h); writes vmm.pid. */
int vmm_launch(const struct host_config *cfg, const struct vm_spec *spec, pid_t *pid);

/* One request on a control socket: req (borrowed) as a JSON line, the
 * reply parsed into *reply (the caller frees it). {"ok":false} replies
 * become -EIO with the VMM's error as the message, or -ENOTSUP when the
 * VMM does not know the command (a kiln-vmm without that feature). */
int vmm_ctl(const char *sock, json_t *req, json_t **reply, int timeout_ms);
/* The same, passing descriptors with the request (SCM_RIGHTS), which it
 * names by their index (e.g. "tap_fd":0), VMM_CTL_FDS_MAX at most (what
 * kiln-vmm keeps of one request's). They stay the caller's. */
#define VMM_CTL_FDS_MAX 16
int vmm_ctl_fds(const char *sock, json_t *req, const int *fds, int nfds, json_t **reply,
		int timeout_ms);

#endif
