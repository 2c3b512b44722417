/*
 * tls.c - the OpenSSL adapter for connections (with tls_ctx.c and proto/scram.c, the only
 * files that include OpenSSL headers).
 *
 * Connections (struct tls_conn: the sbuf I/O operations over an SSL object) over the
 * contexts of tls_ctx.c. A connection talks to its
 * socket through a small BIO of our own: it first replays bytes the sbuf had already read
 * (direct TLS: the start of the ClientHello) and sends with MSG_NOSIGNAL. The negotiation
 * (SSLRequest answer, handshake) runs on one event of the connection's own while the sbuf is
 * paused; afterwards the sbuf calls tls_io_recv / tls_io_send.
 *
 * Entry points: see neki/tls.h; tls_library_version() for `neki -V`.
 */
#include "neki/base.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "neki/log.h"
#include "neki/net.h"
#include "neki/pktbuf.h"
#include "neki/sbuf.h"
#include "neki/tls.h"
#include "tls_int.h"


/* Where a connection's negotiation stands. */
enum tls_phase {
	TLS_PH_PLAIN = 0,	/* [transient] connect without TLS: report "plain" from the loop */
	TLS_PH_REQUEST = 1,	/* connect: SSLRequest sent, waiting for 'S' or 'N' */
	TLS_PH_HANDSHAKE = 2,	/* SSL_do_handshake until done; sbuf paused */
	TLS_PH_OPEN = 3,	/* sbuf reads and writes through SSL */
	TLS_PH_FAILED = 4,	/* [transient] report err[] from the loop, then the owner closes */
};

/* The TLS state of one sbuf (its io_ctx). */
struct tls_conn {
	struct sbuf *sb;		/* borrowed: the owner's transport */
	SSL *ssl;			/* owned; NULL before 'S' on the connect side */
	struct tls_ctx *ctx;		/* one reference */
	struct event *ev;		/* owned: the negotiation's one-shot wait on the socket */
	tls_done_fn done;		/* the owner's callback */
	void *arg;			/* borrowed: its argument */
	uint8_t *prefix;		/* owned: bytes read before TLS started (direct TLS) */
	uint32_t prefix_len;		/* their number */
	uint32_t prefix_pos;		/* how many the BIO has handed to OpenSSL */
	enum tls_phase phase;
	bool direct;			/* direct TLS: ALPN is mandatory */
	bool in_cb;			/* inside the done callback: a close must not free us */
	bool dead;			/* closed during the callback: free when it returns */
	char host[256];			/* connect: SNI and the verify-full name */
	char err[TLS_ERR_LEN];		/* TLS_PH_FAILED: the reason */
};

static BIO_METHOD *tls_bio_meth;

static ssize_t tls_io_recv(struct sbuf *sb, void *buf, size_t len);
static ssize_t tls_io_send(struct sbuf *sb, const void *buf, size_t len);
static void tls_io_shutdown(struct sbuf *sb);

static const struct sbuf_io_ops tls_io_table = {
	.recv = tls_io_recv,
	.send = tls_io_send,
	.shutdown = tls_io_shutdown,
};

