/*
 * kiln: the command-line client of kilnd's REST API (docs/api.md; the
 * commands are documented in docs/cli.md, which `kiln help` must match).
 * KILN_API_URL (default http://127.0.0.1:7070) and KILN_API_KEY say where
 * and who (KILN_ADMIN_KEY, an operator credential, for kiln admin). Listings print a table, or the API's JSON with --json. `kiln
 * exec` streams the command's output and exits with its exit status;
 * kiln's own failures exit 2 (usage) or 125 (see args.h).
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

struct httpc_target target;

#define POLICY_HELP \
	"  --allow-out CIDR[,CIDR]  only these destinations (repeatable)\n" \
	"  --deny-out CIDR[,CIDR]   never these destinations (repeatable)\n" \
	"  --no-internet            nothing leaves the sandbox\n"

static const struct command commands[] = {
	{ "create", cmd_create, "template from-snapshot ttl persistent idle-pause disk env meta allow-out deny-out no-internet volume",
	  "create [TEMPLATE|SNAPSHOT] [--ttl SECONDS] [--persistent] [--idle-pause SECONDS] [--disk MIB] [-e K=V]... [--meta K=V]... [--volume NAME:/PATH[:ro]]... [--allow-out CIDR]... [--deny-out CIDR]... [--no-internet] [--json]",
	  "create a sandbox from a template (default base) or a snapshot; prints its id",
	  "  TEMPLATE, --template T   the template (kiln templates lists them)\n"
	  "  SNAPSHOT, --from-snapshot S  a snapshot id (snap_...) instead\n"
	  "  --ttl SECONDS            idle timeout, 0 to 604800 (0: none)\n"
	  "  --persistent             the idle timeout hibernates it instead of deleting it\n"
	  "  --idle-pause SECONDS     pause it after this long idle, before the idle timeout (0: never)\n"
	  "  --disk MIB               a root disk of MIB (at least the template's; its filesystem takes it all)\n"
	  "  -e, --env K=V            environment of every command run in it\n"
	  "  --meta K=V               metadata (kiln ls --meta filters on it)\n"
	  "  --volume NAME:/PATH[:ro] mount volume NAME (kiln volume create) at PATH; :ro read-only\n"
	  POLICY_HELP, false },
	{ "ls", cmd_ls, "status template meta limit cursor",
	  "ls [--status S] [--template T] [--meta K=V]... [--limit N [--cursor C]] [--json]",
	  "sandboxes of this workspace, oldest first",
	  "  --status S               only those in state S (creating, running, paused, hibernated, failed)\n"
	  "  --template T             only those made from template T\n"
	  "  --meta K=V               only those with metadata K=V (all given must match)\n"
	  "  --limit N                one page of at most N (1 to 1000; default: every page)\n"
	  "  --cursor C               the page after the one that printed C\n", false },
	{ "get", cmd_get, "", "get ID", "one sandbox, as JSON", NULL, false },
	{ "exec", cmd_exec, "env cwd timeout stdin user",
	  "exec [-e K=V]... [-w DIR] [-u USER] [-t SECONDS] [-i] ID [--] CMD [ARG...]",
	  "run CMD in the sandbox; its output streams and kiln exits with its status",
	  "  one CMD argument is a shell command line (sh -c); several are an argv.\n"
	  "  Options may come anywhere before --; what follows -- is the command, untouched.\n"
	  "  -e, --env K=V            added to the sandbox's environment\n"
	  "  -w, --cwd DIR            working directory (default: the user's home)\n"
	  "  -u, --user USER          run as this guest user (name, uid or uid:gid; default root)\n"
	  "  -t, --timeout SECONDS    kill it after SECONDS (1 to 86400)\n"
	  "  -i, --stdin              send kiln's stdin to it (text, at most 1 MiB)\n", true },
	{ "proc", cmd_proc, "stdin env cwd timeout wait close signal user",
	  "proc start|ls|output|stdin|kill ...",
	  "background processes: start one, list, read its output, feed its stdin, signal it",
	  "  proc start [--stdin] [-e K=V]... [-w DIR] [-u USER] [-t SECONDS] ID [--] CMD [ARG...]\n"
	  "                           start CMD in the background; prints its PROC number\n"
	  "    --stdin                keep its stdin open for proc stdin\n"
	  "  proc ls ID               the processes the sandbox keeps\n"
	  "  proc output [--wait SECONDS] ID PROC\n"
	  "                           its output kept so far (and until it ends, up to SECONDS);\n"
	  "                           exits with its status once it has ended\n"
	  "  proc stdin [--close] ID PROC  send kiln's stdin to it (--close: then end it)\n"
	  "  proc kill [-s SIGNAL] ID PROC  signal its process group (default KILL)\n", true },
	{ "shell", cmd_shell, "", "shell ID [--] [CMD [ARG...]]",
	  "a terminal in the sandbox (the login shell, or CMD); ends at the remote exit or at the end of piped stdin",
	  NULL, true },
	{ "logs", cmd_logs, "lines follow", "logs ID [-n LINES] [-f] [--json]",
	  "the guest console and kiln-init's log of a sandbox",
	  "  -n, --lines N            the last N lines (1 to 10000, default 200)\n"
	  "  -f, --follow             keep printing new lines until the sandbox ends\n", false },
	{ "cp", cmd_cp, "recursive user", "cp [-r] [-u USER] SRC DST",
	  "copy files in or out of a sandbox; one side is ID:PATH, '-' is stdin or stdout",
	  "  -r, --recursive          copy a directory tree (either way)\n"
	  "  -u, --user USER          read and write the guest's files as USER (name, uid or uid:gid)\n"
	  "  A local SRC may be any file that can be read: a pipe, a FIFO, <(cmd).\n"
	  "  A DST that is a directory (or ends in /) gets SRC's name inside it.\n", false },
	{ "fs", cmd_fs, "recursive user replace",
	  "fs ls|stat|rm [-r]|mkdir|watch [-r]|cp [-r]|mv|tar|untar ID:PATH [TO] [-u USER]",
	  "guest paths: list, stat, remove, make, watch, copy and move them; a tree as a tar stream",
	  "  fs watch [-r] ID:PATH    print changes (TYPE NAME lines, or --json) until the path\n"
	  "                           goes or ^C; -r: the directories below it too\n"
	  "  fs cp [-r] [--replace] ID:FROM TO   copy inside the guest (-r: a directory tree;\n"
	  "                           modes and symlinks kept); TO is a guest path or ID:TO\n"
	  "  fs mv [--replace] ID:FROM TO        move (rename) inside the guest\n"
	  "  fs tar ID:DIR > x.tar    the tree as a tar stream on stdout\n"
	  "  fs untar ID:DIR < x.tar  extract a tar from stdin into DIR (made if missing)\n"
	  "  -u, --user USER          act as this guest user: its permissions, its files\n"
	  "  --replace                cp, mv: an existing TO is replaced (else an error)\n", false },
	{ "fork", cmd_fork, "count tree", "fork ID [-n N] [--tree] [--json]",
	  "N live copies of a running sandbox; prints their ids",
	  "  -n, --count N            how many (1 to 64, default 1)\n"
	  "  --tree                   all in one pause of the parent\n", false },
	{ "promote", cmd_promote, "delete-parent", "promote ID [--delete-parent] [--json]",
	  "keep this child of a fork and delete its siblings; prints the ids deleted",
	  "  --delete-parent          the parent it was forked from goes too\n", false },
	{ "snapshot", cmd_snapshot, "", "snapshot ID [--json]", "snapshot a sandbox (memory and disk); prints its id",
	  NULL, false },
	{ "snapshots", cmd_snapshots, "", "snapshots [--json]", "snapshots of this workspace", NULL, false },
	{ "volume", cmd_volume, "size force", "volume create|ls|rm|attach|detach ... [--json]",
	  "named volumes: storage that outlives sandboxes (one writer at a time)",
	  "  volume create NAME --size MIB  make one (ext4, 1 to 65536 MiB); prints its id\n"
	  "  volume ls                the volumes and the sandboxes they are attached to\n"
	  "  volume rm ID...          delete volumes (vol_...) and their data; refused while attached\n"
	  "  volume attach SANDBOX NAME:/PATH[:ro]  mount it in a running sandbox\n"
	  "  volume detach SANDBOX NAME [--force]\n"
	  "                           unmount it and let it go (refused while the guest uses it;\n"
	  "                           --force: kill what uses it first)\n", false },
	{ "hibernate", cmd_hibernate, "", "hibernate ID [--json]", "stop a sandbox, keeping its state", NULL, false },
	{ "wake", cmd_wake, "", "wake ID [--json]", "bring a hibernated sandbox back", NULL, false },
	{ "pause", cmd_pause, "", "pause ID [--json]",
	  "stop a sandbox's vCPUs, keeping its memory (no CPU billed; resume is quick)", NULL, false },
	{ "resume", cmd_resume, "", "resume ID [--json]", "start a paused sandbox again", NULL, false },
	{ "persistent", cmd_persistent, "", "persistent ID on|off [--json]",
	  "on: the idle timeout hibernates the sandbox instead of deleting it; off: the plan's rule", NULL, false },
	{ "ttl", cmd_ttl, "", "ttl ID SECONDS [--json]", "set the idle timeout (0 to 604800; 0: none)", NULL, false },
	{ "idle-pause", cmd_idle_pause, "", "idle-pause ID SECONDS [--json]",
	  "pause the sandbox after this long without a request (0 to 604800; 0: never); a request resumes it", NULL, false },
	{ "network", cmd_network, "allow-out deny-out no-internet internet",
	  "network ID [--allow-out CIDR]... [--deny-out CIDR]... [--no-internet|--internet] [--json]",
	  "show a sandbox's egress policy, or replace it (what is not given takes its default)",
	  POLICY_HELP "  --internet               everything not denied may leave\n", false },
	{ "expose", cmd_expose, "public", "expose ID PORT [--public] [--json]",
	  "reach guest port PORT through kilnd; prints its URL",
	  "  --public                 no API key needed to reach it\n", false },
	{ "unexpose", cmd_unexpose, "", "unexpose ID PORT", "stop exposing a port", NULL, false },
	{ "ports", cmd_ports, "", "ports ID [--json]", "the exposed ports of a sandbox", NULL, false },
	{ "preview", cmd_preview, "ttl", "preview ID PORT [--ttl SECONDS] [--json]",
	  "a link to an exposed port (private ones too) that needs no API key until it expires; prints it",
	  "  --ttl SECONDS            how long the link works (60 to 604800; default 3600)\n", false },
	{ "events", cmd_events, "sandbox last-event-id limit",
	  "events [--sandbox ID] [--last-event-id ID] [--limit N] [--json]",
	  "the workspace's sandbox events as they happen: one line each (time, id, type, sandbox, details)",
	  "  --sandbox ID             one sandbox's events only\n"
	  "  --last-event-id ID       first the events after that one (an id a line printed), while kept\n"
	  "                           (else a resync line on stderr: list again)\n"
	  "  --limit N                exit after N printed (1 to 1000; a resync counts; default: never)\n"
	  "  --json                   each event as a JSON line, with event (its kind) and event_id;\n"
	  "                           usage samples too\n", false },
	{ "rm", cmd_rm, "", "rm ID...", "delete sandboxes (or snapshots: snap_...)", NULL, false },
	{ "templates", cmd_templates, "", "templates [--json]", "the templates and their state", NULL, false },
	{ "usage", cmd_usage, "by from to sandbox csv",
	  "usage [--by hour|day] [--from T] [--to T] [--sandbox ID] [--csv] [--json]",
	  "this workspace's usage: totals, or metered hours by hour or day, priced",
	  "  with no option: totals over the workspace's sandboxes\n"
	  "  --by hour|day            by UTC hour (default) or day, each priced, and their total\n"
	  "  --from T, --to T         the range: 2026-12-01, 2026-12-01T05:00:00Z or Unix seconds\n"
	  "                           (default: this month, through the hour under way)\n"
	  "  --sandbox ID             one sandbox's hours only\n"
	  "  --csv                    the hours as CSV, as kilnd makes it\n", false },
	{ "billing", cmd_billing, "", "billing [--json]",
	  "this month so far: plan, prices, cost, projected, credit left", NULL, false },
	{ "statements", cmd_statements, "", "statements [MONTH] [--json]",
	  "monthly statements, newest first, or one month's (2026-11); closed months never change", NULL,
	  false },
	{ "limits", cmd_limits, "", "limits [--json]", "this workspace's plan, its limits and what is in use",
	  NULL, false },
	{ "keys", cmd_keys, "name scope expires", "keys list|create|revoke ... [--json]",
	  "this workspace's API keys: list them, make one (shown once), revoke them",
	  "  keys list                the keys: prefix, name, scope, created, last used, expiry, state\n"
	  "  keys create [--name N] [--scope full|read] [--expires SECONDS]\n"
	  "                           a new key, printed once on stdout: keep it, it is not shown again\n"
	  "    --name N               a label (at most 63 bytes)\n"
	  "    --scope full|read      read: GET routes only, nothing that changes (default full)\n"
	  "    --expires SECONDS      refused after SECONDS (1 to 316224000; default: never)\n"
	  "  keys revoke ID...        revoke keys (key_...); kilnd refuses them from then on\n", false },
	{ "audit", cmd_audit, "limit key cursor all", "audit [--limit N] [--key ID|PREFIX] [--cursor C] [--all] [--json]",
	  "this workspace's audit log, newest first: each call that changes something, refused ones too",
	  "  --limit N                entries a page (1 to 1000; default 100, with --all 1000)\n"
	  "  --key ID|PREFIX          one key's entries only: its id (key_...) or prefix (kiln_...;\n"
	  "                           an operator credential's: op_... or kilnop_...)\n"
	  "  --cursor C               read on after a full page whose next_cursor is C (kiln\n"
	  "                           prints the command that does, on stderr)\n"
	  "  --all                    follow the pages to the end, 100 at most (--json: one object)\n", false },
	{ "admin", cmd_admin, "name scope expires plan limits from to", "admin workspaces|keys|usage|plans ... [--json]",
	  "the operator's commands (/v1/admin), with the operator credential in KILN_ADMIN_KEY",
	  "  admin workspaces list    every live workspace: plan, limits, suspended, sandboxes, month's cost\n"
	  "  admin workspaces show NAME\n"
	  "  admin workspaces create NAME [--plan P] [--limits LIMIT=N[,LIMIT=N]]\n"
	  "  admin workspaces plan NAME [PLAN] [--limits LIMIT=N[,LIMIT=N]|none]\n"
	  "                           change its plan, or replace its own limits (none: drop them)\n"
	  "  admin workspaces suspend|unsuspend NAME\n"
	  "                           its keys are refused and its sandboxes hibernated, or no longer\n"
	  "  admin workspaces delete NAME  refused while it has live sandboxes; its keys are revoked\n"
	  "  admin keys create WORKSPACE [--name N] [--scope full|read] [--expires SECONDS]\n"
	  "                           a key of that workspace, printed once (as kiln keys create)\n"
	  "  admin keys list WORKSPACE  its keys (as kiln keys list)\n"
	  "  admin keys revoke WORKSPACE ID...  revoke keys of that workspace (key_...)\n"
	  "  admin usage [--from T] [--to T]  metered usage per workspace, priced (default: this month)\n"
	  "  admin plans list         every plan: the server's and the operator's, the limits in force\n"
	  "  admin plans show NAME\n"
	  "  admin plans set NAME --limits LIMIT=N[,LIMIT=N]|none\n"
	  "                           the operator's limits over the server's plan (none: as shipped),\n"
	  "                           or a plan of the operator's; held at once on every replica\n"
	  "  admin plans delete NAME  a plan of the operator's that no workspace is on\n"
	  "  KILN_ADMIN_KEY: an operator credential (kilnop_...; kilnd admin create on kilnd's host)\n", false },
	{ "app", cmd_app, "port command template from-snapshot sandbox env restart idle-seconds ready-timeout tail follow",
	  "app create|ls|get|deploy|logs|rm ... [--json]",
	  "apps: a long-running service in a sandbox kiln keeps for it, at a stable URL",
	  "  app create NAME --port P [--command CMD] [--template T | --from-snapshot S | --sandbox ID]\n"
	  "      [-e K=V]... [--restart always|on-failure|never] [--idle-seconds N] [--ready-timeout N]\n"
	  "                           deploy one (kilnd needs --domain): CMD must listen on port P in\n"
	  "                           a sandbox from T (default base) or S, or the running sandbox ID\n"
	  "                           made the app; prints its URL once CMD listens\n"
	  "    --restart R            when CMD is started again after it exits (default on-failure)\n"
	  "    --idle-seconds N       hibernated after N s without requests (0: never; default 900)\n"
	  "    --ready-timeout N      how long CMD has to listen (1 to 600 s; default 60)\n"
	  "  app ls                   the apps (as kiln apps)\n"
	  "  app get NAME             one app, as JSON (NAME: its name or id)\n"
	  "  app deploy NAME [--port P] [--command CMD] [--template T | --from-snapshot S] [-e K=V]...\n"
	  "      [--restart R] [--idle-seconds N] [--ready-timeout N]\n"
	  "                           a new version (what is not given is kept), switched to once it\n"
	  "                           listens; prints the URL\n"
	  "  app logs NAME [--tail N] [-f]  what kiln did with it, then the last N lines of its log\n"
	  "                           (0 to 10000, default 100); -f: and new ones as they come\n"
	  "  app rm NAME...           delete apps, their sandboxes and URLs\n", false },
	{ "template", cmd_template, "name file build-arg disk build-net vcpus memory follow",
	  "template build|context|get|logs|rm ... [--json]",
	  "the workspace's own templates, built from a Dockerfile",
	  "  template build DIR --name N [--file F] [--build-arg K=V]... [--disk MIB]\n"
	  "      [--build-net none|internet|CIDR,...] [--vcpus N] [--memory MIB] [-f]\n"
	  "                           send DIR as the build context (a tar of what its .dockerignore\n"
	  "                           keeps) and build template N from its Dockerfile (--file:\n"
	  "                           another path in DIR); --disk: the root's size (64 to 1048576\n"
	  "                           MiB, sparse; default the FROM image's); --build-net: what the\n"
	  "                           RUN steps reach (default none); --vcpus (1 to 8) and --memory\n"
	  "                           (128 to 65536 MiB): its sandboxes' (default 1 and 256); -f: print\n"
	  "                           the build's log until it ends (exit 1 if it failed)\n"
	  "  template context DIR [--file F]\n"
	  "                           the paths a build of DIR sends: what its .dockerignore keeps\n"
	  "                           (and F, default Dockerfile, and .dockerignore, always)\n"
	  "  template get N           the template, as JSON: status, error, versions, size\n"
	  "  template logs N [-f]     its build's log; -f: and new lines until the build ends\n"
	  "  template rm N...         delete templates (not while a sandbox of it exists)\n", false },
	{ "apps", cmd_apps, "", "apps [--json]", "the apps of this workspace: name, status, version, URL", NULL, false },
	{ "db", cmd_db, "backup-interval backups-kept external", "db create|ls|get|cert|rm|reset-password|backup|backups|restore|external ... [--json]",
	  "managed PostgreSQL databases, reachable from this workspace's sandboxes",
	  "  db create [NAME] [--backup-interval S] [--backups-kept N] [--external]\n"
	  "                           a database in a microVM of its own; prints its URL with the\n"
	  "                           password (shown this once) when it takes connections;\n"
	  "                           a backup every S seconds (at least 300), the newest N kept;\n"
	  "                           --external: reachable from outside kiln too, through a port\n"
	  "                           of kilnd's (its external URL printed on a second line)\n"
	  "  db ls                    the databases: name, id, status, host:port\n"
	  "  db get NAME              one database, as JSON (NAME: its name or id; no password)\n"
	  "  db cert NAME             its server's TLS certificate (PEM): save it as the file its\n"
	  "                           external URL names (sslrootcert=ID.crt) to verify the server\n"
	  "  db rm NAME...            delete databases and their VMs (their backups are kept)\n"
	  "  db reset-password NAME   a new password (the old one fails from then); prints the URL\n"
	  "  db backup NAME           a backup now (a snapshot); prints its id\n"
	  "  db backups NAME          its backups, oldest first: id and kind (manual or scheduled)\n"
	  "  db restore BACKUP [NAME] a new database with the backup's data; prints its URL\n"
	  "  db external NAME on|off  open it to outside kiln through a port of kilnd's, TLS only\n"
	  "                           (prints its external URL), or close that port and cut its\n"
	  "                           connections\n", false },
	{ "help", NULL, "", "help [COMMAND]", "this list, or one command's usage", NULL, false },
};

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

void command_help(const struct command *cmd, FILE *f)
{
	fprintf(f, "usage: kiln %s\n%s\n", cmd->synopsis, cmd->summary);
	if (cmd->details)
		fprintf(f, "%s", cmd->details);
}

static void help(FILE *f)
{
	fputs("usage: kiln COMMAND [ARG...] [options]   (options may come anywhere; -- ends them)\n\n", f);
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fputs("\nkiln help COMMAND, or kiln COMMAND --help, prints its usage.\n"
	      "--json: the API's JSON instead of a table (every command that prints).\n"
	      "environment: KILN_API_URL (default http://127.0.0.1:7070; https:// too),\n"
	      "  KILN_API_KEY (the workspace's API key), KILN_ADMIN_KEY (an operator\n"
	      "  credential, for kiln admin), KILN_CA_CERT (a PEM file of the certificate\n"
	      "  authority of a kilnd with a private certificate), NO_COLOR.\n"
	      "exit status: 0 done; 2 bad usage (nothing was sent); 125 kiln or kilnd failed;\n"
	      "  exec and shell: the remote command's status (126/127: it could not run).\n", f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		help(stderr);
		return EXIT_USAGE;
	}
	const char *name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "-h"))
		name = "help";
	if (!strcmp(name, "help")) {
		if (argc > 3)
			usage_error(find("help"), "help wants at most one command");
		if (argc == 3) {
			const struct command *c = find(argv[2]);
			if (!c)
				usage_error(NULL, "unknown command '%s'", argv[2]);
			command_help(c, stdout);
		} else {
			help(stdout);
		}
		return 0;
	}
	const struct command *cmd = find(name);
	if (!cmd)
		usage_error(NULL, "unknown command '%s'", name);
	struct opts o;
	args_parse(cmd, argc - 1, argv + 1, &o);
	char err[256];
	if (httpc_target_env(&target, err, sizeof err) < 0)
		die("%s", err);
	int rc = cmd->run(cmd, &o);
	fflush(stdout);
	return rc;
}
