/*
 * tls_int.h - what the two parts of the OpenSSL adapter share: a context (tls_ctx.c builds
 * it) as a connection (tls.c) uses it, and the error text helper.
 */
#ifndef NEKI_NET_TLS_INT_H
#define NEKI_NET_TLS_INT_H

#include "neki/base.h"

#include <openssl/ssl.h>

#include "neki/tls.h"

#define TLS_FP_LEN 32		/* SHA-256 fingerprint of a context's settings and files */
#define TLS_ERR_LEN 256

struct tls_ctx {
	SSL_CTX *ssl_ctx;		/* owned (OpenSSL refcounts it for each SSL too) */
	enum tls_role role;
	enum cfg_sslmode sslmode;
	int refcount;			/* tls_ctx_ref / tls_ctx_unref */
	uint8_t fp[TLS_FP_LEN];		/* settings + file contents, for tls_reload's comparison */
};

/* OpenSSL's most recent queued error as text in <buf> (and clear the queue). */
const char *tls_err_str(char *buf, size_t len);

#endif /* NEKI_NET_TLS_INT_H */