/* OpenSSL's most recent queued error as text (and clear the queue). */
const char *
tls_err_str(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();

	if (e == 0)
		snprintf(buf, len, "unknown TLS error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

/* Version of the OpenSSL library (neki -V, startup log). */
const char *
tls_library_version(void)
{
	return OpenSSL_version(OPENSSL_VERSION);
}

/* ---- the socket BIO ---- */

static int
tls_bio_read(BIO *b, char *buf, int len)
{
	struct tls_conn *c = BIO_get_data(b);
	uint32_t n;
	ssize_t r;

	BIO_clear_retry_flags(b);
	if (c->prefix_pos < c->prefix_len) {
		n = c->prefix_len - c->prefix_pos;
		if (n > (uint32_t)len)
			n = (uint32_t)len;
		memcpy(buf, c->prefix + c->prefix_pos, n);
		c->prefix_pos += n;
		return (int)n;
	}
	r = recv(sbuf_fd(c->sb), buf, (size_t)len, 0);
	if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		BIO_set_retry_read(b);
	return (int)r;
}

static int
tls_bio_write(BIO *b, const char *buf, int len)
{
	struct tls_conn *c = BIO_get_data(b);
	ssize_t r;

	BIO_clear_retry_flags(b);
	r = send(sbuf_fd(c->sb), buf, (size_t)len, MSG_NOSIGNAL);
	if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		BIO_set_retry_write(b);
	return (int)r;
}

static long
tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int
tls_bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

/* The BIO method (created once per process). */
static BIO_METHOD *
tls_bio_method(void)
{
	BIO_METHOD *m;

	if (tls_bio_meth != NULL)
		return tls_bio_meth;
	m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "neki socket");
	if (m == NULL)
		return NULL;
	BIO_meth_set_read(m, tls_bio_read);
	BIO_meth_set_write(m, tls_bio_write);
	BIO_meth_set_ctrl(m, tls_bio_ctrl);
	BIO_meth_set_create(m, tls_bio_create);
	tls_bio_meth = m;
	return m;
}

/* ---- connections: lifecycle ---- */

static void tls_ev_cb(evutil_socket_t fd, short what, void *arg);

/* A connection state for <sb>, installed as its I/O operations; the sbuf is paused. */
static struct tls_conn *
tls_conn_new(struct sbuf *sb, struct tls_ctx *ctx, tls_done_fn done, void *arg)
{
	struct tls_conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->ev = event_new(sb->base, -1, 0, tls_ev_cb, c);
	if (c->ev == NULL) {
		free(c);
		return NULL;
	}
	c->sb = sb;
	c->ctx = ctx;
	if (ctx != NULL)
		tls_ctx_ref(ctx);
	c->done = done;
	c->arg = arg;
	sbuf_pause(sb);
	sbuf_set_io(sb, &tls_io_table, c);
	return c;
}

static void
tls_conn_free(struct tls_conn *c)
{
	if (c->ssl != NULL)
		SSL_free(c->ssl);
	event_free(c->ev);
	tls_ctx_unref(c->ctx);
	free(c->prefix);
	free(c);
}

/* The SSL object over our BIO, in the ctx's role. */
static bool
tls_conn_make_ssl(struct tls_conn *c)
{
	BIO_METHOD *m = tls_bio_method();
	BIO *bio;

	if (m == NULL)
		return false;
	c->ssl = SSL_new(c->ctx->ssl_ctx);
	bio = BIO_new(m);
	if (c->ssl == NULL || bio == NULL) {
		BIO_free(bio);
		return false;
	}
	BIO_set_data(bio, c);
	SSL_set_bio(c->ssl, bio, bio);
	if (c->ctx->role == TLS_ROLE_ACCEPT)
		SSL_set_accept_state(c->ssl);
	else
		SSL_set_connect_state(c->ssl);
	return true;
}

/* Wait (once) for <what> on the socket, then continue the negotiation. */
static void
tls_wait(struct tls_conn *c, short what)
{
	event_del(c->ev);
	event_assign(c->ev, c->sb->base, sbuf_fd(c->sb), what, tls_ev_cb, c);
	event_add(c->ev, NULL);
}

/* Run the next negotiation step from the loop. */
static void
tls_kick(struct tls_conn *c)
{
	event_del(c->ev);
	event_assign(c->ev, c->sb->base, sbuf_fd(c->sb), EV_READ, tls_ev_cb, c);
	event_active(c->ev, EV_READ, 0);
}

/* Tell the owner; a close inside the callback is deferred until it returns. */
static void
tls_report(struct tls_conn *c, bool ok, const char *msg)
{
	c->in_cb = true;
	c->done(c->sb, ok, msg, c->arg);
	c->in_cb = false;
	if (c->dead)
		tls_conn_free(c);
}

/* The negotiation failed with <fmt>: the owner is told (and closes the sbuf). */
static void
tls_fail(struct tls_conn *c, const char *msg)
{
	char buf[TLS_ERR_LEN];

	c->phase = TLS_PH_FAILED;
	event_del(c->ev);
	snprintf(buf, sizeof(buf), "%s", msg);
	log_debug("TLS negotiation failed: %s", buf);
	tls_report(c, false, buf);
}

/* Connect side, no TLS: back to plain I/O, resume, report success. */
static void
tls_finish_plain(struct tls_conn *c)
{
	struct sbuf *sb = c->sb;
	tls_done_fn done = c->done;
	void *arg = c->arg;

	sbuf_set_io(sb, sbuf_plain_io(), NULL);
	tls_conn_free(c);
	sbuf_continue(sb);
	done(sb, true, NULL, arg);
}

/* sbuf_close(): close_notify when open, then free (or defer while reporting). */
static void
tls_io_shutdown(struct sbuf *sb)
{
	struct tls_conn *c = sb->io_ctx;

	sbuf_set_io(sb, sbuf_plain_io(), NULL);
	if (c->phase == TLS_PH_OPEN) {
		(void)SSL_shutdown(c->ssl);
		ERR_clear_error();
	}
	event_del(c->ev);
	if (c->in_cb)
		c->dead = true;
	else
		tls_conn_free(c);
}

/* ---- connections: negotiation ---- */

/* Why the handshake failed, in words. */
static void
tls_handshake_error(struct tls_conn *c, int e, char *buf, size_t len)
{
	long vr = SSL_get_verify_result(c->ssl);
	char ebuf[160];

	if (vr != X509_V_OK && ERR_peek_last_error() != 0) {
		snprintf(buf, len, "TLS handshake failed: certificate verify failed: %s",
			 X509_verify_cert_error_string(vr));
		ERR_clear_error();
	} else if (e == SSL_ERROR_SYSCALL && ERR_peek_last_error() == 0) {
		snprintf(buf, len, "TLS handshake failed: %s",
			 errno != 0 ? strerror(errno) : "connection closed by peer");
	} else {
		snprintf(buf, len, "TLS handshake failed: %s", tls_err_str(ebuf, sizeof(ebuf)));
	}
}

/* The handshake finished: direct TLS needs ALPN; then resume the sbuf and report. */
static void
tls_established(struct tls_conn *c)
{
	const unsigned char *alpn = NULL;
	unsigned int alpn_len = 0;
	char info[128];

	SSL_get0_alpn_selected(c->ssl, &alpn, &alpn_len);
	if (c->direct && alpn_len == 0) {
		tls_fail(c, "received direct SSL connection request without ALPN protocol "
			 "negotiation extension");
		return;
	}
	free(c->prefix);
	c->prefix = NULL;
	c->prefix_len = c->prefix_pos = 0;
	c->phase = TLS_PH_OPEN;
	tls_sbuf_info(c->sb, info, sizeof(info));
	log_debug("TLS established: %s", info);
	sbuf_continue(c->sb);
	tls_report(c, true, NULL);
}

/* One step of SSL_do_handshake. */
static void
tls_handshake(struct tls_conn *c)
{
	char buf[TLS_ERR_LEN];
	int rc, e;

	ERR_clear_error();
	errno = 0;
	rc = SSL_do_handshake(c->ssl);
	if (rc == 1) {
		tls_established(c);
		return;
	}
	e = SSL_get_error(c->ssl, rc);
	if (e == SSL_ERROR_WANT_READ) {
		tls_wait(c, EV_READ);
	} else if (e == SSL_ERROR_WANT_WRITE) {
		tls_wait(c, EV_WRITE);
	} else {
		tls_handshake_error(c, e, buf, sizeof(buf));
		tls_fail(c, buf);
	}
}

/* True when <host> is an IPv4 or IPv6 literal. */
static bool
tls_host_is_ip(const char *host)
{
	uint8_t a[16];

	return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

/*
 * Connect side: SNI for a host name, and for verify-full the name (or IP address) the
 * server certificate must carry.
 */
static bool
tls_set_peer_name(struct tls_conn *c)
{
	bool ip;

	if (c->host[0] == '\0')
		return true;
	ip = tls_host_is_ip(c->host);
	if (!ip && SSL_set_tlsext_host_name(c->ssl, c->host) != 1)
		return false;
	if (c->ctx->sslmode != CFG_SSL_VERIFY_FULL)
		return true;
	SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (ip)
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), c->host) == 1;
	return SSL_set1_host(c->ssl, c->host) == 1;
}

