/*
 * neki/auth.h - password secrets, md5 auth, the auth_file and the hba file.
 *
 * - Secrets: plain text, "md5<hex>" or "SCRAM-SHA-256$..." (auth_secret_kind()).
 * - md5 (src/proto/md5.c): server-side verification and client-side response,
 *   from a plain or an md5 secret.
 * - auth_file (src/proto/auth_file.c): pgbouncer's userlist.txt.
 * - hba (src/proto/hba.c): pg_hba.conf syntax, pgbouncer's subset, and a matcher.
 * - the client-visible authentication errors, worded as Postgres words them.
 * SCRAM lives in neki/scram.h. Pure: no sockets; the *_load() functions read a file.
 */
#ifndef NEKI_AUTH_H
#define NEKI_AUTH_H

#include "neki/base.h"

#include "neki/error.h"

/* Length of "md5" + 32 hex digits. */
#define AUTH_MD5_LEN 35
/* Longest user name / secret accepted from the auth_file (pgbouncer's limits). */
#define AUTH_MAX_USERNAME 128
#define AUTH_MAX_PASSWORD 2048

enum auth_secret_kind {
	AUTH_SECRET_PLAIN = 0,
	AUTH_SECRET_MD5 = 1,
	AUTH_SECRET_SCRAM = 2,	/* a well-formed "SCRAM-SHA-256$..." secret */
};

/* Classify a stored secret (a malformed SCRAM-looking string is plain, as in Postgres). */
enum auth_secret_kind auth_secret_kind(const char *secret);
/* Constant-time string equality (for comparing secrets and responses). */
bool auth_secure_streq(const char *a, const char *b);

/* hex(md5(<data>)) into <out> (32 digits + NUL). */
void auth_md5_hex(const void *data, size_t len, char out[33]);
/* The md5 secret of <user>/<password>: "md5" + hex(md5(password || user)). */
void auth_md5_secret(const char *user, const char *password, char out[AUTH_MD5_LEN + 1]);
/*
 * The PasswordMessage answering an md5 challenge with <salt>, from a plain or md5
 * <secret>. False when <secret> is a SCRAM verifier (cannot answer md5).
 */
NK_MUSTCHECK bool auth_md5_response(const char *secret, const char *user, const uint8_t salt[4],
				    char out[AUTH_MD5_LEN + 1]);
/* Server side: does the client's <response> match the stored <secret> (NULL: no)? */
bool auth_md5_verify(const char *secret, const char *user, const uint8_t salt[4],
		     const char *response);
/*
 * Server side, cleartext auth: does <password> match the stored <secret> (plain,
 * md5 or SCRAM; NULL: no)? Lives in scram.c because SCRAM verification needs PBKDF2.
 */
bool auth_plain_verify(const char *secret, const char *user, const char *password);

/* Errors a client sees (Postgres' wording, FATAL severity). Each returns false. */
bool auth_error_password_failed(struct nk_error *err, const char *user);	/* 28P01 */
/* pgbouncer's "\"trust\" authentication failed" (08P01) for a user trust cannot vouch for */
bool auth_error_trust_failed(struct nk_error *err);
/* 28000: "pg_hba.conf rejects connection ..." (<explicit_rule>) or "no pg_hba.conf entry ..." */
bool auth_error_hba_reject(struct nk_error *err, const char *host, const char *user,
			   const char *db, bool is_tls, bool explicit_rule);

/* ---- auth_file (userlist.txt) ---- */

struct auth_file_entry {
	char *user;		/* owned */
	char *secret;		/* owned */
};

struct auth_file {
	struct auth_file_entry *entries;	/* owned, sorted by user */
	size_t n;
	int broken_line;	/* 0, or the line where parsing stopped ("broken auth file") */
};

/*
 * Parse userlist.txt text: lines of `"user" "secret"` (a doubled quote inside a
 * field is one quote, the rest of the line is ignored), blank lines and `;`
 * comments. Like pgbouncer, a malformed line stops parsing: the entries before it
 * are kept and broken_line says where. NULL only on allocation failure.
 * A user listed twice keeps its last secret.
 */
struct auth_file *auth_file_parse(const char *text, size_t len);
/* Read and parse <path>; NULL with <err> set when it cannot be read. */
struct auth_file *auth_file_load(const char *path, struct nk_error *err);
/* The secret of <user>, or NULL. */
const char *auth_file_find(const struct auth_file *af, const char *user);
void auth_file_free(struct auth_file *af);

