/*
 * scram.c - SCRAM-SHA-256 secrets, server and client exchanges; cleartext check.
 *
 * The project's OpenSSL adapter for authentication: SHA-256, HMAC, PBKDF2 and
 * RAND_bytes are used here only. Message parsing follows Postgres' auth-scram.c
 * (same order of checks, same error texts: "malformed SCRAM message" with a
 * detail, 08P01). Base64 is the strict RFC 4648 alphabet with padding.
 * Entry points: scram_secret_*, scram_server_*, scram_client_*, auth_plain_verify.
 */
#include "neki/base.h"

#include "neki/scram.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "neki/auth.h"

/* ---- base64 ---- */

static const char b64_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Encoded length of <n> bytes, without the NUL. */
static size_t
b64_enc_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

/* Encode <n> bytes into <out> (b64_enc_len(n) + 1 bytes), NUL-terminated. */
static void
b64_encode(const uint8_t *in, size_t n, char *out)
{
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];

		*out++ = b64_chars[v >> 18];
		*out++ = b64_chars[(v >> 12) & 63];
		*out++ = b64_chars[(v >> 6) & 63];
		*out++ = b64_chars[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)in[i + 1] << 8;
		*out++ = b64_chars[v >> 18];
		*out++ = b64_chars[(v >> 12) & 63];
		*out++ = i + 1 < n ? b64_chars[(v >> 6) & 63] : '=';
		*out++ = '=';
	}
	*out = '\0';
}

static int
b64_value(char c)
{
	const char *p = c ? strchr(b64_chars, c) : NULL;

	return p ? (int)(p - b64_chars) : -1;
}

/*
 * Decode <len> characters of <in> into <out> (at most <max> bytes). Returns the
 * byte count, or -1 on a bad character, bad padding or overflow.
 */
static ssize_t
b64_decode(const char *in, size_t len, uint8_t *out, size_t max)
{
	size_t n = 0;
	uint32_t acc = 0;
	int bits = 0, pad = 0;

	if (len % 4 != 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		int v;

		if (in[i] == '=') {
			if (i + 2 < len)	/* padding only in the last two places */
				return -1;
			pad++;
			continue;
		}
		if (pad > 0 || (v = b64_value(in[i])) < 0)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n >= max)
				return -1;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	return (ssize_t)n;
}

/* ---- primitives ---- */

/* RAND_bytes wrapper; false when the CSPRNG fails. */
bool
scram_random_bytes(uint8_t *buf, size_t n)
{
	return RAND_bytes(buf, (int)n) == 1;
}

static bool
hmac256(const uint8_t *key, size_t klen, const void *data, size_t dlen,
	uint8_t out[SCRAM_KEY_LEN])
{
	unsigned int olen = SCRAM_KEY_LEN;

	return HMAC(EVP_sha256(), key, (int)klen, data, dlen, out, &olen) != NULL;
}

static void
sha256(const uint8_t *data, size_t len, uint8_t out[SCRAM_KEY_LEN])
{
	SHA256(data, len, out);
}

/* SaltedPassword = PBKDF2-HMAC-SHA256(<password>, salt, iterations). */
static bool
salted_password(const char *password, const uint8_t *salt, size_t salt_len, int iterations,
		uint8_t out[SCRAM_KEY_LEN])
{
	return PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)salt_len, iterations,
				 EVP_sha256(), SCRAM_KEY_LEN, out) == 1;
}

/* The random part of a nonce: base64 of SCRAM_RAW_NONCE_LEN random bytes. */
static bool
make_nonce(char out[32])
{
	uint8_t raw[SCRAM_RAW_NONCE_LEN];

	if (!scram_random_bytes(raw, sizeof(raw)))
		return false;
	b64_encode(raw, sizeof(raw), out);
	return true;
}

/* asprintf that returns NULL on failure. */
static char *
str_printf(const char *fmt, ...) NK_PRINTF(1, 2);

