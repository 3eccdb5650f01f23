/*
 * dockerfile: the parser of the Dockerfile subset kiln builds templates
 * from (docs/templates.md "Dockerfile"). It turns the text into a list of
 * steps and refuses anything it does not support with the line it is on;
 * it runs nothing and reads no file. A Dockerfile is untrusted input, so
 * every size is bounded (DF_MAX_*), and the caller gets either a complete
 * step list or an error, never a partial one.
 *
 * Supported: FROM (one stage; `AS name` accepted), RUN, COPY, ADD (local
 * sources only), ENV, ARG, WORKDIR, USER, EXPOSE, CMD, ENTRYPOINT, LABEL;
 * comments, blank lines and `\` line continuations. Keywords are
 * case-insensitive.
 *
 * Variables: `$NAME`, `${NAME}`, `${NAME:-word}` and `${NAME:+word}` are
 * replaced, from ARG and ENV values declared on earlier lines, in FROM,
 * COPY, ADD, ENV, ARG defaults, LABEL, WORKDIR, USER and EXPOSE, as Docker
 * does; `\$` is a literal `$`. RUN, CMD and ENTRYPOINT are kept as written:
 * their shell sees ARG and ENV values as environment variables. An ARG
 * before FROM is seen by FROM only, unless declared again after it.
 *
 * Words (COPY, ADD, ENV, ARG, LABEL, EXPOSE, USER) are split on blanks;
 * '...' and "..." quote, and a backslash escapes the next character
 * outside single quotes.
 *
 * Where kiln is stricter than Docker: an argument list that starts with
 * `[` must be a valid JSON array of strings (Docker silently falls back to
 * the shell form); a COPY/ADD source may not contain a `..` component
 * (Docker cleans it into the context; kiln refuses it); `# escape=` is
 * refused.
 */
#ifndef KILN_HOST_DOCKERFILE_H
#define KILN_HOST_DOCKERFILE_H

#include <stdbool.h>
#include <stddef.h>

#define DF_MAX_TEXT  (1024 * 1024)	/* the whole file */
#define DF_MAX_LINE  65536		/* one instruction, continuations joined and variables replaced */
#define DF_MAX_STEPS 512
#define DF_MAX_WORDS 1024		/* words or JSON array elements of one instruction */

enum df_kind {
	DF_FROM, DF_RUN, DF_COPY, DF_ADD, DF_ENV, DF_ARG, DF_WORKDIR, DF_USER, DF_EXPOSE,
	DF_CMD, DF_ENTRYPOINT, DF_LABEL,
};

/* One instruction. args by kind:
 *   FROM          [image]; `as` the stage name or NULL
 *   RUN CMD ENTRYPOINT  exec form: the array; shell form: [the command text]
 *   COPY ADD      [source..., destination]; chown and chmod: the flags or NULL
 *   ENV LABEL     [key, value, key, value, ...]
 *   ARG           [name, default or NULL, ...] (the default after substitution)
 *   WORKDIR USER  [the value]
 *   EXPOSE        ["80/tcp", "53/udp", ...] (protocol added where missing)
 */
struct df_step {
	enum df_kind kind;
	int line;			/* the instruction's first line, from 1 */
	bool exec_form;			/* RUN CMD ENTRYPOINT: a JSON array */
	int nargs;
	char **args;
	char *as;			/* FROM ... AS name */
	char *chown, *chmod;		/* COPY/ADD --chown= --chmod= */
	char *text;			/* the instruction as written (continuations joined) */
};

struct dockerfile {
	int nsteps;
	struct df_step *steps;
};

/* Parse text (len bytes, need not be NUL-terminated). build_args:
 * "NAME=VALUE" strings overriding ARG defaults, NULL-terminated, or NULL.
 * 0, or -EINVAL with errmsg() "line N: ..." (or a message about the whole
 * file); *out is then empty. */
int dockerfile_parse(const char *text, size_t len, const char *const *build_args,
		     struct dockerfile *out);
void dockerfile_free(struct dockerfile *df);

/* "FROM", "RUN", ... */
const char *df_kind_name(enum df_kind k);

#endif
