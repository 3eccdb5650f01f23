/*
 * cli: what the kiln CLI's files share: the command table's entry, the
 * connection to kilnd, and the helpers that print and fail.
 */
#ifndef KILN_CLI_CLI_H
#define KILN_CLI_CLI_H

#include "cli/args.h"
#include "cli/httpc.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

struct command {
	const char *name;
	int (*run)(const struct command *cmd, struct opts *o);
	const char *opts;	/* long names of the options it takes, space-separated */
	const char *synopsis;	/* "fork ID [-n N] [--tree] [--json]" */
	const char *summary;	/* one line for `kiln help` */
	const char *details;	/* the option lines of `kiln help CMD`, or NULL */
	bool passes_argv;	/* what follows -- is a remote command */
};

extern struct httpc_target target;

/* `kiln help CMD`: synopsis, summary and details. */
void command_help(const struct command *cmd, FILE *f);

void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Report an API error response ({"error":{...}}) and exit EXIT_KILN. */
void die_response(int status, const char *body) __attribute__((noreturn));
/* One request with a JSON answer (NULL for 204); exits on errors. */
json_t *call(const char *method, const char *path, json_t *body);
/* The rest of a request started with status rc (httpc_start's): its
 * whole answer (yours to free), or exit on a failure or an error status. */
char *finish(struct httpc *c, int rc);
/* A GET whose answer is read as it comes (a download, an event stream):
 * started with header (NULL for none), or exit on a failure or on an
 * answer that is not 200 (its error reported). path is freed. */
void get_stream(struct httpc *c, char *path, const char *header);
void print_json(json_t *j);
/* An answer r: with --json, print it, free it and return NULL (the
 * command is done); else r (yours to free), to print for people. */
json_t *print_or_keep(const struct opts *o, json_t *r);
/* print_or_keep of GET path. */
json_t *get_or_print(const struct opts *o, const char *path);
/* One event of a stream as one line of compact JSON (--json). */
void print_json_line(json_t *j);
/* o[k] as a string, or "-". */
const char *str(json_t *o, const char *k);
bool is_id(const char *s, const char *prefix);
/* NAME:/PATH[:ro] as {name, path, read_only} (what: the option or
 * argument, for the usage error a malformed one gets). */
json_t *volume_spec(const struct command *cmd, const char *what, const char *v);
/* pos[i] as a sandbox id, or a usage error. */
const char *need_id(const struct command *cmd, struct opts *o, int i);
/* A usage error unless cmd got between min and max positional arguments. */
void need_args(const struct command *cmd, struct opts *o, int min, int max);
int write_all(int fd, const void *p, size_t n);
/* s as a JSON string, or a usage error naming what (the API takes UTF-8
 * text only; jansson refuses anything else). */
json_t *text_arg(const struct command *cmd, const char *what, const char *s);

/* A group's subcommands (kiln keys list, kiln admin workspaces create):
 * the word, the long names of the group's options it takes (NULL: the
 * next level checks them), and what runs it. */
struct subcommand {
	const char *name;
	const char *opts;
	int (*run)(const struct command *cmd, struct opts *o);
};
/* Run the subcommand pos[i] names, of the group called group ("keys",
 * "admin workspaces"), after refusing options it does not take; a usage
 * error naming the choices if it is missing or unknown. */
int subcommand_run(const struct command *cmd, struct opts *o, const char *group, int i,
		   const struct subcommand *subs, size_t n);
/* Create a key through POST path (/v1/keys, or the operator's route) from
 * --name, --scope and --expires; print it once (kiln keys create). */
int key_create(const struct command *cmd, struct opts *o, const char *path);
/* GET path (/v1/keys, or the operator's route): the keys as a table, or
 * the answer with --json (kiln keys list). */
int key_list(struct opts *o, const char *path);
/* A usage error unless pos[first..] are key ids, one at least: all are
 * checked before any is revoked. sub names the command ("keys revoke"),
 * lister the one that shows the ids. */
void key_ids_check(const struct command *cmd, struct opts *o, int first, const char *sub, const char *lister);
/* DELETE base/ID for each of pos[first..], in order; the first refusal
 * exits (kiln keys revoke). */
int key_revoke(struct opts *o, int first, const char *base);

/* Server-Sent Events from c until on() returns nonzero (its value) or the
 * stream ends (0); -1 on an error. */
int sse_read(struct httpc *c, int (*on)(const char *event, const char *data, void *arg), void *arg);
/* Inside on(): the id of the event it was handed ("" if it had none). */
const char *sse_event_id(void);

/* The commands (cmd_*.c). Each returns kiln's exit status. */
/* The JSON body of a command to run: pos[i..] (one: a shell line; more:
 * an argv) with -e, -w and -t. Exits 2 if there is none. */
json_t *command_body(const struct command *cmd, struct opts *o, int i);

#define COMMAND(name) int cmd_##name(const struct command *cmd, struct opts *o)
COMMAND(create); COMMAND(ls); COMMAND(get); COMMAND(fork); COMMAND(snapshot);
COMMAND(hibernate); COMMAND(wake); COMMAND(pause); COMMAND(resume); COMMAND(persistent); COMMAND(ttl); COMMAND(idle_pause); COMMAND(rm); COMMAND(snapshots); COMMAND(volume);
COMMAND(templates); COMMAND(template); COMMAND(usage); COMMAND(limits); COMMAND(exec); COMMAND(shell); COMMAND(logs);
COMMAND(cp); COMMAND(fs); COMMAND(expose); COMMAND(unexpose); COMMAND(ports); COMMAND(preview); COMMAND(events);
COMMAND(network); COMMAND(promote); COMMAND(proc); COMMAND(billing); COMMAND(statements);
COMMAND(keys); COMMAND(audit); COMMAND(admin); COMMAND(app); COMMAND(apps); COMMAND(db);
#undef COMMAND
#endif
