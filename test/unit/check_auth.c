/*
 * check_auth.c - unit tests for src/proto's authentication: md5, SCRAM-SHA-256
 * (RFC 7677 vector, secrets produced by a real Postgres 15, pass-through keys,
 * malformed messages), SASLprep, userlist.txt parsing and hba matching.
 */
#include "neki/base.h"

#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "neki/auth.h"
#include "neki/login.h"
#include "neki/pktbuf.h"
#include "neki/proto.h"
#include "neki/scram.h"
#include "suites.h"

/* RFC 7677 section 3 example (user "user", password "pencil"). */
#define RFC_CLIENT_NONCE "rOprNGfwEbeRWgbNEkqO"
#define RFC_SERVER_NONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define RFC_SALT_B64 "W22ZaJ0SNY7soEsUEjb6gQ=="
#define RFC_CLIENT_FIRST "n,,n=user,r=" RFC_CLIENT_NONCE
#define RFC_SERVER_FIRST "r=" RFC_CLIENT_NONCE RFC_SERVER_NONCE ",s=" RFC_SALT_B64 ",i=4096"
#define RFC_CLIENT_FINAL "c=biws,r=" RFC_CLIENT_NONCE RFC_SERVER_NONCE \
	",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define RFC_SERVER_FINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

/* rolpassword values from a real Postgres 15 (password_encryption = scram-sha-256). */
#define PG_SECRET_PENCIL "SCRAM-SHA-256$4096:EVhpTuqMAAGTpc2in3nGdA==$dapKM5+kdj1/jQo3q4SKmADlPnogh4noycyPoNp9hyA=:o8x3T7DFWxdm7U5xErCoj1dWv+NyZiru6+coRJkbFxQ="
/* password U+FF50 U+00E4 U+00DF U+00A0 "w" U+00F6 "rd" U+00AD */
#define PG_SECRET_NONASCII "SCRAM-SHA-256$4096:lN99UFH8ZjH7UZlWmprEDg==$3FtULKyqO2FuO0kU07jdtHDbQS4vGAPVx1C8JI+0spU=:FBUt+G/OohRz8T69yo5AqTvVYxGCcMal1s6cPKP++m8="
/* password U+00C4 */
#define PG_SECRET_AUML "SCRAM-SHA-256$4096:Dx0mEO0+b6G75bv4+0EBhg==$3SSRGkxtzE50WDHLKIWGYx3ogCogLhhrA17N6Gcyjxs=:VybHqC7Zz9O0qMcVh9/TY3yhSNRO/D4RIGxLJeAjzCw="
/* password U+0627 "1" (bidi rule fails: SASLprep refuses, the raw password is used) */
#define PG_SECRET_BIDI "SCRAM-SHA-256$4096:2Z7JQ2IH1uWuqsMNQcmysA==$fNx10spxy4w8I8eLM6BVi8AU8HRKU2Ht+oGG7O2qeio=:aIsc8zXFa6TV4sk/8iZeUc8OeSGbNCOdUsWNqL3IaBc="
/* md5 rolpassword of user "e", password "pencil" (Postgres 15) */
#define PG_MD5_E "md516ead560cce489da9f2fd00912e06712"

static const uint8_t *
u8(const char *s)
{
	return (const uint8_t *)s;
}

/* ---- md5 ---- */

START_TEST(test_md5_vectors)
{
	char hex[33], sec[AUTH_MD5_LEN + 1], resp[AUTH_MD5_LEN + 1], want[AUTH_MD5_LEN + 1];
	const uint8_t salt[4] = { 0x01, 0x02, 0x03, 0x04 };
	char big[1000];

	/* RFC 1321 test suite */
	auth_md5_hex("", 0, hex);
	ck_assert_str_eq(hex, "d41d8cd98f00b204e9800998ecf8427e");
	auth_md5_hex("abc", 3, hex);
	ck_assert_str_eq(hex, "900150983cd24fb0d6963f7d28e17f72");
	auth_md5_hex("message digest", 14, hex);
	ck_assert_str_eq(hex, "f96b697d7cb7938d525a2f31aaf161d0");
	auth_md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890",
		     80, hex);
	ck_assert_str_eq(hex, "57edf4a22be3c955ac49da2e2107b67a");
	memset(big, 'a', sizeof(big));
	auth_md5_hex(big, sizeof(big), hex);
	ck_assert_str_eq(hex, "cabe45dcc9ae5b66ba86600cca6b8ba8");

	auth_md5_secret("e", "pencil", sec);
	ck_assert_str_eq(sec, PG_MD5_E);
	ck_assert_int_eq(auth_secret_kind(sec), AUTH_SECRET_MD5);
	ck_assert_int_eq(auth_secret_kind("md5nothex"), AUTH_SECRET_PLAIN);
	ck_assert_int_eq(auth_secret_kind(PG_SECRET_PENCIL), AUTH_SECRET_SCRAM);
	ck_assert_int_eq(auth_secret_kind("SCRAM-SHA-256$not-a-secret"), AUTH_SECRET_PLAIN);
	ck_assert_int_eq(auth_secret_kind("MD516ead560cce489da9f2fd00912e06712"), AUTH_SECRET_PLAIN);

	/* response = "md5" + md5(hex(secret) + salt), from plain or md5 secret alike */
	ck_assert(auth_md5_response("pencil", "e", salt, resp));
	ck_assert(auth_md5_response(PG_MD5_E, "e", salt, want));
	ck_assert_str_eq(resp, want);
	{
		char buf[36];

		memcpy(buf, PG_MD5_E + 3, 32);
		memcpy(buf + 32, salt, 4);
		auth_md5_hex(buf, 36, hex);
		ck_assert_str_eq(resp + 3, hex);
	}
	ck_assert(!auth_md5_response(PG_SECRET_PENCIL, "e", salt, resp));
	ck_assert(auth_md5_verify(PG_MD5_E, "e", salt, want));
	ck_assert(auth_md5_verify("pencil", "e", salt, want));
	ck_assert(!auth_md5_verify("pencil2", "e", salt, want));
	ck_assert(!auth_md5_verify("pencil", "f", salt, want));	/* plain: the user is salt too */
	{
		const uint8_t salt2[4] = { 0x01, 0x02, 0x03, 0x05 };

		ck_assert(!auth_md5_verify(PG_MD5_E, "e", salt2, want));
	}
	ck_assert(!auth_md5_verify(PG_SECRET_PENCIL, "e", salt, want));
	ck_assert(!auth_md5_verify(NULL, "e", salt, want));
}
END_TEST

