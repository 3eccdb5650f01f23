/*
 * The Dockerfile parser (src/host/dockerfile.c): every supported
 * instruction in each of its forms, continuations, comments and variable
 * substitution, and every refusal with the line it names; the bounds
 * (file size, instruction length, steps, JSON arrays) are hit for real.
 */
#include "host/dockerfile.h"
#include "common/err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

static struct dockerfile df;

static int parse(const char *text)
{
	dockerfile_free(&df);
	return dockerfile_parse(text, strlen(text), NULL, &df);
}

static int parse_args(const char *text, const char *const *args)
{
	dockerfile_free(&df);
	return dockerfile_parse(text, strlen(text), args, &df);
}

#define ARG(i, j) (df.steps[i].args[j])
#define T_ARGS(i, n) T_ASSERT(df.steps[i].nargs == (n), "step %d: %d args, not %d", i, \
			      df.steps[i].nargs, n)
#define T_STR(a, b) do { const char *t_a = (a), *t_b = (b); \
	T_ASSERT(t_a && !strcmp(t_a, t_b), "'%s' is not '%s'", t_a ? t_a : "(null)", t_b); } while (0)
/* The parse fails with EINVAL and a message holding want. */
#define T_REFUSED(text, want) do { int t_rc = parse(text); \
	T_ASSERT(t_rc == -EINVAL, "accepted (rc %d): %s", t_rc, text); \
	T_ASSERT(strstr(errmsg(), want), "message '%s' lacks '%s'", errmsg(), want); \
	T_ASSERT(df.nsteps == 0, "steps left after a failure"); } while (0)

static int good_file(void)
{
	const char *text =
		"# a comment\n"
		"\n"
		"ARG BASE=debian\n"
		"FROM ${BASE}:bookworm AS build\n"
		"LABEL org.example.title=\"my app\" version=1\n"
		"ENV LANG=C.UTF-8 HOME=/home/app\n"
		"ARG PORT=8000\n"
		"WORKDIR $HOME/src\n"
		"COPY --chown=app:app app.py requirements.txt ./\n"
		"ADD data.tar /srv/\n"
		"RUN apt-get update && \\\n"
		"    apt-get install -y python3   \n"
		"USER app\n"
		"EXPOSE ${PORT} 53/udp\n"
		"ENTRYPOINT [\"python3\"]\n"
		"CMD [\"-m\", \"http.server\", \"8000\"]\n";
	T_ASSERT(parse(text) == 0, "%s", errmsg());
	T_ASSERT(df.nsteps == 13, "%d steps", df.nsteps);
	enum df_kind want[] = { DF_ARG, DF_FROM, DF_LABEL, DF_ENV, DF_ARG, DF_WORKDIR, DF_COPY, DF_ADD,
				DF_RUN, DF_USER, DF_EXPOSE, DF_ENTRYPOINT, DF_CMD };
	int lines[] = { 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16 };
	for (int i = 0; i < 13; i++) {
		T_ASSERT(df.steps[i].kind == want[i], "step %d is %s", i, df_kind_name(df.steps[i].kind));
		T_ASSERT(df.steps[i].line == lines[i], "step %d on line %d, not %d", i, df.steps[i].line,
			 lines[i]);
	}
	T_STR(ARG(1, 0), "debian:bookworm");
	T_STR(df.steps[1].as, "build");
	T_ARGS(2, 4);
	T_STR(ARG(2, 0), "org.example.title");
	T_STR(ARG(2, 1), "my app");
	T_STR(ARG(2, 3), "1");
	T_STR(ARG(5, 0), "/home/app/src");
	T_ARGS(6, 3);
	T_STR(df.steps[6].chown, "app:app");
	T_ASSERT(df.steps[6].chmod == NULL, "chmod set");
	T_STR(ARG(6, 2), "./");
	T_ARGS(8, 1);
	T_ASSERT(!df.steps[8].exec_form, "RUN in exec form");
	T_STR(ARG(8, 0), "apt-get update &&     apt-get install -y python3");
	T_STR(ARG(10, 0), "8000/tcp");
	T_STR(ARG(10, 1), "53/udp");
	T_ASSERT(df.steps[11].exec_form && df.steps[11].nargs == 1, "ENTRYPOINT");
	T_ARGS(12, 3);
	T_STR(ARG(12, 1), "http.server");
	T_STR(df.steps[8].text, "RUN apt-get update &&     apt-get install -y python3");
	return 0;
}