static char *
str_printf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	return r < 0 ? NULL : s;
}

/* ---- secrets ---- */

/* Decode base64 field [<p>, <end>) into exactly <want> bytes (0: any up to <max>). */
static ssize_t
decode_field(const char *p, const char *end, uint8_t *out, size_t max)
{
	if (!end || end < p)
		return -1;
	return b64_decode(p, (size_t)(end - p), out, max);
}

/* Parse "SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>" (strict base64). */
bool
scram_secret_parse(const char *text, struct scram_secret *out)
{
	const char *p, *colon, *dollar, *colon2;
	char *iend;
	long iter;
	ssize_t n;

	if (strncmp(text, "SCRAM-SHA-256$", 14) != 0)
		return false;
	p = text + 14;
	iter = strtol(p, &iend, 10);
	if (iend == p || *iend != ':' || iter <= 0 || iter > INT32_MAX)
		return false;
	out->iterations = (int)iter;
	colon = iend;
	dollar = strchr(colon + 1, '$');
	n = decode_field(colon + 1, dollar, out->salt, sizeof(out->salt));
	if (n <= 0)
		return false;
	out->salt_len = (size_t)n;
	colon2 = strchr(dollar + 1, ':');
	if (decode_field(dollar + 1, colon2, out->stored_key, SCRAM_KEY_LEN) != SCRAM_KEY_LEN)
		return false;
	return decode_field(colon2 + 1, colon2 + 1 + strlen(colon2 + 1), out->server_key,
			    SCRAM_KEY_LEN) == SCRAM_KEY_LEN;
}

/* StoredKey and ServerKey from a SaltedPassword. */
static bool
keys_from_salted(const uint8_t salted[SCRAM_KEY_LEN], uint8_t client_key[SCRAM_KEY_LEN],
		 uint8_t stored_key[SCRAM_KEY_LEN], uint8_t server_key[SCRAM_KEY_LEN])
{
	if (!hmac256(salted, SCRAM_KEY_LEN, "Client Key", 10, client_key) ||
	    !hmac256(salted, SCRAM_KEY_LEN, "Server Key", 10, server_key))
		return false;
	sha256(client_key, SCRAM_KEY_LEN, stored_key);
	return true;
}

/* SaltedPassword by PBKDF2, then StoredKey and ServerKey (RFC 5802). */
bool
scram_secret_from_password(const char *password, const uint8_t *salt, size_t salt_len,
			   int iterations, struct scram_secret *out)
{
	uint8_t salted[SCRAM_KEY_LEN], ck[SCRAM_KEY_LEN];
	char *prep;
	bool ok;

	if (salt_len == 0 || salt_len > sizeof(out->salt) || iterations <= 0)
		return false;
	prep = scram_prepare_password(password);
	if (!prep)
		return false;
	out->iterations = iterations;
	memcpy(out->salt, salt, salt_len);
	out->salt_len = salt_len;
	ok = salted_password(prep, salt, salt_len, iterations, salted) &&
	     keys_from_salted(salted, ck, out->stored_key, out->server_key);
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(ck, sizeof(ck));
	OPENSSL_cleanse(prep, strlen(prep));
	free(prep);
	return ok;
}

/* The rolpassword text of <s>; false when <outlen> is too small. */
bool
scram_secret_format(const struct scram_secret *s, char *out, size_t outlen)
{
	char salt[b64_enc_len(SCRAM_MAX_SALT_LEN) + 1];
	char sk[b64_enc_len(SCRAM_KEY_LEN) + 1], vk[b64_enc_len(SCRAM_KEY_LEN) + 1];
	int n;

	b64_encode(s->salt, s->salt_len, salt);
	b64_encode(s->stored_key, SCRAM_KEY_LEN, sk);
	b64_encode(s->server_key, SCRAM_KEY_LEN, vk);
	n = snprintf(out, outlen, "SCRAM-SHA-256$%d:%s$%s:%s", s->iterations, salt, sk, vk);
	return n > 0 && (size_t)n < outlen;
}

