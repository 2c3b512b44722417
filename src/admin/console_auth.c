/*
 * console_auth.c - password authentication of console users, with pgbouncer's rules:
 * the method comes from auth_type (or the first matching auth_hba_file rule when auth_type is
 * hba), the secret from auth_file; md5 switches to SCRAM for a SCRAM secret; an unknown user
 * runs the same exchange and fails, so user names cannot be probed; trust lets in only the
 * users auth_file lists (pgbouncer's rule). any never gets here (console.c), neither does the
 * local "pgbouncer" user.
 *
 * Steps: con_auth_start() writes the request (cleartext, md5 salt or SASL mechanisms);
 * con_auth_step() takes each client answer and says OK, CONTINUE (more to send) or FAIL.
 */
#include "neki/base.h"

#include "admin_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "neki/auth.h"
#include "neki/config.h"
#include "neki/log.h"
#include "neki/proto.h"

enum con_auth_step {
	CON_AUTH_STEP_NONE = 0,
	CON_AUTH_STEP_PASSWORD = 1,	/* cleartext or md5 requested */
	CON_AUTH_STEP_SASL_INIT = 2,	/* SASL mechanisms sent */
	CON_AUTH_STEP_SASL_CONT = 3,	/* server-first sent */
};

/* The secret of <user> in auth_file (malloc'd), or NULL. */
static char *
file_secret(const char *user)
{
	const struct cfg *c = cfg_current();
	struct nk_error err;
	struct auth_file *af;
	const char *s;
	char *out = NULL;

	if (c->auth.auth_file == NULL || c->auth.auth_file[0] == '\0')
		return NULL;
	af = auth_file_load(c->auth.auth_file, &err);
	if (af == NULL) {
		log_warn("could not load auth_file: %s", err.message);
		return NULL;
	}
	if ((s = auth_file_find(af, user)) != NULL)
		out = strdup(s);
	auth_file_free(af);
	return out;
}

static void
hba_warn(void *arg, int line, const char *reason)
{
	log_warn("auth_hba_file line %d ignored: %s", line, reason);
}

