/*
 * cmd_template: a workspace's own templates (docs/templates.md "Building
 * through the API"): kiln template build DIR --name N sends what DIR's
 * .dockerignore keeps as a gzipped tar (cli/context.h) and, with --follow,
 * prints the build's log until it ends; context DIR lists what a build
 * would send; get, logs and rm act on one by its name.
 */
#include "cli/cli.h"
#include "cli/context.h"
#include "cli/out.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BODY_MAX (64u << 20)

static const char *tmpl_name(const struct command *cmd, const char *n)
{
	if (!n || !*n || strlen(n) > 19 || n[strspn(n, "abcdefghijklmnopqrstuvwxyz0123456789-_")] || n[0] == '-' ||
	    n[0] == '_')
		usage_error(cmd, "'%s' is not a template name (1 to 19 of a-z, 0-9, '-', '_')", n ? n : "");
	return n;
}

static int log_event(const char *event, const char *data, void *arg)
{
	int *failed = arg;
	json_t *j = json_loads(data, 0, NULL);
	if (!j)
		return 0;
	if (!strcmp(event, "line"))
		printf("%s\n", str(j, "text"));
	fflush(stdout);
	if (!strcmp(event, "end")) {
		*failed = strcmp(str(j, "status"), "ready") != 0;
		fprintf(stderr, "kiln: the build ended: %s%s%s\n", str(j, "status"),
			*failed ? ": " : "", *failed ? str(j, "error") : "");
	}
	json_decref(j);
	return !strcmp(event, "end");
}

/* Print the build's log; following, until the build ends: 0, or 1 when
 * it failed. */
static int print_log(const char *name, bool follow)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/templates/%s/logs%s", name, follow ? "?follow=1" : "");
	struct httpc c;
	if (httpc_start(&c, &target, "GET", path, follow ? "Accept: text/event-stream\r\n" : NULL, NULL, 0, -1,
			0) < 0)
		die("%s", c.error);
	if (!follow || c.status != 200) {
		char *resp = finish(&c, 0);
		fputs(resp ? resp : "", stdout);
		free(resp);
		return 0;
	}
	int failed = -1;
	int rc = sse_read(&c, log_event, &failed);
	httpc_close(&c);
	if (rc < 0)
		die("the log stream broke: %s", c.error);
	return failed > 0;
}

static int template_build(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	if (!o->name)
		usage_error(cmd, "--name N: the template's name is needed");
	const char *name = tmpl_name(cmd, o->name);
	struct query q = { 0 };
	query_add(&q, "name", name);
	query_add(&q, "dockerfile", o->file);
	size_t i;
	json_t *a;
	json_array_foreach(o->build_args, i, a)
		query_add(&q, "build_arg", json_string_value(a));
	char disk[24];
	if (o->disk) {
		snprintf(disk, sizeof disk, "%lld", o->disk);
		query_add(&q, "disk_mib", disk);
	}
	query_add(&q, "build_net", o->build_net);
	char vcpus[24], memory[24];
	if (o->vcpus) {
		snprintf(vcpus, sizeof vcpus, "%lld", o->vcpus);
		query_add(&q, "vcpus", vcpus);
	}
	if (o->memory) {
		snprintf(memory, sizeof memory, "%lld", o->memory);
		query_add(&q, "memory_mib", memory);
	}
	struct context_list files;
	context_list(o->pos[1], o->file, &files);
	off_t size;
	int fd = context_tar(o->pos[1], &files, &size);
	size_t nfiles = files.n, left_out = files.left_out;
	context_list_free(&files);
	char *path = query_path("/v1/templates", &q);
	struct httpc c;
	int rc = httpc_start(&c, &target, "POST", path, "Content-Type: application/gzip\r\n", NULL, 0, fd, size);
	free(path);
	char *resp = finish(&c, rc);
	close(fd);
	json_t *j = resp ? json_loads(resp, 0, NULL) : NULL;
	free(resp);
	if (o->json && !o->follow)
		print_json(j);
	else if (!o->json)
		fprintf(stderr, "kiln: template %s: building (%lld bytes of context sent: %zu paths, %zu left out by "
				".dockerignore)\n", name, (long long)size, nfiles, left_out);
	json_decref(j);
	return o->follow ? print_log(name, true) : 0;
}

/* What a build of DIR would send, one path a line (as tar names them,
 * "./" before each), and on stderr how many .dockerignore left out. */
static int template_context(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	struct context_list files;
	context_list(o->pos[1], o->file, &files);
	for (size_t i = 0; i < files.n; i++)
		printf("./%s\n", files.paths[i]);
	fprintf(stderr, "kiln: %zu paths to send, %zu left out by .dockerignore\n", files.n, files.left_out);
	context_list_free(&files);
	return 0;
}

static int template_get(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	char path[128];
	snprintf(path, sizeof path, "/v1/templates/%s", tmpl_name(cmd, o->pos[1]));
	json_t *r = call("GET", path, NULL);
	print_json(r);
	json_decref(r);
	return 0;
}

static int template_logs(const struct command *cmd, struct opts *o)
{
	need_args(cmd, o, 2, 2);
	return print_log(tmpl_name(cmd, o->pos[1]), o->follow);
}

static int template_rm(const struct command *cmd, struct opts *o)
{
	if (o->npos < 2)
		need_args(cmd, o, 2, 2);
	for (int i = 1; i < o->npos; i++)
		tmpl_name(cmd, o->pos[i]);
	for (int i = 1; i < o->npos; i++) {
		char path[128];
		snprintf(path, sizeof path, "/v1/templates/%s", o->pos[i]);
		json_decref(call("DELETE", path, NULL));
	}
	return 0;
}

int cmd_template(const struct command *cmd, struct opts *o)
{
	static const struct subcommand subs[] = {
		{ "build", "name file build-arg disk build-net vcpus memory follow", template_build },
		{ "context", "file", template_context },
		{ "get", "", template_get },
		{ "logs", "follow", template_logs },
		{ "rm", "", template_rm },
	};
	return subcommand_run(cmd, o, "template", 0, subs, sizeof subs / sizeof subs[0]);
}