/* Check a cleartext <password> against any kind of stored secret. */
bool
auth_plain_verify(const char *secret, const char *user, const char *password)
{
	char md5[AUTH_MD5_LEN + 1];
	struct scram_secret stored, derived;
	bool ok;

	if (secret == NULL)
		return false;	/* unknown user */
	switch (auth_secret_kind(secret)) {
	case AUTH_SECRET_MD5:
		auth_md5_secret(user, password, md5);
		return auth_secure_streq(md5, secret);
	case AUTH_SECRET_SCRAM:
		if (!scram_secret_parse(secret, &stored) ||
		    !scram_secret_from_password(password, stored.salt, stored.salt_len,
						stored.iterations, &derived))
			return false;
		ok = CRYPTO_memcmp(stored.stored_key, derived.stored_key, SCRAM_KEY_LEN) == 0;
		return ok;
	case AUTH_SECRET_PLAIN:
	default:
		return auth_secure_streq(secret, password);
	}
}

/* ---- message attributes ---- */

/* Fill <err> with "malformed SCRAM message" and a detail; returns false. */
static bool
malformed(struct nk_error *err, const char *fmt, ...) NK_PRINTF(2, 3);

static bool
malformed(struct nk_error *err, const char *fmt, ...)
{
	va_list ap;

	nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION, "malformed SCRAM message");
	if (err) {
		va_start(ap, fmt);
		vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
		va_end(ap);
	}
	return false;
}

/* Postgres' sanitize_char(): 'c' for printable ASCII, else 0xNN (for error details). */
static const char *
sanitize_char(char c, char buf[8])
{
	if (c >= 0x21 && c <= 0x7e)
		snprintf(buf, 8, "'%c'", c);
	else
		snprintf(buf, 8, "0x%02x", (unsigned char)c);
	return buf;
}

/* Cut the value starting at <v> at the next ',' (in place); *<p> goes past it. */
static char *
cut_value(char **p, char *v)
{
	char *comma = strchr(v, ',');

	if (comma) {
		*comma = '\0';
		*p = comma + 1;
	} else {
		*p = v + strlen(v);
	}
	return v;
}

/*
 * Read attribute <attr> at *<p> ("x=value" up to ',' or the end): on success
 * NUL-terminates the value in place, returns it and leaves *<p> after the comma.
 */
static char *
read_attr(char **p, char attr, struct nk_error *err)
{
	char *s = *p, cb[8];

	if (*s != attr) {
		malformed(err, "Expected attribute \"%c\" but found \"%s\".", attr,
			  sanitize_char(*s, cb));
		return NULL;
	}
	if (s[1] != '=') {
		malformed(err, "Expected character \"=\" for attribute \"%c\".", attr);
		return NULL;
	}
	return cut_value(p, s + 2);
}

/* Read any attribute (extensions); its letter goes to *<attr>. NULL on a bad form. */
static char *
read_any_attr(char **p, char *attr, struct nk_error *err)
{
	char *s = *p, cb[8];

	if (*s == '\0') {
		malformed(err, "Attribute expected, but found end of string.");
		return NULL;
	}
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))) {
		malformed(err, "Attribute expected, but found invalid character \"%s\".",
			  sanitize_char(*s, cb));
		return NULL;
	}
	*attr = *s;
	if (s[1] != '=') {
		malformed(err, "Expected character \"=\" for attribute \"%c\".", *s);
		return NULL;
	}
	return cut_value(p, s + 2);
}

/* A NUL-terminated copy of <len> bytes of <msg>; NULL on OOM or embedded NUL. */
static char *
msg_copy(const uint8_t *msg, size_t len, struct nk_error *err)
{
	char *s;

	if (memchr(msg, '\0', len)) {
		malformed(err, "The message contains a NUL byte.");
		return NULL;
	}
	s = malloc(len + 1);
	if (!s) {
		nk_error_oom(err);
		return NULL;
	}
	memcpy(s, msg, len);
	s[len] = '\0';
	return s;
}