static int keywords_any_case_and_crlf(void)
{
	T_ASSERT(parse("from busybox\r\nrun echo hi\r\nWorkDir /x\r\n") == 0, "%s", errmsg());
	T_ASSERT(df.nsteps == 3 && df.steps[1].kind == DF_RUN && df.steps[2].kind == DF_WORKDIR, "kinds");
	T_STR(ARG(1, 0), "echo hi");
	T_STR(ARG(2, 0), "/x");
	return 0;
}

static int run_forms(void)
{
	T_ASSERT(parse("FROM a\nRUN [\"/bin/sh\", \"-c\", \"echo \\\"q\\\" \\\\ \\u00e9\\ttab\"]\n") == 0,
		 "%s", errmsg());
	T_ASSERT(df.steps[1].exec_form, "not exec form");
	T_ARGS(1, 3);
	T_STR(ARG(1, 2), "echo \"q\" \\ \xc3\xa9\ttab");
	/* The shell form keeps variables for the shell. */
	T_ASSERT(parse("FROM a\nARG X=1\nRUN echo $X ${X} 'q'\n") == 0, "%s", errmsg());
	T_STR(ARG(2, 0), "echo $X ${X} 'q'");
	T_REFUSED("FROM a\nRUN []\n", "line 2: RUN: an empty command");
	T_REFUSED("FROM a\nRUN --mount=type=cache,target=/x make\n", "line 2: RUN --mount is not supported");
	T_REFUSED("FROM a\nRUN\n", "line 2: RUN needs arguments");
	return 0;
}

static int cmd_entrypoint_forms(void)
{
	T_ASSERT(parse("FROM a\nCMD python3 -m http.server\nENTRYPOINT [\"tini\", \"--\"]\nCMD []\n") == 0,
		 "%s", errmsg());
	T_ASSERT(!df.steps[1].exec_form && df.steps[1].nargs == 1, "CMD shell form");
	T_STR(ARG(1, 0), "python3 -m http.server");
	T_ASSERT(df.steps[2].exec_form && df.steps[2].nargs == 2, "ENTRYPOINT exec form");
	T_STR(ARG(2, 1), "--");
	T_ASSERT(df.steps[3].exec_form && df.steps[3].nargs == 0, "CMD []");
	return 0;
}

static int bad_json(void)
{
	T_REFUSED("FROM a\nCMD [\"a\", \n", "line 2: CMD: bad JSON array");
	T_REFUSED("FROM a\n\nENTRYPOINT [\"a\", 1]\n", "line 3: ENTRYPOINT: element 2 of the JSON array is not a string");
	T_REFUSED("FROM a\nCMD ['single']\n", "line 2: CMD: bad JSON array");
	T_REFUSED("FROM a\nRUN [\"a\"] trailing\n", "line 2: RUN: bad JSON array");
	T_REFUSED("FROM a\nCMD [\"\\x41\"]\n", "line 2: CMD: bad JSON array");
	T_REFUSED("FROM a\nCMD [\"a\\u0000b\"]\n", "line 2: CMD: bad JSON array");
	T_REFUSED("FROM a\nCOPY [\"a\", {}]\n", "line 2: COPY: element 2");
	return 0;
}

static int copy_add_forms(void)
{
	T_ASSERT(parse("FROM a\nCOPY [\"my file\", \"/dst dir/\"]\nCOPY --chmod=0755 --chown=1:2 a b /c/\n"
		       "ADD \"x y\" 'z' /w\nCOPY a\\ b /d\n") == 0, "%s", errmsg());
	T_ARGS(1, 2);
	T_STR(ARG(1, 0), "my file");
	T_STR(ARG(1, 1), "/dst dir/");
	T_STR(df.steps[2].chmod, "0755");
	T_STR(df.steps[2].chown, "1:2");
	T_ARGS(2, 3);
	T_STR(ARG(3, 0), "x y");
	T_STR(ARG(3, 1), "z");
	T_STR(ARG(4, 0), "a b");
	T_REFUSED("FROM a\nCOPY onlyone\n", "line 2: COPY needs at least one source and a destination");
	T_REFUSED("FROM a\nADD https://example.com/x.tar /x\n", "line 2: ADD of a URL is not supported");
	T_REFUSED("FROM a\nADD git@github.com:a/b /x\n", "line 2: ADD of a URL is not supported");
	T_REFUSED("FROM a\nCOPY --from=build /a /b\n", "line 2: COPY --from is not supported");
	T_REFUSED("FROM a\nCOPY --link a /b\n", "line 2: COPY --link is not supported");
	T_REFUSED("FROM a\nCOPY ../secret /b\n", "line 2: COPY source '../secret' leaves the build context");
	T_REFUSED("FROM a\nCOPY a/../../b /b\n", "leaves the build context");
	T_REFUSED("FROM a\nCOPY --chown= a /b\n", "line 2: COPY: --chown= needs a value");
	T_REFUSED("FROM a\nCOPY --chown=a --chown=b a /b\n", "--chown given twice");
	/* "..x" is a name, not the parent. */
	T_ASSERT(parse("FROM a\nCOPY ..x/y.. /b\n") == 0, "%s", errmsg());
	return 0;
}

