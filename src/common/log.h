/*
 * log: kilnd's log lines on stderr, one per event, with a UTC timestamp
 * and a level. Safe from any thread (one fprintf per line).
 */
#ifndef KILN_COMMON_LOG_H
#define KILN_COMMON_LOG_H

#include <stdbool.h>

extern bool log_verbose;

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Only with --verbose. */
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
