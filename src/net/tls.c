/*
 * tls.c - the OpenSSL adapter for connections (with proto/scram.c, the only files that
 * include OpenSSL headers).
 *
 * Three parts: contexts (tls_ctx_new: the client_tls_* / server_tls_* settings turned into
 * an SSL_CTX), the process's current pair with reload (tls_init, tls_reload), and connections
 * (struct tls_conn: the sbuf I/O operations over an SSL object). A connection talks to its
 * socket through a small BIO of our own: it first replays bytes the sbuf had already read
 * (direct TLS: the start of the ClientHello) and sends with MSG_NOSIGNAL. The negotiation
 * (SSLRequest answer, handshake) runs on one event of the connection's own while the sbuf is
 * paused; afterwards the sbuf calls tls_io_recv / tls_io_send.
 *
 * Entry points: see neki/tls.h; tls_library_version() for `neki -V`.
 */
#include "neki/base.h"
#include "neki/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "neki/log.h"
#include "neki/net.h"
#include "neki/pktbuf.h"
#include "neki/sbuf.h"

/* Protocol version bits of client_tls_protocols / server_tls_protocols. */
#define TLS_P10 0x1u
#define TLS_P11 0x2u
#define TLS_P12 0x4u
#define TLS_P13 0x8u
#define TLS_P_ALL (TLS_P10 | TLS_P11 | TLS_P12 | TLS_P13)
#define TLS_P_SECURE (TLS_P12 | TLS_P13)

/* ALPN protocol list in wire format: one length-prefixed name. */
static const unsigned char tls_alpn_wire[] = "\x0apostgresql";
#define TLS_ALPN_NAME "postgresql"
#define TLS_ALPN_LEN 10

#define TLS_FP_LEN 32		/* SHA-256 fingerprint of a context's settings and files */
#define TLS_ERR_LEN 256

struct tls_ctx {
	SSL_CTX *ssl_ctx;		/* owned (OpenSSL refcounts it for each SSL too) */
	enum tls_role role;
	enum cfg_sslmode sslmode;
	int refcount;			/* tls_ctx_ref / tls_ctx_unref */
	uint8_t fp[TLS_FP_LEN];		/* settings + file contents, for tls_reload's comparison */
};

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

/* The process's current contexts (tls_init / tls_reload). */
static struct tls_ctx *tls_cur_client;
static struct tls_ctx *tls_cur_server;
static bool tls_ready;		/* tls_init() succeeded in this process */
static BIO_METHOD *tls_bio_meth;

static ssize_t tls_io_recv(struct sbuf *sb, void *buf, size_t len);
static ssize_t tls_io_send(struct sbuf *sb, const void *buf, size_t len);
static void tls_io_shutdown(struct sbuf *sb);

static const struct sbuf_io_ops tls_io_table = {
	.recv = tls_io_recv,
	.send = tls_io_send,
	.shutdown = tls_io_shutdown,
};

/* Version of the OpenSSL library (neki -V, startup log). */
const char *
tls_library_version(void)
{
	return OpenSSL_version(OPENSSL_VERSION);
}

/* OpenSSL's most recent queued error as text (and clear the queue). */
static const char *
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

static bool
tls_is_set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

/* ---- settings ---- */

/* The client_tls_* settings of <c>. */
void
tls_settings_client(struct tls_settings *s, const struct cfg *c)
{
	memset(s, 0, sizeof(*s));
	s->sslmode = c->client_tls_sslmode;
	s->key_file = c->client_tls_key_file;
	s->cert_file = c->client_tls_cert_file;
	s->ca_file = c->client_tls_ca_file;
	s->protocols = c->client_tls_protocols;
	s->ciphers = c->client_tls_ciphers;
	s->tls13_ciphers = c->client_tls13_ciphers;
	s->ecdhcurve = c->client_tls_ecdhcurve;
	s->dheparams = c->client_tls_dheparams;
}