/* Nonces are printable ASCII without ','. */
static bool
nonce_is_printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e || *s == ',')
			return false;
	return true;
}

/* ---- server ---- */

static uint8_t mock_key[SCRAM_KEY_LEN];	/* secret behind mock salts; see scram_mock_key_init() */
static bool mock_key_ready;

/* Create the mock-salt key once per process (the master calls it before forking). */
void
scram_mock_key_init(void)
{
	if (mock_key_ready)
		return;
	if (!scram_random_bytes(mock_key, sizeof(mock_key)))
		nk_panic(__FILE__, __LINE__, "could not generate random bytes for mock salts");
	mock_key_ready = true;
}

/*
 * The salt of a mock exchange: HMAC(mock key, user), like Postgres'
 * scram_mock_salt(), so that repeated attempts for an unknown user see the same
 * salt, as they would for a real one.
 */
static void
mock_salt(const char *user, uint8_t *salt, size_t len)
{
	uint8_t h[SCRAM_KEY_LEN];

	scram_mock_key_init();
	if (!hmac256(mock_key, sizeof(mock_key), user, strlen(user), h))
		memset(h, 0x5a, sizeof(h));
	memcpy(salt, h, len);
}

/*
 * Prepare a server exchange; an unusable secret makes it a mock that fails. An empty
 * password is no password: Postgres and pgbouncer refuse it on every method, and a SCRAM
 * secret derived from "" would let in whoever runs the exchange with an empty password.
 */
void
scram_server_init(struct scram_server *s, const char *user, const char *stored, int iterations)
{
	uint8_t salt[SCRAM_DEFAULT_SALT_LEN];

	memset(s, 0, sizeof(*s));
	snprintf(s->user, sizeof(s->user), "%s", user);
	s->state = SCRAM_SRV_INIT;
	if (stored && auth_secret_kind(stored) == AUTH_SECRET_SCRAM) {
		s->mock = !scram_secret_parse(stored, &s->secret);
	} else if (stored && stored[0] != '\0' && auth_secret_kind(stored) == AUTH_SECRET_PLAIN) {
		/* a plain password: derive a secret with a fresh salt */
		s->mock = !scram_random_bytes(salt, sizeof(salt)) ||
			  !scram_secret_from_password(stored, salt, sizeof(salt), iterations,
						      &s->secret);
	} else {
		s->mock = true;
	}
	if (s->mock) {
		/* believable parameters for the fake exchange */
		s->secret.iterations = iterations;
		s->secret.salt_len = SCRAM_DEFAULT_SALT_LEN;
		mock_salt(user, s->secret.salt, s->secret.salt_len);
	}
}

/* gs2 header of client-first: cbind flag and (absent) authzid. Advances *<p>. */
static bool
server_read_gs2(struct scram_server *s, char **p, struct nk_error *err)
{
	char *in = *p, cb[8];

	switch (*in) {
	case 'n':
	case 'y':
		s->cbind_flag = *in++;
		if (*in != ',')
			return malformed(err, "Comma expected, but found character \"%s\".",
					 sanitize_char(*in, cb));
		in++;
		break;
	case 'p':
		return malformed(err, "The client selected SCRAM-SHA-256 without channel binding, "
				 "but the SCRAM message includes channel binding data.");
	default:
		return malformed(err, "Unexpected channel-binding flag \"%s\".",
				 sanitize_char(*in, cb));
	}
	if (*in == 'a')
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "client uses authorization identity, but it is not supported");
	if (*in != ',')
		return malformed(err, "Unexpected attribute \"%s\" in client-first-message.",
				 sanitize_char(*in, cb));
	*p = in + 1;
	return true;
}

