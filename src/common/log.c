#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

bool log_verbose;

static void emit(const char *level, const char *fmt, va_list ap)
{
	char msg[1024], stamp[32];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
	vsnprintf(msg, sizeof msg, fmt, ap);
	fprintf(stderr, "%s.%03ldZ kilnd %s: %s\n", stamp, ts.tv_nsec / 1000000, level, msg);
}

void log_info(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit("info", fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit("warn", fmt, ap);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	if (!log_verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	emit("debug", fmt, ap);
	va_end(ap);
}
