#include "common/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char message[512];

int errf(int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	return -(errnum > 0 ? errnum : 1);
}

int errf_sys(const char *fmt, ...)
{
	int saved = errno ? errno : EIO;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(message, sizeof message, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof message)
		snprintf(message + n, sizeof message - n, ": %s", strerror(saved));
	errno = saved;
	return -saved;
}

const char *errmsg(void)
{
	return message[0] ? message : "unknown error";
}