/* Connect side, before TLS: one byte of the server's answer to the SSLRequest. */
static void
tls_on_answer(struct tls_conn *c)
{
	uint8_t b;
	ssize_t n = recv(sbuf_fd(c->sb), &b, 1, 0);

	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		tls_wait(c, EV_READ);
	} else if (n == -1) {
		snprintf(c->err, sizeof(c->err), "could not receive the SSL answer: %s",
			 strerror(errno));
		tls_fail(c, c->err);
	} else if (n == 0) {
		tls_fail(c, "server closed the connection during SSL negotiation");
	} else if (b == 'N' && c->ctx->sslmode >= CFG_SSL_REQUIRE) {
		tls_fail(c, "server refused SSL");
	} else if (b == 'N') {
		tls_finish_plain(c);
	} else if (b != 'S') {
		tls_fail(c, "server sent a bad answer to the SSL request");
	} else if (!tls_conn_make_ssl(c) || !tls_set_peer_name(c)) {
		tls_fail(c, "could not start TLS: out of memory");
	} else {
		c->phase = TLS_PH_HANDSHAKE;
		tls_handshake(c);
	}
}

/* The connection's event: continue whatever the phase waits for. */
static void
tls_ev_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tls_conn *c = arg;

	(void)fd;
	(void)what;
	switch (c->phase) {
	case TLS_PH_PLAIN:
		tls_finish_plain(c);
		break;
	case TLS_PH_REQUEST:
		tls_on_answer(c);
		break;
	case TLS_PH_HANDSHAKE:
		tls_handshake(c);
		break;
	case TLS_PH_OPEN:
		sbuf_wake(c->sb);	/* SSL_read wanted to write; the socket is writable */
		break;
	case TLS_PH_FAILED:
		tls_fail(c, c->err);
		break;
	}
}

