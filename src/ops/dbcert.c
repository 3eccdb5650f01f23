/*
 * dbcert: a database's certificate taken from its guest (ops/dbcert.h).
 */
#include "ops/dbcert.h"
#include "common/err.h"

#include <errno.h>
#include <nettle/base64.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char begin[] = "-----BEGIN CERTIFICATE-----\n";
static const char end[] = "-----END CERTIFICATE-----\n";

/* The DER in pem's body, or -EPROTO. */
static int der_of(const char *pem, uint8_t der[DBCERT_DER_MAX], size_t *len)
{
	size_t bl = sizeof begin - 1, el = sizeof end - 1, n = strlen(pem);
	if (n < bl + el || memcmp(pem, begin, bl) || memcmp(pem + n - el, end, el))
		return errf(EPROTO, "the database's certificate is not one PEM certificate");
	char b64[DBCERT_PEM_MAX];
	size_t k = 0;
	for (const char *p = pem + bl; p < pem + n - el; p++) {
		if (*p == '\n')
			continue;
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '+' || *p == '/' || *p == '='))
			return errf(EPROTO, "the database's certificate has a byte 0x%02x that is not base64",
				    (unsigned char)*p);
		b64[k++] = *p;
	}
	if (!k || k % 4 || BASE64_DECODE_LENGTH(k) > DBCERT_DER_MAX)
		return errf(EPROTO, "the database's certificate is %zu base64 characters, not a whole DER of at most %d "
			    "bytes", k, DBCERT_DER_MAX);
	struct base64_decode_ctx ctx;
	size_t out = DBCERT_DER_MAX;
	base64_decode_init(&ctx);
	if (!base64_decode_update(&ctx, &out, der, k, b64) || !base64_decode_final(&ctx))
		return errf(EPROTO, "the database's certificate is not valid base64");
	/* One DER SEQUENCE (30) whose length (short, or long in 1 or 2
	 * bytes) is the rest. */
	size_t hl, bodylen;
	if (out < 2 || der[0] != 0x30)
		return errf(EPROTO, "the database's certificate is not a DER SEQUENCE");
	if (der[1] < 0x80)
		hl = 2, bodylen = der[1];
	else if (der[1] == 0x81 && out >= 3)
		hl = 3, bodylen = der[2];
	else if (der[1] == 0x82 && out >= 4)
		hl = 4, bodylen = (size_t)der[2] << 8 | der[3];
	else
		return errf(EPROTO, "the database's certificate has a DER length of a form no certificate has");
	if (hl + bodylen != out)
		return errf(EPROTO, "the database's certificate is %zu bytes of DER, its SEQUENCE says %zu", out,
			    hl + bodylen);
	*len = out;
	return 0;
}

int dbcert_take(const char *s, size_t n, char pem[DBCERT_PEM_MAX])
{
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t'))
		n--;
	if (n + 2 > DBCERT_PEM_MAX)
		return errf(EPROTO, "the database's certificate is over %d bytes", DBCERT_PEM_MAX - 2);
	if (memchr(s, 0, n))
		return errf(EPROTO, "the database's certificate has a NUL byte");
	memcpy(pem, s, n);
	pem[n] = '\n', pem[n + 1] = 0;
	uint8_t der[DBCERT_DER_MAX];
	size_t len;
	int rc = der_of(pem, der, &len);
	if (rc < 0)
		pem[0] = 0;
	return rc;
}

int dbcert_sha256(const char *pem, char out[DBCERT_SHA256_LEN])
{
	uint8_t der[DBCERT_DER_MAX], d[SHA256_DIGEST_SIZE];
	size_t len;
	out[0] = 0;
	int rc = der_of(pem, der, &len);
	if (rc < 0)
		return rc;
	struct sha256_ctx h;
	sha256_init(&h);
	sha256_update(&h, len, der);
	sha256_digest(&h, sizeof d, d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(out + 3 * i, 4, "%02X%s", d[i], i + 1 < SHA256_DIGEST_SIZE ? ":" : "");
	return 0;
}
