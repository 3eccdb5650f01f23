/*
 * pause: a sandbox's vCPUs stopped with its VMM, memory and network kept
 * (docs/api.md "Pause"). The cheap way to stop a sandbox burning CPU: a
 * resume is one control request to a live VMM (milliseconds), where a
 * wake from hibernation restores its memory from disk. A paused sandbox
 * holds its memory on the host, so it counts as running against its
 * workspace's cap and its memory is billed; its CPU is not (its vCPUs
 * burn none).
 *
 * Anything that needs the guest (exec, files, a request to a port, a
 * fork) resumes it first, as it wakes a hibernated one; a snapshot takes
 * it paused as it is (fork.c host_snapshot); an idle paused sandbox meets
 * its TTL rule as a running one does.
 */
#include "host/host.h"
#include "host/host_int.h"
#include "common/err.h"
#include "common/log.h"

#include <errno.h>

#define PAUSE_CTL_MS 10000

/* A paused VMM's guest connection would hang until a resume: a pause
 * waits this long for the sandbox's operations to end, then refuses. */
#define PAUSE_DRAIN_MS 2000

/* A pause asked for is activity (the TTL's idle clock restarts); one
 * for idleness (host_pause_idle) is not, so the TTL rule still acts
 * ttl_seconds after the last request. */
static int pause_sandbox(struct host *h, struct sandbox *sb, bool activity)
{
	pthread_mutex_lock(&sb->op);	/* no operation starts meanwhile (sandbox_enter) */
	int rc = 0;
	sandbox_drain(sb, 1u << SBX_RUNNING, PAUSE_DRAIN_MS);
	pthread_mutex_lock(&sb->lock);
	bool running = sb->row.state == SBX_RUNNING && !sb->vmm_dead;
	int active = sb->active;
	pthread_mutex_unlock(&sb->lock);
	if (sandbox_in(sb, SBX_PAUSED))
		goto out;	/* already: the answer is the same */
	if (!running) {
		rc = sandbox_state_error(sb, "running");
		goto out;
	}
	if (active > 0) {
		rc = errf(EBUSY, "sandbox %s has %d operations running; pause it when they end", sb->row.id,
			  active);
		goto out;
	}
	sandbox_sample(h, sb);	/* what it burned running is counted up to now */
	if ((rc = sandbox_ctl_cmd(sb, "pause", PAUSE_CTL_MS)) < 0) {
		rc = errf(-rc, "sandbox %s: pausing its VMM: %s", sb->row.id, errmsg());
		goto out;
	}
	if (activity)
		sandbox_touch(sb);
	rc = sandbox_set_state(h, sb, SBX_PAUSED);
	log_debug("sandbox %s: paused%s", sb->row.id, activity ? "" : " (idle)");
out:
	pthread_mutex_unlock(&sb->op);
	return rc;
}

int host_pause(struct host *h, struct sandbox *sb)
{
	return pause_sandbox(h, sb, true);
}

int host_pause_idle(struct host *h, struct sandbox *sb)
{
	return pause_sandbox(h, sb, false);
}

int resume_locked(struct host *h, struct sandbox *sb)
{
	if (!sandbox_in(sb, SBX_PAUSED))
		return sandbox_in(sb, SBX_RUNNING) ? 0 : sandbox_state_error(sb, "paused");
	int rc = sandbox_ctl_cmd(sb, "resume", PAUSE_CTL_MS);
	if (rc < 0)
		/* Its VMM is gone or stuck: housekeeping marks it failed if
		 * gone; the caller gets why. */
		return errf(-rc, "sandbox %s: resuming its VMM: %s", sb->row.id, errmsg());
	sandbox_touch(sb);
	rc = sandbox_set_state(h, sb, SBX_RUNNING);
	log_debug("sandbox %s: resumed", sb->row.id);
	return rc;
}

int host_resume(struct host *h, struct sandbox *sb)
{
	pthread_mutex_lock(&sb->op);
	int rc = resume_locked(h, sb);
	pthread_mutex_unlock(&sb->op);
	return rc;
}

int ready_locked(struct host *h, struct sandbox *sb)
{
	if (sandbox_in(sb, SBX_HIBERNATED))
		return wake_locked(h, sb);
	if (sandbox_in(sb, SBX_PAUSED))
		return resume_locked(h, sb);
	return 0;
}
