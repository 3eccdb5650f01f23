/*
 * dbcert: a managed database's TLS certificate as kiln takes it from the
 * database's guest (docs/databases.md "TLS"). The guest made it, with a
 * key that never leaves it, and printed it; the guest is the tenant's,
 * so what it printed is checked before it is kept or shown: one PEM
 * certificate, nothing else, of a bounded size, whose body is base64 of
 * one DER SEQUENCE that fills it. (What the certificate says is the
 * tenant's own business: only its clients trust it.)
 *
 * Errors: -EPROTO naming what is wrong with it.
 */
#ifndef KILN_OPS_DBCERT_H
#define KILN_OPS_DBCERT_H

#include <stddef.h>

#define DBCERT_PEM_MAX 4096		/* a P-256 self-signed certificate is ~700 */
#define DBCERT_DER_MAX 3072
#define DBCERT_SHA256_LEN (32 * 3)	/* "AB:CD:...:EF" and its NUL */

/* The certificate in the first n bytes of s (trailing white space
 * allowed) into pem (DBCERT_PEM_MAX bytes, its lines ending in "\n"). */
int dbcert_take(const char *s, size_t n, char pem[DBCERT_PEM_MAX]);
/* The SHA-256 of pem's DER, as `openssl x509 -fingerprint -sha256`
 * prints it (upper-case hex, ':' between bytes). */
int dbcert_sha256(const char *pem, char out[DBCERT_SHA256_LEN]);

#endif