/* Parse the bare part of client-first; returns the client nonce (in <bare>). */
static char *
server_read_bare(char *bare, struct nk_error *err)
{
	char *p = bare, *nonce;

	if (*p == 'm') {
		nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
			     "client requires an unsupported SCRAM extension");
		return NULL;
	}
	if (!read_attr(&p, 'n', err))
		return NULL;
	nonce = read_attr(&p, 'r', err);
	if (!nonce)
		return NULL;
	if (!nonce_is_printable(nonce)) {
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			     "non-printable characters in SCRAM nonce");
		return NULL;
	}
	while (*p != '\0') {	/* extensions: checked for form, then ignored */
		char attr;

		if (!read_any_attr(&p, &attr, err))
			return NULL;
	}
	return nonce;
}

/* Build server-first from the client nonce. */
static bool
server_build_first(struct scram_server *s, const char *client_nonce, struct nk_error *err)
{
	char snonce[32], salt[b64_enc_len(SCRAM_MAX_SALT_LEN) + 1];

	if (s->test_nonce)
		snprintf(snonce, sizeof(snonce), "%s", s->test_nonce);
	else if (!make_nonce(snonce))
		return nk_error_set(err, ERRCODE_INTERNAL_ERROR, "could not generate random nonce");
	b64_encode(s->secret.salt, s->secret.salt_len, salt);
	s->nonce = str_printf("%s%s", client_nonce, snonce);
	s->server_first = s->nonce ? str_printf("r=%s,s=%s,i=%d", s->nonce, salt,
						s->secret.iterations) : NULL;
	if (!s->server_first)
		return nk_error_oom(err);
	return true;
}

/* Parse client-first (Postgres' read_client_first_message) and build server-first. */
bool
scram_server_client_first(struct scram_server *s, const uint8_t *msg, size_t len,
			  struct nk_error *err)
{
	char *buf, *p, *nonce;
	bool ok = false;

	NK_ASSERT(s->state == SCRAM_SRV_INIT);
	s->state = SCRAM_SRV_FAILED;
	buf = msg_copy(msg, len, err);
	if (!buf)
		return false;
	p = buf;
	if (!server_read_gs2(s, &p, err))
		goto out;
	s->client_first_bare = strdup(p);
	if (!s->client_first_bare) {
		nk_error_oom(err);
		goto out;
	}
	nonce = server_read_bare(p, err);
	if (!nonce || !server_build_first(s, nonce, err))
		goto out;
	s->state = SCRAM_SRV_CONTINUE;
	ok = true;
out:
	free(buf);
	return ok;
}

/* server-first, owned by <s>. */
const char *
scram_server_first_msg(const struct scram_server *s)
{
	return s->server_first;
}

/* Split client-final: channel binding, nonce, proof; sets *<without_proof_len>. */
static bool
server_read_final(struct scram_server *s, char *buf, uint8_t proof[SCRAM_KEY_LEN],
		  size_t *without_proof_len, struct nk_error *err)
{
	char *p = buf, *cb, *nonce, *pr, attr;
	const char *want_cb = s->cbind_flag == 'y' ? "eSws" : "biws";	/* "y,," / "n,," */

	cb = read_attr(&p, 'c', err);
	if (!cb)
		return false;
	if (strcmp(cb, want_cb) != 0)
		return nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
		"unexpected SCRAM channel-binding attribute in client-final-message");
	nonce = read_attr(&p, 'r', err);
	if (!nonce)
		return false;
	do {	/* skip extensions up to the proof */
		*without_proof_len = (size_t)(p - buf) - 1;
		pr = read_any_attr(&p, &attr, err);
		if (!pr)
			return false;
	} while (attr != 'p');
	if (b64_decode(pr, strlen(pr), proof, SCRAM_KEY_LEN) != SCRAM_KEY_LEN)
		return malformed(err, "Malformed proof in client-final-message.");
	if (*p != '\0')
		return malformed(err, "Garbage found at the end of client-final-message.");
	if (strcmp(nonce, s->nonce) != 0) {
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION, "invalid SCRAM response");
		nk_error_detail(err, "Nonce does not match.");
		return false;
	}
	return true;
}

