/*
 * dfbuild_state: the image config a Dockerfile's steps build (ENV, ARG,
 * LABEL, WORKDIR, USER, EXPOSE, CMD, ENTRYPOINT), from the base image's,
 * and what the template's manifest takes of it. Nothing here touches a
 * disk or a VM.
 */
#include "host/dfbuild_int.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dfstate_init(struct state *s, const json_t *image)
{
	memset(s, 0, sizeof *s);
	json_t *env = json_object_get(image, "env");
	s->env = json_is_object(env) ? json_deep_copy(env) : json_object();
	s->args = json_object();
	s->expose = json_array();
	s->labels = json_object();
	const char *wd = json_string_value(json_object_get(image, "workdir"));
	snprintf(s->workdir, sizeof s->workdir, "%s", wd && wd[0] == '/' ? wd : "/");
	const char *user = json_string_value(json_object_get(image, "user"));
	snprintf(s->user, sizeof s->user, "%s", user ? user : "");
	json_t *c = json_object_get(image, "cmd"), *e = json_object_get(image, "entrypoint");
	s->cmd = json_is_array(c) ? json_deep_copy(c) : NULL;
	s->entrypoint = json_is_array(e) ? json_deep_copy(e) : NULL;
}

void dfstate_free(struct state *s)
{
	json_decref(s->env);
	json_decref(s->args);
	json_decref(s->cmd);
	json_decref(s->entrypoint);
	json_decref(s->expose);
	json_decref(s->labels);
}

/* p joined onto the working directory wd, as WORKDIR and COPY do, with
 * "." and ".." taken out lexically (a guest path: the guest's own files,
 * nothing of the host). A trailing '/' is kept: COPY reads it. */
void dfbuild_path(const char *wd, const char *p, char *out, size_t cap)
{
	char joined[2 * PATH_MAX + 2];
	snprintf(joined, sizeof joined, "%s/%s", p[0] == '/' ? "" : wd, p);
	size_t n = 0;
	out[0] = 0;
	for (char *c = joined; *c;) {
		while (*c == '/')
			c++;
		size_t len = strcspn(c, "/");
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--;
		} else if (len && !(len == 1 && c[0] == '.') && n + len + 2 < cap) {
			out[n++] = '/';
			memcpy(out + n, c, len);
			n += len;
		}
		c += len;
	}
	if (n == 0)
		out[n++] = '/';
	size_t pl = strlen(p);
	if (pl && p[pl - 1] == '/' && out[n - 1] != '/' && n + 1 < cap)
		out[n++] = '/';
	out[n] = 0;
}

static json_t *argv_json(const struct df_step *st)
{
	json_t *a = json_array();
	if (!st->exec_form) {
		json_array_append_new(a, json_string("/bin/sh"));
		json_array_append_new(a, json_string("-c"));
	}
	for (int i = 0; i < st->nargs; i++)
		json_array_append_new(a, json_string(st->args[i]));
	return a;
}

/* What a step does to the state (the disk aside). */
void dfstate_apply(struct state *s, const struct df_step *st)
{
	switch (st->kind) {
	case DF_FROM:
		s->from_seen = true;
		break;
	case DF_ENV:
		for (int i = 0; i + 1 < st->nargs; i += 2)
			json_object_set_new(s->env, st->args[i], json_string(st->args[i + 1]));
		break;
	case DF_ARG:
		for (int i = 0; s->from_seen && i + 1 < st->nargs; i += 2)
			if (st->args[i + 1])
				json_object_set_new(s->args, st->args[i], json_string(st->args[i + 1]));
		break;
	case DF_LABEL:
		for (int i = 0; i + 1 < st->nargs; i += 2)
			json_object_set_new(s->labels, st->args[i], json_string(st->args[i + 1]));
		break;
	case DF_WORKDIR: {
		char wd[4096];
		dfbuild_path(s->workdir, st->args[0], wd, sizeof wd);
		snprintf(s->workdir, sizeof s->workdir, "%s", wd);
		break;
	}
	case DF_USER:
		snprintf(s->user, sizeof s->user, "%s", st->args[0]);
		break;
	case DF_EXPOSE:
		for (int i = 0; i < st->nargs; i++)
			json_array_append_new(s->expose, json_string(st->args[i]));
		break;
	case DF_CMD:
		json_decref(s->cmd);
		s->cmd = argv_json(st);
		s->own_cmd = true;
		break;
	case DF_ENTRYPOINT:
		json_decref(s->entrypoint);
		s->entrypoint = argv_json(st);
		/* Docker: an ENTRYPOINT drops the CMD the base image had. */
		if (!s->own_cmd) {
			json_decref(s->cmd);
			s->cmd = NULL;
		}
		s->own_cmd = true;
		break;
	default:
		break;
	}
}

bool df_disk_step(enum df_kind k)
{
	return k == DF_RUN || k == DF_COPY || k == DF_ADD || k == DF_WORKDIR;
}

/* ENTRYPOINT + CMD as one shell command, each word quoted. */
void dfstate_start(const struct state *s, char *out, size_t cap)
{
	struct strbuf b;
	strbuf_init(&b);
	json_t *parts[2] = { s->entrypoint, s->cmd };
	for (int p = 0; p < 2; p++) {
		size_t i;
		json_t *w;
		json_array_foreach(parts[p], i, w) {
			if (b.len)
				strbuf_putc(&b, ' ');
			strbuf_putc(&b, '\'');
			for (const char *c = json_string_value(w); c && *c; c++)
				if (*c == '\'')
					strbuf_append(&b, "'\\''", 4);
				else
					strbuf_putc(&b, *c);
			strbuf_putc(&b, '\'');
		}
	}
	if (!strbuf_failed(&b) && b.len && b.len < cap)
		snprintf(out, cap, "exec %.*s", (int)b.len, b.data);
	else
		out[0] = 0;
	strbuf_free(&b);
}

json_t *dfstate_image(const struct dfbuild *d, const struct state *s)
{
	json_t *j = json_pack("{s:s+,s:O,s:s,s:O,s:O}", "source", "Dockerfile in ", d->context, "env", s->env,
			      "workdir", s->workdir, "expose", s->expose, "labels", s->labels);
	if (!j)
		return NULL;
	if (s->user[0])
		json_object_set_new(j, "user", json_string(s->user));
	if (s->cmd)
		json_object_set(j, "cmd", s->cmd);
	if (s->entrypoint)
		json_object_set(j, "entrypoint", s->entrypoint);
	return j;
}