/* The server_tls_* settings of <c> (pgbouncer has no server-side ecdhcurve / dheparams). */
void
tls_settings_server(struct tls_settings *s, const struct cfg *c)
{
	memset(s, 0, sizeof(*s));
	s->sslmode = c->server_tls_sslmode;
	s->key_file = c->server_tls_key_file;
	s->cert_file = c->server_tls_cert_file;
	s->ca_file = c->server_tls_ca_file;
	s->protocols = c->server_tls_protocols;
	s->ciphers = c->server_tls_ciphers;
	s->tls13_ciphers = c->server_tls13_ciphers;
}

static const char *
tls_prefix(enum tls_role role)
{
	return role == TLS_ROLE_ACCEPT ? "client_tls" : "server_tls";
}

/* One word of a protocols list: its bits, or 0 when unknown. */
static unsigned
tls_proto_word(const char *w, size_t n)
{
	static const struct {
		const char *name;
		unsigned bits;
	} words[] = {
		{ "tlsv1", TLS_P10 }, { "tlsv1.0", TLS_P10 }, { "tlsv1.1", TLS_P11 },
		{ "tlsv1.2", TLS_P12 }, { "tlsv1.3", TLS_P13 }, { "all", TLS_P_ALL },
		{ "legacy", TLS_P_ALL }, { "secure", TLS_P_SECURE }, { "default", TLS_P_SECURE },
	};
	size_t i;

	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (strlen(words[i].name) == n && strncasecmp(words[i].name, w, n) == 0)
			return words[i].bits;
	}
	return 0;
}

/*
 * Parse a protocols setting into version bits: words separated by commas, colons or spaces,
 * each optionally negated with '!' or '-'. Unset means "secure".
 */
static bool
tls_parse_protocols(const char *spec, unsigned *mask)
{
	const char *p = spec;
	unsigned bits;
	size_t n;
	bool neg;

	*mask = 0;
	if (!tls_is_set(spec)) {
		*mask = TLS_P_SECURE;
		return true;
	}
	while (*p != '\0') {
		p += strspn(p, ", :\t");
		if (*p == '\0')
			break;
		neg = *p == '!' || *p == '-';
		p += neg ? 1 : 0;
		n = strcspn(p, ", :\t");
		bits = tls_proto_word(p, n);
		if (bits == 0)
			return false;
		*mask = neg ? (*mask & ~bits) : (*mask | bits);
		p += n;
	}
	return *mask != 0;
}

/* Apply protocol bits: min and max version, holes closed with SSL_OP_NO_*. */
static bool
tls_apply_protocols(SSL_CTX *ctx, unsigned mask)
{
	static const int vers[] = { TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION,
				    TLS1_3_VERSION };
	static const uint64_t no[] = { SSL_OP_NO_TLSv1, SSL_OP_NO_TLSv1_1, SSL_OP_NO_TLSv1_2,
				       SSL_OP_NO_TLSv1_3 };
	int lo = -1, hi = -1, i;

	for (i = 0; i < 4; i++) {
		if (mask & (1u << i)) {
			if (lo < 0)
				lo = i;
			hi = i;
		}
	}
	if (!SSL_CTX_set_min_proto_version(ctx, vers[lo]) ||
	    !SSL_CTX_set_max_proto_version(ctx, vers[hi]))
		return false;
	for (i = lo; i <= hi; i++) {
		if (!(mask & (1u << i)))
			SSL_CTX_set_options(ctx, no[i]);
	}
	return true;
}

/* Protocols and cipher lists (TLS <= 1.2 list, TLS 1.3 suites). */
static bool
tls_setup_ciphers(SSL_CTX *ctx, enum tls_role role, const struct tls_settings *s,
		  struct nk_error *err)
{
	const char *pfx = tls_prefix(role);
	const char *list = s->ciphers;
	char ebuf[TLS_ERR_LEN];
	char buf[512];
	unsigned mask;

