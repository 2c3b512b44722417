/*
 * fuzz_auth.c - client authentication (src/proto/scram.c, md5.c, hba.c, auth_file.c,
 * ident.c, saslprep.c). The first input byte picks the part:
 *   0  the SCRAM server: client-first, NUL, client-final (against a one-iteration secret);
 *   1  the SCRAM client: server-first, NUL, server-final (few iterations only);
 *   2  md5: a PasswordMessage answer checked against a secret, and the exchange chosen;
 *   3  text files: hba rules matched against connections read from the input, the
 *      userlist.txt (every user it lists is found with its secret), an ident map, a
 *      stored SCRAM secret (formatted back and parsed again) and SASLprep.
 */
#include "fuzz.h"

#include "neki/auth.h"
#include "neki/scram.h"

#include <sys/socket.h>

/* "pencil", one iteration: keeps the server side fast */
static const char scram_secret[] = "SCRAM-SHA-256$1:c2FsdA==$"
	"Otk5kdnAo/6UDUcm0KaO+uESed84FVLF7Qg4N9v1MRA=:"
	"Uc4DDcQRN5WJ44eNiyKPEO+MJvVo84Ucr4WI9nixz60=";

static void
scram_server_side(const uint8_t *d, size_t n)
{
	struct nk_error err;
	struct scram_server s;
	const uint8_t *first;
	size_t n1 = fz_part(&d, &n, &first);

	scram_server_init(&s, "u", scram_secret, SCRAM_DEFAULT_ITERATIONS);
	if (scram_server_client_first(&s, first, n1, &err)) {
		FZ_CHECK(scram_server_first_msg(&s) != NULL);
		if (scram_server_client_final(&s, d, n, &err))
			FZ_CHECK(scram_server_final_msg(&s) != NULL);
	}
	scram_server_cleanup(&s);
}

static void
scram_client_side(const uint8_t *d, size_t n)
{
	struct nk_error err;
	struct scram_client c;
	const uint8_t *first;
	size_t n1 = fz_part(&d, &n, &first);

	if (!fz_cheap_iterations(first, n1))
		return;
	if (scram_client_init_password(&c, "pencil", "", "fixednonce")) {
		FZ_CHECK(scram_client_first_msg(&c) != NULL);
		if (scram_client_server_first(&c, first, n1, &err))
			fz_ignore(scram_client_server_final(&c, d, n, &err));
	}
	scram_client_cleanup(&c);
}

static void
md5_side(const uint8_t *d, size_t n)
{
	static const uint8_t salt[4] = { 1, 2, 3, 4 };
	char *t = fz_strndup(d, n);
	char secret[AUTH_MD5_LEN + 1], resp[AUTH_MD5_LEN + 1];
	struct scram_secret sec;

	auth_md5_secret("u", "pencil", secret);
	(void)auth_md5_verify(secret, "u", salt, t);
	(void)auth_plain_verify(secret, "u", t);
	if (!scram_secret_parse(t, &sec) || sec.iterations <= 64)	/* PBKDF2 runs them */
		(void)auth_plain_verify(t, "u", "pencil");
	(void)auth_pick_exchange((enum hba_method)(n % 8), t);
	(void)auth_secret_kind(t);
	if (auth_md5_response(t, "u", salt, resp))
		(void)auth_md5_verify(t, "u", salt, resp);
	free(t);
}

/* A connection to match from the input's last bytes. */
static void
conn_from(const uint8_t *d, size_t n, struct hba_conn *c)
{
	uint8_t b = n ? d[n - 1] : 0;

	memset(c, 0, sizeof(*c));
	c->db = b & 1 ? "app" : "replication";
	c->user = b & 2 ? "u" : "admin";
	c->is_unix = b & 4;
	c->is_tls = b & 8;
	c->physical_replication = b & 16;
	c->family = b & 32 ? AF_INET6 : AF_INET;
	for (size_t i = 0; i < 16 && i + 1 < n; i++)
		c->addr[i] = d[n - 2 - i];
}

static void
warn_cb(void *arg, int line, const char *reason)
{
	(void)arg;
	(void)line;
	FZ_CHECK(reason != NULL);
}

/* Each user a parsed userlist.txt holds is found, with its secret. */
static void
auth_file_side(const char *t, size_t n)
{
	struct auth_file *af = auth_file_parse(t, n);

	FZ_CHECK(af != NULL);
	for (size_t i = 0; i < af->n; i++)
		FZ_CHECK(auth_file_find(af, af->entries[i].user) == af->entries[i].secret);
	auth_file_free(af);
}

static void
text_side(const uint8_t *d, size_t n)
{
	char *t = fz_strndup(d, n), *prep, buf[256];
	struct hba *h = hba_parse(t, "/nonexistent", warn_cb, NULL);
	struct ident_map *im = ident_map_parse(t, warn_cb, NULL);
	struct scram_secret sec, again;
	struct hba_conn c;
	const char *map;

	FZ_CHECK(h != NULL && im != NULL);
	conn_from(d, n, &c);
	(void)hba_method_str(hba_match(h, &c, &map));
	hba_free(h);
	(void)ident_map_allows(im, "m", "u", "admin");
	ident_map_free(im);
	auth_file_side(t, strlen(t));
	if (scram_secret_parse(t, &sec) && scram_secret_format(&sec, buf, sizeof(buf))) {
		FZ_CHECK(scram_secret_parse(buf, &again));
		FZ_CHECK(sec.iterations == again.iterations && sec.salt_len == again.salt_len);
		FZ_CHECK(memcmp(sec.salt, again.salt, sec.salt_len) == 0);
		FZ_CHECK(memcmp(sec.stored_key, again.stored_key, SCRAM_KEY_LEN) == 0);
		FZ_CHECK(memcmp(sec.server_key, again.server_key, SCRAM_KEY_LEN) == 0);
	}
	if (scram_saslprep(t, &prep) == SCRAM_SASLPREP_OK)
		free(prep);
	free(t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0:
		scram_server_side(data + 1, size - 1);
		break;
	case 1:
		scram_client_side(data + 1, size - 1);
		break;
	case 2:
		md5_side(data + 1, size - 1);
		break;
	default:
		text_side(data + 1, size - 1);
		break;
	}
	return 0;
}