/* ---- hba ---- */

enum hba_method {
	HBA_REJECT = 0,		/* an explicit "reject" rule matched */
	HBA_TRUST = 1,
	HBA_PLAIN = 2,		/* "password" / "plain" */
	HBA_MD5 = 3,
	HBA_SCRAM = 4,		/* "scram-sha-256" */
	HBA_CERT = 5,
	HBA_PEER = 6,
	HBA_NO_MATCH = 7,	/* no rule matched: reject ("no pg_hba.conf entry ...") */
};

struct hba;	/* opaque: the parsed rules */

/* The connection being matched. */
struct hba_conn {
	const char *db;		/* database name from the startup packet */
	const char *user;
	bool is_unix;		/* came over a Unix socket ("local" rules) */
	bool is_tls;
	bool physical_replication; /* replication=true: only "replication" db entries match */
	int family;		/* AF_INET / AF_INET6 when !is_unix */
	uint8_t addr[16];	/* network byte order; 4 bytes used for AF_INET */
};

/* Called for each ignored line of an hba file, with a reason. */
typedef void (*hba_warn_fn)(void *arg, int line, const char *reason);

/*
 * Parse hba text. <dir> is where `@file` names are looked up (NULL: cwd).
 * Lines that cannot be parsed are skipped (reported through <warn> if given), as
 * pgbouncer does. NULL only on allocation failure.
 */
struct hba *hba_parse(const char *text, const char *dir, hba_warn_fn warn, void *warn_arg);
/* Read and parse <path>; NULL with <err> set when it cannot be read. */
struct hba *hba_load(const char *path, hba_warn_fn warn, void *warn_arg, struct nk_error *err);
void hba_free(struct hba *hba);
/* Number of rules kept. */
size_t hba_rule_count(const struct hba *hba);
/*
 * The method of the first rule matching <c>; HBA_NO_MATCH when none does. When
 * <map> is given it receives the rule's `map=` name (borrowed) or NULL.
 */
enum hba_method hba_match(const struct hba *hba, const struct hba_conn *c, const char **map);
/* "trust", "md5", ... */
const char *hba_method_str(enum hba_method m);

/* What the client login actually runs, once the method and the secret are known. */
enum auth_exchange {
	AUTH_X_NONE = 0,	/* trust / any: no password exchange */
	AUTH_X_CLEARTEXT = 1,	/* AuthenticationCleartextPassword, auth_plain_verify() */
	AUTH_X_MD5 = 2,		/* AuthenticationMD5Password, auth_md5_verify() */
	AUTH_X_SCRAM = 3,	/* AuthenticationSASL, struct scram_server */
	AUTH_X_CERT = 4,	/* TLS client certificate */
	AUTH_X_PEER = 5,	/* Unix socket peer credentials */
	AUTH_X_REJECT = 6,	/* refuse (reject rule or no hba match) */
};

/*
 * pgbouncer's choice of exchange for <method> (the hba method, or auth_type
 * mapped to one) and the user's stored <secret> (NULL for an unknown user, which
 * runs the same exchange and fails): md5 switches to SCRAM when the secret is a
 * SCRAM secret; scram-sha-256 stays SCRAM (an md5 secret then fails).
 */
enum auth_exchange auth_pick_exchange(enum hba_method method, const char *secret);

/* ---- ident map (auth_ident_file) ---- */

struct ident_map;	/* opaque: the parsed "map sysuser dbuser" lines */

/*
 * Parse ident map text: lines of `MAPNAME SYSTEM-USERNAME DATABASE-USERNAME`
 * (names may be double-quoted), `#` comments. As pgbouncer: no regular
 * expressions, no includes; lines of another shape are reported and skipped.
 * NULL only on allocation failure.
 */
struct ident_map *ident_map_parse(const char *text, hba_warn_fn warn, void *warn_arg);
/* Read and parse <path>; NULL with <err> set when it cannot be read. */
struct ident_map *ident_map_load(const char *path, hba_warn_fn warn, void *warn_arg,
				 struct nk_error *err);
void ident_map_free(struct ident_map *m);
/* May <sysuser> (certificate CN or peer user) log in as <dbuser> under <map>? */
bool ident_map_allows(const struct ident_map *m, const char *map, const char *sysuser,
		      const char *dbuser);

#endif /* NEKI_AUTH_H */
