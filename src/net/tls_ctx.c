/*
 * tls_ctx.c - TLS contexts: the client_tls_* / server_tls_* settings turned into an SSL_CTX
 * (protocols, ciphers, key exchange groups, certificate and key, verification, ALPN), and the
 * process's current pair of them with reload (tls_init, tls_reload: a context is rebuilt
 * only when its settings or files changed, compared by fingerprint). Connections over them:
 * tls.c. Entry points: see neki/tls.h.
 */
#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "neki/tls.h"
#include "tls_int.h"

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

/* The process's current contexts (tls_init / tls_reload). */
static struct tls_ctx *tls_cur_client;
static struct tls_ctx *tls_cur_server;
static bool tls_ready;		/* tls_init() succeeded in this process */

/*
 * OpenSSL's first queued error as text, as libtls (pgbouncer's TLS layer) reports a file it
 * could not load: "error:80000002:system library::No such file or directory".
 */
static const char *
tls_first_err_str(char *buf, size_t len)
{
	unsigned long e = ERR_peek_error();

	if (e == 0)
		snprintf(buf, len, "unknown error");
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
	s->sslmode = c->tls.client_tls_sslmode;
	s->key_file = c->tls.client_tls_key_file;
	s->cert_file = c->tls.client_tls_cert_file;
	s->ca_file = c->tls.client_tls_ca_file;
	s->protocols = c->tls.client_tls_protocols;
	s->ciphers = c->tls.client_tls_ciphers;
	s->tls13_ciphers = c->tls.client_tls13_ciphers;
	s->ecdhcurve = c->tls.client_tls_ecdhcurve;
	s->dheparams = c->tls.client_tls_dheparams;
}

/* The server_tls_* settings of <c> (pgbouncer has no server-side ecdhcurve / dheparams). */
void
tls_settings_server(struct tls_settings *s, const struct cfg *c)
{
	memset(s, 0, sizeof(*s));
	s->sslmode = c->tls.server_tls_sslmode;
	s->key_file = c->tls.server_tls_key_file;
	s->cert_file = c->tls.server_tls_cert_file;
	s->ca_file = c->tls.server_tls_ca_file;
	s->protocols = c->tls.server_tls_protocols;
	s->ciphers = c->tls.server_tls_ciphers;
	s->tls13_ciphers = c->tls.server_tls13_ciphers;
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

/*
 * Protocols and cipher lists (TLS <= 1.2 list, TLS 1.3 suites, the latter only when TLS 1.3
 * is allowed). The reasons are pgbouncer's (its setting checks, then libtls's words).
 */
static bool
tls_setup_ciphers(SSL_CTX *ctx, enum tls_role role, const struct tls_settings *s,
		  struct nk_error *err)
{
	const char *pfx = tls_prefix(role);
	const char *list = s->ciphers;
	char buf[512];
	unsigned mask;

	if (!tls_parse_protocols(s->protocols, &mask) || !tls_apply_protocols(ctx, mask))
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "invalid %s_protocols: %s", pfx, s->protocols);
	if (!tls_is_set(list) || strcasecmp(list, "default") == 0 ||
	    strcasecmp(list, "secure") == 0)
		list = "DEFAULT";
	else if (strcasecmp(list, "all") == 0 || strcasecmp(list, "insecure") == 0)
		list = "ALL";
	snprintf(buf, sizeof(buf), "%s%s", list,
		 tls_is_set(s->ecdhcurve) && strcasecmp(s->ecdhcurve, "none") == 0 ?
		 ":!kECDHE" : "");
	if (!SSL_CTX_set_cipher_list(ctx, buf))
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "invalid %s_ciphers: %s", pfx, s->ciphers);
	if ((mask & TLS_P13) && tls_is_set(s->tls13_ciphers) &&
	    !SSL_CTX_set_ciphersuites(ctx, s->tls13_ciphers))
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "failed to set the TLSv1.3 cipher suites");
	return true;
}