/* ---- connections: entry points ---- */

/* Start the server handshake after an SSLRequest was answered 'S'. */
bool
tls_sbuf_accept(struct sbuf *sb, struct tls_ctx *ctx, tls_done_fn done, void *arg,
		struct nk_error *err)
{
	struct tls_conn *c;

	if (sbuf_unclaimed(sb) > 0)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
				    "received unencrypted data after SSL request");
	if (sbuf_queued(sb) > 0)
		return nk_error_set(err, ERRCODE_CONNECTION_FAILURE,
				    "could not send the SSL answer");
	c = tls_conn_new(sb, ctx, done, arg);
	if (c == NULL || !tls_conn_make_ssl(c)) {
		if (c != NULL)
			sbuf_close(sb);
		return nk_error_oom(err);
	}
	c->phase = TLS_PH_HANDSHAKE;
	tls_kick(c);
	return true;
}

/* Is the startup-phase packet <pkt> the start of a TLS record (a ClientHello)? */
bool
tls_pkt_is_client_hello(const struct sbuf_pkt *pkt)
{
	return pkt->type == 0 && pkt->avail > 0 && pkt->data[0] == 0x16;
}

/* Direct TLS: the buffered bytes are the beginning of the ClientHello. */
bool
tls_sbuf_accept_direct(struct sbuf *sb, struct tls_ctx *ctx, const struct sbuf_pkt *pkt,
		       tls_done_fn done, void *arg, struct nk_error *err)
{
	struct tls_conn *c;
	uint8_t *copy = malloc(pkt->avail);

	if (copy == NULL)
		return nk_error_oom(err);
	memcpy(copy, pkt->data, pkt->avail);
	sbuf_skip(sb, pkt->avail);
	c = tls_conn_new(sb, ctx, done, arg);
	if (c == NULL || !tls_conn_make_ssl(c)) {
		free(copy);
		if (c != NULL)
			sbuf_close(sb);
		return nk_error_oom(err);
	}
	c->prefix = copy;
	c->prefix_len = pkt->avail;
	c->direct = true;
	c->phase = TLS_PH_HANDSHAKE;
	tls_kick(c);
	return true;
}