	if (!tls_parse_protocols(s->protocols, &mask))
		return nk_error_set(err, "F0000", "invalid %s_protocols: \"%s\"", pfx, s->protocols);
	if (!tls_apply_protocols(ctx, mask))
		return nk_error_set(err, "F0000", "invalid %s_protocols: %s", pfx,
				    tls_err_str(ebuf, sizeof(ebuf)));
	if (!tls_is_set(list) || strcasecmp(list, "default") == 0 ||
	    strcasecmp(list, "secure") == 0)
		list = "DEFAULT";
	else if (strcasecmp(list, "all") == 0 || strcasecmp(list, "insecure") == 0)
		list = "ALL";
	snprintf(buf, sizeof(buf), "%s%s", list,
		 tls_is_set(s->ecdhcurve) && strcasecmp(s->ecdhcurve, "none") == 0 ?
		 ":!kECDHE" : "");
	if (!SSL_CTX_set_cipher_list(ctx, buf))
		return nk_error_set(err, "F0000", "invalid %s_ciphers \"%s\": %s", pfx, s->ciphers,
				    tls_err_str(ebuf, sizeof(ebuf)));
	if (tls_is_set(s->tls13_ciphers) && !SSL_CTX_set_ciphersuites(ctx, s->tls13_ciphers))
		return nk_error_set(err, "F0000", "invalid %s13_ciphers \"%s\": %s",
				    role == TLS_ROLE_ACCEPT ? "client" : "server", s->tls13_ciphers,
				    tls_err_str(ebuf, sizeof(ebuf)));
	return true;
}

/* client_tls_ecdhcurve (key exchange groups) and client_tls_dheparams. */
static bool
tls_setup_kex(SSL_CTX *ctx, const struct tls_settings *s, struct nk_error *err)
{
	const char *curve = s->ecdhcurve;
	const char *dh = s->dheparams;
	char ebuf[TLS_ERR_LEN];

	if (tls_is_set(curve) && strcasecmp(curve, "auto") != 0 &&
	    strcasecmp(curve, "none") != 0) {
		if (strcasecmp(curve, "secure") == 0)
			curve = "X25519:P-256:P-384";
		if (!SSL_CTX_set1_groups_list(ctx, curve))
			return nk_error_set(err, "F0000", "invalid client_tls_ecdhcurve \"%s\": %s",
					    s->ecdhcurve, tls_err_str(ebuf, sizeof(ebuf)));
	}
	if (!tls_is_set(dh) || strcasecmp(dh, "auto") == 0)
		SSL_CTX_set_dh_auto(ctx, 1);
	else if (strcasecmp(dh, "legacy") == 0)
		SSL_CTX_set_dh_auto(ctx, 2);	/* OpenSSL: 2 = the 1024-bit group */
	else if (strcasecmp(dh, "none") == 0)
		SSL_CTX_set_dh_auto(ctx, 0);
	else
		return nk_error_set(err, "F0000",
				    "invalid client_tls_dheparams \"%s\": use none, auto or legacy",
				    dh);
	return true;
}

/* Key and certificate chain (both or neither; the ACCEPT role needs them). */
static bool
tls_setup_cert(SSL_CTX *ctx, enum tls_role role, const struct tls_settings *s,
	       struct nk_error *err)
{
	const char *pfx = tls_prefix(role);
	char ebuf[TLS_ERR_LEN];

