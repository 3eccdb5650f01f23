/*
 * args: the kiln CLI's command-line parsing. Options may come anywhere
 * among a command's arguments (GNU style, without relying on getopt's
 * permutation, which POSIXLY_CORRECT turns off); only what follows `--`
 * is passed on untouched. Each command names the options it takes; any
 * other is a usage error (exit 2) naming it. Numbers are parsed strictly.
 */
#ifndef KILN_CLI_ARGS_H
#define KILN_CLI_ARGS_H

#include <jansson.h>
#include <stdbool.h>

/* kiln's exit statuses (docs/cli.md). exec and shell exit with the remote
 * command's status instead; kiln's own failures stay in 125..127 so that
 * they do not look like the command's (docker's convention). */
/* template build --disk: kilnd's bounds (ops/template.h's OPS_TEMPLATE_DISK_MIN_MIB
 * and _MAX_MIB; the CLI includes no header of kilnd's). */
#define CLI_TEMPLATE_DISK_MIN_MIB 64
#define CLI_TEMPLATE_DISK_MAX_MIB (1 << 20)
/* And its --vcpus and --memory (OPS_TEMPLATE_VCPUS_MAX, _MEMORY_MIN_MIB, _MEMORY_MAX_MIB). */
#define CLI_TEMPLATE_VCPUS_MAX 8
#define CLI_TEMPLATE_MEMORY_MIN_MIB 128
#define CLI_TEMPLATE_MEMORY_MAX_MIB 65536

enum {
	EXIT_USAGE = 2,		/* bad command line: nothing was sent */
	EXIT_KILN = 125,	/* kiln or kilnd failed (unreachable, TLS, an API error) */
	EXIT_CANNOT_RUN = 126,	/* exec: the command could not be started */
	EXIT_NOT_FOUND = 127,	/* exec: the command was not found */
};

struct opts {
	const char *template, *snapshot, *cwd, *status, *cursor;
	long long ttl;			/* -1: not given */
	long long idle_pause;		/* -1: not given */
	long long n;			/* -n: fork's count, logs' lines; -1: not given */
	long long timeout, limit;	/* 0 / -1: not given */
	bool json, tree, in, public, recursive, follow, no_internet, internet, help, delete_parent, close, persistent,
	     force;
	const char *signal;		/* proc kill's -s */
	const char *by, *from, *to, *sandbox;	/* usage's --by, --from, --to, --sandbox (events' too) */
	const char *last_event_id;	/* events' --last-event-id */
	bool csv;			/* usage's --csv */
	long long wait;			/* proc output's --wait, 0: not given */
	const char *name, *scope, *plan;	/* keys create's --name, --scope; admin's --plan */
	long long expires;		/* keys create's --expires, 0: not given */
	json_t *limits;			/* admin's --limits, an object of integers, or NULL */
	const char *key;		/* audit's --key: a key's id or prefix */
	bool all;			/* audit's --all: every page */
	json_t *volumes;		/* create's --volume entries, or NULL */
	long long size;			/* volume create's --size MIB, 0: not given */
	long long port, ready;		/* app's --port, --ready-timeout; 0: not given */
	long long idle, tail;		/* app's --idle-seconds, logs' --tail; -1: not given */
	long long backup_interval, backups_kept;	/* db create's; -1: not given */
	bool external;			/* db create's --external */
	const char *command, *restart;	/* app's --command, --restart */
	const char *user;		/* exec, proc start, cp, fs: -u/--user */
	bool replace;			/* fs cp, fs mv: --replace */
	const char *file;		/* template build's --file */
	json_t *build_args;		/* template build's --build-arg K=V, an array, or NULL */
	long long disk;			/* template build's --disk MIB, 0: not given */
	long long vcpus, memory;	/* template build's --vcpus N and --memory MIB, 0: not given */
	const char *build_net;		/* template build's --build-net none|internet|CIDR,... */
	const char *given[64];		/* the long names of the options given, in order */
	int ngiven;
	json_t *env, *meta;		/* from -e / --meta, or NULL */
	json_t *allow_out, *deny_out;	/* arrays, or NULL */
	char **pos;			/* positional arguments, in order */
	int npos;
	int dashdash;			/* index in pos of the first argument after --, or -1 */
};

struct command;

/* Parse argv (argv[0] is the command's name) for cmd into o. Exits 2 on a
 * usage error, naming the option or value. */
void args_parse(const struct command *cmd, int argc, char **argv, struct opts *o);

/* A usage error unless every option given is "json", "help" or one of
 * allowed (long names, space-separated): what a subcommand takes of its
 * group's options (sub names it in the message: "keys list"). */
void args_only(const struct command *cmd, const struct opts *o, const char *sub, const char *allowed);

/* A strict decimal number in [min, max]; exits 2 naming what and the value. */
long long args_number(const char *what, const char *value, long long min, long long max);

/* Print "kiln: MESSAGE" and the hint to see `kiln help CMD`, exit 2. */
void usage_error(const struct command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

#endif
