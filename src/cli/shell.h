#ifndef KILN_CLI_SHELL_H
#define KILN_CLI_SHELL_H

struct httpc_target;

/* An interactive terminal in sandbox id (cmd: NULL for the login shell).
 * Returns the remote command's exit code. */
int shell_run(const struct httpc_target *t, const char *id, const char *cmd);

#endif
