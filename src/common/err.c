#include "common/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char message[512];

/* Callers often wrap the last message: errf(e, "child %d: %s", i,
 * errmsg()). Formatting straight into message would read it while writing
 * it, so each message is formatted aside and then copied in. */
int errf(int errnum, const char *fmt, ...)
{
	char out[sizeof message];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, sizeof out, fmt, ap);
	va_end(ap);
	memcpy(message, out, sizeof message);
	return -(errnum > 0 ? errnum : 1);
}

int errf_sys(const char *fmt, ...)
{
	int saved = errno ? errno : EIO;
	char out[sizeof message];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, sizeof out, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof out)
		snprintf(out + n, sizeof out - n, ": %s", strerror(saved));
	memcpy(message, out, sizeof message);
	errno = saved;
	return -saved;
}

const char *errmsg(void)
{
	return message[0] ? message : "unknown error";
}
