/*
 * err: the error convention of kiln's C code. A function that fails returns
 * -errno (or -1 where no errno fits) and leaves a one-line message naming
 * what failed in a thread-local buffer; the caller that decides to report
 * it prints errmsg(). Messages are overwritten, never accumulated.
 */
#ifndef KILN_ERR_H
#define KILN_ERR_H

/* errf: format the message and return -errnum (errnum > 0), so a caller
 * can write `return errf(ENOENT, "disk %s: not found", path);`. */
int errf(int errnum, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* errf_sys: like errf, but appends ": strerror(errno)" and uses errno. */
int errf_sys(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *errmsg(void);

#endif
