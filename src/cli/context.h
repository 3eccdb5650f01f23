/*
 * context: the build context `kiln template build` sends (context.c): the
 * files of a directory its .dockerignore keeps, and their tar. Errors end
 * the CLI with a message naming the path (die).
 */
#ifndef KILN_CLI_CONTEXT_H
#define KILN_CLI_CONTEXT_H

#include <stddef.h>
#include <sys/types.h>

struct context_list {
	char **paths;		/* relative to the context, sorted by directory */
	size_t n, cap;
	size_t left_out;	/* files and directories .dockerignore hid */
};

/* The paths of dir to send; dockerfile (relative to dir; NULL:
 * "Dockerfile") is sent whatever .dockerignore says. */
void context_list(const char *dir, const char *dockerfile, struct context_list *out);
void context_list_free(struct context_list *l);

/* l's paths (and dir's root entry) as a gzipped tar in an unlinked
 * temporary file: its fd, at the start; *size its length. */
int context_tar(const char *dir, const struct context_list *l, off_t *size);

#endif