static int env_label_forms(void)
{
	T_ASSERT(parse("FROM a\nENV A=1 B=\"two words\" C='$A' D=$A\\$ E=\n"
		       "ENV OLD legacy form  value\nENV F=${A}x G=${NOPE:-dflt} H=${A:+set} I=${NOPE:+x}\n") == 0,
		 "%s", errmsg());
	T_ARGS(1, 10);
	T_STR(ARG(1, 3), "two words");
	T_STR(ARG(1, 5), "$A");
	T_STR(ARG(1, 7), "$");	/* A=1 of the same ENV is not seen yet */
	T_STR(ARG(1, 8), "E");
	T_STR(ARG(1, 9), "");
	T_ARGS(2, 2);
	T_STR(ARG(2, 0), "OLD");
	T_STR(ARG(2, 1), "legacy form  value");
	T_STR(ARG(3, 1), "1x");
	T_STR(ARG(3, 3), "dflt");
	T_STR(ARG(3, 5), "set");
	T_STR(ARG(3, 7), "");
	/* Pairs of one instruction see the values from before it, as Docker. */
	T_ASSERT(parse("FROM a\nENV A=1\nENV A=2 B=$A\n") == 0, "%s", errmsg());
	T_STR(ARG(2, 3), "1");
	T_REFUSED("FROM a\nENV 1BAD=x\n", "line 2: ENV: bad variable name '1BAD'");
	T_REFUSED("FROM a\nENV ONLY\n", "line 2: ENV needs a value for 'ONLY'");
	T_REFUSED("FROM a\nENV A=1 junk\n", "line 2: ENV wants KEY=VALUE pairs, not 'junk'");
	T_REFUSED("FROM a\nLABEL novalue\n", "line 2: LABEL wants KEY=VALUE pairs");
	T_REFUSED("FROM a\nLABEL a=\"open\n", "line 2: unterminated \" quote");
	T_REFUSED("FROM a\nENV A=${B\n", "line 2: unterminated '${'");
	T_REFUSED("FROM a\nENV A=${B:?x}\n", "line 2: bad substitution");
	T_REFUSED("FROM a\nENV A=${}\n", "line 2: bad substitution");
	return 0;
}

static int arg_scoping_and_build_args(void)
{
	/* A global ARG reaches FROM only, unless declared again. */
	T_ASSERT(parse("ARG V=1\nFROM img:$V\nENV A=x$V\nARG V\nENV B=y$V\n") == 0, "%s", errmsg());
	T_STR(ARG(1, 0), "img:1");
	T_STR(ARG(2, 1), "x");
	T_STR(ARG(3, 0), "V");
	T_STR(ARG(3, 1), "1");
	T_STR(ARG(4, 1), "y1");
	/* Build arguments override defaults; ENV beats ARG. */
	const char *ba[] = { "V=9", "W=w", NULL };
	T_ASSERT(parse_args("ARG V=1\nFROM img:$V\nARG W=d X\nENV W=env\nENV R=$W$X.\n", ba) == 0, "%s",
		 errmsg());
	T_STR(ARG(1, 0), "img:9");
	T_ARGS(2, 4);
	T_STR(ARG(2, 1), "w");
	T_ASSERT(ARG(2, 3) == NULL, "X has a value");
	T_STR(ARG(4, 1), "env.");
	/* Variables declared later do not reach back. */
	T_ASSERT(parse("FROM a\nWORKDIR /$LATER\nARG LATER=x\nWORKDIR \"/$LATER y\"\n") == 0, "%s", errmsg());
	T_STR(ARG(1, 0), "/");
	T_STR(ARG(3, 0), "/x y");
	T_REFUSED("FROM a\nARG 9x=1\n", "line 2: ARG: bad name '9x'");
	return 0;
}