	if (!tls_is_set(s->cert_file) && !tls_is_set(s->key_file)) {
		if (role == TLS_ROLE_CONNECT)
			return true;
		return nk_error_set(err, "F0000", "%s_sslmode requires %s_key_file and "
				    "%s_cert_file", pfx, pfx, pfx);
	}
	if (!tls_is_set(s->cert_file) || !tls_is_set(s->key_file))
		return nk_error_set(err, "F0000", "%s_key_file and %s_cert_file must be set "
				    "together", pfx, pfx);
	if (SSL_CTX_use_certificate_chain_file(ctx, s->cert_file) != 1)
		return nk_error_set(err, "F0000", "could not load %s_cert_file \"%s\": %s", pfx,
				    s->cert_file, tls_err_str(ebuf, sizeof(ebuf)));
	if (SSL_CTX_use_PrivateKey_file(ctx, s->key_file, SSL_FILETYPE_PEM) != 1)
		return nk_error_set(err, "F0000", "could not load %s_key_file \"%s\": %s", pfx,
				    s->key_file, tls_err_str(ebuf, sizeof(ebuf)));
	if (SSL_CTX_check_private_key(ctx) != 1)
		return nk_error_set(err, "F0000", "%s_key_file does not match %s_cert_file: %s",
				    pfx, pfx, tls_err_str(ebuf, sizeof(ebuf)));
	return true;
}

/* CA file and peer verification from the sslmode. */
static bool
tls_setup_verify(SSL_CTX *ctx, enum tls_role role, const struct tls_settings *s,
		 struct nk_error *err)
{
	const char *pfx = tls_prefix(role);
	bool verify = s->sslmode >= CFG_SSL_VERIFY_CA;
	char ebuf[TLS_ERR_LEN];
	STACK_OF(X509_NAME) *names;

	if (tls_is_set(s->ca_file)) {
		if (SSL_CTX_load_verify_locations(ctx, s->ca_file, NULL) != 1)
			return nk_error_set(err, "F0000", "could not load %s_ca_file \"%s\": %s",
					    pfx, s->ca_file, tls_err_str(ebuf, sizeof(ebuf)));
	} else if (verify && role == TLS_ROLE_ACCEPT) {
		return nk_error_set(err, "F0000", "client_tls_sslmode %s requires "
				    "client_tls_ca_file", cfg_sslmode_str(s->sslmode));
	} else if (verify) {
		SSL_CTX_set_default_verify_paths(ctx);
	}
	if (role == TLS_ROLE_CONNECT) {
		SSL_CTX_set_verify(ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
		return true;
	}
	if (verify)
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT |
				   SSL_VERIFY_CLIENT_ONCE, NULL);
	else if (tls_is_set(s->ca_file))
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_CLIENT_ONCE, NULL);
	if (tls_is_set(s->ca_file)) {
		names = SSL_load_client_CA_file(s->ca_file);
		if (names != NULL)
			SSL_CTX_set_client_CA_list(ctx, names);
		ERR_clear_error();
	}
	return true;
}

/*
 * ALPN on the server side: choose "postgresql" when the client offers it; a client that
 * offers only other protocols is refused (Postgres does the same).
 */
