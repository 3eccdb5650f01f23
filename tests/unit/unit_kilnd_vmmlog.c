/* Unit tests for vmm_last_line (src/agent/vmm.c): the line kilnd puts in a
 * failed sandbox's error. The VM directory may be the jailed VMM's to
 * write, so only the regular, singly linked file kilnd owns is read. */
#include "host/vmm.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], log_path[128];

static void put(const char *text)
{
	FILE *f = fopen(log_path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void last_line_is_the_reason(void)
{
	char out[160];
	put("kiln-vmm: post-mortem: guest triple fault\nkiln-vmm:   #1 -0.1 io rip 0x1\n"
	    "kiln-vmm: guest triple fault on vCPU 0 (at rip 0x10000a) (exit status 4)\n\n");
	vmm_last_line(dir, out, sizeof out);
	CHECK(strcmp(out, "kiln-vmm: guest triple fault on vCPU 0 (at rip 0x10000a) (exit status 4)") == 0);
}

static void long_log_and_control_characters(void)
{
	char out[40], big[9000];
	memset(big, 'x', sizeof big);
	big[sizeof big - 1] = 0;
	FILE *f = fopen(log_path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fputs(big, f);
	fputs("\nend\x1b[31m\tline\r\n", f);
	fclose(f);
	vmm_last_line(dir, out, sizeof out);
	CHECK(strcmp(out, "end?[31m?line") == 0);
	/* a line longer than out is cut, not overflowed */
	put("0123456789012345678901234567890123456789012345678901234567890123456789\n");
	vmm_last_line(dir, out, sizeof out);
	CHECK(strlen(out) == sizeof out - 1 && strncmp(out, "0123456789", 10) == 0);
}

static void symlink_and_hard_link_refused(void)
{
	char out[160], other[160];
	snprintf(other, sizeof other, "%s/secret", dir);
	FILE *f = fopen(other, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("root-only secret\n", f);
		fclose(f);
	}
	unlink(log_path);
	CHECK(symlink(other, log_path) == 0);
	vmm_last_line(dir, out, sizeof out);
	CHECK(out[0] == 0);
	unlink(log_path);
	CHECK(link(other, log_path) == 0);
	vmm_last_line(dir, out, sizeof out);
	CHECK(out[0] == 0);
	unlink(log_path);
	unlink(other);
	vmm_last_line(dir, out, sizeof out);   /* no log at all */
	CHECK(out[0] == 0);
}

int main(void)
{
	int failures = 0;
	snprintf(dir, sizeof dir, "/tmp/kiln-vmmlog.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(log_path, sizeof log_path, "%s/vmm.log", dir);
	RUN(last_line_is_the_reason);
	RUN(long_log_and_control_characters);
	RUN(symlink_and_hard_link_refused);
	unlink(log_path);
	rmdir(dir);
	return failures ? 1 : 0;
}