static int user_expose_workdir(void)
{
	T_ASSERT(parse("FROM a\nUSER 1000:1000\nEXPOSE 80 443/TCP 53/udp\n") == 0, "%s", errmsg());
	T_STR(ARG(1, 0), "1000:1000");
	T_ARGS(2, 3);
	T_STR(ARG(2, 1), "443/tcp");
	T_REFUSED("FROM a\nUSER a b\n", "line 2: USER wants one USER[:GROUP]");
	T_REFUSED("FROM a\nEXPOSE 0\n", "line 2: EXPOSE: bad port '0'");
	T_REFUSED("FROM a\nEXPOSE 65536\n", "bad port '65536'");
	T_REFUSED("FROM a\nEXPOSE 80/sctp\n", "bad port '80/sctp'");
	T_REFUSED("FROM a\nEXPOSE 8000-8010\n", "bad port '8000-8010'");
	T_REFUSED("FROM a\nEXPOSE http\n", "bad port 'http'");
	T_REFUSED("FROM a\nWORKDIR \"\"\n", "line 2: WORKDIR needs a directory");
	return 0;
}

static int continuations_and_comments(void)
{
	/* Comment and blank lines inside a continuation are dropped, blanks
	 * after the backslash are allowed, and line numbers stay right. */
	T_ASSERT(parse("FROM a\n"
		       "RUN one \\  \n"
		       "# inside\n"
		       "\n"
		       "    two \\\n"
		       "  three\n"
		       "ENV X=1\n"
		       "CMD echo \\\n") == 0, "%s", errmsg());
	T_ASSERT(df.nsteps == 4, "%d steps", df.nsteps);
	T_STR(ARG(1, 0), "one     two   three");
	T_ASSERT(df.steps[2].line == 7 && df.steps[3].line == 8, "lines %d %d", df.steps[2].line,
		 df.steps[3].line);
	T_STR(ARG(3, 0), "echo");
	/* An error inside a continued instruction names its first line. */
	T_REFUSED("FROM a\n\nEXPOSE 80 \\\n  99999\n", "line 3: EXPOSE: bad port '99999'");
	/* # is a comment only at the start of a line. */
	T_ASSERT(parse("FROM a\nRUN echo #not a comment\n") == 0, "%s", errmsg());
	T_STR(ARG(1, 0), "echo #not a comment");
	T_ASSERT(parse("# syntax=docker/dockerfile:1\nFROM a\n") == 0, "%s", errmsg());
	T_REFUSED("# escape=`\nFROM a\n", "line 1: the escape parser directive is not supported");
	return 0;
}

static int unsupported_instructions(void)
{
	const char *all = "(supported: FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, EXPOSE, CMD, ENTRYPOINT, LABEL)";
	char want[300];
	const char *bad[] = { "HEALTHCHECK CMD true", "ONBUILD RUN x", "STOPSIGNAL 9", "SHELL [\"/bin/bash\"]",
			      "VOLUME /data", "MAINTAINER me", "frobnicate it" };
	const char *names[] = { "HEALTHCHECK", "ONBUILD", "STOPSIGNAL", "SHELL", "VOLUME", "MAINTAINER",
				"FROBNICATE" };
	for (int i = 0; i < 7; i++) {
		char text[200];
		snprintf(text, sizeof text, "FROM a\nRUN x\n\n%s\n", bad[i]);
		snprintf(want, sizeof want, "line 4: %s is not supported %s", names[i], all);
		T_REFUSED(text, want);
	}
	return 0;
}

static int structure_errors(void)
{
	T_REFUSED("", "no FROM");
	T_REFUSED("# only a comment\n\n", "no FROM");
	T_REFUSED("ARG A=1\n", "no FROM");
	T_REFUSED("RUN echo\nFROM a\n", "line 1: RUN before FROM");
	T_REFUSED("FROM a\nFROM b\n", "line 2: a second FROM: multi-stage builds are not supported");
	T_REFUSED("FROM --platform=linux/arm64 a\n", "line 1: FROM --platform is not supported");
	T_REFUSED("FROM a b\n", "line 1: FROM wants one image");
	T_REFUSED("FROM\n", "line 1: FROM needs arguments");
	T_REFUSED("FROM a\nCMD\n", "line 2: CMD needs a command");
	dockerfile_free(&df);
	const char nul[] = "FROM a\nRUN a\0b\n";
	T_ASSERT(dockerfile_parse(nul, sizeof nul - 1, NULL, &df) == -EINVAL, "NUL accepted");
	T_ASSERT(strstr(errmsg(), "line 2: a NUL byte"), "%s", errmsg());
	return 0;
}