static int
tls_alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		   const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned int i = 0, n;

	(void)ssl;
	(void)arg;
	while (i < inlen) {
		n = in[i];
		if (i + 1 + n > inlen)
			break;
		if (n == TLS_ALPN_LEN && memcmp(in + i + 1, TLS_ALPN_NAME, n) == 0) {
			*out = in + i + 1;
			*outlen = (unsigned char)n;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* Feed <path>'s bytes into the fingerprint (a missing file counts as its name only). */
static void
tls_fp_file(EVP_MD_CTX *md, const char *path)
{
	uint8_t buf[4096];
	size_t n;
	FILE *f;

	if (!tls_is_set(path))
		return;
	f = fopen(path, "rb");
	if (f == NULL)
		return;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		EVP_DigestUpdate(md, buf, n);
	fclose(f);
}

/* SHA-256 over the role, every setting and the contents of the files. */
static void
tls_fingerprint(enum tls_role role, const struct tls_settings *s, uint8_t fp[TLS_FP_LEN])
{
	const char *strs[] = { s->key_file, s->cert_file, s->ca_file, s->protocols, s->ciphers,
			       s->tls13_ciphers, s->ecdhcurve, s->dheparams };
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int hdr[2] = { (int)role, (int)s->sslmode };
	unsigned int len = TLS_FP_LEN;
	size_t i;

	memset(fp, 0, TLS_FP_LEN);
	if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return;
	}
	EVP_DigestUpdate(md, hdr, sizeof(hdr));
	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		EVP_DigestUpdate(md, tls_is_set(strs[i]) ? strs[i] : "", (tls_is_set(strs[i]) ?
				 strlen(strs[i]) : 0) + 1);
	tls_fp_file(md, s->key_file);
	tls_fp_file(md, s->cert_file);
	tls_fp_file(md, s->ca_file);
	EVP_DigestFinal_ex(md, fp, &len);
	EVP_MD_CTX_free(md);
}

/* An SSL_CTX with neki's fixed choices for <role>. */
static SSL_CTX *
tls_ssl_ctx_base(enum tls_role role)
{
	SSL_CTX *ctx = SSL_CTX_new(role == TLS_ROLE_ACCEPT ? TLS_server_method() :
				   TLS_client_method());

	if (ctx == NULL)
		return NULL;
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
			    SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
	SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
			 SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
	if (role == TLS_ROLE_ACCEPT) {
		SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
		SSL_CTX_set_num_tickets(ctx, 0);
		SSL_CTX_set_alpn_select_cb(ctx, tls_alpn_select_cb, NULL);
	} else {
		SSL_CTX_set_alpn_protos(ctx, tls_alpn_wire, sizeof(tls_alpn_wire) - 1);
	}
	return ctx;
}

/* Build a context for <role> from <s>; see neki/tls.h. */
struct tls_ctx *
tls_ctx_new(enum tls_role role, const struct tls_settings *s, struct nk_error *err)
{
	struct tls_ctx *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		nk_error_set(err, "53200", "out of memory");
		return NULL;
	}
	t->role = role;
	t->sslmode = s->sslmode;
	t->refcount = 1;
	t->ssl_ctx = tls_ssl_ctx_base(role);
	if (t->ssl_ctx == NULL) {
		nk_error_set(err, "F0000", "could not create a TLS context");
		goto fail;
	}
	if (!tls_setup_ciphers(t->ssl_ctx, role, s, err))
		goto fail;
	if (role == TLS_ROLE_ACCEPT && !tls_setup_kex(t->ssl_ctx, s, err))
		goto fail;
	if (!tls_setup_cert(t->ssl_ctx, role, s, err) ||
	    !tls_setup_verify(t->ssl_ctx, role, s, err))
		goto fail;
	tls_fingerprint(role, s, t->fp);
	return t;
fail:
	ERR_clear_error();
	SSL_CTX_free(t->ssl_ctx);
	free(t);
	return NULL;
}

void
tls_ctx_ref(struct tls_ctx *ctx)
{
	ctx->refcount++;
}

/* Drop one reference; the SSL_CTX lives on while SSL objects still use it. */
void
tls_ctx_unref(struct tls_ctx *ctx)
{
	if (ctx == NULL || --ctx->refcount > 0)
		return;
	SSL_CTX_free(ctx->ssl_ctx);
	free(ctx);
}

enum cfg_sslmode
tls_ctx_sslmode(const struct tls_ctx *ctx)
{
	return ctx->sslmode;
}

/* ---- current contexts ---- */

/* Build the pair <c> asks for into <cl>/<sv> (NULL for disabled sides). */
static bool
tls_build_pair(const struct cfg *c, struct tls_ctx **cl, struct tls_ctx **sv,
	       struct nk_error *err)
{
	struct tls_settings s;