/* Verify <proof> over <auth_msg>; on success recover ClientKey into s->keys. */
static bool
server_verify_proof(struct scram_server *s, const char *auth_msg,
		    const uint8_t proof[SCRAM_KEY_LEN])
{
	uint8_t sig[SCRAM_KEY_LEN], ck[SCRAM_KEY_LEN], h[SCRAM_KEY_LEN];

	if (!hmac256(s->secret.stored_key, SCRAM_KEY_LEN, auth_msg, strlen(auth_msg), sig))
		return false;
	for (int i = 0; i < SCRAM_KEY_LEN; i++)
		ck[i] = proof[i] ^ sig[i];
	sha256(ck, SCRAM_KEY_LEN, h);
	if (CRYPTO_memcmp(h, s->secret.stored_key, SCRAM_KEY_LEN) != 0)
		return false;
	memcpy(s->keys.client_key, ck, SCRAM_KEY_LEN);
	memcpy(s->keys.server_key, s->secret.server_key, SCRAM_KEY_LEN);
	s->keys.valid = true;
	OPENSSL_cleanse(ck, sizeof(ck));
	return true;
}

/* server-final: "v=" base64(HMAC(ServerKey, AuthMessage)). */
static bool
server_build_final(struct scram_server *s, const char *auth_msg)
{
	uint8_t sig[SCRAM_KEY_LEN];
	char b64[b64_enc_len(SCRAM_KEY_LEN) + 1];

	if (!hmac256(s->secret.server_key, SCRAM_KEY_LEN, auth_msg, strlen(auth_msg), sig))
		return false;
	b64_encode(sig, SCRAM_KEY_LEN, b64);
	s->server_final = str_printf("v=%s", b64);
	return s->server_final != NULL;
}

/* Parse client-final, check nonce and proof, build server-final, keep the keys. */
bool
scram_server_client_final(struct scram_server *s, const uint8_t *msg, size_t len,
			  struct nk_error *err)
{
	uint8_t proof[SCRAM_KEY_LEN];
	size_t wp_len = 0;
	char *buf, *auth_msg = NULL;
	bool ok = false, verified;

	NK_ASSERT(s->state == SCRAM_SRV_CONTINUE);
	s->state = SCRAM_SRV_FAILED;
	buf = msg_copy(msg, len, err);
	if (!buf)
		return false;
	if (!server_read_final(s, buf, proof, &wp_len, err))
		goto out;
	auth_msg = str_printf("%s,%s,%.*s", s->client_first_bare, s->server_first, (int)wp_len,
			      (const char *)msg);
	if (!auth_msg) {
		nk_error_oom(err);
		goto out;
	}
	/* verify even a mock exchange, so that its failure takes as long as a real one */
	verified = server_verify_proof(s, auth_msg, proof);
	if (s->mock || !verified || !server_build_final(s, auth_msg)) {
		OPENSSL_cleanse(&s->keys, sizeof(s->keys));
		auth_error_password_failed(err, s->user);
		goto out;
	}
	s->state = SCRAM_SRV_DONE;
	ok = true;
out:
	free(auth_msg);
	free(buf);
	return ok;
}

/* server-final, owned by <s>. */
const char *
scram_server_final_msg(const struct scram_server *s)
{
	return s->server_final;
}

/* Free the exchange and wipe key material. */
void
scram_server_cleanup(struct scram_server *s)
{
	free(s->client_first_bare);
	free(s->server_first);
	free(s->nonce);
	free(s->server_final);
	OPENSSL_cleanse(s, sizeof(*s));
}

/* ---- client ---- */

