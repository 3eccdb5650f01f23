/*
 * file_batch: the multi-file write (POST .../files/write, and the MCP
 * write_files tool): many files written in one request, all or none.
 *
 * file_batch_parse validates a "files" array ([{"path", "content" |
 * "content_base64", "mode"?}], FILE_BATCH_MAX_FILES at most,
 * FILE_BATCH_MAX_BYTES of content in all) before any guest is touched:
 * -EINVAL (a message naming files[i]), -EMSGSIZE (over a limit) or
 * -ENOMEM. file_batch_write writes them in a guest the caller entered:
 * every file is staged under a temporary name beside its target first
 * (the atomic single-file WRITE), and renamed into place only when all
 * are in the guest. A failure while staging changes nothing (the staged
 * files are removed; parent directories it made stay); a failure among
 * the renames, which only a concurrent change in the guest can cause,
 * leaves the earlier files written and says which. On success *written
 * is {"files": [{"path", "size"}], "count"} (the caller's reference).
 */
#ifndef KILN_API_FILE_BATCH_H
#define KILN_API_FILE_BATCH_H

#include <jansson.h>

struct guest;
struct file_batch;

#define FILE_BATCH_MAX_FILES 1000
#define FILE_BATCH_MAX_BYTES (64ull << 20)	/* decoded content, all files */
#define WRITE_MAX_BODY (96ull << 20)		/* REST: the JSON, base64 included */

int file_batch_parse(const json_t *files, struct file_batch **out);
int file_batch_write(struct guest *g, struct file_batch *b, json_t **written);
void file_batch_free(struct file_batch *b);

#endif