/* The hba method for this connection (HBA_NO_MATCH when the file cannot be read). */
static enum hba_method
hba_method(const char *user, const char *db, int fd, bool is_unix)
{
	const struct cfg *c = cfg_current();
	struct hba_conn hc = { .db = db, .user = user, .is_unix = is_unix };
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct nk_error err;
	struct hba *h = hba_load(c->auth.auth_hba_file, hba_warn, NULL, &err);
	enum hba_method m;

	if (h == NULL) {
		log_warn("could not load auth_hba_file: %s", err.message);
		return HBA_NO_MATCH;
	}
	if (!is_unix && getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
		hc.family = ss.ss_family;
		if (ss.ss_family == AF_INET)
			memcpy(hc.addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
		else if (ss.ss_family == AF_INET6)
			memcpy(hc.addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
	}
	m = hba_match(h, &hc, NULL);
	hba_free(h);
	return m;
}

/* auth_type as an hba method (for auth_pick_exchange). */
static enum hba_method
type_method(enum cfg_auth_type t)
{
	switch (t) {
	case CFG_AUTH_PLAIN: return HBA_PLAIN;
	case CFG_AUTH_MD5: return HBA_MD5;
	case CFG_AUTH_SCRAM: return HBA_SCRAM;
	case CFG_AUTH_CERT: return HBA_CERT;
	case CFG_AUTH_PEER: return HBA_PEER;
	case CFG_AUTH_ANY:
	case CFG_AUTH_TRUST:
		return HBA_TRUST;
	case CFG_AUTH_HBA:
	case CFG_AUTH_REJECT:
		break;
	}
	return HBA_REJECT;
}

enum con_auth_result
con_auth_start(struct con_auth *a, const char *user, const char *db, int fd, bool is_unix,
	       struct pktbuf *out, struct nk_error *err)
{
	const struct cfg *c = cfg_current();
	enum hba_method m = c->auth.auth_type == CFG_AUTH_HBA ? hba_method(user, db, fd, is_unix) :
			    type_method(c->auth.auth_type);
	static const char *const mechs[] = { SCRAM_MECHANISM };

	memset(a, 0, sizeof(*a));
	snprintf(a->user, sizeof(a->user), "%s", user);
	a->secret = file_secret(user);
	if (a->secret == NULL)
		log_info("no such user: %s", user);
	a->exchange = auth_pick_exchange(m, a->secret);
	switch (a->exchange) {
	case AUTH_X_NONE:
		if (a->secret != NULL)
			return CON_AUTH_OK;
		auth_error_trust_failed(err);
		return CON_AUTH_FAIL;
	case AUTH_X_CLEARTEXT:
		pktbuf_write_auth_cleartext(out);
		a->step = CON_AUTH_STEP_PASSWORD;
		return CON_AUTH_CONTINUE;
	case AUTH_X_MD5:
		if (!scram_random_bytes(a->salt, sizeof(a->salt)))
			break;
		pktbuf_write_auth_md5(out, a->salt);
		a->step = CON_AUTH_STEP_PASSWORD;
		return CON_AUTH_CONTINUE;
	case AUTH_X_SCRAM:
		pktbuf_write_auth_sasl(out, mechs, 1);
		a->step = CON_AUTH_STEP_SASL_INIT;
		return CON_AUTH_CONTINUE;
	case AUTH_X_CERT:
	case AUTH_X_PEER:
	case AUTH_X_REJECT:
		break;
	}
	nk_error_set(err, ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION, "login rejected");
	err->severity = NK_SEV_FATAL;
	return CON_AUTH_FAIL;
}

/* PasswordMessage (cleartext or md5). */
static enum con_auth_result
on_password(struct con_auth *a, const uint8_t *body, size_t len, struct nk_error *err)
{
	const char *pw;
	bool ok;

	if (!proto_parse_password(body, len, &pw, err))
		return CON_AUTH_FAIL;
	if (a->secret == NULL || a->secret[0] == '\0' || pw[0] == '\0')
		ok = false;
	else if (a->exchange == AUTH_X_MD5)
		ok = auth_md5_verify(a->secret, a->user, a->salt, pw);
	else
		ok = auth_plain_verify(a->secret, a->user, pw);
	if (ok)
		return CON_AUTH_OK;
	auth_error_password_failed(err, a->user);
	return CON_AUTH_FAIL;
}

/* SASLInitialResponse: start the SCRAM exchange, send server-first. */
static enum con_auth_result
on_sasl_initial(struct con_auth *a, const uint8_t *body, size_t len, struct pktbuf *out,
		struct nk_error *err)
{
	struct proto_sasl_initial_msg m;
	const char *first;

	if (!proto_parse_sasl_initial(body, len, &m, err))
		return CON_AUTH_FAIL;
	if (strcmp(m.mechanism, SCRAM_MECHANISM) != 0) {
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			     "client selected an invalid SASL authentication mechanism");
		return CON_AUTH_FAIL;
	}
	scram_server_init(&a->scram, a->user, a->secret, cfg_current()->pool.scram_iterations);
	a->scram_active = true;
	if (m.data == NULL) {
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			     "malformed SCRAM message (empty message)");
		return CON_AUTH_FAIL;
	}
	if (!scram_server_client_first(&a->scram, m.data, m.len, err))
		return CON_AUTH_FAIL;
	first = scram_server_first_msg(&a->scram);
	pktbuf_write_auth_sasl_continue(out, first, strlen(first));
	a->step = CON_AUTH_STEP_SASL_CONT;
	return CON_AUTH_CONTINUE;
}

enum con_auth_result
con_auth_step(struct con_auth *a, char type, const uint8_t *body, size_t len,
	      struct pktbuf *out, struct nk_error *err)
{
	enum con_auth_result r = CON_AUTH_FAIL;
	const char *final;

	if (type != 'p') {
		nk_error_set(err, ERRCODE_PROTOCOL_VIOLATION,
			     "expected password response, got message type %d", type);
	} else if (a->step == CON_AUTH_STEP_PASSWORD) {
		r = on_password(a, body, len, err);
	} else if (a->step == CON_AUTH_STEP_SASL_INIT) {
		r = on_sasl_initial(a, body, len, out, err);
	} else if (a->step == CON_AUTH_STEP_SASL_CONT) {
		if (scram_server_client_final(&a->scram, body, len, err)) {
			final = scram_server_final_msg(&a->scram);
			pktbuf_write_auth_sasl_final(out, final, strlen(final));
			r = CON_AUTH_OK;
		} else if (strcmp(err->sqlstate, ERRCODE_INVALID_PASSWORD) == 0) {
			/* wrong password or unknown user: pgbouncer's text for any SCRAM failure */
			nk_error_set(err, ERRCODE_INVALID_PASSWORD, "SASL authentication failed");
		}
	}
	if (r == CON_AUTH_FAIL)
		err->severity = NK_SEV_FATAL;
	return r;
}

void
con_auth_cleanup(struct con_auth *a)
{
	if (a->scram_active)
		scram_server_cleanup(&a->scram);
	a->scram_active = false;
	free(a->secret);
	a->secret = NULL;
}