/* Common part of both client inits: nonce and client-first. */
static bool
client_start(struct scram_client *c, const char *user, const char *test_nonce)
{
	c->state = SCRAM_CLI_INIT;
	if (test_nonce)
		snprintf(c->client_nonce, sizeof(c->client_nonce), "%s", test_nonce);
	else if (!make_nonce(c->client_nonce))
		return false;
	/* user names with ',' or '=' would need escaping; Postgres ignores the name anyway */
	if (strpbrk(user, ",="))
		user = "";
	c->client_first = str_printf("n,,n=%s,r=%s", user, c->client_nonce);
	if (!c->client_first)
		return false;
	c->state = SCRAM_CLI_FIRST_SENT;
	return true;
}

/* Client exchange from a password (SASLprep'd here). */
bool
scram_client_init_password(struct scram_client *c, const char *password, const char *user,
			   const char *test_nonce)
{
	memset(c, 0, sizeof(*c));
	c->password = scram_prepare_password(password);
	return c->password && client_start(c, user, test_nonce);
}

/* Client exchange from recovered keys (pass-through); false without valid keys. */
bool
scram_client_init_keys(struct scram_client *c, const struct scram_keys *keys, const char *user,
		       const char *test_nonce)
{
	memset(c, 0, sizeof(*c));
	if (!keys->valid)
		return false;
	c->keys = *keys;
	return client_start(c, user, test_nonce);
}

/* client-first, owned by <c>. */
const char *
scram_client_first_msg(const struct scram_client *c)
{
	return c->client_first;
}

/* Parse server-first into nonce, salt and iterations (in place). */
static bool
client_read_server_first(struct scram_client *c, char *buf, char **nonce, uint8_t *salt,
			 size_t *salt_len, int *iter, struct nk_error *err)
{
	char *p = buf, *s, *i, *end;
	ssize_t n;
	long it;

	*nonce = read_attr(&p, 'r', err);
	if (!*nonce)
		return false;
	if (strncmp(*nonce, c->client_nonce, strlen(c->client_nonce)) != 0 ||
	    strlen(*nonce) == strlen(c->client_nonce))
		return malformed(err, "invalid SCRAM response (nonce mismatch)");
	s = read_attr(&p, 's', err);
	if (!s)
		return false;
	n = b64_decode(s, strlen(s), salt, SCRAM_MAX_SALT_LEN);
	if (n <= 0)
		return malformed(err, "malformed SCRAM message (invalid salt)");
	*salt_len = (size_t)n;
	i = read_attr(&p, 'i', err);
	if (!i)
		return false;
	it = strtol(i, &end, 10);
	if (end == i || *end != '\0' || it <= 0 || it > INT32_MAX)
		return malformed(err, "malformed SCRAM message (invalid iteration count)");
	*iter = (int)it;
	return true;
}

/* ClientKey and ServerKey for this exchange (from the password or the keys). */
static bool
client_keys(struct scram_client *c, const uint8_t *salt, size_t salt_len, int iter,
	    uint8_t ck[SCRAM_KEY_LEN])
{
	uint8_t salted[SCRAM_KEY_LEN], stored[SCRAM_KEY_LEN];
	bool ok;

	if (!c->password) {
		memcpy(ck, c->keys.client_key, SCRAM_KEY_LEN);
		memcpy(c->server_key, c->keys.server_key, SCRAM_KEY_LEN);
		return true;
	}
	ok = salted_password(c->password, salt, salt_len, iter, salted) &&
	     keys_from_salted(salted, ck, stored, c->server_key);
	OPENSSL_cleanse(salted, sizeof(salted));
	return ok;
}