	*cl = NULL;
	*sv = NULL;
	if (c->client_tls_sslmode != CFG_SSL_DISABLE) {
		tls_settings_client(&s, c);
		*cl = tls_ctx_new(TLS_ROLE_ACCEPT, &s, err);
		if (*cl == NULL)
			return false;
	}
	if (c->server_tls_sslmode != CFG_SSL_DISABLE) {
		tls_settings_server(&s, c);
		*sv = tls_ctx_new(TLS_ROLE_CONNECT, &s, err);
		if (*sv == NULL) {
			tls_ctx_unref(*cl);
			*cl = NULL;
			return false;
		}
	}
	return true;
}

/* Replace the current pair with <cl>/<sv> (references taken over). */
static void
tls_swap_pair(struct tls_ctx *cl, struct tls_ctx *sv)
{
	tls_ctx_unref(tls_cur_client);
	tls_ctx_unref(tls_cur_server);
	tls_cur_client = cl;
	tls_cur_server = sv;
}

/* Start-up: build the current contexts from <c>. */
bool
tls_init(const struct cfg *c, struct nk_error *err)
{
	struct tls_ctx *cl, *sv;

	if (!tls_build_pair(c, &cl, &sv, err))
		return false;
	tls_swap_pair(cl, sv);
	tls_ready = true;
	return true;
}

/* Validate <c>'s TLS settings and files without keeping anything. */
bool
tls_check(const struct cfg *c, struct nk_error *err)
{
	struct tls_ctx *cl, *sv;

	if (!tls_build_pair(c, &cl, &sv, err))
		return false;
	tls_ctx_unref(cl);
	tls_ctx_unref(sv);
	return true;
}

static bool
tls_same_ctx(const struct tls_ctx *a, const struct tls_ctx *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return memcmp(a->fp, b->fp, TLS_FP_LEN) == 0;
}

/* RELOAD: rebuild from <c>, or keep the old pair (logged) when that fails. */
bool
tls_reload(const struct cfg *c, bool *server_changed)
{
	struct tls_ctx *cl, *sv;
	struct nk_error err;

	if (server_changed != NULL)
		*server_changed = false;
	if (!tls_ready)
		return true;	/* this process does not use TLS (the master) */
	if (!tls_build_pair(c, &cl, &sv, &err)) {
		log_error("%s", err.message);
		log_warn("TLS configuration could not be reloaded, keeping old configuration");
		return false;
	}
	if (server_changed != NULL)
		*server_changed = !tls_same_ctx(sv, tls_cur_server);
	tls_swap_pair(cl, sv);
	return true;
}

struct tls_ctx *
tls_client_ctx(void)
{
	return tls_cur_client;
}

struct tls_ctx *
tls_server_ctx(void)
{
	return tls_cur_server;
}

void
tls_cleanup(void)
{
	tls_swap_pair(NULL, NULL);
	tls_ready = false;
}

/* Answer 'S' to an SSLRequest: a client context exists and the client is not on Unix. */
bool
tls_client_offer(bool is_unix)
{
	return tls_cur_client != NULL && !is_unix;
}

/* A plain client must be refused ("SSL required"): require or stronger, not on Unix. */
bool
tls_client_required(bool is_unix)
{
	return tls_cur_client != NULL && tls_cur_client->sslmode >= CFG_SSL_REQUIRE && !is_unix;
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
		return nk_error_set(err, "08P01", "received unencrypted data after SSL request");
	if (sbuf_queued(sb) > 0)
		return nk_error_set(err, "08006", "could not send the SSL answer");
	c = tls_conn_new(sb, ctx, done, arg);
	if (c == NULL || !tls_conn_make_ssl(c)) {
		if (c != NULL)
			sbuf_close(sb);
		return nk_error_set(err, "53200", "out of memory");
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
		return nk_error_set(err, "53200", "out of memory");
	memcpy(copy, pkt->data, pkt->avail);
	sbuf_skip(sb, pkt->avail);
	c = tls_conn_new(sb, ctx, done, arg);
	if (c == NULL || !tls_conn_make_ssl(c)) {
		free(copy);
		if (c != NULL)
			sbuf_close(sb);
		return nk_error_set(err, "53200", "out of memory");
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
