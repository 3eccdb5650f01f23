/*
 * Built-ins: file work too long for the agent's event loop, run as a
 * process of their own (EXEC with KILN_EXEC_BUILTIN, docs/protocol.md).
 * spawn() forks the agent and calls the built-in in the child after the
 * usual set-up (user, directory, cgroup), so a copy of a large tree or a
 * tar stream runs as the requested user with that user's permissions,
 * counts against the sandbox's process limits, can be killed, and never
 * stalls the agent. kiln-init carries them so they work on every image,
 * with no tar or cp in it.
 *
 * Convention: stdout and stdin carry the data (a tar stream), stderr one
 * line saying what went wrong, and the exit code is 0 or the errno value
 * that classifies the failure (ENOENT, EEXIST, EINVAL for bad input...).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "guest/builtin.h"
#include "guest/spawn.h"

int builtin_fail(int err, const char *fmt, ...)
{
	char msg[4608];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof msg - 2)
		n = (int)sizeof msg - 2;
	msg[n++] = '\n';
	ssize_t w = write(2, msg, (size_t)n);
	(void)w;
	return err > 0 && err < 126 ? err : EIO;
}

static const struct {
	const char *name;
	builtin_fn *fn;
} builtins[] = {
	{ "copy", builtin_copy },
	{ "tar-create", builtin_tar_create },
	{ "tar-extract", builtin_tar_extract },
	{ "grow-fs", builtin_grow_fs },
};

builtin_fn *builtin_find(const char *name)
{
	for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
		if (strcmp(builtins[i].name, name) == 0)
			return builtins[i].fn;
	return NULL;
}
