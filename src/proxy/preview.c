#include "proxy/preview.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nettle/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIG_BYTES 18	/* 144 bits of the HMAC: 24 base64url characters */

int preview_key_load(const char *data_dir, uint8_t key[PREVIEW_KEY_BYTES])
{
	char path[4096];
	snprintf(path, sizeof path, "%s/preview.key", data_dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		ssize_t n = read(fd, key, PREVIEW_KEY_BYTES);
		close(fd);
		return n == PREVIEW_KEY_BYTES ? 0 : errf(EINVAL, "%s: not a %d-byte key (delete it to make a new one)",
							   path, PREVIEW_KEY_BYTES);
	}
	if (errno != ENOENT)
		return errf_sys("%s", path);
	if (getrandom(key, PREVIEW_KEY_BYTES, 0) != PREVIEW_KEY_BYTES)
		return errf_sys("getrandom");
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return errf_sys("%s", tmp);
	bool ok = write(fd, key, PREVIEW_KEY_BYTES) == PREVIEW_KEY_BYTES && fsync(fd) == 0;
	close(fd);
	if (!ok || rename(tmp, path) < 0) {
		int rc = errf_sys("%s", path);
		unlink(tmp);
		return rc;
	}
	return 0;
}

int preview_key_read(const char *path, uint8_t key[PREVIEW_KEY_BYTES])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errf_sys("--preview-key %s", path);
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		rc = errf(EINVAL, "--preview-key %s: not a plain file", path);
	else if (st.st_mode & 077)
		rc = errf(EPERM, "--preview-key %s: others may read it (mode %03o): chmod 600 it", path,
			  (unsigned)(st.st_mode & 0777));
	else if (st.st_size != PREVIEW_KEY_BYTES || read(fd, key, PREVIEW_KEY_BYTES) != PREVIEW_KEY_BYTES)
		rc = errf(EINVAL, "--preview-key %s: not %d bytes (head -c %d /dev/urandom makes one)", path,
			  PREVIEW_KEY_BYTES, PREVIEW_KEY_BYTES);
	close(fd);
	return rc;
}

static void sign(const uint8_t key[PREVIEW_KEY_BYTES], const char *sandbox, int port, int64_t expiry,
		 char sig[32])
{
	static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	struct hmac_sha256_ctx ctx;
	char msg[128];
	int n = snprintf(msg, sizeof msg, "kiln-preview\n%s\n%d\n%" PRId64, sandbox, port, expiry);
	uint8_t mac[SHA256_DIGEST_SIZE];
	hmac_sha256_set_key(&ctx, PREVIEW_KEY_BYTES, key);
	hmac_sha256_update(&ctx, (size_t)n, (const uint8_t *)msg);
	hmac_sha256_digest(&ctx, sizeof mac, mac);
	int o = 0;
	for (int i = 0; i < SIG_BYTES; i += 3) {
		uint32_t v = (uint32_t)mac[i] << 16 | (uint32_t)mac[i + 1] << 8 | mac[i + 2];
		for (int k = 18; k >= 0; k -= 6)
			sig[o++] = b64url[(v >> k) & 63];
	}
	sig[o] = 0;
}

void preview_token(const uint8_t key[PREVIEW_KEY_BYTES], const char *sandbox, int port, int64_t expiry,
		   char out[PREVIEW_TOKEN_MAX])
{
	char sig[32];
	sign(key, sandbox, port, expiry, sig);
	snprintf(out, PREVIEW_TOKEN_MAX, "%" PRId64 ".%s", expiry, sig);
}

bool preview_valid(const uint8_t key[PREVIEW_KEY_BYTES], const char *sandbox, int port, const char *token,
		   int64_t now, int64_t *expiry)
{
	char *end;
	errno = 0;
	long long exp = strtoll(token, &end, 10);
	if (errno || end == token || *end != '.' || exp <= 0 || exp < now)
		return false;
	char want[32];
	sign(key, sandbox, port, exp, want);
	const char *got = end + 1;
	if (strlen(got) != strlen(want))
		return false;
	unsigned diff = 0;	/* in constant time */
	for (size_t i = 0; want[i]; i++)
		diff |= (unsigned)(want[i] ^ got[i]);
	if (diff)
		return false;
	*expiry = exp;
	return true;
}