/* Send the SSLRequest on a fresh server connection, then negotiate; see neki/tls.h. */
bool
tls_sbuf_connect(struct sbuf *sb, struct tls_ctx *ctx, const char *host, tls_done_fn done,
		 void *arg)
{
	bool plain = ctx == NULL || ctx->sslmode == CFG_SSL_DISABLE || sbuf_is_unix(sb);
	struct tls_conn *c = tls_conn_new(sb, plain ? NULL : ctx, done, arg);
	uint8_t mem[16];
	struct pktbuf pb;
	ssize_t n;

	if (c == NULL)
		return false;
	snprintf(c->host, sizeof(c->host), "%s", host != NULL ? host : "");
	c->phase = plain ? TLS_PH_PLAIN : TLS_PH_REQUEST;
	if (!plain) {
		pktbuf_init_fixed(&pb, mem, sizeof(mem));
		pktbuf_write_ssl_request(&pb);
		n = send(sbuf_fd(sb), pb.buf, pb.len, MSG_NOSIGNAL);
		if (n != (ssize_t)pb.len) {
			snprintf(c->err, sizeof(c->err), "could not send SSL request: %s",
				 n == -1 ? strerror(errno) : "short write");
			c->phase = TLS_PH_FAILED;
		}
	}
	tls_kick(c);
	return true;
}

/* ---- connections: I/O ---- */

/* Map a failed SSL_read / SSL_write result <rc> to the sbuf's errno convention. */
static ssize_t
tls_io_error(struct tls_conn *c, int rc, bool reading)
{
	char ebuf[TLS_ERR_LEN];
	int e = SSL_get_error(c->ssl, rc);

	switch (e) {
	case SSL_ERROR_WANT_READ:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		if (reading)
			tls_wait(c, EV_WRITE);	/* wake the reader when writable */
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		if (reading)
			return 0;
		errno = EPIPE;
		return -1;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_last_error() == 0) {
			if (errno == 0)
				errno = reading ? ECONNRESET : EPIPE;
			return -1;
		}
		/* fall through */
	default:
		log_debug("TLS %s failed: %s", reading ? "read" : "write",
			  tls_err_str(ebuf, sizeof(ebuf)));
		errno = EPROTO;
		return -1;
	}
}

static int
tls_clamp(size_t len)
{
	return len > (size_t)INT_MAX ? INT_MAX : (int)len;
}

/* sbuf recv: decrypted bytes; wakes the sbuf again while OpenSSL still holds some. */
static ssize_t
tls_io_recv(struct sbuf *sb, void *buf, size_t len)
{
	struct tls_conn *c = sb->io_ctx;
	int n;

	if (c->phase != TLS_PH_OPEN) {
		errno = EAGAIN;
		return -1;
	}
	ERR_clear_error();
	errno = 0;
	n = SSL_read(c->ssl, buf, tls_clamp(len));
	if (n > 0) {
		if (SSL_pending(c->ssl) > 0)
			sbuf_wake(sb);
		return n;
	}
	return tls_io_error(c, n, true);
}