/* client_tls_ecdhcurve (key exchange groups) and client_tls_dheparams. */
static bool
tls_setup_kex(SSL_CTX *ctx, const struct tls_settings *s, struct nk_error *err)
{
	const char *curve = s->ecdhcurve;
	const char *dh = s->dheparams;

	if (tls_is_set(curve) && strcasecmp(curve, "auto") != 0 &&
	    strcasecmp(curve, "none") != 0) {
		if (strcasecmp(curve, "secure") == 0)
			curve = "X25519:P-256:P-384";
		if (!SSL_CTX_set1_groups_list(ctx, curve))
			return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
					    "invalid client_tls_ecdhcurve: %s",
					    s->ecdhcurve);
	}
	if (!tls_is_set(dh) || strcasecmp(dh, "auto") == 0)
		SSL_CTX_set_dh_auto(ctx, 1);
	else if (strcasecmp(dh, "legacy") == 0)
		SSL_CTX_set_dh_auto(ctx, 2);	/* OpenSSL: 2 = the 1024-bit group */
	else if (strcasecmp(dh, "none") == 0)
		SSL_CTX_set_dh_auto(ctx, 0);
	else
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "invalid client_tls_dheparams: %s", dh);
	return true;
}

/*
 * Key and certificate chain (both or neither; the ACCEPT role needs them). A file that does
 * not load is reported in libtls's words, with OpenSSL's first error, as pgbouncer does.
 */
static bool
tls_setup_cert(SSL_CTX *ctx, enum tls_role role, const struct tls_settings *s,
	       struct nk_error *err)
{
	const char *pfx = tls_prefix(role);
	char ebuf[TLS_ERR_LEN];

	if (role == TLS_ROLE_ACCEPT && (!tls_is_set(s->cert_file) || !tls_is_set(s->key_file)))
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "To allow TLS connections from clients, "
				    "client_tls_key_file and client_tls_cert_file must be set.");
	if (!tls_is_set(s->cert_file) && !tls_is_set(s->key_file))
		return true;
	if (!tls_is_set(s->cert_file) || !tls_is_set(s->key_file))
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "%s_key_file and %s_cert_file must be set "
				    "together", pfx, pfx);
	if (SSL_CTX_use_certificate_chain_file(ctx, s->cert_file) != 1)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "failed to load certificate file \"%s\": %s",
				    s->cert_file, tls_first_err_str(ebuf, sizeof(ebuf)));
	if (SSL_CTX_use_PrivateKey_file(ctx, s->key_file, SSL_FILETYPE_PEM) != 1)
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "failed to load private key file \"%s\": %s",
				    s->key_file, tls_first_err_str(ebuf, sizeof(ebuf)));
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR, "private/public key mismatch");
	}
	return true;
}

/* CA file and peer verification from the sslmode. */
static bool
tls_setup_verify(SSL_CTX *ctx, enum tls_role role, const struct tls_settings *s,
		 struct nk_error *err)
{
	bool verify = s->sslmode >= CFG_SSL_VERIFY_CA;
	char ebuf[TLS_ERR_LEN];
	STACK_OF(X509_NAME) *names;

	if (tls_is_set(s->ca_file)) {
		if (SSL_CTX_load_verify_locations(ctx, s->ca_file, NULL) != 1)
			return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR, "failed to load CA: %s",
					    tls_first_err_str(ebuf, sizeof(ebuf)));
	} else if (verify && role == TLS_ROLE_ACCEPT) {
		return nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR,
				    "client_tls_sslmode requires client_tls_ca_file");
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
		nk_error_oom(err);
		return NULL;
	}
	t->role = role;
	t->sslmode = s->sslmode;
	t->refcount = 1;
	t->ssl_ctx = tls_ssl_ctx_base(role);
	if (t->ssl_ctx == NULL) {
		nk_error_set(err, ERRCODE_CONFIG_FILE_ERROR, "could not create a TLS context");
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
	if (c->tls.client_tls_sslmode != CFG_SSL_DISABLE) {
		tls_settings_client(&s, c);
		*cl = tls_ctx_new(TLS_ROLE_ACCEPT, &s, err);
		if (*cl == NULL)
			return false;
	}
	if (c->tls.server_tls_sslmode != CFG_SSL_DISABLE) {
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

/* RELOAD: rebuild from <c>, or keep the old pair when that fails; see neki/tls.h. */
bool
tls_reload(const struct cfg *c, bool *server_changed, struct nk_error *err)
{
	struct tls_ctx *cl, *sv;

	if (server_changed != NULL)
		*server_changed = false;
	if (!tls_ready)
		return true;	/* this process does not use TLS (the master) */
	if (!tls_build_pair(c, &cl, &sv, err))
		return false;
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