/* client-final: "c=biws,r=<nonce>,p=" base64(ClientKey XOR HMAC(StoredKey, AuthMessage)). */
static bool
client_build_final(struct scram_client *c, const char *nonce, const uint8_t ck[SCRAM_KEY_LEN])
{
	uint8_t stored[SCRAM_KEY_LEN], sig[SCRAM_KEY_LEN], proof[SCRAM_KEY_LEN];
	char b64[b64_enc_len(SCRAM_KEY_LEN) + 1], *without;

	without = str_printf("c=biws,r=%s", nonce);
	if (!without)
		return false;
	c->auth_message = str_printf("%s,%s,%s", c->client_first + 3, c->server_first_copy,
				     without);
	sha256(ck, SCRAM_KEY_LEN, stored);
	if (!c->auth_message ||
	    !hmac256(stored, SCRAM_KEY_LEN, c->auth_message, strlen(c->auth_message), sig)) {
		free(without);
		return false;
	}
	for (int i = 0; i < SCRAM_KEY_LEN; i++)
		proof[i] = ck[i] ^ sig[i];
	b64_encode(proof, SCRAM_KEY_LEN, b64);
	c->client_final = str_printf("%s,p=%s", without, b64);
	free(without);
	return c->client_final != NULL;
}

/* Check server-first's nonce, derive the proof, build client-final. */
bool
scram_client_server_first(struct scram_client *c, const uint8_t *msg, size_t len,
			  struct nk_error *err)
{
	uint8_t salt[SCRAM_MAX_SALT_LEN], ck[SCRAM_KEY_LEN];
	size_t salt_len = 0;
	char *buf, *nonce;
	int iter = 0;
	bool ok = false;

	NK_ASSERT(c->state == SCRAM_CLI_FIRST_SENT);
	c->state = SCRAM_CLI_FAILED;
	buf = msg_copy(msg, len, err);
	c->server_first_copy = msg_copy(msg, len, err);
	if (!buf || !c->server_first_copy)
		goto out;
	if (!client_read_server_first(c, buf, &nonce, salt, &salt_len, &iter, err))
		goto out;
	if (!client_keys(c, salt, salt_len, iter, ck) || !client_build_final(c, nonce, ck)) {
		nk_error_set(err, ERRCODE_INTERNAL_ERROR, "could not compute SCRAM client proof");
		goto out;
	}
	c->state = SCRAM_CLI_FINAL_SENT;
	ok = true;
out:
	OPENSSL_cleanse(ck, sizeof(ck));
	free(buf);
	return ok;
}

/* client-final, owned by <c>. */
const char *
scram_client_final_msg(const struct scram_client *c)
{
	return c->client_final;
}

/* Verify the server signature in server-final (or its "e=" error). */
bool
scram_client_server_final(struct scram_client *c, const uint8_t *msg, size_t len,
			  struct nk_error *err)
{
	uint8_t want[SCRAM_KEY_LEN], got[SCRAM_KEY_LEN];
	char *buf, *p, *v;
	bool ok = false;

	NK_ASSERT(c->state == SCRAM_CLI_FINAL_SENT);
	c->state = SCRAM_CLI_FAILED;
	buf = msg_copy(msg, len, err);
	if (!buf)
		return false;
	p = buf;
	if (*p == 'e') {
		nk_error_set(err, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION,
			     "SCRAM authentication rejected by server: %s", p);
		goto out;
	}
	v = read_attr(&p, 'v', err);
	if (!v)
		goto out;
	if (b64_decode(v, strlen(v), got, SCRAM_KEY_LEN) != SCRAM_KEY_LEN ||
	    !hmac256(c->server_key, SCRAM_KEY_LEN, c->auth_message, strlen(c->auth_message),
		     want) ||
	    CRYPTO_memcmp(want, got, SCRAM_KEY_LEN) != 0) {
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			     "invalid server signature in SCRAM server-final-message");
		goto out;
	}
	c->state = SCRAM_CLI_DONE;
	ok = true;
out:
	free(buf);
	return ok;
}

/* Free the exchange and wipe the password and keys. */
void
scram_client_cleanup(struct scram_client *c)
{
	if (c->password) {
		OPENSSL_cleanse(c->password, strlen(c->password));
		free(c->password);
	}
	free(c->client_first);
	free(c->client_final);
	free(c->auth_message);
	free(c->server_first_copy);
	OPENSSL_cleanse(c, sizeof(*c));
}
