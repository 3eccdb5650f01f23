/*
 * The agent's built-ins (builtin.c): each runs in a child process of the
 * agent with stdin, stdout and stderr, returns 0 or an errno value (its
 * exit code) after writing one line of explanation to stderr.
 *
 * They write with write(2) or dprintf, never through stdio's buffers:
 * the child ends with _exit (spawn.c), which flushes nothing, and an
 * fflush there would also write out whatever the agent had buffered
 * when it forked.
 *
 *   copy FROM TO RECURSIVE REPLACE    (RECURSIVE, REPLACE: "0" or "1")
 *       FROM (a file, symlink, FIFO, or with RECURSIVE a directory tree)
 *       to TO: modes, times and symlinks kept, owners too when run as
 *       root. The copy is made under a temporary name next to TO and
 *       renamed into place, so TO shows the old state or the whole copy.
 *   tar-create DIR
 *       DIR's tree as a ustar stream (POSIX pax records for long names)
 *       on stdout: files, directories, symlinks, FIFOs; device nodes and
 *       sockets are left out, and so are other file systems mounted below.
 *   tar-extract DIR
 *       a tar stream from stdin into DIR (created with its parents);
 *       refused with EINVAL, naming the entry: absolute names, "..",
 *       a path through a symlink, device nodes, unknown entry types,
 *       truncated or corrupt input.
 *   grow-fs DIR                       (growfs.c)
 *       the ext4 filesystem mounted at DIR grown online to its whole
 *       block device (a template build's root on a disk made larger).
 */
#ifndef KILN_GUEST_BUILTIN_H
#define KILN_GUEST_BUILTIN_H

/* Write the message (a newline added) to stderr; returns err, as the
 * built-in's exit code (EIO for a value that is not one). */
int builtin_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int builtin_copy(int argc, char *const *argv);
int builtin_tar_create(int argc, char *const *argv);
int builtin_tar_extract(int argc, char *const *argv);
int builtin_grow_fs(int argc, char *const *argv);

#endif
