/*
 * neki/scram.h - SCRAM-SHA-256 (RFC 5802 / RFC 7677) as Postgres speaks it.
 *
 * - Secrets: "SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>" (base64
 *   fields), parsed, built from a password, formatted.
 * - Server side (a client logs into neki): parse client-first (gs2 'n' and 'y'
 *   accepted; 'p' refused since neki never offers SCRAM-SHA-256-PLUS), answer
 *   server-first, verify client-final's proof against a stored SCRAM secret or a
 *   plain password, answer server-final, and recover the ClientKey so that the
 *   pool can log into Postgres with it (pgbouncer's SCRAM pass-through).
 * - Client side (neki logs into Postgres): from a plain password, or from
 *   recovered keys (ClientKey + ServerKey).
 * - SASLprep (src/proto/saslprep.c) applied to passwords as Postgres does.
 * All OpenSSL use of the project's auth code is confined to scram.c; the
 * structs below hold no OpenSSL types. Messages are plain C strings.
 */
#ifndef NEKI_SCRAM_H
#define NEKI_SCRAM_H

#include "neki/base.h"

#include "neki/error.h"

#define SCRAM_MECHANISM "SCRAM-SHA-256"
#define SCRAM_KEY_LEN 32		/* SHA-256 output */
#define SCRAM_DEFAULT_ITERATIONS 4096	/* Postgres' scram_iterations default */
#define SCRAM_DEFAULT_SALT_LEN 16	/* Postgres' SCRAM_DEFAULT_SALT_LEN */
#define SCRAM_MAX_SALT_LEN 128
#define SCRAM_RAW_NONCE_LEN 18		/* Postgres' SCRAM_RAW_NONCE_LEN */
#define SCRAM_SECRET_MAX 256		/* room for a formatted secret */

struct scram_secret {
	int iterations;
	uint8_t salt[SCRAM_MAX_SALT_LEN];
	size_t salt_len;
	uint8_t stored_key[SCRAM_KEY_LEN];
	uint8_t server_key[SCRAM_KEY_LEN];
};

/* Keys recovered from a client's successful SCRAM login (kept by the pool). */
struct scram_keys {
	bool valid;
	uint8_t client_key[SCRAM_KEY_LEN];
	uint8_t server_key[SCRAM_KEY_LEN];
};

/* Parse a stored secret; false when <text> is not a valid SCRAM-SHA-256 secret. */
NK_MUSTCHECK bool scram_secret_parse(const char *text, struct scram_secret *out);
/* Derive the secret of <password> (SASLprep applied) with <salt> and <iterations>. */
NK_MUSTCHECK bool scram_secret_from_password(const char *password, const uint8_t *salt,
					     size_t salt_len, int iterations,
					     struct scram_secret *out);
/* Format <s> into <out> (SCRAM_SECRET_MAX bytes is always enough). */
NK_MUSTCHECK bool scram_secret_format(const struct scram_secret *s, char *out, size_t outlen);

enum scram_saslprep_result {
	SCRAM_SASLPREP_OK = 0,
	SCRAM_SASLPREP_OOM = 1,
	SCRAM_SASLPREP_INVALID_UTF8 = 2,
	SCRAM_SASLPREP_PROHIBITED = 3,
};
/*
 * RFC 4013 SASLprep of <in> into a malloc'd *<out> (OK only). Like Postgres,
 * callers use the raw password when the result is INVALID_UTF8 or PROHIBITED
 * (scram_prepare_password() does exactly that).
 */
enum scram_saslprep_result scram_saslprep(const char *in, char **out);
/* SASLprep'd copy of <password>, or a raw copy when SASLprep fails; NULL on OOM. */
char *scram_prepare_password(const char *password);

enum scram_server_state {
	SCRAM_SRV_INIT = 0,		/* waiting for client-first */
	SCRAM_SRV_CONTINUE = 1,		/* server-first sent, waiting for client-final */
	SCRAM_SRV_DONE = 2,		/* proof verified, server-final ready */
	SCRAM_SRV_FAILED = 3,
};

