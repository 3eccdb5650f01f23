/*
 * Turning the agent's reply messages into structs. The guest is not
 * trusted: every string is copied with a bound, every number is taken as
 * any value it might have, and missing required fields are errors.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/client_int.h"

/* Copy a str field, truncated to fit; "" when absent. */
void cl_copy_str(const struct kiln_msg *m, unsigned tag, char *out, size_t outlen)
{
	uint32_t n;
	const uint8_t *v = kiln_msg_bytes(m, tag, &n);
	if (!outlen)
		return;
	if (!v)
		n = 0;
	if (n >= outlen)
		n = (uint32_t)outlen - 1;
	if (n)
		memcpy(out, v, n);
	out[n] = 0;
}

int kiln_decode_stat(const struct kiln_msg *m, struct kiln_stat *st)
{
	memset(st, 0, sizeof *st);
	if (!kiln_msg_has(m, KT_MODE))
		return -EBADMSG;
	cl_copy_str(m, KT_NAME, st->name, sizeof st->name);
	cl_copy_str(m, KT_LINK, st->link, sizeof st->link);
	st->mode = kiln_msg_u32(m, KT_MODE, 0);
	st->size = kiln_msg_u64(m, KT_SIZE, 0);
	st->uid = kiln_msg_u32(m, KT_UID, 0);
	st->gid = kiln_msg_u32(m, KT_GID, 0);
	st->mtime_ns = kiln_msg_i64(m, KT_MTIME_NS, 0);
	st->atime_ns = kiln_msg_i64(m, KT_ATIME_NS, 0);
	st->ctime_ns = kiln_msg_i64(m, KT_CTIME_NS, 0);
	st->nlink = kiln_msg_u64(m, KT_NLINK, 0);
	st->ino = kiln_msg_u64(m, KT_INO, 0);
	return 0;
}

int kiln_decode_info(const struct kiln_msg *m, struct kiln_info *info)
{
	memset(info, 0, sizeof *info);
	if (!kiln_msg_has(m, KT_VERSION))
		return -EBADMSG;
	info->version = kiln_msg_u32(m, KT_VERSION, 0);
	cl_copy_str(m, KT_AGENT, info->agent, sizeof info->agent);
	cl_copy_str(m, KT_KERNEL, info->kernel, sizeof info->kernel);
	cl_copy_str(m, KT_HOSTNAME, info->hostname, sizeof info->hostname);
	cl_copy_str(m, KT_IDENTITY, info->identity, sizeof info->identity);
	info->uptime_ns = kiln_msg_u64(m, KT_UPTIME_NS, 0);
	info->time_ns = kiln_msg_i64(m, KT_TIME_NS, 0);
	info->mem_total = kiln_msg_u64(m, KT_MEM_TOTAL, 0);
	info->mem_avail = kiln_msg_u64(m, KT_MEM_AVAIL, 0);
	info->ncpu = kiln_msg_u32(m, KT_NCPU, 0);
	info->nprocs = kiln_msg_u32(m, KT_NPROCS, 0);
	info->pid = kiln_msg_u32(m, KT_PID, 0);
	return 0;
}

/* Exit code or signal, as the EXIT and PROC messages carry them. */
static void decode_status(const struct kiln_msg *m, int *code, int *sig)
{
	*sig = 0;
	*code = -1;
	if (kiln_msg_has(m, KT_SIGNAL))
		*sig = (int)(kiln_msg_u32(m, KT_SIGNAL, 0) & 0xff);
	else
		*code = (int)(kiln_msg_u32(m, KT_CODE, 0) & 0xff);
}

int kiln_decode_proc(const struct kiln_msg *m, struct kiln_proc_info *p)
{
	memset(p, 0, sizeof *p);
	if (!kiln_msg_has(m, KT_ID) || !kiln_msg_has(m, KT_STATE))
		return -EBADMSG;
	p->id = kiln_msg_u32(m, KT_ID, 0);
	p->pid = kiln_msg_u32(m, KT_PID, 0);
	p->state = kiln_msg_u32(m, KT_STATE, 0);
	p->flags = kiln_msg_u32(m, KT_FLAGS, 0);
	p->start_ns = kiln_msg_i64(m, KT_START_NS, 0);
	p->dropped = kiln_msg_u64(m, KT_DROPPED, 0);
	if (p->state == KILN_PROC_EXITED)
		decode_status(m, &p->code, &p->signal);
	cl_copy_str(m, KT_NAME, p->cmd, sizeof p->cmd);
	return 0;
}

int kiln_decode_exit(const struct kiln_msg *m, struct kiln_io *ev)
{
	memset(ev, 0, sizeof *ev);
	ev->kind = KILN_IO_EXIT;
	if (!kiln_msg_has(m, KT_CODE) && !kiln_msg_has(m, KT_SIGNAL))
		return -EBADMSG;
	decode_status(m, &ev->code, &ev->signal);
	ev->timed_out = kiln_msg_u32(m, KT_FLAGS, 0) & KILN_EXIT_TIMEOUT;
	return 0;
}

int kiln_decode_error(const struct kiln_msg *m, int *err, char *msg, size_t msglen)
{
	uint32_t e = kiln_msg_u32(m, KT_ERRNO, 0);
	/* An errno outside the range the kernel uses would confuse callers
	 * that compare against -errno values; call it EIO. */
	*err = e >= 1 && e < 4096 ? (int)e : EIO;
	cl_copy_str(m, KT_MESSAGE, msg, msglen);
	if (msglen && !msg[0])
		snprintf(msg, msglen, "%s", strerror(*err));
	return 0;
}