static int bounds(void)
{
	/* The whole file. */
	size_t big = DF_MAX_TEXT + 1;
	char *s = malloc(big + 1);
	T_ASSERT(s, "malloc");
	memset(s, '#', big);
	s[big] = 0;
	int rc = parse(s);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "the Dockerfile is over"), "rc %d: %s", rc, errmsg());
	/* One instruction over DF_MAX_LINE, made of continued lines. */
	size_t pos = (size_t)sprintf(s, "FROM a\nRUN x");
	while (pos < DF_MAX_LINE * 2) {
		memcpy(s + pos, " abcdefghi \\\n", 13);
		pos += 13;
	}
	strcpy(s + pos, "end\n");
	rc = parse(s);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "line 2: the instruction is over 65536 bytes"), "%s",
		 errmsg());
	/* Exactly at the bound is fine. */
	pos = (size_t)sprintf(s, "FROM a\nRUN ");
	memset(s + pos, 'x', DF_MAX_LINE - 4);
	strcpy(s + pos + DF_MAX_LINE - 4, "\n");
	T_ASSERT(parse(s) == 0, "%s", errmsg());
	/* Variables that multiply past the bound. */
	pos = (size_t)sprintf(s, "FROM a\nENV A=");
	memset(s + pos, 'a', 30000);
	pos += 30000;
	pos += (size_t)sprintf(s + pos, "\nENV B=$A$A$A\n");
	s[pos] = 0;
	rc = parse(s);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "line 3: the instruction is over 65536 bytes once"),
		 "%s", errmsg());
	/* Steps. */
	pos = (size_t)sprintf(s, "FROM a\n");
	for (int i = 1; i < DF_MAX_STEPS; i++)
		pos += (size_t)sprintf(s + pos, "RUN %d\n", i);
	T_ASSERT(parse(s) == 0 && df.nsteps == DF_MAX_STEPS, "%s", errmsg());
	sprintf(s + pos, "RUN over\n");
	rc = parse(s);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "line 513: more than 512 instructions"), "%s", errmsg());
	/* JSON array elements and words. */
	pos = (size_t)sprintf(s, "FROM a\nCMD [");
	for (int i = 0; i <= DF_MAX_WORDS; i++)
		pos += (size_t)sprintf(s + pos, "%s\"a\"", i ? "," : "");
	sprintf(s + pos, "]\n");
	rc = parse(s);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "line 2: more than 1024 arguments"), "%s", errmsg());
	pos = (size_t)sprintf(s, "FROM a\nEXPOSE");
	for (int i = 0; i <= DF_MAX_WORDS; i++)
		pos += (size_t)sprintf(s + pos, " 80");
	sprintf(s + pos, "\n");
	rc = parse(s);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "more than 1024 arguments"), "%s", errmsg());
	/* Nested defaults are bounded. */
	T_ASSERT(parse("FROM a\nENV A=${X:-${Y:-${Z:-deep}}}\n") == 0, "%s", errmsg());
	T_STR(ARG(1, 1), "deep");
	pos = (size_t)sprintf(s, "FROM a\nENV A=");
	for (int i = 0; i < 10; i++)
		pos += (size_t)sprintf(s + pos, "${X:-");
	pos += (size_t)sprintf(s + pos, "v");
	for (int i = 0; i < 10; i++)
		pos += (size_t)sprintf(s + pos, "}");
	sprintf(s + pos, "\n");
	rc = parse(s);
	T_ASSERT(rc == -EINVAL && strstr(errmsg(), "nested more than 8 deep"), "%s", errmsg());
	free(s);
	return 0;
}

int main(void)
{
	T_RUN(good_file);
	T_RUN(keywords_any_case_and_crlf);
	T_RUN(run_forms);
	T_RUN(cmd_entrypoint_forms);
	T_RUN(bad_json);
	T_RUN(copy_add_forms);
	T_RUN(env_label_forms);
	T_RUN(arg_scoping_and_build_args);
	T_RUN(user_expose_workdir);
	T_RUN(continuations_and_comments);
	T_RUN(unsupported_instructions);
	T_RUN(structure_errors);
	T_RUN(bounds);
	dockerfile_free(&df);
	return t_failed ? 1 : 0;
}