/* sbuf send: encrypt and write (partial writes allowed, the buffer may move). */
static ssize_t
tls_io_send(struct sbuf *sb, const void *buf, size_t len)
{
	struct tls_conn *c = sb->io_ctx;
	int n;

	if (c->phase != TLS_PH_OPEN) {
		errno = EAGAIN;
		return -1;
	}
	ERR_clear_error();
	errno = 0;
	n = SSL_write(c->ssl, buf, tls_clamp(len));
	if (n > 0)
		return n;
	return tls_io_error(c, n, false);
}

/* ---- connection information ---- */

/* The open TLS state of <sb>, or NULL. */
static struct tls_conn *
tls_conn_of(const struct sbuf *sb)
{
	struct tls_conn *c;

	if (sb->io != &tls_io_table)
		return NULL;
	c = sb->io_ctx;
	return c->phase == TLS_PH_OPEN ? c : NULL;
}

bool
tls_sbuf_is_tls(const struct sbuf *sb)
{
	return tls_conn_of(sb) != NULL;
}

/* The key exchange from the ephemeral key: "ECDH=<group>", "DH=<bits>" or "". */
static void
tls_kex_from_key(SSL *ssl, char *buf, size_t len)
{
	EVP_PKEY *key = NULL;
	char name[64];

	if (SSL_get_peer_tmp_key(ssl, &key) != 1 && SSL_get_tmp_key(ssl, &key) != 1)
		return;
	switch (EVP_PKEY_get_base_id(key)) {
	case EVP_PKEY_DH:
		snprintf(buf, len, "DH=%d", EVP_PKEY_get_bits(key));
		break;
	case EVP_PKEY_EC:
		if (EVP_PKEY_get_group_name(key, name, sizeof(name), NULL) == 1)
			snprintf(buf, len, "ECDH=%s", name);
		break;
	case EVP_PKEY_X25519:
		snprintf(buf, len, "ECDH=X25519");
		break;
	case EVP_PKEY_X448:
		snprintf(buf, len, "ECDH=X448");
		break;
	default:
		break;
	}
	EVP_PKEY_free(key);
}

/*
 * The key exchange part of the info string: the negotiated group ("ECDH=X25519",
 * "ECDH=prime256v1", "DH=2048" for the ffdhe groups), else from the ephemeral key.
 */
static void
tls_kex_str(SSL *ssl, char *buf, size_t len)
{
	int nid = SSL_get_negotiated_group(ssl);
	const char *name = nid > 0 && (nid & TLSEXT_nid_unknown) == 0 ? OBJ_nid2sn(nid) : NULL;

	buf[0] = '\0';
	if (name != NULL && strncmp(name, "ffdhe", 5) == 0)
		snprintf(buf, len, "DH=%s", name + 5);
	else if (name != NULL)
		snprintf(buf, len, "ECDH=%s", name);
	else
		tls_kex_from_key(ssl, buf, len);
}

/* "TLSv1.3/TLS_AES_256_GCM_SHA384/ECDH=X25519", or "" when not TLS. */
void
tls_sbuf_info(const struct sbuf *sb, char *buf, size_t len)
{
	struct tls_conn *c = tls_conn_of(sb);
	char kex[80];

	if (len == 0)
		return;
	buf[0] = '\0';
	if (c == NULL)
		return;
	tls_kex_str(c->ssl, kex, sizeof(kex));
	snprintf(buf, len, "%s/%s%s%s", SSL_get_version(c->ssl),
		 SSL_CIPHER_get_name(SSL_get_current_cipher(c->ssl)), kex[0] ? "/" : "", kex);
}

/* The peer certificate's CN (auth_type=cert). */
bool
tls_sbuf_peer_cn(const struct sbuf *sb, char *buf, size_t len)
{
	struct tls_conn *c = tls_conn_of(sb);
	X509 *cert;
	int n;

	if (c == NULL || len == 0)
		return false;
	cert = SSL_get0_peer_certificate(c->ssl);
	if (cert == NULL)
		return false;
	n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf,
				      (int)len);
	return n > 0 && (size_t)n < len;
}