START_TEST(test_plain_verify)
{
	ck_assert(auth_plain_verify("pencil", "a", "pencil"));
	ck_assert(!auth_plain_verify("pencil", "a", "pencil "));
	ck_assert(auth_plain_verify(PG_MD5_E, "e", "pencil"));
	ck_assert(!auth_plain_verify(PG_MD5_E, "a", "pencil"));
	ck_assert(auth_plain_verify(PG_SECRET_PENCIL, "a", "pencil"));
	ck_assert(!auth_plain_verify(PG_SECRET_PENCIL, "a", "pencilx"));
	ck_assert(!auth_plain_verify(NULL, "a", "pencil"));
}
END_TEST

START_TEST(test_auth_errors)
{
	struct nk_error err;

	ck_assert(!auth_error_password_failed(&err, "x"));
	ck_assert_str_eq(err.sqlstate, "28P01");
	ck_assert_str_eq(err.message, "password authentication failed for user \"x\"");
	ck_assert_int_eq(err.severity, NK_SEV_FATAL);
	ck_assert(!auth_error_trust_failed(&err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert_str_eq(err.message, "\"trust\" authentication failed");
	ck_assert(!auth_error_hba_reject(&err, "10.0.0.1", "u", "d", false, false));
	ck_assert_str_eq(err.sqlstate, "28000");
	ck_assert_str_eq(err.message,
			 "no pg_hba.conf entry for host \"10.0.0.1\", user \"u\", database \"d\", no encryption");
	ck_assert(!auth_error_hba_reject(&err, "[local]", "u", "d", true, true));
	ck_assert_str_eq(err.message,
			 "pg_hba.conf rejects connection for host \"[local]\", user \"u\", database \"d\", SSL encryption");
}
END_TEST

/* ---- SCRAM secrets ---- */

START_TEST(test_scram_secret_roundtrip)
{
	struct scram_secret s, d;
	char out[SCRAM_SECRET_MAX];

	ck_assert(scram_secret_parse(PG_SECRET_PENCIL, &s));
	ck_assert_int_eq(s.iterations, 4096);
	ck_assert_uint_eq(s.salt_len, 16);
	ck_assert(scram_secret_format(&s, out, sizeof(out)));
	ck_assert_str_eq(out, PG_SECRET_PENCIL);
	/* deriving from the password with Postgres' salt gives Postgres' secret */
	ck_assert(scram_secret_from_password("pencil", s.salt, s.salt_len, 4096, &d));
	ck_assert(scram_secret_format(&d, out, sizeof(out)));
	ck_assert_str_eq(out, PG_SECRET_PENCIL);

	ck_assert(!scram_secret_parse("SCRAM-SHA-256$x:AAAA$AAAA:AAAA", &s));
	ck_assert(!scram_secret_parse("SCRAM-SHA-256$4096:EVhpTuqMAAGTpc2in3nGdA==$abc:def", &s));
	ck_assert(!scram_secret_parse("SCRAM-SHA-256$4096:EVhpTuqMAAGTpc2in3nGdA==", &s));
	ck_assert(!scram_secret_parse("md5abc", &s));
	ck_assert(!scram_secret_parse("SCRAM-SHA-256$0:EVhpTuqMAAGTpc2in3nGdA==$dapKM5+kdj1/jQo3q4SKmADlPnogh4noycyPoNp9hyA=:o8x3T7DFWxdm7U5xErCoj1dWv+NyZiru6+coRJkbFxQ=", &s));
	ck_assert(!scram_secret_parse("SCRAM-SHA-256$4096:EVhp*uqMAAGTpc2in3nGdA==$dapKM5+kdj1/jQo3q4SKmADlPnogh4noycyPoNp9hyA=:o8x3T7DFWxdm7U5xErCoj1dWv+NyZiru6+coRJkbFxQ=", &s));
}
END_TEST

START_TEST(test_saslprep)
{
	char *out = NULL;

	ck_assert_int_eq(scram_saslprep("plain ascii\x01", &out), SCRAM_SASLPREP_OK);
	ck_assert_str_eq(out, "plain ascii\x01");	/* ASCII passes unchanged */
	free(out);
	/* RFC 4013 examples: soft hyphen dropped, ª -> a, Ⅸ -> IX */
	ck_assert_int_eq(scram_saslprep("I\xc2\xad" "X", &out), SCRAM_SASLPREP_OK);
	ck_assert_str_eq(out, "IX");
	free(out);
	ck_assert_int_eq(scram_saslprep("\xc2\xaa", &out), SCRAM_SASLPREP_OK);
	ck_assert_str_eq(out, "a");
	free(out);
	ck_assert_int_eq(scram_saslprep("\xe2\x85\xa8", &out), SCRAM_SASLPREP_OK);
	ck_assert_str_eq(out, "IX");
	free(out);
	/* NBSP -> space, decomposed A + combining diaeresis -> U+00C4 */
	ck_assert_int_eq(scram_saslprep("a\xc2\xa0" "A\xcc\x88", &out), SCRAM_SASLPREP_OK);
	ck_assert_str_eq(out, "a \xc3\x84");
	free(out);
	ck_assert_int_eq(scram_saslprep("\xc3\x84\x07", &out), SCRAM_SASLPREP_PROHIBITED);
	ck_assert_int_eq(scram_saslprep("\xd8\xa7" "1", &out), SCRAM_SASLPREP_PROHIBITED);
	ck_assert_int_eq(scram_saslprep("\xd8\xa7" "1\xd8\xa7", &out), SCRAM_SASLPREP_OK);
	free(out);
	ck_assert_int_eq(scram_saslprep("\xc3\x28", &out), SCRAM_SASLPREP_INVALID_UTF8);
	ck_assert_int_eq(scram_saslprep("\xc0\xaf", &out), SCRAM_SASLPREP_INVALID_UTF8);
	ck_assert_int_eq(scram_saslprep("\xed\xa0\x80", &out), SCRAM_SASLPREP_INVALID_UTF8);
	/* invalid input falls back to the raw bytes */
	out = scram_prepare_password("\xc3\x28");
	ck_assert_str_eq(out, "\xc3\x28");
	free(out);
}
END_TEST

START_TEST(test_scram_postgres_nonascii)
{
	/* secrets computed by Postgres verify the SASLprep'd equivalents */
	ck_assert(auth_plain_verify(PG_SECRET_NONASCII, "b",
				    "\xef\xbd\x90\xc3\xa4\xc3\x9f\xc2\xa0w\xc3\xb6rd\xc2\xad"));
	ck_assert(auth_plain_verify(PG_SECRET_NONASCII, "b", "p\xc3\xa4\xc3\x9f w\xc3\xb6rd"));
	ck_assert(!auth_plain_verify(PG_SECRET_NONASCII, "b", "p\xc3\xa4\xc3\x9fw\xc3\xb6rd"));
	ck_assert(auth_plain_verify(PG_SECRET_AUML, "c", "\xc3\x84"));
	ck_assert(auth_plain_verify(PG_SECRET_AUML, "c", "A\xcc\x88"));
	ck_assert(auth_plain_verify(PG_SECRET_BIDI, "d", "\xd8\xa7" "1"));
}
END_TEST

/* ---- SCRAM exchanges ---- */

/* The RFC secret: "pencil" with the RFC's salt. */
static void
rfc_secret(char out[SCRAM_SECRET_MAX])
{
	struct scram_secret s;
	const uint8_t salt[] = { 0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e,
				 0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81 };

	ck_assert(scram_secret_from_password("pencil", salt, sizeof(salt), 4096, &s));
	ck_assert(scram_secret_format(&s, out, SCRAM_SECRET_MAX));
}

START_TEST(test_scram_server_rfc7677)
{
	struct scram_server s;
	struct nk_error err;
	char secret[SCRAM_SECRET_MAX];

	rfc_secret(secret);
	ck_assert(strstr(secret, "$4096:" RFC_SALT_B64 "$") != NULL);
	for (int stored_plain = 0; stored_plain < 2; stored_plain++) {
		scram_server_init(&s, "user", secret, SCRAM_DEFAULT_ITERATIONS);
		s.test_nonce = RFC_SERVER_NONCE;
		ck_assert(scram_server_client_first(&s, u8(RFC_CLIENT_FIRST), strlen(RFC_CLIENT_FIRST),
						    &err));
		ck_assert_str_eq(scram_server_first_msg(&s), RFC_SERVER_FIRST);
		ck_assert_msg(scram_server_client_final(&s, u8(RFC_CLIENT_FINAL),
							strlen(RFC_CLIENT_FINAL), &err),
			      "%s", err.message);
		ck_assert_str_eq(scram_server_final_msg(&s), RFC_SERVER_FINAL);
		ck_assert(s.keys.valid);
		scram_server_cleanup(&s);
	}
}
END_TEST

START_TEST(test_scram_client_rfc7677)
{
	struct scram_client c;
	struct nk_error err;

	ck_assert(scram_client_init_password(&c, "pencil", "user", RFC_CLIENT_NONCE));
	ck_assert_str_eq(scram_client_first_msg(&c), RFC_CLIENT_FIRST);
	ck_assert(scram_client_server_first(&c, u8(RFC_SERVER_FIRST), strlen(RFC_SERVER_FIRST),
					    &err));
	ck_assert_str_eq(scram_client_final_msg(&c), RFC_CLIENT_FINAL);
	ck_assert(scram_client_server_final(&c, u8(RFC_SERVER_FINAL), strlen(RFC_SERVER_FINAL),
					    &err));
	ck_assert_int_eq(c.state, SCRAM_CLI_DONE);
	scram_client_cleanup(&c);

	/* a wrong server signature is refused */
	ck_assert(scram_client_init_password(&c, "pencil", "user", RFC_CLIENT_NONCE));
	ck_assert(scram_client_server_first(&c, u8(RFC_SERVER_FIRST), strlen(RFC_SERVER_FIRST),
					    &err));
	ck_assert(!scram_client_server_final(&c, u8("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
					     46, &err));
	scram_client_cleanup(&c);

	/* a server nonce that does not extend ours is refused */
	ck_assert(scram_client_init_password(&c, "pencil", "user", RFC_CLIENT_NONCE));
	ck_assert(!scram_client_server_first(&c, u8("r=other,s=" RFC_SALT_B64 ",i=4096"), 28,
					     &err));
	scram_client_cleanup(&c);
}
END_TEST

/* Run a full exchange between our client <c> and our server <s>; true when both succeed. */
static bool
run_exchange(struct scram_client *c, struct scram_server *s, struct nk_error *err)
{
	const char *m;

	m = scram_client_first_msg(c);
	if (!scram_server_client_first(s, u8(m), strlen(m), err))
		return false;
	m = scram_server_first_msg(s);
	if (!scram_client_server_first(c, u8(m), strlen(m), err))
		return false;
	m = scram_client_final_msg(c);
	if (!scram_server_client_final(s, u8(m), strlen(m), err))
		return false;
	m = scram_server_final_msg(s);
	return scram_client_server_final(c, u8(m), strlen(m), err);
}

START_TEST(test_scram_roundtrip_and_passthrough)
{
	struct scram_client c;
	struct scram_server s, s2;
	struct nk_error err;
	struct scram_keys keys;

	/* client with the password against Postgres' real secret, random nonces */
	ck_assert(scram_client_init_password(&c, "pencil", "", NULL));
	scram_server_init(&s, "a", PG_SECRET_PENCIL, SCRAM_DEFAULT_ITERATIONS);
	ck_assert_msg(run_exchange(&c, &s, &err), "%s", err.message);
	ck_assert(s.keys.valid);
	keys = s.keys;
	scram_client_cleanup(&c);
	scram_server_cleanup(&s);

	/* pass-through: the recovered keys log in again without the password */
	ck_assert(scram_client_init_keys(&c, &keys, "", NULL));
	scram_server_init(&s2, "a", PG_SECRET_PENCIL, SCRAM_DEFAULT_ITERATIONS);
	ck_assert_msg(run_exchange(&c, &s2, &err), "%s", err.message);
	scram_client_cleanup(&c);
	scram_server_cleanup(&s2);

	/* stored plain password on the server side */
	ck_assert(scram_client_init_password(&c, "pencil", "", NULL));
	scram_server_init(&s, "a", "pencil", SCRAM_DEFAULT_ITERATIONS);
	ck_assert(run_exchange(&c, &s, &err));
	scram_client_cleanup(&c);
	scram_server_cleanup(&s);
}
END_TEST

START_TEST(test_scram_wrong_password_and_mock)
{
	static const char *const stored[] = { PG_SECRET_PENCIL, "pencil", PG_MD5_E, NULL };
	struct scram_client c;
	struct scram_server s;
	struct nk_error err;

	for (size_t i = 0; i < NK_ARRAY_LEN(stored); i++) {
		const char *pw = i < 2 ? "wrong" : "pencil";

		ck_assert(scram_client_init_password(&c, pw, "", NULL));
		scram_server_init(&s, "alice", stored[i], SCRAM_DEFAULT_ITERATIONS);
		ck_assert(!run_exchange(&c, &s, &err));
		ck_assert_str_eq(err.sqlstate, "28P01");
		ck_assert_str_eq(err.message, "password authentication failed for user \"alice\"");
		ck_assert(!s.keys.valid);
		scram_client_cleanup(&c);
		scram_server_cleanup(&s);
	}
}
END_TEST

/* An empty stored password is no password: the exchange with "" is a mock that fails. */
START_TEST(test_scram_empty_password_refused)
{
	struct scram_client c;
	struct scram_server s;
	struct nk_error err;

	ck_assert(scram_client_init_password(&c, "", "", NULL));
	scram_server_init(&s, "postgres", "", SCRAM_DEFAULT_ITERATIONS);
	ck_assert(s.mock);
	ck_assert(!run_exchange(&c, &s, &err));
	ck_assert_str_eq(err.sqlstate, "28P01");
	ck_assert(!s.keys.valid);
	scram_client_cleanup(&c);
	scram_server_cleanup(&s);
}
END_TEST

/* The i= of server-first for <stored> with <iterations>. */
static int
first_iterations(const char *stored, int iterations)
{
	struct scram_server s;
	struct nk_error err;
	const char *i;
	int n;

	scram_server_init(&s, "a", stored, iterations);
	ck_assert(scram_server_client_first(&s, u8("n,,n=,r=abc"), 11, &err));
	i = strstr(scram_server_first_msg(&s), ",i=");
	ck_assert_ptr_nonnull(i);
	n = atoi(i + 3);
	scram_server_cleanup(&s);
	return n;
}

/* scram_iterations: the secrets neki derives (plain password, mock); a stored secret's own. */
START_TEST(test_scram_iterations)
{
	ck_assert_int_eq(first_iterations("pencil", 1234), 1234);
	ck_assert_int_eq(first_iterations(NULL, 777), 777);
	ck_assert_int_eq(first_iterations("", 777), 777);
	ck_assert_int_eq(first_iterations(PG_SECRET_PENCIL, 1234), 4096);
}
END_TEST

/* Feed <first> (and, if it passes, <final>) to a server; return the error. */
static const char *
server_error(const char *first, const char *final, struct nk_error *err)
{
	static char detail[NK_ERR_DETAIL_MAX + NK_ERR_MSG_MAX + 16];
	struct scram_server s;
	bool ok;

	scram_server_init(&s, "user", PG_SECRET_PENCIL, SCRAM_DEFAULT_ITERATIONS);
	s.test_nonce = "SRV";
	ok = scram_server_client_first(&s, u8(first), strlen(first), err);
	if (ok && final)
		ok = scram_server_client_final(&s, u8(final), strlen(final), err);
	scram_server_cleanup(&s);
	if (ok)
		return "OK";
	snprintf(detail, sizeof(detail), "%s: %s | %s", err->sqlstate, err->message, err->detail);
	return detail;
}

/* The salt a server exchange for <user> with <stored> announces. */
static void
first_salt(const char *user, const char *stored, char out[64])
{
	struct scram_server s;
	struct nk_error err;
	const char *m, *salt;

	scram_server_init(&s, user, stored, SCRAM_DEFAULT_ITERATIONS);
	ck_assert(scram_server_client_first(&s, u8("n,,n=,r=abc"), 11, &err));
	m = scram_server_first_msg(&s);
	salt = strstr(m, ",s=");
	ck_assert_ptr_nonnull(salt);
	snprintf(out, 64, "%.*s", (int)(strchr(salt + 3, ',') - salt - 3), salt + 3);
	scram_server_cleanup(&s);
}

START_TEST(test_scram_mock_salt_stable)
{
	char a[64], b[64], c[64];

	/* an unknown user shows the same salt every time, like a real secret */
	first_salt("ghost", NULL, a);
	first_salt("ghost", NULL, b);
	first_salt("other", NULL, c);
	ck_assert_str_eq(a, b);
	ck_assert_str_ne(a, c);
	ck_assert_uint_eq(strlen(a), 24);	/* 16 bytes, like Postgres' default */
	first_salt("a", PG_SECRET_PENCIL, a);
	ck_assert_str_eq(a, "EVhpTuqMAAGTpc2in3nGdA==");
}
END_TEST

START_TEST(test_scram_server_malformed)
{
	struct nk_error err;

	ck_assert_str_eq(server_error("n,,n=,r=abc", NULL, &err), "OK");
	ck_assert_str_eq(server_error("n,,n=,r=", NULL, &err), "OK");	/* Postgres allows it */
	ck_assert_str_eq(server_error("n,,n=,r=abc,x=ext", NULL, &err), "OK");
	ck_assert_str_eq(server_error("n,,n=,r=abc,1=ext", NULL, &err),
			 "08P01: malformed SCRAM message | Attribute expected, but found invalid "
			 "character \"'1'\".");
	ck_assert_str_eq(server_error("n,,n=,r=a\x01", NULL, &err),
			 "08P01: non-printable characters in SCRAM nonce | ");
	ck_assert_str_eq(server_error("n,x", NULL, &err),
			 "08P01: malformed SCRAM message | Unexpected attribute \"'x'\" in "
			 "client-first-message.");
	ck_assert_str_eq(server_error("y,,n=,r=abc", NULL, &err), "OK");
	ck_assert_str_eq(server_error("p=tls-server-end-point,,n=,r=abc", NULL, &err),
			 "08P01: malformed SCRAM message | The client selected SCRAM-SHA-256 "
			 "without channel binding, but the SCRAM message includes channel "
			 "binding data.");
	ck_assert_str_eq(server_error("x,,n=,r=abc", NULL, &err),
			 "08P01: malformed SCRAM message | Unexpected channel-binding flag \"'x'\".");
	ck_assert_str_eq(server_error("n,a=bob,n=,r=abc", NULL, &err),
			 "0A000: client uses authorization identity, but it is not supported | ");
	ck_assert_str_eq(server_error("n,,m=ext,n=,r=abc", NULL, &err),
			 "0A000: client requires an unsupported SCRAM extension | ");
	ck_assert_str_eq(server_error("n,,n=,x=abc", NULL, &err),
			 "08P01: malformed SCRAM message | Expected attribute \"r\" but found \"'x'\".");
	ck_assert_str_eq(server_error("n", NULL, &err),
			 "08P01: malformed SCRAM message | Comma expected, but found character \"0x00\".");
	ck_assert_str_eq(server_error("", NULL, &err),
			 "08P01: malformed SCRAM message | Unexpected channel-binding flag \"0x00\".");
	ck_assert_str_eq(server_error("n,,n=,r=abc", "c=eSws,r=abcSRV,p=AAAA", &err),
			 "08P01: unexpected SCRAM channel-binding attribute in client-final-message | ");
	ck_assert_str_eq(server_error("n,,n=,r=abc", "c=biws,r=abcXXX,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", &err),
			 "08P01: invalid SCRAM response | Nonce does not match.");
	ck_assert_str_eq(server_error("n,,n=,r=abc", "c=biws,r=abcSRV,p=AAAA", &err),
			 "08P01: malformed SCRAM message | Malformed proof in client-final-message.");
	ck_assert_str_eq(server_error("n,,n=,r=abc", "c=biws,r=abcSRV", &err),
			 "08P01: malformed SCRAM message | Attribute expected, but found end of string.");
	ck_assert_str_eq(server_error("n,,n=,r=abc", "c=biws,r=abcSRV,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=,x", &err),
			 "08P01: malformed SCRAM message | Garbage found at the end of client-final-message.");
	ck_assert_str_eq(server_error("n,,n=,r=abc", "c=biws,r=abcSRV,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", &err),
			 "28P01: password authentication failed for user \"user\" | ");
	/* extensions before the proof are skipped */
	ck_assert_str_eq(server_error("n,,n=,r=abc", "c=biws,r=abcSRV,x=1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", &err),
			 "28P01: password authentication failed for user \"user\" | ");
}
END_TEST


/* ---- backend login ---- */

/* Feed the 'R' message in <req> to <l>; the reply (if any) lands in <out>. */
static bool
login_feed(struct login *l, struct pktbuf *req, struct pktbuf *out, struct nk_error *err)
{
	bool ok;

	ck_assert(!pktbuf_failed(req));
	ok = login_on_auth(l, req->buf + 5, req->len - 5, out, err);
	pktbuf_reset(req);
	return ok;
}

/* The string payload of the PasswordMessage in <out>. */
static const char *
reply_password(struct pktbuf *out)
{
	ck_assert_int_eq(out->buf[0], 'p');
	return (const char *)out->buf + 5;
}

START_TEST(test_login_password_methods)
{
	struct login l;
	struct pktbuf req, out;
	struct nk_error err;
	const uint8_t salt[4] = { 7, 7, 7, 7 };

	pktbuf_init(&req, 0);
	pktbuf_init(&out, 0);
	login_init(&l, "e", "pencil", NULL);
	pktbuf_write_auth_cleartext(&req);
	ck_assert(login_feed(&l, &req, &out, &err));
	ck_assert_str_eq(reply_password(&out), "pencil");
	pktbuf_reset(&out);
	pktbuf_write_auth_md5(&req, salt);
	ck_assert(login_feed(&l, &req, &out, &err));
	ck_assert(auth_md5_verify(PG_MD5_E, "e", salt, reply_password(&out)));
	pktbuf_reset(&out);
	pktbuf_write_auth_ok(&req);
	ck_assert(!login_is_done(&l));
	ck_assert(login_feed(&l, &req, &out, &err));
	ck_assert(login_is_done(&l));
	ck_assert_uint_eq(out.len, 0);
	login_cleanup(&l);

	/* md5 secret: md5 yes, cleartext and SCRAM no */
	login_init(&l, "e", PG_MD5_E, NULL);
	pktbuf_write_auth_md5(&req, salt);
	ck_assert(login_feed(&l, &req, &out, &err));
	ck_assert(auth_md5_verify("pencil", "e", salt, reply_password(&out)));
	pktbuf_reset(&out);
	pktbuf_write_auth_cleartext(&req);
	ck_assert(!login_feed(&l, &req, &out, &err));
	ck_assert_str_eq(err.message, "server login failed: wrong password type");
	ck_assert_str_eq(err.sqlstate, "08P01");
	{
		const char *mechs[] = { "SCRAM-SHA-256" };

		pktbuf_write_auth_sasl(&req, mechs, 1);
		ck_assert(!login_feed(&l, &req, &out, &err));
		ck_assert_str_eq(err.message, "server login failed: wrong password type");
	}
	login_cleanup(&l);

	/* no secret at all, and methods neki does not speak */
	login_init(&l, "e", NULL, NULL);
	pktbuf_write_auth_md5(&req, salt);
	ck_assert(!login_feed(&l, &req, &out, &err));
	pktbuf_begin(&req, 'R');
	pktbuf_put_int32(&req, PROTO_AUTH_GSS);
	pktbuf_end(&req);
	ck_assert(!login_feed(&l, &req, &out, &err));
	ck_assert_str_eq(err.message, "server login failed: unsupported authentication method 7");
	login_cleanup(&l);
	pktbuf_cleanup(&req);
	pktbuf_cleanup(&out);
}
END_TEST

/* Run <l> against our SCRAM server holding <stored>; true when both ends succeed. */
static bool
login_scram_against(struct login *l, const char *stored, struct nk_error *err)
{
	struct pktbuf req, out;
	struct scram_server s;
	struct proto_sasl_initial_msg im;
	const char *mechs[] = { "SCRAM-SHA-256-PLUS", "SCRAM-SHA-256" };
	bool ok = false;

	pktbuf_init(&req, 0);
	pktbuf_init(&out, 0);
	scram_server_init(&s, "a", stored, SCRAM_DEFAULT_ITERATIONS);
	pktbuf_write_auth_sasl(&req, mechs, 2);
	if (!login_feed(l, &req, &out, err))
		goto out;
	ck_assert(proto_parse_sasl_initial(out.buf + 5, out.len - 5, &im, err));
	ck_assert_str_eq(im.mechanism, "SCRAM-SHA-256");
	if (!scram_server_client_first(&s, im.data, im.len, err))
		goto out;
	pktbuf_reset(&out);
	pktbuf_write_auth_sasl_continue(&req, scram_server_first_msg(&s),
					strlen(scram_server_first_msg(&s)));
	if (!login_feed(l, &req, &out, err) ||
	    !scram_server_client_final(&s, out.buf + 5, out.len - 5, err))
		goto out;
	pktbuf_reset(&out);
	pktbuf_write_auth_sasl_final(&req, scram_server_final_msg(&s),
				     strlen(scram_server_final_msg(&s)));
	if (!login_feed(l, &req, &out, err))
		goto out;
	pktbuf_write_auth_ok(&req);
	ok = login_feed(l, &req, &out, err) && login_is_done(l);
out:
	scram_server_cleanup(&s);
	pktbuf_cleanup(&req);
	pktbuf_cleanup(&out);
	return ok;
}

START_TEST(test_login_scram)
{
	struct login l;
	struct nk_error err;
	struct scram_client c;
	struct scram_server s;
	struct pktbuf req, out;

	login_init(&l, "a", "pencil", NULL);
	ck_assert_msg(login_scram_against(&l, PG_SECRET_PENCIL, &err), "%s", err.message);
	login_cleanup(&l);

	login_init(&l, "a", "wrong", NULL);
	ck_assert(!login_scram_against(&l, PG_SECRET_PENCIL, &err));
	ck_assert_str_eq(err.sqlstate, "28P01");
	login_cleanup(&l);

	/* a SCRAM secret alone cannot log in ... */
	login_init(&l, "a", PG_SECRET_PENCIL, NULL);
	ck_assert(!login_scram_against(&l, PG_SECRET_PENCIL, &err));
	ck_assert_str_eq(err.message, "server login failed: wrong password type");
	login_cleanup(&l);

	/* ... but with the keys recovered from a client's login it can (pass-through) */
	ck_assert(scram_client_init_password(&c, "pencil", "", NULL));
	scram_server_init(&s, "a", PG_SECRET_PENCIL, SCRAM_DEFAULT_ITERATIONS);
	ck_assert(run_exchange(&c, &s, &err));
	login_init(&l, "a", PG_SECRET_PENCIL, &s.keys);
	scram_client_cleanup(&c);
	scram_server_cleanup(&s);
	ck_assert_msg(login_scram_against(&l, PG_SECRET_PENCIL, &err), "%s", err.message);
	login_cleanup(&l);

	/* AuthenticationOk in the middle of SCRAM is a protocol violation */
	pktbuf_init(&req, 0);
	pktbuf_init(&out, 0);
	login_init(&l, "a", "pencil", NULL);
	{
		const char *mechs[] = { "SCRAM-SHA-256" };

		pktbuf_write_auth_sasl(&req, mechs, 1);
		ck_assert(login_feed(&l, &req, &out, &err));
	}
	pktbuf_write_auth_ok(&req);
	ck_assert(!login_feed(&l, &req, &out, &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	login_cleanup(&l);
	/* a server offering only SCRAM-SHA-256-PLUS */
	login_init(&l, "a", "pencil", NULL);
	{
		const char *mechs[] = { "SCRAM-SHA-256-PLUS" };

		pktbuf_write_auth_sasl(&req, mechs, 1);
		ck_assert(!login_feed(&l, &req, &out, &err));
	}
	login_cleanup(&l);
	pktbuf_cleanup(&req);
	pktbuf_cleanup(&out);
}
END_TEST

/* ---- auth_file ---- */

START_TEST(test_auth_file_parse)
{
	const char text[] =
		"; comment line\n"
		"\"alice\" \"secret1\"\n"
		"  \"bob\"   \"md516ead560cce489da9f2fd00912e06712\" trailing stuff\n"
		"\n"
		"\"we\"\"ird\" \"pa\"\"ss\"\n"
		"\"scram\" \"" PG_SECRET_PENCIL "\"\n"
		"\"alice\" \"secret2\"\n";
	struct auth_file *af = auth_file_parse(text, sizeof(text) - 1);

	ck_assert_ptr_nonnull(af);
	ck_assert_int_eq(af->broken_line, 0);
	ck_assert_uint_eq(af->n, 4);
	ck_assert_str_eq(auth_file_find(af, "alice"), "secret2");	/* last one wins */
	ck_assert_str_eq(auth_file_find(af, "bob"), PG_MD5_E);
	ck_assert_str_eq(auth_file_find(af, "we\"ird"), "pa\"ss");
	ck_assert_str_eq(auth_file_find(af, "scram"), PG_SECRET_PENCIL);
	ck_assert_ptr_null(auth_file_find(af, "carol"));
	auth_file_free(af);
}
END_TEST

START_TEST(test_auth_file_broken)
{
	const char text[] = "\"a\" \"1\"\nb \"2\"\n\"c\" \"3\"\n";
	const char unterminated[] = "\"a\" \"1\n\"b\" \"2\"\n";
	struct auth_file *af = auth_file_parse(text, sizeof(text) - 1);
	struct nk_error err;
	char path[] = "/tmp/neki-userlist-XXXXXX";
	int fd;

	ck_assert_uint_eq(af->n, 1);	/* stops at the broken line, keeps what came before */
	ck_assert_int_eq(af->broken_line, 2);
	ck_assert_str_eq(auth_file_find(af, "a"), "1");
	auth_file_free(af);
	af = auth_file_parse(unterminated, sizeof(unterminated) - 1);
	ck_assert_uint_eq(af->n, 0);
	ck_assert_int_eq(af->broken_line, 1);
	auth_file_free(af);
	af = auth_file_parse("", 0);
	ck_assert_uint_eq(af->n, 0);
	auth_file_free(af);

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, 8), 8);
	close(fd);
	af = auth_file_load(path, &err);
	ck_assert_ptr_nonnull(af);
	ck_assert_str_eq(auth_file_find(af, "a"), "1");
	auth_file_free(af);
	unlink(path);
	ck_assert_ptr_null(auth_file_load(path, &err));
	ck_assert_str_eq(err.sqlstate, "58P01");
}
END_TEST

/* ---- hba ---- */

struct warn_log {
	int lines[16];
	int n;
};

static void
warn_cb(void *arg, int line, const char *reason)
{
	struct warn_log *w = arg;

	(void)reason;
	if (w->n < 16)
		w->lines[w->n++] = line;
}

static struct hba_conn
conn(const char *db, const char *user, const char *ip, bool tls)
{
	struct hba_conn c;

	memset(&c, 0, sizeof(c));
	c.db = db;
	c.user = user;
	c.is_tls = tls;
	if (ip == NULL) {
		c.is_unix = true;
	} else if (inet_pton(AF_INET, ip, c.addr) == 1) {
		c.family = AF_INET;
	} else {
		ck_assert_int_eq(inet_pton(AF_INET6, ip, c.addr), 1);
		c.family = AF_INET6;
	}
	return c;
}

START_TEST(test_hba_match)
{
	const char text[] =
		"# TYPE DATABASE USER ADDRESS METHOD\n"
		"local   all        postgres                 peer map=pmap\n"
		"local   all        all                      trust\n"
		"hostssl app        alice   10.0.0.0/8       cert\n"
		"host    app,\"All\"  alice   10.0.0.0/8       scram-sha-256\n"
		"host    sameuser   all     192.168.1.0 255.255.255.0 md5\n"
		"hostnossl all      bob     all              password\n"
		"host    replication repl   127.0.0.1/32     md5\n"
		"host    all        mallory 0.0.0.0/0        reject\n"
		"host    all        all     ::1/128          scram-sha-256\n"
		"host    all        all     2001:db8::/32    plain\n";
	struct hba *h = hba_parse(text, NULL, NULL, NULL);
	struct hba_conn c;
	const char *map;

	ck_assert_ptr_nonnull(h);
	ck_assert_uint_eq(hba_rule_count(h), 10);
	c = conn("x", "postgres", NULL, false);
	ck_assert_int_eq(hba_match(h, &c, &map), HBA_PEER);
	ck_assert_str_eq(map, "pmap");
	c = conn("x", "other", NULL, false);
	ck_assert_int_eq(hba_match(h, &c, &map), HBA_TRUST);
	ck_assert_ptr_null(map);
	c = conn("app", "alice", "10.1.2.3", true);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_CERT);
	c = conn("app", "alice", "10.1.2.3", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_SCRAM);
	c = conn("All", "alice", "10.1.2.3", false);	/* quoted: a name, not the keyword */
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_SCRAM);
	c = conn("other", "alice", "10.1.2.3", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	c = conn("app", "alice", "11.1.2.3", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	c = conn("carol", "carol", "192.168.1.77", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_MD5);
	c = conn("db", "carol", "192.168.1.77", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	c = conn("db", "bob", "8.8.8.8", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_PLAIN);
	c = conn("db", "bob", "8.8.8.8", true);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	c = conn("db", "mallory", "8.8.8.8", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_REJECT);
	c = conn("db", "u", "::1", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_SCRAM);
	c = conn("db", "u", "2001:db8:1::5", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_PLAIN);
	c = conn("db", "u", "2001:db9::5", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	/* physical replication only matches the "replication" keyword */
	c = conn("repl", "repl", "127.0.0.1", false);
	c.physical_replication = true;
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_MD5);
	c = conn("replication", "x", "127.0.0.1", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	hba_free(h);
	ck_assert_int_eq(hba_match(NULL, &c, NULL), HBA_NO_MATCH);
	ck_assert_str_eq(hba_method_str(HBA_SCRAM), "scram-sha-256");
	ck_assert_int_eq(auth_pick_exchange(HBA_MD5, "pencil"), AUTH_X_MD5);
	ck_assert_int_eq(auth_pick_exchange(HBA_MD5, PG_MD5_E), AUTH_X_MD5);
	ck_assert_int_eq(auth_pick_exchange(HBA_MD5, PG_SECRET_PENCIL), AUTH_X_SCRAM);
	ck_assert_int_eq(auth_pick_exchange(HBA_MD5, NULL), AUTH_X_MD5);
	ck_assert_int_eq(auth_pick_exchange(HBA_SCRAM, PG_MD5_E), AUTH_X_SCRAM);
	ck_assert_int_eq(auth_pick_exchange(HBA_PLAIN, PG_SECRET_PENCIL), AUTH_X_CLEARTEXT);
	ck_assert_int_eq(auth_pick_exchange(HBA_TRUST, NULL), AUTH_X_NONE);
	ck_assert_int_eq(auth_pick_exchange(HBA_NO_MATCH, "x"), AUTH_X_REJECT);
	ck_assert_int_eq(auth_pick_exchange(HBA_REJECT, "x"), AUTH_X_REJECT);
}
END_TEST

/*
 * Shapes pgbouncer's own hba tests use: blank lines made of tabs and spaces, comments after
 * a rule, lists with blanks around the commas, a doubled quote inside a quoted name, an
 * "all" address, a separate netmask, nested masks (first match wins), and gss lines (kept
 * as refusing rules, since this build has no GSSAPI).
 */
START_TEST(test_hba_pgbouncer_shapes)
{
	const char text[] =
		" \t \t\n\t# only a comment\n"
		"host  x1,all  ua , ub,uc  16.0.0.0/8  md5\n"
		"host  \"d\"\"q\"  \"u , v\"  19.0.0.0/8  cert\n"
		"host  m2  mu  128.0.0.0/9  trust  # after the rule\n"
		"host  m2  mu  128.0.0.0/1  cert\n"
		"host  n1  all  127.0.0.0  255.255.255.0  password\n"
		"host  any1  mu  all  scram-sha-256\n"
		"host  gdb  all  20.0.0.0/8  gss include_realm=0\n"
		"host  gdb  all  0.0.0.0/0  trust\n";
	struct warn_log w = { { 0 }, 0 };
	struct hba *h = hba_parse(text, NULL, warn_cb, &w);
	struct hba_conn c;

	ck_assert_uint_eq(hba_rule_count(h), 8);
	ck_assert_int_eq(w.n, 1);	/* the gss line's warning */
	ck_assert_int_eq(w.lines[0], 9);
	c = conn("db", "ub", "16.0.0.1", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_MD5);
	c = conn("db", "ud", "16.0.0.1", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	c = conn("d\"q", "u , v", "19.0.0.2", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_CERT);
	c = conn("m2", "mu", "128.1.1.1", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_TRUST);
	c = conn("m2", "mu", "254.1.1.1", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_CERT);
	c = conn("n1", "x", "127.0.0.3", true);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_PLAIN);
	c = conn("n1", "x", "127.0.1.3", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	c = conn("any1", "mu", "face::1", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_SCRAM);
	c = conn("gdb", "x", "20.1.1.1", false);	/* refused, not let through to trust */
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_REJECT);
	c = conn("gdb", "x", "22.1.1.1", false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_TRUST);
	hba_free(h);
}
END_TEST

START_TEST(test_hba_bad_lines_and_files)
{
	char dir[] = "/tmp/neki-hba-XXXXXX";
	char path[256], users[256];
	const char text[] =
		"host all all 10.0.0.0/33 md5\n"	/* 1 bad mask */
		"host all all example.com md5\n"	/* 2 host name */
		"host all +grp all md5\n"		/* 3 group */
		"host all all all ldap\n"		/* 4 method */
		"host all all all md5 foo=bar\n"	/* 5 option */
		"bogus all all all md5\n"		/* 6 type */
		"host all\n"				/* 7 truncated */
		"local @dbs.txt @users.txt md5\n"	/* 8 ok */
		"host all all 10.0.0.1 md5\n"		/* 9 missing mask */
		"host \"unterminated all all md5\n";	/* 10 quote */
	struct warn_log w = { { 0 }, 0 };
	struct nk_error err;
	struct hba *h;
	struct hba_conn c;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(users, sizeof(users), "%s/users.txt", dir);
	f = fopen(users, "w");
	fputs("# the team\nann, ben\ncid\n", f);
	fclose(f);
	snprintf(users, sizeof(users), "%s/dbs.txt", dir);
	f = fopen(users, "w");
	fputs("appdb\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/hba.conf", dir);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);

	h = hba_load(path, warn_cb, &w, &err);
	ck_assert_ptr_nonnull(h);
	ck_assert_uint_eq(hba_rule_count(h), 2);	/* line 4 (ldap) stays, refusing */
	ck_assert_int_eq(w.n, 9);
	ck_assert_int_eq(w.lines[0], 1);
	ck_assert_int_eq(w.lines[3], 4);
	ck_assert_int_eq(w.lines[6], 7);
	ck_assert_int_eq(w.lines[7], 9);
	c = conn("appdb", "ben", "10.9.9.9", false);	/* ldap line matches: refused */
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_REJECT);
	c = conn("appdb", "ben", NULL, false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_MD5);
	c = conn("appdb", "cid", NULL, false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_MD5);
	c = conn("appdb", "dan", NULL, false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	c = conn("other", "ben", NULL, false);
	ck_assert_int_eq(hba_match(h, &c, NULL), HBA_NO_MATCH);
	hba_free(h);

	unlink(path);
	unlink(users);
	snprintf(users, sizeof(users), "%s/users.txt", dir);
	unlink(users);
	rmdir(dir);
	ck_assert_ptr_null(hba_load(path, NULL, NULL, &err));
}
END_TEST

START_TEST(test_ident_map)
{
	const char text[] =
		"# MAPNAME SYSUSER DBUSER\n"
		"certmap  alice.example.com  alice\n"
		"certmap  \"Bob Smith\"  bob   # comment\n"
		"\n"
		"peermap  root  postgres\n"
		"allmap  svc  all\n"
		"quoted  svc  \"all\"\n"
		"bad only-two\n"
		"regex /^(.*)$ \\1\n"
		"x y z extra\n";
	struct warn_log w = { { 0 }, 0 };
	struct ident_map *m = ident_map_parse(text, warn_cb, &w);

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(w.n, 3);
	ck_assert_int_eq(w.lines[0], 8);
	ck_assert_int_eq(w.lines[1], 9);
	ck_assert_int_eq(w.lines[2], 10);
	/* the keyword all maps to every user; quoted it is a user named "all" */
	ck_assert(ident_map_allows(m, "allmap", "svc", "anyone"));
	ck_assert(!ident_map_allows(m, "allmap", "other", "anyone"));
	ck_assert(!ident_map_allows(m, "quoted", "svc", "anyone"));
	ck_assert(ident_map_allows(m, "quoted", "svc", "all"));
	ck_assert(ident_map_allows(m, "certmap", "alice.example.com", "alice"));
	ck_assert(ident_map_allows(m, "certmap", "Bob Smith", "bob"));
	ck_assert(ident_map_allows(m, "peermap", "root", "postgres"));
	ck_assert(!ident_map_allows(m, "peermap", "root", "alice"));
	ck_assert(!ident_map_allows(m, "certmap", "root", "postgres"));
	ck_assert(!ident_map_allows(m, "nomap", "alice.example.com", "alice"));
	ck_assert(!ident_map_allows(NULL, "certmap", "alice.example.com", "alice"));
	ident_map_free(m);
}
END_TEST

Suite *
auth_suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("md5");

	tcase_add_test(tc, test_md5_vectors);
	tcase_add_test(tc, test_plain_verify);
	tcase_add_test(tc, test_auth_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("scram");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_scram_secret_roundtrip);
	tcase_add_test(tc, test_saslprep);
	tcase_add_test(tc, test_scram_postgres_nonascii);
	tcase_add_test(tc, test_scram_server_rfc7677);
	tcase_add_test(tc, test_scram_client_rfc7677);
	tcase_add_test(tc, test_scram_roundtrip_and_passthrough);
	tcase_add_test(tc, test_scram_wrong_password_and_mock);
	tcase_add_test(tc, test_scram_empty_password_refused);
	tcase_add_test(tc, test_scram_iterations);
	tcase_add_test(tc, test_scram_server_malformed);
	tcase_add_test(tc, test_scram_mock_salt_stable);
	tcase_add_test(tc, test_login_password_methods);
	tcase_add_test(tc, test_login_scram);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_test(tc, test_auth_file_parse);
	tcase_add_test(tc, test_auth_file_broken);
	tcase_add_test(tc, test_hba_match);
	tcase_add_test(tc, test_hba_pgbouncer_shapes);
	tcase_add_test(tc, test_hba_bad_lines_and_files);
	tcase_add_test(tc, test_ident_map);
	suite_add_tcase(s, tc);
	return s;
}