struct scram_server {
	enum scram_server_state state;
	char user[129];			/* for the error message */
	bool mock;			/* no usable secret: run the exchange, then fail */
	struct scram_secret secret;
	char cbind_flag;		/* 'n' or 'y' */
	char *client_first_bare;	/* owned */
	char *server_first;		/* owned */
	char *nonce;			/* owned: client nonce + server nonce */
	char *server_final;		/* owned, once DONE */
	struct scram_keys keys;		/* recovered ClientKey + ServerKey, once DONE */
	const char *test_nonce;		/* borrowed; tests only: server nonce instead of random */
};

/*
 * Start an exchange for <user> whose stored secret is <stored> (plain password or
 * SCRAM secret; NULL, "" or an md5 secret runs a mock exchange that always fails, so
 * unknown users cannot be told apart). <iterations> (the scram_iterations setting) is
 * the iteration count of the secret derived from a plain password and of a mock's.
 * Then hand it the client-first message. On success scram_server_first_msg() is the
 * AuthenticationSASLContinue payload.
 */
void scram_server_init(struct scram_server *s, const char *user, const char *stored,
		       int iterations);
/*
 * Mock exchanges use salt = HMAC(process key, user name), constant per user like a
 * real secret's. Call this in the master before forking so that every worker
 * shares the key (otherwise each process creates its own on first use).
 */
void scram_mock_key_init(void);
NK_MUSTCHECK bool scram_server_client_first(struct scram_server *s, const uint8_t *msg,
					    size_t len, struct nk_error *err);
const char *scram_server_first_msg(const struct scram_server *s);
/*
 * Verify client-final. False with 08P01 on a malformed message, 28P01 "password
 * authentication failed for user ..." on a wrong proof. On success
 * scram_server_final_msg() is the AuthenticationSASLFinal payload and s->keys holds
 * the recovered keys.
 */
NK_MUSTCHECK bool scram_server_client_final(struct scram_server *s, const uint8_t *msg,
					    size_t len, struct nk_error *err);
const char *scram_server_final_msg(const struct scram_server *s);
void scram_server_cleanup(struct scram_server *s);

enum scram_client_state {
	SCRAM_CLI_INIT = 0,
	SCRAM_CLI_FIRST_SENT = 1,
	SCRAM_CLI_FINAL_SENT = 2,
	SCRAM_CLI_DONE = 3,		/* server signature verified */
	SCRAM_CLI_FAILED = 4,
};

struct scram_client {
	enum scram_client_state state;
	char *password;			/* owned, SASLprep'd; NULL when using keys */
	struct scram_keys keys;		/* pass-through keys when password == NULL */
	char *client_first;		/* owned: gs2 header + bare */
	char *client_final;		/* owned */
	char client_nonce[32];		/* base64 of SCRAM_RAW_NONCE_LEN random bytes */
	char *server_first_copy;	/* owned: server-first as received */
	char *auth_message;		/* owned */
	uint8_t server_key[SCRAM_KEY_LEN]; /* to check the server's signature */
};

/*
 * Start a client exchange with a plain <password>, or with recovered <keys>.
 * <user> goes into the client-first message (libpq sends "", Postgres ignores it).
 * <test_nonce>: NULL normally; tests pass a fixed client nonce.
 */
NK_MUSTCHECK bool scram_client_init_password(struct scram_client *c, const char *password,
					     const char *user, const char *test_nonce);
NK_MUSTCHECK bool scram_client_init_keys(struct scram_client *c, const struct scram_keys *keys,
					 const char *user, const char *test_nonce);
/* The SASLInitialResponse payload ("n,,n=<user>,r=<nonce>"). */
const char *scram_client_first_msg(const struct scram_client *c);
/* Consume server-first (AuthenticationSASLContinue payload); builds client-final. */
NK_MUSTCHECK bool scram_client_server_first(struct scram_client *c, const uint8_t *msg,
					    size_t len, struct nk_error *err);
/* The SASLResponse payload. */
const char *scram_client_final_msg(const struct scram_client *c);
/* Check server-final (AuthenticationSASLFinal payload). */
NK_MUSTCHECK bool scram_client_server_final(struct scram_client *c, const uint8_t *msg,
					    size_t len, struct nk_error *err);
void scram_client_cleanup(struct scram_client *c);

/* Fill <buf> with <n> cryptographically random bytes (OpenSSL RAND_bytes). */
NK_MUSTCHECK bool scram_random_bytes(uint8_t *buf, size_t n);

#endif /* NEKI_SCRAM_H */
